"""Views: view, reshape helpers, permute, transpose, t, expand, (un)squeeze, select, slice,
alias, as_strided.

View ops return NumPy views of their input, so writes show through; dispatch links the
result to its base and shares the version counter.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call, save_shape
from .._shapes import (  # noqa: F401  (the view ops' helpers)
    elem_strides,
    empty_strides,
    storage_offset,
)
from .._symbolic import size_int
from . import _onnx as ox
from ._onnx import INT64_MAX, identity, norm_dim
from ._onnx import reshape as reshape_onnx
from ._util import (
    Spec,
    contiguous_strides,
    dtype_of,
    numel,
    rand_array,
    saved_shape,
    size_str,
    strided_view,
    wrap_dim,
)
from .reductions import sum_to_shape
from .registry import REGISTRY, Sample, register


def infer_size(shape, n: int) -> tuple:
    """`shape` with its -1 resolved for `n` elements; PyTorch's errors for bad shapes."""
    shape = tuple(map(size_int, shape))
    infer = [i for i, s in enumerate(shape) if s == -1]
    if len(infer) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for i, s in enumerate(shape):
        if s != -1:
            if s < 0:
                raise RuntimeError(
                    f"invalid shape dimension {s} at index {i} of shape {size_str(shape)}")
            known *= s
    if infer:
        if known == 0 and n == 0:
            raise RuntimeError(
                f"cannot reshape tensor of 0 elements into shape {size_str(shape)} because the "
                "unspecified dimension size -1 can be any value and is ambiguous")
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{size_str(shape)}' is invalid for input of size {n}")
        shape = shape[:infer[0]] + (n // known,) + shape[infer[0] + 1:]
    elif known != n:
        raise RuntimeError(f"shape '{size_str(shape)}' is invalid for input of size {n}")
    return shape


def view_strides(shape, strides, new_shape):
    """Strides for viewing (`shape`, `strides`) as `new_shape`, or None if no view exists."""
    if numel(shape) == 0 or numel(new_shape) == 0:
        return contiguous_strides(new_shape)
    old = [(s, st) for s, st in zip(shape, strides) if s != 1]
    out = [0] * len(new_shape)
    oi = 0
    ni = 0
    new = list(new_shape)
    while ni < len(new):
        if new[ni] == 1:
            out[ni] = 1 if ni == len(new) - 1 else 0
            ni += 1
            continue
        if oi >= len(old):
            return None
        # Take a run of old dims that is contiguous, covering the next new dims.
        chunk = old[oi][0]
        chunk_stride = old[oi][1]
        oi += 1
        group = [ni]
        acc = new[ni]
        ni += 1
        while acc != chunk:
            if acc < chunk:
                while ni < len(new) and new[ni] == 1:
                    out[ni] = 0
                    ni += 1
                if ni >= len(new):
                    return None
                group.append(ni)
                acc *= new[ni]
                ni += 1
            else:
                if oi >= len(old) or old[oi - 1][1] != old[oi][0] * old[oi][1]:
                    return None
                chunk *= old[oi][0]
                chunk_stride = old[oi][1]
                oi += 1
        st = chunk_stride
        for j in reversed(group):
            out[j] = st
            st *= new[j]
    for j, s in enumerate(new):
        if s == 1:
            out[j] = out[j + 1] * new[j + 1] if j + 1 < len(new) else 1
    return tuple(out)


_VIEW_ERROR = ("view size is not compatible with input tensor's size and stride (at least one "
               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")


def _view_kernel(a, shape):
    # NumPy resolves -1 and refuses copies itself; on failure the meta names the problem.
    # (A plain loop: `min(shape, default=0)` costs more than the reshape.)
    for s in shape:
        if s < 0 and (s < -1 or a.size == 0):
            infer_size(shape, a.size)  # sizes NumPy would accept but PyTorch refuses
    if a.flags.c_contiguous:
        return a.reshape(shape)  # never a copy for a C-contiguous array
    # The method, not np.reshape: the same no-copy guarantee without the Python-level
    # function and its array-function dispatch (about 1 µs per view).
    return a.reshape(shape, copy=False)


def _view_meta(a, shape):
    shape = infer_size(shape, numel(a.shape))
    strides = view_strides(tuple(a.shape), elem_strides(a), shape)
    if strides is None:
        raise RuntimeError(_VIEW_ERROR)
    return Spec(shape, a.dtype, strides)


def _view_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), n), name=f"{s}->{n}") for s, n in (
        ((3, 4), (12,)), ((3, 4), (2, -1)), ((2, 3, 4), (6, 4)), ((), (1,)), ((1,), ()),
        ((0, 3), (3, 0)), ((4,), (2, 1, 2)))]


view = register(
    "view", kernel=_view_kernel, meta=_view_meta, view=True, node="ViewBackward0",
    quantized={"per_channel": "_view_per_channel"},
    derivative=lambda g, shape: (g.reshape(shape), None), save=save_shape,
    samples=_view_samples, onnx=reshape_onnx,
    lowering=lambda v, a, shape: v.reshape(a, shape),
    saved_names=("self_sym_sizes",))
unsafe_view = register(
    "_unsafe_view", kernel=lambda a, shape: np.reshape(a, infer_size(shape, a.size)),
    quantized={"moves": True, "per_channel": "_view_per_channel"},
    meta=lambda a, shape: Spec(infer_size(shape, numel(a.shape)), a.dtype),
    node="UnsafeViewBackward0",
    derivative=lambda g, shape: (g.reshape(shape), None), save=save_shape,
    samples=_view_samples, onnx=reshape_onnx, public="reshape",
    decomposition=lambda a, shape: a.view(shape),
    lowering=lambda v, a, shape: v.reshape(a, shape),
    saved_names=("self_sym_sizes",))


def _permute_check(ndim, dims):
    if len(dims) != ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {ndim} is not "
            f"equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return dims


def _permute_meta(a, dims):
    dims = _permute_check(len(a.shape), dims)
    st = elem_strides(a)
    return Spec(tuple(a.shape[d] for d in dims), a.dtype, tuple(st[d] for d in dims))


def _transpose_onnx(b, x, perm):
    """Transpose by `perm` (no node for the identity permutation)."""
    if list(perm) == sorted(perm):
        return x
    return b.emit("Transpose", [x], perm=[int(p) for p in perm])


def _swap_onnx(b, inputs, args, kwargs, opset):
    """transpose(self, dim0, dim1) and t(self): Transpose with two dims swapped."""
    rank = args[0].dim()
    perm = list(range(rank))
    d0, d1 = (norm_dim(args[1], rank), norm_dim(args[2], rank)) if len(args) > 2 else (0, 1)
    if rank >= 2:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return _transpose_onnx(b, inputs[0], perm)


permute = register(
    "permute", kernel=lambda a, dims: a.transpose(_permute_check(a.ndim, dims)),
    meta=_permute_meta, view=True, permutes=True, node="PermuteBackward0",
    lowering=lambda v, a, dims: v.permute(a, dims),
    derivative=lambda g, dims: (g.permute(tuple(np.argsort(_permute_check(g.dim(), dims)))),
                                None),
    save=lambda out, a, dims: (dims,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((), ()), ((2, 0, 3), (0, 2, 1)))],
    onnx=lambda b, inputs, args, kwargs, opset: _transpose_onnx(
        b, inputs[0], [norm_dim(d, args[0].dim()) for d in args[1]]),
    saved_names=("dims",))


def _swap(seq, d0, d1):
    seq = list(seq)
    seq[d0], seq[d1] = seq[d1], seq[d0]
    return tuple(seq)


def _transpose_meta(a, d0, d1):
    n = len(a.shape)
    d0, d1 = wrap_dim(d0, n), wrap_dim(d1, n)
    if n == 0:
        return Spec((), a.dtype, ())
    return Spec(_swap(a.shape, d0, d1), a.dtype, _swap(elem_strides(a), d0, d1))


def _transpose_kernel(a, d0, d1):
    n = a.ndim
    if n and -n <= d0 < n and -n <= d1 < n:
        return a.swapaxes(d0, d1)  # in range: the method wraps negative dims itself
    d0, d1 = wrap_dim(d0, n), wrap_dim(d1, n)
    return a.view() if n == 0 else a.swapaxes(d0, d1)


transpose = register(
    "transpose.int", kernel=_transpose_kernel, meta=_transpose_meta, view=True, permutes=True,
    lowering=lambda v, a, d0, d1: v.transpose(a, d0, d1),
    node="TransposeBackward0",
    derivative=lambda g, d0, d1: (g.transpose(d0, d1), None, None),
    save=lambda out, a, d0, d1: (d0, d1),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), i, j)) for s, i, j in (
        ((3, 4), 0, 1), ((2, 3, 4), -1, 0), ((2, 3), 1, 1), ((), 0, -1))],
    onnx=_swap_onnx, public="transpose",
    saved_names=("dim0", "dim1"), decomposition=lambda a, d0, d1: _swapped(a, d0, d1))


def _swapped(a, d0: int, d1: int):
    """`a` with dims d0 and d1 exchanged, as a permute (an alias for a 0-d tensor)."""
    n = a.dim()
    if n == 0:
        wrap_dim(d0, n), wrap_dim(d1, n)  # the range checks transpose makes
        return call(alias, a)
    dims = list(range(n))
    d0, d1 = wrap_dim(d0, n), wrap_dim(d1, n)
    dims[d0], dims[d1] = d1, d0
    return a.permute(dims)


def _t_check(ndim):
    if ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {ndim}D")


def _t_kernel(a):
    _t_check(a.ndim)
    return a.T if a.ndim == 2 else a.view()


def _t_decomposition(a):
    _t_check(a.dim())
    return a.permute(1, 0) if a.dim() == 2 else call(alias, a)


def _t_meta(a):
    _t_check(len(a.shape))
    return Spec(tuple(reversed(a.shape)), a.dtype, tuple(reversed(elem_strides(a))))


def _t_derivative(g):
    return (g.t(),)


# On arrays: a view of the gradient's (the engine never adds into a view).
_t_derivative.on_arrays = lambda g: (_t_kernel(g),)

t = register(
    "t", kernel=_t_kernel, meta=_t_meta, view=True, permutes=True, node="TBackward0",
    lowering=lambda v, a: v.transpose(a, 0, -1),
    derivative=_t_derivative,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),)) for s in ((3, 4), (5,), ())],
    onnx=_swap_onnx,
    decomposition=_t_decomposition)


def _expand_shape(shape, sizes, dtype=None):
    """The shape a tensor of `shape` (and `dtype`, which the error names) expands to given
    `sizes` (-1 keeps a size), or PyTorch's error."""
    sizes = tuple(map(size_int, sizes))
    if len(sizes) < len(shape):
        name = (dtype or _dtype.float32).tensor_type_name
        raise RuntimeError(
            f"expand({name}{{{size_str(shape)}}}, size={size_str(sizes)}): the number "
            "of sizes provided (" + str(len(sizes)) + ") must be greater or equal to the number "
            "of dimensions in the tensor (" + str(len(shape)) + ")")
    out = [0] * len(sizes)
    lead = len(sizes) - len(shape)
    for i in reversed(range(len(sizes))):  # PyTorch reports the last mismatch first
        s = sizes[i]
        if i < lead:
            if s < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                    "non-existing dimension " + str(i))
            out[i] = s
            continue
        have = shape[i - lead]
        if s == -1:
            s = have
        if have != s and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({have}) at "
                f"non-singleton dimension {i}.  Target sizes: {size_str(sizes)}.  Tensor sizes: "
                f"{size_str(shape)}")
        out[i] = s
    return tuple(out)


def _expand_meta(a, sizes):
    shape = _expand_shape(tuple(a.shape), sizes, dtype_of(a))
    st = elem_strides(a)
    lead = len(shape) - len(a.shape)
    strides = tuple(0 if i < lead or (a.shape[i - lead] == 1 and s != 1) else st[i - lead]
                    for i, s in enumerate(shape))
    return Spec(shape, a.dtype, strides)


def _expand_kernel(a, sizes):
    spec = _expand_meta(a, sizes)
    return strided_view(a, spec.shape, tuple(s * a.itemsize for s in spec.strides))


expand = register(
    "expand", kernel=_expand_kernel,
    lowering=lambda v, a, sizes, implicit=False: v.expand(a, sizes),
    meta=_expand_meta, view=True, node="ExpandBackward0",
    derivative=lambda g, shape: (sum_to_shape(g, shape), None),
    save=lambda out, a, sizes: (a.shape,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), n), name=f"{s}->{n}") for s, n in (
        ((4,), (3, 4)), ((3, 1), (3, 5)), ((), (2, 2)), ((1, 3), (2, -1, 3)), ((0,), (2, 0)))],
    onnx=ox.expand_dynamic,
    saved_names=("self_sym_sizes",))


def _unsqueeze_kernel(a, dim):
    d = wrap_dim(dim, a.ndim + 1)
    # PyTorch's new stride: the next dim's extent (its size times its stride), or 1 at the
    # end, the others kept; NumPy's `expand_dims` picks others for some layouts
    # (`x.t().unsqueeze(2)`), its reshape renewing the strides of size-1 dims.
    st, shape = a.strides, a.shape
    if not a.size:  # (the strides PyTorch gives it: NumPy's of a new empty array are zeros)
        st = tuple(s * a.itemsize for s in empty_strides(a))
    want = st[:d] + (st[d] * shape[d] if d < a.ndim else a.itemsize,) + st[d:]
    if a.flags.c_contiguous and a.size:  # a view over its buffer (a tenth of as_strided's cost)
        try:
            return np.ndarray(shape[:d] + (1,) + shape[d:], a.dtype, a, 0, want)
        except (TypeError, ValueError, BufferError):
            pass  # (a dtype that exports no buffer: ml_dtypes')
    return np.lib.stride_tricks.as_strided(a, shape[:d] + (1,) + shape[d:], want,
                                           writeable=a.flags.writeable)


def _unsqueeze_meta(a, dim):
    n = len(a.shape)
    d = wrap_dim(dim, n + 1)
    st = elem_strides(a)
    new_st = st[d] * a.shape[d] if d < n else 1
    return Spec(tuple(a.shape[:d]) + (1,) + tuple(a.shape[d:]), a.dtype,
                st[:d] + (new_st,) + st[d:])


unsqueeze = register(
    "unsqueeze", kernel=_unsqueeze_kernel, meta=_unsqueeze_meta, view=True,
    quantized={"per_channel": "_unsqueeze_per_channel"},
    lowering=lambda v, a, dim: v.unsqueeze(a, dim),
    node="UnsqueezeBackward0", derivative=lambda g, dim, n: (g.squeeze(wrap_dim(dim, n + 1)),
                                                             None),
    save=lambda out, a, dim: (dim, a.dim()),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 4), 0), ((3, 4), -1), ((3, 4), 1), ((), 0), ((0,), 1))],
    onnx=lambda b, inputs, args, kwargs, opset: b.unsqueeze(
        inputs[0], [norm_dim(args[1], args[0].dim() + 1)]),
    saved_names=("dim", ""))


def _squeeze_dims(shape, dims):
    n = len(shape)
    if dims is None:
        return tuple(i for i, s in enumerate(shape) if s == 1)
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(d for d in (wrap_dim(x, n) for x in dims) if n and shape[d] == 1)


def _squeeze_kernel(a, dims=None):
    return np.squeeze(a, axis=_squeeze_dims(a.shape, dims)).view()


def _squeeze_meta(a, dims=None):
    drop = _squeeze_dims(tuple(a.shape), dims)
    st = elem_strides(a)
    keep = [i for i in range(len(a.shape)) if i not in drop]
    return Spec(tuple(a.shape[i] for i in keep), a.dtype, tuple(st[i] for i in keep))


def _squeeze_derivative(g, shape):
    return (g.reshape(shape), None)


def _squeeze_onnx(b, inputs, args, kwargs, opset):
    """Squeeze the size-1 dims among those named (all when none are)."""
    dims = list(_squeeze_dims(tuple(args[0].shape), args[1] if len(args) > 1 else None))
    return b.squeeze(inputs[0], dims) if dims else inputs[0]


def _squeeze(name, node, dims_sample, decomposition=None, lowering=None):
    return register(
        name, kernel=_squeeze_kernel, meta=_squeeze_meta, view=True, node=node,
        derivative=_squeeze_derivative, save=lambda out, a, dims=None: (a.shape,),
        samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),) + dims_sample)
                                 for s in ((3, 1, 4), (1, 1), (1, 0, 1))],
        public="squeeze", onnx=_squeeze_onnx, decomposition=decomposition, lowering=lowering,
        quantized={"per_channel": "_squeeze_per_channel"})


# squeeze.dims is the core form: the other overloads name their dims for it.
squeeze = _squeeze("squeeze", "SqueezeBackward0", (),
                   lambda a: call(squeeze_dims, a, list(range(a.dim()))),
                   lowering=lambda v, a: v.squeeze(a))
squeeze_dim = _squeeze("squeeze.dim", "SqueezeBackward1", (0,),
                       lambda a, dim: call(squeeze_dims, a, [dim]),
                       lowering=lambda v, a, dim: v.squeeze(a, dim))
squeeze_dims = _squeeze("squeeze.dims", "SqueezeBackward2", ((0, -1),),
                        lowering=lambda v, a, dims: v.squeeze(a, dims))


def _select_check(shape, dim, index):
    n = len(shape)
    if n == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, n)
    size = shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {size_str(shape)} at "
            f"dimension {d}")
    return d, index + size if index < 0 else index


def _select_kernel(a, dim, index):
    if dim == 0 and index.__class__ is int:  # `x[i]`: plain indexing, no tuple to build
        # NumPy wraps a negative index as PyTorch does, and raises IndexError for one out of
        # range (or a 0-d array), which dispatch answers with the meta's message.
        return a[index] if a.ndim > 1 else a[index, ...]  # `...`: a 0-d view
    d, i = _select_check(a.shape, dim, index)
    return a[(slice(None),) * d + (i, Ellipsis)]  # the Ellipsis keeps a 0-d result a view


def _select_meta(a, dim, index):
    d, i = _select_check(tuple(a.shape), dim, index)
    st = elem_strides(a)
    return Spec(tuple(a.shape[:d]) + tuple(a.shape[d + 1:]), a.dtype, st[:d] + st[d + 1:],
                i * st[d])


select = register(
    "select.int", kernel=_select_kernel, meta=_select_meta, view=True, node="SelectBackward0",
    quantized={"per_channel": "_select_per_channel"},
    lowering=lambda v, a, dim, index: v.select(a, dim, index),
    derivative=lambda g, shape, dim, index: (select_backward_fn(g, shape, dim, index), None,
                                             None),
    save=lambda out, a, dim, index: (saved_shape(a), dim, index),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, i)) for s, d, i in (
        ((3, 4), 0, 1), ((3, 4), 1, -1), ((2, 3, 4), 2, 0), ((5,), 0, 4))],
    public="select", onnx=ox.select_dynamic,
    saved_names=("self_sym_sizes", "dim", "index"))


def _select_backward_kernel(g, shape, dim, index):
    d, i = _select_check(shape, dim, index)
    out = np.zeros(shape, dtype=g.dtype)
    out[(slice(None),) * d + (i,)] = g
    return out


select_backward = register(
    "select_backward", kernel=_select_backward_kernel,
    meta=lambda g, shape, dim, index: Spec(tuple(shape), g.dtype),
    node="SelectBackwardBackward0",
    derivative=lambda gg, dim, index: (gg.select(dim, index), None, None, None),
    save=lambda out, g, shape, dim, index: (dim, index),
    samples=lambda rng, dt: [Sample((rand_array(rng, (4,), dt), (3, 4), 0, 1))],
    decomposition=lambda g, shape, dim, index: call(
        REGISTRY["select_scatter"], g.new_zeros(tuple(shape)), g, dim, index))


def select_backward_fn(g, shape, dim, index):
    """The gradient of `select`: `g` placed at `index` of a zero tensor of `shape`."""
    from .._dispatch import call

    return call(select_backward, g, tuple(shape), dim, index)


def slice_bounds(size: int, start, end, step: int):
    """Clamp a Python-style slice to `size`, as PyTorch's `slice` does."""
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end


def empty_at(a: np.ndarray, out: np.ndarray, offset: int) -> np.ndarray:
    """`out`, an empty view of `a`, moved to start `offset` elements past `a`'s first element
    in the same storage. NumPy leaves an empty slice at its source's first element, where
    PyTorch's slice moves the storage offset by start * stride (`x[4:].storage_offset()` is
    4); the array is empty, so nothing is read through the pointer. `out` unchanged where
    the storage cannot be addressed as a buffer (a view made by as_strided, say)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    at = (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
          + offset * a.itemsize)
    try:
        # Bytes, as some dtypes (bfloat16) export no buffer of their own.
        return np.ndarray(out.shape, out.dtype, buffer=root.view(np.uint8), offset=at,
                          strides=out.strides)
    except (TypeError, ValueError, BufferError):
        pass
    # Past the storage's end (PyTorch checks no bounds for an empty view): only an array
    # interface can name such a pointer.
    iface = dict(out.__array_interface__)
    iface["data"] = (root.__array_interface__["data"][0] + at, not out.flags.writeable)
    return np.asarray(_At(iface, out))


class _At:
    """An array interface (an empty array's geometry at a chosen address), holding the array
    it was made from."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, iface: dict, base: np.ndarray) -> None:
        self.__array_interface__ = iface
        self.base = base


def _slice_kernel(a, dim=0, start=None, end=None, step=1):
    d = wrap_dim(dim, a.ndim)
    s, e = slice_bounds(a.shape[d], start, end, step)
    out = a[(slice(None),) * d + (slice(s, e, step),)]
    if s >= e and s:  # an empty slice past the start: NumPy did not move the pointer
        return empty_at(a, out, s * a.strides[d] // a.itemsize)
    return out


def _slice_meta(a, dim=0, start=None, end=None, step=1):
    n = len(a.shape)
    d = wrap_dim(dim, n)
    s, e = slice_bounds(a.shape[d], start, end, step)
    length = (e - s + step - 1) // step
    st = elem_strides(a)
    shape = tuple(a.shape[:d]) + (length,) + tuple(a.shape[d + 1:])
    return Spec(shape, a.dtype, st[:d] + (st[d] * step,) + st[d + 1:], s * st[d])


def _slice_backward_kernel(g, shape, dim, start, end, step):
    d = wrap_dim(dim, len(shape))
    s, e = slice_bounds(shape[d], start, end, step)
    out = np.zeros(shape, dtype=g.dtype)
    out[(slice(None),) * d + (slice(s, e, step),)] = g
    return out


slice_backward = register(
    "slice_backward", kernel=_slice_backward_kernel,
    meta=lambda g, shape, dim, start, end, step: Spec(tuple(shape), g.dtype),
    node="SliceBackwardBackward0",
    derivative=lambda gg, dim, start, end, step: (
        call(slice_, gg, dim, start, end, step), None, None, None, None, None),
    save=lambda out, g, shape, dim, start, end, step: (dim, start, end, step),
    samples=lambda rng, dt: [Sample((rand_array(rng, (2, 4), dt), (5, 4), 0, 1, 4, 2))],
    decomposition=lambda g, shape, dim, start, end, step: call(
        REGISTRY["slice_scatter"], g.new_zeros(tuple(shape)), g, dim, start, end, step))


def _slice_derivative(g, shape, dim, start, end, step):
    from .._dispatch import call

    return (call(slice_backward, g, tuple(shape), dim, start, end, step), None, None, None, None)


slice_ = register(
    "slice.Tensor", kernel=_slice_kernel, meta=_slice_meta, view=True, node="SliceBackward0",
    quantized={"per_channel": "_slice_per_channel"},
    lowering=lambda v, a, dim=0, start=None, end=None, step=1: v.slice(a, dim, start, end, step),
    derivative=_slice_derivative,
    # an open start or end saved as PyTorch's defaults (0, INT64_MAX), as `_saved_*` read
    save=lambda out, a, dim=0, start=None, end=None, step=1: (
        a.shape, dim, 0 if start is None else start, INT64_MAX if end is None else end, step),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),) + a) for s, a in (
        ((5, 4), (0, 1, 4, 2)), ((5, 4), (1, -3, None, 1)), ((5,), (0, None, None, 3)),
        ((5, 4), (0, 7, 9, 1)))],
    public="slice", onnx=ox.slice_dynamic,
    saved_names=("self_sym_sizes", "dim", "start", "end", "step"))
alias = register(
    "alias", kernel=lambda a: a.view(), meta=lambda a: Spec(tuple(a.shape), a.dtype,
                                                            elem_strides(a)),
    quantized={"per_channel": "moves"}, view=True, node="AliasBackward0", derivative=lambda g: (g,),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt),))], onnx=identity)


def as_strided_kernel(a, size, stride, offset=None):
    """A view of `a`'s storage (its outermost NumPy base) with the given geometry."""
    storage = a
    while isinstance(storage.base, np.ndarray):
        storage = storage.base
    if offset is None:
        offset = (a.__array_interface__["data"][0]
                  - storage.__array_interface__["data"][0]) // max(a.itemsize, 1)
    flat = storage.reshape(-1) if storage.flags.c_contiguous else _memory_flat(storage)
    if len(size) and numel(size):
        need = offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1
        if need > flat.size:
            raise RuntimeError(
                f"setStorage: sizes {size_str(size)}, strides {size_str(stride)}, storage "
                f"offset {offset}, and itemsize {a.itemsize} requiring a storage size of "
                f"{need * a.itemsize} are out of bounds for storage of size "
                f"{flat.size * a.itemsize}")
    out = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=tuple(size), strides=tuple(s * a.itemsize for s in stride),
        writeable=True)
    if offset >= flat.size and offset:  # `flat[offset:]` is empty and NumPy left it at 0
        return empty_at(flat, out, offset)
    return out




def _memory_flat(storage: np.ndarray) -> np.ndarray:
    """A storage array's elements in memory order, as a 1-d view of the same memory where
    they fill one block from the first element on (an array laid out in another order: a
    clone of a transpose); else a copy (which writes through as_strided would not reach)."""
    span = sum((n - 1) * st for n, st in zip(storage.shape, storage.strides) if n > 1)
    if storage.size and span == (storage.size - 1) * storage.itemsize and \
            all(st > 0 for n, st in zip(storage.shape, storage.strides) if n > 1):
        return np.lib.stride_tricks.as_strided(storage, (storage.size,), (storage.itemsize,),
                                               writeable=storage.flags.writeable)
    return storage.ravel()


def _as_strided_derivative(g, shape, strides, offset, size, stride, out_offset):
    # Scatter g into a zero storage through the view's geometry, then read it back through the
    # input's geometry (the adjoint of as_strided).
    from .._dispatch import call

    inp = (shape, strides, offset)
    # An input whose elements share storage (an expanded view, say) takes each location's
    # gradient once in all, split evenly between the elements reading it, as in PyTorch.
    div = inp if _may_overlap(shape, strides) else None
    return (call(strided_transfer, g, (size, stride, out_offset), inp, div), None, None, None)


def _may_overlap(shape, strides) -> bool:
    """Whether two elements of this geometry may share a storage location: some stride, in
    increasing order, falls within the span of the dims with smaller strides (conservative:
    a false alarm only costs dividing by counts of one)."""
    span = 1
    for st, s in sorted((abs(st), s) for s, st in zip(shape, strides) if s > 1):
        if st < span:
            return True
        span += st * (s - 1)
    return False


def _geometry_index(geom):
    """The storage index of each element of a (size, stride, offset) geometry."""
    size, stride, off = geom
    if not len(size):
        return np.asarray(off)
    idx = off + sum(np.indices(size, sparse=True)[k] * stride[k] for k in range(len(size)))
    return np.broadcast_to(idx, size)


def _strided_transfer_kernel(g, src, dst, div=None):
    size, stride, off = src
    dshape, dstride, doff = dst
    extent = max(off + sum((s - 1) * st for s, st in zip(size, stride)) + 1 if numel(size)
                 else 0,
                 doff + sum((s - 1) * st for s, st in zip(dshape, dstride)) + 1 if numel(dshape)
                 else 0)
    storage = np.zeros(extent, dtype=g.dtype)
    if _plain_geometry(size, stride) and not _may_overlap(size, stride):
        # each location written at most once: a strided assignment (np.add.at, which the
        # overlapping geometries need, is some 25x slower)
        if numel(size):
            _storage_view(storage, src)[...] = g
    else:
        np.add.at(storage, _geometry_index(src), g)
    if div is not None:  # each location split between the elements of `div` that share it
        count = np.bincount(np.ravel(_geometry_index(div)), minlength=extent)[:extent]
        with np.errstate(divide="ignore", invalid="ignore"):
            # (locations outside `div` become NaN, as in PyTorch: only its adjoint reads them)
            storage = storage / count.astype(storage.dtype)
    if _plain_geometry(dshape, dstride) and numel(dshape):
        return np.array(_storage_view(storage, dst), order="C")  # (a copy: not storage's)
    return storage[_geometry_index(dst)]


def _plain_geometry(size, stride) -> bool:
    """Whether NumPy can view a geometry's elements in place: no negative stride."""
    return all(st >= 0 for st in stride)


def _storage_view(storage: np.ndarray, geom) -> np.ndarray:
    """The elements of a (size, stride, offset) geometry (non-negative strides, at least one
    element, inside `storage`) as a strided NumPy view of `storage`."""
    size, stride, off = geom
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(storage[off:], tuple(size),
                                           tuple(st * item for st in stride))


strided_transfer = register(
    "_strided_transfer", kernel=_strided_transfer_kernel,
    meta=lambda g, src, dst, div=None: Spec(tuple(dst[0]), g.dtype),
    node="AsStridedBackwardBackward0",
    # (the adjoint: the same split, the geometries swapped)
    derivative=lambda gg, src, dst, div=None: (strided_transfer_fn(gg, dst, src, div), None,
                                               None, None),
    save=lambda out, g, src, dst, div=None: (src, dst, div),
    samples=lambda rng, dt: [Sample((rand_array(rng, (2, 2), dt), ((2, 2), (1, 2), 0),
                                     ((3, 4), (4, 1), 0)))])


def strided_transfer_fn(g, src, dst, div=None):
    """Gradient routing between two geometries over one storage (see as_strided); `div`, a
    geometry whose elements share the gradient of each location they read."""
    from .._dispatch import call

    return call(strided_transfer, g, src, dst, div)


def _as_strided_meta(a, size, stride, offset=None):
    delta = 0 if offset is None else offset - a.storage_offset()
    return Spec(tuple(size), a.dtype, tuple(stride), delta)


as_strided = register(
    "as_strided", kernel=as_strided_kernel, meta=_as_strided_meta, view=True,
    node="AsStridedBackward0", derivative=_as_strided_derivative,
    save=lambda out, a, size, stride, offset=None: (
        tuple(a.shape), elem_strides(a), a.storage_offset(), tuple(size), tuple(stride),
        a.storage_offset() if offset is None else offset),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), (2, 2), (1, 2))),
                             Sample((rand_array(rng, (3, 4), dt), (3, 3), (4, 1), 1)),
                             Sample((rand_array(rng, (6,), dt), (2, 3), (1, 1)))],
    onnx=None)


def _squeeze_inplace_kernel(a, dim):
    d = wrap_dim(dim, a.ndim)
    return np.squeeze(a, axis=d) if a.ndim and a.shape[d] == 1 else a.view()


squeeze_inplace = register(
    "squeeze_.dim", kernel=_squeeze_inplace_kernel, meta=_squeeze_meta, inplace=True,
    node="SqueezeBackward4", derivative=lambda g, shape: (g.reshape(shape), None),
    save=lambda out, a, dim: (a.shape,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 1, 4), 1), ((1,), 0), ((1, 3), -1))],
    public="squeeze_", metadata_only=True)


# ---------------------------------------------------------------- view(dtype)


def _view_dtype_geometry(shape, strides, offset, old, new):
    """(shape, strides, offset) of a view of the same bytes as dtype `new` (fusegrad dtypes),
    with PyTorch's errors when the element sizes differ and the geometry does not allow it."""
    a, b = old.itemsize, new.itemsize
    if a == b:
        return tuple(shape), tuple(strides), offset
    what = f"to view {old.legacy} as {new.legacy} (different element sizes)"
    if not shape:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    shape, strides = list(shape), list(strides)
    if b > a:  # fewer, larger elements: everything but the last stride shrinks by the ratio
        r = b // a
        if shape[-1] % r:
            raise RuntimeError(f"self.size(-1) must be divisible by {r} {what}, but got "
                               f"{shape[-1]}")
        if offset % r:
            raise RuntimeError(f"self.storage_offset() must be divisible by {r} {what}, but "
                               f"got {offset}")
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        for i, s in enumerate(strides[:-1]):
            if s % r:
                raise RuntimeError(f"self.stride({i}) must be divisible by {r} {what}, but "
                                   f"got {s}")
        shape[-1] //= r
        return tuple(shape), tuple(s // r for s in strides[:-1]) + (1,), offset // r
    r = a // b  # more, smaller elements
    if strides[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
    shape[-1] *= r
    return tuple(shape), tuple(s * r for s in strides[:-1]) + (1,), offset * r


def _view_dtype_kernel(a, dtype):
    old = _dtype.from_numpy_dtype(a.dtype)
    # The storage offset's divisibility, read from the address: storages are aligned to more
    # than any element size, and an array made by as_strided does not know its storage.
    # (`view_dtype_check` has raised with the tensor's real offset before this runs.)
    address = a.__array_interface__["data"][0] // max(a.itemsize, 1)
    _view_dtype_geometry(a.shape, elem_strides(a), address, old, dtype)
    if a.ndim and a.shape[-1] == 1 and a.itemsize != dtype.itemsize:
        # NumPy wants a contiguous last axis; a length-1 axis is, whatever its stride says.
        a = np.lib.stride_tricks.as_strided(a, a.shape, a.strides[:-1] + (a.itemsize,))
    return a.view(dtype.np)


def _view_dtype_meta(a, dtype):
    shape, strides, offset = _view_dtype_geometry(tuple(a.shape), tuple(a.stride()),
                                                  a.storage_offset(), a.dtype, dtype)
    return Spec(shape, dtype, strides, offset - a.storage_offset())


def view_dtype_check(a, dtype) -> None:
    """PyTorch's errors for viewing tensor `a` as `dtype`, from its real storage offset."""
    if a.dtype.itemsize != dtype.itemsize:
        _view_dtype_meta(a, dtype)


def _view_dtype_samples(rng, dt):
    x = rand_array(rng, (3, 4), dt)
    return [Sample((x, d), name=d.name) for d in (
        _dtype.float32, _dtype.float64, _dtype.int32, _dtype.int16, _dtype.uint8,
        _dtype.bool_, _dtype.int64, _dtype.float16, _dtype.bfloat16)] + [
        Sample((rand_array(rng, (), dt), _dtype.int32 if dt == np.float32 else _dtype.int64),
               name="0-d"),
        Sample((rand_array(rng, (2, 1, 8), dt), _dtype.int8), name="3-d")]


view_dtype = register(
    "view.dtype", kernel=_view_dtype_kernel, meta=_view_dtype_meta, view=True,
    samples=_view_dtype_samples, public="view")
