# hw4p1: instructor-only
"""Tests of the prepared GPU check, ``python -m hw4lib.gpu_check`` (``make gpu-check``), on the CPU.

    .venv/bin/python -m pytest -q tests/library/test_gpu_check.py

Without a GPU the check runs on the CPU and says so; these tests run it there on a twentieth of the
tiny config's data, and show that a cached generator that drifts from the plain one fails it and
that missing packages are named. On a student handout with parts unwritten (built by ``make
handout``'s own function) each check that reaches a stub names the part it needs and the others
still run. On the CPU the device comparisons of the masks and the positional
encoding compare the CPU with itself: only a GPU run checks those.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hw4lib import gpu_check


REPO = Path(__file__).resolve().parents[2]


def _run(monkeypatch, tmp_path, capsys, *argv) -> tuple[int, str]:
    """Run the check from the repository root on a small copy of the tiny config."""
    config = tmp_path / "small.yaml"
    config.write_text(f"base: {REPO / 'configs/tiny.yaml'}\ndata: {{subset: 0.05}}\n")
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(gpu_check, "CONFIG", config)
    code = gpu_check.main([*argv, "--json", str(tmp_path / "gpu_check.json")])
    return code, capsys.readouterr().out


@pytest.mark.slow
def test_the_check_passes_on_the_cpu_and_says_it_is_not_a_gpu(monkeypatch, tmp_path, capsys):
    code, out = _run(monkeypatch, tmp_path, capsys, "--device", "cpu")
    assert code == 0, out
    assert "NOTE: no CUDA device, so this runs on the CPU" in out, out
    for check in ("masks and positional encoding on the device", "one epoch of the tiny config",
                  "cached and plain generators give the same tokens", "the handin packs and loads"):
        assert any(line.strip().startswith(check) and "PASS" in line for line in out.splitlines()), \
            f"{check}: no PASS line in\n{out}"
    assert "peak GPU memory: n/a (CPU)" in out, out
    assert "speed targets" in out and "PASS (not judged: no GPU)" in out, out
    assert not (REPO / "expts" / "gpu-check").exists(), "the check writes only to a temporary folder"
    numbers = json.loads((tmp_path / "gpu_check.json").read_text())
    assert numbers["gpu"] is False and all(v.startswith("PASS") for v in numbers["checks"].values())
    assert 0 < numbers["training"]["loop_over_raw"] and numbers["training"]["raw_tokens_per_s"] > 0
    assert set(numbers["decoding"]) == {"greedy", "beam"} and numbers["precision"]["fp32"] > 0
    for search, values in numbers["decoding"].items():
        assert f"{search}, cached generator" in out and values["speedup"] > 0, out


def test_the_speed_targets_are_judged_on_a_gpu_only():
    def speed(cache_speedup, loop_over_raw):
        return {"training": {"loop_over_raw": loop_over_raw},
                "decoding": {"greedy": {"speedup": cache_speedup}}, "precision": None}

    judged = gpu_check.judge_speed(speed(3.2, 0.6), on_gpu=True)
    assert [line.split()[0] for line in judged.values()] == ["PASS", "PASS"], judged
    for slow in (speed(0.65, 0.6), speed(13.0, 0.15)):  # the cache and the trainer of issue 48
        judged = gpu_check.judge_speed(slow, on_gpu=True)
        assert sum(line.startswith("FAIL") for line in judged.values()) == 1, judged
    assert gpu_check.judge_speed(speed(0.65, 0.15), on_gpu=False) == {
        "speed targets": "PASS (not judged: no GPU)"}


@pytest.mark.slow
def test_a_cached_generator_that_scores_differently_fails_the_check(monkeypatch, tmp_path, capsys):
    from hw4lib.model.kv_cache import CachedScorer

    score = CachedScorer.__call__

    def favours_one_token(self, x):  # a cache whose logits drift from the full forward's
        logits = score(self, x).clone()
        logits[..., 7] += 100.0
        return logits

    monkeypatch.setattr(CachedScorer, "__call__", favours_one_token)
    code, out = _run(monkeypatch, tmp_path, capsys, "--device", "cpu")
    assert code == 1, out
    line = next(line for line in out.splitlines() if "cached and plain generators" in line)
    assert "FAIL" in line and "tokens differ" in line, line


def _missing_line(out: str) -> list[str]:
    """The package names of the check's "missing packages: ..." line (others than those a test
    hides may be missing where it runs: matplotlib in a hosted notebook)."""
    line = next((line for line in out.splitlines() if line.startswith("missing packages: ")), "")
    assert line, out
    return line.removeprefix("missing packages: ").split()


def test_missing_packages_are_named_with_the_command_that_installs_them(monkeypatch, capsys):
    monkeypatch.setitem(gpu_check.NEEDED, "hw4p1_no_such_module", "hw4p1-no-such-package")
    assert gpu_check.main([]) == 2
    out = capsys.readouterr().out
    assert "hw4p1-no-such-package" in _missing_line(out) and "-m pip install" in out, out


def test_it_imports_nothing_but_the_standard_library_before_the_package_check():
    # A Python without numpy or tokenizers must get the message, not an ImportError.
    code = ("import sys; sys.modules['numpy'] = None; sys.modules['tokenizers'] = None; "
            "from hw4lib import gpu_check; sys.exit(gpu_check.main([]))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert {"numpy>=2", "tokenizers"} <= set(_missing_line(result.stdout)), result.stdout


def test_a_stub_s_error_names_its_part_and_any_other_error_none():
    stub = NotImplementedError("hw4lib/model/masks.py: PadMask: return the (N, T) bool mask")
    assert gpu_check.unwritten_parts(stub) == ["hw4lib/model/masks.py: PadMask"]
    try:
        try:
            raise stub
        except NotImplementedError as error:
            raise RuntimeError("building the model failed") from error
    except RuntimeError as wrapped:
        assert gpu_check.unwritten_parts(wrapped) == ["hw4lib/model/masks.py: PadMask"]
    for other in (NotImplementedError("abstract method"), NotImplementedError(),
                  ValueError("hw4lib/model/masks.py: PadMask: not a stub's class")):
        assert gpu_check.unwritten_parts(other) == [], other
    assert gpu_check.unwritten_parts(gpu_check.Unwritten(["a.py: f", "b.py: g"])) == ["a.py: f", "b.py: g"]


def test_the_exit_status_tells_a_failure_from_parts_unwritten(capsys):
    passed, needs, failed = "PASS (1.0s)", "needs: a.py: f (unwritten)", "FAIL (ValueError: x)"
    assert gpu_check.exit_status({"a": passed, "b": passed}) == 0
    assert gpu_check.exit_status({"a": passed, "b": needs}) == gpu_check.UNWRITTEN_EXIT == 3
    assert "once those parts are written" in capsys.readouterr().out
    assert gpu_check.exit_status({"a": needs, "b": failed}) == 1


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    """The student handout (``make handout``'s own function) with the masks and the positional
    encoding written (the reference's files) and every other part a stub; the data linked."""
    from tools.make_handout import build

    root = tmp_path_factory.mktemp("handout") / "hw4p1"
    build(REPO, root)
    for written in ("hw4lib/model/masks.py", "hw4lib/model/positional_encoding.py"):
        shutil.copyfile(REPO / written, root / written)
    data = REPO / "hw4_data" / "hw4p1_data"
    if data.is_dir():
        (root / "hw4_data" / "hw4p1_data").symlink_to(data.resolve())
    return root


@pytest.mark.slow
def test_on_a_handout_each_check_names_the_part_it_needs_and_the_rest_run(handout, tmp_path):
    result = subprocess.run([sys.executable, "-m", "hw4lib.gpu_check", "--device", "cpu",
                             "--json", str(tmp_path / "gpu_check.json")], cwd=handout,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == gpu_check.UNWRITTEN_EXIT, result.stdout[-3000:] + result.stderr[-3000:]
    checks = json.loads((tmp_path / "gpu_check.json").read_text())["checks"]
    assert checks["masks and positional encoding on the device"].startswith("PASS"), checks
    dataset = "needs: hw4lib/data/lm_dataset.py: LMDataset.__init__ (unwritten)"
    for check in ("one epoch of the tiny config", "cached and plain generators give the same tokens",
                  "the handin packs and loads", "training pass beside its raw step (speed)"):
        assert checks[check] == dataset, (check, checks)
    model = "needs: hw4lib/model/transformers.py: DecoderOnlyTransformer.__init__ (unwritten)"
    assert checks["training step per number format (speed)"] == model, checks
    assert not [line for line in result.stdout.splitlines() if "FAIL" in line], result.stdout


@pytest.mark.slow
@pytest.mark.long
def test_student_tests_failing_only_at_stubs_name_the_parts(handout, monkeypatch):
    """Run on a GPU only, the student test modules at stubs name the parts; a real failure beside
    them is named itself."""
    monkeypatch.chdir(handout)
    with pytest.raises(gpu_check.Unwritten) as unwritten:
        gpu_check.run_student_tests(["tests/test_dataset.py"])
    assert unwritten.value.parts == ["hw4lib/data/lm_dataset.py: LMDataset.__init__"]
    broken = handout / "tests" / "test_zz_broken.py"
    broken.write_text("def test_a_real_failure():\n    assert 1 == 2\n")
    try:
        with pytest.raises(AssertionError, match="test_a_real_failure"):
            gpu_check.run_student_tests(["tests/test_dataset.py", str(broken)])
    finally:
        broken.unlink()
