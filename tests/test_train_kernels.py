"""The direct convolution kernels' column pairs and row pairs (`ops/native/conv_direct.c`:
`forward_pair`, `input_pair`, `weight_tile2`, which compute two output columns, two input
columns or two kernel rows at once for a training step's speed) and their leaving out the
products with the padding: values and gradients match PyTorch over the shapes that choose
them or not (widths odd and even, one column, batches of one, two and three vectors of lanes,
padded lanes, dilation and stride along either axis, kernels one to five wide, padding wider
than the image, NaN and infinite values), a column computed by a pair has the bits of the
same column computed alone, and two threads (pieces that split row pairs differently) give
one thread's bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _conv_native
from fusegrad.ops import conv as conv_ops

pytestmark = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

CASES = [  # (input shape, weight shape, conv2d keywords)
    ((32, 16, 8, 8), (16, 16, 3, 3), {"padding": 1}),             # ResNet's first stage, small
    ((16, 4, 9, 11), (8, 4, 3, 3), {"padding": 1}),               # odd width: a last column alone
    ((20, 5, 7, 6), (6, 5, 2, 3), {"padding": (0, 1)}),           # padded lanes, even width
    ((48, 4, 6, 7), (4, 4, 3, 3), {"padding": 1}),                # three vectors: no pairs
    ((32, 6, 10, 10), (16, 6, 5, 5), {}),                         # 5 wide: a 4 + 1 column tile
    ((16, 4, 12, 9), (5, 4, 3, 3), {"dilation": (2, 1), "padding": (2, 1)}),  # pairs
    ((16, 4, 9, 12), (5, 4, 3, 3), {"dilation": (1, 2), "padding": 2}),       # no pairs
    ((16, 4, 13, 9), (5, 4, 3, 3), {"stride": (2, 1), "padding": 1}),         # pairs
    ((16, 4, 9, 13), (5, 4, 3, 3), {"stride": (1, 2), "padding": 1}),         # no pairs
    ((32, 4, 8, 1), (8, 4, 3, 1), {"padding": (1, 0)}),           # one column
    ((32, 4, 5, 5), (8, 4, 4, 4), {"padding": 2}),                # 4 rows: two row pairs
    ((16, 8, 6, 6), (12, 8, 1, 3), {"padding": (0, 1)}),          # one kernel row
    # kernel rows whose output rows meeting the image differ within a pair of rows
    ((16, 4, 5, 6), (5, 4, 3, 3), {"dilation": (3, 1), "padding": (3, 1)}),
    ((32, 3, 7, 7), (4, 3, 5, 5), {"padding": 4}),               # rows reading padding only
]


@pytest.fixture
def direct(monkeypatch):
    """Every convolution without groups runs direct; the list counts the direct runs."""
    runs = []
    forward, backward = _conv_native.direct_forward, _conv_native.direct_backward
    monkeypatch.setattr(conv_ops, "_direct", lambda *sizes: sizes[-1] == 1)
    monkeypatch.setattr(_conv_native, "direct_forward",
                        lambda *a: runs.append("forward") or forward(*a))
    monkeypatch.setattr(_conv_native, "direct_backward",
                        lambda *a: runs.append("backward") or backward(*a))
    return runs


def _data(xs, ws, dt, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(ws).astype(dt)
    return x, w, rng.standard_normal(ws[0]).astype(dt)


def _step(lib, x, w, b, gy=None, **kw):
    """(output, input gradient, weight gradient, bias gradient) as arrays."""
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    if gy is None:
        gy = np.cos(np.arange(int(np.prod(y.shape)))).reshape(tuple(y.shape)).astype(x.dtype)
    y.backward(lib.tensor(gy))
    return [np.array(t.detach().numpy()) for t in (y, xt.grad, wt.grad, bt.grad)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_direct_kernels_match_torch(direct, xs, ws, kw, dt):
    x, w, b = _data(xs, ws, dt)
    got = _step(fusegrad, x, w, b, **kw)
    ref = _step(torch, *(a.astype(np.float64) for a in (x, w, b)), **kw)
    assert direct == ["forward", "backward"]
    tol = 1e-4 if dt == np.float32 else 1e-10
    for a, r in zip(got, ref, strict=True):
        assert a.dtype == dt and a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(np.abs(r).max(), 1))


@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_two_threads_give_one_threads_bits(direct, same_at_two_threads, xs, ws, kw):
    x, w, b = _data(xs, ws, np.float32)
    same_at_two_threads(lambda: _step(fusegrad, x, w, b, **kw))


@pytest.mark.parametrize("n", [16, 32, 20])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_column_of_a_pair_has_the_bits_of_the_same_column_alone(direct, n, dt):
    """Output column j + 1 of an input is output column j of the input less its first
    column (no padding along the width): an even width computes it in a pair, the odd one
    left after the crop computes the last of them alone."""
    x, w, _ = _data((n, 6, 7, 10), (8, 6, 3, 3), dt)
    whole = fusegrad.nn.functional.conv2d(fusegrad.tensor(x), fusegrad.tensor(w),
                                          padding=(1, 0)).numpy()
    cropped = fusegrad.nn.functional.conv2d(fusegrad.tensor(np.ascontiguousarray(x[..., 1:])),
                                            fusegrad.tensor(w), padding=(1, 0)).numpy()
    assert whole.shape[-1] == 8 and cropped.shape[-1] == 7
    np.testing.assert_array_equal(cropped, whole[..., 1:])


@pytest.mark.parametrize("where, padding", [("input", 1), ("weight", 0), ("weight", 1)])
def test_nan_and_inf_reach_the_outputs_pytorch_gives_them(direct, where, padding):
    """A NaN or infinite weight reaches only the outputs whose window holds image values
    it multiplies: the kernels leave out its products with the padding, as PyTorch does.
    (The GEMM path multiplies the padding's zeros in its columns: NaN reaches more outputs
    there.)"""
    x, w, b = _data((32, 4, 6, 7), (6, 4, 3, 3), np.float32, seed=1)
    if where == "input":
        x[3, 1, 2, 3] = np.nan
        x[7, 0, 0, 0] = np.inf
    else:
        w[2, 1, 0, 2] = np.nan
        w[4, 3, 2, 1] = -np.inf
    got = _step(fusegrad, x, w, b, padding=padding)
    ref = _step(torch, x, w, b, padding=padding)
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(r))
        finite = np.isfinite(r)
        np.testing.assert_array_equal(np.isfinite(a), finite)
        if finite.any():
            np.testing.assert_allclose(a[finite], r[finite], rtol=1e-4,
                                       atol=1e-4 * max(np.abs(r[finite]).max(), 1))


def test_the_models_direct_layers_still_choose_the_direct_kernels():
    """LeNet-5's convolutions and ResNet-18's first stage (the layers these kernels speed
    up) run direct."""
    assert conv_ops._direct(64, 1, 6, 5, 5, 28, 28, 1)
    assert conv_ops._direct(64, 6, 16, 5, 5, 10, 10, 1)
    assert conv_ops._direct(32, 64, 64, 3, 3, 8, 8, 1)
