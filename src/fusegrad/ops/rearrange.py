"""Copies and element rearrangements: clone, _to_copy (memory formats), flip, roll,
tril/triu, diagonal (and its backward), diag_embed.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._scalar_conversion import half_input
from .._shapes import (
    FORMAT_ORDERS,
    dense_strides,
    format_empty,
    format_order,
    in_memory_order,
    laid_like,
    like_strides,
    strided_empty,
)
from . import _onnx as ox
from ._onnx import cast, identity
from ._util import (
    Spec,
    c_contiguous,
    in_format,
    numel,
    rand_array,
    real_part_for,
    wrap_dim,
)
from .joins import (
    _call,
)
from .registry import Sample, register
from .views import (
    elem_strides,
)


def is_dense(a: np.ndarray) -> bool:
    """True if `a`'s elements tile a block of memory without gaps or overlaps."""
    acc = 1
    for size, stride in sorted(zip(a.shape, a.strides), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride != acc * a.itemsize:
            return False
        acc *= size
    return True


class MemoryFormat:
    """How a copy lays out its elements (`torch.contiguous_format`, ...)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return "torch." + self.name


contiguous_format = MemoryFormat("contiguous_format")
preserve_format = MemoryFormat("preserve_format")
channels_last = MemoryFormat("channels_last")
channels_last_3d = MemoryFormat("channels_last_3d")


def _clone_kernel(a, memory_format=None):
    # PyTorch's preserve_format keeps the layout of dense tensors; otherwise row-major.
    name = getattr(memory_format, "name", None)
    if name in FORMAT_ORDERS:  # channels_last(_3d): the channels innermost
        order = format_order(name, a.ndim)
        if not a.size:
            return format_empty(np.empty(a.shape, a.dtype), order)
        out = in_memory_order(lambda s: np.empty(s, a.dtype), a.shape, order)
        np.copyto(out, a)
        return out
    if memory_format is contiguous_format:
        return np.array(a, order="C", copy=True)
    if not a.size:  # (PyTorch's empty_like's strides, which NumPy's copy of it loses)
        return strided_empty(np.empty(a.shape, a.dtype), like_strides(a.shape, elem_strides(a)))
    if 1 not in a.shape and is_dense(a):
        return a.copy(order="K")
    # Not dense (a slice, an expansion), or with size-1 dims (whose strides a dense tensor's
    # clone keeps, as PyTorch's: NumPy's order "K" renumbers them): a dense copy keeping the
    # order of the dims in memory.
    want = like_strides(a.shape, elem_strides(a))  # (PyTorch's empty_like's, as its clone's)
    out = np.ndarray(a.shape, a.dtype, buffer=np.empty(a.size, a.dtype),
                     strides=tuple(v * a.itemsize for v in want))
    np.copyto(out, a)
    return out


def _clone_meta(a, memory_format=None):
    name = getattr(memory_format, "name", None)
    if name in FORMAT_ORDERS:  # (PyTorch's error for another rank; the channels innermost)
        order = format_order(name, len(a.shape))
        return Spec(tuple(a.shape), a.dtype, dense_strides(tuple(a.shape), order))
    return Spec(tuple(a.shape), a.dtype)


clone = register(
    "clone", kernel=_clone_kernel,
    quantized={"moves": True, "per_channel": "moves"},
    meta=_clone_meta, node="CloneBackward0",
    derivative=lambda g: (g, None),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),)) for s in ((3, 4), (), (0, 2))],
    lowering=lambda v, a, memory_format=None: v.copy(a), onnx=identity)


def _to_copy_kernel(a, dtype):
    a = real_part_for(a, dtype.np)
    out = half_input(a, dtype.np).astype(dtype.np)
    # PyTorch's result is `empty_like(a)`: NumPy's order "K" differs on broadcast dims.
    return out if a.flags.c_contiguous and a.size else laid_like(out, a)


def _to_copy_derivative(g, dtype):
    # A real input of a complex result gets the gradient's real part.
    if g.is_complex() and dtype.category != _dtype.COMPLEX:
        g = g.real
    return (g.to(dtype), None)


to_copy = register(
    "_to_copy", kernel=_to_copy_kernel, meta=lambda a, dtype: Spec(tuple(a.shape), dtype),
    node="ToCopyBackward0", derivative=_to_copy_derivative,
    save=lambda out, a, dtype: (a.dtype,),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), _dtype.float64))],
    gradcheck=False, onnx=cast, lowering=lambda v, a, dtype: v.to(a, dtype))

def _flip_dims(dims, ndim):
    dims = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
    return dims


def _flip_kernel(a, dims):
    # In the input's memory order (PyTorch's flip of a transposed tensor stays transposed).
    out = np.flip(a, _flip_dims(dims, a.ndim) if a.ndim else ()).copy(order="K")
    return out if out.size else laid_like(out, a)  # (an empty one: `empty_like(a)`'s strides)


flip = register(
    "flip", kernel=_flip_kernel, result_order="operands",
    meta=lambda a, dims: (_flip_dims(dims, len(a.shape)), Spec(tuple(a.shape), a.dtype))[1],
    node="FlipBackward0", derivative=lambda g, dims: (g.flip(dims), None),
    save=lambda out, a, dims: (dims,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d), name=f"{s} {d}")
                             for s, d in (((3, 4), (0,)), ((3, 4), (0, 1)), ((2, 3, 4), (-1,)),
                                          ((), ()), ((0, 2), (1,)))], onnx=ox.flip,
    saved_names=("dims",))


def _roll_dims(dims, ndim: int) -> tuple:
    """`dims` wrapped for a tensor of `ndim` dims (none for a scalar: PyTorch's IndexError)."""
    for d in dims:
        if not ndim:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return tuple(wrap_dim(d, ndim) for d in dims)


def _roll_args(shifts, dims) -> tuple:
    """(shifts, dims) as tuples, with PyTorch's checks in its order: some shift, and one per
    dim unless a single shift rolls the flattened tensor (no dims)."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if (dims or len(shifts) != 1) and len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:"
                           f"{len(dims)}")
    return shifts, dims


def _roll_kernel(a, shifts, dims=()):
    shifts, dims = _roll_args(shifts, dims)
    if not a.size and dims:  # (PyTorch's roll of an empty tensor along dims: its clone)
        return laid_like(a.copy(), a)
    if not dims:
        return np.roll(a.reshape(-1), shifts[0]).reshape(a.shape)
    return np.roll(a, shifts, _roll_dims(dims, a.ndim))


def _contiguous_roll(a, shifts, dims=()):
    out = _roll_kernel(a, shifts, dims)
    return out if not out.size else in_format(out, None)


def _roll_meta(a, shifts, dims=()):
    _roll_dims(_roll_args(shifts, dims)[1], len(a.shape))
    return Spec(tuple(a.shape), a.dtype)


def _roll_derivative(g, shifts, dims):
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    return (_call(roll, g, [-s for s in shifts], dims), None, None)


roll = register(
    "roll", kernel=_contiguous_roll, meta=_roll_meta, node="RollBackward0",
    derivative=_roll_derivative, save=lambda out, a, shifts, dims=(): (shifts, dims),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), sh, d), name=f"{s} {sh} {d}")
                             for s, sh, d in (((3, 4), (1,), (0,)), ((3, 4), (2, -1), (1, 0)),
                                              ((3, 4), (5,), ()), ((5,), (-2,), (0,)))],
    onnx=ox.roll, saved_names=("shifts", "dims"))


def _tri_check(a, name):
    if len(a.shape) < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def _tri(name, npfn):
    def kernel(a, diagonal=0):
        _tri_check(a, name)
        return npfn(a, diagonal)

    op = register(
        name, kernel=c_contiguous(kernel),
        meta=lambda a, diagonal=0: (_tri_check(a, name), Spec(tuple(a.shape), a.dtype))[1],
        node=name.capitalize() + "Backward0",
        derivative=lambda g, k: (_call(op, g, k), None), save=lambda out, a, k=0: (k,),
        samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k), name=f"{s} {k}")
                                 for s, k in (((3, 4), 0), ((4, 3), 1), ((2, 3, 3), -1),
                                              ((0, 2), 0))],
        onnx=ox.trilu(name == "triu"))
    return op


tril = _tri("tril", np.tril)
triu = _tri("triu", np.triu)


def _diag_check(ndim, offset, dim1, dim2):
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diagonal_kernel(a, offset=0, dim1=0, dim2=1):
    _diag_check(a.ndim, offset, dim1, dim2)
    spec = _diagonal_meta(a, offset, dim1, dim2)
    if numel(spec.shape) == 0:
        # Still a view (at the input's first element, as PyTorch places an empty diagonal).
        return np.lib.stride_tricks.as_strided(
            a, spec.shape, tuple(s * a.itemsize for s in spec.strides))
    # A view starting at the diagonal's first element, walked with the diagonal's strides.
    corner = [slice(None)] * a.ndim
    d1, d2 = wrap_dim(dim1, a.ndim), wrap_dim(dim2, a.ndim)
    corner[d2 if offset >= 0 else d1] = slice(abs(offset), None)
    start = a[tuple(corner)]
    return np.lib.stride_tricks.as_strided(
        start, spec.shape, tuple(s * a.itemsize for s in spec.strides))


def _diagonal_meta(a, offset=0, dim1=0, dim2=1):
    n = len(a.shape)
    d1, d2 = _diag_check(n, offset, dim1, dim2)
    st = elem_strides(a)
    if offset >= 0:
        length = max(min(a.shape[d1], a.shape[d2] - offset), 0)
        off = offset * st[d2]
    else:
        length = max(min(a.shape[d1] + offset, a.shape[d2]), 0)
        off = -offset * st[d1]
    if length == 0:
        off = 0
    keep = [i for i in range(n) if i not in (d1, d2)]
    shape = tuple(a.shape[i] for i in keep) + (length,)
    strides = tuple(st[i] for i in keep) + (st[d1] + st[d2],)
    return Spec(shape, a.dtype, strides, off)


def _diagonal_derivative(g, shape, offset, dim1, dim2):
    return (_call(diagonal_backward, g, tuple(shape), offset, dim1, dim2), None, None, None)


diagonal = register(
    "diagonal", kernel=_diagonal_kernel, meta=_diagonal_meta, view=True,
    node="DiagonalBackward0", derivative=_diagonal_derivative, onnx=ox.diagonal,
    save=lambda out, a, offset=0, dim1=0, dim2=1: (a.shape, offset, dim1, dim2),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),) + r, name=f"{s} {r}")
                             for s, r in (((3, 4), ()), ((3, 4), (1,)), ((4, 3), (-2,)),
                                          ((2, 3, 4), (0, -1, 0)), ((3, 3), (5,)))])


def _diagonal_backward_kernel(g, shape, offset, dim1, dim2):
    out = np.zeros(shape, g.dtype)
    _diagonal_kernel(out, offset, dim1, dim2)[...] = g
    return out


diagonal_backward = register(
    "diagonal_backward", kernel=_diagonal_backward_kernel,
    meta=lambda g, shape, offset, d1, d2: Spec(tuple(shape), g.dtype),
    node="DiagonalBackwardBackward0",
    derivative=lambda gg, offset, d1, d2: (gg.diagonal(offset, d1, d2), None, None, None,
                                           None),
    save=lambda out, g, shape, offset, d1, d2: (offset, d1, d2),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3,), dt), (3, 4), 0, 0, 1)),
                             Sample((rand_array(rng, (2, 2), dt), (2, 3, 4), -1, 1, 2))])


def _diag_embed_shape(shape, offset, dim1, dim2):
    n = len(shape) + 1
    d1, d2 = _diag_check(n, offset, dim1, dim2)
    size = (shape[-1] if shape else 1) + abs(offset)
    rest = list(shape[:-1])
    out = []
    for i in range(n):
        out.append(size if i in (d1, d2) else rest.pop(0))
    return tuple(out)


def _diag_embed_kernel(a, offset=0, dim1=-2, dim2=-1):
    shape = _diag_embed_shape(a.shape, offset, dim1, dim2)
    out = np.zeros(shape, a.dtype)
    _diagonal_kernel(out, offset, dim1, dim2)[...] = a
    return out


diag_embed = register(
    "diag_embed", kernel=_diag_embed_kernel,
    meta=lambda a, offset=0, dim1=-2, dim2=-1: Spec(
        _diag_embed_shape(tuple(a.shape), offset, dim1, dim2), a.dtype),
    node="DiagEmbedBackward0",
    derivative=lambda g, offset, d1, d2: (g.diagonal(offset, d1, d2), None, None, None),
    save=lambda out, a, offset=0, dim1=-2, dim2=-1: (offset, dim1, dim2),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),) + r, name=f"{s} {r}")
                             for s, r in (((3,), ()), ((2, 3), (1,)), ((2, 3), (-1, 0, 2)),
                                          ((0,), ()))], onnx=ox.diag_embed)
