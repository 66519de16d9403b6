# hw4p1: instructor-only
"""Tests of the prepared GPU check, ``python -m hw4lib.gpu_check`` (``make gpu-check``), on the CPU.

    .venv/bin/python -m pytest -q tests/library/test_gpu_check.py

Without a GPU the check runs on the CPU and says so; these tests run it there on a twentieth of the
tiny config's data, and show that a cached generator that drifts from the plain one fails it and
that missing packages are named. On the CPU the device comparisons of the masks and the positional
encoding compare the CPU with itself: only a GPU run checks those.
"""
import json
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
