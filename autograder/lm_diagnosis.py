"""Why a language model scores less than its run promised: causes the grader can see in a handin.

Used when the perplexity measured on the hidden set is above the full-marks mark, or when the
handin's own test_metrics.json is far from what its weights give on the public test split. Each
cause is read from numbers the grader measured or the handin carries (the run card's best
validation perplexity, the state dict's shapes), never from the hidden set's text; a hint is given
only when one cause fits, and nothing when none does.
"""
from __future__ import annotations

import math

# The perplexity the packed weights give on the public test split may exceed the best validation
# perplexity their checkpoint recorded by this much (relative) before they are called other
# weights: the two splits differ by a few percent for the default config (docs/results.md).
VAL_TEST_GAP = 0.10


def fitting_tokenizers(state_shapes: dict[str, tuple], vocab_sizes: dict[str, int]) -> list[str]:
    """The tokenizers whose vocabulary size matches the weights' embedding (or output) rows."""
    shape = state_shapes.get("target_embedding.weight") or state_shapes.get("final_linear.weight")
    if not shape:
        return []
    return [name for name, size in vocab_sizes.items() if size == shape[0]]


def tokenizer_hint(configured: str, state_shapes: dict[str, tuple],
                   vocab_sizes: dict[str, int]) -> str:
    """When the weights were trained with another tokenizer than config.yaml names: which."""
    fitting = fitting_tokenizers(state_shapes, vocab_sizes)
    if not fitting or configured in fitting:
        return ""
    return (f"the weights fit the {' or '.join(fitting)} tokenizer, but config.yaml's "
            f"tokenization.token_type is {configured}: hand in the config of the run that trained "
            f"them")


def _finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def lm_hint(measured: float, full_marks_ppl: float, reported: float | None,
            public: float | None, best_val: float | None, tolerance: float) -> str:
    """The likely cause of a weak or self-contradicting result, or ''.

    ``measured``: the hidden set's perplexity; ``reported``: test_metrics.json's; ``public``: what
    the packed weights give on the public test split (which test_metrics.json reports on);
    ``best_val``: the validation perplexity the packed checkpoint recorded as its best;
    ``tolerance``: how far apart (relative) reported and measured numbers may be.
    """
    far = _finite(reported) and _finite(public) and abs(reported - public) > tolerance * public
    if not far and measured <= full_marks_ppl:
        return ""
    if far and reported > public:
        return ("your own test evaluation is worse than what these weights give with dropout "
                "off: evaluate in eval mode (model.eval(), no dropout or layer drop)")
    if _finite(public) and _finite(best_val) and public > best_val * (1 + VAL_TEST_GAP):
        return ("these weights do much worse than the best validation perplexity their "
                "checkpoint recorded: the checkpoint holds other weights than the best epoch's "
                "(is the best model saved only when the validation perplexity improves, and "
                "saved after that epoch's training?)")
    if far and reported < public:
        return ("test_metrics.json reports a better perplexity than these weights give: the "
                "packed weights are not the ones that were evaluated (the last epoch's packed, "
                "the best epoch's evaluated?)")
    return ""
