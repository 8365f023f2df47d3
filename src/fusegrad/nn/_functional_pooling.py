"""Pooling-family and sampling functions of `torch.nn.functional` written over other
functions: the `*_with_indices` spellings, power-average pooling (`lp_pool1d/2d`), max
unpooling, `affine_grid` and `grid_sample`, the distance-function triplet loss, and the
small helpers PyTorch keeps in the namespace (`assert_int_or_pair`, `boolean_dispatch`).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .._autocast import composite
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warning_stacklevel
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

    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


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
        area = kernel_size if isinstance(kernel_size, numbers.Integral) else kernel_size[0]
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
    """(sum over each window of x ** p) ** (1 / p), over the last three dimensions (windows
    taken with `unfold`; with `ceil_mode`, PyTorch's pooling ops for the partial ones)."""
    k = _tuple(kernel_size, 3)
    st = _tuple(stride, 3) if stride is not None else k
    inf = isinstance(norm_type, (int, float)) and abs(norm_type) == float("inf")
    # the checks of the pooling PyTorch calls (max for an infinite norm), before our own
    PL.pool_shape(tuple(input.shape), k, st, [0] * 3, [1] * 3, ceil_mode,
                  "max" if inf else "avg")
    if ceil_mode:
        # Partial windows: through the pooling ops PyTorch composes (an average of the
        # window's part inside the input, scaled by the full window's size).
        F = _F()
        if inf:
            sign = 1 if norm_type > 0 else -1
            return F.max_pool3d(input.abs() * sign, k, st, 0, 1, True) * sign
        out = F.avg_pool3d(input.pow(norm_type), k, st, 0, True)
        return (out.sign() * F.relu(out.abs())).mul(k[0] * k[1] * k[2]).pow(1.0 / norm_type)
    first = input.dim() - 3

    def windows(x):
        for i in range(3):
            x = x.unfold(first + i, k[i], st[i])
        return x

    if inf:
        sign = 1 if norm_type > 0 else -1
        return windows(input.abs() * sign).amax((-3, -2, -1)) * sign
    out = windows(input.pow(norm_type)).mean((-3, -2, -1))
    return (out.sign() * _F().relu(out.abs())).mul(k[0] * k[1] * k[2]).pow(1.0 / norm_type)


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


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) of the 2-D affine maps `theta` (N, 2, 3) for a 4-D
    `size`, or (N, D, H, W, 3) of the 3-D maps (N, 3, 4) for a 5-D one."""
    import fusegrad

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
    n, spatial = size[0], size[2:]  # slowest first; the grid's last dim lists x first

    where = {"dtype": theta.dtype, "device": theta.device}  # (meta theta: a meta grid)

    def axis(steps):
        line = fusegrad.linspace(-1, 1, steps, **where)
        if not align_corners and steps > 1:
            # two roundings, as PyTorch's (one with the factor rounded first moves a point
            # by an ulp, and grid_sample's gradient at a pixel centre with it)
            line = line * (steps - 1) / steps
        return line if steps > 1 else fusegrad.zeros(1, **where)

    columns = []
    for d in reversed(range(nd)):  # x, y (, z): the last spatial dim first
        shape = [1] * nd
        shape[d] = spatial[d]
        columns.append(axis(spatial[d]).view(shape).expand(spatial))
    columns.append(fusegrad.ones(spatial, **where))
    points = math.prod(spatial)
    base = fusegrad.stack(columns, -1).view(1, points, nd + 1)
    grid = base.expand(n, points, nd + 1).bmm(theta.transpose(1, 2))
    return grid.view(n, *spatial, nd)


def _unnormalize(coord: Tensor, size: int, align_corners: bool, nd: int) -> Tensor:
    """A normalised coordinate in pixels, rounded as PyTorch's kernel for `nd` dims rounds
    it: the last bit decides which cell a point on a pixel centre falls in (the grid's
    gradient there), and which pixel is nearest to a point half way between two."""
    if nd == 3:
        if align_corners:
            return (coord + 1) / 2 * (size - 1)
        return ((coord + 1) * size - 1) / 2
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return _fused_shift(coord + 1, size / 2)


def _fused_shift(shifted: Tensor, scale: float) -> Tensor:
    """shifted * scale - 0.5 rounded once, as the fused multiply-add of PyTorch's 2-D
    kernel rounds it (rounded twice, many values differ in the last bit)."""
    out = shifted * scale - 0.5
    a = shifted.detach()._data
    if a is None or a.dtype not in (np.float32, np.float64) or not a.size:
        return out  # a fake tensor has no values; half types are left as they round
    with np.errstate(all="ignore"):
        if a.dtype == np.float32:  # the product of two floats is exact in a double
            fused = (a.astype(np.float64) * scale - 0.5).astype(np.float32)
        else:
            fused = _fma64(a, scale, -0.5)
        fix = fused - out.detach()._data  # exact: the two differ in the last bits only
    fix[~np.isfinite(fix)] = 0
    if not fix.any():
        return out
    return out + Tensor._make(fix)


def _fma64(a: np.ndarray, b: float, c: float) -> np.ndarray:
    """a * b + c with the product unrounded (doubles; `b` of at most 26 significant bits,
    as half an image size is): `a` split in two halves whose products with `b` are exact,
    then the three terms summed with the first sum's rounding error carried (correctly
    rounded but for rare ties)."""
    t = a * 134217729.0  # 2**27 + 1 (Veltkamp's split)
    hi = t - (t - a)
    x1, x2 = hi * b, (a - hi) * b
    total = x1 + c
    back = total - x1
    err = (x1 - (total - back)) + (c - back)
    return total + (err + x2)


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """Fold `coord` back into [low, high] by reflecting at the ends (as often as needed)."""
    import fusegrad

    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    dist = (coord - low).abs()
    extra = dist.fmod(span)
    flips = (dist / span).floor()
    return fusegrad.where(flips.remainder(2) == 0, extra + low, span - extra + low)


def _clip(coord: Tensor, size: int) -> Tensor:
    """`coord` clipped to [0, size - 1]. A coordinate on either bound counts as clipped, as
    PyTorch's grid sampler counts it: its gradient is 1 strictly inside only (a plain clamp
    passes the gradient on at the bounds too, where the sampler passes none)."""
    import fusegrad

    inside = (coord > 0) & (coord < size - 1)
    return fusegrad.where(inside, coord, coord.detach().clamp(0, size - 1))


def _source_index(coord, size, padding_mode, align_corners, nd, nan=None):
    coord = _unnormalize(coord, size, align_corners, nd)
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else \
            _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    if nan is not None and padding_mode != "zeros":
        # PyTorch's clipping takes NaN to the first pixel in its 2-D kernel, to the last in
        # its 3-D one
        coord = coord.masked_fill(nan[0], 0.0 if nan[1] == 2 else size - 1)
    return coord


def _tap(flat: Tensor, coords: list, sizes: tuple) -> Tensor:
    """input[n, c, *coords] for integer-valued coordinate tensors (N, *out), one per spatial
    dim (slowest first); 0 outside the input."""
    n, c = flat.shape[:2]
    inside = None
    index = None
    for ci, size in zip(coords, sizes):
        ok = (ci >= 0) & (ci < size)
        inside = ok if inside is None else inside & ok
        ci = ci.clamp(0, size - 1)
        index = ci if index is None else index * size + ci
    index = index.long().view(n, 1, -1)
    values = flat.gather(2, index.expand(n, c, index.shape[-1])).view(n, c, *coords[0].shape[1:])
    return values * inside.unsqueeze(1).to(flat.dtype)


# Bicubic grid sampling's cubic convolution (its A, PyTorch's -0.75).
_CUBIC_A = -0.75


def _cubic_weights(t: Tensor) -> list:
    """The four taps' weights at fraction t of the way from tap 1 to tap 2."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bounded(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """An integer tap coordinate moved inside as the padding mode says (bicubic's taps)."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else \
            _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def _grid_sample_checks(input: Tensor, grid: Tensor, mode: str) -> None:
    """PyTorch's checks, in its order: the grid's last size, the batch sizes, the dims."""
    isz, gsz = list(input.shape), list(grid.shape)
    if gsz[-1:] != [input.dim() - 2]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {gsz}")
    if isz[0] != gsz[0]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {isz} and grid with sizes {gsz}")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        want = 4 if input.dim() == 4 else 5  # (any other input is taken for a volume)
        raise RuntimeError(f"grid_sampler(): expected {want}D input and grid with same number "
                           f"of dimensions, but got input with sizes {isz} and grid with sizes "
                           f"{gsz}")
    if mode == "bicubic" and input.dim() == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype is not grid.dtype:  # (the kernel reads both as the input's type)
        raise RuntimeError(f"expected scalar type {input.dtype.legacy} but found "
                           f"{grid.dtype.legacy}")


def _grid_sample_nan(input: Tensor, grid: Tensor, nan: np.ndarray, mode: str,
                     padding_mode: str, align_corners: bool) -> Tensor:
    """grid_sample of a grid with NaNs, as PyTorch's kernels treat them: the border and
    reflection clipping takes a NaN coordinate to the first (2-D) or last (3-D) pixel; with
    zeros padding a NaN point reads nothing (0), except that the 2-D bilinear kernel gives
    NaN; bicubic gives NaN whatever the padding."""
    nan_out = mode == "bicubic" or (mode == "bilinear" and grid.dim() == 4
                                    and padding_mode == "zeros")
    far = padding_mode == "zeros" and not nan_out
    # (far outside: no tap inside the input reads a value)
    clean = grid.masked_fill(Tensor._make(nan), -1e4 if far else 0.0)
    masks = [Tensor._make(np.ascontiguousarray(nan[..., i])) for i in range(nan.shape[-1])]
    out = grid_sample(input, clean, mode, padding_mode, align_corners, _masks=masks)
    if nan_out:
        poison = np.where(nan.any(-1), np.nan, 0).astype(out.dtype.np)
        out = out + Tensor._make(poison).unsqueeze(1)
    return out


@composite("fp32")  # (PyTorch's CPU autocast: grid_sampler)
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None,
                _masks=None) -> Tensor:
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
    _grid_sample_checks(input, grid, mode)
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])  # slowest first; the grid lists x (fastest) first
    nd = len(sizes)
    flat = input.reshape(n, c, -1)
    masks = _masks
    nan = None if masks or not grid.dtype.is_floating_point else np.isnan(grid.detach()._data)
    if nan is not None and nan.any():
        return _grid_sample_nan(input, grid, nan, mode, padding_mode, align_corners)
    if mode == "bicubic":
        coords = [_unnormalize(grid[..., nd - 1 - i], size, align_corners, nd)
                  for i, size in enumerate(sizes)]
        starts = [ci.floor() for ci in coords]
        (wy, wx) = [_cubic_weights(ci - s) for ci, s in zip(coords, starts)]
        total = None
        for i in range(4):
            yi = _bounded(starts[0] + (i - 1), sizes[0], padding_mode, align_corners)
            for j in range(4):
                xi = _bounded(starts[1] + (j - 1), sizes[1], padding_mode, align_corners)
                term = _tap(flat, [yi, xi], sizes) * (wy[i] * wx[j]).unsqueeze(1)
                total = term if total is None else total + term
        return total
    coords = [_source_index(grid[..., nd - 1 - i], size, padding_mode, align_corners, nd,
                            (masks[nd - 1 - i], nd) if masks else None)
              for i, size in enumerate(sizes)]
    if mode == "nearest":
        # rounding has a zero derivative: the grid gets a zero gradient, as in PyTorch
        rounded = [ci.round() for ci in coords]
        zero = sum(rounded[1:], rounded[0]) * 0
        return _tap(flat, rounded, sizes) + zero.unsqueeze(1)
    lows = [ci.floor() for ci in coords]
    highs = [(ci - lo).unsqueeze(1) for ci, lo in zip(coords, lows)]  # weights of lo + 1
    total = None
    for corner in range(2 ** nd):  # each corner of the cell: lo or lo + 1 along each dim
        picks = [(corner >> (nd - 1 - d)) & 1 for d in range(nd)]
        weight = None
        for d, pick in enumerate(picks):
            w = highs[d] if pick else 1 - highs[d]
            weight = w if weight is None else weight * w
        term = _tap(flat, [lo + p for lo, p in zip(lows, picks)], sizes) * weight
        total = term if total is None else total + term
    return total


__all__ = [
    "relu_", "pdist", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "lp_pool1d",
    "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "triplet_margin_with_distance_loss",
    "assert_int_or_pair", "boolean_dispatch", "affine_grid", "grid_sample",
    "multi_head_attention_forward", "conv_tbc", "linear_cross_entropy", "grouped_mm",
]
