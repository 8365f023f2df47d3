"""Muon: SGD-momentum steps on 2-D parameters whose update is first orthogonalised by a
quintic Newton-Schulz iteration in bfloat16, then scaled for the matrix's shape."""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import _dtype
from .._tensor import Tensor
from .optimizer import Optimizer, number_lr

__all__ = ["Muon"]

# PyTorch's defaults: the iteration's coefficients (a, b, c), its steps, the norm's floor.
_COEFFICIENTS = (3.4445, -4.775, 2.0315)
_NS_STEPS = 5
_EPS = 1e-7
_LR_ADJUSTMENTS = ("original", "match_rms_adamw")


def _orthogonalise(update: Tensor, coefficients: tuple, steps: int, eps: float) -> Tensor:
    """`update`'s nearest semi-orthogonal matrix, roughly: `steps` iterations of
    X <- aX + (bA + cA^2)X with A = XX^T, from X = update / ||update|| in bfloat16, on the
    wide orientation (a tall matrix is transposed there and back)."""
    from .. import addmm

    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if update.dim() != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = update.size(0) > update.size(1)
    x = update.to(_dtype.bfloat16)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = addmm(x, addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn: str | None, shape: tuple) -> float:
    """The learning rate's factor for a (rows, columns) matrix: sqrt(max(1, rows/columns))
    by default ("original"), 0.2 sqrt(max(rows, columns)) to match AdamW's update size."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return 1.0


class Muon(Optimizer):
    """Muon (PyTorch's single-tensor update): a momentum buffer kept as a running mean of the
    gradients, the update (Nesterov's by default) orthogonalised, decoupled weight decay."""

    def __init__(self, params, lr: float | Tensor = 1e-3, weight_decay: float = 0.1,
                 momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = _COEFFICIENTS,
                 eps: float = _EPS, ns_steps: int = _NS_STEPS,
                 adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _LR_ADJUSTMENTS:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def step(self, closure: Callable | None = None):
        """One Muon step on every parameter with a gradient; `closure` re-evaluates the loss
        (with gradients enabled) first and its value is returned."""
        from ..autograd import enable_grad, no_grad

        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_muon_group(group)
        return loss

    def _step_muon_group(self, group: dict) -> None:
        """The group's update, parameter by parameter (its checks first, as PyTorch's
        gathering of the group makes them before any update)."""
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if p.is_complex():
                raise RuntimeError("Muon does not support complex parameters")
            if p.grad.is_sparse:
                raise RuntimeError("Muon does not support sparse gradients")
            if "momentum_buffer" not in self.state[p]:
                from .. import zeros_like

                self.state[p]["momentum_buffer"] = zeros_like(p.grad)
        lr, momentum = number_lr(group), group["momentum"]
        for p in params:
            grad = p.grad
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            buf = self.state[p]["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if group["nesterov"] else buf
            update = _orthogonalise(update, group["ns_coefficients"], group["ns_steps"],
                                    group["eps"])
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update, alpha=-lr * _lr_ratio(group["adjust_lr_fn"], tuple(p.shape)))


# PyTorch's Muon belongs to `torch.optim` itself (pickles and safe-global lists name it so).
Muon.__module__ = "fusegrad.optim"
