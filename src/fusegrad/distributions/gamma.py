"""Gamma, Beta and Dirichlet, with reparameterised (implicitly differentiated) samples."""

from __future__ import annotations

from numbers import Number

import numpy as np

import fusegrad as F

from . import _special, constraints
from .distribution import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Beta", "Dirichlet", "Gamma", "standard_gamma", "standard_gamma_grad",
           "dirichlet_grad", "sample_dirichlet"]


def _numpy_draws(dtype):
    """Standard normal and uniform sources drawing from fusegrad's default generator."""
    def normal(n):
        return F.randn(n, dtype=F.float64).numpy()

    def uniform(n):
        return F.rand(n, dtype=F.float64).numpy()
    return normal, uniform


def standard_gamma_grad(x, alpha):
    """d x / d alpha of Gamma(alpha, 1) draws `x` (PyTorch's `_standard_gamma_grad(alpha, x)`
    takes the arguments the other way round)."""
    return F.from_numpy(_special.standard_gamma_grad(x.detach().numpy(),
                                                        alpha.detach().numpy())).to(x.dtype)


def dirichlet_grad(x, concentration, total):
    """PyTorch's `_dirichlet_grad`: the per-component implicit-reparameterisation factor."""
    grad = _special.dirichlet_grad(x.detach().numpy(), concentration.detach().numpy(),
                                   total.detach().numpy())
    return F.from_numpy(grad).to(x.dtype)


def _gamma_draws(alpha):
    """Gamma(alpha, 1) draws as a tensor of alpha's dtype, clamped to the smallest normal so
    later logarithms stay finite."""
    normal, uniform = _numpy_draws(alpha.dtype)
    draws = _special.sample_standard_gamma(alpha.detach().numpy(), normal, uniform)
    tiny = F.finfo(alpha.dtype).tiny
    return F.from_numpy(np.maximum(draws, tiny)).to(alpha.dtype)


class StandardGamma(F.autograd.Function):
    """Gamma(alpha, 1) draws whose gradient follows the draw at fixed CDF value."""

    @staticmethod
    def forward(ctx, alpha):
        x = _gamma_draws(alpha)
        ctx.save_for_backward(x, alpha)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        x, alpha = ctx.saved_tensors
        return grad_output * standard_gamma_grad(x, alpha)


def standard_gamma(alpha):
    """Draws from Gamma(alpha, 1), differentiable with respect to `alpha`."""
    return StandardGamma.apply(alpha)


def sample_dirichlet(concentration):
    """Dirichlet draws (normalised Gamma draws) without gradient."""
    g = _gamma_draws(concentration)
    return g / g.sum(-1, keepdim=True)


class _Dirichlet(F.autograd.Function):
    """Dirichlet draws with PyTorch's implicit-reparameterisation gradient."""

    @staticmethod
    def forward(ctx, concentration):
        x = sample_dirichlet(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        x, concentration = ctx.saved_tensors
        total = concentration.sum(-1, True).expand_as(concentration)
        factor = dirichlet_grad(x, concentration, total)
        # The components share the simplex: raising one lowers the others in proportion.
        return factor * (grad_output - (x * grad_output).sum(-1, True))


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density proportional to x^(c - 1) exp(-rate x)."""

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

    def entropy(self):
        c = self.concentration
        return c - F.log(self.rate) + F.lgamma(c) + (1.0 - c) * F.digamma(c)


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration) over the simplex of the last dimension's size."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `concentration` expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(Dirichlet, shape, _instance,
                              concentration=self.concentration.expand(shape + self.event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _Dirichlet.apply(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (F.xlogy(c - 1.0, value).sum(-1) + F.lgamma(c.sum(-1))
                - F.lgamma(c).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        c = self.concentration
        below = (c - 1).clamp(min=0.0)
        mode = below / below.sum(-1, True)
        # Where every concentration is below one, the density peaks at the largest one.
        all_low = (c < 1).all(dim=-1)
        corner = F.nn.functional.one_hot(c.argmax(-1), c.shape[-1]).to(mode.dtype)
        return F.where(all_low.unsqueeze(-1), corner, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return (F.lgamma(c).sum(-1) - F.lgamma(a0) - (k - a0) * F.digamma(a0)
                - ((c - 1.0) * F.digamma(c)).sum(-1))


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on [0, 1], the two-component Dirichlet's first."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None) -> None:
        if isinstance(concentration1, Number) and isinstance(concentration0, Number):
            both = F.tensor([float(concentration1), float(concentration0)])
        else:
            c1, c0 = broadcast_all(concentration1, concentration0)
            both = F.stack([c1, c0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy whose Dirichlet is expanded to `batch_shape`."""
        return self._expanded(Beta, batch_shape, _instance,
                              _dirichlet=self._dirichlet.expand(batch_shape))

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(F.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
