"""RelaxedBernoulli (the binary Concrete / Gumbel-softmax law) and its logit-space base."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import (
    BinaryParams,
    broadcast_all,
    clamp_probs,
)

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]

_ONE_OF = "Either `probs` or `logits` must be specified, but not both."


class LogitRelaxedBernoulli(BinaryParams, Distribution):
    """The logit of a RelaxedBernoulli draw: (logistic noise + logits) / temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        self.temperature = temperature
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
        shape = F.Size(batch_shape)
        params = {"temperature": self.temperature}
        for name in ("probs", "logits"):
            if name in self.__dict__:
                params[name] = params["_param"] = getattr(self, name).expand(shape)
        return self._expanded(LogitRelaxedBernoulli, shape, _instance, **params)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(F.rand(shape, dtype=probs.dtype))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """RelaxedBernoulli(temperature, probs or logits): a [0, 1] relaxation of a Bernoulli,
    the sigmoid of a LogitRelaxedBernoulli draw."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy whose base is expanded to `batch_shape`."""
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
