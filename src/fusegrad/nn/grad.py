"""Gradients of convolutions with respect to their input or weight (`torch.nn.grad`), each
one `convolution_backward` op (differentiable again), as PyTorch computes them."""

from __future__ import annotations

from .._tensor import Tensor
from ..ops import aten
from .modules.utils import _pair, _single, _triple


def _conv_grad(grad_output: Tensor, input: Tensor, weight: Tensor, stride, padding,
               dilation, groups: int, expand, which: int) -> Tensor:
    """Output `which` (0: input, 1: weight) of `convolution_backward`; the other operand
    gives only its shape, so a placeholder expanded from one element stands for it."""
    mask = [which == 0, which == 1, False]
    result = aten.convolution_backward.default(
        grad_output, input, weight, None, list(expand(stride)), list(expand(padding)),
        list(expand(dilation)), False, [0] * len(expand(0)), groups, mask)
    return result[which]


def _placeholder(like: Tensor, size) -> Tensor:
    return like.new_empty(1).expand(tuple(size))


def conv1d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv1d` with respect to an input of size `input_size`."""
    return _conv_grad(grad_output, _placeholder(grad_output, input_size), weight, stride,
                      padding, dilation, groups, _single, 0)


def conv1d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv1d` with respect to a weight of size `weight_size`."""
    return _conv_grad(grad_output, input, _placeholder(grad_output, weight_size), stride,
                      padding, dilation, groups, _single, 1)


def conv2d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv2d` with respect to an input of size `input_size`."""
    return _conv_grad(grad_output, _placeholder(grad_output, input_size), weight, stride,
                      padding, dilation, groups, _pair, 0)


def conv2d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv2d` with respect to a weight of size `weight_size`."""
    return _conv_grad(grad_output, input, _placeholder(grad_output, weight_size), stride,
                      padding, dilation, groups, _pair, 1)


def conv3d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv3d` with respect to an input of size `input_size`."""
    return _conv_grad(grad_output, _placeholder(grad_output, input_size), weight, stride,
                      padding, dilation, groups, _triple, 0)


def conv3d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:
    """The gradient of `conv3d` with respect to a weight of size `weight_size`."""
    return _conv_grad(grad_output, input, _placeholder(grad_output, weight_size), stride,
                      padding, dilation, groups, _triple, 1)
