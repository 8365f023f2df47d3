"""`bitwise_left_shift` / `bitwise_right_shift` (the `<<` and `>>` operators)."""

from __future__ import annotations

from .. import _dtype
from .._dispatch import call
from .._scalar_conversion import wrapped_int
from .._tensor import Tensor
from ..ops import shifts as SH


def bitwise_left_shift(input, other, *, out=None) -> Tensor:
    """input << other, elementwise on integer tensors."""
    if not isinstance(input, Tensor):
        return _reflected(SH.left_shift, input, other)
    if isinstance(other, Tensor):
        return call(SH.left_shift, input, other)
    return call(SH.left_shift_scalar, input, other)


def bitwise_right_shift(input, other, *, out=None) -> Tensor:
    """input >> other (arithmetic for signed types), elementwise on integer tensors."""
    if not isinstance(input, Tensor):
        return _reflected(SH.right_shift, input, other)
    if isinstance(other, Tensor):
        return call(SH.right_shift, input, other)
    return call(SH.right_shift_scalar, input, other)


def _reflected(op, number, tensor: Tensor) -> Tensor:
    from .._creation import tensor as make

    # The number is a wrapped scalar: the result dtype is the promotion of the tensor with
    # it (`2 << bool tensor` is int64), the number taken as that dtype takes it (300 as int8
    # is 44).
    dt = _dtype.result_type(tensor, number)
    if number.__class__ is int and dt.category == _dtype.INT:
        number = wrapped_int(number, dt)
    return call(op, make(number, dtype=dt), tensor)


def _rlshift(self: Tensor, other) -> Tensor:
    """other << self, for a number `other`."""
    return _reflected(SH.left_shift, other, self)


def _rrshift(self: Tensor, other) -> Tensor:
    """other >> self, for a number `other`."""
    return _reflected(SH.right_shift, other, self)


__all__ = ["bitwise_left_shift", "bitwise_right_shift"]
