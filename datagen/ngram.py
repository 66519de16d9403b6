"""Character n-gram language models with interpolated modified Kneser-Ney smoothing.

They are the baselines on the data card: a Transformer should beat them because they only see
the last ``order - 1`` characters. They score text exactly the way the homework scores a model:
each utterance is predicted character by character and then its end (EOS), and

    per-character perplexity = exp(total NLL in nats over every target, EOS included,
                                   / total number of characters).

Symbols are the characters of ``ALPHABET`` plus EOS (what a model predicts) and BOS (padding
on the left of each utterance, never predicted). The model is counted with numpy in a few
seconds for a few million characters.

Smoothing (Chen and Goodman's interpolated modified Kneser-Ney): for the order-k model with
context h and next symbol w,

    P_k(w | h) = max(a_k(hw) - D_k(a_k(hw)), 0) / a_k(h.)  +  gamma_k(h) * P_{k-1}(w | h')

where a_k are raw counts at the highest order and continuation counts (number of distinct
symbols seen before hw) below it, a_k(h.) = sum_w a_k(hw), h' drops the oldest symbol of h,
D_k(c) is one of three discounts for c = 1, 2, >= 3 estimated from count-of-counts, and
gamma_k(h) gives back exactly the discounted mass. An unseen context backs off entirely to
P_{k-1}; P_0 is uniform over the predicted symbols, so every distribution sums to one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from datagen.corpus import ALPHABET

EOS = len(ALPHABET)           # index of the end-of-utterance symbol
BOS = len(ALPHABET) + 1       # left padding, never predicted
NUM_PREDICTED = len(ALPHABET) + 1
_BASE = 32                    # > BOS, so an n-gram packs into one int64 (5 bits per symbol)
_CHAR_INDEX = np.full(256, -1, dtype=np.int64)
_CHAR_INDEX[np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(len(ALPHABET))


def encode(text: str) -> np.ndarray:
    """Symbol ids of ``text`` (int64, shape (len(text),)); raises on characters outside ALPHABET."""
    raw = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8)
    ids = _CHAR_INDEX[raw]
    if (ids < 0).any() or len(raw) != len(text):
        bad = sorted(set(text) - set(ALPHABET))
        raise ValueError(f"text has characters outside the alphabet {ALPHABET!r}: {bad}")
    return ids


def _padded_stream(texts: Iterable[str], order: int) -> tuple[np.ndarray, np.ndarray, int]:
    """All utterances as one symbol stream: (order-1) BOS, the characters, EOS, per utterance.

    Returns (stream int64 (L,), target positions int64 (M,), number of characters). Every
    target position has at least order-1 symbols before it, all from its own utterance.
    """
    pad = np.full(order - 1, BOS, dtype=np.int64)
    pieces, starts, lengths, chars, offset = [], [], [], 0, 0
    for text in texts:
        ids = encode(text)
        pieces += [pad, ids, np.array([EOS], dtype=np.int64)]
        starts.append(offset + order - 1)
        lengths.append(len(ids) + 1)
        offset += order - 1 + len(ids) + 1
        chars += len(ids)
    if not pieces:
        raise ValueError("no utterances given")
    stream = np.concatenate(pieces)
    starts_arr, lengths_arr = np.array(starts), np.array(lengths)
    targets = np.repeat(starts_arr, lengths_arr) + (
        np.arange(lengths_arr.sum()) - np.repeat(np.cumsum(lengths_arr) - lengths_arr, lengths_arr))
    return stream, targets, chars


def _gram_codes(stream: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    """Pack the k-gram ending at each target into one int64: the target in the lowest 5 bits."""
    codes = np.zeros(len(targets), dtype=np.int64)
    for back in range(k - 1, -1, -1):
        codes = codes * _BASE + stream[targets - back]
    return codes


def _discounts(counts: np.ndarray) -> np.ndarray:
    """Modified-KN discounts [0, D1, D2, D3+] from the count-of-counts of one order."""
    n = [np.count_nonzero(counts == c) for c in (1, 2, 3, 4)]
    if min(n) == 0:  # too little data for the estimate: fall back to a plain discount
        return np.array([0.0, 0.5, 0.75, 0.75])
    y = n[0] / (n[0] + 2 * n[1])
    estimate = np.array([0.0, 1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2]])
    # Sparse counts can push an estimate outside (0, c]; clip so no count goes negative and
    # every context keeps some back-off mass (so no symbol ever gets probability zero).
    return np.clip(estimate, [0.0, 0.1, 0.1, 0.1], [0.0, 1.0, 2.0, 3.0])


@dataclass
class _OrderTable:
    """Counts of one order k: grams (sorted codes), their counts, and per-context totals."""
    grams: np.ndarray          # int64 (G,) sorted k-gram codes
    counts: np.ndarray         # float64 (G,) raw (highest order) or continuation counts
    contexts: np.ndarray       # int64 (C,) sorted context codes (gram // _BASE)
    totals: np.ndarray         # float64 (C,) sum of counts per context
    gammas: np.ndarray         # float64 (C,) back-off mass per context (already / totals)
    discounts: np.ndarray      # float64 (4,)


def _table(grams: np.ndarray, counts: np.ndarray) -> _OrderTable:
    counts = counts.astype(np.float64)
    discounts = _discounts(counts)
    contexts, first = np.unique(grams // _BASE, return_index=True)
    totals = np.add.reduceat(counts, first)
    discounted = discounts[np.minimum(counts, 3).astype(np.int64)]
    gammas = np.add.reduceat(discounted, first) / totals
    return _OrderTable(grams, counts, contexts, totals, gammas, discounts)


def _lookup(keys: np.ndarray, sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, found) of each key in a sorted array; index is clipped where not found."""
    index = np.searchsorted(sorted_keys, keys)
    index = np.minimum(index, len(sorted_keys) - 1)
    return index, sorted_keys[index] == keys


class CharNgramLM:
    """A character n-gram model of order ``order`` (1 = unigram) with modified KN smoothing.

    >>> lm = CharNgramLM(3).fit(["THE CAT", "THE DOG"])
    >>> lm.perplexity(["THE COW"]) > 1.0
    True
    """

    def __init__(self, order: int):
        if not isinstance(order, int) or not 1 <= order <= 12:
            raise ValueError(f"order must be an int in 1..12 (5 bits per symbol in an int64), got {order!r}")
        self.order = order
        self.tables: list[_OrderTable] = []

    def fit(self, texts: Iterable[str]) -> "CharNgramLM":
        """Count the n-grams of ``texts`` (strings over ALPHABET); returns self."""
        stream, targets, _ = _padded_stream(texts, self.order)
        grams, counts = np.unique(_gram_codes(stream, targets, self.order), return_counts=True)
        tables = [_table(grams, counts)]
        for k in range(self.order - 1, 0, -1):
            # continuation count of a k-gram = number of distinct (k+1)-grams it ends
            grams, counts = np.unique(grams % _BASE ** k, return_counts=True)
            tables.append(_table(grams, counts))
        self.tables = tables[::-1]  # tables[k-1] holds order k
        return self

    def _probs_of(self, codes: np.ndarray) -> np.ndarray:
        """P(target | context) for packed n-gram codes (order symbols each), float64 (M,)."""
        if not self.tables:
            raise RuntimeError("call fit() before scoring")
        probs = np.full(len(codes), 1.0 / NUM_PREDICTED)
        for k, table in enumerate(self.tables, start=1):
            grams = codes % _BASE ** k
            g_index, g_found = _lookup(grams, table.grams)
            c_index, c_found = _lookup(grams // _BASE, table.contexts)
            count = np.where(g_found, table.counts[g_index], 0.0)
            discount = table.discounts[np.minimum(count, 3).astype(np.int64)]
            total = table.totals[c_index]
            smoothed = np.maximum(count - discount, 0.0) / total + table.gammas[c_index] * probs
            probs = np.where(c_found, smoothed, probs)
        return probs

    def next_probs(self, context: str) -> np.ndarray:
        """Distribution over ALPHABET + EOS after the utterance prefix ``context``, float64 (29,)."""
        ids = np.concatenate([np.full(self.order - 1, BOS, dtype=np.int64), encode(context)])
        history = ids[len(ids) - (self.order - 1):] if self.order > 1 else ids[:0]
        prefix = 0
        for symbol in history:
            prefix = prefix * _BASE + int(symbol)
        codes = prefix * _BASE + np.arange(NUM_PREDICTED, dtype=np.int64)
        return self._probs_of(codes)

    def total_nll(self, texts: Iterable[str]) -> tuple[float, int]:
        """(total NLL in nats over every character and every EOS, number of characters)."""
        stream, targets, chars = _padded_stream(texts, self.order)
        probs = self._probs_of(_gram_codes(stream, targets, self.order))
        return float(-np.log(probs).sum()), chars

    def perplexity(self, texts: Iterable[str]) -> float:
        """Per-character perplexity: exp(total NLL including EOS / number of characters)."""
        nll, chars = self.total_nll(texts)
        return math.exp(nll / chars)
