# hw4p1: instructor-only
"""The GPU check's parts (hw4lib/gpu_check.py), each in a second or less on the CPU: the speed
targets at their values (3x for the cached greedy search, 50% for the trainer's pass, a case on
each side), the workload sizes per device, the median timing, the speed table and the JSON record
read by value, the exit status of each outcome, and the student tests run in a child.

The whole check, run for real on the CPU, is tests/library/test_gpu_check.py (slow).
"""
import itertools
import json
from pathlib import Path

import pytest
import torch

from hw4lib import gpu_check

REPO = Path(__file__).resolve().parents[2]


def speed(cache_speedup, loop_over_raw) -> dict:
    return {"training": {"loop_over_raw": loop_over_raw},
            "decoding": {"greedy": {"speedup": cache_speedup}}, "precision": None}


@pytest.mark.parametrize("cache_speedup, verdict", [(3.0, "PASS (3.0x)"), (2.99, "FAIL (3.0x)"),
                                                    (3.01, "PASS (3.0x)"), (2.5, "FAIL (2.5x)")])
def test_the_cached_greedy_search_must_be_3_times_the_plain_one(cache_speedup, verdict):
    judged = gpu_check.judge_speed(speed(cache_speedup, 0.8), on_gpu=True)
    assert judged == {"cached greedy >= 3x plain": verdict,
                      "training pass >= 50% of its raw step": "PASS (80%)"}


@pytest.mark.parametrize("loop_over_raw, verdict", [(0.5, "PASS (50%)"), (0.499, "FAIL (50%)"),
                                                    (0.501, "PASS (50%)"), (0.25, "FAIL (25%)")])
def test_the_trainers_pass_must_be_half_its_raw_step(loop_over_raw, verdict):
    judged = gpu_check.judge_speed(speed(4.0, loop_over_raw), on_gpu=True)
    assert judged == {"cached greedy >= 3x plain": "PASS (4.0x)",
                      "training pass >= 50% of its raw step": verdict}


def test_a_speed_that_was_not_measured_is_not_judged():
    assert gpu_check.judge_speed({"training": None, "decoding": None, "precision": None},
                                 on_gpu=True) == {}


def test_the_workload_sizes_of_each_device():
    assert gpu_check._sizes(torch.device("cpu")) == {
        "subset": 0.007, "repeats": 1, "greedy": (4, 12), "beam": (2, 12), "step_batch": (4, 32)}
    assert gpu_check._sizes(torch.device("cuda")) == {
        "subset": 0.1, "repeats": 3, "greedy": (16, 100), "beam": (4, 100), "step_batch": (32, 200)}


def test_the_median_leaves_out_the_warm_up_run(monkeypatch):
    durations = iter([10.0, 1.0, 3.0, 2.0, 50.0])
    clock = itertools.count()
    now = [0.0]

    def run():
        next(clock)
        now[0] += next(durations)

    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: now[0])
    assert gpu_check._median_seconds(run, 3, torch.device("cpu")) == 2.0
    assert next(clock) == 4, "one warm-up run and 3 timed ones"


def test_the_speed_table_by_value():
    table = gpu_check.speed_table({
        "training": {"precision": "bf16", "batches": 7, "raw_tokens_per_s": 2000.0,
                     "loop_tokens_per_s": 1500.0, "loop_over_raw": 0.75},
        "precision": {"fp32": 1234.4, "bf16": 2345.6},
        "decoding": {"greedy": {"plain": 100.0, "cached": 450.0, "speedup": 4.5}}},
        Path("configs/x.yaml"))
    assert table.splitlines() == [
        "  speeds on configs/x.yaml's model, tokens/s:",
        "    training, raw step (bf16, 7 batches)                2,000",
        "    training, the trainer's pass                        1,500  75% of raw",
        "    training step, fp32                                 1,234",
        "    training step, bf16                                 2,346",
        "    greedy, plain generator                               100",
        "    greedy, cached generator                              450  4.5x"]
    assert gpu_check.speed_table({"training": None, "precision": None, "decoding": None},
                                 Path("c.yaml")) == "  speeds on c.yaml's model, tokens/s:"


def test_the_precisions_timed_on_a_cpu(monkeypatch):
    """fp32 always, bf16 where the CPU has it natively, no TF32 off CUDA; the matmul precision
    each format asks for is set while it is timed, and restored."""
    from hw4lib.trainers import precision

    timed = []

    def seconds(model, batch, length, device, dtype, steps):
        timed.append((batch, length, dtype, torch.get_float32_matmul_precision(), steps))
        return 0.5

    monkeypatch.setattr(precision, "train_step_seconds", seconds)
    torch.set_float32_matmul_precision("medium")
    try:
        speeds = gpu_check.measure_precisions(torch.device("cpu"), REPO / "configs/tiny.yaml")
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")
    bf16 = precision.cpu_has_native_bf16()
    assert speeds == {"fp32": 256.0, **({"bf16": 256.0} if bf16 else {})}, "4 x 32 tokens in 0.5 s"
    assert timed == [(4, 32, torch.float32, "highest", 1)] + (
        [(4, 32, torch.bfloat16, "highest", 1)] if bf16 else [])


def test_decoding_speeds_are_new_tokens_per_second(monkeypatch):
    """Each generator's search is timed on the CPU's sizes; (prompts x new tokens) / seconds."""
    shapes = []
    seconds = iter([2.0, 0.5, 4.0, 1.0])

    def median(run, repeats, device):
        assert repeats == 1
        shapes.append(tuple(run()[0].shape))
        return next(seconds)

    monkeypatch.setattr(gpu_check, "_median_seconds", median)
    results = gpu_check.measure_decoding(torch.device("cpu"), REPO / "configs/tiny.yaml")
    assert results == {"greedy": {"plain": 24.0, "cached": 96.0, "speedup": 4.0},
                       "beam": {"plain": 6.0, "cached": 24.0, "speedup": 4.0}}
    assert shapes == [(4, 22), (4, 22), (2, 3, 22), (2, 3, 22)], "10-token prompts, 12 new tokens"


def test_the_timing_model_is_peaked_and_never_ends():
    from hw4lib.config import load_config
    from hw4lib.train import build_model, build_tokenizer

    model, tokenizer = gpu_check.peaked_model(REPO / "configs/tiny.yaml")
    config = load_config(REPO / "configs/tiny.yaml")
    torch.manual_seed(0)
    plain = build_model(config, build_tokenizer(config))
    assert not model.training
    assert model.final_linear.bias[tokenizer.eos_id] == -1e4
    model.final_linear.bias.data[tokenizer.eos_id] = plain.final_linear.bias[tokenizer.eos_id] * 5
    for (name, scaled), original in zip(model.state_dict().items(), plain.state_dict().values()):
        if scaled.is_floating_point() and name in dict(model.named_parameters()):
            assert torch.allclose(scaled, original * 5), name


def _fake_check(monkeypatch, tmp_path, fail: str | None = None) -> dict:
    """Run main on the CPU with every step replaced by a quick stand-in (``fail``: the step that
    raises); return what the JSON record holds."""
    def step(name, value):
        def run(*args, **kwargs):
            if name == fail:
                raise RuntimeError(f"{name} broke")
            return value
        return run

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(gpu_check.subprocess, "run", lambda *args, **kwargs: None)
    stats = {"epoch_seconds": 1.5, "train_tokens": 99, "peak_gpu_memory_mib": None}
    monkeypatch.setattr(gpu_check, "check_components", step("components", None))
    monkeypatch.setattr(gpu_check, "train_tiny", step("train", (tmp_path, stats)))
    monkeypatch.setattr(gpu_check, "check_generators", step("generators", None))
    monkeypatch.setattr(gpu_check, "check_handin", step("handin", None))
    monkeypatch.setattr(gpu_check, "measure_training", step("training", {
        "precision": "fp32", "batches": 1, "raw_tokens_per_s": 2.0, "loop_tokens_per_s": 1.0,
        "loop_over_raw": 0.5}))
    monkeypatch.setattr(gpu_check, "measure_precisions", step("precision", {"fp32": 3.0}))
    monkeypatch.setattr(gpu_check, "measure_decoding", step("decoding", {
        "greedy": {"plain": 1.0, "cached": 2.0, "speedup": 2.0}}))
    out = tmp_path / "out" / "record.json"
    code = gpu_check.main(["--device", "cpu", "--json", str(out)])
    return {"code": code, **json.loads(out.read_text())}


def test_the_record_of_a_passing_check(monkeypatch, tmp_path, capsys):
    record = _fake_check(monkeypatch, tmp_path)
    assert record["code"] == 0
    assert (record["device"], record["gpu"]) == ("cpu", False)
    assert record["tiny_epoch"] == {"epoch_seconds": 1.5, "train_tokens": 99, "peak_gpu_memory_mib": None}
    assert record["precision"] == {"fp32": 3.0} and record["training"]["loop_over_raw"] == 0.5
    assert list(record["checks"]) == [
        "masks and positional encoding on the device", "one epoch of the tiny config",
        "cached and plain generators give the same tokens", "the handin packs and loads",
        "training pass beside its raw step (speed)", "training step per number format (speed)",
        "cached and plain generators (speed)", "speed targets"]
    assert all(result.startswith("PASS (") for result in record["checks"].values()), record
    out = capsys.readouterr().out
    assert "NOTE: no CUDA device" in out and "peak GPU memory: n/a (CPU)" in out


@pytest.mark.parametrize("fail", ["components", "generators", "handin", "precision"])
def test_any_failing_check_fails_the_exit_status(monkeypatch, tmp_path, fail):
    record = _fake_check(monkeypatch, tmp_path, fail)
    assert record["code"] == 1
    failed = [result for result in record["checks"].values() if result.startswith("FAIL")]
    assert failed == [f"FAIL (RuntimeError: {fail} broke)"]


def test_an_epoch_that_fails_skips_what_needs_its_run(monkeypatch, tmp_path):
    record = _fake_check(monkeypatch, tmp_path, "train")
    assert record["code"] == 1 and record["tiny_epoch"] is None
    assert "cached and plain generators give the same tokens" not in record["checks"]
    assert "the handin packs and loads" not in record["checks"]


def test_a_failed_measurement_is_recorded_as_none(monkeypatch, tmp_path):
    record = _fake_check(monkeypatch, tmp_path, "decoding")
    assert record["code"] == 1 and record["decoding"] is None and record["precision"] == {"fp32": 3.0}


def test_outside_the_repository_root_it_says_where_to_run(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    assert gpu_check.main([]) == 2
    assert "run this from the repository root" in capsys.readouterr().out


def test_no_missing_package_here():
    assert gpu_check.missing_packages() == []


def test_the_student_tests_run_in_a_child_and_their_failures_are_named(monkeypatch, tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_good.py").write_text("def test_ok():\n    pass\n")
    (tmp_path / "tests" / "test_slow.py").write_text(
        "import pytest\n@pytest.mark.slow\ndef test_left_out():\n    assert False\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    monkeypatch.chdir(tmp_path)
    assert gpu_check.run_student_tests().startswith("1 passed, 1 deselected")
    (tmp_path / "tests" / "test_bad.py").write_text("def test_broken():\n    assert False\n")
    with pytest.raises(AssertionError, match="FAILED tests/test_bad.py::test_broken"):
        gpu_check.run_student_tests()
