# hw4p1: instructor-only
"""Shared weights by what training learned (``autograder.judging.scoring.weights_fingerprint``): a
classmate's weights with one value moved by an ulp, rescaled, or with a little noise are flagged in
the regrade's ``flags``; independent trainings are not.

    .venv/bin/python -m pytest -q tests/grader/test_weights_fingerprint.py

The fingerprints come from the model child's own function (``grade_model.evaluate_handin``); the
flags from ``grades_csv.with_flags`` on rows written to grades.csv and read back. Truths: the sketched
distance is checked against the same angle computed on the full tensors with numpy; the honest
and perturbed cases are built here, so which pairs must be flagged is known. The tolerance itself
comes from longer honest trainings (``tools/honest_weights.py``, checked by
``tests/grader/test_honest_weights.py`` under the class_fixture marker).
"""
import base64
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from autograder.judging.scoring import grade_model, weights_fingerprint as wf
from autograder.classroom import grades_csv, regrade
from autograder.judging.scoring.report import LanguageModelResult, ReportError
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import STATE_DICT_FILE
from hw4lib.model import DecoderOnlyTransformer
from tests.grader.autograder_helpers import TINY_MODEL
from tools.honest_weights import copies
from tests.grader.test_grade_model import make_hidden_set

VOCAB = H4Tokenizer(DEFAULT_TOKEN_MAP, "char").vocab_size


def trained(seed: int, data_seed: int, lr: float = 0.002, steps: int = 30) -> tuple[dict, dict]:
    """(state dict, initial state dict) of the tiny model built under ``seed`` (as the trainer
    builds it) after ``steps`` AdamW steps of next-token prediction on random tokens drawn with
    ``data_seed``."""
    torch.manual_seed(seed)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=VOCAB)
    initial = {key: value.clone() for key, value in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    data = torch.Generator().manual_seed(data_seed)
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (4, 12), generator=data)
        logits, _ = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {key: value.detach().clone() for key, value in model.state_dict().items()}, initial


def handin(folder: Path, state: dict, seed: int) -> Path:
    """config.yaml (the tiny model, ``seed``) and model_state_dict.pt in ``folder``."""
    folder.mkdir(parents=True)
    torch.save(state, folder / STATE_DICT_FILE)
    config = {"seed": seed, "tokenization": {"token_type": "char"}, "model": TINY_MODEL}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def exact_distance(first: dict, second: dict, first_initial: dict, second_initial: dict) -> float:
    """The fingerprint's distance computed on the full tensors (no sketch): the median over the
    tensors both changed of the sine of the angle between their parts orthogonal to both
    initialisations."""
    sines = []
    for key in first:
        a, b = (np.asarray(state[key], dtype=np.float64).ravel() for state in (first, second))
        starts = [np.asarray(start[key], dtype=np.float64).ravel()
                  for start in (first_initial, second_initial)]
        if any(wf.learned_fraction(torch.from_numpy(x), torch.from_numpy(s)) <= wf.UNTRAINED
               for x, s in ((a, starts[0]), (b, starts[1]))):
            continue
        basis = np.linalg.qr(np.stack(starts, axis=1))[0]
        u, v = a - basis @ (basis.T @ a), b - basis @ (basis.T @ b)
        cosine = abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
        sines.append(math.sqrt(max(0.0, 1 - cosine**2)))
    return float(np.median(sines))


def test_the_sketched_distance_is_the_angle_on_the_full_tensors(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    runs = {"a": (1, *trained(1, 1)), "same seed, other data": (1, *trained(1, 2)),
            "other seed": (2, *trained(2, 3)), "same seed, lr / 3": (1, *trained(1, 1, lr=0.0007))}
    prints = {}
    for index, (name, (seed, state, _)) in enumerate(runs.items()):
        result = grade_model.evaluate_handin(handin(tmp_path / str(index), state, seed), hidden)
        prints[name] = wf.decode(result["weights_fingerprint"])[1]
    for name in list(runs)[1:]:
        exact = exact_distance(runs["a"][1], runs[name][1], runs["a"][2], runs[name][2])
        sketched = wf.distance(prints["a"], prints[name])
        assert abs(sketched - exact) < 0.12, (name, sketched, exact)
        assert exact > 0.05, (name, exact)  # twice the tolerance (tests/grader/test_thresholds.py)


def test_copies_are_flagged_with_the_distance_and_independent_work_is_not(tmp_path):
    """A classmate's weights moved by one ulp, rescaled (every tensor, or the final norm against
    the final layer), with noise of 1% of what each tensor learned, or with the config's seed
    changed, are flagged naming the classmate and the distance; independent trainings (another
    seed, or the same seed on other data) are not; a fingerprint edited in grades.csv is no
    fingerprint."""
    hidden = make_hidden_set(tmp_path / "hidden")
    state, initial = trained(1, 1)
    variants = copies(state, initial, noise_scales=(0.01,))
    cases = {"ann": (state, 1), "bo": (trained(2, 2)[0], 2), "cy": (trained(1, 3)[0], 1),
             "ulp": (variants["one ulp"], 1), "times3": (variants["every tensor x 3"], 1),
             "final": (variants["final norm x 4, final_linear.weight / 4"], 1),
             "noise": (variants["noise 0.01"], 1),
             "seed": ({key: value * 2 for key, value in state.items()}, 7)}
    rows = {}
    for student, (weights, seed) in cases.items():
        folder = handin(tmp_path / student, weights, seed)
        result = grade_model.evaluate_handin(folder, hidden)
        rows[student] = {"student": student, "status": "ok", "total": "1", "integrity_flags": "",
                         "weights_sha256": result["state_dict_sha256"],
                         "weights_fingerprint": result["weights_fingerprint"]}
    rows["edited"] = {**rows["ulp"], "student": "edited",
                      "weights_fingerprint": rows["ulp"]["weights_fingerprint"][:-8] + "AAAAAAA="}
    regrade.write_rows(tmp_path / "grades.csv", rows)
    read = grades_csv.with_flags(grades_csv.read_rows(tmp_path / "grades.csv"))
    copied = {"ann", "ulp", "times3", "final", "noise", "seed"}
    for student, row in read.items():
        partners = sorted(copied - {student}) if student in copied else []
        found = re.findall(r"(\w+) \(distance (\d\.\d{4})\)", row["flags"])
        assert sorted(name for name, _ in found) == partners, (student, row["flags"])
        assert all(float(gap) <= wf.TOLERANCE for _, gap in found), row["flags"]
    assert "ann (distance 0.0000)" in read["ulp"]["flags"]
    assert "noise (distance 0.0" in read["ann"]["flags"]
    rows["twin"] = {**rows["ann"], "student": "twin"}  # the same file: flagged as before
    twin = grades_csv.with_flags(rows)["twin"]["flags"].split("; ")
    assert twin[0].startswith("shares its weights with ann (byte-identical model_state_dict.pt): "
                              "one training, copied or run twice"), twin
    assert twin[1].startswith("shares its weights with final (distance 0.0000), "), twin
    assert wf.decode(rows["edited"]["weights_fingerprint"]) is None


def test_untrained_weights_and_other_architectures_are_never_compared(tmp_path):
    """Two handins of the model as built under their config's seed (3, not the default) share
    nothing they learned; models of other sizes are not compared; a grades.csv cell that is not a
    fingerprint is skipped."""
    hidden = make_hidden_set(tmp_path / "hidden")
    torch.manual_seed(3)
    fresh = DecoderOnlyTransformer(**TINY_MODEL, num_classes=VOCAB).state_dict()
    untrained = {name: grade_model.evaluate_handin(handin(tmp_path / name, fresh, 3),
                                                   hidden)["weights_fingerprint"]
                 for name in ("a", "b")}
    assert wf.shared_weights(untrained) == {}
    state, initial = trained(1, 1)
    ours = wf.fingerprint(state, initial)
    torch.manual_seed(1)
    wider = DecoderOnlyTransformer(**{**TINY_MODEL, "d_ff": 64}, num_classes=VOCAB).state_dict()
    assert wf.decode(wf.fingerprint(wider, wider))[0] != wf.decode(ours)[0]
    assert wf.shared_weights({"a": ours, "b": ours, "c": "not a fingerprint", "d": ""}) == {
        "a": [("b", 0.0)], "b": [("a", 0.0)]}


def test_the_regrade_row_keeps_only_a_fingerprint_the_judge_wrote():
    """details.json's lm.weights_fingerprint reaches grades.csv when it decodes, else ''."""
    state, initial = trained(1, 1)
    fingerprint = wf.fingerprint(state, initial)
    assert grades_csv.fingerprint_of(LanguageModelResult("", weights_fingerprint=fingerprint)) == \
        fingerprint
    _, arch, data = fingerprint.split(":")
    compressed = base64.b64decode(data)
    cut = f"wf1:{arch}:{base64.b64encode(compressed[:len(compressed) // 2]).decode()}"
    for bad in (None, "wf1:0123456789abcdef:!!", fingerprint.replace("wf1", "wf2"),
                fingerprint[:40], cut):
        assert grades_csv.fingerprint_of(LanguageModelResult("", weights_fingerprint=bad)) == "", bad
    with pytest.raises(ReportError, match="weights_fingerprint is 3"):  # not a string: no report
        LanguageModelResult("", weights_fingerprint=3)
