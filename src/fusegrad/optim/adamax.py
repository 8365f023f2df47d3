"""Adamax: Adam with the infinity norm of past gradients in place of the second moment."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._checks import check_betas, check_eps, check_lr, check_weight_decay, scalar_value
from .optimizer import Optimizer, adam_differentiable_head
from .rmsprop import _scalar_state

_ADAMAX_BUMPS = (("step", 1), ("exp_avg", 1), ("exp_inf", 2))

class Adamax(Optimizer):
    """Adamax (PyTorch's single-tensor update)."""

    _complex_as_real = True
    _capturable_xla = (True, False)

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("capturable", False))

    def __init__(self, params, lr: float = 2e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        lr = check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        group["lr"] / 1.0  # noqa: B018 (the update's first use of lr)

    def _init_state(self, data, grad, group, state) -> None:
        state["step"] = _scalar_state()
        state["exp_avg"] = Tensor._make(np.zeros_like(data))
        state["exp_inf"] = Tensor._make(np.zeros_like(data))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        return 1, _ADAMAX_BUMPS

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`): the
        infinity norm as the maximum over a stack of the decayed norm and the gradient's
        magnitude, the bias correction from the step tensor."""
        from .._functions.shape import cat

        d_p, lr, wd, eps, beta1, beta2, step_t = adam_differentiable_head(
            self, p, grad, group, state)
        if wd != 0:
            d_p = d_p.add(p, alpha=wd)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.lerp_(d_p, 1 - beta1)
        norms = cat([exp_inf.mul_(beta2).unsqueeze(0), d_p.abs().add_(eps).unsqueeze_(0)], 0)
        exp_inf.copy_(norms.amax(0, keepdim=False))
        neg_bias_correction = beta1 ** step_t - 1
        neg_bias_correction.div_(lr)
        p.addcdiv_(exp_avg, exp_inf * neg_bias_correction)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        step = float(state["step"]._data)
        beta1, beta2 = map(scalar_value, group["betas"])
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * data
        m = state["exp_avg"]._data
        u = state["exp_inf"]._data
        m += (grad - m) * (1 - beta1)
        u *= beta2
        np.maximum(u, np.abs(grad) + group["eps"], out=u)
        clr = group["lr"] / (1 - beta1 ** step)
        data += -clr * (m / u)
