"""Complex tensors: `real` / `imag` (views through `view_as_real`, as PyTorch records them:
`SelectBackward0` over `ViewAsRealBackward0`), `view_as_real`, `view_as_complex`,
`complex`, `polar`, `angle`, `conj`, `conj_physical` and the conjugate-bit queries.

fusegrad keeps no lazy conjugate or negative bits: `conj` computes the conjugate, so
`resolve_conj` / `resolve_neg` return their input.
"""

from __future__ import annotations

from .. import _dtype
from .._dispatch import call
from .._tensor import Tensor
from ..ops import complex as C
from ._args import method_form
from .shape import select


def view_as_real(input: Tensor) -> Tensor:
    """A real view of a complex tensor with a last dimension of size 2 (real, imaginary)."""
    return call(C.view_as_real, input)


def view_as_complex(input: Tensor) -> Tensor:
    """A complex view of a real tensor whose last dimension (size 2, stride 1) holds the
    real and imaginary parts."""
    return call(C.view_as_complex, input)


def real(input: Tensor) -> Tensor:
    """The real part of a complex tensor, as a view; a real tensor itself."""
    if not input.is_complex():
        return input
    return select(call(C.view_as_real, input), -1, 0)


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor, as a view."""
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return select(call(C.view_as_real, input), -1, 1)


def complex(real: Tensor, imag: Tensor, *, out=None) -> Tensor:  # noqa: A001
    """The complex tensor `real + i * imag` (same floating dtype, broadcast)."""
    return call(C.complex_, real, imag)


def polar(abs: Tensor, angle: Tensor, *, out=None) -> Tensor:  # noqa: A002
    """The complex tensor `abs * (cos(angle) + i * sin(angle))`."""
    return call(C.polar, abs, angle)


def angle(input: Tensor, *, out=None) -> Tensor:
    """The argument of each element (for real tensors: 0, or pi where negative)."""
    return call(C.angle, input)


def conj(input: Tensor) -> Tensor:
    """The complex conjugate; a real tensor itself."""
    if not input.is_complex():
        return input
    return call(C.conj, input)


def conj_physical(input: Tensor, *, out=None) -> Tensor:
    """The complex conjugate, computed; a real tensor itself."""
    if not input.is_complex():
        return input
    return call(C.conj_physical, input)


def conj_physical_(input: Tensor) -> Tensor:
    """Conjugate `input` in place (nothing to do for a real tensor)."""
    if not input.is_complex():
        return input
    return call(C.conj_physical_, input)


def resolve_conj(input: Tensor) -> Tensor:
    """`input` (fusegrad keeps no lazy conjugate bit)."""
    return input


def resolve_neg(input: Tensor) -> Tensor:
    """`input` (fusegrad keeps no lazy negative bit)."""
    return input


def is_conj(input: Tensor) -> bool:
    """False: fusegrad keeps no lazy conjugate bit."""
    return False


def cfloat(self: Tensor, memory_format=None) -> Tensor:
    """Converted to complex64."""
    return self.to(_dtype.complex64)


def cdouble(self: Tensor, memory_format=None) -> Tensor:
    """Converted to complex128."""
    return self.to(_dtype.complex128)


def _set_part(part):
    def setter(self, value) -> None:
        part(self).copy_(value)

    return setter


def _attach() -> None:
    """Attach the Tensor methods and the `real` / `imag` properties."""
    Tensor.real = property(real, _set_part(real), doc="The real part (a view).")
    Tensor.imag = property(imag, _set_part(imag), doc="The imaginary part (a view).")
    for fn in (angle, conj, conj_physical, conj_physical_,
               resolve_conj, resolve_neg, cfloat, cdouble):
        if not hasattr(Tensor, fn.__name__):
            setattr(Tensor, fn.__name__, method_form(fn))


_attach()

__all__ = ["view_as_real", "view_as_complex", "real", "imag", "complex", "polar", "angle",
           "conj", "conj_physical", "resolve_conj", "resolve_neg", "is_conj"]
