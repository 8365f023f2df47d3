"""`torch.permute_copy` and the other copying forms of the views: the view's values in new
memory, recorded as the `*_copy` registry ops (`ops/view_copies.py`)."""

from __future__ import annotations

import numbers

from .._dispatch import call
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled
from ..ops.view_copies import COPIES as C
from . import _args
from .shape import _shape_args, int_argument


def permute_copy(input: Tensor, dims, *, out=None) -> Tensor:
    """A copy of `input.permute(dims)`."""
    return call(C["permute_copy"], input, _shape_args((dims,)))


def t_copy(input: Tensor, *, out=None) -> Tensor:
    """A copy of `input.t()`."""
    return call(C["t_copy"], input)


def view_copy(input: Tensor, size, *, out=None) -> Tensor:
    """A copy of `input.view(size)`."""
    return call(C["view_copy"], input, _shape_args((size,)))


def alias_copy(input: Tensor, *, out=None) -> Tensor:
    """A copy of `input` recorded as a copied alias."""
    return call(C["alias_copy"], input)


def detach_copy(input: Tensor, *, out=None) -> Tensor:
    """A copy of `input.detach()` (recorded as an op without a derivative, as PyTorch's)."""
    from ..ops.view_copies import detach_copy as op

    return call(op, input)


def expand_copy(input: Tensor, size, *, implicit: bool = False, out=None) -> Tensor:
    """A copy of `input.expand(size)`."""
    return call(C["expand_copy"], input, _shape_args((size,)))


_SELECT_COPY = _args.Overloads(("Tensor input, int dim, int index, *, Tensor out=None",), ())


def select_copy(input: Tensor, *args, out=None, **kwargs) -> Tensor:
    """A copy of `input.select(dim, index)`."""
    if kwargs or len(args) != 2 or args[0].__class__ is not int or \
            args[1].__class__ is not int:
        # PyTorch's parser: ints only (a float index is its TypeError, not a truncation)
        bound = _args.parsed("select_copy", _SELECT_COPY, input, args, kwargs, False)[1]
        args = (_args.index(bound["dim"]), _args.index(bound["index"]))
    return call(C["select_copy.int"], input, *args)


def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1, *,
               out=None) -> Tensor:
    """A copy of `input[start:end:step]` along `dim`."""
    return call(C["slice_copy.Tensor"], input, dim, start, end, step)


def unfold_copy(input: Tensor, dimension: int, size: int, step: int, *, out=None) -> Tensor:
    """A copy of `input.unfold(dimension, size, step)`."""
    return call(C["unfold_copy"], input, dimension, size, step)


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, *,
                  out=None) -> Tensor:
    """A copy of `input.diagonal(offset, dim1, dim2)`."""
    return call(C["diagonal_copy"], input, offset, dim1, dim2)


def _write_pieces(pieces: tuple, out, name: str, kernel: str, position: int, *,
                  resizes: bool) -> None:
    """PyTorch's out= of the copying splits: `out`, a list or tuple of as many tensors as
    there are pieces, gets each piece written in place, outside autograd (an input that
    requires grad leaves no history). `split_copy` copies as `copy_` does (broadcast, any
    dtype; no resize); the others (`resizes`) resize each out of another shape, with
    PyTorch's warning when it had elements, and want the piece's dtype exactly. `kernel`
    and `position` are the names PyTorch's messages give the kernel and the argument."""
    from .. import _out
    from ..autograd.grad_mode import no_grad

    _check_outs(out, name, position)
    if len(out) != len(pieces):
        raise RuntimeError(f"{kernel} expected an out= argument of size {len(pieces)}, got "
                           f"size {len(out)}")
    with no_grad():
        for piece, o in zip(pieces, out):
            if resizes:
                _out.check_exact_dtype(name, piece, o)
                if tuple(o.shape) != tuple(piece.shape):
                    _out.resize_with_warning(o, tuple(piece.shape))
            o.copy_(piece)


def _check_outs(out, name: str, position: int) -> None:
    """PyTorch's argument errors for the list `out` (checked before anything is computed),
    and `unbind_copy`'s autograd refusal of an `out` that requires grad."""
    from ..ops import out_facts

    _args.tensor_sequence(name, out, "'out'", position)
    if name == "unbind_copy" and is_grad_enabled() and any(o.requires_grad for o in out):
        raise RuntimeError(out_facts.GRAD_ERROR.format(name))


def split_copy(input: Tensor, split_size: int, dim: int = 0, *, out=None) -> tuple | None:
    """Copies of the pieces of `input.split(split_size, dim)` (with `out`, written into its
    tensors; None returned)."""
    if out is not None:
        _check_outs(out, "split_copy", 3)
    pieces = tuple(call(C["split_copy.Tensor"], input, int(split_size), dim))
    if out is None:
        return pieces
    _write_pieces(pieces, out, "split_copy", "split_copy_Tensor_out()", 3, resizes=False)
    return None


def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0, *,
                          out=None) -> tuple | None:
    """Copies of the pieces of `input.split(split_sizes, dim)` (with `out`, written into its
    tensors; None returned)."""
    if out is not None:
        _check_outs(out, "split_with_sizes_copy", 3)
    # (a function only: its sizes are always its second argument)
    _args.int_list_parameter(split_sizes, "split_with_sizes_copy", "split_sizes", 2)
    pieces = tuple(call(C["split_with_sizes_copy"], input, [int_argument(s) for s in split_sizes],
                        dim))
    if out is None:
        return pieces
    _write_pieces(pieces, out, "split_with_sizes_copy", "split_with_sizes_copy_out", 3,
                  resizes=True)
    return None


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """The pieces of `input.split(split_sizes, dim)` as independent tensors (copies)."""
    from ..ops.view_copies import unsafe_split_with_sizes as op

    return tuple(call(op, input, [int_argument(s) for s in split_sizes], dim))


def unbind_copy(input: Tensor, dim: int = 0, *, out=None) -> tuple | None:
    """Copies of the slices of `input.unbind(dim)` (with `out`, written into its tensors;
    None returned)."""
    if out is not None:  # (its refusal of an out requiring grad comes first)
        _check_outs(out, "unbind_copy", 2)
    pieces = tuple(call(C["unbind_copy.int"], input, dim))
    if out is None:
        return pieces
    _write_pieces(pieces, out, "unbind_copy", "unbind_copy_int_out", 2, resizes=True)
    return None


# They write into `out` themselves (a list of tensors, and no result): the public namespace's
# out= guard leaves them alone (`_out.guard_namespace`).
split_copy.writes_out = split_with_sizes_copy.writes_out = unbind_copy.writes_out = True


def squeeze_copy(input: Tensor, dim=None, *, out=None) -> Tensor:
    """A copy of `input.squeeze(dim)`."""
    if dim is None:
        return call(C["squeeze_copy"], input)
    if isinstance(dim, numbers.Integral):
        return call(C["squeeze_copy.dim"], input, int(dim))
    return call(C["squeeze_copy.dims"], input, tuple(dim))


def unsqueeze_copy(input: Tensor, dim: int, *, out=None) -> Tensor:
    """A copy of `input.unsqueeze(dim)`."""
    return call(C["unsqueeze_copy"], input, dim)


def transpose_copy(input: Tensor, dim0: int, dim1: int, *, out=None) -> Tensor:
    """A copy of `input.transpose(dim0, dim1)`."""
    return call(C["transpose_copy.int"], input, dim0, dim1)


def as_strided_copy(input: Tensor, size, stride, storage_offset=None, *, out=None) -> Tensor:
    """A copy of `input.as_strided(size, stride, storage_offset)`."""
    return call(C["as_strided_copy"], input, tuple(size), tuple(stride), storage_offset)


__all__ = [
    "permute_copy", "t_copy", "view_copy", "alias_copy", "detach_copy", "expand_copy",
    "select_copy", "slice_copy", "unfold_copy", "diagonal_copy", "split_copy",
    "split_with_sizes_copy", "unsafe_split_with_sizes",
    "unbind_copy", "squeeze_copy", "unsqueeze_copy", "transpose_copy",
    "as_strided_copy",
]
