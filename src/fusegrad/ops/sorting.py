"""Sorting and selection: median, mode, kthvalue, sort, argsort, topk."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import Spec, rand_array
from .reductions import (
    _all_samples,
    _dim1,
    _dim_samples,
    _evenly,
    _keep,
    _nonempty_dim,
    _reduce_shape,
    _save_indices,
    _value_select_derivative,
)
from .registry import Sample, register

# ---------------------------------------------------------------- sorting and selection


def _median_all_kernel(a):
    if a.size == 0:
        return np.asarray(np.nan, a.dtype)
    flat = np.sort(a.reshape(-1))
    if a.dtype.kind == "f" and np.isnan(flat[-1]):  # NaN propagates, as in PyTorch
        return np.asarray(np.nan, a.dtype)
    return np.asarray(flat[(flat.size - 1) // 2])


median = register(
    "median", kernel=_median_all_kernel, meta=lambda a: Spec((), a.dtype),
    node="MedianBackward0", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples)


def _kth(a, d, k):
    """Values and indices of the k-th smallest (0-based) along `d`, stable for ties."""
    order = np.argsort(a, axis=d, kind="stable")
    idx = np.take(order, [k], axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64)


def _median_dim_kernel(a, dim, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    _nonempty_dim("median", a.shape, d)
    v, i = _kth(a, d, (a.shape[d] - 1) // 2)
    if a.dtype.kind == "f":  # a row with NaN has median NaN, at its first NaN
        nan = np.isnan(a)
        has = nan.any(axis=d, keepdims=True)
        v = np.where(has, np.nan, v).astype(a.dtype, copy=False)
        i = np.where(has, np.argmax(nan, axis=d, keepdims=True), i)
    return _keep(v, d, keepdim), _keep(i, d, keepdim)


def _selection_meta(name):
    def meta(a, dim=-1, keepdim=False):
        d = _dim1(dim, len(a.shape))
        _nonempty_dim(name, tuple(a.shape), d)
        shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
        return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]

    return meta


median_dim = register(
    "median.dim", kernel=_median_dim_kernel, meta=_selection_meta("median"),
    node="MedianBackward1", derivative=_value_select_derivative, save=_save_indices,
    samples=_dim_samples, public="median")


def _mode_kernel(a, dim=-1, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    _nonempty_dim("mode", a.shape, d)
    x = np.moveaxis(a, d, -1)
    n = x.shape[-1]
    s = np.sort(x, axis=-1)
    # Along the sorted values, the length of the run so far at each position; the first
    # position reaching the longest run ends the most frequent (and smallest) value's run.
    pos = np.arange(n)
    new_run = np.concatenate([np.ones(s.shape[:-1] + (1,), bool), s[..., 1:] != s[..., :-1]], -1)
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=-1)
    best = np.argmax(pos - start, axis=-1)[..., None]
    vals = np.take_along_axis(s, best, -1)
    idx = np.max(np.where(x == vals, pos, -1), axis=-1, keepdims=True)
    vals = np.moveaxis(vals, -1, d)
    idx = np.moveaxis(idx, -1, d).astype(np.int64)
    return _keep(vals, d, keepdim), _keep(idx, d, keepdim)


def _mode_samples(rng, dtype):
    return [Sample((rng.integers(0, 3, s).astype(dtype), d, k), name=f"{s} {d} {k}")
            for s, d in (((3, 5), 1), ((4, 3), 0), ((2, 3, 4), -1), ((), 0))
            for k in (False, True)]


mode = register(
    "mode", kernel=_mode_kernel, meta=_selection_meta("mode"), node="ModeBackward0",
    derivative=_value_select_derivative, save=lambda out, a, dim=-1, keepdim=False: (
        a.shape, dim, out[1], keepdim), samples=_mode_samples,
    gradcheck=False)  # its samples have ties by design: finite differences split them


def _kthvalue_kernel(a, k, dim=-1, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        if k != 1:
            raise IndexError("kthvalue(): selected number k out of range for dimension 0")
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    if not 1 <= k <= a.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = _kth(a, d, k - 1)
    return _keep(v, d, keepdim), _keep(i, d, keepdim)


def _kthvalue_meta(a, k, dim=-1, keepdim=False):
    d = _dim1(dim, len(a.shape))
    size = a.shape[d] if len(a.shape) else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


kthvalue = register(
    "kthvalue", kernel=_kthvalue_kernel, meta=_kthvalue_meta, node="KthvalueBackward0",
    derivative=lambda grads, shape, dim, idx, keepdim: (
        _value_select_derivative(grads, shape, dim, idx, keepdim)[0], None, None, None),
    save=lambda out, a, k, dim=-1, keepdim=False: (a.shape, dim, out[1], keepdim),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d, kd), name=f"{s} {k} {d}")
                             for s, k, d in (((3, 4), 2, 1), ((3, 4), 3, 0), ((5,), 1, 0),
                                             ((2, 3, 4), 4, -1), ((), 1, 0))
                             for kd in (False, True)])


def _sort_order(a, d, descending, stable=True):
    if descending:
        # Stable descending: reverse, stable-sort ascending, reverse back (keeps first-wins).
        if a.dtype == np.bool_:
            key = ~a
        elif a.dtype.kind == "u":
            key = a.max(initial=0) - a
        elif a.dtype.kind in "iu":
            key = -a
        else:  # NaN sorts as the largest value, so it comes first
            return np.lexsort((-a, ~np.isnan(a)), axis=d)
        return np.argsort(key, axis=d, kind="stable")
    return np.argsort(a, axis=d, kind="stable")


def _sort_kernel(a, dim=-1, descending=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    order = _sort_order(a, d, descending)
    return np.take_along_axis(a, order, d), order.astype(np.int64)


def _sort_meta(a, dim=-1, descending=False):
    _dim1(dim, len(a.shape))
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), _dtype.int64)]


def _sort_derivative(grads, shape, dim, idx):
    g = grads[0]
    if len(shape) == 0:
        return (g, None, None)
    return (g.new_zeros(tuple(shape)).scatter(dim, idx, g), None, None)


def _sort_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, desc), name=f"{s} {d} {desc}")
            for s, d in (((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((), 0), ((0, 3), 1))
            for desc in (False, True)]


sort = register(
    "sort", kernel=_sort_kernel, meta=_sort_meta, node="SortBackward0",
    derivative=_sort_derivative,
    save=lambda out, a, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=_sort_samples)
sort_stable = register(
    "sort.stable", kernel=lambda a, stable, dim=-1, descending=False: _sort_kernel(
        a, dim, descending),
    meta=lambda a, stable, dim=-1, descending=False: _sort_meta(a, dim, descending),
    node="SortBackward1",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None),
    save=lambda out, a, stable, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((s.args[0], True) + s.args[1:], name=s.name)
                             for s in _sort_samples(rng, dt)], public="sort")
argsort = register(
    "argsort", kernel=lambda a, dim=-1, descending=False: _sort_kernel(a, dim, descending)[1],
    meta=lambda a, dim=-1, descending=False: _sort_meta(a, dim, descending)[1],
    differentiable=False, samples=_sort_samples)


def _topk_kernel(a, k, dim=-1, largest=True, sorted=True):
    if a.ndim == 0:
        _dim1(dim, 0)
        if k != 1:
            raise RuntimeError("selected index k out of range")
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    if not 0 <= k <= a.shape[d]:
        raise RuntimeError("selected index k out of range")
    order = _sort_order(a, d, largest)
    idx = np.take(order, np.arange(k), axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64)


def _topk_meta(a, k, dim=-1, largest=True, sorted=True):
    d = _dim1(dim, len(a.shape))
    size = a.shape[d] if len(a.shape) else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    shape = tuple(a.shape[:d]) + (k,) + tuple(a.shape[d + 1:]) if len(a.shape) else ()
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


topk = register(
    "topk", kernel=_topk_kernel, meta=_topk_meta, node="TopkBackward0",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None, None),
    save=lambda out, a, k, dim=-1, largest=True, sorted=True: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d, lg), name=f"{s} {k} {d}")
                             for s, k, d in (((3, 4), 2, -1), ((3, 4), 3, 0), ((5,), 5, 0),
                                             ((2, 3, 4), 0, 1), ((), 1, 0))
                             for lg in (True, False)])
