"""`torch.permute_copy` and the other copying forms of the views: the view's values in new
memory, recorded as the `*_copy` registry ops (`ops/view_copies.py`)."""

from __future__ import annotations

import numbers

from .._dispatch import call
from .._tensor import Tensor
from ..ops.view_copies import COPIES as C
from .shape import _shape_args


def permute_copy(input: Tensor, dims) -> Tensor:
    """A copy of `input.permute(dims)`."""
    return call(C["permute_copy"], input, _shape_args((dims,)))


def t_copy(input: Tensor) -> Tensor:
    """A copy of `input.t()`."""
    return call(C["t_copy"], input)


def view_copy(input: Tensor, size) -> Tensor:
    """A copy of `input.view(size)`."""
    return call(C["view_copy"], input, _shape_args((size,)))


def alias_copy(input: Tensor) -> Tensor:
    """A copy of `input` recorded as a copied alias."""
    return call(C["alias_copy"], input)


def detach_copy(input: Tensor) -> Tensor:
    """A copy of `input.detach()`."""
    return input.detach().clone()


def expand_copy(input: Tensor, size, *, implicit: bool = False) -> Tensor:
    """A copy of `input.expand(size)`."""
    return call(C["expand_copy"], input, _shape_args((size,)))


def select_copy(input: Tensor, dim: int, index: int) -> Tensor:
    """A copy of `input.select(dim, index)`."""
    return call(C["select_copy.int"], input, dim, int(index))


def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """A copy of `input[start:end:step]` along `dim`."""
    return call(C["slice_copy.Tensor"], input, dim, start, end, step)


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A copy of `input.unfold(dimension, size, step)`."""
    return call(C["unfold_copy"], input, dimension, size, step)


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of `input.diagonal(offset, dim1, dim2)`."""
    return call(C["diagonal_copy"], input, offset, dim1, dim2)


def split_copy(input: Tensor, split_size: int, dim: int = 0) -> tuple:
    """Copies of the pieces of `input.split(split_size, dim)`."""
    return tuple(call(C["split_copy.Tensor"], input, int(split_size), dim))


def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Copies of the pieces of `input.split(split_sizes, dim)`."""
    return tuple(call(C["split_with_sizes_copy"], input, [int(s) for s in split_sizes], dim))


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """The pieces of `input.split(split_sizes, dim)` as independent tensors (copies)."""
    from ..ops.view_copies import unsafe_split_with_sizes as op

    return tuple(call(op, input, [int(s) for s in split_sizes], dim))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple:
    """Copies of the slices of `input.unbind(dim)`."""
    return tuple(call(C["unbind_copy.int"], input, dim))


def squeeze_copy(input: Tensor, dim=None) -> Tensor:
    """A copy of `input.squeeze(dim)`."""
    if dim is None:
        return call(C["squeeze_copy"], input)
    if isinstance(dim, numbers.Integral):
        return call(C["squeeze_copy.dim"], input, int(dim))
    return call(C["squeeze_copy.dims"], input, tuple(dim))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    """A copy of `input.unsqueeze(dim)`."""
    return call(C["unsqueeze_copy"], input, dim)


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """A copy of `input.transpose(dim0, dim1)`."""
    return call(C["transpose_copy.int"], input, dim0, dim1)


def as_strided_copy(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    """A copy of `input.as_strided(size, stride, storage_offset)`."""
    return call(C["as_strided_copy"], input, tuple(size), tuple(stride), storage_offset)


__all__ = [
    "permute_copy", "t_copy", "view_copy", "alias_copy", "detach_copy", "expand_copy",
    "select_copy", "slice_copy", "unfold_copy", "diagonal_copy", "split_copy",
    "split_with_sizes_copy", "unsafe_split_with_sizes",
    "unbind_copy", "squeeze_copy", "unsqueeze_copy", "transpose_copy",
    "as_strided_copy",
]
