"""Helpers shared by the distributions: broadcasting parameters, probs/logits conversion,
cached properties and the standard noise that reparameterised samples transform."""

from __future__ import annotations

import numbers
from functools import update_wrapper

import fusegrad as F

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits", "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape; numbers become tensors of the tensors'
    dtype (the default dtype when there are none)."""
    if not all(isinstance(v, (F.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, F.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, F.Tensor)), None)
        dtype = like.dtype if like is not None else F.get_default_dtype()
        values = [v if isinstance(v, F.Tensor) else F.tensor(v, dtype=dtype) for v in values]
    # broadcast_tensors gives PyTorch's mismatch message and returns a tensor that already
    # has the common shape itself (no expand node).
    return tuple(F.broadcast_tensors(*values))


def _standard_normal(shape, dtype, device=None):
    """N(0, 1) noise of `shape` (the base draw of every Gaussian rsample)."""
    return F.randn(shape, dtype=dtype)


def _standard_uniform(shape, dtype, device=None):
    """U[0, 1) noise of `shape`."""
    return F.rand(shape, dtype=dtype)


def _sum_rightmost(value, dim: int):
    """Sum over the `dim` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1)


def clamp_probs(probs):
    """Clamp probabilities into [eps, 1 - eps] of their dtype."""
    eps = F.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary: bool = False):
    """Sigmoid of binary logits, softmax of categorical ones."""
    if is_binary:
        return F.sigmoid(logits)
    return F.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary: bool = False):
    """log(p) for categorical, log(p) - log1p(-p) for binary probabilities (clamped first)."""
    ps = clamp_probs(probs)
    if is_binary:
        return F.log(ps) - F.log1p(-ps)
    return F.log(ps)


class lazy_property:  # noqa: N801  (PyTorch's name)
    """A property computed once per instance, then stored on it (under grad mode)."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with F.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower triangle (from diagonal `diag`) of the last two dims, flattened row-major."""
    n = mat.shape[-1]
    rows, cols = F.tril_indices(n, n, offset=diag)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec, diag: int = 0):
    """Inverse of `tril_matrix_to_vec`."""
    m = vec.shape[-1]
    n = int(round((-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1))
                   ** 0.5) / 2))
    mat = F.zeros(vec.shape[:-1] + (n, n), dtype=vec.dtype)
    rows, cols = F.tril_indices(n, n, offset=diag)
    mat[..., rows, cols] = vec
    return mat


_ONE_OF = "Either `probs` or `logits` must be specified, but not both."


def count_and_probs(dist, total_count, probs, logits) -> None:
    """Set `dist.total_count` and its `probs` or `logits` (exactly one given), broadcast
    together, the count in the parameter's dtype, and `_param` (Binomial, NegativeBinomial)."""
    if (probs is None) == (logits is None):
        raise ValueError(_ONE_OF)
    if probs is not None:
        dist.total_count, dist.probs = broadcast_all(total_count, probs)
        dist.total_count = dist.total_count.type_as(dist.probs)
    else:
        dist.total_count, dist.logits = broadcast_all(total_count, logits)
        dist.total_count = dist.total_count.type_as(dist.logits)
    dist._param = dist.probs if probs is not None else dist.logits


def expanded_count_and_probs(dist, cls, batch_shape, _instance):
    """`dist.expand(batch_shape)` for a distribution set by `count_and_probs`: the count and
    the parameter given expanded."""
    shape = F.Size(batch_shape)
    params = {"total_count": dist.total_count.expand(shape)}
    for name in ("probs", "logits"):
        if name in dist.__dict__:
            params[name] = params["_param"] = getattr(dist, name).expand(shape)
    return dist._expanded(cls, shape, _instance, **params)


class BinaryProbs:
    """`probs` and `logits` of a distribution given one of them, the other derived on first
    read, as a binary probability's log-odds (Geometric, and the `BinaryParams` ones)."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)


class BinaryParams(BinaryProbs):
    """`BinaryProbs` and `param_shape`, the given one's shape: Bernoulli, Binomial,
    NegativeBinomial, LogitRelaxedBernoulli. Its `__init__` sets one of the two and
    `_param`."""

    @property
    def param_shape(self):
        return self._param.size()
