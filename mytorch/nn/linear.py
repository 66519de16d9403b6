"""A fully connected layer on inputs with any number of leading batch dimensions."""
import numpy as np

from ._checks import check_backward, check_linear_input, check_linear_weights


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
        self.output_shape = None  # None until forward runs

    def init_weights(self, W: np.ndarray, b: np.ndarray) -> None:
        """Load W (out_features, in_features) and b (out_features,)."""
        W, b = np.asarray(W), np.asarray(b)
        check_linear_weights(W, b, self.in_features, self.out_features)
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
        check_linear_input(A, self.in_features)
        self.A = A
        self.input_shape = A.shape
        self.output_shape = (*A.shape[:-1], self.out_features)
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
        dLdZ = np.asarray(dLdZ)
        check_backward("Linear", "dLdZ", dLdZ, self.output_shape)
        # TODO: dLdA (*batch_dims, in_features); store dLdW (out, in) and dLdb (out,)
        # BEGIN SOLUTION
        dLdZ_flat = dLdZ.reshape(-1, self.out_features)
        A_flat = self.A.reshape(-1, self.in_features)
        self.dLdW = dLdZ_flat.T @ A_flat
        self.dLdb = dLdZ_flat.sum(axis=0)
        return (dLdZ_flat @ self.W).reshape(self.input_shape)
        # END SOLUTION
