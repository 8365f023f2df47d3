"""RNN, LSTM, GRU and their cells against torch.nn: same weights (float64), same outputs, final
states, input and parameter gradients, and a few optimizer steps."""

from __future__ import annotations

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
