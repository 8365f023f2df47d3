"""GeneralizedPareto(loc, scale, concentration): the peaks-over-threshold family that contains
the Exponential (concentration 0), the Pareto (> 0) and bounded laws (< 0)."""

from __future__ import annotations

import math
from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """GeneralizedPareto(loc, scale, concentration): survival (1 + c z)^(-1/c), z = (x -
    loc) / scale, or exp(-z) when c = 0."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, Number) for v in (loc, scale, concentration)):
            shape = F.Size()
        else:
            shape = self.loc.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with every parameter expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(GeneralizedPareto, shape, _instance, loc=self.loc.expand(shape),
                              scale=self.scale.expand(shape),
                              concentration=self.concentration.expand(shape))

    def _safe_concentration(self, against_default: bool = False):
        """(is the concentration zero, the concentration with zeros replaced by one): the
        c = 0 limit has its own formula, and the general one must not divide by zero.
        `against_default`: compare with a zero of the default dtype, as PyTorch's log_prob
        and log_survival_function do (so a float64 concentration raises there as in
        PyTorch, while icdf compares with a zero of its own dtype)."""
        c = self.concentration
        is_zero = F.isclose(c, F.tensor(0.0) if against_default else F.zeros_like(c))
        return is_zero, F.where(is_zero, F.ones_like(c), c)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(F.rand(shape, dtype=self.loc.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        is_zero, c = self._safe_concentration(True)
        y = 1 / c + F.ones_like(z)
        general = F.where(y == 0, y, y * F.log1p(c * z))
        return -self.scale.log() - F.where(is_zero, z, general)

    def log_survival_function(self, value):
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        is_zero, c = self._safe_concentration(True)
        return F.where(is_zero, -z, -F.log1p(c * z) / c)

    def log_cdf(self, value):
        """log P(X <= value)."""
        return F.log1p(-F.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return F.exp(self.log_cdf(value))

    def icdf(self, value):
        is_zero, c = self._safe_concentration()
        log_survival = F.log1p(-value)
        general = self.loc + self.scale / c * F.expm1(-c * log_survival)
        return F.where(is_zero, self.loc - self.scale * log_survival, general)

    @property
    def mean(self):
        c = self.concentration
        finite = c < 1
        safe = F.where(finite, c, 0.5)
        return F.where(finite, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):
        c = self.concentration
        finite = c < 0.5
        safe = F.where(finite, c, 0.25)
        value = self.scale ** 2 / ((1 - safe) ** 2 * (1 - 2 * safe))
        return F.where(finite, value, math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return F.broadcast_to(F.log(self.scale) + self.concentration + 1, self._batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        c = self.concentration
        # Negative concentrations bound the support above at loc - scale / c.
        upper = F.where(c < 0, self.loc - self.scale / c, math.inf)
        return constraints.interval(self.loc, upper)
