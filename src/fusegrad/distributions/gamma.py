"""Gamma(concentration, rate), with implicitly reparameterised samples."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from .._dispatch import call
from ..ops import random as R
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ['Gamma', 'standard_gamma', 'standard_gamma_grad']


def standard_gamma_grad(x, alpha):
    """d x / d alpha of Gamma(alpha, 1) draws `x` (PyTorch's `_standard_gamma_grad(alpha, x)`
    takes the arguments the other way round)."""
    return call(R.standard_gamma_grad, alpha, x)


def standard_gamma(alpha):
    """Draws from Gamma(alpha, 1), differentiable with respect to `alpha` (PyTorch's
    `_standard_gamma`: an op, so that compiled programs trace it)."""
    return call(R.standard_gamma, alpha, None)


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density proportional to x^(c - 1) exp(-rate x)."""

    _mean_carrier_measure = 0
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        both_numbers = isinstance(concentration, Number) and isinstance(rate, Number)
        shape = F.Size() if both_numbers else self.concentration.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with both parameters expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(Gamma, shape, _instance,
                              concentration=self.concentration.expand(shape),
                              rate=self.rate.expand(shape))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # Keep draws positive after the division; clamping a detached alias in place leaves
        # the gradient (and the DivBackward0 node) as they are.
        value.detach().clamp_(min=F.finfo(value.dtype).tiny)
        return value

    def log_prob(self, value):
        # Gamma alone accepts numbers as values, as in PyTorch.
        if not isinstance(value, F.Tensor):
            value = F.tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return F.xlogy(c, r) + F.xlogy(c - 1, value) - r * value - F.lgamma(c)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # The regularised lower incomplete gamma function P(c, rate x).
        return F.special.gammainc(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - F.log(self.rate) + F.lgamma(c) + (1.0 - c) * F.digamma(c)

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return F.lgamma(x + 1) + (x + 1) * F.log(-y.reciprocal())
