"""`bitwise_left_shift` / `bitwise_right_shift` (the `<<` and `>>` operators)."""

from __future__ import annotations

from .._dispatch import call
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

    return call(op, make(number, dtype=tensor.dtype), tensor)


def _rlshift(self: Tensor, other) -> Tensor:
    """other << self, for a number `other`."""
    return _reflected(SH.left_shift, other, self)


def _rrshift(self: Tensor, other) -> Tensor:
    """other >> self, for a number `other`."""
    return _reflected(SH.right_shift, other, self)


__all__ = ["bitwise_left_shift", "bitwise_right_shift"]
