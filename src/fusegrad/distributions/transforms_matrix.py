"""Transforms onto structured supports: the simplex (StickBreakingTransform), Cholesky
factors (LowerCholeskyTransform, CorrCholeskyTransform), positive-definite matrices
(PositiveDefiniteTransform) and [0, 1] through a distribution's CDF
(CumulativeDistributionTransform)."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .transforms import Transform, _clipped_sigmoid
from .utils import tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CorrCholeskyTransform", "CumulativeDistributionTransform",
           "LowerCholeskyTransform", "PositiveDefiniteTransform", "StickBreakingTransform"]

_pad = F.nn.functional.pad


class StickBreakingTransform(Transform):
    """R^(K-1) to the K-simplex by stick breaking: entry i takes a sigmoid fraction of what
    the earlier entries left. Offsets make x = 0 map to the uniform point."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    @staticmethod
    def _log_offset(n: int, like):
        # log(K - i) for i = 1 .. K - 1, with K = n + 1.
        return (n + 1 - like.new_ones(n).cumsum(-1)).log()

    def _call(self, x):
        z = _clipped_sigmoid(x - self._log_offset(x.shape[-1], x))
        remaining = (1 - z).cumprod(-1)
        return _pad(z, [0, 1], value=1) * _pad(remaining, [1, 0], value=1)

    def _inverse(self, y):
        head = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(head.shape[-1]).cumsum(-1)
        left = (1 - head.cumsum(-1)).clamp(min=F.finfo(y.dtype).tiny)
        return head.log() - left.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        x = x - self._log_offset(x.shape[-1], x)
        return (-x + F.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape[:-1] + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal:
    keep the strict lower triangle, exponentiate the diagonal."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones, L L^T with L from
    LowerCholeskyTransform."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(F.linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """A vector of D(D-1)/2 reals to the Cholesky factor of a D x D correlation matrix:
    tanh maps each to a partial correlation in (-1, 1), and each row is then completed
    by stick breaking so it has unit norm."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = F.finfo(x.dtype).eps
        x = F.tanh(x).clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        # Each row's entries take their share of the norm the earlier entries left.
        left = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + F.eye(r.shape[-1], dtype=r.dtype)
        return r * _pad(left[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        left = 1 - F.cumsum(y * y, dim=-1)
        left_before = _pad(left[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left_before, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        left = 1 - (y * y).cumsum(dim=-1)
        stick = 0.5 * tril_matrix_to_vec(left, diag=-2).log().sum(-1)
        # log(1 - tanh(x)^2), written to stay finite for large |x|.
        tanh_term = -2 * (x + F.nn.functional.softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick + tanh_term

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return shape[:-1] + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return shape[:-2] + (d * (d - 1) // 2,)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), onto [0, 1]; its Jacobian is the density."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)


# PyTorch defines these in `distributions.transforms`; they report that module as theirs
# (for pickling and introspection), where they are re-exported.
for _name in __all__:
    globals()[_name].__module__ = "fusegrad.distributions.transforms"
del _name
