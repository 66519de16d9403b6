"""GELU, the exact (erf) form: x * Phi(x), Phi the standard normal CDF; and a numpy ``erf``."""
import math

import numpy as np

from ._checks import check_backward

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

# Abramowitz & Stegun 7.1.26: erf(x) = 1 - t (a1 + a2 t + ... + a5 t^4) exp(-x^2), t = 1/(1 + p x)
# for x >= 0, absolute error below 1.5e-7, about one float32 rounding step of values near 1.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                      0.254829592))  # a5 ... a1
_BLOCK = 65536  # float32 entries per block: each block's temporaries stay in the CPU cache
_math_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_float32_block(x: np.ndarray, out: np.ndarray) -> None:
    """A&S 7.1.26 on a 1-d float32 block, written into ``out``, every step in place."""
    magnitude = np.abs(x)
    t = magnitude * _AS_P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _AS_A[0])
    for coefficient in _AS_A[1:]:
        poly *= t
        poly += coefficient
    poly *= t
    magnitude *= magnitude
    np.negative(magnitude, out=magnitude)
    np.exp(magnitude, out=magnitude)
    poly *= magnitude
    np.subtract(1.0, poly, out=poly)
    np.copysign(poly, x, out=out)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in x's float dtype (numpy has none, and scipy is not used).

    float64 (and any non-float input): the C library's ``erf`` (what PyTorch uses for float64),
    correct to the last bit or so, evaluated one element at a time (a Python call each: slow).
    float32 and float16: a vectorised approximation (A&S 7.1.26) in float32 blocks, with an
    absolute error below 4e-7 (1.5e-7 from the formula, the rest float32 rounding); torch's own
    float32 GELU is about 1e-6 from the exact one.
    """
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float16):
        return _math_erf(x.astype(np.float64, copy=False)).astype(np.float64)
    flat = x.astype(np.float32).reshape(-1)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _BLOCK):
        _erf_float32_block(flat[start:start + _BLOCK], out[start:start + _BLOCK])
    return out.reshape(x.shape).astype(x.dtype, copy=False)


class GELU:
    """GELU(A) = A * Phi(A), Phi(A) = 0.5 * (1 + erf(A / sqrt(2))): ``torch.nn.GELU()``'s exact form.

    (Not the tanh approximation, ``nn.GELU(approximate="tanh")``.) Any shape; the output keeps A's
    dtype. ``forward`` keeps A and Phi(A) for ``backward``.
    """

    def __init__(self):
        self.A = None
        self.cdf = None  # Phi(A) of the last forward call

    def forward(self, A: np.ndarray) -> np.ndarray:
        """Return A * Phi(A), same shape and dtype as A; store ``self.A`` and ``self.cdf``.

        Use ``erf`` above (it keeps float32 float32). Python floats such as ``0.5`` or
        ``math.sqrt(0.5)`` do not promote a float32 array.
        """
        A = np.asarray(A)
        self.A = A
        # TODO: self.cdf = 0.5 * (1 + erf(A / sqrt(2))); return A * self.cdf
        # BEGIN SOLUTION
        self.cdf = erf(A * _SQRT_HALF)
        self.cdf += 1.0
        self.cdf *= 0.5
        return A * self.cdf
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdA = dLdZ * (Phi(A) + A * phi(A)), phi(A) = exp(-A^2 / 2) / sqrt(2 pi) the
        standard normal density (the derivative of Phi)."""
        dLdZ = np.asarray(dLdZ)
        check_backward("GELU", "dLdZ", dLdZ, None if self.A is None else self.A.shape)
        # TODO: dLdA = dLdZ * (cdf + A * pdf(A)), same shape as A
        # BEGIN SOLUTION
        slope = np.exp(self.A * self.A * -0.5)
        slope *= _INV_SQRT_2PI
        slope *= self.A
        slope += self.cdf
        return dLdZ * slope
        # END SOLUTION
