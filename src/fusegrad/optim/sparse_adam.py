"""SparseAdam: Adam for sparse gradients (rows of an embedding touched in a step).

Only the rows a step's gradient names are updated: their moments move toward the
gradient's values and the parameter by the bias-corrected ratio, the other rows (and their
moments) stay as they are. A dense gradient is refused, as PyTorch refuses it.
"""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from ..ops.sparse import coalesced_arrays
from ._checks import check_betas
from .optimizer import Optimizer

_DENSE_ERROR = "SparseAdam does not support dense gradients, please consider Adam instead"


class SparseAdam(Optimizer):
    """Adam over sparse gradients only; a dense gradient raises PyTorch's RuntimeError."""

    _sparse_grads = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        if isinstance(lr, Tensor):
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
        # Both strictly positive here, unlike the other optimizers' checks.
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_betas(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)
        # Each offender as [group index, index in the group], as PyTorch lists them.
        sparse, complex_ = [], []
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if getattr(p, "is_sparse", False):
                    sparse.append([i, j])
                if p.is_complex():
                    complex_.append([i, j])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not "
                             "support complex parameters")

    def _check_group(self, group: dict) -> None:
        """PyTorch's pass over the group before any update: each parameter with a gradient
        in turn gets its state (step 0 and zero moments) and its step counted, a dense
        gradient raising there (the parameters before it counted, none updated)."""
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if not grad.is_sparse:
                raise RuntimeError(_DENSE_ERROR)
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = Tensor._make(np.zeros_like(p._data))
                state["exp_avg_sq"] = Tensor._make(np.zeros_like(p._data))
            # An int, as PyTorch keeps it (a loaded state's tensor step read as one).
            state["step"] = int(state["step"]) + 1

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # A loaded step stays the int PyTorch's SparseAdam keeps (load_state_dict makes
        # numbers into tensors for the other optimizers).
        for s in self.state.values():
            if isinstance(s, dict) and isinstance(s.get("step"), Tensor):
                s["step"] = int(s["step"].item())

    def _update(self, p, grad, group, state) -> None:
        raise RuntimeError(_DENSE_ERROR)

    def _update_sparse(self, p, grad, group, state) -> None:
        """Adam on the rows of the coalesced gradient, as PyTorch's (found by experiment):
        each moment's rows move by (1 - beta) times their distance to the gradient's
        (squared) values, and the parameter's rows by -step_size * m / (sqrt(v) + eps).
        A gradient without entries changes nothing (its step is still counted)."""
        values = -grad._val if group["maximize"] else grad._val
        idx, values = coalesced_arrays(grad._idx, values, grad._sshape, grad._coal)
        if values.size == 0:
            return
        beta1, beta2 = group["betas"]
        rows = tuple(idx)
        exp_avg, exp_avg_sq = state["exp_avg"]._data, state["exp_avg_sq"]._data
        old_avg = exp_avg[rows]
        avg_step = (values - old_avg) * (1 - beta1)
        exp_avg[rows] += avg_step
        old_sq = exp_avg_sq[rows]
        sq_step = (values * values - old_sq) * (1 - beta2)
        exp_avg_sq[rows] += sq_step
        # The new moments of the rows as PyTorch recomputes them: old plus the step.
        numer = avg_step + old_avg
        denom = np.sqrt(sq_step + old_sq) + group["eps"]
        step = state["step"]
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = group["lr"] * math.sqrt(bias_correction2) / bias_correction1
        p._data[rows] += -step_size * (numer / denom)
        state["exp_avg"]._vc[0] += 1
        state["exp_avg_sq"]._vc[0] += 1
