"""linspace and logspace, computed as PyTorch's CPU kernels compute them, to the bit.

linspace's values are `start + step * i` for the first half and `end - step * (steps - 1 -
i)` for the rest, in the output dtype; PyTorch's x86-64 builds compile that kernel with
fused multiply-add, so each value is rounded once. The C kernel `linspace` (`ops/native/
pointwise.c`, `fma`) computes them so; without a C compiler the same roundings are emulated
in NumPy (`_fused`: exact products and sums, rounded once through round-to-odd), a dozen
times slower. logspace's kernel is built without fused operations: its exponents are plain
float64 arithmetic and its powers the C library's `pow` (`cexp`/`clog` for complex dtypes).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype
from .._creation import _check_device, _factory, _no_pinned_memory
from .._scalar_conversion import checked_scalar, not_implemented_for
from .._tensor import Tensor, is_int_argument
from .._type_names import python_type_name
from ..ops import _native


def _bound_number(name: str, value, function: str):
    """A `start`/`end` given as a 0-d tensor, as its number (PyTorch accepts those)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"{function} only supports 0-dimensional start and end tensors, "
                               f"but got {name} with {value.ndim} dimension(s).")
        return value.item()
    return value


# The options PyTorch's linspace and logspace overloads list after their positional
# parameters, and the heads of those overloads (a Tensor or a Number for each bound).
_RANGE_OPTIONS = ("*, Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, "
                  "torch.device device = None, bool pin_memory = False, "
                  "bool requires_grad = False")
_RANGE_HEADS = ("Tensor start, Tensor end", "Number start, Tensor end",
                "Tensor start, Number end", "Number start, Number end")


def _steps_error(function: str, start, end, steps) -> TypeError:
    """PyTorch's error for a `steps` that is no int: none of the four overloads fits."""
    base = ", float base = 10.0" if function == "logspace" else ""
    lines = "".join(f" * ({head}, int steps{base}, {_RANGE_OPTIONS})\n"
                    for head in _RANGE_HEADS)
    got = ", ".join(python_type_name(v) for v in (start, end, steps))
    return TypeError(f"{function}() received an invalid combination of arguments - got "
                     f"({got}), but expected one of:\n{lines}")


def _range_arguments(start, end, steps: int, dtype, device, function: str) -> tuple:
    """(start, end, dtype) of a linspace/logspace call, checked as PyTorch checks them."""
    if steps.__class__ is not int and not is_int_argument(steps):
        raise _steps_error(function, start, end, steps)
    _check_device(device)
    start = _bound_number("start", start, function)
    end = _bound_number("end", end, function)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return start, end, _range_dtype(start, end, dtype, function)


def linspace(start, end, steps: int, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """`steps` evenly spaced values from `start` to `end` inclusive, computed as PyTorch's
    CPU kernel computes them: in the output dtype, the first half as `start + step * i`,
    the rest as `end - step * (steps - 1 - i)`, so the values are PyTorch's to the bit."""
    if pin_memory:
        _no_pinned_memory()
    start, end, dtype = _range_arguments(start, end, steps, dtype, device, "linspace")
    if steps == 1:  # PyTorch fills `start`
        value = _fill_value(start, dtype)
        return _factory((1,), dtype, requires_grad, lambda dt: np.full((1,), value, dt),
                        device=_check_device(device))
    if steps > 1:
        _check_range_dtype(dtype, "linspace")
        start, end = _range_bound(start, dtype), _range_bound(end, dtype)
    return _factory((steps,), dtype, requires_grad,
                    lambda dt: _linspace_values(start, end, steps, dtype.np),
                    device=_check_device(device))


def logspace(start, end, steps: int, base: float = 10.0, *, out=None, dtype=None, layout=None,
             device=None, requires_grad=False, pin_memory=False):
    """`base` to the powers of `steps` evenly spaced exponents from `start` to `end`, as
    PyTorch's CPU kernel computes them: the exponents in float64 from the bounds in the
    output dtype, the powers with the C library's `pow`."""
    if pin_memory:
        _no_pinned_memory()
    start, end, dtype = _range_arguments(start, end, steps, dtype, device, "logspace")
    base = float(base)
    if steps == 1:  # PyTorch fills base ** start, start read as a float64 (or complex128)
        value = _fill_value(_power(base, complex(start) if dtype.is_complex else float(start)),
                            dtype)
        return _factory((1,), dtype, requires_grad, lambda dt: np.full((1,), value, dt),
                        device=_check_device(device))
    if steps > 1:
        _check_range_dtype(dtype, "logspace")
        start, end = _range_bound(start, dtype), _range_bound(end, dtype)
    return _factory((steps,), dtype, requires_grad,
                    lambda dt: _logspace_values(start, end, steps, base, dtype),
                    device=_check_device(device))




def _range_dtype(start, end, dtype, function: str) -> _dtype.dtype:
    """The dtype of linspace/logspace: the default float one, or the default complex one
    for a complex bound, which only a complex `dtype` can hold."""
    dtype = _dtype.as_dtype(dtype)
    if not any(isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real)
               for v in (start, end)):
        return dtype or _dtype.defaults.float
    inferred = _dtype.defaults.float.to_complex()
    if dtype is None:
        return inferred
    if not dtype.is_complex:
        raise RuntimeError(f"torch.{function}(): inferred dtype "
                           f"{inferred.cpp} can't be safely cast to passed "
                           f"dtype {dtype.legacy}")
    return dtype


def _check_range_dtype(dtype: _dtype.dtype, function: str) -> None:
    """PyTorch's range kernels cover every dtype but bool (and the storage-only uint16)."""
    if dtype in (_dtype.bool_, _dtype.uint16):
        raise not_implemented_for(f"{function}_cpu", dtype)


def _fill_value(value, dtype: _dtype.dtype):
    """`value` as PyTorch's `fill_` converts it: checked against the dtype's range, but a
    half type's against float32's (beyond its own it fills inf)."""
    if dtype in (_dtype.float16, _dtype.bfloat16):
        return checked_scalar(value, np.dtype(np.float32))
    return checked_scalar(value, dtype.np)


def _range_bound(value, dtype: _dtype.dtype):
    """A linspace/logspace bound in the output dtype, as the kernel converts it: checked
    for overflow, truncated toward zero for an integer dtype (a Python int, an unsigned
    dtype's negative wrapped), a NumPy scalar of the dtype (or its parts) otherwise."""
    if dtype.is_complex:
        return complex(value)  # each part rounds to the parts' dtype where it is used
    np_dtype = dtype.np
    value = checked_scalar(value, np_dtype)
    if not dtype.is_floating_point:
        return int(value)
    return np_dtype.type(value) if np_dtype.char in "fd" else \
        np.array(value).astype(np_dtype)[()]  # (a half type's through float32, as C++'s)


def _linspace_values(start, end, steps: int, np_dtype: np.dtype) -> np.ndarray:
    """The values of `linspace` for bounds already in NumPy dtype `np_dtype` (Python ints
    for an integer dtype, complex numbers for a complex one)."""
    if np_dtype.kind == "c":  # complex arithmetic with a real step and index works per part
        part = np.dtype(np.float32 if np_dtype == np.complex64 else np.float64)
        out = np.empty(steps, np_dtype)
        out.real = _linspace_values(part.type(start.real), part.type(end.real), steps, part)
        out.imag = _linspace_values(part.type(start.imag), part.type(end.imag), steps, part)
        return out
    if steps == 0:
        return np.zeros(0, np_dtype)
    with np.errstate(all="ignore"):  # inf and NaN bounds give NaN where PyTorch's do
        integral = np_dtype.kind in "iu"
        if integral:  # the step in float64, the values truncated
            line, low, high = np.dtype(np.float64), float(start), float(end)
            step = (high - low) / (steps - 1)
        else:  # `(end - start) / (steps - 1)` and what follows, rounding in the dtype
            line, low, high = np_dtype, start, end
            step = np_dtype.type(end - start) / np.array(steps - 1).astype(np_dtype)
        index = None
        if line.itemsize >= 4:  # the compiled kernel fuses the multiply and the add
            values = _c_line(low, high, step, steps, line)
            if values is None:
                index = np.arange(steps)
                values = np.where(
                    index < steps // 2, _fused(step, index.astype(line), low, line),
                    _fused(step, (steps - 1 - index).astype(line), high, line, subtract=True))
            return _truncated(values, np_dtype) if integral else values
        # float16 and bfloat16 round the product to the dtype first: no fused operation
        index = np.arange(steps)
        values = np.where(index < steps // 2, start + step * index.astype(np_dtype),
                          end - step * (steps - 1 - index).astype(np_dtype)).astype(np_dtype)
        return _positive_nan(values)


def _c_line(start, end, step, steps: int, np_dtype: np.dtype) -> np.ndarray | None:
    """linspace's values by the C kernel (float32 or float64 bounds and step, given as
    doubles: exact), or None where it is not built."""
    fn = _native.typed("pointwise", "linspace", np_dtype, "piddd")
    if fn is None:
        return None
    out = np.empty(steps, np_dtype)
    fn(_native.address(out), steps, float(start), float(end), float(step))
    return out



def _powers(base: float, exponents: np.ndarray) -> np.ndarray:
    """`base ** exponents` (float64) by the C library's `pow`: in C where the kernel is
    built, else one call of Python's `math.pow` (the same function) per value."""
    exponents = np.ascontiguousarray(exponents, np.float64)
    fn = _native.typed("pointwise", "pow_of_base", exponents.dtype, "ppid")
    if fn is None:
        return np.array([_power(base, float(x)) for x in exponents], np.float64)
    out = np.empty_like(exponents)
    if out.size:
        fn(_native.address(exponents), _native.address(out), out.size, base)
    return out


def _logspace_values(start, end, steps: int, base: float, dtype: _dtype.dtype) -> np.ndarray:
    np_dtype = dtype.np
    if steps == 0:
        return np.zeros(0, np_dtype)
    if dtype.is_complex:
        return _complex_logspace(start, end, steps, base, np_dtype)
    index = np.arange(steps)
    low, high = float(start), float(end)
    with np.errstate(all="ignore"):
        span = end - start  # in the dtype: a float type rounds, C's int32 and int64 wrap
        if not dtype.is_floating_point and np_dtype.itemsize >= 4:
            bits = 8 * np_dtype.itemsize
            span = (span + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
        step = float(span) / (steps - 1)
        # plain float64 arithmetic: this kernel is built for the baseline CPU, no fused
        # multiply-add (unlike linspace's)
        exponents = np.where(index < steps // 2, low + step * index,
                             high - step * (steps - 1 - index))
        powers = _powers(base, exponents)
        if dtype in (_dtype.float16, _dtype.bfloat16):
            # stored from float64 as C++ stores it: through float32 (two roundings)
            return _positive_nan(powers.astype(np.float32).astype(np_dtype))
        if dtype.is_floating_point:
            return powers.astype(np_dtype)
        return _truncated(powers, np_dtype)


def _complex_logspace(start: complex, end: complex, steps: int, base: float,
                      np_dtype: np.dtype) -> np.ndarray:
    """`logspace` for a complex dtype as PyTorch's kernel computes it, in the precision of
    the dtype's parts: the step as `(end - start) / (steps - 1)` in complex arithmetic
    (which multiplies by the reciprocal), each exponent's product and sum rounded apart,
    and the power as the C library's `cpow`, `cexp(exponent * clog(base))`."""
    part = np.dtype(np.float32 if np_dtype == np.complex64 else np.float64)
    real = part.type
    exp, cos, sin, log = _c_math(part)
    index = np.arange(steps)
    first_half = index < steps // 2
    count, rest = index.astype(part), (steps - 1 - index).astype(part)
    zero = np.zeros(steps, part)  # the imaginary part of the index, for the signs of zeros
    with np.errstate(all="ignore"):
        # (end - start) / (steps - 1) as c10::complex divides: by the reciprocal
        reciprocal = real(1) / real(steps - 1)
        ratio = real(0) / real(steps - 1)
        low_re, low_im = real(start.real), real(start.imag)
        high_re, high_im = real(end.real), real(end.imag)
        span_re, span_im = high_re - low_re, high_im - low_im
        step_re = (span_re + span_im * ratio) * reciprocal
        step_im = (span_im - span_re * ratio) * reciprocal
        # start + step * i and end - step * (steps - 1 - i), in complex arithmetic
        exponent_re = np.where(first_half, low_re + (step_re * count - step_im * zero),
                               high_re - (step_re * rest - step_im * zero)).astype(part)
        exponent_im = np.where(first_half, low_im + (step_re * zero + step_im * count),
                               high_im - (step_re * zero + step_im * rest)).astype(part)
        if not base > 0:  # a negative base: NumPy's complex power (not the C library's)
            powers = np.power(np.complex128(base), exponent_re + 1j * exponent_im)
            return powers.astype(np_dtype)
        # clog of a positive base is its log (and 0); the product with the exponent
        log_base = real(log(real(base)))
        scaled_re = (exponent_re * log_base - exponent_im * real(0)).astype(part)
        scaled_im = (exponent_re * real(0) + exponent_im * log_base).astype(part)
        out = np.empty(steps, np_dtype)
        fn = _native.typed("pointwise", "cexp_pairs", part, "pppi")
        if fn is not None:  # the C library's own cexp
            address = _native.address
            fn(address(scaled_re), address(scaled_im), address(out), steps)
            return out
        for i, (a, b) in enumerate(zip(scaled_re, scaled_im)):  # its steps, one by one
            out[i] = _c_exp(a, b, part, exp, cos, sin)
    return out


def _c_exp(a, b, part: np.dtype, exp, cos, sin) -> complex:
    """`cexp(a + b i)` (NumPy scalars of `part`) as glibc computes it, each operation
    rounded to `part`: exp(a) * (cos b + i sin b), a tiny b its own sine (with cosine 1), a
    large `a` scaled in steps (a finite huge result where exp overflows), and C99's
    answers for infinite and NaN parts."""
    real = part.type
    info = np.finfo(part)
    if abs(b) > info.tiny:
        cosine, sine = real(cos(b)), real(sin(b))
    else:
        cosine, sine = real(1), b
    if not (math.isfinite(a) and math.isfinite(b)):
        if math.isinf(a) and math.isfinite(b):
            value = 0.0 if a < 0 else math.inf
            if b == 0:
                return complex(value, b)
            return complex(math.copysign(value, cosine), math.copysign(value, sine))
        if math.isinf(a):
            return complex(math.inf, math.nan) if a > 0 else complex(0.0, math.copysign(0.0, b))
        if math.isnan(a) and b == 0:
            return complex(math.nan, b)
        return complex(math.nan, math.nan)
    limit = real(int((info.maxexp - 1) * math.log(2)))
    if a > limit:
        exp_limit = real(exp(limit))
        for _ in range(2):
            if a > limit:
                a = real(a - limit)
                sine, cosine = real(sine * exp_limit), real(cosine * exp_limit)
    magnitude = real(info.max) if a > limit else real(exp(a))
    return complex(real(magnitude * cosine), real(magnitude * sine))


_FLOAT_MATH: list = []


def _c_math(part: np.dtype) -> tuple:
    """exp, cos, sin and log as the C library computes them in the precision of `part`:
    Python's math module for float64 (it calls the C library), the C library's float
    functions for float32 where they can be reached (glibc's round a few results otherwise
    than float64's rounded to float32), else those."""
    if part == np.float64 or _FLOAT_MATH == [None]:
        return _exp, math.cos, math.sin, math.log
    if not _FLOAT_MATH:
        import ctypes  # NumPy has imported it already

        try:
            library = ctypes.CDLL(None)  # the process's C library, with its math functions
            functions = tuple(getattr(library, name) for name in ("expf", "cosf", "sinf", "logf"))
        except (OSError, AttributeError):
            _FLOAT_MATH.append(None)
            return _c_math(part)
        for function in functions:
            function.restype = ctypes.c_float
            function.argtypes = [ctypes.c_float]
        _FLOAT_MATH.append(functions)
    return _FLOAT_MATH[0]


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _power(base: float, exponent):
    """`base ** exponent` as C's `pow` computes it (inf on overflow, NaN where undefined,
    not Python's exceptions); for a complex exponent as C++'s `std::pow(double, complex)`."""
    if isinstance(exponent, complex):
        if base > 0:  # r * e^(i * theta), as libstdc++ computes it
            radius = _power(base, exponent.real)
            theta = exponent.imag * math.log(base)
            return complex(radius * math.cos(theta), radius * math.sin(theta))
        return complex(base) ** exponent
    try:
        return math.pow(base, exponent)
    except (OverflowError, ValueError):
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(base), np.float64(exponent)))


def _positive_nan(values: np.ndarray) -> np.ndarray:
    """bfloat16 `values` with their NaNs positive, as PyTorch's conversion from float makes
    every NaN (its float16 conversion keeps the sign, as NumPy's does)."""
    if values.dtype.name != "bfloat16":
        return values
    return np.where(np.isnan(values), np.array(np.nan, values.dtype), values)


def _truncated(values: np.ndarray, np_dtype: np.dtype) -> np.ndarray:
    """float64 `values` stored into an integer dtype as compiled C++ stores them on x86-64:
    truncated toward zero through int64 (int64) or int32 (narrower types, which keep the
    low bits); a value beyond that range, or NaN, becomes the range's lowest value."""
    wide = np.dtype(np.int64 if np_dtype == np.int64 else np.int32)
    lowest = float(np.iinfo(wide).min)
    with np.errstate(all="ignore"):
        whole = np.trunc(values)
        fits = (whole >= lowest) & (whole < -lowest)
        out = np.where(fits, whole, lowest).astype(wide)
    return out.astype(np_dtype)


# ---------------------------------------------------------------- fused multiply-add
#
# PyTorch's linspace kernel computes `start + step * i` with one rounding: its x86-64
# builds compile the kernel for AVX2 (and AVX-512) with fused multiply-add, which the
# compiler uses there. NumPy has none, so it is computed exactly from error-free
# transformations (Dekker's product, Knuth's sum) and rounded once through round-to-odd
# (Boldo and Melquiond's emulation).


def _fused(a, b, c, np_dtype, subtract: bool = False) -> np.ndarray:
    """`a * b + c` (`c - a * b` if `subtract`) rounded once to `np_dtype` (float32 or
    float64), elementwise, emulated in NumPy (where the C kernel is not built)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        # (computed plainly, a NaN keeps its sign, as through the fused instruction)
        naive = c - a * b if subtract else a * b + c
        if subtract:
            a = -a
        if np.dtype(np_dtype) == np.float32:
            # float32 factors multiply exactly in float64, and the exact sum rounded to odd
            # there rounds to float32 as the exact sum would (float64 has 53 >= 24 + 2 bits)
            out = _odd_sum(c, a * b).astype(np.float32)
        else:
            product, product_error = _two_product(a, b)
            high, low = _two_sum(c, product)
            rest = _odd_sum(low, product_error)
            out = np.where(rest == 0, high, high + rest)  # keeps the sign of an exact zero
        # infinities and NaNs (and products beyond the splitting's range) as computed plainly
        usable = np.isfinite(out) & np.isfinite(naive)
        return np.where(usable, out, naive.astype(np_dtype))


def _two_sum(a, b):
    """`a + b` rounded and its rounding error, exactly."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)


def _two_product(a, b):
    """`a * b` rounded and its rounding error, exactly (Veltkamp's split in halves)."""
    product = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _split(a):
    scaled = 134217729.0 * a  # 2 ** 27 + 1
    high = scaled - (scaled - a)
    return high, a - high


def _odd_sum(a, b):
    """`a + b` (float64) rounded to odd: truncated, its last bit set when inexact."""
    total, error = _two_sum(a, b)
    even = (total.view(np.int64) & 1) == 0
    toward = np.where(error > 0, np.inf, -np.inf)
    return np.where((error != 0) & even, np.nextafter(total, toward), total)
