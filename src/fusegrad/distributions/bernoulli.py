"""Bernoulli(probs or logits)."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .utils import BinaryParams, broadcast_all

_ONE_OF = "Either `probs` or `logits` must be specified, but not both."

__all__ = ['Bernoulli']


class Bernoulli(BinaryParams, ExponentialFamily):
    """Bernoulli(probs or logits): 1 with probability `probs`, else 0."""

    _mean_carrier_measure = 0
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError(_ONE_OF)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        shape = F.Size() if is_scalar else self._param.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with the given parameter expanded to `batch_shape`."""
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = F.Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with F.no_grad():
            return F.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = F.broadcast_tensors(self.logits, value)
        return -F.nn.functional.binary_cross_entropy_with_logits(logits, value,
                                                                 reduction="none")

    def entropy(self):
        return F.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                                reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = F.arange(2, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values

    # The exponential-family form (natural parameters, log-normaliser), which the
    # Bregman-divergence KL between two members of the family uses.
    @property
    def _natural_params(self):
        return (F.logit(self.probs),)

    def _log_normalizer(self, x):
        return F.log1p(F.exp(x))
