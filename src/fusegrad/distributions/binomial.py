"""Binomial(total_count, probs or logits): successes in `total_count` Bernoulli trials."""

from __future__ import annotations

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .utils import (
    BinaryParams,
    count_and_probs,
    expanded_count_and_probs,
)

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    """max(x, 0) whose gradient at exactly zero is 1/2, as PyTorch's."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(BinaryParams, Distribution):
    """Binomial(total_count, probs or logits) on 0 .. total_count."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        count_and_probs(self, total_count, probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `total_count` and the given parameter expanded to `batch_shape`."""
        return expanded_count_and_probs(self, Binomial, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with F.no_grad():
            return F.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_choose = (n + 1).lgamma() - (value + 1).lgamma() - (n - value + 1).lgamma()
        # n * log(1 + e^logits), written to stay finite for large |logits|.
        log_norm = n * _clamp_by_zero(logits) + n * F.log1p(F.exp(-logits.abs()))
        return log_choose + value * logits - log_norm

    def _homogeneous_count(self, what: str) -> int:
        count = int(self.total_count.max())
        if not bool(self.total_count.min() == count):
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(F.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        count = self._homogeneous_count("enumerate_support")
        values = F.arange(1 + count, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values
