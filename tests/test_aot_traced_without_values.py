"""Ops whose derivative (or reduction) read values while AOT autograd traced them.

`multilabel_margin_loss` found its pairs (listed target classes against the others) from the
target's values, `ctc_loss`'s "mean" made its lengths' tensor from NumPy, `lu_solve`'s
backward read the pivots to build P, and `householder_product` made its masks and `pdist`'s
backward its pairs of rows from NumPy data, so a compiled graph holding any of them ran
eagerly on aot_eager and inductor. They now trace: the pairs come from ops on the target and
the forward's `is_target`, P from `lu_unpack`, the lengths, masks and pairs of rows from
factories. Each case compares the compiled result and gradients with eager fusegrad's and
checks that no graph fell back; torch (2.13) is the oracle of the eager values where cheap.
"""

from __future__ import annotations

import numpy as np
import pytest
from program_support import compiler_fallbacks

import fusegrad as fg

torch = pytest.importorskip("torch")

BACKENDS = ("aot_eager", "inductor")


def _both(fn, x, *rest, backend: str):
    """(eager loss, eager grad, compiled loss, compiled grad) of `fn(x * 2, *rest).sum()`."""
    def loss(x, *rest):
        return fn(x * 2, *rest).sum()

    compiled = fg.compile(loss, backend=backend)
    with compiler_fallbacks() as fallbacks:
        out = compiled(x, *rest)
        out.backward()
    got = x.grad.clone()
    x.grad = None
    ref = loss(x, *rest)
    ref.backward()
    want = x.grad.clone()
    x.grad = None
    assert fallbacks == []
    return ref, want, out, got


def _targets(rng, shape):
    """Multilabel targets: each row's classes, then -1 and filler, as the loss reads them."""
    c = shape[-1]
    rows = []
    for _ in range(int(np.prod(shape[:-1]))):
        k = int(rng.integers(0, c + 1))
        listed = list(rng.integers(0, c, k))
        rows.append(listed + ([-1] if k < c else []) + list(rng.integers(0, c, max(c - k - 1, 0))))
    return np.array(rows, np.int64).reshape(shape)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(4, 6), (6,), (1, 3)])
def test_multilabel_margin_loss_traces(backend, reduction, shape):
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    xs = rng.standard_normal(shape).astype(np.float32)
    ts = _targets(rng, shape)
    x = fg.tensor(xs, requires_grad=True)
    ref, want, out, got = _both(
        lambda x, t: fg.nn.functional.multilabel_margin_loss(x, t, reduction=reduction),
        x, fg.tensor(ts), backend=backend)
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    tx = torch.tensor(xs, requires_grad=True)
    torch.nn.functional.multilabel_margin_loss(tx * 2, torch.tensor(ts),
                                               reduction=reduction).sum().backward()
    np.testing.assert_allclose(want.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction,zero_infinity", [("mean", False), ("mean", True),
                                                      ("sum", False), ("none", True)])
def test_ctc_loss_with_list_lengths_traces(backend, reduction, zero_infinity):
    rng = np.random.default_rng(3)
    lp = rng.standard_normal((6, 3, 5)).astype(np.float32)
    lp = lp - np.log(np.exp(lp).sum(2, keepdims=True))
    # The third sample's target cannot fit its input (an infinite loss, zeroed or kept).
    targets = np.array([[1, 2, 0, 0], [3, 3, 1, 0], [1, 2, 3, 4]])
    il, tl = [6, 5, 2], [2, 3, 4]
    x = fg.tensor(lp, requires_grad=True)

    def fn(x, t):
        return fg.nn.functional.ctc_loss(x, t, il, tl, reduction=reduction,
                                         zero_infinity=zero_infinity)

    ref, want, out, got = _both(fn, x, fg.tensor(targets), backend=backend)
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    tx = torch.tensor(lp, requires_grad=True)
    torch.nn.functional.ctc_loss(tx * 2, torch.tensor(targets), il, tl, reduction=reduction,
                                 zero_infinity=zero_infinity).sum().backward()
    np.testing.assert_allclose(ref.item(), (torch.nn.functional.ctc_loss(
        torch.tensor(lp) * 2, torch.tensor(targets), il, tl, reduction=reduction,
        zero_infinity=zero_infinity).sum().item()), rtol=1e-5)
    np.testing.assert_allclose(want.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False),
                                          (False, True)])
def test_lu_solve_backward_traces(backend, left, adjoint):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    lu0, piv0 = (t.numpy() for t in torch.linalg.lu_factor(torch.tensor(a, dtype=torch.float32)))
    b0 = rng.standard_normal((4, 4)).astype(np.float32)

    def fn(lib, lu, piv, b):
        return (lib.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint) *
                lib.arange(16.0).reshape(4, 4)).sum()

    grads = []
    for lib, run in ((fg, lambda *a: fg.compile(lambda *x: fn(fg, *x), backend=backend)(*a)),
                     (fg, lambda *a: fn(fg, *a)), (torch, lambda *a: fn(torch, *a))):
        lu, b = lib.tensor(lu0, requires_grad=True), lib.tensor(b0, requires_grad=True)
        fg._dynamo.reset()
        with compiler_fallbacks() as fallbacks:
            out = run(lu, lib.tensor(piv0), b)
            out.backward()
        assert fallbacks == []
        grads.append([out.item(), lu.grad.numpy(), b.grad.numpy()])
    for got, want in zip(grads[0], grads[1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads[1], grads[2]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_householder_product_backward_traces(backend, dtype):
    rng = np.random.default_rng(12)
    x0 = rng.standard_normal((5, 3)) + (1j * rng.standard_normal((5, 3)) if dtype ==
                                        "complex64" else 0)
    t0 = rng.random(3) + (0.5j * rng.random(3) if dtype == "complex64" else 0)

    def fn(lib, x, t):
        return (lib.linalg.householder_product(x, t) * lib.arange(15.0).reshape(5, 3)).sum().abs()

    results = []
    for compiled in (True, False):
        dt = getattr(fg, dtype)
        x, t = fg.tensor(x0, dtype=dt, requires_grad=True), fg.tensor(t0, dtype=dt,
                                                                      requires_grad=True)
        fg._dynamo.reset()
        run = fg.compile(lambda x, t: fn(fg, x, t), backend=backend) if compiled else \
            (lambda x, t: fn(fg, x, t))
        with compiler_fallbacks() as fallbacks:
            out = run(x, t)
            out.backward()
        assert fallbacks == []
        results.append([out.item(), x.grad.numpy(), t.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n,p", [(5, 2.0), (4, 1.0), (6, 3.0), (3, float("inf")), (1, 2.0)])
def test_pdist_backward_traces(backend, n, p):
    """pdist's backward takes its pairs of rows from `triu_indices` (made from NumPy data,
    they stopped the trace); torch gives the eager values."""
    x0 = np.random.default_rng(n).standard_normal((n, 3))
    x = fg.tensor(x0, dtype=fg.float32, requires_grad=True)
    ref, want, out, got = _both(lambda x: fg.nn.functional.pdist(x, p)
                                * fg.arange(n * (n - 1) // 2), x, backend=backend)
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    t = torch.tensor(x0, dtype=torch.float32, requires_grad=True)
    (torch.nn.functional.pdist(t * 2, p) * torch.arange(n * (n - 1) // 2)).sum().backward()
    np.testing.assert_allclose(want.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
