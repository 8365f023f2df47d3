"""The later additions beside the distributions themselves, against torch.distributions:
closed-form KL divergences (values and gradients), Gamma.cdf, the structural and matrix
transforms, and the `multinomial` and MixtureSameFamily constraints."""

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(2)

# family -> (constructor(module, *params), params); parameters are float64 tensors.
FAMILIES = {
    "Normal": (lambda m, a, b: m.distributions.Normal(a, b),
               [RNG.normal(size=3), RNG.uniform(0.5, 2, 3)]),
    "Laplace": (lambda m, a, b: m.distributions.Laplace(a, b),
                [RNG.normal(size=3), RNG.uniform(0.5, 2, 3)]),
    "Exponential": (lambda m, r: m.distributions.Exponential(r), [RNG.uniform(0.5, 2, 3)]),
    "Gamma": (lambda m, c, r: m.distributions.Gamma(c, r),
              [RNG.uniform(0.5, 3, 3), RNG.uniform(0.5, 2, 3)]),
    "Beta": (lambda m, a, b: m.distributions.Beta(a, b),
             [RNG.uniform(0.5, 3, 3), RNG.uniform(0.5, 3, 3)]),
    "Uniform": (lambda m, a, b: m.distributions.Uniform(a, b),
                [np.array([0.1, -0.5, 0.2]), np.array([0.7, 0.9, 1.5])]),
    "Poisson": (lambda m, r: m.distributions.Poisson(r), [RNG.uniform(0.5, 4, 3)]),
    "Binomial": (lambda m, n, p: m.distributions.Binomial(n, p),
                 [np.array([4.0, 6.0, 6.0]), RNG.uniform(0.1, 0.9, 3)]),
    "Geometric": (lambda m, p: m.distributions.Geometric(p), [RNG.uniform(0.1, 0.9, 3)]),
    "HalfNormal": (lambda m, s: m.distributions.HalfNormal(s), [RNG.uniform(0.5, 2, 3)]),
    "Gumbel": (lambda m, a, b: m.distributions.Gumbel(a, b),
               [RNG.normal(size=3), RNG.uniform(0.5, 2, 3)]),
    "Pareto": (lambda m, s, a: m.distributions.Pareto(s, a),
               [np.array([0.5, 1.0, 2.0]), RNG.uniform(0.5, 3, 3)]),
    "Cauchy": (lambda m, a, b: m.distributions.Cauchy(a, b),
               [RNG.normal(size=3), RNG.uniform(0.5, 2, 3)]),
}

# The pairs both libraries register (the cross pairs of Gumbel, Pareto, Poisson-Binomial and
# ContinuousBernoulli are not implemented yet).
PAIRS = [(p, q) for p in FAMILIES for q in FAMILIES
         if (getattr(torch.distributions, p), getattr(torch.distributions, q))
         in torch.distributions.kl._KL_REGISTRY
         and (getattr(fusegrad.distributions, p), getattr(fusegrad.distributions, q))
         in fusegrad.distributions.kl._KL_REGISTRY]


def _build(name, mod, shift=0.0):
    ctor, params = FAMILIES[name]
    def moved(a):
        if name in ("Binomial", "Geometric"):
            return a if a.max() > 1 else a ** (1 + shift)  # probabilities stay in (0, 1)
        return a * (1 + shift) if a.min() > 0 else a
    tensors = [mod.tensor(moved(a), dtype=mod.float64, requires_grad=True) for a in params]
    return ctor(mod, *tensors), tensors


def _close(a, b, atol=1e-6, rtol=1e-5):
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(np.array(a.detach().numpy()), b.detach().numpy(), atol=atol,
                               rtol=rtol)


def test_every_pair_torch_registers_is_covered():
    assert len(PAIRS) >= 34


@pytest.mark.parametrize("p_name,q_name", PAIRS)
def test_kl_divergence_values_and_gradients(p_name, q_name):
    fp, fp_params = _build(p_name, fusegrad)
    fq, fq_params = _build(q_name, fusegrad, shift=0.3)
    tp, tp_params = _build(p_name, torch)
    tq, tq_params = _build(q_name, torch, shift=0.3)
    expected = torch.distributions.kl_divergence(tp, tq)
    got = fusegrad.distributions.kl_divergence(fp, fq)
    _close(got, expected)
    finite = torch.isfinite(expected)
    if bool(finite.any()):
        t_grads = torch.autograd.grad(expected[finite].sum(), tp_params + tq_params,
                                      allow_unused=True)
        f_grads = fusegrad.autograd.grad(got[fusegrad.tensor(finite.numpy())].sum(),
                                         fp_params + fq_params, allow_unused=True)
        for fg, tg in zip(f_grads, t_grads):
            if tg is not None:
                _close(fg, tg, atol=1e-5, rtol=1e-4)


def test_binomial_kl_with_larger_q_count_raises_like_torch():
    for mod in (fusegrad, torch):
        p = mod.distributions.Binomial(mod.tensor([2.0]), mod.tensor([0.5]))
        q = mod.distributions.Binomial(mod.tensor([3.0]), mod.tensor([0.5]))
        with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
            mod.distributions.kl_divergence(p, q)


def test_gamma_cdf():
    values = RNG.uniform(0.1, 4, (4, 3))
    c, r = RNG.uniform(0.5, 3, 3), RNG.uniform(0.5, 2, 3)
    f = fusegrad.distributions.Gamma(fusegrad.tensor(c), fusegrad.tensor(r))
    t = torch.distributions.Gamma(torch.tensor(c), torch.tensor(r))
    _close(f.cdf(fusegrad.tensor(values)), t.cdf(torch.tensor(values)))
    got = fusegrad.distributions.Gamma(fusegrad.tensor([2.0]), fusegrad.tensor([1.0]))
    assert abs(got.cdf(fusegrad.tensor([1.0])).item() - 0.2642411) < 1e-6
    for mod in (fusegrad, torch):  # (validation asked for: torch.compile may turn torch's off)
        with pytest.raises(ValueError, match="to be within the support"):
            mod.distributions.Gamma(mod.tensor([2.0]), mod.tensor([1.0]),
                                    validate_args=True).cdf(mod.tensor([-1.]))


def _transform_cases(m):
    T = m.distributions.transforms
    return {
        "StickBreaking": (T.StickBreakingTransform(), (2, 3)),
        "LowerCholesky": (T.LowerCholeskyTransform(), (2, 3, 3)),
        "PositiveDefinite": (T.PositiveDefiniteTransform(), (2, 3, 3)),
        "CorrCholesky": (T.CorrCholeskyTransform(), (2, 6)),
        "Cat": (T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], dim=1,
                               lengths=[2, 1]), (2, 3)),
        "CatEvent": (T.CatTransform([T.IndependentTransform(T.ExpTransform(), 1),
                                     T.AffineTransform(0.0, 3.0, event_dim=1)], dim=-1,
                                    lengths=[2, 1]), (4, 3)),
        "Stack": (T.StackTransform([T.ExpTransform(), T.SigmoidTransform()], dim=-1), (3, 2)),
        "Reshape": (T.ReshapeTransform((2, 3), (6,)), (4, 2, 3)),
        "CDF": (T.CumulativeDistributionTransform(
            m.distributions.Normal(m.tensor(0.5, dtype=m.float64),
                                   m.tensor(2.0, dtype=m.float64))), (4,)),
    }


@pytest.mark.parametrize("name", sorted(_transform_cases(torch)))
def test_transforms(name):
    ft, shape = _transform_cases(fusegrad)[name]
    tt, _ = _transform_cases(torch)[name]
    x = RNG.normal(size=shape) * 0.7
    fx = fusegrad.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fy, ty = ft(fx), tt(tx)
    _close(fy, ty)
    assert repr(ft.domain) == repr(tt.domain)
    assert repr(ft.codomain) == repr(tt.codomain)
    assert ft.bijective == tt.bijective
    assert tuple(ft.forward_shape(fusegrad.Size(shape))) == tuple(tt.forward_shape(shape))
    assert tuple(ft.inverse_shape(fy.shape)) == tuple(tt.inverse_shape(ty.shape))
    _close(ft.inv(fy.detach()), tt.inv(ty.detach()), atol=1e-5)
    total_f, total_t = fy.sum(), ty.sum()
    try:
        ladj_t = tt.log_abs_det_jacobian(tx, ty)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ft.log_abs_det_jacobian(fx, fy)
    else:
        ladj_f = ft.log_abs_det_jacobian(fx, fy)
        _close(ladj_f, ladj_t)
        total_f, total_t = total_f + ladj_f.sum(), total_t + ladj_t.sum()
    (gt,) = torch.autograd.grad(total_t, tx)
    (gf,) = fusegrad.autograd.grad(total_f, fx)
    _close(gf, gt, atol=1e-5)


@pytest.mark.parametrize("build,shape", [
    (lambda m: m.distributions.transforms.ReshapeTransform((2, 3), (5,)), None),
    (lambda m: m.distributions.transforms.ReshapeTransform((2, 3), (6,)), (3, 2)),
    (lambda m: m.distributions.transforms.CorrCholeskyTransform(), (4,)),
    (lambda m: m.distributions.transforms.StickBreakingTransform(), ()),
])
def test_transform_shape_errors(build, shape):
    messages = []
    for mod in (fusegrad, torch):
        with pytest.raises(ValueError) as info:
            build(mod).forward_shape(shape)
        messages.append(str(info.value).replace("fusegrad.", "torch."))
    assert messages[0] == messages[1]


def test_constraints():
    for mod in (fusegrad, torch):
        c = mod.distributions.constraints
        mult = c.multinomial(3)
        assert repr(mult) == "Multinomial()" and mult.is_discrete and mult.event_dim == 1
        x = mod.tensor([[1.0, 2.0], [2.0, 2.0], [-1.0, 1.0]])
        assert mult.check(x).tolist() == [True, False, False]
        mix = c.MixtureSameFamilyConstraint(c.independent(c.positive, 1))
        assert repr(mix) == "MixtureSameFamilyConstraint(IndependentConstraint(" \
            "GreaterThan(lower_bound=0.0), 1))"
        assert mix.event_dim == 1 and not mix.is_discrete
        assert mix.check(mod.tensor([[1.0, 2.0], [1.0, -2.0]])).tolist() == [True, False]
        # A 0-d value cannot gain the component dimension.
        with pytest.raises(IndexError):
            mix.check(mod.tensor(1.0))
