"""Writing into positions: `take`/`put`, `index_fill`, `index_copy`, `masked_scatter`,
`scatter_reduce`, the `*_scatter` ops (the functional forms of writing into a diagonal, a
selected slice or a slice) and `isin`.

Derivatives route the gradient back with the matching gather (`take`, `index_select`,
`masked_select`, `diagonal`, ...) and zero it where the write replaced the input.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    bad_index_dtype,
    c_contiguous,
    checked_scalar,
    dtype_of,
    index_out_of_range,
    mismatched_source,
    not_implemented_for,
    numel,
    rand_array,
    refuse_dtypes,
    shape_of,
    size_str,
    wrap_dim,
)
from .arithmetic import not_implemented_derivative
from .indexing import _scatter_check as scatter_check
from .indexing import check_gather_index, check_source_shapes, src_grad
from .registry import Sample, expanded_warning, inplace_variant, register
from .views import _expand_shape


def _ints(rng, shape, hi, unique=False):
    if unique:
        return rng.permutation(hi)[: int(np.prod(shape))].reshape(shape).astype(np.int64)
    return np.asarray(rng.integers(0, hi, size=shape), np.int64)


def _same(a):
    return Spec(tuple(a.shape), a.dtype)


# ---------------------------------------------------------------- take, put


def _long_index(index, name: str) -> None:
    """take's and put_'s index dtype check (arrays and fakes alike)."""
    bad = bad_index_dtype(index, long_only=True)
    if bad:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {bad}")


def _flat_index(index, n, name="take"):
    _long_index(index, name)
    idx = np.asarray(index, np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].flat[0]
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                         "elements.")
    return np.where(idx < 0, idx + n, idx)


def _take_kernel(a, index):
    _long_index(index, "take")
    if not a.size and np.size(index):
        raise IndexError("take(): tried to take from an empty tensor")
    return a.reshape(-1)[_flat_index(index, a.size)]


def _take_derivative(g, shape, index):
    from .._creation import zeros

    flat = zeros(int(np.prod(shape, dtype=np.int64)), dtype=g.dtype)
    return (flat.put(index, g, accumulate=True).reshape(shape), None)


take = register(
    "take", kernel=c_contiguous(_take_kernel),
    nondiff_args=(1,),
    meta=lambda a, index: (_long_index(index, "take"), Spec(tuple(index.shape), a.dtype))[1],
    node="TakeBackward0", derivative=_take_derivative,
    save=lambda out, a, index: (tuple(a.shape), index), saved_names=("self", "index"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), np.asarray(_ints(rng, i, 12) - 3)))
                             for s, i in (((3, 4), (5,)), ((12,), (2, 3)), ((2, 6), ()))],
    onnx=ox.take)


def _put_check(a, index, source) -> None:
    _long_index(index, "put_")
    names = mismatched_source(a, source)
    if names:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {names[0]} and source.dtype = {names[1]}")


def _put_kernel(a, index, source, accumulate=False):
    _put_check(a, index, source)
    if not a.size and np.size(index):
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    out = a.copy()
    flat = out.reshape(-1)
    idx = _flat_index(index, a.size, "put_").reshape(-1)
    src = np.asarray(source).reshape(-1)
    if idx.size != src.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {src.size}, index.numel() = "
                           f"{idx.size}")
    if accumulate:
        np.add.at(flat, idx, src)
    else:
        flat[idx] = src
    if a.flags.c_contiguous:
        return out
    kept = np.empty_like(a)  # the input's memory order, as PyTorch's clone; `flat` needs C's
    kept[...] = out
    return kept


def _put_derivative(g, index, src_shape, accumulate):
    from .._creation import zeros

    ga = g if accumulate else g.put(index, zeros(src_shape, dtype=g.dtype))
    return (ga, None, g.take(index).reshape(src_shape), None)


def _put_samples(rng, dt):
    return [Sample((rand_array(rng, (3, 4), dt), _ints(rng, (5,), 12, unique=True) - 2,
                    rand_array(rng, (5,), dt), acc), name=f"acc={acc}")
            for acc in (False, True)] + [
        Sample((rand_array(rng, (6,), dt), _ints(rng, (2, 3), 6), rand_array(rng, (2, 3), dt),
                True), name="repeats")]


put = register(
    "put", kernel=_put_kernel, result_order="operands",
    nondiff_args=(1,),
    meta=lambda a, index, source, accumulate=False: (_put_check(a, index, source), _same(a))[1],
    node="PutBackward0", derivative=_put_derivative,
    save=lambda out, a, index, source, accumulate=False: (index, tuple(source.shape),
                                                          accumulate),
    saved_names=("index", "source", "accumulate"), samples=_put_samples)
put_ = inplace_variant(put, "put_", samples=_put_samples)

# ---------------------------------------------------------------- index_fill, index_copy


def _index_fill_check(a, dim, index):
    """index_fill's checks on the index (arrays and fakes alike); the wrapped dim."""
    d = wrap_dim(dim, len(a.shape))
    if bad_index_dtype(index, long_only=True):
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if len(index.shape) > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    return d


def _index_copy_check(a, dim, index, source):
    """index_copy's checks on the index (arrays and fakes alike); the wrapped dim."""
    d = wrap_dim(dim, len(a.shape))
    if len(index.shape) > 1:
        raise IndexError(
            f"index_copy_(): Index should have dimension 1 or 0 (got {len(index.shape)})")
    shape, src_shape = list(a.shape), list(source.shape)
    n = numel(index.shape)
    if not src_shape and n != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {n})")
    if src_shape and shape and len(src_shape) != len(shape):
        raise IndexError("index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({len(src_shape)}), "
                         f"destination dimensionality ({len(shape)})")
    bad = bad_index_dtype(index, long_only=True)
    if bad:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {bad}")
    names = mismatched_source(a, source)
    if names:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {names[0]} and (source) {names[1]}")
    rest, src_rest = shape[:d] + shape[d + 1:], src_shape[:d] + src_shape[d + 1:]
    if rest != src_rest:
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination "
            f"slice shape: {' '.join(map(str, rest))} at dimension {d} and source slice shape: "
            f"{' '.join(map(str, src_rest))} at dimension 0.")
    if src_shape and n != src_shape[d]:
        raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to "
                         f"source.size(dim) ({src_shape[d]})")
    return d


def _index_range(a, d, index, negative, prefix=""):
    """index_fill's and index_copy's IndexError for an index outside dim `d` (nothing is
    checked on a tensor without elements, as in PyTorch)."""
    size = a.shape[d] if a.ndim else 1
    bad = index_out_of_range(index, size, negative) if a.size else None
    if bad is not None:
        raise IndexError(f"{prefix}index {bad} is out of bounds for dimension {d} with size "
                         f"{size}")


def _index_fill_value(value, a=None) -> None:
    """A tensor value must be 0-d (checked first, as PyTorch's index_fill_ does); a complex
    value (number or tensor, even without an imaginary part) fills only a complex `a`."""
    if hasattr(value, "shape") and len(value.shape):
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {len(value.shape)} dimension(s).")
    if a is not None and dtype_of(a).category != _dtype.COMPLEX and (
            value.__class__ is complex or hasattr(value, "dtype")
            and dtype_of(value).category == _dtype.COMPLEX):
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is "
                           "not supported")


def _index_fill_kernel(a, dim, index, value):
    _index_fill_value(value, a)
    d = _index_fill_check(a, dim, index)
    _index_range(a, d, index, negative=True)
    out = a.copy(order="K")  # in the input's memory order, as PyTorch's clone
    value = checked_scalar(value, a.dtype)
    if not out.size:
        return out
    if out.ndim:
        sl = [slice(None)] * out.ndim
        sl[d] = np.asarray(index, np.int64).reshape(-1)
        out[tuple(sl)] = value
    elif np.asarray(index).size:
        out[()] = value
    return out


def _index_fill_meta(a, dim, index, value):
    _index_fill_value(value, a)
    _index_fill_check(a, dim, index)
    return _same(a)


def _index_fill_samples(value):
    def samples(rng, dt):
        return [Sample((rand_array(rng, s, dt), d, _ints(rng, (n,), s[d] if s else 1),
                        value(rng, dt)), name=f"{s} {d}")
                for s, d, n in (((3, 4), 1, 2), ((3, 4), 0, 3), ((5,), -1, 2))]

    return samples


index_fill = register(
    "index_fill.int_Scalar", kernel=_index_fill_kernel, meta=_index_fill_meta,
    result_order="operands", nondiff_args=(2,),
    node="IndexFillBackward0",
    derivative=lambda g, dim, index: (g.index_fill(dim, index, 0.0), None, None, None),
    save=lambda out, a, dim, index, value: (dim, index), saved_names=("dim", "index"),
    samples=_index_fill_samples(lambda rng, dt: -1.5), public="index_fill")
index_fill_tensor = register(
    "index_fill.int_Tensor", kernel=_index_fill_kernel, meta=_index_fill_meta,
    result_order="operands", nondiff_args=(2,),
    node="IndexFillBackward1",
    # (value's gradient picks the filled slices once each, as PyTorch's: through
    # index_select, which refuses a negative position the fill took.)
    derivative=lambda g, dim, index: (g.index_fill(dim, index, 0.0), None, None,
                                      g.index_select(dim, index.reshape(-1).unique()).sum()),
    save=lambda out, a, dim, index, value: (dim, index), saved_names=("dim", "index"),
    samples=_index_fill_samples(lambda rng, dt: rand_array(rng, (), dt)), public="index_fill",
    tensor_args=(3,))
_INDEX_FILL_EXPANDED = expanded_warning("index_fill_", "tensor[mask] = scalar")
index_fill_ = inplace_variant(index_fill, "index_fill_.int_Scalar",
                              overlap_ok=_INDEX_FILL_EXPANDED)
index_fill_tensor_ = inplace_variant(index_fill_tensor, "index_fill_.int_Tensor",
                                     overlap_ok=_INDEX_FILL_EXPANDED)


def _index_copy_kernel(a, dim, index, source):
    d = _index_copy_check(a, dim, index, source)
    _index_range(a, d, index, negative=False, prefix="index_copy_(): ")
    out = a.copy()
    if not out.size:
        return out
    idx = np.asarray(index, np.int64).reshape(-1)
    if out.ndim:
        sl = [slice(None)] * out.ndim
        sl[d] = idx
        out[tuple(sl)] = np.asarray(source).reshape(out[tuple(sl)].shape)
    elif idx.size:  # the last of the values written (a 0-d self is one slot)
        out[()] = np.asarray(source).reshape(-1)[-1]
    return out


def _index_copy_derivative(g, dim, index):
    return (g.index_fill(dim, index, 0.0), None, None, g.index_select(dim, index))


def _index_copy_samples(rng, dt):
    out = []
    for s, d, n in (((3, 4), 1, 2), ((3, 4), 0, 3), ((2, 3, 4), -1, 3)):
        dd = wrap_dim(d, len(s))
        src = list(s)
        src[dd] = n
        out.append(Sample((rand_array(rng, s, dt), d, _ints(rng, (n,), s[dd], unique=True),
                           rand_array(rng, tuple(src), dt)), name=f"{s} {d}"))
    return out


index_copy = register(
    "index_copy", autocast="promote", kernel=_index_copy_kernel,
    nondiff_args=(2,),
    meta=lambda a, dim, index, source: (_index_copy_check(a, dim, index, source), _same(a))[1],
    node="IndexCopyBackward0", derivative=_index_copy_derivative,
    save=lambda out, a, dim, index, source: (dim, index), saved_names=("dim", "index"),
    samples=_index_copy_samples)
index_copy_ = inplace_variant(index_copy, "index_copy_")

# ---------------------------------------------------------------- masked_scatter


def _masked_scatter_source(a, source) -> None:
    names = mismatched_source(a, source)
    if names:  # PyTorch's message has no space before the names
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{names[0]} and {names[1]}")


def _masked_scatter_mask(mask) -> None:
    """The mask must be bool (a uint8 one is refused after PyTorch's deprecation warning)."""
    dt = dtype_of(mask)
    if dt is _dtype.bool_:
        return
    if dt is _dtype.uint8:
        from .._warn import warn_at_caller

        warn_at_caller("masked_scatter_ received a mask with dtype torch.uint8, this behavior "
                       "is now deprecated,please use a mask with dtype torch.bool instead.")
    raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                       f"{dt.legacy}")


def _masked_scatter_checks(a, mask, source, inplace: bool) -> tuple:
    """masked_scatter's checks in PyTorch's order; the result's shape. The functional form
    broadcasts mask and self (mask first) before the dtypes; the in-place one checks the
    dtypes, then expands the mask to self's shape (its expand's errors)."""
    shape, mshape = tuple(shape_of(a)), tuple(shape_of(mask))
    if inplace:
        _masked_scatter_source(a, source)
        if len(mshape) > len(shape):
            _expand_shape(mshape, shape, dtype_of(mask))  # (its error)
        lead = len(shape) - len(mshape)
        for i in reversed(range(len(mshape))):
            if mshape[i] not in (1, shape[lead + i]):
                raise RuntimeError(
                    f"The expanded size of the tensor ({shape[lead + i]}) must match the "
                    f"existing size ({mshape[i]}) at non-singleton dimension {lead + i}.  "
                    f"Target sizes: {size_str(shape)}.  Tensor sizes: {size_str(mshape)}")
        out = shape
    else:
        from ._util import broadcast_shapes

        out = broadcast_shapes(mshape, shape)
        _masked_scatter_source(a, source)
    _masked_scatter_mask(mask)
    return out


def _masked_scatter_kernel(a, mask, source, inplace=False):
    shape = _masked_scatter_checks(a, mask, source, inplace)
    m = np.broadcast_to(mask, shape)
    out = np.broadcast_to(a, shape).copy()
    n = int(m.sum())
    src = np.asarray(source).reshape(-1)
    if src.size < n:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[m] = src[:n].astype(out.dtype, copy=False)
    return out


def _masked_scatter_meta(a, mask, source, inplace=False):
    return Spec(_masked_scatter_checks(a, mask, source, inplace), a.dtype)


def _masked_scatter_derivative(g, mask, src_shape):
    from .._dispatch import call

    return (g.masked_fill(mask, 0.0), None, call(masked_scatter_backward, g, mask, src_shape))


def _masked_scatter_backward_kernel(g, mask, sizes):
    """The source's gradient: the gradient at the mask's true positions, in order, then
    zeros for the source items the mask did not take (its shape is the source's, whatever
    the mask holds: a graph can be traced through it)."""
    n = int(np.prod(tuple(sizes), dtype=np.int64))
    picked = g[np.broadcast_to(np.asarray(mask, bool), g.shape)]
    out = np.zeros(n, g.dtype)
    out[:min(picked.size, n)] = picked[:n]
    return out.reshape(tuple(sizes))


def _masked_scatter_backward_derivative(gg, mask, shape):
    from .._dispatch import call

    # (its adjoint: gg's first items laid into the mask's positions of a zero gradient)
    return (call(masked_scatter, gg.new_zeros(shape), mask, gg), None, None)


masked_scatter = register(
    "masked_scatter", kernel=_masked_scatter_kernel, meta=_masked_scatter_meta,
    nondiff_args=(1,),
    node="MaskedScatterBackward0", derivative=_masked_scatter_derivative,
    save=lambda out, a, mask, source: (mask, tuple(source.shape)),
    saved_names=("mask", "source_sym_sizes"),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), rng.random((3, 4)) > 0.5,
                rand_array(rng, (3, 5), dt)), name="same"),
        Sample((rand_array(rng, (3, 4), dt), rng.random((4,)) > 0.5,
                rand_array(rng, (12,), dt)), name="broadcast mask")], onnx=ox.masked_scatter)
masked_scatter_backward = register(
    "masked_scatter_backward", kernel=_masked_scatter_backward_kernel,
    meta=lambda g, mask, sizes: Spec(tuple(sizes), g.dtype), nondiff_args=(1, 2),
    node="MaskedScatterBackwardBackward0", derivative=_masked_scatter_backward_derivative,
    save=lambda out, g, mask, sizes: (mask, tuple(g.shape)), saved_names=("mask",),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), rng.random((3, 4)) > 0.5, (3, 5)), name="same"),
        Sample((rand_array(rng, (3, 4), dt), rng.random((4,)) > 0.5, (12,)),
               name="broadcast mask")])
masked_scatter_ = inplace_variant(
    masked_scatter, "masked_scatter_",
    kernel=lambda a, mask, source: _masked_scatter_kernel(a, mask, source, True),
    meta=lambda a, mask, source: _masked_scatter_meta(a, mask, source, True),
    samples=lambda rng, dt: masked_scatter.samples(rng, dt))

# ---------------------------------------------------------------- scatter_reduce


_REDUCES = ("sum", "prod", "mean", "amax", "amin")
# PyTorch's forward also reads "max" and "min" as amax and amin; its backward refuses them.
_REDUCE_ALIASES = {"max": "amax", "min": "amin"}


def _scatter_reduce_kernel(a, dim, index, src, reduce, include_self=True):
    d = _scatter_reduce_check(a, dim, index, src, reduce)
    reduce = _REDUCE_ALIASES.get(reduce, reduce)
    check_gather_index(a.shape, d, index)
    idx = np.asarray(index, np.int64)
    if not idx.size:  # (an empty index of any shape reduces nothing in)
        return a.copy()
    if a.ndim == 0 or idx.ndim == 0:  # a 0-d self, index or src counts as one dimension
        return _scatter_reduce_kernel(a.reshape(-1), d, idx.reshape(-1),
                                      np.asarray(src).reshape(-1), reduce,
                                      include_self).reshape(a.shape)
    # Positions of every src element that takes part (index's shape, not src's).
    grid = list(np.indices(idx.shape, sparse=False))
    grid[d] = idx
    target = tuple(grid)
    vals = np.asarray(src)[tuple(slice(0, s) for s in idx.shape)].astype(a.dtype, copy=False)
    out = a.copy()
    hit = np.zeros(a.shape, bool)
    hit[target] = True
    count = np.zeros(a.shape, np.int64)
    np.add.at(count, target, 1)
    if not include_self:
        fill = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        if a.dtype.kind in "iu" and reduce in ("amax", "amin"):
            info = np.iinfo(a.dtype)
            fill = info.min if reduce == "amax" else info.max
        elif a.dtype.kind == "b" and reduce in ("amax", "amin"):
            # The identities of or/and: casting -inf to bool would give True.
            fill = reduce == "amin"
        out[hit] = fill
    half = a.dtype in HALF and reduce in ("sum", "mean", "prod")
    if half:  # PyTorch sums (multiplies) a half type in float32 and rounds once
        out, vals = out.astype(F32), vals.astype(F32)
    if reduce in ("sum", "mean"):
        np.add.at(out, target, vals)
    elif reduce == "prod":
        np.multiply.at(out, target, vals)
    elif reduce == "amax":
        np.maximum.at(out, target, vals)
    else:
        np.minimum.at(out, target, vals)
    if reduce == "mean":
        n = count + (1 if include_self else 0)
        n = np.maximum(n, 1)
        if a.dtype.kind in "iu":
            out = np.where(hit, out // n, out).astype(a.dtype)
        else:
            if half:  # (the sum rounded to the half type first, then divided in it)
                out = out.astype(a.dtype).astype(F32)
            out = np.where(hit, out / n, out).astype(a.dtype)
    return out.astype(a.dtype) if half else out


def _scatter_reduce_derivative(g, a, dim, index, src, reduce, include_self, out):
    if reduce in _REDUCE_ALIASES:
        raise RuntimeError("Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', "
                           f"'amin' but got {reduce}.")
    if reduce == "sum":
        ga, gs = g, g.gather(dim, index)
    elif reduce == "mean":
        n = (g.new_ones(tuple(g.shape)) if include_self else g.new_zeros(tuple(g.shape)))
        n = n.scatter_add(dim, index, src.new_ones(tuple(src.shape)))
        n = n.masked_fill(n == 0, 1.0)
        ga, gs = g / n, g.gather(dim, index) / n.gather(dim, index)
    elif reduce == "prod":
        # Each factor's gradient is the product of the others, recomputed with a zero factor
        # replaced by 1 (where exactly one factor is zero, the others' product is not 0).
        masked_a = a.masked_fill(a == 0, 1.0)
        ga = g * masked_a.scatter_reduce(dim, index, src, "prod",
                                         include_self=include_self) / masked_a
        src_zero = src == 0
        zeros_at = a.new_zeros(tuple(a.shape)).scatter_add(dim, index, src_zero.to(a.dtype))
        single = src_zero & (zeros_at.gather(dim, index) == 1)
        masked_out = a.scatter_reduce(dim, index, src.masked_fill(single, 1.0), "prod",
                                      include_self=include_self)
        gs = (g * masked_out).gather(dim, index).where(
            single, (g * out).gather(dim, index) / src.masked_fill(src_zero, 1.0))
    else:  # amax / amin: shared evenly among the elements equal to the result
        value = out.gather(dim, index)
        self_is = (a == out).to(g.dtype)
        src_is = (src == value).to(g.dtype)
        share = g / self_is.scatter_add(dim, index, src_is)
        ga, gs = self_is * share, src_is * share.gather(dim, index)
    if not include_self:
        hit = g.new_zeros(tuple(g.shape)).scatter_add(dim, index, src.new_ones(
            tuple(index.shape)))
        ga = ga.masked_fill(hit > 0, 0.0)
    return (ga, None, None, src_grad(gs, tuple(src.shape), "ScatterReduceBackward0"), None,
            None)


def _scatter_reduce_check(a, dim, index, src, reduce) -> int:
    """scatter's checks (index dtype, dims, src dtype, sizes), then the reduction's name and
    its bool form, in PyTorch's order."""
    d = scatter_check(a, dim, index, src)
    if reduce not in _REDUCES and reduce not in _REDUCE_ALIASES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    if reduce == "mean" and dtype_of(a) is _dtype.bool_:
        if not numel(index.shape):  # (no scatter kernel runs: the mean's division refuses it)
            raise not_implemented_for("div_floor_cpu", "Bool")
        raise not_implemented_for("scatter_gather_tensor_cpu_reduce_mean", "Bool")
    return d


def _scatter_reduce_meta(a, dim, index, src, reduce, include_self=True):
    _scatter_reduce_check(a, dim, index, src, reduce)
    return _same(a)


def _scatter_reduce_samples(rng, dt):
    out = []
    for reduce in _REDUCES:
        for inc in (True, False):
            dom = (0.5, 2.0) if reduce == "prod" else None
            a = rand_array(rng, (3, 4), dt, dom)
            idx = _ints(rng, (3, 5), 4)
            src = rand_array(rng, (3, 5), dt, dom)
            if reduce == "prod":  # zeros among the factors, in self and in src
                a[0, 1] = 0
                src[1, 2] = 0
            out.append(Sample((a, 1, idx, src, reduce, inc), name=f"{reduce} include_self={inc}"))
    return out


scatter_reduce = register(
    "scatter_reduce.two", kernel=_scatter_reduce_kernel, meta=_scatter_reduce_meta,
    nondiff_args=(2,),
    node="ScatterReduceBackward0", derivative=_scatter_reduce_derivative,
    save=lambda out, a, dim, index, src, reduce, include_self=True: (
        a, dim, index, src, reduce, include_self, out),
    saved_names=("self", "dim", "index", "src", "reduce", "include_self", "result"),
    samples=_scatter_reduce_samples, public="scatter_reduce", onnx=ox.scatter)
scatter_reduce_ = inplace_variant(scatter_reduce, "scatter_reduce_.two", saves_self=True)

# ---------------------------------------------------------------- index_reduce
#
# Slices of `src` along `dim` reduced into the positions a vector `index` names: a
# scatter_reduce over the index spread along `dim` of src's shape, with index_reduce's own
# checks, node and messages.

INDEX_REDUCES = ("prod", "mean", "amax", "amin")


def _index_reduce_check(a, dim, index, src, reduce) -> int:
    """index_reduce's checks in PyTorch's order (its messages); the wrapped dim."""
    if reduce not in INDEX_REDUCES:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    a_shape, src_shape, idx_shape = shape_of(a), shape_of(src), shape_of(index)
    d = wrap_dim(dim, len(a_shape))
    idt = dtype_of(index)
    if len(idx_shape) > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{len(idx_shape)} with type: {idt.legacy} and size: "
                         f"{size_str(idx_shape)}")
    if idt not in (_dtype.int64, _dtype.int32):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{idt.legacy}")
    if dtype_of(a) is not dtype_of(src):
        raise RuntimeError(f"index_reduce_(): self ({dtype_of(a).legacy}) and source "
                           f"({dtype_of(src).legacy}) must have the same scalar type")
    check_source_shapes("index_reduce_", tuple(a_shape), d, numel(idx_shape),
                        tuple(src_shape))
    if reduce == "mean" and dtype_of(a) is _dtype.bool_:
        raise not_implemented_for("div_floor_cpu", "Bool")
    return d


def _spread_index(index, src_shape: tuple, d: int, reshape, expand):
    """`index` (a vector) spread along dim `d` of `src_shape`: scatter_reduce's index."""
    if not src_shape:
        return reshape(index, ())
    view = [1] * len(src_shape)
    view[d] = -1
    return expand(reshape(index, tuple(view)), src_shape)


def _index_reduce_kernel(a, dim, index, src, reduce, include_self=True):
    d = _index_reduce_check(a, dim, index, src, reduce)
    idx = np.asarray(index, np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= (a.shape[d] if a.ndim else 1)):
        raise IndexError("index out of range in self")  # (no negative index wraps)
    spread = _spread_index(idx, src.shape, d, np.reshape, np.broadcast_to)
    return _scatter_reduce_kernel(a, d, spread, src, reduce, include_self)


def _index_reduce_meta(a, dim, index, src, reduce, include_self=True):
    _index_reduce_check(a, dim, index, src, reduce)
    return _same(a)


def _index_reduce_derivative(g, a, dim, index, src, reduce, include_self, out):
    d = wrap_dim(dim, g.dim())
    spread = _spread_index(index, tuple(src.shape), d, lambda t, s: t.reshape(s),
                           lambda t, s: t.expand(s))
    ga, _, _, gs, _, _ = _scatter_reduce_derivative(g, a, d, spread, src, reduce,
                                                     include_self, out)
    return ga, None, None, gs, None, None


def _index_reduce_samples(rng, dt):
    out = []
    for reduce in INDEX_REDUCES:
        for inc in (True, False):
            dom = (0.5, 2.0) if reduce == "prod" else None
            a = rand_array(rng, (3, 4), dt, dom)
            src = rand_array(rng, (3, 5), dt, dom)
            idx = np.array([0, 2, 0, 3, 2], np.int64)
            out.append(Sample((a, 1, idx, src, reduce, inc), name=f"{reduce} include_self={inc}"))
    return out


index_reduce = register(
    "index_reduce", kernel=_index_reduce_kernel, meta=_index_reduce_meta, nondiff_args=(2,),
    node="IndexReduceBackward0", derivative=_index_reduce_derivative,
    save=lambda out, a, dim, index, src, reduce, include_self=True: (
        a, dim, index, src, reduce, include_self, out),
    saved_names=("self", "dim", "index", "source", "reduce", "include_self", "result"),
    # (`torch.index_reduce` and the method are composites over these ops, which give them
    # the beta warning: the public spelling is theirs)
    samples=_index_reduce_samples, public="_index_reduce")
index_reduce_ = inplace_variant(index_reduce, "index_reduce_", saves_self=True,
                                public="_index_reduce_")

# `scatter(..., reduce="add" | "multiply")`: scatter_reduce with self included, under
# PyTorch's own overloads, which have no derivative (a NotImplemented node that raises).
_OLD_REDUCES = {"add": "sum", "multiply": "prod"}


def _scatter_old_src(a, index, src):
    """A number `src` spread over the index's shape, converted to self's dtype (2.5 into an
    int tensor is 2), as PyTorch's Scalar overload reads it."""
    if hasattr(src, "shape"):
        return src
    return np.full(np.shape(index), checked_scalar(src, a.dtype), a.dtype)


def _scatter_old_kernel(a, dim, index, src, reduce):
    return _scatter_reduce_kernel(a, dim, index, _scatter_old_src(a, index, src),
                                  _OLD_REDUCES[reduce], True)


def _scatter_old_meta(a, dim, index, src, reduce):
    scatter_check(a, dim, index, src)
    return _same(a)


def _scatter_old_samples(value: bool):
    def samples(rng, dt):
        return [Sample((rand_array(rng, (3, 4), dt), 1, _ints(rng, (3, 2), 4),
                        1.5 if value else rand_array(rng, (3, 2), dt), reduce), name=reduce)
                for reduce in _OLD_REDUCES]

    return samples


scatter_reduce_src = register(
    "scatter.reduce", kernel=_scatter_old_kernel, meta=_scatter_old_meta, nondiff_args=(2,),
    node="NotImplemented", derivative=not_implemented_derivative("scatter"), gradcheck=False,
    public="scatter", samples=_scatter_old_samples(False), onnx=ox.scatter)
scatter_reduce_value = register(
    "scatter.value_reduce", kernel=_scatter_old_kernel, meta=_scatter_old_meta,
    nondiff_args=(2,), node="NotImplemented", derivative=not_implemented_derivative("scatter"),
    gradcheck=False, public="scatter", samples=_scatter_old_samples(True))
scatter_reduce_src_ = inplace_variant(scatter_reduce_src, "scatter_.reduce",
                                      derivative=not_implemented_derivative("scatter_"))
scatter_reduce_value_ = inplace_variant(scatter_reduce_value, "scatter_.value_reduce",
                                        derivative=not_implemented_derivative("scatter_"))

# ---------------------------------------------------------------- *_scatter


def _diag_index(shape, offset, d1, d2):
    n = len(shape)
    d1, d2 = wrap_dim(d1, n), wrap_dim(d2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {d1}, {d2}")
    return d1, d2


def _diagonal_view(a, offset, d1, d2):
    d1, d2 = _diag_index(a.shape, offset, d1, d2)
    return np.diagonal(a, offset, d1, d2)


def _diagonal_scatter_kernel(a, src, offset=0, dim1=0, dim2=1):
    out = a.copy(order="K")  # in the input's memory order, as PyTorch's clone
    view = _diagonal_view(out, offset, dim1, dim2)
    if view.shape != np.shape(src):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size "
                           f"= {size_str(np.shape(src))}, slice size = {size_str(view.shape)}")
    # np.diagonal returns a read-only view: write through an index grid instead.
    d1, d2 = _diag_index(a.shape, offset, dim1, dim2)
    k = view.shape[-1]
    i1 = np.arange(k) + max(-offset, 0)
    i2 = np.arange(k) + max(offset, 0)
    moved = np.moveaxis(out, (d1, d2), (-2, -1))
    moved[..., i1, i2] = src
    return out


diagonal_scatter = register(
    "diagonal_scatter", kernel=_diagonal_scatter_kernel, result_order="operands",
    meta=lambda a, src, offset=0, dim1=0, dim2=1: (
        _diag_index(tuple(a.shape), offset, dim1, dim2), _same(a))[1],
    node="DiagonalScatterBackward0",
    derivative=lambda g, offset, d1, d2: (
        g.diagonal_scatter(g.diagonal(offset, d1, d2).new_zeros(
            tuple(g.diagonal(offset, d1, d2).shape)), offset, d1, d2),
        g.diagonal(offset, d1, d2), None, None, None),
    save=lambda out, a, src, offset=0, dim1=0, dim2=1: (offset, dim1, dim2),
    saved_names=("offset", "dim1", "dim2"),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3,), dt))),
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (2,), dt), 2), name="offset 2"),
        Sample((rand_array(rng, (2, 3, 4), dt), rand_array(rng, (4, 1), dt), -1, 0, 1),
               name="3-d offset -1")])


def _select_scatter_check(a, dim, index) -> int:
    """The wrapped dim, with select's error for an index outside it (arrays and fakes)."""
    d = wrap_dim(dim, len(a.shape))
    size = a.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{size_str(a.shape)} at dimension {d}")
    return d


def _check_src_size(src_shape, slot_shape) -> None:
    """A `*_scatter`'s `src` must have the shape of the part of `self` it replaces."""
    if tuple(src_shape) != tuple(slot_shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size "
                           f"= {size_str(src_shape)}, slice size = {size_str(slot_shape)}")


def _select_scatter_kernel(a, src, dim, index):
    d = _select_scatter_check(a, dim, index)
    _check_src_size(np.shape(src), a.shape[:d] + a.shape[d + 1:])
    out = a.copy(order="K")  # in the input's memory order, as PyTorch's clone
    sl = [slice(None)] * a.ndim
    sl[d] = index
    out[tuple(sl)] = src
    return out


def _select_scatter_meta(a, src, dim, index):
    d = _select_scatter_check(a, dim, index)
    shape, src_shape = tuple(a.shape), tuple(src.shape)
    if all(isinstance(n, int) for n in (*shape, *src_shape)):  # (symbolic sizes: no test)
        _check_src_size(src_shape, shape[:d] + shape[d + 1:])
    return _same(a)


select_scatter = register(
    "select_scatter", kernel=_select_scatter_kernel, result_order="operands",
    meta=lambda a, src, dim, index: _select_scatter_meta(a, src, dim, index),
    node="SelectScatterBackward0",
    lowering=lambda v, a, src, dim, index: v.select_scatter(a, src, dim, index),
    derivative=lambda g, dim, index: (
        g.select_scatter(g.select(dim, index).new_zeros(tuple(g.select(dim, index).shape)),
                         dim, index), g.select(dim, index), None, None),
    save=lambda out, a, src, dim, index: (dim, index), saved_names=("dim", "index"),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt), 0, 1)),
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3,), dt), 1, -1))])


def _slice_tuple(ndim, dim, start, end, step):
    d = wrap_dim(dim, ndim)
    sl = [slice(None)] * ndim
    sl[d] = slice(start, end, step)
    return tuple(sl)


def _slice_scatter_kernel(a, src, dim=0, start=None, end=None, step=1):
    out = a.copy(order="K")  # in the input's memory order, as PyTorch's clone
    part = _slice_tuple(a.ndim, dim, start, end, step)
    _check_src_size(np.shape(src), out[part].shape)
    out[part] = src
    return out


def _slice_scatter_meta(a, src, dim=0, start=None, end=None, step=1):
    shape = list(a.shape)
    d = wrap_dim(dim, len(shape))
    if all(isinstance(v, (int, type(None))) for v in (*shape, *src.shape, start, end, step)):
        shape[d] = len(range(*slice(start, end, step).indices(shape[d])))
        _check_src_size(tuple(src.shape), tuple(shape))
    return _same(a)


def _slice_scatter_derivative(g, dim, start, end, step):
    part = g[_slice_tuple(g.ndim, dim, start, end, step)]
    return (g.slice_scatter(part.new_zeros(tuple(part.shape)), dim, start, end, step), part,
            None, None, None, None)


slice_scatter = register(
    "slice_scatter", kernel=_slice_scatter_kernel, result_order="operands",
    meta=_slice_scatter_meta, node="SliceScatterBackward0",
    derivative=_slice_scatter_derivative,
    lowering=lambda v, a, src, dim=0, start=None, end=None, step=1: v.slice_scatter(
        a, src, dim, start, end, step),
    save=lambda out, a, src, dim=0, start=None, end=None, step=1: (dim, start, end, step),
    saved_names=("dim", "start", "end", "step"),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3, 2), dt), 1, 0, 2)),
        Sample((rand_array(rng, (6, 2), dt), rand_array(rng, (3, 2), dt), 0, 0, 6, 2),
               name="step 2"),
        Sample((rand_array(rng, (5,), dt), rand_array(rng, (2,), dt), 0, 3), name="to end")])

# ---------------------------------------------------------------- isin


def _isin_kernel(elements, test_elements, assume_unique=False, invert=False):
    return np.isin(elements, test_elements, invert=invert)


isin = register(
    "isin.Tensor_Tensor", kernel=_isin_kernel,
    meta=lambda e, t, assume_unique=False, invert=False: Spec(tuple(e.shape), _dtype.bool_),
    differentiable=False, public="isin",
    samples=lambda rng, dt: [
        Sample((np.array([1, 2, 3, 4, 2], dt), np.array([2, 4], dt))),
        Sample((np.array([[1, 5], [2, 0]], dt), np.array([2, 9, 1], dt), False, True),
               name="invert")], onnx=ox.isin)


# PyTorch's isin takes no bool or complex elements.
refuse_dtypes(isin, "isin", "bc", at=(0, 1),
              message=lambda t: f"Unsupported input type encountered for isin(): {t}")
