"""Uniform(low, high): constant density on [low, high)."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from ._loc_scale import _LocScale
from .utils import _standard_uniform

__all__ = ['Uniform']


class Uniform(_LocScale):
    """Uniform(low, high): constant density on [low, high)."""

    has_rsample = True
    _names = ("low", "high")

    def __init__(self, low, high, validate_args=None) -> None:
        super().__init__(low, high, validate_args)

    @property
    def arg_constraints(self) -> dict:
        # Each bound is constrained by the other.
        return {"low": constraints.less_than(self.high),
                "high": constraints.greater_than(self.low)}

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        # Computed from `high`, as PyTorch: NaN that still carries high's graph.
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.low + _standard_uniform(shape, self.low.dtype) * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = self.low.le(value).type_as(self.low) * self.high.gt(value).type_as(self.low)
        return F.log(inside) - F.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return F.log(self.high - self.low)
