"""Training batch norm under AOT autograd: its kernel writes the running statistics without
counting a change of their version (as PyTorch's), so a graph that applies one BatchNorm
twice (a siamese or contrastive network's two views) has the first call's node unpack the
statistics in the backward. The code generator's decomposition writes them with copies: the
trace puts their counts back. Oracle: eager fusegrad (values, gradients, buffers), and no
graph left to eager execution."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from program_support import compiler_fallbacks  # noqa: E402

import fusegrad as fg  # noqa: E402

BACKENDS = ["aot_eager", "inductor"]


def _encoder():
    fg.manual_seed(3)
    return fg.nn.Sequential(fg.nn.Linear(6, 8), fg.nn.BatchNorm1d(8), fg.nn.ReLU(),
                            fg.nn.Linear(8, 4))


def _views(step: int):
    rng = np.random.default_rng(step)
    return (fg.tensor(rng.standard_normal((5, 6)), dtype=fg.float32),
            fg.tensor(rng.standard_normal((5, 6)), dtype=fg.float32))


def _two_views_loss(enc, a, b):
    za, zb = enc(a), enc(b)
    return (za * zb).sum() + za.square().mean()


def _train(enc, loss_fn, steps: int = 3) -> list:
    """Per step: the loss, then the parameters' gradients; the buffers at the end."""
    opt = fg.optim.SGD(enc.parameters(), lr=0.05)
    seen = []
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(enc, *_views(step))
        loss.backward()
        seen.append(loss.item())
        seen.extend(p.grad.numpy().copy() for p in enc.parameters())
        opt.step()
    seen.extend(b.numpy().copy() for b in enc.buffers())
    return seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_batch_norm_applied_to_two_views(backend):
    want = _train(_encoder(), _two_views_loss)
    with compiler_fallbacks() as fallbacks:
        got = _train(_encoder(), fg.compile(_two_views_loss, backend=backend))
    assert not fallbacks, fallbacks
    assert len(got) == len(want)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_of_an_input_that_requires_grad_twice(backend):
    """The input itself requires grad: both calls' nodes reach it."""
    def run(fn):
        fg.manual_seed(5)
        bn = fg.nn.BatchNorm1d(4)
        a = fg.randn(5, 4, requires_grad=True)
        out = fn(bn, a)
        out.backward()
        return [out.item(), a.grad.numpy().copy(), bn.running_mean.numpy().copy(),
                bn.running_var.numpy().copy(), bn.num_batches_tracked.item()]

    def prog(bn, a):
        return (bn(a) * bn(a * 2)).sum()

    want = run(prog)
    with compiler_fallbacks() as fallbacks:
        got = run(fg.compile(prog, backend=backend))
    assert not fallbacks, fallbacks
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_eager_batch_norm_counts_no_version_of_its_statistics():
    """The eager kernel, the behaviour the trace keeps: the statistics' versions do not move
    (a write of the user's own into them still does, and the backward then refuses)."""
    bn = fg.nn.BatchNorm1d(3)
    x = fg.randn(4, 3, requires_grad=True)
    before = bn.running_mean._version, bn.running_var._version
    y = bn(x) * bn(x + 1)
    assert (bn.running_mean._version, bn.running_var._version) == before
    bn.running_mean.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
