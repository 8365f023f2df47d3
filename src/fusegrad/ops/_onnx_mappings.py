"""Building blocks of the registry's `onnx` entries (loaded by the exporter; the registry's
modules name them through `_onnx`'s references).

An entry is either the name of one ONNX operator (the exporter's shared rule maps the op's
tensor arguments to its inputs) or a function `(builder, inputs, args, kwargs, opset) ->
output(s)`: `inputs` are the op's positional arguments with tensors replaced by graph values
(`builder.emit` makes nodes, `builder.operand` constants), `args` the real arguments of the
example call (tensors with their example values and shapes). The `onnx` package is never
imported here: the exporter passes the builder in. An output the mapping does not compute
(a saved statistic) is returned as None.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._onnx import INT64_MAX


def ints(v: Any, n: int) -> list[int]:
    """`v` (an int or a sequence) as a list of `n` ints."""
    if isinstance(v, (list, tuple)):
        out = [int(x) for x in v]
        return out * n if len(out) == 1 and n > 1 else out
    return [int(v)] * n


def norm_dim(d: int, rank: int) -> int:
    """A possibly negative dim as a non-negative one."""
    return d + rank if d < 0 else d


def onnx_op(op_type: str, **attrs: tuple[int, Callable]) -> Callable:
    """An entry for one `op_type` node on argument 0, with attributes read from positional
    arguments: `onnx_op("LeakyRelu", alpha=(1, float))`."""

    def mapping(b, inputs, args, kwargs, opset):
        values = {name: conv(args[pos]) for name, (pos, conv) in attrs.items()
                  if pos < len(args)}
        return b.emit(op_type, [b.cast(inputs[0], b.out_dtype)], **values)

    mapping.__doc__ = f"One {op_type} node."
    return mapping


def _scaled(b, v, alpha, dtype):
    if alpha == 1:
        return b.operand(v, dtype)
    return b.emit("Mul", [b.operand(v, dtype), b.operand(alpha, dtype)])


def add_like(op_type: str, swap: bool = False) -> Callable:
    """add/sub(self, other, alpha): self op alpha * other (`swap`: rsub's other - alpha *
    self)."""

    def mapping(b, inputs, args, kwargs, opset):
        a, o = (inputs[1], inputs[0]) if swap else (inputs[0], inputs[1])
        alpha = args[2] if len(args) > 2 else 1
        dtype = b.out_dtype
        return b.emit(op_type, [b.operand(a, dtype), _scaled(b, o, alpha, dtype)])

    mapping.__doc__ = f"{op_type} with PyTorch's alpha."
    return mapping


def with_number(op_type: str) -> Callable:
    """op(self, other) with a number (or tensor) operand: one `op_type` node in the
    result's dtype."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        return b.emit(op_type, [b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)])

    mapping.__doc__ = f"{op_type} with a number."
    return mapping


def compare(op_type: str, negate: bool = False) -> Callable:
    """A comparison on the promoted operands (`negate`: Not of it, as `ne` is)."""

    def mapping(b, inputs, args, kwargs, opset):
        from .. import _dtype

        dtype = np.dtype(_dtype.result_type(args[0], args[1]).np)
        out = b.emit(op_type, [b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)],
                     dtype=np.bool_)
        return b.emit("Not", [out], dtype=np.bool_) if negate else out

    mapping.__doc__ = f"{op_type}{' then Not' if negate else ''}."
    return mapping


def boolean(op_type: str) -> Callable:
    """A logical op: its operands as booleans (ONNX's And/Or/Xor/Not take bool only)."""

    def mapping(b, inputs, args, kwargs, opset):
        return b.emit(op_type, [b.operand(v, np.bool_) for v in inputs[:2]
                                if not isinstance(v, str)], dtype=np.bool_)

    mapping.__doc__ = f"{op_type} on booleans."
    return mapping


def reduce(op_type: str, full: bool = False) -> Callable:
    """A Reduce* node: `op(self, dtype)` over all dims when `full`, else `op(self, dims,
    keepdim, ...)`."""

    def mapping(b, inputs, args, kwargs, opset):
        x = b.cast(inputs[0], b.out_dtype)
        rank = args[0].dim()
        if rank == 0:  # a reduction of a scalar is the scalar
            return x
        keep = not full and len(args) > 2 and bool(args[2])
        if full or args[1] is None or (isinstance(args[1], (list, tuple)) and not args[1]):
            dims = list(range(rank))
        else:
            dims = [norm_dim(d, rank) for d in ints(args[1], 1)]
        if (op_type == "ReduceMean" and keep and rank >= 3
                and sorted(dims) == list(range(2, rank))):
            # a mean over every spatial dim (adaptive average pooling to 1) is one node
            return b.emit("GlobalAveragePool", [x])
        return b.reduce(op_type, x, dims, keep, b.out_dtype, b.out_rank)

    mapping.__doc__ = f"{op_type}."
    return mapping


def softmax(op_type: str) -> Callable:
    """_softmax / _log_softmax(self, dim, half_to_float): one node over `dim` (opset 13's
    single-axis semantics)."""

    def mapping(b, inputs, args, kwargs, opset):
        x = b.cast(inputs[0], b.out_dtype)
        if args[0].dim() == 0:  # ONNX needs rank >= 1: go through a 1-element vector
            return b.squeeze(b.emit(op_type, [b.unsqueeze(x, [0])], rank=1, axis=0), [0])
        return b.emit(op_type, [x], axis=int(args[1]))

    mapping.__doc__ = f"{op_type} over one axis."
    return mapping


def identity(b, inputs, args, kwargs, opset):
    """The input itself (clone, alias, contiguous copies): no node."""
    return inputs[0]


def cast(b, inputs, args, kwargs, opset):
    """A Cast to the result's dtype (no node when it already has it)."""
    return b.cast(inputs[0], b.out_dtype)


def reshape(b, inputs, args, kwargs, opset):
    """view / _unsafe_view / reshape to `args[1]`, written so a dynamic batch stays dynamic.

    The example call fixes every size, the batch included. Leading sizes equal to the
    input's are written as 0 (copied from the input at run time); when the target has no
    -1, the first size after them becomes -1 (inferred). A 2-D result that keeps the
    input's first dim is ONNX Flatten(axis=1)."""
    x = inputs[0]
    shape_in = tuple(int(s) for s in args[0].shape)
    raw = list(args[1])  # symbolic sizes (dynamic axes) among them are kept
    target = [int(s) for s in raw]
    known = [s for s in target if s != -1]
    minus = target.index(-1) if -1 in target else None
    if minus is not None:
        rest = int(np.prod(shape_in)) // max(1, int(np.prod(known)))
        target[minus] = rest
    if tuple(target) == shape_in:
        return x
    if len(target) == 2 and len(shape_in) >= 2 and target[0] == shape_in[0]:
        return b.emit("Flatten", [x], axis=1)
    k = 0
    while k < min(len(target), len(shape_in)) and target[k] == shape_in[k] and target[k] != 0:
        k += 1
    spec: list = [0] * k + raw[k:]
    # one size inferred: PyTorch's -1 where it is after the copied ones, else the first
    # size after them
    if minus is not None and minus >= k:
        spec[minus] = -1
    elif k < len(spec):
        spec[k] = -1
    return b.emit("Reshape", [x, b.ints(spec)])


def batched(b, x, unbatched: bool, build: Callable):
    """`build(x)` on a batch of one when the example input has no batch dim (pooling of a
    (C, H, W) tensor), squeezed back."""
    if not unbatched:
        return build(x)
    rank = b.out_rank
    b.out_rank = rank + 1
    try:
        out = build(b.unsqueeze(x, [0]))
    finally:
        b.out_rank = rank
    return b.squeeze(out, [0])


def gelu_formula(b, x, approximate: str):
    """GELU before opset 20: 0.5 x (1 + erf(x / sqrt 2)) or its tanh approximation."""
    dtype = b.out_dtype

    def c(value):
        return b.operand(value, dtype)

    if approximate == "tanh":
        cube = b.emit("Mul", [b.emit("Mul", [x, x]), x])
        inner = b.emit("Add", [x, b.emit("Mul", [cube, c(0.044715)])])
        t = b.emit("Tanh", [b.emit("Mul", [inner, c(math.sqrt(2.0 / math.pi))])])
    else:
        t = b.emit("Erf", [b.emit("Mul", [x, c(1.0 / math.sqrt(2.0))])])
    return b.emit("Mul", [b.emit("Mul", [x, c(0.5)]), b.emit("Add", [t, c(1.0)])])


def clip(b, x, lo, hi):
    """Clip(x, lo, hi) with numbers (or None) as bounds of the result's dtype."""
    dtype = b.out_dtype
    return b.emit("Clip", [b.cast(x, dtype), None if lo is None else b.operand(lo, dtype),
                           None if hi is None else b.operand(hi, dtype)])


# ---------------------------------------------------------------------- more mappings
#
# Entries for reductions with indices, sorting, scans, masks, padding, resizing, the
# normalizations with batch statistics, recurrent layers and attention. Each is written
# so the batch (and any other dim the op does not read as a number) stays dynamic.

I64 = np.dtype(np.int64)
F32 = np.dtype(np.float32)


def _arg(args: tuple, i: int, default: Any) -> Any:
    """Positional argument `i`, or `default` when the call left it out."""
    return args[i] if i < len(args) else default


def _numeric(b, x):
    """Booleans as int32 (the arg and top-k kernels take numbers only)."""
    return b.cast(x, np.int32) if b.dtype_of(x) == np.bool_ else x


def _dim_size(b, x, d: int):
    """The size of dim `d` of `x` as a 1-element int64 tensor read at run time."""
    return b.shape(x, d, d + 1)


def arg_reduce(op_type: str) -> Callable:
    """argmax/argmin(self, dim=None, keepdim=False): ArgMax/ArgMin; with no dim over the
    flattened tensor (kept as size-1 dims when `keepdim`)."""

    def mapping(b, inputs, args, kwargs, opset):
        x, rank = _numeric(b, inputs[0]), args[0].dim()
        dim, keep = _arg(args, 1, None), bool(_arg(args, 2, False))
        if rank == 0:  # the only index of a scalar
            return b.const(np.zeros((), np.int64))
        if dim is None:
            flat = b.emit("Reshape", [x, b.ints([-1])], dtype=x.dtype, rank=1)
            out = b.emit(op_type, [flat], dtype=I64, rank=0, axis=0, keepdims=0)
            return b.emit("Reshape", [out, b.ints([1] * rank)], dtype=I64) if keep else out
        return b.emit(op_type, [x], dtype=I64, axis=norm_dim(int(dim), rank),
                      keepdims=int(keep))

    mapping.__doc__ = f"{op_type}, flattening when dim is None."
    return mapping


def value_and_index(reduce_type: str, arg_type: str) -> Callable:
    """max.dim/min.dim(self, dim, keepdim): (Reduce{Max,Min}, Arg{Max,Min}) over one dim."""

    def mapping(b, inputs, args, kwargs, opset):
        x, rank = inputs[0], args[0].dim()
        if rank == 0:
            return [x, b.const(np.zeros((), np.int64))]
        d, keep = norm_dim(int(args[1]), rank), bool(_arg(args, 2, False))
        xn = _numeric(b, x)
        values = b.reduce(reduce_type, xn, [d], keep, xn.dtype, b.out_rank)
        index = b.emit(arg_type, [xn], dtype=I64, axis=d, keepdims=int(keep))
        return [b.cast(values, b.out_dtype), index]

    mapping.__doc__ = f"{reduce_type} and {arg_type} over one dim."
    return mapping


def reduce_all(op_type: str) -> Callable:
    """max/min(self) over every element: one Reduce node without axes."""

    def mapping(b, inputs, args, kwargs, opset):
        if args[0].dim() == 0:
            return inputs[0]
        x = _numeric(b, inputs[0])
        return b.cast(b.reduce(op_type, x, None, False, x.dtype, 0), b.out_dtype)

    mapping.__doc__ = f"{op_type} over all elements."
    return mapping


def _topk(b, x, k, axis: int, largest: bool, rank: int, dtype):
    """TopK's (values, indices) of `x` along `axis`, `k` a 1-element int64 tensor."""
    xn = _numeric(b, x)
    values, index = b.op("TopK", [xn, k], xn.dtype, rank, name=b.origin.split(".")[0],
                         n_out=2, axis=axis, largest=int(largest), sorted=1)
    index.dtype = I64
    return [b.cast(values, dtype), index]


def topk(b, inputs, args, kwargs, opset):
    """topk(self, k, dim=-1, largest=True, sorted=True): TopK (always sorted: an unsorted
    top-k's order is the implementation's)."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        return [x, b.const(np.zeros((), np.int64))]
    d = norm_dim(int(_arg(args, 2, -1)), rank)
    return _topk(b, x, b.ints([int(args[1])]), d, bool(_arg(args, 3, True)), rank,
                 b.out_dtype)


def sort(b, inputs, args, kwargs, opset):
    """sort(self, dim=-1, descending=False) (and sort.stable, argsort): TopK of every element
    along dim, with k read from the input's shape (so the dim may be dynamic)."""
    x, rank = inputs[0], args[0].dim()
    stable = b.origin == "sort.stable"
    first = 2 if stable else 1
    if rank == 0:
        out = [x, b.const(np.zeros((), np.int64))]
    else:
        d = norm_dim(int(_arg(args, first, -1)), rank)
        desc = bool(_arg(args, first + 1, False))
        out = _topk(b, x, _dim_size(b, x, d), d, desc, rank, args[0]._data.dtype)
    return out[1] if b.origin == "argsort" else out


def cumsum(b, inputs, args, kwargs, opset):
    """cumsum(self, dim, dtype=None): CumSum in the result's dtype."""
    x = b.cast(inputs[0], b.out_dtype)
    if args[0].dim() == 0:
        return x
    axis = b.const(np.asarray(norm_dim(int(args[1]), args[0].dim()), np.int64))
    return b.emit("CumSum", [x, axis])


def _truthy(b, x):
    """`x != 0` as booleans (NaN counts as true, as in PyTorch)."""
    if b.dtype_of(x) == np.bool_:
        return x
    return b.emit("Not", [b.emit("Equal", [x, b.operand(0, b.dtype_of(x))], dtype=np.bool_)],
                  dtype=np.bool_)


def logical_reduce(every: bool) -> Callable:
    """all/any(self[, dim(s), keepdim]): the count of true (`all`: of false) elements, so an
    empty reduction gives any = False and all = True."""

    def mapping(b, inputs, args, kwargs, opset):
        rank = args[0].dim()
        t = _truthy(b, inputs[0])
        if every:
            t = b.emit("Not", [t], dtype=np.bool_)
        dims = _arg(args, 1, None)
        if rank == 0:
            hit = t
        else:
            keep = bool(_arg(args, 2, False))
            if dims is None or (isinstance(dims, (list, tuple)) and not dims):
                axes = list(range(rank))
            else:
                axes = [norm_dim(d, rank) for d in ints(dims, 1)]
            count = b.reduce("ReduceSum", b.cast(t, np.int64), axes, keep, I64, b.out_rank)
            hit = b.cast(count, np.bool_)
        if every:
            hit = b.emit("Not", [hit], dtype=np.bool_)
        return b.cast(hit, b.out_dtype)

    mapping.__doc__ = "ReduceSum of the " + ("false" if every else "true") + " elements."
    return mapping


def float_predicate(kind: str) -> Callable:
    """isnan/isinf/isfinite: IsNaN/IsInf on floats; integers are never NaN or infinite."""

    def mapping(b, inputs, args, kwargs, opset):
        x = inputs[0]
        if b.dtype_of(x).kind != "f":
            same = b.emit("Equal", [x, x], dtype=np.bool_)  # all true, in x's shape
            return same if kind == "isfinite" else b.emit("Not", [same], dtype=np.bool_)
        if kind == "isnan":
            return b.emit("IsNaN", [x], dtype=np.bool_)
        if kind == "isinf":
            return b.emit("IsInf", [x], dtype=np.bool_)
        bad = b.emit("Or", [b.emit("IsNaN", [x], dtype=np.bool_),
                            b.emit("IsInf", [x], dtype=np.bool_)], dtype=np.bool_)
        return b.emit("Not", [bad], dtype=np.bool_)

    mapping.__doc__ = f"{kind} as IsNaN/IsInf."
    return mapping


def masked_fill(b, inputs, args, kwargs, opset):
    """masked_fill(self, mask, value): Where(mask, value, self)."""
    dtype = b.out_dtype
    return b.emit("Where", [b.cast(inputs[1], np.bool_), b.operand(inputs[2], dtype),
                            b.cast(inputs[0], dtype)])


def trilu(upper: bool) -> Callable:
    """triu/tril(self, diagonal=0): Trilu from opset 14; before, a Where on a constant
    mask of the last two (fixed) dims."""

    def mapping(b, inputs, args, kwargs, opset):
        x, k = inputs[0], int(_arg(args, 1, 0))
        if opset >= 14:
            return b.emit("Trilu", [x, b.const(np.asarray(k, np.int64))], upper=int(upper))
        rows, cols = args[0].shape[-2:]
        keep = (np.triu if upper else np.tril)(np.ones((rows, cols), bool), k)
        return b.emit("Where", [b.const(keep), x, b.operand(0, b.out_dtype)])

    mapping.__doc__ = f"Trilu(upper={int(upper)})."
    return mapping


def flip(b, inputs, args, kwargs, opset):
    """flip(self, dims): Slice with step -1 on each dim (any size)."""
    rank = args[0].dim()
    dims = sorted({norm_dim(int(d), rank) for d in args[1]}) if rank else []
    if not dims:
        return inputs[0]
    n = len(dims)
    return b.emit("Slice", [inputs[0], b.ints([-1] * n), b.ints([-INT64_MAX - 1] * n),
                            b.ints(dims), b.ints([-1] * n)])


def _slice(b, x, axis: int, start: int, end: int, step: int = 1):
    return b.emit("Slice", [x, b.ints([start]), b.ints([end]), b.ints([axis]),
                            b.ints([step])], dtype=x.dtype, rank=x.rank)


def roll(b, inputs, args, kwargs, opset):
    """roll(self, shifts, dims=()): per dim, the last `shift` elements then the rest
    (Slice + Concat); with no dims, on the flattened tensor, reshaped back."""
    x, shape = inputs[0], tuple(args[0].shape)
    shifts = ints(args[1], 1)
    dims = ints(_arg(args, 2, ()), 1) if _arg(args, 2, ()) not in ((), []) else []
    if not dims:
        flat = b.emit("Reshape", [x, b.ints([-1])], rank=1)
        n = int(np.prod(shape))
        out = _roll1(b, flat, 0, shifts[0], n)
        return b.emit("Reshape", [out, b.shape(x)])
    for s, d in zip(shifts, dims):
        d = norm_dim(d, len(shape))
        x = _roll1(b, x, d, s, shape[d])
    return x


def _roll1(b, x, d: int, shift: int, n: int):
    s = shift % n if n else 0
    if s == 0:
        return x
    return b.emit("Concat", [_slice(b, x, d, n - s, n), _slice(b, x, d, 0, n - s)],
                  dtype=x.dtype, rank=x.rank, axis=d)


def repeat(b, inputs, args, kwargs, opset):
    """repeat(self, repeats): Tile, after leading size-1 dims when repeats has more."""
    x, reps = inputs[0], [int(r) for r in args[1]]
    extra = len(reps) - args[0].dim()
    if extra > 0:
        x = b.unsqueeze(x, list(range(extra)))
    if all(r == 1 for r in reps):
        return x
    return b.emit("Tile", [x, b.ints(reps)])


def one_hot(b, inputs, args, kwargs, opset):
    """one_hot(self, num_classes=-1): OneHot with values (0, 1) as int64; without
    num_classes, the depth is the largest index plus one, at run time."""
    x, n = b.cast(inputs[0], np.int64), int(_arg(args, 1, -1))
    scalar = args[0].dim() == 0
    if scalar:  # OneHot needs indices of rank >= 1
        x = b.unsqueeze(x, [0])
    if n >= 0:
        depth = b.const(np.asarray([n], np.int64))
    else:
        top = b.reduce("ReduceMax", x, None, True, I64, args[0].dim())
        depth = b.emit("Add", [b.emit("Reshape", [top, b.ints([1])], dtype=I64, rank=1),
                               b.ints([1])], dtype=I64, rank=1)
    out = b.emit("OneHot", [x, depth, b.const(np.array([0, 1], np.int64))], axis=-1,
                 rank=b.out_rank + int(scalar))
    return b.squeeze(out, [0]) if scalar else out


def _pads(rank: int, pad: list) -> list[int]:
    """PyTorch's last-dim-first (before, after) pairs as ONNX's begins then ends."""
    begin, end = [0] * rank, [0] * rank
    for k in range(len(pad) // 2):  # (symbolic sizes of dynamic axes kept)
        begin[rank - 1 - k], end[rank - 1 - k] = (_size_or_int(pad[2 * k]),
                                                  _size_or_int(pad[2 * k + 1]))
    return begin + end


def constant_pad(b, inputs, args, kwargs, opset):
    """constant_pad_nd(self, pad, value=0): Pad (negative pads crop)."""
    x, rank = inputs[0], args[0].dim()
    pads = _pads(rank, list(args[1]))
    if not any(pads):
        return x
    return b.emit("Pad", [x, b.ints(pads), b.operand(_arg(args, 2, 0), b.out_dtype)],
                  mode="constant")


def mode_pad(mode: str) -> Callable:
    """reflection_pad*/replication_pad*(self, padding): Pad in `mode` (reflect, edge)."""

    def mapping(b, inputs, args, kwargs, opset):
        # PyTorch pads from the whole input, then crops (negative pads): ONNX's Pad crops
        # first, so the two are separate nodes
        pads = _pads(args[0].dim(), list(args[1]))
        x = inputs[0]
        if any(p > 0 for p in pads):
            x = b.emit("Pad", [x, b.ints([max(p, 0) for p in pads])], mode=mode)
        if any(p < 0 for p in pads):
            x = b.emit("Pad", [x, b.ints([min(p, 0) for p in pads])], mode="constant")
        return x

    mapping.__doc__ = f"Pad(mode={mode})."
    return mapping


def resize(kind: str, k: int, nearest_index: Callable | None = None) -> Callable:
    """upsample_*{k}d(self, output_size, [align_corners,] *scales): Resize over the last `k`
    dims. With every scale given, Resize reads the scales (PyTorch divides by the given
    scale, not by the size ratio); otherwise the sizes, N and C read from the input.
    `nearest_index(n_in, n_out, scale, exact, shortcut)`: the rows the op's kernel copies,
    gathered where Resize would pick others (the op module passes its own)."""
    linear = kind in ("linear", "cubic")

    def mapping(b, inputs, args, kwargs, opset):
        x = inputs[0]
        rest = args[2:]
        align = bool(rest[0]) if linear and rest else False
        scales = list(rest[1:] if linear else rest)
        scales = scales + [None] * (k - len(scales))
        attrs: dict[str, Any] = {}
        if kind == "nearest":
            attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor")
        elif kind == "exact":
            attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                         nearest_mode="round_prefer_ceil")
        else:
            attrs = dict(mode=kind, coordinate_transformation_mode="align_corners" if align
                         else "pytorch_half_pixel")
            if kind == "cubic":
                attrs["cubic_coeff_a"] = -0.75
        in_sizes, out_sizes = list(args[0].shape[2:]), [_size_or_int(s) for s in args[1]]
        given = all(s is not None and s > 0 for s in scales)
        if kind in ("nearest", "exact") and given and any(
                float(s) != o / i for s, o, i in zip(scales, out_sizes, in_sizes)):
            # A scale that is not the size ratio: onnxruntime's Resize does not place the
            # samples as PyTorch does; gather the rows it picks (the sizes are fixed).
            for axis, (i, o, s) in enumerate(zip(in_sizes, out_sizes, scales)):
                idx = nearest_index(i, o, s, kind == "exact", k == 2)
                x = b.emit("Gather", [x, b.const(idx.astype(np.int64))], axis=axis + 2)
            return x
        if given and not align:
            sc = b.const(np.asarray([1.0, 1.0] + [float(s) for s in scales], np.float32))
            return b.emit("Resize", [x, None, sc], **attrs)
        sizes = b.shape_tensor([b.shape(x, 0, 2)] + out_sizes)
        return b.emit("Resize", [x, None, None, sizes], **attrs)

    mapping.__doc__ = f"Resize ({kind})."
    return mapping


def _spatial_ones(c: int, rank: int) -> list[int]:
    return [c] + [1] * (rank - 2)


def group_norm(b, inputs, args, kwargs, opset):
    """native_group_norm(x, w, b, N, C, HxW, group, eps): the moments of each group of the
    (N, group, -1) view (ReduceMean), then the per-channel affine; the saved statistics are
    not mapped."""
    x, w, bias = inputs[:3]
    rank, c, group, eps = args[0].dim(), int(args[4]), int(args[6]), float(args[7])
    dtype = b.out_dtype
    xg = b.emit("Reshape", [x, b.ints([0, group, -1])], rank=3)
    mean = b.reduce("ReduceMean", xg, [2], True, dtype, 3)
    centred = b.emit("Sub", [xg, mean], rank=3)
    var = b.reduce("ReduceMean", b.emit("Mul", [centred, centred], rank=3), [2], True, dtype,
                   3)
    std = b.emit("Sqrt", [b.emit("Add", [var, b.operand(eps, dtype)], rank=3)], rank=3)
    out = b.emit("Reshape", [b.emit("Div", [centred, std], rank=3), b.shape(x)])
    affine = _spatial_ones(c, rank)
    if w is not None:
        out = b.emit("Mul", [out, b.emit("Reshape", [b.cast(w, dtype), b.ints(affine)],
                                         rank=len(affine))])
    if bias is not None:
        out = b.emit("Add", [out, b.emit("Reshape", [b.cast(bias, dtype), b.ints(affine)],
                                         rank=len(affine))])
    return [out, None, None]


def batch_stats_norm(b, x, w, bias, rank: int, c: int, eps: float):
    """Normalization with the batch's own statistics (batch norm in training mode, as
    instance_norm calls it): moments over every dim but the channels."""
    dtype = b.out_dtype
    axes = [0] + list(range(2, rank))
    mean = b.reduce("ReduceMean", x, axes, True, dtype, rank)
    centred = b.emit("Sub", [x, mean])
    var = b.reduce("ReduceMean", b.emit("Mul", [centred, centred]), axes, True, dtype, rank)
    out = b.emit("Div", [centred, b.emit("Sqrt", [b.emit("Add", [var,
                                                               b.operand(eps, dtype)])])])
    shape = b.ints(_spatial_ones(c, rank))
    if w is not None:
        out = b.emit("Mul", [out, b.emit("Reshape", [b.cast(w, dtype), shape], rank=rank - 1)])
    if bias is not None:
        out = b.emit("Add", [out, b.emit("Reshape", [b.cast(bias, dtype), shape],
                                         rank=rank - 1)])
    return out


def glu(b, inputs, args, kwargs, opset):
    """glu(self, dim=-1): first half times the Sigmoid of the second (Split in two)."""
    rank = args[0].dim()
    d = norm_dim(int(_arg(args, 1, -1)), rank)
    half = args[0].shape[d] // 2
    a, g = b.emit("Split", [inputs[0], b.ints([half, half])], n_out=2, axis=d)
    return b.emit("Mul", [a, b.emit("Sigmoid", [g])])


def celu(b, inputs, args, kwargs, opset):
    """celu(self, alpha=1.0): Celu."""
    return b.emit("Celu", [b.cast(inputs[0], b.out_dtype)], alpha=float(_arg(args, 1, 1.0)))


def log_sigmoid(b, inputs, args, kwargs, opset):
    """log_sigmoid(x) = -softplus(-x), stable for large |x| (Log(Sigmoid) underflows)."""
    x = inputs[0]
    return b.emit("Neg", [b.emit("Softplus", [b.emit("Neg", [x])])])


def mish(b, inputs, args, kwargs, opset):
    """mish(x) = x tanh(softplus(x)): Mish from opset 18, its formula before."""
    x = inputs[0]
    if opset >= 18:
        return b.emit("Mish", [x])
    return b.emit("Mul", [x, b.emit("Tanh", [b.emit("Softplus", [x])])])


def prelu(b, inputs, args, kwargs, opset):
    """_prelu_kernel(self, weight): PRelu (the weight already shaped to broadcast)."""
    return b.emit("PRelu", [inputs[0], b.operand(inputs[1], b.out_dtype)])


def _promoted(b, inputs, args):
    dtype = b.out_dtype
    return b.operand(inputs[0], dtype), b.operand(inputs[1], dtype), dtype


def _floor_mod(b, a, d, dtype):
    """a - floor(a / d) * d with the divisor's sign: ONNX Mod (fmod=0) for integers; for
    floats C's fmod, moved by one divisor where its sign differs from the divisor's."""
    if dtype.kind in "iu":
        return b.emit("Mod", [a, d], fmod=0)
    r = b.emit("Mod", [a, d], fmod=1)
    zero = b.operand(0, dtype)
    nonzero = b.emit("Not", [b.emit("Equal", [r, zero], dtype=np.bool_)], dtype=np.bool_)
    signs = b.emit("Xor", [b.emit("Less", [r, zero], dtype=np.bool_),
                           b.emit("Less", [d, zero], dtype=np.bool_)], dtype=np.bool_)
    fix = b.emit("And", [nonzero, signs], dtype=np.bool_)
    return b.emit("Where", [fix, b.emit("Add", [r, d]), r])


def remainder(b, inputs, args, kwargs, opset):
    """remainder(self, other): Python's modulo (the result has the divisor's sign)."""
    a, d, dtype = _promoted(b, inputs, args)
    return _floor_mod(b, a, d, dtype)


def floor_divide(b, inputs, args, kwargs, opset):
    """floor_divide(self, other): (a - a mod d) / d, exact for integers (ONNX's integer Div
    truncates toward zero), rounded to the integer it is for floats."""
    a, d, dtype = _promoted(b, inputs, args)
    q = b.emit("Div", [b.emit("Sub", [a, _floor_mod(b, a, d, dtype)]), d])
    return q if dtype.kind in "iu" else b.emit("Round", [q])


def fmod(b, inputs, args, kwargs, opset):
    """fmod(self, other): C's fmod (the result has the dividend's sign): Mod(fmod=1)."""
    a, d, dtype = _promoted(b, inputs, args)
    return b.emit("Mod", [a, d], fmod=1)


def div_mode(b, inputs, args, kwargs, opset):
    """div(self, other, rounding_mode): floor as floor_divide; trunc as Div for integers
    (ONNX truncates), and Div rounded toward zero for floats."""
    if args[2] == "floor":
        return floor_divide(b, inputs, args, kwargs, opset)
    a, d, dtype = _promoted(b, inputs, args)
    q = b.emit("Div", [a, d])
    if dtype.kind in "iu":
        return q
    # trunc(q) = sign(q) * floor(|q|)
    return b.emit("Mul", [b.emit("Sign", [q]), b.emit("Floor", [b.emit("Abs", [q])])])


_POW2 = np.left_shift(np.int64(1), np.arange(63, dtype=np.int64))
# The weight of each bit of an int64 in two's complement: the top one is -2**63.
_BIT_WEIGHTS = np.append(_POW2, np.iinfo(np.int64).min)


def _bit_planes(b, x):
    """The 64 bits of integer `x` (as int64, two's complement) as 0/1 int64 values on a new
    last axis. Bit i < 63 is floor(x / 2**i) mod 2 (Mod with the divisor's sign, Div exact
    on a multiple); bit 63 is the sign."""
    if b.is_const(x):  # a number operand: its bits are known now
        v = np.asarray(x.array).astype(np.int64).view(np.uint64)[..., None]
        return b.const(((v >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.int64))
    x = b.cast(x, np.int64)
    xe = b.unsqueeze(x, [-1])
    pow2 = b.const(_POW2)
    rest = b.emit("Mod", [xe, pow2], dtype=I64, rank=xe.rank, fmod=0)
    q = b.emit("Div", [b.emit("Sub", [xe, rest], dtype=I64, rank=xe.rank), pow2], dtype=I64,
               rank=xe.rank)
    low = b.emit("Mod", [q, b.operand(2, I64)], dtype=I64, rank=xe.rank, fmod=0)
    sign = b.cast(b.emit("Less", [xe, b.operand(0, I64)], dtype=np.bool_, rank=xe.rank), I64)
    return b.emit("Concat", [low, sign], dtype=I64, rank=xe.rank, axis=-1)


def _from_bit_planes(b, bits):
    """The int64 whose two's complement bits are `bits` (0/1 on the last axis). Summed as
    two parts below 2**52 (onnxruntime's int64 ReduceSum is not exact past a double's
    mantissa), the high one scaled by 2**52 with an exact int64 Mul."""
    rank = b.out_rank
    parts = []
    for lo, hi in ((0, 52), (52, 64)):
        w = _BIT_WEIGHTS[lo:hi] >> lo if lo else _BIT_WEIGHTS[lo:hi]
        plane = b.emit("Slice", [bits, b.ints([lo]), b.ints([hi]), b.ints([-1])], dtype=I64)
        weighted = b.emit("Mul", [plane, b.const(w)], dtype=I64)
        parts.append(b.reduce("ReduceSum", weighted, [-1], False, I64, rank))
    high = b.emit("Mul", [parts[1], b.operand(1 << 52, I64)], dtype=I64, rank=rank)
    return b.emit("Add", [parts[0], high], dtype=I64, rank=rank)


def bitwise(op_type: str, bool_type: str) -> Callable:
    """bitwise_and/or/xor/not: the logical op on booleans; Bitwise* on integers from opset
    18, and before it the same arithmetic on the operands' 64 bit planes."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        operands = [b.operand(v, dtype) for v in inputs[:2] if v is not None]
        if dtype == np.bool_:
            return b.emit(bool_type, operands)
        if opset >= 18:
            return b.emit(op_type, operands)
        planes = [_bit_planes(b, v) for v in operands]
        u = I64
        if bool_type == "Not":
            bits = b.emit("Sub", [b.operand(1, u), planes[0]], dtype=u)
        elif bool_type == "And":
            bits = b.emit("Mul", planes, dtype=u)
        elif bool_type == "Or":
            bits = b.emit("Sub", [b.emit("Add", planes, dtype=u), b.emit("Mul", planes,
                                                                          dtype=u)], dtype=u)
        else:
            bits = b.emit("Mod", [b.emit("Add", planes, dtype=u), b.operand(2, u)], dtype=u)
        return b.cast(_from_bit_planes(b, bits), dtype)

    mapping.__doc__ = f"{bool_type} on booleans, {op_type} on integers."
    return mapping


def im2col(b, inputs, args, kwargs, opset):
    """im2col(self, kernel, dilation, padding, stride) (F.unfold): the input padded, one
    strided Slice per kernel position, stacked channel-major as (N, C*kh*kw, L)."""
    x, shape = inputs[0], tuple(args[0].shape)
    if len(shape) == 3:
        b.fail("of an unbatched input")
    (kh, kw), (dh, dw) = ints(args[1], 2), ints(args[2], 2)
    (ph, pw), (sh, sw) = ints(args[3], 2), ints(args[4], 2)
    c, h, w = shape[1], shape[2] + 2 * ph, shape[3] + 2 * pw
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    if ph or pw:
        x = b.emit("Pad", [x, b.ints([0, 0, ph, pw, 0, 0, ph, pw])], rank=4)
    taps = []
    for i in range(kh):
        for j in range(kw):
            start = [i * dh, j * dw]
            end = [start[0] + sh * (oh - 1) + 1, start[1] + sw * (ow - 1) + 1]
            tap = b.emit("Slice", [x, b.ints(start), b.ints(end), b.ints([2, 3]),
                                   b.ints([sh, sw])], rank=4)
            taps.append(b.unsqueeze(tap, [2]))
    cols = b.emit("Concat", taps, rank=5, axis=2)  # (N, C, kh*kw, oh, ow)
    return b.emit("Reshape", [cols, b.ints([0, c * kh * kw, oh * ow])])


def unfold(b, inputs, args, kwargs, opset):
    """Tensor.unfold(dim, size, step): one strided Slice per window offset, stacked on a new
    last dim."""
    x, shape = inputs[0], tuple(args[0].shape)
    if not shape:
        return b.unsqueeze(x, [0])
    d = norm_dim(int(args[1]), len(shape))
    size, step = int(args[2]), int(args[3])
    count = (shape[d] - size) // step + 1
    taps = [b.unsqueeze(_slice(b, x, d, j, j + step * (count - 1) + 1, step), [len(shape)])
            for j in range(size)]
    return taps[0] if size == 1 else b.emit("Concat", taps, axis=len(shape))


def _bag_members(b, offsets, n: int, bags: int, dtype):
    """The (bags, n) 0/1 matrix of which index belongs to which bag, from offsets known at
    run time: an index's bag is the number of offsets at or before it, minus one (the last
    bag runs to the end)."""
    offs = b.cast(offsets, np.int64)
    if offs.rank != 1:
        offs = b.emit("Reshape", [offs, b.ints([-1])], dtype=I64, rank=1)
    offs = _slice(b, offs, 0, 0, bags)
    pos = b.const(np.arange(n, dtype=np.int64)[:, None])
    after = b.emit("GreaterOrEqual", [pos, b.unsqueeze(offs, [0])], dtype=np.bool_, rank=2)
    bag = b.reduce("ReduceSum", b.cast(after, np.int64), [1], False, I64, 1)
    bag = b.emit("Sub", [bag, b.ints([1])], dtype=I64, rank=1)
    rows = b.const(np.arange(bags, dtype=np.int64)[:, None])
    return b.cast(b.emit("Equal", [rows, b.unsqueeze(bag, [0])], dtype=np.bool_, rank=2),
                  dtype)


def embedding_bag(b, inputs, args, kwargs, opset):
    """_embedding_bag(weight, indices, offsets, scale_grad, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx): the rows gathered, then summed, averaged or maxed per
    bag. Bags of one size (a 2-D input) are a Reshape and a Reduce, for any number of bags;
    other bags a (bags, indices) 0/1 matrix product (constant when the offsets are)."""
    weight, idx = inputs[0], b.emit("Reshape", [inputs[1], b.ints([-1])], dtype=I64, rank=1)
    offsets, mode = inputs[2], int(args[4])
    psw = inputs[6] if len(inputs) > 6 else None
    last, pad = bool(_arg(args, 7, False)), int(_arg(args, 8, -1))
    dtype = b.out_dtype
    n = int(np.prod(args[1].shape))
    bags = int(np.prod(args[2].shape)) - (1 if last else 0)
    rows = b.emit("Gather", [weight, idx], rank=2, axis=0)
    if psw is not None:
        rows = b.emit("Mul", [rows, b.unsqueeze(b.cast(psw, dtype), [1])], rank=2)
    mask = None
    if pad >= 0:  # rows of padding_idx count for nothing (and not in a mean's count)
        keep = b.emit("Not", [b.emit("Equal", [idx, b.operand(pad, I64)], dtype=np.bool_)],
                      dtype=np.bool_, rank=1)
        mask = b.cast(keep, dtype)
        rows = b.emit("Mul", [rows, b.unsqueeze(mask, [1])], rank=2)
    size = 0
    if b.is_const(offsets):
        off = np.asarray(offsets.array, np.int64).reshape(-1)[:bags]
        ends = np.append(off[1:], n)  # the last bag runs to the end (as the kernel's)
        size = int(ends[0] - off[0]) if bags else 0
        if not (size > 0 and np.array_equal(off, np.arange(bags) * size) and bags * size == n):
            size = 0
    if size:
        grouped = b.emit("Reshape", [rows, b.ints([-1, size, int(args[0].shape[1])])], rank=3)
        if mode == 2:
            if pad >= 0:
                b.fail("with mode='max' and padding_idx")
            return [b.reduce("ReduceMax", grouped, [1], False, dtype, 2), None, None, None]
        total = b.reduce("ReduceSum", grouped, [1], False, dtype, 2)
        if mode == 0:
            return [total, None, None, None]
        if mask is None:
            return [b.emit("Div", [total, b.operand(size, dtype)]), None, None, None]
        count = b.reduce("ReduceSum", b.emit("Reshape", [mask, b.ints([-1, size])], rank=2),
                         [1], True, dtype, 2)
        count = b.emit("Max", [count, b.operand(1, dtype)], rank=2)
        return [b.emit("Div", [total, count]), None, None, None]
    if mode == 2:
        b.fail("with mode='max' and bags of different sizes")
    if b.is_const(offsets):
        member = np.zeros((bags, n), np.float64)
        for k in range(bags):
            member[k, off[k]:ends[k]] = 1.0
        members = b.const(member, dtype)
    else:
        members = _bag_members(b, offsets, n, bags, dtype)
    total = b.emit("MatMul", [members, rows])
    if mode == 0:
        return [total, None, None, None]
    counted = b.unsqueeze(mask, [1]) if mask is not None else b.const(np.ones((n, 1)), dtype)
    count = b.emit("MatMul", [members, counted], rank=2)
    count = b.emit("Max", [count, b.operand(1, dtype)], rank=2)
    return [b.emit("Div", [total, count]), None, None, None]


def adaptive_max_pool(b, inputs, args, kwargs, opset):
    """adaptive_max_pool2d(self, output_size): MaxPool with kernel = stride = input /
    output when the output size divides the input size (GlobalMaxPool for 1x1); the indices
    are not mapped."""
    shape = tuple(args[0].shape)
    out = [int(s) for s in args[1]]
    spatial = shape[-2:]
    if any(o <= 0 or s % o for s, o in zip(spatial, out)):
        b.fail("when the output size does not divide the input size")
    kernel = [s // o for s, o in zip(spatial, out)]

    def build(x):
        if out == [1, 1]:
            return b.emit("GlobalMaxPool", [x])
        return b.emit("MaxPool", [x], kernel_shape=kernel, strides=kernel)

    return [batched(b, inputs[0], len(shape) == 3, build), None]


def transpose_inplace(b, inputs, args, kwargs, opset):
    """transpose_(self, dim0, dim1): the same Transpose as transpose."""
    rank = args[0].dim()
    perm = list(range(rank))
    if rank >= 2:
        d0, d1 = norm_dim(int(args[1]), rank), norm_dim(int(args[2]), rank)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    if perm == list(range(rank)):
        return inputs[0]
    return b.emit("Transpose", [inputs[0]], perm=perm)


def _gates(w: np.ndarray, order: list[int]) -> np.ndarray:
    """The gate blocks of a stacked RNN weight (gates along dim 0) in `order`."""
    return np.concatenate([np.split(w, len(order), 0)[g] for g in order], 0)


def _gate_blocks(b, v, rows: int, order: list[int], dtype, rank: int):
    """Stacked RNN weight or bias `v` (gates along dim 0, `rows` in all) with its gate
    blocks in `order` and a leading direction axis: reordered here for a constant, by Split
    and Concat nodes for a value the model computes (weights given as inputs)."""
    if b.is_const(v):
        return b.const(_gates(v.array, order)[None], dtype)
    v = b.cast(v, dtype)
    if order != list(range(len(order))):
        parts = b.emit("Split", [v, b.ints([rows // len(order)] * len(order))],
                       n_out=len(order), axis=0, rank=rank)
        v = b.emit("Concat", [parts[g] for g in order], axis=0, rank=rank)
    return b.unsqueeze(v, [0])


def _rnn_operands(b, inputs, args, order: list[int], has_bias: bool, states: int) -> list:
    """W, R, B, sequence_lens (absent) and the initial states of an ONNX RNN/GRU/LSTM node
    from a layer op's x, w_ih, w_hh, b_ih, b_hh and `states` state arguments, gate blocks in
    `order`. A state that is constant zeros is left out (ONNX's default), so the batch stays
    dynamic; so is an absent bias."""
    w_ih, w_hh, b_ih, b_hh = inputs[1:5]
    dtype = b.out_dtype
    rows = int(args[1].shape[0])
    bias = None
    if has_bias and b.is_const(b_ih) and b.is_const(b_hh):
        bias = b.const(np.concatenate([_gates(b_ih.array, order),
                                       _gates(b_hh.array, order)])[None], dtype)
    elif has_bias:
        bias = b.emit("Concat", [_gate_blocks(b, v, rows, order, dtype, 1)
                                 for v in (b_ih, b_hh)], axis=1, rank=2)
    out = [_gate_blocks(b, w_ih, rows, order, dtype, 2),
           _gate_blocks(b, w_hh, rows, order, dtype, 2), bias, None]
    for v in inputs[5:5 + states]:
        out.append(None if b.is_const(v) and not np.any(v.array)
                   else b.unsqueeze(b.cast(v, dtype), [0]))
    return out


def lstm_layer(b, inputs, args, kwargs, opset):
    """mkldnn_rnn_layer (one LSTM layer and direction, time-major): an ONNX LSTM node.
    PyTorch stacks the gates as (input, forget, cell, output); ONNX as (input, output,
    forget, cell). The workspace output is not mapped."""
    reverse, hidden, has_bias = bool(args[7]), int(args[10]), bool(args[12])
    operands = _rnn_operands(b, inputs, args, [0, 3, 1, 2], has_bias, 2)
    y, yh, yc = b.emit("LSTM", [inputs[0]] + operands, n_out=3, rank=4,
                       hidden_size=hidden, direction="reverse" if reverse else "forward")
    return [b.squeeze(y, [1]), b.squeeze(yh, [0]), b.squeeze(yc, [0]), None]


def _recurrent_layer(b, inputs, args, op_type: str, order: list[int], **attrs):
    """One GRU or RNN layer and direction (`_gru_layer`/`_rnn_layer`: x, w_ih, w_hh, b_ih,
    b_hh, hx, reverse, has_biases, ...), time-major, as an ONNX `op_type` node whose gate
    blocks are PyTorch's in `order`. The workspace output is not mapped."""
    reverse, has_bias = bool(args[6]), bool(args[7])
    operands = _rnn_operands(b, inputs, args, order, has_bias, 1)
    y, yh = b.emit(op_type, [inputs[0]] + operands, n_out=2, rank=4,
                   hidden_size=int(args[2].shape[1]),
                   direction="reverse" if reverse else "forward", **attrs)
    return [b.squeeze(y, [1]), b.squeeze(yh, [0]), None]


def gru_layer(b, inputs, args, kwargs, opset):
    """_gru_layer: an ONNX GRU node. PyTorch stacks the gates as (reset, update, new), ONNX
    as (update, reset, hidden); PyTorch applies the reset gate after the recurrent product
    (ONNX's linear_before_reset=1)."""
    return _recurrent_layer(b, inputs, args, "GRU", [1, 0, 2], linear_before_reset=1)


def rnn_layer(b, inputs, args, kwargs, opset):
    """_rnn_layer: an ONNX RNN node with PyTorch's nonlinearity (Tanh or Relu)."""
    act = "Relu" if bool(args[8]) else "Tanh"
    return _recurrent_layer(b, inputs, args, "RNN", [0], activations=[act])


def attention(b, inputs, args, kwargs, opset):
    """_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal,
    attn_mask, scale): softmax(q k^T * scale + mask) v with MatMul and Softmax (a causal
    mask is a constant of the fixed sequence lengths); the log-sum-exp output is not
    mapped. Rows whose every key is masked give NaN here (PyTorch: zeros)."""
    q, k, v = inputs[:3]
    is_causal, mask = bool(_arg(args, 4, False)), _arg(inputs, 5, None)
    scale = _arg(args, 6, None)
    qs, ks = tuple(args[0].shape), tuple(args[1].shape)
    if ks[-3] != qs[-3]:
        b.fail("with grouped-query attention")
    dtype = b.out_dtype
    rank = len(qs)
    factor = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    s = b.emit("MatMul", [q, b.emit("Transpose", [k], perm=perm)])
    s = b.emit("Mul", [s, b.operand(factor, dtype)])
    if is_causal:
        if any(not isinstance(n, int) for n in (qs[-2], ks[-2])):
            # a dynamic length: key j is kept for query i where j <= i, from two Ranges
            def positions(n):
                end = b.squeeze(b.ints([n]), [0])
                return b.op("Range", [b.const(np.asarray(0, np.int64)), end,
                                      b.const(np.asarray(1, np.int64))], I64, 1,
                            name="causal_positions")
            rows = b.unsqueeze(positions(qs[-2]), [1])
            keep = b.emit("GreaterOrEqual", [rows, b.unsqueeze(positions(ks[-2]), [0])],
                          dtype=np.bool_, rank=2)
        else:
            keep = b.const(np.tril(np.ones((qs[-2], ks[-2]), bool)))
        s = b.emit("Where", [keep, s, b.operand(-np.inf, dtype)])
    if mask is not None:
        s = b.emit("Add", [s, b.cast(mask, dtype)])
    p = b.emit("Softmax", [s], axis=-1)
    return [b.emit("MatMul", [p, v]), None]


# ---------------------------------------------------------------------- indexing, statistics,
# losses and pointwise math
#
# Written from ONNX operators whose results agree with the ops' kernels to float32 rounding;
# a constant of a size (an index list, a diagonal's positions) makes the dynamic-axes check
# refuse those dims, never a silently wrong graph.


def _unsqueeze(b, v, axes: list[int]):
    """Unsqueeze of a graph value, or of a constant at export time."""
    if b.is_const(v):
        arr = np.asarray(v.array)
        for a in sorted(norm_dim(a, arr.ndim + len(axes)) for a in axes):
            arr = np.expand_dims(arr, a)
        return b.const(arr)
    return b.unsqueeze(v, axes)


def gather(b, inputs, args, kwargs, opset):
    """gather(self, dim, index, sparse_grad=False): GatherElements."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:  # a scalar's only element, in the index's shape (a scalar or [0])
        return b.emit("Expand", [x, b.shape(b.cast(inputs[2], np.int64))])
    return b.emit("GatherElements", [x, b.cast(inputs[2], np.int64)],
                  axis=norm_dim(int(args[1]), rank))


def index_select(b, inputs, args, kwargs, opset):
    """index_select(self, dim, index): Gather on the index as 1-D (a 0-d index keeps its
    dim, of size 1)."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        b.fail("of a 0-d input")
    idx = b.cast(inputs[2], np.int64)
    if args[2].dim() != 1:
        idx = b.emit("Reshape", [idx, b.ints([-1])], dtype=I64, rank=1)
    return b.emit("Gather", [x, idx], axis=norm_dim(int(args[1]), rank))


def _reduce_dims(args: tuple, i: int, rank: int) -> list[int]:
    """The dims of argument `i` (None or empty: every dim), as non-negative ints."""
    dims = _arg(args, i, None)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    return sorted({norm_dim(int(d), rank) for d in ints(dims, 1)})


def variance(sqrt: bool) -> Callable:
    """var/std.correction(self, dim=None, correction=None, keepdim=False): the mean of the
    squared deviations times n / (n - correction) (n read from the example: the count of
    a reduced dim is a constant, refused by the dynamic-axes check if it is dynamic)."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        x, rank = b.cast(inputs[0], dtype), args[0].dim()
        correction = _arg(args, 2, None)
        correction = 1.0 if correction is None else float(correction)
        keep = bool(_arg(args, 3, False))
        if rank == 0:  # through a 1-element vector
            dims, n = [0], 1
            x = _unsqueeze(b, x, [0])
        else:
            dims = _reduce_dims(args, 1, rank)
            n = int(np.prod([args[0].shape[d] for d in dims]))
        r = max(rank, 1)
        mean = b.reduce("ReduceMean", x, dims, True, dtype, r)
        dev = b.emit("Sub", [x, mean], rank=r)
        sq = b.reduce("ReduceMean", b.emit("Mul", [dev, dev], rank=r), dims, keep or rank == 0,
                      dtype, b.out_rank if rank else 1)
        den = n - correction
        factor = n / den if den > 0 else math.inf
        out = b.emit("Mul", [sq, b.operand(factor, dtype)], rank=b.out_rank if rank else 1)
        if rank == 0:
            out = b.squeeze(out, [0])
        return b.emit("Sqrt", [out]) if sqrt else out

    mapping.__doc__ = f"{'std' if sqrt else 'var'} as ReduceMean of squared deviations."
    return mapping


def vector_norm(b, inputs, args, kwargs, opset):
    """linalg_vector_norm(self, ord=2, dim=None, keepdim=False, dtype=None): ReduceL2 / L1,
    ReduceMax of |x| for inf (ReduceMin for -inf), the count of non-zeros for 0, and
    (sum |x|^p)^(1/p) otherwise."""
    dtype = b.out_dtype
    x, rank = b.cast(inputs[0], dtype), args[0].dim()
    p = float(_arg(args, 1, 2))
    keep = bool(_arg(args, 3, False))
    if rank == 0:
        x, dims, keep_r, out_rank = _unsqueeze(b, x, [0]), [0], False, 0
    else:
        dims, keep_r, out_rank = _reduce_dims(args, 2, rank), keep, b.out_rank
    if p == 2:
        return b.reduce("ReduceL2", x, dims, keep_r, dtype, out_rank)
    if p == 1:
        return b.reduce("ReduceL1", x, dims, keep_r, dtype, out_rank)
    a = b.emit("Abs", [x], rank=max(rank, 1))
    if math.isinf(p):
        return b.reduce("ReduceMax" if p > 0 else "ReduceMin", a, dims, keep_r, dtype,
                        out_rank)
    if p == 0:
        nz = b.cast(_truthy(b, a), dtype)
        return b.reduce("ReduceSum", nz, dims, keep_r, dtype, out_rank)
    s = b.reduce("ReduceSum", b.emit("Pow", [a, b.operand(p, dtype)], rank=max(rank, 1)),
                 dims, keep_r, dtype, out_rank)
    return b.emit("Pow", [s, b.operand(1.0 / p, dtype)])


def atan2(b, inputs, args, kwargs, opset):
    """atan2(self, other): Atan(y / x), moved by pi into the left half-plane; sign(y) pi/2
    on the vertical axis (x = 0)."""
    dtype = b.out_dtype
    y, x = b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)
    zero = b.operand(0, dtype)
    t = b.emit("Atan", [b.emit("Div", [y, x])])
    left = b.emit("Less", [x, zero], dtype=np.bool_)
    up = b.emit("GreaterOrEqual", [y, zero], dtype=np.bool_)
    shift = b.emit("Where", [up, b.operand(math.pi, dtype), b.operand(-math.pi, dtype)])
    t = b.emit("Where", [left, b.emit("Add", [t, shift]), t])
    axis = b.emit("Mul", [b.emit("Sign", [y]), b.operand(math.pi / 2, dtype)])
    return b.emit("Where", [b.emit("Equal", [x, zero], dtype=np.bool_), axis, t])


def log1p(b, inputs, args, kwargs, opset):
    """log1p(self): Log(1 + x)."""
    dtype = b.out_dtype
    return b.emit("Log", [b.emit("Add", [b.operand(inputs[0], dtype), b.operand(1, dtype)])])


def trunc(b, inputs, args, kwargs, opset):
    """trunc(self): sign(x) floor(|x|) for floats (ONNX has no Trunc); integers as they are."""
    x = b.cast(inputs[0], b.out_dtype)
    if b.out_dtype.kind != "f":
        return x
    return b.emit("Mul", [b.emit("Sign", [x]), b.emit("Floor", [b.emit("Abs", [x])])])


def frac(b, inputs, args, kwargs, opset):
    """frac(self): x - trunc(x)."""
    x = b.cast(inputs[0], b.out_dtype)
    return b.emit("Sub", [x, trunc(b, inputs, args, kwargs, opset)])


def lerp(b, inputs, args, kwargs, opset):
    """lerp(self, end, weight): the kernel's two formulas, a + w (e - a) for |w| < 0.5 and
    e - (e - a)(1 - w) otherwise (each exact at its end)."""
    dtype = b.out_dtype
    a, e, w = (b.operand(v, dtype) for v in inputs[:3])
    d = b.emit("Sub", [e, a])
    near_a = b.emit("Add", [a, b.emit("Mul", [w, d])])
    near_e = b.emit("Sub", [e, b.emit("Mul", [d, b.emit("Sub", [b.operand(1, dtype), w])])])
    if not isinstance(args[2], (int, float)):
        small = b.emit("Less", [b.emit("Abs", [w]), b.operand(0.5, dtype)], dtype=np.bool_)
        return b.emit("Where", [small, near_a, near_e])
    return near_a if abs(args[2]) < 0.5 else near_e


def addc(op_type: str) -> Callable:
    """addcmul/addcdiv(self, tensor1, tensor2, value=1): self + value * (t1 op t2)."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        a, t1, t2 = (b.operand(v, dtype) for v in inputs[:3])
        value = _arg(args, 3, 1)
        prod = b.emit(op_type, [t1, t2])
        if value != 1:
            prod = b.emit("Mul", [b.operand(value, dtype), prod])
        return b.emit("Add", [a, prod])

    mapping.__doc__ = f"Add of a scaled {op_type}."
    return mapping


def nan_to_num(b, inputs, args, kwargs, opset):
    """nan_to_num(self, nan=0, posinf=None, neginf=None): Where on IsNaN and IsInf (the
    dtype's largest and smallest finite values by default); integers unchanged."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    if dtype.kind != "f":
        return x
    info = np.finfo(dtype)
    nan, pos, neg = (_arg(args, i, None) for i in (1, 2, 3))
    values = [0.0 if nan is None else nan, info.max if pos is None else pos,
              info.min if neg is None else neg]
    out = b.emit("Where", [b.emit("IsNaN", [x], dtype=np.bool_), b.operand(values[0], dtype),
                           x])
    out = b.emit("Where", [b.emit("IsInf", [x], dtype=np.bool_, detect_negative=0),
                           b.operand(values[1], dtype), out])
    return b.emit("Where", [b.emit("IsInf", [x], dtype=np.bool_, detect_positive=0),
                            b.operand(values[2], dtype), out])


def logit(b, inputs, args, kwargs, opset):
    """logit(self, eps=None): log(x / (1 - x)), x clamped to [eps, 1 - eps] first."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    eps = _arg(args, 1, None)
    if eps is not None:
        x = b.emit("Clip", [x, b.operand(eps, dtype), b.operand(1 - eps, dtype)])
    return b.emit("Log", [b.emit("Div", [x, b.emit("Sub", [b.operand(1, dtype), x])])])


def _reduced(b, loss, reduction: int, rank: int):
    """A loss reduced as PyTorch's enum says: 0 none, 1 mean, 2 sum."""
    if reduction == 0 or rank == 0:
        return loss
    return b.reduce("ReduceMean" if reduction == 1 else "ReduceSum", loss, None, False,
                    b.out_dtype, 0)


def mse_loss(b, inputs, args, kwargs, opset):
    """mse_loss(self, target, reduction=mean): (x - t)^2, reduced."""
    dtype = b.out_dtype
    d = b.emit("Sub", [b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)])
    rank = max(args[0].dim(), args[1].dim() if hasattr(args[1], "dim") else 0)
    return _reduced(b, b.emit("Mul", [d, d], rank=rank), int(_arg(args, 2, 1)), rank)


def bce_with_logits(b, inputs, args, kwargs, opset):
    """binary_cross_entropy_with_logits(self, target, weight, pos_weight, reduction): the
    kernel's (1 - t) x + lw softplus(-x), softplus(-x) = max(-x, 0) + log(1 + exp(-|x|))."""
    dtype = b.out_dtype
    x, t = b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)
    weight, pos_weight = _arg(inputs, 2, None), _arg(inputs, 3, None)
    one = b.operand(1, dtype)
    rank = args[0].dim()
    nx = b.emit("Neg", [x], rank=rank)
    sp = b.emit("Add", [b.emit("Relu", [nx], rank=rank), b.emit("Log", [b.emit(
        "Add", [one, b.emit("Exp", [b.emit("Neg", [b.emit("Abs", [x], rank=rank)],
                                           rank=rank)], rank=rank)], rank=rank)],
        rank=rank)], rank=rank)
    if pos_weight is not None:
        pw = b.operand(pos_weight, dtype)
        lw = b.emit("Add", [one, b.emit("Mul", [b.emit("Sub", [pw, one]), t])])
        sp = b.emit("Mul", [lw, sp], rank=rank)
    loss = b.emit("Add", [b.emit("Mul", [b.emit("Sub", [one, t]), x], rank=rank), sp],
                  rank=rank)
    if weight is not None:
        loss = b.emit("Mul", [loss, b.operand(weight, dtype)], rank=rank)
    return _reduced(b, loss, int(_arg(args, 4, 1)), rank)


def nll_loss(b, inputs, args, kwargs, opset):
    """nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    NegativeLogLikelihoodLoss (an input without a batch dim gets one); the total weight is
    not mapped."""
    dtype = b.out_dtype
    x, t = b.cast(inputs[0], dtype), b.cast(inputs[1], np.int64)
    weight = _arg(inputs, 2, None)
    reduction, ignore = int(args[3]), int(args[4])
    unbatched = args[0].dim() == 1
    if unbatched:
        x, t = _unsqueeze(b, x, [0]), _unsqueeze(b, t, [0])
    names = {0: "none", 1: "mean", 2: "sum"}
    ins = [x, t] + ([b.cast(weight, dtype)] if weight is not None else [])
    rank = 0 if reduction else args[1].dim() + int(unbatched)
    out = b.emit("NegativeLogLikelihoodLoss", ins, rank=rank, reduction=names[reduction],
                 ignore_index=ignore)
    if unbatched and reduction == 0:
        out = b.squeeze(out, [0])
    return [out, None]


def safe_softmax(b, inputs, args, kwargs, opset):
    """_safe_softmax(self, dim, dtype=None): Softmax, with 0 for a row whose every entry is
    -inf (Softmax gives NaN there)."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    if args[0].dim() == 0:
        return softmax("Softmax")(b, inputs, args, kwargs, opset)
    axis = norm_dim(int(args[1]), args[0].dim())
    p = b.emit("Softmax", [x], axis=axis)
    masked = b.cast(b.emit("IsInf", [x], dtype=np.bool_, detect_positive=0), dtype)
    every = b.reduce("ReduceMin", masked, [axis], True, dtype, b.out_rank)
    return b.emit("Where", [b.cast(every, np.bool_), b.operand(0, dtype), p])


def pixel_shuffle(b, inputs, args, kwargs, opset):
    """pixel_shuffle(self, upscale_factor): DepthToSpace in CRD order (a 3-D input gets a
    batch of one)."""
    shape = tuple(args[0].shape)
    if len(shape) not in (3, 4):
        b.fail(f"of a {len(shape)}-D input")
    r = int(args[1])
    return batched(b, b.cast(inputs[0], b.out_dtype), len(shape) == 3,
                   lambda x: b.emit("DepthToSpace", [x], blocksize=r, mode="CRD"))


def diagonal(b, inputs, args, kwargs, opset):
    """diagonal(self, offset=0, dim1=0, dim2=1): the two dims moved last and flattened, and
    the diagonal's positions gathered (a constant of their sizes)."""
    shape = tuple(args[0].shape)
    rank = len(shape)
    offset = int(_arg(args, 1, 0))
    d1, d2 = norm_dim(int(_arg(args, 2, 0)), rank), norm_dim(int(_arg(args, 3, 1)), rank)
    n1, n2 = shape[d1], shape[d2]
    rows = np.arange(max(0, -offset), n1)
    rows = rows[rows + offset < n2]
    flat_idx = (rows * n2 + rows + offset).astype(np.int64)
    keep = [i for i in range(rank) if i not in (d1, d2)]
    x = inputs[0]
    if keep + [d1, d2] != list(range(rank)):
        x = b.emit("Transpose", [x], rank=rank, perm=keep + [d1, d2])
    x = b.emit("Reshape", [x, b.ints([0] * len(keep) + [n1 * n2])], rank=len(keep) + 1)
    return b.emit("Gather", [x, b.const(flat_idx)], axis=len(keep))


def cdist(b, inputs, args, kwargs, opset):
    """_cdist_forward(x1, x2, p, compute_mode): the p-norm of every row difference,
    (..., P, 1, M) - (..., 1, R, M) reduced over M."""
    dtype = b.out_dtype
    x1, x2 = b.cast(inputs[0], dtype), b.cast(inputs[1], dtype)
    rank = args[0].dim()
    diff = b.emit("Sub", [_unsqueeze(b, x1, [rank - 1]), _unsqueeze(b, x2, [rank - 2])],
                  rank=rank + 1)
    p = float(args[2])
    if p == 2:
        return b.reduce("ReduceL2", diff, [rank], False, dtype, rank)
    a = b.emit("Abs", [diff], rank=rank + 1)
    if p == 1:
        return b.reduce("ReduceSum", a, [rank], False, dtype, rank)
    if math.isinf(p):
        return b.reduce("ReduceMax", a, [rank], False, dtype, rank)
    if p == 0:
        return b.reduce("ReduceSum", b.cast(_truthy(b, a), dtype), [rank], False, dtype, rank)
    s = b.reduce("ReduceSum", b.emit("Pow", [a, b.operand(p, dtype)], rank=rank + 1), [rank],
                 False, dtype, rank)
    return b.emit("Pow", [s, b.operand(1.0 / p, dtype)])


def fill(b, inputs, args, kwargs, opset):
    """fill_ / zero_ / copy_(self, value_or_src): the value (or source) broadcast to self's
    shape (read at run time)."""
    dtype = b.out_dtype
    value = 0 if b.origin == "zero_" else inputs[1]
    return b.emit("Expand", [b.operand(value, dtype), b.shape(inputs[0])])


# ---------------------------------------------------------------------- sizes of dynamic axes
#
# With dynamic axes, the exporter hands a mapping the sizes the model read from a dynamic
# dim as symbolic sizes (`SymInt`s): `builder.ints` and `builder.operand` compute them at run
# time, so an entry keeps them (never `int()` of them) to keep the dim dynamic.


def _is_size(v: Any) -> bool:
    """Whether `v` is a plain int (not a symbolic size)."""
    return isinstance(v, (int, np.integer))


def _size_or_int(v: Any) -> Any:
    """A symbolic size as it is, anything else as an int."""
    return int(v) if _is_size(v) or not hasattr(v, "poly") else v


def slice_dynamic(b, inputs, args, kwargs, opset):
    """slice.Tensor(self, dim=0, start=None, end=None, step=1): one Slice. A negative or
    symbolic bound is written as it is (Slice counts a negative one from the end at run
    time), and an end at or past the example's size is open (INT64_MAX), so the slice still
    reaches the end of a dynamic dim."""
    dim, start, end, step = (list(args[1:5]) + [0, None, None, 1][len(args) - 1:])[:4]
    d = norm_dim(int(dim), args[0].dim())
    size = args[0].shape[d]
    start = 0 if start is None else _size_or_int(start)
    if end is None or (_is_size(end) and _is_size(size) and end >= size):
        end = INT64_MAX
    else:
        end = _size_or_int(end)
    if _is_size(start) and start == 0 and _is_size(end) and end == INT64_MAX and step == 1:
        return inputs[0]
    return b.emit("Slice", [inputs[0], b.ints([start]), b.ints([end]), b.ints([d]),
                            b.ints([int(step)])])


def expand_dynamic(b, inputs, args, kwargs, opset):
    """expand(self, sizes): Expand; sizes the input already has are written as 1 (ONNX
    broadcasts them) and symbolic ones computed at run time, so dynamic dims stay dynamic."""
    shape = tuple(args[0].shape)
    sizes = [_size_or_int(s) for s in args[1]]
    lead = len(sizes) - len(shape)
    spec = [1 if (i >= lead and (_is_size(s) and s == -1 or s is shape[i - lead]
                                 or (_is_size(s) and _is_size(shape[i - lead])
                                     and s == shape[i - lead])))
            else s for i, s in enumerate(sizes)]
    return b.emit("Expand", [inputs[0], b.ints(spec)])


def select_dynamic(b, inputs, args, kwargs, opset):
    """select.int(self, dim, index): Gather of the index as given (a negative one counts
    from the end at run time, as `x[-1]` does on a dynamic dim)."""
    rank = args[0].dim()
    if rank == 0:
        b.fail("of a 0-d tensor")
    d = norm_dim(int(args[1]), rank)
    index = args[2]
    if _is_size(index):
        return b.emit("Gather", [inputs[0], b.const(np.asarray(int(index), np.int64))],
                      axis=d)
    return b.emit("Gather", [inputs[0], b.operand(index, I64)], axis=d)


# ---------------------------------------------------------------------- advanced indexing,
# scatter, batched products and logarithms


def index_tensor(b, inputs, args, kwargs, opset):
    """index.Tensor(self, indices): `x[idx]` with index tensors (None for a full dim). One
    integer index is a Gather; several (broadcast together) a GatherND on the indexed dims
    moved first, the broadcast dims then placed as PyTorch places them (where the indices
    were when they are adjacent, else first); a boolean mask alone in front is NonZero and
    GatherND."""
    x, rank = inputs[0], args[0].dim()
    # (An index given as an array, not a tensor, is a constant of the graph.)
    idx = [b.const(i) if isinstance(i, np.ndarray) else i for i in inputs[1]]
    raw = list(args[1])
    pos = [k for k, t in enumerate(raw) if t is not None]
    if not pos:
        return x
    masks = [k for k in pos if b.dtype_of(idx[k]) == np.bool_]
    if masks:
        if pos != [0] or masks != [0]:
            b.fail("with a boolean mask among other indices")
        k = raw[0].dim()
        where = b.emit("NonZero", [idx[0]], dtype=I64, rank=2)
        return b.emit("GatherND", [x, b.emit("Transpose", [where], dtype=I64, rank=2,
                                             perm=[1, 0])])
    if len(pos) == 1:
        return b.emit("Gather", [x, b.cast(idx[pos[0]], np.int64)], axis=pos[0])
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    rest = [d for d in range(rank) if d not in pos]
    moved = x
    if pos + rest != list(range(rank)):
        moved = b.emit("Transpose", [x], rank=rank, perm=pos + rest)
    # the indices broadcast to one shape, stacked on a new last axis
    shapes = [tuple(int(n) for n in raw[k].shape) for k in pos]
    bshape = np.broadcast_shapes(*shapes)
    nb = len(bshape)
    parts = []
    for k, shape in zip(pos, shapes):
        t = b.cast(idx[k], np.int64)
        if shape != bshape:  # (indices of one shape, dynamic ones too, need no Expand)
            t = b.emit("Expand", [t, b.ints(list(bshape))], dtype=I64, rank=nb)
        parts.append(_unsqueeze(b, t, [nb]))
    stacked = b.emit("Concat", parts, dtype=I64, rank=nb + 1, axis=nb)
    out = b.emit("GatherND", [moved, stacked], rank=nb + len(rest))
    lead = pos[0]
    if adjacent and lead > 0:  # the broadcast dims go where the indices were
        perm = list(range(nb, nb + lead)) + list(range(nb)) + list(range(nb + lead,
                                                                         nb + len(rest)))
        out = b.emit("Transpose", [out], perm=perm)
    return out


def scatter(b, inputs, args, kwargs, opset):
    """scatter.src / scatter.value / scatter_add / scatter.reduce / scatter_reduce.two:
    ScatterElements (a reduction from opset 16, max and min from 18); the source is cut to
    the index's shape (the elements PyTorch reads), a value expanded to it. The in-place
    forms (`scatter_add_`) export as their functional ones."""
    base, dot, overload = b.origin.partition(".")
    name = base.rstrip("_") + dot + overload
    x, rank = inputs[0], args[0].dim()
    d = norm_dim(int(args[1]), max(rank, 1))
    index = b.cast(inputs[2], np.int64)
    dtype = b.out_dtype
    reduction = "none"
    if name == "scatter_add" or (name.startswith("scatter.") and _arg(args, 4, False) is True):
        reduction = "add"
    elif name == "scatter.reduce":
        reduction = {"add": "add", "multiply": "mul"}[args[4]]
    elif name == "scatter_reduce.two":
        if not bool(_arg(args, 5, True)):
            b.fail("with include_self=False")
        if args[4] not in ("sum", "prod", "amax", "amin"):
            b.fail(f"with reduce='{args[4]}'")
        reduction = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}[args[4]]
    if reduction != "none" and opset < (18 if reduction in ("max", "min") else 16):
        b.fail(f"with a reduction ({reduction}) before opset "
               f"{18 if reduction in ('max', 'min') else 16}")
    ishape = tuple(args[2].shape)
    src = args[3]
    if hasattr(src, "shape"):
        upd = b.cast(inputs[3], dtype)
        if tuple(src.shape) != ishape:
            n = len(ishape)
            upd = b.emit("Slice", [upd, b.ints([0] * n), b.ints(list(ishape)),
                                   b.ints(list(range(n)))])
    else:
        upd = b.emit("Expand", [b.operand(src, dtype), b.shape(index)], rank=len(ishape))
    if rank == 0:
        b.fail("of a 0-d tensor")
    attrs = {"reduction": reduction} if reduction != "none" else {}
    return b.emit("ScatterElements", [b.cast(x, dtype), index, upd], axis=d, **attrs)


def batched_addmm(summed: bool) -> Callable:
    """baddbmm / addbmm(self, b1, b2, beta=1, alpha=1): beta self + alpha (b1 @ b2) (the
    products summed over the batch for addbmm); beta = 0 ignores self (NaN included)."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        prod = b.emit("MatMul", [b.cast(inputs[1], dtype), b.cast(inputs[2], dtype)],
                      rank=3)
        if summed:
            prod = b.reduce("ReduceSum", prod, [0], False, dtype, 2)
        beta, alpha = _arg(args, 3, 1), _arg(args, 4, 1)
        if alpha != 1:
            prod = b.emit("Mul", [prod, b.operand(alpha, dtype)])
        if beta == 0:
            return b.emit("Expand", [prod, b.shape(b.cast(inputs[0], dtype))]) \
                if args[0].dim() > prod.rank else prod
        base = b.cast(inputs[0], dtype)
        if beta != 1:
            base = b.emit("Mul", [base, b.operand(beta, dtype)])
        return b.emit("Add", [base, prod])

    mapping.__doc__ = f"{'addbmm' if summed else 'baddbmm'} as MatMul and Add."
    return mapping


def log_base(base: float) -> Callable:
    """log2 / log10: Log divided by log(base)."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        return b.emit("Div", [b.emit("Log", [b.cast(inputs[0], dtype)]),
                              b.operand(math.log(base), dtype)])

    mapping.__doc__ = f"Log over log({base:g})."
    return mapping


def expm1(b, inputs, args, kwargs, opset):
    """expm1(self): Exp(x) - 1."""
    dtype = b.out_dtype
    return b.emit("Sub", [b.emit("Exp", [b.cast(inputs[0], dtype)]), b.operand(1, dtype)])


def split_dynamic(b, inputs, args, kwargs, opset):
    """split.Tensor / split_with_sizes / unsafe_chunk (self, size(s), dim=0): one Split. A
    chunk size or sizes computed from a dynamic axis (`x.chunk(2)` of a dynamic dim) are
    computed at run time; the number of pieces is the example's, as in PyTorch's export."""
    rank = args[0].dim()
    d = norm_dim(int(_arg(args, 2, 0)), rank)
    sizes = args[1]
    if not isinstance(sizes, (list, tuple)):  # one chunk size: full chunks, then the rest
        total, step = args[0].shape[d], _size_or_int(sizes)
        count = max(1, -(-int(total) // max(int(step), 1)))
        sizes = [step] * (count - 1) + [total - step * (count - 1)]
    sizes = [_size_or_int(z) for z in sizes]
    outs = b.emit("Split", [inputs[0], b.ints(sizes)], n_out=len(sizes), axis=d)
    return outs if isinstance(outs, list) else [outs]
from ._onnx_mappings_more import *  # noqa: E402, F403
