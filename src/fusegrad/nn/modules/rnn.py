"""Recurrent layers: RNN (tanh/relu), LSTM and GRU, and their single-step cells.

The layers are built from ordinary fusegrad ops: the input projection of a whole sequence is one
`linear`, then a Python loop over time steps applies the recurrent matmul and the gate
arithmetic.  Values and gradients equal PyTorch's; the graph carries fusegrad's elementary nodes,
not PyTorch's fused RNN kernels.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ... import _creation
from ..._functions import cat as _cat
from ..._functions import stack as _stack
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---------------------------------------------------------------- one time step


def _rnn_step(act, xp, h, w_hh, b_hh):
    """Elman step: act(x W_ih^T + b_ih + h W_hh^T + b_hh); `xp` holds the input part."""
    pre = xp + F.linear(h, w_hh, b_hh)
    return pre.tanh() if act == "tanh" else pre.relu()


def _lstm_step(xp, h, c, w_hh, b_hh, w_hr=None):
    """LSTM step with gates ordered (input, forget, cell, output); returns (h, c)."""
    gates = xp + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(xp, h, w_hh, b_hh):
    """GRU step with gates ordered (reset, update, new)."""
    gh = F.linear(h, w_hh, b_hh)
    rx, zx, nx = xp.chunk(3, -1)
    rh, zh, nh = gh.chunk(3, -1)
    r = (rx + rh).sigmoid()
    z = (zx + zh).sigmoid()
    n = (nx + r * nh).tanh()
    return n + z * (h - n)


# ---------------------------------------------------------------- multi-layer recurrent layers


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU: parameters, shape checks and the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning,
                          stacklevel=2)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else out_size * dirs
            for direction in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [(f"weight_ih{sfx}", (gate_size, layer_in)),
                          (f"weight_hh{sfx}", (gate_size, out_size))]
                if bias:
                    shapes += [(f"bias_ih{sfx}", (gate_size,)), (f"bias_hh{sfx}", (gate_size,))]
                if proj_size > 0:
                    shapes.append((f"weight_hr{sfx}", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name, Parameter(_creation.empty(shape, dtype=dtype)))
                names = [n for n, _ in shapes]
                self._flat_weights_names += names
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        std = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -std, std)

    def flatten_parameters(self) -> None:
        """No-op (there is no fused weight buffer to compact)."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """The parameters of each layer and direction, as lists."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _layer_params(self, layer: int, direction: int) -> dict:
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        keys = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        return {k: self._parameters.get(f"{k}{sfx}") for k in keys}

    def _expected_hidden(self, batch: int, cell: bool = False) -> tuple:
        dirs = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 and not cell else self.hidden_size
        return (self.num_layers * dirs, batch, size)

    def _check_hidden(self, hx, expected, msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _prepare(self, input, hx):
        """(seq-first batched input, h0 list, c0 list or None, unbatched flag)."""
        name = "LSTM" if self.mode == "LSTM" else "GRU" if self.mode == "GRU" else "RNN"
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             "instead")
        unbatched = input.dim() == 2
        states = list(hx) if isinstance(hx, (tuple, list)) else ([hx] if hx is not None
                                                                 else None)
        if states is not None:
            for s in states:
                if unbatched and s.dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but "
                                       f"got {s.dim()}-D tensor")
                if not unbatched and s.dim() != 3:
                    raise RuntimeError("For batched 3-D input, hx should also be 3-D but got "
                                       f"{s.dim()}-D tensor")
        if unbatched:
            input = input.unsqueeze(1)
            states = None if states is None else [s.unsqueeze(1) for s in states]
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batch = input.shape[1]
        if states is None:
            shapes = [self._expected_hidden(batch)]
            if self.mode == "LSTM":
                shapes.append(self._expected_hidden(batch, cell=True))
            states = [_creation.zeros(s, dtype=input.dtype) for s in shapes]
        else:
            if self.mode == "LSTM":
                if len(states) != 2:
                    raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
                self._check_hidden(states[0], self._expected_hidden(batch),
                                   "Expected hidden[0] size {}, got {}")
                self._check_hidden(states[1], self._expected_hidden(batch, cell=True),
                                   "Expected hidden[1] size {}, got {}")
            else:
                self._check_hidden(states[0], self._expected_hidden(batch))
        return input, states, unbatched

    def _run_direction(self, x, states, p: dict, reverse: bool):
        """Outputs (list over time) and final states of one layer in one direction."""
        xp = F.linear(x, p["weight_ih"], p["bias_ih"])
        steps = list(xp.unbind(0))
        if reverse:
            steps.reverse()
        outs = []
        if self.mode == "LSTM":
            h, c = states
            for xt in steps:
                h, c = _lstm_step(xt, h, c, p["weight_hh"], p["bias_hh"], p["weight_hr"])
                outs.append(h)
            final = (h, c)
        else:
            h = states[0]
            for xt in steps:
                if self.mode == "GRU":
                    h = _gru_step(xt, h, p["weight_hh"], p["bias_hh"])
                else:
                    act = "tanh" if self.mode == "RNN_TANH" else "relu"
                    h = _rnn_step(act, xt, h, p["weight_hh"], p["bias_hh"])
                outs.append(h)
            final = (h,)
        if reverse:
            outs.reverse()
        return outs, final

    def _forward(self, input, hx):
        x, states, unbatched = self._prepare(input, hx)
        dirs = 2 if self.bidirectional else 1
        finals: list[list] = [[] for _ in states]
        seq_len = x.shape[0]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                init_states = [s[idx] for s in states]
                if seq_len == 0:
                    raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
                o, fin = self._run_direction(x, init_states, self._layer_params(layer, d),
                                             reverse=d == 1)
                outs.append(_stack(o))
                for lst, f in zip(finals, fin):
                    lst.append(f)
            x = outs[0] if dirs == 1 else _cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        final = [_stack(f) for f in finals]
        if unbatched:
            x = x.squeeze(1)
            final = [f.squeeze(1) for f in final]
        elif self.batch_first:
            x = x.transpose(0, 1)
        return x, final

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.

    forward(input, hx=None) returns (output, h_n).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        """(output, h_n) for `input` of shape (L, N, H_in), (N, L, H_in) or (L, H_in)."""
        out, (h,) = self._forward(input, hx)
        return out, h


class LSTM(RNNBase):
    """Long short-term memory layer; forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def forward(self, input, hx=None):
        """(output, (h_n, c_n))."""
        out, (h, c) = self._forward(input, hx)
        return out, (h, c)


class GRU(RNNBase):
    """Gated recurrent unit layer; forward(input, h_0=None) -> (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)

    def forward(self, input, hx=None):
        """(output, h_n)."""
        out, (h,) = self._forward(input, hx)
        return out, h


# ---------------------------------------------------------------- cells


class RNNCellBase(Module):
    """Parameters (weight_ih, weight_hh, bias_ih, bias_hh) and checks shared by the cells."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(_creation.empty((g, input_size), dtype=dtype))
        self.weight_hh = Parameter(_creation.empty((g, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_creation.empty(g, dtype=dtype))
            self.bias_hh = Parameter(_creation.empty(g, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        std = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -std, std)

    def _prepare(self, input, hx, n_states: int):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        states = None if hx is None else (list(hx) if n_states == 2 else [hx])
        if states is not None:
            for s in states:
                if s.dim() not in (1, 2):
                    raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got "
                                     f"{s.dim()}D instead")
        unbatched = input.dim() == 1
        if unbatched:
            input = input.unsqueeze(0)
            states = None if states is None else [s.unsqueeze(0) for s in states]
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        if states is None:
            states = [_creation.zeros((input.shape[0], self.hidden_size), dtype=input.dtype)
                      for _ in range(n_states)]
        for s in states:
            if tuple(s.shape) != (input.shape[0], self.hidden_size):
                raise RuntimeError(f"hidden size mismatch: expected "
                                   f"{[input.shape[0], self.hidden_size]}, got {list(s.shape)}")
        return input, states, unbatched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s


class RNNCell(RNNCellBase):
    """One Elman step: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        """The next hidden state (hx defaults to zeros)."""
        x, (h,), unbatched = self._prepare(input, hx, 1)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        h = _rnn_step(self.nonlinearity, F.linear(x, self.weight_ih, self.bias_ih), h,
                      self.weight_hh, self.bias_hh)
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        """(h', c') (hx defaults to zeros)."""
        x, (h, c), unbatched = self._prepare(input, hx, 2)
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step; forward(input, hx=None) -> h'."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        """The next hidden state (hx defaults to zeros)."""
        x, (h,), unbatched = self._prepare(input, hx, 1)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return h.squeeze(0) if unbatched else h


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
