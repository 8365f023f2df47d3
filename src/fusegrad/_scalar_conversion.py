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

# The C++ names PyTorch's scalar conversion prints when a value overflows a dtype, and the
# largest finite value of each floating dtype narrower than float64.
_CONVERT_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
                  "int64": "int64_t", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                  "float32": "float"}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": 3.4028234663852886e38}


def checked_scalar(value, dt: np.dtype):
    """Python number `value` as PyTorch converts a fill value (fill_, masked_fill, clamp
    bounds) for an array of NumPy dtype `dt`: an unsigned integer dtype takes negative ints
    down to minus its maximum as their two's complement (uint8: -1 is 255); any other value
    outside the dtype's range (a float beyond an integer dtype's, NaN or inf into one, a
    number beyond float16's largest) is PyTorch's overflow error."""
    cls = value.__class__
    if cls is not int and cls is not float:
        return value  # bool, complex, arrays and 0-d tensors convert as they are
    kind = dt.kind
    if kind in "iu":
        info = np.iinfo(dt)
        if cls is int:
            if info.min <= value <= info.max:
                return value
            if kind == "u" and -info.max <= value < 0:
                return value + info.max + 1
        elif info.min <= value <= info.max:  # a float (False for NaN)
            return value
    elif kind == "f" or dt.name == "bfloat16":
        limit = _FLOAT_MAX.get(dt.name)
        if limit is None or -limit <= value <= limit or value != value or \
                value in (math.inf, -math.inf):
            return value  # float64, NaN and inf convert as they are
    else:
        return value
    raise RuntimeError(f"value cannot be converted to type {_CONVERT_NAMES[dt.name]} without "
                       "overflow")
