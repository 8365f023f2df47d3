"""Resetting gradients: what `Module.zero_grad` and `Optimizer.zero_grad` share."""

from __future__ import annotations

from collections.abc import Iterable


def zero_grads(params: Iterable, set_to_none: bool = True) -> None:
    """Set each parameter's `.grad` to None, or zero it in place (detached first)."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        g.zero_()
