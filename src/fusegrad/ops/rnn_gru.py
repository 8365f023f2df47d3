"""Whole-layer ops of the GRU and the Elman RNN (tanh or relu): `_gru_layer` and `_rnn_layer`,
one layer and one direction over all time steps, as `mkldnn_rnn_layer` is for the LSTM, and
their backward ops `_gru_layer_backward` and `_rnn_layer_backward`.

PyTorch has no such ops: its CPU GRU and RNN run cell by cell, and `nn.GRU`/`nn.RNN` take that
path wherever autograd records a graph (so their node names stay PyTorch's). These ops serve
the rest: a forward that records nothing, ONNX export (one `GRU`/`RNN` node, so the sequence
axis can be dynamic) and compiled code (one extern call each way instead of unrolled loops).
The input is time-major (the caller transposes a batch-first one, as for the LSTM).

Kernels project the inputs of all steps with one GEMM and loop over time for the recurrence,
as PyTorch's cells compute (r, z, n gate order; n = tanh(x_n + r * (h W_hn^T + b_hn))). A
third output, a workspace (as oneDNN's), keeps what backpropagation through time reads: each
step's previous state and gates. The derivative runs the backward op on it (one call, NumPy
on arrays when nothing is recorded); where the backward itself is recorded (create_graph,
forward AD) it is written with fusegrad ops from the inputs, so it can be differentiated again.
"""

from __future__ import annotations

import numpy as np

from . import _onnx as ox
from ._util import Spec, rand_array, saved_array
from .registry import register


def _order(steps: int, reverse: bool):
    return range(steps - 1, -1, -1) if reverse else range(steps)


def _check_layer(name: str, gates: int, x, w_ih, w_hh, hx) -> tuple:
    """(steps, batch, hidden) of a layer call, after checking the shapes it relies on."""
    if len(x.shape) != 3:
        raise RuntimeError(f"{name}: expected a 3-D input, got {len(x.shape)}-D")
    steps, batch, n_in = x.shape
    if len(hx.shape) != 2:
        raise RuntimeError(f"{name}: expected a 2-D hx, got {len(hx.shape)}-D")
    hsz = hx.shape[1]
    for arg, t, shape in (("hx", hx, (batch, hsz)), ("w_ih", w_ih, (gates * hsz, n_in)),
                          ("w_hh", w_hh, (gates * hsz, hsz))):
        if tuple(t.shape) != shape:
            raise RuntimeError(f"{name}: {arg} has shape {list(t.shape)}, expected "
                               f"{list(shape)}")
    return steps, batch, hsz


def _input_projection(x, w_ih, b_ih):
    """x W_ih^T + b_ih for every step at once (one GEMM), (steps, batch, gates)."""
    steps, batch = x.shape[0], x.shape[1]
    proj = (x.reshape(steps * batch, -1) @ w_ih.T).reshape(steps, batch, w_ih.shape[0])
    proj += b_ih
    return proj


# Workspace blocks per step: the GRU's previous state, reset, update and new gates and
# h W_hn^T + b_hn; the RNN's previous state and output.
_BLOCKS = {3: 5, 1: 2}


def _meta(name: str, gates: int):
    def meta(x, w_ih, w_hh, b_ih, b_hh, hx, *flags):
        steps, batch, hsz = _check_layer(name, gates, x, w_ih, w_hh, hx)
        for arg, t in (("b_ih", b_ih), ("b_hh", b_hh)):
            if tuple(t.shape) != (gates * hsz,):
                raise RuntimeError(f"{name}: {arg} has shape {list(t.shape)}, expected "
                                   f"{[gates * hsz]}")
        return [Spec((steps, batch, hsz), x.dtype), Spec((batch, hsz), x.dtype),
                Spec((steps, batch, _BLOCKS[gates] * hsz), x.dtype)]

    return meta


def _backward_meta(name: str, gates: int):
    def meta(g_out, g_hy, x, w_ih, w_hh, hx, workspace, *flags):
        _check_layer(name, gates, x, w_ih, w_hh, hx)
        bias = Spec((w_ih.shape[0],), x.dtype)
        return [Spec(tuple(t.shape), x.dtype) for t in (x, w_ih, w_hh)] + [
            bias, bias, Spec(tuple(hx.shape), x.dtype)]

    return meta


def _recording(tensors) -> bool:
    """Whether the derivative itself must be recorded (create_graph, a forward-AD level):
    grad mode is on and one of `tensors` requires grad."""
    from .._thread_state import local

    return local.grad_enabled and any(t is not None and t.requires_grad for t in tensors)


def _zeros_for(g, like):
    """`g`, or zeros shaped as `like` where no gradient reached that output."""
    return like.new_zeros(like.shape) if g is None else g


def _layer_derivative(backward_op, ops_derivative):
    """The derivative of a layer op: its backward op on the workspace, or (while recorded)
    `ops_derivative`, backpropagation through time in fusegrad ops."""
    def derivative(grads, x, w_ih, w_hh, b_ih, b_hh, hx, workspace, reverse, has_biases,
                   *mode):
        from .._dispatch import call

        g_out, g_hy = grads[0], grads[1]
        if _recording((g_out, g_hy, x, w_ih, w_hh, b_ih, b_hh, hx)):
            return ops_derivative(g_out, g_hy, x, w_ih, w_hh, b_ih, b_hh, hx, reverse,
                                  has_biases, *mode)
        g_out = _zeros_for(g_out, workspace[:, :, :hx.shape[1]])
        g_hy = _zeros_for(g_hy, hx)
        dx, dw_ih, dw_hh, db_ih, db_hh, dhx = call(
            backward_op, g_out, g_hy, x, w_ih, w_hh, hx, workspace, reverse, *mode)
        if not has_biases:
            db_ih = db_hh = None
        return (dx, dw_ih, dw_hh, db_ih, db_hh, dhx) + (None,) * (2 + len(mode))

    return derivative


def _on_arrays(backward_kernel):
    """The derivative on arrays: the backward kernel, where every operand is a float array of
    one dtype (else None: the recorded derivative runs)."""
    def on_arrays(grads, x, w_ih, w_hh, b_ih, b_hh, hx, workspace, reverse, has_biases,
                  *mode):
        arrays = [saved_array(a) for a in (x, w_ih, w_hh, hx, workspace)]
        if any(a is None for a in arrays) or len({a.dtype for a in arrays}) != 1:
            return None
        dt = arrays[0].dtype
        gs = []
        for g in grads[:2]:
            if g is not None and (g.__class__ is not np.ndarray or g.dtype != dt):
                return None
            gs.append(g)
        x, w_ih, w_hh, hx, workspace = arrays
        hsz = hx.shape[1]
        g_out = np.zeros(workspace.shape[:2] + (hsz,), dt) if gs[0] is None else gs[0]
        g_hy = np.zeros(hx.shape, dt) if gs[1] is None else gs[1]
        dx, dw_ih, dw_hh, db_ih, db_hh, dhx = backward_kernel(
            g_out, g_hy, x, w_ih, w_hh, hx, workspace, reverse, *mode)
        if not has_biases:
            db_ih = db_hh = None
        return (dx, dw_ih, dw_hh, db_ih, db_hh, dhx) + (None,) * (2 + len(mode))

    return on_arrays


def _weight_grads(dgi, dgh, x, h_prev, w_ih, dhx, shape):
    """The gradients every layer gives from its gate-input gradients on both sides (time-
    major (steps, batch, gates) arrays): input, both weights, both biases, initial state."""
    steps, batch, n_in = shape
    dgi2 = dgi.reshape(steps * batch, -1)
    dgh2 = dgh.reshape(steps * batch, -1)
    dx = (dgi2 @ w_ih).reshape(steps, batch, n_in)
    dw_ih = dgi2.T @ x.reshape(steps * batch, n_in)
    dw_hh = dgh2.T @ h_prev.reshape(steps * batch, -1)
    return dx, dw_ih, dw_hh, dgi2.sum(0), dgh2.sum(0), dhx


# ---------------------------------------------------------------- GRU


def _gru_kernel(x, w_ih, w_hh, b_ih, b_hh, hx, reverse, has_biases):
    proj = _input_projection(x, w_ih, b_ih)
    steps, batch = proj.shape[0], proj.shape[1]
    hsz = hx.shape[1]
    dt = proj.dtype
    out = np.empty((steps, batch, hsz), dt)
    ws = np.empty((steps, batch, 5 * hsz), dt)
    w_hh_t = w_hh.T
    h = hx
    with np.errstate(over="ignore"):  # exp(-x) of a very negative input: inf, sigmoid 0
        for t in _order(steps, reverse):
            gh = h @ w_hh_t
            gh += b_hh
            gi = proj[t]
            w = ws[t]
            w[:, :hsz] = h
            rz = w[:, hsz:3 * hsz]
            np.add(gi[:, :2 * hsz], gh[:, :2 * hsz], out=rz)
            np.negative(rz, out=rz)  # the sigmoid, in place
            np.exp(rz, out=rz)
            rz += 1
            np.reciprocal(rz, out=rz)
            n, hn = w[:, 3 * hsz:4 * hsz], w[:, 4 * hsz:]
            hn[...] = gh[:, 2 * hsz:]
            np.multiply(rz[:, :hsz], hn, out=n)
            n += gi[:, 2 * hsz:]
            np.tanh(n, out=n)
            h = out[t]
            np.subtract(w[:, :hsz], n, out=h)  # (h - n) * z + n
            h *= rz[:, hsz:]
            h += n
    return out, out[0 if reverse else -1].copy(), ws


def _gru_backward_kernel(g_out, g_hy, x, w_ih, w_hh, hx, ws, reverse):
    steps, batch, _ = x.shape
    hsz = hx.shape[1]
    h_prev, r, z, n, hn = (ws[:, :, k * hsz:(k + 1) * hsz] for k in range(5))
    # A step's gate-input gradients are dh (its state's whole gradient) times these: (reset,
    # update, new) on the recurrent side; the input side's new gate lacks the factor r.
    a = (1 - z) * (1 - n * n)
    coef = np.stack([a * hn * r * (1 - r), (h_prev - n) * z * (1 - z), a * r], 2)
    dhs = np.empty((steps, batch, hsz), x.dtype)
    dgh = np.empty((steps, batch, 3, hsz), x.dtype)
    dh = g_hy
    for t in reversed(_order(steps, reverse)):
        dh = dh + g_out[t]
        dhs[t] = dh
        d = dgh[t]
        np.multiply(dh[:, None, :], coef[t], out=d)
        dh = dh * z[t] + d.reshape(batch, 3 * hsz) @ w_hh
    dgi = dgh.copy()
    dgi[:, :, 2] = dhs * a
    return _weight_grads(dgi, dgh, x, h_prev, w_ih, np.asarray(dh, x.dtype), x.shape)


def _gru_ops_derivative(g_out, g_hy, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, has_biases):
    """Backpropagation through time in fusegrad ops (so it is differentiable again)."""
    from .._dispatch import call
    from .joins import cat, stack

    steps, batch, n_in = x.shape
    hsz = hx.shape[1]
    x2 = x.reshape(steps * batch, n_in)
    proj = (x2.mm(w_ih.t()) + b_ih).reshape(steps, batch, 3 * hsz)
    w_hh_t = w_hh.t()
    order = list(_order(steps, reverse))
    h = hx
    cache = {}
    for t in order:  # the forward again, keeping each step's gates and previous state
        gh = h.mm(w_hh_t) + b_hh
        gi = proj[t]
        r = (gi[:, :hsz] + gh[:, :hsz]).sigmoid()
        z = (gi[:, hsz:2 * hsz] + gh[:, hsz:2 * hsz]).sigmoid()
        hn = gh[:, 2 * hsz:]
        n = (gi[:, 2 * hsz:] + r * hn).tanh()
        cache[t] = (h, r, z, n, hn)
        h = (h - n) * z + n
    dh = _zeros_for(g_hy, hx)
    d_gi, d_gh = [None] * steps, [None] * steps
    for t in reversed(order):
        h_prev, r, z, n, hn = cache[t]
        if g_out is not None:
            dh = dh + g_out[t]
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * hn * r * (1 - r)
        dz = dh * (h_prev - n) * z * (1 - z)
        d_gi[t] = call(cat, [dr, dz, dn], 1)
        d_gh[t] = call(cat, [dr, dz, dn * r], 1)
        dh = dh * z + d_gh[t].mm(w_hh)
    dgi = call(stack, d_gi, 0).reshape(steps * batch, 3 * hsz)
    dgh = call(stack, d_gh, 0).reshape(steps * batch, 3 * hsz)
    h_prevs = call(stack, [cache[t][0] for t in range(steps)], 0).reshape(steps * batch, hsz)
    dx = dgi.mm(w_ih).reshape(steps, batch, n_in)
    db_ih, db_hh = (dgi.sum(0), dgh.sum(0)) if has_biases else (None, None)
    return (dx, dgi.t().mm(x2), dgh.t().mm(h_prevs), db_ih, db_hh, dh, None, None)


def _save(out, x, w_ih, w_hh, b_ih, b_hh, hx, *flags):
    return (x, w_ih, w_hh, b_ih, b_hh, hx, out[2]) + flags


def gru_layer_sample_args(rng, dt, steps=3, batch=2, n_in=3, hsz=4, reverse=False,
                          has_biases=True, gates=3) -> tuple:
    """Arguments of `_gru_layer` (gates=3) or, before its `relu` flag, of `_rnn_layer`
    (gates=1), as the modules pass them (tests use these)."""
    g = gates * hsz
    return (rand_array(rng, (steps, batch, n_in), dt), rand_array(rng, (g, n_in), dt),
            rand_array(rng, (g, hsz), dt), rand_array(rng, (g,), dt),
            rand_array(rng, (g,), dt), rand_array(rng, (batch, hsz), dt), reverse, has_biases)


def _register_layer(name: str, gates: int, kernel, backward_kernel, ops_derivative, node: str,
                    onnx) -> tuple:
    """Register layer op `name` (`gates` gate blocks per weight) and its backward op
    `name + "_backward"`: (the layer op, the backward op). No samples for the registry walk:
    the ops have no ATen twin to compare with; tests/test_rnn_layer_ops.py checks them
    against PyTorch's nn.GRU/nn.RNN (values, gradients), with gradcheck and gradgradcheck
    (float64), and their ONNX nodes against onnxruntime."""
    backward = register(
        f"{name}_backward", kernel=backward_kernel,
        meta=_backward_meta(f"{name}_backward", gates), samples=lambda rng, dt: [])
    derivative = _layer_derivative(backward, ops_derivative)
    derivative.on_arrays = _on_arrays(backward_kernel)
    layer = register(
        name, kernel=kernel, meta=_meta(name, gates), node=node, derivative=derivative,
        save=_save, nondiff_outputs=(2,), samples=lambda rng, dt: [],
        tolerance={"float32": 1e-4}, onnx=onnx)
    return layer, backward


gru_layer, gru_layer_backward = _register_layer(
    "_gru_layer", 3, _gru_kernel, _gru_backward_kernel, _gru_ops_derivative,
    "GruLayerBackward0", ox.gru_layer)


# ---------------------------------------------------------------- RNN (tanh, relu)


def _rnn_kernel(x, w_ih, w_hh, b_ih, b_hh, hx, reverse, has_biases, relu):
    proj = _input_projection(x, w_ih, b_ih)
    steps, batch = proj.shape[0], proj.shape[1]
    hsz = hx.shape[1]
    ws = np.empty((steps, batch, 2 * hsz), proj.dtype)
    w_hh_t = w_hh.T
    h = hx
    for t in _order(steps, reverse):
        ws[t, :, :hsz] = h
        h = ws[t, :, hsz:]
        np.matmul(ws[t, :, :hsz], w_hh_t, out=h)  # h W_hh^T + b_hh, then the input's part
        h += b_hh
        h += proj[t]
        if relu:
            np.maximum(h, 0, out=h)
        else:
            np.tanh(h, out=h)
    out = np.ascontiguousarray(ws[:, :, hsz:])
    return out, out[0 if reverse else -1].copy(), ws


def _rnn_backward_kernel(g_out, g_hy, x, w_ih, w_hh, hx, ws, reverse, relu):
    steps, batch, _ = x.shape
    hsz = hx.shape[1]
    h_prev, out = ws[:, :, :hsz], ws[:, :, hsz:]
    # relu's slope where the output is positive (PyTorch's threshold_backward), tanh's from
    # the output
    slope = (out > 0).astype(x.dtype) if relu else 1 - out * out
    dp = np.empty((steps, batch, hsz), x.dtype)
    dh = g_hy
    for t in reversed(_order(steps, reverse)):
        dh = dh + g_out[t]
        np.multiply(dh, slope[t], out=dp[t])
        dh = dp[t] @ w_hh
    return _weight_grads(dp, dp, x, h_prev, w_ih, np.asarray(dh, x.dtype), x.shape)


def _rnn_ops_derivative(g_out, g_hy, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, has_biases,
                        relu):
    """Backpropagation through time in fusegrad ops (so it is differentiable again)."""
    from .._dispatch import call
    from .joins import stack

    steps, batch, n_in = x.shape
    hsz = hx.shape[1]
    x2 = x.reshape(steps * batch, n_in)
    proj = (x2.mm(w_ih.t()) + b_ih).reshape(steps, batch, hsz)
    w_hh_t = w_hh.t()
    order = list(_order(steps, reverse))
    h = hx
    prev, outs = {}, {}
    for t in order:
        prev[t] = h
        pre = proj[t] + (h.mm(w_hh_t) + b_hh)
        h = outs[t] = pre.relu() if relu else pre.tanh()
    dh = _zeros_for(g_hy, hx)
    d_pre = [None] * steps
    for t in reversed(order):
        if g_out is not None:
            dh = dh + g_out[t]
        ht = outs[t]
        d_pre[t] = dh * (ht > 0).to(ht.dtype) if relu else dh * (1 - ht * ht)
        dh = d_pre[t].mm(w_hh)
    dp = call(stack, d_pre, 0).reshape(steps * batch, hsz)
    h_prevs = call(stack, [prev[t] for t in range(steps)], 0).reshape(steps * batch, hsz)
    db = dp.sum(0) if has_biases else None
    return (dp.mm(w_ih).reshape(steps, batch, n_in), dp.t().mm(x2), dp.t().mm(h_prevs),
            db, db, dh, None, None, None)


rnn_layer, rnn_layer_backward = _register_layer(
    "_rnn_layer", 1, _rnn_kernel, _rnn_backward_kernel, _rnn_ops_derivative,
    "RnnLayerBackward0", ox.rnn_layer)
