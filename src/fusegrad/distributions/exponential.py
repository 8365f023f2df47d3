"""Exponential(rate)."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ['Exponential']


class Exponential(ExponentialFamily):
    """Exponential(rate): density rate * exp(-rate * x) on x >= 0."""

    _mean_carrier_measure = 0
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None) -> None:
        (self.rate,) = broadcast_all(rate)
        shape = F.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `rate` expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(Exponential, shape, _instance, rate=self.rate.expand(shape))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return F.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        # A standard exponential draw from the tensor method, PyTorch's stream (a seed gives
        # its samples), over the rate: differentiable in the rate.
        return self.rate.new_empty(shape).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - F.exp(-self.rate * value)

    def icdf(self, value):
        return -F.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - F.log(self.rate)

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -F.log(-x)
