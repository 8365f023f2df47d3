"""StudentT(df, loc, scale): a Normal whose precision is Gamma distributed."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """StudentT(df, loc=0, scale=1): Student's t with `df` degrees of freedom."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with every parameter expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(StudentT, shape, _instance, df=self.df.expand(shape),
                              loc=self.loc.expand(shape), scale=self.scale.expand(shape),
                              _chi2=self._chi2.expand(shape))

    @property
    def mean(self):
        # Undefined for df <= 1; written by index assignment, as PyTorch (IndexPutBackward0).
        m = self.loc.clone(memory_format=F.contiguous_format)
        m[self.df <= 1] = math.nan
        return m

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # scale^2 df / (df - 2) for df > 2, infinite for 1 < df <= 2, undefined below.
        df = self.df
        m = df.clone(memory_format=F.contiguous_format)
        m[df > 2] = self.scale[df > 2].pow(2) * df[df > 2] / (df[df > 2] - 2)
        m[(df <= 2) & (df > 1)] = math.inf
        m[df <= 1] = math.nan
        return m

    def rsample(self, sample_shape=()):
        # X / sqrt(V / df) with X standard normal and V chi-squared.
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype)
        v = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * F.rsqrt(v / self.df))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        log_norm = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi)
                    + F.lgamma(0.5 * df) - F.lgamma(0.5 * (df + 1.0)))
        return -0.5 * (df + 1.0) * F.log1p(y.pow(2) / df) - log_norm

    def entropy(self):
        df = self.df
        log_beta = F.lgamma(0.5 * df) + math.lgamma(0.5) - F.lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (F.digamma(0.5 * (df + 1))
                                                      - F.digamma(0.5 * df))
                + 0.5 * df.log() + log_beta)
