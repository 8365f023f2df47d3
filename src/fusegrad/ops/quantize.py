"""Fake quantization, the kernels of quantization-aware training: values rounded to an
affine integer grid (`scale`, `zero_point`, [`quant_min`, `quant_max`]) and mapped back to
floating point, with the straight-through gradient (the incoming gradient where the value
fell inside the grid, zero where it was clamped). ATen's `*_cachemask` ops return that mask
beside the values and save it (`_saved_mask`).

PyTorch's CPU arithmetic, found by experiment: q = nearbyint(x * (1 / scale)) + zero_point
with the reciprocal in float32 (a float zero point goes inside the rounding), clamped; the
result (q - zero_point) * scale, in float32 for the per-tensor kernel (then in the input's
dtype), in the input's dtype for the per-channel one.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._shapes import laid_like
from ._util import F32, HALF, Spec, dtype_of, not_implemented_for, rand_array, wrap_dim
from .registry import Sample, register

_KERNEL_NAME = {"tensor": "fake_quantize_tensor_cachemask_kernel_type_handling",
                "channel": "fake_quantize_channel_cachemask_kernel_type_handling"}


def check_range(quant_min: int, quant_max: int) -> None:
    """PyTorch's check of the grid's bounds (its message keeps the source's spaces)."""
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def check_zero_points(zero_points, quant_min: int, quant_max: int) -> None:
    """PyTorch's check that every zero point (a number or an array) lies in the grid."""
    zp = np.asarray(zero_points)
    if zp.size and (np.min(zp) < quant_min or np.max(zp) > quant_max):
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")


def _floating(x, kind: str) -> None:
    if x.dtype.kind != "f" and x.dtype not in HALF:
        raise not_implemented_for(_KERNEL_NAME[kind], dtype_of(x))


def _fake_quantize(x, scale, zero_point, quant_min: int, quant_max: int,
                   float32_result: bool = True):
    """(values, mask) for `x` and broadcastable `scale` (float32) and `zero_point` (integer
    or float32) arrays; `float32_result`: the last product in float32 (the per-tensor
    kernel's), else in the input's (float32 for a half type) precision."""
    xw = x.astype(F32) if x.dtype in HALF else x
    scale = np.asarray(scale, F32)
    inv = (F32.type(1) / scale).astype(xw.dtype)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if np.asarray(zero_point).dtype.kind == "f":
            zp = np.asarray(zero_point, F32).astype(xw.dtype)
            q = np.rint(xw * inv + zp)
        else:
            zp = np.asarray(zero_point).astype(xw.dtype)
            q = np.rint(xw * inv) + zp
        mask = (q >= quant_min) & (q <= quant_max)
        out = np.clip(q, quant_min, quant_max) - zp
        out = out.astype(F32) * scale if float32_result else out * scale.astype(xw.dtype)
    # (laid out as `empty_like(x)`, as PyTorch's kernels allocate both)
    return laid_like(out.astype(x.dtype), x), laid_like(mask, x)


def _per_tensor(x, scale, zero_point, quant_min, quant_max):
    check_range(quant_min, quant_max)
    check_zero_points(zero_point, quant_min, quant_max)
    _floating(x, "tensor")
    return _fake_quantize(x, F32.type(scale), int(zero_point), quant_min, quant_max)


def _no_meta(name: str, meta):
    """`meta` for fake tensors; on the meta device PyTorch's error for op `name`, which has
    no Meta kernel (raised before any argument check, as PyTorch's dispatcher does)."""

    def checked(x, *args):
        if x.is_meta:
            from .._meta import no_meta_kernel  # (the meta device sits above the registry)

            raise no_meta_kernel(name)
        return meta(x, *args)

    checked.__name__ = checked.__qualname__ = meta.__name__
    return checked


def _per_tensor_meta(x, scale, zero_point, quant_min, quant_max):
    check_range(quant_min, quant_max)
    check_zero_points(zero_point, quant_min, quant_max)
    return [Spec(tuple(x.shape), x.dtype), Spec(tuple(x.shape), _dtype.bool_)]


def _mask_derivative(grads, mask, *rest):
    """The straight-through gradient: the incoming one where the value was not clamped."""
    g = grads[0] if isinstance(grads, list) else grads
    return (g * mask.to(g.dtype),) + (None,) * len(rest)


def _samples(rng, dt):
    return [Sample((rand_array(rng, (3, 5), dt) * 4, 0.1, 3, -8, 7), name="int4"),
            Sample((rand_array(rng, (2, 3, 4), dt), 0.05, 0, 0, 255), name="uint8")]


fake_quantize_per_tensor_affine_cachemask = register(
    "fake_quantize_per_tensor_affine_cachemask", kernel=_per_tensor,
    meta=_no_meta("fake_quantize_per_tensor_affine_cachemask", _per_tensor_meta),
    node="FakeQuantizePerTensorAffineCachemaskBackward0",
    derivative=lambda grads, mask: _mask_derivative(grads, mask, 0, 0, 0, 0),
    save=lambda out, x, scale, zero_point, quant_min, quant_max: (out[1],),
    nondiff_outputs=(1,), saved_names=("mask",), gradcheck=False, samples=_samples,
    public="fake_quantize_per_tensor_affine")


def _tensor_qparams_check(scale, zero_point) -> None:
    if np.size(scale) != 1 or np.size(zero_point) != 1:
        n = np.size(scale) if np.size(scale) != 1 else np.size(zero_point)
        raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")


def _per_tensor_qparams(x, scale, zero_point, enabled, quant_min, quant_max):
    check_range(quant_min, quant_max)
    _tensor_qparams_check(scale, zero_point)
    check_zero_points(zero_point, quant_min, quant_max)
    _floating(x, "tensor")
    if not np.asarray(enabled).reshape(-1)[0]:  # fake quantization switched off: a copy
        return laid_like(x.copy(), x), laid_like(np.ones(x.shape, np.bool_), x)
    zp = np.asarray(zero_point).reshape(())
    zp = int(zp) if zp.dtype.kind != "f" else zp.astype(F32)
    return _fake_quantize(x, np.asarray(scale, F32).reshape(()), zp, quant_min, quant_max)


def _per_tensor_qparams_meta(x, scale, zero_point, enabled, quant_min, quant_max):
    check_range(quant_min, quant_max)
    return [Spec(tuple(x.shape), x.dtype), Spec(tuple(x.shape), _dtype.bool_)]


fake_quantize_per_tensor_affine_cachemask_tensor_qparams = register(
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", kernel=_per_tensor_qparams,
    meta=_no_meta("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
                  _per_tensor_qparams_meta),
    node="FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0",
    derivative=lambda grads, mask: _mask_derivative(grads, mask, 0, 0, 0, 0, 0),
    save=lambda out, x, scale, zero_point, enabled, quant_min, quant_max: (out[1],),
    nondiff_outputs=(1,), nondiff_args=(1, 2, 3), saved_names=("mask",), gradcheck=False,
    public="fake_quantize_per_tensor_affine",
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 5), dt) * 4, np.array([0.1], F32), np.array([3], np.int32),
                np.array([1], np.int64), -8, 7), name="enabled"),
        Sample((rand_array(rng, (4,), dt), np.array([0.05], F32), np.array([0], np.int32),
                np.array([0], np.int64), 0, 255), name="disabled")])


def _channel_args(x, scale, zero_point, axis, quant_min, quant_max) -> tuple:
    """PyTorch's checks of per-channel parameters, in its order; (axis, shape to broadcast
    the parameters along it)."""
    check_range(quant_min, quant_max)
    sdt, zdt = dtype_of(scale), dtype_of(zero_point)
    if sdt not in (_dtype.float32, _dtype.bfloat16):
        raise RuntimeError(f"Scale must be Float or BFloat16, found {sdt.legacy}")
    if zdt not in (_dtype.int32, _dtype.float32, _dtype.float16):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {zdt.legacy}")
    if len(scale.shape) != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if len(zero_point.shape) != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    axis = wrap_dim(axis, len(x.shape))
    if scale.shape[0] != zero_point.shape[0] or scale.shape[0] != x.shape[axis]:
        raise RuntimeError(
            "dimensions of scale and zero-point are not consistent with input tensor")
    if zdt is _dtype.int32 and zero_point.__class__ is np.ndarray:
        check_zero_points(zero_point, quant_min, quant_max)
    shape = [1] * len(x.shape)
    shape[axis] = x.shape[axis]
    return axis, tuple(shape)


def _per_channel(x, scale, zero_point, axis, quant_min, quant_max):
    _, shape = _channel_args(x, scale, zero_point, axis, quant_min, quant_max)
    _floating(x, "channel")
    zp = zero_point.reshape(shape)
    return _fake_quantize(x, scale.astype(F32).reshape(shape),
                          zp.astype(F32) if zp.dtype.kind == "f" else zp, quant_min, quant_max,
                          float32_result=False)


def _per_channel_meta(x, scale, zero_point, axis, quant_min, quant_max):
    _channel_args(x, scale, zero_point, axis, quant_min, quant_max)
    return [Spec(tuple(x.shape), x.dtype), Spec(tuple(x.shape), _dtype.bool_)]


fake_quantize_per_channel_affine_cachemask = register(
    "fake_quantize_per_channel_affine_cachemask", kernel=_per_channel,
    meta=_no_meta("fake_quantize_per_channel_affine_cachemask", _per_channel_meta),
    node="FakeQuantizePerChannelAffineCachemaskBackward0",
    derivative=lambda grads, mask: _mask_derivative(grads, mask, 0, 0, 0, 0, 0),
    save=lambda out, x, scale, zero_point, axis, quant_min, quant_max: (out[1],),
    nondiff_outputs=(1,), nondiff_args=(1, 2), saved_names=("mask",), gradcheck=False,
    public="fake_quantize_per_channel_affine",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt) * 3,
                                     np.array([0.1, 0.2, 0.05], F32),
                                     np.array([0, 1, -1], np.int32), 0, -8, 7), name="axis0")])
