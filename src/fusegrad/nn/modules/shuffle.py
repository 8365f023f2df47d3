"""PixelShuffle, PixelUnshuffle, ChannelShuffle, Fold, Unfold, AdaptiveMaxPool1d/2d and the
channel-wise dropouts (Dropout1d/2d/3d): thin modules over `nn.functional`."""

from __future__ import annotations

from .. import functional as F
from .misc import Dropout
from .module import Module


class PixelShuffle(Module):
    """(*, C r^2, H, W) to (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        """pixel_shuffle(input)."""
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) to (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        """pixel_unshuffle(input)."""
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of `groups` groups."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input):
        """channel_shuffle(input)."""
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Fold(Module):
    """Sum sliding-block columns back into an image."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        """fold(input)."""
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Sliding local blocks of an image as columns."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        """unfold(input)."""
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, L) input."""

    def forward(self, input):
        """adaptive_max_pool1d(input)."""
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, H, W) input."""

    def forward(self, input):
        """adaptive_max_pool2d(input)."""
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) input while training."""

    def forward(self, input):
        """dropout1d(input)."""
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) input while training."""

    def forward(self, input):
        """dropout2d(input)."""
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Zero whole channels of (N, C, D, H, W) input while training."""

    def forward(self, input):
        """dropout3d(input)."""
        return F.dropout3d(input, self.p, self.training, self.inplace)
