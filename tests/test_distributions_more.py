"""The distributions added after the first set (Poisson, Binomial, Cauchy, StudentT, Gumbel,
...), against torch.distributions: shapes, repr, moments, log_prob / cdf / icdf / entropy
values and gradients, expand, and samples (the same stream where the sampler is built from
uniform, normal, exponential or Cauchy draws; statistics where it needs Gamma, Poisson or
Binomial draws, whose streams differ from PyTorch's)."""

import math

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(1)


def _pos(*shape):
    return RNG.uniform(0.5, 2.5, shape)


def _real(*shape):
    return RNG.normal(size=shape)


def _unit(*shape):
    return RNG.uniform(0.1, 0.9, shape)


def _simplex(*shape):
    p = RNG.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def _counts(high, *shape):
    return RNG.integers(0, high + 1, shape).astype(float)


# PyTorch's GeneralizedPareto compares its concentration with a float32 zero, which fails
# for float64 parameters: it is tested in float32.
FLOAT32 = {"GeneralizedPareto"}


def _dtype(mod, name):
    return mod.float32 if name in FLOAT32 else mod.float64


def _tensors(mod, arrays, dtype):
    return [mod.tensor(a, dtype=dtype, requires_grad=a.dtype.kind == "f")
            if isinstance(a, np.ndarray) else a for a in arrays]


def _multinomial_counts(n, k, rows):
    return np.stack([RNG.multinomial(n, np.full(k, 1.0 / k)) for _ in range(rows)]).astype(float)


# name -> (constructor(module, *params), params, values to score)
CASES = {
    "Poisson": (lambda m, r: m.distributions.Poisson(r), [_pos(3)], _counts(5, 4, 3)),
    "Binomial": (lambda m, n, p: m.distributions.Binomial(n, probs=p),
                 [np.array([5.0, 5.0, 5.0]), _unit(3)], _counts(5, 4, 3)),
    "BinomialLogits": (lambda m, n, p: m.distributions.Binomial(n, logits=p),
                       [np.array([4.0, 6.0, 8.0]), _real(3)], _counts(4, 4, 3)),
    "Geometric": (lambda m, p: m.distributions.Geometric(probs=p), [_unit(3)],
                  _counts(6, 4, 3)),
    "GeometricLogits": (lambda m, p: m.distributions.Geometric(logits=p), [_real(3)],
                        _counts(6, 4, 3)),
    "NegativeBinomial": (lambda m, n, p: m.distributions.NegativeBinomial(n, probs=p),
                         [_pos(3), _unit(3)], _counts(6, 4, 3)),
    "NegativeBinomialLogits": (lambda m, n, p: m.distributions.NegativeBinomial(n, logits=p),
                               [_pos(3), _real(3)], _counts(6, 4, 3)),
    "Multinomial": (lambda m, p: m.distributions.Multinomial(6, probs=p), [_simplex(2, 4)],
                    _multinomial_counts(6, 4, 2)),
    "MultinomialLogits": (lambda m, p: m.distributions.Multinomial(3, logits=p), [_real(4)],
                          _multinomial_counts(3, 4, 5)),
    "Cauchy": (lambda m, a, b: m.distributions.Cauchy(a, b), [_real(3), _pos(3)],
               _real(4, 3)),
    "HalfNormal": (lambda m, s: m.distributions.HalfNormal(s), [_pos(3)], _pos(4, 3)),
    "HalfCauchy": (lambda m, s: m.distributions.HalfCauchy(s), [_pos(3)], _pos(4, 3)),
    "StudentT": (lambda m, d, a, b: m.distributions.StudentT(d, a, b),
                 [np.array([0.7, 1.5, 3.0]), _real(3), _pos(3)], _real(4, 3)),
    "Chi2": (lambda m, d: m.distributions.Chi2(d), [_pos(3)], _pos(4, 3)),
    "Gumbel": (lambda m, a, b: m.distributions.Gumbel(a, b), [_real(3), _pos(3)],
               _real(4, 3)),
    "Weibull": (lambda m, s, c: m.distributions.Weibull(s, c), [_pos(3), _pos(3)],
                _pos(4, 3)),
    "Pareto": (lambda m, s, a: m.distributions.Pareto(s, a), [np.full(3, 0.5), _pos(3)],
               _pos(4, 3) + 0.5),
    "InverseGamma": (lambda m, c, r: m.distributions.InverseGamma(c, r),
                     [np.array([0.7, 1.5, 3.0]), _pos(3)], _pos(4, 3)),
    "Kumaraswamy": (lambda m, a, b: m.distributions.Kumaraswamy(a, b),
                    [np.array([0.7, 1.5, 3.0]), _pos(3)], _unit(4, 3)),
    "FisherSnedecor": (lambda m, a, b: m.distributions.FisherSnedecor(a, b),
                       [_pos(3) * 3, np.array([1.5, 3.0, 6.0])], _pos(4, 3)),
    "GeneralizedPareto": (lambda m, a, s, c: m.distributions.GeneralizedPareto(a, s, c),
                          [np.zeros(3), _pos(3), np.array([0.0, 0.3, 0.6])], _pos(4, 3)),
    "ContinuousBernoulli": (lambda m, p: m.distributions.ContinuousBernoulli(probs=p),
                            [np.array([0.2, 0.4995, 0.8])], _unit(4, 3)),
    "ContinuousBernoulliLogits": (
        lambda m, p: m.distributions.ContinuousBernoulli(logits=p), [_real(3)], _unit(4, 3)),
    "VonMises": (lambda m, a, k: m.distributions.VonMises(a, k), [_real(3), _pos(3)],
                 _real(4, 3)),
    "RelaxedBernoulli": (lambda m, t, p: m.distributions.RelaxedBernoulli(t, probs=p),
                         [np.array(0.7), _unit(3)], _unit(4, 3)),
    "RelaxedOneHotCategorical": (
        lambda m, t, p: m.distributions.RelaxedOneHotCategorical(t, logits=p),
        [np.array(0.8), _real(2, 4)], _simplex(3, 2, 4)),
    "LogisticNormal": (lambda m, a, b: m.distributions.LogisticNormal(a, b),
                       [_real(2, 3), _pos(2, 3)], _simplex(5, 2, 4)),
    "LowRankMultivariateNormal": (
        lambda m, a, w, d: m.distributions.LowRankMultivariateNormal(a, w, d),
        [_real(2, 3), _real(3, 2), _pos(3)], _real(4, 2, 3)),
    "MixtureSameFamily": (
        lambda m, p, a, b: m.distributions.MixtureSameFamily(
            m.distributions.Categorical(probs=p), m.distributions.Normal(a, b)),
        [_simplex(2, 3), _real(2, 3), _pos(2, 3)], _real(4, 2)),
    "MixtureSameFamilyMVN": (
        lambda m, p, a, b: m.distributions.MixtureSameFamily(
            m.distributions.Categorical(probs=p),
            m.distributions.Independent(m.distributions.Normal(a, b), 1)),
        [_simplex(3), _real(3, 2), _pos(3, 2)], _real(4, 2)),
}


def _build(name, mod):
    ctor, params, _ = CASES[name]
    tensors = _tensors(mod, params, _dtype(mod, name))
    return ctor(mod, *tensors), [t for t in tensors if t.requires_grad]


def _close(a, b, atol=1e-6, rtol=1e-5):
    a = torch.tensor(np.array(a.detach().numpy())) if isinstance(a, fusegrad.Tensor) else a
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=atol, rtol=rtol,
                               equal_nan=True)


def _same_outcome(f_call, t_call, **tol):
    """Both calls return close tensors, or both raise the same exception type."""
    try:
        expected = t_call()
    except Exception as e:  # noqa: BLE001  (any error type must be mirrored)
        with pytest.raises(type(e)):
            f_call()
        return None
    got = f_call()
    _close(got, expected, **tol)
    return got, expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_shapes_repr_and_moments(name):
    f, _ = _build(name, fusegrad)
    t, _ = _build(name, torch)
    assert tuple(f.batch_shape) == tuple(t.batch_shape)
    assert tuple(f.event_shape) == tuple(t.event_shape)
    assert repr(f) == repr(t)
    assert f.has_rsample == t.has_rsample
    assert f.has_enumerate_support == t.has_enumerate_support
    assert repr(f.support) == repr(t.support)
    for prop in ("mean", "mode", "variance", "stddev"):
        _same_outcome(lambda p=prop: getattr(f, p), lambda p=prop: getattr(t, p))


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_entropy_and_gradients(name):
    values = CASES[name][2]
    f, f_params = _build(name, fusegrad)
    t, t_params = _build(name, torch)
    fv = fusegrad.tensor(values, dtype=_dtype(fusegrad, name))
    tv = torch.tensor(values, dtype=_dtype(torch, name))
    _close(f.log_prob(fv), t.log_prob(tv))
    f_total, t_total = f.log_prob(fv).sum(), t.log_prob(tv).sum()
    outcome = _same_outcome(lambda: f.entropy(), lambda: t.entropy())
    if outcome is not None:
        f_total, t_total = f_total + outcome[0].sum(), t_total + outcome[1].sum()
    t_grads = torch.autograd.grad(t_total, t_params, allow_unused=True)
    f_grads = fusegrad.autograd.grad(f_total, f_params, allow_unused=True)
    for fg, tg in zip(f_grads, t_grads):
        if tg is None:
            assert fg is None or not bool((fg != 0).any())
        else:
            _close(fg, tg, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cdf_icdf(name):
    values = CASES[name][2]
    f, _ = _build(name, fusegrad)
    t, _ = _build(name, torch)
    fv = fusegrad.tensor(values, dtype=_dtype(fusegrad, name))
    tv = torch.tensor(values, dtype=_dtype(torch, name))
    _same_outcome(lambda: f.cdf(fv), lambda: t.cdf(tv))
    q = RNG.uniform(0.05, 0.95, values.shape)
    _same_outcome(lambda: f.icdf(fusegrad.tensor(q, dtype=fv.dtype)),
                  lambda: t.icdf(torch.tensor(q, dtype=tv.dtype)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_expand_and_sample_shapes(name):
    f, _ = _build(name, fusegrad)
    t, _ = _build(name, torch)
    shape = (2,) + tuple(t.batch_shape)
    fe, te = f.expand(shape), t.expand(shape)
    assert type(fe) is type(f)
    assert tuple(fe.batch_shape) == tuple(te.batch_shape)
    assert tuple(fe.event_shape) == tuple(te.event_shape)
    # One more batch dimension of size one, so the values broadcast against the expansion.
    values = torch.tensor(CASES[name][2], dtype=_dtype(torch, name)).unsqueeze(1)
    _close(fe.log_prob(fusegrad.tensor(values.numpy())), te.log_prob(values), atol=1e-5)
    assert tuple(f.sample((5,)).shape) == tuple(t.sample((5,)).shape)
    assert tuple(fe.sample().shape) == tuple(te.sample().shape)
    if t.has_enumerate_support:
        _same_outcome(lambda: f.enumerate_support(), lambda: t.enumerate_support())
        _same_outcome(lambda: f.enumerate_support(False), lambda: t.enumerate_support(False))


# Samplers built from streams that match PyTorch's draw for draw.
SAME_STREAM = ["Cauchy", "HalfNormal", "HalfCauchy", "Gumbel", "Weibull", "Pareto",
               "Kumaraswamy", "GeneralizedPareto", "ContinuousBernoulli", "VonMises",
               "RelaxedBernoulli", "RelaxedOneHotCategorical", "LogisticNormal",
               "LowRankMultivariateNormal", "Geometric", "GeometricLogits", "Multinomial",
               "MultinomialLogits", "MixtureSameFamily", "MixtureSameFamilyMVN"]


@pytest.mark.parametrize("name", SAME_STREAM)
def test_samples_follow_torch_stream(name):
    f, f_params = _build(name, fusegrad)
    t, t_params = _build(name, torch)
    fusegrad.manual_seed(7)
    torch.manual_seed(7)
    _close(f.sample((6,)), t.sample((6,)), atol=1e-5)
    if t.has_rsample:
        fusegrad.manual_seed(11)
        torch.manual_seed(11)
        fs, ts = f.rsample((3,)), t.rsample((3,))
        _close(fs, ts, atol=1e-5)
        t_grads = torch.autograd.grad(ts.sum(), t_params, allow_unused=True)
        f_grads = fusegrad.autograd.grad(fs.sum(), f_params, allow_unused=True)
        for fg, tg in zip(f_grads, t_grads):
            if tg is not None:
                _close(fg, tg, atol=1e-4, rtol=1e-4)


# Samplers that need Gamma, Poisson or Binomial draws: compare moments over many draws.
STATISTICAL = {
    "Poisson": (lambda m: m.distributions.Poisson(m.tensor([0.5, 4.0, 30.0])), 0.05),
    "Binomial": (lambda m: m.distributions.Binomial(m.tensor([10.0, 40.0]),
                                                    m.tensor([0.3, 0.8])), 0.05),
    "NegativeBinomial": (lambda m: m.distributions.NegativeBinomial(
        m.tensor([3.0, 10.0]), m.tensor([0.4, 0.2])), 0.06),
    "Chi2": (lambda m: m.distributions.Chi2(m.tensor([1.0, 5.0])), 0.06),
    "StudentT": (lambda m: m.distributions.StudentT(m.tensor([6.0, 9.0]), m.tensor([1.0, -2.0]),
                                                    m.tensor([0.5, 2.0])), 0.08),
    "InverseGamma": (lambda m: m.distributions.InverseGamma(m.tensor([5.0, 8.0]),
                                                            m.tensor([2.0, 1.0])), 0.1),
    "FisherSnedecor": (lambda m: m.distributions.FisherSnedecor(
        m.tensor([6.0, 10.0]), m.tensor([12.0, 20.0])), 0.1),
}


@pytest.mark.parametrize("name", sorted(STATISTICAL))
def test_sample_statistics(name):
    ctor, tol = STATISTICAL[name]
    fusegrad.manual_seed(0)
    f, t = ctor(fusegrad), ctor(torch)
    draws = torch.as_tensor(f.sample((20000,)).numpy()).double()
    np.testing.assert_allclose(draws.mean(0).numpy(), t.mean.double().numpy(), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(draws.var(0).numpy(), t.variance.double().numpy(),
                               rtol=3 * tol, atol=tol)
    if name in ("Chi2", "StudentT", "InverseGamma", "FisherSnedecor"):
        assert f.rsample((4,)).shape == (4, 2)


def _error(mod, build):
    with pytest.raises(ValueError) as info:
        build(mod)
    return str(info.value)


@pytest.mark.parametrize("build", [
    lambda m: m.distributions.Poisson(m.tensor([-1.0, 1.0])),
    lambda m: m.distributions.Binomial(m.tensor([2.5]), m.tensor([0.5])),
    lambda m: m.distributions.Binomial(3, m.tensor([1.5])),
    lambda m: m.distributions.Binomial(3),
    lambda m: m.distributions.Geometric(m.tensor([0.0, 0.5])),
    lambda m: m.distributions.Geometric(m.tensor([1.5])),
    lambda m: m.distributions.Cauchy(m.tensor([0.0]), m.tensor([-1.0])),
    lambda m: m.distributions.HalfNormal(m.tensor([-1.0])),
    lambda m: m.distributions.StudentT(m.tensor([-1.0])),
    lambda m: m.distributions.Chi2(m.tensor([-1.0, 2.0])),
    lambda m: m.distributions.Gumbel(m.tensor([math.nan]), m.tensor([1.0])),
    lambda m: m.distributions.Weibull(m.tensor([1.0]), m.tensor([0.0])),
    lambda m: m.distributions.Pareto(m.tensor([1.0]), m.tensor([-2.0])),
    lambda m: m.distributions.Multinomial(3, m.tensor([-0.1, 1.1])),
    lambda m: m.distributions.VonMises(m.tensor([0.0]), m.tensor([-1.0])),
    lambda m: m.distributions.ContinuousBernoulli(m.tensor([1.5]), validate_args=True),
    lambda m: m.distributions.Kumaraswamy(m.tensor([1.0]), m.tensor([-1.0])),
    lambda m: m.distributions.GeneralizedPareto(0.0, -1.0, 0.1),
    lambda m: m.distributions.LowRankMultivariateNormal(m.zeros(2), m.ones(3, 1), m.ones(2)),
    lambda m: m.distributions.LowRankMultivariateNormal(m.zeros(2), m.ones(2, 1), m.ones(3)),
    lambda m: m.distributions.MixtureSameFamily(m.distributions.Normal(0.0, 1.0),
                                                m.distributions.Normal(m.zeros(2), 1.0)),
    lambda m: m.distributions.MixtureSameFamily(m.distributions.Categorical(m.ones(3)),
                                                m.distributions.Normal(m.zeros(2), 1.0)),
    lambda m: m.distributions.Poisson(m.tensor([1.0])).log_prob(m.tensor([0.5])),
    lambda m: m.distributions.Binomial(3, m.tensor([0.5])).log_prob(m.tensor([4.0])),
    lambda m: m.distributions.Pareto(m.tensor([1.0]), m.tensor([2.0])).log_prob(
        m.tensor([0.5])),
    lambda m: m.distributions.Multinomial(2, m.tensor([0.5, 0.5])).log_prob(
        m.tensor([2.0, 1.0])),
])
def test_validation_messages(build):
    assert _error(fusegrad, build) == _error(torch, build)


def test_inhomogeneous_counts_raise_like_torch():
    for mod in (fusegrad, torch):
        d = mod.distributions.Binomial(mod.tensor([2.0, 3.0]), mod.tensor([0.5, 0.5]))
        with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
            d.entropy()
        with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
            mod.distributions.Multinomial(mod.tensor(3), mod.tensor([0.5, 0.5]))


def test_scalar_parameters_and_scalar_values():
    for name in ("Cauchy", "Gumbel", "StudentT", "Weibull", "Pareto"):
        ft = [getattr(mod.distributions, name)(1.5, 2.0) for mod in (fusegrad, torch)]
        assert tuple(ft[0].batch_shape) == tuple(ft[1].batch_shape) == ()
        _close(ft[0].log_prob(fusegrad.tensor(2.5)), ft[1].log_prob(torch.tensor(2.5)))
    # Numbers are accepted as HalfCauchy values only without validation.
    f = fusegrad.distributions.HalfCauchy(fusegrad.tensor([1.0]), validate_args=False)
    t = torch.distributions.HalfCauchy(torch.tensor([1.0]), validate_args=False)
    _close(f.log_prob(2.0), t.log_prob(2.0))
