"""AdamW (Loshchilov & Hutter, 2019) on numpy arrays, step for step like torch.optim.AdamW."""
import math

import numpy as np


class AdamW:
    """Adam with decoupled weight decay, updating numpy arrays in place.

    Args:
        params: {name: array} (one group), or a list of groups ``{"params": {name: array}, "lr":
            ..., "weight_decay": ...}`` (a group's missing keys take the defaults below), like
            torch's parameter groups. The arrays are updated in place.
        lr, betas, eps, weight_decay: as ``torch.optim.AdamW`` (defaults 1e-3, (0.9, 0.999),
            1e-8, 1e-2).

    ``param_groups`` is the list of groups; set a group's ``"lr"`` between steps to follow a
    learning-rate schedule, as torch's schedulers do. The moment estimates ``m`` and ``v`` and the
    step count ``t`` are kept per parameter name.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2):
        groups = [{"params": params}] if isinstance(params, dict) else list(params)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups = [{**defaults, **group} for group in groups]
        names = [name for group in self.param_groups for name in group["params"]]
        if len(names) != len(set(names)):
            raise ValueError("AdamW: a parameter name appears in more than one group")
        self.m = {name: None for name in names}
        self.v = {name: None for name in names}
        self.t = {name: 0 for name in names}

    def step(self, gradients: dict[str, np.ndarray]) -> None:
        """One update of every parameter that has an entry in ``gradients`` (same names).

        For parameter p with gradient g, at step t (from 1), in the order torch applies it:
            p <- p * (1 - lr * weight_decay)            (decoupled decay, before the Adam step)
            m <- beta1 * m + (1 - beta1) * g,   v <- beta2 * v + (1 - beta2) * g^2
            p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
        m and v start at zero.
        """
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            for name, p in group["params"].items():
                if name not in gradients:
                    continue
                g = gradients[name]
                if g.shape != p.shape:
                    raise ValueError(f"AdamW: gradient of {name} has shape {g.shape}, the "
                                     f"parameter {p.shape}")
                if self.m[name] is None:
                    self.m[name], self.v[name] = np.zeros_like(p), np.zeros_like(p)
                self.t[name] += 1
                # TODO: the AdamW update of p in place (see the docstring), updating
                #       self.m[name] and self.v[name] in place
                # BEGIN SOLUTION
                m, v, t = self.m[name], self.v[name], self.t[name]
                p *= 1.0 - lr * group["weight_decay"]
                m *= beta1
                m += (1.0 - beta1) * g
                v *= beta2
                v += (1.0 - beta2) * (g * g)
                denominator = np.sqrt(v) / math.sqrt(1.0 - beta2 ** t) + group["eps"]
                p -= (lr / (1.0 - beta1 ** t)) * m / denominator
                # END SOLUTION


def clip_grad_norm(gradients: dict[str, np.ndarray], max_norm: float) -> float:
    """Scale every gradient in place by max_norm / (total_norm + 1e-6) when that is below 1, where
    total_norm is the 2-norm of all gradients together; return total_norm (before clipping).

    Like ``torch.nn.utils.clip_grad_norm_``.
    """
    total_norm = math.sqrt(sum(float(np.vdot(g, g)) for g in gradients.values()))
    scale = max_norm / (total_norm + 1e-6)
    if scale < 1.0:
        for g in gradients.values():
            g *= scale
    return total_norm
