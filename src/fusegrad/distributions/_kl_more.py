"""The remaining closed-form KL pairs PyTorch registers: Gumbel, Pareto and
ContinuousBernoulli against the other continuous families, Bernoulli/Poisson,
the low-rank Gaussians, and the Bregman-divergence fallback for exponential families.

Each finite one is KL(p || q) = -H(p) - E_p[log q(X)] with the expectation in closed form;
a p with mass outside q's support gives +inf, with PyTorch's (sometimes conservative)
support tests kept so the infinities land where PyTorch puts them."""

from __future__ import annotations

import math

import fusegrad as F

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import _kl_mvn_mvn, register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform
from .utils import _sum_rightmost

__all__: list = []

_EULER = 0.57721566490153286060
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _infinite_like(t):
    return F.full_like(t, math.inf)


# Unbounded (or wider) supports against bounded-below or bounded ones: always infinite.
for _p, _q, _param in [(Beta, Pareto, "concentration1"),
                       (ContinuousBernoulli, Pareto, "probs"),
                       (Exponential, ContinuousBernoulli, "rate"),
                       (Exponential, Pareto, "rate"),
                       (Gamma, ContinuousBernoulli, "concentration"),
                       (Gamma, Pareto, "concentration"),
                       (Gumbel, Beta, "loc"), (Gumbel, ContinuousBernoulli, "loc"),
                       (Gumbel, Exponential, "loc"), (Gumbel, Gamma, "loc"),
                       (Gumbel, Pareto, "loc"), (Gumbel, Uniform, "loc"),
                       (Laplace, ContinuousBernoulli, "loc"), (Laplace, Pareto, "loc"),
                       (Normal, ContinuousBernoulli, "loc"), (Normal, Pareto, "loc"),
                       (Pareto, Beta, "scale"), (Pareto, ContinuousBernoulli, "scale"),
                       (Poisson, Bernoulli, "rate"), (Poisson, Binomial, "rate")]:
    register_kl(_p, _q)(lambda p, q, _name=_param: _infinite_like(getattr(p, _name)))


def _neg_log_gumbel_mean(q, mean_x, mean_exp_neg):
    """-E[log q(X)] for q Gumbel(loc, scale), given E[X] and E[exp(-X / scale)]."""
    return (q.scale.log() + (mean_x - q.loc) / q.scale
            + (q.loc / q.scale).exp() * mean_exp_neg)


def _neg_log_normal_mean(q, mean_x, mean_x2):
    """-E[log q(X)] for q Normal(loc, scale), given E[X] and E[X^2]."""
    var_q = q.scale.pow(2)
    return (_HALF_LOG_2PI + q.scale.log()
            + (mean_x2 - 2 * q.loc * mean_x + q.loc.pow(2)) / (2 * var_q))


def _neg_log_cb_mean(q, mean_x):
    """-E[log q(X)] for q ContinuousBernoulli, which is linear in X."""
    return -(mean_x * q.logits + (-q.probs).log1p() + q._cont_bern_log_norm())


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() + _neg_log_cb_mean(q, p.mean)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = (-p.probs).log1p() + p._cont_bern_log_norm()
    t3 = -(-q.probs).log1p() - q._cont_bern_log_norm()
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    return -p.entropy() + _neg_log_normal_mean(q, p.mean, p.variance + p.mean.pow(2))


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    # PyTorch's test: infinite unless q's support strictly contains [0, 1].
    return F.where((q.low >= 0) | (q.high <= 1), math.inf, result)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    # E[exp(-X / s)] = rate / (rate + 1 / s) for X ~ Exponential(rate).
    rs = p.rate * q.scale
    return -p.entropy() + _neg_log_gumbel_mean(q, p.rate.reciprocal(), rs / (rs + 1))


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    # The Gamma moment-generating function at -1 / s.
    rs = p.rate * q.scale
    mean_exp = (1 + rs.reciprocal()).pow(-p.concentration)
    return -p.entropy() + _neg_log_gumbel_mean(q, p.concentration / p.rate, mean_exp)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    mean = p.loc + p.scale * _EULER
    second = (math.pi * p.scale).pow(2) / 6 + mean.pow(2)
    return -p.entropy() + _neg_log_normal_mean(q, mean, second)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    # The Normal moment-generating function at -1 / s.
    mean_exp = (-p.loc / q.scale + 0.5 * (p.scale / q.scale).pow(2)).exp()
    return -p.entropy() + _neg_log_gumbel_mean(q, p.loc, mean_exp)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    width = p.high - p.low
    mean_exp = q.scale * ((-p.low / q.scale).exp() - (-p.high / q.scale).exp()) / width
    return -p.entropy() + _neg_log_gumbel_mean(q, (p.high + p.low) / 2, mean_exp)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() + _neg_log_cb_mean(q, p.mean)
    # PyTorch's test: infinite unless p's support lies strictly inside [0, 1].
    return F.where((p.high >= 1) | (p.low <= 0), math.inf, result)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    mean_log = (p.high * p.high.log() - p.low * p.low.log() - width) / width
    result = (-width.log() - q.alpha.log() - q.alpha * q.scale.log()
              + (q.alpha + 1) * mean_log)
    return F.where(p.low < q.scale, math.inf, result)


def _pareto_mean(p):
    """E[X] for a Pareto with alpha > 1; callers mask alpha <= 1 to +inf afterwards (a
    finite stand-in here keeps the masked entries' gradients zero rather than NaN)."""
    return p.alpha * p.scale / (p.alpha - 1)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    result = -p.entropy() - q.rate.log() + q.rate * _pareto_mean(p)
    return F.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    c = q.concentration
    mean_log = p.scale.log() + p.alpha.reciprocal()
    result = (-p.entropy() - c * q.rate.log() + c.lgamma() - (c - 1) * mean_log
              + q.rate * _pareto_mean(p))
    return F.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    # E[X^2] = alpha scale^2 / (alpha - 2), finite only for alpha > 2.
    safe = p.alpha > 2
    alpha = F.where(safe, p.alpha, 3.0)
    mean = alpha * p.scale / (alpha - 1)
    second = alpha * p.scale.pow(2) / (alpha - 2)
    result = -p.entropy() + _neg_log_normal_mean(q, mean, second)
    return F.where(safe, result, math.inf)


@register_kl(Pareto, Uniform)
def _kl_pareto_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    # Pareto's support is unbounded above, so no Uniform covers it.
    return F.where((q.low >= p.scale) | (q.high <= math.inf), math.inf, result)


def _as_mvn(d):
    """The MultivariateNormal with the same loc and covariance as a (low-rank) Gaussian."""
    if isinstance(d, MultivariateNormal):
        return d
    return MultivariateNormal(d.loc, covariance_matrix=d.covariance_matrix,
                              validate_args=False)


# PyTorch's messages carry the indentation of a wrapped string literal; kept verbatim.
_GAP = " " * 26


def _kl_gaussians(p, q):
    if p.event_shape != q.event_shape:
        both_low_rank = (isinstance(p, LowRankMultivariateNormal)
                         and isinstance(q, LowRankMultivariateNormal))
        kind = "Low Rank" if both_low_rank else "(Low Rank)"
        raise ValueError(f"KL-divergence between two {kind} Multivariate Normals with{_GAP}"
                         "different event shapes cannot be computed")
    return _kl_mvn_mvn(_as_mvn(p), _as_mvn(q))


for _p, _q in [(LowRankMultivariateNormal, LowRankMultivariateNormal),
               (LowRankMultivariateNormal, MultivariateNormal),
               (MultivariateNormal, LowRankMultivariateNormal)]:
    register_kl(_p, _q)(_kl_gaussians)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log-normaliser between the natural parameters."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot" + " " * 29
                                  + "be computed using Bregman divergences")
    p_params = [t.detach().requires_grad_() for t in p._natural_params]
    q_params = q._natural_params
    p_lognorm = p._log_normalizer(*p_params)
    grads = F.autograd.grad(p_lognorm.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - p_lognorm
    for p_param, q_param, grad in zip(p_params, q_params, grads):
        result = result - _sum_rightmost((q_param - p_param) * grad, len(q.event_shape))
    return result
