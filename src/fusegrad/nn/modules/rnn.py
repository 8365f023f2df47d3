"""Recurrent layers: RNN (tanh/relu), LSTM and GRU, and their single-step cells.

The layers record the graph PyTorch's CPU implementation records, so backward node names match:

- float32 LSTM without projections (PyTorch's oneDNN path): one `mkldnn_rnn_layer` op per layer
  and direction (`MkldnnRnnLayerBackward0`), the hidden states picked with `select`;
- otherwise the layer is built from elementary ops: the input projection of the whole sequence
  is one `linear`, `unbind` splits it into time steps, each step applies the recurrent `linear`
  and the gate arithmetic (gates split with `unsafe_chunk`), and `stack` joins the outputs;
- a PackedSequence runs step by step on slices of the packed data, narrowing the hidden state
  as sequences end (PyTorch's packed layers), and joins outputs and states with `cat`.

The GRU and the RNN (float32/float64) take their whole-layer ops `_gru_layer`/`_rnn_layer` (one
per layer and direction, `ops/rnn_gru.py`) wherever no graph PyTorch would record is kept: a
forward that records nothing (no_grad, nothing requiring grad), and any tracing mode (ONNX
export, compile's capture and AOT tracing), where one op keeps the sequence axis dynamic and
compiled code free of an unrolled loop. While autograd records, they run step by step, so the
graph has PyTorch's nodes (`EAGER_GRAD_LAYER_OPS` makes them take the layer ops there too).
"""

import math
import numbers
import sys
import warnings

from ... import _creation
from ..._dispatch import call, tracing_mode
from ..._functions import cat as _cat
from ..._functions import stack as _stack
from ..._tensor import Tensor
from ..._thread_state import local as _thread_local
from ..._warn import warn_once_at_caller
from ...ops import rnn as _R
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

# Whether the GRU and RNN take their layer ops while autograd records a graph through them.
# Off: they then record PyTorch's per-step nodes (its CPU GRU/RNN have no fused layer node), as
# tests/test_nn_recurrent.py compares; on, a training step is faster (one node per layer and
# direction) but the graph's node names are fusegrad's own (`GruLayerBackward0`, ...).
EAGER_GRAD_LAYER_OPS = False

# PyTorch's oneDNN LSTM (float32 input) and the errors it raises for a state or weight of
# another dtype: the half types get no primitive, the rest no oneDNN type at all.
_ONEDNN_HALF = ("float16", "bfloat16")
_NO_ONEDNN_PRIMITIVE = ("could not create a primitive descriptor for the LSTM forward "
                        "propagation primitive. Run workload with environment variable "
                        "ONEDNN_VERBOSE=all to get additional diagnostic information.")
_LSTM_OVERLOADS = (
    " * (Tensor data, Tensor batch_sizes, tuple of Tensors hx, tuple of Tensors params, "
    "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional)\n"
    "      didn't match because some of the arguments have invalid types: {0}\n"
    " * (Tensor input, tuple of Tensors hx, tuple of Tensors params, bool has_biases, "
    "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first)\n"
    "      didn't match because some of the arguments have invalid types: {1}\n")


def _lstm_hx_type_error(input, hx, weights: list, packed: bool) -> TypeError:
    """PyTorch's argument-parser error for an LSTM given one tensor as its state: neither
    `lstm` overload takes a tensor where the (h_0, c_0) tuple goes."""
    x, h = type(input).__name__, type(hx).__name__
    params = "list of [" + ", ".join(type(w).__name__ for w in weights) + "]"
    if packed:
        got = f"({x}, Tensor, {h}, list, bool, int, float, bool, bool)"
        first = f"({x}, Tensor, !{h}!, !{params}!, bool, int, float, bool, bool)"
        second = f"({x}, !Tensor!, !{h}!, !{params}!, !bool!, int, !float!, bool, bool)"
    else:
        got = f"({x}, {h}, list, bool, int, float, bool, bool, bool)"
        first = f"({x}, {h}, !{params}!, !bool!, !int!, !float!, !bool!, bool, bool)"
        second = f"({x}, !{h}!, !{params}!, bool, int, float, bool, bool, bool)"
    return TypeError(f"lstm() received an invalid combination of arguments - got {got}, but "
                     "expected one of:\n" + _LSTM_OVERLOADS.format(first, second))


def _check_onednn_dtypes(tensors) -> None:
    """The float32 oneDNN LSTM's error for any state or weight that is not float32."""
    for t in tensors:
        name = t.dtype.name
        if name != "float32":
            raise RuntimeError(_NO_ONEDNN_PRIMITIVE if name in _ONEDNN_HALF
                               else "get_mkldnn_dtype: unsupported data type")


# ---------------------------------------------------------------- one time step
# Each cell takes the step input `x` (already projected by W_ih when `pre` is true) and the
# state tuple, and returns the new state tuple; element 0 is the step's output.


def _apply_permutation(tensor: Tensor, permutation: Tensor, dim: int = 1) -> Tensor:
    """`tensor` with its batch dimension `dim` reordered by `permutation`."""
    return tensor.index_select(dim, permutation)


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


def _layer_op(mode: str, x, state: tuple, p: dict, reverse: bool):
    """One GRU or RNN layer and direction as its whole-layer op: (outputs, (final state,))."""
    b_ih, b_hh = p["bias_ih"], p["bias_hh"]
    has_biases = b_ih is not None
    if not has_biases:  # (zeros the op adds; it gives them no gradient)
        b_ih = _creation.zeros(p["weight_ih"].shape[0], dtype=x.dtype, device=_device_of(x))
        b_hh = b_ih
    args = (x, p["weight_ih"], p["weight_hh"], b_ih, b_hh, state[0], reverse, has_biases)
    if mode == "GRU":
        out, h, _ = call(_R.gru_layer, *args)
    else:
        out, h, _ = call(_R.rnn_layer, *args, mode == "RNN_RELU")
    return out, (h,)


def _compiler_markers():
    """The compiler's markers module, None while the compiler is not loaded (read from
    `sys.modules`: nn sits below the compiler). Marked as `assume_constant_result` does, so
    compile's capture calls it once with no guard on `sys.modules`."""
    return sys.modules.get("fusegrad.compiler.markers")


_compiler_markers._fusegrad_constant_result = True


def _compiling() -> bool:
    """Whether compile's capture translates this code (its `is_compiling` answers True
    there)."""
    markers = _compiler_markers()
    return markers is not None and markers.is_compiling()


# ---------------------------------------------------------------- multi-layer recurrent layers


def _device_of(t):
    """The device to make `t`'s companions on: None (the CPU, at no cost) unless `t` lives
    elsewhere (the meta device)."""
    return None if t._plain else t.device


_PROJ_ONLY_LSTM = "proj_size argument is only supported for LSTM, not RNN or GRU"


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
            raise ValueError(_PROJ_ONLY_LSTM)
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

    # PyTorch caches the weight list the fused kernels take; here `_flat_weights` is read
    # from the module each time, so these have nothing to refresh.
    def _init_flat_weights(self) -> None:
        """No-op: `_flat_weights` always reads the current weights."""

    def _update_flat_weights(self) -> None:
        """No-op: `_flat_weights` always reads the current weights."""

    def _weights_have_changed(self) -> bool:
        """False: there is no cached weight list to go stale."""
        return False

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
        params = self._parameters
        # A weight that weight_norm, pruning or a parametrization replaced is no longer a
        # registered parameter: read it as an attribute then (the common case stays a get).
        return {k: params.get(f"{k}{sfx}") if f"{k}{sfx}" in params
                else getattr(self, f"{k}{sfx}", None) for k in keys}

    def _expected_hidden(self, batch: int, cell: bool = False) -> tuple:
        dirs = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 and not cell else self.hidden_size
        return (self.num_layers * dirs, batch, size)

    def _check_hidden(self, hx, expected, msg: str = "Expected hidden size {}, got {}") -> None:
        size = hx.size()
        if tuple(size) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(size)))

    def _check_states(self, states, batch: int) -> None:
        if self.mode == "LSTM":
            self._check_hidden(states[0], self._expected_hidden(batch),
                               "Expected hidden[0] size {}, got {}")
            self._check_hidden(states[1], self._expected_hidden(batch, cell=True),
                               "Expected hidden[1] size {}, got {}")
        else:
            self._check_hidden(states[0], self._expected_hidden(batch))

    def _check_state_pair(self, input, hx, packed: bool) -> None:
        """What PyTorch's `lstm` op rejects of a checked state: one tensor in place of the
        (h_0, c_0) pair, or a sequence of another length."""
        if isinstance(hx, Tensor):
            raise _lstm_hx_type_error(input, hx, self._flat_weights, packed)
        if len(hx) != 2:
            raise RuntimeError("lstm expects two hidden states")

    # PyTorch's public checking methods (subclasses and wrappers call them); the forward
    # runs its own checks, in PyTorch's order and with its messages.

    def check_input(self, input: Tensor, batch_sizes: Tensor | None) -> None:
        """The input's dtype (the weights'), rank (2 packed, else 3) and feature size."""
        self._check_input_dtype(input)
        rank = 2 if batch_sizes is not None else 3
        if input.dim() != rank:
            raise RuntimeError(f"input must have {rank} dimensions, got {input.dim()}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def _mini_batch(self, input: Tensor, batch_sizes: Tensor | None) -> int:
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return input.shape[0] if self.batch_first else input.shape[1]

    def get_expected_hidden_size(self, input: Tensor,
                                 batch_sizes: Tensor | None) -> tuple[int, int, int]:
        """(layers * directions, batch, hidden or projection size) of the hidden state."""
        return self._expected_hidden(self._mini_batch(input, batch_sizes))

    def check_hidden_size(self, hx: Tensor, expected_hidden_size,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        """RuntimeError `msg` unless `hx` has the expected size."""
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor,
                           batch_sizes: Tensor | None) -> None:
        """`check_input`, then the hidden state's size."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx: Tensor, permutation: Tensor | None) -> Tensor:
        """The hidden state with its batch reordered by `permutation` (None: unchanged)."""
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    def _check_input_dtype(self, input) -> None:
        """PyTorch's check that the input has the weights' dtype (skipped under autocast,
        which casts them to one dtype)."""
        weight = self._flat_weights[0]
        if input.dtype != weight.dtype and not _thread_local.autocast_enabled:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({weight.dtype}). Convert input: input.to({weight.dtype}), or "
                             f"convert model: model.to({input.dtype})")

    def _zero_states(self, batch: int, like) -> list:
        """Zero states of `like`'s dtype and device (a meta input's are meta tensors)."""
        shapes = [self._expected_hidden(batch)]
        if self.mode == "LSTM":
            shapes.append(self._expected_hidden(batch, cell=True))
        return [_creation.zeros(s, dtype=like.dtype, device=_device_of(like)) for s in shapes]

    def _prepare(self, input, hx):
        """(time-major batched input, full states list, unbatched flag), after PyTorch's
        checks of the input and the given state, in its order."""
        lstm = self.mode == "LSTM"
        dims = input.dim()
        if dims not in (2, 3):
            if self.mode.startswith("RNN"):
                raise ValueError(f"RNN: Expected input to be 2D or 3D, got {dims}D tensor "
                                 "instead")
            raise ValueError(f"{self.mode}: Expected input to be 2D or 3D, got {dims}D instead")
        unbatched = dims == 2
        kind, want = ("unbatched 2-D", 2) if unbatched else ("batched 3-D", 3)
        states = hx
        if hx is not None:
            if lstm:
                # PyTorch indexes the state as a pair: a single tensor is indexed along its
                # first dimension (so a (1, N, H) one fails with an IndexError)
                h0, c0 = hx[0], hx[1]
                if h0.dim() != want or c0.dim() != want:
                    raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D "
                                       f"but got ({h0.dim()}-D, {c0.dim()}-D) tensors")
                if unbatched:
                    states = [h0.unsqueeze(1), c0.unsqueeze(1)]
            else:
                if hx.dim() != want:
                    raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got "
                                       f"{hx.dim()}-D tensor")
                states = [hx.unsqueeze(1) if unbatched else hx]
        self._check_input_dtype(input)
        if unbatched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        if self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batch = input.shape[1]
        if states is None:
            states = self._zero_states(batch, input)
        else:
            self._check_states(states, batch)
            if lstm:
                self._check_state_pair(input, states, packed=False)
            states = list(states)
        return input, states, unbatched

    def _uses_fused_lstm(self, x) -> bool:
        # PyTorch's oneDNN LSTM: float32, no projections, a non-empty input, oneDNN enabled
        # (`backends.mkldnn.flags(enabled=False)` gives the default implementation).
        from ...backends import mkldnn

        return (self.mode == "LSTM" and x.dtype.name == "float32" and self.proj_size == 0
                and x.numel() != 0 and mkldnn.enabled)

    def _uses_layer_ops(self, x, states) -> bool:
        """Whether a GRU/RNN runs its layers as `_gru_layer`/`_rnn_layer` (module docstring):
        float32/float64 outside autocast, a non-empty input, and a trace being made or no
        graph being recorded (unless `EAGER_GRAD_LAYER_OPS`)."""
        if (self.mode == "LSTM" or x.dtype.name not in ("float32", "float64")
                or _thread_local.autocast_enabled or x.numel() == 0):
            return False
        if EAGER_GRAD_LAYER_OPS or _compiling() or tracing_mode() or not _thread_local.grad_enabled:
            return True
        return not (x.requires_grad or any(s.requires_grad for s in states)
                    or any(w is not None and w.requires_grad for w in self._flat_weights))

    def _warn_projections(self, x) -> None:
        """PyTorch's CPU LSTM would take oneDNN for this input (float32, oneDNN enabled,
        non-empty, not meta) but cannot with projections: it says so once and runs its default
        implementation. (Half types take oneDNN only on CPUs with native bfloat16/float16
        support, which PyTorch's build checks at run time; they are left out here.)"""
        from ...backends import mkldnn

        if (self.mode == "LSTM" and self.proj_size > 0 and mkldnn.enabled
                and x.dtype.name == "float32" and x.numel() != 0 and not x.is_meta):
            warn_once_at_caller("LSTM with projections is not supported with oneDNN. Using "
                                "default implementation.")

    def _dropout_between(self, x, layer: int):
        if self.dropout > 0 and self.training and layer < self.num_layers - 1:
            x = F.dropout(x, self.dropout, True)
        return x

    def _fused_lstm(self, x, states):
        """Float32 LSTM: one `mkldnn_rnn_layer` per layer and direction."""
        dirs = 2 if self.bidirectional else 1
        hx, cx = states
        _check_onednn_dtypes(states)
        x = x.contiguous()
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                p = self._layer_params(layer, d)
                b_ih, b_hh = p["bias_ih"], p["bias_hh"]
                if b_ih is None:
                    b_ih = _creation.zeros(p["weight_ih"].shape[0], dtype=x.dtype,
                                           device=_device_of(x))
                    b_hh = _creation.zeros(p["weight_hh"].shape[0], dtype=x.dtype,
                                           device=_device_of(x))
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
        self._warn_projections(x)
        if self._uses_fused_lstm(x):
            x, final = self._fused_lstm(x, states)
            if self.batch_first:
                x = x.transpose(0, 1)
        else:
            if self._uses_layer_ops(x, states):
                mode = self.mode
                x, final = self._layers(
                    x, states, lambda inp, st, p, rev: _layer_op(mode, inp, st, p, rev))
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
        lstm = self.mode == "LSTM"
        if not lstm:  # PyTorch's packed LSTM skips this check (it fails in the matmul)
            self._check_input_dtype(data)
        states = hx
        if hx is not None:
            if lstm:
                if sorted_indices is not None:  # reordering makes a pair of any state
                    states = (_permute(hx[0], sorted_indices), _permute(hx[1], sorted_indices))
                else:
                    self._check_state_pair(data, hx, packed=True)
            else:
                states = [_permute(hx, sorted_indices)]
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        batch = sizes[0] if sizes else 0
        if states is None:
            states = self._zero_states(batch, data)
        else:
            self._check_states(states, batch)
            states = list(states)
        if lstm and self._uses_fused_lstm(data):
            _check_onednn_dtypes(states + self._flat_weights)
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

    def __init__(self, *args, **kwargs) -> None:
        """PyTorch's arguments: input_size, hidden_size, num_layers=1, nonlinearity='tanh',
        then RNNBase's (bias, batch_first, dropout, bidirectional, proj_size, device, dtype);
        a `proj_size` keyword is refused."""
        if "proj_size" in kwargs:
            raise ValueError(_PROJ_ONLY_LSTM)
        # (the fourth positional argument is the nonlinearity, the rest RNNBase's)
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, *args, **kwargs)
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

    def get_expected_cell_size(self, input: Tensor,
                               batch_sizes: Tensor | None) -> tuple[int, int, int]:
        """(layers * directions, batch, hidden size) of the cell state."""
        return self._expected_hidden(self._mini_batch(input, batch_sizes), cell=True)

    def check_forward_args(self, input: Tensor, hidden: tuple,  # type: ignore[override]
                           batch_sizes: Tensor | None) -> None:
        """`check_input`, then the sizes of the hidden and the cell state."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx: tuple, permutation: Tensor | None) -> tuple:
        """Both states with their batch reordered by `permutation` (None: unchanged)."""
        if permutation is None:
            return hx
        return _apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation)

    def forward(self, input, hx=None):
        """(output, (h_n, c_n))."""
        out, (h, c) = self._forward(input, hx)
        return out, (h, c)


class GRU(RNNBase):
    """Gated recurrent unit layer; forward(input, h_0=None) -> (output, h_n)."""

    def __init__(self, *args, **kwargs) -> None:
        """RNNBase's arguments (input_size, hidden_size, num_layers=1, bias=True,
        batch_first=False, dropout=0.0, bidirectional=False, ...); a `proj_size` keyword is
        refused."""
        if "proj_size" in kwargs:
            raise ValueError(_PROJ_ONLY_LSTM)
        super().__init__("GRU", *args, **kwargs)

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

    _cell_name = "RNNCellBase"

    def _check_input_rank(self, input) -> None:
        if input.dim() not in (1, 2):
            raise ValueError(f"{self._cell_name}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")

    @staticmethod
    def _batch_input(input):
        """(the input as a batch, whether it was one)."""
        batched = input.dim() == 2
        return (input if batched else input.unsqueeze(0)), batched

    def _zeros(self, input):
        return _creation.zeros((input.shape[0], self.hidden_size), dtype=input.dtype,
                               device=_device_of(input))

    def _check_step(self, input, states) -> None:
        """PyTorch's checks of a cell step: the input's feature size, then each state's batch
        and feature sizes (a 1-D state has no feature size to read: an IndexError)."""
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        for i, h in enumerate(states):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} "
                                   f"batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, "
                                   f"expected {self.hidden_size}")

    def _one_state(self, input, hx):
        """(batched input, [h], unbatched flag) of RNNCell and GRUCell, checked."""
        self._check_input_rank(input)
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{self._cell_name}: Expected hidden to be 1D or 2D, got "
                             f"{hx.dim()}D instead")
        input, batched = self._batch_input(input)
        if hx is None:
            hx = self._zeros(input)
        elif not batched:
            hx = hx.unsqueeze(0)
        self._check_step(input, [hx])
        return input, [hx], not batched

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

    _cell_name = "RNNCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """The next hidden state (hx defaults to zeros)."""
        x, (h,), unbatched = self._one_state(input, hx)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        (h,) = _rnn_cell(self.nonlinearity, x, (h,), self._params(), False)
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c')."""

    _cell_name = "LSTMCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor,
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """(h', c') (hx defaults to zeros)."""
        self._check_input_rank(input)
        if hx is not None:
            # PyTorch iterates the state: a single tensor's rows count as its states
            for i, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{i}] to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
        x, batched = self._batch_input(input)
        if hx is None:
            hx = (self._zeros(x), self._zeros(x))
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        if isinstance(hx, Tensor):
            raise TypeError("lstm_cell(): argument 'hx' (position 2) must be tuple of "
                            f"Tensors, not {type(hx).__name__}")
        if len(hx) != 2:
            raise RuntimeError("lstm_cell expects two hidden states")
        self._check_step(x, hx)
        h, c = _lstm_cell(x, tuple(hx), self._params(), False)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step; forward(input, hx=None) -> h'."""

    _cell_name = "GRUCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """The next hidden state (hx defaults to zeros)."""
        x, (h,), unbatched = self._one_state(input, hx)
        (h,) = _gru_cell(x, (h,), self._params(), False)
        return h.squeeze(0) if unbatched else h


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
