"""`make_tensor`: a tensor of the given shape and dtype filled with values drawn uniformly
from [low, high), with PyTorch's defaults, clamping and checks.

The values come from fusegrad's default generator, so they follow `manual_seed` but are not
PyTorch's numbers for the same seed (the random streams differ).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

from .. import _dtype
from .._tensor import Tensor

__all__ = ["make_tensor"]


def _shape(shape: tuple) -> tuple:
    """`make_tensor(2, 3)`, `make_tensor((2, 3))` and `make_tensor([2, 3])` alike."""
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        return tuple(shape[0])
    return shape


def _interval(dtype, low, high) -> tuple:
    """[low, high) after PyTorch's defaults and checks, clamped to what `dtype` holds."""
    import fusegrad

    for value in (low, high):
        if value is not None and isinstance(value, float) and math.isnan(value):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    is_float = dtype.category in (_dtype.FLOAT, _dtype.COMPLEX)
    default_low, default_high = (-9, 9) if is_float else (-9, 10)
    if dtype.category == _dtype.BOOL:
        default_low, default_high = lowest, highest = 0, 2
    elif is_float:
        info = fusegrad.finfo(dtype)
        lowest, highest = info.min, info.max
    else:
        info = fusegrad.iinfo(dtype)
        lowest, highest = info.min, info.max + 1
    low = default_low if low is None else low
    high = default_high if high is None else high
    if low > high or (not is_float and low == high):
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    if high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), "
                         f"but {dtype} only supports [{lowest}, {highest})")
    low, high = max(low, lowest), min(high, highest)
    if is_float and low == high:
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or "
                      "complex types is deprecated since 2.1 and will be removed in 2.3. Use "
                      "`torch.full(...)` instead.", FutureWarning, stacklevel=3)
    if not is_float:
        low, high = math.ceil(low), math.ceil(high)
    return low, high


def _uniform(shape: tuple, low: float, high: float, dtype) -> Tensor:
    """Uniform values in [low, high), drawn in float64 so that wide ranges do not overflow."""
    import fusegrad

    draws = fusegrad.rand(shape, dtype=fusegrad.float64)
    return (draws * (float(high) - float(low)) + float(low)).to(dtype)


def _with_memory_format(tensor: Tensor, memory_format) -> Tensor:
    """The tensor laid out in `memory_format` (channels-last strides by a permuted copy)."""
    import fusegrad

    if memory_format in (None, fusegrad.contiguous_format, fusegrad.preserve_format):
        return tensor.contiguous()
    if memory_format is fusegrad.channels_last:
        if tensor.dim() != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        return tensor.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    raise RuntimeError(f"unsupported memory format {memory_format}")


def make_tensor(*shape: int | Sequence[int], dtype, device, low: float | None = None,
                high: float | None = None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of `shape` and `dtype` with values uniform in [low, high) (defaults -9 and 9,
    integers up to 10 exclusive, clamped to the dtype's range). `exclude_zero` replaces zeros
    by the smallest positive value (1 for integers); `noncontiguous` returns every second
    element of a tensor twice as wide in the last dimension."""
    import fusegrad

    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    if requires_grad and dtype.category in (_dtype.BOOL, _dtype.INT):
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")
    shape = _shape(shape)
    fusegrad.empty(shape, device=device)  # PyTorch's errors for a bad shape or device
    low, high = _interval(dtype, low, high)
    if dtype.category == _dtype.BOOL:
        result = fusegrad.randint(low, high, shape).to(dtype)
    elif dtype.category == _dtype.INT:
        result = fusegrad.randint(low, high, shape, dtype=dtype)
    elif dtype.category == _dtype.COMPLEX:
        real_dtype = fusegrad.empty(0, dtype=dtype).real.dtype
        real = _uniform(shape, low, high, real_dtype)
        imag = _uniform(shape, low, high, real_dtype)
        result = fusegrad.complex(real, imag).to(dtype)
    else:
        result = _uniform(shape, low, high, dtype)
    if exclude_zero:
        result = _without_zeros(result)
    if noncontiguous and result.numel() > 1:
        wide = fusegrad.repeat_interleave(result, 2, dim=-1)
        result = wide[..., 1::2]
    else:
        result = _with_memory_format(result, memory_format)
    if requires_grad:
        result._requires_grad_unguarded(True)
    return result


def _without_zeros(result: Tensor) -> Tensor:
    """Zeros replaced by the dtype's smallest normal value (1 for integers, True for bool)."""
    import fusegrad

    dtype = result.dtype
    if dtype.category == _dtype.BOOL:
        return fusegrad.ones_like(result)
    if dtype.category == _dtype.INT:
        replacement = 1
    elif dtype.category == _dtype.COMPLEX:
        tiny = fusegrad.finfo(dtype).tiny
        replacement = complex(tiny, 0.0)
    else:
        replacement = fusegrad.finfo(dtype).tiny
    return fusegrad.where(result == 0, fusegrad.full_like(result, replacement), result)
