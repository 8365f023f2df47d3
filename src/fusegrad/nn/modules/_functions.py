"""Autograd functions behind some legacy modules (PyTorch's `torch.nn.modules._functions`):
their nodes carry the function's name (`CrossMapLRN2dBackward`)."""

from __future__ import annotations

import numpy as np

from ... import _creation
from ...autograd.function import Function


def _cross_map_window(channels: int, size: int) -> np.ndarray:
    """The (C, C) 0/1 matrix whose row c marks the channels summed for channel c: a window
    of `size` channels starting (size - 1) // 2 before c, cut at the edges."""
    pre_pad = (size - 1) // 2 + 1
    window = np.zeros((channels, channels))
    window[0, :min(pre_pad, channels)] = 1
    for c in range(1, channels):
        window[c] = window[c - 1]
        if c < channels - pre_pad + 1:
            window[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            window[c, c - pre_pad] -= 1
    return window


def _channel_sums(t, window):
    """Each channel's windowed sum of `t` over the channels (dim 1)."""
    return t.movedim(1, -1).matmul(window.t()).movedim(-1, 1)


class CrossMapLRN2d(Function):
    """x * (k + alpha / size * windowed sum of x**2 over channels) ** -beta, over (N, C, H, W)
    input."""

    @staticmethod
    def forward(ctx, input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             f"instead.")
        window = _creation.tensor(_cross_map_window(input.shape[1], size), dtype=input.dtype)
        scale = _channel_sums(input * input, window) * (alpha / size) + k
        ctx.save_for_backward(input)
        ctx.window, ctx.coefs = window, (size, alpha, beta, k)
        return input * scale.pow(-beta)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        size, alpha, beta, k = ctx.coefs
        # (the scale again, from the input: a double backward differentiates through it)
        scale = _channel_sums(input * input, ctx.window) * (alpha / size) + k
        # d/dx of x s**-beta: s**-beta directly, plus, through every s whose window holds the
        # channel, -beta s**(-beta - 1) (alpha / size) 2 x
        inner = grad_output * input * scale.pow(-beta - 1) * (-2 * beta * alpha / size)
        spread = _channel_sums(inner, ctx.window.t())
        return grad_output * scale.pow(-beta) + spread * input, None, None, None, None


CrossMapLRN2d.__module__ = "torch.nn.modules._functions".replace("torch", "fusegrad", 1)
