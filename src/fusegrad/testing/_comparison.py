"""`assert_close` and the deprecated `assert_allclose`, with PyTorch's tolerances per dtype,
attribute checks, container traversal and failure messages.

Inputs pair up by kind: None with None, booleans with booleans, numbers with numbers, tensor-
likes (fusegrad tensors, NumPy arrays) of the same kind, and sequences or mappings whose items
pair up again. A pair is compared in this order: for tensors the attributes (shape, device,
dtype, layout, stride) and then the values, promoted to a common dtype; the first difference
raises an AssertionError whose text is PyTorch's.
"""

from __future__ import annotations

import cmath
import collections.abc
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _dtype
from .._tensor import Tensor

__all__ = ["assert_close", "assert_allclose"]

# Default (rtol, atol) per dtype name; every other dtype compares for equality.
_TOLERANCES = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
# `assert_allclose` keeps the table of PyTorch's releases before 1.12.
_LEGACY_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5),
                      "float64": (1e-5, 1e-8)}
# Python number types stand for these dtypes when their tolerances are chosen.
_NUMBER_DTYPES = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


class _Mismatch(Exception):
    """A difference found in one pair; `assert_close` turns it into an AssertionError after
    naming the item where it occurred."""

    def __init__(self, message: str, kind: type = AssertionError) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def _tolerances(dtype_names, rtol, atol, table) -> tuple[float, float]:
    """The given tolerances, or the largest of the defaults of the dtypes compared."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but "
                         f"got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    pairs = [table.get(name, (0.0, 0.0)) for name in dtype_names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _number(value):
    """A Python bool/int/float/complex for a Python or NumPy scalar, else None."""
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_, np.void)):
        value = value.item()
    if isinstance(value, (bool, int, float, complex)):
        return value
    return None


def _is_tensor_like(value) -> bool:
    return isinstance(value, (Tensor, np.ndarray))


def _as_tensor(value) -> Tensor:
    if isinstance(value, np.ndarray):
        from .._creation import as_tensor
        return as_tensor(value)
    return value


def _scalar_message(actual, expected, rtol: float, atol: float, equal: bool) -> str:
    """PyTorch's text for two differing scalars (numbers or 0-d tensors' items)."""
    as_number = (lambda v: int(v) if isinstance(v, bool) else v)
    difference = abs(as_number(actual) - as_number(expected))
    magnitude = abs(as_number(expected))
    if magnitude == 0:
        relative = math.nan if difference == 0 or math.isnan(difference) else math.inf
    else:
        relative = difference / magnitude
    up_to = "" if equal else " (up to {} allowed)"
    return (f"Scalars are not {'equal' if equal else 'close'}!\n\n"
            f"Expected {expected} but got {actual}.\n"
            f"Absolute difference: {difference}{up_to.format(atol)}\n"
            f"Relative difference: {relative}{up_to.format(rtol)}")


def _numbers_close(actual, expected, rtol: float, atol: float, equal_nan: bool) -> bool:
    if actual == expected:
        return True
    if equal_nan and _isnan(actual) and _isnan(expected):
        return True
    if _isinf(actual) or _isinf(expected):
        return False
    return abs(actual - expected) <= atol + rtol * abs(expected)


def _isnan(v) -> bool:
    return cmath.isnan(v) if isinstance(v, complex) else isinstance(v, float) and math.isnan(v)


def _isinf(v) -> bool:
    return cmath.isinf(v) if isinstance(v, complex) else isinstance(v, float) and math.isinf(v)


def _compare_numbers(actual, expected, *, rtol, atol, equal_nan, check_dtype) -> None:
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    rtol, atol = _tolerances([_NUMBER_DTYPES[type(actual)], _NUMBER_DTYPES[type(expected)]],
                             rtol, atol, _TOLERANCES)
    if _numbers_close(actual, expected, rtol, atol, equal_nan):
        return
    raise _Mismatch(_scalar_message(actual, expected, rtol, atol, rtol == 0 and atol == 0))


def _check_attributes(actual: Tensor, expected: Tensor, *, check_device, check_dtype,
                      check_layout, check_stride) -> None:
    def differ(name, a, e):
        raise _Mismatch(f"The values for attribute '{name}' do not match: {a} != {e}.")

    if actual.shape != expected.shape:
        differ("shape", actual.shape, expected.shape)
    if check_device and actual.device != expected.device:
        differ("device", actual.device, expected.device)
    if check_dtype and actual.dtype != expected.dtype:
        differ("dtype", actual.dtype, expected.dtype)
    if check_layout and actual.layout != expected.layout:
        differ("layout", actual.layout, expected.layout)
    if check_stride and actual.layout == expected.layout and actual.stride() != expected.stride():
        differ("stride()", actual.stride(), expected.stride())


def _values(tensor: Tensor, dtype) -> Tensor:
    """The tensor's values, dense, without history, in `dtype`."""
    import fusegrad

    tensor = tensor.detach()
    if tensor.layout != fusegrad.strided:
        tensor = tensor.to_dense()
    return tensor.to(dtype)


def _compare_tensors(actual: Tensor, expected: Tensor, *, rtol, atol, equal_nan, check_device,
                     check_dtype, check_layout, check_stride, table) -> None:
    import fusegrad

    _check_attributes(actual, expected, check_device=check_device, check_dtype=check_dtype,
                      check_layout=check_layout, check_stride=check_stride)
    if actual.is_meta or expected.is_meta:  # no values to compare, as PyTorch skips them
        return
    rtol, atol = _tolerances([actual.dtype.name, expected.dtype.name], rtol, atol, table)
    dtype = fusegrad.promote_types(actual.dtype, expected.dtype)
    exact = dtype.category in (_dtype.BOOL, _dtype.INT)
    if exact:  # differences of narrow or unsigned integers would wrap
        dtype = fusegrad.int64
    a, e = _values(actual, dtype), _values(expected, dtype)
    matches = fusegrad.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bool(matches.all()):
        return
    equal = rtol == 0 and atol == 0
    if a.dim() == 0:  # the text shows the items as they were, before promotion
        raise _Mismatch(_scalar_message(actual.item(), expected.item(), rtol, atol, equal))
    raise _Mismatch(_tensor_message(a, e, matches, rtol, atol, equal))


def _tensor_message(a: Tensor, e: Tensor, matches: Tensor, rtol, atol, equal: bool) -> str:
    """PyTorch's text for two differing tensors: the count of mismatches, and the greatest
    absolute and relative differences among them with their indices."""
    import fusegrad

    abs_diff = (a - e).abs()
    rel_diff = abs_diff / e.abs()  # integers divide in the default float dtype, as PyTorch's
    abs_diff = fusegrad.where(matches, fusegrad.zeros_like(abs_diff), abs_diff)
    rel_diff = fusegrad.where(matches, fusegrad.zeros_like(rel_diff), rel_diff)
    total = matches.numel()
    mismatched = total - int(matches.sum())
    shape = tuple(a.shape)

    def greatest(diff: Tensor):
        flat = diff.reshape(-1).numpy()
        nan = np.isnan(flat)
        # A NaN difference is the greatest, as PyTorch's max over the flat tensor finds it.
        index = int(np.argmax(nan)) if nan.any() else int(np.argmax(flat))
        where = tuple(int(i) for i in np.unravel_index(index, shape))
        return diff.reshape(-1)[index].item(), where

    up_to = "" if equal else " (up to {} allowed)"
    max_abs, abs_at = greatest(abs_diff)
    max_rel, rel_at = greatest(rel_diff)
    return (f"Tensor-likes are not {'equal' if equal else 'close'}!\n\n"
            f"Mismatched elements: {mismatched} / {total} ({mismatched / total * 100:.1f}%)\n"
            f"Greatest absolute difference: {max_abs} at index {abs_at}{up_to.format(atol)}\n"
            f"Greatest relative difference: {max_rel} at index {rel_at}{up_to.format(rtol)}")


def _no_pair(actual, expected) -> _Mismatch:
    return _Mismatch(f"No comparison pair was able to handle inputs of type {type(actual)} "
                     f"and {type(expected)}.", TypeError)


def _compare(actual, expected, path: list, options: dict) -> None:
    """Compare one pair, descending into sequences and mappings; a mismatch carries the
    path of keys to the item where it occurred."""
    if actual is None or expected is None:
        if actual is expected:
            return
        raise _at(_Mismatch(f"None mismatch: {actual} is not {expected}"), path)
    a_num, e_num = _number(actual), _number(expected)
    if isinstance(a_num, bool) and isinstance(e_num, bool):
        if a_num is not e_num:
            raise _at(_Mismatch(f"Booleans mismatch: {a_num} is not {e_num}"), path)
        return
    if a_num is not None and e_num is not None:
        try:
            _compare_numbers(a_num, e_num, rtol=options["rtol"], atol=options["atol"],
                             equal_nan=options["equal_nan"], check_dtype=options["check_dtype"])
        except _Mismatch as error:
            raise _at(error, path) from None
        return
    allow = options["allow_subclasses"]
    if _is_tensor_like(actual) and _is_tensor_like(expected):
        same_kind = isinstance(actual, np.ndarray) == isinstance(expected, np.ndarray)
        if not allow and type(actual) is not type(expected):
            same_kind = False
        elif allow and isinstance(actual, Tensor) and isinstance(expected, Tensor):
            same_kind = isinstance(actual, type(expected)) or isinstance(expected, type(actual))
        if not same_kind:
            raise _no_pair(actual, expected)
        table = options["table"]
        try:
            _compare_tensors(_as_tensor(actual), _as_tensor(expected), rtol=options["rtol"],
                             atol=options["atol"], equal_nan=options["equal_nan"],
                             check_device=options["check_device"],
                             check_dtype=options["check_dtype"],
                             check_layout=options["check_layout"],
                             check_stride=options["check_stride"], table=table)
        except _Mismatch as error:
            raise _at(error, path) from None
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _at(_Mismatch(f"The length of the sequences mismatch: {len(actual)} != "
                                f"{len(expected)}"), path)
        for index, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + [index], options)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected,
                                                                  collections.abc.Mapping):
        a_keys, e_keys = set(actual), set(expected)
        if a_keys != e_keys:
            raise _at(_Mismatch(
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {_sorted(e_keys - a_keys)}\n"
                f"Additional keys in the actual mapping: {_sorted(a_keys - e_keys)}"), path)
        for key in actual:
            _compare(actual[key], expected[key], path + [key], options)
        return
    raise _no_pair(actual, expected)


def _is_sequence(value) -> bool:
    return (isinstance(value, collections.abc.Sequence) and
            not isinstance(value, (str, bytes)))


def _sorted(keys) -> list:
    try:
        return sorted(keys)
    except TypeError:
        return list(keys)


def _at(error: _Mismatch, path: list) -> _Mismatch:
    """The mismatch, its text naming the item where it occurred inside containers."""
    if path and error.kind is AssertionError:
        where = "".join(f"[{key!r}]" for key in path)
        error.message += f"\n\nThe failure occurred for item {where}"
    return error


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Raise an AssertionError unless `actual` and `expected` are close:
    |actual - expected| <= atol + rtol * |expected| elementwise, with the defaults of the
    dtypes compared unless both `rtol` and `atol` are given; containers compare item by
    item. `msg` replaces the failure text, or (a callable) rewrites it."""
    if (rtol is None) != (atol is None):
        _tolerances([], rtol, atol, _TOLERANCES)
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                   check_dtype=check_dtype, check_layout=check_layout,
                   check_stride=check_stride, allow_subclasses=allow_subclasses,
                   table=_TOLERANCES)
    try:
        _compare(actual, expected, [], options)
    except _Mismatch as error:
        text = error.message
        if error.kind is AssertionError:
            if callable(msg):
                text = msg(text)
            elif isinstance(msg, str):
                text = msg
        raise error.kind(text) from None


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None,
                    atol: float | None = None, equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated since PyTorch 1.12: `assert_close` with the older tolerance table, values
    converted to tensors and dtypes free to differ."""
    import fusegrad

    warnings.warn(
        "`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a "
        "future release. Please use `torch.testing.assert_close()` instead. You can find "
        "detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.",
        FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = fusegrad.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = fusegrad.tensor(expected, dtype=actual.dtype)
    if (rtol is None) != (atol is None):
        _tolerances([], rtol, atol, _LEGACY_TOLERANCES)
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                   check_dtype=False, check_layout=True, check_stride=False,
                   allow_subclasses=True, table=_LEGACY_TOLERANCES)
    try:
        _compare(actual, expected, [], options)
    except _Mismatch as error:
        raise error.kind(msg if msg else error.message) from None

