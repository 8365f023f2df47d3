"""Building blocks of the registry's `onnx` entries.

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

INT64_MAX = int(np.iinfo(np.int64).max)


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
    shape_in = tuple(args[0].shape)
    target = [int(s) for s in args[1]]
    known = [s for s in target if s != -1]
    if -1 in target:
        rest = int(np.prod(shape_in)) // max(1, int(np.prod(known)))
        target = [rest if s == -1 else s for s in target]
    if tuple(target) == shape_in:
        return x
    if len(target) == 2 and len(shape_in) >= 2 and target[0] == shape_in[0]:
        return b.emit("Flatten", [x], axis=1)
    spec: list[int] = []
    k = 0
    while k < min(len(target), len(shape_in)) and target[k] == shape_in[k] and target[k] != 0:
        spec.append(0)
        k += 1
    spec.extend(target[k:])
    if k < len(spec):
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
