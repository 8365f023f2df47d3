"""Adadelta: step sizes from running averages of squared gradients and squared updates."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._checks import check_eps, check_lr, check_weight_decay
from .optimizer import Optimizer, number_lr
from .rmsprop import _scalar_state


class Adadelta(Optimizer):
    """Adadelta (PyTorch's single-tensor update)."""

    _complex_as_real = True
    _capturable_xla = (False, False)

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("capturable", False))

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        lr = check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_eps(eps)
        check_weight_decay(weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        -group["lr"]  # noqa: B018 (the update's first use of lr; see Optimizer._check_group)

    def _init_state(self, data, grad, group, state) -> None:
        state["step"] = _scalar_state()
        state["square_avg"] = Tensor._make(np.zeros_like(data))
        state["acc_delta"] = Tensor._make(np.zeros_like(data))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        return 1, (("step", 1), ("square_avg", 2), ("acc_delta", 2))

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        d_p = self._differentiable_start(p, grad, group, state)
        lr = number_lr(group)
        rho, eps = group["rho"], group["eps"]
        state["step"] += 1
        if group["weight_decay"] != 0:
            d_p = d_p.add(p, alpha=group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(d_p, d_p, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().clone()
        delta.div_(std).mul_(d_p)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * data
        sq = state["square_avg"]._data
        acc = state["acc_delta"]._data
        sq *= rho
        sq += (1 - rho) * grad * grad
        delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * grad
        acc *= rho
        acc += (1 - rho) * delta * delta
        data += -group["lr"] * delta
