# hw4p1: instructor-only
"""The parts of ``training.precision`` (hw4lib/trainers/precision.py) read by value, each in well
under a second on the CPU, calling the real functions:

* the CPU's bf16 probe against torch's own probes (each side: present, absent, torch without them),
  and ``auto`` on this CPU with a real measurement of a tiny model;
* the timed training step: the tokens it feeds, the steps it takes, the median it keeps (on a
  clock that the test advances), autocast on for 16 bits only;
* the default number of timed steps the trainer gets, and the record's file name and folder.

The tie-breaking, the CUDA branches and the trainer's use of the record are in test_precision.py.
"""
import hashlib
import json
import platform
import time

import pytest
import torch

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers import precision

VOCAB = 12
PROBES = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")


def tiny_model() -> DecoderOnlyTransformer:
    torch.manual_seed(0)
    return DecoderOnlyTransformer(1, 16, 2, 32, dropout=0.0, max_len=16, num_classes=VOCAB)


def test_the_cpu_has_native_bf16_when_either_probe_of_torch_says_so(monkeypatch):
    expected = any(getattr(torch.cpu, name)() for name in PROBES)  # this machine, unpatched
    assert precision.cpu_has_native_bf16() is expected
    assert precision.has_native_bf16(torch.device("cpu")) is expected
    for avx512, amx in ((True, False), (False, True), (False, False)):
        monkeypatch.setattr(torch.cpu, PROBES[0], lambda value=avx512: value)
        monkeypatch.setattr(torch.cpu, PROBES[1], lambda value=amx: value)
        assert precision.cpu_has_native_bf16() is (avx512 or amx), (avx512, amx)
        assert precision.has_native_bf16(torch.device("meta")) is False, "meta has no bf16 units"
    for name in PROBES:  # a torch without the probes: no native bf16 assumed
        monkeypatch.delattr(torch.cpu, name)
    assert precision.cpu_has_native_bf16() is False


def test_auto_on_this_cpu_measures_where_bf16_is_native_and_says_what_it_measured():
    """The real decision on this machine: its own probes, and a real (one-step) measurement."""
    model = tiny_model()
    measured = {}

    def speeds():
        measured.update(precision.measure_formats(model, 2, 8, torch.device("cpu"), steps=1))
        return measured, "measured by the test"

    before = torch.get_float32_matmul_precision()
    try:
        dtype, reason = precision.resolve_precision("auto", torch.device("cpu"), speeds)
    finally:
        torch.set_float32_matmul_precision(before)
    if any(getattr(torch.cpu, name)() for name in PROBES):
        assert set(measured) == {"fp32", "bf16"} and all(value > 0 for value in measured.values())
        fastest = "bf16" if measured["bf16"] > measured["fp32"] else "fp32"
        assert dtype == precision.DTYPES[fastest], (measured, dtype)
        assert reason.startswith(f"auto: {fastest} trained this model fastest here (fp32 ")
        assert reason.endswith("tokens/s; measured by the test)"), reason
    else:
        assert (dtype, reason, measured) == (torch.float32, "auto: no native 16-bit matrix units on cpu", {})


def test_the_trainer_s_measurement_times_5_steps_of_each_format(monkeypatch):
    steps = []
    monkeypatch.setattr(precision, "train_step_seconds",
                        lambda model, batch, length, device, dtype, n: steps.append(n) or 1.0)
    precision.measure_formats(tiny_model(), 2, 8, torch.device("cpu"))
    assert steps and set(steps) == {5}, steps


def fake_clock(monkeypatch, durations: list[float]) -> None:
    """``time.perf_counter`` as a clock on which the k-th timed step lasts ``durations[k]``."""
    stamps = []
    for index, seconds in enumerate(durations):
        stamps += [10.0 * index, 10.0 * index + seconds]
    stamps.reverse()
    monkeypatch.setattr(time, "perf_counter", stamps.pop)


def test_a_timed_step_feeds_batch_by_length_tokens_for_each_step_plus_a_warm_up(monkeypatch):
    model = tiny_model()
    calls = []
    model.register_forward_hook(
        lambda module, args, out: calls.append((tuple(args[0].shape), args[1].tolist(), out[0].shape)))
    fake_clock(monkeypatch, [0.5, 1.0, 4.0, 3.0, 2.0])
    seconds = precision.train_step_seconds(model, 3, 7, torch.device("cpu"), torch.float32, 4)
    assert calls == [((3, 7), [7, 7, 7], (3, 7, VOCAB))] * 5, "one warm-up step and 4 timed ones"
    assert seconds == 3.0, "the median of the 4 timed steps (1, 4, 3, 2: the upper middle), warm-up left out"


def test_a_timed_step_runs_under_autocast_in_16_bits_only_with_float32_logits():
    model = tiny_model()
    dtypes, logits = [], []
    model.dec_layers[0].ffn.ffn.register_forward_hook(lambda module, args, out: dtypes.append(out.dtype))
    model.register_forward_hook(lambda module, args, out: logits.append(out[0].dtype))
    for dtype in (torch.float32, torch.bfloat16):
        precision.train_step_seconds(model, 2, 4, torch.device("cpu"), dtype, 1)
    assert dtypes == [torch.float32] * 2 + [torch.bfloat16] * 2, dtypes
    assert logits == [torch.float32] * 4, "timed as trained: the output projection in float32"


def test_the_record_is_named_by_the_key_s_digest_in_a_folder_made_for_it(tmp_path):
    key = {"torch": "2.13.0", "device": "cpu: X", "batch_size": 4}
    folder = tmp_path / "expts" / "nested"
    speeds, _ = precision.recorded_speeds(folder, key, lambda: {"fp32": 1.0, "fp32+TF32": 2.0, "bf16": 3.0})
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    assert [path.name for path in folder.iterdir()] == [f"precision-auto-{digest}.json"]
    assert speeds == {"fp32": 1.0, "fp32+TF32": 2.0, "bf16": 3.0}, "every format of a GPU's record is read"
    reordered = dict(reversed(list(key.items())))

    def never():
        raise AssertionError("the same key in another order measured again")

    assert precision.recorded_speeds(folder, reordered, never)[0] == speeds


@pytest.mark.parametrize("lines, expected", [
    (["processor\t: 0", "model name\t: Chip A: rev 2", "model name\t: Chip B"], "Chip A: rev 2"),
    ([], platform.processor() or platform.machine())])
def test_the_cpu_is_named_by_its_first_model_name(tmp_path, lines, expected):
    cpuinfo = tmp_path / "cpuinfo"
    if lines:
        cpuinfo.write_text("\n".join(lines) + "\n")
    described = precision.device_description(torch.device("cpu"), cpuinfo)
    assert described == f"cpu: {expected} ({torch.backends.cpu.get_cpu_capability()})"
    assert expected, "a CPU is named by something"
