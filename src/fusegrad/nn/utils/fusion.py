"""Folding an eval-mode batch norm into the convolution or linear layer before it: the layer
computes `bn(layer(x))` by itself, with weight and bias scaled by the normalisation."""

from __future__ import annotations

import copy

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter


def _check_eval(layer, bn) -> None:
    assert not (layer.training or bn.training), "Fusion only for eval!"


def _check_running(bn) -> None:
    assert bn.running_mean is not None and bn.running_var is not None, (
        "bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of `conv` (eval mode, as `bn`) that computes `bn(conv(x))`; `transpose` for a
    transposed convolution (output channels on the weight's dimension 1)."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    _check_running(bn)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution followed by batch norm with these statistics and
    affine parameters (None: the identity), as new Parameters."""
    from ... import ones_like, rsqrt, zeros_like

    with no_grad():
        conv_w_dtype = conv_w.dtype
        conv_b_dtype = conv_b.dtype if conv_b is not None else conv_w_dtype
        if conv_b is None:
            conv_b = zeros_like(bn_rm)
        if bn_w is None:
            bn_w = ones_like(bn_rm)
        if bn_b is None:
            bn_b = zeros_like(bn_rm)
        inv_std = rsqrt(bn_rv + bn_eps)
        rest = [1] * (conv_w.dim() - 2)
        shape = [1, -1, *rest] if transpose else [-1, 1, *rest]
        weight = (conv_w * (bn_w * inv_std).reshape(shape)).to(dtype=conv_w_dtype)
        bias = ((conv_b - bn_rm) * inv_std * bn_w + bn_b).to(dtype=conv_b_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` (eval mode, as `bn`) that computes `bn(linear(x))`; the batch norm
    has `linear.out_features` features, or one (broadcast)."""
    _check_eval(linear, bn)
    assert linear.out_features == bn.num_features or bn.num_features == 1, (
        "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
        f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    _check_running(bn)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor,
                           bn_b: Tensor) -> tuple[Parameter, Parameter]:
    """The weight and bias of a linear layer followed by batch norm with these statistics and
    affine parameters, as new Parameters."""
    from ... import rsqrt, zeros_like

    with no_grad():
        if linear_b is None:
            linear_b = zeros_like(bn_rm)
        scale = bn_w * rsqrt(bn_rv + bn_eps)
        weight = linear_w * scale.unsqueeze(-1)
        bias = (linear_b - bn_rm) * scale + bn_b
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad)
