"""`fusegrad.special` against torch.special: `erfcx` (a registry op: values over the whole
line in float32 and float64, infinities, NaN, integer input, gradient and node name, the
derivative against finite differences), `ndtr`, and the functions that are other names of
top-level ones, compared on the same data with their gradients."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.special  # noqa: E402


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_erfcx_values_are_torchs(dtype, rtol):
    x = np.concatenate([np.linspace(-27, 30, 4001), [-30, -26.6, -0.5, 0.5, 0.0, -0.0, 4.0,
                                                      1e10, 1e300, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    want = torch.special.erfcx(torch.tensor(x)).numpy()
    got = fusegrad.special.erfcx(fusegrad.tensor(x)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)  # inf, 0 and nan exactly


def test_erfcx_of_integers_is_float_as_torch():
    want = torch.special.erfcx(torch.tensor([1, 2, -3]))
    got = fusegrad.special.erfcx(fusegrad.tensor([1, 2, -3]))
    assert str(got.dtype) == str(want.dtype)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_erfcx_gradient_and_node_as_torch():
    data = np.array([-3.0, -0.7, -0.2, 0.0, 0.4, 1.3, 6.0, 40.0])
    xt = torch.tensor(data, requires_grad=True)
    xf = fusegrad.tensor(data, requires_grad=True)
    yt, yf = torch.special.erfcx(xt), fusegrad.special.erfcx(xf)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__ == "SpecialErfcxBackward0"
    cot = np.linspace(-1, 2, data.size)
    yt.backward(torch.tensor(cot))
    yf.backward(fusegrad.tensor(cot))
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert fusegrad.autograd.gradcheck(fusegrad.special.erfcx,
                                       (fusegrad.tensor(data[:6], requires_grad=True),))


@pytest.mark.parametrize("name,data", [
    ("entr", [-1.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan, 1e-300]),
    ("log_ndtr", [-40.0, -5.0, -1.0, -0.99, 0.0, 1.0, 6.0, 40.0, np.inf, -np.inf, np.nan])])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_entr_and_log_ndtr_values_and_gradients_are_torchs(name, data, dtype):
    out = []
    for lib in (torch, fusegrad):
        x = lib.tensor(np.array(data, dtype=dtype), requires_grad=True)
        y = getattr(lib.special, name)(x)
        y.backward(lib.ones_like(y))
        out.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
    (want, want_g, want_node), (got, got_g, got_node) = out
    assert got_node == want_node
    rtol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))
    np.testing.assert_allclose(got_g, want_g, rtol=rtol * 10, atol=1e-300)
    ints = getattr(fusegrad.special, name)(fusegrad.tensor([0, 1, 2]))
    np.testing.assert_allclose(ints.numpy(), getattr(torch.special, name)(
        torch.tensor([0, 1, 2])).numpy(), rtol=1e-6)


CALLS = {
    "ndtr": lambda S, x, y: S.ndtr(x), "expit": lambda S, x, y: S.expit(x),
    "gammaln": lambda S, x, y: S.gammaln(y), "psi": lambda S, x, y: S.psi(y),
    "digamma": lambda S, x, y: S.digamma(y), "multigammaln": lambda S, x, y: S.multigammaln(
        y + 2, 3), "gammainc": lambda S, x, y: S.gammainc(y.detach(), y + 0.5),
    "gammaincc": lambda S, x, y: S.gammaincc(y.detach(), y + 0.5), "erf": lambda S, x, y: S.erf(x),
    "erfc": lambda S, x, y: S.erfc(x), "erfinv": lambda S, x, y: S.erfinv(x / 4),
    "exp2": lambda S, x, y: S.exp2(x), "expm1": lambda S, x, y: S.expm1(x),
    "log1p": lambda S, x, y: S.log1p(y), "i0": lambda S, x, y: S.i0(x),
    "i1": lambda S, x, y: S.i1(x), "logit": lambda S, x, y: S.logit(y / 4, 1e-3),
    "polygamma": lambda S, x, y: S.polygamma(2, y), "sinc": lambda S, x, y: S.sinc(x),
    "round": lambda S, x, y: S.round(x * 3), "xlogy": lambda S, x, y: S.xlogy(x, y),
    "softmax": lambda S, x, y: S.softmax(x, 0), "log_softmax": lambda S, x, y: S.log_softmax(
        x, 0), "logsumexp": lambda S, x, y: S.logsumexp(x, 0),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_special_function_is_torchs(name):
    data_x = np.array([-1.5, -0.3, 0.0, 0.8, 2.2])
    data_y = np.array([0.4, 1.1, 2.0, 3.7, 0.9])
    out = []
    for lib in (torch, fusegrad):
        x = lib.tensor(data_x, requires_grad=True)
        y = lib.tensor(data_y, requires_grad=True)
        r = CALLS[name](lib.special, x, y)
        r.backward(lib.ones_like(r) * 0.5 if r.dim() == 0 else lib.linspace(-1, 1, r.numel(),
                                                                               dtype=r.dtype))
        grads = [None if t.grad is None else t.grad.numpy() for t in (x, y)]
        out.append((r.detach().numpy(), grads))
    (want, want_g), (got, got_g) = out
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    for g, w in zip(got_g, want_g):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


def test_namespace_names_are_torchs():
    offered = set(fusegrad.special.__all__)
    assert offered <= set(dir(torch.special))
    assert {"erfcx", "ndtr", "expit", "gammaln", "i1"} <= offered
