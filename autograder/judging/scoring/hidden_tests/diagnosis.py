# hw4p1: instructor-only
"""From failed hidden checks to a hint that names the likely bug, without showing the test.

A failed hidden check (``checks.py``) raises CheckFailed carrying a :class:`Failure`: what was
compared (``quantity``: ``"dLdW"``, ``"output"``, ``"_merge_masks"``...), how it failed (``kind``),
in which role (against the truth, or the student's gradient against finite differences of their
own forward, or those finite differences against the truth), what the difference looks like
(``hw4lib.numeric_truths.difference_features``: a constant multiple, the right numbers in other
places, another shape, an offset shared by every row), what the test knew about the case
(``context``: the softmax's dim is the last axis or not) and, for attention's output, which
common wrong formula reproduces the student's values (``variant``; for Softmax's dLdZ, a cache of
the unnormalised exponentials, of the input, or a sum over other axes). A step that raised
carries its exception's class, the handin's line that raised as the judge read it (``code``),
what each name of that line held (``held``: shapes, dtypes, Python ints and floats), the step's
input shapes (``given``) and a TypeError's message when it is Python's or numpy's own: a test
that raised is hinted from those alone, its family read from the shapes (a matrix where its
transpose belongs, an axis dropped by a reduction...) or, when none fits, said to be unknown.

:func:`hints` reads a category's signature (each test's Failure, or None when it passed) against
rules written per bug family, not per catalogue entry, and returns the hint of each failing test.
A hint names the likely bug and where to look; it never quotes an input, an expected value or a
line of the solution. A signature that no rule recognises gets no hint: the feedback then says
what differed and nothing more.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# What a failure is, in the order the feedback names it: not written yet (NotImplementedError), does
# not import or parse, timed out, stopped before the test ran, raised; then the kinds of wrong
# values a check found.
VALUE_KINDS = ("value", "shape", "nonfinite", "dtype", "missing", "modified", "mask", "refusal")
KINDS = ("not written", "import", "timeout", "stopped", "raised", *VALUE_KINDS)
# What numpy raises on arrays of mismatched shapes, and on a dtype it cannot cast (the class names
# the worker reports): the only exceptions a rule reads as a bug. A test that raised gets a hint
# from these and the line that raised (:func:`raised_rules`), never a value family.
SHAPE_ERRORS = ("ValueError", "AxisError", "IndexError")
DTYPE_ERRORS = ("UFuncTypeError", "_UFuncOutputCastingError", "_UFuncInputCastingError",
                "_UFuncNoLoopError", "_UFuncBinaryResolutionError")
# The messages a raised TypeError may have for the hint to quote them: Python's and numpy's own
# words for a float where an integer size belongs (anything else, which student code could have
# written, is not quoted).
KNOWN_MESSAGES = re.compile(r"'float' object cannot be interpreted as an integer|slice indices "
                            r"must be integers or None or have an __index__ method|"
                            r"expected a sequence of integers or a single integer, got '[\w.]+'")
SIZE_ERRORS = ("TypeError",)
# A line that indexes with a mask (``x[mask]``, ``x[~self.mask] = 0``, ``x[mask == 1]``).
MASK_INDEX = re.compile(r"\[[^\[\]]*mask[^\[\]]*\]", re.IGNORECASE)
# What a check compared: the student's value against the truth, the student's gradient against
# finite differences of their own forward, those finite differences (or the forward's outputs on
# moved inputs) against the truth.
ROLES = ("truth", "backward-vs-forward", "forward")


@dataclass
class Failure:
    """What one failed check (or a worker's reported failure) tells about the bug."""

    kind: str  # one of KINDS
    quantity: str = ""  # the value compared, as the student's code names it
    role: str = "truth"  # one of ROLES, given by the check that failed
    features: frozenset[str] = frozenset()  # hw4lib.numeric_truths.DIFFERENCES keys
    context: dict = field(default_factory=dict)
    variant: str = ""  # the wrong attention formula that reproduces the output, if one does
    step: str = ""  # "Class.method" that raised, for kind "raised"
    exception: str = ""  # its class, for kind "raised"
    code: str = ""  # the handin's line that raised, as the judge read it (hints only, never shown)
    operands: str = ""  # for kind "raised": that line's operands, the step's inputs, the shapes
    # its results must have
    held: dict[str, Operand] = field(default_factory=dict)  # for kind "raised": what each name
    # of the line that raised held, as the worker found it
    given: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the raising step's array
    # inputs' shapes ("Q", "dLdZ"...)
    message: str = ""  # the exception's own message, when it is one of :data:`KNOWN_MESSAGES`
    earlier: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the array inputs' shapes
    # of the same object's previous call of the raising method, when there was one


@dataclass(frozen=True)
class Operand:
    """What a name of the line that raised held: an array (``kind`` "array", its dtype, number
    of dimensions and shape: () past ``wire.MAX_OPERAND_DIMS`` of them), a scalar (``dtype``
    "int" or "float" for Python's own, a numpy dtype's name else; ``value`` for a Python int),
    None, or "other"."""

    kind: str
    dtype: str = "other"
    shape: tuple[int, ...] = ()
    ndim: int = 0
    value: int | None = None


def describe(failure: Failure) -> str:
    """The failure in one line, for the mutants report (never shown to students)."""
    parts = [failure.kind, failure.quantity or "-", failure.role]
    parts += sorted(failure.features) + [f"{k}={v}" for k, v in sorted(failure.context.items())]
    parts += [f"variant={failure.variant}"] if failure.variant else []
    where = ([f"{failure.step} raised {failure.exception or '?'}"
              + (f" at: {failure.code}" if failure.code else "")] if failure.step else [])
    return " ".join(parts + where)


@dataclass(frozen=True)
class Hint:
    family: str  # the bug family: for the hint report and the regrade's counts, never shown
    text: str


# ---------------------------------------------------------------------------------------------
# Attention's output: which common wrong formula gives the student's values
# ---------------------------------------------------------------------------------------------

def _attention(Q, K, V, mask, scale: float, fill: str = "subtract", axis: int = -1):
    scores = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        mask = np.broadcast_to(mask, scores.shape)
        scores = np.where(mask, 0.0, scores) if fill == "zero" else np.where(mask, -1e9, scores)
    weights = np.exp(scores - scores.max(axis=axis, keepdims=True))
    weights /= weights.sum(axis=axis, keepdims=True)
    return weights @ V


def _matches(actual: np.ndarray, candidate: np.ndarray) -> bool:
    scale = max(float(np.max(np.abs(candidate), initial=0.0)), 1.0)
    return (actual.shape == candidate.shape and bool(np.all(np.isfinite(actual)))
            and float(np.max(np.abs(actual - candidate), initial=0.0)) <= 1e-6 * scale)


def _fitted_scale(actual, Q, K, V, mask) -> float | None:
    """The score scale c for which softmax(c Q K^T, masked) V reproduces ``actual``, if one does
    (golden-section search over log c in [1e-4, 1e2])."""
    def error(log_c: float) -> float:
        return float(np.max(np.abs(_attention(Q, K, V, mask, math.exp(log_c)) - actual)))
    grid = np.linspace(math.log(1e-4), math.log(1e2), 121)
    best = int(np.argmin([error(x) for x in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if error(a) < error(b):
            high = b
        else:
            low = a
    scale = math.exp((low + high) / 2)
    return scale if _matches(actual, _attention(Q, K, V, mask, scale)) else None


def attention_variant(actual, Q, K, V, mask) -> str:
    """The family of wrong formula that reproduces an attention output, or ''.

    Tried: another scale of the scores than 1/sqrt(E) ('scale'), the mask ignored, read the other
    way round or setting masked scores to 0 ('mask-ignored', 'mask-inverted', 'mask-zero'), and the
    softmax taken over the queries instead of the keys ('softmax-axis')."""
    if actual is None or not isinstance(actual, np.ndarray) or actual.dtype.kind != "f":
        return ""
    actual = actual.astype(np.float64)
    scale = 1 / math.sqrt(Q.shape[-1])
    candidates = {"softmax-axis": _attention(Q, K, V, mask, scale, axis=-2)}
    if mask is not None and np.any(mask):
        candidates |= {"mask-ignored": _attention(Q, K, V, None, scale),
                       "mask-inverted": _attention(Q, K, V, ~np.asarray(mask), scale),
                       "mask-zero": _attention(Q, K, V, mask, scale, fill="zero")}
    for name, candidate in candidates.items():
        if _matches(actual, candidate):
            return name
    fitted = _fitted_scale(actual, Q, K, V, mask)
    return "scale" if fitted is not None and abs(fitted / scale - 1) > 1e-3 else ""


def softmax_backward_variant(actual, Z, dim: int, dLdA) -> str:
    """The wrong Softmax backward that reproduces ``actual`` (dLdZ, shaped like Z), or ''.

    The right formula is A * (dLdA - sum(dLdA * A) along dim) with A = softmax(Z). Tried: that
    formula on the exponentials before their division by the sum, exp(Z - max) or exp(Z)
    ('unnormalised-cache': forward kept those for backward); on the input Z itself
    ('input-cache': forward kept its input, not its output); with the sum over the whole array
    or along one other axis than dim ('reduction-axes')."""
    if actual is None or not isinstance(actual, np.ndarray) or actual.dtype.kind != "f":
        return ""
    actual, Z, dLdA = (np.asarray(x, dtype=np.float64) for x in (actual, Z, dLdA))
    A = np.exp(Z - Z.max(axis=dim, keepdims=True))
    A /= A.sum(axis=dim, keepdims=True)
    other_axes = [axis for axis in range(Z.ndim) if axis != dim % Z.ndim]
    candidates = [("unnormalised-cache", np.exp(Z - Z.max(axis=dim, keepdims=True)), dim),
                  ("unnormalised-cache", np.exp(Z), dim), ("input-cache", Z, dim),
                  *[("reduction-axes", A, axis) for axis in (None, *other_axes)]]
    with np.errstate(over="ignore", invalid="ignore"):
        for name, kept, axis in candidates:
            candidate = kept * (dLdA - np.sum(dLdA * kept, axis=axis, keepdims=True))
            if np.all(np.isfinite(candidate)) and _matches(actual, candidate):
                return name
    return ""


# ---------------------------------------------------------------------------------------------
# Rules: a category's signature -> the hint of each failing test
# ---------------------------------------------------------------------------------------------

Signature = dict[str, "Failure | None"]  # test name -> its Failure, None when it passed
Rule = Callable[[Signature], "dict[str, Hint]"]


def failing(signature: Signature) -> dict[str, Failure]:
    return {name: failure for name, failure in signature.items() if failure is not None}


def each(signature: Signature, family: str, text: str,
         when: Callable[[Failure], bool]) -> dict[str, Hint]:
    """The hint for every failing test whose Failure satisfies ``when``."""
    return {name: Hint(family, text) for name, failure in failing(signature).items()
            if when(failure)}


def passed(signature: Signature, prefix: str) -> bool:
    """Every test whose name starts with ``prefix`` ran and passed (there is at least one)."""
    named = [failure for name, failure in signature.items() if name.startswith(prefix)]
    return bool(named) and all(failure is None for failure in named)


def is_gradient(quantity: str) -> bool:
    return quantity.startswith("d") or ".dLd" in quantity


def in_forward(f: Failure) -> bool:
    """The failure shows the forward is wrong: its output, the finite differences of it, or a
    forward that raised."""
    return (f.quantity in ("Z", "A", "output") or f.role == "forward"
            or (f.kind == "raised" and f.quantity == "forward"))


def in_backward(s: Signature) -> Callable[[Failure], bool]:
    """A gradient failure, in a category whose forward passed every check (a wrong forward makes
    the gradients wrong too, so it is the likelier cause)."""
    forward_ok = not any(in_forward(f) for f in failing(s).values())
    return lambda f: forward_ok and (is_gradient(f.quantity)
                                     or (f.kind == "raised" and f.quantity == "backward"))


def stale_cache(s: Signature) -> dict[str, Hint]:
    """Only tests that run a second forward before backward fail: backward used the first's."""
    failures = failing(s)
    if not failures or not all(f.context.get("second_forward") for f in failures.values()):
        return {}
    hint = Hint("stale-cache", "backward used values from an earlier forward: store what "
                "backward needs at every forward call, from that call's inputs")
    return dict.fromkeys(failures, hint)


def only_fully_masked(s: Signature) -> dict[str, Hint]:
    """Only tests with query rows whose keys are all masked fail."""
    failures = failing(s)
    if not failures or not all(f.context.get("fully_masked") for f in failures.values()):
        return {}
    hint = Hint("fully-masked", "only rows whose keys are all masked fail: such a row must stay "
                "finite (it attends uniformly, its output is the mean of the values), with no "
                "NaN from exp(-inf) / 0 nor a float64 constant promoting float32")
    return dict.fromkeys(failures, hint)


# Hints that hold in every category, tried before the category's own rules.
def generic_rules() -> list[Rule]:
    return [  # the more specific evidence first: what changed in place, then a wrong dtype
        lambda s: each(s, "in-place", "your code changes an input array or the upstream gradient "
                       "in place; compute new arrays (or work on a copy) instead of writing into "
                       "what you were given", lambda f: f.kind == "modified"),
        lambda s: each(s, "dtype", "float32 inputs must give float32 results: look for arrays "
                       "or numpy scalars created as float64 along the way (np.zeros without a "
                       "dtype, np.sqrt of a Python number)", lambda f: f.kind == "dtype"),
        stale_cache,
        only_fully_masked,
    ]


def squeezed_gradient(s: Signature) -> dict[str, Hint]:
    """A gradient whose shape is the expected one without its length-1 axes, holding as many
    values (a squeeze, or a reduction without keepdims, dropped an axis of size 1)."""
    found = {}
    for name, f in failing(s).items():
        expected, got = f.context.get("shapes", ((), ()))
        if (f.kind == "shape" and is_gradient(f.quantity) and "reshaped" in f.features
                and tuple(got) == tuple(n for n in expected if n != 1) != tuple(expected)):
            found[name] = Hint("squeezed-gradient", f"{f.quantity} has shape {tuple(got)} where "
                               f"{tuple(expected)} belongs: a squeeze (or a reduction) dropped "
                               f"an axis of length 1, such as that of a single output feature; "
                               f"keep each gradient shaped like what it is the gradient of")
    return found


def linear_rules() -> list[Rule]:
    def z(f: Failure) -> bool:
        return f.quantity == "Z"

    return [
        squeezed_gradient,
        lambda s: each(s, "linear-batch-shape", "Z (or dLdA) has the right values in the wrong "
                       "shape: for an input of any number of leading dimensions, return "
                       "(*leading, out_features) (and dLdA shaped like A)",
                       lambda f: f.quantity in ("Z", "dLdA") and "reshaped" in f.features),
        lambda s: each(s, "linear-bias", "Z is off by the same vector in every row: look at how "
                       "the bias is added in forward",
                       lambda f: (z(f) and "offset" in f.features)
                       or (f.quantity == "dLdb" and f.role == "forward")),
        lambda s: each(s, "linear-forward-product", "Z is wrong and the bias is not the cause: "
                       "check the product of A with W (W is (out_features, in_features))",
                       lambda f: z(f) or f.role == "forward"),
        lambda s: each(s, "linear-grad-batch-reduction", "a parameter gradient is a constant "
                       "multiple of the right one, or keeps batch axes: dLdW and dLdb add up the "
                       "contributions of every position of every leading dimension (a sum, not "
                       "a mean, over all of them)",
                       lambda f: f.quantity in ("dLdW", "dLdb")
                       and f.features & {"scaled", "unreduced"}),
        lambda s: each(s, "linear-grad-layout", "dLdW holds the right numbers in the wrong "
                       "places: it is shaped like W (out_features, in_features); a transpose, "
                       "not a reshape, gets it there",
                       lambda f: f.quantity == "dLdW" and f.features & {"rearranged",
                                                                         "reshaped"}),
        lambda s: each(s, "linear-grad", "the forward is right but a gradient is not: derive "
                       "dLdA, dLdW and dLdb from Z = A W^T + b, for inputs with several leading "
                       "dimensions too", in_backward(s)),
    ]


SOFTMAX_VARIANTS = {
    "unnormalised-cache": ("softmax-cache", "A is right but dLdZ matches the right formula "
                           "applied to the exponentials before their division by the sum: "
                           "forward must keep for backward the output A it returns "
                           "(normalised), not the intermediate exponentials"),
    "input-cache": ("softmax-cache-input", "A is right but dLdZ matches the right formula "
                    "applied to the input Z instead of the output A: forward kept its input for "
                    "backward; keep the output A it returns (self.A = the softmax, not Z)"),
    "reduction-axes": ("softmax-backward-axis", "A is right but dLdZ matches the right formula "
                       "with its sum taken over other axes than dim (the whole array, or "
                       "another axis): the sum of dLdA * A runs along self.dim only, with "
                       "keepdims=True, one sum per slice"),
}


def softmax_rules() -> list[Rule]:
    def forward(f: Failure) -> bool:
        return f.quantity == "A" or f.role == "forward"

    def backward(f: Failure) -> bool:
        return f.quantity == "dLdZ" and f.role != "forward"

    def only_off_the_last_axis(s: Signature, which: Callable[[Failure], bool]) -> bool:
        """Every failure of this kind is along a dim other than the last, and there is one."""
        axes = [f.context.get("last_axis") for f in failing(s).values() if which(f)]
        return bool(axes) and all(axis is False for axis in axes)

    def variant_hints(s: Signature) -> dict[str, Hint]:
        """One gradient matched a wrong formula (:data:`SOFTMAX_VARIANTS`), and no other: every
        failing gradient (a wrong cache or sum is wrong in every test) gets its hint, unless A
        is wrong too."""
        failures = failing(s)
        found = {f.variant for f in failures.values() if f.variant}
        if len(found) != 1 or any(forward(f) for f in failures.values()):
            return {}
        hint = Hint(*SOFTMAX_VARIANTS[found.pop()])
        return {name: hint for name, f in failures.items() if backward(f)}

    return [
        variant_hints,
        lambda s: each(s, "softmax-reused", "a Softmax is right on its first input but not when "
                       "reused on an input of another rank: keep self.dim as given (a negative "
                       "dim counts from the end of each input; turn it into an axis in a local "
                       "variable, at every call)", lambda f: f.context.get("reused")
                       and (forward(f) or backward(f)) and not f.context.get("second_backward")),
        lambda s: each(s, "cached-state", "the first backward after a forward is right, a second "
                       "one is not (or self.A changed): backward must leave what forward stored "
                       "(self.A, the A it returned) unchanged; write dLdZ into a new array",
                       lambda f: f.context.get("second_backward")),
        lambda s: each(s, "softmax-stability", "NaN or inf with logits in the thousands: before "
                       "exponentiating, subtract the maximum of each slice along dim (its own "
                       "maximum, not one for the whole array)", lambda f: f.kind == "nonfinite"),
        lambda s: each(s, "softmax-axis", "A is right along the last axis but not along others: "
                       "normalise along self.dim", lambda f: forward(f)
                       and only_off_the_last_axis(s, forward)),
        lambda s: each(s, "softmax-forward", "A is wrong: along dim, each slice of A is the "
                       "exponential of that slice divided by the slice's own sum (they add up to "
                       "1 along dim only)", lambda f: not in_backward(s)(f)),
        lambda s: each(s, "softmax-backward-axis", "A is right but dLdZ is right only along the "
                       "last axis: every sum in backward runs along self.dim too",
                       lambda f: backward(f) and only_off_the_last_axis(s, backward)),
        lambda s: each(s, "softmax-backward-jacobian", "A is right but dLdZ is not: each output "
                       "of a slice depends on every input of that slice, so the Jacobian is not "
                       "diagonal (its off-diagonal terms are -A_i A_j)", backward),
    ]


SDPA_VARIANTS = {
    "scale": ("sdpa-scale", "the output matches attention with another scaling of the scores: "
              "they are divided by the square root of E, the queries' and keys' last dimension"),
    "mask-ignored": ("sdpa-mask", "the output matches attention with the mask ignored: masked "
                     "positions must get (close to) zero weight"),
    "mask-inverted": ("sdpa-mask", "the output matches attention with the mask read the other "
                      "way round: True marks the positions that must NOT be attended to"),
    "mask-zero": ("sdpa-mask", "the output matches attention with masked scores set to 0: a "
                  "masked score must be very negative so that its weight vanishes after softmax"),
    "softmax-axis": ("sdpa-softmax-axis", "the output matches attention with the softmax over "
                     "the queries: each query's weights over the keys (the last axis) sum to 1"),
}


def sdpa_rules() -> list[Rule]:
    def variant_hints(s: Signature) -> dict[str, Hint]:
        found = {f.variant for f in failing(s).values() if f.variant}
        if len(found) != 1:
            return {}
        hint = Hint(*SDPA_VARIANTS[found.pop()])
        return {name: hint for name in failing(s)}

    def only_dV(s: Signature) -> dict[str, Hint]:
        """The output, dQ and dK are right in every test (the checks compare dV last) and dV is
        not: dV = P^T dLdZ reads nothing but the stored weights P and the upstream gradient,
        while dQ and dK reach P's values through the softmax's own cache. The weights kept in
        self.attention_weights are not the softmax's output."""
        failures = failing(s)
        if not failures or not all(in_backward(s)(f) and f.quantity == "dV"
                                   for f in failures.values()):
            return {}
        hint = Hint("sdpa-cache-scores", "the output, dQ and dK are right but dV is not: dV = "
                    "P^T dLdZ with P the attention weights AFTER the softmax (what multiplies "
                    "V); keep those in self.attention_weights, not the scores before the "
                    "softmax")
        return dict.fromkeys(failures, hint)

    return [
        variant_hints,
        only_dV,
        lambda s: each(s, "sdpa-backward-scale", "the output is right and a gradient is a "
                       "constant multiple of the right one: the scores' scale factor belongs in "
                       "dQ and dK too", lambda f: in_backward(s)(f)
                       and "scaled" in f.features),
        lambda s: each(s, "sdpa-mask", "the output is wrong only with a mask: masked keys must "
                       "not influence the output, and masked scores get no gradient",
                       lambda f: f.context.get("masked") and f.quantity == "output"
                       and not any(g.context.get("masked") is False
                                   for g in failing(s).values())),
        lambda s: each(s, "sdpa-backward", "the output is right but a gradient is not: follow "
                       "the forward backwards (weights times V, the softmax, the scaled product "
                       "of Q and K) and check each step's transposes", in_backward(s)),
        lambda s: each(s, "sdpa-forward", "the output is wrong, with or without a mask: check "
                       "the forward's steps in order (the scaled scores, the mask, the softmax "
                       "over the keys, the product with V)", lambda f: not in_backward(s)(f)),
    ]


def mha_rules() -> list[Rule]:
    merge = {
        "both": "a position is masked when EITHER mask masks it",
        "padding": "the key padding mask (N, S) marks keys: it must broadcast over the heads and "
                   "the queries",
        "attention": "the attention mask (L, S) must be used when it is the only mask given",
    }

    def merge_hints(s: Signature) -> dict[str, Hint]:
        helper = s.get("mha_helpers")
        if helper is None or "merge" not in helper.quantity:
            return {}
        text = "_merge_masks is wrong: " + merge.get(helper.context.get("masks", ""),
                                                     "it returns the union of the two masks")
        return {name: Hint("mha-mask-merge", text) for name in failing(s)}

    def heads_hints(s: Signature) -> dict[str, Hint]:
        helper = s.get("mha_helpers")
        if helper is None or "heads" not in helper.quantity:
            return {}
        text = ("_split_heads or _concat_heads moves features to the wrong head or time step: "
                "head h holds the h-th contiguous block of E/H features, and the head axis moves "
                "with a transpose (a reshape alone mixes time steps and heads)")
        return {name: Hint("mha-heads", text) for name in failing(s)}

    return [
        lambda s: each(s, "mha-heads-divisible", "an embed_dim that num_heads does not divide "
                       "was accepted: E // H floors, and some features belong to no head; keep "
                       "the given check_heads(embed_dim, num_heads) at the top of __init__",
                       lambda f: f.kind == "refusal"),
        merge_hints,
        heads_hints,
        mha_projection_input,
        lambda s: each(s, "mha-backward-route", "the output is right but a gradient is not: "
                       "follow the forward backwards, through out_proj, the heads, the attention "
                       "and each input's own projection", in_backward(s)),
        lambda s: each(s, "mha-forward", "the output is wrong while the helpers are right: "
                       "check the forward's order (project, split heads, attend with the merged "
                       "mask, concatenate heads, out_proj) and that each step gets the previous "
                       "one's result", lambda f: not in_backward(s)(f)),
    ]


def mha_projection_input(s: Signature) -> dict[str, Hint]:
    """Right (or not raising) when query, key and value are one array, failing when they differ."""
    if not passed(s, "mha_self_attention") or passed(s, "mha_cross_attention"):
        return {}
    text = ("right when query, key and value are one array, wrong when they differ: apply "
            "each projection to its own input, and send each input's gradient back to it")
    return {name: Hint("mha-projection-input", text) for name in failing(s)}


# ---------------------------------------------------------------------------------------------
# Tests that raised: the hint comes from the exception's class and the line that raised
# ---------------------------------------------------------------------------------------------

def raised(f: Failure, errors: tuple[str, ...]) -> bool:
    return f.kind == "raised" and f.exception in errors


def arrays_held(f: Failure) -> dict[str, tuple[int, ...]]:
    """{name: shape} of the arrays (of a known shape) the line that raised names, in its order."""
    return {name: op.shape for name, op in f.held.items()
            if op.kind == "array" and op.ndim == len(op.shape)}


def written_transposed(code: str, name: str) -> bool:
    """``name`` enters the line transposed: ``name.T``, ``swapaxes(name``, ``name.transpose(``."""
    n = re.escape(name)
    return bool(re.search(rf"(?<![\w.]){n}\s*\.\s*(T\b|mT\b|transpose\(|swapaxes\()"
                          rf"|(transpose|swapaxes)\(\s*{n}\s*[,)]", code))


def flipped(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[:-2], shape[-1], shape[-2])


def misplaced_transpose(f: Failure) -> tuple[str, str] | None:
    """(operand, its shape as written) of a product on the line that raised that fits only with
    that operand's last two axes the other way round: a matrix where its transpose belongs (or a
    transpose too many). The pairs read are the line's consecutive arrays of 2 or more
    dimensions, each as the line writes it (``W.T`` is W's shape, flipped). None when the line
    has no product or no such operand."""
    if not re.search(r"@|\bmatmul\(|\bdot\(", f.code):
        return None
    shapes = {name: flipped(shape) if written_transposed(f.code, name) else shape
              for name, shape in arrays_held(f).items() if len(shape) >= 2}
    names = list(shapes)
    for a, b in zip(names, names[1:]):
        if shapes[a][-1] == shapes[b][-2]:
            continue
        if shapes[a][-1] == shapes[b][-1]:  # b's transpose fits
            return b, str(shapes[b])
        if shapes[a][-2] == shapes[b][-2]:  # a's transpose fits
            return a, str(shapes[a])
    return None


def raised_hint(family: str, text: Callable[[Failure], str | None],
                errors: tuple[str, ...] = SHAPE_ERRORS) -> Rule:
    """The rule giving ``family``'s hint, worded by ``text(failure)``, to each failing test that
    raised one of ``errors`` and whose failure ``text`` reads (None: it does not)."""
    def rule(s: Signature) -> dict[str, Hint]:
        found = {name: text(f) for name, f in failing(s).items() if raised(f, errors)}
        return {name: Hint(family, words) for name, words in found.items() if words}
    return rule


def mask_dtype(f: Failure) -> str | None:
    """A mask on the line that raised is an array that is not boolean."""
    masks = [(name, op.dtype) for name, op in f.held.items()
             if "mask" in name.lower() and op.kind == "array" and op.dtype != "bool"]
    if not masks:
        return None
    name, dtype = masks[0]
    return (f"a mask is not boolean: {name} holds {dtype} values where the masks are boolean "
            f"(True = do not attend); merge masks with |, & and ~ (they stay boolean), not "
            f"with arithmetic or astype")


def float_size(f: Failure) -> str | None:
    """A TypeError with Python's words for a float where an integer belongs, or a Python float
    on the line that raised."""
    floats = [name for name, op in f.held.items() if op.kind == "scalar" and op.dtype == "float"]
    if not f.message and not floats:
        return None
    which = f"{floats[0]} is a Python float" if floats else "a size there is a float"
    said = f"TypeError: {f.message}" if f.message else "a TypeError"
    return (f"a size computed with /: {which}, and numpy raised {said}. True division (/) gives "
            f"a float even when it divides exactly (embed_dim / num_heads); compute sizes with "
            f"// (integer division)")


def backward_input(f: Failure) -> str | None:
    """The given check_backward of another layer than the step's own raised: the step handed
    that inner layer's backward an array of the wrong shape. (The step's own check raising
    means what its forward stored is wrong, not what a caller passed.)"""
    inner = re.search(r"check_backward\(\s*[\"'](\w+)[\"']", f.code)
    if inner is None or f.step.startswith(f"{inner.group(1)}."):
        return None
    layer = inner.group(1)
    softmax = " (Softmax's: that of the weights, dLdZ V^T)" if layer == "Softmax" else ""
    return (f"{f.step} handed {layer}.backward the wrong array: the gradient it got is not "
            f"shaped like that layer's forward output (the shapes below); pass each backward "
            f"the gradient of its own layer's output{softmax}")


def softmax_transposed(f: Failure) -> str | None:
    """In attention's forward, a product fits only with an operand shaped (..., S, L), the
    scores' (..., L, S) transposed (L and S from the step's Q and K)."""
    found = misplaced_transpose(f)
    Q, K = f.given.get("Q"), f.given.get("K")
    if found is None or Q is None or K is None or Q[-2] == K[-2]:
        return None
    name, shape = found
    if arrays_held(f)[name][-2:] != (K[-2], Q[-2]):
        return None
    return (f"{name} is {shape}, (..., S, L): the scores' last two axes are swapped, as for a "
            f"softmax taken over a transposed axis; the scores Q K^T are (..., L, S) and the "
            f"softmax runs along the keys S (the last axis), with no transpose")


def weight_transposed(f: Failure) -> str | None:
    found = misplaced_transpose(f)
    if found is None:
        return None
    name, shape = found
    return (f"a matrix where its transpose belongs: the product on this line fits only with "
            f"{name} the other way round ({name} enters it as {shape}, as written); write "
            f"each factor's shape from the docstring, (..., m, k) @ (..., k, n)")


REDUCTION = re.compile(r"\.(sum|max|min|mean|prod|amax|amin|vecdot)\(|\bnp\.(sum|max|min|mean|"
                       r"prod|amax|amin|vecdot)\(")


def dropped_axis(f: Failure) -> str | None:
    """An axis dropped by a reduction: one along an axis without keepdims on the line that
    raised (its result no longer broadcasts against the array it came from), or an operand
    shaped like another with one axis removed (reduced on an earlier line)."""
    held = arrays_held(f)
    evidence = ""
    if REDUCTION.search(f.code) and "axis" in f.code and "keepdims" not in f.code:
        axes = [op.value for name, op in f.held.items()
                if op.kind == "scalar" and op.dtype == "int" and ("dim" in name or "axis" in name)]
        literal = re.search(r"axis\s*=\s*(-?\d+)", f.code)
        axis = axes[0] if axes else int(literal.group(1)) if literal else None
        for name, shape in held.items():
            if axis is not None and -len(shape) <= axis < len(shape):
                reduced = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
                evidence = f": {name} is {shape}, reduced along axis {axis} it is {reduced}"
                break
    else:
        pairs = [(a, b, k) for a in held for b in held for k in range(len(held[b]))
                 if held[a] == held[b][:k] + held[b][k + 1:]]
        if not pairs:
            return None
        a, b, k = pairs[0]
        evidence = f": {a} {held[a]} is {b} {held[b]} without its axis {k}"
    return (f"a reduction drops the axis it reduces (keepdims is missing){evidence}, which no "
            f"longer broadcasts against the array it came from; pass keepdims=True (or "
            f"np.expand_dims the result) so the reduced axis stays, with length 1")


def kept_from_earlier_call(f: Failure) -> str | None:
    """A later call of the same object raised, and an array on its line is sized by the previous
    call's inputs: each of its lengths past 1 is one of theirs, and one is none of this call's."""
    if not f.earlier or f.earlier == f.given:
        return None
    before = {n for shape in f.earlier.values() for n in shape}
    now = {n for shape in f.given.values() for n in shape}
    for name, shape in arrays_held(f).items():
        sizes = {n for n in shape if n > 1}
        if sizes and sizes <= before and not sizes <= now:
            given = ", ".join(f"{k} {v}" for k, v in f.earlier.items())
            return (f"a later call of {f.step} raised: {name} has shape {shape}, built for the "
                    f"previous call's inputs ({given}) and kept; compute it from each call's "
                    f"own inputs instead of keeping it on the object")
    return None


def raised_rules(category: str) -> list[Rule]:
    """The rules for tests whose step raised one of :data:`SHAPE_ERRORS`, :data:`DTYPE_ERRORS`
    or :data:`SIZE_ERRORS`, most specific first: a boolean mask used as an index (an IndexError
    on a line that indexes with a mask), a mask that is not boolean, a float size, a dtype numpy
    would not cast, the wrong array handed to a backward, then the shape errors each category
    knows, then the shapes of the line that raised read as a known family (a softmax over a
    transposed axis, a matrix where its transpose belongs, an axis dropped by a reduction), then
    any shape error, whose hint says that no known family matches. They read what raised, where
    and the shapes there, never the values."""
    boolean_index = (
        "a step raised IndexError on a line that indexes with a boolean mask: x[mask] needs the "
        "mask to have the indexed array's own shape, and the masks given here only broadcast "
        "against it ((L, S) or (N, 1, 1, S) against (N, ..., H, L, S)); apply the mask with "
        "np.where(mask, ..., ...) or np.copyto(..., where=mask), which broadcast")
    dtype = ("a step raised a numpy casting error: an in-place operation or out= writes values "
             "of one dtype into an array of another (float into an integer or boolean array), "
             "or a mask is not boolean; create each array with the dtype of what goes into it")
    shape = ("a step raised {exception} on arrays whose shapes do not fit (a product, a "
             "broadcast, a reshape or an axis), in none of the ways the hints know: at the line "
             "the message names, compare each array's shape with the one the docstring gives")
    by_category = {
        "Linear": [lambda s: each(s, "linear-forward-product", "forward raised: check the "
                                  "shapes in the product of A with W (W is (out_features, "
                                  "in_features))", lambda f: f.quantity == "forward")],
        "ScaledDotProductAttention": [
            lambda s: each(s, "sdpa-backward-shapes", "backward multiplies arrays whose shapes "
                           "do not match when the numbers of queries and keys differ: check "
                           "which factor of each product is transposed (dV is shaped like V, "
                           "dK like K)", lambda f: f.step.endswith(".backward"))],
        "MultiHeadAttention": [mha_projection_input],
    }

    return [
        lambda s: each(s, "boolean-index", boolean_index,
                       lambda f: raised(f, ("IndexError",)) and bool(MASK_INDEX.search(f.code))),
        raised_hint("mask-dtype", mask_dtype, SHAPE_ERRORS + DTYPE_ERRORS + SIZE_ERRORS),
        raised_hint("float-size", float_size, SIZE_ERRORS),
        lambda s: each(s, "dtype", dtype, lambda f: raised(f, DTYPE_ERRORS)),
        raised_hint("backward-input", backward_input),
        raised_hint("stale-cache", kept_from_earlier_call),
        *by_category.get(category, []),  # read only for the tests that raised (hints)
        raised_hint("softmax-transposed", softmax_transposed),
        raised_hint("transpose", weight_transposed),
        raised_hint("keepdims", dropped_axis),
        lambda s: {name: Hint("shape", shape.format(exception=f.exception))
                   for name, f in failing(s).items() if raised(f, SHAPE_ERRORS)},
    ]


# The mytorch classes each category's class calls: when one of them fails its own tests, that is
# the likely cause of this category's failures too.
USES = {"ScaledDotProductAttention": ("Softmax",),
        "MultiHeadAttention": ("Linear", "Softmax", "ScaledDotProductAttention")}

RULES: dict[str, list[Rule]] = {
    "Linear": linear_rules(),
    "Softmax": softmax_rules(),
    "ScaledDotProductAttention": sdpa_rules(),
    "MultiHeadAttention": mha_rules(),
}


def hints(category: str, signature: Signature,
          failed: frozenset[str] = frozenset()) -> dict[str, Hint]:
    """For each failing test of ``category`` whose failure the rules read, the first hint a rule
    gives it; tests no rule recognises are left out. The kind of failure decides which rules read
    it: wrong values (:data:`VALUE_KINDS`) the generic rules, then the category's, in order; a
    step that raised a shape, dtype or size (TypeError) error the :func:`raised_rules` only, from
    the exception, its line and its operands, never a value family. A stub, a file that does not
    import, a hang or any other exception gets no hint: the feedback names its kind and place. When a class this one uses is
    in ``failed`` (the categories that lost points), that is every such failure's hint."""
    valued = {name for name, failure in failing(signature).items()
              if failure.kind in VALUE_KINDS}
    raising = {name for name, failure in failing(signature).items()
               if raised(failure, SHAPE_ERRORS + DTYPE_ERRORS + SIZE_ERRORS)}
    used = [name for name in USES.get(category, ()) if name in failed]
    if used:
        hint = Hint("uses-a-failing-class", f"{category} calls your {' and '.join(used)}, which "
                    f"fail{'s' if len(used) == 1 else ''} its own hidden tests: fix "
                    f"{'it' if len(used) == 1 else 'them'} first")
        return dict.fromkeys(sorted(valued | raising), hint)
    found: dict[str, Hint] = {}
    for rules, names in ((generic_rules() + RULES.get(category, []), valued),
                         (raised_rules(category), raising)):
        for rule in rules:
            for name, hint in rule(signature).items():
                if name in names:
                    found.setdefault(name, hint)
    for name in raising & set(found):  # what the step was given and what it must return
        operands = signature[name].operands
        if operands:
            found[name] = Hint(found[name].family, f"{found[name].text} ({operands})")
    return found
