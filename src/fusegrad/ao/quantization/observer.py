"""Observers: modules that watch the tensors passing through them and choose quantization
parameters (scale, zero point) from what they saw, as PyTorch's `torch.ao.quantization`
observers do.

The parameters follow PyTorch's arithmetic: the observed range is widened to include zero;
affine grids take scale = (max - min) / (quant_max - quant_min) and zero point = quant_min -
round(min / scale) (half to even, clamped); symmetric grids take scale = max(|min|, |max|)
/ ((quant_max - quant_min) / 2) and zero point 0 (128 for quint8's full range). Every scale
is at least `eps`, in float32 throughout.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ... import _dtype
from ... import _quantized as Q
from ..._tensor import Tensor
from ...nn.modules.module import Module

_F32 = np.float32
_EPS = float(np.finfo(np.float32).eps)
_SUPPORTED_DTYPES = (
    "Default Observer only works for (torch.qint8, torch.quint8, torch.quint4x2, "
    "torch.qint32, torch.int8, torch.uint8, torch.int16, torch.int32, torch.float8_e5m2, "
    "torch.float8_e4m3fn, torch.uint16) data type")
_OBSERVED_DTYPES = (_dtype.qint8, _dtype.quint8, _dtype.quint4x2, _dtype.qint32,
                    _dtype.int8, _dtype.uint8, _dtype.int16, _dtype.int32, _dtype.uint16)


class _PartialWrapper:
    """An observer class with some constructor arguments bound (`with_args`): calling it
    makes an observer; its repr is PyTorch's (the partial, then the bound callables)."""

    def __init__(self, p: functools.partial):
        self.p = p
        self.callable_args: dict = {}

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def __repr__(self) -> str:
        return self.p.__repr__() + self.callable_args.__repr__()

    def with_args(self, **kwargs) -> _PartialWrapper:
        """The same class with more arguments bound."""
        return _PartialWrapper(functools.partial(self.p, **kwargs))


def _qmin_qmax(dtype, reduce_range: bool, quant_min, quant_max) -> tuple[int, int]:
    """The integer range an observer's grid spans (PyTorch's reading of a custom range)."""
    if quant_min is not None and quant_max is not None:
        if quant_min > 0 or quant_max < 0:
            raise AssertionError("Used-specified quantization range must include 0.")
        if quant_min >= quant_max:
            raise AssertionError("qmin must be strictly less than qmax for user-specified "
                                 "quantization range.")
        length = quant_max - quant_min + 1
        if dtype in (_dtype.qint8, _dtype.int8):
            lo, hi = -length // 2, length // 2 - 1
        elif dtype in (_dtype.qint32, _dtype.int32):
            lo, hi = -(2 ** 31), 2 ** 31 - 1
        else:
            lo, hi = 0, length - 1
        return (lo // 2, hi // 2) if reduce_range else (lo, hi)
    if dtype in (_dtype.qint8, _dtype.int8):
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype in (_dtype.quint8, _dtype.uint8):
        return (0, 127) if reduce_range else (0, 255)
    if dtype in (_dtype.qint32, _dtype.int32):
        return -(2 ** 31), 2 ** 31 - 1
    if dtype is _dtype.quint4x2:
        return 0, 15
    if dtype is _dtype.int16:
        return -(2 ** 15), 2 ** 15 - 1
    return 0, 2 ** 16 - 1  # uint16


class ObserverBase(Module):
    """The base of observers: a module that records statistics of what passes through it
    and answers `calculate_qparams()`."""

    def __init__(self, dtype, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    @classmethod
    def with_args(cls, **kwargs) -> _PartialWrapper:
        """This class with constructor arguments bound (what a `QConfig` holds)."""
        return _PartialWrapper(functools.partial(cls, **kwargs))

    def calculate_qparams(self, **kwargs):
        """The quantization parameters chosen from the statistics."""
        raise NotImplementedError


class UniformQuantizationObserverBase(ObserverBase):
    """Observers of uniform (affine or symmetric) grids: the range, `eps` and the
    parameters' arithmetic."""

    _SCHEMES = (Q.per_tensor_affine, Q.per_tensor_symmetric, Q.per_channel_affine,
                Q.per_channel_symmetric, Q.per_channel_affine_float_qparams)

    def __init__(self, dtype=_dtype.quint8, qscheme=Q.per_tensor_affine,
                 reduce_range: bool = False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs):
        super().__init__(dtype, is_dynamic)
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn(
                "Please use quant_min and quant_max to specify the range for observers. "
                "                    reduce_range will be deprecated in a future release of "
                "PyTorch.", stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", Tensor._make(np.array([eps], _F32)))
        if qscheme not in self._SCHEMES:
            raise AssertionError("Default Observer only works for per_tensor_affine, "
                                 "per_tensor_symmetric, per_channel_affine, "
                                 "per_channel_symmetric and per_channel_float_qparams "
                                 "quantization scheme")
        if dtype not in _OBSERVED_DTYPES:
            raise AssertionError(_SUPPORTED_DTYPES)
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        self.quant_min, self.quant_max = _qmin_qmax(dtype, reduce_range, quant_min,
                                                    quant_max)

    def _calculate_qparams(self, min_val: Tensor, max_val: Tensor):
        """Scale (float32) and zero point for the observed range(s) `min_val`, `max_val`
        (0-d, or one per channel)."""
        lo, hi = min_val._data, max_val._data
        if lo.size == 0 or hi.size == 0 or (
                lo.ndim == 0 and lo == np.inf and hi == -np.inf):
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default values.", stacklevel=3)
            return (Tensor._make(np.array([1.0], _F32)),
                    Tensor._make(np.array([0], np.int64)))
        if not np.all(lo <= hi):
            raise AssertionError(f"min {min_val} should be less than max {max_val}")
        qmin, qmax = self.quant_min, self.quant_max
        neg = np.minimum(lo, _F32(0)).astype(_F32)
        pos = np.maximum(hi, _F32(0)).astype(_F32)
        eps = self.eps._data.astype(_F32)
        if self.qscheme in (Q.per_tensor_symmetric, Q.per_channel_symmetric):
            pos = np.maximum(-neg, pos)
            scale = np.maximum(pos / _F32((qmax - qmin) / 2), eps)
            fill = 0
            if self.dtype in (_dtype.quint8, _dtype.uint8):
                fill = (qmin + qmax) // 2 if self.has_customized_qrange else 128
            zero_point = np.full(neg.shape, fill, np.int64)
        elif self.qscheme is Q.per_channel_affine_float_qparams:
            scale = (hi - lo) / _F32(qmax - qmin)
            scale = np.where(scale > eps, scale, np.ones_like(scale)).astype(_F32)
            zero_point = (-lo / scale).astype(_F32)
        else:
            scale = np.maximum((pos - neg) / _F32(qmax - qmin), eps).astype(_F32)
            steps = np.rint(neg / scale).astype(np.int32)
            zero_point = np.clip(np.int32(qmin) - steps, qmin, qmax).astype(np.int32)
        scale = np.asarray(scale, _F32).reshape(-1)
        zero_point = np.asarray(zero_point).reshape(-1)
        return Tensor._make(scale), Tensor._make(zero_point)

    def reset_min_max_vals(self):
        """Forget the observed range."""
        raise NotImplementedError


class _RangeObserver(UniformQuantizationObserverBase):
    """An observer of the range of values it was shown (`min_val`, `max_val`)."""

    def calculate_qparams(self):
        """(scale, zero_point) of the observed range: one-element tensors, or one entry per
        channel for a per-channel observer."""
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(_RangeObserver):
    """Chooses per-tensor parameters from the running minimum and maximum."""

    def __init__(self, dtype=_dtype.quint8, qscheme=Q.per_tensor_affine,
                 reduce_range: bool = False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs):
        if qscheme not in (Q.per_tensor_affine, Q.per_tensor_symmetric):
            raise NotImplementedError(
                "MinMaxObserver's qscheme only support torch.per_tensor_symmetric "
                "                    and torch.per_tensor_affine.")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max,
                         factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.register_buffer("min_val", Tensor._make(np.array(np.inf, _F32)))
        self.register_buffer("max_val", Tensor._make(np.array(-np.inf, _F32)))

    def _update(self, lo: np.float32, hi: np.float32) -> None:
        self.min_val._data[...] = np.minimum(lo, self.min_val._data)
        self.max_val._data[...] = np.maximum(hi, self.max_val._data)

    def forward(self, x_orig: Tensor) -> Tensor:
        """Record the range of `x_orig`; returns it unchanged."""
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig._data.astype(_F32, copy=False)
        self._update(x.min(), x.max())
        return x_orig

    def reset_min_max_vals(self):
        """Forget the observed range."""
        self.min_val._data[...] = np.inf
        self.max_val._data[...] = -np.inf


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Tracks the minimum and maximum as running averages (`averaging_constant`)."""

    def __init__(self, averaging_constant: float = 0.01, dtype=_dtype.quint8,
                 qscheme=Q.per_tensor_affine, reduce_range: bool = False, quant_min=None,
                 quant_max=None, eps: float = _EPS, is_dynamic: bool = False, **kwargs):
        self.averaging_constant = averaging_constant
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)

    def _update(self, lo: np.float32, hi: np.float32) -> None:
        old_lo, old_hi = self.min_val._data, self.max_val._data
        if old_lo == np.inf and old_hi == -np.inf:
            old_lo[...], old_hi[...] = lo, hi
            return
        c = _F32(self.averaging_constant)
        old_lo[...] = old_lo + c * (lo - old_lo)
        old_hi[...] = old_hi + c * (hi - old_hi)


class PerChannelMinMaxObserver(_RangeObserver):
    """Chooses parameters per index of dimension `ch_axis` from running minima and
    maxima."""

    def __init__(self, ch_axis: int = 0, dtype=_dtype.quint8, qscheme=Q.per_channel_affine,
                 reduce_range: bool = False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs):
        if qscheme not in (Q.per_channel_affine, Q.per_channel_symmetric,
                           Q.per_channel_affine_float_qparams):
            raise NotImplementedError(
                "PerChannelMinMaxObserver's qscheme only support                     "
                "torch.per_channel_symmetric, torch.per_channel_affine and "
                "torch.per_channel_affine_float_qparams.")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max,
                         factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", Tensor._make(np.zeros(0, _F32)))
        self.register_buffer("max_val", Tensor._make(np.zeros(0, _F32)))

    def forward(self, x_orig: Tensor) -> Tensor:
        """Record each channel's range of `x_orig`; returns it unchanged."""
        if x_orig.numel() == 0:
            return x_orig
        x = np.moveaxis(x_orig._data.astype(_F32, copy=False), self.ch_axis, 0)
        x = x.reshape(x.shape[0], -1)
        lo, hi = x.min(axis=1), x.max(axis=1)
        if self.min_val._data.size and self.max_val._data.size:
            lo = np.minimum(self.min_val._data, lo)
            hi = np.maximum(self.max_val._data, hi)
        self.min_val = Tensor._make(lo)
        self.max_val = Tensor._make(hi)
        return x_orig

    def reset_min_max_vals(self):
        """Forget the observed ranges."""
        self.min_val = Tensor._make(np.zeros(0, _F32))
        self.max_val = Tensor._make(np.zeros(0, _F32))


class PlaceholderObserver(ObserverBase):
    """Observes nothing: it only carries a dtype (dynamic quantization's activations)."""

    def __init__(self, dtype=_dtype.float32, custom_op_name: str = "", compute_dtype=None,
                 quant_min=None, quant_max=None, qscheme=None, eps=None,
                 is_dynamic: bool = False):
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if qscheme is None:
            qscheme = Q.per_tensor_affine
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.qscheme = qscheme
        self.eps = eps
        self.custom_op = custom_op_name

    def forward(self, x: Tensor) -> Tensor:
        """`x`, unchanged."""
        return x

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self):
        """Refused: a placeholder has no parameters."""
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_weight_observer = MinMaxObserver.with_args(dtype=_dtype.qint8,
                                                   qscheme=Q.per_tensor_symmetric)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=_dtype.qint8, qscheme=Q.per_channel_symmetric)
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=_dtype.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_placeholder_observer = PlaceholderObserver
