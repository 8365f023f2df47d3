"""Recurrent layers: RNN (tanh/relu), LSTM and GRU, and their single-step cells.

The layers record the graph PyTorch's CPU implementation records, so backward node names match:

- float32 LSTM without projections (PyTorch's oneDNN path): one `mkldnn_rnn_layer` op per layer
  and direction (`MkldnnRnnLayerBackward0`), the hidden states picked with `select`;
- otherwise the layer is built from elementary ops: the input projection of the whole sequence
  is one `linear`, `unbind` splits it into time steps, each step applies the recurrent `linear`
  and the gate arithmetic (gates split with `unsafe_chunk`), and `stack` joins the outputs;
- a PackedSequence runs step by step on slices of the packed data, narrowing the hidden state
  as sequences end (PyTorch's packed layers), and joins outputs and states with `cat`.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ... import _creation
from ..._dispatch import call
from ..._functions import cat as _cat
from ..._functions import stack as _stack
from ...ops import rnn as _R
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---------------------------------------------------------------- one time step
# Each cell takes the step input `x` (already projected by W_ih when `pre` is true) and the
# state tuple, and returns the new state tuple; element 0 is the step's output.


def _input_part(x, p: dict, pre: bool):
    return x if pre else F.linear(x, p["weight_ih"], p["bias_ih"])


def _rnn_cell(act: str, x, state: tuple, p: dict, pre: bool) -> tuple:
    """Elman step: act(h W_hh^T + b_hh + x W_ih^T + b_ih)."""
    total = F.linear(state[0], p["weight_hh"], p["bias_hh"]) + _input_part(x, p, pre)
    return (total.tanh() if act == "tanh" else total.relu(),)


def _lstm_cell(x, state: tuple, p: dict, pre: bool) -> tuple:
    """LSTM step with gates ordered (input, forget, cell, output); returns (h, c)."""
    h, c = state
    gates = F.linear(h, p["weight_hh"], p["bias_hh"]) + _input_part(x, p, pre)
    i, f, g, o = call(_R.unsafe_chunk, gates, 4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if p.get("weight_hr") is not None:
        h = h.matmul(p["weight_hr"].t())
    return h, c


def _gru_cell(x, state: tuple, p: dict, pre: bool) -> tuple:
    """GRU step with gates ordered (reset, update, new)."""
    h = state[0]
    rx, zx, nx = call(_R.unsafe_chunk, _input_part(x, p, pre), 3, 1)
    rh, zh, nh = call(_R.unsafe_chunk, F.linear(h, p["weight_hh"], p["bias_hh"]), 3, 1)
    r = (rh + rx).sigmoid()
    z = (zh + zx).sigmoid()
    n = (nx + nh * r).tanh()
    return ((h - n) * z + n,)


def _cell_fn(mode: str):
    if mode == "LSTM":
        return _lstm_cell
    if mode == "GRU":
        return _gru_cell
    act = "tanh" if mode == "RNN_TANH" else "relu"
    return lambda x, state, p, pre: _rnn_cell(act, x, state, p, pre)


# ---------------------------------------------------------------- one layer, one direction


def _full_layer(cell, x, state: tuple, p: dict, reverse: bool):
    """A time-major (T, N, H_in) sequence: (stacked outputs, final state)."""
    steps = list(F.linear(x, p["weight_ih"], p["bias_ih"]).unbind(0))
    if reverse:
        steps.reverse()
    outs = []
    for xt in steps:
        state = cell(xt, state, p, True)
        outs.append(state[0])
    if reverse:
        outs.reverse()
    return _stack(outs), state


def _packed_layer(cell, data, sizes: list, state: tuple, p: dict):
    """Forward over packed data: as sequences end, their final states are set aside."""
    offset, last = 0, sizes[0]
    finals, outs = [], []
    for bs in sizes:
        xt = data.narrow(0, offset, bs)
        offset += bs
        if bs < last:
            finals.append(tuple(s.narrow(0, bs, last - bs) for s in state))
            state = tuple(s.narrow(0, 0, bs) for s in state)
        last = bs
        state = cell(xt, state, p, False)
        outs.append(state[0])
    finals.append(state)
    finals.reverse()
    return _cat(outs, 0), tuple(_cat([f[k] for f in finals], 0) for k in range(len(state)))


def _reversed_packed_layer(cell, data, sizes: list, state: tuple, p: dict):
    """Backward over packed data: sequences join the batch as their last step is reached."""
    offset, last = data.shape[0], sizes[-1]
    init_state = state
    state = tuple(s.narrow(0, 0, last) for s in init_state)
    outs = []
    for bs in reversed(sizes):
        if bs > last:
            state = tuple(_cat([s, s0.narrow(0, last, bs - last)], 0)
                          for s, s0 in zip(state, init_state))
        xt = data.narrow(0, offset - bs, bs)
        offset -= bs
        last = bs
        state = cell(xt, state, p, False)
        outs.append(state[0])
    outs.reverse()
    return _cat(outs, 0), state


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

    def _check_states(self, states, batch: int) -> None:
        if self.mode == "LSTM":
            if len(states) != 2:
                raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
            self._check_hidden(states[0], self._expected_hidden(batch),
                               "Expected hidden[0] size {}, got {}")
            self._check_hidden(states[1], self._expected_hidden(batch, cell=True),
                               "Expected hidden[1] size {}, got {}")
        else:
            self._check_hidden(states[0], self._expected_hidden(batch))

    def _zero_states(self, batch: int, dtype) -> list:
        shapes = [self._expected_hidden(batch)]
        if self.mode == "LSTM":
            shapes.append(self._expected_hidden(batch, cell=True))
        return [_creation.zeros(s, dtype=dtype) for s in shapes]

    def _prepare(self, input, hx):
        """(time-major batched input, full states list, unbatched flag)."""
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
            input = input.unsqueeze(0 if self.batch_first else 1)
            states = None if states is None else [s.unsqueeze(1) for s in states]
        if self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batch = input.shape[1]
        if states is None:
            states = self._zero_states(batch, input.dtype)
        else:
            self._check_states(states, batch)
        return input, states, unbatched

    def _uses_fused_lstm(self, x) -> bool:
        # PyTorch's oneDNN LSTM: float32, no projections, a non-empty input.
        return (self.mode == "LSTM" and x.dtype.name == "float32" and self.proj_size == 0
                and x.numel() != 0)

    def _dropout_between(self, x, layer: int):
        if self.dropout > 0 and self.training and layer < self.num_layers - 1:
            x = F.dropout(x, self.dropout, True)
        return x

    def _fused_lstm(self, x, states):
        """Float32 LSTM: one `mkldnn_rnn_layer` per layer and direction."""
        dirs = 2 if self.bidirectional else 1
        hx, cx = states
        x = x.contiguous()
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                p = self._layer_params(layer, d)
                b_ih, b_hh = p["bias_ih"], p["bias_hh"]
                if b_ih is None:
                    b_ih = _creation.zeros(p["weight_ih"].shape[0], dtype=x.dtype)
                    b_hh = _creation.zeros(p["weight_hh"].shape[0], dtype=x.dtype)
                out, h, c, _ = call(_R.mkldnn_rnn_layer, x, p["weight_ih"], p["weight_hh"],
                                    b_ih, b_hh, hx[idx], cx[idx], d == 1, [], 2,
                                    self.hidden_size, self.num_layers, self.bias,
                                    self.bidirectional, self.batch_first, self.training)
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else _cat(outs, -1)
            x = self._dropout_between(x, layer)
        return x, [_stack(hs), _stack(cs)]

    def _layers(self, x, states, run):
        """The layer stack over per-direction runner `run(x, state, params, reverse)`."""
        dirs = 2 if self.bidirectional else 1
        unbound = [s.unbind(0) for s in states]
        finals: list[list] = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                o, fin = run(x, tuple(u[idx] for u in unbound), self._layer_params(layer, d),
                             d == 1)
                outs.append(o)
                for lst, f in zip(finals, fin):
                    lst.append(f)
            x = outs[0] if dirs == 1 else _cat(outs, -1)
            x = self._dropout_between(x, layer)
        return x, [_stack(f) for f in finals]

    def _forward(self, input, hx):
        from ..utils.rnn import PackedSequence

        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, states, unbatched = self._prepare(input, hx)
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if self._uses_fused_lstm(x):
            x, final = self._fused_lstm(x, states)
            if self.batch_first:
                x = x.transpose(0, 1)
        else:
            cell = _cell_fn(self.mode)
            x, final = self._layers(
                x, states, lambda inp, st, p, rev: _full_layer(cell, inp, st, p, rev))
            if self.batch_first:
                # PyTorch transposes the LSTM output out of place, the others in place.
                x = x.transpose(0, 1) if self.mode == "LSTM" else call(_R.transpose_, x, 0, 1)
        if unbatched:
            x = x.squeeze(0 if self.batch_first else 1)
            final = [f.squeeze(1) for f in final]
        return x, final

    def _forward_packed(self, input, hx):
        from ..utils.rnn import PackedSequence, _permute

        data, batch_sizes, sorted_indices, unsorted_indices = input
        sizes = [int(b) for b in batch_sizes.tolist()]
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        batch = sizes[0] if sizes else 0
        if hx is None:
            states = self._zero_states(batch, data.dtype)
        else:
            states = list(hx) if isinstance(hx, (tuple, list)) else [hx]
            states = [_permute(s, sorted_indices) for s in states]
            self._check_states(states, batch)
        cell = _cell_fn(self.mode)

        def run(inp, st, p, rev):
            layer = _reversed_packed_layer if rev else _packed_layer
            return layer(cell, inp, sizes, st, p)

        out, final = self._layers(data, states, run)
        final = [_permute(f, unsorted_indices) for f in final]
        return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), final

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

    def _params(self) -> dict:
        return {"weight_ih": self.weight_ih, "weight_hh": self.weight_hh,
                "bias_ih": self.bias_ih, "bias_hh": self.bias_hh}

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
        (h,) = _rnn_cell(self.nonlinearity, x, (h,), self._params(), False)
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        """(h', c') (hx defaults to zeros)."""
        x, (h, c), unbatched = self._prepare(input, hx, 2)
        h, c = _lstm_cell(x, (h, c), self._params(), False)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step; forward(input, hx=None) -> h'."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        """The next hidden state (hx defaults to zeros)."""
        x, (h,), unbatched = self._prepare(input, hx, 1)
        (h,) = _gru_cell(x, (h,), self._params(), False)
        return h.squeeze(0) if unbatched else h


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
