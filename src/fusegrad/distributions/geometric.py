"""Geometric(probs or logits): failures before the first success."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .utils import BinaryProbs, broadcast_all

__all__ = ["Geometric"]

_ONE_OF = "Either `probs` or `logits` must be specified, but not both."


class Geometric(BinaryProbs, Distribution):
    """Geometric(probs or logits): P(k) = (1 - p)^k p on k = 0, 1, 2, ..."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError(_ONE_OF)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        shape = F.Size() if isinstance(given, Number) else given.size()
        super().__init__(shape, validate_args=validate_args)
        # The unit interval admits 0, which has no geometric law: PyTorch checks p > 0 too.
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{value.detach()[~valid]}")

    def expand(self, batch_shape, _instance=None):
        """A copy with the given parameter expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        params = {n: getattr(self, n).expand(shape) for n in ("probs", "logits")
                  if n in self.__dict__}
        return self._expanded(Geometric, shape, _instance, **params)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return F.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = F.finfo(self.probs.dtype).tiny
        with F.no_grad():
            # Inversion: floor(log u / log(1 - p)) for u uniform on [tiny, 1).
            u = self.probs.new_empty(shape).uniform_(tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 puts all mass on 0, where 0 * log(0) must count as 0.
        probs = F.where((probs == 1) & (value == 0), F.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        bce = F.nn.functional.binary_cross_entropy_with_logits
        return bce(self.logits, self.probs, reduction="none") / self.probs
