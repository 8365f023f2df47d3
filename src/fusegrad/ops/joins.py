"""Joining, splitting and repeating: cat, stack, unbind, split, split_with_sizes, repeat."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._shapes import FORMAT_ORDERS, dense_strides, in_memory_order, suggest_format
from .._symbolic import size_int
from . import _onnx as ox
from ._onnx import norm_dim
from ._onnx import repeat as _onnx_repeat
from ._util import (
    Spec,
    c_contiguous,
    dense_format,
    format_of,
    format_strides,
    rand_array,
    result_np,
    size_str,
    wrap_dim,
)
from .registry import Sample, register
from .views import (
    _select_meta,
    _slice_meta,
    empty_at,
)


def _cat_meta(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for k, t in enumerate(tensors):  # (PyTorch's first check: a 0-d tensor anywhere)
        if not len(t.shape):
            raise RuntimeError(f"zero-dimensional tensor (at position {k}) cannot be "
                               "concatenated")
    live = [t for t in tensors if not (len(t.shape) == 1 and t.shape[0] == 0)]
    if not live:
        return Spec((0,), _dtype.result_type(*tensors))
    ref = live[0]
    n = len(ref.shape)
    d = wrap_dim(dim, n)
    total = 0
    for k, t in enumerate(tensors):
        if len(t.shape) == 1 and t.shape[0] == 0:
            continue
        if len(t.shape) != n:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {n} and {len(t.shape)}")
        for i in range(n):
            if i != d and t.shape[i] != ref.shape[i]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[i]} but got size {t.shape[i]} for tensor number {k} in the "
                    "list.")
        total += t.shape[d]
    shape = tuple(ref.shape[:d]) + (total,) + tuple(ref.shape[d + 1:])
    # The memory format all the joined tensors suggest (contiguous when they differ), as
    # PyTorch's cat allocates its result.
    formats = {suggest_format(tuple(t.shape), tuple(t.stride())) for t in live}
    fmt = formats.pop() if len(formats) == 1 else None
    return Spec(shape, _dtype.result_type(*[x for x in tensors]), format_strides(shape, fmt))


def _cat_kernel(arrays, dim=0):
    live = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)]
    dt = result_np(*arrays) if arrays else None
    if not live:
        if not arrays:
            raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
        return np.zeros((0,), dtype=dt)
    if any(not a.ndim for a in arrays):
        return _cat_meta(arrays, dim)  # (raises its message, naming the position)
    d = wrap_dim(dim, live[0].ndim)
    return np.concatenate([a.astype(dt, copy=False) for a in live], axis=d)


def _cat_derivative(g, shapes, dim):
    grads = []
    start = 0
    live = [s for s in shapes if not (len(s) == 1 and s[0] == 0)]
    d = wrap_dim(dim, len(live[0])) if live else 0
    for s in shapes:
        if len(s) == 1 and s[0] == 0:
            grads.append(g.new_zeros(s))
            continue
        grads.append(g.narrow(d, start, s[d]))
        start += s[d]
    return (grads, None)


cat = register(
    "cat", autocast="promote",
    quantized={"kernel": "_cat"},
    kernel=dense_format(_cat_kernel), meta=_cat_meta, list_arg=True, node="CatBackward0",
    lowering=lambda v, tensors, dim=0: v.cat(tensors, dim),
    derivative=_cat_derivative, save=lambda out, ts, dim=0: ([t.shape for t in ts], dim),
    samples=lambda rng, dt: [Sample(([rand_array(rng, s, dt) for s in ss], d)) for ss, d in (
        (((2, 3), (4, 3)), 0), (((2, 3), (2, 1), (2, 2)), 1), (((3,), (0,), (2,)), 0),
        (((2, 3), (0,)), -1))],
    onnx=lambda b, inputs, args, kwargs, opset: b.emit(
        "Concat", [b.cast(v, b.out_dtype) for v, t in zip(inputs[0], args[0])
                   if t.dim() == b.out_rank],  # PyTorch skips 1-D empty tensors
        axis=norm_dim(args[1] if len(args) > 1 else 0, b.out_rank)),
    saved_names=("", "dim"))

def _unbind_kernel(a, dim=0):
    if a.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, a.ndim)
    return tuple(a[(slice(None),) * d + (i, Ellipsis)] for i in range(a.shape[d]))


def _unbind_meta(a, dim=0):
    if len(a.shape) == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, len(a.shape))
    return [_select_meta(a, d, i) for i in range(a.shape[d])]


def _unbind_derivative(grads, dim):
    if not isinstance(grads, list):  # a single output
        grads = [grads]
    return (_cat_fn([g.unsqueeze(dim) for g in grads], dim), None)


def _cat_fn(tensors, dim):
    from .._dispatch import call

    return call(cat, tensors, dim)


unbind = register(
    "unbind.int", kernel=_unbind_kernel, meta=_unbind_meta, view=True, node="UnbindBackward0",
    derivative=_unbind_derivative, save=lambda out, a, dim=0: (dim,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 4), 0), ((3, 4), 1), ((2, 3, 2), -1), ((1,), 0))],
    decomposition=lambda a, dim=0: tuple(a.select(dim, i) for i in range(a.shape[dim])),
    public="unbind", onnx=lambda b, inputs, args, kwargs, opset: [
        b.squeeze(v, [norm_dim(args[1] if len(args) > 1 else 0, args[0].dim())])
        for v in ox.split_dynamic(b, inputs, (args[0], 1) + tuple(args[1:2]), kwargs,
                                  opset)])

# ---------------------------------------------------------------- repeat, stack, split, flip


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def _repeat_check(shape, repeats):
    if len(repeats) < len(shape):
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            "of tensor")
    if any(r < 0 for r in repeats):
        # PyTorch names the result's size (the padded shape times the repeats): its first
        # negative entry, then all of it.
        padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
        out = [s * r for s, r in zip(padded, repeats)]
        first = next((v for v in out if v < 0), None)
        if first is not None:  # (a negative repeat of an empty dim gives an empty one)
            raise RuntimeError(f"Trying to create tensor with negative dimension {first}: "
                               f"{size_str(out)}")


def _repeat_kernel(a, repeats):
    repeats = tuple(int(r) for r in repeats)
    _repeat_check(a.shape, repeats)
    x = a.reshape((1,) * (len(repeats) - a.ndim) + a.shape)
    return np.tile(x, tuple(max(r, 0) for r in repeats))


def _repeat_meta(a, repeats):
    repeats = tuple(map(size_int, repeats))
    _repeat_check(tuple(a.shape), repeats)
    shape = (1,) * (len(repeats) - len(a.shape)) + tuple(a.shape)
    return Spec(tuple(s * r for s, r in zip(shape, repeats)), a.dtype)


def _repeat_derivative(g, shape, repeats):
    """PyTorch's steps (their nodes under create_graph, found by experiment): each leading
    dim the repeats add summed away in turn, then, where a dim is repeated, each dim split
    into (repeat, size) and the repeats summed; nothing at all for repeats of 1 only."""
    lead = len(repeats) - len(shape)
    for _ in range(lead):
        g = g.sum([0])
    own = tuple(repeats[lead:])
    if any(r != 1 for r in own):
        split = []
        for r, s in zip(own, shape):
            split += [r, s]
        g = g.reshape(split).sum(list(range(0, 2 * len(own), 2)))
    return (g, None)


repeat = register(
    "repeat", kernel=c_contiguous(_repeat_kernel), meta=_repeat_meta, node="RepeatBackward0",
    quantized={"kernel": "_repeat"},
    derivative=_repeat_derivative, save=lambda out, a, repeats: (a.shape, tuple(repeats)),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), r), name=f"{s}x{r}") for s, r in (
        ((3, 4), (2, 1)), ((3,), (2, 2)), ((), (3,)), ((2, 3), (1, 2, 2)), ((0, 2), (2, 1)))],
    lowering=lambda v, a, repeats: v.repeat(a, repeats), onnx=_onnx_repeat)


def _stack_meta(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {size_str(shape)} at "
                f"entry 0 and {size_str(tuple(t.shape))} at entry {i}")
    d = wrap_dim(dim, len(shape) + 1)
    out = shape[:d] + (len(tensors),) + shape[d:]
    order = _stack_order(tensors, d)
    return Spec(out, _dtype.result_type(*tensors),
                None if order is None else dense_strides(out, order))


def _stack_order(items, d: int) -> tuple | None:
    """The memory order of `stack(items, d)`'s result, outermost first, where it is not
    the one NumPy's stack and `dense_format` give: items (arrays or fakes) that all suggest
    one channels-last format, stacked along a dim inside the tensor (not after its last),
    give PyTorch a result whose new dim sits just outside dim `d` of their memory order
    (`(N, C, H, W)` stacked at 0: S N H W C; at 1: N H W S C). None for the rest (the
    common contiguous case: one cheap format test per item)."""
    fmt = format_of(items[0])
    if fmt is None or d >= len(items[0].shape) or \
            any(format_of(t) != fmt for t in items[1:]):
        return None
    order = []
    for k in FORMAT_ORDERS[fmt]:
        if k == d:
            order.append(d)  # the new dim, just outside the dim it precedes
        order.append(k + 1 if k >= d else k)
    return tuple(order)


def _stack_kernel(arrays, dim=0):
    if not arrays:
        raise RuntimeError("stack expects a non-empty TensorList")
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError("shapes differ")
    d = wrap_dim(dim, arrays[0].ndim + 1)
    dt = result_np(*arrays)
    order = _stack_order(arrays, d)
    if order is None:
        return _dense_stack(arrays, d, dt)
    shape = arrays[0].shape
    out = in_memory_order(lambda s: np.empty(s, dt), shape[:d] + (len(arrays),) + shape[d:],
                          order)
    for i, a in enumerate(arrays):
        out[(slice(None),) * d + (i,)] = a
    return out


@dense_format
def _dense_stack(arrays, d, dt):
    return np.stack([a.astype(dt, copy=False) for a in arrays], axis=d)


stack = register(
    "stack", autocast="promote",
    kernel=_stack_kernel, meta=_stack_meta, list_arg=True, node="StackBackward0",
    decomposition=lambda ts, dim=0: _call(cat, [t.unsqueeze(wrap_dim(dim, len(ts[0].shape) + 1))
                                                for t in ts], dim),
    derivative=lambda g, n, dim: ([g.select(dim, i) for i in range(n)], None),
    save=lambda out, ts, dim=0: (len(ts), dim),  # as given (PyTorch's `_saved_dim`)
    samples=lambda rng, dt: [Sample(([rand_array(rng, s, dt) for _ in range(n)], d))
                             for s, n, d in (((2, 3), 2, 0), ((2, 3), 3, -1), ((), 2, 0),
                                             ((4,), 1, 1), ((0, 2), 2, 1))],
    onnx=lambda b, inputs, args, kwargs, opset: b.emit("Concat", [
        b.unsqueeze(b.cast(v, b.out_dtype), [norm_dim(args[1] if len(args) > 1 else 0,
                                                      b.out_rank)]) for v in inputs[0]],
        axis=norm_dim(args[1] if len(args) > 1 else 0, b.out_rank)), saved_names=("", "dim"))


def _split_sizes(size, split_size):
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size="
                           f"{split_size}")
    if split_size == 0:
        if size != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {size}")
        return [0]
    # (the last piece as what is left: a symbolic dim's stays an expression of its size,
    # so the pieces sum to the size without a guard fixing it)
    n = int(max((size + split_size - 1) // split_size, 1))
    return [split_size] * (n - 1) + [size - (n - 1) * split_size]


def _split_with_sizes_check(shape, sizes, dim) -> tuple[int, list]:
    """(`dim` wrapped, the sizes as ints, a symbolic size kept: the last piece of a dynamic
    dim), or PyTorch's error (which names `dim` as given)."""
    if len(shape) == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, len(shape))
    sizes = [size_int(s) for s in sizes]
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                           f"entries, but got split_sizes={size_str(sizes)}")
    if sum(sizes) != shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {shape[d]} (input tensor's "
            f"size at dimension {dim}), but got split_sizes={size_str(sizes)}")
    return d, sizes


def _split_with_sizes_kernel(a, sizes, dim=0):
    d, sizes = _split_with_sizes_check(a.shape, sizes, dim)
    out = []
    start = 0
    for s in sizes:
        piece = a[(slice(None),) * d + (slice(start, start + s),)]
        if not s and start:  # an empty piece starts where PyTorch's slice would put it
            piece = empty_at(a, piece, start * a.strides[d] // a.itemsize)
        out.append(piece)
        start += s
    return tuple(out)


def _split_with_sizes_meta(a, sizes, dim=0):
    d, sizes = _split_with_sizes_check(tuple(a.shape), sizes, dim)
    out = []
    start = 0
    for s in sizes:
        out.append(_slice_meta(a, d, start, start + s, 1))
        start += s
    return out


def _split_derivative(grads, shape, dim, sizes):
    if not isinstance(grads, list):
        grads = [grads]
    d = wrap_dim(dim, len(shape))
    return (_call(cat, list(grads), d), None, None)


def _split_with_sizes_decomposition(a, sizes, dim=0):
    """The pieces as slices (`narrow`) of `a`."""
    _split_with_sizes_meta(a, sizes, dim)
    d = wrap_dim(dim, a.dim())
    pieces, start = [], 0
    for s in sizes:  # (added in turn: a traced size stays symbolic)
        pieces.append(a.narrow(d, size_int(start), size_int(s)))
        start = start + s
    return tuple(pieces)


def _split_tensor_decomposition(a, split_size, dim=0):
    if a.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.dim())
    sizes = _split_sizes(a.shape[d], size_int(split_size))
    return _split_with_sizes_decomposition(a, sizes, d)


split_with_sizes = register(
    "split_with_sizes", kernel=_split_with_sizes_kernel, meta=_split_with_sizes_meta,
    view=True, node="SplitWithSizesBackward0", derivative=_split_derivative,
    save=lambda out, a, sizes, dim=0: (a.shape, dim, sizes), public="split",
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), z, d), name=f"{s} {z} {d}")
                             for s, z, d in (((3, 4), (1, 3), 1), ((5,), (2, 0, 3), 0),
                                             ((4, 2), (4,), 0))],
    onnx=ox.split_dynamic,
    decomposition=_split_with_sizes_decomposition)


def _split_tensor_kernel(a, split_size, dim=0):
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    return _split_with_sizes_kernel(a, _split_sizes(a.shape[d], size_int(split_size)), d)


def _split_tensor_meta(a, split_size, dim=0):
    if len(a.shape) == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, len(a.shape))
    return _split_with_sizes_meta(a, _split_sizes(a.shape[d], size_int(split_size)), d)


split = register(
    "split.Tensor", kernel=_split_tensor_kernel, meta=_split_tensor_meta, view=True,
    node="SplitBackward0", derivative=_split_derivative,
    save=lambda out, a, split_size, dim=0: (a.shape, dim, split_size), public="split",
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), z, d), name=f"{s} {z} {d}")
                             for s, z, d in (((3, 4), 2, 1), ((5,), 2, 0), ((4, 2), 4, 0),
                                             ((3, 4), 5, -1))],
    onnx=ox.split_dynamic,
    decomposition=_split_tensor_decomposition)
