"""Reductions on half types (bfloat16, float16) against torch: sums accumulate in float32 or
float64 as torch's CPU kernels do, never in the half type itself (where, in bfloat16,
256 + 1 == 256), for var_mean, std_mean, dist, renorm and the other reductions of
`ops/statistics.py` and `ops/norms.py`; their gradients in half types; and the argument
checks those ops make (cdist/pdist on half types, renorm, vector_norm's dtype)."""

import math

import numpy as np
import pytest
import torch
from oracle import fg

HALF = ["bfloat16", "float16"]
# A half type's result is rounded once from a wide sum: within two of its ulps of torch's.
RTOL = {"bfloat16": 1.6e-2, "float16": 2e-3, "float32": 1e-5, "float64": 1e-10}
INF = math.inf


def _data(kind, n=4096):
    rng = np.random.default_rng(0)
    if kind == "ones":
        return np.ones(n, np.float32)
    if kind == "rand":
        return rng.random(n).astype(np.float32)
    return rng.standard_normal(n).astype(np.float32)


def _arrays(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [(str(t.dtype), t.detach().double().numpy()) for t in outs]


def _compare(got, want, dt):
    assert len(got) == len(want)
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        assert g.shape == w.shape
        scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=RTOL[dt], atol=RTOL[dt] * scale * 1e-3,
                                   equal_nan=True)


REDUCTIONS = {
    "var_mean": lambda T, x: T.var_mean(x),
    "std_mean": lambda T, x: T.std_mean(x),
    "var_mean_dim": lambda T, x: T.var_mean(x.reshape(4, 1024), dim=1),
    "std_mean_dim_keep": lambda T, x: T.std_mean(x.reshape(4, 1024), 1, keepdim=True,
                                                  correction=0),
    "var": lambda T, x: T.var(x),
    "std": lambda T, x: T.std(x.reshape(64, 64), 0),
    "mean": lambda T, x: T.mean(x),
    "sum": lambda T, x: T.sum(x),
    "dist0": lambda T, x: T.dist(x, T.zeros_like(x), 0),
    "dist1": lambda T, x: T.dist(x, T.zeros_like(x), p=1),
    "dist2": lambda T, x: T.dist(x, T.zeros_like(x), p=2),
    "dist3": lambda T, x: T.dist(x, T.zeros_like(x), p=3),
    "dist_half": lambda T, x: T.dist(x, x.flip(0) * 0.5, 0.5),
    "dist_inf": lambda T, x: T.dist(x, T.zeros_like(x), INF),
    "renorm1": lambda T, x: T.renorm(x.reshape(2, 2048), 1, 0, 5),
    "renorm2": lambda T, x: T.renorm(x.reshape(2, 2048), 2, 0, 5),
    "renorm3": lambda T, x: T.renorm(x.reshape(2, 2048), 3, 1, 0.5),
    "renorm_inf": lambda T, x: T.renorm(x.reshape(2, 2048), INF, 0, 0.5),
    "nansum": lambda T, x: T.nansum(x),
    "nansum_dim": lambda T, x: T.nansum(x.reshape(4, 1024), 1),
    "nanmean": lambda T, x: T.nanmean(x),
    "nanmean_dim": lambda T, x: T.nanmean(x.reshape(4, 1024), 1),
    "logsumexp": lambda T, x: T.logsumexp(x, 0),
    "logsumexp_dim": lambda T, x: T.logsumexp(x.reshape(4, 1024), 1),
    "cumsum": lambda T, x: T.cumsum(x, 0),
    "logcumsumexp": lambda T, x: T.logcumsumexp(x, 0),
    "aminmax": lambda T, x: T.aminmax(x),
    "norm": lambda T, x: T.norm(x),
    "norm1": lambda T, x: T.norm(x, 1),
    "norm3": lambda T, x: T.norm(x, 3),
    "norm_dim": lambda T, x: T.norm(x.reshape(2, 2048), dim=1),
    "vector_norm_35": lambda T, x: T.linalg.vector_norm(x, 3.5),
    "vector_norm_0": lambda T, x: T.linalg.vector_norm(x, 0),
    "vector_norm_f32": lambda T, x: T.linalg.vector_norm(x, 2, dtype=T.float32),
    "frobenius": lambda T, x: T.norm(x.reshape(64, 64), "fro"),
}


@pytest.mark.parametrize("kind", ["ones", "rand", "randn"])
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_half_reduction_values_match_torch(name, dt, kind):
    """4096-element half inputs: the values, dtypes and shapes of torch's."""
    fn = REDUCTIONS[name]
    data = _data(kind)
    got = _arrays(fn(fg, fg.tensor(data).to(getattr(fg, dt))))
    want = _arrays(fn(torch, torch.tensor(data).to(getattr(torch, dt))))
    _compare(got, want, dt)


@pytest.mark.parametrize("dt", HALF)
def test_reported_values(dt):
    """The reported cases: exact, as in torch."""
    T = fg
    x = T.ones(4096, dtype=getattr(T, dt))
    assert T.var_mean(x)[1].item() == 1.0
    assert T.std_mean(x)[1].item() == 1.0
    assert T.dist(x, T.zeros_like(x), p=1).item() == 4096.0
    assert T.dist(x, T.zeros_like(x), p=2).item() == 64.0
    assert T.dist(x, T.zeros_like(x), p=3).item() == 16.0
    r = T.renorm(T.ones(2, 4096, dtype=getattr(T, dt)), 2, 0, 5).float().norm(dim=1)
    want = torch.renorm(torch.ones(2, 4096, dtype=getattr(torch, dt)), 2, 0, 5).float()
    np.testing.assert_array_equal(r.numpy(), want.norm(dim=1).numpy())


@pytest.mark.parametrize("dt", HALF)
def test_spread_and_distances_bitwise_on_random_data(dt):
    """var/std (and their means), dist and renorm round once from a wide sum, as torch does:
    the same bits on random data of many sizes and scales."""
    rng = np.random.default_rng(5)
    fns = [lambda T, x: T.var(x), lambda T, x: T.std(x), lambda T, x: T.var_mean(x),
           lambda T, x: T.std_mean(x), lambda T, x: T.dist(x, x.flip(0) * 0.5, 3),
           lambda T, x: T.dist(x, x.flip(0), 1),
           lambda T, x: T.renorm(x[: x.numel() // 2 * 2].reshape(2, -1), 2, 0, 1.0)]
    for _ in range(10):
        n = int(rng.integers(2, 5000))
        data = (rng.standard_normal(n) * rng.uniform(0.01, 20) + rng.uniform(-5, 5))
        data = data.astype(np.float32)
        for fn in fns:
            got = _arrays(fn(fg, fg.tensor(data).to(getattr(fg, dt))))
            want = _arrays(fn(torch, torch.tensor(data).to(getattr(torch, dt))))
            for (gd, g), (wd, w) in zip(got, want):
                assert gd == wd
                np.testing.assert_array_equal(g, w)


def _grad_data():
    rng = np.random.default_rng(1)
    d = rng.standard_normal(64).astype(np.float32)
    d[[3, 10, 20]] = 0  # zeros: |0|^(p-1) for p < 1
    d[[5, 6]] = 3.0  # ties for the largest magnitude (inf-norm)
    d[7] = -3.0
    return d


GRADS = {
    "var_mean": lambda T, x: T.var_mean(x),
    "std_mean": lambda T, x: T.std_mean(x),
    "var_mean_dim": lambda T, x: T.var_mean(x.reshape(4, 16), 1),
    "std_mean_dim": lambda T, x: T.std_mean(x.reshape(4, 16), 1, correction=0),
    "logsumexp": lambda T, x: T.logsumexp(x.reshape(4, 16), 1),
    "nansum": lambda T, x: T.nansum(x.reshape(4, 16), 1),
    "nanmean": lambda T, x: T.nanmean(x.reshape(4, 16), 1),
    "aminmax": lambda T, x: T.aminmax(x.reshape(4, 16), dim=1),
    "logcumsumexp": lambda T, x: T.logcumsumexp(x, 0),
}
for _p in (0.5, 1, 1.5, 2, 3, INF):
    GRADS[f"dist_{_p}"] = lambda T, x, p=_p: T.dist(x, T.zeros_like(x), p)
    GRADS[f"renorm_{_p}"] = lambda T, x, p=_p: T.renorm(x.reshape(4, 16), p, 0, 1.0)
    GRADS[f"vector_norm_{_p}"] = lambda T, x, p=_p: T.linalg.vector_norm(
        x.reshape(4, 16), p, dim=1)
    GRADS[f"vector_norm_wide_{_p}"] = lambda T, x, p=_p: T.linalg.vector_norm(
        x.reshape(4, 16), p, dim=1,
        dtype=T.float32 if x.dtype in (T.bfloat16, T.float16) else T.float64)


def _grad(T, fn, dt, data):
    x = T.tensor(data).to(getattr(T, dt)).requires_grad_()
    out = fn(T, x)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0
    for o in outs:  # distinct weights per element, so each output's gradient matters
        w = (T.arange(o.numel()).reshape(o.shape) % 7 + 1).float()
        total = total + (o.float() * w).sum()
    total.backward()
    return str(x.grad.dtype), x.grad.double().numpy()


@pytest.mark.parametrize("dt", HALF + ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_torch(name, dt):
    """Gradients (half types included) as torch's: zeros of a p < 1 norm give 0, not NaN;
    inf-norm ties share the gradient; norms of half types are taken in float32."""
    data = _grad_data()
    gd, g = _grad(fg, GRADS[name], dt, data)
    wd, w = _grad(torch, GRADS[name], dt, data)
    assert gd == wd
    np.testing.assert_allclose(g, w, rtol=RTOL[dt], atol=RTOL[dt], equal_nan=True)


@pytest.mark.parametrize("dt", HALF)
def test_half_gradients_4096(dt):
    """Gradients on 4096-element half inputs (the sizes where half accumulation fails)."""
    for fn in (lambda T, x: T.var_mean(x), lambda T, x: T.std_mean(x),
               lambda T, x: T.dist(x, T.zeros_like(x), 2),
               lambda T, x: T.dist(x, T.zeros_like(x), 3),
               lambda T, x: T.renorm(x.reshape(2, 2048), 2, 0, 5),
               lambda T, x: T.renorm(x.reshape(2, 2048), 1, 0, 5)):
        data = _data("rand")
        gd, g = _grad(fg, fn, dt, data)
        wd, w = _grad(torch, fn, dt, data)
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=RTOL[dt], atol=RTOL[dt] * 1e-2)


def test_norm_p0_gradient_is_undefined():
    """torch's norm_backward gives p = 0 no gradient: the leaf's grad stays None."""
    for T in (fg, torch):
        x = T.randn(4, requires_grad=True)
        T.linalg.vector_norm(x, 0).backward()
        assert x.grad is None
        x = T.randn(4, requires_grad=True)
        T.dist(x, T.zeros(4), 0).backward()
        assert x.grad is None


def _error(fn):
    out = []
    for T in (fg, torch):
        with pytest.raises(Exception) as info:
            fn(T)
        out.append((type(info.value).__name__, str(info.value)))
    assert out[0] == out[1]


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("case", ["cdist", "cdist_p1", "cdist_direct", "pdist"])
def test_cdist_pdist_half_not_implemented(case, dt):
    """torch's CPU cdist/pdist kernels have no half types."""
    def fn(T):
        a = T.ones(3, 4, dtype=getattr(T, dt))
        b = T.ones(2, 4, dtype=getattr(T, dt))
        if case == "cdist":
            return T.cdist(a, b)
        if case == "cdist_p1":
            return T.cdist(a, b, p=1)
        if case == "cdist_direct":
            return T.cdist(T.ones(30, 4, dtype=a.dtype), b,
                           compute_mode="donot_use_mm_for_euclid_dist")
        return T.pdist(a)

    _error(fn)


@pytest.mark.parametrize("dt", HALF)
def test_cdist_pdist_half_empty_and_matmul_paths(dt):
    """Empty inputs and cdist's matmul path (more than 25 rows) do work on half types."""
    for fn in (lambda T, d: T.cdist(T.ones(0, 4, dtype=d), T.ones(2, 4, dtype=d)),
               lambda T, d: T.cdist(T.ones(3, 0, dtype=d), T.ones(2, 0, dtype=d)),
               lambda T, d: T.cdist(T.ones(30, 4, dtype=d), T.ones(2, 4, dtype=d) * 2),
               lambda T, d: T.pdist(T.ones(1, 4, dtype=d)),
               lambda T, d: T.pdist(T.ones(3, 0, dtype=d))):
        got = _arrays(fn(fg, getattr(fg, dt)))
        want = _arrays(fn(torch, getattr(torch, dt)))
        _compare(got, want, dt)


@pytest.mark.parametrize("case", ["1d", "0d", "p0", "pneg", "maxnorm", "maxnorm_frac", "dim",
                                  "1d_bad_dim"])
def test_renorm_errors(case):
    """renorm's checks, in torch's order and words."""
    def fn(T):
        x = T.ones(2, 3)
        return {
            "1d": lambda: T.renorm(T.ones(3), 2, 0, 1.0),
            "0d": lambda: T.renorm(T.tensor(3.0), 2, 0, 1.0),
            "p0": lambda: T.renorm(x, 0, 0, 1.0),
            "pneg": lambda: T.renorm(x, -1, 0, 1.0),
            "maxnorm": lambda: T.renorm(x, 2, 0, -1.0),
            "maxnorm_frac": lambda: T.renorm(x, 2, 0, -0.25),
            "dim": lambda: T.renorm(x, 2, 5, 1.0),
            "1d_bad_dim": lambda: T.renorm(T.ones(3), 2, 4, 1.0),
        }[case]()

    _error(fn)


@pytest.mark.parametrize("case", ["narrow", "int", "complex_for_real", "real_for_complex",
                                  "bf16_to_half", "half_to_bf16", "complex_narrow",
                                  "empty_inf", "empty_neg", "empty_dim_inf", "empty_dims_neg"])
def test_vector_norm_argument_errors(case):
    """linalg.vector_norm's dtype and empty-input checks, as torch's."""
    def fn(T):
        return {
            "narrow": lambda: T.linalg.vector_norm(T.ones(3, dtype=T.float64),
                                                   dtype=T.float32),
            "int": lambda: T.linalg.vector_norm(T.ones(3), dtype=T.int64),
            "complex_for_real": lambda: T.linalg.vector_norm(T.ones(3), dtype=T.complex64),
            "real_for_complex": lambda: T.linalg.vector_norm(T.ones(3, dtype=T.complex64),
                                                             dtype=T.float32),
            "bf16_to_half": lambda: T.linalg.vector_norm(T.ones(3, dtype=T.bfloat16),
                                                         dtype=T.float16),
            "half_to_bf16": lambda: T.linalg.vector_norm(T.ones(3, dtype=T.float16),
                                                         dtype=T.bfloat16),
            "complex_narrow": lambda: T.linalg.vector_norm(T.ones(3, dtype=T.complex128),
                                                           dtype=T.complex64),
            "empty_inf": lambda: T.linalg.vector_norm(T.ones(0), INF),
            "empty_neg": lambda: T.linalg.vector_norm(T.ones(0), -1),
            "empty_dim_inf": lambda: T.linalg.vector_norm(T.ones(0, 3), INF, 0),
            "empty_dims_neg": lambda: T.linalg.vector_norm(T.ones(0, 3), -2.5, (0, 1)),
        }[case]()

    _error(fn)


def test_vector_norm_allowed_dtypes_and_empty_cases():
    """What torch allows: widening dtypes, and empty reductions with an identity."""
    for fn in (lambda T: T.linalg.vector_norm(T.ones(3, dtype=T.bfloat16), dtype=T.float64),
               lambda T: T.linalg.vector_norm(T.ones(3, dtype=T.complex64),
                                              dtype=T.complex128),
               lambda T: T.linalg.vector_norm(T.ones(0, 3), INF, 1),
               lambda T: T.linalg.vector_norm(T.ones(0), 2),
               lambda T: T.linalg.vector_norm(T.ones(0), 0)):
        got, want = _arrays(fn(fg)), _arrays(fn(torch))
        _compare(got, want, "float64")


@pytest.mark.parametrize("p", [1, 1.5, 2, 3])
def test_renorm_complex_gradient(p):
    """renorm's gradient on complex input (its norms in complex128, as torch's CPU
    accumulation type): as torch's."""
    rng = np.random.default_rng(0)
    d = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    d[0, 1] = 0
    g = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    out = []
    for T in (fg, torch):
        x = T.tensor(d, requires_grad=True)
        y = T.renorm(x, p, 0, 1.0)
        y.backward(T.tensor(g))
        out.append((str(x.grad.dtype), y.detach().numpy(), x.grad.numpy()))
    assert out[0][0] == out[1][0]
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-5, atol=1e-6)
