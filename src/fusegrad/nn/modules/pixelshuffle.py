"""PixelShuffle and PixelUnshuffle."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import tensor_arguments
from .module import Module


class PixelShuffle(Module):
    """(*, C r^2, H, W) to (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """pixel_shuffle(input)."""
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) to (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """pixel_unshuffle(input)."""
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(PixelShuffle, "pixel_shuffle", "input")
tensor_arguments(PixelUnshuffle, "pixel_unshuffle", "input")
