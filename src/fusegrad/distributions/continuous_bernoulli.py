"""ContinuousBernoulli(probs or logits): the [0, 1]-valued law with density proportional to
p^x (1 - p)^(1 - x), normalised in closed form (a Taylor expansion near p = 1/2)."""

from __future__ import annotations

import math
from numbers import Number

import fusegrad as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]

_ONE_OF = "Either `probs` or `logits` must be specified, but not both."

class ContinuousBernoulli(ExponentialFamily):
    """ContinuousBernoulli(probs or logits, lims): `lims` bounds the interval around 1/2
    where Taylor expansions replace the closed forms, which lose precision there."""

    _mean_carrier_measure = 0
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims: tuple = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError(_ONE_OF)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # The raw probabilities are checked before clamping (which would hide them),
            # whenever validate_args is given explicitly.
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        shape = F.Size() if is_scalar else self._param.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with the given parameter expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        params = {"_lims": self._lims}
        for name in ("probs", "logits"):
            if name in self.__dict__:
                params[name] = params["_param"] = getattr(self, name).expand(shape)
        return self._expanded(ContinuousBernoulli, shape, _instance, **params)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """probs, with those in the unstable region moved to its lower edge (their results
        are replaced by Taylor expansions, but must stay finite for the gradient)."""
        return F.where(self._outside_unstable_region(), self.probs,
                       self._lims[0] * F.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p), with C(p) = 2 atanh(1 - 2p) / (1 - 2p)."""
        p = self._cut_probs()
        below = F.where(p <= 0.5, p, F.zeros_like(p))
        above = F.where(p >= 0.5, p, F.ones_like(p))
        log_norm = (F.log(F.abs(F.log1p(-p) - F.log(p)))
                    - F.where(p <= 0.5, F.log1p(-2.0 * below), F.log(2.0 * above - 1.0)))
        x = F.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return F.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        p = self._cut_probs()
        closed = p / (2.0 * p - 1.0) + 1.0 / (F.log1p(-p) - F.log(p))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * F.pow(x, 2)) * x
        return F.where(self._outside_unstable_region(), closed, taylor)

    @property
    def stddev(self):
        return F.sqrt(self.variance)

    @property
    def variance(self):
        p = self._cut_probs()
        closed = (p * (p - 1.0) / F.pow(1.0 - 2.0 * p, 2)
                  + 1.0 / F.pow(F.log1p(-p) - F.log(p), 2))
        x = F.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return F.where(self._outside_unstable_region(), closed, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=()):
        u = F.rand(self._extended_shape(sample_shape), dtype=self.probs.dtype)
        with F.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        return self.icdf(F.rand(self._extended_shape(sample_shape), dtype=self.probs.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = F.nn.functional.binary_cross_entropy_with_logits
        return -bce(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        p = self._cut_probs()
        closed = (F.pow(p, value) * F.pow(1.0 - p, 1.0 - value) + p - 1.0) / (2.0 * p - 1.0)
        inside = F.where(self._outside_unstable_region(), closed, value)
        return F.where(value <= 0.0, F.zeros_like(value),
                       F.where(value >= 1.0, F.ones_like(value), inside))

    def icdf(self, value):
        p = self._cut_probs()
        closed = ((F.log1p(-p + value * (2.0 * p - 1.0)) - F.log1p(-p))
                  / (F.log(p) - F.log1p(-p)))
        return F.where(self._outside_unstable_region(), closed, value)

    def entropy(self):
        log_q = F.log1p(-self.probs)
        log_p = F.log(self.probs)
        return self.mean * (log_q - log_p) - self._cont_bern_log_norm() - log_q

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log((e^x - 1) / x), by its Taylor series near x = 0 where that form is unstable."""
        unstable_lo, unstable_hi = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = F.max(F.le(x, unstable_lo), F.gt(x, unstable_hi))
        cut = F.where(outside, x, unstable_lo * F.ones_like(x))
        log_norm = F.log(F.abs(F.special.expm1(cut))) - F.log(F.abs(cut))
        taylor = 0.5 * x + F.pow(x, 2) / 24.0 - F.pow(x, 4) / 2880.0
        return F.where(outside, log_norm, taylor)
