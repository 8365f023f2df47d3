"""The nn functions PyTorch also exposes at the top level (`torch.conv2d`,
`torch.layer_norm`, `torch.dropout`, ...), with ATen's positional signatures (which differ
from `torch.nn.functional`'s: `torch.dropout(input, p, train)` has no defaults,
`torch.embedding(weight, indices)` takes the weight first, `torch.batch_norm` takes weight and
bias before the running statistics, losses take an integer `reduction`). Each is a thin
wrapper over `fusegrad.nn.functional`, imported on first call (nn is imported after this
package)."""

from __future__ import annotations

import warnings

from .._tensor import Tensor

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _F():
    from ..nn import functional

    return functional


def _reduction(r) -> str:
    return _REDUCTIONS[r] if isinstance(r, int) else r


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution."""
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution."""
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """3-D convolution."""
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """1-D transposed convolution."""
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """2-D transposed convolution."""
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """3-D transposed convolution."""
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout (ATen's form: `p` and `train` are required)."""
    return _F().dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place dropout."""
    return _F().dropout(input, p, train, inplace=True)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout of whole channels (dims from 2 on share one draw)."""
    if input.ndim <= 3:
        return _F().dropout1d(input, p, train) if input.ndim in (2, 3) else \
            _F().dropout(input, p, train)
    return _F().dropout2d(input, p, train)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout (ATen's form: `p` and `train` are required)."""
    return _F().alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout."""
    return _F().alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout of whole channels."""
    return _F().feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout of whole channels."""
    return _F().feature_alpha_dropout(input, p, train, inplace=True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """Layer normalisation over the trailing `normalized_shape` dims."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """Batch normalisation (ATen's argument order: weight and bias first)."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    """Group normalisation."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """Instance normalisation (ATen's argument order: weight and bias first)."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias,
                              use_input_stats, momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    """RMS normalisation over the trailing `normalized_shape` dims."""
    return _F().rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of `weight` at `indices` (ATen's order: weight first; padding_idx -1 is none)."""
    pad = None if padding_idx == -1 else padding_idx
    return _F().embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights=None,
                  include_last_offset: bool = False, padding_idx=None):
    """ATen's embedding_bag: (output, offset2bag, bag_size, max_indices); `mode` is 0 sum,
    1 mean, 2 max."""
    from .._dispatch import call
    from ..ops import layers

    pad = -1 if padding_idx is None else padding_idx
    return call(layers.embedding_bag, weight, indices, offsets, scale_grad_by_freq, mode,
                sparse, per_sample_weights, include_last_offset, pad)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float,
                      norm_type: float) -> Tensor:
    """Rescale, in place, the rows of `input` named in `indices` whose norm exceeds
    `max_norm` (what `embedding(max_norm=...)` does to its weight)."""
    from .._dispatch import call
    from ..ops import embedding

    return call(embedding.embedding_renorm_, input, indices, max_norm, norm_type)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """1-D max pooling (an empty stride means the kernel size)."""
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """2-D max pooling (an empty stride means the kernel size)."""
    return _F().max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling."""
    return _F().avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode,
                           count_include_pad)


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """1-D adaptive average pooling."""
    return _F().adaptive_avg_pool1d(input, output_size)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """3-D max pooling (an empty stride means the kernel size)."""
    return _F().max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    """1-D adaptive max pooling: (values, indices), as ATen returns them."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


def pixel_shuffle(input, upscale_factor: int) -> Tensor:
    """Rearrange channels into a larger spatial grid."""
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor: int) -> Tensor:
    """The inverse of pixel_shuffle."""
    return _F().pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input, groups: int) -> Tensor:
    """Interleave the channels of `groups` groups."""
    return _F().channel_shuffle(input, groups)




def prelu(input, weight) -> Tensor:
    """max(0, x) + weight * min(0, x)."""
    return _F().prelu(input, weight)


def selu_(input) -> Tensor:
    """In-place SELU."""
    return _F().selu(input, inplace=True)


def celu(input, alpha=1.0) -> Tensor:
    """CELU."""
    return _F().celu(input, alpha)


def celu_(input, alpha=1.0) -> Tensor:
    """In-place CELU."""
    return _F().celu(input, alpha, inplace=True)


def threshold(input, threshold, value) -> Tensor:  # noqa: A002
    """`value` where input <= threshold, else input."""
    return _F().threshold(input, threshold, value)


def threshold_(input, threshold, value) -> Tensor:  # noqa: A002
    """In-place threshold."""
    return _F().threshold(input, threshold, value, inplace=True)


def hardshrink(input, lambd=0.5) -> Tensor:
    """0 where |input| <= lambd, else input."""
    return _F().hardshrink(input, lambd)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training: bool = False,
          generator=None) -> Tensor:
    """Randomized leaky ReLU (the mean slope when not training)."""
    return _F().rrelu(input, lower, upper, training)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between x1 and x2 along `dim`."""
    return _F().cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """p-norm of x1 - x2 + eps along the last dim."""
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)


def kl_div(input, target, reduction=0, *, log_target: bool = False) -> Tensor:
    """KL divergence; `reduction` is ATen's integer (0 none, 1 mean, 2 sum). Called without
    it, `torch.kl_div` does not reduce (its Python binding's default), so neither does this."""
    with warnings.catch_warnings():  # F.kl_div warns about 'mean'; ATen's form does not
        warnings.simplefilter("ignore")
        return _F().kl_div(input, target, reduction=_reduction(reduction),
                           log_target=log_target)


def bilinear(input1, input2, weight, bias=None) -> Tensor:
    """x1^T W x2 + b."""
    return _F().bilinear(input1, input2, weight, bias)


def hinge_embedding_loss(input, target, margin: float = 1.0, reduction=1) -> Tensor:
    """Hinge embedding loss (integer reduction)."""
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction=1) -> Tensor:
    """Margin ranking loss (integer reduction)."""
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0,
                          reduction=1) -> Tensor:
    """Cosine embedding loss (integer reduction)."""
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, reduction=1) -> Tensor:
    """Triplet margin loss (integer reduction)."""
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input: bool, full: bool, eps: float,
                     reduction) -> Tensor:
    """Poisson negative log likelihood (ATen's form: every argument required)."""
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction))


__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "dropout", "dropout_",
    "feature_dropout", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm",
    "embedding", "embedding_bag", "embedding_renorm_", "max_pool1d", "max_pool2d", "max_pool3d",
    "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "prelu", "selu_", "celu", "celu_",
    "threshold", "threshold_", "hardshrink", "rrelu", "cosine_similarity",
    "pairwise_distance", "kl_div", "bilinear", "hinge_embedding_loss", "margin_ranking_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
]
