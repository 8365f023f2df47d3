"""Gradient clipping by total norm or by value (in place, outside autograd)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..._tensor import Tensor


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale all gradients so that their joint norm is at most `max_norm`; returns the norm
    before clipping."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return Tensor._make(np.array(0.0, dtype=np.float32))
    if math.isinf(norm_type):
        norms = [np.abs(g._data).max() if g.numel() else 0.0 for g in grads]
        total = max(float(n) for n in norms)
    else:
        acc = 0.0
        for g in grads:
            acc += float(np.sum(np.abs(g._data.astype(np.float64)) ** norm_type))
        total = acc ** (1.0 / norm_type)
    total_dt = grads[0]._data.dtype
    total_t = Tensor._make(np.array(total, dtype=total_dt))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    coef = max_norm / (float(np.array(total, dtype=total_dt)) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g._data *= np.asarray(coef, dtype=g._data.dtype)
            g._vc[0] += 1
    return total_t


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._vc[0] += 1
