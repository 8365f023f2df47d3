"""ExponentialFamily: the base class PyTorch gives its exponential-family distributions."""

from __future__ import annotations

import fusegrad as F

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base of the exponential-family distributions (Normal, Gamma, Bernoulli, ...):
    p(x; theta) = exp(<t(x), theta> - F(theta) + k(x)). Subclasses that provide
    `_natural_params` (theta), `_log_normalizer` (F) and `_mean_carrier_measure` (E[k(X)])
    get `entropy` and the Bregman-divergence KL from them."""

    @property
    def _natural_params(self):
        """The natural parameters theta, as a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """The log-normaliser F(theta), differentiable in the natural parameters."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E[k(X)], the expected carrier measure."""
        raise NotImplementedError

    def entropy(self):
        """H = F(theta) - <theta, grad F(theta)> - E[k(X)], by autograd through F."""
        result = -self._mean_carrier_measure
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_norm = self._log_normalizer(*params)
        grads = F.autograd.grad(log_norm.sum(), params, create_graph=True)
        result = result + log_norm
        for param, grad in zip(params, grads):
            # Reduce everything but the batch dimensions (a batch-shaped parameter such as
            # Wishart's df then contributes per batch element, as in PyTorch).
            result = result - (param * grad).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
