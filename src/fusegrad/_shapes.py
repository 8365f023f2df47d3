"""Shape and stride arithmetic on plain tuples and arrays: dims wrapped, sizes broadcast and
printed, strides and storage offsets, `Size`; with PyTorch's error messages.

These sit below Tensor and dispatch (which need them) and are re-exported by the ops'
helpers (`ops/_util.py`, `ops/views.py`), where the op entries use them."""

from __future__ import annotations

import numpy as np


class Size(tuple):
    """A tensor's shape: a tuple of ints, printed as `torch.Size([2, 3])`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"

    def numel(self) -> int:
        """Product of the sizes."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        if not isinstance(other, tuple):
            raise TypeError(f"can only concatenate tuple (not {type(other).__name__}) to "
                            "torch.Size")
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented  # (`[1] + size`: the list's own error)
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        if not hasattr(n, "__index__"):  # (Python's own error for a sequence)
            raise TypeError(f"can't multiply sequence by non-int of type '{type(n).__name__}'")
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__


def contiguous_strides(shape) -> tuple:
    """Row-major strides in elements, as PyTorch computes them (size-1 dims too)."""
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


# Each memory format's order of dims in memory, outermost first (channels_last: N, H, W, C),
# by the format's name; the rank a tensor must have to take it.
FORMAT_ORDERS = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}


def format_order(name: str, ndim: int) -> tuple:
    """The memory order of dims for memory format `name` on a tensor of `ndim` dims; PyTorch's
    error for a rank the format does not fit."""
    order = FORMAT_ORDERS[name]
    if ndim != len(order):
        raise RuntimeError(f"required rank {len(order)} tensor to use {name} format")
    return order


def is_format_contiguous(shape, strides, name: str) -> bool:
    """Whether a tensor of `shape` and element `strides` is laid out densely in memory format
    `name` (dims of size 1 may have any stride, as for `is_contiguous()`)."""
    order = FORMAT_ORDERS[name]
    return len(shape) == len(order) and is_dense_in(shape, strides, order)


# The dims `suggest_format` walks for each rank, innermost first (channels, then the spatial
# dims from the last, then the batch), with the format a match suggests.
_SUGGEST_WALKS = {4: ((1, 3, 2, 0), "channels_last"), 5: ((1, 4, 3, 2, 0), "channels_last_3d")}


def suggest_format(shape, strides) -> str | None:
    """PyTorch's `suggest_memory_format`: the name of the memory format a tensor of `shape`
    and element `strides` is laid out like ("channels_last" for 4-D, "channels_last_3d" for
    5-D), or None for contiguous. Layers that keep their input's format allocate their
    results in it (pooling, upsampling, group norm; convolution asks it of its weight too).

    The strides must grow from the channels outwards; the ambiguous layouts fall back to
    contiguous as in PyTorch: a zero channel stride, an empty dim, and N111-like layouts
    whose last stride walked equals the channels' (a C-contiguous (N, C, 1, 1) tensor).
    A tensor both contiguous and channels-last by `is_contiguous` may suggest either: the
    strides of its size-1 dims decide ((2, 4, 1, 1) with strides (4, 1, 4, 4) suggests
    channels_last, with (4, 1, 1, 1) contiguous)."""
    walk = _SUGGEST_WALKS.get(len(shape))
    if walk is None or strides[1] == 0:
        return None
    lowest = 0
    for d in walk[0]:
        size, stride = shape[d], strides[d]
        if size == 0 or stride < lowest or (d == 0 and lowest == strides[1]):
            return None
        lowest = stride * size if size > 1 else stride
    return walk[1]


def is_dense_in(shape, strides, order, unit: int = 1) -> bool:
    """Whether a tensor of `shape` and `strides` (in multiples of `unit`: 1 for elements, the
    item size for an array's byte strides) is laid out densely with its dims in `order`,
    outermost first (dims of size 1 may have any stride)."""
    expected = unit
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def dense_order(shape, strides, unit: int = 1) -> tuple | None:
    """The order of dims, outermost first, in which a tensor of `shape` and `strides` (in
    multiples of `unit`) is laid out densely (row-major: `0, 1, ...`; a transpose or
    channels_last: a permutation), or None when no order is (a slice with a step, an
    expanded or overlapping tensor)."""
    order = strides_order(shape, strides) or tuple(range(len(shape)))
    return order if is_dense_in(shape, strides, order, unit) else None


def dense_strides(shape, order) -> tuple:
    """The element strides of a tensor of `shape` laid out densely with its dims in `order`,
    outermost first: `contiguous_strides` of the permuted shape, put back in `shape`'s order
    (sizes may be symbolic)."""
    strides = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def memory_order(a: np.ndarray) -> tuple | None:
    """The order of `a`'s dims in memory, outermost first, when it is not row-major (None for
    the common row-major case): the order a new tensor made "like" `a` with
    `preserve_format` keeps. A dense array's order reproduces its strides exactly, those
    of its size-1 dims included (PyTorch's `empty_like` copies a dense tensor's strides: a
    channels-last (N, 1, H, W) or (N, C, 1, 1) stays channels-last, not merely contiguous
    as well). Otherwise dims of size 1 and broadcast dims (stride 0) keep their places; the
    others are sorted by their strides."""
    shape = a.shape
    if not a.size:  # (NumPy calls every empty array C-contiguous)
        return strides_order(shape, empty_strides(a))
    if 1 in shape and a.ndim > 1:
        strides = elem_strides(a)
        # Among equal strides, a size-1 dim sits inside the other dims (a dense layout
        # gives it the stride of the dim just outside it).
        order = tuple(sorted(range(a.ndim), key=lambda d: (-strides[d], shape[d] == 1)))
        if dense_strides(shape, order) == strides:
            return None if order == tuple(range(a.ndim)) else order
    if a.flags.c_contiguous:
        return None
    return strides_order(shape, a.strides)


def strides_order(shape: tuple, strides: tuple) -> tuple | None:
    """`memory_order` of a tensor of `shape` laid out with `strides` (a fake tensor's)."""
    moving = [d for d in range(len(shape)) if shape[d] != 1 and strides[d] != 0]
    ordered = sorted(moving, key=lambda d: -abs(strides[d]))
    order = list(range(len(shape)))
    for slot, d in zip(moving, ordered):
        order[slot] = d
    return None if order == sorted(order) else tuple(order)


def resize_shape(sizes: tuple, size, requires_grad: bool) -> tuple:
    """The shape `resize_(*sizes, size=size)` asks for, checked as PyTorch checks it."""
    if size is not None:
        if sizes:
            raise TypeError("resize_() got multiple values for argument 'size'")
        sizes = (size,)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):  # (Size is a tuple)
        sizes = tuple(sizes[0])
    shape = tuple(int(s) for s in sizes)
    if any(s < 0 for s in shape):
        # PyTorch multiplies the sizes as unsigned numbers: a negative one overflows.
        raise RuntimeError("numel: integer multiplication overflow")
    if requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    return shape


def iterator_order(perm: list, should_swap) -> list:
    """`perm` (dims, innermost first) sorted in place as PyTorch's TensorIterator sorts them:
    a stable insertion sort where `should_swap(d0, d1)` > 0 moves `d1` inside `d0` and < 0
    stops the move (0: no opinion, look further). Returns `perm`."""
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def iterator_perm(shape, operand_strides) -> list:
    """The dims of an elementwise result of `shape`, innermost first, as PyTorch's
    TensorIterator orders them over its operands (`operand_strides`: each operand's strides
    broadcast to `shape`, 0 on broadcast dims, in its order of precedence): for each pair of
    dims the first operand whose strides there are both nonzero and differ decides (equal
    strides: the smaller dim goes inside); without one, the dims keep their row-major
    places. So `x.t() + y` follows `x.t()` and `y + x.t()` follows `y`."""
    def should_swap(d0: int, d1: int) -> int:
        for strides in operand_strides:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    return iterator_order(list(range(len(shape) - 1, -1, -1)), should_swap)


def broadcast_strides(shape, op_shape, op_strides) -> tuple:
    """The strides of an operand of `op_shape` and `op_strides` broadcast to `shape` (0 on
    the dims it is broadcast along, the leading ones it lacks included)."""
    lead = len(shape) - len(op_shape)
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else s
                               for i, (n, s) in enumerate(zip(op_shape, op_strides)))


def iterator_strides(shape, operands, scalars: bool = False) -> tuple:
    """The element strides of the dense result of an elementwise op of `shape` over
    `operands` ((shape, strides) pairs, in order), as TensorIterator allocates it
    (`scalars`: a number or 0-d operand takes part too). Operands all of the result's shape
    (no number among them) take its fast setup: all contiguous gives row-major strides, all
    channels_last those of channels_last, all dense with the same strides those strides, size-1
    dims' included (an empty tensor is contiguous whatever its strides). Otherwise the dims
    are sorted (`iterator_perm`) and each stride is the product of the sizes inside it, a
    size 0 too (`zeros(3, 0, 2).permute(1, 2, 0) + 1` has strides (2, 1, 0))."""
    if not scalars and operands and all(tuple(s) == tuple(shape) for s, _ in operands):
        if 0 in shape:
            return contiguous_strides(shape)
        every = range(len(shape))
        if all(is_dense_in(shape, st, every) for _, st in operands):
            return contiguous_strides(shape)
        if len(shape) == 4 and all(is_format_contiguous(shape, st, "channels_last")
                                   for _, st in operands):
            return dense_strides(shape, FORMAT_ORDERS["channels_last"])
        first = tuple(operands[0][1])
        if all(tuple(st) == first for _, st in operands) and \
                dense_order(shape, first) is not None:
            return first
    perm = iterator_perm(shape, [broadcast_strides(shape, s, st) for s, st in operands])
    out = [0] * len(shape)
    acc = 1
    for d in perm:
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def empty_laid(out: np.ndarray, *operands) -> np.ndarray:
    """`out`, an empty result of an elementwise op over `operands` (arrays, and numbers that
    take part as 0-d operands), seen with the strides TensorIterator gives it: NumPy's new
    empty array has zero strides, read as contiguous, where PyTorch's iterator orders the
    dims over operands that differ in shape (`zeros(0, 3).t() + 1` has strides (1, 3))."""
    arrays = [a for a in operands if a.__class__ is np.ndarray]
    want = iterator_strides(out.shape, [(a.shape, elem_strides(a)) for a in arrays],
                            scalars=len(arrays) < len(operands))
    return strided_empty(out, want)


def iterator_layout(out: np.ndarray, *operands) -> np.ndarray:
    """`out`, NumPy's result of an elementwise op over `operands` (arrays, and numbers that
    do not count), laid out as TensorIterator lays out PyTorch's: `out` itself when it is,
    else a copy. NumPy's order "K" agrees unless the operands' memory orders conflict, where
    NumPy goes row-major and TensorIterator follows the first operand with an opinion
    (`x.t() + y` is laid out like `x.t()`), and on the strides of size-1 dims, which
    TensorIterator sorts among the others by the operands' strides there (`x.t()[None] + 1`
    has strides (3, 1, 3), NumPy's (1, 1, 3)). Callers ask only when an operand is not
    row-major: all-contiguous operands give a row-major result in both."""
    shape = out.shape
    if out.ndim < 2 or out.size <= 1:
        return out
    arrays = [a for a in operands if isinstance(a, np.ndarray)]
    want = iterator_strides(shape, [(a.shape, elem_strides(a)) for a in arrays],
                            scalars=len(arrays) < len(operands))
    have = elem_strides(out)
    if have == want:
        return out
    if all(n <= 1 or w == h for n, w, h in zip(shape, want, have)):
        # Only size-1 dims' strides differ, which address nothing: the same memory, no copy.
        return np.lib.stride_tricks.as_strided(out, shape, tuple(v * out.itemsize for v in want))
    laid = np.ndarray(shape, out.dtype, buffer=np.empty(out.size, out.dtype),
                      strides=tuple(v * out.itemsize for v in want))
    laid[...] = out
    return laid


def infer_dense_strides(shape, strides) -> tuple:
    """PyTorch's `infer_dense_strides`: the strides of a new dense tensor of `shape` that
    keeps the order of dims in memory of a tensor with `strides` (what `clone` and the
    `*_like` factories give a tensor that is not dense), dims sorted as TensorIterator sorts
    them: by stride, a zero stride comparing as equal, equal strides by size."""
    nd = len(shape)
    perm = list(range(nd - 1, -1, -1))  # innermost first

    def should_swap(a: int, b: int) -> int:
        sa, sb = strides[a], strides[b]
        if sa == 0 or sb == 0:
            return 0
        if sa != sb:
            return -1 if sa < sb else 1
        return 1 if shape[a] > shape[b] else 0

    iterator_order(perm, should_swap)
    out = [0] * nd
    acc = 1
    for d in perm:
        out[d] = acc
        if shape[d] > 1:
            acc *= shape[d]
    return tuple(out)


def like_strides(shape, strides) -> tuple:
    """The strides PyTorch's `empty_like` (`preserve_format`) gives a new tensor like one of
    `shape` and `strides`: the same when that one is dense, else `infer_dense_strides`."""
    return strides if dense_order(shape, strides) is not None else infer_dense_strides(
        shape, strides)


def laid_like(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    """`out` (of `a`'s shape) with the strides `empty_like(a)` has: `out` itself when it has
    them, else a copy."""
    want = like_strides(a.shape, elem_strides(a))
    if elem_strides(out) == want:  # (size-1 dims' strides too: PyTorch's show them)
        return out
    laid = np.ndarray(out.shape, out.dtype, buffer=np.empty(out.size, out.dtype),
                      strides=tuple(v * out.itemsize for v in want))
    laid[...] = out
    return laid


def in_memory_order(make, shape: tuple, order: tuple | None) -> np.ndarray:
    """`make(shape')` (a row-major array of `shape` with its dims in `order`, filled in that
    order) seen with its dims back in `shape`'s order: an array of `shape` whose memory holds
    the dims in `order`, its values written in memory order (as PyTorch fills a tensor)."""
    if order is None:
        return make(shape)
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return make(tuple(shape[d] for d in order)).transpose(inverse)


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of `shapes`, with PyTorch's error for incompatible sizes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        offset = ndim - len(shape)
        # From the last dimension, as ATen checks: with several mismatches the message names
        # the rightmost.
        for i in range(len(shape) - 1, -1, -1):
            size = shape[i]
            j = offset + i
            if size == out[j] or size == 1:
                continue
            if out[j] == 1:
                out[j] = size
                continue
            # Name the operands as PyTorch does: the earlier shape is `a`.
            raise RuntimeError(
                f"The size of tensor a ({out[j]}) must match the size of tensor b ({size}) at "
                f"non-singleton dimension {j}")
    return tuple(out)


def wrap_dim(dim: int, ndim: int) -> int:
    """`dim` made non-negative, with PyTorch's error when out of range."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def size_str(shape) -> str:
    """`[2, 3]`, as PyTorch prints sizes in messages."""
    return "[" + ", ".join(str(s) for s in shape) + "]"


def elem_strides(a) -> tuple:
    """Strides of an array or tensor in elements."""
    if isinstance(a, np.ndarray):
        if a.size == 0:
            return empty_strides(a)
        return tuple(s // a.itemsize for s in a.strides)
    return tuple(a.stride())


def empty_strides(a: np.ndarray) -> tuple:
    """The element strides of an empty array. NumPy gives every empty array it allocates
    zero strides, read as PyTorch's contiguous ones; an empty array laid out by
    `strided_empty` (a factory's) or a view of one keeps the strides PyTorch's views
    compute (`zeros(0, 3).t()` has (1, 3))."""
    if not any(a.strides):
        return contiguous_strides(a.shape)
    return tuple(s // a.itemsize for s in a.strides)


def format_empty(a: np.ndarray, order: tuple) -> np.ndarray:
    """Empty `a` seen with the strides PyTorch gives a new tensor in the memory format whose
    order of dims is `order`: unlike its contiguous strides, its channels-last ones multiply
    the sizes as they are, so a dim of size 0 zeroes the strides outside it."""
    strides = [0] * a.ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= a.shape[d]
    return strided_empty(a, tuple(strides))


def strided_empty(a: np.ndarray, strides: tuple | None = None) -> np.ndarray:
    """Empty `a` seen with element `strides` (PyTorch's contiguous ones by default), so
    that NumPy's views of it carry the strides PyTorch's views of it have."""
    if strides is None:
        strides = contiguous_strides(a.shape)
    return np.ndarray(a.shape, a.dtype, buffer=a,
                      strides=tuple(s * a.itemsize for s in strides))


def storage_offset(a: np.ndarray) -> int:
    """Offset in elements of `a`'s first element in its storage."""
    storage = a
    while isinstance(storage.base, np.ndarray):
        storage = storage.base
    return (a.__array_interface__["data"][0]
            - storage.__array_interface__["data"][0]) // max(a.itemsize, 1)
