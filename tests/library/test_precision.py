# hw4p1: instructor-only
"""Training precision (``training.precision``) and the fused attention path of the trainer.

* ``resolve_precision`` picks bf16 only where the hardware has it (the CPU and CUDA capability
  checks are patched, so both CUDA branches are checked on a CPU-only machine), refuses fp16 off
  CUDA; ``training.precision`` defaults to ``auto`` and takes only the names it knows.
* Where bf16 is native, ``auto`` keeps the fastest measured format (speeds injected: no timing
  here; ``bench/bench_precision.py`` measures), records the measurement in the experiments
  folder, and later runs of the model read it, so every entry point chooses alike.
* A bf16 training step stays close to the float32 one (autograd in float32 is the truth); the
  trainer's autocast really computes the layers in bf16, and the logits in float32.
* ``attention_weights_off`` changes neither outputs nor gradients, and the trainer asks for the
  attention weights in the last batch of an epoch only (the one it plots).

Run: ``.venv/bin/python -m pytest -q tests/library/test_precision.py``.
"""
import copy
from contextlib import nullcontext
from unittest import mock

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.fused_attention import attention_weights_off
from hw4lib.train import ConfigError, validate_config
from hw4lib.trainers import LMTrainer
from hw4lib.file_io import read_json
from hw4lib.trainers.precision import (FORMATS, measure_formats, measurement_key, recorded_speeds,
                                       resolve_precision)
from tests.tiny_config import tiny_config, tiny_yaml


PAD, SOS, EOS, VOCAB = 0, 1, 2, 12


def expect_error(error_type, words, call) -> None:
    try:
        call()
    except error_type as error:
        missing = [word for word in words if word not in str(error)]
        assert not missing, f"the error should name {missing}, got: {error}"
        return
    raise AssertionError(f"expected {error_type.__name__} naming {words}, got no error")


def test_auto_picks_16_bits_only_where_native():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for native, expected in ((True, torch.bfloat16), (False, torch.float32)):
        with mock.patch("hw4lib.trainers.precision.cpu_has_native_bf16", return_value=native):
            dtype, reason = resolve_precision("auto", cpu)
        assert dtype == expected, f"auto on a CPU with native bf16={native}: expected {expected}, got {dtype}"
        assert reason.startswith("auto"), f"the reason should say auto chose, got {reason!r}"
    for supported, expected in ((True, torch.bfloat16), (False, torch.float16)):
        with mock.patch("torch.cuda.is_bf16_supported", return_value=supported):
            dtype, _ = resolve_precision("auto", cuda)
        assert dtype == expected, f"auto on a GPU with bf16={supported}: expected {expected}, got {dtype}"
    explicit = {("fp32", cpu): torch.float32, ("bf16", cpu): torch.bfloat16, ("fp16", cuda): torch.float16}
    for (name, device), expected in explicit.items():
        assert resolve_precision(name, device)[0] == expected, f"{name} on {device}: expected {expected}"
    expect_error(ValueError, ["fp16", "CUDA", "bf16"], lambda: resolve_precision("fp16", cpu))


def test_precision_setting_defaults_to_auto_and_refuses_unknown_names():
    for training, expected in (({}, "auto"), ({"precision": "fp32"}, "fp32"), ({"precision": "bf16"}, "bf16")):
        config = tiny_yaml()
        config["training"].pop("precision", None)  # tiny.yaml inherits default.yaml's: auto
        config["training"].update(training)
        checked = validate_config(config)
        assert checked.training.precision == expected, (
            f"training section {training}: expected precision {expected!r}, "
            f"got {checked.training.precision!r}")
        assert checked.dump()["training"]["precision"] == expected, "the dump must keep the precision"
    config = tiny_yaml()
    config["training"]["precision"] = "half"
    expect_error(ConfigError, ["training.precision"], lambda: validate_config(config))


class Sequences:
    """A tiny in-memory dataset in the LMDataset format."""

    def __init__(self, count: int = 12, seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        self.items = [torch.randint(3, VOCAB, (int(length),), generator=generator)
                      for length in torch.randint(3, 9, (count,), generator=generator)]
        self.total_chars = sum(len(item) for item in self.items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        return torch.cat([torch.tensor([SOS]), item]), torch.cat([item, torch.tensor([EOS])])

    def collate_fn(self, batch):
        shifted, golden = zip(*batch)
        return (pad_sequence(shifted, batch_first=True, padding_value=PAD),
                pad_sequence(golden, batch_first=True, padding_value=PAD),
                torch.tensor([len(s) for s in shifted]))


class Tokenizer:
    pad_id, sos_id, eos_id, vocab_size = PAD, SOS, EOS, VOCAB

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(str(i) for i in ids)


def make_trainer(tmp_path, precision: str, model: nn.Module | None = None) -> LMTrainer:
    torch.manual_seed(0)
    if model is None:
        model = DecoderOnlyTransformer(2, 32, 4, 64, dropout=0.0, max_len=32, num_classes=VOCAB)
    config = tiny_config(tmp_path, {"precision": precision})
    trainer = LMTrainer(model, Tokenizer(), config, f"run-{precision}", None, device="cpu")
    trainer.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return trainer


def test_bf16_step_is_close_to_float32(tmp_path):
    dataset = Sequences()
    shifted, golden, lengths = dataset.collate_fn([dataset[i] for i in range(8)])
    grads, losses = {}, {}
    for precision in ("fp32", "bf16"):
        trainer = make_trainer(tmp_path, precision)
        assert not trainer.scaler.is_enabled(), f"{precision} on CPU must not scale gradients"
        hidden = []
        hook = trainer.model.dec_layers[0].ffn.ffn.register_forward_hook(lambda m, args, out: hidden.append(out.dtype))
        with trainer._autocast():
            logits, _ = trainer.model(shifted, lengths)
            loss = trainer.criterion(logits.reshape(-1, VOCAB), golden.reshape(-1))
        hook.remove()
        expected_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        assert hidden == [expected_dtype], f"{precision}: the feed-forward network (before the residual add) should output {expected_dtype}, got {hidden}"
        assert logits.dtype == torch.float32, f"{precision}: logits should be float32, got {logits.dtype}"
        loss.backward()
        losses[precision] = loss.item()
        grads[precision] = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
    assert abs(losses["bf16"] - losses["fp32"]) < 0.02 * losses["fp32"], (
        f"bf16 loss {losses['bf16']:.4f} should be within 2% of the float32 loss {losses['fp32']:.4f}")
    cosine = torch.nn.functional.cosine_similarity(grads["bf16"], grads["fp32"], dim=0).item()
    assert cosine > 0.99, f"bf16 gradients should point where float32's do (cosine > 0.99), got {cosine:.4f}"


def test_trainer_computes_logits_in_float32_under_bf16(tmp_path):
    torch.manual_seed(0)
    reference = DecoderOnlyTransformer(2, 32, 4, 64, dropout=0.0, max_len=32, num_classes=VOCAB, weight_tying=True)
    trainer = make_trainer(tmp_path, "bf16", model=copy.deepcopy(reference))
    model = trainer.model
    assert model.final_linear.weight is model.target_embedding.weight, "the tied weight must stay tied"
    assert list(model.state_dict()) == list(reference.state_dict()), "state-dict names must not change"
    tokens = torch.randint(3, VOCAB, (4, 9))
    inputs = []
    hook = model.final_linear.register_forward_hook(lambda m, args, out: inputs.append(args[0]))
    with trainer._autocast():
        logits, _ = model(tokens)
        bf16_logits = nn.functional.linear(inputs[0], model.final_linear.weight, model.final_linear.bias)
    hook.remove()
    expected = nn.functional.linear(inputs[0].float(), model.final_linear.weight, model.final_linear.bias)
    assert logits.dtype == torch.float32 and torch.allclose(logits, expected, atol=1e-6, rtol=1e-6), (
        f"under bf16 autocast, final_linear should compute in float32: largest difference from the "
        f"float32 product {(logits.float() - expected).abs().max().item():.2e}")
    assert not torch.allclose(bf16_logits.float(), expected, atol=1e-6, rtol=1e-6), \
        "the bf16 product should differ from the float32 one, or the check above could not fail"
    assert torch.equal(model(tokens)[0], reference(tokens)[0]), "outside autocast nothing may change"


def test_attention_weights_off_keeps_outputs_and_gradients():
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(2, 32, 4, 64, dropout=0.0, max_len=32, num_classes=VOCAB)
    tokens, lengths = torch.randint(0, VOCAB, (3, 9)), torch.tensor([9, 6, 2])
    results = {}
    for fused in (False, True):
        model.zero_grad()
        with attention_weights_off(model) if fused else nullcontext():
            logits, weights = model(tokens, lengths)
        logits.square().mean().backward()
        results[fused] = (logits.detach(), [p.grad.clone() for p in model.parameters()], weights)
    (plain, plain_grads, plain_weights), (fused, fused_grads, fused_weights) = results[False], results[True]
    assert torch.allclose(plain, fused, atol=1e-5), f"logits differ by {(plain - fused).abs().max():.2e}"
    for index, (a, b) in enumerate(zip(plain_grads, fused_grads)):
        assert torch.allclose(a, b, atol=1e-5), f"gradient of parameter {index} differs by {(a - b).abs().max():.2e}"
    assert all(w is None for w in fused_weights.values()), f"expected no weights inside the block, got {fused_weights}"
    assert all(w.shape == (3, 9, 9) for w in plain_weights.values()), "weights outside the block must be (N, T, T)"
    _, after = model(tokens, lengths)
    assert all(w is not None for w in after.values()), "the weights must come back after the block"
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8)
    with attention_weights_off(mha):
        _, positional = mha(x, x, x, None, True)
    assert positional is None, "need_weights passed positionally must be overridden too"


def test_trainer_computes_attention_weights_for_the_plotted_batch_only(tmp_path):
    trainer = make_trainer(tmp_path, "fp32")
    dataset = Sequences()
    loader = DataLoader(dataset, batch_size=4, collate_fn=dataset.collate_fn)
    with_weights = []
    mha = trainer.model.dec_layers[0].self_attn.mha
    hook = mha.register_forward_hook(lambda module, args, output: with_weights.append(output[1] is not None))
    try:
        _, attn = trainer._train_epoch(loader)
        trainer._validate_epoch(loader)
    finally:
        hook.remove()
    train_calls, val_calls = with_weights[:len(loader)], with_weights[len(loader):]
    assert train_calls == [False] * (len(loader) - 1) + [True], (
        f"training should ask for attention weights in its last batch only, got {train_calls}")
    assert not any(val_calls), f"validation never reads attention weights, got {val_calls}"
    assert attn is not None and attn.shape[0] == attn.shape[1], "the plotted attention map must be (T, T)"
    bf16 = make_trainer(tmp_path, "bf16")
    assert isinstance(bf16._attention_weights(needed=False), nullcontext), (
        "bf16 training on a CPU should keep the plain attention path (its fused backward is slower)")


def test_auto_keeps_the_fastest_measured_format_and_its_matmul_precision():
    """Injected speeds on each side of a tie (a tie keeps the earlier format, fp32 first), on a
    CPU and a GPU with native bf16: auto keeps the fastest, says every speed and where they came
    from, and runs float32 products as they were measured (TF32 only for fp32+TF32)."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    cases = ((cpu, {"fp32": 100.0, "bf16": 99.0}, torch.float32, "highest"),
             (cpu, {"fp32": 100.0, "bf16": 100.0}, torch.float32, "highest"),
             (cpu, {"fp32": 100.0, "bf16": 101.0}, torch.bfloat16, "highest"),
             (cuda, {"fp32": 50.0, "fp32+TF32": 100.0, "bf16": 99.0}, torch.float32, "high"),
             (cuda, {"fp32": 50.0, "fp32+TF32": 100.0, "bf16": 101.0}, torch.bfloat16, "highest"))
    before = torch.get_float32_matmul_precision()
    try:
        for device, speeds, expected, matmul in cases:
            torch.set_float32_matmul_precision("medium")
            with mock.patch("hw4lib.trainers.precision.cpu_has_native_bf16", return_value=True), \
                    mock.patch("torch.cuda.is_bf16_supported", return_value=True):
                dtype, reason = resolve_precision("auto", device, lambda s=speeds: (s, "SOURCE"))
            assert dtype == expected, f"{speeds} on {device}: chose {dtype}, expected {expected}"
            assert torch.get_float32_matmul_precision() == matmul, (speeds, matmul)
            for name, value in speeds.items():
                assert f"{name} {value:,.0f} tokens/s" in reason, reason
            assert "SOURCE" in reason, f"the reason should say where the speeds came from: {reason}"
    finally:
        torch.set_float32_matmul_precision(before)

    def never():
        raise AssertionError("auto measured where bf16 is not native, or for an explicit format")

    with mock.patch("hw4lib.trainers.precision.cpu_has_native_bf16", return_value=False):
        assert resolve_precision("auto", cpu, never)[0] == torch.float32
    with mock.patch("torch.cuda.is_bf16_supported", return_value=False):
        assert resolve_precision("auto", cuda, never)[0] == torch.float16
    assert resolve_precision("bf16", cuda, never)[0] == torch.bfloat16


def test_each_format_is_measured_under_its_own_matmul_precision():
    """measure_formats times fp32, fp32+TF32 (CUDA only) and bf16 (where native), in that
    order, each with its float32 matmul precision, converts seconds per step to tokens per
    second, and restores the matmul precision. The step timings are injected."""
    seconds = {torch.float32: 0.5, torch.bfloat16: 0.25}
    model = DecoderOnlyTransformer(1, 16, 2, 32, dropout=0.0, max_len=16, num_classes=VOCAB)
    cases = (("cpu", True, [("fp32", "highest"), ("bf16", "highest")]),
             ("cpu", False, [("fp32", "highest")]),
             ("cuda", True, [("fp32", "highest"), ("fp32+TF32", "high"), ("bf16", "highest")]),
             ("cuda", False, [("fp32", "highest"), ("fp32+TF32", "high")]))
    before = torch.get_float32_matmul_precision()
    for device, native, expected in cases:
        timed = []

        def step_seconds(model, batch_size, length, device, dtype, steps):
            timed.append((dtype, torch.get_float32_matmul_precision(), batch_size, length, steps))
            return seconds[dtype]

        with mock.patch("hw4lib.trainers.precision.cpu_has_native_bf16", return_value=native), \
                mock.patch("torch.cuda.is_bf16_supported", return_value=native), \
                mock.patch("hw4lib.trainers.precision.train_step_seconds", step_seconds):
            speeds = measure_formats(model, 4, 10, torch.device(device), steps=3)
        assert list(speeds) == [name for name, _ in expected], (device, native, speeds)
        assert timed == [(FORMATS[name][0], matmul, 4, 10, 3) for name, matmul in expected], timed
        assert all(speeds[name] == 40 / seconds[FORMATS[name][0]] for name in speeds), speeds
        assert torch.get_float32_matmul_precision() == before


SPEEDS = {"fp32": 100.0, "bf16": 150.0}


def measured(speeds: dict, calls: list):
    """A ``measure`` stand-in returning ``speeds``; appends to ``calls`` each time it runs."""
    def measure():
        calls.append(1)
        return dict(speeds)
    return measure


def test_the_measurement_key_tells_apart_what_changes_the_speeds():
    """Alike for two builds of one model; different for another vocabulary, batch shape, torch
    version or device."""
    def model(vocab):
        return DecoderOnlyTransformer(1, 16, 2, 32, dropout=0.0, max_len=16, num_classes=vocab)

    cpu = torch.device("cpu")
    key = measurement_key(model(VOCAB), 4, 8, cpu)
    assert key == measurement_key(model(VOCAB), 4, 8, cpu)
    others = [measurement_key(model(VOCAB + 1), 4, 8, cpu), measurement_key(model(VOCAB), 5, 8, cpu),
              measurement_key(model(VOCAB), 4, 9, cpu)]
    with mock.patch("torch.__version__", "0.0.1"):
        others.append(measurement_key(model(VOCAB), 4, 8, cpu))
    with mock.patch("hw4lib.trainers.precision.device_description", return_value="cpu: another"):
        others.append(measurement_key(model(VOCAB), 4, 8, cpu))
    assert all(other != key for other in others), others
    assert key["device"].startswith("cpu: ") and key["torch"] == torch.__version__, key


def test_the_first_measurement_is_recorded_and_later_runs_read_it(tmp_path):
    key = {"device": "cpu: X", "torch": "2.13.0", "model_sha256": "ab", "batch_size": 4, "length": 8}
    calls = []
    speeds, source = recorded_speeds(tmp_path / "expts", key, measured(SPEEDS, calls))
    records = list((tmp_path / "expts").iterdir())
    assert speeds == SPEEDS and calls == [1] and "measured now" in source, source
    assert len(records) == 1 and records[0].name.startswith("precision-auto-"), records
    assert read_json(records[0]) == {**key, "tokens_per_s": SPEEDS}
    assert str(records[0]) in source, source
    again, source = recorded_speeds(tmp_path / "expts", key, measured({"fp32": 1.0}, calls))
    assert again == SPEEDS and calls == [1], "a recorded measurement must be read, not redone"
    assert f"read from {records[0]}" in source and "delete it" in source, source
    for changed in ({"torch": "2.14.1"}, {"device": "cpu: Y"}, {"model_sha256": "cd"}):
        other, _ = recorded_speeds(tmp_path / "expts", {**key, **changed}, measured({"fp32": 7.0}, calls))
        assert other == {"fp32": 7.0}, f"{changed}: another setting must be measured anew"
    assert len(calls) == 4 and len(list((tmp_path / "expts").iterdir())) == 4


def test_two_runs_measuring_at_once_both_use_the_first_record(tmp_path):
    """A run that finds the record written while it measured uses that record, not its own."""
    key = {"model_sha256": "ab"}

    def measure_while_another_run_records():
        recorded_speeds(tmp_path, key, measured(SPEEDS, []))
        return {"fp32": 500.0, "bf16": 1.0}

    speeds, source = recorded_speeds(tmp_path, key, measure_while_another_run_records)
    assert speeds == SPEEDS and "another run recorded first" in source, (speeds, source)
    assert [path.name for path in tmp_path.iterdir() if path.suffix == ".tmp"] == []


def test_without_hard_links_the_record_is_written_in_place(tmp_path):
    with mock.patch("os.link", side_effect=PermissionError("no hard links here")):
        speeds, source = recorded_speeds(tmp_path, {"a": 1}, measured(SPEEDS, []))
    assert speeds == SPEEDS and [path.suffix for path in tmp_path.iterdir()] == [".json"]
    assert recorded_speeds(tmp_path, {"a": 1}, measured({"fp32": 1.0}, []))[0] == SPEEDS


def test_a_record_that_is_not_one_is_refused_with_the_fix(tmp_path):
    recorded_speeds(tmp_path, {"a": 1}, measured(SPEEDS, []))
    path = next(tmp_path.iterdir())
    for text in ("{not json", '{"a": 1}', '{"tokens_per_s": {}}', '{"tokens_per_s": {"fp64": 1}}'):
        path.write_text(text)
        expect_error(ValueError, [str(path), "delete it"],
                     lambda: recorded_speeds(tmp_path, {"a": 1}, measured(SPEEDS, [])))


def test_the_trainer_reads_auto_s_record_so_every_run_of_a_model_chooses_alike(tmp_path, capsys):
    """Two runs of one config in one experiments folder (the notebook, then ``make train``) on a
    CPU with native bf16: the first measures (fp32 faster) and records; the second would measure
    bf16 faster (a loaded machine) but reads the record and trains in fp32 too. A model of
    another size is measured anew. The step timings are injected."""
    def timings(fp32_s, bf16_s, calls):
        def step_seconds(model, batch_size, length, device, dtype, steps):
            calls.append((batch_size, length))
            return fp32_s if dtype == torch.float32 else bf16_s
        return step_seconds

    def trainer(run_name, step_seconds, model=None):
        with mock.patch("hw4lib.trainers.precision.cpu_has_native_bf16", return_value=True), \
                mock.patch("hw4lib.trainers.precision.train_step_seconds", step_seconds):
            torch.manual_seed(0)
            model = model or DecoderOnlyTransformer(2, 32, 4, 64, dropout=0.0, max_len=32,
                                                    num_classes=VOCAB)
            config = tiny_config(tmp_path, {"precision": "auto"})
            return LMTrainer(model, Tokenizer(), config, run_name, None, device="cpu").precision

    first, second, third = [], [], []
    assert trainer("notebook", timings(0.1, 0.2, first)) == torch.float32
    batch_size = tiny_config(tmp_path).data.batch_size
    assert first == [(batch_size, 32)] * 2, first
    assert "fp32 trained this model fastest" in capsys.readouterr().out
    assert trainer("command-line", timings(0.2, 0.1, second)) == torch.float32
    assert second == [], "the second run measured again instead of reading the record"
    assert "read from" in capsys.readouterr().out
    wider = DecoderOnlyTransformer(2, 64, 4, 64, dropout=0.0, max_len=32, num_classes=VOCAB)
    assert trainer("wider", timings(0.2, 0.1, third), wider) == torch.bfloat16
    assert len(third) == 2, "another model must be measured, not given the first one's record"


def test_a_timed_training_step_leaves_the_model_and_the_random_state_as_they_were():
    from hw4lib.trainers.precision import train_step_seconds

    torch.manual_seed(0)
    model = DecoderOnlyTransformer(1, 16, 2, 32, dropout=0.0, max_len=16, num_classes=VOCAB)
    model.train()  # dropout would draw from torch's generator
    state = copy.deepcopy(model.state_dict())
    random_state = torch.get_rng_state()
    seconds = train_step_seconds(model, 4, 8, torch.device("cpu"), torch.float32, steps=3)
    assert 0 < seconds < 10, seconds
    assert all(torch.equal(state[name], value) for name, value in model.state_dict().items())
    assert torch.equal(torch.get_rng_state(), random_state), (
        "measuring drew from torch's generator: a run that measures would train differently "
        "from one that reads the record")
