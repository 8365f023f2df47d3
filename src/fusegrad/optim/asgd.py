"""ASGD: SGD with a decaying step size and a running (Polyak) average of the iterates."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._checks import check_lr, check_weight_decay
from .optimizer import Optimizer, number_lr
from .rmsprop import _scalar_state


class ASGD(Optimizer):
    """Averaged SGD (PyTorch's single-tensor update); the average is `state['ax']`."""

    _reads_values = True  # (its update reads `.item()`s)

    _complex_as_real = True
    _capturable_xla = (True, False)
    _capturable_what = ("params, mus, etas, and state_steps",) * 2

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("capturable", False))

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach=None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        lr = check_lr(lr)
        check_weight_decay(weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        group["lr"] * 1.0  # noqa: B018 (the update's first use of lr)

    def _init_state(self, data, grad, group, state) -> None:
        state["step"] = _scalar_state()
        # eta and mu are float32 scalar tensors, so the rates used are float32-rounded.
        state["eta"] = _scalar_state(group["lr"])
        state["mu"] = _scalar_state(1.0)
        state["ax"] = Tensor._make(np.zeros_like(data))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`): the
        single-tensor update moves the parameter twice (decay, then step), the foreach one
        once."""
        return (1 if group["foreach"] else 2), (("step", 1), ("eta", 1), ("mu", 1), ("ax", 1))

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        d_p = self._differentiable_start(p, grad, group, state)
        state["step"] += 1
        lr, lambd, alpha = number_lr(group), group["lambd"], group["alpha"]
        if group["weight_decay"] != 0:
            d_p = d_p.add(p, alpha=group["weight_decay"])
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        eta_value = eta.item()
        p.mul_(1 - lambd * eta_value)
        p.add_(d_p, alpha=-eta_value)
        if mu.item() != 1:
            ax.add_(p.sub(ax).mul_(mu))
        else:
            ax.copy_(p)
        step = state["step"].item()
        eta.copy_(Tensor._make(np.asarray(lr / ((1 + lambd * lr * step) ** alpha))))
        mu.copy_(Tensor._make(np.asarray(1 / max(1, step - group["t0"]))))

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        step = float(state["step"]._data)
        lr, lambd, alpha = group["lr"], group["lambd"], group["alpha"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * data
        eta = float(state["eta"]._data)
        data *= 1 - lambd * eta
        data += -eta * grad
        ax = state["ax"]._data
        mu = float(state["mu"]._data)
        if mu != 1:
            ax += (data - ax) * mu
        else:
            ax[...] = data
        # New rates are made as default-dtype (float32) scalars, then stored, so they carry
        # float32 rounding even where the state was loaded as float64.
        state["eta"]._data[...] = np.float32(lr / ((1 + lambd * lr * step) ** alpha))
        state["mu"]._data[...] = np.float32(1 / max(1, step - group["t0"]))
