"""CosineSimilarity and PairwiseDistance."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import tensor_arguments
from .module import Module


class CosineSimilarity(Module):
    """cos of the angle between x1 and x2 along `dim`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """cosine_similarity(x1, x2)."""
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p over the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """pairwise_distance(x1, x2)."""
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(CosineSimilarity, "cosine_similarity", "x1", "x2")
tensor_arguments(PairwiseDistance, "pairwise_distance", "x1", "x2")
