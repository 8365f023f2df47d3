"""nn.init (distributions, bounds, gains, errors) and nn.utils gradient clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.nn as fnn
from fusegrad.nn import init


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                        ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain(name, param):
    assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


def test_gain_and_fan_errors():
    for mod in (init, torch.nn.init):
        with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
            mod.calculate_gain("foo")
    for mod, T in ((init, fusegrad), (torch.nn.init, torch)):
        with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor "
                                             "with fewer than 2 dimensions"):
            mod.xavier_uniform_(T.empty(3))


def _values(t):
    return t.detach().numpy().ravel()


def test_uniform_and_normal():
    g = fusegrad.Generator().manual_seed(1)
    t = init.uniform_(fusegrad.empty(100, 100), -2.0, 3.0, generator=g)
    v = _values(t)
    assert v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.05
    v = _values(init.normal_(fusegrad.empty(200, 100), 1.0, 2.0))
    assert abs(v.mean() - 1) < 0.05 and abs(v.std() - 2) < 0.05
    v = _values(init.trunc_normal_(fusegrad.empty(100, 100), 0.0, 1.0, -1.0, 1.5))
    assert v.min() >= -1 and v.max() <= 1.5


def test_constants():
    t = fusegrad.empty(2, 3)
    assert (_values(init.constant_(t, 0.25)) == 0.25).all()
    assert (_values(init.ones_(t)) == 1).all()
    assert (_values(init.zeros_(t)) == 0).all()
    np.testing.assert_array_equal(init.eye_(t).numpy(), np.eye(2, 3))
    assert t._version == 4


@pytest.mark.parametrize("fn,kwargs,expected_std", [
    ("xavier_uniform_", {}, math.sqrt(2 / (30 * 9 + 20 * 9))),
    ("xavier_normal_", dict(gain=2.0), 2 * math.sqrt(2 / (30 * 9 + 20 * 9))),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), math.sqrt(2 / 6) / math.sqrt(30 * 9)),
    ("kaiming_normal_", dict(mode="fan_out", nonlinearity="relu"), math.sqrt(2 / (20 * 9))),
])
def test_fan_based_inits(fn, kwargs, expected_std):
    w = fusegrad.empty(20, 30, 3, 3)
    v = _values(getattr(init, fn)(w, **kwargs))
    assert abs(v.std() - expected_std) / expected_std < 0.05
    if "uniform" in fn:
        assert np.abs(v).max() <= expected_std * math.sqrt(3) + 1e-7


def test_init_under_grad_is_outside_autograd():
    w = fnn.Parameter(fusegrad.empty(3, 3))
    init.kaiming_uniform_(w)
    assert w.is_leaf and w.requires_grad and w.grad_fn is None


def test_orthogonal():
    q = init.orthogonal_(fusegrad.empty(3, 5)).numpy()
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-5)


def _with_grads(T, seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for shape in ((3, 4), (5,), (2, 2)):
        p = T.zeros(shape, requires_grad=True)
        p.grad = T.tensor(rng.standard_normal(shape).astype(np.float32))
        ps.append(p)
    ps.append(T.zeros(2, requires_grad=True))  # no grad
    return ps


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0),
                                                (0.3, float("inf")), (2.0, 3)])
def test_clip_grad_norm(max_norm, norm_type):
    pt, pf = _with_grads(torch), _with_grads(fusegrad)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    nf = fnn.utils.clip_grad_norm_(pf, max_norm, norm_type)
    np.testing.assert_allclose(float(nf), float(nt), rtol=1e-5)
    assert nf.dtype == fusegrad.float32
    for a, b in zip(pf, pt):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_value():
    pt, pf = _with_grads(torch), _with_grads(fusegrad)
    torch.nn.utils.clip_grad_value_(pt, 0.5)
    fnn.utils.clip_grad_value_(pf, 0.5)
    for a, b in zip(pf, pt):
        if b.grad is not None:
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_clip_nonfinite_error():
    p = fusegrad.zeros(2, requires_grad=True)
    p.grad = fusegrad.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients"):
        fnn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_parameters_vector_roundtrip():
    m = fnn.Linear(3, 2)
    v = fnn.utils.parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    fnn.utils.vector_to_parameters(v * 0 + 1, m.parameters())
    assert (m.weight.detach().numpy() == 1).all()
