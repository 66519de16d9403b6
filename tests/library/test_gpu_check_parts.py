# hw4p1: instructor-only
"""The GPU check's parts (hw4lib/gpu_check.py), each in a second or less on the CPU: the speed
targets at their values (3x for the cached greedy search, 50% for the trainer's pass, a case on
each side), the workload sizes per device, the median timing, the speed table and the JSON record
read by value, the exit status of each outcome, the refusal of ``--device cuda`` where torch sees
no GPU, the device comparison of the masks and the positional encoding (its case, and a device
that differs), and the student tests run in a child.

The whole check, run for real on the CPU, is tests/library/test_gpu_check.py (slow); its steps
on a real small run, tests/library/test_gpu_check_run.py (slow).
"""
import itertools
import json
import os
import platform
import subprocess
import sys
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


def _fake_check(monkeypatch, tmp_path, fail: str | None = None, error: Exception | None = None,
                out: Path | None = None, root: Path = REPO) -> dict:
    """Run main from ``root`` on the CPU with every step replaced by a quick stand-in (``fail``:
    the step that raises ``error``, by default a RuntimeError); return what the JSON record
    (written to ``out``; None: no ``--json``) holds, with the exit status and the data build's
    command (``code``, ``data_build``)."""
    def step(name, value):
        def run(*args, **kwargs):
            if name == fail:
                raise error or RuntimeError(f"{name} broke")
            return value
        return run

    data_build = []
    monkeypatch.chdir(root)
    monkeypatch.setattr(gpu_check.subprocess, "run", lambda *args, **kwargs: data_build.append((args, kwargs)))
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
    code = gpu_check.main(["--device", "cpu", *(["--json", str(out)] if out else [])])
    return {"code": code, "data_build": data_build, **json.loads((out or root / "gpu_check.json").read_text())}


def test_the_record_of_a_passing_check(monkeypatch, tmp_path, capsys):
    record = _fake_check(monkeypatch, tmp_path, out=tmp_path / "out" / "record.json")
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
    record = _fake_check(monkeypatch, tmp_path, fail, out=tmp_path / "record.json")
    assert record["code"] == 1
    failed = [result for result in record["checks"].values() if result.startswith("FAIL")]
    assert failed == [f"FAIL (RuntimeError: {fail} broke)"]


def test_an_epoch_that_fails_skips_what_needs_its_run(monkeypatch, tmp_path):
    record = _fake_check(monkeypatch, tmp_path, "train", out=tmp_path / "record.json")
    assert record["code"] == 1 and record["tiny_epoch"] is None
    assert "cached and plain generators give the same tokens" not in record["checks"]
    assert "the handin packs and loads" not in record["checks"]


def test_a_failed_measurement_is_recorded_as_none(monkeypatch, tmp_path):
    record = _fake_check(monkeypatch, tmp_path, "decoding", out=tmp_path / "record.json")
    assert record["code"] == 1 and record["decoding"] is None and record["precision"] == {"fp32": 3.0}


def test_outside_the_repository_root_it_says_where_to_run(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    assert gpu_check.main([]) == 2
    assert "run this from the repository root" in capsys.readouterr().out


def test_no_missing_package_here():
    assert gpu_check.missing_packages() == []


def test_the_record_and_the_printed_lines_by_value(monkeypatch, tmp_path, capsys):
    """The JSON record's text (indent 2) and versions, the data build's command, the version line
    and one line per check, each PASS timed in seconds; folders above the record are made."""
    from hw4lib.config import load_config

    out = tmp_path / "a" / "b" / "record.json"
    record = _fake_check(monkeypatch, tmp_path, out=out)
    text = out.read_text()
    stored = json.loads(text)
    assert text == json.dumps(stored, indent=2) + "\n"
    assert (stored["python"], stored["torch"]) == (platform.python_version(), torch.__version__)
    assert record["data_build"] == [(([sys.executable, "-m", "datagen.build_data", "--out",
                                       load_config(gpu_check.CONFIG).data.root, "--seed", "0",
                                       "--if-stale"],), {"check": True})]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (f"python {platform.python_version()}, torch {torch.__version__}, CUDA "
                          f"build {torch.version.cuda or 'none'}, device cpu")
    for name, result in stored["checks"].items():
        assert f"  {name:<58s} {result}" in printed, (name, printed)
    timed = [result for result in stored["checks"].values() if result.endswith("s)")]
    assert len(timed) == 7 and all(0 <= float(result[6:-2]) < 60 for result in timed), timed


def test_a_record_beside_others_in_an_existing_folder(monkeypatch, tmp_path):
    (tmp_path / "other.json").write_text("{}")
    assert _fake_check(monkeypatch, tmp_path, out=tmp_path / "record.json")["code"] == 0


def test_without_json_the_record_is_gpu_check_json_in_the_current_folder(monkeypatch, tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    for name in ("hw4lib", "configs"):
        (root / name).symlink_to(REPO / name, target_is_directory=True)
    assert _fake_check(monkeypatch, tmp_path, root=root)["code"] == 0
    assert sorted(path.name for path in root.iterdir()) == ["configs", "gpu_check.json", "hw4lib"]


def test_an_unwritten_part_met_in_training_is_needed_by_what_follows_it(monkeypatch, tmp_path, capsys):
    stub = NotImplementedError("hw4lib/data/lm_dataset.py: LMDataset.__init__: build the dataset")
    record = _fake_check(monkeypatch, tmp_path, "train", stub, out=tmp_path / "record.json")
    needs = "needs: hw4lib/data/lm_dataset.py: LMDataset.__init__ (unwritten)"
    assert record["code"] == gpu_check.UNWRITTEN_EXIT == 3 and record["tiny_epoch"] is None
    assert [record["checks"][name] for name in (
        "one epoch of the tiny config", "cached and plain generators give the same tokens",
        "the handin packs and loads")] == [needs] * 3
    assert "once those parts are written" in capsys.readouterr().out


def test_a_root_without_the_tiny_config_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(gpu_check, "CONFIG", tmp_path / "no-such.yaml")
    assert gpu_check.main([]) == 2
    assert capsys.readouterr().out.startswith("run this from the repository root")


def test_missing_packages_stop_the_check_naming_the_pip_line(monkeypatch, capsys):
    monkeypatch.setitem(gpu_check.NEEDED, "hw4p1_no_such_module", "hw4p1-no-such-package")
    assert gpu_check.missing_packages() == ["hw4p1-no-such-package"]
    assert gpu_check.main([]) == 2
    assert capsys.readouterr().out == (
        "missing packages: hw4p1-no-such-package\ninstall them with: "
        f"{sys.executable} -m pip install 'hw4p1-no-such-package'\n")


def test_a_stub_behind_an_implicit_chain_is_found():
    try:
        try:
            raise NotImplementedError("hw4lib/model/masks.py: PadMask: return the (N, T) bool mask")
        except NotImplementedError:
            raise KeyError("while building the model")  # noqa: B904 - the implicit chain under test
    except KeyError as error:
        chained = error
    assert chained.__cause__ is None
    assert gpu_check.unwritten_parts(chained) == ["hw4lib/model/masks.py: PadMask"]


def test_the_peak_gpu_memory_is_read_in_mib_on_a_gpu_only(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "max_memory_allocated",
                        lambda device: asked.append(device) or 3 * 2**20 + 2**19)
    assert gpu_check.peak_gpu_memory_mib(torch.device("cpu")) is None and asked == []
    assert gpu_check.peak_gpu_memory_mib(torch.device("cuda", 1)) == 3.5
    assert asked == [torch.device("cuda", 1)]


def test_the_precisions_timed_on_a_gpu_take_5_steps_of_its_batch(monkeypatch):
    from hw4lib.trainers import precision

    timed = []
    monkeypatch.setattr(precision, "train_step_seconds",
                        lambda model, batch, length, device, dtype, steps: timed.append(
                            (batch, length, steps)) or 1.0)
    try:
        speeds = gpu_check.measure_precisions(torch.device("cuda"), REPO / "configs/tiny.yaml")
    finally:
        torch.set_float32_matmul_precision("highest")
    assert timed and set(timed) == {(32, 200, 5)}, timed
    assert speeds["fp32"] == speeds["fp32+TF32"] == 6400.0, speeds


def _recording_components(monkeypatch, calls: list) -> None:
    """The real masks and positional encoding, each call (and the encoding's size) recorded."""
    import hw4lib.model as model

    pad, causal, encoding = model.PadMask, model.CausalMask, model.PositionalEncoding

    class Recorded(encoding):
        def __init__(self, d_model, max_len):
            calls.append(("PositionalEncoding", d_model, max_len))
            super().__init__(d_model, max_len)

        def forward(self, x):
            calls.append(("forward", tuple(x.shape)))
            return super().forward(x)

    monkeypatch.setattr(model, "PadMask", lambda x, n: calls.append(
        ("PadMask", tuple(x.shape), n.tolist())) or pad(x, n))
    monkeypatch.setattr(model, "CausalMask", lambda x: calls.append(
        ("CausalMask", tuple(x.shape))) or causal(x))
    monkeypatch.setattr(model, "PositionalEncoding", Recorded)


def test_the_components_are_compared_on_a_padded_batch_and_a_short_sequence(monkeypatch):
    """Each on the device, then on the CPU: the masks on 3 rows of 5 tokens, one full, one padded
    and one of a single token; the encoding on 7 positions of a 32-position table."""
    calls = []
    _recording_components(monkeypatch, calls)
    gpu_check.check_components(torch.device("cpu"))
    pad, causal, forward = ("PadMask", (3, 5), [5, 3, 1]), ("CausalMask", (3, 5)), ("forward", (2, 7, 16))
    assert calls == [pad, pad, causal, causal, ("PositionalEncoding", 16, 32), forward, forward], calls


def test_a_component_that_differs_on_the_device_fails_the_comparison(monkeypatch):
    """A table moved to the device 1e-5 off fails (1e-7 off passes: float rounding); a mask on
    another device, or different on the device (its first call), is named."""
    import hw4lib.model as model

    class Drifting(model.PositionalEncoding):
        drift = 0.0

        def _apply(self, fn, recurse=True):
            super()._apply(fn, recurse)
            self.pe.add_(self.drift)
            return self

    cpu = torch.device("cpu")
    monkeypatch.setattr(model, "PositionalEncoding", Drifting)
    Drifting.drift = 1e-7
    gpu_check.check_components(cpu)
    Drifting.drift = 1e-5
    with pytest.raises(AssertionError, match="^PositionalEncoding differs on cpu$"):
        gpu_check.check_components(cpu)
    pad, causal = model.PadMask, model.CausalMask
    monkeypatch.setattr(model, "PadMask", lambda x, n: pad(x, n).to("meta"))
    with pytest.raises(AssertionError, match="^PadMask returned a mask on meta$"):
        gpu_check.check_components(cpu)
    monkeypatch.setattr(model, "PadMask", pad)
    calls = itertools.count()
    monkeypatch.setattr(model, "CausalMask", lambda x: causal(x) ^ (next(calls) == 0))
    with pytest.raises(AssertionError, match="^CausalMask differs on cpu$"):
        gpu_check.check_components(cpu)


def _student_tree(tmp_path, monkeypatch, files: dict[str, str]) -> None:
    """A folder with ``tests/<name>`` for each of ``files``, the current one."""
    (tmp_path / "tests").mkdir()
    for name, text in files.items():
        (tmp_path / "tests" / name).write_text(text)
    monkeypatch.chdir(tmp_path)


def test_the_student_tests_run_without_the_slow_ones_for_7_minutes_at_most(monkeypatch, tmp_path):
    """pytest -q without the slow tests, every failure on one wide line whatever the caller's
    PYTEST_ADDOPTS (the mutation tool's -x would stop at the first)."""
    _student_tree(tmp_path, monkeypatch, {"test_b.py": "", "test_a.py": "", "helper.py": ""})
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    monkeypatch.setenv("HW4P1_SEEN", "1")
    seen = []

    def run(argv, **kwargs):
        seen.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 0, ".\n\n1 passed in 0.1s\n", "")

    monkeypatch.setattr(gpu_check.subprocess, "run", run)
    assert gpu_check.run_student_tests() == "1 passed in 0.1s"
    environment = dict(os.environ, COLUMNS="1000")
    del environment["PYTEST_ADDOPTS"]
    assert seen == [([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                      "not slow", "tests/test_a.py", "tests/test_b.py"],
                     {"capture_output": True, "text": True, "timeout": 420, "env": environment})]
    assert environment["HW4P1_SEEN"] == "1"


@pytest.mark.parametrize("stdout, stderr, message", [
    ("collected 1 item / 1 deselected / 0 selected\n\n1 deselected in 0.01s\n", "",
     "1 deselected in 0.01s"),  # nothing ran
    ("", "ImportError while loading conftest\nE   RuntimeError: broken\n",
     "ImportError while loading conftest\nE   RuntimeError: broken")])
def test_a_failed_run_without_failed_tests_names_pytest_s_last_words(monkeypatch, stdout, stderr, message):
    monkeypatch.setattr(gpu_check.subprocess, "run",
                        lambda argv, **kwargs: subprocess.CompletedProcess(argv, 4, stdout, stderr))
    with pytest.raises(AssertionError) as raised:
        gpu_check.run_student_tests(["tests/test_x.py"])
    assert str(raised.value) == message


def test_the_help_opens_with_the_first_paragraph_of_the_module_s_text(capsys):
    with pytest.raises(SystemExit) as exited:
        gpu_check.main(["--help"])
    assert exited.value.code == 0
    first = gpu_check.__doc__.split("\n\n")[0]
    assert first.startswith("Check the GPU path in a few minutes")
    assert " ".join(capsys.readouterr().out.split()).startswith(
        f"usage: {Path(sys.argv[0]).name} [-h] [--device DEVICE] [--json JSON] {' '.join(first.split())} ")



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


def test_cuda_asked_where_torch_sees_no_gpu_is_refused_with_the_fix(tmp_path):
    """In a child that sees no GPU on any machine (CUDA_VISIBLE_DEVICES empty), unpatched."""
    result = subprocess.run([sys.executable, "-m", "hw4lib.gpu_check", "--device", "cuda", "--json",
                             str(tmp_path / "record.json")], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert (result.returncode, result.stderr) == (2, ""), result.stderr[-2000:]
    assert result.stdout == (
        f"--device cuda: torch sees no CUDA device here (torch {torch.__version__}, CUDA build "
        f"{torch.version.cuda or 'none'}); run with --device cpu, or on a machine with a GPU\n")
    assert not (tmp_path / "record.json").exists()



def test_stubs_alone_name_their_parts_and_other_failures_are_named_five_at_most(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")  # the caller's: the check's child runs every test
    stub = "def test_{0}():\n    raise NotImplementedError('hw4lib/{1}.py: {0}: write it')\n"
    _student_tree(tmp_path, monkeypatch, {"test_stubs.py": stub.format("g", "b") + stub.format("f", "a")
                                          + stub.format("f", "a").replace("test_f", "test_f2")})
    with pytest.raises(gpu_check.Unwritten) as unwritten:
        gpu_check.run_student_tests()
    assert unwritten.value.parts == ["hw4lib/a.py: f", "hw4lib/b.py: g"]
    (tmp_path / "tests" / "test_real.py").write_text(
        "".join(f"def test_{n}():\n    assert {n} == -1\n" for n in range(6)))
    with pytest.raises(AssertionError) as failed:
        gpu_check.run_student_tests()
    named = str(failed.value).split("; ")
    assert [line.split(" - ")[0] for line in named] == [
        f"FAILED tests/test_real.py::test_{n}" for n in range(5)], named
