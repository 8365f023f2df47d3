"""`fusegrad.nn.functional`: layers and losses as functions (PyTorch's `torch.nn.functional`).

Each function picks the registry op PyTorch records (`linear` on a 2-D input is one `addmm`,
`cross_entropy` is `log_softmax` then `nll_loss`), so graphs carry PyTorch's node names.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _autocast
from .._autocast import composite
from .._creation import zeros_like
from .._dispatch import call
from .._dtype import dtype as _dtype_cls
from .._functions._args import int_list_parameter
from .._shapes import broadcast_shapes as _broadcast_shapes
from .._symbolic import SymInt
from .._tensor import Tensor
from .._torch_function import warning_stacklevel as _warning_stacklevel
from .._type_names import python_type_name
from .._warn import warn_once_at_caller
from ..autograd.grad_mode import no_grad as _no_grad
from ..backends import cuda as _cuda_backend
from ..ops import REGISTRY
from ..ops import conv as CV
from ..ops import embedding as EB
from ..ops import indexing as X
from ..ops import nn as N
from ..ops import normalization as NL
from ..ops import pooling as PL
from ..ops._util import format_of, in_format
from ..ops.nn import REDUCTION_ENUM
from . import _functional_activation, _functional_layers, _functional_loss
from ._functional_activation import (  # noqa: F401
    celu,
    celu_,
    elu,
    elu_,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    logsigmoid,
    mish,
    prelu,
    relu6,
    rrelu,
    rrelu_,
    selu,
    selu_,
    silu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
    threshold_,
)
from ._functional_extra import (  # noqa: F401
    group_norm,
    gumbel_softmax,
    interpolate,
    normalize,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from ._functional_layers import (  # noqa: F401
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    alpha_dropout,
    bilinear,
    channel_shuffle,
    cosine_similarity,
    dropout1d,
    dropout2d,
    dropout3d,
    embedding_bag,
    feature_alpha_dropout,
    fold,
    instance_norm,
    local_response_norm,
    native_channel_shuffle,
    pixel_shuffle,
    pixel_unshuffle,
    rms_norm,
    unfold,
)
from ._functional_loss import (  # noqa: F401
    _not_differentiable,
    _reduce,
    _reduction,
    cosine_embedding_loss,
    cross_entropy,
    ctc_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    pairwise_distance,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)

# ---------------------------------------------------------------- helpers


def _ntuple(x, n: int, name: str = "") -> list:
    if type(x) is int:  # the common case, without the ABC check below (a few us per layer)
        return [x] * n
    if isinstance(x, numbers.Integral) or isinstance(x, Tensor) and not x.ndim:
        return [operator.index(x)] * n  # (a 0-d integer tensor is an int, a float none)
    x = [operator.index(v) for v in x]  # (a float is refused, never truncated)
    if len(x) == 1 and n > 1:
        return x * n
    return x


# ---------------------------------------------------------------- linear and convolution


_ABSENT = object()  # (a required argument left out: PyTorch's parser words it)


def _linear_argument_error(input, weight, bias) -> TypeError | None:
    """PyTorch's parser's error for linear's arguments: one left out, or something but a
    tensor (or an object with `__torch_function__`) given for one (named by position, the
    usual spelling)."""
    if input is _ABSENT:
        return TypeError('linear() missing 2 required positional argument: "input", "weight"')
    if weight is _ABSENT:
        return TypeError('linear() missing 1 required positional arguments: "weight"')
    for position, (name, value) in enumerate((("input", input), ("weight", weight),
                                              ("bias", bias)), 1):
        if not isinstance(value, Tensor) and not (name == "bias" and value is None) and \
                not hasattr(type(value), "__torch_function__"):
            return TypeError(f"linear(): argument '{name}' (position {position}) must be "
                             f"Tensor, not {python_type_name(value)}")
    return None


@composite("lower")
def linear(input: Tensor = _ABSENT, weight: Tensor = _ABSENT,
           bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias (one `addmm` for 2-D input, or for contiguous input of
    another rank with a 1-D bias, as PyTorch records). (No catch-all for surplus arguments,
    whose message PyTorch words "takes from 2 to 3": the profiler reads this signature as
    linear's schema.)"""
    if (input.__class__ is not Tensor or weight.__class__ is not Tensor or
            bias is not None and bias.__class__ is not Tensor) and \
            (error := _linear_argument_error(input, weight, bias)) is not None:
        raise error
    if isinstance(input, Tensor) and isinstance(weight, Tensor) and \
            (input.dim() == 0 or weight.dim() == 0):
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{input.dim()}D and {weight.dim()}D")
    if bias is None:
        return input.matmul(weight.t())
    if input.dim() == 2:
        wt = weight.t()
        _check_addmm(input, wt, bias)
        return call(N.addmm, bias, input, wt)
    if bias.dim() == 1 and input.dim() and input.is_contiguous():
        lead = tuple(input.shape[:-1])
        flat, wt = input.view(-1, input.shape[-1]), weight.t()
        _check_addmm(flat, wt, bias)
        out = call(N.addmm, bias, flat, wt)
        return out.view(lead + (out.shape[-1],))
    return input.matmul(weight.t()) + bias


def _check_addmm(mat1: Tensor, mat2: Tensor, bias: Tensor) -> None:
    """addmm's errors the kernel does not raise itself: a weight that is not a matrix, and a
    bias that does not expand to the output (PyTorch's expand message)."""
    w, b = mat2._data, bias._data
    if w is not None and b is not None and w.ndim == 2 and b.shape == (w.shape[1],):
        return  # (a linear layer's: read off the arrays, a third of the cost)
    if mat2.dim() != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {mat2.dim()}-D tensor")
    out = mat2.shape[1]
    # only an unusual bias is looked at further (the common (out,) costs one comparison)
    if tuple(bias.shape) != (out,) and mat1.shape[1] == mat2.shape[0]:
        bias.expand(mat1.shape[0], out)


def _same_padding(weight, dilation, spatial: int) -> tuple[list, list]:
    """('same' padding per side before, extra padding after) for each spatial dim."""
    before, after = [], []
    for i in range(spatial):
        total = dilation[i] * (weight.shape[2 + i] - 1)
        before.append(total // 2)
        after.append(total - 2 * (total // 2))
    return before, after


def _check_conv_lists(weight, **lists) -> None:
    """PyTorch's error for a stride (padding, dilation, output padding) list of another
    length than the weight's spatial dims (checked before the input's rank)."""
    k = weight.dim() - 2
    if k < 1:
        return
    for name, values in lists.items():
        if not isinstance(values, str) and len(values) not in (1, k):
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {k} "
                               "values to match the convolution dimensions, but got "
                               f"{name}={list(values)}")


def _conv(input, weight, bias, stride, padding, dilation, groups, spatial: int):
    name = f"conv{spatial}d"
    stride = _ntuple(stride, spatial)
    dilation = _ntuple(dilation, spatial)
    _check_conv_lists(weight, stride=stride, padding=padding if isinstance(padding, str)
                      else _ntuple(padding, spatial), dilation=dilation)
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) "
                           f"input to {name}, but got input of size: {list(input.shape)}")
    unbatched = input.dim() == spatial + 1
    if unbatched:
        input = input.unsqueeze(0)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * spatial
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            padding, extra = _same_padding(weight, dilation, spatial)
            if any(extra):
                warn_once_at_caller(
                    "Using padding='same' with even kernel lengths and odd dilation may "
                    "require a zero-padded copy of the input be created")
                input = pad(input, _pad_list([(0, e) for e in extra]))
        else:
            raise RuntimeError(f"Invalid padding string: {padding!r}")
    else:
        padding = _ntuple(padding, spatial)
    out = call(CV.convolution, input, weight, bias, stride, padding, dilation, False,
               [0] * spatial, groups)
    return out.squeeze(0) if unbatched else out


def _pad_list(pairs) -> list:
    """F.pad's flat list (last dim first) from per-dim (before, after) pairs, first dim first."""
    flat = []
    for before, after in reversed(pairs):
        flat += [before, after]
    return flat


@composite("lower")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution (cross-correlation) over (N, C, L) input."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


@composite("lower")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution (cross-correlation) over (N, C, H, W) input."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


@composite("lower")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """3-D convolution (cross-correlation) over (N, C, D, H, W) input."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3)


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                    spatial: int):
    _check_conv_lists(weight, stride=_ntuple(stride, spatial),
                      padding=_ntuple(padding, spatial), dilation=_ntuple(dilation, spatial),
                      output_padding=_ntuple(output_padding, spatial))
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) "
                           f"input to conv_transpose{spatial}d, but got input of size: "
                           f"{list(input.shape)}")
    unbatched = input.dim() == spatial + 1
    if unbatched:
        input = input.unsqueeze(0)
    out = call(CV.convolution, input, weight, bias, _ntuple(stride, spatial),
               _ntuple(padding, spatial), _ntuple(dilation, spatial), True,
               _ntuple(output_padding, spatial), groups)
    return out.squeeze(0) if unbatched else out


@composite("lower")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """1-D transposed convolution (the adjoint of conv1d)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1)


@composite("lower")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """2-D transposed convolution (the adjoint of conv2d)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2)


@composite("lower")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """3-D transposed convolution (the adjoint of conv3d)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 3)


def pad(input: Tensor, pad: list, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last dims: `pad` lists (before, after) pairs, last dimension first; negative
    amounts crop. Modes: constant (`constant_pad_nd`), reflect and replicate (the
    reflection/replication pad of 1 to 3 dims), circular (slice copies, as PyTorch)."""
    from ..ops import padding as P

    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    # (A traced size stays symbolic: `int` would fix the graph to one value.)
    for i, p in enumerate(pad):  # (ints only, as PyTorch's parser: a float is no amount)
        if not isinstance(p, (numbers.Integral, SymInt, Tensor)):
            # (its parser looks at the first element to pick the overload, and meets any
            # other one when it reads the list, counting from 1)
            if i:
                raise TypeError(f"pad(): argument 'pad' failed to unpack the object at pos "
                                f"{i + 1} with error \"type must be tuple of ints,but got "
                                f"{python_type_name(p)}\"")
            raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but "
                            f"found element of type {python_type_name(p)} at pos 0")
    pad = [p if isinstance(p, SymInt) else int(p) for p in pad]
    ndim = input.dim()
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {ndim}")
    if mode == "constant":
        return call(P.constant_pad_nd, input, pad, 0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pad) // 2
    if k not in (1, 2, 3) or ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if mode == "circular":
        from ._functional_extra import pad_circular

        return pad_circular(input, pad)
    ops = ((P.reflection_pad1d, P.reflection_pad2d, P.reflection_pad3d) if mode == "reflect"
           else (P.replication_pad1d, P.replication_pad2d, P.replication_pad3d))
    return call(ops[k - 1], input, pad)


# ---------------------------------------------------------------- pooling


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling; with `return_indices` also the flat positions of the maxima."""
    return _max_pool(PL.max_pool2d_with_indices, 2, input, kernel_size, stride, padding,
                     dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling; with `return_indices` also the flat positions of the maxima."""
    if not return_indices and _autocast.active():
        # PyTorch's CPU autocast runs max_pool3d in float32 (not max_pool3d_with_indices)
        return _autocast.call_composite(max_pool3d, "fp32", (
            input, kernel_size, stride, padding, dilation, ceil_mode), {})
    return _max_pool(PL.max_pool3d_with_indices, 3, input, kernel_size, stride, padding,
                     dilation, ceil_mode, return_indices)


def _max_pool(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    if input.dim() not in (nd + 1, nd + 2):  # checked first, before the arguments
        raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for "
                           "input")
    _check_pool_sizes(f"max_pool{nd}d" + ("_with_indices" if return_indices else ""),
                      kernel_size, stride, padding, dilation)
    if ceil_mode.__class__ is not bool:  # (passed on by position by PyTorch's Python)
        raise TypeError(f"max_pool{nd}d" + ("_with_indices" if return_indices else "") +
                        "(): argument 'ceil_mode' (position 6) must be bool, not "
                        f"{python_type_name(ceil_mode)}")
    k = _ntuple(kernel_size, nd)
    s = _ntuple(stride, nd) if stride not in (None, [], ()) else k
    out, idx = call(op, input, k, s, _ntuple(padding, nd), _ntuple(dilation, nd), ceil_mode)
    return (out, idx) if return_indices else out


def _check_pool_sizes(name: str, kernel_size, stride, padding, dilation=1) -> None:
    """PyTorch's parser's errors for a pooling's size arguments (`int[]` each, positions 2
    to 5) that are no ints: they would be truncated here."""
    for position, param, value in ((2, "kernel_size", kernel_size), (3, "stride", stride),
                                   (4, "padding", padding), (5, "dilation", dilation)):
        # (a stride of None is the kernel's size)
        if value.__class__ is not int and (value is not None or param == "kernel_size"):
            int_list_parameter(value, name, param, position)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling (as a height-1 2-D pooling)."""
    _check_pool_sizes("max_pool1d" + ("_with_indices" if return_indices else ""),
                      kernel_size, stride, padding, dilation)
    if return_indices:
        _check_rank_1d(input, "max_pool1d")
    else:
        shape = tuple(input.shape)
        if len(shape) not in (2, 3) or 0 in shape[len(shape) - 2:]:
            raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with "
                               f"optional 0 dim batch size for input, but got:{PL.dims_str(shape)}")
    k = _ntuple(kernel_size, 1)[0]
    s = _ntuple(stride, 1)[0] if stride not in (None, [], ()) else k
    if not return_indices:  # PyTorch's max_pool1d checks its arguments in its own words
        PL.check_max_pool1d(input.shape[-1], k, s, _ntuple(padding, 1)[0],
                            _ntuple(dilation, 1)[0], ceil_mode)
        PL.check_pool_dtype("max_pool1d_impl", input.dtype, "float")
    res = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _ntuple(padding, 1)[0]),
                     (1, _ntuple(dilation, 1)[0]), ceil_mode, return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling."""
    return _avg_pool(PL.avg_pool2d, 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _avg_pool(op, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    _check_pool_sizes(f"avg_pool{nd}d", kernel_size, stride, padding)
    if divisor_override is not None and divisor_override.__class__ is not int and (
            divisor_override.__class__ is bool or
            not hasattr(type(divisor_override), "__index__")):
        # (never truncated; named as given by keyword, its usual spelling)
        raise TypeError(f"avg_pool{nd}d(): argument 'divisor_override' must be int, not "
                        f"{python_type_name(divisor_override)}")
    k = _ntuple(kernel_size, nd)
    s = _ntuple(stride, nd) if stride not in (None, [], ()) else k
    return call(op, input, k, s, _ntuple(padding, nd), ceil_mode, count_include_pad,
                divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-D average pooling."""
    return _avg_pool(PL.avg_pool3d, 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling (as a height-1 2-D pooling)."""
    _check_rank_1d(input, "avg_pool1d")
    _check_pool_sizes("avg_pool1d", kernel_size, stride, padding)
    k = _ntuple(kernel_size, 1)[0]
    s = _ntuple(stride, 1)[0] if stride not in (None, [], ()) else k
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _ntuple(padding, 1)[0]),
                      ceil_mode, count_include_pad).squeeze(-2)


def _check_rank_1d(input: Tensor, name: str) -> None:
    """The 1-D poolings' error for input not 2-D or 3-D."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for {name})")


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """Average pooling to a fixed output size (None keeps the input's size)."""
    size = _functional_layers.adaptive_output_size(output_size, input, 2,
                                                   "adaptive_avg_pool2d")
    if size == [1, 1]:
        out = input.mean((-1, -2), keepdim=True)
        # PyTorch's result keeps a channels-last input's memory format (a mean's is
        # row-major): the new result's values are laid out so, before anyone holds them.
        fmt = format_of(input)
        if fmt is not None and out._data is not None:
            out._data = in_format(out._data, fmt)
        return out
    return call(PL.adaptive_avg_pool2d, input, size)


@composite("fp32")  # (PyTorch's CPU autocast)
def adaptive_avg_pool3d(input, output_size) -> Tensor:
    """3-D average pooling to a fixed output size (None keeps the input's size)."""
    size = _functional_layers.adaptive_output_size(output_size, input, 3,
                                                   "adaptive_avg_pool3d")
    if list(size) == [1, 1, 1]:
        return input.mean((-1, -2, -3), keepdim=True)
    return call(PL.adaptive_avg_pool3d, input, list(size))


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """1-D adaptive average pooling."""
    size = _functional_layers.one_int_size(output_size, "adaptive_avg_pool1d")
    _check_rank_1d(input, "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


# ---------------------------------------------------------------- normalisation


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5) -> Tensor:
    """Batch normalisation over the channel dim 1 (updates running stats when training)."""
    if not isinstance(eps, numbers.Real):  # (PyTorch's Python compares it first)
        raise TypeError(f"'<' not supported between instances of '{type(eps).__name__}' and "
                        "'float'")
    _functional_layers.float_arg(momentum, "batch_norm", "momentum", 7)
    if training:
        n = input.numel() // max(input.shape[1], 1)
        if n == 1:
            raise ValueError("Expected more than 1 value per channel when training, got "
                             f"input size {input.shape}")
    if input.numel() == 0:  # (nothing to normalise; the running statistics stay)
        return _functional_layers.empty_batch_norm(input, weight, bias)
    return call(NL.native_batch_norm, input, weight, bias, running_mean, running_var,
                training, momentum, eps)[0]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5) -> Tensor:
    """Normalise over the trailing `normalized_shape` dims."""
    ns = list(_functional_layers.int_list_arg(normalized_shape, "layer_norm",
                                              "normalized_shape", 2, False))
    _functional_layers.float_arg(eps, "layer_norm", "eps", 5)
    return call(NL.native_layer_norm, input, ns, weight, bias, eps)[0]


# ---------------------------------------------------------------- dropout and embedding


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero elements with probability p and scale the rest by 1/(1-p) (training only)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not 0.0 <= p <= 1.0:  # NaN passes the check above and fails ATen's
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        mask = input.new_zeros(())
    else:
        # PyTorch's CPU composition (one MulBackward0): a bernoulli(1 - p) mask scaled by
        # 1 / (1 - p), drawn through the registry so that it traces; native_dropout's kernel
        # and decomposition draw the same mask for the same seed.
        # The mask is laid out as the input and drawn in memory order, as PyTorch's is (the
        # same seed drops the same elements of a transposed input).
        _functional_layers.check_noise_dtype(input)
        mask = zeros_like(input).bernoulli_(1 - p) * (1.0 / (1.0 - p))
    if inplace:
        return input.mul_(mask)
    return input * mask


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False) -> Tensor:
    """Rows of `weight` picked by the integer `input`."""
    if padding_idx is not None:
        n = weight.shape[0]
        if padding_idx > 0:
            assert padding_idx < n, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -n, "Padding_idx must be within num_embeddings"
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    if padding_idx.__class__ is not int and not isinstance(padding_idx, numbers.Integral):
        # (PyTorch's Python checks the bounds, then its parser refuses what is no int)
        raise TypeError("embedding(): argument 'padding_idx' (position 3) must be int, not "
                        f"{python_type_name(padding_idx)}")
    if max_norm is not None:
        # The looked-up rows of the weight are rescaled in place, outside the graph (and
        # without its forward AD tangent: a detached alias, as PyTorch's).
        input = input.contiguous()
        with _no_grad():
            call(EB.embedding_renorm_, weight.detach(), input, max_norm, norm_type)
    return call(EB.embedding, weight, input, padding_idx, scale_grad_by_freq, sparse)


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """(..., num_classes) int64 one-hot encoding of an int64 tensor (PyTorch's parameter is
    `input`, whatever its documentation says)."""
    if num_classes.__class__ is not int:  # (a float is `operator.index`'s TypeError, which
        num_classes = operator.index(num_classes)  # the wrapper words as PyTorch's parser)
    return call(X.one_hot, input, num_classes)


# ---------------------------------------------------------------- activations


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0)."""
    return input.relu_() if inplace else input.relu()


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (exact, or the tanh approximation)."""
    return call(REGISTRY["gelu"], input, approximate)


def softplus(input, beta=1, threshold=20) -> Tensor:  # noqa: F811 (torch's argument name)
    """log(1 + exp(beta x)) / beta, linear above `threshold` (defaults the ints PyTorch's
    schema has, left out of make_fx's graphs; a float given is written out, as there)."""
    return call(REGISTRY["softplus"], input, beta, threshold)


def _dtype_arg(fn: str, dtype) -> None:
    """The argument parser's TypeError for a dtype that is none (`dtype='float'`)."""
    if dtype is not None and not isinstance(dtype, (_dtype_cls, type)):
        raise TypeError(f"{fn}(): argument 'dtype' must be torch.dtype, not "
                        f"{python_type_name(dtype)}")


def softmax(input, dim=None, _stacklevel=3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`."""
    _dtype_arg("softmax", dtype)
    if dim is None:
        dim = _functional_activation.implicit_softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim, dtype=dtype) if dtype is not None else input.softmax(dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None) -> Tensor:
    """log(softmax(x)) along `dim`."""
    _dtype_arg("log_softmax", dtype)
    if dim is None:
        dim = _functional_activation.implicit_softmax_dim("log_softmax", input.dim(),
                                                          _stacklevel)
    return input.log_softmax(dim, dtype=dtype) if dtype is not None else input.log_softmax(dim)


# ---------------------------------------------------------------- losses


def _check_sizes_warn(input, target) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=_warning_stacklevel(3))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean",
             weight=None) -> Tensor:
    """Mean squared error."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_sizes_warn(input, target)
    if tuple(target.shape) != tuple(input.shape):
        from ..ops._util import broadcast_shapes

        shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
        input, target = input.expand(shape), target.expand(shape)
    if weight is not None:
        return _reduce((input - target) ** 2 * weight, reduction)
    return call(N.mse_loss, input, target, REDUCTION_ENUM[reduction])


@composite("fp32")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
            weight=None) -> Tensor:
    """Mean absolute error."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_sizes_warn(input, target)
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean") -> Tensor:
    """-(t log x + (1 - t) log(1 - x)) for probabilities `input`."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the "
                         f"input size ({input.shape}) is deprecated. Please ensure they have "
                         "the same size.")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        _check_bce_weight(tuple(target.shape), tuple(weight.shape))
        weight = weight.expand(tuple(input.shape))
    # (ATen refuses a weight that requires grad before it looks at the values or dtypes)
    _not_differentiable("binary_cross_entropy", "weight", weight)
    if target.dtype == input.dtype:  # (else the op's dtype error comes first)
        _check_probabilities(input, "input")
        _check_probabilities(target, "target")
    return call(N.binary_cross_entropy, input, target, weight, REDUCTION_ENUM[reduction])


def _check_bce_weight(ts: tuple, ws: tuple) -> None:
    """PyTorch's errors for a weight that does not broadcast to the target's shape `ts`
    (its expand's, from the last dim), or broadcasts to a larger one (the in-place
    product's)."""
    lead = len(ws) - len(ts)  # the weight's extra leading dims stand in the shape named
    expected = list(ws[:lead]) + list(ts) if lead > 0 else list(ts)
    for i in range(1, len(ws) + 1):
        w = ws[-i]
        if i <= len(ts) and w != ts[-i] and w != 1:
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {w} at -{i}! Mismatching "
                f"argument at index 1 had torch.Size({list(ws)}); but expected shape should "
                f"be broadcastable to {expected}")
    _check_in_place_product(ts, ws)


def _check_in_place_product(shape: tuple, other: tuple) -> None:
    """The error of an in-place product of a tensor of `shape` with one of shape `other`
    that broadcasts to more (PyTorch's losses multiply their weights in place)."""
    full = _broadcast_shapes(shape, other)
    if full != tuple(shape):
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                           f"{list(full)}")


def _check_probabilities(t: Tensor, name: str) -> None:
    """PyTorch's kernel refuses values outside [0, 1], NaN included: a min and a max of the
    values (NaN propagates through both), for tensors that hold their data."""
    data = t._data if type(t)._plain else None
    if data is None or not data.size:
        return
    low, high = np.min(data), np.max(data)
    if not (low >= 0 and high <= 1):
        raise RuntimeError(f"all elements of {name} should be between 0 and 1")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None) -> Tensor:
    """Sigmoid then binary cross entropy, computed stably from logits."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    # (ATen refuses weights that require grad before it meets their shapes)
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    shape = tuple(input.shape)
    # The weights' shapes are checked as PyTorch's composition meets them: the positive
    # weight scales the target, the weight the loss (both in place).
    if pos_weight is not None and tuple(pos_weight.shape) != shape:
        _check_in_place_product(shape, _broadcast_shapes(tuple(pos_weight.shape), shape))
    if weight is not None and tuple(weight.shape) != shape:
        _check_in_place_product(shape, _broadcast_shapes(shape, tuple(weight.shape)))
    return call(N.binary_cross_entropy_with_logits, input, target, weight, pos_weight,
                REDUCTION_ENUM[reduction])


__all__ = [
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "pad", "max_pool1d",
    "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool3d", "adaptive_avg_pool3d",
    "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "batch_norm", "layer_norm",
    "dropout", "embedding", "one_hot", "relu", "relu6", "hardtanh", "leaky_relu", "elu",
    "sigmoid", "tanh", "gelu", "silu", "softplus", "softmax", "log_softmax", "nll_loss",
    "cross_entropy", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "bilinear", "group_norm", "huber_loss",
    "interpolate",
]
__all__ += [n for m in (_functional_activation, _functional_layers, _functional_loss)
            for n in m.__all__ if n not in __all__]


# ---------------------------------------------------------------- attention


def _float_mask(mask, dtype) -> Tensor | None:
    """A boolean "masked-out" mask as an additive float mask (0 or -inf); floats unchanged."""
    if mask is None:
        return None
    if mask.dtype.is_floating_point:
        return mask
    from .._creation import zeros  # a factory, so tracers see the values (a constant)

    device = None if mask._plain else mask.device  # (a meta mask's is a meta tensor)
    return zeros(tuple(mask.shape), dtype=dtype, device=device).masked_fill(mask, float("-inf"))


def _sdpa_check_inputs(query, key, value, attn_mask) -> None:
    """PyTorch's checks before choosing a backend, with its messages."""
    names = [t.dtype.cpp for t in (query, key, value)]
    if not query.dtype is key.dtype is value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {names[0]} key.dtype: {names[1]} and value.dtype: "
                           f"{names[2]} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    if attn_mask is not None and attn_mask.dtype.name not in ("bool", "float32") and (
            attn_mask.dtype is not query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: "
                           f"{attn_mask.dtype.cpp} and  query.dtype: "
                           f"{names[0]} instead.")


def _sdpa_use_flash(query, key, value, attn_mask, dropout_p, enable_gqa) -> bool:
    """Whether PyTorch's CPU backend choice is the flash kernel (one fused node).

    Measured on torch 2.13: float dtypes, no dropout, 4-D inputs with equal batch sizes and
    head counts (with enable_gqa, key/value heads dividing the query heads), equal head sizes,
    non-empty sequences, unit stride along the head dimension, and a 2-D or 4-D mask that
    does not require grad. Anything else takes the composite (math) path.
    """
    if dropout_p > 0.0 or query.dtype.name not in ("float32", "float64", "float16",
                                                    "bfloat16"):
        return False
    if query.is_meta:  # (the CPU's kernel: meta inputs take the math path)
        return False
    if not query.dim() == key.dim() == value.dim() == 4:
        return False
    (b, h, length, e), (bk, hk, source, ek), (bv, hv, sv, ev) = (
        tuple(query.shape), tuple(key.shape), tuple(value.shape))
    if not b == bk == bv or not e == ek == ev or source != sv:
        return False
    if not h == hk == hv and not (enable_gqa and hk == hv and h % hk == 0):
        return False
    if length == 0 or source == 0:
        return False
    if any(t.stride(-1) != 1 for t in (query, key, value)):
        return False
    return attn_mask is None or (attn_mask.dim() in (2, 4) and not attn_mask.requires_grad)


@composite("lower")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False) -> Tensor:
    """softmax(Q K^T * scale + mask) V over the last two dims.

    A boolean `attn_mask` marks the positions that may be attended (True = keep); a float mask
    is added to the scores.  `is_causal` keeps the lower triangle of the (L, S) score matrix.
    Rows with every position masked give zeros (as PyTorch's CPU kernels do). Where PyTorch's
    CPU flash kernel accepts the inputs this is one `_scaled_dot_product_flash_attention_for_cpu`
    node, as in PyTorch; otherwise it is composed of matmul, softmax and dropout.
    """
    _sdpa_check_inputs(query, key, value, attn_mask)
    if attn_mask is not None and attn_mask.dtype.name == "bool":
        # PyTorch turns a "may attend" mask into an additive one of the query's dtype first.
        keep = attn_mask
        attn_mask = _float_mask(keep.logical_not(), query.dtype)
    switches = _cuda_backend._sdp  # PyTorch's attention switches (`nn.attention.sdpa_kernel`)
    if switches["flash"] and _sdpa_use_flash(query, key, value, attn_mask, dropout_p,
                                             enable_gqa):
        from ..ops.attention import flash_attention

        return call(flash_attention, query, key, value, float(dropout_p), bool(is_causal),
                    attn_mask, scale)[0]
    if not switches["math"]:  # PyTorch also warns why the flash kernel did not fit
        raise RuntimeError("No available kernel.  Aborting execution." if switches["flash"]
                           else "No viable backend for scaled_dot_product_attention was "
                           "found. This is likely due to turning off both the math kernel "
                           "and the fused kernels.")
    if is_causal and attn_mask is not None:  # (the flash kernel above applies both)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    # The composite path, structured as PyTorch's: both operands scaled by sqrt(scale) before
    # the product (a negative scale flips the query's sign), a float mask added, a softmax
    # that gives zeros for fully masked rows.
    from ..ops.attention import safe_softmax

    # PyTorch's math path computes half and bfloat16 inputs in float32 (each cast up first,
    # the result cast back): the scores, softmax and products round once, at the end.
    origin = query.dtype
    upcast = origin.name in ("float16", "bfloat16")
    if upcast:
        from .. import _dtype

        query, key, value = (t.to(_dtype.float32) for t in (query, key, value))
    length, source = query.shape[-2], key.shape[-2]
    if scale is not None and scale < 0:
        root = math.sqrt(-scale)
        query = query * -root
    else:
        root = math.sqrt(1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)
        query = query * root
    if is_causal:
        from .. import _dtype
        from .._creation import ones

        keep = ones((length, source), dtype=_dtype.bool_, device=query.device).tril()
        attn_mask = _float_mask(keep.logical_not(), query.dtype)
    if enable_gqa and query.dim() >= 3:
        heads, kv_heads, v_heads = query.shape[-3], key.shape[-3], value.shape[-3]
        if heads % kv_heads or heads % v_heads:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in ")

        def _repeat(t):
            rep = heads // t.shape[-3]
            if rep == 1:
                return t
            lead = tuple(t.shape[:-3])
            h, s, e = t.shape[-3:]
            return t.unsqueeze(-3).expand(lead + (h, rep, s, e)).reshape(lead + (h * rep, s, e))

        key, value = _repeat(key), _repeat(value)
    scores = query.matmul(key.transpose(-2, -1) * root)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = call(safe_softmax, scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    out = weights.matmul(value)
    return out.to(origin) if upcast else out


__all__ += ["scaled_dot_product_attention"]

from . import _functional_pooling  # noqa: E402
from ._functional_pooling import (  # noqa: E402, F401
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    affine_grid,
    assert_int_or_pair,
    boolean_dispatch,
    conv_tbc,
    grid_sample,
    grouped_mm,
    linear_cross_entropy,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
    multi_head_attention_forward,
    pdist,
    relu_,
    triplet_margin_with_distance_loss,
)

__all__ += _functional_pooling.__all__

from . import _functional_fractional  # noqa: E402
from ._functional_fractional import (  # noqa: E402, F401
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)

__all__ += _functional_fractional.__all__

# Last: every public function honours `__torch_function__` (see fusegrad._torch_function).
from .._torch_function_wrappers import wrap_namespace as _wrap_torch_function  # noqa: E402

_wrap_torch_function(globals(), "torch.nn.functional", python_level=True)

# `F.grad` is `nn.grad` (the convolution gradients), as in PyTorch.
from . import grad  # noqa: E402, F401, I001

# The `__torch_function__` helpers that functional code written for PyTorch reaches as `F.*`
# (after the wrapping: they are not functions of tensors).
from ..overrides import (  # noqa: E402, F401
    handle_torch_function,
    has_torch_function,
    has_torch_function_unary,
    has_torch_function_variadic,
)
