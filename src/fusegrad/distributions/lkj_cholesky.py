"""LKJCholesky(dim, concentration): the LKJ distribution over correlation matrices,
expressed on their lower Cholesky factors."""

from __future__ import annotations

import math

import fusegrad as F

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ(concentration) law of a `dim` x `dim` correlation matrix, as a distribution
    over its lower Cholesky factor L (so L L^T has density proportional to
    det(L L^T)^(concentration - 1)). Sampling follows the onion method."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None) -> None:
        if dim < 2:
            raise ValueError("Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = F.Size((dim, dim))
        # Onion method: row i (i >= 1) has squared off-diagonal norm y_i ~ Beta(i/2,
        # c + (dim - 2)/2 - (i - 1)/2); row 0 gets a dummy Beta that is never used.
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = F.arange(dim - 1, dtype=self.concentration.dtype)
        offset = F.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with `concentration` expanded to `batch_shape`."""
        batch_shape = F.Size(batch_shape)
        return self._expanded(LKJCholesky, batch_shape, _instance, dim=self.dim,
                              concentration=self.concentration.expand(batch_shape),
                              _beta=self._beta.expand(batch_shape + (self.dim,)))

    def sample(self, sample_shape=()):
        """Draw Cholesky factors by the onion method: each row is a uniform direction in
        the strictly lower part scaled to norm sqrt(y), completed by the diagonal."""
        with F.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            normal = F.randn(self._extended_shape(sample_shape), dtype=y.dtype).tril(-1)
            # Row 0 is all zeros; its norm is replaced by 1 to avoid 0 / 0.
            norms = normal.norm(dim=-1, keepdim=True)
            norms = F.where(norms == 0, F.ones_like(norms), norms)
            w = y.sqrt() * (normal / norms)
            diag = (1 - w.pow(2).sum(-1)).clamp(min=F.finfo(w.dtype).tiny).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value):
        """log density of the Cholesky factor: sum_i (dim - i + 2(c - 1)) log L_ii over
        rows i >= 2 (1-based), minus the LKJ normaliser."""
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = F.arange(2, self.dim + 1, dtype=diag.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = F.lgamma(alpha) * dm1
        numerator = F.mvlgamma(alpha - 0.5, dm1)
        normalizer = 0.5 * dm1 * math.log(math.pi) + numerator - denominator
        return unnormalized - normalizer
