"""Gamma with scalar (Python number or 0-d tensor) parameters: `sample` and `rsample` give
PyTorch's shapes, dtypes and autograd nodes; the draws have the right mean and variance; and
the reparameterised gradient matches the implicit derivative of the Gamma CDF (computed with
PyTorch's `gammainc`) and the identity E[dx/d concentration] = 1 / rate."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

PARAMS = {
    "numbers": lambda lib: (2.0, 1.0),
    "small_concentration": lambda lib: (0.5, 2.0),
    "tensors_0d": lambda lib: (lib.tensor(2.0), lib.tensor(1.0)),
    "float64_0d": lambda lib: (lib.tensor(2.0, dtype=lib.float64), lib.tensor(3.0,
                                                                              dtype=lib.float64)),
    "tensor_and_number": lambda lib: (lib.tensor(2.0, dtype=lib.float64), 1.0),
}


def _summary(lib, params, method, shape):
    dist = lib.distributions.Gamma(*params(lib))
    x = getattr(dist, method)(shape)
    return tuple(x.shape), str(x.dtype).split(".")[-1], x.requires_grad, dist.batch_shape


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
@pytest.mark.parametrize("method", ["sample", "rsample"])
@pytest.mark.parametrize("name", list(PARAMS))
def test_shapes_and_dtypes_match_torch(name, method, shape):
    fusegrad.manual_seed(0)
    got = _summary(fusegrad, PARAMS[name], method, shape)
    want = _summary(torch, PARAMS[name], method, shape)
    assert got[:3] == want[:3] and tuple(got[3]) == tuple(want[3])


def test_default_sample_call():
    fusegrad.manual_seed(0)
    x = fusegrad.distributions.Gamma(2.0, 1.0).sample()
    assert x.shape == () and x.dtype == fusegrad.float32 and float(x) > 0
    y = fusegrad.distributions.Gamma(fusegrad.tensor(2.0), fusegrad.tensor(1.0)).rsample()
    assert y.shape == () and y.dtype == fusegrad.float32 and float(y) > 0


def test_rsample_records_torch_nodes():
    def nodes(lib):
        c = lib.tensor(2.0, requires_grad=True)
        r = lib.tensor(1.5, requires_grad=True)
        x = lib.distributions.Gamma(c, r).rsample()
        x.backward()
        return x.grad_fn.name(), x.shape, c.grad.shape, r.grad.shape

    fusegrad.manual_seed(0)
    assert nodes(fusegrad) == nodes(torch)


@pytest.mark.parametrize("conc,rate", [(2.0, 3.0), (0.5, 1.0), (7.5, 0.5)])
def test_scalar_draws_have_gamma_moments(conc, rate):
    fusegrad.manual_seed(1)
    n = 20000
    # Many independent draws, each from the scalar-parameter distribution.
    dist = fusegrad.distributions.Gamma(conc, rate)
    draws = np.array([float(dist.sample()) for _ in range(2000)]
                     + dist.sample((n - 2000,)).tolist())
    mean, var = conc / rate, conc / rate ** 2
    assert (draws > 0).all()
    assert abs(draws.mean() - mean) < 5 * math.sqrt(var / n)
    # the sample variance's standard error: sqrt((m4 - var^2) / n), m4 = 3 var^2 (1 + 2/c)
    var_se = math.sqrt((3 * var ** 2 * (1 + 2 / conc) - var ** 2) / n)
    assert abs(draws.var() - var) < 5 * var_se


def _implicit_grad(conc: float, x: float, rate: float) -> float:
    """dx/d concentration of x = G / rate at fixed CDF value, G ~ Gamma(conc, 1): minus the
    CDF's concentration-derivative (central differences of PyTorch's gammainc) over the
    density."""
    g = torch.tensor(x * rate, dtype=torch.float64)
    h = 1e-6 * conc
    hi = torch.special.gammainc(torch.tensor(conc + h, dtype=torch.float64), g)
    lo = torch.special.gammainc(torch.tensor(conc - h, dtype=torch.float64), g)
    d_cdf = float(hi - lo) / (2 * h)
    log_pdf = (conc - 1) * math.log(float(g)) - float(g) - math.lgamma(conc)
    return -d_cdf / math.exp(log_pdf) / rate


@pytest.mark.parametrize("conc,rate", [(2.0, 1.0), (0.7, 2.0), (5.0, 0.5)])
def test_scalar_rsample_gradients(conc, rate):
    fusegrad.manual_seed(2)
    for _ in range(5):
        c = fusegrad.tensor(conc, dtype=fusegrad.float64, requires_grad=True)
        r = fusegrad.tensor(rate, dtype=fusegrad.float64, requires_grad=True)
        x = fusegrad.distributions.Gamma(c, r).rsample()
        x.backward()
        xv = x.item()
        assert float(r.grad) == pytest.approx(-xv / rate, rel=1e-12)  # x = G / rate
        assert float(c.grad) == pytest.approx(_implicit_grad(conc, xv, rate), rel=1e-4)


def test_mean_gradient_identity():
    # d E[x] / d concentration = 1 / rate, and E[dx/dc] is its unbiased estimate.
    fusegrad.manual_seed(3)
    n, rate = 20000, 2.0
    c = fusegrad.tensor(3.0, dtype=fusegrad.float64, requires_grad=True)
    x = fusegrad.distributions.Gamma(c, rate).rsample((n,))
    x.sum().backward()
    grads_mean = float(c.grad) / n
    # dx/dc has variance below E[x^2] / c^2-ish; a loose 5% band is many standard errors
    assert grads_mean == pytest.approx(1 / rate, rel=0.05)
