# hw4p1: instructor-only
"""Weights compared by what they compute (``autograder.judging.scoring.weights_fingerprint``: the
probe batch's log-probabilities the model child records, ``same_outputs``): a copy reparametrised to
move every tensor (the residual basis, the feed-forward units and each head's dimensions permuted,
a LayerNorm rescaled against the layer after it) is flagged; honest trainings from other seeds
are not; the tolerance is pinned by its value with a hand-made case on each side.

    .venv/bin/python -m pytest -q tests/grader/test_weights_function.py
"""
import numpy as np
import pytest
import torch

from autograder.judging.scoring import grade_model, weights_fingerprint as wf
from hw4lib.data import H4Tokenizer, LMDataset
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from tools.honest_weights import permuted, rescaled
from tests.grader.autograder_helpers import REPO_ROOT

DATA = REPO_ROOT / "hw4_data/hw4p1_data"
MODEL = {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
         "max_len": 128}


def test_the_tolerance_is_pinned_with_a_case_on_each_side():
    """OUTPUT_TOLERANCE by value; probes whose root-mean-square difference is 0.9 and 1.1 times it
    (built by hand: a constant shift of every log-probability) are and are not flagged; another
    probe, or one without outputs, is never compared."""
    assert wf.OUTPUT_TOLERANCE == 0.01
    values = np.random.default_rng(0).normal(-2.0, 1.0, 300)
    initial = {"w": torch.zeros(4)}

    def printed(shift: float, probe: str = "0" * 16) -> str:
        return wf.fingerprint({"w": torch.ones(4)}, initial, (probe, values + shift))

    tolerance = wf.OUTPUT_TOLERANCE
    assert abs(wf.output_distance(values, values + 0.9 * tolerance) - 0.9 * tolerance) < 1e-12
    found = wf.same_outputs({"a": printed(0.0), "near": printed(0.9 * tolerance),
                             "other probe": printed(0.0, "1" * 16),
                             "no outputs": wf.fingerprint({"w": torch.ones(4)}, initial)})
    assert sorted(found) == ["a", "near"], found
    assert found["a"][0][0] == "near" and abs(found["a"][0][1] - 0.9 * tolerance) < 1e-6, found
    assert wf.same_outputs({"a": printed(0.0), "far": printed(1.1 * tolerance)}) == {}
    assert wf.decode(printed(0.0)) is not None and wf.decode_outputs(printed(0.0))[0] == "0" * 16


def trained(seed: int, steps: int = 60) -> DecoderOnlyTransformer:
    """A small model trained for ``steps`` AdamW steps on the public training split from
    ``seed`` (its initialisation and its batches)."""
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    data = LMDataset("train", {"root": str(DATA), "subset": 0.05}, tokenizer)
    torch.manual_seed(seed)
    model = DecoderOnlyTransformer(**MODEL, num_classes=tokenizer.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        indices = torch.randint(0, len(data), (16,), generator=generator).tolist()
        shifted, golden, lengths = data.collate_fn(
            [(s[:MODEL["max_len"]], g[:MODEL["max_len"]]) for s, g in (data[i] for i in indices)])
        logits, _ = model(shifted, lengths)
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), golden,
                                                 ignore_index=tokenizer.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.slow
def test_a_reparametrised_copy_is_flagged_and_other_seeds_are_not():
    """Two honest trainings (seeds 1 and 2) and a copy of the first with 29 of its 30 tensors
    moved, computing the same function (checked on the logits): only the copy's pair is flagged,
    as probed by the model child's own reading of the public test split."""
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    probe = grade_model.read_partition(DATA, tokenizer)
    models = {"one": trained(1), "two": trained(2)}
    copy = DecoderOnlyTransformer(**MODEL, num_classes=tokenizer.vocab_size).eval()
    copy.load_state_dict(permuted(rescaled(models["one"].state_dict()), MODEL["num_heads"]))
    models["copy"] = copy
    tokens = torch.randint(4, tokenizer.vocab_size, (2, 40), generator=torch.Generator()
                           .manual_seed(0))
    with torch.no_grad():
        assert (models["one"](tokens)[0] - copy(tokens)[0]).abs().max() < 1e-4
    state, moved = models["one"].state_dict(), copy.state_dict()
    assert sum(not torch.equal(state[key], moved[key]) for key in state) == len(state) - 1
    initial = grade_model.initial_state(MODEL, tokenizer.vocab_size, 0)
    prints = {name: wf.fingerprint(model.state_dict(), initial, wf.probe_outputs(model, probe))
              for name, model in models.items()}
    found = wf.same_outputs(prints)
    assert sorted(found) == ["copy", "one"], found
    assert found["one"][0][1] < 1e-4, found
    gap = wf.output_distance(wf.decode_outputs(prints["one"])[1],
                             wf.decode_outputs(prints["two"])[1])
    assert gap > 5 * wf.OUTPUT_TOLERANCE, gap
