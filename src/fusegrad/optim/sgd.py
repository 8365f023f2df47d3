"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's update rule, term for term)."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None) -> None:
        if isinstance(lr, Tensor):
            lr = lr.item()
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        d_p = -grad if group["maximize"] else grad
        wd = group["weight_decay"]
        if wd != 0:
            d_p = d_p + wd * data
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = Tensor._make(np.array(d_p, copy=True))
                state["momentum_buffer"] = buf
            else:
                b = buf._data
                b *= momentum
                b += (1 - group["dampening"]) * d_p
            if group["nesterov"]:
                d_p = d_p + momentum * buf._data
            else:
                d_p = buf._data
        data -= group["lr"] * d_p
