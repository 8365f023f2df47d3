"""NegativeBinomial(total_count, probs or logits): successes before `total_count` failures."""

from __future__ import annotations

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import (
    BinaryParams,
    count_and_probs,
    expanded_count_and_probs,
    lazy_property,
)

__all__ = ["NegativeBinomial"]



class NegativeBinomial(BinaryParams, Distribution):
    """NegativeBinomial(total_count, probs or logits): successes, each with probability
    `probs`, before `total_count` failures."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        count_and_probs(self, total_count, probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `total_count` and the given parameter expanded to `batch_shape`."""
        return expanded_count_and_probs(self, NegativeBinomial, batch_shape, _instance)

    @property
    def mean(self):
        return self.total_count * F.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / F.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        # The Poisson rate of a negative binomial draw is Gamma(total_count, (1 - p) / p).
        return Gamma(concentration=self.total_count, rate=F.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=()):
        with F.no_grad():
            return F.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = F.nn.functional.logsigmoid
        n = self.total_count
        unnormalised = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        normaliser = -F.lgamma(n + value) + F.lgamma(1.0 + value) + F.lgamma(n)
        # With no failures and no successes, the mass is one.
        normaliser = normaliser.masked_fill(n + value == 0.0, 0.0)
        return unnormalised - normaliser
