"""max_unpool2d / max_unpool3d: the partial inverse of max pooling, each input value written
at the flat position its index names in an output plane (or volume) of zeros (1-D unpooling
is a width-1 2-D one)."""

from __future__ import annotations

import numpy as np

from .._dtype import FROM_NP, int64
from ._util import Spec, format_of, format_strides, in_format, rand_array, refuse_dtypes
from .pooling import check_planes
from .registry import Sample, register


def _check_index_dtype(indices, suffix: bool) -> None:
    """The indices must be int64 (the 2-D kernel also names the dtype it got)."""
    dt = FROM_NP[indices.dtype] if isinstance(indices, np.ndarray) else indices.dtype
    if dt is not int64:
        got = f" but got: {dt.legacy}" if suffix else ""
        raise RuntimeError(f"elements in indices should be type int64{got}")


def _first_bad(flat_idx: np.ndarray, size: int):
    """The invalid index PyTorch reports (its loop keeps the last one it met), or None."""
    bad = (flat_idx < 0) | (flat_idx >= size)
    return int(flat_idx[bad][-1]) if bad.any() else None


def _unpool_meta(a, indices, output_size):
    shape = tuple(a.shape)
    if tuple(indices.shape) != shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor "
            f"([{', '.join(map(str, shape))}]) but got indices tensor with shape: "
            f"[{', '.join(map(str, indices.shape))}]")
    if len(shape) not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a "
                           f"tensor with {len(shape)} dimensions.")
    check_planes("max_unpooling2d_forward_out_cpu", shape, sep=" ")
    _check_index_dtype(indices, True)
    if len(output_size) != 2:
        raise RuntimeError(f"There should be exactly two elements (height, width) in "
                           f"output_size, but got {len(output_size)} elements.")
    out_shape = shape[:-2] + tuple(int(s) for s in output_size)
    # (allocated in the input's suggested memory format, as PyTorch's kernel does)
    return Spec(out_shape, a.dtype, format_strides(out_shape, format_of(a)))


def _unpool_kernel(a, indices, output_size):
    spec = _unpool_meta(a, indices, output_size)
    h, w = spec.shape[-2:]
    # the plane's size spelled out: -1 cannot stand for it when the batch is empty
    flat_idx = indices.reshape(indices.shape[:-2] + (indices.shape[-2] * indices.shape[-1],))
    bad = _first_bad(flat_idx, h * w)
    if bad is not None:
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{h}x{w})")
    out = np.zeros(a.shape[:-2] + (h * w,), dtype=a.dtype)
    np.put_along_axis(out, flat_idx, a.reshape(flat_idx.shape), axis=-1)
    return in_format(out.reshape(spec.shape), format_of(a))


def _unpool_derivative(g, shape, indices):
    flat = g.flatten(-2).gather(-1, indices.flatten(-2))
    return (flat.view(tuple(shape)), None, None)


def _unpool_samples(rng, dt):
    out = []
    for shape, size in (((2, 3, 2, 2), (4, 4)), ((3, 2, 3), (3, 5)), ((1, 1, 1, 2), (2, 2))):
        plane = shape[-2] * shape[-1]
        lead = int(np.prod(shape[:-2]))
        idx = np.stack([rng.permutation(size[0] * size[1])[:plane] for _ in range(lead)])
        out.append(Sample((rand_array(rng, shape, dt), idx.reshape(shape).astype(np.int64),
                           list(size)), name=f"{shape} {size}"))
    return out


max_unpool2d = register(
    "max_unpool2d", kernel=_unpool_kernel, meta=_unpool_meta, node="MaxUnpool2DBackward0",
    derivative=_unpool_derivative,
    save=lambda out, a, indices, output_size: (tuple(a.shape), indices),
    samples=_unpool_samples, nondiff_args=(1,), saved_names=("", "indices"), autocast="fp32")


# ---------------------------------------------------------------- 3-D


def _unpool3d_meta(a, indices, output_size, stride, padding):
    shape = tuple(a.shape)
    if len(shape) not in (4, 5):
        raise RuntimeError(f"Input to max_unpooling3d should be a 4d or 5d Tensor, but got a "
                           f"tensor with {len(shape)} dimensions.")
    if tuple(indices.shape) != shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor "
            f"([{', '.join(map(str, shape))}]) but got indices tensor with shape: "
            f"[{', '.join(map(str, indices.shape))}]")
    if len(output_size) != 3:
        raise RuntimeError(f"There should be exactly three elements (depth, height, width) in "
                           f"output_size, but got {len(output_size)} elements.")
    check_planes("max_unpooling3d_forward_out_cpu", shape, sep=" ")
    _check_index_dtype(indices, False)
    return Spec(shape[:-3] + tuple(int(s) for s in output_size), a.dtype)


def _unpool3d_kernel(a, indices, output_size, stride, padding):
    spec = _unpool3d_meta(a, indices, output_size, stride, padding)
    d, h, w = spec.shape[-3:]
    flat_idx = indices.reshape(indices.shape[:-3] + (int(np.prod(indices.shape[-3:])),))
    bad = _first_bad(flat_idx, d * h * w)
    if bad is not None:
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{d}x{h}x{w})")
    out = np.zeros(a.shape[:-3] + (d * h * w,), dtype=a.dtype)
    np.put_along_axis(out, flat_idx, a.reshape(flat_idx.shape), axis=-1)
    return out.reshape(spec.shape)


def _unpool3d_derivative(g, shape, indices):
    flat = g.flatten(-3).gather(-1, indices.flatten(-3))
    return (flat.view(tuple(shape)), None, None, None, None)


def _unpool3d_samples(rng, dt):
    out = []
    for shape, size in (((2, 1, 2, 2, 1), (3, 4, 2)), ((2, 1, 2, 3), (2, 3, 4))):
        cells = shape[-3] * shape[-2] * shape[-1]
        lead = int(np.prod(shape[:-3]))
        idx = np.stack([rng.permutation(size[0] * size[1] * size[2])[:cells]
                        for _ in range(lead)])
        out.append(Sample((rand_array(rng, shape, dt), idx.reshape(shape).astype(np.int64),
                           list(size), [2, 2, 2], [0, 0, 0]), name=f"{shape} {size}"))
    return out


max_unpool3d = register(
    "max_unpool3d", kernel=_unpool3d_kernel, meta=_unpool3d_meta, node="MaxUnpool3DBackward0",
    derivative=_unpool3d_derivative,
    save=lambda out, a, indices, *rest: (tuple(a.shape), indices),
    samples=_unpool3d_samples, nondiff_args=(1,), saved_names=("", "indices"),
    autocast="fp32")


# PyTorch's CPU kernels are for floating inputs only.
refuse_dtypes(max_unpool2d, "max_unpool2d", "biuc")
refuse_dtypes(max_unpool3d, "max_unpool3d", "biuc")
