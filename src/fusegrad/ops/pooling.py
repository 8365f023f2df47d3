"""Pooling ops PyTorch records as one node: max_pool2d_with_indices, avg_pool2d and
_adaptive_avg_pool2d (`MaxPool2DWithIndicesBackward0`, `AvgPool2DBackward0`,
`AdaptiveAvgPool2DBackward0`). Kernels reduce over the windows that convolution lays out
(`ops.conv`); derivatives are fusegrad ops.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _dtype
from . import _native, _parallel, _workspace
from ._onnx import batched
from ._util import (
    F32,
    HALF,
    Spec,
    array_format,
    c_contiguous,
    format_of,
    format_strides,
    in_format,
    input_format,
    not_implemented_for,
    numpy_backward,
    rand_array,
    wrap_grad,
)
from .conv import _out_size, _windows, col2im, convolution
from .nn import _call, _const, _work, first_order_kernel, recording, tensor_in_format
from .padding import constant_pad_nd
from .rearrange import clone, contiguous_format, flip
from .registry import Sample, register

# ---------------------------------------------------------------- pooling


def _pool_args(kernel_size, stride, padding, dilation=(1,), nd=2):
    """Kernel, stride (the kernel's when empty), padding and dilation as `nd`-long lists (a
    one-element list stands for every dim)."""
    def full(v):
        return list(v) * (nd if len(v) == 1 else 1)

    k = full(kernel_size)
    return k, full(stride) if stride else list(k), full(padding), full(dilation)


_DIM_NAMES = {2: ("H", "W"), 3: ("T", "H", "W")}


def _per_dim(prefix: str, values, sep: str = " ") -> str:
    """PyTorch's per-dim listing in pooling messages: 'kH: 2 kW: 3', 'dT: 1 dH: 1 dW: 1'."""
    return sep.join(f"{prefix}{n}: {v}" for n, v in zip(_DIM_NAMES[len(values)], values))


def _half(v: int) -> int:
    """v / 2 rounded toward zero, as C++ divides (PyTorch's checks compare against it)."""
    return -(-v // 2) if v < 0 else v // 2


def dims_str(shape) -> str:
    """A shape as PyTorch prints sizes in messages: [2, 0, 4]."""
    return f"[{', '.join(map(str, shape))}]"


def dim_error(ndim: int, dim: int) -> IndexError:
    """The IndexError of reading size `dim` of an `ndim`-dimensional tensor, in PyTorch's
    words (a 0-d tensor has its own)."""
    if ndim == 0:
        return IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                      f"{ndim - 1}], but got {dim})")


def check_planes(name: str, shape, sep: str | None = None, first: int = 1) -> None:
    """`name`'s error for an empty non-batch dimension (every dim from `first` on), as the
    adaptive kernels word it; with `sep` as the fractional (sep "") and unpooling (sep " ")
    kernels do."""
    for i in range(first, len(shape)):
        if shape[i] == 0:
            sizes = dims_str(shape)
            if sep is not None:
                raise RuntimeError(f"{name}(): Expected input to have non-zero size for "
                                   f"non-batch dimensions, but got{sep}{sizes} with "
                                   f"dimension {i} being empty.")
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {sizes} with dimension {i} "
                               f"being empty")


def check_pool_input(shape, nd: int, op: str) -> None:
    """Pooling's error for an input that is not (N, C, *spatial) or (C, *spatial) with every
    non-batch dimension non-empty (checked after the arguments, as PyTorch)."""
    ndim = len(shape)
    lead = 1 if ndim == nd + 2 else 0
    if nd == 2:
        if ndim not in (3, 4) or 0 in shape[lead:]:
            raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim "
                               f"batch size for input, but got:{dims_str(shape)}")
    elif 0 in shape[lead:]:
        name = "avg_pool3d" if op == "avg" else "max_pool3d_with_indices_out_cpu_template"
        # (PyTorch names dimension 0 whichever is empty)
        raise RuntimeError(f"{name}(): Expected input's non-batch dimensions to have positive "
                           f"length, but input has a shape of {dims_str(shape)} and non-batch "
                           "dimension 0 has length zero!")


def pool_shape(shape, k, s, p, d, ceil_mode, op: str = "max") -> tuple:
    """The output shape of pooling over the last len(k) dims of `shape` (with or without a
    batch dim), with PyTorch's errors for a zero or negative stride, kernel or dilation,
    padding beyond half the (dilated) kernel, an input of the wrong rank or with an empty
    non-batch dim and windows that do not fit (shared by max (`op` "max") and average ("avg")
    pooling, kernels and metas)."""
    nd = len(k)
    if nd == 3 and len(shape) not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if nd == 2 and op == "max" and len(shape) not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    out = []
    for i in range(nd):
        if s[i] == 0:
            raise RuntimeError("stride should not be zero")
        if p[i] < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p[i]}")
        if p[i] > _half((k[i] - 1) * d[i] + 1):
            raise RuntimeError("pad should be at most half of effective kernel size, but got "
                               f"pad={p[i]}, kernel_size={k[i]} and dilation={d[i]}")
        out.append(_out_size(shape[-nd + i], k[i], s[i], p[i], d[i], ceil_mode))
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got {_per_dim('k', k)}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got {_per_dim('d', s)}")
    if min(d) <= 0:
        raise RuntimeError("dilation should be greater than zero, but got "
                           f"{_per_dim('dilation', d)}")
    check_pool_input(shape, nd, op)
    if nd == 3 and op == "avg" and any(shape[-3 + i] < k[i] for i in range(3)):
        raise RuntimeError(f"input image ({_per_dim('', shape[-3:])}) smaller than kernel "
                           f"size ({_per_dim('k', k)})")
    if min(out) < 1:
        c = shape[-nd - 1]
        size = "x".join(map(str, shape[-nd:]))
        raise RuntimeError(f"Given input size: ({c}x{size}). Calculated output size: "
                           f"({c}x{'x'.join(map(str, out))}). Output size is too small")
    return tuple(shape[:-nd]) + tuple(out)


def check_max_pool1d(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> None:
    """max_pool1d's errors for invalid arguments (its indices form words them as 2-D
    pooling does)."""
    for name, v in (("kernel_size", k), ("stride", s)):
        if v <= 0:
            raise RuntimeError(f"max_pool1d() {name} must be greater than zero, but got {v}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError("max_pool1d() padding should be at most half of kernel size, but "
                           f"got padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    n = _out_size(size, k, s, p, d, ceil_mode)
    if n <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {n}")


def _as_batched(a, nd: int):
    """(array with a batch dim, whether one was added): pooling's unbatched input gains one."""
    return (a[None], True) if a.ndim == nd + 1 else (a, False)


def check_pool_dtype(kernel: str, dt, allowed: str) -> None:
    """PyTorch's NotImplementedError of pooling kernel `kernel` (its name in the message)
    for a dtype (fusegrad's or an array's) it has no form for. `allowed`: "float" (the
    adaptive poolings), "float+long" (the other averages: an int64 mean divides as integers
    do), "wide+long" (3-D average pooling: no half type either) or "real" (max pooling:
    every integer type, not bool). Raised after the argument checks, as PyTorch checks
    before it picks a kernel for the dtype."""
    d = dt if isinstance(dt, _dtype.dtype) else _dtype.from_numpy_dtype(dt)
    if allowed == "wide+long":
        if d is _dtype.float32 or d is _dtype.float64 or d is _dtype.int64:
            return
    elif d.is_floating_point or (allowed == "float+long" and d is _dtype.int64) or (
            allowed == "real" and not d.is_complex and d is not _dtype.bool_):
        return
    raise not_implemented_for(kernel, d)


class _MaxPlan:
    """What a max pooling of one input shape, dtype and set of arguments needs besides the
    data, worked out once (`_max_plan`): a training loop pools the same shapes every step,
    and the arithmetic on shapes is most of a small pool's cost."""

    __slots__ = ("k", "s", "p", "d", "ceil", "batched", "unbatched", "osz", "kk", "blocks",
                 "order", "small", "shifts", "corner", "delta")

    def __init__(self, shape: tuple, k: list, s: list, p: list, d: list, ceil: bool,
                 nd: int) -> None:
        self.k, self.s, self.p, self.d, self.ceil = k, s, p, d, ceil
        self.unbatched = len(shape) == nd + 1
        self.batched = (1,) + shape if self.unbatched else shape
        size = self.batched[2:]
        self.osz = tuple(_out_size(size[i], k[i], s[i], p[i], d[i], ceil) for i in range(nd))
        self.kk = math.prod(k)
        # Windows that tile the input (stride = kernel, no padding or dilation, the last
        # partial windows dropped): the windows are a reshape of the input, no strided view.
        self.blocks = s == k and not any(p) and all(v == 1 for v in d) and all(
            o * kv <= v for o, kv, v in zip(self.osz, k, size))
        # The window copy's axes: kernel offsets first, then (n, c, *out).
        if self.blocks:
            self.order = (tuple(3 + 2 * i for i in range(nd)) + (0, 1)
                          + tuple(2 + 2 * i for i in range(nd)))
        else:
            self.order = tuple(range(2, 2 + nd)) + (0, 1) + tuple(range(2 + nd, 2 + 2 * nd))
        self.delta, self.corner = _index_geometry(tuple(size), self.osz, tuple(k), tuple(s),
                                                  tuple(p), tuple(d))
        # When the offsets' displacements grow with the offset (no window wider than a
        # row), the running maximum keeps the winner's displacement itself, as int32, and
        # the index is one add; else the winner's offset, in the smallest integer type.
        plane = math.prod(size)
        grows = bool((np.diff(self.delta) > 0).all()) and plane < 2 ** 31
        self.shifts = [np.int32(v) for v in self.delta] if grows else None
        kk = self.kk
        self.small = np.int8 if kk <= 127 else np.int16 if kk <= 32767 else np.intp

    def windows(self, x: np.ndarray, fill) -> np.ndarray:
        """The (n, c, *k, *out) windows of the batched input, or its (n, c, o0, k0, ...)
        blocks; either goes to `order` for the offset-major copy."""
        if not self.blocks:
            return _windows(x, self.k, self.s, self.p, self.d, fill, self.ceil)
        n, c = x.shape[:2]
        crop = x[(slice(None),) * 2 + tuple(slice(0, o * kv) for o, kv in zip(self.osz,
                                                                             self.k))]
        return crop.reshape((n, c) + tuple(v for o, kv in zip(self.osz, self.k)
                                           for v in (o, kv)))


@functools.lru_cache(maxsize=256)
def _max_plan(shape: tuple, kernel_size: tuple, stride: tuple, padding: tuple,
              dilation: tuple, ceil_mode: bool, nd: int) -> _MaxPlan:
    """The checked plan of a max pooling (PyTorch's errors for invalid arguments are raised
    on each call: a failed call caches nothing)."""
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation, nd)
    pool_shape(shape, k, s, p, d, ceil_mode)
    return _MaxPlan(shape, k, s, p, d, ceil_mode, nd)


def _maxpool_kernel(a, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False,
                    nd=2):
    plan = _max_plan(a.shape, tuple(kernel_size), tuple(stride), tuple(padding),
                     tuple(dilation), bool(ceil_mode), nd)
    check_pool_dtype(f"max_pool{nd}d", a.dtype, "real")
    x = _work(a)
    if plan.unbatched:
        x = x[None]
    if nd == 2 and (res := _maxpool2d_native(x, plan)) is not None:
        out, idx = res
        if x.dtype.kind in "iu":  # (the C kernel itself keeps -inf windows inside)
            _keep_inside(idx, out, x, plan)
        out = out.astype(a.dtype, copy=False)
        if plan.unbatched:
            return out[0], idx[0]
        fmt = array_format(a)  # (new C-contiguous arrays, laid out in the input's format)
        return (out, idx) if fmt is None else (in_format(out, fmt), in_format(idx, fmt))
    floating = x.dtype.kind == "f"
    fill = -np.inf if floating else np.iinfo(x.dtype).min
    n, c = x.shape[:2]
    osz = plan.osz
    kk = plan.kk
    # A running maximum over the window offsets, each step one vectorised pass over all
    # windows (no argmax along a strided axis, no take_along_axis). As PyTorch's kernel: the
    # first of equal maxima wins, and a NaN wins over any number. The windows are first
    # copied offset-major, so that every pass runs over one contiguous row (a strided
    # view gives NumPy inner loops of only `ow` values). Masked copies, np.where and
    # boolean-mask stores branch per value, several times slower here than the arithmetic
    # update of the winner and np.maximum (which propagates NaN as the kernel must).
    # Each window is independent: with several threads, each runs the loop on its own
    # columns (the same operations in the same order, so the same result).
    # The window copy, the winners and the masks are temporaries: work buffers, not fresh
    # pages (a fresh megabyte is mapped page by page on first write).
    flat = _workspace.scratch("pool.windows", tuple(plan.k) + (n, c) + osz, x.dtype)
    _parallel.copyto(flat, plan.windows(x, fill).transpose(plan.order))
    flat = flat.reshape(kk, -1)
    m = flat.shape[1]
    best = np.empty(m, dtype=flat.dtype)
    shifts = plan.shifts
    at_all = _workspace.scratch("pool.arg", (m,), np.int32 if shifts else plan.small)
    upd_all = _workspace.scratch("pool.upd", (2, m), np.bool_)
    step_all = _workspace.scratch("pool.step", (m,), at_all.dtype) if shifts else None

    def running_max(nan: bool) -> None:
        def columns(lo: int, hi: int) -> None:
            top, at = best[lo:hi], at_all[lo:hi]
            upd, isnan = upd_all[0, lo:hi], upd_all[1, lo:hi]
            np.copyto(top, flat[0, lo:hi])
            at.fill(0)
            for t in range(1, kk):
                v = flat[t, lo:hi]
                np.greater(v, top, out=upd)
                if nan:
                    np.logical_or(upd, np.not_equal(v, v, out=isnan), out=upd)
                if shifts:  # displacements grow with t: the latest update is the largest
                    step = step_all[lo:hi]
                    np.maximum(at, np.multiply(upd, shifts[t], out=step), out=at)
                else:
                    at += upd * (t - at)
                np.maximum(top, v, out=top)

        _parallel.for_chunks(columns, m, flat.size)

    # The maxima propagate NaN: only when one came out do the winners need the NaN test
    # (two passes per offset), and the loop runs again with it.
    running_max(False)
    if floating and m and np.isnan(np.maximum.reduce(best)):
        running_max(True)
    out = best.reshape((n, c) + osz).astype(a.dtype, copy=False)
    at = at_all.reshape((n, c) + osz)
    if shifts:
        idx = np.add(at, plan.corner, dtype=np.int64)
    else:
        idx = plan.delta[at]
        idx += plan.corner
    _keep_inside(idx, best.reshape(idx.shape), x, plan)
    if plan.unbatched:
        return out[0], idx[0]
    fmt = array_format(a)
    return (out, idx) if fmt is None else (in_format(out, fmt), in_format(idx, fmt))


def _keep_inside(idx: np.ndarray, best: np.ndarray, x: np.ndarray, plan: _MaxPlan) -> None:
    """Windows whose maximum is the padding's value (-inf, or an integer type's least
    value) keep their first position inside the input, as in PyTorch (whose running
    maximum starts there, at that value, and takes only greater values), not their first
    offset, which may lie in the padding."""
    if not any(plan.p) or not idx.size:
        return
    lowest = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    lost = best == lowest
    if lost.any():
        np.copyto(idx, _first_inside(tuple(x.shape[2:]), plan.osz, tuple(plan.k),
                                     tuple(plan.s), tuple(plan.p), tuple(plan.d)),
                  where=lost)


@functools.lru_cache(maxsize=64)
def _first_inside(size: tuple, osz: tuple, k: tuple, s: tuple, p: tuple, d: tuple) -> np.ndarray:
    """The flat index of each window's first position inside the input plane (read-only)."""
    nd = len(k)
    step = [math.prod(size[i + 1:]) for i in range(nd)]
    first = 0
    for i in range(nd):
        start = np.arange(osz[i], dtype=np.int64) * s[i] - p[i]
        start -= np.minimum(start, 0) // d[i] * d[i]  # before the input: whole taps on
        first = first + (start * step[i]).reshape((-1,) + (1,) * (nd - 1 - i))
    first = np.asarray(first, dtype=np.int64)
    first.flags.writeable = False
    return first




def _maxpool2d_native(x: np.ndarray, plan: _MaxPlan) -> tuple | None:
    """(maxima, int64 indices) of the batched 2-D input `x` by the C kernel, its (n, c)
    planes shared between threads (each plane computed alone: the same bits at any thread
    count); None without the kernels or for another dtype."""
    fn = _native.typed("pool", "maxpool2d", x.dtype, "pppii" + "i" * 12)
    if fn is None:
        return None
    x = np.ascontiguousarray(x)
    n, c, h, w = x.shape
    oh, ow = plan.osz
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    idx = np.empty((n, c, oh, ow), dtype=np.int64)
    _native.run_pieces(fn, (_native.address(x), _native.address(out), _native.address(idx)),
                       (h, w, oh, ow, *plan.k, *plan.s, *plan.p, *plan.d), n * c,
                       out.size * plan.kk)
    return out, idx


def _maxpool2d_grad_native(g: np.ndarray, idx: np.ndarray, shape: tuple) -> np.ndarray | None:
    """The 2-D max-pool input gradient by the C kernel (each plane zeroed, then the output
    gradients added at their indices in output order, as PyTorch sums them), its planes
    shared between threads; None without the kernels or for another dtype."""
    if idx.dtype != np.int64:
        return None
    fn = _native.typed("pool", "maxpool2d_grad", g.dtype, "pppiiii")
    if fn is None:
        return None
    g = np.ascontiguousarray(g)
    idx = np.ascontiguousarray(idx)
    rows = math.prod(shape[:-2])
    hw = math.prod(shape[-2:])
    ohw = g.size // rows if rows else 0
    out = np.empty(shape, dtype=g.dtype)
    _native.run_pieces(fn, (_native.address(g), _native.address(idx), _native.address(out)),
                       (hw, ohw), rows, rows * (hw + ohw))
    return out


@functools.lru_cache(maxsize=64)
def _index_geometry(size: tuple, osz: tuple, k: tuple, s: tuple, p: tuple, d: tuple) -> tuple:
    """(displacement of each window offset, first corner of each window) as flat indices into
    one input plane: a max-pool index is `delta[winning offset] + corner` (read-only arrays,
    cached per shape and arguments)."""
    nd = len(k)
    step = [math.prod(size[i + 1:]) for i in range(nd)]  # row-major strides of the input
    corner = sum(((np.arange(osz[i], dtype=np.int64) * s[i] - p[i]) * step[i]).reshape(
        (-1,) + (1,) * (nd - 1 - i)) for i in range(nd))
    offs = np.indices(k, dtype=np.int64).reshape(nd, -1)
    delta = sum(offs[i] * d[i] * step[i] for i in range(nd))
    corner.flags.writeable = delta.flags.writeable = False
    return delta, corner


def _maxpool_meta(a, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False,
                  nd=2):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation, nd)
    out = pool_shape(tuple(a.shape), k, s, p, d, ceil_mode)
    strides = format_strides(out, format_of(a))  # the input's format (`input_format`)
    return [Spec(out, a.dtype, strides), Spec(out, _dtype.int64, strides)]


def _maxpool_save(out, a, kernel_size, stride=(), padding=(0,), dilation=(1,),
                  ceil_mode=False, nd=2):
    k, s, _, d = _pool_args(kernel_size, stride, padding, dilation, nd)
    # Windows that cannot overlap send each input position at most one gradient.
    disjoint = all(si >= (ki - 1) * di + 1 for ki, si, di in zip(k, s, d))
    # The input's gradient takes the input's format, as the outputs do. The input and the
    # call's arguments serve a gradient taken with create_graph (PyTorch's backward op).
    call = (a, kernel_size, stride, padding, dilation, ceil_mode) if nd == 2 else None
    return (out[1], tuple(a.shape), disjoint, nd, format_of(a), call)


@functools.lru_cache(maxsize=64)
def _plane_starts(rows: int, hw: int) -> np.ndarray:
    """(rows, 1): where each plane of `hw` values starts in the flat input (read-only)."""
    starts = (np.arange(rows, dtype=np.int64) * hw)[:, None]
    starts.flags.writeable = False
    return starts


def _maxpool_backward_np(g, idx, shape, disjoint, nd=2):
    """Max-pool input gradient as an array: each output's gradient lands at the flat input
    position its index names; a plain store when windows are disjoint, else np.add.at."""
    if nd == 2 and (gi := _maxpool2d_grad_native(g, idx, shape)) is not None:
        return gi
    rows = math.prod(shape[:-nd])
    hw = math.prod(shape[-nd:])
    flat_idx = idx.reshape(rows, -1)
    pos = _workspace.scratch("pool.pos", flat_idx.shape, np.int64)  # a temporary
    np.add(flat_idx, _plane_starts(rows, hw), out=pos)
    vals = g.reshape(rows, -1)
    if disjoint:
        out = np.zeros(rows * hw, dtype=g.dtype)

        def store(a: int, b: int) -> None:  # rows own disjoint parts of `out`
            # + 0.0: PyTorch adds each gradient to a zero, which turns -0.0 into +0.0.
            out[pos[a:b].ravel()] = vals[a:b].ravel() + 0.0

        _parallel.for_chunks(store, rows, vals.size)
    else:
        # Summed in g's dtype in output order, as scatter_add (the traced derivative) sums:
        # eager and AOT-compiled backward then agree to the last bit.
        out = np.zeros(rows * hw, dtype=g.dtype)
        np.add.at(out, pos.ravel(), vals.ravel())
    return out.reshape(shape)


def _maxpool_derivative(grads, idx, shape, disjoint=False, nd=2, fmt=None, call=None):
    # Each output's gradient goes to the input position its index names (scatter_add).
    g = grads[0] if isinstance(grads, list) else grads
    if call is not None and recording():
        # create_graph: PyTorch's backward op, whose node double backward shows
        return (_call(max_pool2d_with_indices_backward, g, *call, idx), None, None, None, None,
                None)
    # (half types too: PyTorch's kernel sums them in their own type in output order, where
    # scatter_add below would sum them in float32)
    if numpy_backward(g, halves=True) and idx._plain and idx._data is not None:
        gi = _maxpool_backward_np(g._data, idx._data, shape, disjoint, nd)
        return (wrap_grad(in_format(gi, fmt)), None, None, None, None, None)
    lead = tuple(shape[:-nd])
    flat_g = g.reshape(lead + (-1,))
    flat_i = idx.reshape(lead + (-1,))
    hw = int(np.prod(shape[-nd:], dtype=np.int64))
    zeros = g.new_zeros(lead + (hw,))
    # Disjoint windows send each input position at most one gradient: a plain scatter (a
    # store, about twice as fast as scatter_add's accumulation) gives the same values.
    gi = zeros.scatter(-1, flat_i, flat_g) if disjoint else zeros.scatter_add(-1, flat_i,
                                                                              flat_g)
    return (tensor_in_format(gi.reshape(shape), fmt), None, None, None, None, None)


_POOL_CASES = {  # (input shape, kernel, stride, padding, dilation, ceil_mode)
    2: [((2, 3, 6, 6), [2, 2], [], [0, 0], [1, 1], False),
        ((1, 2, 7, 5), [3, 2], [2, 1], [1, 1], [1, 1], False),
        ((2, 5, 5), [3, 3], [2, 2], [1, 1], [1, 1], False),
        ((1, 2, 7, 7), [2, 2], [2, 2], [0, 0], [2, 1], False),
        ((1, 2, 7, 7), [2, 2], [2, 2], [0, 0], [1, 1], True)],
    3: [((2, 2, 4, 4, 4), [2, 2, 2], [], [0, 0, 0], [1, 1, 1], False),
        ((1, 2, 5, 6, 4), [3, 2, 2], [2, 1, 2], [1, 1, 0], [1, 1, 1], False),
        ((2, 5, 5, 3), [3, 3, 2], [2, 2, 1], [1, 0, 1], [1, 1, 1], False),
        ((1, 2, 7, 5, 6), [2, 2, 3], [2, 2, 2], [0, 1, 1], [2, 1, 1], False),
        ((1, 2, 7, 6, 5), [2, 3, 2], [2, 2, 2], [1, 0, 0], [1, 1, 1], True)],
}


def _pool_samples(rng, dt, nd=2):
    return [Sample((rng.permutation(np.prod(xs)).reshape(xs).astype(dt) / 10, k, s, p, d, c),
                   name=f"{xs} k={k} s={s} p={p} d={d} ceil={c}")
            for xs, k, s, p, d, c in _POOL_CASES[nd]]


def _maxpool_onnx(b, inputs, args, kwargs, opset, nd=2):
    """MaxPool; the indices output is not mapped."""
    k, s, p, d = _pool_args(*args[1:5], nd=nd)
    ceil = bool(args[5]) if len(args) > 5 else False
    return [batched(b, inputs[0], args[0].dim() == nd + 1, lambda x: b.emit(
        "MaxPool", [x], kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
        dilations=list(d), ceil_mode=int(ceil))), None]


# Max pooling's outputs (laid out by its kernel) and its input's gradient take the input's
# memory format; so do 2-D average pooling's. PyTorch's 3-D average poolings compute
# contiguous.
max_pool2d_with_indices = register(
    "max_pool2d_with_indices", kernel=_maxpool_kernel, meta=_maxpool_meta,
    node="MaxPool2DWithIndicesBackward0", derivative=_maxpool_derivative, save=_maxpool_save,
    samples=_pool_samples, onnx=_maxpool_onnx, public="max_pool2d_with_indices",
    saved_names=("result1", "", "", "", "", "self"))


def _maxpool_backward_first(g, x, kernel_size, stride, padding, dilation, ceil_mode, idx):
    """max_pool2d_with_indices' input gradient (its derivative's own path)."""
    saved = _maxpool_save((None, idx), x, kernel_size, stride, padding, dilation, ceil_mode)
    return _maxpool_derivative(g, *saved[:-1])[0]


def _maxpool_backward_meta(g, x, *rest):
    return Spec(tuple(x.shape), g.dtype, format_strides(tuple(x.shape), format_of(x)))


def _maxpool_backward_derivative(gg, g, x, kernel_size, stride, padding, dilation, ceil_mode,
                                 idx):
    # Linear in the gradient: each output picks the incoming gradient at its index;
    # nothing depends on the input's values (zeros, as PyTorch's).
    lead = tuple(idx.shape[:-2])
    picked = gg.reshape(lead + (-1,)).gather(-1, idx.reshape(lead + (-1,)))
    return (picked.reshape(tuple(idx.shape)), gg.new_zeros(tuple(x.shape)), None, None, None,
            None, None, None)


def _maxpool_backward_samples(rng, dt):
    out = []
    for smp in _pool_samples(rng, dt):
        x, k, st, p, d, c = smp.args
        _, idx = _maxpool_kernel(x, k, st, p, d, c)
        out.append(Sample((rand_array(rng, idx.shape, dt), x, k, st, p, d, c, idx),
                          name=smp.name))
    return out


max_pool2d_with_indices_backward = register(
    "max_pool2d_with_indices_backward", kernel=first_order_kernel(_maxpool_backward_first),
    meta=_maxpool_backward_meta, node="MaxPool2DWithIndicesBackwardBackward0",
    derivative=_maxpool_backward_derivative,
    save=lambda out, g, x, k, s, p, d, c, idx: (g, x, k, s, p, d, c, idx),
    nondiff_args=(7,), samples=_maxpool_backward_samples,
    saved_names=("", "self", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                 "indices"))


def _volume(fn):
    """`fn` (a pooling kernel, meta or save) over three spatial dims."""
    return functools.partial(fn, nd=3)


max_pool3d_with_indices = register(
    "max_pool3d_with_indices", kernel=_volume(_maxpool_kernel),
    meta=_volume(_maxpool_meta),
    node="MaxPool3DWithIndicesBackward0", derivative=_maxpool_derivative,
    save=_volume(_maxpool_save), samples=_volume(_pool_samples), onnx=_volume(_maxpool_onnx),
    public="max_pool3d_with_indices", saved_names=("result1", "", "", "", ""))


def _avg_divisor(shape, k, s, p, ceil_mode, count_include_pad, divisor_override, dtype):
    """The divisor of each output position: a number, or an array over the output's
    spatial positions."""
    if divisor_override:
        return divisor_override
    nd = len(k)
    ones = np.ones((1, 1) + tuple(shape[-nd:]), dtype=dtype)
    kernel_axes = tuple(range(2, 2 + nd))
    if count_include_pad:
        if not ceil_mode:
            return int(np.prod(k))
        # Windows are clipped to the padded input (ceil mode may reach past it). The padded
        # input may fit one more ceil-mode window than the input with its padding: cut it.
        ones = np.pad(ones, ((0, 0), (0, 0)) + tuple((v, v) for v in p), constant_values=1)
        out = [_out_size(shape[-nd + i], k[i], s[i], p[i], 1, True) for i in range(nd)]
        div = _windows(ones, k, s, [0] * nd, [1] * nd, 0.0, ceil_mode).sum(kernel_axes)[0, 0]
        return div[tuple(slice(0, v) for v in out)]
    return _windows(ones, k, s, p, [1] * nd, 0.0, ceil_mode).sum(kernel_axes)[0, 0]


def _avgpool_kernel(a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                    count_include_pad=True, divisor_override=None, nd=2):
    k, s, p, _ = _pool_args(kernel_size, stride, padding, nd=nd)
    _avgpool_check(a.shape, k, s, p, ceil_mode, divisor_override)
    check_pool_dtype("avg_pool2d" if nd == 2 else "avg_pool3d_out_frame", a.dtype,
                     "float+long" if nd == 2 else "wide+long")
    x, unbatched = _as_batched(_work(a), nd)
    total = _windows(x, k, s, p, [1] * nd, 0.0, ceil_mode).sum(tuple(range(2, 2 + nd)))
    div = _avg_divisor(x.shape, k, s, p, ceil_mode, count_include_pad, divisor_override,
                       x.dtype)
    out = (total / div).astype(a.dtype, copy=False)
    return out[0] if unbatched else out


def _avgpool_meta(a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                  count_include_pad=True, divisor_override=None, nd=2):
    k, s, p, _ = _pool_args(kernel_size, stride, padding, nd=nd)
    shape = _avgpool_check(tuple(a.shape), k, s, p, ceil_mode, divisor_override)
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)) if nd == 2 else None)


def _avgpool_check(shape, k, s, p, ceil_mode, divisor_override) -> tuple:
    # PyTorch's order: the rank of a volume, the divisor, the size read at dim -3 (2-D),
    # then the arguments and the input's shape (`pool_shape`)
    nd = len(k)
    if nd == 3 and len(shape) not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if nd == 2 and len(shape) < 3:
        raise dim_error(len(shape), -3)
    return pool_shape(shape, k, s, p, [1] * nd, ceil_mode, "avg")


def _avgpool_save(out, a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                  count_include_pad=True, divisor_override=None, nd=2):
    k, s, p, _ = _pool_args(kernel_size, stride, padding, nd=nd)
    div = _avg_divisor(tuple(a.shape), k, s, p, ceil_mode, count_include_pad,
                       divisor_override, np.float64)
    if isinstance(div, np.ndarray):
        div = _const(div.astype(a.dtype.np), a)
    # (the input and the call's arguments: for a gradient taken with create_graph)
    call = (a, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor_override) if nd == 2 else None
    return (list(a.shape), k, s, p, div, format_of(a) if nd == 2 else None, call)


def _half_window_sums(cols, n, c, out_size, size, k, s, p):
    """col2im of a half type's columns (n, c * kh * kw, oh * ow) as PyTorch's avg-pool
    backward sums them: in the half type, window after window in row-major order, so each
    pixel adds its windows' shares from the last kernel offset to the first. Flipping the
    columns (kernel and window order) and the image makes col2im's offset-by-offset sums
    run in that order. Its canvas is the padded one the windows tile exactly, then cut to
    the input (the padding dropped, a last window short of the input's end zero-extended,
    one reaching past it cropped)."""
    kh, kw = k
    oh, ow = out_size
    extent = [(o - 1) * st + kk for o, st, kk in zip(out_size, s, k)]
    flipped = _call(flip, cols.reshape(n, c, kh, kw, oh, ow), [2, 3, 4, 5]).reshape(
        n, c * kh * kw, oh * ow)
    gi = _call(flip, _call(col2im, flipped, extent, k, [1, 1], [0, 0], s), [2, 3])
    pads = [v for i in (1, 0) for v in (-p[i], size[i] + p[i] - extent[i])]
    return _call(constant_pad_nd, gi, pads, 0.0)


def _avgpool_derivative(g, shape, k, s, p, div, fmt=None, call=None):
    if call is not None and recording():
        # create_graph: PyTorch's backward op, whose node double backward shows
        return (_call(avg_pool2d_backward, g, *call), None, None, None, None, None, None)
    nd = len(k)
    unbatched = len(shape) == nd + 1
    if unbatched:
        g = g.unsqueeze(0)
    if nd == 2:
        n, c, oh, ow = g.shape
        kk = k[0] * k[1]
        g = (g / div).reshape(n, c, 1, oh * ow).expand(n, c, kk, oh * ow).reshape(
            n, c * kk, oh * ow)
        # col2im onto a canvas holding exactly the output's windows: ceil_mode's last window
        # may reach past the input (so that col2im's own derivative, im2col, finds as many
        # windows as there are outputs), cropped to the input after
        size = list(shape[-2:])
        canvas = [h if (h + 2 * q - kh) // sh + 1 == o else (o - 1) * sh + kh - 2 * q
                  for h, o, kh, sh, q in zip(size, (oh, ow), k, s, p)]
        if g.dtype in (_dtype.float16, _dtype.bfloat16):
            gi = _half_window_sums(g, n, c, (oh, ow), size, k, s, p)
        else:
            gi = _call(col2im, g, canvas, k, [1, 1], p, s)
        if canvas != size:  # (a fresh row-major copy, as PyTorch's gradient)
            gi = _call(clone, gi.narrow(2, 0, size[0]).narrow(3, 0, size[1]),
                       contiguous_format)
    else:
        gi = _spread_windows(g / div, tuple(shape[-nd:]), k, s, p)
    gi = gi.squeeze(0) if unbatched else tensor_in_format(gi, fmt)
    return (gi, None, None, None, None, None, None)


def _spread_windows(g, size, k, s, p):
    """Each output's value added over its window of an input of `size` (volumes): a
    transposed convolution with a kernel of ones on the windows' whole canvas, then cropped
    by the padding and cut or zero-extended to the input's size."""
    from .padding import constant_pad_nd

    nd = len(k)
    n, c = g.shape[:2]
    flat = g.reshape((n * c, 1) + tuple(g.shape[2:]))
    full = _call(convolution, flat, g.new_ones((1, 1) + tuple(k)), None, list(s), [0] * nd,
                 [1] * nd, True, [0] * nd, 1)
    short = []
    for i in range(nd):
        keep = min(size[i], full.shape[2 + i] - p[i])
        full = full.narrow(2 + i, p[i], keep)
        short.append(size[i] - keep)
    if any(short):
        pads = [v for i in reversed(range(nd)) for v in (0, short[i])]
        full = _call(constant_pad_nd, full, pads, 0.0)
    return full.reshape((n, c) + tuple(size))


def _avg_samples(rng, dt, nd=2):
    ones = [1] * nd
    return [Sample(s.args[:4] + (s.args[5], inc, None), name=s.name + f" inc={inc}")
            for s in _pool_samples(rng, dt, nd) if s.args[4] == ones
            for inc in (True, False)] + [
        Sample((rand_array(rng, (1, 2) + (5,) * nd, dt), [2] * nd, [2] * nd, ones, False, True,
                3), name="divisor")]


def _avgpool_onnx(b, inputs, args, kwargs, opset, nd=2):
    """AveragePool (a divisor_override has no ONNX form)."""
    k, s, p, _ = _pool_args(*args[1:4], nd=nd)
    ceil, include, divisor = (list(args[4:7]) + [False, True, None][len(args) - 4:])[:3]
    if divisor is not None:
        b.fail("with divisor_override")
    return batched(b, inputs[0], args[0].dim() == nd + 1, lambda x: b.emit(
        "AveragePool", [x], kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
        ceil_mode=int(bool(ceil)), count_include_pad=int(bool(include))))


avg_pool2d = register(
    "avg_pool2d", kernel=input_format(_avgpool_kernel), meta=_avgpool_meta,
    node="AvgPool2DBackward0",
    derivative=_avgpool_derivative, save=_avgpool_save, samples=_avg_samples,
    onnx=_avgpool_onnx, public="avg_pool2d")


def _avgpool_backward_first(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override):
    """avg_pool2d's input gradient (its derivative's own path)."""
    saved = _avgpool_save(None, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)
    return _avgpool_derivative(g, *saved[:-1])[0]


def _avgpool_backward_derivative(gg, g, x, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override):
    # Linear in the gradient (its own derivative is the pooling itself); nothing depends on
    # the input's values (zeros, as PyTorch's).
    return (_call(avg_pool2d, gg, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override), gg.new_zeros(tuple(x.shape)), None, None, None, None,
            None, None)


def _avgpool_backward_samples(rng, dt):
    out = []
    for smp in _avg_samples(rng, dt):
        y = _avgpool_kernel(*smp.args)
        out.append(Sample((rand_array(rng, np.shape(y), dt),) + smp.args, name=smp.name))
    return out


avg_pool2d_backward = register(
    "avg_pool2d_backward", kernel=first_order_kernel(_avgpool_backward_first),
    meta=_maxpool_backward_meta, node="AvgPool2DBackwardBackward0",
    derivative=_avgpool_backward_derivative,
    save=lambda out, g, x, *args: (g, x, *args), samples=_avgpool_backward_samples,
    saved_names=("", "self", "kernel_size", "stride", "padding", "ceil_mode",
                 "count_include_pad", "divisor_override"))
avg_pool3d = register(
    "avg_pool3d", kernel=c_contiguous(_volume(_avgpool_kernel)), meta=_volume(_avgpool_meta),
    node="AvgPool3DBackward0", derivative=_avgpool_derivative, save=_volume(_avgpool_save),
    samples=_volume(_avg_samples), onnx=_volume(_avgpool_onnx), public="avg_pool3d",
    autocast="fp32")


def _adaptive_mean_along(x: np.ndarray, out: int, axis: int) -> np.ndarray:
    """The adaptive average of `x` along `axis` to `out` positions: position i averages
    input positions floor(i*size/out) .. ceil((i+1)*size/out), each window summed on its
    own (a NaN or infinity reaches only the windows holding it, as in PyTorch, where a
    product with an averaging matrix would give 0 * NaN elsewhere)."""
    size = x.shape[axis]
    lo, count = _adaptive_windows(size, out)
    hi = lo + count
    width = int(count.max()) if out else 0
    index = lo[:, None] + np.arange(width)
    inside = index < hi[:, None]
    picked = np.take(x, np.minimum(index, max(size - 1, 0)), axis=axis)
    tail = (1,) * (x.ndim - axis % x.ndim - 1)
    picked = np.where(inside.reshape(inside.shape + tail), picked, x.dtype.type(0))
    sums = picked.sum(axis % x.ndim + 1)
    return sums / count.astype(x.dtype).reshape((out,) + tail)


def _adaptive_windows(size: int, out: int) -> tuple:
    """(first cell, cell count) of each of `out` adaptive windows over `size` positions."""
    i = np.arange(out)
    lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
    return lo, hi - lo


def _half_adaptive3d(a: np.ndarray, output_size) -> np.ndarray:
    """adaptive_avg_pool3d of a half type as PyTorch's CPU kernel computes it: each window's
    cells summed in row-major order in the half type (rounded at every step), then divided
    by its three extents in float32 and rounded once."""
    lead = a.shape[:-3]
    picks, counts, masks = [], [], []
    for i in range(3):
        size, out = a.shape[i - 3], output_size[i]
        lo, count = _adaptive_windows(size, out)
        width = int(count.max()) if out else 0
        index = lo[:, None] + np.arange(width)
        picks.append(np.minimum(index, max(size - 1, 0)))
        masks.append(index < (lo + count)[:, None])
        counts.append(count.astype(F32))
    # the windows' cells as (..., ot, oh, ow, kt, kh, kw), each window padded to the longest
    t, h, w = picks
    cells = a[..., t[:, None, None, :, None, None], h[None, :, None, None, :, None],
              w[None, None, :, None, None, :]]
    inside = masks[0][:, None, None, :, None, None] & masks[1][None, :, None, None, :, None] \
        & masks[2][None, None, :, None, None, :]
    cells = np.where(inside, cells, a.dtype.type(0))  # (a zero added changes no sum)
    flat = cells.reshape(cells.shape[:-3] + (math.prod(cells.shape[-3:]),))
    total = np.zeros(flat.shape[:-1], a.dtype)
    for k in range(flat.shape[-1]):
        total = total + flat[..., k]
    shape = (1,) * len(lead)
    out = total.astype(F32) / counts[0].reshape(shape + (-1, 1, 1))
    out = out / counts[1].reshape(shape + (1, -1, 1))
    return (out / counts[2].reshape(shape + (1, 1, -1))).astype(a.dtype)


def _adaptive_matrix(size: int, out: int, average: bool = True) -> np.ndarray:
    """(out, size): row i averages input positions floor(i*size/out) .. ceil((i+1)*size/out)
    (marks them with 1 where not `average`)."""
    m = np.zeros((out, size))
    for i in range(out):  # one row per output position along one axis
        lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo) if average else 1.0
    return m


def check_adaptive2d(shape, output_size) -> None:
    """adaptive_avg_pool2d's errors, in PyTorch's order: a negative output size, an input
    not 3-D or 4-D, an empty non-batch dim."""
    if output_size[0] < 0 or output_size[1] < 0:
        raise RuntimeError("adaptive_avg_pool2d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{output_size[0]}, {output_size[1]}}}")
    if len(shape) not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{dims_str(shape)}")
    # (this one looks at the two spatial dims only: no channels is fine)
    check_planes("adaptive_avg_pool2d", shape, first=len(shape) - 2)


def _adaptive_kernel(a, output_size):
    check_adaptive2d(a.shape, output_size)
    if math.prod(a.shape[:-2]) and min(output_size):  # (an empty result skips the kernel)
        check_pool_dtype("adaptive_avg_pool2d", a.dtype, "float")
    x = _work(a)
    x = _adaptive_mean_along(_adaptive_mean_along(x, output_size[0], -2), output_size[1], -1)
    return x.astype(a.dtype, copy=False)


def _adaptive_meta(a, output_size):
    check_adaptive2d(tuple(a.shape), output_size)
    shape = tuple(a.shape)[:-2] + tuple(output_size)
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)))


def _adaptive_save(out, a, output_size):
    dt = a.dtype.np
    if dt in HALF:
        # (cells, not weights: the derivative divides by the windows' extents, as PyTorch)
        return (_const(_adaptive_matrix(a.shape[-2], output_size[0], False).astype(dt), a),
                _const(_adaptive_matrix(a.shape[-1], output_size[1], False).astype(dt), a),
                format_of(a))
    return (_const(_adaptive_matrix(a.shape[-2], output_size[0]).astype(dt), a),
            _const(_adaptive_matrix(a.shape[-1], output_size[1]).astype(dt), a),
            format_of(a))


def _adaptive_derivative(g, mh, mw, fmt=None):
    """adaptive_avg_pool2d's input gradient: each output's gradient spread over its window.
    For a half dtype `mh` and `mw` mark the windows' cells (1) rather than weigh them, and
    the gradient is divided by the window's height and then its width, each rounded to the
    dtype, as PyTorch's kernel does, before it is spread."""
    if g.dtype in (_dtype.float16, _dtype.bfloat16):
        g = g / mh.sum(-1, keepdim=True) / mw.sum(-1)
    return (tensor_in_format(mh.t() @ g @ mw, fmt), None)


def _adaptive_onnx(b, inputs, args, kwargs, opset):
    """GlobalAveragePool to size 1; AveragePool when the sizes divide the input's."""
    spatial = list(args[0].shape[-2:])
    out = [int(o) for o in args[1]]
    if out == [1, 1]:
        return batched(b, inputs[0], args[0].dim() == 3,
                       lambda x: b.emit("GlobalAveragePool", [x]))
    if any(i % o for i, o in zip(spatial, out)):
        b.fail(f"from sizes that do not divide ({spatial} to {out})")
    k = [i // o for i, o in zip(spatial, out)]
    return batched(b, inputs[0], args[0].dim() == 3,
                   lambda x: b.emit("AveragePool", [x], kernel_shape=k, strides=k))


adaptive_avg_pool2d = register(
    "_adaptive_avg_pool2d", kernel=input_format(_adaptive_kernel), meta=_adaptive_meta,
    node="AdaptiveAvgPool2DBackward0",
    derivative=_adaptive_derivative, save=_adaptive_save,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), o), name=f"{s}->{o}") for s, o in (
        ((2, 3, 7, 5), [3, 2]), ((1, 2, 4, 4), [2, 2]), ((3, 6, 6), [4, 5]))],
    onnx=_adaptive_onnx, public="adaptive_avg_pool2d")


def check_adaptive3d(shape, output_size) -> None:
    """adaptive_avg_pool3d's errors, in PyTorch's order: a negative output size, an empty
    non-batch dim, an input not 4-D or 5-D."""
    if min(output_size) < 0:
        a, b, c = output_size
        raise RuntimeError("adaptive_avg_pool3d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{a}, {b},{c}}}")
    check_planes("adaptive_avg_pool3d", shape)
    if len(shape) not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got "
                           f"{list(shape)}")



def _adaptive3d_matrices(shape, output_size, dtype) -> list:
    return [_adaptive_matrix(shape[-3 + i], output_size[i]).astype(dtype) for i in range(3)]


def _along(x, m, axis: int):
    """`m` (rows, size) applied along `axis` of x: arrays and tensors alike."""
    return (x.swapaxes(axis, -1) @ m).swapaxes(axis, -1)


def _adaptive3d_kernel(a, output_size):
    check_adaptive3d(a.shape, output_size)
    check_pool_dtype("adaptive_avg_pool3d_cpu", a.dtype, "float")
    if a.dtype in HALF:
        return _half_adaptive3d(a, output_size)
    x = _work(a)
    for i in range(3):
        x = _adaptive_mean_along(x, output_size[i], i - 3)
    return x.astype(a.dtype, copy=False)


def _adaptive3d_meta(a, output_size):
    check_adaptive3d(tuple(a.shape), output_size)
    return Spec(tuple(a.shape)[:-3] + tuple(output_size), a.dtype)


def _adaptive3d_derivative(g, *mats):
    for i, m in enumerate(mats):
        g = _along(g, m, i - 3)
    return (g, None)


adaptive_avg_pool3d = register(
    "_adaptive_avg_pool3d", kernel=c_contiguous(_adaptive3d_kernel), meta=_adaptive3d_meta,
    node="AdaptiveAvgPool3DBackward0", derivative=_adaptive3d_derivative,
    save=lambda out, a, output_size: tuple(
        _const(m, a) for m in _adaptive3d_matrices(tuple(a.shape), output_size, a.dtype.np)),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), o), name=f"{s}->{o}") for s, o in (
        ((2, 3, 7, 5, 4), [3, 2, 4]), ((1, 2, 4, 4, 6), [2, 2, 3]), ((3, 5, 6, 2), [4, 5, 1]))],
    public="adaptive_avg_pool3d")

# Max pooling over windows chosen in Python registers with the other pooling ops.
from . import pooling_picks  # noqa: E402, F401
