"""Comparisons (eq, lt, ...), the logical and bitwise functions, and searching and comparing
whole tensors: searchsorted, bucketize, bincount, unique, isclose, allclose, equal.
"""

from __future__ import annotations

import builtins
import sys

from .._dispatch import call
from .._tensor import Tensor
from ..ops import misc as M
from ..ops import pointwise as P

# ---------------------------------------------------------------- comparisons


def _compare(op, name):
    def fn(input, other, *, out=None):
        return call(op, input, other)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise comparison `{name}`, as a bool tensor."
    return fn


eq = _compare(P.eq, "eq")
ne = _compare(P.ne, "ne")
lt = _compare(P.lt, "lt")
le = _compare(P.le, "le")
gt = _compare(P.gt, "gt")
ge = _compare(P.ge, "ge")


# ---------------------------------------------------------------- logical and bitwise


def _logical(op):
    def fn(input, other, *, out=None):
        return call(op, input, other)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name}, as a bool tensor."
    return fn


logical_and = _logical(P.logical_and)
logical_or = _logical(P.logical_or)
logical_xor = _logical(P.logical_xor)


def _bitwise(op, scalar_op):
    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor):
            input, other = other, input
        if isinstance(other, Tensor):
            return call(op, input, other)
        return call(scalar_op, input, other)

    fn.__name__ = fn.__qualname__ = op.public
    fn.__doc__ = f"Elementwise {op.public} of integer or bool tensors."
    return fn


bitwise_and = _bitwise(P.bitwise_and, P.bitwise_and_scalar)
bitwise_or = _bitwise(P.bitwise_or, P.bitwise_or_scalar)
bitwise_xor = _bitwise(P.bitwise_xor, P.bitwise_xor_scalar)


# ---------------------------------------------------------------- searching, comparing


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 out=None, sorter=None):
    """Insertion indices of `input` into the (last dim of the) sorted sequence."""
    if not isinstance(input, Tensor):
        from .._creation import tensor as _tensor

        input = _tensor(input, dtype=sorted_sequence.dtype)
    return call(M.searchsorted, sorted_sequence, input, out_int32, right, side, sorter)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element of `input` given sorted 1-D `boundaries`."""
    return call(M.bucketize, input, boundaries, out_int32, right)


def bincount(input, weights=None, minlength=0):
    """Counts (or summed weights) of each non-negative integer in a 1-D tensor."""
    return call(M.bincount, input, weights, minlength)


def unique(input, sorted=True, return_inverse=False, return_counts=False,  # noqa: A002
           dim=None):
    """The sorted unique elements, with the inverse indices and counts when asked."""
    if dim is not None:
        values, inverse, counts = call(M.unique_dim, input, dim, sorted, return_inverse,
                                       return_counts)
    else:
        values, inverse, counts = call(M.unique, input, sorted, return_inverse, return_counts)
    extra = ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (values,) + extra if extra else values


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other|."""
    return call(M.isclose, input, other, rtol, atol, equal_nan)


# The fake tensors' module, read from `sys.modules`: no fake tensor exists before it
# loads, and `import fusegrad` does not load it.
_FAKE_MODULE = __name__.rsplit(".", 2)[0] + "._fake"


def _refuse_fakes(name: str, input, other) -> None:
    """A fake tensor has no values to compare: PyTorch's fake tensors refuse the whole op
    (whatever the shapes), with an exception naming it rather than the read of its result."""
    fake = sys.modules.get(_FAKE_MODULE)
    if fake is not None and (isinstance(input, fake.FakeTensor) or
                             isinstance(other, fake.FakeTensor)):
        raise fake.DataDependentOutputException(f"aten.{name}.default")


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> builtins.bool:
    """True if every pair of elements is close (see isclose)."""
    _refuse_fakes("allclose", input, other)
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other) -> builtins.bool:
    """True if both tensors have the same shape and elements."""
    if input.is_meta or other.is_meta:  # (PyTorch has no meta kernel for it)
        from .._meta import no_meta_kernel

        raise no_meta_kernel("equal")
    _refuse_fakes("equal", input, other)
    if not (input._plain and other._plain):
        quantized = sys.modules.get("fusegrad._quantized")  # (loaded with any quantized one)
        if quantized is not None and (isinstance(input, quantized.QuantizedTensor) or
                                      isinstance(other, quantized.QuantizedTensor)):
            return quantized.equal(input, other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return builtins.bool(eq(input, other).all().item())
