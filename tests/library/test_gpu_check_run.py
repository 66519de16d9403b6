# hw4p1: instructor-only
"""The GPU check's steps (hw4lib/gpu_check.py) on a real run on the CPU, read by value: one epoch
of a one-layer copy of the tiny config on a sliver of its data (trained once for the module), the
generators compared on it, its handin packed and loaded as the grader loads it, and the trainer's
pass measured on that config.

Each step is the real function; the only stand-ins are the breakages planted to show a step
fails: a cached scorer whose logits drift, the plain generator handed out as the cached one, a
state dict that unpickles more than tensors. The whole check's command line is
tests/library/test_gpu_check.py; its parts, quickly, tests/library/test_gpu_check_parts.py.
"""
import io
import pickle
import tarfile
from pathlib import Path

import pytest
import torch
import yaml

from hw4lib import gpu_check
from hw4lib.file_io import read_json

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_config(tmp_path_factory) -> Path:
    """The tiny config with one small layer on 1.2% of the data (4 test transcripts: the prompts
    the generators are compared on), seed 0."""
    path = tmp_path_factory.mktemp("config") / "small.yaml"
    path.write_text(f"base: {REPO / 'configs/tiny.yaml'}\nseed: 0\ndata: {{subset: 0.012}}\n"
                    "model: {num_layers: 1, d_model: 32, num_heads: 2, d_ff: 64}\n"
                    "generation: {num_samples: 2}\n")
    return path


@pytest.fixture(scope="module")
def trained(small_config, tmp_path_factory):
    """(folder, run folder, stats): ``train_tiny`` of the small config into ``folder``."""
    folder = tmp_path_factory.mktemp("check")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        patch.setattr(gpu_check, "CONFIG", small_config)
        run_folder, stats = gpu_check.train_tiny(folder, CPU)
    return folder, run_folder, stats


def test_one_epoch_in_auto_precision_in_the_check_s_folder(trained):
    folder, run_folder, stats = trained
    assert run_folder == folder / "expts" / "gpu-check"
    training = yaml.safe_load((run_folder / "config.yaml").read_text())["training"]
    assert {key: training[key] for key in ("epochs", "precision", "device", "progress_bar", "expts_dir")} == {
        "epochs": 1, "precision": "auto", "device": "cpu", "progress_bar": False,
        "expts_dir": str(folder / "expts")}
    (epoch,) = read_json(run_folder / "metrics" / "history.json")
    assert stats == {"epoch_seconds": epoch["epoch_seconds"], "train_tokens": epoch["train"]["num_tokens"],
                     "peak_gpu_memory_mib": None}
    assert stats["epoch_seconds"] > 0 and stats["train_tokens"] > 0, stats


def test_the_generators_agree_on_the_trained_model_and_a_drifting_cache_fails(trained, monkeypatch):
    from hw4lib.decoding import SequenceGenerator
    from hw4lib.model.kv_cache import CachedScorer

    _, run_folder, _ = trained
    gpu_check.check_generators(run_folder, CPU)
    score = CachedScorer.__call__

    def favours_one_token(self, x):
        logits = score(self, x).clone()
        logits[..., 7] += 100.0
        return logits

    monkeypatch.setattr(CachedScorer, "__call__", favours_one_token)
    with pytest.raises(AssertionError, match="^generate_greedy: cached and plain tokens differ$"):
        gpu_check.check_generators(run_folder, CPU)
    monkeypatch.undo()
    import hw4lib.decoding as decoding

    monkeypatch.setattr(decoding, "generator_for_model",
                        lambda model, tokenizer, length, device: SequenceGenerator(
                            model.score, tokenizer, length, device))
    with pytest.raises(AssertionError, match="^got the plain generator$"):
        gpu_check.check_generators(run_folder, CPU)


class Stranger:
    """Not a tensor: a state dict holding one does not load with ``weights_only=True``."""


def test_the_run_packs_and_its_state_dict_loads_as_the_grader_loads_it(trained, tmp_path, monkeypatch):
    import hw4lib.handin as handin

    _, run_folder, _ = trained
    monkeypatch.chdir(REPO)
    gpu_check.check_handin(run_folder, tmp_path)
    with tarfile.open(tmp_path / "handin.tar") as tar:
        names = tar.getnames()
    assert "handin/model_state_dict.pt" in names and "handin/config.yaml" in names, names
    extract = handin.extract_state_dict

    def with_a_stranger(path, config):
        state_dict, checkpoint = extract(path, config)
        weights = torch.load(io.BytesIO(state_dict), weights_only=True)
        buffer = io.BytesIO()
        torch.save({**weights, "stranger": Stranger()}, buffer)
        return buffer.getvalue(), checkpoint

    monkeypatch.setattr(handin, "extract_state_dict", with_a_stranger)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        gpu_check.check_handin(run_folder, tmp_path)


def test_the_trainers_pass_is_measured_on_a_sliver_of_the_configs_training_split(
        small_config, tmp_path, monkeypatch):
    from hw4lib.trainers import throughput
    from hw4lib.trainers.precision import precision_name

    measured = []
    measure = throughput.loop_against_raw_step

    def recorded(trainer, loader, repeats):
        measured.append((trainer, loader, repeats))
        return measure(trainer, loader, repeats)

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(throughput, "loop_against_raw_step", recorded)
    result = gpu_check.measure_training(tmp_path, CPU, small_config)
    ((trainer, loader, repeats),) = measured
    config = trainer.config
    assert repeats == 1 and config.data.subset == 0.007 and config.training.device == "cpu"
    assert not config.training.progress_bar and config.training.expts_dir == str(tmp_path / "speed")
    assert loader.dataset.partition == config.data.train_partition
    assert loader.batch_sampler.shuffle is False, "the same batches in the same order every repeat"
    assert trainer.optimizer is not None and trainer.scheduler is not None
    assert result["batches"] == len(loader) > 0 and result["precision"] == precision_name(trainer.precision)
    assert result["loop_over_raw"] == result["loop_tokens_per_s"] / result["raw_tokens_per_s"] > 0
