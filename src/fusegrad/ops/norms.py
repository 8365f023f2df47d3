"""Spread and norm reductions: var, std, var_mean, std_mean, vector_norm (and the pieces
the legacy `norm` reuses), logsumexp.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call
from ._util import F32, HALF, Spec, rand_array
from .reductions import (
    _all_if_empty,
    _axes,
    _count,
    _reduce_samples,
    _reduce_shape,
    expand_reduced,
    sum_dim,
)
from .registry import Sample, register

# ---------------------------------------------------------------- var, std


def _correction(correction) -> float:
    return 1.0 if correction is None else correction


def _var_check(a):
    dt = a.dtype if hasattr(a.dtype, "category") else _dtype.FROM_NP[a.dtype]
    if dt.category < _dtype.FLOAT:
        raise RuntimeError(
            "std and var only support floating point and complex dtypes")


def _var_kernel(a, dims=None, correction=None, keepdim=False):
    _var_check(a)
    axes = _axes(_all_if_empty(dims), a.ndim)
    n = _count(a.shape, axes) if a.ndim else 1
    x = a.astype(F32) if a.dtype in HALF else a
    mean = np.mean(x, axis=axes, keepdims=True) if x.size else np.zeros_like(x)
    d = x - mean
    if d.dtype.kind == "c":  # squared moduli: a complex tensor's variance is real
        d = np.abs(d)
    ss = np.sum(d ** 2, axis=axes, keepdims=keepdim)
    return (ss / max(n - _correction(correction), 0)).astype(a.real.dtype, copy=False)


def _var_meta(a, dims=None, correction=None, keepdim=False):
    _var_check(a)
    axes = _axes(_all_if_empty(dims), len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype.to_real())


def _centered(g, a, dims, keepdim):
    dims = _all_if_empty(dims)
    axes = tuple(range(a.dim())) if dims is None else dims
    n = _count(tuple(a.shape), axes) if a.dim() else 1
    mean = a.mean(list(axes), keepdim=True) if a.dim() else a
    return expand_reduced(g, a.shape, axes if a.dim() else None, keepdim), a - mean, n


def _var_derivative(g, a, dims, correction, keepdim):
    g, centered, n = _centered(g, a, dims, keepdim)
    den = n - _correction(correction)
    return (g * centered * (2.0 / den if den else float("inf")), None, None, None)


def _std_derivative(g, a, out, dims, correction, keepdim):
    # var's derivative scaled by g / (2 std), taken as 0 where std is 0 (PyTorch's: constant
    # values get a zero gradient, not 0 / 0).
    scaled = (g / (out * 2)).masked_fill(out == 0, 0.0)
    return _var_derivative(scaled, a, dims, correction, keepdim)


def _var_samples(rng, dtype):
    out = []
    for s, d in (((3, 4), None), ((3, 4), (1,)), ((2, 3, 4), (0, 2)), ((5,), (0,))):
        for c, k in ((None, False), (0, True), (2, False)):
            out.append(Sample((rand_array(rng, s, dtype), d, c, k), name=f"{s} {d} c={c} k={k}"))
    return out


def _var_decomposition(a, dims=None, correction=None, keepdim=False):
    """The sum of squared deviations from the mean over `dims`, over n - correction."""
    dims = _all_if_empty(dims)
    n = _count(tuple(a.shape), dims) if a.dim() else 1
    centred = a - call(sum_dim, a, dims, True) / n
    den = max(n - _correction(correction), 0)
    return call(sum_dim, centred * centred, dims, keepdim) / den


def _var_mean_decomposition(sqrt: bool):
    def decomposition(a, dims=None, correction=None, keepdim=False):
        v = _var_decomposition(a, dims, correction, keepdim)
        n = _count(tuple(a.shape), _all_if_empty(dims)) if a.dim() else 1
        return (v.sqrt() if sqrt else v), call(sum_dim, a, dims, keepdim) / n

    return decomposition


var = register(
    "var.correction", kernel=_var_kernel, meta=_var_meta, node="VarBackward0",
    derivative=_var_derivative,
    save=lambda out, a, dims=None, correction=None, keepdim=False: (a, dims, correction, keepdim),
    samples=_var_samples, public="var", decomposition=_var_decomposition,
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var(a, dims, correction,
                                                                           keepdim))
std = register(
    "std.correction", kernel=lambda *args: np.sqrt(_var_kernel(*args)), meta=_var_meta,
    node="StdBackward0", derivative=_std_derivative,
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out, dims, correction, keepdim),
    samples=_var_samples, public="std",
    decomposition=lambda *args: _var_decomposition(*args).sqrt(),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var(
        a, dims, correction, keepdim, sqrt=True))


def _var_mean_kernel(sqrt):
    def kernel(a, dims=None, correction=None, keepdim=False):
        v = _var_kernel(a, dims, correction, keepdim)
        axes = _axes(_all_if_empty(dims), a.ndim)
        m = np.mean(a, axis=axes, keepdims=keepdim).astype(a.dtype, copy=False)
        return (np.sqrt(v) if sqrt else v), m

    return kernel


def _var_mean_meta(a, dims=None, correction=None, keepdim=False):
    spec = _var_meta(a, dims, correction, keepdim)
    return [spec, Spec(spec.shape, a.dtype)]


def _var_mean_derivative(grads, a, out, dims, correction, keepdim, sqrt):
    gv, gm = grads
    if sqrt:
        first = _std_derivative(gv, a, out, dims, correction, keepdim)[0]
    else:
        first = _var_derivative(gv, a, dims, correction, keepdim)[0]
    g, _, n = _centered(gm, a, dims, keepdim)
    return (first + g / n, None, None, None)


var_mean = register(
    "var_mean.correction", kernel=_var_mean_kernel(False), meta=_var_mean_meta,
    node="VarMeanBackward0",
    derivative=lambda grads, a, out, d, c, k: _var_mean_derivative(grads, a, out, d, c, k, False),
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out[0], dims, correction, keepdim),
    samples=_var_samples, public="var_mean", decomposition=_var_mean_decomposition(False),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var_mean(
        a, dims, correction, keepdim))
std_mean = register(
    "std_mean.correction", kernel=_var_mean_kernel(True), meta=_var_mean_meta,
    node="StdMeanBackward0",
    derivative=lambda grads, a, out, d, c, k: _var_mean_derivative(grads, a, out, d, c, k, True),
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out[0], dims, correction, keepdim),
    samples=_var_samples, public="std_mean", decomposition=_var_mean_decomposition(True),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var_mean(
        a, dims, correction, keepdim, sqrt=True))

# ---------------------------------------------------------------- norms, logsumexp


def _norm_kernel(a, ord=2, dims=None, keepdim=False, dtype=None):
    if a.dtype.kind not in "fc" and a.dtype not in HALF:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{_dtype.FROM_NP[a.dtype].legacy}")
    dt = dtype.np if dtype is not None else a.dtype
    if dt.kind == "c":  # the moduli, then a real norm
        a, dt = np.abs(a.astype(dt)), a.real.dtype
    x = np.abs(a.astype(F32 if dt in HALF else dt))
    axes = _axes(_all_if_empty(dims), a.ndim)
    if ord == float("inf"):
        out = np.max(x, axis=axes, keepdims=keepdim, initial=0.0)
    elif ord == float("-inf"):
        out = np.min(x, axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = np.sum(x != 0, axis=axes, keepdims=keepdim).astype(x.dtype)
    elif ord == 1:
        out = np.sum(x, axis=axes, keepdims=keepdim)
    elif ord == 2:
        out = np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdim))
    else:
        out = np.sum(x ** ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)
    return np.asarray(out).astype(dt, copy=False)


def _norm_meta(a, ord=2, dims=None, keepdim=False, dtype=None):
    if a.dtype.category < _dtype.FLOAT:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{a.dtype.legacy}")
    axes = _axes(_all_if_empty(dims), len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), (dtype or a.dtype).to_real())


def _norm_derivative(g, a, out, ord, dims, keepdim):
    dims = _all_if_empty(dims) if a.dim() else None
    g = expand_reduced(g, a.shape, dims, keepdim)
    out = expand_reduced(out, a.shape, dims, keepdim)
    if ord == 0:
        return (g * 0, None, None, None, None)
    sign = a.sgn() if a.is_complex() else a.sign()
    if ord == 1:
        return (g * sign, None, None, None, None)
    if ord in (float("inf"), float("-inf")):
        mask = a.abs() == out
        count = mask.sum(list(dims) if dims is not None else list(range(a.dim())),
                         keepdim=True) if a.dim() else mask
        return (g * sign * mask / count, None, None, None, None)
    if ord == 2:
        safe = out.where(out != 0, out.new_ones(()))
        return (g * a / safe * (out != 0), None, None, None, None)
    scale = a * a.abs().pow(ord - 2) / out.pow(ord - 1)
    return (g * scale.where(out != 0, scale.new_zeros(())), None, None, None, None)


def _norm_samples(rng, dtype):
    out = []
    for s, d in (((3, 4), None), ((3, 4), (1,)), ((2, 3, 4), (0, 2)), ((), None)):
        for o, k in ((2, False), (1, True), (3, False), (float("inf"), False), (0, False)):
            out.append(Sample((rand_array(rng, s, dtype), o, d, k), name=f"{s} {o} {d} {k}"))
    return out


vector_norm = register(
    "linalg_vector_norm", kernel=_norm_kernel, meta=_norm_meta,
    node="LinalgVectorNormBackward0", derivative=_norm_derivative,
    save=lambda out, a, ord=2, dims=None, keepdim=False, dtype=None: (a, out, ord, dims, keepdim),
    samples=_norm_samples, public="norm")


def _logsumexp_kernel(a, dims, keepdim=False):
    dt = a.dtype if a.dtype.kind == "f" or a.dtype in HALF else np.dtype(
        _dtype.defaults.float.np)
    x = a.astype(F32 if dt in HALF else dt)
    axes = _axes(dims, a.ndim)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdim)).astype(dt)
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return (out if keepdim else np.squeeze(out, axes)).astype(dt, copy=False)


def _logsumexp_meta(a, dims, keepdim=False):
    axes = _axes(dims, len(a.shape))
    dt = a.dtype if a.dtype.category == _dtype.FLOAT else _dtype.defaults.float
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


def _logsumexp_decomposition(a, dims, keepdim=False):
    """log(sum(exp(a - m))) + m, with m the maximum (0 where it is infinite)."""
    if not a.numel():
        return call(sum_dim, a.exp(), dims, keepdim).log()
    m = a.amax(dims, True)
    m = m.new_zeros(()).where(m.isinf(), m)
    out = call(sum_dim, (a - m).exp(), dims, True).log() + m
    return out if keepdim else out.squeeze(dims)


logsumexp = register(
    "logsumexp", kernel=_logsumexp_kernel, meta=_logsumexp_meta, node="LogsumexpBackward0",
    derivative=lambda g, a, out, dims, keepdim: (
        expand_reduced(g, a.shape, dims if a.dim() else None, keepdim)
        * (a - expand_reduced(out, a.shape, dims if a.dim() else None, keepdim)).exp(),
        None, None),
    save=lambda out, a, dims, keepdim=False: (a, out, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if s.args[1] is not None],
    decomposition=_logsumexp_decomposition)
