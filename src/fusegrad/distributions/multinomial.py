"""Multinomial(total_count, probs or logits): category counts over `total_count` draws."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Multinomial(total_count, probs or logits): counts per category over `total_count`
    independent categorical draws; the event is the count vector."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count: int = 1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        # Each category's count is Binomial(total_count, p_k): used by the entropy.
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy whose categorical is expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(Multinomial, shape, _instance, total_count=self.total_count,
                              _categorical=self._categorical.expand(shape))

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=()):
        sample_shape = F.Size(sample_shape)
        draws = self._categorical.sample(F.Size((self.total_count,)) + sample_shape)
        # Move the draw index last, then count the categories along it.
        draws = draws.permute(*range(1, draws.dim()), 0)
        counts = F.zeros(self._extended_shape(sample_shape), dtype=draws.dtype)
        counts.scatter_add_(-1, draws, F.ones_like(draws))
        return counts.type_as(self.probs)

    def entropy(self):
        n = F.tensor(self.total_count, dtype=self.probs.dtype)
        term1 = n * self._categorical.entropy() - F.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = F.exp(self._binomial.log_prob(support))
        weights = F.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = F.lgamma(value.sum(-1) + 1)
        log_factorial_xs = F.lgamma(value + 1).sum(-1)
        # A category of probability zero drawn zero times contributes nothing (not 0 * -inf).
        logits = F.where((value == 0) & (logits == -math.inf), F.zeros_like(logits), logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
