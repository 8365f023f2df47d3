"""Breadth of `fusegrad.distributions` against torch.distributions: the constraint registry
(`biject_to` / `transform_to`), OneHotCategoricalStraightThrough, LKJCholesky, Wishart and
the KL pairs added last (values, gradients and error messages)."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(7)


def _close(a, b, atol=1e-8, rtol=1e-7):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)


def _both(fn):
    """`fn(module)` for fusegrad and torch; returns (fusegrad result, torch result)."""
    return fn(fusegrad), fn(torch)


def _raises_same(fn, exc=Exception):
    """Both libraries raise the same exception type with the same message."""
    messages = []
    for mod in (fusegrad, torch):
        with pytest.raises(exc) as info:
            fn(mod)
        messages.append((type(info.value).__name__, str(info.value)))
    assert messages[0] == messages[1]


# ---------------------------------------------------------------- constraint registry

def _constraint_cases(m):
    C = m.distributions.constraints
    return {
        "real": (C.real, (2, 3)),
        "positive": (C.positive, (4,)),
        "nonnegative": (C.nonnegative, (4,)),
        "greater_than": (C.greater_than(2.0), (4,)),
        "greater_than_eq_tensor": (C.greater_than_eq(m.tensor([1.0, 2.0, 3.0],
                                                              dtype=m.float64)), (3,)),
        "less_than": (C.less_than(3.0), (4,)),
        "interval": (C.interval(-1.0, 2.0), (4,)),
        "interval_01": (C.interval(0, 1), (4,)),
        "interval_tensor_01": (C.interval(m.tensor(0.0, dtype=m.float64),
                                          m.tensor(1.0, dtype=m.float64)), (4,)),
        "unit_interval": (C.unit_interval, (4,)),
        "half_open_interval": (C.half_open_interval(0.0, 3.0), (4,)),
        "simplex": (C.simplex, (2, 3)),
        "lower_cholesky": (C.lower_cholesky, (2, 3, 3)),
        "corr_cholesky": (C.corr_cholesky, (2, 6)),
        "positive_definite": (C.positive_definite, (3, 3)),
        "positive_semidefinite": (C.positive_semidefinite, (3, 3)),
        "real_vector": (C.real_vector, (2, 3)),
        "independent": (C.independent(C.positive, 1), (2, 3)),
        "cat": (C.cat([C.real, C.positive], 0, [1, 2]), (3, 2)),
        "stack": (C.stack([C.real, C.unit_interval], 1), (4, 2)),
    }


CONSTRAINTS = list(_constraint_cases(torch))


def _describe(t):
    """A structural fingerprint of a transform: class names, parameters, (co)domains."""
    parts = getattr(t, "parts", None)
    inner = [_describe(p) for p in parts] if parts is not None else []
    for name in ("base_transform",):
        if hasattr(t, name):
            inner.append(_describe(getattr(t, name)))
    for t_inner in getattr(t, "transforms", []) or []:
        inner.append(_describe(t_inner))
    params = []
    for name in ("loc", "scale", "reinterpreted_batch_ndims", "dim", "lengths"):
        value = getattr(t, name, None)
        if value is not None:
            params.append(np.asarray(value.tolist() if hasattr(value, "tolist") else value)
                          .tolist())
    return (type(t).__name__, repr(t), str(t.domain), str(t.codomain), t.bijective,
            t.domain.event_dim, t.codomain.event_dim, params, inner)


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", CONSTRAINTS)
def test_registry_transform_matches_torch(registry, name):
    (fc, shape), (tc, _) = _constraint_cases(fusegrad)[name], _constraint_cases(torch)[name]
    try:
        tt = getattr(torch.distributions, registry)(tc)
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError) as info:
            getattr(fusegrad.distributions, registry)(fc)
        assert str(info.value) == str(e)
        return
    ft = getattr(fusegrad.distributions, registry)(fc)
    assert _describe(ft) == _describe(tt)
    x = RNG.normal(size=shape)
    results = []
    for mod, t in ((fusegrad, ft), (torch, tt)):
        xx = mod.tensor(x, requires_grad=True)
        y = t(xx)
        out = [y, t.inv(y.detach())]
        loss = y.sum()
        if t.bijective:
            ladj = t.log_abs_det_jacobian(xx, y)
            out.append(ladj)
            loss = loss + ladj.sum()
        loss.backward()
        out.append(xx.grad)
        results.append(out)
    for a, b in zip(*results):
        _close(a, b, atol=1e-9, rtol=1e-8)


def test_registry_module_and_exports():
    from fusegrad.distributions import constraint_registry as fcr
    assert fusegrad.distributions.biject_to is fcr.biject_to
    assert fusegrad.distributions.transform_to is fcr.transform_to
    assert sorted(fcr.__all__) == sorted(torch.distributions.constraint_registry.__all__)
    assert fusegrad.distributions.biject_to is not fusegrad.distributions.transform_to


def test_registry_unregistered_constraints_raise_like_torch():
    for name in ("boolean", "lower_triangular", "square", "symmetric", "one_hot",
                 "nonnegative_integer"):
        for registry in ("biject_to", "transform_to"):
            _raises_same(lambda m, r=registry, n=name: getattr(m.distributions, r)(
                getattr(m.distributions.constraints, n)), NotImplementedError)
    _raises_same(lambda m: m.distributions.biject_to(
        m.distributions.constraints.independent(m.distributions.constraints.lower_cholesky,
                                                1)), NotImplementedError)
    _raises_same(lambda m: m.distributions.biject_to(3), NotImplementedError)


def test_registry_register_user_constraints():
    for mod in (fusegrad, torch):
        C, T = mod.distributions.constraints, mod.distributions.transforms
        reg = type(mod.distributions.biject_to)()

        class Box(C.Constraint):
            def check(self, value):
                return (value > -1) & (value < 1)

        with pytest.raises(NotImplementedError, match="Cannot transform Box constraints"):
            reg(Box())
        factory = reg.register(Box, lambda c, T=T: T.TanhTransform())
        assert isinstance(reg(Box()), T.TanhTransform)
        assert factory(None).__class__ is T.TanhTransform

        # Decorator form, keyed by an instance (which stands for its type).
        @reg.register(C.positive)
        def _softplus(constraint, T=T):
            return T.SoftplusTransform()

        assert isinstance(reg(C.greater_than(5.0)), T.SoftplusTransform)
        assert _softplus(None).__class__ is T.SoftplusTransform

        # A subclass of a registered type is not served by its parent's factory.
        class Wider(type(C.positive)):
            pass

        with pytest.raises(NotImplementedError, match="Cannot transform Wider constraints"):
            reg(Wider(0.0))
    for bad in (3, int, "x"):
        _raises_same(lambda m, bad=bad: type(m.distributions.biject_to)().register(
            bad, lambda c: c), TypeError)


def test_transform_to_supports_a_distribution_parameter():
    # The typical use: optimise unconstrained values mapped onto each arg_constraint.
    for name, params in (("Gamma", {"concentration": 2.0, "rate": 0.5}),
                         ("Beta", {"concentration1": 0.7, "concentration0": 2.0})):
        for mod in (fusegrad, torch):
            dist = getattr(mod.distributions, name)
            for key, value in params.items():
                t = mod.distributions.transform_to(dist.arg_constraints[key])
                u = t.inv(mod.tensor(value, dtype=mod.float64))
                assert abs(t(u).item() - value) < 1e-12


# --------------------------------------------------------------- straight-through one-hot

def test_one_hot_straight_through_rsample_and_gradient():
    logits = RNG.normal(size=(2, 4))
    weights = RNG.normal(size=4)
    grads = []
    for mod in (fusegrad, torch):
        mod.manual_seed(0)
        lg = mod.tensor(logits, requires_grad=True)
        d = mod.distributions.OneHotCategoricalStraightThrough(logits=lg)
        assert d.has_rsample and isinstance(d, mod.distributions.OneHotCategorical)
        s = d.rsample((5,))
        assert tuple(s.shape) == (5, 2, 4)
        # Hard one-hot values forward.
        np.testing.assert_array_equal(s.detach().numpy().sum(-1), np.ones((5, 2)))
        assert set(np.unique(s.detach().numpy())) <= {0.0, 1.0}
        (s * mod.tensor(weights)).sum().backward()
        grads.append(lg.grad)
        e = d.expand((3, 2))
        assert type(e).__name__ == "OneHotCategoricalStraightThrough"
        assert tuple(e.rsample().shape) == (3, 2, 4)
    # The gradient is that of sum(probs * w): independent of which one-hot was drawn.
    _close(grads[0], grads[1], atol=1e-10)


def test_one_hot_straight_through_log_prob_and_errors():
    probs = RNG.dirichlet(np.ones(3), size=2)
    value = np.eye(3)[[0, 2]]
    f, t = _both(lambda m: m.distributions.OneHotCategoricalStraightThrough(
        probs=m.tensor(probs)).log_prob(m.tensor(value)))
    _close(f, t)
    _raises_same(lambda m: m.distributions.OneHotCategoricalStraightThrough(
        probs=m.tensor([0.5, -0.1, 0.6])), ValueError)


# ------------------------------------------------------------------------------- LKJ

def _lkj_samples(dim, conc, n):
    torch.manual_seed(1)
    return torch.distributions.LKJCholesky(dim, torch.tensor(conc)).sample((n,)).numpy()


@pytest.mark.parametrize("dim", [2, 4])
def test_lkj_log_prob_and_gradient(dim):
    conc = np.array([0.5, 1.0, 3.0])
    value = _lkj_samples(dim, conc, 2)
    out = []
    for mod in (fusegrad, torch):
        c = mod.tensor(conc, requires_grad=True)
        v = mod.tensor(value, requires_grad=True)
        lp = mod.distributions.LKJCholesky(dim, c).log_prob(v)
        lp.sum().backward()
        out.append((lp, c.grad, v.grad))
    for a, b in zip(*out):
        _close(a, b, atol=1e-9)


def test_lkj_attributes_and_errors():
    f, t = _both(lambda m: m.distributions.LKJCholesky(3, m.tensor([1.0, 2.0])))
    assert repr(f) == repr(t)
    assert tuple(f.batch_shape) == (2,) and tuple(f.event_shape) == (3, 3)
    assert str(f.support) == str(t.support) and f.has_rsample is t.has_rsample is False
    e = f.expand((4, 2))
    assert tuple(e.batch_shape) == (4, 2) and tuple(e.sample().shape) == (4, 2, 3, 3)
    _raises_same(lambda m: m.distributions.LKJCholesky(1), ValueError)
    _raises_same(lambda m: m.distributions.LKJCholesky(3, -1.0), ValueError)
    _raises_same(lambda m: m.distributions.LKJCholesky(3, 2.0).log_prob(m.eye(3) * 2),
                 ValueError)


def test_lkj_sample_statistics():
    # The sampler follows PyTorch's (onion-style, Beta-distributed squared row norms), so
    # the correlation moments match torch's own samples. The (1, 0) correlation also has
    # the exact LKJ marginal: (r + 1) / 2 ~ Beta(b, b) with b = eta - 1 + d / 2.
    dim, eta, n = 3, 2.0, 20000
    moments = []
    for mod in (fusegrad, torch):
        mod.manual_seed(0)
        d = mod.distributions.LKJCholesky(dim, eta)
        s = d.sample((n,))
        assert bool(d.support.check(s).all())
        corr = (s @ s.mT).numpy()
        np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, atol=1e-5)
        off = corr[:, [1, 2, 2], [0, 0, 1]]
        moments.append((off.mean(0), off.var(0), (off ** 4).mean(0)))
    for a, b in zip(*moments):
        np.testing.assert_allclose(a, b, atol=0.02)
    b = eta - 1 + dim / 2
    np.testing.assert_allclose(moments[0][1][0], 1 / (2 * b + 1), rtol=0.05)


# ---------------------------------------------------------------------------- Wishart

def _spd(batch, p):
    a = RNG.normal(size=batch + (p, p))
    return a @ np.swapaxes(a, -1, -2) + np.eye(p)


@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_values_and_gradients(kind):
    cov = _spd((2,), 3)
    param = np.linalg.cholesky(cov) if kind == "scale_tril" else cov
    df = np.array([4.5, 6.0])
    value = _spd((2,), 3)
    out = []
    for mod in (fusegrad, torch):
        d_t = mod.tensor(df, requires_grad=True)
        p_t = mod.tensor(param, requires_grad=True)
        w = mod.distributions.Wishart(d_t, **{kind: p_t})
        lp, ent = w.log_prob(mod.tensor(value)), w.entropy()
        (lp.sum() + ent.sum()).backward()
        out.append((lp, ent, w.mean, w.variance, w.mode, w.covariance_matrix,
                    w.precision_matrix, w.scale_tril, d_t.grad, p_t.grad))
    for a, b in zip(*out):
        _close(a, b, atol=1e-9, rtol=1e-8)


def test_wishart_attributes_and_errors():
    eye = np.eye(3)
    f, t = _both(lambda m: m.distributions.Wishart(m.tensor([3.5, 5.0]),
                                                   covariance_matrix=m.tensor(eye)))
    assert repr(f) == repr(t)
    assert str(f.arg_constraints["df"]) == str(t.arg_constraints["df"])
    _close(f.mode, t.mode)  # NaN where df <= p + 1
    e = f.expand((4, 2))
    assert tuple(e.batch_shape) == (4, 2) and tuple(e.rsample((3,)).shape) == (3, 4, 2, 3, 3)
    _close(e.log_prob(fusegrad.tensor(eye * 2)), t.expand((4, 2)).log_prob(torch.tensor(eye * 2)))
    w = fusegrad.distributions.Wishart(5, scale_tril=fusegrad.eye(2))
    assert w.df.dtype == fusegrad.float32 and w.df.item() == 5.0
    _raises_same(lambda m: m.distributions.Wishart(m.tensor(5.0)), AssertionError)
    _raises_same(lambda m: m.distributions.Wishart(
        m.tensor(5.0), covariance_matrix=m.eye(3), scale_tril=m.eye(3)), AssertionError)
    _raises_same(lambda m: m.distributions.Wishart(m.tensor(5.0),
                                                   precision_matrix=m.ones(3)), ValueError)
    for df in (2, 1.5, "t0", "t1"):
        def build(m, df=df):
            value = {"t0": m.tensor(2.0), "t1": m.tensor([1.5, 4.0])}.get(df, df)
            return m.distributions.Wishart(value, covariance_matrix=m.eye(3))
        _raises_same(build, ValueError)
    _raises_same(lambda m: m.distributions.Wishart(m.tensor(5.0),
                                                   covariance_matrix=-m.eye(3)), ValueError)
    _raises_same(lambda m: m.distributions.Wishart(
        m.tensor(5.0), covariance_matrix=m.eye(3)).log_prob(-m.eye(3)), ValueError)


def test_wishart_rsample_statistics_and_gradient():
    fusegrad.manual_seed(0)
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    df = fusegrad.tensor([4.0, 7.0], dtype=fusegrad.float64, requires_grad=True)
    scale = fusegrad.tensor(np.linalg.cholesky(cov), requires_grad=True)
    w = fusegrad.distributions.Wishart(df, scale_tril=scale)
    s = w.rsample((20000,))
    assert bool(w.support.check(s).all())
    np.testing.assert_allclose(s.mean(0).detach().numpy(), w.mean.detach().numpy(),
                               rtol=0.03, atol=0.05)
    np.testing.assert_allclose(s.var(0).detach().numpy(), w.variance.detach().numpy(),
                               rtol=0.1)
    # Reparameterised: d E[trace W] / d df = trace(cov), estimated from the samples.
    trace = s.diagonal(dim1=-2, dim2=-1).sum(-1).mean(0).sum()
    trace.backward()
    np.testing.assert_allclose(df.grad.numpy(), np.trace(cov), rtol=0.05)
    assert scale.grad is not None


# ------------------------------------------------------------------------ KL pairs

def _kl_families(m):
    D = m.distributions

    leaves = []

    def t(values):
        leaves.append(m.tensor(np.asarray(values, dtype=np.float64), requires_grad=True))
        return leaves[-1]

    return {
        "Bernoulli": lambda: D.Bernoulli(probs=t([0.2, 0.5, 0.9])),
        "Poisson": lambda: D.Poisson(t([0.5, 1.5, 3.0])),
        "Binomial": lambda: D.Binomial(5, probs=t([0.2, 0.5, 0.9])),
        "Beta": lambda: D.Beta(t([0.7, 2.0, 3.0]), t([1.5, 0.8, 2.5])),
        "ContinuousBernoulli": lambda: D.ContinuousBernoulli(probs=t([0.2, 0.4999, 0.8])),
        "Exponential": lambda: D.Exponential(t([0.5, 1.2, 3.0])),
        "Gamma": lambda: D.Gamma(t([0.7, 2.0, 3.0]), t([0.5, 1.5, 2.0])),
        "Gumbel": lambda: D.Gumbel(t([-0.5, 0.2, 1.0]), t([0.6, 1.2, 2.0])),
        "Laplace": lambda: D.Laplace(t([-0.5, 0.2, 1.0]), t([0.6, 1.2, 2.0])),
        "Normal": lambda: D.Normal(t([-0.5, 0.2, 1.0]), t([0.6, 1.2, 2.0])),
        "Pareto": lambda: D.Pareto(t([0.1, 0.5, 0.2]), t([0.8, 1.5, 3.5])),
        "Uniform": lambda: D.Uniform(t([0.1, -1.0, 1.5]), t([0.9, 2.0, 4.0])),
    }, leaves


_NEW_PAIRS = [
    ("Bernoulli", "Poisson"), ("Beta", "ContinuousBernoulli"), ("Beta", "Pareto"),
    ("ContinuousBernoulli", "ContinuousBernoulli"), ("ContinuousBernoulli", "Exponential"),
    ("ContinuousBernoulli", "Normal"), ("ContinuousBernoulli", "Pareto"),
    ("ContinuousBernoulli", "Uniform"), ("Exponential", "ContinuousBernoulli"),
    ("Exponential", "Gumbel"), ("Exponential", "Pareto"), ("Gamma", "ContinuousBernoulli"),
    ("Gamma", "Gumbel"), ("Gamma", "Pareto"), ("Gumbel", "Beta"),
    ("Gumbel", "ContinuousBernoulli"), ("Gumbel", "Exponential"), ("Gumbel", "Gamma"),
    ("Gumbel", "Normal"), ("Gumbel", "Pareto"), ("Gumbel", "Uniform"),
    ("Laplace", "ContinuousBernoulli"), ("Laplace", "Pareto"),
    ("Normal", "ContinuousBernoulli"), ("Normal", "Gumbel"), ("Normal", "Pareto"),
    ("Pareto", "Beta"), ("Pareto", "ContinuousBernoulli"), ("Pareto", "Exponential"),
    ("Pareto", "Gamma"), ("Pareto", "Normal"), ("Pareto", "Uniform"),
    ("Poisson", "Bernoulli"), ("Poisson", "Binomial"), ("Uniform", "ContinuousBernoulli"),
    ("Uniform", "Gumbel"), ("Uniform", "Pareto"),
]


def test_registry_covers_every_torch_pair():
    names = {(p.__name__, q.__name__) for p, q in torch.distributions.kl._KL_REGISTRY}
    ours = {(p.__name__, q.__name__) for p, q in fusegrad.distributions.kl._KL_REGISTRY}
    assert names <= ours


@pytest.mark.parametrize("p_name,q_name", _NEW_PAIRS)
def test_new_kl_pairs_values_and_gradients(p_name, q_name):
    results = []
    for mod in (fusegrad, torch):
        fam, params = _kl_families(mod)
        p, q = fam[p_name](), fam[q_name]()
        kl = mod.distributions.kl_divergence(p, q)
        finite = np.isfinite(kl.detach().numpy())
        grads = []
        if finite.any():
            mask = mod.tensor(finite)
            grads = mod.autograd.grad(kl[mask].sum(), params, allow_unused=True)
        results.append((kl, grads))
    (fkl, fgrads), (tkl, tgrads) = results
    _close(fkl, tkl, atol=1e-9, rtol=1e-8)
    assert len(fgrads) == len(tgrads)
    for a, b in zip(fgrads, tgrads):
        if b is not None:
            _close(a, b, atol=1e-8, rtol=1e-7)


def test_kl_support_edges_match_torch():
    cases = [("Uniform", (0.0, 1.0), "ContinuousBernoulli", (0.3,)),
             ("Uniform", (0.2, 0.7), "ContinuousBernoulli", (0.3,)),
             ("ContinuousBernoulli", (0.3,), "Uniform", (0.0, 1.0)),
             ("ContinuousBernoulli", (0.3,), "Uniform", (-0.1, 1.1)),
             ("Uniform", (0.5, 2.0), "Pareto", (0.5, 2.0)),
             ("Uniform", (0.4, 2.0), "Pareto", (0.5, 2.0)),
             ("Pareto", (1.0, 0.5), "Exponential", (1.0,)),
             ("Pareto", (1.0, 1.5), "Normal", (0.0, 1.0)),
             ("Pareto", (1.0, 1.0), "Uniform", (0.0, 5.0))]
    for case in cases:
        def kl(m, case=case):
            p_name, p_args, q_name, q_args = case
            p = getattr(m.distributions, p_name)(*[m.tensor([a]) for a in p_args])
            q = getattr(m.distributions, q_name)(*[m.tensor([a]) for a in q_args])
            return m.distributions.kl_divergence(p, q)

        f, t = _both(kl)
        _close(f, t, rtol=1e-6)


def test_low_rank_gaussian_kl_pairs():
    loc, loc2 = RNG.normal(size=(2, 3)), RNG.normal(size=3)
    factor, diag = RNG.normal(size=(2, 3, 2)), RNG.uniform(0.5, 2, (2, 3))
    cov = _spd((), 3)
    results = []
    for mod in (fusegrad, torch):
        D = mod.distributions
        args = [mod.tensor(a, requires_grad=True) for a in (loc, loc2, factor, diag, cov)]
        lr = D.LowRankMultivariateNormal(args[0], args[2], args[3])
        lr2 = D.LowRankMultivariateNormal(args[1], args[2][0] * 2, args[3][1])
        mvn = D.MultivariateNormal(args[1], args[4])
        kls = [D.kl_divergence(lr, mvn), D.kl_divergence(mvn, lr), D.kl_divergence(lr, lr2)]
        grads = mod.autograd.grad(sum(k.sum() for k in kls), args)
        results.append(kls + list(grads))
    for a, b in zip(*results):
        _close(a, b, atol=1e-9, rtol=1e-8)

    def mismatch(m, low_rank_q):
        D = m.distributions
        p = D.LowRankMultivariateNormal(m.zeros(3), m.ones(3, 1), m.ones(3))
        q = (D.LowRankMultivariateNormal(m.zeros(2), m.ones(2, 1), m.ones(2)) if low_rank_q
             else D.MultivariateNormal(m.zeros(2), m.eye(2)))
        return D.kl_divergence(p, q)

    _raises_same(lambda m: mismatch(m, True), ValueError)
    _raises_same(lambda m: mismatch(m, False), ValueError)


def test_exponential_family_bregman_kl():
    # Wishart has no closed-form pair: both libraries use the Bregman divergence of the
    # log-normaliser (gradients reach q's parameters only; p's are detached).
    cov, cov2 = _spd((2,), 3), _spd((), 3)
    results = []
    for mod in (fusegrad, torch):
        D = mod.distributions
        c, c2 = mod.tensor(cov, requires_grad=True), mod.tensor(cov2, requires_grad=True)
        p = D.Wishart(mod.tensor([4.0, 5.0], dtype=mod.float64), covariance_matrix=c)
        q = D.Wishart(mod.tensor(6.0, dtype=mod.float64), covariance_matrix=c2)
        kl = D.kl_divergence(p, q)
        kl.sum().backward()
        results.append((kl, c2.grad))
        assert c.grad is None
    for a, b in zip(*results):
        _close(a, b, atol=1e-8, rtol=1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises_same(lambda m: m.distributions.kl_divergence(m.distributions.Normal(0.0, 1.0),
                                                             m.distributions.Poisson(1.0)),
                     NotImplementedError)


def test_exponential_family_generic_entropy_and_user_subclass():
    rate = np.array([0.5, 2.0])
    cov = _spd((), 3)
    results = []
    for mod in (fusegrad, torch):
        class RateFamily(mod.distributions.ExponentialFamily):
            arg_constraints = {}
            _mean_carrier_measure = 0

            def __init__(self, rate):
                self.rate = rate
                super().__init__(rate.shape, validate_args=False)

            @property
            def _natural_params(self):
                return (-self.rate,)

            def _log_normalizer(self, x, mod=mod):
                return -mod.log(-x)

        r = mod.tensor(rate)
        w = mod.distributions.Wishart(mod.tensor([4.0, 5.0], dtype=mod.float64),
                                      covariance_matrix=mod.tensor(cov))
        results.append((RateFamily(r).entropy(),
                        mod.distributions.kl_divergence(RateFamily(r), RateFamily(r * 3)),
                        mod.distributions.ExponentialFamily.entropy(w)))
        with pytest.raises(NotImplementedError):
            mod.distributions.Poisson(mod.tensor([2.0])).entropy()
    for a, b in zip(*results):
        _close(a, b, atol=1e-9)
    _close(results[0][0], torch.distributions.Exponential(torch.tensor(rate)).entropy())
