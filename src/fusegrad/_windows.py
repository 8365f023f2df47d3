"""Window functions for spectral analysis: `hann_window`, `hamming_window`, `blackman_window`,
`bartlett_window`, `kaiser_window`, as PyTorch defines them.

A periodic window of length N is the symmetric window of length N + 1 without its last
point (what a DFT of N points expects); lengths 0 and 1 give an empty tensor and [1].
Values are computed in float64 and rounded once to the requested dtype.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtype
from ._creation import _check_device, _factory, meta_factory, on_meta
from ._tensor import Tensor
from ._thread_state import active as _active


def _window(name: str, window_length, periodic: bool, dtype, device, requires_grad,
            shape) -> Tensor:
    """The window `shape(n, m)` gives at positions `n` of a symmetric window of m points."""
    if not isinstance(window_length, numbers.Integral) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    dev = _check_device(device)
    dt = dtype or _dtype.get_default_dtype()
    if name == "hann_window" and (dev is not None or _active.default_device) and \
            on_meta(dev):
        # (PyTorch's meta hann_window is hamming's narrowed: any dtype, narrow's error)
        if window_length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        return meta_factory((window_length,), dt, requires_grad)
    if dt.category != _dtype.FLOAT:
        raise RuntimeError(
            f"{name} expects floating point dtypes, got: TensorOptions(dtype="
            f"{dt.cpp}, device={'meta' if on_meta(dev) else 'cpu'}, layout=Strided (default), "
            f"requires_grad=false (default), pinned_memory=false, memory_format=(nullopt))")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    if (dev is not None or _active.default_device) and on_meta(dev):
        return meta_factory((window_length,), dt, requires_grad)
    if window_length <= 1:
        values = np.ones(window_length)
    else:
        m = window_length + 1 if periodic else window_length
        values = shape(np.arange(m, dtype=np.float64), m)[:window_length]
    # (through the factory: a tracer sees a constant it can keep, as for `ones`)
    return _factory((window_length,), dt, requires_grad, lambda npdt: values.astype(npdt))


def _cosine_sum(*coefficients: float):
    """a0 - a1 cos(2 pi n / (m - 1)) + a2 cos(4 pi n / (m - 1)) - ..."""
    def shape(n, m):
        phase = 2 * np.pi * n / (m - 1)
        return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))
    return shape


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                device=None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The Hann window: 0.5 - 0.5 cos(2 pi n / (N - 1))."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.5, 0.5))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, layout=None, device=None,
                   pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The Hamming window: alpha - beta cos(2 pi n / (N - 1))."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(alpha, beta))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window: 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.42, 0.5, 0.08))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The Bartlett (triangular) window: 1 - |2n / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:
    """The Kaiser window: I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta), a = (N - 1) / 2."""
    def shape(n, m):
        a = (m - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((n - a) / a) ** 2, 0, None))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   shape)


__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window"]
