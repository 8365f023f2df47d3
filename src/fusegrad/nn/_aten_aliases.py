"""The nn functions PyTorch also exposes at the top level (`torch.conv2d`,
`torch.layer_norm`, `torch.dropout`, ...), with ATen's positional signatures (which differ
from `torch.nn.functional`'s: `torch.dropout(input, p, train)` has no defaults,
`torch.embedding(weight, indices)` takes the weight first, `torch.batch_norm` takes weight and
bias before the running statistics, losses take an integer `reduction`); the recurrent layers
and cells over a flat parameter list (`torch.lstm`, `torch.gru_cell`, ...), the sampler and
loss spellings (`grid_sampler`, `affine_grid_generator`, `ctc_loss`), `conv_tbc`,
`constant_pad_nd`, `max_pool1d_with_indices`.

They are written here, over `fusegrad.nn.functional`, and `fusegrad` loads them with nn on
first use (`ops/surface.py` flags their names `NN_SPELLING`). Where PyTorch's top-level
function is nn.functional's own (`torch.conv2d is torch.nn.functional.conv2d`), this module
names the same object.
"""

from __future__ import annotations

import builtins
import warnings

from .._tensor import Tensor
from ..ops.spellings import ALIASES
from . import functional as F
from .modules import rnn

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(r) -> str:
    return _REDUCTIONS[r] if isinstance(r, int) else r














def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout (ATen's form: `p` and `train` are required)."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place dropout."""
    return F.dropout(input, p, train, inplace=True)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout of whole channels (dims from 2 on share one draw)."""
    if input.ndim <= 3:
        return F.dropout1d(input, p, train) if input.ndim in (2, 3) else \
            F.dropout(input, p, train)
    return F.dropout2d(input, p, train)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout (ATen's form: `p` and `train` are required)."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout of whole channels."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout of whole channels."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """Layer normalisation over the trailing `normalized_shape` dims."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """Batch normalisation (ATen's argument order: weight and bias first)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    """Group normalisation."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """Instance normalisation (ATen's argument order: weight and bias first)."""
    return F.instance_norm(input, running_mean, running_var, weight, bias,
                              use_input_stats, momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    """RMS normalisation over the trailing `normalized_shape` dims."""
    return F.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of `weight` at `indices` (ATen's order: weight first; padding_idx -1 is none)."""
    pad = None if padding_idx == -1 else padding_idx
    return F.embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


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
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """2-D max pooling (an empty stride means the kernel size)."""
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)






def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """3-D max pooling (an empty stride means the kernel size)."""
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    """1-D adaptive max pooling: (values, indices), as ATen returns them."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)














def celu(input, alpha=1.0) -> Tensor:
    """CELU."""
    return F.celu(input, alpha)




def threshold(input, threshold, value) -> Tensor:  # noqa: A002
    """`value` where input <= threshold, else input."""
    return F.threshold(input, threshold, value)






def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training: bool = False,
          generator=None) -> Tensor:
    """Randomized leaky ReLU (the mean slope when not training)."""
    return F.rrelu(input, lower, upper, training)






def kl_div(input, target, reduction=0, *, log_target: bool = False) -> Tensor:
    """KL divergence; `reduction` is ATen's integer (0 none, 1 mean, 2 sum). Called without
    it, `torch.kl_div` does not reduce (its Python binding's default), so neither does this."""
    with warnings.catch_warnings():  # F.kl_div warns about 'mean'; ATen's form does not
        warnings.simplefilter("ignore")
        return F.kl_div(input, target, reduction=_reduction(reduction),
                           log_target=log_target)




def hinge_embedding_loss(input, target, margin: float = 1.0, reduction=1) -> Tensor:
    """Hinge embedding loss (integer reduction)."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction=1) -> Tensor:
    """Margin ranking loss (integer reduction)."""
    return F.margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0,
                          reduction=1) -> Tensor:
    """Cosine embedding loss (integer reduction)."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, reduction=1) -> Tensor:
    """Triplet margin loss (integer reduction)."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input: bool, full: bool, eps: float,
                     reduction) -> Tensor:
    """Poisson negative log likelihood (ATen's form: every argument required)."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction))


# ---------------------------------------------------------------- recurrent cells and layers


def _cell_params(w_ih, w_hh, b_ih, b_hh) -> dict:
    return {"weight_ih": w_ih, "weight_hh": w_hh, "bias_ih": b_ih, "bias_hh": b_hh}


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One Elman step: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return rnn._rnn_cell("tanh", input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh),
                            False)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One Elman step with ReLU."""
    return rnn._rnn_cell("relu", input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh),
                            False)[0]


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> tuple:
    """One LSTM step from state `hx` = (h, c); returns (h', c')."""
    return rnn._lstm_cell(input, tuple(hx), _cell_params(w_ih, w_hh, b_ih, b_hh), False)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step."""
    return rnn._gru_cell(input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh), False)[0]


def _recurrent(mode, input, states, params, has_biases, num_layers, dropout, train,
               bidirectional, batch_first):
    """The multi-layer recurrence over ATen's flat parameter list (per layer and direction:
    w_ih, w_hh, then b_ih, b_hh when `has_biases`)."""
    import fusegrad

    cell = rnn._cell_fn(mode)
    step = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    x = input.transpose(0, 1) if batch_first else input
    unbatched = x.dim() == 2
    if unbatched:
        x = x.unsqueeze(1)
        states = [s.unsqueeze(1) for s in states]
    unbound = [s.unbind(0) for s in states]
    finals: list[list] = [[] for _ in states]
    for layer in builtins.range(num_layers):
        outs = []
        for d in builtins.range(dirs):
            idx = layer * dirs + d
            w = list(params[idx * step:(idx + 1) * step])
            p = _cell_params(w[0], w[1], w[2] if has_biases else None,
                             w[3] if has_biases else None)
            out, fin = rnn._full_layer(cell, x, tuple(u[idx] for u in unbound), p, d == 1)
            outs.append(out)
            for lst, f in zip(finals, fin):
                lst.append(f)
        x = outs[0] if dirs == 1 else fusegrad.cat(outs, -1)
        if dropout and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, True)
    hidden = [fusegrad.stack(f) for f in finals]
    if unbatched:
        x = x.squeeze(1)
        hidden = [h.squeeze(1) for h in hidden]
    return (x.transpose(0, 1) if batch_first else x), hidden


def lstm(input, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
         bidirectional: bool, batch_first: bool) -> tuple:
    """A multi-layer LSTM over a flat parameter list: (output, h_n, c_n)."""
    out, (h, c) = _recurrent("LSTM", input, list(hx), params, has_biases, num_layers, dropout,
                             train, bidirectional, batch_first)
    return out, h, c


def gru(input, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
        bidirectional: bool, batch_first: bool) -> tuple:
    """A multi-layer GRU over a flat parameter list: (output, h_n)."""
    out, (h,) = _recurrent("GRU", input, [hx], params, has_biases, num_layers, dropout, train,
                           bidirectional, batch_first)
    return out, h


def rnn_tanh(input, hx, params, has_biases: bool, num_layers: int, dropout: float,
             train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    """A multi-layer Elman RNN (tanh) over a flat parameter list: (output, h_n)."""
    out, (h,) = _recurrent("RNN_TANH", input, [hx], params, has_biases, num_layers, dropout,
                           train, bidirectional, batch_first)
    return out, h


def rnn_relu(input, hx, params, has_biases: bool, num_layers: int, dropout: float,
             train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    """A multi-layer Elman RNN (ReLU) over a flat parameter list: (output, h_n)."""
    out, (h,) = _recurrent("RNN_RELU", input, [hx], params, has_biases, num_layers, dropout,
                           train, bidirectional, batch_first)
    return out, h


# ---------------------------------------------------------------- layer and loss spellings

_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """ATen's grid_sample with its integer modes (0 bilinear, 1 nearest; 0 zeros, 1 border,
    2 reflection)."""
    return F.grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                            _PADDING[padding_mode], bool(align_corners))


grid_sampler_2d = grid_sampler_3d = grid_sampler


def affine_grid_generator(theta, size, align_corners: bool) -> Tensor:
    """ATen's affine_grid."""
    return F.affine_grid(theta, list(size), bool(align_corners))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: int = 1, zero_infinity: bool = False) -> Tensor:
    """ATen's CTC loss: `reduction` 0 none, 1 mean, 2 sum."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _REDUCTIONS[int(reduction)], zero_infinity)




def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In place: whole channels zeroed with probability `p`, the rest scaled by 1/(1-p)."""
    return input.copy_(feature_dropout(input, p, train))


# ---------------------------------------------------------------- pads, pools, losses


def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:
    """`input` padded with `value` (pairs of sizes from the last dimension back)."""
    return F.pad(input, list(pad), "constant", value)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode: bool = False) -> tuple:
    """1-D max pooling and the positions of the maxima."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode,
                           True)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction: int = 1) -> Tensor:
    """ATen's form of the logits BCE: `reduction` 0 none, 1 mean, 2 sum."""
    name = {0: "none", 1: "mean", 2: "sum"}[int(reduction)]
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=name,
                                                 pos_weight=pos_weight)




# PyTorch's top-level function is nn.functional's own.
conv1d = F.conv1d
conv_tbc = F.conv_tbc
conv2d = F.conv2d
conv3d = F.conv3d
conv_transpose1d = F.conv_transpose1d
conv_transpose2d = F.conv_transpose2d
conv_transpose3d = F.conv_transpose3d
adaptive_avg_pool1d = F.adaptive_avg_pool1d
pixel_shuffle = F.pixel_shuffle
pixel_unshuffle = F.pixel_unshuffle
channel_shuffle = F.channel_shuffle
cosine_similarity = F.cosine_similarity
pairwise_distance = F.pairwise_distance
bilinear = F.bilinear
rrelu_ = F.rrelu_
threshold_ = F.threshold_
celu_ = F.celu_
selu_ = F.selu_
avg_pool1d = F.avg_pool1d

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "dropout", "dropout_",
    "feature_dropout", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm",
    "embedding", "embedding_bag", "embedding_renorm_", "max_pool1d", "max_pool2d", "max_pool3d",
    "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "selu_", "celu", "celu_",
    "threshold", "threshold_", "rrelu", "cosine_similarity",
    "pairwise_distance", "kl_div", "bilinear", "hinge_embedding_loss", "margin_ranking_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
    "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell", "lstm", "gru", "rnn_tanh",
    "rnn_relu", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator",
    "ctc_loss",
    "conv_tbc", "feature_dropout_", "constant_pad_nd", "max_pool1d_with_indices",
    "binary_cross_entropy_with_logits", "rrelu_",
]

# PyTorch's other names of these (`native_channel_shuffle`).
_ALIASES = {alias: name for alias, name in ALIASES.items() if name in __all__}
globals().update({alias: globals()[name] for alias, name in _ALIASES.items()})
__all__ += list(_ALIASES)


def _behind_protocol() -> None:
    """Put these functions behind `__torch_function__` as the rest of the top-level namespace
    is, named `fusegrad.<name>` (pickles find them through the namespace's lazy names)."""
    from .._torch_function_wrappers import TOP_LEVEL_NOT_ROUTED, TOP_LEVEL_PYTHON, wrap_namespace

    namespace = {name: globals()[name] for name in __all__}
    namespace["__name__"] = "fusegrad"
    wrap_namespace(namespace, "torch", TOP_LEVEL_NOT_ROUTED, TOP_LEVEL_PYTHON)
    globals().update((name, namespace[name]) for name in __all__)


_behind_protocol()
