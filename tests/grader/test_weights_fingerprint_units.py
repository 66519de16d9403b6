# hw4p1: instructor-only
"""The weights fingerprint's parts one by one (autograder/judging/scoring/weights_fingerprint.py),
on small tensors built here: a fingerprint read back at exactly its size limit and one float
past it, cut short, or not finite; the untrained edge at exactly UNTRAINED; each tolerance
(shared weights, same outputs) at exactly a pair's distance and one float below it; which pairs
compare; the probe read in eval mode over its first transcripts and tokens. Expected values are
computed by hand or with numpy/torch here.

    .venv/bin/python -m pytest -q -n 0 tests/grader/test_weights_fingerprint_units.py
"""
import base64
import hashlib
import zlib

import numpy as np
import pytest
import torch

from autograder.judging.scoring import weights_fingerprint as wf


def raw_text(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data)).decode()


def test_a_packed_text_is_read_back_up_to_4_mib_and_no_further():
    at_limit = np.zeros(2**20, dtype=np.float32)  # 4 MiB of float32
    assert len(wf.unpacked(wf.packed(at_limit))) == 2**20
    assert wf.unpacked(wf.packed(np.zeros(2**20 + 1))) is None


@pytest.mark.parametrize("text", [
    "", raw_text(b""), raw_text(b"abc"), raw_text(np.float32([1, np.nan]).tobytes()),
    raw_text(np.float32([np.inf]).tobytes()), "not base64!",
    base64.b64encode(zlib.compress(np.float32([1, 2]).tobytes())[:-3]).decode()])
def test_a_text_that_is_not_packed_finite_values_is_none(text):
    assert wf.unpacked(text) is None


def test_a_packed_text_keeps_its_values():
    assert wf.unpacked(wf.packed(np.float32([1.5, -2.0]))).tolist() == [1.5, -2.0]


def test_a_fingerprint_is_read_only_whole_and_carries_outputs_only_when_it_has_them():
    sketches = np.arange(2 * 2 * wf.SKETCH_WIDTH, dtype=np.float32)
    text = f"wf1:{'0' * 16}:{wf.packed(sketches)}"
    arch, decoded = wf.decode(text)
    assert (arch, decoded.shape) == ("0" * 16, (2, 2, wf.SKETCH_WIDTH))
    assert decoded[1, 0, 0] == 2 * wf.SKETCH_WIDTH
    assert wf.decode(f"wf1:{'0' * 16}:{wf.packed(sketches[:-1])}") is None
    assert wf.decode_outputs(text) is None
    assert wf.decode_outputs("") is None and wf.decode("edited") is None
    assert wf.decode(f"wf1:{'0' * 16}:{wf.packed(sketches[:32])}") is None  # half a tensor
    assert wf.unpacked(wf.packed(sketches) + "!") is None  # a character base64 has not
    probe, outputs = wf.decode_outputs(f"{text}:{'1' * 16}:{wf.packed(np.float32([-0.5]))}")
    assert (probe, outputs.tolist()) == ("1" * 16, [-0.5])


@pytest.mark.parametrize("weights, start, fraction", [
    ([0.0, 0.0], [1.0, 0.0], 0.0), ([3.0, 4.0], [0.0, 0.0], 1.0), ([2.0, 0.0], [1.0, 0.0], 0.0),
    ([0.0, 2.0], [1.0, 0.0], 1.0), ([1.0, 1.0], [2.0, 0.0], 2**-0.5)])
def test_the_learned_fraction_is_the_part_beyond_the_start_s_direction(weights, start, fraction):
    found = wf.learned_fraction(torch.tensor(weights, dtype=torch.float64),
                                torch.tensor(start, dtype=torch.float64))
    assert found == pytest.approx(fraction, abs=1e-15)


@pytest.mark.parametrize("second, trained", [
    (0.0001000000005, False),  # learned fraction exactly UNTRAINED (1e-4)
    (0.0001000000010, True), (0.0001, False)])
def test_a_tensor_that_learned_at_most_untrained_gets_zero_sketches(second, trained):
    start = torch.tensor([1.0, 0.0], dtype=torch.float64)
    weights = torch.tensor([1.0, second], dtype=torch.float64)
    assert (wf.learned_fraction(weights, start) > 1e-4) is trained
    sketches = wf.decode(wf.fingerprint({"w": weights}, {"w": start}))[1]
    assert bool(np.abs(sketches).sum() > 0) is trained


def test_a_sketch_is_the_same_in_every_run_so_an_earlier_grades_csv_still_compares():
    """The buckets and signs of the key 'x': 32 buckets, fixed by the key's sha256."""
    sketches = wf.sketch("x", 2.0 ** torch.arange(8.0))
    assert sketches.shape == (1, 32)
    assert {index: value for index, value in enumerate(sketches[0].tolist()) if value} == {
        5: -64.0, 7: 128.0, 8: 32.0, 19: -6.0, 21: 4.0, 25: -1.0, 31: 16.0}
    text = wf.fingerprint({"w": torch.tensor([0.0, 1.0])}, {"w": torch.tensor([1.0, 0.0])})
    assert wf.decode(text)[1].shape == (1, 2, 32)


def test_the_architecture_names_each_key_and_shape_in_key_order():
    expected = hashlib.sha256(b"a:2x3;b:").hexdigest()[:16]
    assert wf.architecture({"b": (), "a": (2, 3)}) == expected


def handin_print(seed: int, noise: float = 0.0, outputs=None) -> str:
    """A fingerprint of three 200-value tensors trained from a shared start; ``noise``: a
    fraction of a second, independent direction."""
    start = {f"t{i}": torch.ones(200, dtype=torch.float64) for i in range(3)}
    learned = torch.Generator().manual_seed(0)
    other = torch.Generator().manual_seed(seed)
    state = {key: value + torch.randn(200, generator=learned, dtype=torch.float64)
             + noise * torch.randn(200, generator=other, dtype=torch.float64)
             for key, value in start.items()}
    return wf.fingerprint(state, start, outputs)


def test_shared_weights_take_a_pair_at_exactly_the_tolerance_and_not_one_float_below():
    prints = {"a": handin_print(1), "b": handin_print(2, 0.01), "c": handin_print(3, 5.0)}
    gap = wf.distance(wf.decode(prints["a"])[1], wf.decode(prints["b"])[1])
    assert 0 < gap < wf.TOLERANCE
    assert wf.shared_weights(prints, gap) == {"a": [("b", gap)], "b": [("a", gap)]}
    assert wf.shared_weights(prints, float(np.nextafter(gap, 0))) == {}
    copy = {"a": prints["a"], "z": prints["a"], "b": prints["b"]}  # nearest first, not by name
    assert wf.shared_weights(copy)["a"] == [("z", 0.0), ("b", gap)]


def test_a_pair_that_shares_no_trained_tensor_has_no_distance():
    start = {"w": torch.ones(4, dtype=torch.float64)}
    trained = wf.decode(wf.fingerprint({"w": torch.tensor([1.0, 2.0, 3.0, 4.0])}, start))[1]
    untrained = wf.decode(wf.fingerprint({"w": torch.ones(4) * 2}, start))[1]
    assert wf.distance(trained, untrained) is None
    prints = {"a": wf.fingerprint({"w": torch.tensor([1.0, 2.0, 3.0, 4.0])}, start),
              "b": wf.fingerprint({"w": torch.ones(4) * 2}, start)}
    assert wf.shared_weights(prints, 1.0) == {}


def test_same_outputs_take_a_pair_at_exactly_the_tolerance_and_only_probed_alike():
    def probed(name: str, values: list[float]) -> str:
        return handin_print(1, outputs=(name, np.float32(values)))

    prints = {"a": probed("a" * 16, [0.0, 0.0]), "b": probed("a" * 16, [0.5, -0.5]),
              "c": probed("a" * 16, [0.25, -0.25]), "d": probed("b" * 16, [0.5, -0.5]),
              "e": probed("a" * 16, [0.5]), "f": handin_print(1)}
    assert wf.same_outputs(prints, 0.5) == {
        "a": [("c", 0.25), ("b", 0.5)], "b": [("c", 0.25), ("a", 0.5)],
        "c": [("a", 0.25), ("b", 0.25)]}
    assert wf.same_outputs(prints, float(np.nextafter(0.5, 0))) == {
        "a": [("c", 0.25)], "b": [("c", 0.25)], "c": [("a", 0.25), ("b", 0.25)]}
    assert wf.output_distance(np.float32([0.0, 0.0]), np.float32([0.5, -0.5])) == 0.5


class Probe:
    """An LMDataset's fields that probe_outputs reads: ``count`` transcripts of ``length``
    tokens, the i-th shifted (i, i+1, ...) and golden one ahead, padded with 0."""

    pad_token = 0

    def __init__(self, count: int, length: int):
        self.transcripts_shifted = [[(i + j) % 7 + 1 for j in range(length)]
                                    for i in range(count)]
        self.transcripts_golden = [row[1:] + [1] for row in self.transcripts_shifted]

    def __len__(self) -> int:
        return len(self.transcripts_shifted)


class Model(torch.nn.Module):
    """Logits from an embedding, halved in training mode, so that eval mode is seen."""

    max_len = 100

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 8)

    def forward(self, tokens, lengths):
        logits = self.embed(tokens)
        return (logits / 2 if self.training else logits), None


def expected_outputs(model: Model, probe: Probe, transcripts: int, tokens: int) -> np.ndarray:
    """The log-probabilities of each golden token, transcript by transcript, in eval mode."""
    values = []
    for shifted, golden in zip(probe.transcripts_shifted[:transcripts],
                               probe.transcripts_golden[:transcripts]):
        logits = model.embed(torch.tensor(shifted[:tokens])).double()
        values += torch.log_softmax(logits, -1)[torch.arange(len(golden[:tokens])),
                                                torch.tensor(golden[:tokens])].tolist()
    return np.array(values)


@pytest.mark.parametrize("count, length, max_len, transcripts, tokens", [
    (10, 70, 100, 8, 64), (8, 64, 100, 8, 64), (3, 20, 10, 3, 10)])
def test_the_probe_reads_the_first_transcripts_and_tokens_in_eval_mode(count, length, max_len,
                                                                       transcripts, tokens):
    torch.manual_seed(0)
    model, probe = Model(), Probe(count, length)
    model.max_len = max_len
    name, outputs = wf.probe_outputs(model, probe)
    assert model.training  # put back
    with torch.no_grad():
        model.eval()
        assert outputs == pytest.approx(expected_outputs(model, probe, transcripts, tokens),
                                        abs=1e-12)
    assert len(name) == 16 and name == wf.probe_outputs(model, Probe(count, length))[0]


def test_the_probe_s_name_and_outputs_skip_the_padding_of_shorter_transcripts():
    torch.manual_seed(0)
    model, probe = Model(), Probe(2, 6)
    probe.transcripts_shifted[1] = probe.transcripts_shifted[1][:3]
    probe.transcripts_golden[1] = probe.transcripts_golden[1][:3]
    name, outputs = wf.probe_outputs(model.eval(), probe)
    with torch.no_grad():
        assert outputs == pytest.approx(expected_outputs(model, probe, 2, 64), abs=1e-12)
    longer = Probe(2, 6)
    longer.transcripts_shifted[1] = longer.transcripts_shifted[1][:4]
    longer.transcripts_golden[1] = longer.transcripts_golden[1][:4]
    assert wf.probe_outputs(model, longer)[0] != name


def test_a_full_cache_of_pairs_is_emptied_without_losing_a_pair(monkeypatch):
    prints = {"a": handin_print(1), "b": handin_print(2, 0.01), "c": handin_print(3, 0.01)}
    expected = wf.shared_weights(prints)
    assert sorted(expected) == ["a", "b", "c"]
    monkeypatch.setattr(wf, "MAX_CACHED_PAIRS", 0)
    wf._PAIRS.clear()
    wf.shared_weights({"a": prints["a"], "b": prints["b"]})  # caches (a, b) only
    assert wf.shared_weights(prints) == expected


def test_a_tensor_whose_learned_part_lies_in_both_initialisations_is_left_out_of_the_median():
    """'w' of the first handin learned exactly the second's start (no part of its own left):
    only 'x', a copy (distance 0), is compared."""
    first = wf.fingerprint({"w": torch.tensor([1.0, 1.0, 0.0]), "x": torch.tensor([1.0, 2.0, 3.0])},
                           {"w": torch.tensor([1.0, 0.0, 0.0]), "x": torch.tensor([3.0, 2.0, 1.0])})
    second = wf.fingerprint({"w": torch.tensor([0.0, 1.0, 1.0]), "x": torch.tensor([1.0, 2.0, 3.0])},
                            {"w": torch.tensor([0.0, 1.0, 0.0]), "x": torch.tensor([3.0, 2.0, 1.0])})
    assert wf.distance(wf.decode(first)[1], wf.decode(second)[1]) == 0.0
    assert wf.distance(wf.decode(second)[1], wf.decode(first)[1]) == 0.0


def test_a_tensor_initialised_at_zero_is_compared_and_one_untrained_skips_only_itself():
    """'a' (untrained, sorted first) gets zero sketches; 'b', a bias started at 0, and 'w' are
    sketched and compared: 'b' copied (0), 'w' independent (1): the median is 0.5."""
    start = {"a": torch.ones(3), "b": torch.zeros(3), "w": torch.tensor([1.0, 0.0, 0.0])}
    first = wf.fingerprint({"a": torch.ones(3), "b": torch.tensor([1.0, 2.0, 3.0]),
                            "w": torch.tensor([1.0, 1.0, 0.0])}, start)
    second = wf.fingerprint({"a": torch.ones(3), "b": torch.tensor([1.0, 2.0, 3.0]),
                             "w": torch.tensor([1.0, 0.0, 1.0])}, start)
    sketches = wf.decode(first)[1]
    assert np.abs(sketches[0]).sum() == 0 and np.abs(sketches[2]).sum() > 0
    assert wf.distance(sketches, wf.decode(second)[1]) == pytest.approx(0.5)
