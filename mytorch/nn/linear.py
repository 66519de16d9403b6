"""A fully connected layer on inputs with any number of leading batch dimensions."""
import numpy as np


class Linear:
    """Affine map Z = A W^T + b applied to the last dimension of A.

    Parameters follow PyTorch's layout so weights can be copied from ``torch.nn.Linear``:
    ``W`` is (out_features, in_features) and ``b`` is (out_features,). Both start at zero: call
    ``init_weights`` before use. Arithmetic follows numpy's type promotion, so float32 inputs with
    float32 weights give float32 outputs and gradients.

    After ``backward`` the layer holds ``dLdW`` (out_features, in_features) and ``dLdb``
    (out_features,), the gradients summed over every batch position.
    """

    def __init__(self, in_features: int, out_features: int):
        self.in_features = in_features
        self.out_features = out_features
        self.W = np.zeros((out_features, in_features))
        self.b = np.zeros(out_features)
        self.dLdW = None
        self.dLdb = None
        self.A = None  # the input of the last forward call, kept for backward
        self.input_shape = None

    def init_weights(self, W: np.ndarray, b: np.ndarray) -> None:
        """Load W (out_features, in_features) and b (out_features,)."""
        W, b = np.asarray(W), np.asarray(b)
        expected_W = (self.out_features, self.in_features)
        if W.shape != expected_W:
            raise ValueError(f"Linear.init_weights: W must have shape (out_features, "
                             f"in_features) = {expected_W}, got {W.shape}")
        if b.shape != (self.out_features,):
            raise ValueError(f"Linear.init_weights: b must have shape (out_features,) = "
                             f"{(self.out_features,)}, got {b.shape}")
        self.W, self.b = W, b

    def forward(self, A: np.ndarray) -> np.ndarray:
        """Apply the layer to A of shape (*batch_dims, in_features).

        Returns Z of shape (*batch_dims, out_features). Any number of batch dimensions works,
        none included. The input is stored in ``self.A`` (its shape in ``self.input_shape``)
        for ``backward``.

        Hint: flatten the batch dimensions, (*batch_dims, in) -> (B, in) with B = prod(batch_dims),
        so one matrix product does the work, then restore them on the result.
        """
        A = np.asarray(A)
        if A.ndim == 0 or A.shape[-1] != self.in_features:
            raise ValueError(f"Linear.forward: expected input of shape (*, {self.in_features}) "
                             f"(last dim = in_features), got {A.shape}")
        self.A = A
        self.input_shape = A.shape
        # TODO: Z = A W^T + b, (*batch_dims, in_features) -> (*batch_dims, out_features)
        # BEGIN SOLUTION
        Z = A.reshape(-1, self.in_features) @ self.W.T
        Z += self.b
        return Z.reshape(*self.input_shape[:-1], self.out_features)
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Back-propagate dLdZ of shape (*batch_dims, out_features).

        Returns dLdA of shape (*batch_dims, in_features) and stores ``self.dLdW``
        (out_features, in_features) and ``self.dLdb`` (out_features,), summed over all B batch
        positions. With A and dLdZ flattened to (B, in) and (B, out):
        dLdA = dLdZ W, dLdW = dLdZ^T A, dLdb = sum of dLdZ over the B rows.
        """
        if self.A is None:
            raise RuntimeError("Linear.backward called before forward: call forward first")
        dLdZ = np.asarray(dLdZ)
        expected = (*self.input_shape[:-1], self.out_features)
        if dLdZ.shape != expected:
            raise ValueError(f"Linear.backward: dLdZ must have the forward output's shape "
                             f"{expected}, got {dLdZ.shape}")
        # TODO: dLdA (*batch_dims, in_features); store dLdW (out, in) and dLdb (out,)
        # BEGIN SOLUTION
        dLdZ_flat = dLdZ.reshape(-1, self.out_features)
        A_flat = self.A.reshape(-1, self.in_features)
        self.dLdW = dLdZ_flat.T @ A_flat
        self.dLdb = dLdZ_flat.sum(axis=0)
        return (dLdZ_flat @ self.W).reshape(self.input_shape)
        # END SOLUTION
