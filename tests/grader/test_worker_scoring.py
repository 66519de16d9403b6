# hw4p1: instructor-only
"""Tests of the scoring: the language model's score curve, the worker's records decoded without
trusting them, the hidden tests' shares of each category's points, the judge's checks (no assert,
shapes before arithmetic, values not only dtypes), the scores line and the feedback's wording.

    .venv/bin/python -m pytest -q tests/grader/test_worker_scoring.py
"""
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import numpy as np

from autograder.sandboxed import wire
from autograder.judging import grading_run
from autograder.judging.intake import static_inspection
from autograder.judging.isolation import processes, sandbox, sandbox_modes
from autograder.judging.scoring import rubric
from tests.grader.autograder_helpers import REPO_ROOT
from tests.grader.attack_handins import ZERO_LINEAR_NN


def test_lm_score_curve():
    points = rubric.LM_POINTS
    assert rubric.lm_score(1.0) == rubric.lm_score(rubric.FULL_MARKS_PPL) == points
    assert rubric.lm_score(rubric.ZERO_MARKS_PPL) == rubric.lm_score(100.0) == 0
    middle = (rubric.FULL_MARKS_PPL + rubric.ZERO_MARKS_PPL) / 2
    assert rubric.lm_score(middle) == pytest.approx(points / 2, abs=0.01)
    grid = [rubric.FULL_MARKS_PPL + k * 0.01 for k in range(120)]
    scores = [rubric.lm_score(p) for p in grid]
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    for bad in (math.nan, math.inf, -math.inf, "1.0", None, True):
        assert rubric.lm_score(bad) == 0, bad
    assert rubric.lm_score(3.0, full_marks_ppl=2.0, zero_marks_ppl=4.0) == pytest.approx(points / 2)
    with pytest.raises(ValueError):
        rubric.lm_score(3.0, full_marks_ppl=4.0, zero_marks_ppl=4.0)


def test_worker_records_are_decoded_without_trusting_them():
    good = {"r1": np.arange(6.0).reshape(2, 3), "r2": np.array([True, False]), "r3": None}
    stream = wire.encode_record("t", None, good)
    records, note = wire.decode_records(stream, {"t": ["r1", "r2", "r3"]})
    assert note == "" and records["t"].error is None and not records["t"].problems
    assert np.array_equal(records["t"].values["r1"], good["r1"]) and records["t"].values["r3"] is None
    # strings and pickled objects are refused, never unpickled; the first record of a test counts
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)
    forged = bytearray(wire.encode_record("t", None, {"r1": np.array(["text"])}))
    header = json.dumps({"test": "u", "error": None, "sizes": {"r1": len(pickled.getvalue())},
                         "none": []}).encode()
    forged += len(header).to_bytes(8, "little") + header + pickled.getvalue()
    records, note = wire.decode_records(bytes(forged) + stream, {"t": ["r1"], "u": ["r1"]})
    assert "r1" not in records["t"].values and records["t"].problems["r1"] == wire.NOT_AN_ARRAY
    assert "r1" not in records["u"].values and "not a plain .npy" in records["u"].problems["r1"]
    # garbage, huge headers and truncated arrays end the decoding with a note
    for junk in (b"\xff" * 100, (2**40).to_bytes(8, "little"), stream[:-5]):
        records, note = wire.decode_records(junk, {"t": ["r1"]})
        assert "unreadable" in note and "t" not in records, (junk[:20], note)


def test_any_malformed_worker_output_is_unreadable_and_costs_only_its_tests():
    good = wire.encode_record("t", None, {"r1": np.zeros(2)})

    def record(header: str) -> bytes:
        return len(header.encode()).to_bytes(8, "little") + header.encode()

    nested = "[" * 32_000 + "]" * 32_000
    junk = {"nested 32,000 deep": record(nested),
            "nested in a field": record('{"test": "u", "error": ' + nested[:60_000] + "}"),
            "NaN size": record('{"test": "u", "error": null, "sizes": {"r1": NaN}, "none": []}'),
            "huge number": record('{"test": "u", "sizes": {"r1": ' + "9" * 5000 + "}}"),
            "a list": record("[1, 2]"),
            "unhashable test": record('{"test": [], "error": null, "sizes": {}, "none": []}'),
            "unhashable none": record('{"test": "u", "error": null, "sizes": {}, "none": [[]]}'),
            "long size text": record('{"test": "u", "error": null, "sizes": {"r1": "'
                                     + "x" * 60_000 + '"}, "none": []}')}
    for name, bad in junk.items():
        records, note = wire.decode_records(good + bad + good, {"t": ["r1"], "u": ["r1"]})
        assert note.startswith(f"{wire.UNREADABLE} after 1 results"), (name, note[:300])
        assert len(note) < 300 and list(records) == ["t"], (name, note[:300])


def judge_in_process(nn, tests, folder: Path, seed: int, failures: list | None = None) -> list:
    """Each hidden test of ``tests`` replayed by the worker's own code on ``nn`` (a namespace of
    mytorch.nn classes) in this process, then judged: the checks without the sandbox's cost.
    ``failures``, when given, receives each test's Failure (None when it passed)."""
    from autograder.sandboxed import worker
    from autograder.judging.scoring import judge, verdicts

    results = []
    programs, checks = judge.build_programs(tests, seed)
    for test in tests:
        program = programs[test.name]
        program.save(folder / test.name)
        stream = worker.run_test(nn, folder / test.name, test.name)
        records, note = wire.decode_records(stream, {test.name: program.returned})
        result, failure = verdicts.judge_test(test, records.get(test.name), checks[test.name],
                                              note, program.steps, frozenset())
        results.append(result)
        if failures is not None:
            failures.append(failure)
    return results


def stub_namespace(code: str):
    """A mytorch.nn stand-in: the module ``code`` defines."""
    import types

    module = types.ModuleType("stub_nn")
    exec(code, module.__dict__)  # noqa: S102 - test-defined stubs
    return module


# MultiHeadAttention.backward returning (N, 1) and (1, N) arrays: adding them broadcasts to N x N.
BROADCAST_MHA_NN = """
import numpy as np
from mytorch.nn import MultiHeadAttention as Reference
class MultiHeadAttention(Reference):
    def backward(self, d_output):
        return np.zeros((N, 1)), np.zeros((1, N)), np.zeros((N, 1))
"""


def test_no_check_that_decides_points_is_an_assert():
    """python -O strips asserts: the judge, the hidden tests and the truths they share with the
    students' tests hold none (so a zero stub cannot pass a check that vanished)."""
    import ast

    def asserts_in(node) -> list[int]:
        return [n.lineno for n in ast.walk(node) if isinstance(n, ast.Assert)]

    for path in [REPO_ROOT / "autograder/judging/scoring/judge.py",
                 REPO_ROOT / "autograder/judging/scoring/verdicts.py",
                 REPO_ROOT / "autograder/sandboxed/wire.py",
                 REPO_ROOT / "hw4lib/numeric_truths.py",
                 *sorted((REPO_ROOT / "autograder/judging/scoring/hidden_tests").glob("*.py"))]:
        found = asserts_in(ast.parse(path.read_text()))
        assert not found, f"{path.name} has assert statements at lines {found}"


def test_hidden_tests_share_out_exactly_each_category_s_points():
    """The shares in the hidden tests' decorators add up to the points hw4lib/grading_numbers.py
    gives each mytorch category, and tag no other category."""
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import HIDDEN_TESTS

    shares: dict[str, list[float]] = {}
    for test in HIDDEN_TESTS:
        shares.setdefault(test.category, []).append(test.points)
    assert set(shares) == set(rubric.MYTORCH_RUBRIC), (
        f"the hidden tests grade {sorted(shares)}, the rubric {sorted(rubric.MYTORCH_RUBRIC)}")
    for category, points in rubric.MYTORCH_RUBRIC.items():
        assert math.isclose(sum(shares[category]), points), (
            f"the hidden tests of {category} share out {sum(shares[category])} points "
            f"({shares[category]}), but the category is worth {points}")


@pytest.mark.slow
@pytest.mark.long
def test_zero_stub_earns_nothing_even_under_python_O(tmp_path):
    """Checks that decide points are explicit (python -O strips asserts); the float32 Linear test
    checks values, not only dtypes; the judge refuses to run under -O at all."""
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    float32_test = [t for t in tests_of("Linear") if t.name == "linear_float32_stays_float32"]
    (tmp_path / "f32").mkdir()
    result, = judge_in_process(stub_namespace(ZERO_LINEAR_NN), float32_test, tmp_path / "f32", 0)
    assert result.points == 0 and "float32 Z" in result.message, result
    code = ("import sys, tempfile\n"
            "from pathlib import Path\n"
            "from autograder.judging.scoring.hidden_tests.mytorch_hidden import HIDDEN_TESTS\n"
            "from tests.grader.autograder_helpers import ZEROS_NN\n"
            "from tests.grader.test_worker_scoring import judge_in_process, stub_namespace\n"
            "results = judge_in_process(stub_namespace(ZEROS_NN), HIDDEN_TESTS,\n"
            "                           Path(tempfile.mkdtemp(dir=sys.argv[1])), 0)\n"
            "print(sys.flags.optimize, f'{sum(r.points for r in results):g}')\n")
    process = subprocess.run([sys.executable, "-O", "-c", code, str(tmp_path)], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.split()[-2:] == ["1", "0"], process.stdout[-2000:]
    refused = subprocess.run([sys.executable, "-O", "-m", "autograder.judging.grade",
                              str(tmp_path / "handin.tar"), "--work", str(tmp_path / "work")],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    lines = refused.stdout.splitlines()
    assert "refuses to run under python -O" in refused.stdout, refused.stdout[-2000:]
    assert json.loads(lines[-1]) == {"scores": rubric.zero_scores()}
    assert not (tmp_path / "work").exists(), "nothing is graded under -O"


def test_shapes_are_checked_before_arithmetic_on_returned_arrays(tmp_path):
    """(N, 1) and (1, N) gradients are refused by shape before the judge adds them (which would
    allocate N x N floats)."""
    import tracemalloc

    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    test = [t for t in tests_of("MultiHeadAttention")
            if t.name == "mha_self_attention_with_one_array_for_query_key_value"]
    for n in (10, 4000):  # the first run warms up lazy imports; N x N float64 at 4000: 128 MB
        nn = stub_namespace(BROADCAST_MHA_NN.replace("(N, 1)", f"({n}, 1)")
                            .replace("(1, N)", f"(1, {n})"))
        (tmp_path / str(n)).mkdir()
        tracemalloc.start()
        try:
            result, = judge_in_process(nn, test, tmp_path / str(n), 0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.points == 0 and "expected shape" in result.message, result
    assert peak < 16 * 2**20, f"the judge allocated {peak / 2**20:.0f} MiB for 32 KB arrays"


# MultiHeadAttention.__init__ without the given check_heads: E // H floors, uneven heads pass
# (the reference's own helpers kept).
ACCEPTS_UNEVEN_HEADS_NN = """
from mytorch.nn import MultiHeadAttention as Reference
class MultiHeadAttention(Reference):
    def __init__(self, embed_dim, num_heads):
        super().__init__(embed_dim // num_heads * num_heads, num_heads)
"""
# Refusals of other classes: an assert (AssertionError), and a subclass of ValueError.
ASSERTS_EVEN_HEADS_NN = """
from mytorch.nn import MultiHeadAttention as Reference
class MultiHeadAttention(Reference):
    def __init__(self, embed_dim, num_heads):
        assert embed_dim % num_heads == 0
        super().__init__(embed_dim, num_heads)
"""
REFUSES_WITH_A_SUBCLASS_NN = """
from mytorch.nn import MultiHeadAttention as Reference
class HeadsError(ValueError):
    pass
class MultiHeadAttention(Reference):
    def __init__(self, embed_dim, num_heads):
        if embed_dim % num_heads:
            raise HeadsError(f"{embed_dim} does not split into {num_heads} heads")
        super().__init__(embed_dim, num_heads)
"""
# The helpers unwritten (a stub raises), the given check_heads kept: no point for given code.
UNWRITTEN_HELPERS_NN = """
from mytorch.nn import MultiHeadAttention as Reference
class MultiHeadAttention(Reference):
    def _split_heads(self, x):
        raise NotImplementedError
"""


def test_heads_that_do_not_divide_embed_dim_must_be_refused_with_a_value_error(tmp_path):
    """The helpers' test with its refusal of uneven heads, replayed by the worker on the reference
    (refuses: full points), on an __init__ without the check (0 points, the case named, the hint
    mha-heads-divisible), on one that asserts (0 points: an AssertionError is not the ValueError
    asked for), on one raising a subclass of ValueError (full points), and on unwritten helpers
    with the given check kept (0 points: the refusal alone is given code)."""
    import mytorch.nn as reference
    from autograder.judging.scoring.hidden_tests.diagnosis import hints
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    test = [t for t in tests_of("MultiHeadAttention")
            if t.name == "mha_helpers"]
    cases = {"reference": reference, "accepts": stub_namespace(ACCEPTS_UNEVEN_HEADS_NN),
             "asserts": stub_namespace(ASSERTS_EVEN_HEADS_NN),
             "subclass": stub_namespace(REFUSES_WITH_A_SUBCLASS_NN),
             "unwritten": stub_namespace(UNWRITTEN_HELPERS_NN)}
    judged = {}
    for name, nn in cases.items():
        (tmp_path / name).mkdir()
        failures = []
        (result,) = judge_in_process(nn, test, tmp_path / name, 0, failures)
        judged[name] = (result, failures[0])
    for name in ("reference", "subclass"):
        result, failure = judged[name]
        assert result.points == result.max_points == 2 and failure is None, (name, result)
    result, failure = judged["accepts"]
    assert result.points == 0 and "MultiHeadAttention(10, 4) was built" in result.message, result
    assert "must raise ValueError" in result.message, result
    assert [hint.family for hint in hints("MultiHeadAttention", {test[0].name: failure}).values()] \
        == ["mha-heads-divisible"], failure
    result, failure = judged["asserts"]
    assert result.points == 0 and "AssertionError" in result.message, result
    assert hints("MultiHeadAttention", {test[0].name: failure}) == {}, "an assert is no refusal"
    result, failure = judged["unwritten"]
    assert result.points == 0 and failure is not None, result


def test_the_finite_difference_mask_hides_a_key_and_keeps_a_softmax_that_is_not_one_hot():
    """The small masks of the finite-difference test: every draw hides a key and keeps one in each
    row (a draw that hid nothing let a wrong masking score there) and keeps two in some row of
    each batch (a draw leaving one key per row made dQ and dK 0, and a backward without its scale
    scored there)."""
    from hw4lib.numeric_truths import finite_difference_mask

    rng = np.random.default_rng(0)
    for _ in range(500):
        mask = finite_difference_mask(rng, (2, 2, 3))
        assert mask.any(axis=-1).all() and (~mask).any(axis=-1).all(), mask
        assert ((~mask).sum(axis=-1) >= 2).any(axis=-1).all(), mask


@pytest.mark.catalogue_sweep
def test_fresh_inputs_give_the_same_score_every_time():
    """The judging pass of tools/hint_report.py: the reference, every catalogue mutant of a graded
    mytorch file and the negative set, each graded 3 times (the first at seed 0, then fresh
    inputs) in two processes. Each tree scores the same every time (the tolerances hold for any
    draw), the reference scores full marks with no hint, every mutant loses points, the hints of
    the first gradings name the mutants' families (90%), every grading names each negative case
    by its kind and place, and no feedback quotes a hidden input. Prints the report (make mutants
    runs it with -s)."""
    from tools import hint_report

    mutants = hint_report.graded_mutants()
    assert len(mutants) >= 10, "the catalogue's mytorch mutants are missing"
    problems = hint_report.run(mutants, hint_report.NEGATIVES)
    assert not problems, "\n".join(problems)


def test_scores_line_is_printed_even_when_the_last_process_scan_fails(tmp_path):
    """A failure in the judge's final sweep of leftover processes (a /proc scan meeting a process
    name that is not UTF-8, say) still ends the output with the summary and the scores line."""
    import contextlib

    from autograder.judging import grade

    def failing_scan():
        b"\xff\xfe".decode("utf-8")

    saved = processes.kill_descendants, processes.become_subreaper
    output = io.StringIO()
    try:
        processes.kill_descendants, processes.become_subreaper = failing_scan, lambda: None
        with contextlib.redirect_stdout(output):
            grade.main([str(tmp_path / "handin.tar"), "--work", str(tmp_path / "work")])
    finally:
        processes.kill_descendants, processes.become_subreaper = saved
    lines = output.getvalue().splitlines()
    assert "UnicodeDecodeError" in output.getvalue() and "Summary" in output.getvalue()
    assert json.loads(lines[-1]) == {"scores": rubric.zero_scores()}, lines[-5:]


def test_documented_timeouts_cover_the_judges_worst_case():
    """The platform timeouts the README asks for exceed every limit of the judge reached at once
    (rubric.worst_case_seconds), whose own allowance covers a probe of every sandbox mode and the
    static inspection's limit."""
    worst = rubric.worst_case_seconds()
    assert worst == (rubric.MODEL_TIMEOUT_S + len(rubric.MYTORCH_RUBRIC) * rubric.MYTORCH_TIMEOUT_S
                     + rubric.JUDGE_OVERHEAD_S)
    own_work_s = 60  # draining outputs, extraction, truths: seconds in practice
    probes_s = len(sandbox_modes.MODES) * sandbox.PROBE_TIMEOUT_S
    assert probes_s + static_inspection.INSPECTION_S + own_work_s <= rubric.JUDGE_OVERHEAD_S
    readme = (REPO_ROOT / "autograder/README.md").read_text()
    autolab = int(re.search(r"autograding timeout to at\s+least (\d+) s", readme).group(1))
    assert autolab >= worst, f"README asks Autolab for {autolab} s, the worst case is {worst} s"
    assert grading_run.GRADING_TIMEOUT_S >= worst
    minutes = int(re.search(r"\*\*Autograder timeout\*\*: (\d+) minutes", readme).group(1))
    assert minutes * 60 > grading_run.GRADING_TIMEOUT_S, "Gradescope must outlast the adapter"


def test_feedback_is_worded_by_the_judge_and_quotes_nothing_the_worker_sent():
    from autograder.judging.scoring import verdicts
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    program = wire.Program()
    layer = program.new("Linear", 3, 2)
    program.call(layer, "forward", np.zeros((1, 3)))
    files = frozenset({"nn/linear.py", "__init__.py"})
    secret = "HIDDEN_TRANSCRIPT_LEAK"
    forged = {"kind": "raised", "step": 1, "type": secret, "file": f"../{secret}.py", "line": 7,
              "module": secret, "extra": secret * 100}
    stream = wire.encode_record("t", forged, {}, refused=[])
    records, note = wire.decode_records(stream, {"t": []})
    assert "extra" not in records["t"].error, "fields the protocol does not name are dropped"
    message = verdicts.describe_failure(records["t"].error, program.steps, files)
    assert message == "Linear.forward raised an exception of its own class", message
    honest = {"kind": "raised", "step": 1, "type": "NotImplementedError", "file": "nn/linear.py",
              "line": 12}
    assert verdicts.describe_failure(honest, program.steps, files) == (
        "not written yet: Linear.forward raised NotImplementedError (at mytorch/nn/linear.py:12)")
    numpy_only = {"kind": "numpy only", "step": -1, "module": secret}
    assert secret not in verdicts.describe_failure(numpy_only, program.steps, files)
    assert verdicts.describe_failure({"kind": "numpy only", "module": "torch"}, [], files) == (
        "mytorch must be written with numpy only: it imports torch")
    # a failed check names shapes and error sizes, never the values: here values that spell a
    # secret as character codes come back where floats were expected
    test = tests_of("Linear")[1]
    check_program = wire.Program()
    check = test.build(check_program, np.random.default_rng(0))
    codes = np.array([float(ord(c)) for c in secret])
    values = {name: codes for name in check_program.returned}
    result, _ = verdicts.judge_test(test, wire.Record(None, values, {}), check, "",
                                 check_program.steps, files)
    assert result.points == 0 and "shape" in result.message
    assert not any(str(int(code)) in result.message for code in codes[:3]), result.message
