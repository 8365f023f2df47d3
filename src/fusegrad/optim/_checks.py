"""Hyperparameter checks shared by the optimizers (PyTorch's ValueError texts)."""

from __future__ import annotations

from .._tensor import Tensor


def check_lr(lr):
    """The learning rate, checked (PyTorch's error); a tensor stays one: PyTorch keeps it in
    the groups, where schedulers update it in place (`Optimizer.step` reads its value)."""
    check_tensor_lr(lr)
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    return lr


def check_tensor_lr(lr) -> None:
    """A learning rate given as a tensor holds one value."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def check_eps(eps: float) -> None:
    """eps >= 0."""
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")


def check_betas(betas: tuple) -> None:
    """0 <= beta < 1 for both betas."""
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def check_weight_decay(weight_decay: float) -> None:
    """weight_decay >= 0."""
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def scalar_value(value):
    """A hyperparameter as a number: a one-element tensor (a beta PyTorch's arithmetic takes
    as a tensor) is read as a Python float of its value."""
    if isinstance(value, Tensor):
        return float(value.item())
    return value
