"""In-place functions and copies: add_, sub_, mul_, div_, zero_, fill_, copy_; clone,
contiguous, to_copy and the memory formats.
"""

from __future__ import annotations

from .. import _dtype, _shapes
from .._dispatch import call
from .._tensor import Tensor
from ..ops import arithmetic as A
from ..ops import inplace as I  # noqa: E741
from ..ops import pointwise as P
from ..ops import shape as S

# ---------------------------------------------------------------- copies


contiguous_format = S.contiguous_format
preserve_format = S.preserve_format
channels_last = S.channels_last
channels_last_3d = S.channels_last_3d


def clone(input, *, memory_format=None):
    """A copy with its own storage (recorded as CloneBackward0)."""
    if memory_format is None or memory_format is preserve_format:
        return call(S.clone, input)
    return call(S.clone, input, memory_format)


def contiguous(input, memory_format=None):
    """Self if already contiguous (in `memory_format`, row-major by default), otherwise a
    copy that is."""
    if memory_format is None or memory_format is preserve_format:
        memory_format = contiguous_format
    if input.is_contiguous(memory_format=memory_format):
        return input
    return clone(input, memory_format=memory_format)


def to_copy(input, dtype):
    """A copy converted to `dtype` (ToCopyBackward0)."""
    return call(S.to_copy, input, dtype)


# ---------------------------------------------------------------- in place


def add_(self, other, *, alpha=1):
    """In-place add."""
    # (alpha=True/1.0 are checked by the op; the class is tested first, so a float standing
    # for a graph value is passed on without reading its value)
    if alpha.__class__ is not int or alpha != 1:
        try:
            return call(P.add_, self, other, alpha)
        except RuntimeError:
            _fits_before_alpha(self, other, alpha, False)
            raise
    return call(P.add_, self, other)


def sub_(self, other, *, alpha=1):
    """In-place subtract."""
    # (alpha=True/1.0 are checked by the op; the class is tested first, so a float standing
    # for a graph value is passed on without reading its value)
    if alpha.__class__ is not int or alpha != 1:
        try:
            return call(P.sub_, self, other, alpha)
        except RuntimeError:
            _fits_before_alpha(self, other, alpha, True)
            raise
    return call(P.sub_, self, other)


def _fits_before_alpha(self, other, alpha, subtract: bool) -> None:
    """PyTorch's order of errors for `add_`/`sub_` (`subtract`) whose kernel failed: where
    the result dtype refuses `alpha` (the kernel's error), its iterator first checks that
    the result fits `self`, its shape and then its dtype. Any other error of the kernel (a
    bool operand of `sub_`, checked before anything) is left as it is."""
    try:
        dt = _dtype.result_type(self, other)
    except (RuntimeError, TypeError):
        return
    if A.alpha_refusal(dt, alpha) is None or \
            subtract and A.refuses_bool_subtraction(self, other):
        return
    shape = _shapes.broadcast_shapes(tuple(self.shape), tuple(getattr(other, "shape", ())))
    if shape != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the "
                           f"broadcast shape {list(shape)}") from None
    dt = _dtype.result_type(self, other)
    if not _dtype.can_cast(dt, self.dtype):
        raise RuntimeError(f"result type {dt.legacy} can't be cast to the desired output "
                           f"type {self.dtype.legacy}") from None


def mul_(self, other):
    """In-place multiply."""
    return call(P.mul_, self, other)


def div_(self, other, *, rounding_mode=None):
    """In-place divide (true, or rounded as `div`'s `rounding_mode` says)."""
    if rounding_mode is not None:
        return call(A.div_mode_, self, other, rounding_mode)
    return call(P.div_, self, other)


def zero_(self):
    """Fill with zeros in place."""
    return call(I.zero_, self)


def fill_(self, value):
    """Fill with `value` (a number or a 0-d tensor) in place."""
    if isinstance(value, Tensor):
        return call(I.fill_tensor, self, value)
    return call(I.fill_scalar, self, value)


def copy_(self, other, non_blocking=False):
    """Copy `other` (broadcast, converted) into self in place (PyTorch names the source
    `other` in this signature)."""
    return call(I.copy_, self, other)
