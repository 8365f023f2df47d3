"""Ops that exist only in place: zero_, fill_, copy_.

Like every in-place op, their kernel returns the new value of `self` and dispatch writes it.
"""

from __future__ import annotations

import numpy as np

from .._scalar_conversion import fill_value, half_input
from . import _onnx as _ox
from ._util import Spec, broadcast_shapes, rand_array, real_part_for, shape_of
from .registry import Sample, register


def _fill_meta(a, value):
    if hasattr(value, "shape") and len(value.shape):
        raise RuntimeError(
            "fill_ only supports 0-dimension value tensor but got tensor with "
            f"{len(value.shape)} dimensions.")
    return Spec(tuple(a.shape), a.dtype)


def _fill_kernel(a, value):
    _fill_meta(a, value)
    value = fill_value(value, a.dtype, a.size)
    with np.errstate(over="ignore"):
        return np.full(a.shape, value, dtype=a.dtype)


def _samples(*others):
    def samples(rng, dtype):
        return [Sample((rand_array(rng, s, dtype),) + tuple(
            o(rng, dtype) if callable(o) else o for o in others)) for s in ((3, 4), (), (0,))]

    return samples


def _zero_kernel(a):
    return np.zeros_like(a)


def _zero_into(a) -> bool:
    """`zero_`'s `write_into`: its result written straight into `a` (see
    `OpDef.write_into`); False, having written nothing, where `a` is read-only (dispatch's
    general path writes it)."""
    try:
        a.fill(0)
    except ValueError:
        return False
    return True


zero_ = register(
    "zero_", kernel=_zero_kernel, meta=lambda a: Spec(tuple(a.shape), a.dtype),
    inplace=True, node="ZeroBackward0", derivative=lambda g: (g * 0,), zero_grad=True,
    samples=_samples(), onnx=_ox.fill, overlap_ok="", write_into=_zero_into)
fill_scalar = register(
    "fill_.Scalar", kernel=_fill_kernel, meta=_fill_meta, inplace=True, node="FillBackward2",
    quantized={"kernel": "_fill"},
    derivative=lambda g: (g * 0, None), zero_grad=True, samples=_samples(1.5), public="fill_",
    onnx=_ox.fill, overlap_ok="")  # (fill_.Tensor refuses an expanded tensor, as PyTorch's)
fill_tensor = register(
    "fill_.Tensor", kernel=_fill_kernel, meta=_fill_meta, inplace=True, node="FillBackward3",
    quantized={"kernel": "_fill"},
    derivative=lambda g: (g * 0, g.sum()), zero_grad=True,
    tensor_args=(0, 1), samples=_samples(lambda rng, dt: rand_array(rng, (), dt)), public="fill_",
    onnx=_ox.fill)


def _copy_meta(a, src, non_blocking=False):
    shape = broadcast_shapes(tuple(a.shape), shape_of(src))
    if shape != tuple(a.shape):
        raise RuntimeError(
            f"output with shape [{', '.join(map(str, a.shape))}] doesn't match the broadcast "
            f"shape [{', '.join(map(str, shape))}]")
    return Spec(tuple(a.shape), a.dtype)


def _copy_kernel(a, src, non_blocking=False):
    _copy_meta(a, src)
    src = np.asarray(src)
    if src.dtype.kind == "c":
        src = real_part_for(src, a.dtype)
    src = half_input(src, a.dtype)  # (converted as `_to_copy` converts)
    return np.broadcast_to(src.astype(a.dtype, copy=False), a.shape)


def _copy_into(a, src, non_blocking=False) -> bool:
    """`copy_`'s result written straight into `a` where no conversion is made: `src` an
    array of `a`'s (real or bool) dtype that broadcasts to `a`'s shape. False, having
    written nothing, for any other case (dispatch's general path converts and refuses)."""
    if src.__class__ is not np.ndarray or src.dtype is not a.dtype or \
            a.dtype.kind not in "fiub":
        return False
    try:
        np.copyto(a, src)
    except ValueError:  # a shape that does not broadcast, or a read-only `a`: before writing
        return False
    return True



def _copy_derivative(g, src_dtype):
    return (g * 0, g.to(src_dtype), None)


def _copy_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), rand_array(rng, r, dtype)), name=f"{s}<-{r}")
            for s, r in (((3, 4), (4,)), ((3, 4), (3, 4)), ((), ()), ((2, 3), ()))]


copy_ = register(
    "copy_", kernel=_copy_kernel, meta=_copy_meta, inplace=True, node="CopyBackwards",
    quantized={"kernel": "_copy"},
    # (lowered only where it writes a tensor of the graph that nothing else reads)
    lowering=lambda v, dst, src, non_blocking=False: v.copy_into(dst, src),
    derivative=_copy_derivative, save=lambda out, a, src, non_blocking=False: (src.dtype,),
    tensor_args=(0, 1), samples=_copy_samples, onnx=_ox.fill, write_into=_copy_into)
