"""The NumPy backward fast paths (convolution, max-pool, addmm/mm) against the fusegrad-op
formulas they shortcut and against PyTorch.

A plain `backward()` records no graph, so those derivatives compute in NumPy; under
`create_graph=True` the same derivatives run as fusegrad ops (differentiable again). Both
must give the same gradients, for every layout choice the kernels make.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.nn.functional as F
from fusegrad.ops import conv as C


def _grads(fn, arrays, needs, create_graph):
    """Gradients of sum(fn(*tensors) * cotangent) for the inputs flagged in `needs`."""
    ts = [fusegrad.from_numpy(a.copy()).requires_grad_(r) for a, r in zip(arrays, needs)]
    out = fn(*ts)
    cot = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(arrays[0].dtype)
    (out * fusegrad.from_numpy(cot)).sum().backward(create_graph=create_graph)
    return [t.grad.detach().numpy() if r else None for t, r in zip(ts, needs)], cot


def _torch_grads(fn, arrays, needs, cot):
    ts = [torch.from_numpy(a.copy()).requires_grad_(r) for a, r in zip(arrays, needs)]
    (fn(*ts) * torch.from_numpy(cot)).sum().backward()
    return [t.grad.numpy() if r else None for t, r in zip(ts, needs)]


def _check(fg_fn, th_fn, arrays, needs, tol):
    fast, cot = _grads(fg_fn, arrays, needs, False)
    slow, _ = _grads(fg_fn, arrays, needs, True)
    ref = _torch_grads(th_fn, arrays, needs, cot)
    for f, s, r in zip(fast, slow, ref):
        if r is None:
            assert f is None and s is None
            continue
        np.testing.assert_allclose(f, s, rtol=tol, atol=tol)
        np.testing.assert_allclose(f, r, rtol=tol, atol=tol)


CONV_CASES = [  # x shape, w shape, stride, padding, dilation, groups
    ((3, 2, 9, 8), (4, 2, 3, 3), 1, 0, 1, 1),
    ((2, 4, 12, 12), (6, 2, 3, 2), 2, 1, 1, 2),
    ((2, 3, 7, 7), (5, 3, 3, 3), 1, 2, 2, 1),
    ((2, 3, 20, 20), (4, 3, 5, 5), 1, 0, 1, 1),  # more pixels than BATCH_LAST_PIXELS
    ((2, 6, 16, 14), (6, 1, 3, 3), 2, 1, 1, 6),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(c[:2]) for c in CONV_CASES])
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, True),
                                   (True, False, False)], ids=["all", "no-input", "input-only"])
def test_conv2d_backward_paths(case, needs):
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])]
    _check(lambda x, w, b: F.conv2d(x, w, b, s, p, d, g),
           lambda x, w, b: torch.nn.functional.conv2d(x, w, b, s, p, d, g), arrays, needs, 1e-9)


def test_conv1d_and_float32_backward_paths():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((3, 4, 11)), rng.standard_normal((6, 2, 3)),
              rng.standard_normal(6)]
    _check(lambda x, w, b: F.conv1d(x, w, b, 2, 1, 1, 2),
           lambda x, w, b: torch.nn.functional.conv1d(x, w, b, 2, 1, 1, 2), arrays,
           (True, True, True), 1e-9)
    arrays = [a.astype(np.float32) for a in arrays]
    _check(lambda x, w, b: F.conv1d(x, w, b, 1, 0, 1, 1),
           lambda x, w, b: torch.nn.functional.conv1d(x, w, b, 1, 0, 1, 1),
           [arrays[0], rng.standard_normal((5, 4, 3)).astype(np.float32), arrays[2][:5]],
           (False, True, True), 1e-4)


@pytest.mark.parametrize("threshold", [0, 10**6])
def test_conv_layouts_agree(threshold, monkeypatch):
    """Both column orders (batch last or pixel last) give the same forward and backward."""
    monkeypatch.setattr(C, "BATCH_LAST_PIXELS", threshold)
    calls = []
    real = C._conv_backward_np
    monkeypatch.setattr(C, "_conv_backward_np", lambda *a: calls.append(1) or real(*a))
    test_conv2d_backward_paths(CONV_CASES[1], (True, True, True))
    assert len(calls) == 1  # the plain backward took the NumPy path, create_graph did not


POOL_CASES = [  # shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 8, 8), 2, 2, 0, 1, False),  # disjoint windows (LeNet)
    ((2, 3, 9, 7), 3, 2, 1, 1, False),  # overlapping windows
    ((1, 2, 7, 7), 2, 2, 0, 2, False),  # dilation makes them overlap
    ((1, 2, 7, 7), 2, 2, 0, 1, True),
    ((3, 7, 7), 3, 3, 1, 1, True),  # unbatched
]


@pytest.mark.parametrize("case", POOL_CASES, ids=[str(c) for c in POOL_CASES])
def test_max_pool_backward_paths(case):
    shape, k, s, p, d, ceil = case
    rng = np.random.default_rng(3)
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64) / 7
    _check(lambda t: F.max_pool2d(t, k, s, p, d, ceil),
           lambda t: torch.nn.functional.max_pool2d(t, k, s, p, d, ceil), [x], (True,), 1e-12)


def test_max_pool_ties_and_nan_indices_match_torch():
    x = np.array([[[[1, 1, 2, np.nan], [1, 0, np.nan, 3], [np.nan, 5, 5, 5],
                    [np.nan, 1, 5, 4]]]], dtype=np.float32)
    for k, s in ((2, 2), (3, 1)):
        fo, fi = F.max_pool2d(fusegrad.from_numpy(x), k, s, return_indices=True)
        to, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), k, s, return_indices=True)
        np.testing.assert_array_equal(fo.numpy(), to.numpy())
        np.testing.assert_array_equal(fi.numpy(), ti.numpy())


@pytest.mark.parametrize("needs", [(True, True, True), (False, True, True),
                                   (True, False, True)])
def test_linear_backward_layout_and_mask(needs):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((5, 7)), rng.standard_normal((3, 7)), rng.standard_normal(3)]
    _check(F.linear, torch.nn.functional.linear, arrays, needs, 1e-12)
    w = fusegrad.from_numpy(arrays[1].astype(np.float32)).requires_grad_()
    F.linear(fusegrad.from_numpy(arrays[0].astype(np.float32)), w).sum().backward()
    assert w.grad.is_contiguous()  # (g^T x), not a transposed copy of (x^T g)


def test_mm_with_transposed_operands():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((5, 4))
    _check(lambda x, y: x.t().mm(y.t()), lambda x, y: x.t().mm(y.t()), [a, b], (True, True),
           1e-12)
    _check(lambda x, y: x.t().mm(y.t()), lambda x, y: x.t().mm(y.t()), [a, b], (False, True),
           1e-12)
