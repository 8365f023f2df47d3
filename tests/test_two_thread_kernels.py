"""Convolution kernels as ResNet-18's deep layers run them at two threads: a weight of which
one kernel offset meets the input (3x3 kernels over 1x1 maps) is multiplied where it lies,
a strided view each thread reads its rows of, and the weights' finiteness is checked
through the GEMM's result where that is the smaller read. Values and gradients are
PyTorch's, NaN and infinite weights included, and two threads give one thread's bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conv_support import conv_step

import fusegrad
from fusegrad.ops import _native
from fusegrad.ops import conv as conv_ops

CASES = [  # (input shape, weight shape, conv2d keywords)
    ((32, 128, 1, 1), (128, 128, 3, 3), {"padding": 1}),  # ResNet's last stage, narrower
    ((8, 16, 1, 1), (24, 16, 3, 3), {"padding": 1}),      # a product NumPy runs
    ((8, 32, 1, 1), (32, 16, 3, 3), {"padding": 1, "groups": 2}),
    ((4, 64, 2, 2), (64, 64, 3, 3), {"padding": 1}),      # every offset live, few outputs
]


def _data(xs, ws):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(xs).astype(np.float32),
            (rng.standard_normal(ws) * 0.1).astype(np.float32),
            rng.standard_normal(ws[0]).astype(np.float32))


@pytest.mark.parametrize("native", [True, False], ids=["c", "numpy"])
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_deep_layer_convolution_matches_torch(xs, ws, kw, native):
    x, w, b = _data(xs, ws)
    with _native.native_kernels(native):
        got = conv_step(fusegrad, x, w, b, **kw)
    ref = conv_step(torch, x, w, b, **kw)
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * np.abs(r).max())


@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_deep_layer_convolution_at_two_threads_has_one_threads_bits(same_at_two_threads, xs,
                                                                     ws, kw):
    x, w, b = _data(xs, ws)
    same_at_two_threads(lambda: conv_step(fusegrad, x, w, b, **kw))


def test_one_live_offset_is_multiplied_where_it_lies():
    """The weight's live offset is a view of the weight (no gathered copy), and the product
    through it has the gathered copy's bits."""
    x, w, _ = _data((32, 128, 1, 1), (128, 128, 3, 3))
    taps = conv_ops._taps(x.shape, (3, 3), [1, 1], [1, 1], [1, 1], 1, 1)
    assert taps == ((1, 2), (1, 2))
    view = conv_ops._tap_weight(w, taps)
    assert np.shares_memory(view, w) and view.shape == (128, 128)
    cols = x.reshape(32, 128).T.copy()
    from fusegrad.ops import _gemm

    np.testing.assert_array_equal(_gemm.matmul(view[None], cols[None]),
                                  _gemm.matmul(np.ascontiguousarray(view)[None], cols[None]))


# (weight index made non-finite, input index made non-finite) for the 1x1 and 2x2 cases.
BAD = [
    ((3, 5, 0, 0), None),     # an offset that reads only padding (1x1 map): never multiplied
    ((3, 5, 1, 1), None),     # the live offset: channel 3's outputs are NaN
    ((3, 5, 0, 2), None),     # a corner of a live kernel (2x2 map): the exact path
    (None, (1, 7, 0, 0)),     # an infinite input, finite weights: the GEMM's result stands
]


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("wbad, xbad", BAD)
@pytest.mark.parametrize("size", [1, 2])
def test_non_finite_values_give_torchs_outputs(size, wbad, xbad, value):
    x, w, b = _data((4, 16, size, size), (8, 16, 3, 3))
    if wbad is not None:
        w[wbad] = value
    if xbad is not None:
        x[xbad] = value
    outs = []
    for lib in (fusegrad, torch):
        y = lib.nn.functional.conv2d(lib.tensor(x), lib.tensor(w), lib.tensor(b), padding=1)
        outs.append(np.array(y.numpy()))
    got, ref = outs
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fine = np.isfinite(ref)
    np.testing.assert_allclose(got[fine], ref[fine], rtol=1e-5, atol=1e-5)


def test_finite_outputs_clear_the_weights_without_summing_them(monkeypatch):
    """A layer with fewer outputs than weights is not summed over its weights when its
    outputs are finite; non-finite outputs take the check."""
    calls = []
    check = conv_ops._by_taps
    monkeypatch.setattr(conv_ops, "_by_taps", lambda *a: calls.append(1) or check(*a))
    x, w, b = _data((4, 64, 2, 2), (64, 64, 3, 3))
    fusegrad.nn.functional.conv2d(fusegrad.tensor(x), fusegrad.tensor(w), fusegrad.tensor(b),
                                  padding=1)
    assert calls == []
    x[0, 0, 0, 0] = np.nan
    fusegrad.nn.functional.conv2d(fusegrad.tensor(x), fusegrad.tensor(w), fusegrad.tensor(b),
                                  padding=1)
    assert calls == [1]
