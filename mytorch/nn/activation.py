"""Softmax over one dimension of an array with any number of dimensions."""
import numpy as np

from ._checks import check_backward, check_softmax_dim


class Softmax:
    """A = softmax(Z) along ``dim``: every slice of A along ``dim`` is positive and sums to 1.

    ``dim`` may be negative, counting from the end as in numpy and PyTorch. The output keeps the
    input's shape and dtype. ``forward`` stores its output in ``self.A`` for ``backward``.
    """

    def __init__(self, dim: int = -1):
        self.dim = dim
        self.A = None  # the output of the last forward call, kept for backward

    def forward(self, Z: np.ndarray) -> np.ndarray:
        """Return softmax(Z) along ``self.dim``, same shape and dtype as Z; store it in ``self.A``.

        Leave Z itself unchanged (write into a new array): the caller may still need it.

        Hint: softmax does not change when a constant is subtracted from a slice. Subtract each
        slice's maximum before ``np.exp`` so logits like +1000 do not overflow to inf (and
        -1000 slices do not underflow to 0/0). ``keepdims=True`` keeps the reductions
        broadcastable against Z.
        """
        Z = np.asarray(Z)
        check_softmax_dim(self.dim, Z.ndim)
        # TODO: A = exp(Z - max) / sum(exp(Z - max)) along self.dim, same shape as Z; store self.A
        # BEGIN SOLUTION
        A = Z - Z.max(axis=self.dim, keepdims=True)
        np.exp(A, out=A)
        A /= A.sum(axis=self.dim, keepdims=True)
        self.A = A
        return A
        # END SOLUTION

    def backward(self, dLdA: np.ndarray) -> np.ndarray:
        """Return dLdZ (same shape as dLdA) from dLdA and the stored output ``self.A``.

        For one slice a along ``dim`` the Jacobian is J = diag(a) - a a^T, so
        dLdz = J^T dLda = a * (dLda - <dLda, a>): elementwise products and one reduction along
        ``dim`` (``keepdims=True`` keeps it broadcastable; ``np.vecdot(x, y, axis=dim)`` is the
        dot product along one axis). Never build the per-slice Jacobians: they cost O(C^2)
        memory and time per slice, where this identity costs O(C).
        """
        dLdA = np.asarray(dLdA)
        check_backward("Softmax", "dLdA", dLdA, None if self.A is None else self.A.shape)
        # TODO: dLdZ = A * (dLdA - sum(dLdA * A, dim, keepdims=True)), same shape as dLdA
        # BEGIN SOLUTION
        # vecdot reduces dLdA * A along dim without materialising the product.
        row_dot = np.expand_dims(np.vecdot(dLdA, self.A, axis=self.dim), self.dim)
        dLdZ = dLdA - row_dot
        dLdZ *= self.A
        return dLdZ
        # END SOLUTION
