"""A lookup table of learned vectors, one row per token id."""
import numpy as np

from ._checks import check_backward


class Embedding:
    """Maps integer ids of any shape (*) to rows of ``W``, shape (*, embedding_dim).

    Like ``torch.nn.Embedding``: ``W`` is (num_embeddings, embedding_dim), zero until
    ``init_weights``. After ``backward`` the layer holds ``dLdW``, the same shape as ``W``: row k is
    the sum of the upstream gradients of every position whose id is k (rows of unused ids are 0).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.W = np.zeros((num_embeddings, embedding_dim))
        self.dLdW = None
        self.indices = None  # the ids of the last forward call, kept for backward

    def init_weights(self, W: np.ndarray) -> None:
        """Load W (num_embeddings, embedding_dim)."""
        W = np.asarray(W)
        expected = (self.num_embeddings, self.embedding_dim)
        if W.shape != expected:
            raise ValueError(f"Embedding.init_weights: W must have shape (num_embeddings, "
                             f"embedding_dim) = {expected}, got {W.shape}")
        self.W = W

    def forward(self, indices: np.ndarray) -> np.ndarray:
        """Return the rows of W picked by ``indices`` (*), an array of shape (*, embedding_dim).

        The ids are stored in ``self.indices`` for ``backward``.
        """
        indices = np.asarray(indices)
        if not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"Embedding.forward: indices must be integers, got dtype {indices.dtype}")
        if indices.size and (indices.min() < 0 or indices.max() >= self.num_embeddings):
            raise ValueError(f"Embedding.forward: ids must lie in [0, {self.num_embeddings}), got "
                             f"values in [{indices.min()}, {indices.max()}]")
        self.indices = indices
        # TODO: pick the rows of self.W named by indices: (*) -> (*, embedding_dim)
        # BEGIN SOLUTION
        return self.W[indices]
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> None:
        """Store ``self.dLdW`` from dLdZ (*, embedding_dim); the integer ids get no gradient.

        Row k of dLdW sums dLdZ over every position whose id is k; an id used twice collects two
        contributions. ``dLdW[ids] += rows`` does NOT do that (a repeated index is written once):
        ``np.add.at(dLdW, ids, rows)`` does.
        """
        dLdZ = np.asarray(dLdZ)
        check_backward("Embedding", "dLdZ", dLdZ,
                       None if self.indices is None else (*self.indices.shape, self.embedding_dim))
        # TODO: self.dLdW (num_embeddings, embedding_dim): row k sums dLdZ where indices == k
        # BEGIN SOLUTION
        self.dLdW = np.zeros_like(self.W, dtype=dLdZ.dtype)
        np.add.at(self.dLdW, self.indices.reshape(-1), dLdZ.reshape(-1, self.embedding_dim))
        # END SOLUTION
