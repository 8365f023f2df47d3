"""Lowering's pointwise layer: the helpers every lowering shares and `PointwiseOps`, the
elementwise part of the expression builder (arithmetic, comparisons, floating functions,
conversions) whose results are lazy `Pointwise` IR values. `lower.py` describes lowerings.
"""

from __future__ import annotations

from typing import Any

from ... import _dtype
from ...ops.registry import OpDef
from .ir import (
    Buffer,
    Const,
    IInt,
    Op,
    Pointwise,
    PythonCall,
    is_float,
)


class NotLowered(Exception):
    """A lowering cannot handle these arguments: the op runs as an extern call."""


def resolve_op(target: Any) -> OpDef | None:
    """The registry entry a graph target stands for (None for anything else)."""
    for _ in range(3):
        if isinstance(target, OpDef):
            return target
        target = getattr(target, "opdef", None) or getattr(target, "op", None)
        if target is None:
            return None
    return None


class _DtypeShim:
    """What `_dtype.result_type` reads of a tensor: its dtype and its number of dims."""

    __slots__ = ("_dtype", "ndim")

    def __init__(self, dtype, ndim):
        self._dtype, self.ndim = dtype, ndim


# Dtypes the C renderer has types for; half types stay with the NumPy kernels.
SUPPORTED = {_dtype.float32, _dtype.float64, _dtype.int64, _dtype.int32, _dtype.int16,
             _dtype.int8, _dtype.uint8, _dtype.bool_}


def body_at(value: Any, index: tuple):
    """The value expression of IR tensor `value` at `index`."""
    if isinstance(value, Buffer):
        return value.load(index)
    return value.body(index)


def _broadcast(shapes) -> tuple:
    out: list = []
    for s in shapes:
        s = tuple(s)
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        for i, n in enumerate(s, len(out) - len(s)):
            if out[i] == 1:
                out[i] = n
            elif n not in (1, out[i]):
                raise NotLowered(f"shapes {shapes} do not broadcast")
    return tuple(out)


def _wrap(d: int, n: int) -> int:
    return d + n if d < 0 else d


def is_tensor(x: Any) -> bool:
    """True for an IR tensor value."""
    return isinstance(x, (Buffer, Pointwise))


class PointwiseOps:
    """Elementwise tensor-level ops whose results are lazy IR.

    Arithmetic follows eager's dtype rules (`_dtype.result_type`); floating functions of
    integer tensors compute in the default float dtype, as eager's kernels do. `graph` is
    the `GraphLowering` that effects, calls and reductions register computations with.
    """

    def __init__(self, graph: Any):
        self.graph = graph

    # ------------------------------------------------------------ helpers

    def dtype_of(self, x: Any):
        """The dtype of an IR value, or None for a Python number (weak)."""
        return x.dtype if is_tensor(x) else None

    def promote(self, *xs):
        """Eager's result dtype of combining `xs` (tensors and Python numbers; a float input
        of the graph is a Python float, and numbers alone compute in double, as Python)."""
        xs = [x for x in xs if x is not None]
        if any(_is_weak(x) for x in xs) and all(_is_weak(x) or not is_tensor(x) for x in xs):
            return _dtype.float64
        ops = [0.5 if _is_weak(x) else _DtypeShim(x.dtype, len(x.shape)) if is_tensor(x)
               else x for x in xs]
        return _dtype.result_type(*ops)

    def pointwise(self, name: str, *args, dtype=None, compute=None) -> Pointwise:
        """`name(args)` elementwise with broadcasting; operands are cast to `compute` (the
        promoted dtype by default) and the result has `dtype` (default: `compute`)."""
        compute = compute or self.promote(*args)
        dtype = dtype or compute
        for d in (compute, dtype, *(a.dtype for a in args if is_tensor(a))):
            if d not in SUPPORTED:  # (an operand too: a kernel would load it)
                raise NotLowered(f"dtype {d!r} has no C type")
        shape = _broadcast([a.shape for a in args if is_tensor(a)])

        def fn(index):
            operands = [self._element(a, index, shape, compute) for a in args]
            return Op(name, tuple(operands), dtype)

        out = Pointwise(shape, dtype, fn)
        if dtype is _dtype.float64 and any(_is_weak(a) for a in args) and \
                all(_is_weak(a) or not is_tensor(a) for a in args):
            out.weak = True  # arithmetic on float inputs alone: still a Python float
        return out

    def _element(self, a, index, shape, dtype):
        if not is_tensor(a):
            if isinstance(a, bool) and dtype is not _dtype.bool_:
                a = int(a)
            return Const(a, dtype)
        lead = len(shape) - len(a.shape)
        idx = tuple(IInt(0) if n == 1 and shape[lead + i] != 1 else index[lead + i]
                    for i, n in enumerate(a.shape))
        e = body_at(a, idx)
        return e if a.dtype is dtype else Op("cast", (e,), dtype)

    def to(self, x, dtype) -> Any:
        """`x` converted to `dtype` (eager's conversion: C's, booleans as `!= 0`)."""
        if is_tensor(x) and x.dtype is dtype:
            return x
        return self.pointwise("cast", x, dtype=dtype, compute=self.dtype_of(x) or dtype)

    def floating(self, x) -> Any:
        """`x`, converted to the default float dtype when it is not floating."""
        dt = self.dtype_of(x)
        if dt is None or not is_float(dt):
            return self.to(x, _dtype.defaults.float)
        return x

    def effect(self, fn, *args) -> None:
        """Call `fn(*args)` between kernels for its effect (tensors as NumPy arrays), in graph
        order: a check that raises as eager does. No value."""
        self.graph.extern(PythonCall(getattr(fn, "__name__", "call"), fn), args, {}, [])

    def call(self, fn, shape, dtype, *args):
        """Call Python function `fn(*args)` between kernels, in graph order (tensors as
        NumPy arrays); its result, a NumPy array of `shape` and `dtype`, is a buffer (the
        values of a random factory, drawn when the graph runs)."""
        return self.graph.extern(PythonCall(getattr(fn, "__name__", "call"), fn), args, {},
                                 (tuple(shape), dtype))

    def unsupported(self, why: str):
        """Give up on this node: it runs as an extern call of its NumPy kernel."""
        raise NotLowered(why)

    # ------------------------------------------------------------ arithmetic

    def add(self, a, b):
        """a + b."""
        return self.pointwise("add", a, b)

    def sub(self, a, b):
        """a - b."""
        return self.pointwise("sub", a, b)

    def mul(self, a, b):
        """a * b."""
        if not is_tensor(a) and not is_tensor(b):
            return a * b
        if not is_tensor(b) and not isinstance(b, bool) and b == 1 and is_tensor(a):
            return a
        return self.pointwise("mul", a, b)

    def clamp(self, a, lo=None, hi=None):
        """a limited to [lo, hi] (either may be None); NaN stays NaN."""
        x = self.to(a, self.promote(a, lo, hi))
        # The bound first: maximum/minimum return their second operand on a tie, and
        # PyTorch's clamp keeps x there (its zero's sign).
        if lo is not None:
            x = self.maximum(lo, x)
        if hi is not None:
            x = self.minimum(hi, x)
        return x

    def truediv(self, a, b):
        """a / b in floating point (integers convert first)."""
        dt = self.promote(a, b)
        if not is_float(dt):
            dt = _dtype.defaults.float
        return self.pointwise("truediv", a, b, compute=dt)

    def neg(self, a):
        """-a."""
        return self.pointwise("neg", a)

    def abs(self, a):
        """|a| (|-0.0| is 0.0)."""
        return self.pointwise("abs", a)

    def maximum(self, a, b):
        """The larger of a and b; NaN if either is NaN."""
        return self.pointwise("maximum", a, b)

    def minimum(self, a, b):
        """The smaller of a and b; NaN if either is NaN."""
        return self.pointwise("minimum", a, b)

    def where(self, cond, a, b):
        """cond ? a : b, with a and b promoted together."""
        dt = self.promote(a, b)
        cond = self.to(cond, _dtype.bool_)
        a, b = self.to(a, dt), self.to(b, dt)
        return self.pointwise("where", cond, a, b, dtype=dt, compute=dt)

    def compare(self, name: str, a, b):
        """One of eq ne lt le gt ge; a bool result."""
        return self.pointwise(name, a, b, dtype=_dtype.bool_)

    def logical_not(self, a):
        """not a, as bool."""
        return self.pointwise("logical_not", self.to(a, _dtype.bool_))

    # ------------------------------------------------------------ floating functions

    def unary(self, name: str, a):
        """A floating function (exp, log, sin, cos, tanh, sqrt, rsqrt, sigmoid, ...)."""
        return self.pointwise(name, self.floating(a))

    def pow_scalar(self, a, exponent):
        """a ** exponent for a Python number exponent."""
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
            raise NotLowered("pow with a non-number exponent")
        dt = self.promote(a, exponent)
        if exponent == 1:
            return self.to(a, dt)
        if exponent == 2:
            a = self.to(a, dt)
            return self.mul(a, a)
        if not is_float(dt):
            raise NotLowered("integer powers stay with the NumPy kernel")
        if exponent == 0.5:  # as eager (and torch): sqrt's -0.0 and -inf results
            return self.unary("sqrt", self.to(a, dt))
        if exponent == -1:
            return self.truediv(1, self.to(a, dt))
        if dt in (_dtype.float32, _dtype.float64) and exponent in (3, -2, -0.5):
            # Eager's products and divisions for these powers (ops/arithmetic.py's
            # `_PRODUCT_POWERS`, PyTorch's bits): pow(-0.0, -0.5) would be +inf, not -inf.
            a = self.to(a, dt)
            if exponent == 3:
                return self.mul(self.mul(a, a), a)
            if exponent == -2:
                return self.truediv(1, self.mul(a, a))
            return self.truediv(1, self.unary("sqrt", a))
        return self.pointwise("pow", a, float(exponent), compute=dt)

    def bitwise(self, name: str, *args):
        """bitwise_not / bitwise_and / bitwise_or / bitwise_xor of integer or bool values."""
        dt = self.promote(*args)
        if dt is None or is_float(dt) or dt not in SUPPORTED:
            raise NotLowered("bitwise op of floating values")
        return self.pointwise(name, *args, compute=dt)

    def float_class(self, kind: str, x):
        """isnan / isinf / isfinite (`kind`): an integer or bool tensor is never NaN or
        infinite."""
        _tensor_of_c_type(x)
        if kind == "isnan":
            return self.compare("ne", x, x)
        if not is_float(x.dtype):
            return self.compare("eq" if kind == "isfinite" else "ne", x, x)
        return self.compare("lt" if kind == "isfinite" else "eq", self.abs(x), float("inf"))


def _tensor_of_c_type(x) -> None:
    """Raise NotLowered unless `x` is an IR tensor of a dtype the C renderer has."""
    if not is_tensor(x) or x.dtype not in SUPPORTED:
        raise NotLowered("a number, or a dtype with no C type")


def _is_weak(x) -> bool:
    """A float input of the graph, or arithmetic on such inputs alone (a Python float)."""
    return getattr(x, "weak", False)
