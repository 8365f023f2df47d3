"""Python numbers converted for a tensor's dtype, with PyTorch's overflow rules.

PyTorch checks a fill value (fill_, full, masked_fill, index_fill, clamp bounds) against the
target dtype before writing it: an unsigned integer dtype takes negative ints down to minus
its maximum as their two's complement (uint8: -1 is 255, a byte's usual spelling), and any
other value beyond the dtype's range is an error naming the C++ type. NumPy raises
OverflowError for the first and wraps silently for floats, so kernels convert through here.
"""

from __future__ import annotations

import math

import numpy as np

from . import _dtype

# The C++ names PyTorch's scalar conversion prints when a value overflows a dtype.
_CONVERT_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
                  "int64": "int64_t", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                  "float32": "float"}
# The largest finite value of each floating dtype met so far, by NumPy's type character
# (float16 "e", ml_dtypes' bfloat16 "E", float32 "f", float64 "d"). A dtype's `char` is read
# in nanoseconds, its `name` in a microsecond, `finfo` in several: fills call these.
_FLOAT_MAX: dict[str, float] = {}


def float_max(dt: np.dtype) -> float:
    """The largest finite value of floating NumPy dtype `dt` (bfloat16's: ml_dtypes')."""
    top = _FLOAT_MAX.get(dt.char)
    if top is None:
        if dt.kind == "f":
            top = float(np.finfo(dt).max)
        else:  # (NumPy's finfo knows only its own float types)
            import ml_dtypes

            top = float(ml_dtypes.finfo(dt).max)
        _FLOAT_MAX[dt.char] = top
    return top


_HALF_CHARS = ("e", "E")
_FLOAT32 = np.dtype(np.float32)


def half_input(values, dt: np.dtype):
    """`values` (numbers or an array) ready for conversion to NumPy dtype `dt`: float64
    values bound for a half type become float32 first, as PyTorch converts them (its half
    types are made from float: two roundings, which a direct conversion can differ from in
    the last bit). bfloat16 values bound for an integer dtype become float32 first too:
    PyTorch converts them through float, where ml_dtypes' own cast sends inf, NaN and
    negative values bound for an unsigned type to 0."""
    if dt.char not in _HALF_CHARS:
        if values.__class__ is np.ndarray and values.dtype.char == "E" and dt.kind in "iu":
            return values.astype(np.float32)
        return values
    if values.__class__ is float:
        return np.float32(values)
    if values.__class__ is np.ndarray:
        return values.astype(np.float32) if values.dtype == np.float64 else values
    return np.array(values, dtype=np.float32)


_INT64_MIN = -(1 << 63)
_UINT64_END = 1 << 64


def python_int_error(value: int) -> OverflowError | None:
    """PyTorch's error for Python int `value` passed as a number argument, or None: its
    argument parser takes an int as int64, or as uint64 past int64's largest, and refuses any
    other (whatever the tensor's dtype, float32 included)."""
    if _INT64_MIN <= value < _UINT64_END:
        return None
    if value < 0:
        return OverflowError("can't convert negative int to unsigned")
    return OverflowError("int too big to convert")


def check_python_int(value) -> None:
    """Raise PyTorch's OverflowError when `value` is a Python int beyond int64 and uint64."""
    if value.__class__ is int and (error := python_int_error(value)) is not None:
        raise error


def checked_scalar(value, dt: np.dtype):
    """Python number `value` as PyTorch converts a fill value (fill_, masked_fill, clamp
    bounds) for an array of NumPy dtype `dt`: an unsigned integer dtype takes negative ints
    down to minus its maximum as their two's complement (uint8: -1 is 255); any other value
    outside the dtype's range (a float beyond an integer dtype's, NaN or inf into one, a
    number beyond float16's largest) is PyTorch's overflow error."""
    cls = value.__class__
    if dt.char == "F" and (cls is int or cls is float or cls is complex):
        # complex64: each part within float32's range (NaN and inf convert as they are)
        top = float_max(_FLOAT32)
        for part in (value.real, value.imag):
            if part != part or part in (math.inf, -math.inf) or -top <= part <= top:
                continue
            raise RuntimeError("value cannot be converted to type c10::complex<float> without "
                               "overflow")
        return value
    if cls is not int and cls is not float:
        if cls is not complex or dt.kind in "cb":
            return value  # bool, arrays, 0-d tensors, complex into complex or bool: as is
        if value.imag:  # PyTorch's check of a complex value for a real dtype
            raise RuntimeError(f"value cannot be converted to type {convert_name(dt)} "
                               "without overflow")
        value, cls = value.real, float
    kind = dt.kind
    if kind in "iu":
        info = np.iinfo(dt)
        if cls is int:
            if info.min <= value <= info.max:
                return value
            if kind == "u" and -info.max <= value < 0:
                return value + info.max + 1
            if (error := python_int_error(value)) is not None:
                raise error
        elif info.min <= value <= info.max:  # a float (False for NaN)
            return value
    elif kind == "f" or dt.char == "E":
        if cls is int and (error := python_int_error(value)) is not None:
            raise error  # (refused before any conversion, as PyTorch's argument parser does)
        # (float64's own values are all in range)
        limit = None if dt.char == "d" else float_max(dt)
        if limit is None or -limit <= value <= limit or value != value or \
                value in (math.inf, -math.inf):
            # float64, NaN and inf convert as they are; a half type's, through float32
            return np.float32(value) if cls is float and dt.char in _HALF_CHARS else value
    else:
        return value
    raise RuntimeError(f"value cannot be converted to type {_CONVERT_NAMES[dt.name]} without "
                       "overflow")


def convert_name(dt: np.dtype) -> str:
    """The C++ name PyTorch's scalar conversion prints for NumPy dtype `dt`."""
    return "double" if dt.char == "d" else _CONVERT_NAMES[dt.name]


def wrapped_int(value: int, dt) -> int:
    """Python int `value` as C++ converts it to integer dtype `dt` (a fusegrad dtype): its
    low bits, in two's complement (int8 takes 300 as 44), as PyTorch converts a number that
    joins an integer operation as a wrapped scalar."""
    bits = dt.itemsize * 8
    value &= (1 << bits) - 1
    if dt.is_signed and value >> (bits - 1):
        value -= 1 << bits
    return value


def fill_value(value, dt: np.dtype, numel: int):
    """`value` as PyTorch's fill (`fill_`, `full` and their forms) converts it for `numel`
    elements of NumPy dtype `dt`: `checked_scalar`'s checks, but for a single element (its
    fast path, which converts through double and float unchecked) a number bound for a
    half type goes through float32 (past the largest value it is inf)."""
    if numel == 1 and dt.char in ("e", "E"):
        cls = value.__class__
        if cls is complex:  # (checked on its way through double)
            if value.imag:
                raise RuntimeError("value cannot be converted to type double without overflow")
            value, cls = value.real, float
        if cls is float or cls is int:
            with np.errstate(over="ignore"):
                return np.float32(value)
    return checked_scalar(value, dt)


def not_implemented_for(kernel: str, dt) -> NotImplementedError:
    """PyTorch's error for kernel `kernel` (its C++ name: `"abs_cpu"`) without a form for dtype
    `dt`: ours, NumPy's or the legacy name itself (`'Bool'`). Every op spells it through
    here, so that the text stays PyTorch's in one place."""
    if dt.__class__ is not str:
        dt = (dt if hasattr(dt, "legacy") else _dtype.from_numpy_dtype(dt)).legacy
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt}\'')
