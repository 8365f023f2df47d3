"""Kumaraswamy(concentration1, concentration0): a Beta-like law on [0, 1] with a closed-form
CDF, built by transforming a uniform draw."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all

__all__ = ["Kumaraswamy"]

_EULER = 0.57721566490153286060


def _moments(a, b, n: int):
    """E[X^n] = b B(1 + n / a, b)."""
    shifted = 1 + n / a
    return b * F.exp(F.lgamma(shifted) + F.lgamma(b) - F.lgamma(shifted + b))


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(a, b): density a b x^(a-1) (1 - x^a)^(b-1) on [0, 1]."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        b = self.concentration0
        base = Uniform(F.full_like(b, 0), F.full_like(b, 1), validate_args=validate_args)
        # x = (1 - u^(1/b))^(1/a).
        transforms = [PowerTransform(exponent=b.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with both concentrations expanded to `batch_shape`."""
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        # An interior mode exists only when both concentrations are at least one.
        log_mode = F.where((b < 1) | (a < 1), math.nan, log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return (_moments(self.concentration1, self.concentration0, 2)
                - F.pow(self.mean, 2))

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        harmonic = F.digamma(b + 1) + _EULER
        return t0 + t1 * harmonic - F.log(a) - F.log(b)
