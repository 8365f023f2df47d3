"""Losses whose backward or reduction used to read values while AOT autograd traced them.

`multilabel_margin_loss` found its pairs (listed target classes against the others) from the
target's values and `ctc_loss`'s "mean" made its lengths' tensor from NumPy, so a compiled
graph holding either ran eagerly on aot_eager and inductor. Both now trace: the pairs come
from ops on the target and the forward's `is_target`, the lengths from a factory. Each case
compares the compiled loss and input gradient with eager fusegrad's and checks that no graph
fell back; torch (2.13) is the oracle of the eager values.
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
