"""Incremental decoding for ``DecoderOnlyTransformer``: a key/value cache behind a score function.

``model.score(x)`` re-runs the whole prefix through every layer at every decoding step, so a step
costs more as the sequences grow. In a causal model the keys and values of a position depend only
on the tokens up to it, so once computed they can be kept: a step then runs only the newest token
through the layers and attends over the cached keys and values. ``CachedScorer`` does that while
keeping the meaning of a score function, sequences (M, T) in, next-token logits (M, V) out, so the
searches of ``SequenceGenerator`` run on it unchanged.

How a call finds its cache: the scorer remembers the rows of its previous call. When every row of
the new batch is one token longer than some previous row (row i of greedy search continues row i;
a beam continues whichever hypothesis it was expanded from), the cache is reordered to follow
those parents and only the new tokens are computed. Anything else (a new batch of prompts, a
different length) starts over from the prompts. The lookup compares tokens, so a reused cache
always belongs to exactly the prefix being scored.

Sequences that have emitted EOS after their prompt are finished: every search ignores their
logits, so the scorer drops them from the cache and returns zeros for them at no cost.

On a GPU every host read of a device tensor (``bool(t)``, ``.item()``, ``torch.equal``,
``nonzero``) waits for all queued kernels; at decoding's sizes that wait costs more than a step's
compute. A scorer with ``deferred`` set (``CachedSequenceGenerator`` sets it off the CPU) keeps its
bookkeeping on the device: it checks that the rows continue its cache into a device flag that the
caller reads once, with :meth:`CachedScorer.consistent`, instead of at every call; it computes
finished rows too (their logits are ignored) instead of finding the unfinished ones; and with
``rows_in_place`` (greedy search and sampling: row i continues row i) it never reorders the cache.

The computation reads the model's own modules and parameters (embedding, positional table, each
layer's ``norm``, ``mha.in_proj_weight``/``in_proj_bias``, ``mha.out_proj``, ``ffn``, the final
``norm`` and ``final_linear``), in eval mode, with ``F.scaled_dot_product_attention``; it matches
``model.score`` to float rounding.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# Multipliers of the row fingerprints (any odd 64-bit numbers; int64 products wrap around).
_FINGERPRINT_SEED = 0x5EED  # pragma: no mutate (equivalent: any seed; matches are confirmed token by token)


class CachedScorer:
    """A score function for ``model`` that caches each layer's keys and values between calls.

    Args:
        model: a ``DecoderOnlyTransformer`` (its members as documented there), in eval mode.
        capacity: the longest sequence the cache is laid out for (the generator's ``max_length``);
            longer sequences grow it.
        eos_id: the end-of-sequence id; rows that emitted it after their prompt are not computed.
            None computes every row.
    """

    def __init__(self, model, capacity: int, eos_id: int | None = None):
        for layer in model.dec_layers:
            if not layer.self_attn.mha._qkv_same_embed_dim or layer.self_attn.mha.bias_k is not None:
                raise ValueError("CachedScorer needs self-attention with one packed in_proj_weight "
                                 "and no bias_k/bias_v (the defaults of nn.MultiheadAttention)")
        self.model = model
        self.capacity = capacity
        self.eos_id = eos_id
        self.deferred = False       # no host reads: checks go to self.mismatch (module docstring)
        self.rows_in_place = False  # every call's row i continues the previous call's row i
        self._weights = None  # fingerprint multipliers, kept across calls (see _fingerprint_weights)
        self.reset()

    def reset(self) -> None:
        """Forget the cache; the next call starts from its prompts."""
        self.tokens = None          # (M, T) int64: the rows of the previous call
        self.slots = None           # (M,) int64: each row's index in the cache, -1 once finished
        # tokens of the prompts the cache started from (set by the prefill that follows any reset)
        self.prompt_length = 0  # pragma: no mutate (equivalent: every call after a reset prefills)
        self.keys: list[torch.Tensor] = []    # per layer (R, H, capacity, head_dim)
        self.values: list[torch.Tensor] = []  # per layer (R, H, capacity, head_dim)
        self.mismatch = None        # () bool on the device: a deferred call did not continue

    def consistent(self) -> bool:
        """Whether every deferred call since the last reset continued the cache's rows (one host
        read). A call that did not got logits of a wrong prefix."""
        return self.mismatch is None or not bool(self.mismatch)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Next-token logits after each row of ``x``: (M, T) int64 -> (M, V) float32, as ``model.score``."""
        if self.model.training:
            raise RuntimeError("CachedScorer is for inference and needs eval mode: call model.eval() first")
        parents, continues = self._find_parents(x)
        if parents is None:
            return self._prefill(x)
        if self.deferred:
            self.mismatch = ~continues if self.mismatch is None else self.mismatch | ~continues
        elif not continues:
            return self._prefill(x)
        return self._extend(x, parents)

    # ------------------------------------------------------------------ finding the cached rows

    def _find_parents(self, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """For each row of x, the previous row it extends by one token, and whether each row
        does extend it: ((M,) int64, () bool), both on x's device; (None, None) when the shapes
        alone rule a continuation out."""
        previous = self.tokens
        if previous is None or x.size(1) != previous.size(1) + 1 or x.device != previous.device:
            return None, None
        prefix = x[:, :-1]
        if self.rows_in_place or (not self.deferred and prefix.shape == previous.shape
                                  and torch.equal(prefix, previous)):
            if prefix.shape != previous.shape:
                return None, None
            return torch.arange(x.size(0), device=x.device), (prefix == previous).all()
        # Match rows by a fingerprint (an exact integer hash), then confirm the match token by token.
        weights = self._fingerprint_weights(prefix.size(1), x.device)
        new_prints, old_prints = (prefix * weights).sum(1), (previous * weights).sum(1)
        same = new_prints.unsqueeze(1) == old_prints.unsqueeze(0)          # (M, M_previous)
        parents = same.int().argmax(dim=1)
        return parents, same.any(dim=1).all() & (previous[parents] == prefix).all()

    def _fingerprint_weights(self, length: int, device: torch.device) -> torch.Tensor:
        """The first ``length`` fingerprint multipliers, on ``device``.

        Drawn once for the whole capacity and sliced at every step (a seeded draw of n numbers is
        the first n of a longer one), not drawn and copied to the device at every step.
        """
        weights = self._weights
        if weights is None or weights.numel() < length or weights.device != device:
            draws = torch.randint(1, 2**62, (max(self.capacity, length),),
                                  generator=torch.Generator().manual_seed(_FINGERPRINT_SEED))
            weights = self._weights = draws.to(device) * 2 + 1  # pragma: no mutate (equivalent: any multipliers: matches are confirmed token by token)
        return weights[:length]

    def _finished(self, x: torch.Tensor) -> torch.Tensor:
        """(M,) bool: the rows that emitted EOS after their prompt."""
        if self.eos_id is None:
            return torch.zeros(x.size(0), dtype=torch.bool, device=x.device)
        return (x[:, self.prompt_length:] == self.eos_id).any(dim=1)

    # ------------------------------------------------------------------ the two kinds of call

    def _prefill(self, x: torch.Tensor) -> torch.Tensor:
        """Run the whole prompts through the model, filling a new cache."""
        self.reset()
        self.prompt_length = x.size(1)
        num_heads = self.model.dec_layers[0].self_attn.mha.num_heads
        d_model = self.model.target_embedding.embedding_dim
        shape = (x.size(0), num_heads, max(self.capacity, x.size(1)), d_model // num_heads)
        dtype = self.model.final_linear.weight.dtype
        for _ in self.model.dec_layers:
            self.keys.append(torch.empty(shape, dtype=dtype, device=x.device))
            self.values.append(torch.empty(shape, dtype=dtype, device=x.device))
        logits = self._run(x, start=0)
        self.tokens = x
        self.slots = torch.arange(x.size(0), device=x.device)
        return logits

    def _extend(self, x: torch.Tensor, parents: torch.Tensor) -> torch.Tensor:
        """Reorder the cache to follow ``parents`` and run only the newest token of unfinished rows
        (of every row when ``deferred``: finding the unfinished ones is a host read)."""
        length = x.size(1)
        if self.deferred:
            if not self.rows_in_place:
                self._keep_rows(parents, cached_length=length - 1)
            self._grow(length)
            self.tokens = x
            self.slots = torch.arange(x.size(0), device=x.device)  # pragma: no mutate (equivalent: the deferred path never reads the slots)
            return self._run(x[:, -1:], start=length - 1)
        active = (~self._finished(x)).nonzero().squeeze(1)                      # (A,)
        slots = self.slots[parents[active]]
        if (slots < 0).any():  # cannot happen with the searches (a finished row stays finished)
            return self._prefill(x)
        self._keep_rows(slots, cached_length=length - 1)
        self._grow(length)
        logits = torch.zeros(x.size(0), self.model.num_classes, device=x.device)
        if active.numel():
            logits[active] = self._run(x[active, -1:], start=length - 1)
        self.tokens = x
        self.slots = torch.full((x.size(0),), -1, dtype=torch.long, device=x.device)
        self.slots[active] = torch.arange(active.numel(), device=x.device)
        return logits

    def _keep_rows(self, slots: torch.Tensor, cached_length: int) -> None:
        """Make cache row r hold what row ``slots[r]`` held (copies only when the rows move, which
        ``deferred`` does not read back)."""
        if not self.deferred and torch.equal(slots, torch.arange(slots.numel(), device=slots.device)):
            return  # rows 0..A-1 are already in place (rows past A belong to finished sequences)
        for cache in (self.keys, self.values):
            for index, old in enumerate(cache):
                new = torch.empty((slots.numel(), *old.shape[1:]), dtype=old.dtype, device=old.device)
                new[:, :, :cached_length] = old[slots, :, :cached_length]
                cache[index] = new

    def _grow(self, length: int) -> None:
        """Make room for ``length`` positions (only when called past ``capacity``)."""
        for cache in (self.keys, self.values):
            for index, old in enumerate(cache):
                if old.size(2) < length:
                    extra = torch.empty_like(old[:, :, : length - old.size(2)])
                    cache[index] = torch.cat([old, extra], dim=2)

    # ------------------------------------------------------------------ the model, incrementally

    def _run(self, tokens: torch.Tensor, start: int) -> torch.Tensor:
        """Run ``tokens`` (A, t), at positions start..start+t-1, through the model.

        Writes each layer's keys and values of those positions into cache rows 0..A-1 and returns
        the next-token logits (A, V) after the last position. Either the prompts (start 0) or one
        new token per row (t 1).
        """
        if tokens.size(1) > 1 and start > 0:
            raise ValueError("CachedScorer._run takes whole prompts (start 0) or one token per row")
        model = self.model
        end = start + tokens.size(1)
        h = model.target_embedding(tokens) + model.positional_encoding.pe[:, start:end]
        for layer, keys, values in zip(model.dec_layers, self.keys, self.values):
            h = h + self._attend(layer.self_attn, h, keys, values, start)
            h = layer.ffn(h)
        return model.final_linear(model.norm(h[:, -1]))

    @staticmethod
    def _attend(self_attn, h: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                start: int) -> torch.Tensor:
        """The attention output of ``self_attn`` (a ``SelfAttentionLayer``) for the new positions.

        Args:
            h: (A, t, D) residual stream at the new positions.
            keys, values: (R, H, capacity, D/H) caches; rows 0..A-1 get the new positions.
        Returns:
            (A, t, D), what ``mha`` adds to the residual stream (dropout is off in eval mode).
        """
        mha = self_attn.mha
        rows, new, d_model = h.shape
        end = start + new
        q, k, v = F.linear(self_attn.norm(h), mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.view(rows, new, mha.num_heads, mha.head_dim).transpose(1, 2) for t in (q, k, v))
        keys[:rows, :, start:end] = k
        values[:rows, :, start:end] = v
        # A single new token may see every cached position; the prompts (start 0) see their past.
        out = F.scaled_dot_product_attention(q, keys[:rows, :, :end], values[:rows, :, :end],
                                             is_causal=new > 1)
        return mha.out_proj(out.transpose(1, 2).reshape(rows, new, d_model))
