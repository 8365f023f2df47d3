"""ATen's functional spellings called from `torch.*`: recurrent layers and cells over flat
parameters, grid_sampler, affine_grid_generator, ctc_loss, conv_tbc, index_reduce,
as_strided_scatter, adjoint, unsafe_split_with_sizes, norm_except_dim, range, cond and
while_loop: values, gradients and errors against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(17)


def _same(fn, *arrays, node=False, tol=1e-10):
    outs = []
    for lib in (torch, fusegrad):
        leaves = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(lib, *leaves)
        flat = list(out) if isinstance(out, (tuple, list)) else [out]
        total = sum((o * lib.linspace(0.5, 2.0, o.numel(), dtype=o.dtype).view(o.shape)).sum()
                    for o in flat if o.requires_grad)
        if isinstance(total, lib.Tensor):
            total.backward()
        outs.append(([o.detach().numpy().copy() for o in flat],
                     [type(o.grad_fn).__name__ for o in flat], [x.grad for x in leaves]))
    (wv, wn, wg), (gv, gn, gg) = outs
    assert len(gv) == len(wv)
    for w, g in zip(wv, gv):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    if node:
        assert gn == wn
    for w, g in zip(wg, gg):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(mode, bias):
    gates = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}[mode]
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)),
              RNG.standard_normal((4 * gates, 3)), RNG.standard_normal((4 * gates, 4))]
    if bias:
        arrays += [RNG.standard_normal(4 * gates), RNG.standard_normal(4 * gates)]
    if mode == "lstm":
        arrays.insert(2, RNG.standard_normal((2, 4)))

        def fn(lib, x, h, c, *w):
            return lib.lstm_cell(x, (h, c), *w)
    else:
        def fn(lib, x, h, *w):
            return getattr(lib, f"{mode}_cell")(x, h, *w)
    _same(fn, *arrays)


@pytest.mark.parametrize("mode", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("layers, bidirectional, batch_first, bias", [
    (1, False, False, True), (2, True, False, True), (2, False, True, False)])
def test_recurrent_layers(mode, layers, bidirectional, batch_first, bias):
    gates = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}[mode]
    dirs = 2 if bidirectional else 1
    hidden = 4
    params = []
    for layer in range(layers):
        n_in = 3 if layer == 0 else hidden * dirs
        for _ in range(dirs):
            params += [RNG.standard_normal((gates * hidden, n_in)) * 0.5,
                       RNG.standard_normal((gates * hidden, hidden)) * 0.5]
            if bias:
                params += [RNG.standard_normal(gates * hidden) * 0.5,
                           RNG.standard_normal(gates * hidden) * 0.5]
    x = RNG.standard_normal((2, 5, 3) if batch_first else (5, 2, 3))
    h = RNG.standard_normal((layers * dirs, 2, hidden))
    c = RNG.standard_normal((layers * dirs, 2, hidden))

    def fn(lib, x, h, c, *ps):
        state = (h, c) if mode == "lstm" else h
        return getattr(lib, mode)(x, state, list(ps), bias, layers, 0.0, False, bidirectional,
                                  batch_first)

    _same(fn, x, h, c, *params, tol=1e-9)


def test_layer_and_loss_spellings():
    x = RNG.standard_normal((2, 3, 5, 4))
    grid = RNG.uniform(-1.3, 1.3, (2, 3, 3, 2))
    for interp in (0, 1):
        for pad in (0, 1, 2):
            _same(lambda lib, x, g, i=interp, p=pad: lib.grid_sampler(x, g, i, p, False),
                  x, grid)
    _same(lambda lib, x, g: lib.grid_sampler_2d(x, g, 0, 0, True), x, grid)
    theta = RNG.standard_normal((2, 2, 3))
    _same(lambda lib, t: lib.affine_grid_generator(t, [2, 3, 4, 5], False), theta)
    logp = np.log(RNG.dirichlet(np.ones(5), (6, 2)))
    targets = np.array([[1, 2, 3], [4, 4, 1]])
    for red in (0, 1, 2):
        _same(lambda lib, lp, t, r=red: lib.ctc_loss(lp, t, [6, 5], [3, 2], 0, r, False),
              logp, targets)
    _same(lambda lib, x, w, b: lib.conv_tbc(x, w, b, 1), RNG.standard_normal((7, 2, 3)),
          RNG.standard_normal((3, 3, 4)), RNG.standard_normal(4))
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="Input must have 3 dims: time, batch, "
                           "in_channel"):
            lib.conv_tbc(lib.ones(2, 3), lib.ones(3, 3, 4), lib.ones(4), 0)
        y = lib.ones(2, 3, 4)
        assert lib.feature_dropout_(y, 0.0, True) is y
        assert lib.feature_dropout_(y, 1.0, True).sum().item() == 0


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    base = RNG.standard_normal((4, 3))
    src = RNG.standard_normal((5, 3))
    idx = np.array([0, 2, 0, 3, 2])
    _same(lambda lib, b, s, i: lib.index_reduce(b, 0, i, s, reduce, include_self=include_self),
          base, src, idx)
    _same(lambda lib, b, s, i: (b * 1).index_reduce_(1, i, s.t(), reduce,
                                                   include_self=include_self),
          base.T.copy(), src, idx)
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax "
                           "or amin but got sum."):
            lib.ones(3, 2).index_reduce(0, lib.tensor([0]), lib.ones(1, 2), "sum")


def test_views_scatters_and_helpers():
    x = RNG.standard_normal((2, 3, 4))
    _same(lambda lib, t: t.adjoint(), x, node=True)
    _same(lambda lib, t: lib.adjoint(t[0]), x, node=True)
    # PyTorch's AsStridedScatterBackward0 hands the input the gradient of the overwritten
    # positions; the gradient is checked against the same scatter written out in PyTorch
    def scatter(lib, t, s):
        if lib is torch:
            out = t.clone()
            out.as_strided((2, 2), (1, 3), 1).copy_(s)
            return out
        return lib.as_strided_scatter(t, s, (2, 2), (1, 3), 1)

    _same(scatter, x[0].copy(), RNG.standard_normal((2, 2)))
    _same(lambda lib, t, s: lib.as_strided_scatter(t, s, (2, 2), (1, 3), 1).detach(),
          x[0].copy(), RNG.standard_normal((2, 2)))
    _same(lambda lib, t: t.unsafe_split_with_sizes([1, 3], 2), x, node=True)
    _same(lambda lib, t: lib.unsafe_split_with_sizes(t, [2, 1], 1), x, node=True)
    for dim in (0, 1, -1):
        _same(lambda lib, t, d=dim: lib.norm_except_dim(t, 2, d), x)
    _same(lambda lib, t: lib.norm_except_dim(t, 3, 2), x)
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="only supported on matrices or batches of "
                           "matrices. Got 1-D tensor."):
            lib.ones(3).adjoint()
        with pytest.warns(UserWarning, match="torch.range is deprecated"):
            r = lib.range(1, 4, 1.5)
        assert r.tolist() == [1.0, 2.5, 4.0] and r.dtype == lib.float32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert lib.range(0, 5, dtype=lib.int64).tolist() == [0, 1, 2, 3, 4, 5]
            assert lib.range(5, 1, -2).tolist() == [5.0, 3.0, 1.0]
        assert lib.cond(lib.tensor(True), lambda a: a + 1, lambda a: a - 1,
                        (lib.ones(1),)).tolist() == [2.0]
        assert lib.cond(False, lambda a: a + 1, lambda a: a - 1, (lib.ones(1),)).tolist() \
            == [0.0]
        i, v = lib.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2),
                              (lib.tensor(0), lib.ones(1)))
        assert i.item() == 3 and v.tolist() == [8.0]
