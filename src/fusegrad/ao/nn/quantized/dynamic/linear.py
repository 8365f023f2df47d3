"""The dynamically quantized `Linear`: int8 weights, activations quantized per call.

Its forward is PyTorch's x86 (fbgemm) arithmetic, found by experiment: the input's range
(widened to include zero) chooses a quint8 grid on [0, 127] (`reduce_range`) as ATen's
`ChooseQuantizationParams` does (scale in double, then float32; the zero point nudged from
the end with the smaller error); the input is quantized with one rounding of x * (1 / scale)
+ zero_point; the integers multiply and sum exactly (int32 in fbgemm; float64 here, exact
for any realistic width); each sum becomes float32 and is scaled by the float32 product of
the two scales and added to the bias in one fused multiply-add.
"""

from __future__ import annotations

import numpy as np

from ..... import _dtype
from ..... import _quantized as Q
from ....._tensor import Tensor
from .....nn.modules.module import Module

_F32 = np.float32
_F64 = np.float64


def choose_qparams(lo: float, hi: float, qmin: int, qmax: int) -> tuple[float, int]:
    """The (float32 scale, zero point) ATen's dynamic quantization chooses for values in
    [lo, hi] on the integer range [qmin, qmax]."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (qmax - qmin)
    s32 = _F32(scale)
    if s32 == 0 or not np.isfinite(_F32(1) / s32):
        scale = 0.1
    scale = float(_F32(scale))
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    error_min = abs(qmin) - abs(lo / scale)
    error_max = abs(qmax) - abs(hi / scale)
    initial = from_min if error_min < error_max else from_max
    if initial < qmin:
        return scale, qmin
    if initial > qmax:
        return scale, qmax
    return scale, int(np.rint(initial))


class LinearPackedParams(Module):
    """The quantized weight and float bias of a quantized Linear (PyTorch packs them for
    fbgemm; here they are kept as they are)."""

    _version = 3

    def __init__(self, dtype=_dtype.qint8):
        super().__init__()
        self.dtype = dtype
        self._packed_params = (None, None)

    def set_weight_bias(self, weight, bias) -> None:
        """Store the quantized `weight` and float `bias` (or None)."""
        self._packed_params = (weight, bias)

    def _weight_bias(self):
        return self._packed_params

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        for key in ("dtype", "_packed_params"):
            if prefix + key not in state_dict:
                missing_keys.append(prefix + key)
        if prefix + "dtype" in state_dict:
            self.dtype = state_dict.pop(prefix + "dtype")
        if prefix + "_packed_params" in state_dict:
            self.set_weight_bias(*state_dict.pop(prefix + "_packed_params"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, x):
        """`x`, unchanged (as PyTorch's)."""
        return x

    def __repr__(self) -> str:
        return repr(self._weight_bias())


class Linear(Module):
    """`torch.ao.nn.quantized.dynamic.Linear` (printed `DynamicQuantizedLinear`): y = x W^T
    + b with W quantized to qint8 and x quantized on each call."""

    _version = 4

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 dtype=_dtype.qint8):
        super().__init__()
        if dtype is not _dtype.qint8:
            raise NotImplementedError("dynamically quantized Linear supports qint8 weights "
                                      "only here")
        self.in_features = in_features
        self.out_features = out_features
        bias = Tensor._make(np.zeros(out_features, _F32)) if bias_ else None
        weight = Q.quantize_per_tensor(Tensor._make(np.zeros((out_features, in_features),
                                                             _F32)), 1.0, 0, _dtype.qint8)
        self._packed_params = LinearPackedParams(dtype)
        self._packed_params.set_weight_bias(weight, bias)
        self.scale = 1.0
        self.zero_point = 0
        self.version = 4

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        w = self.weight()
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self._packed_params.dtype}, qscheme={w.qscheme()}")

    def __repr__(self) -> str:
        # The packed parameters are not shown as a child, as in PyTorch.
        return f"{self._get_name()}({self.extra_repr()})"

    def weight(self):
        """The quantized weight."""
        return self._packed_params._weight_bias()[0]

    def bias(self):
        """The float bias (or None)."""
        return self._packed_params._weight_bias()[1]

    def set_weight_bias(self, w, b) -> None:
        """Replace the quantized weight and the float bias."""
        self._packed_params.set_weight_bias(w, b)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = Tensor._make(np.array(self.scale, _F32))
        destination[prefix + "zero_point"] = Tensor._make(np.array(self.zero_point, np.int64))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        for key, kind in (("scale", float), ("zero_point", int)):
            value = state_dict.pop(prefix + key, None)
            if value is None:
                missing_keys.append(prefix + key)
            else:
                setattr(self, key, kind(value._data))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, x: Tensor) -> Tensor:
        """The float result of the quantized product (see the module's docstring)."""
        if x._dtype is not _dtype.float32:
            raise RuntimeError(f"expected scalar type Float but found {x._dtype.legacy}")
        w, b = self._packed_params._weight_bias()
        data = x._data
        shape = data.shape
        if not shape or shape[-1] != self.in_features:
            rows = int(np.prod(shape[:-1])) if shape else 1
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                f"{shape[-1] if shape else 1} and {self.in_features}x{self.out_features})")
        flat = data.reshape(-1, self.in_features)
        if flat.size:
            scale, zp = choose_qparams(float(flat.min()), float(flat.max()), 0, 127)
        else:
            scale, zp = 0.1, 0
        xq = Q.quantize_array(flat, scale, zp, _dtype.quint8).astype(_F64) - zp
        if w._qscheme is Q.per_tensor_affine:
            wq = w._data.astype(_F64) - w._qzp
            mult = _F32(scale) * _F32(w._qscale)
        else:
            wq = w._data.astype(_F64) - w._qzp.reshape(-1, 1)
            mult = _F32(scale) * w._qscale.astype(_F32)
        acc = (xq @ wq.T).astype(_F32)  # exact integers, as fbgemm's int32 sums
        if b is None:
            out = acc * mult
        else:
            out = (acc.astype(_F64) * _F64(mult) + b._data.astype(_F64)).astype(_F32)
        return Tensor._make(np.ascontiguousarray(out.reshape(shape[:-1] + (-1,))))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False):
        """The dynamically quantized version of float `nn.Linear` `mod` (its `qconfig`'s
        weight observer chooses the weight's grid)."""
        from .....nn.modules.linear import Linear as FloatLinear
        from .....nn.modules.linear import NonDynamicallyQuantizableLinear

        if type(mod) not in (FloatLinear, NonDynamicallyQuantizableLinear):
            raise AssertionError(
                "nn.quantized.dynamic.Linear.from_float only works for one of "
                "['Linear', 'NonDynamicallyQuantizableLinear']")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        from ....quantization.qconfig import default_dynamic_qconfig

        qconfig = mod.qconfig if mod.qconfig is not None else default_dynamic_qconfig
        observer = qconfig.weight()
        dtype = observer.dtype
        if dtype is not _dtype.qint8:
            raise NotImplementedError(
                f"dynamic quantization of Linear to {dtype} is not supported here yet")
        weight = mod.weight.detach().float()
        observer(weight)
        scale, zero_point = observer.calculate_qparams()
        if observer.qscheme in (Q.per_tensor_affine, Q.per_tensor_symmetric):
            qweight = Q.quantize_per_tensor(weight, float(scale._data[0]),
                                            int(zero_point._data[0]), _dtype.qint8)
        else:
            qweight = Q.quantize_per_channel(
                weight, Tensor._make(scale._data.astype(_F64)),
                Tensor._make(zero_point._data.astype(np.int64)), observer.ch_axis,
                _dtype.qint8)
        qlinear = cls(mod.in_features, mod.out_features, dtype=dtype)
        qlinear.set_weight_bias(qweight, mod.bias)
        return qlinear
