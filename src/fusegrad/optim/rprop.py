"""Rprop: per-element step sizes grown or shrunk by the sign agreement of successive
gradients."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._checks import check_lr
from .optimizer import Optimizer
from .rmsprop import _scalar_state


class Rprop(Optimizer):
    """Resilient backpropagation (PyTorch's single-tensor update)."""

    _complex_as_real = True
    _capturable_xla = (True, True)

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("capturable", False))

    def __init__(self, params, lr: float = 1e-2, etas: tuple = (0.5, 1.2),
                 step_sizes: tuple = (1e-6, 50), *, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        lr = check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _init_state(self, data, grad, group, state) -> None:
        lr = group["lr"]
        state["step"] = _scalar_state()
        state["prev"] = Tensor._make(np.zeros_like(data))
        # A complex parameter's parts are two reals, each with the initial step size.
        fill = complex(lr, lr) if grad.dtype.kind == "c" else lr
        state["step_size"] = Tensor._make(np.full_like(grad, fill))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`): the
        foreach update writes `prev` twice, three times when maximizing."""
        prev = (3 if group["maximize"] else 2) if group["foreach"] else 1
        return 1, (("step", 1), ("prev", prev), ("step_size", 2))

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        d_p = self._differentiable_start(p, grad, group, state)
        state["step"] += 1
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        sign = d_p.mul(prev.clone()).sign()
        sign[sign.gt(0)] = etaplus
        sign[sign.lt(0)] = etaminus
        sign[sign.eq(0)] = 1
        step_size.mul_(sign).clamp_(lo, hi)
        d_p = d_p.clone()
        d_p[sign.eq(etaminus)] = 0
        p.addcmul_(d_p.sign(), step_size, value=-1)
        prev.copy_(d_p)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev = state["prev"]._data
        step_size = state["step_size"]._data
        agreement = np.sign(grad * prev)
        factor = np.where(agreement > 0, etaplus, np.where(agreement < 0, etaminus, 1.0))
        step_size *= factor.astype(step_size.dtype)
        np.clip(step_size, lo, hi, out=step_size)
        # After a sign change the step is skipped and the gradient forgotten.
        grad = np.where(agreement < 0, 0, grad).astype(data.dtype)
        data -= np.sign(grad) * step_size
        prev[...] = grad
