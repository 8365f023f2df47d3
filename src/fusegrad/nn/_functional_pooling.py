"""Pooling-family and sampling functions of `torch.nn.functional` written over other
functions: the `*_with_indices` spellings, power-average pooling (`lp_pool1d/2d`), max
unpooling, the distance-function triplet loss, and the small helpers PyTorch keeps in the
namespace (`assert_int_or_pair`, `boolean_dispatch`); and `affine_grid` and `grid_sample`,
PyTorch's argument checks and warnings before their registry ops (`ops/grid_sampler.py`).
"""

from __future__ import annotations

import numbers
import warnings

from .._autocast import composite
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warning_stacklevel
from ..ops import grid_sampler as GS
from ..ops import pooling as PL
from ..ops import unpool as UP


def _F():
    from . import functional

    return functional


def multi_head_attention_forward(*args, **kwargs):
    """MultiheadAttention's forward over loose weights (see `nn.MultiheadAttention`)."""
    from .modules.attention import multi_head_attention_forward as forward

    return forward(*args, **kwargs)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-D convolution of time-batch-channel input (T, B, C_in) with weight
    (K, C_in, C_out): (T', B, C_out). (`torch.conv_tbc` is this function.)"""
    from .functional import conv1d

    # ATen's checks, in its order and words
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if bias.shape[0] != weight.shape[2]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output "
                           "channels).")
    pad = int(pad)
    shape = [input.shape[0] + 2 * pad - weight.shape[0] + 1, input.shape[1], weight.shape[2]]
    if shape[0] < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {shape[0]}: "
                           f"{shape}")
    if input.dtype != weight.dtype and shape[0] > 0:  # (its taps' products check it)
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{input.dtype.legacy} and {weight.dtype.legacy}")
    if shape[0] == 0 or pad < 0:
        # (a negative pad crops the time axis; conv1d takes no negative padding)
        from .. import _creation

        if shape[0] == 0:  # (each input still gets its (zero) gradient)
            linked = (input.sum() + weight.sum()).to(input.dtype) + bias.to(input.dtype)
            return _creation.zeros(shape, dtype=input.dtype) + linked * 0
        input = input[-pad:input.shape[0] + pad]
        pad = 0
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias.to(input.dtype),
                 padding=pad)
    return out.permute(2, 0, 1).contiguous()  # (PyTorch's result is contiguous)


def relu_(input: Tensor) -> Tensor:
    """In-place ReLU."""
    return input.relu_()


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distances between each pair of rows (upper triangle, row-major)."""
    import fusegrad

    return fusegrad.pdist(input, p)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """1-D max pooling and the positions of the maxima."""
    return _F().max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """2-D max pooling and the positions of the maxima."""
    return _F().max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """3-D max pooling and the positions of the maxima."""
    return _F().max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """1-D adaptive max pooling and the positions of the maxima."""
    return _F().adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """2-D adaptive max pooling and the positions of the maxima."""
    return _F().adaptive_max_pool2d(input, output_size, True)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, spatial: int) -> Tensor:
    F = _F()
    max_pool, avg_pool = ((F.max_pool1d, F.avg_pool1d) if spatial == 1
                          else (F.max_pool2d, F.avg_pool2d))
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    if spatial == 1:
        if not isinstance(kernel_size, numbers.Integral):
            # PyTorch scales by the kernel size itself, which a product takes only as a number
            raise TypeError(f"mul(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(kernel_size).__name__}")
        area = kernel_size
    else:
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, numbers.Integral) \
            else kernel_size
        area = kh * kw
    return (out.sign() * F.relu(out.abs())).mul(area).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x ** p) ** (1 / p), over the last dimension."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x ** p) ** (1 / p), over the last two dimensions."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x ** p) ** (1 / p), over the last three dimensions, through
    the pooling ops PyTorch composes (`AvgPool3DBackward0`; an integer input's average
    truncated as PyTorch's; max pooling of |x| for an infinite norm)."""
    k = _tuple(kernel_size, 3)
    st = _tuple(stride, 3) if stride is not None else k
    inf = isinstance(norm_type, (int, float)) and abs(norm_type) == float("inf")
    # the checks of the pooling PyTorch calls (max for an infinite norm), before our own
    PL.pool_shape(tuple(input.shape), k, st, [0] * 3, [1] * 3, ceil_mode,
                  "max" if inf else "avg")
    F = _F()
    if inf:
        if norm_type > 0:
            return F.max_pool3d(input.abs(), k, st, 0, 1, ceil_mode)
        return -F.max_pool3d(-input.abs(), k, st, 0, 1, ceil_mode)
    out = F.avg_pool3d(input.pow(norm_type), k, st, 0, ceil_mode)
    return (out.sign() * F.relu(out.abs())).mul(k[0] * k[1] * k[2]).pow(1.0 / norm_type)


def _tuple(x, n: int) -> list:
    if isinstance(x, numbers.Integral):
        return [int(x)] * n
    return [int(v) for v in x]


def _unpool_output_size(input, kernel_size, stride, padding, output_size) -> list:
    """The default output size, or `output_size` checked against it, as PyTorch."""
    default = [(input.shape[-len(kernel_size) + d] - 1) * stride[d] + kernel_size[d]
               - 2 * padding[d] for d in range(len(kernel_size))]
    if output_size is None:
        return default
    if len(output_size) == len(kernel_size) + 2:
        output_size = output_size[2:]
    if len(output_size) != len(kernel_size):
        raise ValueError(
            "output_size should be a sequence containing "
            f"{len(kernel_size)} or {len(kernel_size) + 2} elements, but it has a length of "
            f"'{len(output_size)}'")
    for d in range(len(kernel_size)):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f'{low} and {high})')
    return list(output_size)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Put each value back at its max-pooling position in a signal of zeros."""
    k = _tuple(kernel_size, 1)
    s = _tuple(stride, 1) if stride is not None else k
    size = list(_unpool_output_size(input, k, s, _tuple(padding, 1), output_size))
    out = call(UP.max_unpool2d, input.unsqueeze(-1), indices.unsqueeze(-1), size + [1])
    return out.squeeze(-1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Put each value back at its max-pooling position in a plane of zeros."""
    k = _tuple(kernel_size, 2)
    s = _tuple(stride, 2) if stride is not None else k
    size = _unpool_output_size(input, k, s, _tuple(padding, 2), output_size)
    return call(UP.max_unpool2d, input, indices, size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Put each value back at its max-pooling position in a volume of zeros."""
    k = _tuple(kernel_size, 3)
    s = _tuple(stride, 3) if stride is not None else k
    p = _tuple(padding, 3)
    size = _unpool_output_size(input, k, s, p, output_size)
    return call(UP.max_unpool3d, input, indices, list(size), s, p)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(0, margin + d(a, p) - d(a, n)) for a distance function d (pairwise by default)."""
    import fusegrad

    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    distance = distance_function if distance_function is not None else \
        fusegrad.pairwise_distance
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = fusegrad.minimum(dist_neg, distance(positive, negative))
    loss = fusegrad.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return fusegrad.sum(loss)
    return fusegrad.mean(loss) if reduction == "mean" else loss


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """cross_entropy of the logits input @ linear_weight^T (+ linear_bias); linear_weight is
    (C, *out_features, in_features) for a K-dimensional loss. `options` tune only how PyTorch
    chunks the work, never the result, and are accepted as given."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    batch, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions "
                           f"(in_features), got {input.shape[-1]} and "
                           f"{linear_weight.shape[-1]}, respectively")
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, (N, "
                           f"{in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batch, classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    flat_bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = _F().linear(input, linear_weight.reshape(-1, in_features), flat_bias)
    logits = logits.view(logits_shape)
    return _F().cross_entropy(logits, target, weight,
                              ignore_index=-100 if ignore_index is None else ignore_index,
                              reduction=reduction, label_smoothing=label_smoothing)


def _check_grouped_strides(t: Tensor) -> None:
    """PyTorch's grouped matmul reads its operands in 16-byte aligned rows."""
    size = t.element_size()
    if any(st * size % 16 for st, n in zip(t.stride()[:-1], t.shape[:-1]) if n > 1) or \
            (t.dim() and t.shape[-1] > 1 and t.stride()[-1] * size % 16 and
             t.stride()[-1] != 1):
        raise RuntimeError("strides should be multiple of 16 bytes")


def grouped_mm(mat_a: Tensor, mat_b: Tensor, *, offs: Tensor | None = None,
               bias: Tensor | None = None, out_dtype=None) -> Tensor:
    """Matrix products of groups: 2-D x 3-D with `offs` splitting A's rows, 3-D x 2-D with
    `offs` splitting B's columns, 2-D x 2-D with `offs` splitting the shared dimension (one
    product per group), or 3-D x 3-D batched; `offs` holds the groups' cumulative ends."""
    import fusegrad

    _check_grouped_strides(mat_a)
    _check_grouped_strides(mat_b)
    ends = [] if offs is None else [int(v) for v in offs.tolist()]
    starts = [0] + ends[:-1]
    a3, b3 = mat_a.dim() == 3, mat_b.dim() == 3
    if a3 and b3:
        out = mat_a.bmm(mat_b)
    elif not a3 and b3:
        out = fusegrad.cat([mat_a[s:e].matmul(mat_b[g]) for g, (s, e)
                            in enumerate(zip(starts, ends))], 0)
    elif a3 and not b3:
        out = fusegrad.cat([mat_a[g].matmul(mat_b[:, s:e]) for g, (s, e)
                            in enumerate(zip(starts, ends))], 1)
    else:
        out = fusegrad.stack([mat_a[:, s:e].matmul(mat_b[s:e]) for s, e in zip(starts, ends)])
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.to(out_dtype)


def assert_int_or_pair(arg, arg_name: str, message: str) -> None:
    """Raise AssertionError(message naming `arg_name`) unless `arg` is an int or a pair."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))


def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name, func_name):
    """A function that calls `if_true` or `if_false` by the boolean argument `arg_name`
    (keyword, or positional at `arg_index`, else `default`); it carries the one docstring."""
    def fn(*args, **kwargs):
        flag = default
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    if if_true.__doc__ is None and if_false.__doc__ is not None:
        if_true.__doc__ = if_false.__doc__
    elif if_false.__doc__ is None and if_true.__doc__ is not None:
        if_false.__doc__ = if_true.__doc__
    elif if_false.__doc__ is not None and if_true.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = fn.__qualname__ = func_name
    return fn


_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


# (PyTorch's kernel multiplies by `bmm`, which CPU autocast runs in the lower dtype)
@composite("lower")
def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) of the 2-D affine maps `theta` (N, 2, 3) for a 4-D
    `size`, or (N, D, H, W, 3) of the 3-D maps (N, 3, 4) for a 5-D one."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=warning_stacklevel(2))
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    given, size = size, list(size)
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {given}.")
    nd = len(size) - 2
    if theta.dim() != 3 or tuple(theta.shape[-2:]) != (nd, nd + 1):
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} "
                         f"for size {given}. Got {theta.shape}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      UserWarning, stacklevel=warning_stacklevel(2))
    return call(GS.affine_grid_generator, theta, [int(v) for v in size], bool(align_corners))


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample `input` (N, C, H, W) at the normalised positions `grid` (N, Ho, Wo, 2), in
    [-1, 1] as (x, y), by bilinear, nearest or bicubic interpolation; or a volume (N, C, D,
    H, W) at `grid` (N, Do, Ho, Wo, 3) as (x, y, z), trilinear ("bilinear") or nearest.
    Differentiable in both."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=warning_stacklevel(2))
        align_corners = False
    # the dtypes are checked by the op, after CPU autocast's casts (its policy: "fp32")
    GS.check(input, grid, mode, dtypes=False)
    op = GS.grid_sampler_2d if input.dim() == 4 else GS.grid_sampler_3d
    return call(op, input, grid, GS.INTERPOLATION.index(mode),
                GS.PADDING.index(padding_mode), bool(align_corners))


__all__ = [
    "relu_", "pdist", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "lp_pool1d",
    "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "triplet_margin_with_distance_loss",
    "assert_int_or_pair", "boolean_dispatch", "affine_grid", "grid_sample",
    "multi_head_attention_forward", "conv_tbc", "linear_cross_entropy", "grouped_mm",
]
