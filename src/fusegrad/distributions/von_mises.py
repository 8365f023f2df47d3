"""VonMises(loc, concentration): the circular normal distribution on angles."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


# Abramowitz and Stegun's polynomial approximations (9.8.1 to 9.8.4) of I0 and I1, below
# 3.75 in (x / 3.75)^2 and above it (scaled) in 3.75 / x; PyTorch evaluates the density,
# mean and variance with them (accurate to about 1e-7), so they are used here as well.
_I_SMALL = ([1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2],
            [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3])
_I_LARGE = ([0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
             -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2],
            [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1,
             0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2])


def _horner(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_bessel_i(x, order: int = 0):
    """log I_order(x) for x > 0 and order 0 or 1 (both branches computed, then selected,
    so gradients take PyTorch's path)."""
    y = x / 3.75
    small = _horner(y * y, _I_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + _horner(3.75 / x, _I_LARGE[order]).log()
    return F.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, x):
    """Best and Fisher's (1979) wrapped-Cauchy envelope rejection sampler: each round draws
    three uniforms per element and keeps the first accepted angle."""
    done = F.zeros(x.shape, dtype=F.bool)
    while not bool(done.all()):
        u1, u2, u3 = F.rand((3,) + tuple(x.shape), dtype=loc.dtype).unbind()
        z = F.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        if bool(accept.any()):
            x = F.where(accept, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
    # Centre on loc and wrap into [-pi, pi).
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """VonMises(loc, concentration): density exp(k cos(x - loc)) / (2 pi I0(k)); `loc` and
    values are angles in radians, taken modulo 2 pi."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, F.Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * F.cos(value - self.loc) - math.log(2 * math.pi) - _log_bessel_i(k, 0)

    @lazy_property
    def _loc(self):
        return self.loc.to(F.float64)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(F.float64)

    @lazy_property
    def _proposal_r(self):
        k = self._concentration
        tau = 1 + (1 + 4 * k ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * k)
        # For tiny k the closed form cancels badly; its expansion 1 / k + k does not.
        return F.where(k < 1e-5, 1 / k + k, (1 + rho ** 2) / (2 * rho))

    def sample(self, sample_shape=()):
        # Sampling runs in float64: in float32 it can loop for ever at small concentrations.
        with F.no_grad():
            shape = self._extended_shape(sample_shape)
            x = F.empty(shape, dtype=F.float64)
            return _rejection_sample(self._loc, self._concentration, self._proposal_r,
                                     x).to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        """A new VonMises with both parameters expanded to `batch_shape`."""
        validate_args = self.__dict__.get("_validate_args")
        loc = self.loc.expand(batch_shape)
        concentration = self.concentration.expand(batch_shape)
        return type(self)(loc, concentration, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance 1 - I1(k) / I0(k)."""
        k = self.concentration
        return 1 - (_log_bessel_i(k, 1) - _log_bessel_i(k, 0)).exp()
