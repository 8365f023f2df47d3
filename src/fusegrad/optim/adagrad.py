"""Adagrad: per-parameter steps scaled by the accumulated squared gradients."""

from __future__ import annotations

import numpy as np

from .. import _sparse
from .._tensor import Tensor
from ..ops.sparse import coalesced_arrays
from ._checks import check_lr
from .optimizer import Optimizer, number_lr
from .rmsprop import _scalar_state


class Adagrad(Optimizer):
    """Per-coordinate rates scaled by the root of the summed squared gradients."""

    _complex_as_real = True
    _fused_check_once = True
    _sparse_grads = True

    _SETSTATE_DEFAULTS = (("foreach", None), ("maximize", False), ("differentiable", False),
                        ("fused", None))

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None) -> None:
        check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state_of(p, None, group, self.state[p])

    def _init_state(self, data, grad, group, state) -> None:
        """Step 0 and the accumulator at `initial_accumulator_value` (of the optimizer's
        defaults, as in PyTorch): in both parts of a complex parameter."""
        value = self.defaults["initial_accumulator_value"]
        state["step"] = _scalar_state()
        fill = complex(value, value) if data.dtype.kind == "c" else value
        state["sum"] = Tensor._make(np.full_like(data, fill))

    def _check_group(self, group: dict) -> None:
        group["lr"] / 1.0  # noqa: B018 (the update's first use of lr)

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        if group.get("fused"):
            return 0, (("step", 1),)
        return 1, (("step", 1), ("sum", 1))

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`)."""
        if grad.is_sparse:
            super()._update_differentiable(p, grad, group, state)
            return
        d_p = self._differentiable_start(p, grad, group, state)
        lr = number_lr(group)
        step_t = state["step"]
        step_t += 1
        step = float(step_t.item())
        if group["weight_decay"] != 0:
            d_p = d_p.add(p, alpha=group["weight_decay"])
        clr = lr / (1 + (step - 1) * group["lr_decay"])
        state_sum = state["sum"]
        state_sum.addcmul_(d_p, d_p, value=1)
        std = state_sum.sqrt() + group["eps"]
        p.addcdiv_(d_p, std, value=-clr)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:  # a parameter of a group added after construction
            self._init_state(data, grad, group, state)
        state["step"]._data += 1
        step = float(state["step"]._data)
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * data
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        acc = state["sum"]._data
        acc += grad * grad
        data += -clr * (grad / (np.sqrt(acc) + group["eps"]))

    def _check_sparse(self, group: dict) -> None:
        """The fused update refuses sparse gradients (before any update)."""
        if group.get("fused") and any(p.grad is not None and p.grad.is_sparse
                                      for p in group["params"]):
            raise RuntimeError("`fused` does not support sparse grad or complex param")

    def _update_sparse(self, p, grad, group, state) -> None:
        """The step for a sparse gradient, as PyTorch's (found by experiment): on the rows
        the coalesced gradient names, the accumulator takes the squared values and the
        parameter moves by -clr * value / (sqrt(accumulator) + eps), both strided. Weight
        decay is refused once the step is counted, as PyTorch counts it."""
        data = p._data
        if not state:
            self._init_state(data, None, group, state)
        state["step"]._data += 1
        step = float(state["step"]._data)
        if group["weight_decay"] != 0:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")
        values = -grad._val if group["maximize"] else grad._val
        idx, values = coalesced_arrays(grad._idx, values, grad._sshape, grad._coal)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        rows = tuple(idx)
        acc = state["sum"]._data
        acc[rows] += values * values
        std = np.sqrt(acc[rows]) + group["eps"]
        step_vals = _sparse.make(idx, values / std, grad._sshape, True)
        _sparse.add_to_dense(data, step_vals, -clr)
