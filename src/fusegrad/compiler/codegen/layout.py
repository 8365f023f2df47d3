"""Output layouts: the strides and storage offset eager mode gives each graph output.

Kernels may write their outputs in any layout; eager's is the one users see (`stride()`,
`is_contiguous()`, whether `view` works), so compiled outputs take it. Layouts are
propagated through the graph from the real inputs: a view's geometry is its meta's (fakes
model views exactly); an elementwise op's result (and `clone`'s, `_to_copy`'s) follows its
operands' memory order as NumPy's order "K" allocation does, which is what eager's kernels
get; any other op's result is contiguous, as the NumPy kernels eager runs allocate them.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .ir import contiguous_strides


def k_order_strides(shape: tuple, operands: list) -> tuple:
    """The strides NumPy's order "K" gives a new array of `shape` computed elementwise from
    `operands` (tensors broadcast to `shape`): asked of NumPy's own iterator, on stand-ins
    of one byte per element that share no memory of the operands (nothing is read)."""
    shape = tuple(int(s) for s in shape)
    if not shape or 0 in shape or not operands or all(
            tuple(t.stride()) == contiguous_strides(tuple(t.shape)) for t in operands):
        return contiguous_strides(shape)  # the common case, without asking NumPy
    probe = np.zeros(1, np.uint8)
    stand_ins = []
    for t in operands:
        lead = len(shape) - len(t.shape)
        strides = [0] * lead + [0 if n == 1 and shape[lead + i] != 1 else int(s)
                                for i, (n, s) in enumerate(zip(t.shape, t.stride()))]
        stand_ins.append(np.lib.stride_tricks.as_strided(probe, shape, strides))
    it = np.nditer(stand_ins + [None], flags=["zerosize_ok", "refs_ok"],
                   op_flags=[["readonly"]] * len(stand_ins) + [["writeonly", "allocate"]],
                   op_dtypes=[np.uint8] * (len(stand_ins) + 1), order="K")
    return tuple(int(s) for s in it.operands[-1].strides)


_UNKNOWN = object()  # a node whose layout is not known (its outputs stay contiguous)


def _number_function(f) -> bool:
    """Whether `f` is Python's arithmetic on numbers (`operator.mul`, `abs`, `math.sqrt`),
    as a graph records it on its number inputs: a function of its arguments alone."""
    if getattr(f, "math_name", None) is not None:  # `torch._sym_sqrt`-like: math's twin
        return True
    module = getattr(f, "__module__", None) or getattr(type(f), "__module__", None)
    return module in ("_operator", "operator", "math", "builtins") and \
        getattr(f, "__name__", "") not in ("print", "input", "exec", "eval", "open")


def _has_unknown(args) -> bool:
    for a in args:
        if a is _UNKNOWN or (isinstance(a, (list, tuple)) and _has_unknown(a)):
            return True
    return False


def _fake(value: Any):
    """A fake with `value`'s geometry (a real tensor input), the value itself otherwise."""
    from ..._fake import FakeTensor
    from ..._tensor import Tensor

    if isinstance(value, Tensor) and not isinstance(value, FakeTensor):
        return FakeTensor.from_tensor(value)
    return value


def eager_layouts(gm: Any, example_inputs: list) -> dict:
    """Node -> fake tensor with eager's geometry (None where it is not known)."""
    from ..._fake import FakeTensor
    from ...fx.node import Node
    from .lower import resolve_op

    env: dict = {}

    def val(a):
        if isinstance(a, Node):
            return env.get(a, _UNKNOWN)
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, t in zip(placeholders, example_inputs):
        env[n] = _fake(t)
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        try:
            env[n] = _layout_of(n, val(n.args), val(n.kwargs), resolve_op(n.target))
        except Exception:  # noqa: BLE001 - an unknown layout stays contiguous
            env[n] = _UNKNOWN
    return {n: v for n, v in env.items() if isinstance(v, (FakeTensor, list, tuple))}


def _layout_of(n, args, kwargs, op):
    from ..._fake import FakeTensor

    if n.target is operator.getitem:
        return args[0][args[1]] if args[0] is not _UNKNOWN else _UNKNOWN
    if op is None:
        # A Python function's result (a random factory's draw): the traced value's layout.
        val = n.meta.get("val")
        if isinstance(val, FakeTensor):
            return val
        # A number computed from the graph's numbers (`s * 2` of a dynamic float input):
        # eager's kernels take it as a Python scalar, which leaves an elementwise result
        # in its tensor operands' order; its value does not matter to a layout.
        if isinstance(val, (bool, int, float)):
            return val
        if _number_function(n.target) and not kwargs and all(
                type(a) in (bool, int, float) for a in args):
            return n.target(*args)
        return _UNKNOWN
    if kwargs or _has_unknown(args):
        return _UNKNOWN
    return with_eager_layout(op, args, FakeTensor._compute(op, tuple(args)))


def with_eager_layout(op, args, out):
    """`out` (the fake result of `op` on fake `args`, which a meta makes contiguous unless
    `op` is a view) with the strides eager's kernel would give it."""
    from ..._fake import FakeTensor
    from ..._tensor import tensors_in
    from ...ops.shape import preserve_format

    if op.view and op.name.partition(".")[0] == "view" and isinstance(out, FakeTensor):
        strides = view_strides_as_eager(args[0], tuple(out.shape))
        if strides is not None and strides != tuple(out.stride()):
            out._fstrides = strides
        return out
    if op.view or op.metadata_only or op.inplace or not isinstance(out, FakeTensor):
        return out

    base = op.name.partition(".")[0]
    # (else eager's kernel allocates it contiguous)
    like = op.result_order == "operands" or op.result_order == "iterator"
    if base == "clone" and len(args) > 1 and args[1] is not None and \
            args[1] is not preserve_format:
        like = False  # clone(memory_format=contiguous_format): `contiguous()`
    if not like:
        return out
    operands = [t for t in tensors_in(args) if _broadcasts(tuple(t.shape), tuple(out.shape))]
    if not operands and op.result_order == "operands":
        # An operand of the result's rank and another shape (glu's halves of its input): its
        # slices, which the kernel computes from, are in its memory order.
        operands = [_Ordered(tuple(out.shape), t) for t in tensors_in(args)
                    if t.dim() == out.dim() and all(
                        isinstance(n, (int, np.integer)) for n in (*out.shape, *t.stride()))][:1]
    if op.result_order == "iterator":
        strides = iterator_order(out, operands)
    else:
        strides = _binary_off_fast_path(op, args, out, operands)
    if strides is None:
        strides = k_order_strides(tuple(out.shape), operands)
    if strides != tuple(out.stride()):
        out._fstrides = strides
    return out


class _Ordered:
    """A stand-in operand of `shape` laid out densely in `like`'s memory order (its strides
    ranked; ties in dim order), for `k_order_strides`."""

    def __init__(self, shape: tuple, like):
        self.shape = tuple(int(n) for n in shape)
        ranked = sorted(range(len(self.shape)), key=lambda d: (-int(like.stride()[d]), d))
        strides, span = [0] * len(self.shape), 1
        for d in reversed(ranked):
            strides[d] = span
            span *= max(self.shape[d], 1)
        self._strides = tuple(strides)

    def stride(self) -> tuple:
        return self._strides


def _binary_off_fast_path(op, args, out, operands) -> tuple | None:
    """The strides eager's binary kernel gives `out` off its fast path (operands of two
    dtypes, or not float32/float64): TensorIterator's order, which follows the first
    operand where the operands' orders conflict (`x.t() * y.double()` is laid out like
    `x.t()`), where NumPy's order "K" (the fast path's) goes row-major. None: order "K"."""
    from ... import _dtype
    from ..._shapes import iterator_strides
    from ..._tensor import Tensor, tensors_in

    name = getattr(getattr(op, "kernel", None), "__qualname__", "")
    if name.startswith("_add_kernel."):
        if len(args) == 3 and type(args[2]) is int and args[2] == 1:
            args = args[:2]  # (add and sub with alpha 1 take the binary kernel's paths)
        elif len(args) != 2:
            return None
    elif not name.startswith("binary_kernel."):
        return None
    if len(args) != 2 or not operands:
        return None
    a, b = args
    if isinstance(a, Tensor) and a.dtype in (_dtype.float32, _dtype.float64) and (
            (isinstance(b, Tensor) and b.dtype is a.dtype) or type(b) in (int, float)):
        return None  # (the fast path: NumPy's order)
    if not all(isinstance(n, (int, np.integer)) for t in [out, *tensors_in(args)]
               for n in (*t.shape, *t.stride())):
        return None  # symbolic sizes: the meta's strides
    shape = tuple(int(n) for n in out.shape)
    pairs = [(tuple(int(n) for n in t.shape), tuple(int(s) for s in t.stride()))
             for t in tensors_in(args)]
    if all(all(s == c for n, s, c in zip(sh, st, contiguous_strides(sh)) if n > 1)
           for sh, st in pairs):
        return None  # (row-major operands: eager keeps NumPy's result)
    scalars = not all(isinstance(x, Tensor) for x in args)
    return tuple(int(s) for s in iterator_strides(shape, pairs, scalars=scalars))


def iterator_order(out, operands) -> tuple | None:
    """The strides an "iterator" op's kernel gives `out` (`OpDef.result_order`): TensorIterator's
    order over its tensor operands, in order (`_util.iterator_laid`), where one is not
    row-major; None (NumPy's order "K", the same) where all are, or a size is symbolic."""
    from ..._shapes import iterator_strides

    if not all(isinstance(n, (int, np.integer)) for t in [out, *operands]
               for n in (*t.shape, *t.stride())):
        return None  # symbolic sizes: the meta's strides
    pairs = [(tuple(int(n) for n in t.shape), tuple(int(s) for s in t.stride()))
             for t in operands]
    if all(all(s == c for n, s, c in zip(sh, st, contiguous_strides(sh)) if n > 1)
           for sh, st in pairs):
        return None
    return tuple(int(s) for s in iterator_strides(tuple(int(n) for n in out.shape), pairs))


def view_strides_as_eager(t: Any, shape: tuple) -> tuple | None:
    """The strides eager's `t.view(shape)` has, None where they are not plain numbers. The
    view meta gives dims of size 1 stride 0, where eager's (PyTorch's `computeStride`, and
    NumPy's reshape, which eager runs) gives them the stride of the dims inside them:
    `(1, 10) -> (1, 1, 10)` is `(10, 10, 1)`. Asked of NumPy on a one-byte stand-in (setting
    `shape` never copies nor reads)."""
    numbers = (*t.shape, *t.stride(), *shape)
    if not all(isinstance(n, (int, np.integer)) for n in numbers):
        return None  # symbolic sizes (`int()` would specialise them): the meta's strides
    old, old_strides = tuple(map(int, t.shape)), tuple(map(int, t.stride()))
    new = tuple(map(int, shape))
    if 1 not in new or 0 in old:
        return None
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), old, old_strides)
    try:  # (NumPy 2.5 deprecates setting `.shape`; `copy=False` refuses a copy alike)
        viewed = stand_in.reshape(new, copy=False)
    except (AttributeError, ValueError):  # no view (the meta raised already)
        return None
    return tuple(int(s) for s in viewed.strides)


def _broadcasts(shape: tuple, to: tuple) -> bool:
    """Whether `shape` broadcasts to `to` (an operand the result is computed over)."""
    if len(shape) > len(to):
        return False
    return all(n in (1, m) for n, m in zip(shape, to[len(to) - len(shape):]))


def storage_size(shape, strides, offset: int) -> int:
    """Elements a storage needs for a tensor of this geometry."""
    if any(int(s) == 0 for s in shape):
        return offset
    return offset + sum((int(n) - 1) * int(s) for n, s in zip(shape, strides)) + 1


def non_overlapping(shape, strides) -> bool:
    """Whether no two elements of the geometry share a memory location."""
    dims = sorted((int(s), int(n)) for n, s in zip(shape, strides) if int(n) > 1)
    span = 1
    for s, n in dims:
        if s < span:
            return False
        span = s * n
    return True


def empty_strided(shape: tuple, strides: tuple, offset: int, dtype) -> np.ndarray:
    """A new array of this geometry (strides and offset in elements) over a fresh storage
    (zeroed where the geometry leaves gaps, so no stale memory is ever visible)."""
    dtype = np.dtype(dtype)
    n = storage_size(shape, strides, offset)
    dense = n == int(np.prod(shape, dtype=np.int64)) if shape else n == 1
    storage = np.empty(max(n, 1), dtype) if dense else np.zeros(max(n, 1), dtype)
    return np.ndarray(shape, dtype, buffer=storage, offset=offset * dtype.itemsize,
                      strides=tuple(int(s) * dtype.itemsize for s in strides))


def restrided(a: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """`a`'s values in a new array of the given geometry. An expanded geometry (elements
    sharing memory) is read-only, as eager's `expand` (a broadcast view) is: a write into
    the whole of it raises eager's error, a write into a part without shared elements
    goes through to the storage."""
    out = empty_strided(shape, strides, offset, a.dtype)
    np.copyto(out, a)
    if not non_overlapping(shape, strides):
        out.flags.writeable = False
    return out
