"""ChannelShuffle."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import tensor_arguments
from .module import Module


class ChannelShuffle(Module):
    """Interleave the channels of `groups` groups."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        """channel_shuffle(input)."""
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(ChannelShuffle, "channel_shuffle", "input")
