"""Adafactor: Adam-like steps whose second moment of a matrix is kept factored, as one
running mean of squared gradients per row and one per column (memory O(n + m), not O(nm)),
with a relative step size and the update's root mean square clipped to `d`."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from .optimizer import Optimizer
from .rmsprop import _scalar_state

__all__ = ["Adafactor"]


def _lerp(start: np.ndarray, end: np.ndarray, weight: float) -> None:
    """start += weight * (end - start) in place, in start's dtype, the way PyTorch's lerp
    rounds (from the nearer end)."""
    w = start.dtype.type(weight)
    if abs(weight) < 0.5:
        start += w * (end - start)
    else:
        start[...] = end - (end - start) * (start.dtype.type(1) - w)


def _norm(values: np.ndarray) -> float:
    """The 2-norm, accumulated in float64 as a Python float."""
    return math.sqrt(float(np.sum(np.square(values, dtype=np.float64))))


def _mean_square(grad: np.ndarray, axis: int) -> np.ndarray:
    """The mean square along `axis` as PyTorch's update forms it: the squared 2-norm over
    the length, rounded in the gradient's dtype."""
    norm = np.sqrt(np.sum(np.square(grad), axis=axis, keepdims=True, dtype=grad.dtype))
    return np.square(norm) / grad.dtype.type(grad.shape[axis])


class Adafactor(Optimizer):
    """Adafactor (PyTorch's single-tensor update)."""

    _reads_values = True  # (its update reads `.item()`s)

    _SETSTATE_DEFAULTS = (("foreach", None),)

    def __init__(self, params, lr: float | Tensor = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.is_complex():
                raise RuntimeError("Adafactor does not support complex parameters")
            if p.grad.is_sparse:
                raise RuntimeError("Adafactor does not support sparse gradients")
        group["lr"] / 1.0  # noqa: B018 (the update's first use of lr)

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`): weight
        decay's `mul_` and the step's `add_` on the parameter; the variances' `lerp_`s are
        counted in `_update` (their keys depend on the parameter's shape)."""
        return (2 if group["weight_decay"] != 0 else 1), (("step", 1),)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        factored = data.ndim > 1
        if not state:
            state["step"] = _scalar_state()
            if factored:
                state["row_var"] = Tensor._make(np.zeros(data.shape[:-1] + (1,), data.dtype))
                state["col_var"] = Tensor._make(
                    np.zeros(data.shape[:-2] + (1,) + data.shape[-1:], data.dtype))
            else:
                state["variance"] = Tensor._make(np.zeros_like(data))
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        step = float(state["step"]._data)
        lr, d, weight_decay = group["lr"], group["d"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(data.dtype).eps)
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / (step ** 0.5))
        alpha = max(eps2, _norm(data) / (data.size ** 0.5)) * rho
        if weight_decay != 0:
            data *= data.dtype.type(1 - lr * weight_decay)
        if factored:
            row_var, col_var = state["row_var"]._data, state["col_var"]._data
            _lerp(row_var, _mean_square(grad, -1), one_minus_beta2)
            _lerp(col_var, _mean_square(grad, -2), one_minus_beta2)
            state["row_var"]._vc[0] += 1  # (PyTorch's `lerp_`s)
            state["col_var"]._vc[0] += 1
            # The rank-one estimate: row means times column means over the rows' mean.
            estimate = np.matmul(row_var, col_var)
            estimate /= np.maximum(row_var.mean(axis=-2, keepdims=True), eps1)
        else:
            variance = state["variance"]._data
            _lerp(variance, grad * grad, one_minus_beta2)
            state["variance"]._vc[0] += 1
            estimate = variance.copy()
        update = 1 / np.sqrt(np.maximum(estimate, data.dtype.type(eps1 * eps1)))
        update *= grad
        denom = max(1.0, _norm(update) / ((update.size ** 0.5) * d))
        data += data.dtype.type(-alpha / denom) * update


# PyTorch's Adafactor belongs to `torch.optim` itself (pickles and safe-global lists name it so).
Adafactor.__module__ = "fusegrad.optim"
