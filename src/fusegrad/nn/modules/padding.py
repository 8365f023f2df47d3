"""Padding layers: constant (and zero), reflection, replication and circular, for 1 to 3
spatial dims; each one `F.pad` call."""

import numbers

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import tensor_arguments
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


def _padding(padding, n: int) -> tuple:
    """An int repeated to the n amounts F.pad takes; a sequence kept as given (as PyTorch)."""
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * n
    return tuple(padding)


class _PadNd(Module):
    """A layer that pads its input with `F.pad(input, padding, mode)`."""

    __constants__ = ["padding"]
    mode = "constant"
    spatial = 1

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _padding(padding, 2 * self.spatial)

    def forward(self, input: Tensor) -> Tensor:
        """The padded input."""
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Pad with a constant `value`."""

    __constants__ = ["padding", "value"]

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        """The input padded with `value`."""
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with a constant: padding (left, right) or one int for both."""

    spatial = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with a constant: (left, right, top, bottom) or one int."""

    spatial = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with a constant: (left, right, top, bottom, front, back)."""

    spatial = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last 2 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last 3 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dimension with its reflection (the edge value not repeated)."""

    spatial = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Pad the last 2 dims with their reflection."""

    spatial = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Pad the last 3 dims with their reflection."""

    spatial = 3


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dimension by repeating its edge values."""

    spatial = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Pad the last 2 dims by repeating their edge values."""

    spatial = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Pad the last 3 dims by repeating their edge values."""

    spatial = 3


class _CircularPadNd(_PadNd):
    mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        """The input padded with its own opposite end (periodic padding)."""
        # The layer checks the rank itself, with its own message, before F.pad.
        lo = self.spatial + 1
        if input.dim() not in (lo, lo + 1):
            raise ValueError(f"expected {lo}D or {lo + 1}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dimension periodically."""

    spatial = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last 2 dims periodically."""

    spatial = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last 3 dims periodically."""

    spatial = 3


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(_PadNd, "pad", "input")
tensor_arguments(_ConstantPadNd, "pad", "input")
