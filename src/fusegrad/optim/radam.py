"""RAdam: Adam with the variance of the adaptive rate rectified in early steps."""

from __future__ import annotations

import math

import numpy as np

from ._checks import check_betas, check_eps, check_lr, check_weight_decay, scalar_value
from .adam import adam_state, update_moments, weight_decay_grad
from .optimizer import Optimizer, adam_differentiable_head

_RADAM_BUMPS = (("step", 1), ("exp_avg", 1), ("exp_avg_sq", 2))


def _rectification(step: float, beta2: float) -> tuple:
    """(the second moment's bias correction, RAdam's rectification term). The adaptive
    rate's variance is finite only once rho_t exceeds 5; before that the term is None and
    the step is plain momentum SGD."""
    bias_correction2 = 1 - beta2 ** step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
    if rho_t <= 5.0:
        return bias_correction2, None
    return bias_correction2, math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                       / ((rho_inf - 4) * (rho_inf - 2) * rho_t))

class RAdam(Optimizer):
    """RAdam (PyTorch's single-tensor update); `decoupled_weight_decay=True` is RAdamW."""

    _complex_as_real = True
    _capturable_xla = (True, False)

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("decoupled_weight_decay", False), ("capturable", False))

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        lr = check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        group["lr"] * 1.0  # noqa: B018 (the update's first use of lr)

    def _init_state(self, data, grad, group, state) -> None:
        state.update(adam_state(data))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        decay = group["weight_decay"] != 0 and group["decoupled_weight_decay"]
        return (2 if decay else 1), _RADAM_BUMPS

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        d_p, lr, wd, eps, beta1, beta2, step_t = adam_differentiable_head(
            self, p, grad, group, state)
        step = float(step_t.item())
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                d_p = d_p.add(p, alpha=wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(d_p, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(d_p, d_p, value=1 - beta2)
        corrected = exp_avg / (1 - beta1 ** step)
        bias_correction2, rect = _rectification(step, beta2)
        if rect is not None:
            adaptive = math.sqrt(bias_correction2) / exp_avg_sq.sqrt().add(eps)
            p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        step = float(state["step"]._data)
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = map(scalar_value, group["betas"])
        grad = weight_decay_grad(data, grad, lr, wd, group["decoupled_weight_decay"])
        m, v = update_moments(state, grad, beta1, beta2)
        corrected = m / (1 - beta1 ** step)
        bias_correction2, rect = _rectification(step, beta2)
        if rect is not None:
            adaptive = math.sqrt(bias_correction2) / (np.sqrt(v) + group["eps"])
            data -= corrected * lr * adaptive * rect
        else:
            data -= corrected * lr
