"""PyTorch's FLOP formulas (`utils.flop_counter`), which the registry entries of the matrix
products and convolutions name as their `flops` field: a multiply and an add per product
term, from the shapes of the call's arguments and result."""

from __future__ import annotations

import math


def _shape(a) -> tuple:
    return tuple(a.shape) if hasattr(a, "shape") else ()


def mm_flop(a_shape: tuple, b_shape: tuple) -> int:
    """2 * M * K * N for (M, K) @ (K, N)."""
    m, k = a_shape
    return 2 * m * k * b_shape[-1]


def bmm_flop(a_shape: tuple, b_shape: tuple) -> int:
    """2 * B * M * K * N for (B, M, K) @ (B, K, N)."""
    batch, m, k = a_shape
    return 2 * batch * m * k * b_shape[-1]


def conv_flop_count(x_shape: tuple, w_shape: tuple, out_shape: tuple,
                    transposed: bool = False) -> int:
    """2 * (the products of a convolution): each output (or, transposed, input) position of
    each sample, each output channel, each weight element of a group."""
    batch = x_shape[0]
    spatial = x_shape[2:] if transposed else out_shape[2:]
    c_out, c_in, *kernel = w_shape
    return 2 * batch * c_out * c_in * math.prod(spatial) * math.prod(kernel)


def _swap01(shape: tuple) -> tuple:
    return (shape[1], shape[0], *shape[2:])


def conv_backward_flop(grad_shape: tuple, x_shape: tuple, w_shape: tuple, transposed: bool,
                       output_mask) -> int:
    """A convolution's backward: the input gradient (a convolution of the output gradient
    with the weight) and the weight gradient (of the input with the output gradient), as
    `output_mask` asks for them."""
    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_shape, w_shape, x_shape, not transposed)
    if output_mask[1]:  # (transposed, the input and the output gradient change roles)
        a, b = (grad_shape, x_shape) if transposed else (x_shape, grad_shape)
        flops += conv_flop_count(_swap01(a), _swap01(b), _swap01(w_shape), False)
    return flops


def product_of(first: int, batched: bool):
    """The `flops` of a (batched) matrix product of arguments `first` and `first + 1`."""
    formula = bmm_flop if batched else mm_flop

    def flops(args: tuple, out) -> int:
        return formula(_shape(args[first]), _shape(args[first + 1]))

    return flops


def convolution_call(args: tuple, out) -> int:
    """`convolution(input, weight, bias, stride, padding, dilation, transposed, ...)`."""
    return conv_flop_count(_shape(args[0]), _shape(args[1]), _shape(out),
                           bool(args[6]) if len(args) > 6 else False)


def convolution_backward_call(args: tuple, out) -> int:
    """`convolution_backward(grad, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)`."""
    mask = args[10] if len(args) > 10 else (True, True, True)
    return conv_backward_flop(_shape(args[0]), _shape(args[1]), _shape(args[2]),
                              bool(args[7]), tuple(mask))
