"""Segmented reductions: `segment_reduce` (`SegmentReduceBackward0`) and its backward
`_segment_reduce_backward`, an op of its own (PyTorch records a `NotImplemented` node for it:
there is no double backward).

The segments run along `axis` of `data`, given per leading index by `lengths` (shape
`data.shape[:axis] + (S,)`) or `offsets` (`data.shape[:axis] + (S + 1,)`; offsets win when
both are given, as in PyTorch). The result has `data`'s shape with `axis` replaced by S. An
empty segment gives the reduction's identity (0 for sum, 1 for prod, -inf/inf for max/min,
NaN for mean), or `initial` when given; `initial` also enters every other segment's result.
The public function `segment_reduce` lives here too, with PyTorch's argument checks.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import Spec, not_implemented_for, rand_array, wrap_dim
from .arithmetic import not_implemented_derivative
from .nn import _call, _work
from .registry import Sample, register

# PyTorch's reduce names (its parser also takes `amax`/`amin` for max/min).
_REDUCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "amax": "max",
               "min": "min", "amin": "min"}
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INDEX_TYPES = ("int32", "int64")
_INTERNAL = (" (Could this error message be improved?  If so, please report an enhancement "
             "request to PyTorch.)")


def _dt(dtype) -> _dtype.dtype:
    """A fusegrad dtype from a fusegrad or NumPy one (meta sees the former, kernels the
    latter)."""
    return dtype if isinstance(dtype, _dtype.dtype) else _dtype.from_numpy_dtype(dtype)


def _reduction(reduce: str) -> str:
    kind = _REDUCTIONS.get(reduce)
    if kind is None:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    return kind


def _check(data, reduce, lengths, indices, offsets, axis) -> tuple[int, str]:
    """The argument checks that need no values, in PyTorch's order; the wrapped axis and the
    reduction's kind."""
    axis = wrap_dim(axis, len(data.shape))
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    kind = _reduction(reduce)
    what, index = ("offsets", offsets) if offsets is not None else ("lengths", lengths)
    if len(data.shape) < len(index.shape):
        raise RuntimeError(f"Expected data.dim() >= {what}_value.dim() to be true, but got "
                           f"false. {_INTERNAL}")
    if axis != len(index.shape) - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {what}"
                           f" but got {axis}.")
    return axis, kind


def _check_dtypes(data, index, what: str) -> None:
    """No kernel for index types but int32/int64, nor for data types but floating ones (the
    index type is dispatched on first)."""
    dt = _dt(index.dtype)
    if dt.name not in _INDEX_TYPES:
        raise not_implemented_for(f"_segment_reduce_{what}_cpu_kernel1", dt)
    dt = _dt(data.dtype)
    if dt.name not in _FLOATS:
        raise not_implemented_for("_segment_reduce_cpu", dt)


def _min_of_empty() -> RuntimeError:
    return RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. "
                        "Specify the reduction dim with the 'dim' argument.")


def _negative_size(shape: tuple) -> RuntimeError:
    return RuntimeError(f"Trying to create tensor with negative dimension -1: "
                        f"[{', '.join(str(s) for s in shape)}]")


def _rows(index: np.ndarray) -> np.ndarray:
    """`index` as int64 rows of its last dimension."""
    lead = int(np.prod(index.shape[:-1], dtype=np.int64))
    return index.astype(np.int64).reshape(lead, index.shape[-1])


def _offsets(data, lengths, offsets, axis: int, unsafe: bool) -> np.ndarray:
    """The segments' bounds as int64 offsets of shape (B, S + 1), B the product of
    `data.shape[:axis]`, after PyTorch's value checks of `lengths` (unless `unsafe`)."""
    lead = int(np.prod(data.shape[:axis], dtype=np.int64))
    if offsets is not None:
        if offsets.shape[-1] == 0:  # (PyTorch's error for no bound at all: -1 segments)
            raise _negative_size(offsets.shape[:-1] + (-1,))
        _check_dtypes(data, offsets, "offsets")
        bounds = _rows(offsets)
    else:
        if not unsafe:
            if lengths.size == 0:  # (PyTorch's check takes the minimum of the lengths)
                raise _min_of_empty()
            if np.any(lengths < 0):
                raise RuntimeError("lengths contains negative value!")
            if np.any(lengths.sum(axis=-1) != data.shape[axis]):
                raise RuntimeError(
                    "segment_reduce(): Expected all rows of lengths along axis to sum to "
                    "data.size(lengths.dim()-1) when !unsafe.")
        _check_dtypes(data, lengths, "lengths")
        flat = _rows(lengths)
        bounds = np.zeros((flat.shape[0], flat.shape[1] + 1), np.int64)
        np.cumsum(flat, axis=1, out=bounds[:, 1:])
    if np.any(np.diff(bounds, axis=1) < 0):
        raise RuntimeError(f"Expected segment_length >= 0 to be true, but got false. "
                           f"{_INTERNAL}")
    # (PyTorch reads past the data for rows that do not fit, with `unsafe`: here they stop
    # at its end, and rows of `lengths` beyond data's leading size are not read.)
    bounds = np.clip(bounds, 0, data.shape[axis])
    if bounds.shape[0] != lead:
        bounds = np.resize(bounds, (lead, bounds.shape[1]))
    return bounds


def _as_3d(a: np.ndarray, axis: int) -> np.ndarray:
    """`a` as (leading, axis, trailing)."""
    return a.reshape(int(np.prod(a.shape[:axis], dtype=np.int64)), a.shape[axis],
                     int(np.prod(a.shape[axis + 1:], dtype=np.int64)))


_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "max": np.maximum,
           "min": np.minimum}
_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}


def _segment_reduce_kernel(data, reduce, lengths=None, indices=None, offsets=None, axis=0,
                           unsafe=False, initial=None):
    axis, kind = _check(data, reduce, lengths, indices, offsets, axis)
    bounds = _offsets(data, lengths, offsets, axis, unsafe)
    x = _as_3d(_work(data), axis)
    n = x.shape[1]
    starts, ends = bounds[:, :-1], bounds[:, 1:]
    count = ends - starts  # (B, S)
    ufunc = _UFUNCS[kind]
    out = np.full((x.shape[0], count.shape[1], x.shape[2]), _IDENTITY[kind], x.dtype)
    if n and out.size:
        # reduceat over the data padded by one row, from each start to its end: the odd
        # entries (an end to the next start) are dropped, an empty segment keeps the identity.
        padded = np.concatenate([x, np.zeros_like(x[:, :1])], axis=1)
        idx = np.empty(2 * count.shape[1], np.int64)
        for b in range(x.shape[0]):
            idx[0::2], idx[1::2] = starts[b], ends[b]
            part = ufunc.reduceat(padded[b], idx, axis=0)[0::2]
            full = count[b] > 0
            out[b, full] = part[full]
    if initial is not None:
        init = x.dtype.type(initial)
        if kind in ("sum", "mean"):
            out = out + init
        else:
            out = ufunc(out, init)
    if kind == "mean":
        c = count[:, :, None].astype(x.dtype)
        with np.errstate(all="ignore"):
            mean = out / c
        out = np.where(c > 0, mean, x.dtype.type(np.nan) if initial is None else out)
    shape = data.shape[:axis] + (count.shape[1],) + data.shape[axis + 1:]
    return out.reshape(shape).astype(data.dtype, copy=False)


def _segment_reduce_meta(data, reduce, lengths=None, indices=None, offsets=None, axis=0,
                         unsafe=False, initial=None):
    axis, _ = _check(data, reduce, lengths, indices, offsets, axis)
    if offsets is not None:
        _check_dtypes(data, offsets, "offsets")
        segments = offsets.shape[-1] - 1
    else:
        _check_dtypes(data, lengths, "lengths")
        segments = lengths.shape[-1]
    shape = tuple(data.shape[:axis]) + (segments,) + tuple(data.shape[axis + 1:])
    return Spec(shape, data.dtype)


# ---------------------------------------------------------------- the backward


def _backward_kernel(grad, output, data, reduce, lengths=None, offsets=None, axis=0,
                     initial=None):
    kind = _reduction(reduce)
    axis = wrap_dim(axis, data.ndim)
    bounds = _offsets(data, lengths, offsets, axis, True)
    x = _as_3d(_work(data), axis)
    g = _as_3d(_work(grad), axis)
    out = _as_3d(_work(output), axis)
    result = np.zeros_like(x)
    n = x.shape[1]
    positions = np.arange(n)
    for b in range(x.shape[0]):
        starts, ends = bounds[b, :-1], bounds[b, 1:]
        if not starts.size:
            continue
        # The segment of each position along the axis; positions outside every segment
        # (before the first offset, after the last) get no gradient.
        seg = np.clip(np.searchsorted(ends, positions, side="right"), 0, starts.size - 1)
        inside = (positions >= starts[0]) & (positions < ends[-1])
        seg, pos = seg[inside], positions[inside]
        if not pos.size:
            continue
        gs, xs, os = g[b, seg], x[b, pos], out[b, seg]  # (P, K) each
        if kind == "sum":
            part = gs
        elif kind == "mean":
            part = gs / (ends - starts)[seg, None].astype(x.dtype)
        elif kind in ("max", "min"):
            # The elements equal to the result (NaN counting as equal to a NaN result) take
            # the gradient, `initial` none; as PyTorch's kernel, a positive gradient is
            # shared among them, any other given whole to each.
            hit = (xs == os) | (np.isnan(xs) & np.isnan(os))
            counts = np.zeros(g[b].shape, np.int64)
            np.add.at(counts, seg, hit.astype(np.int64))
            part = np.where(hit, gs, x.dtype.type(0))
            with np.errstate(all="ignore"):
                part = np.where(part > 0, part / counts[seg].astype(x.dtype), part)
        else:  # prod: the result over the element, or the product of the others where the
            # element is 0 or NaN (and the quotient would not give it)
            with np.errstate(all="ignore"):
                part = gs * os / xs
            init = x.dtype.type(1 if initial is None else initial)
            for p, k in zip(*np.nonzero((xs == 0) | np.isnan(xs))):
                s = seg[p]
                others = np.delete(x[b, starts[s]:ends[s], k], pos[p] - starts[s])
                part[p, k] = gs[p, k] * (init * np.prod(others, dtype=x.dtype))
        result[b, pos] = part
    return result.reshape(data.shape).astype(data.dtype, copy=False)


def _backward_meta(grad, output, data, reduce, lengths=None, offsets=None, axis=0,
                   initial=None):
    _reduction(reduce)
    return Spec(tuple(data.shape), data.dtype)


def _backward_samples(rng, dt):
    lengths = np.array([2, 0, 3, 1])
    return [Sample((rand_array(rng, (4,), dt), rand_array(rng, (4,), dt),
                    rand_array(rng, (6,), dt), r, lengths), name=r)
            for r in ("sum", "mean", "max", "min", "prod")]


segment_reduce_backward = register(
    "_segment_reduce_backward", kernel=_backward_kernel, meta=_backward_meta,
    node="NotImplemented", derivative=not_implemented_derivative("_segment_reduce_backward"),
    nondiff_args=(4, 5), gradcheck=False, samples=_backward_samples)


def _derivative(g, data, initial, lengths, offsets, axis, reduce, result):
    if axis >= 1 << 63:  # (saved as PyTorch shows it: see `_save`)
        axis -= 1 << 64
    grad = _call(segment_reduce_backward, g, result, data, reduce, lengths, offsets, axis,
                 initial)
    return (grad, None, None, None, None, None, None, None)


def _samples(rng, dt):
    def data(shape):  # distinct values away from 0, so that max/min and prod are smooth
        return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.25 + 0.5
                ) * rng.choice([-1, 1], shape)

    out = []
    for r in ("sum", "mean", "max", "min", "prod", "amax"):
        # (an empty segment's mean, max or min is not finite: no finite differences there)
        lengths = np.array([2, 0, 3, 1] if r in ("sum", "prod") else [2, 1, 2, 1])
        out.append(Sample((data((6,)).astype(dt), r, lengths), name=r))
    out += [
        Sample((data((6,)).astype(dt), "mean", np.array([2, 0, 3, 1]), None, None, 0, False,
                2.0), name="mean initial"),
        Sample((data((6,)).astype(dt), "max", None, None, np.array([0, 2, 3, 5, 6])),
               name="max offsets"),
        Sample((data((6,)).astype(dt), "min", np.array([2, 0, 3, 1]), None, None, 0, False,
                0.25), name="min empty initial"),
        Sample((data((2, 5, 3)).astype(dt), "prod", np.array([[2, 3], [0, 5]], np.int32),
                None, None, 1, False, 0.5), name="prod axis=1 initial"),
        Sample((data((2, 3)).astype(dt), "sum", None, None, np.array([[0, 1, 3], [1, 1, 2]]),
                1), name="sum offsets axis=1"),
    ]
    return out


def _save(out, data, reduce, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
          initial=None):
    # PyTorch keeps the axis as given, in an unsigned field: -1 shows as 2**64 - 1.
    shown = axis + (1 << 64) if axis < 0 else axis
    return (data, initial, lengths, offsets, shown, reduce, out)


segment_reduce_op = register(
    "segment_reduce", kernel=_segment_reduce_kernel, meta=_segment_reduce_meta,
    node="SegmentReduceBackward0", derivative=_derivative, nondiff_args=(2, 3, 4),
    save=_save,
    saved_names=("data", "initial", "lengths", "offsets", "axis", "reduce", "result"),
    samples=_samples, public="segment_reduce")


# ---------------------------------------------------------------- the public function

_NO_REDUCE = object()
_DEFAULTS = dict(lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None)


def _type_error(name: str, expected: str, value, position: int | None = None) -> TypeError:
    where = f" (position {position})" if position is not None else ""
    return TypeError(f"segment_reduce(): argument '{name}'{where} must be {expected}, not "
                     f"{type(value).__name__}")


def segment_reduce(data=_NO_REDUCE, reduce=_NO_REDUCE, *extra, lengths=None, indices=None,
                   offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce `data` ("sum", "mean", "prod", "max"/"amax" or "min"/"amin") over segments
    along `axis`, given by `lengths` or `offsets`, as `torch.segment_reduce`."""
    from .._dispatch import call
    from .._tensor import Tensor

    # (PyTorch's argument parser's wording, not Python's)
    if extra:
        raise TypeError(f"segment_reduce() takes 2 positional arguments but {2 + len(extra)} "
                        "were given")
    missing = [f'"{name}"' for name, value in (("data", data), ("reduce", reduce))
               if value is _NO_REDUCE]
    if missing:
        word = "arguments" if len(missing) == 1 else "argument"  # (sic)
        raise TypeError(f"segment_reduce() missing {len(missing)} required positional "
                        f"{word}: {', '.join(missing)}")
    given = dict(lengths=lengths, indices=indices, offsets=offsets, axis=axis, unsafe=unsafe,
                 initial=initial)
    kwargs = {k: v for k, v in given.items() if v is not _DEFAULTS[k]}
    for value in (data, lengths, indices, offsets):
        # A tensor-like of its own (fx's Proxy) records or runs the call itself.
        handler = getattr(type(value), "__fusegrad_function__", None)
        if handler is not None and not isinstance(value, Tensor):
            return handler(segment_reduce, (type(value),), (data, reduce), kwargs)
    if not isinstance(data, Tensor):
        raise _type_error("data", "Tensor", data, 1)
    if not isinstance(reduce, str):
        raise _type_error("reduce", "str", reduce, 2)
    for name, value in (("lengths", lengths), ("indices", indices), ("offsets", offsets)):
        if value is not None and not isinstance(value, Tensor):
            raise _type_error(name, "Tensor", value)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise _type_error("axis", "int", axis)
    if not isinstance(unsafe, (bool, np.bool_)):
        raise _type_error("unsafe", "bool", unsafe)
    if isinstance(initial, Tensor):  # a one-element tensor is a Number
        initial = initial.item()
    if initial is not None:
        if isinstance(initial, (complex, np.complexfloating)):
            raise RuntimeError("value cannot be converted to type float without overflow")
        if not isinstance(initial, (int, float, np.number, np.bool_)):
            raise _type_error("initial", "Number", initial)
        initial = initial.item() if isinstance(initial, np.generic) else initial
    return call(segment_reduce_op, data, reduce, lengths, indices, offsets, int(axis),
                bool(unsafe), initial)
