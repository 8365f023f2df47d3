"""Dropout layers: elementwise (Dropout, AlphaDropout) and channel-wise (Dropout1d/2d/3d,
FeatureAlphaDropout)."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import inplace_op, tensor_arguments
from .module import Module


class _DropoutNd(Module):
    """The probability and `inplace` flag of the dropout layers (the base PyTorch gives
    them)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero elements with probability p while training; identity in eval mode."""

    def forward(self, input: Tensor) -> Tensor:
        """Dropout of `input` (training mode only)."""
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) input while training."""

    def forward(self, input: Tensor) -> Tensor:
        """dropout1d(input)."""
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) input while training."""

    def forward(self, input: Tensor) -> Tensor:
        """dropout2d(input)."""
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) input while training."""

    def forward(self, input: Tensor) -> Tensor:
        """dropout3d(input)."""
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (keeps zero mean and unit variance) while training."""

    def forward(self, input: Tensor) -> Tensor:
        """alpha_dropout(input)."""
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels while training."""

    def forward(self, input: Tensor) -> Tensor:
        """feature_alpha_dropout(input)."""
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(Dropout, inplace_op("dropout"), "input")
tensor_arguments(AlphaDropout, "alpha_dropout", "input")
tensor_arguments(FeatureAlphaDropout, "feature_alpha_dropout", "input")
