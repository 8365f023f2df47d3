"""One training step of a 2-D convolution, shared by the convolution kernels' tests: the
forward and the gradients of input, weight and bias, for a library (`fusegrad` or `torch`)
given as an argument so that both run the same code."""

from __future__ import annotations

import numpy as np


def conv_step(lib, x: np.ndarray, w: np.ndarray, b: np.ndarray, **kw) -> list:
    """`conv2d(x, w, b, **kw)` in `lib` and its backward from a fixed ramp of gradients:
    the output and the input's, weight's and bias's gradients as NumPy arrays."""
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    gy = np.linspace(-1.0, 1.0, int(np.prod(y.shape)), dtype=np.float32).reshape(y.shape)
    y.backward(lib.tensor(gy))
    return [np.array(t.detach().numpy()) for t in (y, xt.grad, wt.grad, bt.grad)]
