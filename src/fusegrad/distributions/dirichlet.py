"""Dirichlet(concentration), with PyTorch's implicit-reparameterisation gradient."""

from __future__ import annotations

import fusegrad as F

from .._dispatch import call
from ..ops import random as R
from . import constraints
from .exp_family import ExponentialFamily

__all__ = ['Dirichlet', 'dirichlet_grad', 'sample_dirichlet']


def dirichlet_grad(x, concentration, total):
    """PyTorch's `_dirichlet_grad`: the per-component implicit-reparameterisation factor."""
    return call(R.dirichlet_grad, x, concentration, total)


def sample_dirichlet(concentration):
    """Dirichlet draws without gradient, as PyTorch's CPU kernel makes them (PyTorch's
    `_sample_dirichlet`: an op, so that compiled programs trace it)."""
    return call(R.sample_dirichlet, concentration, None)


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
        # Where every concentration is below one, PyTorch writes a one-hot vector at the
        # argmax of that row of `mode`, which is all NaN (0 / 0), so at index 0; kept, with
        # its index assignment (node IndexPutBackward0), so values and graph agree.
        all_low = (c < 1).all(dim=-1)
        mode[all_low] = F.nn.functional.one_hot(mode[all_low].argmax(dim=-1),
                                                below.shape[-1]).to(mode)
        return mode

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

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - F.lgamma(x.sum(-1))
