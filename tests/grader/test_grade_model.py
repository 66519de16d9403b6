# hw4p1: instructor-only
"""Tests of the model grading in process (autograder/judging/scoring/grade_model.py), on a small
hidden set: the perplexity the handed-in weights give, broken configs and state dicts refused,
evaluation batches bounded, and what make handin packs extracted whole.

    .venv/bin/python -m pytest -q tests/grader/test_grade_model.py
"""
import math
import re
import time
from pathlib import Path

import pytest
import torch
import yaml

import numpy as np

from autograder.judging.scoring import grade_model
from autograder.judging.intake.safe_tar import extract_handin
from hw4lib import handin_format
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers import metrics
from tests.grader.autograder_helpers import (TINY_MODEL, alias_bomb_config, copy_reference_mytorch,
                                             deflate_zip, direct_perplexity_char, make_model_handin,
                                             make_run_folder)


HIDDEN_LINES = ["THE CAPTAIN HOISTED THE SAIL", "IT'S A FINE DAY SAID THE MATE",
                "A GULL CRIED OVERHEAD"] * 4


def make_hidden_set(folder: Path, lines: list[str] = HIDDEN_LINES) -> Path:
    """A data root whose partition grade_model.PARTITION holds ``lines``, in their order, as
    ``make autograde`` ships the hidden set."""
    from autograder.build_time.hidden_data import hidden_utterances
    from datagen.build_data import write_split

    write_split(folder / grade_model.PARTITION, hidden_utterances(lines))
    return folder


def test_grade_model_measures_the_handed_in_weights(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    for token_type in ("char", "1k"):
        model = make_model_handin(tmp_path / token_type, token_type)
        result = grade_model.evaluate_handin(tmp_path / token_type, hidden)
        tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
        expected = direct_perplexity_char(model, tokenizer, HIDDEN_LINES)
        assert result["perplexity_char"] == pytest.approx(expected, rel=1e-5), token_type
        assert result["num_chars"] == sum(len(line) for line in HIDDEN_LINES)
        assert result["num_utterances"] == len(HIDDEN_LINES)


def test_grade_model_refuses_broken_configs(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    make_model_handin(tmp_path / "h")
    good = yaml.safe_load((tmp_path / "h/config.yaml").read_text())
    huge = {**TINY_MODEL, "num_layers": 48, "d_model": 4096, "num_heads": 32, "d_ff": 16384}
    cases = [
        ({**good, "tokenization": {"token_type": "50k"}}, "token_type"),
        ({**good, "tokenization": None}, "token_type"),
        ({**good, "model": {**TINY_MODEL, "activation": "relu"}}, "model.activation' is unknown"),
        ({**good, "model": {k: v for k, v in TINY_MODEL.items() if k != "d_ff"}},
         "model.d_ff' is missing"),
        ({**good, "model": {**TINY_MODEL, "d_model": "16"}},
         "model.d_model': input should be a valid integer"),
        ({**good, "model": {**TINY_MODEL, "num_layers": True}},
         "model.num_layers': input should be a valid integer"),
        ({**good, "model": {**TINY_MODEL, "d_model": 10**6}},
         r"model.d_model' is 1000000, outside the grader's limits \[1, 4096\]"),
        ({**good, "model": huge}, "the grader builds at most 30,000,000"),
        ({**good, "model": {**TINY_MODEL, "num_heads": 3}}, "divisible"),
        (["not", "a", "mapping"], "mapping"),
    ]
    for config, message in cases:
        (tmp_path / "h/config.yaml").write_text(yaml.safe_dump(config))
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden)
    for bomb in (alias_bomb_config(), alias_bomb_config().replace("token_type: char",
                                                                  "token_type: *a8")):
        (tmp_path / "h/config.yaml").write_text(bomb)
        start = time.monotonic()
        with pytest.raises(grade_model.GradingError, match="must be one of|valid integer") as error:
            grade_model.evaluate_handin(tmp_path / "h", hidden)
        assert len(str(error.value)) < 500 and time.monotonic() - start < 10, (
            f"an alias bomb must give a short error quickly, got {len(str(error.value))} "
            f"characters after {time.monotonic() - start:.1f} s")
    (tmp_path / "h/config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(grade_model.GradingError, match="not valid YAML"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)
    make_model_handin(tmp_path / "short", model_config={**TINY_MODEL, "max_len": 20})
    with pytest.raises(grade_model.GradingError, match="max_len is 20"):
        grade_model.evaluate_handin(tmp_path / "short", hidden)


def test_grade_model_refuses_broken_state_dicts(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    state = make_model_handin(tmp_path / "h").state_dict()
    weights = tmp_path / "h/model_state_dict.pt"

    class RunsCode:
        """Unpickling this would create the marker file: weights_only must refuse it."""

        def __reduce__(self):
            return (open, (str(tmp_path / "pickle_ran_code"), "w"))

    renamed = {("renamed." + k if k.startswith("norm.") else k): v for k, v in state.items()}
    nan_bias = torch.full_like(state["final_linear.bias"], math.nan)
    cases = [
        ({**state, "payload": RunsCode()}, "weights_only"),
        (renamed, r"missing norm\.weight .*DecoderOnlyTransformer\.norm \(nn\.LayerNorm\)"),
        ({**state, "extra.weight": torch.zeros(1)}, r"unexpected extra\.weight \[1\]"),
        ({**state, "final_linear.bias": torch.zeros(7)},
         r"wrong shape for final_linear\.bias: expected \[\d+\], got \[7\]"),
        ({k: v for k, v in state.items() if k != "final_linear.bias"},
         r"missing final_linear\.bias .*DecoderOnlyTransformer\.final_linear \(nn\.Linear\)"),
        ({k: v for k, v in state.items() if ".ffn.norm." not in k},
         r"missing dec_layers\.0\.ffn\.norm\.weight .*FeedForwardLayer\.norm"),
        ({"model_state_dict": state, "epoch": 3}, re.escape("model.state_dict()")),
        ([torch.zeros(2)], re.escape("model.state_dict()")),
        ({**state, "final_linear.bias": nan_bias}, "NaN"),
    ]
    for payload, message in cases:
        torch.save(payload, weights)
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden)
    assert not (tmp_path / "pickle_ran_code").exists()
    weights.write_bytes(b"not a torch file")
    with pytest.raises(grade_model.GradingError, match="not the zip file torch.save writes"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)
    # torch.save's zip with its entries deflated: refused before anything is inflated
    torch.save(state, weights)
    deflate_zip(weights)
    with pytest.raises(grade_model.GradingError, match="compressed entries"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)


def test_evaluation_batches_bound_attention_and_feed_forward_activations():
    class Lengths:  # what the evaluation loader reads of an LMDataset
        def __init__(self, lengths):
            self.transcripts_golden = [[0] * n for n in lengths]
            self.text_max_len = max(lengths)

        def __len__(self):
            return len(self.transcripts_golden)

        def collate_fn(self, batch):
            return batch

    lengths = [int(n) for n in np.random.default_rng(0).integers(1, 2000, 300)]
    for num_heads, width in ((64, 16), (1, 32768), (4, 1024), (1, 1)):
        loader = grade_model.evaluation_loader(Lengths(lengths), num_heads, width)
        batches = list(loader.batch_sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths))), (
            "every transcript must be evaluated exactly once")
        assert max(map(len, batches)) <= metrics.MAX_BATCH_SIZE, (
            f"{num_heads} heads: expected batches of at most {metrics.MAX_BATCH_SIZE}, "
            f"got one of {max(map(len, batches))}")
        for batch in batches:
            longest = max(lengths[i] for i in batch)
            largest = len(batch) * longest * max(num_heads * longest, width)
            assert len(batch) == 1 or largest <= metrics.ACTIVATION_BUDGET, (
                f"{num_heads} heads, width {width}: a batch of {len(batch)} x {longest} holds "
                f"{largest} activations, over {metrics.ACTIVATION_BUDGET}")
        # batches of similar lengths: sorted by length, each batch holds a contiguous run
        ordered = [lengths[i] for batch in batches for i in batch]
        assert ordered == sorted(lengths), f"{num_heads} heads: batches are not length-sorted"


def test_what_make_handin_packs_the_grader_extracts_whole(tmp_path):
    """The packer and the grader share hw4lib.handin_format: every member of a packed handin is
    extracted, with no note; and a handin with every member at its limit fits MAX_TAR_BYTES."""
    from hw4lib.handin import pack

    student = tmp_path / "student"
    copy_reference_mytorch(student)
    make_run_folder(student, DecoderOnlyTransformer(**TINY_MODEL, num_classes=34).state_dict(),
                    reported_ppl=3.0)
    members = pack(student, "run", student / "handin.tar")
    result = extract_handin(student / "handin.tar", tmp_path / "out")
    assert not result.notes, f"expected a packed handin to extract with no note, got {result.notes}"
    packed, extracted = {name for name, _ in members}, {f"handin/{name}" for name in result.files}
    assert extracted == packed, (
        f"expected every packed member extracted; packed only: {sorted(packed - extracted)}, "
        f"extracted only: {sorted(extracted - packed)}")
    largest = (handin_format.MAX_STATE_DICT_BYTES + handin_format.MAX_MYTORCH_BYTES
               + len(handin_format.RUN_FILES) * handin_format.MAX_RUN_FILE_BYTES
               + handin_format.MAX_MEMBERS * 2 * 512)  # a header and padding per member
    assert largest <= handin_format.MAX_TAR_BYTES, (
        f"a handin within every member limit may take {largest} bytes, over MAX_TAR_BYTES "
        f"({handin_format.MAX_TAR_BYTES})")
