"""Wishart(df, covariance_matrix | precision_matrix | scale_tril): the law of sum_i x_i x_i^T
for df Gaussian vectors x_i ~ N(0, covariance_matrix) (df may be fractional)."""

from __future__ import annotations

import math
import warnings
from numbers import Number

import fusegrad as F

from . import constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import scale_tril_of
from .utils import lazy_property

__all__ = ["Wishart"]


def _mvdigamma(x, p: int):
    """The derivative of the multivariate log-gamma: sum_{i<p} digamma(x - i/2)."""
    half_steps = F.arange(p, dtype=x.dtype) / 2
    return F.digamma(x.unsqueeze(-1) - half_steps).sum(-1)


def _clamp_above_eps(x):
    # A zero on the Bartlett diagonal would make the sample singular.
    return x.clamp(min=F.finfo(x.dtype).eps)


class Wishart(ExponentialFamily):
    """Wishart over p x p positive-definite matrices, with df > p - 1 degrees of freedom;
    rsample uses the Bartlett decomposition, so it is differentiable in df and the scale."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None) -> None:
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            # PyTorch asserts this, so the error type is AssertionError.
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = next(m for m in (scale_tril, covariance_matrix, precision_matrix)
                     if m is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = F.Size(param.shape[:-2])
            self.df = F.tensor(df, dtype=param.dtype)
        else:
            batch_shape = F.broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        event_shape = F.Size(param.shape[-2:])
        if self.df.le(event_shape[-1] - 1).any():
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = "
                             f"{event_shape[-1] - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        if self.df.lt(event_shape[-1]).any():
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._unbroadcasted_scale_tril = scale_tril_of(scale_tril, covariance_matrix,
                                                       precision_matrix)
        # Bartlett: the squared diagonal of the standard factor is Chi2(df - i), i < p.
        p = event_shape[-1]
        steps = F.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        self._dist_chi2 = Chi2(df=self.df.unsqueeze(-1) - steps.expand(batch_shape + (-1,)))

    @property
    def arg_constraints(self):
        """The matrix constraints plus df > p - 1, which depends on the event size."""
        p = self._event_shape[-1]
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(p - 1)}

    def expand(self, batch_shape, _instance=None):
        """A copy with df and the scale expanded to `batch_shape`."""
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = F.Size(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        new._dist_chi2 = self._dist_chi2.expand(batch_shape + self.event_shape[-1:])
        ExponentialFamily.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        eye = F.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return F.cholesky_solve(eye, self._unbroadcasted_scale_tril).expand(
            self._batch_shape + self._event_shape)

    def _df_matrix(self):
        return self.df.view(self._batch_shape + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self._event_shape[-1] - 1
        factor = F.where(factor <= 0, F.nan, factor)
        return factor.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag = V.diagonal(dim1=-2, dim2=-1)
        # Var(W_ij) = df (V_ij^2 + V_ii V_jj).
        return self._df_matrix() * (V.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        noise = _clamp_above_eps(self._dist_chi2.rsample(sample_shape).sqrt()).diag_embed(
            dim1=-2, dim2=-1)
        rows, cols = F.tril_indices(p, p, offset=-1)
        below = F.zeros(self._extended_shape(sample_shape), dtype=noise.dtype)
        below[..., rows, cols] = F.randn(noise.shape[:-2] + (rows.numel(),),
                                         dtype=noise.dtype)
        chol = self._unbroadcasted_scale_tril @ (noise + below)
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett-decomposition samples, with PyTorch's correction loop: it flags the draws
        that pass the support check as "singular" (PyTorch 2.13 omits the negation on the
        first check), warns, and redraws those until the redraws fail the check, at most
        `max_try_correction` times (default 10). Reproduced so seeded draws agree."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = F.Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        flagged = self._per_sample(self.support.check(sample))
        if flagged.any():
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sampling(flagged[flagged].shape)
                # PyTorch indexes with `flagged` itself, then updates it in place, so its
                # backward fails on the saved mask's version; a copy keeps the gradient.
                sample[flagged.clone()] = redraw
                still = self._per_sample(~self.support.check(redraw))
                flagged[flagged.clone()] = still
                if not flagged.any():
                    break
        return sample

    def _per_sample(self, ok):
        # One flag per sample: any batch member decides for the whole sample.
        if self._batch_shape:
            return ok.amax([-(i + 1) for i in range(len(self._batch_shape))])
        return ok

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half_logdet_cov = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = F.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * math.log(2) / 2 + half_logdet_cov)
                - F.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * F.linalg.slogdet(value).logabsdet
                - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_logdet_cov = self._unbroadcasted_scale_tril.diagonal(
            dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * math.log(2) / 2 + half_logdet_cov)
                + F.mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
                + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -0.5 * self.precision_matrix, 0.5 * (self.df - p - 1)

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        half_df = y + 0.5 * (p + 1)
        return (half_df * (-F.linalg.slogdet(-2 * x).logabsdet + p * math.log(2))
                + F.mvlgamma(half_df, p))
