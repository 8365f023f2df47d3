"""FisherSnedecor(df1, df2): the F distribution, a ratio of scaled chi-squared draws."""

from __future__ import annotations

import math
from numbers import Number

import fusegrad as F

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """FisherSnedecor(df1, df2): (V1 / df1) / (V2 / df2) for chi-squared V1, V2."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        # Gamma(df / 2, df) is chi-squared(df) / (2 df): their ratio is the F variate.
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        both_numbers = isinstance(df1, Number) and isinstance(df2, Number)
        shape = F.Size() if both_numbers else self.df1.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with both parameters (and their Gammas) expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(FisherSnedecor, shape, _instance, df1=self.df1.expand(shape),
                              df2=self.df2.expand(shape), _gamma1=self._gamma1.expand(shape),
                              _gamma2=self._gamma2.expand(shape))

    @property
    def mean(self):
        df2 = F.where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        # A masked write, as PyTorch: the result's grad_fn is IndexPutBackward0.
        mode[self.df1 <= 2] = math.nan
        return mode

    @property
    def variance(self):
        df1 = self.df1
        df2 = F.where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = F.finfo(x2.dtype).tiny
        # In place, as PyTorch: the sample's grad_fn is the clamp's (ClampBackward1).
        x2.clamp_(min=tiny)
        y = x1 / x2
        y.clamp_(min=tiny)
        return y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        h1, h2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = (h1 + h2).lgamma() - h1.lgamma() - h2.lgamma()
        t2 = h1 * ratio.log() + (h1 - 1) * F.log(value)
        t3 = (h1 + h2) * F.log1p(ratio * value)
        return t1 + t2 - t3
