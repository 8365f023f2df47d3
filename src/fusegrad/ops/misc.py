"""Searching, counting and comparing: searchsorted, bucketize, bincount, unique, isclose.

None of these is differentiable; several have data-dependent output shapes, so their metas
raise `DataDependentOutputError` on fake tensors.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import (
    Spec,
    broadcast_shapes,
    laid_if_empty,
    not_implemented_for,
    rand_array,
    refuse_dtypes,
    wrap_dim,
)
from .indexing import _data_dependent
from .registry import Sample, register


def _side(right, side):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        return side
    return "right" if right else "left"


def _bisect(seq, values, side: str):
    """Positions of `values` in the 1-D sorted `seq`: NumPy's search, or where a NaN is
    involved (NumPy orders NaN last, PyTorch's binary search compares it as it meets it)
    PyTorch's own bisection, which moves right while `seq[mid] >= value` (`>` for the right
    side) is false."""
    if not (seq.dtype.kind in "fc" and (np.isnan(seq).any() or np.isnan(values).any())):
        return np.searchsorted(seq, values, side=side)
    lo = np.zeros(values.shape, np.int64)
    hi = np.full(values.shape, seq.shape[-1], np.int64)
    with np.errstate(invalid="ignore"):
        while True:
            active = lo < hi
            if not active.any():
                return lo
            mid = (lo + hi) // 2
            at = seq[np.minimum(mid, seq.shape[-1] - 1)]
            right_of = ~(at > values) if side == "right" else ~(at >= values)
            lo = np.where(active & right_of, mid + 1, lo)
            hi = np.where(active & ~right_of, mid, hi)


def _searchsorted_kernel(seq, values, out_int32=False, right=False, side=None, sorter=None):
    side = _side(right, side)
    values = np.asarray(values)
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    if seq.ndim <= 1:
        out = _bisect(seq, values, side)
    else:
        if seq.shape[:-1] != values.shape[:-1]:
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(seq.shape)} and input value tensor "
                f"{list(values.shape)}")
        flat_s = seq.reshape(-1, seq.shape[-1])
        flat_v = values.reshape(-1, values.shape[-1])
        # One search per row: offset each row into its own band of a global ordering.
        out = np.stack([_bisect(r, v, side) for r, v in zip(flat_s, flat_v)]
                       ).reshape(values.shape) if flat_s.shape[0] else np.zeros(values.shape)
    return out.astype(np.int32 if out_int32 else np.int64)


def _searchsorted_meta(seq, values, out_int32=False, right=False, side=None, sorter=None):
    _side(right, side)
    shape = tuple(values.shape) if hasattr(values, "shape") else ()
    return Spec(shape, _dtype.int32 if out_int32 else _dtype.int64)


def _sorted(rng, shape, dt):
    return np.sort(rand_array(rng, shape, dt), axis=-1)


searchsorted = register(
    "searchsorted.Tensor", kernel=_searchsorted_kernel, meta=_searchsorted_meta,
    differentiable=False, public="searchsorted",
    samples=lambda rng, dt: [
        Sample((_sorted(rng, (6,), dt), rand_array(rng, (3, 4), dt)), name="1-d"),
        Sample((_sorted(rng, (6,), dt), rand_array(rng, (5,), dt), False, True), name="right"),
        Sample((_sorted(rng, (2, 5), dt), rand_array(rng, (2, 3), dt), True), name="rows"),
        Sample((np.array([1.0, 2.0, 2.0, 3.0], dt), np.array([2.0, 0.0, 5.0], dt), False,
                False, "right"), name="side"),
    ], onnx=ox.search_sorted)


def _bucketize_kernel(values, boundaries, out_int32=False, right=False):
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return _searchsorted_kernel(boundaries, values, out_int32, right)


bucketize = register(
    "bucketize.Tensor", kernel=_bucketize_kernel,
    meta=lambda v, b, out_int32=False, right=False: Spec(
        tuple(v.shape), _dtype.int32 if out_int32 else _dtype.int64),
    differentiable=False, public="bucketize",
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), _sorted(rng, (5,), dt)), name="left"),
        Sample((np.array([1.0, 2.0, 3.5], dt), np.array([1.0, 2.0, 3.0], dt), False, True),
               name="right"),
    ], onnx=ox.bucketize)


def _bincount_kernel(a, weights=None, minlength=0):
    if a.dtype.kind not in "iu":  # PyTorch's kernel exists for integer dtypes only
        raise not_implemented_for("bincount_cpu", a.dtype)
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if a.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and weights.shape != a.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = np.bincount(a, weights, minlength)
    if weights is None:
        return out.astype(np.int64)
    return out.astype(np.float32 if weights.dtype == np.float32 else np.float64)


def _bincount_meta(a, weights=None, minlength=0):
    _data_dependent("bincount")


def _bincount_derivative(g, *rest):
    raise RuntimeError("derivative for aten::bincount is not implemented")


def _unique_derivative(g, *rest):
    raise NotImplementedError("the derivative for '_unique2' is not implemented.")


_bincount_derivative.not_implemented = _unique_derivative.not_implemented = True


bincount = register(
    "bincount", kernel=_bincount_kernel, meta=_bincount_meta, node="NotImplemented",
    derivative=_bincount_derivative, gradcheck=False, nondiff_args=(0,),
    samples=lambda rng, dt: [
        Sample((rng.integers(0, 5, (10,)),), name="counts"),
        Sample((rng.integers(0, 5, (10,)), rand_array(rng, (10,), dt), 7), name="weights"),
        Sample((np.zeros(0, np.int64), None, 3), name="empty"),
    ])


def _unique_kernel(a, sorted=True, return_inverse=False, return_counts=False):
    # Each NaN is a value of its own, as in PyTorch (NumPy merges them by default).
    values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True,
                                        equal_nan=False)
    inverse = inverse.reshape(a.shape).astype(np.int64)
    return (values, inverse if return_inverse else np.zeros(0, np.int64),
            counts.astype(np.int64) if return_counts else np.zeros(0, np.int64))


def _unique_meta(a, *args):
    _data_dependent("unique")


unique = register(
    "_unique2", kernel=_unique_kernel, meta=_unique_meta, node="Unique2Backward0",
    derivative=_unique_derivative, gradcheck=False,
    public="unique", data_dependent=True,
    samples=lambda rng, dt: [
        Sample((rng.integers(0, 4, (3, 4)).astype(dt), True, True, True), name="all"),
        Sample((rng.integers(0, 4, (6,)).astype(dt), True, False, True), name="counts"),
        Sample((rng.integers(0, 4, (6,)), True, True, False), name="int inverse"),
    ], onnx=ox.unique2)


def unique_dim_check(shape: tuple, dim: int) -> int:
    """`dim` wrapped, with PyTorch's errors for unique along a dim (kernels and metas)."""
    if not shape:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, len(shape))
    zero_dims = sum(s == 0 for s in shape)
    if zero_dims > 1:
        raise RuntimeError("Number of zero sized dimensions is more than one, so unique cannot "
                           "be applied ")
    if zero_dims and shape[d] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    return d


def unique_slices(a, dim: int, sort: bool):
    """(values, inverse, counts) of the distinct slices of `a` along `dim`, compared
    elementwise (so 0.0 equals -0.0 and a NaN equals nothing): lexicographically sorted when
    `sort`, else runs of equal neighbours collapsed (unique_consecutive)."""
    d = unique_dim_check(tuple(a.shape), dim)
    rows = np.moveaxis(a, d, 0)
    n = rows.shape[0]
    flat = rows.reshape(n, int(np.prod(rows.shape[1:])))
    order = np.lexsort(flat.T[::-1]) if sort and n else np.arange(n)
    ranked = flat[order]
    starts = np.ones(n, bool)
    if n:
        starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    counts = np.diff(np.append(first, n)).astype(np.int64)
    # (the slices stacked contiguously, then `dim` moved back in place: PyTorch's layout, a
    # non-contiguous one for any dim but the first)
    values = np.moveaxis(np.ascontiguousarray(rows[order[first]]), 0, d)
    return values, inverse, counts


def _unique_dim_kernel(a, dim, sorted=True, return_inverse=False, return_counts=False):
    return unique_slices(a, dim, True)  # PyTorch sorts whatever `sorted` says


def _unique_dim_derivative(g, *rest):
    raise NotImplementedError("the derivative for 'unique_dim' is not implemented.")


_unique_dim_derivative.not_implemented = True


def _unique_dim_samples(rng, dt):
    rows = rng.integers(0, 2, (3, 2)).astype(dt)
    picks = rng.integers(0, 3, 7)
    return [Sample((rows[picks], 0, True, True, True), name="rows"),
            Sample((rows[picks].T.copy(), 1, False, True, False), name="columns"),
            Sample((rng.integers(0, 2, (2, 5, 2)).astype(dt), -2), name="3-d"),
            Sample((np.array([[-0.0, 1.0], [0.0, 1.0], [np.nan, 1.0], [np.nan, 1.0]], dt), 0,
                    True, True, True), name="signed zero and nan"),
            Sample((rng.integers(0, 3, (6, 2)), 0, True, True, True), name="int"),
            Sample((np.zeros((0, 3), dt), 0, True, True, True), name="empty")]


def _unique_dim_meta(a, dim, *args):
    unique_dim_check(tuple(a.shape), dim)
    _data_dependent("unique_dim")


unique_dim = register(
    "unique_dim", kernel=_unique_dim_kernel, meta=_unique_dim_meta, node="UniqueDimBackward0",
    derivative=_unique_dim_derivative, gradcheck=False, nondiff_outputs=(1, 2),
    save=lambda out, a, *args: (), public="unique", samples=_unique_dim_samples)


def _isclose_kernel(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{_dtype.FROM_NP[a.dtype].legacy} did not match "
                           f"{_dtype.FROM_NP[b.dtype].legacy}")
    if a.dtype.kind == "b":
        return laid_if_empty(np.equal(a, b), a, b)
    return laid_if_empty(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b)


isclose = register(
    "isclose", kernel=_isclose_kernel,
    meta=lambda a, b, *r: Spec(broadcast_shapes(tuple(a.shape), tuple(b.shape)), _dtype.bool_),
    differentiable=False,
    samples=lambda rng, dt: [
        Sample((np.array([1.0, 2.0, np.nan, 1e-9], dt), np.array([1.0, 2.1, np.nan, 0.0], dt)),
               name="basic"),
        Sample((np.array([1.0, 2.0, np.nan], dt), np.array([1.05, 2.0, np.nan], dt), 0.1, 0.0,
                True), name="tolerances"),
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt)), name="broadcast"),
    ], result_order="operands", tensors_only=("input", "other"))


# PyTorch's CPU kernel takes no bool or complex values (boundaries or inputs).
refuse_dtypes(searchsorted, "searchsorted_out_cpu", "bc", at=(0, 1))
refuse_dtypes(bucketize, "searchsorted_out_cpu", "bc", at=(0, 1))
