"""Quantized tensors: integers on an affine grid, as PyTorch's `torch.qint8` tensors.

A `QuantizedTensor` is a Tensor subclass whose `_data` is the integer representation (int8,
uint8 or int32: what `int_repr()` returns) and whose dtype is a quantized one (`qint8`,
`quint8`, `qint32`, `quint4x2`). It carries its quantization parameters: a scheme
(`per_tensor_affine` or `per_channel_affine`), the scale (a float, or a float64 array per
channel), the zero point (an int, or an int64 array per channel) and, per channel, the axis.
The value it stands for is `(int_repr - zero_point) * scale`.

It is not a plain tensor (`_plain = False`), so every op it reaches takes dispatch's slow
path and the dense fast path pays nothing for it (the precedent of `_sparse.py`). There the
ops PyTorch runs on quantized tensors by moving their integers (the registry's view ops,
and the ops `ops/quantize.py` lists: clone, indexing) run their ordinary kernel on the
integer representation and keep the parameters; an op that would compute with the values
raises PyTorch's "Could not run ... 'QuantizedCPU' backend" error, never a result computed
from the integers.

PyTorch's CPU rounding, found by experiment: q = nearbyint(x * (1 / scale) + zero_point)
with the reciprocal in float32 and the product and sum fused (one rounding: fbgemm's
vectorised `fmadd`) for the 8-bit types; for qint32 the product and the sum are each rounded
to float32, and for quint4x2 the zero point is added after rounding. Then clamped to the
type's range. Dequantization is `(q - zero_point) * scale`
in float32 per tensor, in float64 (then float32) per channel.
"""

from __future__ import annotations

import numpy as np

from . import _dtype
from ._dispatch import call
from ._sparse import backend_error
from ._tensor import Tensor
from ._torch_function import _disabled_torch_function_impl, warn_once_at


class qscheme:  # noqa: N801 - PyTorch's class name
    """How a quantized tensor maps integers to values: `fusegrad.per_tensor_affine`, ..."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self) -> str:
        return self._name  # pickled as the module's global of that name, as PyTorch's


qscheme.__module__ = "fusegrad"
per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")

# Each quantized dtype's integer range.
RANGES = {_dtype.qint8: (-128, 127), _dtype.quint8: (0, 255),
          _dtype.qint32: (-(2 ** 31), 2 ** 31 - 1), _dtype.quint4x2: (0, 15)}

_F32 = np.float32
_F64 = np.float64


def quantize_array(x: np.ndarray, scale, zero_point, dtype: _dtype.dtype) -> np.ndarray:
    """The integer representation of float32 array `x` on the grid (`scale`, `zero_point`:
    numbers, or arrays broadcasting against `x`) of quantized `dtype`, rounded as PyTorch's
    CPU kernels round (see the module's docstring)."""
    qmin, qmax = RANGES[dtype]
    inv = _F32(1) / np.asarray(scale, _F32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if dtype is _dtype.qint32:
            q = np.rint(x * inv + np.asarray(zero_point).astype(_F32))
        elif dtype is _dtype.quint4x2:  # (ATen's scalar loop: the zero point after rounding)
            q = np.rint(x * inv) + zero_point
        else:
            # float32 * float32 is exact in float64 and adding the zero point rounds far
            # below float32's precision: the rounding to float32 is the fused multiply-add's
            # (but for double rounding's vanishingly rare ties).
            q = np.rint((x.astype(_F64) * inv.astype(_F64) + zero_point).astype(_F32))
        # (in float64: qint32's bounds are not float32 numbers) NaN becomes the top of the
        # range for the 8-bit types and the bottom for qint32, as PyTorch's kernels give.
        q = np.clip(q.astype(_F64), qmin, qmax)
        q = np.nan_to_num(q, nan=qmin if dtype is _dtype.qint32 else qmax)
    return q.astype(dtype.storage)


def _new(data: np.ndarray, dtype, scheme: qscheme, scale, zero_point, axis=None):
    t = Tensor._make.__func__(QuantizedTensor, data, dtype)
    t._qscheme = scheme
    t._qscale = scale
    t._qzp = zero_point
    t._qaxis = axis
    return t


def _warn_deprecated() -> None:
    """PyTorch's once-per-process warning at the first quantized tensor a program makes
    (called by the public constructors)."""
    warn_once_at(3, "torch.quantize_per_tensor, torch.quantize_per_channel and other "
                 "quantized tensor creation functions that produce tensors with dtype "
                 "torch.quint8, torch.qint8, and torch.qint32 are deprecated and will be "
                 "removed in a future PyTorch release. Please see "
                 "https://github.com/pytorch/pytorch/issues/184982 for more information.")


def _check_dtype(dtype) -> None:
    if dtype not in RANGES:
        name = dtype.legacy if isinstance(dtype, _dtype.dtype) else dtype
        raise RuntimeError(f"ScalarType {name} is not supported in new_qtensor.")


def _number(value, kind):
    """A Python number from a number or a one-element tensor."""
    if isinstance(value, Tensor):
        value = value._data.item() if value._data.size == 1 else value
    return kind(value)


def quantize_per_tensor(input, scale, zero_point, dtype):
    """Quantize float tensor `input` (or each tensor of a list, with tensors of scales and
    zero points) on the grid (`scale`, `zero_point`) of quantized `dtype`."""
    if isinstance(input, (list, tuple)):
        scales = np.asarray(scale._data if isinstance(scale, Tensor) else scale).reshape(-1)
        zps = np.asarray(zero_point._data if isinstance(zero_point, Tensor) else zero_point)
        zps = zps.reshape(-1)
        return tuple(quantize_per_tensor(t, float(s), int(z), dtype)
                     for t, s, z in zip(input, scales, zps))
    _check_dtype(dtype)
    if input._dtype is not _dtype.float32:
        raise RuntimeError(f"Quantize only works on Float Tensor, got {input._dtype.legacy}")
    scale = _number(scale, float)
    zero_point = _number(zero_point, int)
    qmin, qmax = RANGES[dtype]
    if zero_point > qmax:
        raise RuntimeError(f"quantize_tensor_per_tensor_affine zero_point {zero_point} is "
                           "above upper bound.")
    if zero_point < qmin:
        raise RuntimeError(f"quantize_tensor_per_tensor_affine zero_point {zero_point} is "
                           "below lower bound.")
    data = quantize_array(input._data, scale, zero_point, dtype)
    _warn_deprecated()
    return _new(data, dtype, per_tensor_affine, scale, zero_point)


def quantize_per_channel(input, scales, zero_points, axis: int, dtype):
    """Quantize float tensor `input` with a scale and zero point per index of dimension
    `axis` (`scales`, `zero_points`: 1-d tensors)."""
    for name, value, pos in (("scales", scales, 2), ("zero_points", zero_points, 3)):
        if not isinstance(value, Tensor):
            raise TypeError(f"quantize_per_channel(): argument '{name}' (position {pos}) "
                            f"must be Tensor, not {type(value).__name__}")
    _check_dtype(dtype)
    if dtype is _dtype.quint4x2:
        raise NotImplementedError(
            '"quantize_tensor_per_channel_affine" not implemented for \'QUInt4x2\'')
    if input._dtype is not _dtype.float32:
        raise RuntimeError("quantize_tensor_per_channel_affine expects a Float Tensor, got "
                           f"{input._dtype.legacy}")
    s = scales._data.astype(_F64).reshape(-1)
    z = zero_points._data.astype(np.int64).reshape(-1)
    if s.size != z.size:
        raise RuntimeError("number of elements in scales and zero_points must match")
    ndim = input._data.ndim
    if not 0 <= axis < ndim:
        raise RuntimeError("Channel axis out of range in per channel affine quantization. "
                           f"Got: {axis}Expected: [0, {ndim})")
    if s.size != input._data.shape[axis]:
        raise RuntimeError(f"length of scales must equal to channel, expected "
                           f"{input._data.shape[axis]} got, {s.size}")
    qmin, qmax = RANGES[dtype]
    for bound, bad in (("above upper", z > qmax), ("below lower", z < qmin)):
        if bad.any():
            raise RuntimeError(f"quantize_tensor_per_channel_affine zero_point "
                               f"{int(z[bad][0])} is {bound} bound.")
    shape = [1] * ndim
    shape[axis] = -1
    data = quantize_array(input._data, s.reshape(shape), z.reshape(shape), dtype)
    _warn_deprecated()
    return _new(data, dtype, per_channel_affine, s, z, axis)


def dequantize_array(t: QuantizedTensor) -> np.ndarray:
    """The float32 values quantized tensor `t` stands for."""
    if t._qscheme is per_tensor_affine:
        return (t._data.astype(_F32) - _F32(t._qzp)) * _F32(t._qscale)
    ndim, axis = t._data.ndim, t._qaxis
    # (a per-channel tensor's views keep its parameters as PyTorch's do, which can leave them
    # out of step with the shape: PyTorch refuses those here)
    if not 0 <= axis < ndim:
        raise RuntimeError("Channel axis out of range in per channel affine dequantization. "
                           f"Got:{axis} Expected: [0, {ndim})")
    if t._qscale.size != t._data.shape[axis]:
        raise RuntimeError(f"length of scales must equal to channel, expected "
                           f"{t._data.shape[axis]} got, {t._qscale.size}")
    shape = [1] * ndim
    shape[axis] = -1
    q = t._data.astype(np.int64) - t._qzp.reshape(shape)
    return (q * t._qscale.reshape(shape)).astype(_F32)


def dequantize(tensor):
    """The float tensor a quantized tensor stands for (a float tensor itself; a tuple for a
    list of tensors)."""
    if isinstance(tensor, (list, tuple)):
        return tuple(dequantize(t) for t in tensor)
    if isinstance(tensor, QuantizedTensor):
        return Tensor._make(dequantize_array(tensor), _dtype.float32)
    return dequantize_dense(tensor)


def dequantize_dense(tensor: Tensor) -> Tensor:
    """`dequantize` of a tensor that is not quantized: the tensor itself when float32, else
    a float32 copy (as PyTorch's)."""
    return tensor if tensor.dtype is _dtype.float32 else tensor.to(_dtype.float32)


def _dense_only(name: str):
    """Tensor method `name` of quantized tensors, on one that is not: PyTorch's error."""
    def method(self):  # (no arguments, as PyTorch's: `out=` is a TypeError)
        raise backend_error(name, "SparseCPU" if self.is_sparse else "CPU")

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{name}` of a tensor that is not quantized: PyTorch's error."
    return method


# (the names are the Tensor methods' own: the spellings table points at them)
q_scale = _dense_only("q_scale")
q_zero_point = _dense_only("q_zero_point")
q_per_channel_scales = _dense_only("q_per_channel_scales")
q_per_channel_zero_points = _dense_only("q_per_channel_zero_points")
q_per_channel_axis = _dense_only("q_per_channel_axis")
int_repr = _dense_only("int_repr")
dense_qscheme = _dense_only("qscheme")


_SETTING_STRIDES = "Setting strides is possible only on uniformly quantized tensor"


def _op_error(op, args) -> Exception:
    """PyTorch's error for registry op `op` given a quantized tensor it has no kernel for."""
    name = op.name
    rule = op.quantized or _NO_RULE
    if rule.get("refuses_number") and not any(isinstance(a, Tensor) for a in args[1:]):
        return RuntimeError("empty_strided not supported on quantized tensors yet see "
                            "https://github.com/pytorch/pytorch/issues/74540")
    if name == "_to_copy":
        return RuntimeError("Creation of quantized tensor requires quantized dtype like "
                            "torch.quint8")
    base = name.split(".")[0]
    return backend_error(rule.get("error", f"{base}.out"), "QuantizedCPU")


def _flat(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _raw(value):
    """An op argument as kernels take it: arrays for tensors, in lists too."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, (list, tuple)):
        return type(value)(_raw(v) for v in value)
    return value


class QuantizedTensor(Tensor):
    """A quantized tensor: `_data` holds the integers, the `_q*` slots the parameters."""

    __slots__ = ("_qscheme", "_qscale", "_qzp", "_qaxis")
    _plain = False
    # Ops reach this class's `_compute`; the protocol's default handler would re-wrap.
    __torch_function__ = _disabled_torch_function_impl

    @classmethod
    def _compute(cls, op, args):
        name = op.name
        rule = op.quantized or _NO_RULE  # (`OpDef.quantized`: how this class takes the op)
        kernel = rule.get("kernel")
        if kernel is not None:
            return _KERNELS[kernel](op, args)
        q = next(a for a in _flat(args) if isinstance(a, QuantizedTensor))
        per_channel = rule.get("per_channel")
        if q._qscheme is not per_tensor_affine and per_channel not in (None, "moves"):
            return _KERNELS[per_channel](op, q, args)
        if name == "relu" and q._dtype is _dtype.quint4x2:
            raise NotImplementedError('"qrelu" not implemented for \'QUInt4x2\'')
        if name == "relu" and q._qscheme is per_tensor_affine:
            # max(x, 0) on the grid is the integer maximum with the zero point's integer.
            return _new(np.maximum(q._data, q._data.dtype.type(q._qzp)), *q._params())
        if rule.get("indexing"):
            if any(isinstance(a, QuantizedTensor) for a in _flat(args[1:])):
                raise _op_error(op, args)
        elif not (op.view or rule.get("moves")) or any(
                isinstance(a, (Tensor, _dtype.dtype)) and a is not q for a in args):
            # (a view to another dtype would reinterpret the integers)
            raise _op_error(op, args)
        if q._qscheme is not per_tensor_affine and per_channel != "moves":
            if op.permutes:
                raise RuntimeError(_SETTING_STRIDES)
            raise backend_error(name.split(".")[0], "QuantizedCPU")
        raw = [_raw(a) for a in args]
        out = op.kernel(*raw)
        params = q._params()
        if isinstance(out, (tuple, list)):
            return type(out)(_new(o, *params) for o in out)
        return _new(out, *params)

    # ------------------------------------------------------------ quantization

    @property
    def is_quantized(self) -> bool:
        """True: this tensor is quantized."""
        return True

    def qscheme(self) -> qscheme:
        """The quantization scheme."""
        return self._qscheme

    def _expect(self, per_tensor: bool) -> None:
        if per_tensor and self._qscheme is not per_tensor_affine:
            raise RuntimeError(
                "Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false."
                "  (Could this error message be improved?  If so, please report an "
                "enhancement request to PyTorch.)")
        if not per_tensor and self._qscheme is per_tensor_affine:
            raise RuntimeError(
                "Expected quantizer->qscheme() == kPerChannelAffine || quantizer->qscheme() "
                "== kPerChannelAffineFloatQParams to be true, but got false.  (Could this "
                "error message be improved?  If so, please report an enhancement request to "
                "PyTorch.)")

    def q_scale(self) -> float:
        """The scale of a per-tensor quantized tensor."""
        self._expect(True)
        return self._qscale

    def q_zero_point(self) -> int:
        """The zero point of a per-tensor quantized tensor."""
        self._expect(True)
        return self._qzp

    def q_per_channel_scales(self) -> Tensor:
        """The scales (float64) of a per-channel quantized tensor."""
        self._expect(False)
        return Tensor._make(self._qscale.copy(), _dtype.float64)

    def q_per_channel_zero_points(self) -> Tensor:
        """The zero points (int64) of a per-channel quantized tensor."""
        self._expect(False)
        return Tensor._make(self._qzp.copy(), _dtype.int64)

    def q_per_channel_axis(self) -> int:
        """The dimension a per-channel quantized tensor's parameters run along."""
        self._expect(False)
        return self._qaxis

    def int_repr(self) -> Tensor:
        """The integers, as an int8, uint8 or int32 tensor (a copy); quint4x2's packed two
        to a byte (the first in the low half), as PyTorch stores them."""
        if self._dtype is _dtype.quint4x2:
            flat = self._data.reshape(-1)
            if flat.size % 2:
                flat = np.concatenate([flat, np.zeros(1, np.uint8)])
            return Tensor._make((flat[0::2] | (flat[1::2] << 4)).astype(np.uint8))
        return Tensor._make(np.array(self._data, copy=True))

    def dequantize(self) -> Tensor:
        """The float32 tensor this tensor stands for."""
        return dequantize(self)

    # ------------------------------------------------------------ conversions

    def _params(self) -> tuple:
        return (self._dtype, self._qscheme, self._qscale, self._qzp, self._qaxis)

    def detach(self) -> QuantizedTensor:
        """A quantized tensor sharing data and version counter, outside the graph."""
        t = _new(self._data, *self._params())
        t._vc = self._vc
        return t

    @property
    def data(self) -> QuantizedTensor:
        """This tensor's data as a new quantized tensor outside autograd."""
        return _new(self._data, *self._params())

    def _shallow_copy(self) -> QuantizedTensor:
        t = Tensor._shallow_copy(self)
        t._qscheme, t._qscale, t._qzp, t._qaxis = self._params()[1:]
        return t

    def item(self):
        """The value of a one-element tensor, dequantized."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        return float(dequantize_array(self).reshape(()))

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return self.item()

    def tolist(self):
        raise RuntimeError("load_scalar: invalid type")

    def numpy(self, *, force: bool = False):
        raise TypeError(f"Got unsupported ScalarType {self._dtype.legacy}")

    def __deepcopy__(self, memo):
        t = _new(self._data.copy(), *self._params())
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        return (_rebuild, (np.array(self._data), self._dtype.name, self._qscheme._name,
                           self._qscale, self._qzp, self._qaxis))

    def __repr__(self, *, tensor_contents=None) -> str:
        from . import _printing  # loaded on the first repr

        items = [f"size={tuple(self._data.shape)}", f"dtype={self._dtype!r}",
                 f"quantization_scheme={self._qscheme!r}"]
        if self._qscheme is per_tensor_affine:
            items += [f"scale={self._qscale!r}", f"zero_point={self._qzp!r}"]
        else:
            items += [f"scale={Tensor._make(self._qscale, _dtype.float64)!r}",
                      f"zero_point={Tensor._make(self._qzp, _dtype.int64)!r}",
                      f"axis={self._qaxis}"]
        return _printing.format_tensor(dequantize_array(self), "float32",
                                       _dtype.defaults.float.name, items)


# ---------------------------------------------------------------- ops with kernels of their own

_PER_TENSOR_ONLY = ("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got "
                    "false.  (Could this error message be improved?  If so, please report an "
                    "enhancement request to PyTorch.)")


def _float(t: Tensor) -> np.ndarray:
    """An operand's values: a quantized tensor's dequantized, another's own."""
    return dequantize_array(t) if isinstance(t, QuantizedTensor) else t._data


def _quantize_like(values: np.ndarray, q: QuantizedTensor) -> np.ndarray:
    """Float32 `values` (of `q`'s shape, or broadcasting to it) on `q`'s grid."""
    if q._qscheme is per_tensor_affine:
        return quantize_array(values, q._qscale, q._qzp, q._dtype)
    shape = [1] * q._data.ndim
    shape[q._qaxis] = -1
    return quantize_array(values, q._qscale.reshape(shape), q._qzp.reshape(shape), q._dtype)


def _mean(op, args):
    # PyTorch's quantized mean: the float mean of the values, quantized on the input's grid.
    q = args[0]
    if q._qscheme is not per_tensor_affine:
        raise RuntimeError(_PER_TENSOR_ONLY)
    # (the dtype: mean's second argument, mean.dim's fourth; absent when not given)
    given = args[1:2] if op.name == "mean" else args[3:4]
    dtype = given[0] if given else None
    if dtype is not None:
        raise RuntimeError(f"ScalarType {dtype.legacy} is not supported in new_qtensor.")
    values = np.asarray(op.kernel(dequantize_array(q), *args[1:]), _F32)
    return _new(quantize_array(values, q._qscale, q._qzp, q._dtype), *q._params())


def _cat(op, args):
    # The first tensor's grid; the others' values are quantized on it.
    tensors = list(args[0])
    if not all(isinstance(t, QuantizedTensor) for t in tensors):
        raise backend_error("qscheme", "CPU")
    first = tensors[0]
    if any(t._qscheme is not per_tensor_affine for t in tensors):
        raise RuntimeError("Only per-tensor quantization is supported in 'cat'!")
    if any(t._dtype is not first._dtype for t in tensors):
        raise RuntimeError("All dtypes must be the same.")
    ints = [t._data if (t._qscale, t._qzp) == (first._qscale, first._qzp) else
            quantize_array(dequantize_array(t), first._qscale, first._qzp, first._dtype)
            for t in tensors]
    # (the ordinary op on the integers: its shape checks and messages are PyTorch's)
    out = call(op, [Tensor._make(i) for i in ints], *args[1:])
    return _new(out._data, *first._params())


def _compare(op, args):
    # PyTorch compares the values: quantized operands dequantized.
    raw = [_float(a) if isinstance(a, Tensor) else a for a in args]
    return Tensor._make(np.asarray(op.kernel(*raw)))


def _fill(op, args):
    q, value = args[0], args[1]
    if not isinstance(q, QuantizedTensor):  # a plain tensor filled with a quantized value
        return call(op, q, Tensor._make(dequantize_array(value), _dtype.float32))
    if isinstance(value, Tensor):
        value = _float(value)
    values = np.broadcast_to(np.asarray(value, _F32), q._data.shape)
    q._data[...] = _quantize_like(values, q)
    q._vc[0] += 1
    return q


def _copy(op, args):
    self, src = args[0], args[1]
    if not isinstance(self, QuantizedTensor):
        raise RuntimeError("Copying from quantized Tensor to non-quantized Tensor is not "
                           "allowed, please use dequantize to get a float Tensor from a "
                           "quantized Tensor")
    if isinstance(src, QuantizedTensor):  # the integers and the parameters
        if src._dtype is not self._dtype:
            raise RuntimeError(
                "Expected self.scalar_type() == src.scalar_type() to be true, but got false."
                "  (Could this error message be improved?  If so, please report an "
                "enhancement request to PyTorch.)")
        if src._data.shape != self._data.shape:
            raise RuntimeError("Quantized copy only works with Tensors with the same shape")
        self._data[...] = src._data
        self._qscheme, self._qscale, self._qzp, self._qaxis = src._params()[1:]
    else:  # float values, quantized on self's grid
        if src._dtype is not _dtype.float32:
            raise RuntimeError("Quantized copy only works with kFloat as source Tensor")
        if src._data.shape != self._data.shape:
            raise RuntimeError("Quantized copy only works with Tensors with the same shape")
        self._data[...] = _quantize_like(src._data, self)
    self._vc[0] += 1
    return self


def _repeat(op, args):
    q = args[0]
    if q._qscheme is not per_tensor_affine:
        raise RuntimeError(_SETTING_STRIDES)
    return _new(op.kernel(q._data, *args[1:]), *q._params())


def _channel(q: QuantizedTensor, index: int) -> tuple:
    """Per-tensor parameters of channel `index` of per-channel tensor `q`."""
    return (q._dtype, per_tensor_affine, float(q._qscale[index]), int(q._qzp[index]))


def _select_per_channel(op, q, args):
    dim, index = args[1], args[2]
    ndim = q._data.ndim
    dim = dim + ndim if dim < 0 else dim
    data = op.kernel(q._data, *args[1:])
    if dim == q._qaxis:  # one channel: a per-tensor tensor with its parameters
        n = q._data.shape[dim]
        return _new(data, *_channel(q, index + n if index < 0 else index))
    # (PyTorch moves the axis down whichever dimension goes: past the axis, that leaves it
    # out of step, and dequantizing refuses it)
    return _new(data, q._dtype, q._qscheme, q._qscale, q._qzp, q._qaxis - 1)


def _slice_per_channel(op, q, args):
    dim = args[1] if len(args) > 1 else 0
    dim = dim + q._data.ndim if dim < 0 else dim
    data = op.kernel(q._data, *args[1:])
    if dim != q._qaxis:
        return _new(data, *q._params())
    start, end, step = (list(args[2:]) + [None, None, 1])[:3]
    kept = np.arange(q._data.shape[dim])[slice(start, end, step)]
    if kept.size == 1:  # one channel left: PyTorch makes it a per-tensor tensor
        return _new(data, *_channel(q, int(kept[0])))
    return _new(data, q._dtype, q._qscheme, q._qscale[kept], q._qzp[kept], q._qaxis)


def _unsqueeze_per_channel(op, q, args):
    dim = args[1]
    dim = dim + q._data.ndim + 1 if dim < 0 else dim
    axis = q._qaxis + 1 if dim <= q._qaxis else q._qaxis
    return _new(op.kernel(q._data, *args[1:]), q._dtype, q._qscheme, q._qscale, q._qzp, axis)


def _squeeze_per_channel(op, q, args):
    shape, ndim = q._data.shape, q._data.ndim
    if len(args) == 1:
        dims = range(ndim)
    else:
        dims = args[1] if isinstance(args[1], (tuple, list)) else (args[1],)
    data = op.kernel(q._data, *args[1:])  # (first: its errors for a dimension out of range)
    gone = {d + ndim if d < 0 else d for d in dims}
    gone = {d for d in gone if shape[d] == 1}
    if q._qaxis in gone:
        raise RuntimeError("Squeeze is only possible on non-axis dimension for Per-Channel "
                           "Quantized Tensors.")
    axis = q._qaxis - sum(d < q._qaxis for d in gone)
    return _new(data, q._dtype, q._qscheme, q._qscale, q._qzp, axis)


def _view_per_channel(op, q, args):
    # PyTorch keeps the parameters as they are, whatever the new shape (dequantizing checks)
    return _new(op.kernel(q._data, *args[1:]), *q._params())


_NO_RULE: dict = {}
# (the ops' `OpDef.quantized` rules name this module's kernels: `kernel`, `per_channel`)
_KERNELS = globals()


def equal(a: Tensor, b: Tensor) -> bool:
    """`torch.equal` where either tensor is quantized, as PyTorch's: both quantized, with one
    dtype, scheme, shape and parameters (scale and zero point, or per channel the scales,
    zero points and axis), and the same integers."""
    if not (isinstance(a, QuantizedTensor) and isinstance(b, QuantizedTensor)):
        return False
    if a._dtype is not b._dtype or a._qscheme is not b._qscheme or a._qaxis != b._qaxis or \
            tuple(a.shape) != tuple(b.shape):
        return False
    return bool(np.array_equal(a._qscale, b._qscale) and np.array_equal(a._qzp, b._qzp) and
                np.array_equal(a._data, b._data))


def pickled_params(t: QuantizedTensor) -> tuple:
    """The quantizer parameters PyTorch's checkpoints give quantized tensor `t`: (scheme,
    scale, zero point) per tensor, (scheme, scales, zero points, axis) per channel."""
    if t._qscheme is per_tensor_affine:
        return (t._qscheme, float(t._qscale), int(t._qzp))
    return (t._qscheme, Tensor._make(t._qscale, _dtype.float64),
            Tensor._make(t._qzp, _dtype.int64), int(t._qaxis))


def _rebuild(data, dtype_name, scheme_name, scale, zero_point, axis):
    """Unpickle a quantized tensor written by `QuantizedTensor.__reduce_ex__`."""
    return _new(data, _dtype.BY_NAME[dtype_name], globals()[scheme_name], scale, zero_point,
                axis)
