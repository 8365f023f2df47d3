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
from .kl import register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import (
    LowRankMultivariateNormal,
    _lowrank_logdet,
    _lowrank_mahalanobis,
)
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
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
                       (Pareto, Uniform, "scale"),
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


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


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
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_ratio = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_ratio = q.loc / q.scale
    t1 = var_ratio.log() * 0.5
    t2 = mean_ratio - loc_ratio
    # The Normal moment-generating function at -1 / scale.
    t3 = F.exp(-mean_ratio + 0.5 * var_ratio + loc_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    ratio = q.scale / (p.high - p.low)
    high_diff = (p.high - q.loc) / q.scale
    low_diff = (p.low - q.loc) / q.scale
    t1 = ratio.log() + 0.5 * (high_diff + low_diff)
    t2 = ratio * (F.exp(-high_diff) - F.exp(-low_diff))
    return t1 - t2


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    # PyTorch's test: infinite unless p's support lies strictly inside [0, 1].
    outside = F.max(F.ge(p.high, 1), F.le(p.low, 0))
    return F.where(outside, F.ones_like(result) * math.inf, result)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (F.special.xlogy(p.high, p.high) - F.special.xlogy(p.low, p.low) - width) / width
    result = t2 * (q.alpha + 1) - t1
    result[p.low < q.scale] = math.inf
    return result


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    # As PyTorch: the alpha <= 1 entries (infinite mean) are overwritten with +inf, so
    # their gradients are whatever the unguarded formula gives there.
    scale_rate = p.scale * q.rate
    t1 = (p.alpha / scale_rate).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate / (p.alpha - 1)
    result = t1 - t2 + t3 - 1
    result[p.alpha <= 1] = math.inf
    return result


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    result = t1 + t2 + t3 + t4 - 1
    result[p.alpha <= 1] = math.inf
    return result


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    # E[X^2] is finite only for alpha > 2; the rest is overwritten with +inf.
    var_normal = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    result = t1 - t2 + (t3 + t4) / var_normal - 1
    result[p.alpha <= 2] = math.inf
    return result


# PyTorch's messages carry the indentation of a wrapped string literal; kept verbatim.
_GAP = " " * 26


def _check_event_shapes(p, q, kind: str) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {kind} Multivariate Normals with{_GAP}"
                         "different event shapes cannot be computed")


def _trace_xxt(bmat):
    """trace(X X^T) = the sum of squares of each trailing matrix."""
    m, n = bmat.size(-2), bmat.size(-1)
    return bmat.reshape(-1, m * n).pow(2).sum(-1).reshape(bmat.shape[:-2])


def _woodbury_factor(q):
    """A with (W W^T + D)^-1 = D^-1 - A^T A, for q's low-rank covariance W W^T + D."""
    wt_dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return F.linalg.solve_triangular(q._capacitance_tril, wt_dinv, upper=False)


def _q_lowrank_terms(p, q):
    """log det(q's covariance) and q's Mahalanobis distance of p's mean."""
    logdet = _lowrank_logdet(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                             q._capacitance_tril)
    maha = _lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                q.loc - p.loc, q._capacitance_tril)
    return logdet, maha


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    # 2 KL = log|Sq| - log|Sp| + trace(Sq^-1 Sp) + Mahalanobis - n, with the trace expanded
    # through the Woodbury identity (term by term as PyTorch, so values and graph agree).
    _check_event_shapes(p, q, "Low Rank")
    q_logdet, term3 = _q_lowrank_terms(p, q)
    term1 = q_logdet - _lowrank_logdet(p._unbroadcasted_cov_factor,
                                       p._unbroadcasted_cov_diag, p._capacitance_tril)
    A = _woodbury_factor(q)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _trace_xxt(p._unbroadcasted_cov_factor
                        * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term23 = _trace_xxt(A * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _trace_xxt(A.matmul(p._unbroadcasted_cov_factor))
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _check_event_shapes(p, q, "(Low Rank)")
    q_logdet, term3 = _q_lowrank_terms(p, q)
    term1 = q_logdet - 2 * p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    A = _woodbury_factor(q)
    term21 = _trace_xxt(p._unbroadcasted_scale_tril
                        * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _trace_xxt(A.matmul(p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + (term21 - term22) + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _check_event_shapes(p, q, "(Low Rank)")
    term1 = (2 * q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
             - _lowrank_logdet(p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                               p._capacitance_tril))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    batch = F.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2],
                               p._unbroadcasted_cov_factor.shape[:-2])
    n = p.event_shape[0]
    q_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_diag = F.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _trace_xxt(F.linalg.solve_triangular(q_tril, p_factor, upper=False))
    term22 = _trace_xxt(F.linalg.solve_triangular(q_tril, p_diag, upper=False))
    return 0.5 * (term1 + (term21 + term22) + term3 - p.event_shape[0])


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
