"""Convolutions over images so small that some kernel offsets read only padding (ResNet's
last stage: 3x3 kernels over 1x1 maps). The GEMMs leave those offsets out; values and
gradients must still be PyTorch's, the left-out weights' gradients exactly zero, and two
threads must give one thread's bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conv_support import conv_step

import fusegrad
from fusegrad.ops import conv as conv_ops

CASES = [  # (input shape, weight shape, conv2d keywords)
    ((8, 16, 1, 1), (24, 16, 3, 3), {"padding": 1}),                    # one live offset
    ((4, 6, 1, 5), (8, 6, 3, 3), {"padding": 1}),                       # a row of pixels
    ((5, 8, 1, 1), (8, 2, 5, 5), {"padding": 2, "groups": 4}),
    ((3, 4, 2, 2), (6, 4, 3, 3), {"padding": 2, "dilation": 2}),
    ((6, 4, 1, 1), (10, 4, 3, 3), {"padding": 1, "stride": 2}),
    ((2, 3, 1, 4), (5, 3, 3, 3), {"padding": (1, 0), "stride": (1, 2)}),
    ((4, 3, 4, 4), (5, 3, 3, 3), {"padding": 1}),                       # every offset live
]


@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_convolution_with_padding_only_offsets_matches_torch(xs, ws, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    got = conv_step(fusegrad, x, w, b, **kw)
    ref = conv_step(torch, x, w, b, **kw)
    for a, r in zip(got, ref):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5 * max(np.abs(r).max(), 1.0))
    dead = ref[2] == 0  # offsets that only ever meet padding
    assert np.all(got[2][dead] == 0)


@pytest.mark.parametrize("size, k, s, p, d, out, live", [
    (1, 3, 1, 1, 1, 1, (1, 2)),
    (2, 3, 2, 1, 1, 1, (1, 3)),
    (5, 3, 1, 1, 1, 5, (0, 3)),
    (1, 5, 1, 2, 1, 1, (2, 3)),
    (2, 3, 1, 2, 2, 2, (1, 2)),
    (1, 3, 2, 1, 1, 1, (1, 2)),
])
def test_live_offsets_are_those_some_window_reads_inside_the_input(size, k, s, p, d, out,
                                                                    live):
    assert conv_ops._live_taps(size, k, s, p, d, out) == live
    # The oracle: enumerate every (offset, output position) pair.
    brute = [i for i in range(k) if any(0 <= i * d + y * s - p < size for y in range(out))]
    assert (brute[0], brute[-1] + 1) == live


def test_padding_only_offsets_with_two_threads_are_bit_identical_to_one():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 256, 1, 1)).astype(np.float32)
    w = rng.standard_normal((128, 256, 3, 3)).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    before = fusegrad.get_num_threads()
    try:
        fusegrad.set_num_threads(1)
        one = conv_step(fusegrad, x, w, b, padding=1)
        fusegrad.set_num_threads(2)
        two = conv_step(fusegrad, x, w, b, padding=1)
    finally:
        fusegrad.set_num_threads(before)
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dead, live", [(True, False), (False, True), (True, True)])
def test_non_finite_weights_at_padding_only_offsets_multiply_nothing(dead, live,
                                                                     monkeypatch):
    """A NaN or infinite weight at an offset that reads only padding (a 3x3 kernel over 1x1
    maps) multiplies nothing in PyTorch's kernels: the values stay finite. One at a live
    offset spreads NaN as PyTorch's does. The finiteness check sums only the weights the
    GEMMs multiply, and only when the outputs are not all finite (finite outputs clear
    every multiplied weight)."""
    x = np.linspace(-1.0, 1.0, 4 * 8, dtype=np.float32).reshape(4, 8, 1, 1)
    w = np.linspace(-0.5, 0.5, 6 * 8 * 9, dtype=np.float32).reshape(6, 8, 3, 3)
    if dead:
        w[0, 0, 0, 0] = np.nan
        w[1, 2, 2, 1] = np.inf
    if live:
        w[2, 3, 1, 1] = np.nan
    summed = []
    by_taps = conv_ops._by_taps

    def recorded(x_, w_, wk, *rest):
        summed.append(wk.size)
        return by_taps(x_, w_, wk, *rest)

    monkeypatch.setattr(conv_ops, "_by_taps", recorded)
    b = np.zeros(6, np.float32)
    got = conv_step(fusegrad, x, w, b, padding=1)
    want = conv_step(torch, x, w, b, padding=1)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    assert summed == ([6 * 8] if live else [])  # the centre offset's weights only


@pytest.mark.parametrize("xs, ws, kw", [
    ((1, 8, 1, 1), (4, 8, 3, 3), {"padding": 1}),    # one sample: PyTorch's im2col kernel
    ((1, 3, 1, 5), (4, 3, 3, 3), {"padding": 1}),
    ((16, 3, 5, 5), (4, 3, 1, 1), {"padding": 1}),   # a padded 1x1 kernel, any batch
    ((2, 4, 3, 3), (4, 4, 1, 1), {"padding": 2}),
])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_multiply_the_padding_where_pytorchs_kernel_does(xs, ws, kw, bad):
    """Where PyTorch's kernel is not oneDNN's (one sample, small) or the kernel is 1x1, it
    multiplies the padding's zeros by every weight: a NaN or infinite weight at an offset
    that reads only padding makes its whole output channel NaN, here too."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    w[1, 2, 0, 0] = bad
    got = fusegrad.nn.functional.conv2d(fusegrad.tensor(x), fusegrad.tensor(w), **kw).numpy()
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **kw).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want[:, 1]).any()
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=1e-5, atol=1e-5)
