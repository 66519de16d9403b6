# hw4p1: instructor-only
"""A side feature of training never ends a run: samples, attention maps, curves, wandb.

Run: ``.venv/bin/python -m pytest -q tests/library/test_training_extras.py``. Each test trains a
one-layer model for two epochs on a few transcripts written to a temporary data folder, with the
real tokenizer, ``LMDataset`` and ``LMTrainer`` (the PNGs are not drawn, to keep it fast), and
breaks one extra: a validation split too small for the samples, a plot that raises (as a full disk
would), a wandb that cannot start or log. The run must finish with its metrics and checkpoints, and
say in one line what it skipped.
"""
import contextlib
import io
import json
import random
import sys
import types
from unittest import mock

import numpy as np
import pytest
import torch
import yaml

from tests.library.small_trainer import TRAIN_TEXTS, char_tokenizer, small_trainer, write_split
from tests.tiny_config import tiny_config, tiny_yaml


LONG_TEXT = "THE MILLER WALKED DOWN TO THE RIVER"


def _train(trainer, loaders, epochs=2) -> tuple[str, str]:
    """Train and return what it printed on (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        trainer.train(*loaders, epochs=epochs)
    return out.getvalue(), err.getvalue()


def _assert_run_finished(trainer, epochs=2) -> None:
    from hw4lib.trainers.base_trainer import LAST_CHECKPOINT_NAME

    root = trainer.expt_root
    history = json.loads((root / "metrics" / "history.json").read_text())
    assert [record["epoch"] for record in history] == list(range(1, epochs + 1)), \
        f"expected metrics of epochs 1..{epochs}, got epochs {[r['epoch'] for r in history]}"
    checkpoint = torch.load(root / "checkpoints" / LAST_CHECKPOINT_NAME, weights_only=False)
    assert checkpoint["epoch"] == epochs, f"expected the last checkpoint at epoch {epochs}, got {checkpoint['epoch']}"


def _lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_fit_prompt_request_matches_a_brute_force_count():
    from hw4lib.data import LMDataset
    from hw4lib.trainers.generation_settings import fit_prompt_request

    class Lengths:
        """Only what sample_prompts reads: transcripts of the given token counts."""

        partition = "val"

        def __init__(self, counts):
            self.transcripts_golden = [[5] * count + [2] for count in counts]
            self.transcripts_shifted = [[1] + [5] * count for count in counts]
            self.length, self.text_max_len = len(counts), max(counts) + 1

        sample_prompts = LMDataset.sample_prompts

    draw = random.Random(0)
    for _ in range(200):
        counts = [draw.randint(1, 12) for _ in range(draw.randint(1, 6))]
        asked_count, asked_length = draw.randint(1, 5), draw.randint(1, 10)
        # Independent truth: a transcript of c tokens gives a prompt of p tokens when c > p.
        expected = (0, 0)
        for count in range(asked_count, 0, -1):
            fitting = [p for p in range(asked_length, 0, -1) if sum(c > p for c in counts) >= count]
            if fitting:
                expected = (count, fitting[0])
                break
        got = fit_prompt_request(Lengths(counts), asked_count, asked_length, seed=0)
        assert got == expected, (f"token counts {counts}, asked ({asked_count}, {asked_length}): "
                                 f"expected {expected}, got {got}")


def test_one_validation_transcript_gives_one_sample_and_training_goes_on(tmp_path):
    trainer, loaders = small_trainer(tmp_path, [LONG_TEXT])
    out, _ = _train(trainer, loaders)
    _assert_run_finished(trainer)
    notes = _lines(out, "note:")
    assert len(notes) == 1 and "1 of the 3 prompts" in notes[0], \
        f"expected one note saying 1 of the 3 prompts, got {notes}"
    for epoch in (1, 2):
        samples = json.loads((trainer.text_dir / f"val_greedy_epoch{epoch:03d}.json").read_text())
        assert [s["prompt"] for s in samples] == [LONG_TEXT[:8]], \
            f"epoch {epoch}: expected one prompt {LONG_TEXT[:8]!r}, got {[s['prompt'] for s in samples]}"


def test_short_validation_transcripts_give_shorter_prompts(tmp_path):
    trainer, loaders = small_trainer(tmp_path, ["NO", "YES SIR", "OK"])
    out, _ = _train(trainer, loaders)
    _assert_run_finished(trainer)
    notes = _lines(out, "note:")
    assert len(notes) == 1 and "3 prompts (prompt length 1 instead of 8)" in notes[0], \
        f"expected one note about 3 prompts of 1 token, got {notes}"
    samples = json.loads((trainer.text_dir / "val_greedy_epoch002.json").read_text())
    assert sorted(s["prompt"] for s in samples) == ["N", "O", "Y"], \
        f"expected the one-character prompts N, O, Y, got {[s['prompt'] for s in samples]}"


def test_no_usable_validation_transcript_means_no_samples(tmp_path):
    trainer, loaders = small_trainer(tmp_path, ["A", "I"])
    out, _ = _train(trainer, loaders)
    _assert_run_finished(trainer)
    notes = _lines(out, "note:")
    assert len(notes) == 1 and "no val transcript is long enough" in notes[0], \
        f"expected one note saying there are no samples, got {notes}"
    assert not list(trainer.text_dir.iterdir()), \
        f"expected no sample files, got {[p.name for p in trainer.text_dir.iterdir()]}"


def _broken(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_a_failing_map_curve_or_sample_is_reported_and_skipped(tmp_path):
    # Each extra in turn raises what a full disk raises; the others and the run must go on.
    for method, named, still_written in (
            ("_save_attention_plot", "attention map", "text/val_greedy_epoch002.json"),
            ("_plot_curves", "curves", "metrics/epoch_002.json"),
            ("generate", "validation samples", "metrics/epoch_002.json")):
        trainer, loaders = small_trainer(tmp_path / method, [LONG_TEXT, LONG_TEXT[:-4]])
        setattr(trainer, method, _broken)
        _, err = _train(trainer, loaders)
        _assert_run_finished(trainer)
        warnings = _lines(err, "warning:")
        assert len(warnings) == 2 and all(named in w and "No space left" in w for w in warnings), \
            f"{method} failing: expected one warning per epoch naming the {named}, got {warnings}"
        assert (trainer.expt_root / still_written).is_file(), \
            f"{method} failing: expected {still_written} to be written all the same"


class _FakeWandb(types.ModuleType):
    """A ``wandb`` whose init, log or finish raise, as an offline run whose folder cannot be written."""

    def __init__(self, fail_at: str):
        super().__init__("wandb")
        self.fail_at = fail_at

    def init(self, **kwargs):
        if self.fail_at == "init":
            raise RuntimeError("wandb: cannot write the offline run folder")
        return types.SimpleNamespace(log=_broken if self.fail_at == "log" else lambda *a, **k: None,
                                     finish=_broken)


def test_wandb_that_cannot_start_or_log_is_reported_and_skipped(tmp_path):
    for fail_at, expected in (("init", "starting wandb"), ("log", "logging epoch")):
        err = io.StringIO()
        with mock.patch.dict(sys.modules, {"wandb": _FakeWandb(fail_at)}), contextlib.redirect_stderr(err):
            trainer, loaders = small_trainer(tmp_path / fail_at, [LONG_TEXT], use_wandb=True)
            out, train_err = _train(trainer, loaders)
            trainer.cleanup()
        _assert_run_finished(trainer)
        warnings = _lines(err.getvalue() + train_err, "warning:")
        assert any(expected in w for w in warnings), \
            f"wandb failing at {fail_at}: expected a warning with {expected!r}, got {warnings}"
        assert trainer.wandb_run is None, "cleanup leaves no wandb run behind, even when finish fails"


def test_an_unknown_generation_method_is_refused_naming_the_choices():
    from hw4lib.config import DECODING_METHODS, ConfigError, decoding_settings

    for method in DECODING_METHODS:
        assert decoding_settings({"method": method}).method == method
    assert decoding_settings({}).method == "greedy", "a run that names no method is greedy"
    for method in ("top_k", "Greedy", ""):
        with pytest.raises(ConfigError) as error:
            decoding_settings({"method": method})
        message = str(error.value)
        assert "generation.method" in message and all(m in message for m in DECODING_METHODS), (
            f"expected an error naming generation.method and each of {DECODING_METHODS}, "
            f"got {message!r}")


def test_generation_settings_are_checked_against_the_test_split(tmp_path):
    from hw4lib.data import LMDataset
    from hw4lib.train import ConfigError, check_generation_settings

    write_split(tmp_path / "test", [LONG_TEXT, "SHORT ONE", LONG_TEXT + " AGAIN"])
    test_set = LMDataset("test", {"root": str(tmp_path), "subset": 1.0}, char_tokenizer())
    generation = {"num_samples": 2, "prompt_length": 10, "greedy": {}, "beam": {"beam_width": 2}}
    check_generation_settings(tiny_config(tmp_path, generation=generation), test_set)  # two are long enough
    generation["beam"]["num_samples"] = 3
    with pytest.raises(ConfigError, match=r"generation\.beam.*test.*cannot draw 3 prompts"):
        check_generation_settings(tiny_config(tmp_path, generation=generation), test_set)


def test_the_trainer_validates_a_mapping_once_and_refuses_a_bad_key_before_the_run_folder(tmp_path):
    from hw4lib.config import Config, ConfigError
    from hw4lib.model import DecoderOnlyTransformer
    from hw4lib.trainers import LMTrainer

    model = DecoderOnlyTransformer(num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0,
                                   max_len=64, num_classes=8)
    config = tiny_yaml()
    config["training"].update(expts_dir=str(tmp_path / "expts"), progress_bar=False)
    trainer = LMTrainer(model, char_tokenizer(), config, "run", None, device="cpu")
    assert isinstance(trainer.config, Config) and trainer.config.training.grad_clip_norm == 1.0, (
        "a mapping is validated on entry, defaults filled in, and kept typed")
    written = yaml.safe_load((tmp_path / "expts" / "run" / "config.yaml").read_text())
    assert written == trainer.config.dump(), "config.yaml holds the validated config"
    config["training"]["label_smoothing"] = 1.5
    with pytest.raises(ConfigError, match=r"training\.label_smoothing"):
        LMTrainer(model, char_tokenizer(), config, "refused", None, device="cpu")
    assert not (tmp_path / "expts" / "refused").exists(), "a refused config creates no run folder"


def test_checking_a_loader_leaves_every_random_state_as_it_found_it(tmp_path):
    from hw4lib.data import verify_dataloader
    from hw4lib.data.random_state import capture_rng_states

    _, (train_loader, _) = small_trainer(tmp_path, TRAIN_TEXTS)
    shuffled = torch.utils.data.DataLoader(train_loader.dataset, batch_size=4, shuffle=True,
                                           collate_fn=train_loader.dataset.collate_fn)
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    before = capture_rng_states()
    with contextlib.redirect_stdout(io.StringIO()):
        verify_dataloader(shuffled)
    after = capture_rng_states()
    assert torch.equal(before["torch"], after["torch"]), "verify_dataloader moved torch's RNG"
    assert before["python"] == after["python"], "verify_dataloader moved Python's RNG"
    assert all(np.array_equal(a, b) for a, b in zip(before["numpy"], after["numpy"])), \
        "verify_dataloader moved numpy's RNG"
    next(iter(shuffled))  # the premise: drawing a batch does move torch's RNG
    assert not torch.equal(after["torch"], torch.get_rng_state())


def test_a_run_folder_that_holds_a_run_is_refused_unless_resumed(tmp_path):
    from hw4lib.train import default_run_name
    from hw4lib.trainers import RunFolderExistsError
    from hw4lib.trainers.base_trainer import LAST_CHECKPOINT_NAME

    trainer, loaders = small_trainer(tmp_path, TRAIN_TEXTS, samples_every=0)
    _train(trainer, loaders, epochs=1)
    config_yaml = (trainer.expt_root / "config.yaml").read_bytes()
    with pytest.raises(RunFolderExistsError, match=r"already holds a run.*--resume .*checkpoint-last"):
        small_trainer(tmp_path / "again", TRAIN_TEXTS, expts_dir=str(tmp_path / "expts"))
    assert (trainer.expt_root / "config.yaml").read_bytes() == config_yaml, "the old run was written into"
    last = trainer.expt_root / "checkpoints" / LAST_CHECKPOINT_NAME
    resumed, loaders = small_trainer(tmp_path / "resumed", TRAIN_TEXTS, samples_every=0,
                                expts_dir=str(tmp_path / "expts"), resume_from=str(last))
    resumed.load_checkpoint(last)
    _train(resumed, loaders, epochs=2)
    _assert_run_finished(resumed, epochs=2)
    config = tiny_config(tmp_path, {}, name="same")  # two runs started in the same second
    with mock.patch("time.strftime", return_value="20260101-000000"):
        (tmp_path / "expts" / default_run_name(config)).mkdir()
        assert default_run_name(config) == "same-20260101-000000-2"


def test_ctrl_c_keeps_the_last_complete_epoch_and_says_how_to_resume(tmp_path):
    from hw4lib.handin_format import METRICS_FILE
    from hw4lib.trainers import TrainingInterrupted
    from hw4lib.trainers.base_trainer import LAST_CHECKPOINT_NAME

    trainer, loaders = small_trainer(tmp_path, TRAIN_TEXTS, samples_every=0)
    (trainer.expt_root / METRICS_FILE).write_text("{}")  # results of earlier weights go stale
    validate, calls = trainer._validate_epoch, []

    def interrupted_in_epoch_2(loader):
        calls.append(loader)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return validate(loader)

    trainer._validate_epoch = interrupted_in_epoch_2
    last = trainer.expt_root / "checkpoints" / LAST_CHECKPOINT_NAME
    with pytest.raises(TrainingInterrupted) as stop:
        _train(trainer, loaders, epochs=3)
    message = str(stop.value)
    assert f"the last complete epoch (1) is saved in {last}" in message, message
    assert f"--resume {last}" in message and "make handin skips it" in message, message
    assert isinstance(stop.value, KeyboardInterrupt), "it must still stop whatever runs the trainer"
    assert torch.load(last, weights_only=False)["epoch"] == 1
    assert not (trainer.expt_root / METRICS_FILE).exists(), "stale test results must go"

    early, loaders = small_trainer(tmp_path / "early", TRAIN_TEXTS, samples_every=0)
    early._validate_epoch = lambda loader: (_ for _ in ()).throw(KeyboardInterrupt())
    with pytest.raises(TrainingInterrupted, match="no epoch completed, so there is nothing to resume"):
        _train(early, loaders, epochs=2)


def test_the_command_line_reports_an_interrupt_and_a_taken_run_name(tmp_path, capsys):
    from hw4lib import train
    from hw4lib.trainers import RunFolderExistsError, TrainingInterrupted

    for raised, code, said in ((TrainingInterrupted("stopped during training; ..."), 130,
                                "interrupted: stopped during training"),
                               (KeyboardInterrupt(), 130, "interrupted; the run did not finish"),
                               (RunFolderExistsError("run folder x already holds a run"), 1,
                                "error: run folder x already holds a run")):
        with mock.patch.object(train, "run", side_effect=raised):
            assert train.main(["--config", "configs/tiny.yaml"]) == code
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err
