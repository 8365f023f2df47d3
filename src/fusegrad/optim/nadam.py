"""NAdam: Adam with Nesterov momentum and a momentum-decay schedule."""

from __future__ import annotations

import numpy as np

from ._checks import check_betas, check_eps, check_lr, check_weight_decay, scalar_value
from .adam import adam_state, update_moments, weight_decay_grad
from .optimizer import Optimizer, adam_differentiable_head
from .rmsprop import _scalar_state

_NADAM_BUMPS = (("step", 1), ("mu_product", 1), ("exp_avg", 1), ("exp_avg_sq", 2))

class NAdam(Optimizer):
    """NAdam (PyTorch's single-tensor update); `decoupled_weight_decay=True` is NAdamW."""

    _complex_as_real = True
    _capturable_xla = (True, False)
    _capturable_what = ("params, mu_products and state_steps",
                        "params, mu_products, and state_steps")

    _SETSTATE_DEFAULTS = (("maximize", False), ("foreach", None), ("capturable", False),
                        ("differentiable", False), ("decoupled_weight_decay", False))

    def __init__(self, params, lr: float = 2e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        lr = check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        -group["lr"]  # noqa: B018 (the update's first use of lr)

    def _init_state(self, data, grad, group, state) -> None:
        fresh = adam_state(data)
        # PyTorch's key order: step, mu_product, exp_avg, exp_avg_sq.
        state["step"] = fresh.pop("step")
        state["mu_product"] = _scalar_state(1.0)
        state.update(fresh)

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`): two
        `add_`s to the parameter, a third for decoupled weight decay."""
        decay = group["weight_decay"] != 0 and group["decoupled_weight_decay"]
        return (3 if decay else 2), _NADAM_BUMPS

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        d_p, lr, wd, eps, beta1, beta2, step_t = adam_differentiable_head(
            self, p, grad, group, state)
        step = float(step_t.item())
        bias_correction2 = 1 - beta2 ** step
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                d_p = d_p.add(p, alpha=wd)
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
        mu_product = state["mu_product"]
        mu_product *= mu
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(d_p, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(d_p, d_p, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt().add(eps)
        mu_product_next = mu_product * mu_next
        d_p = d_p * (-lr * (1.0 - mu) / (1.0 - mu_product))
        p.addcdiv_(d_p, denom)
        p.addcdiv_(exp_avg * (-lr * mu_next / (1.0 - mu_product_next)), denom)

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
        bias_correction2 = 1 - beta2 ** step
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        # The running product is kept as a float32 scalar tensor, as in PyTorch.
        state["mu_product"]._data *= mu
        mu_product = float(state["mu_product"]._data)
        m, v = update_moments(state, grad, beta1, beta2)
        denom = np.sqrt(v / bias_correction2) + group["eps"]
        mu_product_next = mu_product * mu_next
        data += (-lr * (1.0 - mu) / (1.0 - mu_product)) * (grad / denom)
        data += (-lr * mu_next / (1.0 - mu_product_next)) * (m / denom)
