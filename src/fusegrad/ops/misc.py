"""Searching, counting and comparing: searchsorted, bucketize, bincount, unique, isclose.

None of these is differentiable; several have data-dependent output shapes, so their metas
raise `DataDependentOutputError` on fake tensors.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import Spec, broadcast_shapes, rand_array
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


def _searchsorted_kernel(seq, values, out_int32=False, right=False, side=None, sorter=None):
    side = _side(right, side)
    values = np.asarray(values)
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    if seq.ndim <= 1:
        out = np.searchsorted(seq, values, side=side)
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
        out = np.stack([np.searchsorted(r, v, side=side) for r, v in zip(flat_s, flat_v)]
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
    ])


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
    ])


def _bincount_kernel(a, weights=None, minlength=0):
    if a.ndim != 1 or a.dtype.kind not in "iu":
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
    values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
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
    ])


def _isclose_kernel(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{_dtype.FROM_NP[a.dtype].name} did not match "
                           f"{_dtype.FROM_NP[b.dtype].name}")
    if a.dtype.kind == "b":
        return np.equal(a, b)
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


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
    ])
