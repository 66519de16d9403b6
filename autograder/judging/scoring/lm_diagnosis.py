"""Why a language model scores less than its run promised: causes the grader can see in a handin.

Used when the perplexity measured on the hidden set is above the full-marks mark, or when the
handin's own test_metrics.json is far from what its weights give on the same test transcripts. Each
cause is read from numbers the grader measured or the handin carries (the run card's best
validation perplexity, the state dict's shapes), never from the hidden set's text; a hint is given
only when one cause fits, and nothing when none does.
"""
from __future__ import annotations

import math

# The perplexity the packed weights give on the run's test set may exceed the best validation
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
            compared: float | None, best_val: float | None, tolerance: float,
            card_disagrees: bool = False, dropout_active: bool | None = None) -> str:
    """The likely cause of a weak or self-contradicting result, or ''.

    ``measured``: the hidden set's perplexity; ``reported``: test_metrics.json's; ``compared``: what
    the packed weights give on the very transcripts test_metrics.json measured (None when that set
    could not be measured); ``best_val``: the validation perplexity the packed checkpoint recorded
    as its best; ``tolerance``: how far apart (relative) reported and measured numbers may be;
    ``card_disagrees``: the weights, config or metrics differ from the run card make handin wrote
    (then nothing about the training run can be read from them, and no cause is given: the staff
    get the facts); ``dropout_active``: the config's model has dropout or layer drop (only then can
    evaluating in training mode change the number).
    """
    if card_disagrees:
        return ""
    comparable = _finite(reported) and _finite(compared)
    # one bound on each side (not abs(reported - compared)): which side is then read once
    worse = comparable and reported > compared * (1 + tolerance)
    better = comparable and reported < compared * (1 - tolerance)
    if not (worse or better) and measured <= full_marks_ppl:
        return ""
    if worse:
        return ("test_metrics.json reports a worse perplexity than these weights give on the same "
                "test transcripts: was it measured "
                + ("in training mode (dropout on: call model.eval(), as "
                   "evaluate_language_model does), or " if dropout_active else "")
                + "on other weights than the packed best checkpoint (the last epoch's?)")
    if better:
        return ("test_metrics.json reports a better perplexity than these weights give on the same "
                "test transcripts: the packed weights (the best checkpoint) are not the ones that "
                "were evaluated (was another epoch's model evaluated?)")
    if _finite(compared) and _finite(best_val) and compared > best_val * (1 + VAL_TEST_GAP):
        return ("these weights do much worse than the best validation perplexity their "
                "checkpoint recorded: the checkpoint holds other weights than the best epoch's "
                "(is the best model saved only when the validation perplexity improves, and "
                "saved after that epoch's training?)")
    return ""
