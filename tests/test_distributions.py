"""fusegrad.distributions against torch.distributions: values and gradients of log_prob,
entropy, moments, KL divergences and reparameterised samples (driven by the same base noise),
shapes, validation errors, and the implicit Gamma/Dirichlet sample gradients."""

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(0)


def _pos(*shape):
    return RNG.uniform(0.5, 2.5, shape)


def _real(*shape):
    return RNG.normal(size=shape)


def _simplex(*shape):
    p = RNG.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def _spd(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tensors(mod, arrays, grad=True):
    return [mod.tensor(a, dtype=mod.float64, requires_grad=grad and a.dtype.kind == "f")
            for a in arrays]


# name -> (constructor(mod, *params), params, values to score)
CASES = {
    "Normal": (lambda m, a, b: m.distributions.Normal(a, b), [_real(3), _pos(3)],
               _real(4, 3)),
    "Laplace": (lambda m, a, b: m.distributions.Laplace(a, b), [_real(3), _pos(3)],
                _real(4, 3)),
    "Uniform": (lambda m, a, b: m.distributions.Uniform(a, b), [np.full(3, -1.0),
                                                                 np.full(3, 2.0)],
                RNG.uniform(-1, 2, (4, 3))),
    "Exponential": (lambda m, r: m.distributions.Exponential(r), [_pos(3)], _pos(4, 3)),
    "Gamma": (lambda m, c, r: m.distributions.Gamma(c, r), [_pos(3), _pos(3)], _pos(4, 3)),
    "Beta": (lambda m, a, b: m.distributions.Beta(a, b), [_pos(3), _pos(3)],
             RNG.uniform(0.05, 0.95, (4, 3))),
    "Dirichlet": (lambda m, c: m.distributions.Dirichlet(c), [_pos(2, 4)], _simplex(5, 2, 4)),
    "LogNormal": (lambda m, a, b: m.distributions.LogNormal(a, b), [_real(3), _pos(3)],
                  _pos(4, 3)),
    "Bernoulli": (lambda m, p: m.distributions.Bernoulli(probs=p), [RNG.uniform(.1, .9, 3)],
                  RNG.integers(0, 2, (4, 3)).astype(float)),
    "BernoulliLogits": (lambda m, p: m.distributions.Bernoulli(logits=p), [_real(3)],
                        RNG.integers(0, 2, (4, 3)).astype(float)),
    "Categorical": (lambda m, p: m.distributions.Categorical(probs=p), [_simplex(2, 5)],
                    RNG.integers(0, 5, (3, 2)).astype(float)),
    "CategoricalLogits": (lambda m, p: m.distributions.Categorical(logits=p), [_real(2, 5)],
                          RNG.integers(0, 5, (3, 2)).astype(float)),
    "OneHotCategorical": (lambda m, p: m.distributions.OneHotCategorical(probs=p),
                          [_simplex(2, 4)], np.eye(4)[RNG.integers(0, 4, (3, 2))]),
    "MultivariateNormal": (lambda m, loc, cov: m.distributions.MultivariateNormal(loc, cov),
                           [_real(2, 3), _spd(3, (2,))], _real(4, 2, 3)),
    "MVNScaleTril": (lambda m, loc, cov: m.distributions.MultivariateNormal(
        loc, scale_tril=m.linalg.cholesky(cov)), [_real(3), _spd(3)], _real(4, 3)),
    "MVNPrecision": (lambda m, loc, cov: m.distributions.MultivariateNormal(
        loc, precision_matrix=cov), [_real(3), _spd(3)], _real(4, 3)),
    "Independent": (lambda m, a, b: m.distributions.Independent(
        m.distributions.Normal(a, b), 1), [_real(2, 3), _pos(2, 3)], _real(4, 2, 3)),
    "TransformedAffineExp": (lambda m, a, b: m.distributions.TransformedDistribution(
        m.distributions.Normal(a, b), [m.distributions.AffineTransform(0.5, 2.0),
                                       m.distributions.ExpTransform()]),
        [_real(3), _pos(3)], _pos(4, 3)),
    "TransformedSigmoid": (lambda m, a, b: m.distributions.TransformedDistribution(
        m.distributions.Normal(a, b), m.distributions.transforms.SigmoidTransform()),
        [_real(3), _pos(3)], RNG.uniform(0.05, 0.95, (4, 3))),
    "TransformedTanh": (lambda m, a, b: m.distributions.TransformedDistribution(
        m.distributions.Normal(a, b), [m.distributions.TanhTransform()]),
        [_real(3), _pos(3)], RNG.uniform(-0.9, 0.9, (4, 3))),
}

PROPS = ["mean", "variance", "stddev", "mode"]


def _value(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _close(a, b, **kw):
    np.testing.assert_allclose(_value(a), _value(b), rtol=kw.get("rtol", 1e-7),
                               atol=kw.get("atol", 1e-9), equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    ctor, params, values = CASES[name]
    fp, tp = _tensors(fusegrad, params), _tensors(torch, params)
    fd, td = ctor(fusegrad, *fp), ctor(torch, *tp)
    assert tuple(fd.batch_shape) == tuple(td.batch_shape)
    assert tuple(fd.event_shape) == tuple(td.event_shape)
    assert repr(fd) == repr(td)
    fv, tv = fusegrad.tensor(values), torch.tensor(values)
    f_lp, t_lp = fd.log_prob(fv), td.log_prob(tv)
    _close(f_lp, t_lp)
    for prop in PROPS:
        try:
            t_val = getattr(td, prop)
        except NotImplementedError:
            continue
        _close(getattr(fd, prop), t_val)
    try:
        t_ent = td.entropy()
    except NotImplementedError:
        t_ent = None
    f_total, t_total = f_lp.sum(), t_lp.sum()
    if t_ent is not None:
        _close(fd.entropy(), t_ent)
        f_total, t_total = f_total + fd.entropy().sum(), t_total + t_ent.sum()
    f_total.backward()
    t_total.backward()
    for a, b in zip(fp, tp):
        if b.grad is not None:
            _close(a.grad, b.grad, rtol=1e-6)
    for shape in [(5,) + tuple(td.batch_shape)]:
        fe, te = fd.expand(shape), td.expand(shape)
        assert tuple(fe.batch_shape) == tuple(te.batch_shape)
        _close(fe.log_prob(fv[:1]), te.log_prob(tv[:1]))
    if td.has_rsample:
        ts = td.rsample((2,))
        fs = fd.rsample((2,))
        assert type(fs.grad_fn).__name__ == type(ts.grad_fn).__name__
    assert type(f_lp.grad_fn).__name__ == type(t_lp.grad_fn).__name__
    s = fd.sample((7,))
    assert tuple(s.shape) == tuple(td.sample((7,)).shape)
    assert bool(fd.support.check(s).all())


class _Noise:
    """Replace the base draws of both libraries by one fixed array."""

    def __init__(self, monkeypatch, kind):
        self.mp, self.kind, self.arr = monkeypatch, kind, None

    def set(self, arr):
        self.arr = arr
        fd = fusegrad.distributions
        if self.kind == "normal":
            for mod in (fd.normal, fd.multivariate_normal):
                self.mp.setattr(mod, "_standard_normal",
                                lambda shape, dtype, device=None: fusegrad.tensor(
                                    self.arr.reshape(shape), dtype=dtype))
            for mod in (torch.distributions.normal, torch.distributions.multivariate_normal):
                self.mp.setattr(mod, "_standard_normal",
                                lambda shape, dtype, device: torch.tensor(
                                    self.arr.reshape(shape), dtype=dtype))
        else:
            for mod in (fd.uniform, fd.laplace):
                self.mp.setattr(mod, "_standard_uniform",
                                lambda shape, dtype, device=None: fusegrad.tensor(
                                    self.arr.reshape(shape), dtype=dtype))


@pytest.mark.parametrize("name", ["Normal", "LogNormal", "MultivariateNormal", "Independent",
                                  "TransformedAffineExp", "TransformedTanh"])
def test_rsample_gaussian_family_same_noise(name, monkeypatch):
    ctor, params, _ = CASES[name]
    fp, tp = _tensors(fusegrad, params), _tensors(torch, params)
    fd, td = ctor(fusegrad, *fp), ctor(torch, *tp)
    noise = _Noise(monkeypatch, "normal")
    shape = (6,) + tuple(td.batch_shape) + tuple(td.event_shape)
    noise.set(RNG.normal(size=shape))
    fs, ts = fd.rsample((6,)), td.rsample((6,))
    _close(fs, ts)
    cot = RNG.normal(size=shape)
    (fs * fusegrad.tensor(cot)).sum().backward()
    (ts * torch.tensor(cot)).sum().backward()
    for a, b in zip(fp, tp):
        _close(a.grad, b.grad, rtol=1e-6)


def test_exponential_rsample_is_torchs_stream():
    """Exponential draws with `exponential_`, as PyTorch's does: a seed gives its samples
    (float32 and float64), and the gradient in the rate is -sample / rate."""
    for dtype in ("float32", "float64"):
        out = []
        for lib in (fusegrad, torch):
            rate = lib.tensor([0.5, 2.0, 3.0], dtype=getattr(lib, dtype), requires_grad=True)
            lib.manual_seed(3)
            x = lib.distributions.Exponential(rate).rsample((4,))
            x.sum().backward()
            out.append((x.detach().numpy(), rate.grad.numpy()))
        np.testing.assert_array_equal(out[0][0], out[1][0])
        np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-6)


@pytest.mark.parametrize("name", ["Uniform", "Laplace"])
def test_rsample_inverse_cdf_families_same_noise(name, monkeypatch):
    ctor, params, _ = CASES[name]
    fp, tp = _tensors(fusegrad, params), _tensors(torch, params)
    fd, td = ctor(fusegrad, *fp), ctor(torch, *tp)
    u = RNG.uniform(0.01, 0.99, (6, 3))
    noise = _Noise(monkeypatch, "uniform")
    # Laplace maps its U(0,1) draw to U(-1,1) first; the rest use it as the CDF value.
    noise.set(u)
    fs = fd.rsample((6,))
    if name == "Laplace":
        eps = np.finfo(np.float64).eps
        u = u * (2 - eps) + (eps - 1)
        u = (u + 1) / 2
    ts = td.icdf(torch.tensor(u))
    _close(fs, ts, rtol=1e-6)
    fs.sum().backward()
    ts.sum().backward()
    for a, b in zip(fp, tp):
        _close(a.grad, b.grad, rtol=1e-6)


def test_standard_gamma_grad_matches_torch_on_same_samples():
    torch.manual_seed(0)
    alpha = torch.tensor([0.2, 0.5, 0.9, 1.0, 1.7, 4.0, 12.0, 60.0], dtype=torch.float64)
    alpha = alpha.repeat(40)
    x = torch._standard_gamma(alpha)
    ref = torch._standard_gamma_grad(alpha, x)
    got = fusegrad.distributions.gamma.standard_gamma_grad(
        fusegrad.tensor(x.numpy()), fusegrad.tensor(alpha.numpy()))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=2e-3)


def test_dirichlet_grad_matches_torch_on_same_samples():
    torch.manual_seed(1)
    c = torch.tensor([[0.5, 1.5, 3.0], [2.0, 2.0, 2.0], [10.0, 0.3, 1.0]], dtype=torch.float64)
    c = c.repeat(30, 1)
    x = torch._sample_dirichlet(c)
    total = c.sum(-1, keepdim=True).expand_as(c)
    ref = torch._dirichlet_grad(x, c, total)
    got = fusegrad.distributions.dirichlet.dirichlet_grad(
        fusegrad.tensor(x.numpy()), fusegrad.tensor(c.numpy()), fusegrad.tensor(total.numpy()))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=3e-3)


def test_gamma_rsample_gradient_is_implicit_reparameterisation():
    fusegrad.manual_seed(0)
    conc = fusegrad.tensor([0.4, 1.0, 3.0], dtype=fusegrad.float64, requires_grad=True)
    rate = fusegrad.tensor([2.0, 0.5, 1.5], dtype=fusegrad.float64, requires_grad=True)
    s = fusegrad.distributions.Gamma(conc, rate).rsample((200,))
    s.sum().backward()
    tc = torch.tensor(conc.detach().numpy()).expand(200, 3)
    tr = torch.tensor(rate.detach().numpy()).expand(200, 3)
    std = torch.tensor(s.detach().numpy()) * tr
    # x = g(alpha) / rate: dx/dalpha = g'(alpha) / rate, dx/drate = -x / rate.
    ref_c = (torch._standard_gamma_grad(tc, std) / tr).sum(0)
    ref_r = (-std / tr ** 2).sum(0)
    np.testing.assert_allclose(conc.grad.numpy(), ref_c.numpy(), rtol=3e-3)
    np.testing.assert_allclose(rate.grad.numpy(), ref_r.numpy(), rtol=1e-10)
    # Moments of the draws (seeded, so deterministic).
    draws = fusegrad.distributions.Gamma(3.0, 2.0).sample((20000,)).numpy()
    assert abs(draws.mean() - 1.5) < 0.03 and abs(draws.var() - 0.75) < 0.05


def test_dirichlet_and_beta_rsample_gradients_follow_torch_formula():
    fusegrad.manual_seed(0)
    conc = fusegrad.tensor([[0.7, 2.0, 3.5]], dtype=fusegrad.float64, requires_grad=True)
    x = fusegrad.distributions.Dirichlet(conc).rsample((50,))
    cot = RNG.normal(size=(50, 1, 3))
    (x * fusegrad.tensor(cot)).sum().backward()
    tx = torch.tensor(x.detach().numpy())
    tc = torch.tensor(conc.detach().numpy()).expand(50, 1, 3)
    g = torch.tensor(cot)
    ref = (torch._dirichlet_grad(tx, tc, tc.sum(-1, True).expand_as(tc))
           * (g - (tx * g).sum(-1, True))).sum(0)
    np.testing.assert_allclose(conc.grad.numpy(), ref.numpy(), rtol=3e-3)
    a = fusegrad.tensor([1.5], dtype=fusegrad.float64, requires_grad=True)
    b = fusegrad.tensor([0.8], dtype=fusegrad.float64, requires_grad=True)
    s = fusegrad.distributions.Beta(a, b).rsample((40,))
    s.sum().backward()
    ts = torch.tensor(s.detach().numpy())
    both = torch.tensor([[1.5, 0.8]], dtype=torch.float64).expand(40, 1, 2)
    xs = torch.cat([ts.unsqueeze(-1), 1 - ts.unsqueeze(-1)], -1)
    g = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(40, 1, 2)
    ref = (torch._dirichlet_grad(xs, both, both.sum(-1, True).expand_as(both))
           * (g - (xs * g).sum(-1, True))).sum(0)[0]
    np.testing.assert_allclose([a.grad.item(), b.grad.item()], ref.numpy(), rtol=3e-3)


KL_PAIRS = ["Normal", "Laplace", "Exponential", "Gamma", "Beta", "Dirichlet", "Bernoulli",
            "Categorical", "OneHotCategorical", "MultivariateNormal", "Independent",
            "LogNormal"]


@pytest.mark.parametrize("name", KL_PAIRS)
def test_kl_divergence_matches_torch(name):
    ctor, params, _ = CASES[name]
    other = [p * 0 + RNG.permutation(p.reshape(-1)).reshape(p.shape) for p in params]
    if name == "MultivariateNormal":
        other = [_real(2, 3), _spd(3, (2,))]
    fp, tp = _tensors(fusegrad, params), _tensors(torch, params)
    fq, tq = _tensors(fusegrad, other), _tensors(torch, other)
    f_kl = fusegrad.distributions.kl_divergence(ctor(fusegrad, *fp), ctor(fusegrad, *fq))
    t_kl = torch.distributions.kl_divergence(ctor(torch, *tp), ctor(torch, *tq))
    _close(f_kl, t_kl, rtol=1e-6)
    f_kl.sum().backward()
    t_kl.sum().backward()
    for a, b in zip(fp + fq, tp + tq):
        if b.grad is not None:
            _close(a.grad, b.grad, rtol=1e-6)


def test_kl_uniform_pairs_and_missing_pair():
    D, T = fusegrad.distributions, torch.distributions
    for lo, hi in [(-1.0, 2.0), (-2.0, 3.0)]:
        f = D.kl_divergence(D.Uniform(fusegrad.tensor([-1.0]), fusegrad.tensor([2.0])),
                            D.Uniform(fusegrad.tensor([lo]), fusegrad.tensor([hi])))
        t = T.kl_divergence(T.Uniform(torch.tensor([-1.0]), torch.tensor([2.0])),
                            T.Uniform(torch.tensor([lo]), torch.tensor([hi])))
        _close(f, t, rtol=1e-6)  # (a log's last float32 bit follows the CPU's libm)
    f = D.kl_divergence(D.Uniform(fusegrad.tensor([-1.0]), fusegrad.tensor([2.0])),
                        D.Normal(0.3, 1.5))
    t = T.kl_divergence(T.Uniform(torch.tensor([-1.0]), torch.tensor([2.0])),
                        T.Normal(0.3, 1.5))
    _close(f, t, rtol=1e-6)
    with pytest.raises(NotImplementedError) as fe:
        D.kl_divergence(D.Laplace(0.0, 1.0), D.Categorical(fusegrad.ones(2)))
    with pytest.raises(NotImplementedError) as te:
        T.kl_divergence(T.Laplace(0.0, 1.0), T.Categorical(torch.ones(2)))
    assert str(fe.value) == str(te.value)


@pytest.fixture
def validation_on():
    """Argument validation on in both libraries (other code in the process, such as torch's
    own compiler stack, may switch torch's process-wide default off)."""
    saved = (torch.distributions.Distribution._validate_args,
             fusegrad.distributions.Distribution._validate_args)
    torch.distributions.Distribution.set_default_validate_args(True)
    fusegrad.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(saved[0])
    fusegrad.distributions.Distribution.set_default_validate_args(saved[1])


def _error(fn):
    try:
        fn()
    except (ValueError, NotImplementedError, TypeError, RuntimeError) as e:
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("make", [
    lambda m: m.distributions.Normal(0.0, -1.0),
    lambda m: m.distributions.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 0.0])),
    lambda m: m.distributions.Normal(m.zeros(3), 1.0).log_prob(m.zeros(2)),
    lambda m: m.distributions.Gamma(1.0, 1.0).log_prob(m.tensor(-1.0)),
    lambda m: m.distributions.Gamma(1.0, 1.0).log_prob(-1.0),
    lambda m: m.distributions.Dirichlet(m.ones(3)).log_prob(m.ones(2)),
    lambda m: m.distributions.Dirichlet(m.ones(3)).log_prob(m.ones(3)),
    lambda m: m.distributions.Categorical(probs=m.ones(3), logits=m.ones(3)),
    lambda m: m.distributions.Categorical(),
    lambda m: m.distributions.Categorical(probs=m.tensor([0.5, -0.1, 0.6])),
    lambda m: m.distributions.Categorical(probs=m.tensor([0.2, 0.8])).log_prob(m.tensor(3)),
    lambda m: m.distributions.Bernoulli(probs=1.3),
    lambda m: m.distributions.Bernoulli(0.3).log_prob(m.tensor(0.5)),
    lambda m: m.distributions.Uniform(2.0, 1.0),
    lambda m: m.distributions.Uniform(m.zeros(2), m.tensor([1.0, -1.0])),
    lambda m: m.distributions.Uniform(0.0, 1.0).log_prob(m.tensor(1.5)),
    lambda m: m.distributions.Beta(m.tensor([1.0]), m.tensor([-2.0])),
    lambda m: m.distributions.Exponential(m.tensor([1.0])).log_prob(m.tensor([-1.0])),
    lambda m: m.distributions.MultivariateNormal(m.zeros(2), m.eye(2), scale_tril=m.eye(2)),
    lambda m: m.distributions.MultivariateNormal(m.zeros(2), -m.eye(2)),
    lambda m: m.distributions.MultivariateNormal(m.tensor(0.0), m.eye(2)),
    lambda m: m.distributions.Independent(m.distributions.Normal(m.zeros(3), 1.0), 2),
    lambda m: m.distributions.Dirichlet(m.tensor(1.0)),
    lambda m: m.distributions.Normal(0.0, 1.0).log_prob([0.0]),
    lambda m: m.distributions.TransformedDistribution(m.distributions.Normal(0.0, 1.0), [1]),
    lambda m: m.distributions.TransformedDistribution(m.distributions.Normal(0.0, 1.0), 3),
    lambda m: m.distributions.TransformedDistribution(m.distributions.Normal(0.0, 1.0),
                                                      m.distributions.SoftmaxTransform()),
    lambda m: m.distributions.Independent(m.distributions.Normal(0.0, 1.0), 1),
    lambda m: m.distributions.Normal(m.zeros(2), 1.0).expand((3,)),
    lambda m: m.distributions.AffineTransform(0.0, 1.0, cache_size=2),
    lambda m: m.distributions.Bernoulli(0.3).log_prob(m.tensor([0.0, 1.5])),
    lambda m: m.distributions.Exponential(1.0).cdf(m.tensor(-1.0)),
])
def test_validation_errors_match_torch(make, validation_on):
    got, want = _error(lambda: make(fusegrad)), _error(lambda: make(torch))
    assert want is not None
    assert got == want


def test_validate_args_switches():
    D, T = fusegrad.distributions, torch.distributions
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    try:
        D.Distribution.set_default_validate_args(False)
        T.Distribution.set_default_validate_args(False)
        _close(D.Normal(0.0, 1.0).log_prob(fusegrad.tensor([1.0, 2.0])),
               T.Normal(0.0, 1.0).log_prob(torch.tensor([1.0, 2.0])))
        D.Normal(0.0, -1.0)
        _close(D.Gamma(1.0, 1.0).log_prob(fusegrad.tensor(-1.0)),
               T.Gamma(1.0, 1.0).log_prob(torch.tensor(-1.0)))
    finally:
        D.Distribution.set_default_validate_args(True)
        T.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    assert _error(lambda: D.Distribution.set_default_validate_args(2)) == _error(
        lambda: T.Distribution.set_default_validate_args(2))


def test_constraints_and_transforms_match_torch():
    C, TC = fusegrad.distributions.constraints, torch.distributions.constraints
    names = ["real", "positive", "nonnegative", "unit_interval", "simplex", "real_vector",
             "lower_cholesky", "positive_definite", "boolean", "nonnegative_integer",
             "one_hot", "lower_triangular", "positive_integer", "square", "symmetric"]
    for n in names:
        f, t = getattr(C, n), getattr(TC, n)
        assert repr(f) == repr(t) and f.event_dim == t.event_dim, n
        assert f.is_discrete == t.is_discrete, n
    for args in [(C.interval(0, 1), TC.interval(0, 1)),
                 (C.greater_than(2), TC.greater_than(2)),
                 (C.half_open_interval(0, 1), TC.half_open_interval(0, 1)),
                 (C.integer_interval(0, 3), TC.integer_interval(0, 3)),
                 (C.independent(C.positive, 2), TC.independent(TC.positive, 2)),
                 (C.less_than(3), TC.less_than(3))]:
        assert repr(args[0]) == repr(args[1])
    x = _real(4, 3, 3)
    x[1] = _spd(3)
    x[2] = np.tril(_pos(3, 3))
    for n in names:
        f, t = getattr(C, n), getattr(TC, n)
        assert f.check(fusegrad.tensor(x)).tolist() == t.check(torch.tensor(x)).tolist(), n
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    D, T = fusegrad.distributions, torch.distributions
    x = _real(5, 3)
    pairs = [(D.ExpTransform(), T.ExpTransform()), (D.SigmoidTransform(), T.SigmoidTransform()),
             (D.TanhTransform(), T.TanhTransform()),
             (D.AffineTransform(1.5, -2.0), T.AffineTransform(1.5, -2.0)),
             (D.SoftplusTransform(), T.SoftplusTransform()),
             (D.ComposeTransform([D.AffineTransform(0.0, 0.5), D.TanhTransform()]),
              T.ComposeTransform([T.AffineTransform(0.0, 0.5), T.TanhTransform()])),
             (D.IndependentTransform(D.ExpTransform(), 1),
              T.IndependentTransform(T.ExpTransform(), 1)),
             (D.AffineTransform(fusegrad.tensor([1.0, 2.0, 3.0], dtype=fusegrad.float64),
                                2.0, event_dim=1),
              T.AffineTransform(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 2.0,
                                event_dim=1))]
    for f, t in pairs:
        assert repr(f) == repr(t) and repr(f.inv) == repr(t.inv)
        fx = fusegrad.tensor(x, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        fy, ty = f(fx), t(tx)
        _close(fy, ty)
        _close(f.inv(fy), t.inv(ty), rtol=1e-6)
        fl, tl = f.log_abs_det_jacobian(fx, fy), t.log_abs_det_jacobian(tx, ty)
        _close(fl, tl, rtol=1e-6)
        (fy.sum() + fl.sum()).backward()
        (ty.sum() + tl.sum()).backward()
        _close(fx.grad, tx.grad, rtol=1e-6)
        assert f.domain.event_dim == t.domain.event_dim
        assert f.codomain.event_dim == t.codomain.event_dim
        assert f.inv.inv is f
    p = D.PowerTransform(fusegrad.tensor(2.0, dtype=fusegrad.float64))
    tp = T.PowerTransform(torch.tensor(2.0, dtype=torch.float64))
    y = _pos(4)
    _close(p(fusegrad.tensor(y)), tp(torch.tensor(y)))
    _close(p.log_abs_det_jacobian(fusegrad.tensor(y), p(fusegrad.tensor(y))),
           tp.log_abs_det_jacobian(torch.tensor(y), tp(torch.tensor(y))))
    sm, tsm = D.SoftmaxTransform(), T.SoftmaxTransform()
    _close(sm(fusegrad.tensor(x)), tsm(torch.tensor(x)))


def test_enumerate_support_cdf_icdf_and_rsample_flags():
    D, T = fusegrad.distributions, torch.distributions
    for f, t in [(D.Bernoulli(fusegrad.tensor([0.2, 0.7])), T.Bernoulli(torch.tensor([0.2, 0.7]))),
                 (D.Categorical(fusegrad.tensor([[0.2, 0.8, 0.0]])),
                  T.Categorical(torch.tensor([[0.2, 0.8, 0.0]]))),
                 (D.OneHotCategorical(fusegrad.tensor([0.5, 0.5])),
                  T.OneHotCategorical(torch.tensor([0.5, 0.5])))]:
        assert f.enumerate_support().tolist() == t.enumerate_support().tolist()
        assert f.enumerate_support(False).tolist() == t.enumerate_support(False).tolist()
        _close(f.entropy(), t.entropy())
    u = RNG.uniform(0.05, 0.95, 6)
    for name in ["Normal", "Laplace", "Exponential", "Uniform", "TransformedAffineExp"]:
        ctor, params, _ = CASES[name]
        fd, td = ctor(fusegrad, *_tensors(fusegrad, params)), ctor(torch, *_tensors(torch,
                                                                                     params))
        fq, tq = fd.icdf(fusegrad.tensor(u[:, None])), td.icdf(torch.tensor(u[:, None]))
        _close(fq, tq, rtol=1e-6)
        _close(fd.cdf(fq), td.cdf(tq), rtol=1e-6)
        assert fd.has_rsample == td.has_rsample
    for name, (ctor, params, _) in CASES.items():
        fd = ctor(fusegrad, *_tensors(fusegrad, params))
        td = ctor(torch, *_tensors(torch, params))
        assert fd.has_rsample == td.has_rsample, name
        assert fd.has_enumerate_support == td.has_enumerate_support, name
        assert type(fd).__name__ == type(td).__name__


def test_sample_moments_and_no_gradient():
    fusegrad.manual_seed(0)
    loc = fusegrad.tensor([1.0, -2.0], requires_grad=True)
    d = fusegrad.distributions.Normal(loc, fusegrad.tensor([0.5, 2.0]))
    s = d.sample((20000,))
    assert not s.requires_grad and d.rsample().requires_grad
    np.testing.assert_allclose(s.mean(0).numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(s.std(0).numpy(), [0.5, 2.0], rtol=0.03)
    c = fusegrad.distributions.Categorical(probs=fusegrad.tensor([0.1, 0.6, 0.3]))
    counts = np.bincount(c.sample((30000,)).numpy(), minlength=3) / 30000
    np.testing.assert_allclose(counts, [0.1, 0.6, 0.3], atol=0.015)
    b = fusegrad.distributions.Beta(2.0, 5.0).sample((20000,)).numpy()
    assert abs(b.mean() - 2 / 7) < 0.01


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_values_match_torch(name):
    ctor, params, values = CASES[name]
    fp = [fusegrad.tensor(a.astype(np.float32)) for a in params]
    tp = [torch.tensor(a.astype(np.float32)) for a in params]
    fd, td = ctor(fusegrad, *fp), ctor(torch, *tp)
    f_lp = fd.log_prob(fusegrad.tensor(values.astype(np.float32)))
    t_lp = td.log_prob(torch.tensor(values.astype(np.float32)))
    assert repr(f_lp.dtype) == repr(t_lp.dtype)
    np.testing.assert_allclose(f_lp.numpy(), t_lp.numpy(), rtol=2e-5, atol=2e-5)
    assert repr(fd.sample((2,)).dtype) == repr(td.sample((2,)).dtype)
    try:
        t_ent = td.entropy()
    except NotImplementedError:
        return
    np.testing.assert_allclose(fd.entropy().numpy(), t_ent.numpy(), rtol=2e-5, atol=2e-5)


def test_utils_match_torch():
    DU, TU = fusegrad.distributions.utils, torch.distributions.utils
    p = _simplex(3, 4)
    for binary in (False, True):
        q = p if not binary else RNG.uniform(0.05, 0.95, (3, 4))
        _close(DU.probs_to_logits(fusegrad.tensor(q), binary),
               TU.probs_to_logits(torch.tensor(q), binary))
        _close(DU.logits_to_probs(fusegrad.tensor(q), binary),
               TU.logits_to_probs(torch.tensor(q), binary))
    _close(DU.clamp_probs(fusegrad.tensor([0.0, 0.5, 1.0])),
           TU.clamp_probs(torch.tensor([0.0, 0.5, 1.0])))
    a, b = DU.broadcast_all(fusegrad.zeros(2, 1, dtype=fusegrad.float64), 3.0)
    ta, tb = TU.broadcast_all(torch.zeros(2, 1, dtype=torch.float64), 3.0)
    assert tuple(b.shape) == tuple(tb.shape) and repr(b.dtype) == repr(tb.dtype)
    assert _error(lambda: DU.broadcast_all("x")) == _error(lambda: TU.broadcast_all("x"))
    m = _real(2, 4, 4)
    for diag in (0, -1, 1):
        fv, tv = DU.tril_matrix_to_vec(fusegrad.tensor(m), diag), TU.tril_matrix_to_vec(
            torch.tensor(m), diag)
        _close(fv, tv)
        _close(DU.vec_to_tril_matrix(fv, diag), TU.vec_to_tril_matrix(tv, diag))


def test_classes_live_in_pytorchs_module_paths():
    for name in fusegrad.distributions.__all__:
        ours = getattr(fusegrad.distributions, name)
        if not isinstance(ours, type):
            continue
        theirs = getattr(torch.distributions, name)
        assert ours.__module__ == theirs.__module__.replace("torch.", "fusegrad.", 1), name
