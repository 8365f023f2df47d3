"""Poisson(rate): counts of events at a constant rate."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """Poisson(rate): P(k) = rate^k exp(-rate) / k! on the nonnegative integers."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        shape = F.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `rate` expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(Poisson, shape, _instance, rate=self.rate.expand(shape))

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with F.no_grad():
            return F.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (F.log(self.rate),)

    def _log_normalizer(self, x):
        return F.exp(x)
