"""Spread and norm reductions: var, std, var_mean, std_mean, vector_norm (and the pieces
the legacy `norm` reuses), logsumexp; and `norm_backward`, PyTorch's gradient of a p-norm,
which `dist` and `renorm` share.

Half types never accumulate in the half type (in bfloat16, 256 + 1 == 256): var, std and
their means in float64 (PyTorch's Welford pass runs in double for them), norms and
logsumexp's sum in float32; each norm or spread is rounded once, logsumexp's steps each
(PyTorch's composite rounds every one for a half type).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._warn import warn_at_caller
from . import _onnx as ox
from ._onnx import reduce as reduce_onnx
from ._util import F32, F64, HALF, Spec, cj, rand_array, wrap_dims
from .reductions import (
    _all_if_empty,
    _axes,
    _count,
    _reduce_samples,
    _reduce_shape,
    expand_reduced,
    row_major,
    sum_dim,
)
from .registry import Sample, register

# ---------------------------------------------------------------- var, std


def _correction(correction) -> float:
    return 1.0 if correction is None else correction


def _var_check(a, name="std and var"):
    dt = a.dtype if hasattr(a.dtype, "category") else _dtype.FROM_NP[a.dtype]
    if dt.category < _dtype.FLOAT:
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


def _var_kernel(a, dims=None, correction=None, keepdim=False, sqrt=False, name=None):
    _var_check(a)
    axes = _axes(_all_if_empty(dims), a.ndim)
    n = _count(a.shape, axes) if a.ndim else 1
    # (the result is inf or NaN: PyTorch says why; it counts an empty input's reduction
    # factor as 0, whatever the reduced dims' sizes)
    if n - _correction(correction) <= 0 or a.size == 0:
        warn_at_caller(f"{name or ('std' if sqrt else 'var')}(): degrees of freedom is <= 0. "
                       "Correction should be strictly less than the reduction factor (input "
                       "numel divided by output numel).")
    # Half types are summed in float64, as PyTorch's CPU kernel for them (Welford's, in
    # double) does: in the half type itself the sums stop growing (256 + 1 == 256 in bfloat16).
    x = a.astype(F64) if a.dtype in HALF else a
    mean = np.mean(x, axis=axes, keepdims=True) if x.size else np.zeros_like(x)
    d = x - mean
    den = max(n - _correction(correction), 0)
    if d.dtype.kind == "c":
        # PyTorch's complex variance (real) is the real part's plus the imaginary part's:
        # with no degrees of freedom a part without spread is 0 / 0, so the sum is NaN.
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (np.sum(d.real ** 2, axis=axes, keepdims=keepdim) / den
                   + np.sum(d.imag ** 2, axis=axes, keepdims=keepdim) / den)
    else:
        out = np.sum(d ** 2, axis=axes, keepdims=keepdim) / den
    if sqrt:  # before rounding to a half type: PyTorch rounds the std once
        out = np.sqrt(out)
    return row_major(out.astype(a.real.dtype, copy=False), a)


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
    # (2 / den) * g first, then the deviations: PyTorch's order (it rounds in a half type)
    return ((g * (2.0 / den if den else float("inf"))) * centered, None, None, None)


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
    onnx=ox.variance(False),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var(a, dims, correction,
                                                                           keepdim))
std = register(
    "std.correction", kernel=lambda *args: _var_kernel(*args, sqrt=True), meta=_var_meta,
    node="StdBackward0", derivative=_std_derivative,
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out, dims, correction, keepdim),
    samples=_var_samples, public="std", onnx=ox.variance(True),
    decomposition=lambda *args: _var_decomposition(*args).sqrt(),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var(
        a, dims, correction, keepdim, sqrt=True))


def _welford_mean(x, axes, m):
    """`m`, the mean of `x` over `axes`, as PyTorch's Welford pass leaves it where `x` holds
    an infinity: each step adds (value - mean) / count, so an infinity followed by any value
    makes the mean inf - inf = NaN; only one at the very end keeps it."""
    if x.ndim == 0 or not x.size or np.isfinite(m).all():
        return m
    kept = [i for i in range(x.ndim) if i not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape([x.shape[i] for i in kept] + [-1])
    bad = ~np.isfinite(rows)
    last_only = bad[..., -1] & ~bad[..., :-1].any(axis=-1)
    return np.where((bad.any(axis=-1) & ~last_only).reshape(m.shape), np.nan, m)


def _var_mean_kernel(sqrt):
    name = "std_mean" if sqrt else "var_mean"

    def kernel(a, dims=None, correction=None, keepdim=False):
        _var_check(a, name)
        # Variance and mean of float32 and the half types in float64, as PyTorch's Welford
        # pass keeps them (summed in bfloat16, 4096 ones have mean 0.0625; in float32, the
        # mean of [1e38, 3e38, -2e38] overflows), each rounded once.
        x = a.astype(F64) if a.dtype in HALF or a.dtype == np.float32 else a
        v = _var_kernel(x, dims, correction, keepdim, sqrt, name).astype(a.real.dtype,
                                                                          copy=False)
        axes = _axes(_all_if_empty(dims), a.ndim)
        n = _count(a.shape, axes) if a.ndim else 1
        with np.errstate(invalid="ignore"):  # no elements: NaN, without NumPy's warning
            m = np.sum(x, axis=axes, keepdims=keepdim) / n if n else \
                np.full(_reduce_shape(a.shape, axes, keepdim), np.nan, x.dtype)
        m = _welford_mean(x, axes, np.asarray(m))
        return v, row_major(m.astype(a.dtype, copy=False), a)

    return kernel


def _var_mean_meta(a, dims=None, correction=None, keepdim=False):
    _var_check(a, "var_mean")  # (both spellings share this meta: std_mean's says var_mean)
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
    # Not the variance (its derivative reads only the input; PyTorch's node saves no result,
    # so the outputs may change in place before backward).
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, None, dims, correction, keepdim),
    saved_names=("self", "", "dim", "correction", "keepdim"),
    samples=_var_samples, public="var_mean", decomposition=_var_mean_decomposition(False),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var_mean(
        a, dims, correction, keepdim, wide=True), onnx=ox.var_mean(False))
std_mean = register(
    "std_mean.correction", kernel=_var_mean_kernel(True), meta=_var_mean_meta,
    node="StdMeanBackward0",
    derivative=lambda grads, a, out, d, c, k: _var_mean_derivative(grads, a, out, d, c, k, True),
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out[0], dims, correction, keepdim),
    saved_names=("self", "result0", "dim", "correction", "keepdim"),
    samples=_var_samples, public="std_mean", decomposition=_var_mean_decomposition(True),
    lowering=lambda v, a, dims=None, correction=None, keepdim=False: v.var_mean(
        a, dims, correction, keepdim, sqrt=True, wide=True), onnx=ox.var_mean(True))

# ---------------------------------------------------------------- norms, logsumexp


def _norm_check(shape, in_dt, ord, dims, dtype) -> None:
    """linalg.vector_norm's argument checks, in PyTorch's order (its meta function's)."""
    if in_dt.category < _dtype.FLOAT:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{in_dt.legacy}")
    ord = float(ord)
    if not all(shape) and (ord < 0 or ord == math.inf):
        # no identity to start a max or a min from (`dims` as given: PyTorch prints them so)
        if not dims:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor "
                "because the operation does not have an identity")
        for d in ([dims] if isinstance(dims, int) else dims):
            if shape[d] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {ord:g} norm on the dimension "
                    f"{d}because this dimension is empty and the operation does not have an "
                    "identity")
    if dtype is not None:
        if dtype.category < _dtype.FLOAT:
            raise RuntimeError("linalg.vector_norm: dtype should be floating point or complex, "
                               f"but got {dtype.legacy}")
        kind = "complex" if in_dt.category == _dtype.COMPLEX else "real"
        if (dtype.category == _dtype.COMPLEX) != (kind == "complex"):
            raise RuntimeError(f"linalg.vector_norm: dtype should be {kind} for {kind} inputs, "
                               f"but got {dtype.legacy}")
        if _dtype.promote_types(in_dt, dtype) is not dtype:
            raise RuntimeError(
                f"linalg.vector_norm: the dtype of the input ({in_dt.legacy}) should be "
                f"convertible without narrowing to the specified dtype ({dtype.legacy})")


def _norm_kernel(a, ord=2, dims=None, keepdim=False, dtype=None):
    _norm_check(a.shape, _dtype.FROM_NP[a.dtype], ord, dims, dtype)
    dt = dtype.np if dtype is not None else a.dtype
    if dt.kind == "c":  # the moduli, then a real norm
        a = np.abs(a.astype(dt))
        dt = a.dtype
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
    return row_major(np.asarray(out).astype(dt, copy=False), a)


def _norm_meta(a, ord=2, dims=None, keepdim=False, dtype=None):
    _norm_check(tuple(a.shape), a.dtype, ord, dims, dtype)
    axes = _axes(_all_if_empty(dims), len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), (dtype or a.dtype).to_real())


def norm_backward(g, a, p, norm, dims=None, keepdim=True):
    """PyTorch's `norm_backward`: the gradient through `norm`, the `p`-norm of `a` over `dims`
    (None or empty: all), from the incoming gradient `g`. Written as PyTorch writes it, so
    half types, zeros and ties round and resolve as there; None for p = 0 (PyTorch's
    undefined gradient: the input gets none)."""
    p = float(p)
    if not keepdim and a.dim() and dims:
        for d in sorted(wrap_dims(dims, a.dim())):
            g, norm = g.unsqueeze(d), norm.unsqueeze(d)
    if p == 0:
        return None
    if p == 1:
        return a.sgn() * g
    if p == 2:
        return g * (a / norm).masked_fill(norm == 0, 0)
    if math.isinf(p):
        # amax's derivative shared among the maxima (NaNs count as maxima)
        a_abs = a.abs()
        mask = a_abs.eq(norm).logical_or(a_abs.isnan())
        count = mask.sum(list(wrap_dims(_all_if_empty(dims), a.dim())), True) if a.dim() \
            else mask.sum()
        return a.sgn() * ((g / count) * mask)
    if p < 1:
        scaled = a.sgn() * a.abs().pow(p - 1).masked_fill(a == 0, 0)
        return scaled * g * norm.pow(1 - p)
    scale_v = (g / norm.pow(p - 1)).masked_fill(norm == 0, 0)
    if p < 2:
        return a.sgn() * a.abs().pow(p - 1) * scale_v
    return a * a.abs().pow(p - 2) * scale_v


def _norm_derivative(g, a, out, ord, dims, keepdim):
    return (norm_backward(g, a, ord, out, dims, keepdim), None, None, None, None)


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
    samples=_norm_samples, public="norm", onnx=ox.vector_norm,
    saved_names=("self", "result", "ord", "dim", "keepdim"))


def _logsumexp_kernel(a, dims, keepdim=False):
    dt = a.dtype if a.dtype.kind in "fc" or a.dtype in HALF else np.dtype(
        _dtype.defaults.float.np)
    x = a.astype(F32 if dt in HALF else dt)
    axes = _axes(dims, a.ndim)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdim)).astype(dt)
    # Complex inputs are shifted by the largest real part (a real shift keeps the principal
    # logarithm's branch, as PyTorch's).
    m = np.max(x.real if dt.kind == "c" else x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    if dt in HALF:
        # PyTorch's composite for a half type rounds each step to it: the shifted values,
        # their exponentials, the sum (accumulated in float32), its log and the sum with m.
        def r(v):
            return v.astype(dt).astype(F32)

        out = r(r(np.log(r(np.sum(r(np.exp(r(x - m))), axis=axes, keepdims=True)))) + m)
    else:
        out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return row_major((out if keepdim else np.squeeze(out, axes)).astype(dt, copy=False), a)


def _logsumexp_meta(a, dims, keepdim=False):
    axes = _axes(dims, len(a.shape))
    dt = a.dtype if a.dtype.category in (_dtype.FLOAT, _dtype.COMPLEX) else \
        _dtype.defaults.float
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


def _logsumexp_decomposition(a, dims, keepdim=False):
    """log(sum(exp(a - m))) + m, with m the maximum (0 where it is infinite), over `a` in
    the result's dtype (integers and bools are converted first, as the kernel does: `a - m`
    of uint8 would wrap)."""
    dt = _logsumexp_meta(a, dims, keepdim).dtype
    if a.dtype is not dt:
        a = a.to(dt)
    if not a.numel():
        return call(sum_dim, a.exp(), dims, keepdim).log()
    m = (a.real if a.is_complex() else a).amax(dims, True)
    m = m.new_zeros(()).where(m.isinf(), m)
    # (m squeezed before the sum, not the sum after it: the result is then no view, which a
    # traced graph could not return with the node eager gives it)
    return call(sum_dim, (a - m).exp(), dims, keepdim).log() + (m if keepdim else
                                                                  m.squeeze(dims))


logsumexp = register(
    "logsumexp", kernel=_logsumexp_kernel, meta=_logsumexp_meta, node="LogsumexpBackward0",
    derivative=lambda g, a, out, dims, keepdim: (
        expand_reduced(g, a.shape, dims if a.dim() else None, keepdim)
        * cj((a - expand_reduced(out, a.shape, dims if a.dim() else None, keepdim)).exp()),
        None, None),
    save=lambda out, a, dims, keepdim=False: (a, out, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if s.args[1] is not None],
    decomposition=_logsumexp_decomposition, onnx=reduce_onnx("ReduceLogSumExp"),
    saved_names=("self", "result", "dim", "keepdim"))
