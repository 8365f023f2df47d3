"""ATen's functional spellings that programs and exported code call from `torch.*`: the
recurrent layers and cells over a flat parameter list (`torch.lstm`, `torch.gru_cell`, ...),
the sampling and loss spellings (`grid_sampler`, `affine_grid_generator`, `ctc_loss`),
`conv_tbc`, index and strided scatters (`index_reduce`, `as_strided_scatter`), `adjoint`,
`norm_except_dim`, the deprecated `range`, and eager `cond` / `while_loop`.
"""

from __future__ import annotations

import builtins
import warnings

from .._tensor import Tensor

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _F():
    from ..nn import functional

    return functional


def _rnn():
    from ..nn.modules import rnn

    return rnn


# ---------------------------------------------------------------- recurrent cells and layers


def _cell_params(w_ih, w_hh, b_ih, b_hh) -> dict:
    return {"weight_ih": w_ih, "weight_hh": w_hh, "bias_ih": b_ih, "bias_hh": b_hh}


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One Elman step: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return _rnn()._rnn_cell("tanh", input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh),
                            False)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One Elman step with ReLU."""
    return _rnn()._rnn_cell("relu", input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh),
                            False)[0]


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> tuple:
    """One LSTM step from state `hx` = (h, c); returns (h', c')."""
    return _rnn()._lstm_cell(input, tuple(hx), _cell_params(w_ih, w_hh, b_ih, b_hh), False)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step."""
    return _rnn()._gru_cell(input, (hx,), _cell_params(w_ih, w_hh, b_ih, b_hh), False)[0]


def _recurrent(mode, input, states, params, has_biases, num_layers, dropout, train,
               bidirectional, batch_first):
    """The multi-layer recurrence over ATen's flat parameter list (per layer and direction:
    w_ih, w_hh, then b_ih, b_hh when `has_biases`)."""
    import fusegrad

    rnn = _rnn()
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
            x = _F().dropout(x, dropout, True)
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
    return _F().grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                            _PADDING[padding_mode], bool(align_corners))


grid_sampler_2d = grid_sampler


def affine_grid_generator(theta, size, align_corners: bool) -> Tensor:
    """ATen's affine_grid."""
    return _F().affine_grid(theta, list(size), bool(align_corners))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: int = 1, zero_infinity: bool = False) -> Tensor:
    """ATen's CTC loss: `reduction` 0 none, 1 mean, 2 sum."""
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _REDUCTIONS[int(reduction)], zero_infinity)


def conv_tbc(input, weight, bias, pad: int = 0) -> Tensor:
    """1-D convolution of time-batch-channel input (T, B, C_in) with weight
    (K, C_in, C_out): (T', B, C_out)."""
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    out = _F().conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In place: whole channels zeroed with probability `p`, the rest scaled by 1/(1-p)."""
    from .nn_aliases import feature_dropout

    return input.copy_(feature_dropout(input, p, train))


# ---------------------------------------------------------------- scatters and views


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions (a view)."""
    if input.dim() < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.dim()}-D tensor.")
    return input.transpose(-2, -1)


def as_strided_scatter(input: Tensor, src: Tensor, size, stride,
                       storage_offset=None) -> Tensor:
    """A copy of `input` with `src` written into its `as_strided(size, stride, offset)`
    view."""
    out = input.clone()
    out.as_strided(size, stride, storage_offset).copy_(src)
    return out


_WARNED_INDEX_REDUCE = []


def _index_reduce_args(input, dim, index, source, reduce):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if not _WARNED_INDEX_REDUCE:
        _WARNED_INDEX_REDUCE.append(True)
        warnings.warn("index_reduce() is in beta and the API may change at any time.",
                      UserWarning, stacklevel=3)
    d = dim % max(source.dim(), 1)
    shape = [1] * source.dim()
    shape[d] = -1
    return d, index.view(shape).expand_as(source)


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True, out=None) -> Tensor:
    """input with the slices of `source` reduced into the positions `index` names along
    `dim` (prod, mean, amax or amin)."""
    d, idx = _index_reduce_args(input, dim, index, source, reduce)
    return input.scatter_reduce(d, idx, source, reduce, include_self=include_self)


def _index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """In-place index_reduce."""
    d, idx = _index_reduce_args(self, dim, index, source, reduce)
    return self.scatter_reduce_(d, idx, source, reduce, include_self=include_self)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The `pow`-norm over every dimension but `dim` (all of them for dim -1), keeping
    `dim`'s size and size 1 elsewhere."""
    if dim == -1:
        return v.norm(pow)
    others = [d for d in builtins.range(v.dim()) if d != dim]
    return v.norm(pow, others, keepdim=True)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None,  # noqa: A001
          device=None, requires_grad: bool = False) -> Tensor:
    """The deprecated inclusive range [start, end] by `step` (default floating dtype)."""
    import fusegrad

    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    count = int((end - start) // step) + 1
    out = fusegrad.arange(count, dtype=_float64()) * step + start
    out = out.to(dtype or fusegrad.get_default_dtype())
    return out.requires_grad_(True) if requires_grad else out


def _float64():
    from .. import _dtype

    return _dtype.float64


# ---------------------------------------------------------------- control flow, eager


def cond(pred, true_fn, false_fn, operands=()):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)` (run eagerly)."""
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    return true_fn(*operands) if bool(pred) else false_fn(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Apply `body_fn` to the carried values while `cond_fn` of them holds (run eagerly)."""
    carried = tuple(carried_inputs)
    while bool(cond_fn(*carried)):
        carried = tuple(body_fn(*carried))
    return carried


class _CompletedFuture:
    """The result of `fork`: already computed, since eager code runs it at once (as
    TorchScript's fork does outside a scripted function)."""

    def __init__(self, value) -> None:
        self._value = value

    def done(self) -> bool:
        """Always True."""
        return True

    def wait(self):
        """The forked call's result."""
        return self._value

    def value(self):
        """The forked call's result."""
        return self._value

    def then(self, callback):
        """A future of `callback(self)`."""
        return _CompletedFuture(callback(self))


def fork(func, *args, **kwargs) -> _CompletedFuture:
    """Run `func(*args, **kwargs)` and return a completed future of its result."""
    return _CompletedFuture(func(*args, **kwargs))


def wait(future):
    """The result of a future from `fork`."""
    return future.wait()


def classproperty(func):
    """A read-only property of the class (the getter receives the class)."""
    if not isinstance(func, (classmethod, staticmethod)):
        func = classmethod(func)
    return _ClassProperty(func)


class _ClassProperty:
    def __init__(self, getter) -> None:
        self.getter = getter

    def __get__(self, instance, owner=None):
        return self.getter.__get__(instance, owner if owner is not None else type(instance))()


def get_file_path(*path_components: str) -> str:
    """A path under the directory that holds the package."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(os.path.dirname(root), *path_components)


__all__ = [
    "fork", "wait", "classproperty", "get_file_path",
    "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell", "lstm", "gru", "rnn_tanh",
    "rnn_relu", "grid_sampler", "grid_sampler_2d", "affine_grid_generator", "ctc_loss",
    "conv_tbc", "feature_dropout_", "adjoint", "as_strided_scatter", "index_reduce",
    "norm_except_dim", "range", "cond", "while_loop",
]
