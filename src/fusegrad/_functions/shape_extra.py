"""Shape and indexing functions PyTorch writes as composites or small ops: `atleast_*d`,
`column_stack`/`row_stack`/`dstack`, `hsplit`/`vsplit`/`dsplit`, `diff`, `rot90`,
`cartesian_prod`, `combinations`, `block_diag`, `repeat_interleave`, `diagflat`,
`split_with_sizes`, `narrow_copy`, `unique_consecutive`, `unravel_index`, and the write
ops of ops/scatter.py (`take`, `put`, `index_fill`, `index_copy`, `masked_scatter`,
`scatter_reduce`, `diagonal_scatter`, `select_scatter`, `slice_scatter`, `isin`).

Composites call the same ops as PyTorch's, so they record the same nodes.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from .. import _dtype
from .._creation import meta_factory, tensor
from .._dispatch import call
from .._scalar_conversion import not_implemented_for
from .._tensor import Tensor
from ..ops import scatter as SC
from ..ops import shape as S
from ..ops import shape_extra as SX
from ..ops._util import wrap_dim
from . import _args
from .indexing import index_select, masked_select
from .inplace import contiguous
from .shape import cat, diag_embed, int_argument, meshgrid, narrow, stack, view, vstack

# ---------------------------------------------------------------- atleast, stacking


def _tensors(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0]), True
    return args, len(args) > 1


def _atleast(fn, args):
    ts, many = _tensors(args)
    out = tuple(fn(t) for t in ts)
    return out if many else out[0]


def _al1(t):
    return t.reshape(1) if t.ndim == 0 else t


def _al2(t):
    if t.ndim == 0:
        return t.reshape(1, 1)
    return t.unsqueeze(0) if t.ndim == 1 else t


def _al3(t):
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.unsqueeze(0).unsqueeze(-1)
    return t.unsqueeze(-1) if t.ndim == 2 else t


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (0-d tensors become shape (1,))."""
    return _atleast(_al1, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (new dims lead)."""
    return _atleast(_al2, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions (as NumPy's atleast_3d places them)."""
    return _atleast(_al3, tensors)


def column_stack(tensors, *, out=None) -> Tensor:
    """Tensors as columns: 0-d and 1-d inputs become (n, 1) columns, then joined on dim 1."""
    cols = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors]
    return cat(cols, 1)


def row_stack(tensors, *, out=None) -> Tensor:
    """`vstack` under NumPy's older name."""
    return vstack(tensors)


def dstack(tensors, *, out=None) -> Tensor:
    """Tensors joined along the third dimension (after `atleast_3d`)."""
    return cat([_al3(t) for t in tensors], 2)


def _split_along(name, input, sections, dim, need):
    if input.ndim < need:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {need} dimension, "
                           f"but got a tensor with {input.ndim} dimensions!")
    if isinstance(sections, numbers.Integral):
        size = input.shape[dim]
        if sections == 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but "
                               f"the size of the dimension {size} is not divisible by the "
                               f"split_size {sections}!")
    size = input.shape[dim]
    if isinstance(sections, numbers.Integral):
        step = size // sections
        bounds = [i * step for i in range(1, sections)]
    else:
        bounds = [min(max(int(b), 0), size) for b in sections]
    # Slices, as PyTorch records them (SliceBackward0), also for equal sections.
    starts, ends = [0] + bounds, bounds + [size]
    return tuple(narrow(input, dim, s, max(e - s, 0)) for s, e in zip(starts, ends))


def hsplit(input: Tensor, indices_or_sections):
    """Split along dim 1 (dim 0 for 1-D tensors)."""
    return _split_along("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input: Tensor, indices_or_sections):
    """Split along dim 0 (needs 2 or more dims)."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections):
    """Split along dim 2 (needs 3 or more dims)."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None, *,
         out=None) -> Tensor:
    """The n-th forward difference along `dim` (after joining `prepend` and `append`)."""
    for position, param, value in ((4, "prepend", prepend), (5, "append", append)):
        if value is not None and not isinstance(value, Tensor):  # (PyTorch's parser's check)
            raise _args.not_a_tensor(value, "diff", param,
                                     position - _args.called_as_method())
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = _args.index(n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = _args.index(dim)
    if prepend is not None or append is not None:
        for other in (prepend, append):
            if other is not None:
                _diff_joinable(input, other, dim)
        input = cat([p for p in (prepend, input, append) if p is not None], dim)
    d = wrap_dim(dim, input.ndim)
    out = input
    for _ in range(n):
        size = out.shape[d]
        if size == 0:
            break
        # (the earlier elements sliced first, along `dim` as given: PyTorch's graph)
        lo, hi = narrow(out, dim, 0, size - 1), narrow(out, dim, 1, size - 1)
        out = hi.logical_xor(lo) if out.dtype is _dtype.bool_ else hi - lo
    return out


def _diff_joinable(input: Tensor, other: Tensor, dim: int) -> None:
    """PyTorch's check of a tensor diff joins to `input` (prepend, append): the same rank
    (a 0-d one too), and the same sizes but along `dim`."""
    if other.ndim != input.ndim:
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    d = wrap_dim(dim, input.ndim)
    for i in range(input.ndim):
        if i != d and other.shape[i] != input.shape[i]:
            raise RuntimeError(
                "diff expects the shape of tensor to prepend or append to match that of input "
                f"except along the differencing dimension; input.size({i}) = "
                f"{input.shape[i]}, but got tensor.size({i}) = {other.shape[i]}")


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees `k` times in the plane of `dims` (from the first towards the
    second)."""
    if k.__class__ is not int:  # (a float is `operator.index`'s TypeError: the wrapper words
        k = operator.index(k)  # it as PyTorch's parser does)
    return call(SX.rot90, input, k, list(dims))


def cartesian_prod(*tensors) -> Tensor:
    """All combinations of one element from each 1-D tensor, as rows."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.flatten() for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """All length-`r` combinations of the elements of a 1-D tensor (itertools' order)."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_zeros((0,))
    n = input.shape[0]
    grids = meshgrid(*([input] * r), indexing="ij")
    idx = np.indices((n,) * r)
    keep = np.ones((n,) * r, bool)
    for a, b in zip(idx[:-1], idx[1:]):
        keep &= (a <= b) if with_replacement else (a < b)
    mask = tensor(keep)
    return stack([masked_select(g, mask) for g in grids], 1)


def block_diag(*tensors) -> Tensor:
    """A block diagonal matrix of the (at most 2-D) tensors."""
    return call(SX.block_diag, list(tensors))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Each element (or slice along `dim`) repeated `repeats` times in place."""
    if repeats is None:  # `repeat_interleave(repeats)`: the indices repeated by their counts
        if input._data is None and input.is_meta:
            return meta_factory((_meta_output_size(output_size),), input.dtype, False)
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        counts = _repeat_counts(input)
        _check_allocated(counts, output_size)
        # (the indices in the counts' own dtype, as PyTorch's kernel writes them)
        return tensor(np.repeat(np.arange(counts.size, dtype=input._data.dtype), counts))
    if repeats.__class__ is bool or not hasattr(repeats, "__index__"):
        # (no int to PyTorch's parser, which then finds no overload: a bool, a float)
        names, values = zip(*[(k, v) for k, v in (
            ("repeats", repeats), ("dim", dim), ("output_size", output_size)) if v is not None])
        _args.parsed("repeat_interleave", _REPEAT_INTERLEAVE, input,
                     *_args.as_called(names, values, input=input), _args.called_as_method())
    if dim is None:
        input = input.flatten()
        dim = 0
    d = wrap_dim(dim, input.ndim)
    if isinstance(repeats, Tensor) and repeats._data is None and repeats.is_meta:
        # Counts without values: the result's length is `output_size`, as PyTorch's meta
        # kernel takes it (unchecked against the counts).
        n = repeats.numel()
        if n != 1 and n != input.shape[d]:
            raise RuntimeError("repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {n} and input.size({d}) = "
                               f"{input.shape[d]}")
        index = meta_factory((_meta_output_size(output_size),), _dtype.int64, False)
        return index_select(input, d, index)
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        counts = _repeat_counts(repeats).reshape(-1)
        if counts.size == 1:  # one count serves every element
            counts = np.broadcast_to(counts, (input.shape[d],))
        if counts.size != input.shape[d]:
            raise RuntimeError("repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {counts.size} and input.size({d}) = "
                               f"{input.shape[d]}")
        _check_allocated(counts, output_size)
        return index_select(input, d, tensor(np.repeat(np.arange(counts.size), counts)))
    k = int_argument(repeats)  # (a float is refused, never truncated)
    if k < 0:
        raise RuntimeError("Repeats must be non-negative")
    if output_size is not None and output_size != input.shape[d] * k:
        raise RuntimeError("repeat_interleave: Invalid output_size, expected "
                           f"{input.shape[d] * k} but got {output_size}")
    shape = list(input.shape)
    expanded = input.unsqueeze(d + 1).expand(*shape[:d + 1], k, *shape[d + 1:])
    shape[d] *= k
    return view(contiguous(expanded.clone()), tuple(shape))


def _meta_output_size(output_size) -> int:
    """`repeat_interleave`'s `output_size` for meta counts (PyTorch's error without one)."""
    if output_size is None:
        raise RuntimeError("cannot repeat_interleave a meta tensor without output_size")
    return int(output_size)


_REPEAT_INTERLEAVE = _args.Overloads(
    ("Tensor input, Tensor repeats, int dim=None, *, int output_size=None",
     "Tensor repeats, *, int output_size=None",
     "Tensor input, int repeats, int dim=None, *, int output_size=None"),
    ("Tensor repeats, int dim=None, *, int output_size=None",
     "int repeats, int dim=None, *, int output_size=None"))


def _check_allocated(counts: np.ndarray, output_size) -> None:
    """PyTorch's error for an `output_size` other than the counts' total."""
    if output_size is not None and output_size != int(counts.sum()):
        raise RuntimeError("allocated size does not match required size")


def _repeat_counts(repeats: Tensor) -> np.ndarray:
    """A repeats tensor's counts as int64, with PyTorch's errors for a dtype its kernel has
    no form for (int32 and int64 only) and a negative count."""
    if repeats.dtype is not _dtype.int64 and repeats.dtype is not _dtype.int32:
        raise not_implemented_for("repeat_interleave_cpu", repeats.dtype)
    if repeats._data is None and not repeats.is_meta:
        # A fake tensor's counts have no values: the result's size depends on them.
        from .._fake import DynamicOutputShapeException

        raise DynamicOutputShapeException("aten.repeat_interleave.Tensor")
    counts = repeats._data.astype(np.int64)
    if counts.size and counts.min() < 0:
        raise RuntimeError("repeats can not be negative")
    return counts


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A 2-D tensor with the flattened input on its `offset` diagonal."""
    return diag_embed(view(contiguous(input), (-1,)), offset, 0, 1)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0, *, axis=None):
    """Views of the listed sizes along `dim`."""
    dim = _args.index(_args.axis("split_with_sizes", dim, axis, 0))
    return call(S.split_with_sizes, input, [int_argument(s) for s in split_sizes], dim)


def narrow_copy(input: Tensor, dim: int | None = None, start: int | None = None,
                length: int | None = None, *, axis=None, out=None) -> Tensor:
    """A copy of `narrow(input, dim, start, length)`."""
    if dim is None and axis is None or start is None or length is None:
        raise TypeError('narrow_copy() missing 3 required positional argument: "dim", '
                        '"start", "length"')
    dim = _args.index(_args.required_dim("narrow_copy", dim, axis))
    start, length = _args.index(start), _args.index(length)
    if start.__class__ is not int or length.__class__ is not int:
        _args.int_parameters("narrow_copy", 2 if _args.is_method_copy(locals()) else 3,
                             ("start", start), ("length", length))
    return call(SX.narrow_copy, input, dim, start, length)


def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim=None):
    """Runs of equal consecutive elements collapsed to one (no gradient)."""
    values, inverse, counts = call(SX.unique_consecutive, input, return_inverse,
                                   return_counts, dim)
    out = [values] + ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
    return out[0] if len(out) == 1 else tuple(out)


def unravel_index(indices, shape):
    """The coordinates of flat indices in a tensor of `shape`, one int64 tensor per dim."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    idx = indices._data if isinstance(indices, Tensor) else np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{_dtype.FROM_NP[idx.dtype]}")
    n = int(np.prod(shape, dtype=np.int64))
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise RuntimeError(f"'indices' must be in range [-{n}, {n})")
    idx = np.where(idx < 0, idx + n, idx)
    return tuple(tensor(c.astype(np.int64)) for c in np.unravel_index(idx, tuple(shape)))


# ---------------------------------------------------------------- write ops


def take(input: Tensor, index: Tensor, *, out=None) -> Tensor:
    """Elements at flat positions `index`."""
    return call(SC.take, input, index)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of `input` with `source` written (or added) at flat positions `index`."""
    return call(SC.put, input, index, source, accumulate)


def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place put."""
    return call(SC.put_, self, index, source, accumulate)


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy with the slices at `index` along `dim` set to `value`."""
    if isinstance(value, Tensor):
        return call(SC.index_fill_tensor, input, dim, index, value)
    return call(SC.index_fill, input, dim, index, value)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place index_fill."""
    if isinstance(value, Tensor):
        return call(SC.index_fill_tensor_, self, dim, index, value)
    return call(SC.index_fill_, self, dim, index, value)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
               out=None) -> Tensor:
    """A copy with the slices at `index` along `dim` replaced by `source`'s."""
    return call(SC.index_copy, input, dim, index, source)


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """In-place index_copy."""
    return call(SC.index_copy_, self, dim, index, source)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy with `source`'s leading elements written where `mask` is True."""
    return call(SC.masked_scatter, input, mask, source)


def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In-place masked_scatter."""
    return call(SC.masked_scatter_, self, mask, source)


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True, out=None) -> Tensor:
    """Scatter `src` into a copy of `input`, combining colliding values with `reduce`
    ('sum', 'prod', 'mean', 'amax' or 'amin')."""
    return call(SC.scatter_reduce, input, dim, index, src, reduce, include_self)


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In-place scatter_reduce."""
    return call(SC.scatter_reduce_, self, dim, index, src, reduce, include_self)


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """A copy with the diagonal (`offset`, `dim1`, `dim2`) replaced by `src`."""
    return call(SC.diagonal_scatter, input, src, offset, dim1, dim2)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy with `input.select(dim, index)` replaced by `src`."""
    return call(SC.select_scatter, input, src, dim, index)


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None,
                  step: int = 1, *, out=None) -> Tensor:
    """A copy with the slice `start:end:step` of `dim` replaced by `src`."""
    return call(SC.slice_scatter, input, src, dim, start, end, step)


def isin(elements, test_elements, *, assume_unique: bool = False,
         invert: bool = False, out=None) -> Tensor:
    """Whether each element of `elements` occurs in `test_elements`."""
    if not isinstance(elements, Tensor):
        elements = tensor(elements)
    if not isinstance(test_elements, Tensor):
        test_elements = tensor(test_elements)
    return call(SC.isin, elements, test_elements, assume_unique, invert)


__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "row_stack", "dstack",
    "hsplit", "vsplit", "dsplit", "diff", "rot90", "cartesian_prod", "combinations",
    "block_diag", "repeat_interleave", "take", "put", "index_fill", "index_copy",
    "masked_scatter", "scatter_reduce", "diagonal_scatter", "select_scatter",
    "slice_scatter", "unique_consecutive", "split_with_sizes", "narrow_copy", "diagflat",
    "unravel_index", "isin",
]
