"""ONNX mappings of call_function and call_method nodes (functions, operators, methods).

Each handler takes the exporter context and the node's arguments with PyTorch's parameter
names, so call_function (`fusegrad.flatten(x, 1)`) and call_method (`x.flatten(1)`) nodes
share one handler. Values are `Value`s (graph tensors), `Const`s or Python objects.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ._graph import Const, UnsupportedOperatorError, Value

INT64_MAX = int(np.iinfo(np.int64).max)

OPERATOR_NAMES = {
    operator.add: "add", operator.iadd: "add", operator.sub: "sub", operator.isub: "sub",
    operator.mul: "mul", operator.imul: "mul", operator.truediv: "div",
    operator.itruediv: "div", operator.matmul: "matmul", operator.neg: "neg",
    operator.pow: "pow", operator.getitem: "getitem", getattr: "getattr",
    operator.eq: "eq", operator.ne: "ne", operator.lt: "lt", operator.le: "le",
    operator.gt: "gt", operator.ge: "ge", operator.pos: "positive",
}


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (Value, Const))


def _rank(v: Value | Const) -> int | None:
    return v.array.ndim if isinstance(v, Const) else v.rank


def _dtype(v: Value | Const) -> np.dtype:
    return v.array.dtype if isinstance(v, Const) else v.dtype


def _operand(ctx: Any, v: Any, dtype: Any) -> Value | Const:
    """A tensor operand of `dtype` from a tensor or Python number."""
    if _is_tensor(v):
        return ctx.b.cast(v, dtype)
    return Const(np.asarray(v, dtype=dtype))


def _binary(ctx: Any, op_type: str, a: Any, b: Any) -> Value:
    dtype = ctx.out_dtype
    return ctx.emit(op_type, [_operand(ctx, a, dtype), _operand(ctx, b, dtype)])


def _compare(ctx: Any, op_type: str, a: Any, b: Any, negate: bool = False) -> Value:
    tensors = [_dtype(v) for v in (a, b) if _is_tensor(v)]
    floats = [d for d in tensors if d.kind == "f"]
    if floats:
        dtype = floats[0]
    elif any(isinstance(v, float) for v in (a, b)):
        dtype = np.dtype(np.float32)
    else:
        dtype = tensors[0]
    out = ctx.emit(op_type, [_operand(ctx, a, dtype), _operand(ctx, b, dtype)])
    return ctx.emit("Not", [out]) if negate else out


def _unary(op_type: str):
    def handler(ctx: Any, input: Any, *args: Any, **kwargs: Any) -> Value:
        return ctx.emit(op_type, [ctx.b.cast(input, ctx.out_dtype)])

    handler.__doc__ = f"Elementwise {op_type}."
    return handler


def add(ctx, input, other, alpha=1):
    """input + alpha * other."""
    if alpha != 1:
        other = _binary(ctx, "Mul", other, alpha)
    return _binary(ctx, "Add", input, other)


def sub(ctx, input, other, alpha=1):
    """input - alpha * other."""
    if alpha != 1:
        other = _binary(ctx, "Mul", other, alpha)
    return _binary(ctx, "Sub", input, other)


def rsub(ctx, input, other, alpha=1):
    """other - alpha * input."""
    return sub(ctx, other, input, alpha)


def mul(ctx, input, other):
    """input * other."""
    return _binary(ctx, "Mul", input, other)


def div(ctx, input, other, rounding_mode=None):
    """input / other (true division)."""
    if rounding_mode is not None:
        raise UnsupportedOperatorError(f"div with rounding_mode={rounding_mode!r} has no "
                                       "ONNX mapping")
    return _binary(ctx, "Div", input, other)


def pow(ctx, input, exponent):  # noqa: A001
    """input ** exponent."""
    return _binary(ctx, "Pow", input, exponent)


def matmul(ctx, input, other):
    """Matrix product (MatMul)."""
    return _binary(ctx, "MatMul", input, other)


def neg(ctx, input):
    """-input."""
    return ctx.emit("Neg", [ctx.b.cast(input, ctx.out_dtype)])


def positive(ctx, input):
    """+input."""
    return input


def clamp(ctx, input, min=None, max=None):  # noqa: A002
    """Clip(input, min, max)."""
    dtype = ctx.out_dtype
    lo = None if min is None else _operand(ctx, min, dtype)
    hi = None if max is None else _operand(ctx, max, dtype)
    return ctx.emit("Clip", [ctx.b.cast(input, dtype), lo, hi])


def relu6(ctx, input, inplace=False):
    """Clip(input, 0, 6)."""
    return clamp(ctx, input, 0.0, 6.0)


def hardtanh(ctx, input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clip(input, min_val, max_val)."""
    return clamp(ctx, input, min_val, max_val)


def leaky_relu(ctx, input, negative_slope=0.01, inplace=False):
    """LeakyRelu."""
    return ctx.emit("LeakyRelu", [input], alpha=float(negative_slope))


def elu(ctx, input, alpha=1.0, inplace=False):
    """Elu."""
    return ctx.emit("Elu", [input], alpha=float(alpha))


def silu(ctx, input, inplace=False):
    """input * sigmoid(input) (decomposed)."""
    return ctx.emit("Mul", [input, ctx.emit("Sigmoid", [input])])


def gelu(ctx, input, approximate="none"):
    """Gelu from opset 20; before, its erf or tanh formula."""
    if ctx.b.opset >= 20:
        return ctx.emit("Gelu", [input], approximate=approximate)
    dtype = _dtype(input)
    c = lambda x: Const(np.asarray(x, dtype=dtype))
    if approximate == "tanh":
        cube = ctx.emit("Mul", [ctx.emit("Mul", [input, input]), input])
        inner = ctx.emit("Add", [input, ctx.emit("Mul", [cube, c(0.044715)])])
        t = ctx.emit("Tanh", [ctx.emit("Mul", [inner, c(math.sqrt(2.0 / math.pi))])])
    else:
        t = ctx.emit("Erf", [ctx.emit("Mul", [input, c(1.0 / math.sqrt(2.0))])])
    half_x = ctx.emit("Mul", [input, c(0.5)])
    return ctx.emit("Mul", [half_x, ctx.emit("Add", [t, c(1.0)])])


def softplus(ctx, input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (decomposed)."""
    dtype = _dtype(input)
    scaled = ctx.emit("Mul", [input, Const(np.asarray(beta, dtype))])
    soft = ctx.emit("Div", [ctx.emit("Softplus", [scaled]), Const(np.asarray(beta, dtype))])
    big = ctx.emit("Greater", [scaled, Const(np.asarray(threshold, dtype))], dtype=np.bool_)
    return ctx.emit("Where", [big, input, soft])


def _softmax_axis(input, dim):
    if dim is None:
        rank = _rank(input)
        return 0 if rank in (0, 1, 3) else 1
    return int(dim)


def softmax(ctx, input, dim=None, _stacklevel=3, dtype=None):
    """Softmax over `dim` (opset 13 semantics: one axis)."""
    x = ctx.b.cast(input, ctx.out_dtype)
    return ctx.emit("Softmax", [x], axis=_softmax_axis(input, dim))


def log_softmax(ctx, input, dim=None, _stacklevel=3, dtype=None):
    """LogSoftmax over `dim`."""
    x = ctx.b.cast(input, ctx.out_dtype)
    return ctx.emit("LogSoftmax", [x], axis=_softmax_axis(input, dim))


def dropout(ctx, input, p=0.5, training=False, inplace=False):
    """Identity (export is in eval mode)."""
    return input


def identity(ctx, input, *args, **kwargs):
    """The input itself."""
    return input


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def flatten(ctx, input, start_dim=0, end_dim=-1):
    """Flatten(axis=1) for flatten(x, 1); otherwise Reshape to the merged shape."""
    rank = _rank(input)
    s, e = _norm_dim(start_dim, rank), _norm_dim(end_dim, rank)
    if rank == 0:
        return ctx.b.unsqueeze(input, [0])
    if s == 1 and e == rank - 1:
        return ctx.emit("Flatten", [input], axis=1)
    if s == 0 and e == rank - 1:
        return ctx.emit("Reshape", [input, ctx.b.ints([-1])])
    parts = []
    if s > 0:
        parts.append(ctx.b.shape(input, 0, s))
    parts.append(-1)
    if e < rank - 1:
        parts.append(ctx.b.shape(input, e + 1, rank))
    return ctx.emit("Reshape", [input, ctx.b.shape_tensor(parts)])


def _dims(shape: tuple) -> list:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        return list(shape[0])
    if len(shape) == 1 and isinstance(shape[0], Value) and shape[0].rank == 1:
        return [shape[0]]
    return list(shape)


def reshape(ctx, input, *shape):
    """Reshape (view, reshape)."""
    return ctx.emit("Reshape", [input, ctx.b.shape_tensor(_dims(shape))])


def permute(ctx, input, *dims):
    """Transpose with perm `dims`."""
    rank = _rank(input)
    return ctx.emit("Transpose", [input], perm=[_norm_dim(d, rank) for d in _dims(dims)])


def transpose(ctx, input, dim0, dim1):
    """Swap two axes (Transpose)."""
    rank = _rank(input)
    perm = list(range(rank))
    a, b = _norm_dim(dim0, rank), _norm_dim(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.emit("Transpose", [input], perm=perm)


def t(ctx, input):
    """Transpose of a matrix (a 0-D or 1-D tensor is returned as is)."""
    return input if _rank(input) < 2 else transpose(ctx, input, 0, 1)


def unsqueeze(ctx, input, dim):
    """Unsqueeze at `dim`."""
    return ctx.b.unsqueeze(input, [_norm_dim(dim, _rank(input) + 1)])


def squeeze(ctx, input, dim=None):
    """Squeeze `dim` (or every size-1 axis)."""
    if dim is None:
        return ctx.emit("Squeeze", [input])
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return ctx.emit("Squeeze", [input, ctx.b.ints(dims)])


def cat(ctx, tensors, dim=0):
    """Concat along `dim`."""
    return ctx.emit("Concat", [ctx.b.cast(v, ctx.out_dtype) for v in tensors], axis=int(dim))


def stack(ctx, tensors, dim=0):
    """Unsqueeze every input at `dim`, then Concat."""
    rank = _rank(tensors[0]) + 1
    d = _norm_dim(dim, rank)
    parts = [ctx.b.unsqueeze(ctx.b.cast(v, ctx.out_dtype), [d])
             if isinstance(v, Value) else Const(np.expand_dims(v.array, d)) for v in tensors]
    return ctx.emit("Concat", parts, axis=d)


def _reduce(op_type: str):
    def handler(ctx, input, dim=None, keepdim=False, *, dtype=None):
        x = ctx.b.cast(input, ctx.out_dtype)
        if dim is None:
            return ctx.b.reduce(op_type, x, None, False, ctx.out_dtype, ctx.out_rank)
        axes = list(dim) if isinstance(dim, (list, tuple)) else [dim]
        return ctx.b.reduce(op_type, x, axes, keepdim, ctx.out_dtype, ctx.out_rank)

    handler.__doc__ = f"{op_type} over `dim`."
    return handler


def linear(ctx, input, weight, bias=None):
    """Gemm(transB=1) for a 2-D input, otherwise MatMul with the transposed weight + Add."""
    if _rank(input) == 2 and _rank(weight) == 2:
        return ctx.emit("Gemm", [input, weight, bias], transB=1)
    if isinstance(weight, Const) and ctx.b.fold:
        wt = Const(np.ascontiguousarray(weight.array.T))
    else:
        wt = transpose(ctx, weight, 0, 1) if _rank(weight) == 2 else weight
    out = ctx.emit("MatMul", [input, wt])
    return out if bias is None else ctx.emit("Add", [out, bias])


def size(ctx, input, dim=None):
    """input.size(): Shape, or one dimension of it (a 0-d int64 value)."""
    if dim is None:
        return ctx.b.shape(input)
    d = _norm_dim(dim, _rank(input))
    s = ctx.b.shape(input, d, d + 1)
    return ctx.b.op("Squeeze", [s, ctx.b.ints([0])], np.int64, 0, is_shape=True)


def getattr_(ctx, obj, name):
    """Attribute reads: `.shape` becomes Shape; ndim and dtype are known statically."""
    if name == "shape":
        return size(ctx, obj)
    if name == "ndim":
        return _rank(obj)
    if name == "T":
        return permute(ctx, obj, *reversed(range(_rank(obj))))
    raise UnsupportedOperatorError(f"getattr(tensor, {name!r}) has no ONNX mapping")


def getitem(ctx, obj, index):
    """Indexing: Python containers, shape values (Gather/Slice) and tensor basic indexing
    with ints, slices, None and Ellipsis (Slice, Squeeze, Unsqueeze)."""
    if isinstance(obj, (list, tuple)):
        return obj[index]
    if isinstance(obj, Value) and obj.is_shape:
        if isinstance(index, int):
            return ctx.b.op("Gather", [obj, Const(np.asarray(index, np.int64))], np.int64, 0,
                            is_shape=True, axis=0)
        if isinstance(index, slice) and index.step in (None, 1):
            start = 0 if index.start is None else index.start
            stop = INT64_MAX if index.stop is None else index.stop
            return ctx.b.op("Slice", [obj, ctx.b.ints([start]), ctx.b.ints([stop])],
                            np.int64, 1, is_shape=True)
    return _tensor_index(ctx, obj, index)


def _tensor_index(ctx, x, index):
    items = list(index) if isinstance(index, tuple) else [index]
    rank = _rank(x)
    if not all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in items):
        raise UnsupportedOperatorError("advanced indexing (getitem with tensors or lists) "
                                       "has no ONNX mapping")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    expanded = []
    for i in items:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (rank - used))
        else:
            expanded.append(i)
    starts, ends, axes, steps, squeeze_axes, none_pos = [], [], [], [], [], []
    axis, out_pos = 0, 0
    for i in expanded:
        if i is None:
            none_pos.append(out_pos)
            out_pos += 1
            continue
        if isinstance(i, int):
            starts.append(i)
            ends.append(INT64_MAX if i == -1 else i + 1)
            axes.append(axis)
            steps.append(1)
            squeeze_axes.append(axis)
        elif i != slice(None):
            if not all(v is None or isinstance(v, int) for v in (i.start, i.stop, i.step)):
                raise UnsupportedOperatorError("slicing with non-constant bounds has no "
                                               "ONNX mapping")
            step = 1 if i.step is None else i.step
            starts.append(0 if i.start is None else i.start)
            ends.append(INT64_MAX if i.stop is None else i.stop)
            axes.append(axis)
            steps.append(step)
            out_pos += 1
        else:
            out_pos += 1
        axis += 1
    out = x
    if axes:
        out = ctx.b.op("Slice", [out, ctx.b.ints(starts), ctx.b.ints(ends), ctx.b.ints(axes),
                                 ctx.b.ints(steps)], _dtype(x), rank)
    if squeeze_axes:
        out = ctx.b.squeeze(out, squeeze_axes)
    if none_pos:
        out = ctx.b.unsqueeze(out, none_pos)
    return out


def to(ctx, input, *args, **kwargs):
    """Cast to the result's dtype (device moves are no-ops)."""
    return ctx.b.cast(input, ctx.out_dtype)


def _cast_to(ctx, input, *args, **kwargs):
    return ctx.b.cast(input, ctx.out_dtype)


def conv2d(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Conv (functional form)."""
    from .modules import conv_node

    return conv_node(ctx, input, weight, bias, stride, padding, dilation, groups)


conv1d = conv2d


def max_pool2d(ctx, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """MaxPool (functional form)."""
    from .modules import max_pool_node

    return max_pool_node(ctx, input, kernel_size, stride, padding, dilation, ceil_mode,
                         return_indices, _rank(input) - 2)


def avg_pool2d(ctx, input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """AveragePool (functional form)."""
    from .modules import avg_pool_node

    return avg_pool_node(ctx, input, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override, _rank(input) - 2)


def adaptive_avg_pool2d(ctx, input, output_size):
    """GlobalAveragePool, or AveragePool when the sizes divide (functional form)."""
    from .modules import adaptive_avg_pool_node

    return adaptive_avg_pool_node(ctx, input, output_size)


def batch_norm(ctx, input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """BatchNormalization (functional form, running statistics only)."""
    from .modules import batch_norm_node

    if training or running_mean is None:
        raise UnsupportedOperatorError("batch_norm with batch statistics (training=True) has "
                                       "no ONNX mapping")
    return batch_norm_node(ctx, input, running_mean, running_var, weight, bias, eps)


def layer_norm(ctx, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """LayerNormalization (functional form)."""
    from .modules import layer_norm_node

    return layer_norm_node(ctx, input, normalized_shape, weight, bias, eps)


def hardsigmoid(ctx, input, inplace=False):
    """HardSigmoid(alpha=1/6, beta=1/2)."""
    return ctx.emit("HardSigmoid", [input], alpha=1.0 / 6.0, beta=0.5)


def hardswish(ctx, input, inplace=False):
    """HardSwish (opset 14); x * HardSigmoid(x) before."""
    if ctx.b.opset >= 14:
        return ctx.emit("HardSwish", [input])
    return ctx.emit("Mul", [input, hardsigmoid(ctx, input)])


HANDLERS: dict[str, Any] = {
    "add": add, "sub": sub, "rsub": rsub, "mul": mul, "div": div, "true_divide": div,
    "pow": pow, "matmul": matmul, "mm": matmul, "bmm": matmul, "neg": neg,
    "negative": neg, "positive": positive,
    "eq": lambda ctx, a, b: _compare(ctx, "Equal", a, b),
    "ne": lambda ctx, a, b: _compare(ctx, "Equal", a, b, negate=True),
    "lt": lambda ctx, a, b: _compare(ctx, "Less", a, b),
    "le": lambda ctx, a, b: _compare(ctx, "LessOrEqual", a, b),
    "gt": lambda ctx, a, b: _compare(ctx, "Greater", a, b),
    "ge": lambda ctx, a, b: _compare(ctx, "GreaterOrEqual", a, b),
    "maximum": lambda ctx, a, b: _binary(ctx, "Max", a, b),
    "minimum": lambda ctx, a, b: _binary(ctx, "Min", a, b),
    "relu": _unary("Relu"), "relu_": _unary("Relu"), "sigmoid": _unary("Sigmoid"),
    "tanh": _unary("Tanh"), "exp": _unary("Exp"), "log": _unary("Log"),
    "sqrt": _unary("Sqrt"), "abs": _unary("Abs"), "sin": _unary("Sin"), "cos": _unary("Cos"),
    "erf": _unary("Erf"), "floor": _unary("Floor"), "ceil": _unary("Ceil"),
    "reciprocal": _unary("Reciprocal"), "sign": _unary("Sign"), "round": _unary("Round"),
    "rsqrt": lambda ctx, x: ctx.emit("Reciprocal", [ctx.emit("Sqrt", [x])]),
    "clamp": clamp, "clip": clamp, "relu6": relu6, "hardtanh": hardtanh,
    "leaky_relu": leaky_relu, "elu": elu, "silu": silu, "gelu": gelu, "softplus": softplus,
    "softmax": softmax, "log_softmax": log_softmax, "dropout": dropout,
    "contiguous": identity, "clone": identity, "detach": identity,
    "flatten": flatten, "reshape": reshape, "view": reshape, "permute": permute,
    "transpose": transpose, "t": t, "unsqueeze": unsqueeze, "squeeze": squeeze,
    "cat": cat, "concat": cat, "concatenate": cat, "stack": stack,
    "mean": _reduce("ReduceMean"), "sum": _reduce("ReduceSum"), "amax": _reduce("ReduceMax"),
    "amin": _reduce("ReduceMin"), "linear": linear, "size": size, "getattr": getattr_,
    "getitem": getitem, "to": to, "float": _cast_to, "double": _cast_to, "half": _cast_to,
    "long": _cast_to, "int": _cast_to, "type_as": _cast_to,
    "conv1d": conv1d, "conv2d": conv2d, "max_pool2d": max_pool2d, "max_pool1d": max_pool2d,
    "avg_pool2d": avg_pool2d, "avg_pool1d": avg_pool2d,
    "adaptive_avg_pool2d": adaptive_avg_pool2d, "adaptive_avg_pool1d": adaptive_avg_pool2d,
    "batch_norm": batch_norm, "layer_norm": layer_norm, "hardsigmoid": hardsigmoid,
    "hardswish": hardswish,
}
