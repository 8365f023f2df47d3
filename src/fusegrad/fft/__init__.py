"""`fusegrad.fft`: discrete Fourier transforms as `torch.fft` spells them.

Every transform resizes its input (`n` / `s`: cropping records `SliceBackward0`, padding
`ConstantPadNdBackward0`) and calls one of ATen's three primitives (`ops/fft.py`):
`_fft_r2c` for real input, `_fft_c2c` for complex input (the n-dimensional transforms first
make a real input complex, `ToCopyBackward0`), `_fft_c2r` for the inverse of a onesided
spectrum. `ifft` and `ihfft` of a real input are the conjugate of the forward r2c transform
(`ConjBackward0`), `hfft` the c2r of the conjugate, as PyTorch computes them, so graphs and
gradients match PyTorch's.

`norm`: "backward" (the default: the inverse transforms divide by n), "ortho" (both by
sqrt(n)) or "forward" (the forward transforms divide by n).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _dtype, _out
from .._autocast import composite
from .._creation import tensor as _tensor
from .._dispatch import call
from .._scalar_conversion import not_implemented_for
from .._tensor import Tensor
from .._warn import warn_at_caller
from ..autograd.grad_mode import is_grad_enabled as _grad_enabled
from ..autograd.grad_mode import no_grad as _no_grad
from ..ops import fft as _F
from ..ops._util import wrap_dim

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_NORMS = {"backward": 0, "ortho": 1, "forward": 2}


def _norm(norm: str | None, forward: bool) -> int:
    """ATen's normalization code for `norm` in a transform of the given direction."""
    key = "backward" if norm is None else norm
    if key not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    code = _NORMS[key]
    return code if forward else 2 - code


def _floating(x: Tensor, complex_out: bool = False) -> Tensor:
    """`x` with a dtype the transforms take: integers and bool become the default float;
    `complex_out` also makes a real tensor complex."""
    dt = x.dtype
    if dt.category < _dtype.FLOAT:
        x = x.to(_dtype.defaults.float.to_complex() if complex_out else _dtype.defaults.float)
    elif dt.category == _dtype.FLOAT:
        if dt.itemsize < 4:
            raise RuntimeError(f"Unsupported dtype {dt.legacy}")
        if complex_out:
            x = x.to(dt.to_complex())
    return x


def _check_n(n: int) -> None:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _points(n: int | None) -> int:
    """A one-dimensional transform's `n` as a size for `_resize` (-1: unchanged)."""
    if n is None:
        return -1
    _check_n(n)
    return n


def _resize(x: Tensor, dims: list, sizes: list) -> Tensor:
    """`x` cropped or zero-padded to `sizes` along `dims` (-1 keeps a size)."""
    for d, n in zip(dims, sizes):
        if n == -1:
            continue
        _check_n(n)
        size = x.shape[d]
        if n < size:
            x = x.narrow(d, 0, n)
        elif n > size:
            pad = [0, 0] * (x.ndim - 1 - d) + [0, n - size]
            x = call(_pad_op(), x, pad)
    return x


def _pad_op():
    from ..ops.padding import constant_pad_nd

    return constant_pad_nd


def _one_dim(name: str, x: Tensor, dim) -> int:
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"fft_{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    if x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, x.ndim)


def _many_dims(x: Tensor, s, dim, default_all: bool = True) -> tuple[list, list]:
    """The transformed dims and their sizes (-1: unchanged) of an n-dimensional transform."""
    if s is not None and dim is not None and len(s) != len(dim):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    if dim is None:
        if s is not None:
            if len(s) > x.ndim:
                raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                                   f"{x.ndim} dimensions.")
            dims = list(range(x.ndim - len(s), x.ndim))
        else:
            dims = list(range(x.ndim)) if default_all else [x.ndim - 2, x.ndim - 1]
    else:
        dims = [wrap_dim(d, x.ndim) for d in ([dim] if isinstance(dim, int) else dim)]
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    sizes = list(s) if s is not None else [-1] * len(dims)
    return dims, sizes


def _real_input(x: Tensor, name: str) -> Tensor:
    if x.dtype.category == _dtype.COMPLEX:
        raise RuntimeError(f"{name} expects a real input tensor, but got {x.dtype.legacy}")
    return _floating(x)


# ---------------------------------------------------------------- one dimension


@composite("fp32")  # (PyTorch's CPU autocast)
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out=None) -> Tensor:
    """The one-dimensional discrete Fourier transform along `dim`."""
    d = _one_dim("fft", input, dim)
    x = _resize(_floating(input), [d], [_points(n)])
    if x.is_complex():
        return call(_F.fft_c2c, x, [d], _norm(norm, True), True)
    return call(_F.fft_r2c, x, [d], _norm(norm, True), False)


@composite("fp32")  # (PyTorch's CPU autocast)
def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out=None) -> Tensor:
    """The one-dimensional inverse discrete Fourier transform along `dim`."""
    d = _one_dim("ifft", input, dim)
    x = _resize(_floating(input), [d], [_points(n)])
    if x.is_complex():
        return call(_F.fft_c2c, x, [d], _norm(norm, False), False)
    # A real signal's inverse transform is the conjugate of its forward one.
    return call(_F.fft_r2c, x, [d], _norm(norm, False), False).conj()


@composite("fp32")  # (PyTorch's CPU autocast)
def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out=None) -> Tensor:
    """The non-negative frequencies of a real signal's transform along `dim`."""
    d = _one_dim("rfft", input, dim)
    if input.is_complex():
        raise RuntimeError(f"rfft expects a real input tensor, but got {input.dtype.legacy}")
    x = _resize(_floating(input), [d], [_points(n)])
    return call(_F.fft_r2c, x, [d], _norm(norm, True), True)


def _onesided_input(name: str, input: Tensor, n, dim) -> tuple[Tensor, int, int]:
    """(input resized to n // 2 + 1 points, dim, n) for the c2r transforms."""
    d = _one_dim(name, input, dim)
    n = 2 * (input.shape[d] - 1) if n is None else n
    _check_n(n)
    x = _resize(_floating(input, complex_out=True), [d], [n // 2 + 1])
    return x, d, n


@composite("fp32")  # (PyTorch's CPU autocast)
def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out=None) -> Tensor:
    """The real signal of `n` points (default 2 * (m - 1)) whose onesided spectrum is
    `input` (m points along `dim`)."""
    x, d, n = _onesided_input("irfft", input, n, dim)
    return call(_F.fft_c2r, x, [d], _norm(norm, False), n)


@composite("fp32")  # (PyTorch's CPU autocast)
def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out=None) -> Tensor:
    """The (real) transform of a Hermitian-symmetric signal given by its first half."""
    x, d, n = _onesided_input("hfft", input, n, dim)
    return call(_F.fft_c2r, x.conj(), [d], _norm(norm, True), n)


@composite("fp32")  # (PyTorch's CPU autocast)
def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out=None) -> Tensor:
    """The inverse of `hfft`: the first half of a real signal's inverse transform."""
    d = _one_dim("ihfft", input, dim)
    x = _resize(_real_input(input, "ihfft"), [d], [_points(n)])
    return call(_F.fft_r2c, x, [d], _norm(norm, False), True).conj()


# ---------------------------------------------------------------- n dimensions


def _c2c_n(input: Tensor, s, dim, norm, forward: bool, default_all: bool) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    dims, sizes = _many_dims(input, s, dim, default_all)
    x = _resize(_floating(input, complex_out=True), dims, sizes)
    return call(_F.fft_c2c, x, dims, _norm(norm, forward), forward)


@composite("fp32")  # (PyTorch's CPU autocast)
def fftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional transform over `dim` (all dims, or the last len(s))."""
    return _c2c_n(input, s, dim, norm, True, True)


@composite("fp32")  # (PyTorch's CPU autocast)
def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional inverse transform over `dim` (all dims, or the last len(s))."""
    return _c2c_n(input, s, dim, norm, False, True)


@composite("fp32")  # (PyTorch's CPU autocast)
def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional transform over `dim`."""
    return _c2c_n(input, s, dim, norm, True, False)


@composite("fp32")  # (PyTorch's CPU autocast)
def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional inverse transform over `dim`."""
    return _c2c_n(input, s, dim, norm, False, False)


@composite("fp32")  # (PyTorch's CPU autocast)
def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional transform of a real signal, onesided along the last of `dim`."""
    if input.is_complex():
        raise RuntimeError("rfftn expects a real-valued input tensor, but got "
                           f"{input.dtype.legacy}")
    dims, sizes = _many_dims(input, s, dim)
    x = _resize(_floating(input), dims, sizes)
    return call(_F.fft_r2c, x, dims, _norm(norm, True), True)


@composite("fp32")  # (PyTorch's CPU autocast)
def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional transform of a real signal, onesided along the last of `dim`."""
    return rfftn(input, s, dim, norm)


@composite("fp32")  # (PyTorch's CPU autocast)
def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The real signal whose n-dimensional onesided spectrum is `input`; the last of `dim`
    gets s[-1] points (default 2 * (m - 1))."""
    dims, sizes = _many_dims(input, s, dim)
    last = dims[-1]
    n = sizes[-1] if sizes[-1] != -1 else 2 * (input.shape[last] - 1)
    _check_n(n)
    x = _resize(_floating(input, complex_out=True), dims, sizes[:-1] + [n // 2 + 1])
    return call(_F.fft_c2r, x, dims, _norm(norm, False), n)


@composite("fp32")  # (PyTorch's CPU autocast)
def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of `rfft2`."""
    return irfftn(input, s, dim, norm)


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional `hfft`: the real transform of a Hermitian-symmetric signal given by
    its first half along the last of `dim` (s[-1] points, default 2 * (m - 1))."""
    return _hfftn(input, s, dim, norm, True)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional `hfft`."""
    return _hfftn(input, s, dim, norm, False)


def _hfftn(input: Tensor, s, dim, norm, default_all: bool) -> Tensor:
    dims, sizes = _many_dims(input, s, dim, default_all)
    last = dims[-1]
    n = sizes[-1] if sizes[-1] != -1 else 2 * (input.shape[last] - 1)
    _check_n(n)
    x = _resize(_floating(input, complex_out=True), dims, sizes[:-1] + [n // 2 + 1])
    code = _norm(norm, True)
    if len(dims) > 1:  # the other dims first, forward, then the Hermitian last one
        x = call(_F.fft_c2c, x, dims[:-1], code, True)
    return call(_F.fft_c2r, x.conj(), [last], code, n)


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of `hfftn`: the onesided inverse transform of a real signal."""
    return _ihfftn(input, s, dim, norm, True)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
           out=None) -> Tensor:
    """The inverse of `hfft2`."""
    return _ihfftn(input, s, dim, norm, False)


def _ihfftn(input: Tensor, s, dim, norm, default_all: bool) -> Tensor:
    if input.is_complex():
        raise RuntimeError(f"Only supports floating-point dtypes, but found: "
                           f"{input.dtype.legacy}")
    dims, sizes = _many_dims(input, s, dim, default_all)
    x = _resize(_floating(input), dims, sizes)
    code = _norm(norm, False)
    # A real signal's inverse transform along the last dim is its conjugated forward one.
    y = call(_F.fft_r2c, x, [dims[-1]], code, True)
    if len(dims) == 1:
        return y.conj()
    return call(_F.fft_c2c, y.conj_physical(), dims[:-1], code, False)


# ---------------------------------------------------------------- helpers


def fftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an `n`-point transform with sample spacing `d`:
    0, 1, ..., then the negative ones, divided by d * n."""
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]) if n > 0 else None
    return _frequencies("fftfreq", k, n, n, d, out, dtype, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The non-negative sample frequencies of an `n`-point transform (`rfft`'s)."""
    k = np.arange(n // 2 + 1) if n >= 0 else None
    return _frequencies("rfftfreq", k, n // 2 + 1, n, d, out, dtype, requires_grad)


def _frequencies(name: str, k, size: int, n: int, d: float, out, dtype,
                 requires_grad: bool) -> Tensor:
    """PyTorch's steps: an empty result of `size` (or `out`), the dtype check, the integers
    by arange (no complex kernel), then one multiply by the double 1 / (n * d), which
    follows IEEE rules (d = 0 gives infinities and a NaN, not an error)."""
    if out is not None:
        if dtype is not None and _dtype.as_dtype(dtype) is not out.dtype:
            raise RuntimeError(f"dtype {_dtype.as_dtype(dtype).legacy} does not match dtype "
                               f"of out parameter ({out.dtype.legacy})")
        dt = out.dtype
        if out.requires_grad and _grad_enabled():
            raise RuntimeError(f"aten::fft_{name}(): functions with out=... arguments don't "
                               "support automatic differentiation, but one of the arguments "
                               "requires grad.")
    else:
        dt = _dtype.as_dtype(dtype) if dtype is not None else _dtype.defaults.float
    if size < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {size}: [{size}]")
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    if dt.is_complex:
        raise not_implemented_for("arange_cpu", dt)
    k = np.zeros(0) if k is None else k
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.float64(1.0) / np.float64(n * d)
        # The multiply runs in the dtype's compute type (float32 for the half types).
        compute = np.float64 if dt.np == np.float64 else np.float32
        values = (k.astype(dt.np).astype(compute) * compute(scale)).astype(dt.np)
    if out is None:
        return _tensor(values, dtype=dt, requires_grad=requires_grad)
    if out.numel() != size:
        if out.numel() > 0:  # arange's own warning, not the generic resize one
            warn_at_caller(f"The number of elements in the out tensor of shape "
                           f"{list(out.shape)} is {out.numel()} which does not match the "
                           f"computed number of elements {size}. Note that this may occur as "
                           f"a result of rounding error. The out tensor will be resized to a "
                           f"tensor of shape ({size},).")
        out.resize_(size)
    with _no_grad():
        out.copy_(_tensor(values, dtype=dt).view(out.shape))
    return out


def _shift_dims(x: Tensor, dim) -> list:
    if dim is None:
        return list(range(x.ndim))
    return [wrap_dim(d, x.ndim) for d in ([dim] if isinstance(dim, int) else dim)]


def fftshift(input: Tensor, dim=None) -> Tensor:
    """`input` rolled so the zero frequency is in the middle of each of `dim` (all dims)."""
    dims = _shift_dims(input, dim)
    return input.roll([input.shape[d] // 2 for d in dims], dims)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of `fftshift`."""
    dims = _shift_dims(input, dim)
    return input.roll([(input.shape[d] + 1) // 2 for d in dims], dims)


# Last, once every function exists: PyTorch's out= on each (`_out.write_out`), after the
# transforms' own check of the kind of `out` (complex for the transforms whose result is
# complex, floating for those whose result is real), named as PyTorch's kernels name
# themselves (fft2 and fftn are "fftn", ...).
_out.guard_namespace(globals(), "fusegrad.fft", frozenset({"fftfreq", "rfftfreq"}))

_OUT_KIND = {"fft": "fft", "ifft": "ifft", "rfft": "rfft", "ihfft": "ihfft",
             "fft2": "fftn", "ifft2": "fftn", "fftn": "fftn", "ifftn": "fftn",
             "rfft2": "rfftn", "rfftn": "rfftn", "ihfft2": "ihfftn", "ihfftn": "ihfftn",
             "irfft": "irfft", "hfft": "hfft", "irfft2": "irfftn", "irfftn": "irfftn",
             "hfft2": "hfftn", "hfftn": "hfftn"}


def _checking_out_kind(fn, kernel: str):
    complex_result = kernel not in ("irfft", "hfft", "irfftn", "hfftn")

    @functools.wraps(fn)
    def transform(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if isinstance(out, Tensor):
            if complex_result and not out.dtype.is_complex:
                raise RuntimeError(f"{kernel} expects a complex output tensor, but got "
                                   f"{out.dtype.legacy}")
            if not complex_result and not out.dtype.is_floating_point:
                raise RuntimeError(f"{kernel} expects a floating point output tensor, but "
                                   f"got {out.dtype.legacy}")
            if kernel in ("ifft", "ihfft"):
                _conj_out_dtype(args[0] if args else kwargs.get("input"), out)
        return fn(*args, out=out, **kwargs)

    return transform


def _conj_out_dtype(input, out: Tensor) -> None:
    # ifft and ihfft of a real input write the conjugate of the r2c transform into `out`
    # (conj_physical's out=), which takes no other dtype than the transform's own.
    if isinstance(input, Tensor) and not input.dtype.is_complex:
        want = _floating(input).dtype.to_complex()
        if out.dtype is not want:
            raise RuntimeError(f"Found dtype {out.dtype.legacy} but expected {want.legacy}")


for _name, _kernel in _OUT_KIND.items():
    globals()[_name] = _checking_out_kind(globals()[_name], _kernel)
