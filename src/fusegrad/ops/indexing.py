"""Indexing ops: index_select, gather, scatter, index_add, masked_fill/select, nonzero,
advanced indexing (`index.Tensor`, `index_put`) and one_hot.

Index tensors are never differentiable. `index.Tensor` and `index_put` take a list of
optional index tensors (None keeps a dimension whole) as a plain argument, so their kernels
unwrap the list themselves.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype
from .._dispatch import plain
from .._shapes import strided_empty
from .._tensor import Tensor
from .._warn import warn_at_caller
from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    add_rows,
    bad_index_dtype,
    broadcast_shapes,
    c_contiguous,
    checked_scalar,
    dtype_of,
    in_format,
    index_out_of_range,
    mismatched_source,
    numel,
    rand_array,
    size_str,
    wrap_dim,
)
from .registry import Sample, expanded_warning, inplace_variant, register


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def _raw(x):
    return x._data if isinstance(x, plain.Tensor) else x


def _data_dependent(what: str):
    from .._fake import DataDependentOutputError

    raise DataDependentOutputError(
        f"{what}: the output shape depends on the input values (data-dependent output)")


def _with(shape, d, n) -> tuple:
    """`shape` with dim `d` set to `n`."""
    d = d % len(shape)
    return tuple(shape[:d]) + (n,) + tuple(shape[d + 1:])


def _mask(rng, shape):
    return np.asarray(rng.random(shape) > 0.5)


def _ints(rng, shape, high):
    return rng.integers(0, max(high, 1), shape).astype(np.int64)

# ---------------------------------------------------------------- index_select


def _index_select_check(a, dim, index) -> int:
    """Index dtype and rank checks (arrays and fakes alike); the wrapped dim (0 for 0-d)."""
    if len(index.shape) > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if not len(a.shape):  # (before the index's dtype, as PyTorch checks them)
        n = numel(index.shape)
        if n != 1:
            raise RuntimeError(
                f"index_select(): Index to scalar can have only 1 value, got {n} value(s)")
    if bad_index_dtype(index):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if not len(a.shape):
        return 0
    return wrap_dim(dim, len(a.shape))


def _index_select_range(shape, d, index) -> None:
    """PyTorch's error for an index outside the dim (negative ones included): its CPU kernel
    for dim 1 of a tensor (or any dim of an empty one) words it differently."""
    size = shape[d] if shape else 1
    bad = index_out_of_range(index, size)
    if bad is None:
        return
    if len(shape) <= 1:
        raise IndexError("index out of range in self")
    if size == 0:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if d == 1 or numel(shape) == 0:
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={bad} axis_dim={size}")
    raise IndexError("index out of range in self")


def _index_select_kernel(a, dim, index):
    d = _index_select_check(a, dim, index)
    _index_select_range(a.shape, d, index)
    if a.ndim == 0:
        return a.copy()
    return np.take(a, index.reshape(-1), axis=d)


def _index_select_meta(a, dim, index):
    d = _index_select_check(a, dim, index)
    if len(a.shape) == 0:
        return Spec((), a.dtype)
    n = index.shape[0] if len(index.shape) else 1
    return Spec(tuple(a.shape[:d]) + (n,) + tuple(a.shape[d + 1:]), a.dtype)


def _index_select_derivative(g, shape, dim, index):
    if len(shape) == 0:
        return (g.sum().reshape(()), None, None)
    return (g.new_zeros(tuple(shape)).index_add(dim, index.reshape(-1), g), None, None)


index_select = register(
    "index_select", kernel=_index_select_kernel, meta=_index_select_meta,
    quantized={"indexing": True},
    nondiff_args=(2,), onnx=ox.index_select,
    node="IndexSelectBackward0", derivative=_index_select_derivative,
    save=lambda out, a, dim, index: (a.shape, dim, index),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, _ints(rng, n, s[d])),
                                    name=f"{s} {d} {n}")
                             for s, d, n in (((3, 4), 0, (5,)), ((3, 4), 1, (2,)),
                                             ((2, 3, 4), -1, (0,)), ((5,), 0, (3,)))],
    saved_names=("self_sym_sizes", "dim", "index"))

# ---------------------------------------------------------------- gather, scatter


def _gather_check(a, dim, index, name="gather", what="input", src=None):
    n = len(a.shape)
    d = wrap_dim(dim, n)
    if bad_index_dtype(index) and numel(index.shape):  # (an empty index is not checked)
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if src is not None and mismatched_source(a, src):  # (the scatters': before the dims)
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    # (Neither gather nor the scatters check anything of an empty index's shape.)
    if len(index.shape) != n and not (n == 0 and len(index.shape) <= 1) and \
            not (len(index.shape) == 0 and n <= 1) and numel(index.shape):
        raise RuntimeError(
            f"Index tensor must have the same number of dimensions as {what} tensor")
    return d


def _gather_sizes_check(shape, d, index_shape) -> None:
    """gather's index may be no larger than self along the other dims (an empty one may)."""
    if not numel(index_shape):
        return
    shape, index_shape = tuple(shape) or (1,), tuple(index_shape) or (1,)
    for i, (n, m) in enumerate(zip(index_shape, shape)):
        if i != d and n > m:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index "
                f"{size_str(index_shape if len(index_shape) > 1 or n != 1 else ())} to be no "
                f"larger than self {size_str(shape)} apart from dimension {d}")


def scatter_sizes_check(shape, d, index_shape, src=None) -> None:
    """The scatters' index may be no larger than self along the other dims, nor than a
    tensor src along any (no check for an empty index)."""
    if not numel(index_shape):
        return
    wide = tuple(index_shape) or (1,)
    bad = any(i != d and n > m for i, (n, m) in enumerate(zip(wide, tuple(shape) or (1,))))
    src_shape = tuple(src.shape) if hasattr(src, "shape") else None
    if not bad and src_shape is not None:
        bad = any(n > m for n, m in zip(wide, src_shape or (1,)))
    if bad:
        tail = "" if src_shape is None else f" and to be no larger size than src " \
                                            f"{size_str(src_shape)}"
        raise RuntimeError(f"Expected index {size_str(index_shape)} to be no larger than self "
                           f"{size_str(shape)} apart from dimension {d}{tail}")


def check_gather_index(shape, d, index) -> None:
    """gather's and scatter's error for an index outside [0, size) of dim `d`."""
    size = shape[d] if len(shape) else 1
    bad = index_out_of_range(index, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")


def _gather_kernel(a, dim, index, sparse_grad=False):
    d = _gather_check(a, dim, index)
    _gather_sizes_check(a.shape, d, index.shape)
    check_gather_index(a.shape, d, index)
    if not index.size:  # (which may be larger than `a` along other dims, or have more)
        return np.empty(index.shape, a.dtype)
    if a.ndim == 0 or index.ndim == 0:
        return a.reshape(-1)[index.reshape(-1)].reshape(index.shape)
    sl = tuple(slice(0, s) for s in index.shape)
    sl = sl[:d] + (slice(None),) + sl[d + 1:]
    return np.take_along_axis(a[sl], index, d)


def _gather_meta(a, dim, index, sparse_grad=False):
    _gather_sizes_check(tuple(a.shape), _gather_check(a, dim, index), tuple(index.shape))
    return Spec(tuple(index.shape), a.dtype)


def _gather_samples(rng, dt):
    out = []
    for s, d, i in (((3, 4), 1, (3, 2)), ((3, 4), 0, (2, 4)), ((2, 3, 4), -1, (2, 3, 5)),
                    ((3, 4), 1, (2, 2))):
        out.append(Sample((rand_array(rng, s, dt), d, _ints(rng, i, s[d])), name=f"{s} {d} {i}"))
    return out


gather = register(
    "gather", kernel=c_contiguous(_gather_kernel), meta=_gather_meta, node="GatherBackward0",
    nondiff_args=(2,), onnx=ox.gather,
    derivative=lambda g, shape, dim, index: (
        g.new_zeros(tuple(shape)).scatter_add(dim, index, g), None, None, None),
    save=lambda out, a, dim, index, sparse_grad=False: (a.shape, dim, index),
    samples=_gather_samples, saved_names=("", "dim", "index"))


def _scatter_positions(a_shape, d, index):
    grids = list(np.indices(index.shape, sparse=True))
    grids[d] = index
    return tuple(grids)


def _whole_rows(a, d: int, index, vals) -> bool:
    """Whether a scatter along dim 0 of matrix `a` writes whole rows: each row of `index`
    one position repeated across `a`'s columns (an expanded column, as graph networks write
    it), and `vals` of index's shape."""
    return d == 0 and a.ndim == 2 and index.ndim == 2 and index.shape[1] == a.shape[1] and \
        vals.shape == index.shape and index.shape[0] > 0 and \
        (index.strides[1] == 0 or bool((index == index[:, :1]).all()))


def _scatter_check(a, dim, index, src, name="scatter"):
    d = _gather_check(a, dim, index, name, "self", src)
    # (A 0-d index or src counts as one dimension, as for PyTorch.)
    if hasattr(src, "shape") and max(len(src.shape), 1) != max(len(index.shape), 1) and \
            numel(index.shape):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    scatter_sizes_check(tuple(a.shape), d, tuple(index.shape), src)
    return d


def _scatter_kernel(a, dim, index, src, reduce_add=False):
    d = _scatter_check(a, dim, index, src)
    check_gather_index(a.shape, d, index)
    out = a.copy()
    if not index.size:  # (an empty index of any shape writes nothing)
        return out
    if a.ndim == 0:
        # (Only the src elements the index covers take part, the last one written wins.)
        vals = np.asarray(src).reshape(-1)[:index.size] if np.ndim(src) else \
            np.full(index.size, src)
        out[()] = (a + np.sum(vals)) if reduce_add else vals[-1]
        return out
    if index.ndim == 0:  # one position of a 1-d self (a 0-d src: one value)
        index = index.reshape(1)
        if isinstance(src, np.ndarray):
            src = src.reshape(-1)
    pos = _scatter_positions(a.shape, d, index)
    if isinstance(src, np.ndarray) and src.ndim:
        vals = src[tuple(slice(0, s) for s in index.shape)].astype(a.dtype, copy=False)
    else:
        vals = np.asarray(src).astype(a.dtype)
    if reduce_add and a.dtype in HALF:
        # PyTorch sums a half type in float32 (onto self's values) and rounds once.
        wide = out.astype(F32)
        _add_at(wide, pos, vals.astype(F32))
        return wide.astype(a.dtype)
    if reduce_add and _whole_rows(a, d, index, vals):
        # A graph network's `out.scatter_add_(0, i[:, None].expand(-1, d), messages)`: whole
        # rows added in index order, in C.
        add_rows(out, index[:, 0], vals)
    elif reduce_add:
        _add_at(out, pos, vals)
    else:
        out[pos] = vals
    return out


def _add_at(out: np.ndarray, pos: tuple, vals) -> None:
    """`np.add.at(out, pos, vals)` for C-contiguous `out` and a tuple of broadcasting index
    grids: the same additions in the same order (the index's C order), given as flat
    positions, which NumPy's add.at runs in its fast loop (the tuple form is ~10x slower)."""
    if not out.flags.c_contiguous or out.ndim < 2:
        np.add.at(out, pos, vals)
        return
    shape = np.broadcast_shapes(*(np.shape(p) for p in pos))
    flat = np.zeros(shape, np.intp)
    step = 1
    for axis in range(out.ndim - 1, -1, -1):  # (the positions' row-major offsets)
        flat += np.asarray(pos[axis], np.intp) * step
        step *= out.shape[axis]
    np.add.at(out.reshape(-1), flat.reshape(-1),
              np.broadcast_to(np.asarray(vals, out.dtype), shape).reshape(-1))


def _scatter_meta(a, dim, index, src):
    _scatter_check(a, dim, index, src)
    return Spec(tuple(a.shape), a.dtype)


def _unique_index_samples(rng, dt, with_src=True):
    """Scatter samples whose index holds no duplicate along `dim` (the result is then
    deterministic, so values and gradients can be compared)."""
    out = []
    for s, d, i in (((3, 4), 1, (3, 2)), ((4, 3), 0, (2, 3)), ((2, 3, 4), 2, (2, 3, 3)),
                    ((3, 4), 0, (2, 2))):
        idx = np.argsort(rng.random(i[:d] + (s[d],) + i[d + 1:]), axis=d)
        idx = np.take(idx, np.arange(i[d]), axis=d).astype(np.int64)
        src = rand_array(rng, i, dt) if with_src else 1.5
        out.append(Sample((rand_array(rng, s, dt), d, idx, src), name=f"{s} {d} {i}"))
    return out


def _scatter_add_samples(rng, dt):
    """Like scatter's samples, but with repeated indices (their values add up)."""
    return [Sample(s.args[:2] + (_ints(rng, s.args[2].shape, s.args[0].shape[s.args[1]]),)
                   + s.args[3:], name=s.name) for s in _unique_index_samples(rng, dt)]


def _zero_at(g, dim, index):
    return g.scatter(dim, index, 0.0) if g.dim() else g * 0


def src_grad(gs, src_shape, node: str):
    """src's gradient `gs` (the index's shape) as PyTorch's engine takes it from the node:
    summed down to src's shape where src's broadcasts to it, else its error (src larger than
    the index, which PyTorch's forward allows)."""
    have, want = tuple(gs.shape), tuple(src_shape)
    if have == want:
        return gs
    lead = len(have) - len(want)
    if lead >= 0 and all(w in (1, h) for w, h in zip(want, have[lead:])):
        return gs.sum_to_size(want) if want else gs.sum()
    raise RuntimeError(f"Function {node} returned an invalid gradient at index 1 - got "
                       f"{size_str(have)} but expected shape compatible with {size_str(want)}")


scatter = register(
    "scatter.src", kernel=_scatter_kernel, meta=_scatter_meta, node="ScatterBackward0",
    nondiff_args=(2,),
    derivative=lambda g, dim, index, src_shape: (
        _zero_at(g, dim, index), None, None,
        src_grad(g.gather(dim, index), src_shape, "ScatterBackward0")),
    save=lambda out, a, dim, index, src: (dim, index, tuple(src.shape)),
    samples=_unique_index_samples, public="scatter", saved_names=("dim", "index", ""),
    onnx=ox.scatter, lowering=lambda v, a, dim, index, src: v.scatter(a, dim, index, src))
scatter_value = register(
    "scatter.value", kernel=_scatter_kernel, meta=_scatter_meta, node="ScatterBackward1",
    nondiff_args=(2,),
    derivative=lambda g, dim, index: (_zero_at(g, dim, index), None, None, None),
    save=lambda out, a, dim, index, value: (dim, index),
    samples=lambda rng, dt: _unique_index_samples(rng, dt, False), public="scatter",
    saved_names=("dim", "index"), onnx=ox.scatter)
scatter_add = register(
    "scatter_add", kernel=lambda a, dim, index, src: _scatter_kernel(a, dim, index, src, True),
    nondiff_args=(2,),
    meta=_scatter_meta, node="ScatterAddBackward0",
    derivative=lambda g, dim, index, src_shape: (
        g, None, None, src_grad(g.gather(dim, index), src_shape, "ScatterAddBackward0")
        if index is not None else None),
    # The index only for src's gradient (as PyTorch saves it): with src needing none, the
    # index may change in place afterwards.
    save=lambda out, a, dim, index, src: (dim, index if getattr(src, "_rg", False) else None,
                                          tuple(src.shape)),
    samples=_scatter_add_samples, saved_names=("dim", "index", ""), onnx=ox.scatter,
    lowering=lambda v, a, dim, index, src: v.scatter(a, dim, index, src, True))
scatter_ = inplace_variant(scatter, "scatter_.src")
scatter_value_ = inplace_variant(scatter_value, "scatter_.value")
scatter_add_ = inplace_variant(scatter_add, "scatter_add_")

# ---------------------------------------------------------------- index_add


def _index_add_check(a, dim, index, source) -> int:
    d = wrap_dim(dim, len(a.shape))
    if len(index.shape) > 1:
        raise IndexError(
            "index_add_(): Index is supposed to be a vector, but got dim: "
            f"{len(index.shape)} with type: {dtype_of(index).legacy} and size: "
            f"{size_str(index.shape)}")
    bad = bad_index_dtype(index)
    if bad:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {bad}")
    names = mismatched_source(a, source)
    if names:
        raise RuntimeError(f"index_add_(): self ({names[0]}) and source ({names[1]}) must have "
                           "the same scalar type")
    check_source_shapes("index_add_", tuple(a.shape), d, numel(index.shape),
                        tuple(source.shape))
    return d


def check_source_shapes(name: str, shape, d: int, n: int, src_shape) -> None:
    """`name`'s (`index_add_`, `index_reduce_`) checks of a source of `src_shape` for self of
    `shape`, `n` indices along dim `d`: one slice per index along `d`, self's shape elsewhere
    (a 0-d source or self counts whole), in PyTorch's order and messages."""
    if d != 0 and d >= len(src_shape):
        raise RuntimeError(f"{name}(): Indexing dim {d} is out of bounds of the source "
                           f"tensor with dim {len(src_shape)}")
    if n != (src_shape[d] if src_shape else 1):
        if not src_shape:  # PyTorch's message asks a 0-d source for its size along d
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        raise RuntimeError(f"{name}(): Number of indices ({n}) should be equal to "
                           f"source.size(dim): ({src_shape[d]}), for dim: {d}")
    rest, src_rest = list(shape), list(src_shape)
    if rest and src_rest:
        del rest[d], src_rest[d]
    if rest != src_rest:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {size_str(shape)} "
                           f"source.shape = {size_str(src_shape)}")


def _index_add_range(a, d, index, alpha) -> None:
    """index_add's error for a position outside dim `d` (negative ones included): PyTorch's
    CPU kernel goes through scatter_add's check (a RuntimeError naming the position) for a
    tensor of 2 or more dims, a long index and alpha 1, else its own (an IndexError); an empty
    self or index of 2 or more dims is not checked."""
    fast = a.ndim > 1 and index.dtype == np.int64 and alpha.__class__ is not bool and \
        alpha == 1
    if a.ndim > 1 and not (a.size and index.size):
        return
    size = a.shape[d] if a.ndim else 1
    bad = index_out_of_range(index, size)
    if bad is None:
        return
    if fast:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    raise IndexError("index out of range in self")


def _index_add_kernel(a, dim, index, source, alpha=1):
    d = _index_add_check(a, dim, index, source)
    _index_add_range(a, d, index, alpha)
    out = a.copy()
    # alpha in self's dtype, as PyTorch converts it (an int tensor takes int(alpha), a bool
    # one bool(alpha)).
    alpha = np.asarray(alpha).astype(a.dtype)
    if a.ndim == 0:
        if not index.size:
            return out
        return (out + np.sum(np.asarray(source).astype(a.dtype) * alpha)).astype(a.dtype)
    if not out.size:
        return out
    src = np.asarray(source).astype(a.dtype, copy=False) * alpha
    if src.ndim == 0:
        src = src.reshape((1,) * a.ndim)
    if a.dtype in HALF and a.ndim > 1 and index.dtype == np.int64 and \
            alpha.dtype != np.bool_ and alpha == 1:
        # PyTorch's scatter_add path (see `_index_add_range`): a half type summed in float32
        # onto self's values, rounded once.
        wide = out.astype(F32)
        np.add.at(wide, (slice(None),) * d + (index.reshape(-1),), src.astype(F32))
        return wide.astype(a.dtype)
    if d == 0 and src.shape == (index.size, *a.shape[1:]):
        add_rows(out, index.reshape(-1), src)  # (in C: whole rows in index order)
        return out
    pos = (slice(None),) * d + (index.reshape(-1),)
    np.add.at(out, pos, src)
    return out


def _index_add_meta(a, dim, index, source, alpha=1):
    _index_add_check(a, dim, index, source)
    return Spec(tuple(a.shape), a.dtype)


def _index_add_derivative(g, dim, index, alpha, src_ndim, source=None):
    """self's gradient is `g`; source's the rows `index` picks, times alpha (only where
    `_index_add_save` kept the index, that is where source requires grad)."""
    if index is None:
        return (g, None, None, None, None)
    if g.dim() == 0:
        return (g, None, None, g * alpha, None)
    gs = g.index_select(dim, index.reshape(-1))
    if src_ndim == 0:
        gs = gs.reshape(())
    return (g, None, None, gs * alpha if alpha != 1 else gs, None)


def _index_add_save(out, a, dim, index, source, alpha=1):
    """IndexAddBackward0's saved values: the index and source only where source requires
    grad, as PyTorch saves them (source itself is unused here, but saving it makes an
    in-place change of it an error, as there)."""
    wants = getattr(source, "_rg", False)
    return (dim, index if wants else None, alpha, len(source.shape),
            source if wants else None)


index_add = register(
    "index_add", kernel=_index_add_kernel, meta=_index_add_meta, node="IndexAddBackward0",
    nondiff_args=(2,),
    derivative=_index_add_derivative,
    save=_index_add_save, saved_names=("dim", "index", "alpha", "source_dim", "source"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, _ints(rng, (n,), s[d]),
                                     rand_array(rng, _with(s, d, n), dt), al),
                                    name=f"{s} {d} {n} {al}")
                             for s, d, n, al in (((3, 4), 0, 5, 1), ((3, 4), 1, 2, 2.0),
                                                 ((2, 3, 4), -1, 0, 1), ((5,), 0, 3, -1))])
index_add_ = inplace_variant(index_add, "index_add_")

# ---------------------------------------------------------------- masks


def _mask_check(mask, name):
    dt = mask.dtype if hasattr(mask.dtype, "category") else _dtype.FROM_NP[mask.dtype]
    if dt is not _dtype.bool_:
        if name == "masked_select:":
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        raise RuntimeError(f"{name} only supports boolean masks, but got mask with dtype "
                           f"{dt.cpp}")


def masked_fill_arguments_check(name: str, mask, value) -> None:
    """PyTorch's TypeError for `name(mask, value)` (the method forms `masked_fill` and
    `masked_fill_`) when the mask is not a tensor or the value neither a tensor nor a
    number."""
    if isinstance(mask, Tensor) and isinstance(value, (Tensor, numbers.Number, np.generic)):
        return  # the common call, at the cost of two isinstance tests (NumPy scalars pass)

    def is_number(v):
        return isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, Tensor)

    def kind(v):
        return "Tensor" if isinstance(v, Tensor) else type(v).__name__

    def shown(v, ok):
        return kind(v) if ok else f"!{kind(v)}!"

    lines = []
    for label, check in (("Tensor value", lambda v: isinstance(v, Tensor)),
                         ("Number value", is_number)):
        lines.append(f" * (Tensor mask, {label})\n      didn't match because some of the "
                     f"arguments have invalid types: ({shown(mask, isinstance(mask, Tensor))}, "
                     f"{shown(value, check(value))})\n")
    raise TypeError(f"{name}() received an invalid combination of arguments - got "
                    f"({kind(mask)}, {kind(value)}), but expected one of:\n" + "".join(lines))


def _masked_fill_checks(a, mask, value, inplace: bool) -> tuple:
    """masked_fill's checks in PyTorch's order; the result's shape. The functional form
    broadcasts mask and self first (the mask first: its message names the mask's size "a"),
    the in-place one checks the value's dims and the mask's dtype first, then broadcasts self
    and mask (self first)."""
    if not inplace:
        shape = broadcast_shapes(tuple(mask.shape), tuple(a.shape))
    if hasattr(value, "shape") and len(value.shape):
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{len(value.shape)} dimension(s).")
    _mask_check(mask, "masked_fill_")
    if inplace:
        shape = broadcast_shapes(tuple(a.shape), tuple(mask.shape))
    return shape


def _masked_fill_kernel(a, mask, value, inplace=False):
    _masked_fill_checks(a, mask, value, inplace)
    v = np.asarray(checked_scalar(value, a.dtype))
    return np.where(mask, v.astype(a.dtype), a)


def _masked_fill_meta(a, mask, value, inplace=False):
    return Spec(_masked_fill_checks(a, mask, value, inplace), a.dtype)


def _masked_fill_inplace_kernel(a, mask, value):
    return c_contiguous(_masked_fill_kernel)(a, mask, value, True)


def _masked_fill_inplace_meta(a, mask, value):
    return _masked_fill_meta(a, mask, value, True)


def _masked_fill_decomposition(a, mask, value):
    # The value's conversion is checked as the kernel checks it (a number beyond a half
    # type's range is an error, not inf).
    checked_scalar(value, a.dtype.np)
    return a.where(mask.logical_not(), value)


def _mask_samples(value):
    def samples(rng, dt):
        out = []
        for s, m in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()), ((0, 2), (2,))):
            v = value(rng, dt)
            out.append(Sample((rand_array(rng, s, dt), _mask(rng, m), v),
                              name=f"{s} {m}"))
        return out

    return samples


masked_fill = register(
    "masked_fill.Scalar", kernel=c_contiguous(_masked_fill_kernel), meta=_masked_fill_meta,
    nondiff_args=(1,), result_order="contiguous",
    node="MaskedFillBackward0",
    derivative=lambda g, mask: (g.masked_fill(mask, 0.0), None, None),
    save=lambda out, a, mask, value: (mask,), samples=_mask_samples(lambda rng, dt: -1.5),
    public="masked_fill", decomposition=_masked_fill_decomposition, onnx=ox.masked_fill,
    saved_names=("mask",), lowering=lambda v, a, mask, value: v.masked_fill(a, mask, value))
masked_fill_tensor = register(
    "masked_fill.Tensor", kernel=c_contiguous(_masked_fill_kernel), meta=_masked_fill_meta,
    nondiff_args=(1,), result_order="contiguous",
    node="MaskedFillBackward1",
    derivative=lambda g, mask: (g.masked_fill(mask, 0.0), None, (g * mask).sum()),
    save=lambda out, a, mask, value: (mask,), tensor_args=(2,),
    samples=_mask_samples(lambda rng, dt: rand_array(rng, (), dt)), public="masked_fill",
    decomposition=lambda a, mask, value: a.where(mask.logical_not(), value),
    lowering=lambda v, a, mask, value: v.masked_fill(a, mask, value), onnx=ox.masked_fill)
_MASKED_FILL_EXPANDED = expanded_warning("masked_fill_", "tensor[mask] = scalar")
masked_fill_ = inplace_variant(masked_fill, "masked_fill_.Scalar",
                               overlap_ok=_MASKED_FILL_EXPANDED,
                               kernel=_masked_fill_inplace_kernel,
                               meta=_masked_fill_inplace_meta)
masked_fill_tensor_ = inplace_variant(masked_fill_tensor, "masked_fill_.Tensor",
                                      overlap_ok=_MASKED_FILL_EXPANDED,
                                      kernel=_masked_fill_inplace_kernel,
                                      meta=_masked_fill_inplace_meta)


def _masked_select_kernel(a, mask):
    _mask_check(mask, "masked_select:")
    shape = broadcast_shapes(mask.shape, a.shape)  # (mask first: PyTorch's message's order)
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


def _masked_select_meta(a, mask):
    _mask_check(mask, "masked_select:")
    _data_dependent("masked_select")


masked_select = register(
    "masked_select", kernel=_masked_select_kernel, meta=_masked_select_meta, data_dependent=True,
    nondiff_args=(1,),
    node="MaskedSelectBackward0",
    derivative=lambda g, shape, mask: (_masked_select_backward(g, shape, mask), None),
    save=lambda out, a, mask: (broadcast_shapes(tuple(a.shape), tuple(mask.shape)), mask),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), _mask(rng, m)))
                             for s, m in (((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (2, 4)),
                                          ((), ()))], onnx=ox.masked_select)


def _masked_select_backward(g, shape, mask):
    # (As PyTorch's: the picked values scattered back into zeros, a 0-d mask included.)
    return g.new_zeros(tuple(shape)).masked_scatter(mask, g)


def _nonzero_meta(a):
    _data_dependent("nonzero")


def _nonzero_kernel(a):
    # Column-major, as PyTorch allocates it (strides (1, n)): each dim's positions contiguous.
    found = np.argwhere(a)
    if not found.size:  # (strides (1, n) all the same, which NumPy's empty array lacks)
        return strided_empty(np.empty(found.shape, np.int64), (1, found.shape[0]))
    out = np.empty(found.shape[::-1], np.int64).T
    out[...] = found
    return out


nonzero = register(
    "nonzero", kernel=_nonzero_kernel, meta=_nonzero_meta,
    differentiable=False, data_dependent=True,
    samples=lambda rng, dt: [Sample((_mask(rng, s).astype(dt),))
                             for s in ((3, 4), (5,), (), (0, 2), (2, 2, 2))], onnx=ox.nonzero)

# ---------------------------------------------------------------- advanced indexing


def np_indices(indices, ndim: int, shape, bounds: bool = True, warn: bool = True) -> tuple:
    """The NumPy index for `index.Tensor`'s list (None keeps a dimension), with PyTorch's
    checks in its order: the index dtypes and the masks' sizes, the index tensors' broadcast,
    then (only where the result has elements) each position against its dim."""
    if len(indices) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {len(indices)})")
    out = []
    dim = 0
    for i in indices:
        i = _raw(i)
        if i is None:
            out.append(slice(None))
            dim += 1
            continue
        if i.dtype == np.bool_ or i.dtype == np.uint8:
            if i.dtype == np.uint8 and warn:  # a byte mask: still one, as PyTorch's
                warn_at_caller("indexing with dtype torch.uint8 is now deprecated, please use "
                               "a dtype torch.bool instead.")
            i = i.astype(bool)
            for k in range(i.ndim):
                if dim + k >= ndim or i.shape[k] != shape[dim + k]:
                    raise IndexError(
                        f"The shape of the mask {size_str(i.shape)} at index {k} does not match "
                        f"the shape of the indexed tensor {size_str(shape)} at index {dim + k}")
            out.append(i)
            dim += i.ndim
            continue
        if i.dtype != np.int64 and i.dtype != np.int32:  # (no other width: PyTorch's rule)
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if dim >= ndim:
            raise IndexError(f"too many indices for tensor of dimension {ndim}")
        out.append(i)
        dim += 1
    if dim > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    bshape = _broadcast_index_shape(out)
    if 0 in shape and numel(bshape):
        # (No position is valid in an empty dim: checked with the index tensors, whatever
        # the other dims hold.)
        dims = _dims_of(out)
        if any(shape[k] == 0 for k in range(len(shape)) if dims[k] is not None):
            raise IndexError("index is out of bounds for dimension with size 0")
    return _in_bounds(out, shape, bshape) if bounds else tuple(out)


def _broadcast_index_shape(out: list) -> tuple:
    """The broadcast shape of np_indices' index arrays (PyTorch turns a mask of k dims into k
    long index tensors, its positions, first), or PyTorch's error."""
    shapes = []
    for i in out:
        if i.__class__ is slice:
            continue
        if i.dtype == bool:
            shapes.extend([(int(i.sum()),)] * max(i.ndim, 1))
        else:
            shapes.append(i.shape)
    if len(shapes) == 1:
        return shapes[0]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(size_str(s) for s in shapes)}") from None


def _in_bounds(out: list, shape, bshape) -> tuple:
    """`out` (np_indices' list) with its positions checked against their dims, where the
    result (of the index tensors' broadcast shape `bshape`) has elements: an empty one reads
    none, so PyTorch checks none (out-of-range ones are then replaced, for NumPy)."""
    checks = []  # (entry, its dim's size, its number among the index tensors), out of range
    dim = number = 0
    for k, i in enumerate(out):
        if i.__class__ is slice:
            dim += 1
        elif i.dtype == bool:  # (positions, in range; k index tensors to PyTorch)
            dim += i.ndim
            number += i.ndim
        else:
            size = shape[dim]
            if i.size and (i.min() < -size or i.max() >= size):  # (the common case: none)
                checks.append((k, size, number))
            dim += 1
            number += 1
    if not checks:
        return tuple(out)
    out = list(out)
    dims = _dims_of(out)
    kept = [shape[k] for k in range(len(shape)) if dims[k] is None]
    bad = [(k, size, n, (out[k] < -size) | (out[k] >= size)) for k, size, n in checks]
    if not (numel(bshape) and numel(kept)):  # (an empty result reads no position)
        for k, size, _, wrong in bad:
            if size:
                out[k] = np.where(wrong, 0, out[k])
        return tuple(out)
    # The first element (in the broadcast order) with a position out of range, and its
    # first index tensor so: PyTorch's kernel checks element by element.
    first = min(int(np.flatnonzero(np.broadcast_to(w, bshape))[0]) for _, _, _, w in bad)
    for k, size, n, wrong in bad:
        if np.broadcast_to(wrong, bshape).reshape(-1)[first]:
            value = int(np.broadcast_to(out[k], bshape).reshape(-1)[first])
            raise IndexError(f"index {value} is out of bounds for dimension {n} with size "
                             f"{size}")
    return tuple(out)  # (not reached)


def _result_shape(idx: tuple, shape: tuple, bshape: tuple) -> tuple:
    """The shape of `a[idx]` for np_indices' list `idx` over a tensor of `shape` (NumPy's
    and PyTorch's rule: adjacent index arrays put their broadcast shape in their place, else
    first), computed without indexing."""
    kept, positions, dim = [], [], 0
    for k, i in enumerate(idx):
        if i.__class__ is slice:
            kept.append((k, shape[dim]))
            dim += 1
        else:
            positions.append(k)
            dim += i.ndim if i.dtype == bool else 1  # (a 0-d mask adds a dim, takes none)
    trailing = tuple(shape[dim:])
    if positions and positions[-1] - positions[0] + 1 == len(positions):
        return (tuple(n for k, n in kept if k < positions[0]) + tuple(bshape)
                + tuple(n for k, n in kept if k > positions[-1]) + trailing)
    return tuple(bshape) + tuple(n for _, n in kept) + trailing


def _dims_of(out: list) -> list:
    """For each dim the index entry covering it (None where a slice keeps it whole), dims past
    the list kept."""
    dims = []
    for i in out:
        if isinstance(i, slice):
            dims.append(None)
        else:
            dims.extend([i] * (i.ndim if i.dtype == bool else 1))
    return dims + [None] * 64


def _index_kernel(a, indices):
    idx = np_indices(indices, a.ndim, a.shape)
    out = a[idx]
    if a.flags.c_contiguous or out.ndim < 2 or out.size <= 1:
        # (Row-major input: TensorIterator's order is row-major too, as NumPy's result.)
        return in_format(out, None)
    return _iterator_layout(out, a, idx)


def _iterator_layout(out: np.ndarray, a: np.ndarray, idx: tuple) -> np.ndarray:
    """`out` (`a[idx]`) laid out as PyTorch's index kernel (a TensorIterator over `a`
    restrided to the result's shape, 0 along the index dims, then the index tensors, 0 along
    the kept dims) allocates it: the kept dims in `a`'s memory order, the index dims
    row-major, strides multiplied through every size (an empty dim's too)."""
    from .._shapes import iterator_perm

    item = a.itemsize
    parts = [i for i in idx if not isinstance(i, slice)]
    # (A mask of k dims is k index tensors, its positions along each.)
    index_shapes = [s for i in parts for s in (
        [(int(i.sum()),)] * i.ndim if i.dtype == bool else [i.shape])]
    bshape = np.broadcast_shapes(*index_shapes)
    # The result's dims: each a kept dim of `a` (its stride) or an index dim (None).
    dims = _dims_of(list(idx))[:a.ndim]
    positions = [k for k, i in enumerate(dims) if i is not None]
    kept = [k for k, i in enumerate(dims) if i is None]
    if not positions or any(i.ndim == 0 for i in parts):  # (a 0-d mask: a new dim)
        return in_format(out, None)
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    if adjacent:
        before, after = kept[:sum(1 for k in kept if k < positions[0])], \
            [k for k in kept if k > positions[-1]]
        layout = [("a", k) for k in before] + [("i", j) for j in range(len(bshape))] + \
            [("a", k) for k in after]
    else:
        layout = [("i", j) for j in range(len(bshape))] + [("a", k) for k in kept]
    shape = out.shape
    a_strides = [s // item for s in a.strides]
    src = [a_strides[k] if kind == "a" else 0 for kind, k in layout]
    n_before = sum(1 for kind, _ in layout[:next(
        (p for p, (kind, _) in enumerate(layout) if kind == "i"), 0)] if kind == "a")
    operands = [src]
    for s in index_shapes:
        own = (1,) * (len(bshape) - len(s)) + tuple(s)
        c = [0] * len(bshape)
        acc = 1
        for j in reversed(range(len(bshape))):
            c[j] = acc if own[j] == bshape[j] or bshape[j] == 1 else 0
            acc *= own[j]
        full = [0] * len(layout)
        for j in range(len(bshape)):
            full[n_before + j] = c[j]
        operands.append(full)

    perm = iterator_perm(shape, operands)
    want = [0] * len(shape)
    acc = 1
    for d in perm:
        want[d] = acc
        acc *= shape[d]
    if tuple(w * item for w in want) == out.strides:
        return out
    laid = np.lib.stride_tricks.as_strided(
        np.empty(max(out.size, 1), out.dtype), shape, tuple(w * item for w in want))
    laid[...] = out
    return laid


def _index_shape(shape, indices):
    """Result shape of advanced indexing with integer index tensors (NumPy's rules)."""
    adv = [k for k, i in enumerate(indices) if i is not None]
    bshape = broadcast_shapes(*[tuple(indices[k].shape) for k in adv])
    contiguous = adv == list(range(adv[0], adv[-1] + 1))
    rest = [shape[k] for k in range(len(shape)) if k >= len(indices) or indices[k] is None]
    if contiguous:
        before = [shape[k] for k in range(adv[0])]
        after = [shape[k] for k in range(adv[-1] + 1, len(shape))]
        return tuple(before) + bshape + tuple(after)
    return bshape + tuple(rest)


def _index_meta(a, indices):
    if getattr(a, "_data", None) is not None and all(
            getattr(i, "_data", None) is not None for i in indices if i is not None):
        # Real tensors (dispatch asking for the error of a failed kernel): use the data.
        # (No second deprecation warning: the kernel gave it.)
        return Spec(a._data[np_indices(indices, a.ndim, a.shape, warn=False)].shape, a.dtype)
    for i in indices:
        if i is not None and i.dtype in (_dtype.bool_, _dtype.uint8):
            _data_dependent("index with a boolean mask")
    if sum(i is not None for i in indices) == 0:
        return Spec(tuple(a.shape), a.dtype)
    if len(indices) > len(a.shape):
        raise IndexError(f"too many indices for tensor of dimension {len(a.shape)}")
    return Spec(_index_shape(tuple(a.shape), list(indices)), a.dtype)


def _index_samples(rng, dt):
    x = rand_array(rng, (3, 4), dt)
    y = rand_array(rng, (2, 3, 4), dt)
    return [
        Sample((x, [_ints(rng, (5,), 3)]), name="rows"),
        Sample((x, [None, _ints(rng, (2, 2), 4)]), name="cols 2-d"),
        Sample((x, [_ints(rng, (3,), 3), _ints(rng, (3,), 4)]), name="pairs"),
        Sample((x, [rng.random((3, 4)) > 0.5]), name="mask"),
        Sample((x, [rng.random(3) > 0.5]), name="row mask"),
        Sample((y, [_ints(rng, (2,), 2), None, _ints(rng, (2,), 4)]), name="split"),
        Sample((y, [None, _ints(rng, (4,), 3), _ints(rng, (1,), 4)]), name="bcast"),
        Sample((x, [np.zeros(0, np.int64)]), name="empty"),
    ]


def _index_derivative(g, shape, indices):
    # (Through the op: the public `index_put` takes no None, which keeps a dim whole.)
    return (_call(index_put, g.new_zeros(tuple(shape)), list(indices), g, True), None)


index = register(
    "index.Tensor", kernel=_index_kernel, meta=_index_meta, node="IndexBackward0",
    quantized={"indexing": True},
    derivative=_index_derivative, save=lambda out, a, indices: (a.shape, list(indices)),
    samples=_index_samples, public="index", onnx=ox.index_tensor)


def _index_put_check(a, values) -> None:
    da = a.dtype if hasattr(a.dtype, "category") else _dtype.FROM_NP[a.dtype]
    if hasattr(values, "dtype"):
        dv = values.dtype if hasattr(values.dtype, "category") else _dtype.FROM_NP[values.dtype]
        if dv is not da:
            raise RuntimeError(
                "Index put requires the source and destination dtypes match, got "
                f"{da.legacy} for the destination and {dv.legacy} for the source.")


def _fills_mask(indices, values, accumulate) -> bool:
    """Whether PyTorch's index_put_ runs this as `masked_fill_`: no accumulation, one index
    tensor, a bool (or uint8) mask, and a value of one element, which then converts as a
    number (of any dtype, into any shape) instead of having to match `self`'s dtype."""
    if accumulate or not hasattr(values, "shape") or numel(values.shape) != 1:
        return False
    mask = None
    for i in indices:
        if i is not None:
            if mask is not None or dtype_of(i) not in (_dtype.bool_, _dtype.uint8):
                return False
            mask = i
    if mask is not None and dtype_of(mask) is _dtype.uint8:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")
    return mask is not None


def _fill_number(v: np.ndarray, dt: np.dtype):
    """The one element of `v` as masked_fill_ converts its value for an array of `dt`."""
    return np.asarray(checked_scalar(v.reshape(()).item(), dt)).astype(dt)


def _index_put_checked(a, indices, v, warn: bool = True) -> tuple:
    """index_put_'s checks on arrays, in PyTorch's order: the index tensors (dtypes, masks,
    broadcast), the value's shape against the indexed result's, its dtype, then the positions
    (its kernel's); the NumPy index."""
    idx = np_indices(indices, a.ndim, a.shape, bounds=False, warn=warn)
    bshape = _broadcast_index_shape(idx)
    result_shape = _result_shape(idx, a.shape, bshape)
    if len(v.shape) > len(result_shape) or not all(
            n in (1, m) for n, m in zip(v.shape[::-1], result_shape[::-1])):
        raise RuntimeError(f"shape mismatch: value tensor of shape {size_str(v.shape)} "
                           "cannot be broadcast to indexing result of shape "
                           f"{size_str(result_shape)}")
    _index_put_check(a, v)
    return _in_bounds(idx, a.shape, bshape)


def _index_put_kernel(a, indices, values, accumulate=False):
    out = a.copy(order="K")  # in the input's memory order, as PyTorch's clone
    v = np.asarray(_raw(values))
    if _fills_mask(indices, v, accumulate):
        out[np_indices(indices, a.ndim, a.shape)] = _fill_number(v, a.dtype)
        return out
    idx = _index_put_checked(a, indices, v)
    try:
        if accumulate and len(idx) == 1 and getattr(idx[0], "ndim", 0) == 1 and \
                idx[0].dtype.kind in "iu" and v.shape == (idx[0].size, *a.shape[1:]):
            add_rows(out, idx[0], v)  # whole rows in index order (`x.index_put_((i,), v, True)`)
        elif accumulate:
            np.add.at(out, idx, v)
        else:
            out[idx] = v
    except ValueError as e:
        if "broadcast" not in str(e) and "cannot assign" not in str(e):
            raise
        raise RuntimeError(f"shape mismatch: value tensor of shape {size_str(v.shape)} cannot "
                           "be broadcast to indexing result of shape "
                           f"{size_str(out[idx].shape)}") from None
    return out


def _mask_shapes_check(shape, indices) -> None:
    """The masks' sizes against the dims they index (PyTorch's first check of index_put_;
    shapes only, so fake tensors get it too)."""
    dim = 0
    for i in indices:
        if i is not None and dtype_of(i) in (_dtype.bool_, _dtype.uint8):
            mask = tuple(i.shape)
            for k, n in enumerate(mask):
                if dim + k >= len(shape) or n != shape[dim + k]:
                    raise IndexError(
                        f"The shape of the mask {size_str(mask)} at index {k} does not match "
                        f"the shape of the indexed tensor {size_str(shape)} at index {dim + k}")
            dim += len(mask)
        else:
            dim += 1


def _index_put_meta(a, indices, values, accumulate=False):
    if not _fills_mask(indices, values, accumulate):
        data = getattr(a, "_data", None)
        vdata = getattr(values, "_data", None)
        if data is not None and vdata is not None and all(
                getattr(i, "_data", None) is not None for i in indices if i is not None):
            # Real tensors: the kernel's checks, in PyTorch's order (the index tensors'
            # broadcast and the value's shape before its dtype).
            _index_put_checked(data, indices, np.asarray(vdata), warn=False)
        _mask_shapes_check(tuple(a.shape), indices)
        _index_put_check(a, values)
    return Spec(tuple(a.shape), a.dtype)


def _index_put_derivative(g, indices, accumulate, values_need_grad=True):
    g_self = g if accumulate else _call(index_put, g, list(indices), g.new_zeros(()), False)
    # The values' gradient only where they need one: `g[mask]`'s size depends on the mask's
    # data, which a traced backward (`y[y > 1] = 0.0` compiled) does not have.
    if not values_need_grad:
        return (g_self, None, None, None)
    g_values = g[tuple(_as_index(i) for i in indices)] if indices else g
    return (g_self, None, g_values, None)


def _as_index(i):
    return slice(None) if i is None else i


def _index_put_samples(rng, dt):
    out = []
    for s in _index_samples(rng, dt):
        x, idx = s.args
        # Unique positions only: with duplicates and accumulate=False the result depends on
        # the order of writes.
        if s.name in ("rows", "pairs", "cols 2-d", "bcast", "split"):
            continue
        n = int(np.sum(idx[0])) if idx[0].dtype == bool else idx[0].shape[0]
        vshape = _masked_shape(x.shape, idx, n)
        out.append(Sample((x, idx, rand_array(rng, vshape, dt), False), name=s.name))
        out.append(Sample((x, idx, rand_array(rng, vshape, dt), True), name=s.name + " acc"))
    x = rand_array(rng, (4, 3), dt)
    out.append(Sample((x, [np.array([2, 0])], rand_array(rng, (3,), dt), False), name="bcast"))
    out.append(Sample((x, [np.array([1, 1, 3])], rand_array(rng, (3, 3), dt), True),
                      name="dup acc"))
    out.append(Sample((x, [None, np.array([2, 0])], rand_array(rng, (), dt), False),
                      name="cols scalar"))
    return out


def _masked_shape(shape, idx, n):
    i = idx[0]
    if i.dtype == bool:
        return (n,) + tuple(shape[i.ndim:])
    return tuple(i.shape) + tuple(shape[1:])


index_put = register(
    "index_put", kernel=_index_put_kernel, meta=_index_put_meta, node="IndexPutBackward0",
    result_order="operands",
    derivative=_index_put_derivative,
    save=lambda out, a, indices, values, accumulate=False: (
        list(indices), accumulate, getattr(values, "requires_grad", True)),
    saved_names=("indices", "accumulate", ""),
    samples=_index_put_samples, tensor_args=(2,), onnx=ox.index_put)
index_put_ = inplace_variant(
    index_put, "index_put_", samples=_index_put_samples,
    overlap_ok=expanded_warning("index_put_", "tensor[indices] = tensor"))

# ---------------------------------------------------------------- one_hot


def _one_hot_kernel(a, num_classes=-1):
    if a.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if a.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(a.max()) + 1
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return (a[..., None] == np.arange(num_classes)).astype(np.int64)


def _one_hot_meta(a, num_classes=-1):
    if dtype_of(a) is not _dtype.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        _data_dependent("one_hot without num_classes")
    return Spec(tuple(a.shape) + (num_classes,), _dtype.int64)


one_hot = register(
    "one_hot", kernel=c_contiguous(_one_hot_kernel), meta=_one_hot_meta, differentiable=False,
    samples=lambda rng, dt: [Sample((_ints(rng, s, 4), n)) for s, n in (
        ((5,), -1), ((2, 3), 6), ((), 4), ((0,), 3))], onnx=ox.one_hot)
