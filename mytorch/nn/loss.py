"""Cross-entropy between logits and integer targets, skipping an ignored target id."""
import numpy as np


class CrossEntropyLoss:
    """Like ``torch.nn.CrossEntropyLoss(ignore_index, reduction)`` on logits (*, K), targets (*).

    The loss of one position with logits z and target y is -log softmax(z)[y] = logsumexp(z) - z[y].
    Positions whose target equals ``ignore_index`` (the padding) count for nothing. ``reduction``
    "mean" (the default) divides the sum by the number of the other positions, "sum" does not.
    When every target is ignored the mean is 0 with a zero gradient (torch returns NaN there).
    """

    def __init__(self, ignore_index: int = -100, reduction: str = "mean"):
        if reduction not in ("mean", "sum"):
            raise ValueError(f"CrossEntropyLoss: reduction must be 'mean' or 'sum', got {reduction!r}")
        self.ignore_index = ignore_index
        self.reduction = reduction
        # Kept by forward for backward: softmax probabilities, targets, which positions count.
        self.probs = None
        self.targets = None
        self.valid = None

    def forward(self, logits: np.ndarray, targets: np.ndarray) -> float:
        """Return the loss (a float) of logits (*, K) against integer targets (*).

        Subtract each row's maximum before exponentiating (a stable log-softmax), and never index
        the logits with an ignored target (``ignore_index`` may be out of range, e.g. -100).
        Store ``self.probs`` (*, K), ``self.targets`` and ``self.valid`` (*, bool) for backward.
        """
        logits, targets = np.asarray(logits), np.asarray(targets)
        if logits.ndim == 0 or logits.shape[:-1] != targets.shape:
            raise ValueError(f"CrossEntropyLoss: logits (*, K) and targets (*) must share their "
                             f"leading dims, got logits {logits.shape} and targets {targets.shape}")
        if not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"CrossEntropyLoss: targets must be integer class ids, got dtype "
                             f"{targets.dtype}")
        valid = targets != self.ignore_index
        if np.any((targets[valid] < 0) | (targets[valid] >= logits.shape[-1])):
            raise ValueError(f"CrossEntropyLoss: targets must lie in [0, {logits.shape[-1]}) "
                             f"(or equal ignore_index={self.ignore_index})")
        # TODO: stable log-softmax over the last dim; loss = sum (or mean) over the valid
        #       positions of -log_probs[target]; store self.probs, self.targets, self.valid
        # BEGIN SOLUTION
        shifted = logits - logits.max(axis=-1, keepdims=True)
        exp = np.exp(shifted)
        total = exp.sum(axis=-1, keepdims=True)
        self.probs = exp / total
        safe_targets = np.where(valid, targets, 0)[..., None]
        target_logit = np.take_along_axis(shifted, safe_targets, axis=-1)[..., 0]
        nll = np.log(total[..., 0]) - target_logit
        self.targets, self.valid = safe_targets, valid
        loss = float(np.sum(nll[valid], dtype=np.float64))
        return loss / max(int(valid.sum()), 1) if self.reduction == "mean" else loss
        # END SOLUTION

    def backward(self) -> np.ndarray:
        """Return dLoss/dlogits (*, K): softmax(z) - onehot(y) on valid positions, 0 on ignored
        ones, divided by the number of valid positions for "mean"."""
        if self.probs is None:
            raise RuntimeError("CrossEntropyLoss.backward called before forward: call forward first")
        # TODO: (probs - onehot(targets)) * valid, / number of valid positions for "mean"
        # BEGIN SOLUTION
        grad = self.probs.copy()
        np.put_along_axis(grad, self.targets,
                          np.take_along_axis(grad, self.targets, axis=-1) - 1, axis=-1)
        grad *= self.valid[..., None]
        if self.reduction == "mean":
            grad /= max(int(self.valid.sum()), 1)
        return grad
        # END SOLUTION
