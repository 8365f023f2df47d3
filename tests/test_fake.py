"""Fake tensors: shapes, strides, dtypes and autograd without data, against eager execution."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad._fake import DataDependentOutputError, FakeTensor, FakeTensorMode  # noqa: E402


def program(T, x, w, b):
    """Ten ops mixing broadcasting, views, reductions, matmul and in-place."""
    h = x @ w                      # matmul
    h = h + b                      # broadcast add
    h = h.relu()                   # relu
    s = h.softmax(dim=1)           # softmax
    t = s.t()                      # view
    u = t.reshape(-1)              # reshape (copy)
    v = u[2:10].unsqueeze(0)       # slice + unsqueeze
    m = v.expand(3, 8).mean(0)     # expand + mean
    n = T.cat([m, h.sum(1)])       # cat
    return (n * n.sigmoid()).sum()


def _names(fn, out=None):
    """Node class names of the backward graph, depth first."""
    out = [] if out is None else out
    if fn is None:
        return out
    out.append(type(fn).__name__)
    for child, _ in fn.next_functions:
        _names(child, out)
    return out


def _inputs(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (5, 6), (6,))]


def test_fake_forward_backward_matches_eager_shapes_without_data():
    arrays = _inputs(np.random.default_rng(0))
    real = [fusegrad.tensor(a, requires_grad=True) for a in arrays]
    loss = program(fusegrad, *real)
    loss.backward()

    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in real]
        fake_loss = program(fusegrad, *fakes)
        assert isinstance(fake_loss, FakeTensor)
        assert fake_loss._data is None
        assert _names(fake_loss.grad_fn) == _names(loss.grad_fn)
        fake_loss.backward()
    for f, r in zip(fakes, real):
        assert isinstance(f.grad, FakeTensor) and f.grad._data is None
        assert f.grad.shape == r.grad.shape
        assert f.grad.dtype is r.grad.dtype


def test_fake_without_mode_runs_meta_only():
    x = FakeTensor.from_tensor(fusegrad.zeros(3, 4, requires_grad=True))
    y = (x.t() * 2).sum(0)
    real = (fusegrad.zeros(3, 4).t() * 2).sum(0)
    assert isinstance(y, FakeTensor) and y.shape == real.shape
    assert type(y.grad_fn).__name__ == "SumBackward1"
    y.sum().backward()
    assert isinstance(x.grad, FakeTensor) and x.grad.shape == (3, 4)


@pytest.mark.parametrize("make", [
    lambda: fusegrad.zeros(2, 3), lambda: fusegrad.ones(4, dtype=fusegrad.float64),
    lambda: fusegrad.randn(2, 2), lambda: fusegrad.arange(5), lambda: fusegrad.eye(3),
    lambda: fusegrad.full((2,), 1.5),
])
def test_factories_make_fakes_under_mode(make):
    real = make()
    with FakeTensorMode():
        fake = make()
    assert isinstance(fake, FakeTensor) and fake._data is None
    assert fake.shape == real.shape and fake.dtype is real.dtype
    assert fake.stride() == real.stride()


@pytest.mark.parametrize("use", [
    lambda t: t.item(), lambda t: bool(t), lambda t: t.tolist(), lambda t: t.numpy(),
    lambda t: float(t),
])
def test_data_dependent_ops_raise(use):
    with FakeTensorMode():
        t = fusegrad.zeros(())
        with pytest.raises(DataDependentOutputError):
            use(t)


def test_views_share_version_and_geometry():
    real = fusegrad.zeros(4, 6)
    with FakeTensorMode() as mode:
        f = mode.from_tensor(real)
        for fn in (lambda t: t[1:3, ::2], lambda t: t.t()[2], lambda t: t.view(3, 8),
                   lambda t: t.unsqueeze(1).expand(4, 5, 6)):
            v, rv = fn(f), fn(real)
            assert v.shape == rv.shape and v.stride() == rv.stride()
            assert v.storage_offset() == rv.storage_offset()
            assert v._vc is f._vc and v._base is f
        f.add_(1)
        assert f._version == 1


def test_shape_errors_match_eager():
    with FakeTensorMode():
        a, b = fusegrad.zeros(2, 3), fusegrad.zeros(4, 5)
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
            a @ b
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match"):
            a + fusegrad.zeros(4)
