"""Closed-form KL divergences between different families (and within the families added
after the first set), registered into `kl_divergence` as in PyTorch.

Each is KL(p || q) = -H(p) - E_p[log q(X)], with the expectation written in closed form;
pairs whose p puts mass outside q's support are infinite."""

from __future__ import annotations

import math

import fusegrad as F

from .beta import Beta
from .binomial import Binomial
from .cauchy import Cauchy
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .kl import _kl_normal_normal, register_kl
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform

__all__: list = []

_EULER = 0.57721566490153286060


def _infinite_like(t):
    return F.full_like(t, math.inf)


def _x_log_x(t):
    # xlogy: 0 log 0 = 0, so a uniform reaching 0 (or 1) keeps a finite divergence.
    return F.special.xlogy(t, t)


def _beta_moments(p):
    """(a + b, E[X]) of a Beta."""
    total = p.concentration1 + p.concentration0
    return total, p.concentration1 / total


# Families with unbounded support against ones bounded below or on both sides.
for _p, _q, _param in [(Exponential, Beta, "rate"), (Exponential, Uniform, "rate"),
                       (Gamma, Beta, "concentration"), (Gamma, Uniform, "concentration"),
                       (Laplace, Beta, "loc"), (Laplace, Exponential, "loc"),
                       (Laplace, Gamma, "loc"), (Laplace, Uniform, "loc"),
                       (Normal, Beta, "loc"), (Normal, Exponential, "loc"),
                       (Normal, Gamma, "loc"), (Normal, Uniform, "loc")]:
    register_kl(_p, _q)(lambda p, q, _name=_param: _infinite_like(getattr(p, _name)))


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _beta_moments(p)[1]


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    total, mean = _beta_moments(p)
    mean_log = p.concentration1.digamma() - total.digamma()
    c = q.concentration
    return (-p.entropy() + c.lgamma() - c * q.rate.log() - (c - 1) * mean_log
            + q.rate * mean)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    total, mean = _beta_moments(p)
    var_q = q.scale.pow(2)
    second = (mean * (1 - mean) / (total + 1) + mean.pow(2)) * 0.5
    return (-p.entropy() + 0.5 * (var_q * 2 * math.pi).log()
            + (second - q.loc * mean + q.loc.pow(2) * 0.5) / var_q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    result[(q.low > 0) | (q.high < 1)] = math.inf
    return result


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    c = q.concentration
    return -c * ratio.log() + ratio + c.lgamma() + c * _EULER - (1 + _EULER)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_q = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    second = rate_sq.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5
    return 0.5 * (rate_sq * var_q * 2 * math.pi).log() - 1 + second / var_q


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a, b = p.concentration, p.rate
    var_q = q.scale.pow(2)
    b_sq = b.pow(2)
    t1 = 0.5 * (b_sq * var_q * 2 * math.pi).log() - a - a.lgamma()
    second = 0.5 * (a.pow(2) + a) / b_sq - q.loc * a / b + 0.5 * q.loc.pow(2)
    return t1 + (a - 1) * a.digamma() + second / var_q


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_q = q.scale.pow(2)
    ratio = p.scale.pow(2) / var_q
    t1 = 0.5 * (ratio * 2 / math.pi).log()
    spread = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + ratio + spread / var_q - 1


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    diff = p.loc - q.loc
    z = diff / p.scale
    # E|X - m| for X ~ Normal(loc, scale).
    mean_abs = (math.sqrt(2 / math.pi) * p.scale * F.exp(-0.5 * z.pow(2))
                + diff * F.erf(math.sqrt(0.5) * z))
    return (-(p.scale / q.scale).log() + mean_abs / q.scale
            - 0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    # Term by term as PyTorch, so values and graph agree: E[log X], E[log(1 - X)] under p.
    width = p.high - p.low
    t1 = width.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = ((q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width)
          / width)
    t4 = (q.concentration1.lgamma() + q.concentration0.lgamma()
          - (q.concentration1 + q.concentration0).lgamma())
    result = t3 + t4 - t1 - t2
    result[(p.high > 1) | (p.low < 0)] = math.inf
    return result


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    result[p.low < 0] = math.inf
    return result


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t1 = width.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    result[p.low < 0] = math.inf
    return result


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > "
                                  "p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    # Mass beyond q's largest count has zero probability under q.
    beyond = p.total_count > q.total_count
    kl[beyond] = _infinite_like(kl[beyond])
    return kl


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ratio = p.scale / q.scale
    q_loc, p_loc = q.loc / q.scale, p.loc / q.scale
    t1 = -ratio.log() - q_loc + p_loc
    t3 = F.exp(q_loc + F.lgamma(1 + ratio) - p_loc)
    return t1 + ratio * _EULER + t3 - (1 + _EULER)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * (p.scale / q.scale).log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    # p below q's scale has mass where q has none.
    result[p.scale < q.scale] = math.inf
    return result


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
            - (4 * p.scale * q.scale).log())
