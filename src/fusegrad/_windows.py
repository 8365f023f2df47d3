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
from ._type_names import call_keywords, python_type_name


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


# (marks an optional positional parameter the caller left out: PyTorch's overloads take a
# window's shape parameters only after every earlier one, so `beta=` alone matches none)
_UNSET = object()
_FACTORY_KWARGS = ("torch.dtype dtype = None, torch.layout layout = None, torch.device device "
                   "= None, bool pin_memory = False, bool requires_grad = False")


def _arg_type(value) -> str:
    """The name PyTorch's argument parser gives a value's type (`torch.dtype`, `float`)."""
    if isinstance(value, _dtype.dtype):
        return "torch.dtype"
    if isinstance(value, Tensor):
        return "Tensor"
    return {"device": "torch.device", "layout": "torch.layout"}.get(
        type(value).__name__, python_type_name(value))


def _refuse_skipped(name: str, values: dict, optional: tuple) -> None:
    """Raise PyTorch's TypeError when a window's shape parameter is given while an earlier
    one is not (`kaiser_window(5, beta=4.0)`): no overload takes that call. `values` holds
    the call's arguments by name, `optional` the shape parameters in order."""
    given = [k for k in optional if values[k] is not _UNSET]
    if not given or optional.index(given[-1]) + 1 == len(given):
        return
    keywords = call_keywords(2)
    got = [_arg_type(values["window_length"])]
    got += [_arg_type(values[k]) for k in given if k not in keywords]
    got += [f"{k}={_arg_type(values[k])}" for k in keywords if k in values]
    params, lines = "int window_length", []
    for k in ("",) + optional:
        if k:
            params += f", {'bool' if k == 'periodic' else 'float'} {k}"
        lines.append(f" * ({params}, *, {_FACTORY_KWARGS})\n")
    raise TypeError(f"{name}() received an invalid combination of arguments - got "
                    f"({', '.join(got)}), but expected one of:\n" + "".join(lines))


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


def hamming_window(window_length: int, periodic: bool = _UNSET, alpha: float = _UNSET,
                   beta: float = _UNSET, *, dtype=None, layout=None, device=None,
                   pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The Hamming window: alpha - beta cos(2 pi n / (N - 1)) (periodic by default, alpha
    0.54, beta 0.46)."""
    _refuse_skipped("hamming_window", locals(), ("periodic", "alpha", "beta"))
    periodic = True if periodic is _UNSET else periodic
    alpha = 0.54 if alpha is _UNSET else alpha
    beta = 0.46 if beta is _UNSET else beta
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


def kaiser_window(window_length: int, periodic: bool = _UNSET, beta: float = _UNSET, *,
                  dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:
    """The Kaiser window: I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta), a = (N - 1) / 2
    (periodic by default, beta 12)."""
    _refuse_skipped("kaiser_window", locals(), ("periodic", "beta"))
    periodic = True if periodic is _UNSET else periodic
    beta = 12.0 if beta is _UNSET else beta
    def shape(n, m):
        a = (m - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((n - a) / a) ** 2, 0, None))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   shape)


__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window"]
