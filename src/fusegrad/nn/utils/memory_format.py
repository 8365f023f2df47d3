"""Convolution weights converted to a memory format in place (`torch.nn.utils.memory_format`):
with channels_last weights, a channels_last input runs convolutions in that layout."""

from __future__ import annotations

from ..modules.conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module


def _convert_weights(module: Module, kinds: tuple, memory_format) -> Module:
    if isinstance(module, kinds):
        weight = module.weight.detach().clone(memory_format=memory_format)
        # resized in place to its own size: the strides are those of `memory_format`
        module.weight.data = weight.resize_(weight.size(), memory_format=memory_format)
    for child in module.children():
        _convert_weights(child, kinds, memory_format)
    return module


def convert_conv2d_weight_memory_format(module: Module, memory_format) -> Module:
    """The weights of every Conv2d and ConvTranspose2d in `module` (itself included) in
    `memory_format` (`torch.channels_last` or `torch.contiguous_format`); returns `module`."""
    return _convert_weights(module, (Conv2d, ConvTranspose2d), memory_format)


def convert_conv3d_weight_memory_format(module: Module, memory_format) -> Module:
    """The weights of every Conv3d and ConvTranspose3d in `module` (itself included) in
    `memory_format` (`torch.channels_last_3d` or `torch.contiguous_format`); returns
    `module`."""
    return _convert_weights(module, (Conv3d, ConvTranspose3d), memory_format)


__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]
