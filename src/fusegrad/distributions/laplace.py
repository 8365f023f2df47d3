"""Laplace(loc, scale): the double-exponential distribution."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from ._loc_scale import _LocScale
from .utils import _standard_uniform

__all__ = ['Laplace']


class Laplace(_LocScale):
    """Laplace(loc, scale): the double-exponential distribution."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None) -> None:
        super().__init__(loc, scale, validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = F.finfo(self.loc.dtype).eps
        # U(-1, 1) excluding -1, so log1p(-|u|) stays finite.
        u = _standard_uniform(shape, self.loc.dtype) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * F.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -F.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * F.expm1(-z.abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * F.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + F.log(2 * self.scale)
