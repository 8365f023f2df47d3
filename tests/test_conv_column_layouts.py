"""The convolution kernels' column layouts against PyTorch: wide per-sample columns (stride 1,
each kernel offset one run of the flattened padded image), per-sample weight gradients for
few output channels, the weight gradient's GEMM in either orientation, and the two-stage
col2im for wide kernels. Each case is chosen to take the layout it names (checked), and
float32 and float64 values, gradients included, must match PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import conv as C

CASES = [  # x shape, w shape, stride, padding, dilation, groups, bias
    ((3, 1, 32, 32), (6, 1, 5, 5), 1, 0, 1, 1, True),     # LeNet's first convolution
    ((2, 4, 18, 20), (6, 2, 3, 3), 1, 1, 1, 2, True),     # wide, padded, grouped
    ((2, 3, 20, 17), (5, 3, 3, 2), 1, 2, 2, 1, False),    # wide, dilated, no bias
    ((2, 3, 20, 13), (4, 3, 5, 5), 1, (1, 0), 1, 1, True),  # outputs fill too little of a row
    ((64, 6, 14, 14), (16, 6, 5, 5), 1, 0, 1, 1, True),   # LeNet's second (batch last)
    ((4, 4, 13, 11), (8, 2, 5, 4), 2, (2, 1), (1, 2), 2, True),  # two-stage col2im, strided
    ((3, 8, 6, 6), (4, 8, 4, 5), 1, 2, 1, 1, True),       # two-stage col2im, padded
    ((2, 16, 12, 24), (32, 16, 3, 3), 1, 1, 1, 1, True),  # weight grad as (cols @ g^T)^T
    ((2, 3, 24, 12), (300, 3, 1, 1), 1, 0, 1, 1, True),   # weight grad as g @ cols^T
]


def _run(lib, x, w, b, s, p, d, g):
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True) if b is not None else None
    y = lib.nn.functional.conv2d(xt, wt, bt, s, p, d, g)
    cot = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(x.dtype)
    (y * lib.tensor(cot)).sum().backward()
    out = [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    return out + ([bt.grad.numpy()] if bt is not None else [])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_conv2d_layouts_match_torch(case, dtype):
    xs, ws, s, p, d, g, has_bias = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if has_bias else None
    got = _run(fusegrad, x, w, b, s, p, d, g)
    ref = _run(torch, x, w, b, s, p, d, g)
    tol = 2e-5 if dtype == np.float32 else 1e-10
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(1.0, np.abs(r).max()))


def _layouts(case):
    """(wide, batch last, per-sample weight gradient, two-stage col2im, weight gradient as
    (cols @ g^T)^T) for a case."""
    xs, ws, s, p, d, g, _ = case
    s2, p2, d2 = ([v] * 2 if isinstance(v, int) else list(v) for v in (s, p, d))
    oh = C._out_size(xs[2], ws[2], s2[0], p2[0], d2[0])
    ow = C._out_size(xs[3], ws[3], s2[1], p2[1], d2[1])
    bl = C._batch_last(oh, ow)
    og, ckk = ws[0] // g, ws[1] * ws[2] * ws[3]
    per_sample = not bl and og <= C.PER_SAMPLE_WEIGHT_GRAD_ROWS
    return (not bl and C._wide(xs, ws[2:], s2, p2, d2, oh, ow), bl, per_sample,
            bl and ws[3] >= C.TWO_STAGE_MIN_WIDTH,
            not per_sample and ckk >= og and og <= C.ROWS_FIRST_MAX_OUT)


def test_cases_cover_every_layout():
    """The cases above reach each layout and its alternative."""
    flags = [_layouts(c) for c in CASES]
    for i in range(5):
        assert any(f[i] for f in flags) and not all(f[i] for f in flags)


def test_wide_columns_ignore_values_past_the_image_edge():
    """Infinite and NaN values in the input reach only the outputs whose windows read them
    (wrapped-around positions of the wide columns are dropped), as in PyTorch."""
    x = np.zeros((2, 1, 12, 12), dtype=np.float32)
    x[0, 0, 3, 11] = np.inf
    x[1, 0, 7, 0] = np.nan
    w = np.ones((2, 1, 3, 3), dtype=np.float32)
    assert C._wide(x.shape, (3, 3), [1, 1], [0, 0], [1, 1], 10, 10)
    got = fusegrad.nn.functional.conv2d(fusegrad.tensor(x), fusegrad.tensor(w)).numpy()
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w)).numpy()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("kernel, stride", [(2, 2), (3, 1), (12, 4), (16, 16)])
def test_max_pool_offsets_in_small_integers_match_torch(kernel, stride):
    """Max pooling keeps each window's winning offset in the smallest integer type that holds
    the kernel's size (int8 up to 127 offsets, int16 beyond: 12x12 and 16x16 here): values
    and indices (ties and NaN included) match PyTorch's."""
    rng = np.random.default_rng(4)
    x = rng.integers(0, 5, (2, 3, 33, 35)).astype(np.float32)  # many ties
    x[0, 1, 20, 30] = np.nan
    got = fusegrad.nn.functional.max_pool2d(fusegrad.tensor(x, requires_grad=True), kernel,
                                            stride, return_indices=True)
    ref = torch.nn.functional.max_pool2d(torch.tensor(x, requires_grad=True), kernel, stride,
                                         return_indices=True)
    np.testing.assert_array_equal(got[0].detach().numpy(), ref[0].detach().numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


@pytest.mark.parametrize("transposed", [False, True])
def test_input_gradient_under_create_graph_is_contiguous_as_torch(transposed):
    """A gradient penalty views the input's gradient (`grad.view(n, -1)`): the composite
    backward's col2im gives a contiguous gradient, as PyTorch's."""
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    results = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        w = lib.ones(3, 4, 3, 3) if transposed else lib.ones(4, 3, 3, 3, requires_grad=True)
        conv = lib.nn.functional.conv_transpose2d if transposed else lib.nn.functional.conv2d
        y = conv(t, w, stride=2, padding=1)
        (g,) = lib.autograd.grad((y * y).sum(), t, create_graph=True)
        assert g.is_contiguous() and g.stride() == (192, 64, 8, 1)
        penalty = (g.view(2, -1).norm(2, dim=1) - 1).pow(2).mean()
        results.append(lib.autograd.grad(penalty, t)[0].numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-3)
