"""ONNX mappings of leaf modules (call_module nodes).

Parameters and buffers become initializers named after their state_dict keys
(`layer1.0.conv1.weight`); the exporter hands them to these mappings as `Const`s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import functions as F
from ._graph import Const, UnsupportedOperatorError


def _tuple(v: Any, n: int) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)] * n


def conv_node(ctx, x, weight, bias, stride, padding, dilation, groups, transposed=False,
              output_padding=0):
    """Conv / ConvTranspose with PyTorch's symmetric (or 'same'/'valid') padding."""
    n = F._rank(weight) - 2
    kernel = list(weight.array.shape[2:]) if isinstance(weight, Const) else None
    dil = _tuple(dilation, n)
    if kernel is None and padding == "same":
        raise UnsupportedOperatorError("conv with padding='same' and a computed weight has no "
                                       "ONNX mapping")
    if padding == "valid":
        pads = [0] * (2 * n)
    elif padding == "same":
        total = [d * (k - 1) for d, k in zip(dil, kernel)]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        p = _tuple(padding, n)
        pads = p + p
    attrs = dict(strides=_tuple(stride, n), pads=pads, dilations=dil, group=int(groups),
                 kernel_shape=kernel)
    if transposed:
        return ctx.emit("ConvTranspose", [x, weight, bias],
                        output_padding=_tuple(output_padding, n), **attrs)
    return ctx.emit("Conv", [x, weight, bias], **attrs)


def max_pool_node(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                  n):
    """MaxPool."""
    if return_indices:
        raise UnsupportedOperatorError("MaxPool with return_indices=True has no ONNX mapping")
    k = _tuple(kernel_size, n)
    s = k if stride is None or stride == [] else _tuple(stride, n)
    p = _tuple(padding, n)
    return ctx.emit("MaxPool", [x], kernel_shape=k, strides=s, pads=p + p,
                    dilations=_tuple(dilation, n), ceil_mode=int(bool(ceil_mode)))


def avg_pool_node(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override, n):
    """AveragePool."""
    if divisor_override is not None:
        raise UnsupportedOperatorError("AvgPool with divisor_override has no ONNX mapping")
    k = _tuple(kernel_size, n)
    s = k if stride is None or stride == [] else _tuple(stride, n)
    p = _tuple(padding, n)
    return ctx.emit("AveragePool", [x], kernel_shape=k, strides=s, pads=p + p,
                    ceil_mode=int(bool(ceil_mode)),
                    count_include_pad=int(bool(count_include_pad)))


def adaptive_avg_pool_node(ctx, x, output_size):
    """GlobalAveragePool for output size 1; AveragePool when the input size divides."""
    n = F._rank(x) - 2
    out = _tuple(output_size, n) if not isinstance(output_size, (list, tuple)) else \
        list(output_size)
    if all(o == 1 for o in out):
        return ctx.emit("GlobalAveragePool", [x])
    in_shape = ctx.input_shape(0)
    if in_shape is None:
        raise UnsupportedOperatorError("AdaptiveAvgPool with an unknown input size")
    spatial = list(in_shape[2:])
    out = [s if o is None else o for o, s in zip(out, spatial)]
    if any(s % o for s, o in zip(spatial, out)):
        raise UnsupportedOperatorError(
            f"AdaptiveAvgPool from {spatial} to {out} (sizes that do not divide) has no "
            "ONNX mapping")
    k = [s // o for s, o in zip(spatial, out)]
    return ctx.emit("AveragePool", [x], kernel_shape=k, strides=k)


def _param(ctx, path: str, m: Any, name: str) -> Const | None:
    return ctx.param(f"{path}.{name}" if path else name, getattr(m, name, None))


def _conv(ctx, m, path, x):
    if getattr(m, "padding_mode", "zeros") != "zeros":
        raise UnsupportedOperatorError(f"{type(m).__name__} with padding_mode="
                                       f"{m.padding_mode!r} has no ONNX mapping")
    return conv_node(ctx, x, _param(ctx, path, m, "weight"), _param(ctx, path, m, "bias"),
                     m.stride, m.padding, m.dilation, m.groups, m.transposed,
                     m.output_padding)


def _linear(ctx, m, path, x):
    return F.linear(ctx, x, _param(ctx, path, m, "weight"), _param(ctx, path, m, "bias"))


def batch_norm_node(ctx, x, mean, var, scale, bias, eps):
    """BatchNormalization with running statistics (missing affine terms are 1 and 0)."""
    dtype = F._dtype(x)
    c = mean.array.shape[0] if isinstance(mean, Const) else None
    if (scale is None or bias is None) and c is None:
        raise UnsupportedOperatorError("batch_norm without weight and computed statistics "
                                       "has no ONNX mapping")
    scale = scale if scale is not None else Const(np.ones(c, dtype))
    bias = bias if bias is not None else Const(np.zeros(c, dtype))
    return ctx.emit("BatchNormalization", [x, scale, bias, mean, var], epsilon=float(eps))


def _batch_norm(ctx, m, path, x):
    if m.training and m.track_running_stats or getattr(m, "running_mean", None) is None:
        raise UnsupportedOperatorError(f"{type(m).__name__} without running statistics "
                                       "(batch statistics) has no ONNX mapping")
    return batch_norm_node(ctx, x, _param(ctx, path, m, "running_mean"),
                           _param(ctx, path, m, "running_var"), _param(ctx, path, m, "weight"),
                           _param(ctx, path, m, "bias"), m.eps)


def layer_norm_node(ctx, x, normalized_shape, scale, bias, eps):
    """LayerNormalization from opset 17; before, its mean/variance formula."""
    dtype = F._dtype(x)
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (normalized_shape,)
    shape = tuple(int(s) for s in normalized_shape)
    scale = scale if scale is not None else Const(np.ones(shape, dtype))
    axis = -len(shape)
    if ctx.b.opset >= 17:
        # An omitted bias crashes onnxruntime 1.32 when it loads the model: pass zeros.
        bias = bias if bias is not None else Const(np.zeros(shape, dtype))
        return ctx.emit("LayerNormalization", [x, scale, bias], axis=axis, epsilon=float(eps))
    axes = list(range(axis, 0))
    rank = F._rank(x)
    mean = ctx.b.reduce("ReduceMean", x, axes, True, dtype, rank)
    centered = ctx.emit("Sub", [x, mean])
    var = ctx.b.reduce("ReduceMean", ctx.emit("Mul", [centered, centered]), axes, True,
                       dtype, rank)
    std = ctx.emit("Sqrt", [ctx.emit("Add", [var, Const(np.asarray(eps, dtype))])])
    out = ctx.emit("Mul", [ctx.emit("Div", [centered, std]), scale])
    return out if bias is None else ctx.emit("Add", [out, bias])


def _layer_norm(ctx, m, path, x):
    return layer_norm_node(ctx, x, m.normalized_shape, _param(ctx, path, m, "weight"),
                           _param(ctx, path, m, "bias"), m.eps)


def _max_pool(ctx, m, path, x):
    return max_pool_node(ctx, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                         m.return_indices, F._rank(x) - 2)


def _avg_pool(ctx, m, path, x):
    return avg_pool_node(ctx, x, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                         m.count_include_pad, m.divisor_override, F._rank(x) - 2)


def _flatten(ctx, m, path, x):
    return F.flatten(ctx, x, m.start_dim, m.end_dim)


def _unflatten(ctx, m, path, x):
    rank = F._rank(x)
    d = F._norm_dim(m.dim, rank)
    parts = []
    if d > 0:
        parts.append(ctx.b.shape(x, 0, d))
    parts.extend(int(s) for s in m.unflattened_size)
    if d < rank - 1:
        parts.append(ctx.b.shape(x, d + 1, rank))
    return ctx.emit("Reshape", [x, ctx.b.shape_tensor(parts)])


def _embedding(ctx, m, path, x):
    return ctx.emit("Gather", [_param(ctx, path, m, "weight"), x], axis=0)


def _softmax(op_name: str):
    def handler(ctx, m, path, x):
        return getattr(F, op_name)(ctx, x, m.dim)

    return handler


MODULE_HANDLERS: dict[str, Any] = {
    "Conv1d": _conv, "Conv2d": _conv, "ConvTranspose1d": _conv, "ConvTranspose2d": _conv,
    "Linear": _linear, "BatchNorm1d": _batch_norm, "BatchNorm2d": _batch_norm,
    "LayerNorm": _layer_norm, "MaxPool1d": _max_pool, "MaxPool2d": _max_pool,
    "AvgPool1d": _avg_pool, "AvgPool2d": _avg_pool,
    "AdaptiveAvgPool1d": lambda ctx, m, p, x: adaptive_avg_pool_node(ctx, x, m.output_size),
    "AdaptiveAvgPool2d": lambda ctx, m, p, x: adaptive_avg_pool_node(ctx, x, m.output_size),
    "Flatten": _flatten, "Unflatten": _unflatten, "Embedding": _embedding,
    "ReLU": lambda ctx, m, p, x: ctx.emit("Relu", [x]),
    "ReLU6": lambda ctx, m, p, x: F.relu6(ctx, x),
    "LeakyReLU": lambda ctx, m, p, x: F.leaky_relu(ctx, x, m.negative_slope),
    "Hardtanh": lambda ctx, m, p, x: F.hardtanh(ctx, x, m.min_val, m.max_val),
    "ELU": lambda ctx, m, p, x: F.elu(ctx, x, m.alpha),
    "Sigmoid": lambda ctx, m, p, x: ctx.emit("Sigmoid", [x]),
    "Tanh": lambda ctx, m, p, x: ctx.emit("Tanh", [x]),
    "GELU": lambda ctx, m, p, x: F.gelu(ctx, x, m.approximate),
    "SiLU": lambda ctx, m, p, x: F.silu(ctx, x),
    "Softplus": lambda ctx, m, p, x: F.softplus(ctx, x, m.beta, m.threshold),
    "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
    "Dropout": lambda ctx, m, p, x: x, "Identity": lambda ctx, m, p, x: x,
}
