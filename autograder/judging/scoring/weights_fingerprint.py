"""Shared weights by what they hold, not by their bytes: a compact fingerprint of a state dict and
a distance between two fingerprints of the same architecture.

The judge's model child (``autograder.judging.scoring.grade_model``), which already loads the
handin's state dict with ``torch.load(weights_only=True)`` after checking its config and shapes,
computes the fingerprint with the reference code and reports it in details.json
(``lm.weights_fingerprint``); the regrade keeps it in grades.csv and compares every pair of handins
of one architecture (``autograder.classroom.grades_csv.with_flags``). No student code runs, and a
class tool never loads a handin's tensors.

What is compared is what training learned. For each tensor ``w`` of the state dict the fingerprint
holds a count sketch (``SKETCH_WIDTH`` signed buckets, a fixed hash of the element index per key)
of ``w`` and of ``w0``, the tensor the reference model is initialised with under the config's
seed. For a pair, each tensor's two sketches are projected away from both handins' initial tensors
(most students keep the default seed, so honest handins share their initialisation) and the sine of
the angle between what is left is that tensor's distance: 0 for a copy, a copy rescaled by any
constant, or one with a few values moved by an ulp; near 1 for independent work. The pair's
distance is the median over the tensors both handins changed during training, so that replacing a
few tensors does not hide a copy. ``TOLERANCE`` comes from honest independent trainings (seeds,
data subsets and, with the same seed, other hyperparameters) and from copies with noise added
(docs/results.md, "Shared weights"), and so does its limit: two honest runs of one seed and one
data order can learn nearly the same thing, so a copy with more noise than a few percent of what
was learned (which leaves the perplexity unchanged) cannot be told from them by its weights.

Weights are also compared by what they compute, which no reparametrisation changes (the residual
basis, the feed-forward units or each head's dimensions permuted, a LayerNorm scaled against the
layer after it, a head's queries scaled against its keys): where the autograder holds the public
test split, the fingerprint also carries the model's log-probability of each next token of a fixed
probe batch (its first PROBE_TRANSCRIPTS transcripts, at most PROBE_TOKENS tokens each; the probe
named by the digest of its tokens, so only handins probed alike compare, whatever their
architecture). Two handins whose root-mean-square difference there is at most OUTPUT_TOLERANCE
nats compute the same function (:func:`same_outputs`); independent trainings differ far more
(docs/results.md, "Weights compared by what they compute").
"""
from __future__ import annotations

import base64
import functools
import hashlib
import re
import zlib

import numpy as np
import torch

SKETCH_WIDTH = 32
# A tensor whose part beyond its initial value is this small (relative) did not train: a buffer
# such as the positional table, or a tensor left at its initialisation. It says nothing about who
# trained the rest and is left out of the median.
UNTRAINED = 1e-4
# Pairs at or below this distance share their weights. Honest independent trainings measured
# 0.043 and above (two runs of one seed and one data order whose other settings barely changed what
# they learned; other seeds 0.91 and above); a copy with noise of 1% or 2% of what each tensor
# learned measured 0.009 to 0.022 (docs/results.md, "Shared weights"). More noise is not caught:
# 5% already measures as far as those two honest runs, and leaves the perplexity unchanged.
TOLERANCE = 0.025
FORMAT = "wf1"
_FINGERPRINT = re.compile(r"wf1:([0-9a-f]{16}):([A-Za-z0-9+/=]+)"
                          r"(?::([0-9a-f]{16}):([A-Za-z0-9+/=]+))?")
PROBE_TRANSCRIPTS = 8
PROBE_TOKENS = 64
# Pairs at or below this root-mean-square difference of their probe log-probabilities (nats per
# token) compute the same function. Reparametrised copies measured 1.1e-7 at most (float32
# rounding), copies with noise of 5% of what each tensor learned 0.0077; honest trainings of the
# class fixture's size 0.074 and above (two runs of one seed and one data order; other seeds 0.17
# and above): docs/results.md, "Weights compared by what they compute".
OUTPUT_TOLERANCE = 0.01
# A fingerprint is read back from grades.csv: at most this many bytes once decompressed (the
# largest model the grader accepts has a few hundred tensors).
MAX_DECODED_BYTES = 2**22


def architecture(shapes: dict[str, tuple[int, ...]]) -> str:
    """16 hex digits naming the state dict's keys and shapes: only handins with the same compare."""
    text = ";".join(f"{key}:{'x'.join(map(str, shape))}" for key, shape in sorted(shapes.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _hash(key: str, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(bucket, sign) of each element of a tensor named ``key``: fixed for every handin."""
    generator = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(key.encode())
                                                              .digest()[:8], "little"))
    bucket = torch.randint(0, SKETCH_WIDTH, (numel,), generator=generator)
    sign = torch.randint(0, 2, (numel,), generator=generator, dtype=torch.float64) * 2 - 1
    return bucket, sign


def sketch(key: str, *tensors: torch.Tensor) -> np.ndarray:
    """The count sketches (tensors, SKETCH_WIDTH) of tensors named ``key``: linear in each,
    inner products kept in expectation."""
    values = torch.stack([tensor.detach().reshape(-1).to(torch.float64) for tensor in tensors])
    bucket, sign = _hash(key, values.shape[1])
    return torch.zeros(len(tensors), SKETCH_WIDTH, dtype=torch.float64).index_add_(
        1, bucket, values * sign).numpy()


def fingerprint(state: dict[str, torch.Tensor], initial: dict[str, torch.Tensor],
                outputs: tuple[str, np.ndarray] | None = None) -> str:
    """``wf1:<architecture>:<base64>`` of a state dict and of ``initial`` (the reference model's
    state dict at initialisation, same keys and shapes): (keys, 2, SKETCH_WIDTH) float32 sketches,
    keys sorted; a tensor that did not train (see UNTRAINED) gets zero sketches. With ``outputs``
    (:func:`probe_outputs`), ``:<probe>:<base64>`` after it: the float32 log-probabilities."""
    keys = sorted(state)
    sketches = np.zeros((len(keys), 2, SKETCH_WIDTH), dtype=np.float32)
    for index, key in enumerate(keys):
        weights, start = state[key].to(torch.float64), initial[key].to(torch.float64)
        if learned_fraction(weights, start) <= UNTRAINED:
            continue
        sketches[index] = sketch(key, weights, start)
    arch = architecture({key: tuple(value.shape) for key, value in state.items()})
    text = f"{FORMAT}:{arch}:{packed(sketches)}"
    return text if outputs is None else f"{text}:{outputs[0]}:{packed(outputs[1])}"


def packed(values: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(values.astype(np.float32).tobytes())).decode()


def unpacked(text: str) -> np.ndarray | None:
    """The float32 values :func:`packed` wrote, or None when ``text`` is not such (empty, over
    MAX_DECODED_BYTES once decompressed, or not finite)."""
    try:
        decompressor = zlib.decompressobj()
        raw = decompressor.decompress(base64.b64decode(text, validate=True), MAX_DECODED_BYTES)
    except (ValueError, zlib.error):
        return None
    if not decompressor.eof or decompressor.unconsumed_tail or not raw or len(raw) % 4:
        return None
    values = np.frombuffer(raw, dtype=np.float32)
    return values if np.isfinite(values).all() else None


@torch.no_grad()
def probe_outputs(model: torch.nn.Module, probe) -> tuple[str, np.ndarray]:
    """(the probe's name: 16 hex digits of its tokens, (tokens,) float64 log-probabilities the
    model gives each next token) of the first PROBE_TRANSCRIPTS transcripts of ``probe`` (an
    LMDataset), each cut to PROBE_TOKENS and the model's max_len, in eval mode."""
    length = min(PROBE_TOKENS, model.max_len)
    rows = [(probe.transcripts_shifted[i][:length], probe.transcripts_golden[i][:length])
            for i in range(min(PROBE_TRANSCRIPTS, len(probe)))]
    lengths = torch.tensor([len(shifted) for shifted, _ in rows])
    shifted = torch.full((len(rows), int(lengths.max())), probe.pad_token, dtype=torch.long)
    golden = shifted.clone()
    for row, (inputs, targets) in enumerate(rows):
        shifted[row, :len(inputs)] = torch.as_tensor(inputs)
        golden[row, :len(targets)] = torch.as_tensor(targets)
    training = model.training
    model.eval()
    logits, _ = model(shifted, lengths)  # (N, T, V)
    model.train(training)
    chosen = torch.log_softmax(logits.double(), dim=-1).gather(-1, golden[..., None])[..., 0]
    kept = torch.arange(shifted.shape[1])[None] < lengths[:, None]  # (N, T)
    name = hashlib.sha256(shifted[kept].numpy().tobytes() + golden[kept].numpy().tobytes())
    return name.hexdigest()[:16], chosen[kept].numpy()


def learned_fraction(weights: torch.Tensor, start: torch.Tensor) -> float:
    """||w - projection of w on w0|| / ||w||: how much of ``weights`` is not its initial
    direction (0 for a tensor still at its initialisation, or any multiple of it)."""
    norm = float(weights.norm())
    if norm == 0:
        return 0.0
    start_norm = float(start.norm())
    if start_norm == 0:
        return 1.0
    along = float((weights * start).sum()) / start_norm**2
    return float((weights - along * start).norm()) / norm


def decode(text: str) -> tuple[str, np.ndarray] | None:
    """(architecture, (keys, 2, SKETCH_WIDTH) sketches) of a fingerprint, or None when ``text``
    is not one (a cell left empty, or edited by hand)."""
    match = _FINGERPRINT.fullmatch(text or "")
    values = unpacked(match.group(2)) if match else None
    if values is None or len(values) % (2 * SKETCH_WIDTH):
        return None
    return match.group(1), values.reshape(-1, 2, SKETCH_WIDTH)


def decode_outputs(text: str) -> tuple[str, np.ndarray] | None:
    """(probe, log-probabilities) a fingerprint carries, or None (none carried, or unreadable)."""
    match = _FINGERPRINT.fullmatch(text or "")
    values = unpacked(match.group(4)) if match and match.group(4) else None
    return None if values is None else (match.group(3), values)


def output_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The root-mean-square difference of two probes' log-probabilities (nats per token)."""
    return float(np.sqrt(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)))


def same_outputs(fingerprints: dict[str, str], tolerance: float = OUTPUT_TOLERANCE
                 ) -> dict[str, list[tuple[str, float]]]:
    """{name: [(other name, output distance), ...] sorted by distance} of every pair probed alike
    (any architecture) whose :func:`output_distance` is at most ``tolerance``; names without
    outputs in their fingerprint are left out."""
    groups: dict[tuple[str, int], list[tuple[str, np.ndarray]]] = {}
    for name, text in sorted(fingerprints.items()):
        decoded = decode_outputs(text)
        if decoded is not None:
            groups.setdefault((decoded[0], len(decoded[1])), []).append((name, decoded[1]))
    found: dict[str, list[tuple[str, float]]] = {}
    for members in groups.values():
        values = np.stack([value for _, value in members]).astype(np.float64)
        for index, (name, value) in enumerate(members[:-1]):
            gaps = np.sqrt(np.mean((values[index + 1:] - value) ** 2, axis=1))
            for (other, _), gap in zip(members[index + 1:], gaps):
                if gap <= tolerance:
                    found.setdefault(name, []).append((other, float(gap)))
                    found.setdefault(other, []).append((name, float(gap)))
    return {name: sorted(pairs, key=lambda pair: (pair[1], pair[0]))
            for name, pairs in found.items()}


def distance(a: np.ndarray, b: np.ndarray) -> float | None:
    """The median over trained tensors of the sine of the angle between what ``a`` and ``b``
    (decoded sketches of one architecture) learned beyond both initialisations; None when they
    share no trained tensor."""
    (gap,) = distances(a, b[None])
    return gap


def distances(a: np.ndarray, others: np.ndarray) -> list[float | None]:
    """:func:`distance` from ``a`` (keys, 2, K) to each of ``others`` (n, keys, 2, K), at once."""
    a, others = a.astype(np.float64), others.astype(np.float64)
    ours = np.broadcast_to(a, others.shape)
    q, _ = np.linalg.qr(np.stack([ours[:, :, 1], others[:, :, 1]], axis=-1))  # (n, keys, K, 2)

    def learned(vectors: np.ndarray) -> np.ndarray:  # minus their part in both initialisations
        return vectors - np.einsum("ntkb,ntb->ntk", q, np.einsum("ntkb,ntk->ntb", q, vectors))

    u, v = learned(ours[:, :, 0]), learned(others[:, :, 0])
    u_norm, v_norm = np.linalg.norm(u, axis=2), np.linalg.norm(v, axis=2)
    # an untrained tensor's zero sketch leaves exactly 0 here, so this also leaves it out
    usable = (u_norm > 0) & (v_norm > 0)
    u = u / np.where(usable, u_norm, 1.0)[..., None]
    v = v / np.where(usable, v_norm, 1.0)[..., None]
    # Kahan's angle between unit vectors: sqrt(1 - cos**2) rounds a copy's 0 up to ~1.5e-8 on
    # CPUs whose dot products round differently; sin(theta) = sin(pi - theta) ignores the sign.
    angle = 2.0 * np.arctan2(np.linalg.norm(u - v, axis=2), np.linalg.norm(u + v, axis=2))
    sines = np.where(usable, np.sin(angle), np.nan)
    return [float(np.median(row[mask])) if mask.any() else None
            for row, mask in zip(sines, usable)]


def shared_weights(fingerprints: dict[str, str],
                   tolerance: float = TOLERANCE) -> dict[str, list[tuple[str, float]]]:
    """{name: [(other name, distance), ...] sorted by distance} of every pair of one architecture
    whose distance is at most ``tolerance``; names without a readable fingerprint are left out.
    The regrade calls this after each grading: a pair's distance is computed once per process."""
    groups: dict[tuple[str, tuple[int, ...]], list[tuple[str, str]]] = {}
    for name, text in sorted(fingerprints.items()):
        decoded = _decoded(text)
        if decoded is not None:
            groups.setdefault((decoded[0], decoded[1].shape), []).append((name, text))
    found: dict[str, list[tuple[str, float]]] = {}
    for members in groups.values():
        for index, (name, first) in enumerate(members):
            later = members[index + 1:]
            if len(_PAIRS) > MAX_CACHED_PAIRS:  # pragma: no mutate (equivalent: a cache's bound)
                _PAIRS.clear()  # before the lookups: every pair of ``later`` is computed again
            missing = sorted({text for _, text in later if (first, text) not in _PAIRS})
            if missing:
                computed = distances(_decoded(first)[1],
                                     np.stack([_decoded(text)[1] for text in missing]))
                _PAIRS.update({(first, text): gap for text, gap in zip(missing, computed)})
            for other, second in later:
                gap = _PAIRS[first, second]
                if gap is not None and gap <= tolerance:
                    found.setdefault(name, []).append((other, gap))
                    found.setdefault(other, []).append((name, gap))
    return {name: sorted(pairs, key=lambda pair: (pair[1], pair[0]))
            for name, pairs in found.items()}


# {(fingerprint, fingerprint): distance} of the pairs this process compared
_PAIRS: dict[tuple[str, str], float | None] = {}
MAX_CACHED_PAIRS = 2**20  # pragma: no mutate (equivalent: a cache's bound)


@functools.lru_cache(maxsize=4096)  # pragma: no mutate (equivalent: a cache)
def _decoded(text: str) -> tuple[str, np.ndarray] | None:
    return decode(text)
