"""Ops the recurrent layers record as PyTorch does: `unsafe_split`/`unsafe_chunk` (the gate
split of the LSTM and GRU cells, `UnsafeSplitBackward0`), `transpose_` (the in-place transpose
of a batch-first RNN/GRU output, `TransposeBackward1`), `mkldnn_rnn_layer` (one whole float32
LSTM layer and direction, `MkldnnRnnLayerBackward0`) and `_pack_padded_sequence`
(`PackPaddedSequenceBackward0`).

`mkldnn_rnn_layer` keeps ATen's signature. Its kernel projects the inputs of all time steps
with one GEMM and loops over time for the recurrence; its derivative is backpropagation
through time written with fusegrad ops (it recomputes the gates from the saved inputs), so it
can be differentiated again. ATen's fourth output is an opaque oneDNN workspace; fusegrad
keeps no workspace and returns an empty uint8 tensor there.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import Spec, rand_array, wrap_dim
from .joins import (
    _split_derivative,
    _split_sizes,
    _split_tensor_decomposition,
    _split_tensor_meta,
)
from .registry import Sample, register
from .views import _transpose_kernel, _transpose_meta


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


# ---------------------------------------------------------------- unsafe_split, unsafe_chunk


def _unsafe_split_kernel(a, split_size, dim=0, chunks=None):
    """The pieces, in the input's memory with its strides (as PyTorch's are); `chunks` empty
    ones for unsafe_chunk of an empty dim. The op is no view op: autograd treats the pieces
    as independent tensors (PyTorch's "unsafe" variant), with no view bookkeeping tying them
    to the input."""
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    sizes = _split_sizes(a.shape[d], int(split_size)) if chunks is None else [0] * chunks
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(a, bounds, axis=d))


def _unsafe_split_meta(a, split_size, dim=0):
    return [Spec(tuple(s.shape), s.dtype, s.strides)
            for s in _split_tensor_meta(a, split_size, dim)]


def _chunk_size(shape, chunks, dim):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if len(shape) == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    size = shape[wrap_dim(dim, len(shape))]
    return max((size + chunks - 1) // chunks, 1)


def _unsafe_split_decomposition(a, split_size, dim=0):
    """split's slices, copied (the pieces are independent tensors)."""
    return tuple(p.clone() for p in _split_tensor_decomposition(a, split_size, dim))


def _unsafe_split_derivative(grads, shape, dim, split):
    """The pieces' gradients joined along `dim` (as for `split`)."""
    return _split_derivative(grads, shape, dim, split)


def _split_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), z, d), name=f"{s} {z} {d}")
            for s, z, d in (((3, 8), 2, 1), ((5,), 2, 0), ((4, 2), 4, 0), ((2, 12), 4, -1))]


def _unsafe_chunk_meta(a, chunks, dim=0):
    shape = tuple(a.shape)
    split = _chunk_size(shape, chunks, dim)
    if shape[wrap_dim(dim, len(shape))] == 0:  # `chunks` empty pieces
        return [Spec(shape, a.dtype, tuple(a.stride())) for _ in range(chunks)]
    return _unsafe_split_meta(a, split, dim)


def _chunk_onnx(b, inputs, args, kwargs, opset):
    """unsafe_chunk(self, chunks, dim=0): the Split of split.Tensor by the chunk size."""
    dim = args[2] if len(args) > 2 else 0
    size = _chunk_size(tuple(args[0].shape), args[1], dim)
    return ox.split_dynamic(b, inputs, (args[0], size, dim), kwargs, opset)


unsafe_split = register(
    "unsafe_split.Tensor", kernel=_unsafe_split_kernel, meta=_unsafe_split_meta,
    node="UnsafeSplitBackward0", derivative=_unsafe_split_derivative,
    save=lambda out, a, split_size, dim=0: (a.shape, dim, split_size),
    samples=_split_samples, public="unsafe_split", decomposition=_unsafe_split_decomposition,
    onnx=ox.split_dynamic)

unsafe_chunk = register(
    "unsafe_chunk",
    kernel=lambda a, chunks, dim=0: _unsafe_split_kernel(
        a, _chunk_size(a.shape, chunks, dim), dim,
        chunks if a.shape[wrap_dim(dim, a.ndim)] == 0 else None),
    meta=_unsafe_chunk_meta,
    node="UnsafeSplitBackward0", derivative=_unsafe_split_derivative,
    save=lambda out, a, chunks, dim=0: (a.shape, dim, chunks),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), c, d), name=f"{s} {c} {d}")
                             for s, c, d in (((3, 8), 4, 1), ((5,), 2, 0), ((2, 12), 3, -1))],
    public="unsafe_chunk", onnx=_chunk_onnx,
    decomposition=lambda a, chunks, dim=0: _unsafe_split_decomposition(
        a, _chunk_size(tuple(a.shape), chunks, dim), dim))


# ---------------------------------------------------------------- transpose_


transpose_ = register(
    "transpose_", kernel=_transpose_kernel, meta=_transpose_meta, inplace=True,
    metadata_only=True, node="TransposeBackward1",
    derivative=lambda g, d0, d1: (g.transpose(d0, d1), None, None),
    save=lambda out, a, d0, d1: (d0, d1), onnx=ox.transpose_inplace,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), i, j)) for s, i, j in (
        ((3, 4), 0, 1), ((2, 3, 4), -1, 0), ((2, 3), 1, 1))],
    public="transpose_")


# ---------------------------------------------------------------- mkldnn_rnn_layer (LSTM)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_layer_kernel(x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode,
                       hidden_size, num_layers, has_biases, bidirectional, batch_first, train):
    # The input is time-major whatever `batch_first` says: the caller transposes (as ATen's
    # caller does) and the flag only travels along.
    steps, batch = x.shape[0], x.shape[1]
    h4 = w_ih.shape[0]
    proj = (x.reshape(steps * batch, -1) @ w_ih.T).reshape(steps, batch, h4)
    if has_biases:
        proj = proj + (b_ih + b_hh)
    w_hh_t = w_hh.T
    out = np.empty((steps, batch, hidden_size), x.dtype)
    h, c = hx, cx
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        gates = proj[t] + h @ w_hh_t
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out[t] = h
    dt = x.dtype
    return (out, np.asarray(h, dt), np.asarray(c, dt), np.empty((0,), np.uint8))


def _lstm_layer_meta(x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode,
                     hidden_size, num_layers, has_biases, bidirectional, batch_first, train):
    if mode != 2:
        raise RuntimeError("mkldnn_rnn_layer: only mode 2 (LSTM) is supported")
    if len(x.shape) != 3:
        raise RuntimeError(f"mkldnn_rnn_layer: expected a 3-D input, got {len(x.shape)}-D")
    steps, batch = x.shape[0], x.shape[1]
    if tuple(w_ih.shape) != (4 * hidden_size, x.shape[2]):
        raise RuntimeError(f"mkldnn_rnn_layer: weight0 has shape {list(w_ih.shape)}, expected "
                           f"{[4 * hidden_size, x.shape[2]]}")
    for name, t in (("hx_", hx), ("cx_", cx)):
        if tuple(t.shape) != (batch, hidden_size):
            raise RuntimeError(f"mkldnn_rnn_layer: {name} has shape {list(t.shape)}, expected "
                               f"{[batch, hidden_size]}")
    return [Spec((steps, batch, hidden_size), x.dtype), Spec((batch, hidden_size), x.dtype),
            Spec((batch, hidden_size), x.dtype), Spec((0,), _dtype.uint8)]


def _lstm_layer_derivative(grads, x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, has_biases):
    """Backpropagation through time, in fusegrad ops (so it is differentiable again)."""
    from .._dispatch import call
    from .joins import cat, stack

    g_out, g_hy, g_cy = grads[0], grads[1], grads[2]
    steps, batch, n_in = x.shape
    hsz = hx.shape[1]
    x2 = x.reshape(steps * batch, n_in)
    proj = x2.mm(w_ih.t()).reshape(steps, batch, 4 * hsz)
    if has_biases:
        proj = proj + (b_ih + b_hh)
    w_hh_t = w_hh.t()
    order = list(range(steps - 1, -1, -1)) if reverse else list(range(steps))
    # Forward again, keeping each step's gates and previous state.
    h, c = hx, cx
    cache = {}
    for t in order:
        gates = proj[t] + h.mm(w_hh_t)
        i = gates[:, :hsz].sigmoid()
        f = gates[:, hsz:2 * hsz].sigmoid()
        g = gates[:, 2 * hsz:3 * hsz].tanh()
        o = gates[:, 3 * hsz:].sigmoid()
        c_new = f * c + i * g
        tc = c_new.tanh()
        cache[t] = (h, c, i, f, g, o, tc)
        h, c = o * tc, c_new
    # Backward in the opposite order.
    dh, dc = g_hy, g_cy
    d_gates = [None] * steps
    for t in reversed(order):
        h_prev, c_prev, i, f, g, o, tc = cache[t]
        dh = dh + g_out[t]
        d_o = dh * tc
        dct = dc + dh * o * (1 - tc * tc)
        dgt = call(cat, [dct * g * i * (1 - i), dct * c_prev * f * (1 - f),
                         dct * i * (1 - g * g), d_o * o * (1 - o)], 1)
        dc = dct * f
        dh = dgt.mm(w_hh)
        d_gates[t] = dgt
    dg2 = call(stack, d_gates, 0).reshape(steps * batch, 4 * hsz)
    h_prevs = call(stack, [cache[t][0] for t in range(steps)], 0).reshape(steps * batch, hsz)
    dx = dg2.mm(w_ih).reshape(steps, batch, n_in)
    dw_ih = dg2.t().mm(x2)
    dw_hh = dg2.t().mm(h_prevs)
    db = dg2.sum(0) if has_biases else None
    return (dx, dw_ih, dw_hh, db, db, dh, dc) + (None,) * 9


def lstm_layer_sample_args(rng, dt, steps=3, batch=2, n_in=3, hsz=4, reverse=False,
                           has_biases=True, train=True) -> tuple:
    """Arguments of `mkldnn_rnn_layer` as the LSTM module passes them (tests use these)."""
    return (rand_array(rng, (steps, batch, n_in), dt), rand_array(rng, (4 * hsz, n_in), dt),
            rand_array(rng, (4 * hsz, hsz), dt), rand_array(rng, (4 * hsz,), dt),
            rand_array(rng, (4 * hsz,), dt), rand_array(rng, (batch, hsz), dt),
            rand_array(rng, (batch, hsz), dt), reverse, [], 2, hsz, 1, has_biases, False,
            False, train)


# No samples for the registry walk: ATen's op exists for float32 only ("get_mkldnn_dtype:
# unsupported data type" in float64, so the walk's float64 pass and gradcheck cannot use it),
# and its fourth output is an opaque oneDNN buffer no kernel can reproduce.
# tests/test_nn_recurrent.py checks it against ATen (float32, first three outputs, with the
# arguments the LSTM module passes), with gradcheck and gradgradcheck (float64) and fakes.
mkldnn_rnn_layer = register(
    "mkldnn_rnn_layer", autocast="lower", kernel=_lstm_layer_kernel, meta=_lstm_layer_meta,
    node="MkldnnRnnLayerBackward0", derivative=_lstm_layer_derivative,
    save=lambda out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, *rest: (
        x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, rest[4]),
    nondiff_outputs=(3,), nondiff_args=(8,), public="mkldnn_rnn_layer",
    forward_ad="unsupported",  # (PyTorch has no forward formula: its float32 LSTM refuses)
    samples=lambda rng, dt: [],
    tolerance={"float32": 1e-4}, onnx=ox.lstm_layer)


# ---------------------------------------------------------------- _pack_padded_sequence


def _check_lengths(lengths, batch, legacy: str = "Long"):
    """PyTorch's checks of the lengths (int64 here); `legacy` names the dtype they came in,
    which its message quotes (always Long from pack_padded_sequence, which converts them)."""
    if lengths.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.ndim}D cpu {legacy} tensor")
    if lengths.shape[0] != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.shape[0]} (batch_size={batch})")
    if lengths.size and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if np.any(np.diff(lengths) > 0):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")


def _batch_sizes(lengths) -> np.ndarray:
    steps = int(lengths[0]) if lengths.size else 0
    return (lengths[None, :] > np.arange(steps)[:, None]).sum(1).astype(np.int64)


def _pack_kernel(x, lengths, batch_first):
    lengths = np.asarray(lengths)
    legacy = _dtype.FROM_NP[lengths.dtype].legacy if lengths.dtype in _dtype.FROM_NP else "Long"
    lengths = lengths.astype(np.int64)
    if batch_first:
        x = np.swapaxes(x, 0, 1)
    _check_lengths(lengths, x.shape[1], legacy)
    sizes = _batch_sizes(lengths)
    # (contiguous whatever the input's layout, as PyTorch's kernel writes it; NumPy's
    # concatenation follows its pieces' order)
    data = np.ascontiguousarray(np.concatenate([x[t, :b] for t, b in enumerate(sizes)], 0))
    return data, sizes


def _pack_meta(x, lengths, batch_first):
    from .._fake import DataDependentOutputError

    # The packed length is the sum of the lengths: data, not shape.
    if type(lengths).__name__ == "FakeTensor" or not hasattr(lengths, "numpy"):
        raise DataDependentOutputError("_pack_padded_sequence")
    lens = lengths.numpy().astype(np.int64)
    batch = x.shape[0] if batch_first else x.shape[1]
    _check_lengths(lens, batch, lengths.dtype.legacy)
    return [Spec((int(lens.sum()),) + tuple(x.shape[2:]), x.dtype),
            Spec((int(lens[0]) if lens.size else 0,), _dtype.int64)]


def _pack_index(lengths, batch, steps, batch_first) -> np.ndarray:
    """For each packed row, its row in the flattened leading two dimensions of the padded
    input ((steps, batch), or (batch, steps) with batch_first)."""
    sizes = _batch_sizes(lengths)
    rows = [t * batch + np.arange(b) for t, b in enumerate(sizes)]
    idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if batch_first:  # row t*batch+b of the time-major layout is b*steps+t batch-major
        idx = (idx % batch) * steps + idx // batch
    return idx


def _pack_derivative(grads, in_shape, lengths, batch_first):
    from .._creation import zeros
    from .._dispatch import call
    from .._tensor import Tensor
    from .joins import cat

    g = grads[0] if isinstance(grads, list) else grads
    lead = in_shape[0] * in_shape[1]
    rest = tuple(in_shape[2:])
    batch, steps = (in_shape[0], in_shape[1]) if batch_first else (in_shape[1], in_shape[0])
    src = _pack_index(lengths, batch, steps, batch_first)
    # Each padded position takes its packed row, or the appended zero row.
    where = np.full(lead, g.shape[0], np.int64)
    where[src] = np.arange(src.size)
    g_ext = call(cat, [g, zeros((1,) + rest, dtype=g.dtype, device=g.device)], 0)
    full = g_ext.index_select(0, Tensor._make(where))
    return (full.reshape(tuple(in_shape)), None, None)


def _pack_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), np.array(lens, np.int64), bf), name=f"{s} {bf}")
            for s, lens, bf in (((4, 3, 2), [4, 2, 1], False), ((3, 4, 2), [4, 2, 2], True),
                                ((3, 2), [3, 1], False), ((5, 3, 2), [3, 3, 1], False),
                                ((3, 5), [4, 4, 1], True))]


pack_padded_sequence = register(
    "_pack_padded_sequence", kernel=_pack_kernel, meta=_pack_meta,
    node="PackPaddedSequenceBackward0", derivative=_pack_derivative,
    save=lambda out, x, lengths, bf: (tuple(x.shape), np.asarray(
        lengths.numpy() if hasattr(lengths, "numpy") else lengths).astype(np.int64), bf),
    nondiff_outputs=(1,), nondiff_args=(1,), samples=_pack_samples,
    public="_pack_padded_sequence", forward_ad="unsupported")


# The GRU's and the Elman RNN's whole-layer ops live beside (importing it registers them).
from .rnn_gru import gru_layer, rnn_layer  # noqa: E402,F401
