"""Location-scale and simple continuous distributions: Normal, Laplace, Uniform, Exponential."""

from __future__ import annotations

import math
from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution, ExponentialFamily
from .utils import _standard_normal, _standard_uniform, broadcast_all

__all__ = ["Exponential", "Laplace", "Normal", "Uniform"]


class _LocScale(Distribution):
    """Shared construction and expansion of two-parameter (loc, scale) families."""

    _names = ("loc", "scale")

    def __init__(self, a, b, validate_args=None) -> None:
        first, second = broadcast_all(a, b)
        setattr(self, self._names[0], first)
        setattr(self, self._names[1], second)
        shape = F.Size() if isinstance(a, Number) and isinstance(b, Number) else first.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with both parameters expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(type(self), shape, _instance,
                              **{n: getattr(self, n).expand(shape) for n in self._names})


class Normal(_LocScale, ExponentialFamily):
    """Normal(loc, scale): the Gaussian with mean `loc` and standard deviation `scale`."""

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
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + F.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * F.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + F.log(self.scale)


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
        return F.full_like(self.high, float("nan"))

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


class Exponential(ExponentialFamily):
    """Exponential(rate): density rate * exp(-rate * x) on x >= 0."""

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
        # -log(1 - u) is a standard exponential draw.
        u = _standard_uniform(shape, self.rate.dtype)
        return -F.log1p(-u) / self.rate

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
