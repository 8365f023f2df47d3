"""Reductions (sum, mean, amax) and the softmax family."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import F32, HALF, Spec, rand_array, wrap_dims
from .registry import Sample, register

_REDUCE_SHAPES = [((3, 4), None), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), (0, 2)), ((), None),
                  ((), 0), ((0, 3), 1), ((2, 0), 1), ((5,), 0)]


def _axes(dims, ndim: int) -> tuple:
    """Reduced axes, checked against `ndim` (a 0-d tensor accepts dim 0 and -1)."""
    axes = wrap_dims(dims, ndim)
    return axes if ndim else ()


def _sum_dtype(dt: np.dtype, dtype) -> np.dtype:
    if dtype is not None:
        return dtype.np
    # Integer and bool sums are int64 in PyTorch.
    return np.dtype(np.int64) if dt.kind in "biu" else dt


def _reduce_shape(shape, dims, keepdim) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


_F = (np.dtype(np.float32), np.dtype(np.float64))


def _sum_all_kernel(a, dtype=None):
    if dtype is None and (a.dtype is _F[0] or a.dtype is _F[1]):
        return np.add.reduce(a, axis=None)
    return _sum_kernel(a, None, False, dtype)


def _sum_kernel(a, dims, keepdim=False, dtype=None):
    dt = _sum_dtype(a.dtype, dtype)
    axes = _axes(dims, a.ndim)
    acc = F32 if dt in HALF else dt
    return np.sum(a, axis=axes, dtype=acc, keepdims=keepdim).astype(dt, copy=False)


def _sum_meta(a, dims=None, keepdim=False, dtype=None):
    dt = dtype if dtype is not None else (
        _dtype.int64 if a.dtype.category != _dtype.FLOAT else a.dtype)
    axes = _axes(dims, len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


def expand_reduced(g, shape, dims, keepdim):
    """Broadcast a reduction's gradient `g` back over the reduced `dims` of `shape`."""
    if not keepdim and len(shape):
        for d in sorted(wrap_dims(dims, len(shape))):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _reduce_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, k), name=f"{s} dim={d} keep={k}")
            for s, d in _REDUCE_SHAPES for k in (False, True)]


def _full_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype),), name=str(s))
            for s in ((3, 4), (), (0,), (2, 3, 4))]


sum_ = register(
    "sum", kernel=_sum_all_kernel,
    meta=lambda a, dtype=None: _sum_meta(a, None, False, dtype), node="SumBackward0",
    derivative=lambda g, shape: (g.expand(shape),), save=lambda out, a, dtype=None: (a.shape,),
    samples=_full_samples, onnx="ReduceSum")
sum_dim = register(
    "sum.dim_IntList", kernel=_sum_kernel, meta=_sum_meta, node="SumBackward1",
    derivative=lambda g, shape, dims, keepdim: (expand_reduced(g, shape, dims, keepdim),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (a.shape, dims, keepdim),
    samples=_reduce_samples, onnx="ReduceSum", public="sum")


def _mean_check(a, dtype):
    dt = dtype if dtype is not None else _dtype.FROM_NP[a.dtype] if hasattr(
        a.dtype, "kind") else a.dtype
    if dt.category != _dtype.FLOAT:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {dt.legacy}")
    return dt


def _mean_kernel(a, dims=None, keepdim=False, dtype=None):
    dt = _mean_check(a, dtype).np
    axes = _axes(dims, a.ndim)
    acc = F32 if dt in HALF else dt
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.mean(a, axis=axes, dtype=acc, keepdims=keepdim).astype(dt, copy=False)


def _mean_meta(a, dims=None, keepdim=False, dtype=None):
    spec = _sum_meta(a, dims, keepdim, dtype)
    spec.dtype = _mean_check(a, dtype)
    return spec


def _count(shape, dims) -> int:
    n = 1
    for d in wrap_dims(dims, len(shape)) if len(shape) else ():
        n *= shape[d]
    return n


mean = register(
    "mean", kernel=lambda a, dtype=None: _mean_kernel(a, None, False, dtype),
    meta=lambda a, dtype=None: _mean_meta(a, None, False, dtype), node="MeanBackward0",
    derivative=lambda g, shape: (g.expand(shape) / max(_count(shape, None), 1),),
    save=lambda out, a, dtype=None: (a.shape,), samples=_full_samples, onnx="ReduceMean",
    tolerance={"float32": 1e-5})
mean_dim = register(
    "mean.dim", kernel=_mean_kernel, meta=_mean_meta, node="MeanBackward1",
    derivative=lambda g, shape, dims, keepdim: (
        expand_reduced(g, shape, dims, keepdim) / max(_count(shape, dims), 1),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (a.shape, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx="ReduceMean", public="mean")


def _all_if_empty(dims):
    return None if dims is None or (isinstance(dims, (tuple, list)) and not dims) else dims


def _check_amax(shape, dims, axes) -> None:
    if _all_if_empty(dims) is None:
        if 0 in shape:
            raise RuntimeError(
                "amax(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument.")
        return
    for d in axes:
        if shape[d] == 0:
            raise IndexError(f"amax(): Expected reduction dim {d} to have non-zero size.")


def _amax_kernel(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), a.ndim)
    _check_amax(a.shape, dims, axes)
    return np.amax(a, axis=axes, keepdims=keepdim)


def _amax_meta(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), len(a.shape))
    _check_amax(tuple(a.shape), dims, axes)
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype)


def _amax_derivative(g, a, out, dims, keepdim):
    dims = _all_if_empty(dims)
    mask = a == expand_reduced(out, a.shape, dims, keepdim)
    count = mask.sum(dims if dims is not None else tuple(range(a.dim())), keepdim=True)
    return (expand_reduced(g, a.shape, dims, keepdim) * mask / count, None, None)


amax = register(
    "amax", kernel=_amax_kernel, meta=_amax_meta, node="AmaxBackward0",
    derivative=_amax_derivative, save=lambda out, a, dims=(), keepdim=False: (a, out, dims,
                                                                               keepdim),
    samples=lambda rng, dt: [Sample((s.args[0], s.args[1] if s.args[1] is not None else ()) +
                                    s.args[2:], name=s.name)
                             for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx="ReduceMax")

# ---------------------------------------------------------------- softmax family


def _softmax_kernel(a, dim, log=False):
    if a.dtype.kind != "f" and a.dtype not in HALF:
        name = "log_softmax" if log else "softmax"
        raise RuntimeError(f'"{name}_lastdim_kernel_impl" not implemented for '
                           f"'{_dtype.FROM_NP[a.dtype].legacy}'")
    dt = a.dtype
    x = a.astype(F32) if dt in HALF else a
    if x.ndim == 0:
        return (np.zeros_like(x) if log else np.ones_like(x)).astype(dt)
    axis = wrap_dims(dim, x.ndim)[0]
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    s = np.sum(e, axis=axis, keepdims=True)
    out = shifted - np.log(s) if log else e / s
    return out.astype(dt, copy=False)


def _softmax_meta(a, dim, half_to_float=False):
    if a.dtype.category != _dtype.FLOAT:
        raise RuntimeError(f"\"softmax_lastdim_kernel_impl\" not implemented for "
                           f"'{a.dtype.legacy}'")
    wrap_dims(dim, len(a.shape))
    return Spec(tuple(a.shape), a.dtype)


def _softmax_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, False), name=f"{s} dim={d}")
            for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 1))]


softmax = register(
    "_softmax", kernel=lambda a, dim, half_to_float=False: _softmax_kernel(a, dim),
    meta=_softmax_meta, node="SoftmaxBackward0",
    derivative=lambda g, out, dim: (out * (g - (g * out).sum(dim, keepdim=True)), None),
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx="Softmax", public="softmax")
log_softmax = register(
    "_log_softmax", kernel=lambda a, dim, half_to_float=False: _softmax_kernel(a, dim, True),
    meta=_softmax_meta, node="LogSoftmaxBackward0",
    derivative=lambda g, out, dim: (g - out.exp() * g.sum(dim, keepdim=True), None),
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx="LogSoftmax", public="log_softmax")
