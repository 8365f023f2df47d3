"""RNN, LSTM, GRU and their cells against torch.nn: same weights (float64), same outputs, final
states, input and parameter gradients, and a few optimizer steps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_nn_support import close, sync

import fusegrad
import fusegrad.nn as fnn

ATOL = 1e-8


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def both(name, **kwargs):
    """(torch module, fusegrad module) in float64 with the torch module's weights."""
    torch.manual_seed(0)
    th = getattr(torch.nn, name)(**kwargs).double()
    fg = getattr(fnn, name)(**kwargs).double()
    sync(th, fg)
    return th, fg


def _leaves(a, T):
    """`a` (array, tuple of arrays or None) as leaf tensors of module T."""
    if a is None:
        return None
    if isinstance(a, tuple):
        return tuple(_leaves(x, T) for x in a)
    return T.tensor(a, requires_grad=True)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _flat(item)]
    return [x]


def compare(th, fg, *arrays, steps: int = 3):
    """Outputs, gradients of every leaf and parameter, then `steps` SGD steps agree."""
    th_in = [_leaves(a, torch) for a in arrays]
    fg_in = [_leaves(a, fusegrad) for a in arrays]
    out_t, out_f = _flat(th(*th_in)), _flat(fg(*fg_in))
    assert len(out_t) == len(out_f)
    cots = [data(*t.shape, seed=10 + i) for i, t in enumerate(out_t)]
    for i, (a, b) in enumerate(zip(out_f, out_t)):
        close(a, b, ATOL, ATOL, f"output {i}")
    sum((t * torch.tensor(c)).sum() for t, c in zip(out_t, cots)).backward()
    sum((t * fusegrad.tensor(c)).sum() for t, c in zip(out_f, cots)).backward()
    for i, (a, b) in enumerate(zip(_flat(fg_in), _flat(th_in))):
        if b is not None:
            close(a.grad, b.grad, ATOL, ATOL, f"input {i} grad")
    th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
    assert list(fg_p) == list(th_p)
    for name, p in th_p.items():
        close(fg_p[name].grad, p.grad, ATOL, ATOL, f"{name}.grad")
    opt_t = torch.optim.SGD(th.parameters(), lr=0.1)
    opt_f = fusegrad.optim.SGD(fg.parameters(), lr=0.1)
    for _ in range(steps):
        for mod, opt, T in ((th, opt_t, torch), (fg, opt_f, fusegrad)):
            opt.zero_grad()
            outs = _flat(mod(*[_leaves(a, T) for a in arrays]))
            sum((t * T.tensor(c)).sum() for t, c in zip(outs, cots)).backward()
            opt.step()
    sd_t, sd_f = th.state_dict(), fg.state_dict()
    assert list(sd_f) == list(sd_t)
    for k in sd_t:
        close(sd_f[k], sd_t[k], 1e-7, 1e-7, f"after {steps} steps: {k}")


CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False, num_layers=2),
]


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("cfg", CONFIGS)
def test_recurrent_layers(name, cfg):
    th, fg = both(name, input_size=3, hidden_size=4, **cfg)
    shape = (2, 5, 3) if cfg.get("batch_first") else (5, 2, 3)
    compare(th, fg, data(*shape))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_states(name):
    th, fg = both(name, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    h0 = data(4, 2, 4, seed=1)
    hx = (h0, data(4, 2, 4, seed=2)) if name == "LSTM" else h0
    compare(th, fg, data(5, 2, 3), hx)


def test_rnn_relu_and_unbatched():
    th, fg = both("RNN", input_size=3, hidden_size=4, nonlinearity="relu", num_layers=2)
    compare(th, fg, data(6, 2, 3))
    compare(th, fg, data(6, 3), data(2, 4, seed=3))
    th, fg = both("LSTM", input_size=3, hidden_size=4, bidirectional=True)
    compare(th, fg, data(6, 3), (data(2, 4, seed=1), data(2, 4, seed=2)))


def test_lstm_proj_size():
    th, fg = both("LSTM", input_size=3, hidden_size=5, proj_size=2, num_layers=2,
                  bidirectional=True, batch_first=True)
    compare(th, fg, data(2, 4, 3), (data(4, 2, 2, seed=1), data(4, 2, 5, seed=2)))


def test_dropout_between_layers():
    """p=1 zeroes the second layer's input in train mode (deterministic); eval ignores it."""
    th, fg = both("GRU", input_size=3, hidden_size=4, num_layers=2, dropout=1.0)
    compare(th, fg, data(4, 2, 3), steps=1)
    th.eval()
    fg.eval()
    compare(th, fg, data(4, 2, 3), steps=1)
    th, fg = both("LSTM", input_size=3, hidden_size=4, num_layers=3, dropout=0.5)
    fg.train()
    out = fg(fusegrad.tensor(data(4, 2, 3)))[0]
    assert tuple(out.shape) == (4, 2, 4)


@pytest.mark.parametrize("name,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                     ("LSTMCell", {}), ("GRUCell", {}),
                                     ("GRUCell", {"bias": False})])
def test_cells(name, kw):
    th, fg = both(name, input_size=3, hidden_size=4, **kw)
    compare(th, fg, data(2, 3))
    h = data(2, 4, seed=1)
    compare(th, fg, data(2, 3), (h, data(2, 4, seed=2)) if name == "LSTMCell" else h)
    compare(th, fg, data(3), steps=0)


def test_state_dict_keys_repr_and_init():
    for name, kw in [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
                     ("GRU", dict(bias=False, batch_first=True, dropout=0.2, num_layers=2)),
                     ("RNN", dict(nonlinearity="relu")), ("LSTMCell", {}),
                     ("RNNCell", dict(nonlinearity="relu", bias=False))]:
        th = getattr(torch.nn, name)(3, 4, **kw)
        fg = getattr(fnn, name)(3, 4, **kw)
        assert list(fg.state_dict()) == list(th.state_dict())
        assert [tuple(v.shape) for v in fg.state_dict().values()] == [
            tuple(v.shape) for v in th.state_dict().values()]
        assert repr(fg) == repr(th)
    fg = fnn.LSTM(3, 16)
    bound = 1 / 4
    for p in fg.parameters():
        v = p.detach().numpy()
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.5 * bound
        assert isinstance(p, fnn.Parameter) and p.requires_grad
    assert len(fg.all_weights) == 1 and len(fg.all_weights[0]) == 4


def test_errors_and_warnings():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        fnn.GRU(3, 4, dropout=0.5)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        fnn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        fnn.LSTM(3, 4, proj_size=4)
    for T in (torch, fusegrad):
        mod = T.nn.LSTM(3, 4)
        with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
            mod(T.zeros(5, 2, 2))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\)"):
            mod(T.zeros(5, 2, 3), (T.zeros(1, 3, 4), T.zeros(1, 2, 4)))
        with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D"):
            mod(T.zeros(5, 2, 3, 1))
        gru = T.nn.GRU(3, 4)
        with pytest.raises(RuntimeError, match="Expected hidden size \\(1, 2, 4\\), got"):
            gru(T.zeros(5, 2, 3), T.zeros(2, 2, 4))


# ---------------------------------------------------------------- node names and float32


def graph_names(t) -> set:
    """Class names of every node reachable from `t.grad_fn`."""
    seen, out, stack = set(), set(), [t.grad_fn]
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        out.add(type(f).__name__)
        stack.extend(n for n, _ in f.next_functions)
    return out


def pair(name, dtype, **kwargs):
    """(torch module, fusegrad module) in `dtype` ("float32"/"float64"), same weights."""
    torch.manual_seed(0)
    th = getattr(torch.nn, name)(**kwargs).to(getattr(torch, dtype))
    fg = getattr(fnn, name)(**kwargs).to(getattr(fusegrad, dtype))
    sync(th, fg)
    return th, fg


def run_both(th, fg, x, hx=None, input_grad=True):
    """Forward both modules on the same arrays; (torch, fusegrad) lists of
    (outputs, leaves, node-name set of the summed outputs)."""
    res = []
    for T, mod in ((torch, th), (fusegrad, fg)):
        xi = T.tensor(x, requires_grad=input_grad)
        leaves = [xi] if input_grad else []
        args = [xi]
        if hx is not None:
            h = tuple(T.tensor(a, requires_grad=True) for a in hx)
            leaves += list(h)
            args.append(h if len(h) > 1 else h[0])
        outs = _flat(mod(*args))
        res.append((outs, leaves, graph_names(sum(o.sum() for o in outs))))
    return res


def check_both(th, fg, x, hx=None, atol=1e-5, input_grad=True):
    """Node-name sets, outputs, and every input and parameter gradient agree."""
    (out_t, leaves_t, names_t), (out_f, leaves_f, names_f) = run_both(th, fg, x, hx,
                                                                      input_grad)
    assert names_f == names_t, (names_f - names_t, names_t - names_f)
    assert len(out_f) == len(out_t)
    for i, (a, b) in enumerate(zip(out_f, out_t)):
        close(a, b, atol, atol, f"output {i}")
    cots = [data(*t.shape, seed=20 + i).astype(x.dtype) for i, t in enumerate(out_t)]
    sum((t * torch.tensor(c)).sum() for t, c in zip(out_t, cots)).backward()
    sum((t * fusegrad.tensor(c)).sum() for t, c in zip(out_f, cots)).backward()
    for i, (a, b) in enumerate(zip(leaves_f, leaves_t)):
        close(a.grad, b.grad, atol, atol, f"input {i} grad")
    th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
    for name, p in th_p.items():
        close(fg_p[name].grad, p.grad, atol, atol, f"{name}.grad")
    return names_t


LAYER_CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False),
]
TOL = {"float32": 2e-5, "float64": 1e-10}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("cfg", LAYER_CONFIGS, ids=str)
def test_layer_node_names_values_grads(name, cfg, dtype):
    th, fg = pair(name, dtype, input_size=3, hidden_size=4, **cfg)
    shape = (2, 5, 3) if cfg.get("batch_first") else (5, 2, 3)
    x = data(*shape).astype(dtype)
    dirs = (2 if cfg.get("bidirectional") else 1) * cfg.get("num_layers", 1)
    hx = (data(dirs, 2, 4, seed=1).astype(dtype),)
    if name == "LSTM":
        hx += (data(dirs, 2, 4, seed=2).astype(dtype),)
    names = check_both(th, fg, x, atol=TOL[dtype])
    fused = name == "LSTM" and dtype == "float32"
    assert ("MkldnnRnnLayerBackward0" in names) == fused
    th, fg = pair(name, dtype, input_size=3, hidden_size=4, **cfg)
    names = check_both(th, fg, x, hx, atol=TOL[dtype])
    assert ("SelectBackward0" in names) == fused
    th, fg = pair(name, dtype, input_size=3, hidden_size=4, **cfg)
    check_both(th, fg, x, atol=TOL[dtype], input_grad=False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", [("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
                                     ("GRU", {}), ("LSTM", {"proj_size": 2})])
def test_unbatched_node_names(name, kw, dtype):
    for bf in (False, True):
        th, fg = pair(name, dtype, input_size=3, hidden_size=4, batch_first=bf, **kw)
        hx = (data(1, kw.get("proj_size", 4), seed=1).astype(dtype),)
        if name == "LSTM":
            hx += (data(1, 4, seed=2).astype(dtype),)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's projections notice
            check_both(th, fg, data(5, 3).astype(dtype), atol=TOL[dtype])
            check_both(th, fg, data(5, 3).astype(dtype), hx, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_proj_size_is_not_fused(dtype):
    """Projections take the elementary path in float32 too (PyTorch's oneDNN has none)."""
    th, fg = pair("LSTM", dtype, input_size=3, hidden_size=5, proj_size=2, num_layers=2,
                  bidirectional=True, batch_first=True)
    hx = (data(4, 2, 2, seed=1).astype(dtype), data(4, 2, 5, seed=2).astype(dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's "not supported with oneDNN" notice
        names = check_both(th, fg, data(2, 4, 3).astype(dtype), hx, atol=TOL[dtype])
    assert "MkldnnRnnLayerBackward0" not in names and "MmBackward0" in names


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_node_names(dtype):
    """p=1 makes dropout deterministic: the layer below the last gets an all-zero input."""
    for name in ("RNN", "LSTM", "GRU"):
        th, fg = pair(name, dtype, input_size=3, hidden_size=4, num_layers=2, dropout=1.0)
        names = check_both(th, fg, data(4, 2, 3).astype(dtype), atol=TOL[dtype])
        assert "MulBackward0" in names


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                     ("LSTMCell", {}), ("GRUCell", {}),
                                     ("GRUCell", {"bias": False}),
                                     ("LSTMCell", {"bias": False})])
def test_cell_node_names(name, kw, dtype):
    th, fg = pair(name, dtype, input_size=3, hidden_size=4, **kw)
    hx = (data(2, 4, seed=1).astype(dtype),)
    if name == "LSTMCell":
        hx += (data(2, 4, seed=2).astype(dtype),)
    names = check_both(th, fg, data(2, 3).astype(dtype), atol=TOL[dtype])
    assert ("UnsafeSplitBackward0" in names) == (name != "RNNCell")
    check_both(th, fg, data(2, 3).astype(dtype), hx, atol=TOL[dtype])
    check_both(th, fg, data(3).astype(dtype), tuple(h[0] for h in hx), atol=TOL[dtype])


def test_float32_training_steps_match():
    """A few SGD steps of the fused float32 LSTM and a float32 GRU stay with PyTorch's."""
    for name in ("LSTM", "GRU"):
        th, fg = pair(name, "float32", input_size=3, hidden_size=4, num_layers=2,
                      bidirectional=True)
        x = data(5, 2, 3).astype(np.float32)
        opt_t = torch.optim.SGD(th.parameters(), lr=0.1)
        opt_f = fusegrad.optim.SGD(fg.parameters(), lr=0.1)
        for _ in range(3):
            for mod, opt, T in ((th, opt_t, torch), (fg, opt_f, fusegrad)):
                opt.zero_grad()
                out = mod(T.tensor(x))[0]
                (out * out).sum().backward()
                opt.step()
        for k, v in th.state_dict().items():
            close(fg.state_dict()[k], v, 1e-5, 1e-5, k)


# ---------------------------------------------------------------- the mkldnn_rnn_layer op


def _layer_args(dtype, reverse=False, has_biases=True, train=True, steps=4, batch=3):
    from fusegrad.ops.rnn import lstm_layer_sample_args

    return lstm_layer_sample_args(np.random.default_rng(3), np.dtype(dtype), steps=steps,
                                  batch=batch, n_in=3, hsz=4, reverse=reverse,
                                  has_biases=has_biases, train=train)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_mkldnn_rnn_layer_matches_aten(reverse, train):
    """Values, node name and gradients of the first three outputs against ATen's op, with
    the arguments the LSTM module passes (float32: ATen's op has no float64)."""
    from fusegrad import _dispatch
    from fusegrad.ops import REGISTRY

    args = _layer_args("float32", reverse, train=train)
    th = [torch.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a
          for a in args]
    fg = [fusegrad.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a
          for a in args]
    out_t = torch.ops.aten.mkldnn_rnn_layer(*th)
    out_f = _dispatch.call(REGISTRY["mkldnn_rnn_layer"], *fg)
    assert len(out_f) == 4 and out_f[3].dtype == fusegrad.uint8 and out_f[3].grad_fn is None
    cots = []
    for i in range(3):
        close(out_f[i], out_t[i], 1e-5, 1e-5, f"output {i}")
        assert type(out_f[i].grad_fn).__name__ == type(out_t[i].grad_fn).__name__
        cots.append(data(*out_t[i].shape, seed=30 + i).astype(np.float32))
    sum((o * torch.tensor(c)).sum() for o, c in zip(out_t[:3], cots)).backward()
    sum((o * fusegrad.tensor(c)).sum() for o, c in zip(out_f[:3], cots)).backward()
    for i, (a, b) in enumerate(zip(fg, th)):
        if isinstance(b, torch.Tensor):
            close(a.grad, b.grad, 2e-5, 2e-5, f"grad {i}")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("has_biases", [False, True])
def test_mkldnn_rnn_layer_gradcheck_and_meta(reverse, has_biases):
    """float64 gradcheck and gradgradcheck of the op's derivative; fake tensors get the
    kernel's shapes."""
    from layer_op_support import check_fake_shapes, gradchecked

    from fusegrad.ops import REGISTRY

    op = REGISTRY["mkldnn_rnn_layer"]
    # Three steps (a first, a middle and a last one) of a batch of two: gradcheck's and
    # gradgradcheck's cost grows with the square of the sizes; the weights keep their shapes.
    args = list(_layer_args("float64", reverse, has_biases, steps=3, batch=2))
    _, _, base, _ = gradchecked(op, args, has_biases, 3)
    check_fake_shapes(op, base)


def test_unsafe_chunk_node():
    """The gate split: pieces are not views, and their node is UnsafeSplitBackward0."""
    from fusegrad import _dispatch
    from fusegrad.ops import REGISTRY

    parts_t = torch.ops.aten.unsafe_chunk(torch.ones(2, 8, requires_grad=True), 4, 1)
    parts_f = _dispatch.call(REGISTRY["unsafe_chunk"], fusegrad.ones(2, 8, requires_grad=True),
                             4, 1)
    assert [type(p.grad_fn).__name__ for p in parts_f] == [
        type(p.grad_fn).__name__ for p in parts_t] == ["UnsafeSplitBackward0"] * 4
    assert all(p._base is None for p in parts_f)
