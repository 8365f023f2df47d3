"""Adam (with amsgrad and maximize), PyTorch's single-tensor update."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from .optimizer import Optimizer


def adam_state(data: np.ndarray) -> dict:
    """Fresh step counter and first/second moment buffers for a parameter."""
    return {"step": Tensor._make(np.array(0.0, dtype=np.float32)),
            "exp_avg": Tensor._make(np.zeros_like(data)),
            "exp_avg_sq": Tensor._make(np.zeros_like(data))}


def weight_decay_grad(data: np.ndarray, grad: np.ndarray, lr: float, wd: float,
                      decoupled: bool) -> np.ndarray:
    """Apply weight decay: shrink the weights in place (decoupled) or add wd * w to the
    gradient (L2); returns the gradient to use."""
    if wd != 0:
        if decoupled:
            data *= 1 - lr * wd
        else:
            grad = grad + wd * data
    return grad


def update_moments(state: dict, grad: np.ndarray, beta1: float,
                   beta2: float) -> tuple[np.ndarray, np.ndarray]:
    """Move the running mean and uncentred variance of the gradient one step, in place."""
    m = state["exp_avg"]._data
    v = state["exp_avg_sq"]._data
    m += (grad - m) * (1 - beta1)
    v *= beta2
    v += (1 - beta2) * grad * grad
    return m, v


class Adam(Optimizer):
    """Adam; `decoupled_weight_decay=True` is AdamW."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor):
            lr = lr.item()
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        # The update's first uses of lr (see Optimizer._check_group).
        if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
            1 - group["lr"] * group["weight_decay"]  # noqa: B018
        group["lr"] / 1.0  # noqa: B018

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            state.update(adam_state(data))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = Tensor._make(np.zeros_like(data))
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        if group["maximize"]:
            grad = -grad
        step_t = state["step"]
        step_t._data += 1
        step = float(step_t._data)
        grad = weight_decay_grad(data, grad, lr, wd, group["decoupled_weight_decay"])
        m, v = update_moments(state, grad, beta1, beta2)
        bc1 = 1 - beta1 ** step
        bc2_sqrt = math.sqrt(1 - beta2 ** step)
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]._data
            np.maximum(vmax, v, out=vmax)
            denom = np.sqrt(vmax) / bc2_sqrt + group["eps"]
        else:
            denom = np.sqrt(v) / bc2_sqrt + group["eps"]
        data += -(lr / bc1) * (m / denom)


