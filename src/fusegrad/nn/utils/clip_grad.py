"""Gradient clipping: the total norm of a group of tensors (`get_total_norm`), scaling
gradients by a given norm (`clip_grads_with_norm_`), and `clip_grad_norm_`, which is the one
followed by the other; clipping by value."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from typing import Union

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_"]

_tensor_or_tensors = Union[Tensor, Iterable[Tensor]]  # noqa: UP007  (PyTorch's alias)


def _no_grad(func: Callable) -> Callable:
    """`func` run under `no_grad` (the decorator PyTorch's clipping functions carry)."""

    @functools.wraps(func)
    def _no_grad_wrapper(*args, **kwargs):
        with no_grad():
            return func(*args, **kwargs)

    return _no_grad_wrapper


def _as_list(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The `norm_type`-norm of all `tensors` together: the norm of their norms, each taken in
    its own dtype (as PyTorch does, so the figures agree to the last bit)."""
    from ... import stack, tensor
    from ...linalg import vector_norm

    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        total = vector_norm(stack([vector_norm(t, norm_type) for t in tensors]), norm_type)
    if error_if_nonfinite and bool(total.isnan() | total.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def _clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                          total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale the gradients of `parameters` in place by `max_norm / (total_norm + 1e-6)`
    when that is below 1 (by 1 otherwise, as PyTorch multiplies every time)."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        coef = max_norm / (total_norm + 1e-6)
        if not isinstance(coef, Tensor):
            # a number for `total_norm`: PyTorch's `torch.clamp` finds no overload for it
            raise TypeError(
                f"clamp() received an invalid combination of arguments - got "
                f"({type(coef).__name__}, max=float), but expected one of:\n"
                " * (Tensor input, Tensor min = None, Tensor max = None, *, Tensor out = None)\n"
                " * (Tensor input, Number min = None, Number max = None, *, Tensor out = None)\n")
        coef = coef.clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale all gradients so that their joint norm is at most `max_norm`; returns the norm
    before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = _get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    _clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: Tensor | Iterable[Tensor], max_norm: float,
                   norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """Deprecated spelling of `clip_grad_norm_` (warns as PyTorch does)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    import numpy as np

    clip_value = float(clip_value)
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        # PyTorch groups the gradients for its foreach kernels first, and the grouping rejects
        # an empty list (so a model without any gradient fails, whatever `foreach` says)
        raise RuntimeError(
            "Expected !nested_tensorlist[0].empty() to be true, but got false.  (Could this "
            "error message be improved?  If so, please report an enhancement request to "
            "PyTorch.)")
    for g in grads:
        if g._data is None:
            if g.is_meta:  # (no values to clamp: only the write is counted)
                g._vc[0] += 1
                continue
            # a sparse gradient: PyTorch's in-place clamp has no kernel
            from ..._sparse import backend_error

            raise backend_error("clamp_min_")
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._vc[0] += 1


# The public names `torch.nn.utils` gives the two helpers (their functions keep the private
# names, as PyTorch's do).
get_total_norm = _get_total_norm
clip_grads_with_norm_ = _clip_grads_with_norm_
