"""Sorting and selection: median, mode, kthvalue, sort, argsort, topk."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._shapes import laid_like, like_strides
from . import _onnx as ox
from . import _tie_order
from ._util import HALF, Spec, in_format, not_implemented_for, rand_array
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

# Rows longer than this take NumPy's order for ties: replaying PyTorch's algorithms one
# comparison at a time in Python would take seconds.
_REPLAY_LIMIT = 1 << 16


def _floating(dt: np.dtype) -> bool:
    """Whether a NumPy dtype holds NaN: float16/32/64, and bfloat16 (whose kind is "V")."""
    return dt.kind == "f" or dt in HALF


def _same(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise equality in which NaN equals NaN (PyTorch's comparators tie NaNs)."""
    eq = x == y
    if _floating(x.dtype):
        eq |= np.isnan(x) & np.isnan(y)
    return eq


def _replay(a: np.ndarray, d: int, rows: np.ndarray, order: np.ndarray, width: int,
            row_order) -> np.ndarray:
    """`order` (int64 positions along `d`, `width` of them per row) with the rows where
    `rows` is true recomputed by `row_order(values)`, PyTorch's algorithm for ties."""
    if not rows.any() or a.shape[d] > _REPLAY_LIMIT:
        return order
    x = np.moveaxis(a, d, -1).reshape(-1, a.shape[d])
    out = np.moveaxis(order, d, -1).copy()
    flat = out.reshape(-1, width)
    for r in np.flatnonzero(rows.reshape(-1)):
        flat[r] = row_order(x[r])
    return np.moveaxis(out, -1, d)


def _has_ties(ordered: np.ndarray, d: int, upto: int) -> np.ndarray:
    """Per row (the reduced shape): do two of the first `upto` sorted values along `d` tie?"""
    head = np.moveaxis(ordered, d, -1)[..., :upto]
    return _same(head[..., 1:], head[..., :-1]).any(axis=-1)


def _sort_row(descending: bool):
    def row_order(row):
        keys, idx = _tie_order.ranks(row), list(range(row.shape[0]))
        before = (lambda x, y: x > y) if descending else (lambda x, y: x < y)
        _tie_order.sort(keys, idx, 0, len(keys), before)
        return idx

    return row_order


def _topk_row(k: int, largest: bool, sorted: bool):
    def row_order(row):
        keys, idx = _tie_order.ranks(row), list(range(row.shape[0]))
        before = (lambda x, y: x > y) if largest else (lambda x, y: x < y)
        if k * 64 <= len(keys):
            _tie_order.partial_sort(keys, idx, k, before)
        else:
            _tie_order.nth_element(keys, idx, k - 1, before)
            if sorted:
                _tie_order.sort(keys, idx, 0, k - 1, before)
        return idx[:k]

    return row_order


def _kth_row(k: int):
    def row_order(row):
        keys, idx = _tie_order.ranks(row), list(range(row.shape[0]))
        _tie_order.quickselect(keys, idx, k, lambda x, y: x > y)
        return [idx[k]]

    return row_order


def empty_median(dt: np.dtype) -> np.ndarray:
    """The median of no elements, as PyTorch gives it: NaN, converted to `dt` as its CPU
    converts a NaN (the smallest integer for int32/int64, whose low bits are the 0 of the
    narrower ints; True for bool)."""
    if dt.kind in "iu":
        return np.asarray(np.iinfo(dt).min if dt.itemsize >= 4 and dt.kind == "i" else 0, dt)
    if dt.kind == "b":
        return np.asarray(True)
    return np.asarray(np.nan, dt)


def no_bool(name: str, dt) -> None:
    """PyTorch's error for a kernel it has no bool form of (`median_cpu`, `kthvalue_cpu`)."""
    if dt == np.bool_ or dt is _dtype.bool_:
        raise not_implemented_for(name, "Bool")


def _median_all_meta(a):
    if 0 not in tuple(a.shape):
        no_bool("median_cpu", a.dtype)
    return Spec((), a.dtype)


def _median_all_kernel(a):
    if a.size == 0:
        return empty_median(a.dtype)
    no_bool("median_cpu", a.dtype)
    flat = np.sort(a.reshape(-1))
    if _floating(a.dtype) and np.isnan(flat[-1]):  # NaN propagates, as in PyTorch
        return np.asarray(np.nan, a.dtype)
    return np.asarray(flat[(flat.size - 1) // 2])


median = register(
    "median", kernel=_median_all_kernel, meta=_median_all_meta,
    node="MedianBackward0", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples, onnx=ox.median_all)


def _kth(a, d, k):
    """Values and indices of the k-th smallest (0-based) along `d`, stable for ties."""
    order = np.argsort(a, axis=d, kind="stable")
    idx = np.take(order, [k], axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64)


def _median_dim_kernel(a, dim, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        no_bool("median_out", a.dtype)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    _nonempty_dim("median", a.shape, d)
    no_bool("median_out", a.dtype)
    v, i = _kth(a, d, (a.shape[d] - 1) // 2)
    if _floating(a.dtype):  # a row with NaN has median NaN, at its first NaN
        nan = np.isnan(a)
        has = nan.any(axis=d, keepdims=True)
        v = np.where(has, np.nan, v).astype(a.dtype, copy=False)
        i = np.where(has, np.argmax(nan, axis=d, keepdims=True), i)
    return _keep(v, d, keepdim), _keep(i, d, keepdim)


def _selection_meta(name, bool_kernel=None):
    def meta(a, dim=-1, keepdim=False):
        d = _dim1(dim, len(a.shape))
        _nonempty_dim(name, tuple(a.shape), d)
        if bool_kernel is not None:
            no_bool(bool_kernel, a.dtype)
        shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
        return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]

    return meta


median_dim = register(
    "median.dim", kernel=_median_dim_kernel, meta=_selection_meta("median", "median_out"),
    node="MedianBackward1", derivative=_value_select_derivative, save=_save_indices,
    samples=_dim_samples, public="median", onnx=ox.median_dim)


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
    replay = (_same(a, vals).sum(axis=d, keepdims=True) > 1)
    if _floating(a.dtype):
        replay |= np.isnan(a).any(axis=d, keepdims=True)
    idx = _replay(a, d, replay, idx, 1, _mode_row)
    vals = np.take_along_axis(a, idx, d)
    # Row-major results, as PyTorch's (an expanded input's take has stride 1 on size-1 dims).
    return in_format(_keep(vals, d, keepdim), None), in_format(_keep(idx, d, keepdim), None)


def _mode_row(row) -> list:
    """PyTorch's mode: std::sort the (value, index) pairs by value, then the last pair of the
    first longest run of equal values gives the index. Its comparisons are plain `<` and
    `!=`, so the values themselves are the keys (a NaN ties with everything in the sort and
    ends every run)."""
    keys, idx = row.tolist(), list(range(row.shape[0]))
    _tie_order.sort(keys, idx, 0, len(keys), lambda x, y: x < y)
    best, best_at, run = 0, 0, 0
    for i in range(len(keys)):
        run += 1
        if i == len(keys) - 1 or keys[i] != keys[i + 1]:
            if run > best:
                best, best_at = run, i
            run = 0
    return [idx[best_at]]


def _mode_samples(rng, dtype):
    return [Sample((rng.integers(0, 3, s).astype(dtype), d, k), name=f"{s} {d} {k}")
            for s, d in (((3, 5), 1), ((4, 3), 0), ((2, 3, 4), -1), ((), 0))
            for k in (False, True)]


mode = register(
    "mode", kernel=_mode_kernel, meta=_selection_meta("mode"), node="ModeBackward0",
    derivative=_value_select_derivative, save=lambda out, a, dim=-1, keepdim=False: (
        a.shape, dim, out[1], keepdim), samples=_mode_samples,
    gradcheck=False)  # its samples have ties by design: finite differences split them


def _kthvalue_check(shape, dt, k, dim) -> int:
    """The dim, wrapped, after PyTorch's checks in its order: the dim, an empty dim, k, and
    bool (which its kernel lacks, though a 0-d tensor never reaches it)."""
    d = _dim1(dim, len(shape))
    if len(shape) and shape[d] == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= (shape[d] if len(shape) else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if len(shape):
        no_bool("kthvalue_cpu", dt)
    return d


def _kthvalue_kernel(a, k, dim=-1, keepdim=False):
    d = _kthvalue_check(a.shape, a.dtype, k, dim)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    v, i = _kth(a, d, k - 1)
    ties = (_same(a, v).sum(axis=d, keepdims=True) > 1)
    i = _replay(a, d, ties, i, 1, _kth_row(k - 1))
    v = np.take_along_axis(a, i, d)
    # Row-major results, as PyTorch's (an expanded input's take has stride 1 on size-1 dims).
    return in_format(_keep(v, d, keepdim), None), in_format(_keep(i, d, keepdim), None)


def _kthvalue_meta(a, k, dim=-1, keepdim=False):
    d = _kthvalue_check(tuple(a.shape), a.dtype, k, dim)
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
                             for kd in (False, True)], onnx=ox.kthvalue)


def _sort_order(a, d, descending, stable=True):
    if descending:
        # Stable descending: reverse, stable-sort ascending, reverse back (keeps first-wins).
        if a.dtype.kind in "biu":
            # ~a reverses the order without overflow (-a wraps the most negative integer)
            key = ~a
        else:  # NaN sorts as the largest value, so it comes first
            return np.lexsort((-a, ~np.isnan(a)), axis=d)
        return np.argsort(key, axis=d, kind="stable")
    return np.argsort(a, axis=d, kind="stable")


def _sort_kernel(a, dim=-1, descending=False, stable=True):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    order = _sort_order(a, d, descending).astype(np.int64)
    values = np.take_along_axis(a, order, d)
    if not stable and a.shape[d] > 1:  # ties in PyTorch's introsort order
        order = _replay(a, d, _has_ties(values, d, a.shape[d]), order, a.shape[d],
                        _sort_row(descending))
        values = np.take_along_axis(a, order, d)
    # PyTorch's results are laid out like `a`, size-1 dims' strides too (which NumPy's
    # C-contiguous flag ignores: a (1, 3) transposed from (3, 1) is "contiguous").
    if not a.size or not a.flags.c_contiguous or 1 in a.shape:  # (an empty one's too)
        return laid_like(values, a), laid_like(order, a)
    # (NumPy's argsort along a leading axis can return another layout)
    return np.ascontiguousarray(values), np.ascontiguousarray(order)


def _sort_meta(a, dim=-1, descending=False):
    _dim1(dim, len(a.shape))
    shape, strides = tuple(a.shape), tuple(a.stride())
    like = None  # (contiguous; symbolic sizes keep it)
    if all(isinstance(n, int) for n in shape + strides):
        like = like_strides(shape, strides)
    return [Spec(shape, a.dtype, like), Spec(shape, _dtype.int64, like)]


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
    "sort", kernel=lambda a, dim=-1, descending=False: _sort_kernel(a, dim, descending, False),
    meta=_sort_meta, node="SortBackward0",
    derivative=_sort_derivative,
    save=lambda out, a, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=_sort_samples, onnx=ox.sort)
sort_stable = register(
    "sort.stable", kernel=lambda a, stable, dim=-1, descending=False: _sort_kernel(
        a, dim, descending, bool(stable)),
    meta=lambda a, stable, dim=-1, descending=False: _sort_meta(a, dim, descending),
    node="SortBackward1",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None),
    save=lambda out, a, stable, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((s.args[0], True) + s.args[1:], name=s.name)
                             for s in _sort_samples(rng, dt)], public="sort", onnx=ox.sort)
argsort = register(
    "argsort", kernel=lambda a, dim=-1, descending=False: _sort_kernel(
        a, dim, descending, False)[1],
    meta=lambda a, dim=-1, descending=False: _sort_meta(a, dim, descending)[1],
    differentiable=False, samples=_sort_samples, onnx=ox.sort)


def _topk_check(shape, dt, k, dim) -> int:
    """The dim, wrapped, after PyTorch's checks in its order: the dim, k (a 0-d tensor takes
    k = 0 as well as 1), then bool, which its CPU kernel lacks."""
    d = _dim1(dim, len(shape))
    if not 0 <= k <= (shape[d] if len(shape) else 1):
        raise RuntimeError("selected index k out of range")
    if dt == np.bool_ or dt is _dtype.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    return d


def topk_kernel(a, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the `k` largest (or smallest) along `dim` of array `a`, ties
    ordered as PyTorch's CPU selection leaves them."""
    d = _topk_check(a.shape, a.dtype, k, dim)
    if a.ndim == 0:  # even for k = 0, PyTorch's result is the element and index 0
        return a.copy(), np.zeros((), np.int64)
    n = a.shape[d]
    m = min(k + 1, n)  # one past the cut, to see ties across it
    if m < n and not (_floating(a.dtype) and np.isnan(a).any()):
        # The m best by partition, then ordered: not a sort of the whole row.
        part = np.argpartition(a, n - m if largest else m - 1, axis=d)
        cand = np.take(part, np.arange(n - m, n) if largest else np.arange(m), axis=d)
        cand_order = np.take_along_axis(cand, _sort_order(np.take_along_axis(a, cand, d), d,
                                                          largest), d)
    else:
        cand_order = np.take(_sort_order(a, d, largest), np.arange(m), axis=d)
    idx = np.take(cand_order, np.arange(k), axis=d).astype(np.int64)
    if k:
        # Ties among the chosen values or across the cut, and the unsorted order of
        # introselect, come out as PyTorch's selection algorithms leave them.
        ordered = np.take_along_axis(a, cand_order, d)
        rows = _has_ties(ordered, d, k + 1)
        if not sorted and k * 64 > a.shape[d] and k > 2:
            rows = np.ones_like(rows)
        # (row-major, as PyTorch's results: the replay of tied rows writes through a view)
        idx = _replay(a, d, rows, idx, k, _topk_row(k, largest, sorted))
    # (row-major, size-1 dims' strides too, as PyTorch's results; the values follow)
    idx = in_format(idx, None)
    return np.take_along_axis(a, idx, d), idx


def _topk_meta(a, k, dim=-1, largest=True, sorted=True):
    d = _topk_check(tuple(a.shape), a.dtype, k, dim)
    shape = tuple(a.shape[:d]) + (k,) + tuple(a.shape[d + 1:]) if len(a.shape) else ()
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


topk = register(
    "topk", kernel=topk_kernel, meta=_topk_meta, node="TopkBackward0",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None, None),
    save=lambda out, a, k, dim=-1, largest=True, sorted=True: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d, lg), name=f"{s} {k} {d}")
                             for s, k, d in (((3, 4), 2, -1), ((3, 4), 3, 0), ((5,), 5, 0),
                                             ((2, 3, 4), 0, 1), ((), 1, 0))
                             for lg in (True, False)], onnx=ox.topk)
