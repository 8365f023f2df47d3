"""Discrete Fourier transforms: ATen's three primitives, which every `fusegrad.fft`
function reduces to, as PyTorch's do (so graphs show PyTorch's nodes):

- `_fft_r2c(self, dim, normalization, onesided)`: a real tensor's forward transform, the
  full spectrum or (onesided) its non-negative frequencies along the last of `dim`;
- `_fft_c2c(self, dim, normalization, forward)`: a complex tensor's transform either way;
- `_fft_c2r(self, dim, normalization, last_dim_size)`: the inverse transform of a onesided
  Hermitian spectrum, a real tensor with `last_dim_size` points along the last of `dim`.

`normalization` scales by 1 (0), 1/sqrt(n) (1) or 1/n (2) whatever the direction, n being
the number of points transformed. Kernels are NumPy's pocketfft, in the input's precision.

Derivatives (conjugate Wirtinger gradients of a real loss): a transform is linear, so its
gradient is its adjoint: c2c's is the c2c of the other direction with the same scale; r2c's
is the real part of the inverse c2c of the gradient zero-padded to the full spectrum; c2r's
is the onesided r2c of the gradient with the frequencies that stand for two (all but the
zero and, for an even length, the Nyquist one) doubled.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import Spec, rand_array, wrap_dims
from .complex import call_op, complex_np, complex_samples_array
from .registry import Sample, register

# NumPy's `norm` for (normalization, forward direction).
_NP_NORM = {(0, True): "backward", (1, True): "ortho", (2, True): "forward",
            (0, False): "forward", (1, False): "ortho", (2, False): "backward"}


def _dims(a, dim) -> list:
    return list(wrap_dims(list(dim), a.ndim))


def _check_float(dt, what: str) -> None:
    if dt.category != _dtype.FLOAT:
        raise RuntimeError(f"{what} expects a real-valued input tensor, but got {dt.legacy}")
    if dt.itemsize < 4:
        raise RuntimeError(f"Unsupported dtype {dt.legacy}")


def _check_complex(dt, what: str) -> None:
    if dt.category != _dtype.COMPLEX:
        raise RuntimeError(f"{what} expects a complex input tensor, but got {dt.legacy}")


# ---------------------------------------------------------------- r2c


def _r2c_kernel(a, dim, normalization, onesided):
    _check_float(_dtype.FROM_NP[a.dtype], "r2c")
    axes = _dims(a, dim)
    norm = _NP_NORM[(normalization, True)]
    out = np.fft.rfftn(a, axes=axes, norm=norm) if onesided else np.fft.fftn(
        a, axes=axes, norm=norm)
    return out.astype(complex_np(a.dtype), copy=False)


def _r2c_meta(a, dim, normalization, onesided):
    _check_float(a.dtype, "r2c")
    shape = list(a.shape)
    if onesided and dim:
        last = _dims(a, dim)[-1]
        shape[last] = shape[last] // 2 + 1
    return Spec(tuple(shape), a.dtype.to_complex())


def _r2c_derivative(g, n, dim, normalization, onesided):
    if onesided:  # the dropped frequencies get no gradient: pad with zeros up to n
        last = _dims(g, dim)[-1]
        missing = n - g.shape[last]
        if missing:
            pad = [0, 0] * (g.ndim - 1 - last) + [0, missing]
            g = call_op(_constant_pad_nd(), g, pad)
    return (call_op(fft_c2c, g, dim, normalization, False).real, None, None, None)


def _constant_pad_nd():
    from .padding import constant_pad_nd

    return constant_pad_nd


def _r2c_save(out, a, dim, normalization, onesided):
    last = _dims(a, dim)[-1] if dim else 0
    return (a.shape[last] if dim else 1, list(dim), normalization, onesided)


_CASES = (((8,), [0]), ((3, 5), [1]), ((3, 6), [0, 1]), ((2, 3, 4), [0, 2]),
          ((4, 3), [0]))


def _r2c_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), d, norm, one), name=f"{s} {d} {norm} {one}")
            for k, (s, d) in enumerate(_CASES) for norm, one in ((k % 3, True), (2, False))]


fft_r2c = register(
    "_fft_r2c", kernel=_r2c_kernel, meta=_r2c_meta, node="FftR2CBackward0",
    derivative=_r2c_derivative, save=_r2c_save, samples=_r2c_samples,
    saved_names=("", "dim", "normalization", "onesided"))


# ---------------------------------------------------------------- c2c


def _c2c_kernel(a, dim, normalization, forward):
    _check_complex(_dtype.FROM_NP[a.dtype], "c2c")
    fn = np.fft.fftn if forward else np.fft.ifftn
    out = fn(a, axes=_dims(a, dim), norm=_NP_NORM[(normalization, bool(forward))])
    return out.astype(a.dtype, copy=False)


def _c2c_meta(a, dim, normalization, forward):
    _check_complex(a.dtype, "c2c")
    _dims(a, dim)
    return Spec(tuple(a.shape), a.dtype)


def _c2c_samples(rng, dt):
    return [Sample((complex_samples_array(rng, s, dt), d, k % 3, k % 2 == 0),
                   name=f"{s} {d} {k % 3}") for k, (s, d) in enumerate(_CASES)]


fft_c2c = register(
    "_fft_c2c", kernel=_c2c_kernel, meta=_c2c_meta, node="FftC2CBackward0",
    derivative=lambda g, dim, normalization, forward: (
        call_op(fft_c2c, g, dim, normalization, not forward), None, None, None),
    save=lambda out, a, dim, normalization, forward: (list(dim), normalization, forward),
    samples=_c2c_samples, saved_names=("dim", "normalization", "forward"))


# ---------------------------------------------------------------- c2r


def _c2r_kernel(a, dim, normalization, last_dim_size):
    _check_complex(_dtype.FROM_NP[a.dtype], "c2r")
    axes = _dims(a, dim)
    sizes = [a.shape[d] for d in axes[:-1]] + [last_dim_size]
    out = np.fft.irfftn(a, s=sizes, axes=axes, norm=_NP_NORM[(normalization, False)])
    return out.astype(a.real.dtype, copy=False)


def _c2r_meta(a, dim, normalization, last_dim_size):
    _check_complex(a.dtype, "c2r")
    shape = list(a.shape)
    shape[_dims(a, dim)[-1]] = last_dim_size
    return Spec(tuple(shape), a.dtype.to_real())


def _c2r_derivative(g, dim, normalization, last_dim_size):
    gi = call_op(fft_r2c, g, dim, normalization, True)
    last = _dims(g, dim)[-1]
    m = gi.shape[last]
    doubled = last_dim_size - m  # frequencies 1..doubled stand for themselves and a mirror
    if doubled > 0:
        # Added once more, padded back to m points: ops on the gradient only (no constant
        # made from NumPy data), so that compiled backward graphs can trace it.
        again = gi.narrow(last, 1, doubled)
        pad = [0, 0] * (g.ndim - 1 - last) + [1, m - 1 - doubled]
        gi = gi + call_op(_constant_pad_nd(), again, pad)
    return (gi, None, None, None)


def _c2r_samples(rng, dt):
    out = []
    for k, (s, d) in enumerate(_CASES):
        n = s[d[-1]]
        shape = list(s)
        shape[d[-1]] = n // 2 + 1
        out.append(Sample((complex_samples_array(rng, tuple(shape), dt), d, k % 3, n),
                          name=f"{s} {d} {k % 3}"))
    return out


fft_c2r = register(
    "_fft_c2r", kernel=_c2r_kernel, meta=_c2r_meta, node="FftC2RBackward0",
    derivative=_c2r_derivative,
    save=lambda out, a, dim, normalization, last_dim_size: (
        list(dim), normalization, last_dim_size),
    samples=_c2r_samples,
    saved_names=("dim", "normalization", "last_dim_size"))
