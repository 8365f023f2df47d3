"""The ONNX graph under construction: values, constants, nodes and initializers.

`Builder` is what a registry entry's `onnx` function receives: it appends nodes (`emit`,
`op`), makes constants (`const`, `ints`, `operand`) and knows the op being exported (its
result's dtype and rank, the opset). It needs the `onnx` package only to make protos, so
the registry itself never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._symbolic import SymInt, _term_order


class UnsupportedOperatorError(RuntimeError):
    """Raised when an op has no ONNX mapping; the message names the operator."""


@dataclass
class Value:
    """A tensor computed by the ONNX graph: its name, NumPy dtype and rank.

    `is_shape` marks 1-D int64 values that hold (part of) a tensor's shape, so that
    indexing them gives shape scalars as `x.shape[0]` does."""

    name: str
    dtype: np.dtype
    rank: int | None
    is_shape: bool = False


@dataclass
class Const:
    """A tensor known at export time; `name` (a state_dict key) names its initializer."""

    array: np.ndarray
    name: str | None = None
    emitted: dict = field(default_factory=dict)
    # The constant this one is the 2-D transpose of (`t(weight)` folded), so that Gemm can
    # read the weight itself with transB=1 and keep its state_dict name.
    transpose_of: Const | None = None


def has_sym(v: Any) -> bool:
    """Whether `v` (a number or a nested list/tuple of them) holds a symbolic size."""
    if isinstance(v, SymInt):
        return True
    if isinstance(v, (list, tuple)):
        return any(has_sym(x) for x in v)
    return False


class Builder:
    """Collects nodes and initializers and hands out unique value names."""

    # What the registry's mappings (`ops/_onnx_mappings.py`, below this package) ask of values
    # through the builder they are handed: a value's dtype, and whether it is a constant.
    @staticmethod
    def dtype_of(v) -> np.dtype:
        """The NumPy dtype of a graph value or constant."""
        return dtype_of(v)

    @staticmethod
    def is_const(v) -> bool:
        """Whether `v` is a constant (its array known at export), not a graph value."""
        return isinstance(v, Const)

    def __init__(self, onnx: Any, opset: int, fold: bool) -> None:
        self.onnx = onnx
        self.helper = onnx.helper
        self.opset = opset
        self.fold = fold
        self.nodes: list = []
        # The registry op each node was emitted for (parallel to `nodes`).
        self.origins: list[str] = []
        self.origin = ""
        # The result of the op being exported: the defaults of `emit`.
        self.out_dtype: np.dtype | None = None
        self.out_rank: int | None = None
        self.initializers: dict[str, Any] = {}
        self._used: set[str] = set()
        # id -> (name, constant): the constant is kept so that its id is never reused.
        self._const_names: dict[int, tuple[str, Const]] = {}
        # Symbolic sizes (`SymInt`s of dynamic axes): each symbol's maker of its run-time
        # value (a 1-element int64 Value), and the values made, by expression.
        self.symbols: dict[str, Any] = {}
        self._sym_values: dict[str, Value] = {}

    # ------------------------------------------------------------------ names

    def reserve(self, name: str) -> str:
        """Claim `name` exactly; raises if it is taken."""
        if name in self._used:
            raise ValueError(f"duplicate ONNX value name {name!r}")
        self._used.add(name)
        return name

    def fresh(self, base: str) -> str:
        """A new unique name derived from `base`."""
        name, i = base, 0
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    # ------------------------------------------------------------------ values

    def const_name(self, c: Const) -> str:
        """The initializer holding constant `c` (created on first use)."""
        key = id(c)
        if key not in self._const_names:
            name = self.fresh(c.name or "onnx_const")
            arr = np.array(c.array, order="C")  # ascontiguousarray makes 0-d arrays 1-d
            self.initializers[name] = self.onnx.numpy_helper.from_array(arr, name)
            self._const_names[key] = (name, c)
        return self._const_names[key][0]

    def name_of(self, v: Value | Const) -> str:
        """The ONNX name of a value or constant (constants become initializers)."""
        if isinstance(v, Const):
            return self.const_name(v)
        return v.name

    def const(self, array: Any, dtype: Any = None, name: str | None = None) -> Const:
        """A fresh constant from `array` (cast to `dtype` when given)."""
        return Const(np.asarray(array, dtype=dtype), name)

    def ints(self, values: Any) -> Const | Value:
        """A 1-D int64 constant (axes, shapes, pads); computed at run time when a value is a
        symbolic size (a `SymInt` of a dynamic axis)."""
        values = list(values)
        if has_sym(values):
            return self.shape_tensor(values)
        return Const(np.asarray(values, dtype=np.int64).reshape(-1))

    def sym_value(self, s: Any) -> Value | Const:
        """Symbolic size `s` (a `SymInt`: a polynomial over symbols and divisions) as a
        1-element int64 value computed at run time."""
        if not isinstance(s, SymInt):
            return Const(np.asarray([int(s)], dtype=np.int64))
        if s.expr in self._sym_values:
            return self._sym_values[s.expr]

        def binary(op_type: str, a: Any, c: Any, **attrs: Any) -> Value:
            return self.op(op_type, [a, c], np.int64, 1, name="size", is_shape=True, **attrs)

        def atom(key: str) -> Any:
            if key in self.symbols:
                return self.symbols[key](self)
            op, left, right, _ = s.env.atoms[key]
            a, c = self.sym_value(left), self.sym_value(right)
            rem = binary("Mod", a, c, fmod=0)  # Python's modulo: the divisor's sign
            if op.__name__ == "mod":
                return rem
            # Python's floor division, exact (ONNX's integer Div truncates toward zero)
            return binary("Div", binary("Sub", a, rem), c)

        total = None
        for m, c in sorted(s.poly.items(), key=_term_order):
            if not m:
                term = self.ints([c])
            else:
                term = atom(m[0])
                for key in m[1:]:
                    term = binary("Mul", term, atom(key))
                if c != 1:
                    term = binary("Mul", term, self.ints([c]))
            total = term if total is None else binary("Add", total, term)
        self._sym_values[s.expr] = total
        return total

    def op(self, op_type: str, inputs: list, dtype: Any, rank: int | None, *,
           name: str | None = None, is_shape: bool = False, n_out: int = 1,
           **attrs: Any) -> Value | list[Value]:
        """Append an `op_type` node; returns its Value (or list of Values for n_out > 1)."""
        in_names = ["" if v is None else self.name_of(v) for v in inputs]
        base = name or op_type.lower()
        outs = [self.fresh(base if i == 0 else f"{base}_out{i}") for i in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.helper.make_node(op_type, in_names, outs,
                                                name=self.fresh(f"{op_type}_{base}"),
                                                **attrs))
        self.origins.append(self.origin)
        values = [Value(o, np.dtype(dtype), rank, is_shape) for o in outs]
        return values[0] if n_out == 1 else values

    def emit(self, op_type: str, inputs: list, dtype: Any = None, rank: int | None = None,
             n_out: int = 1, **attrs: Any) -> Value | list[Value]:
        """Append an `op_type` node named after the op being exported; dtype and rank
        default to that op's result."""
        dtype = self.out_dtype if dtype is None else dtype
        if dtype is None:
            dtype = next(dtype_of(v) for v in inputs if v is not None)
        rank = self.out_rank if rank is None else rank
        return self.op(op_type, inputs, dtype, rank, name=self.origin.split(".")[0] or None,
                       n_out=n_out, **attrs)

    def fail(self, reason: str) -> None:
        """Raise the exporter's error for the op being exported, saying what in this call
        has no ONNX mapping (`reason`: "with divisor_override")."""
        name = self.origin.split(".")[0]
        raise UnsupportedOperatorError(f"Exporting the operator 'aten::{name}' to ONNX opset "
                                       f"version {self.opset} is not supported {reason}")

    # ------------------------------------------------------------------ helpers

    def operand(self, v: Any, dtype: Any) -> Value | Const:
        """A tensor operand of `dtype` from a graph value, a constant or a Python number."""
        if isinstance(v, (Value, Const)):
            return self.cast(v, dtype)
        if has_sym(v):  # a size of a dynamic axis, as a 0-d tensor computed at run time
            return self.cast(self.squeeze(self.sym_value(v), [0]), dtype)
        return Const(np.asarray(v, dtype=dtype))

    def cast(self, v: Value | Const, dtype: Any) -> Value | Const:
        """`v` as `dtype` (no node when it already is)."""
        dtype = np.dtype(dtype)
        if isinstance(v, Const):
            return v if v.array.dtype == dtype else Const(v.array.astype(dtype))
        if v.dtype == dtype:
            return v
        to = self.helper.np_dtype_to_tensor_dtype(dtype)
        return self.op("Cast", [v], dtype, v.rank, name=f"{v.name}_cast", to=to)

    def unsqueeze(self, v: Value, axes: list[int]) -> Value:
        """Insert size-1 axes (Unsqueeze, axes as an input from opset 13)."""
        rank = None if v.rank is None else v.rank + len(axes)
        return self.op("Unsqueeze", [v, self.ints(axes)], v.dtype, rank, is_shape=v.is_shape)

    def squeeze(self, v: Value, axes: list[int]) -> Value:
        """Remove the size-1 axes `axes`."""
        rank = None if v.rank is None else v.rank - len(axes)
        return self.op("Squeeze", [v, self.ints(axes)], v.dtype, rank)

    def reduce(self, op_type: str, v: Value, axes: list[int] | None, keepdims: bool,
               dtype: Any, rank: int | None) -> Value:
        """A Reduce* node; axes are an input for ReduceSum from opset 13 and for the others
        from opset 18, an attribute before."""
        as_input = self.opset >= 18 or (op_type == "ReduceSum" and self.opset >= 13)
        k = int(bool(keepdims))
        if axes is None:
            return self.op(op_type, [v], dtype, rank, keepdims=k)
        if as_input:
            return self.op(op_type, [v, self.ints(axes)], dtype, rank, keepdims=k)
        return self.op(op_type, [v], dtype, rank, keepdims=k, axes=list(axes))

    def shape(self, v: Value, start: int | None = None, end: int | None = None) -> Value:
        """The shape of `v` (dims start:end) as a 1-D int64 Value.

        Shape followed by Slice, which every supported opset has (Shape's start/end
        attributes need opset 15)."""
        full = self.op("Shape", [v], np.int64, 1, is_shape=True)
        if start is None and end is None:
            return full
        s = self.ints([0 if start is None else start])
        e = self.ints([np.iinfo(np.int64).max if end is None else end])
        return self.op("Slice", [full, s, e], np.int64, 1, is_shape=True)

    def shape_tensor(self, dims: list) -> Value | Const:
        """A 1-D int64 shape from Python ints, shape scalars (0-d Values) and shape slices."""
        if all(isinstance(d, (int, np.integer)) for d in dims):
            return self.ints(dims)
        parts: list = []
        run: list[int] = []  # consecutive plain ints, written as one constant
        for d in dims:
            if isinstance(d, (int, np.integer)):
                run.append(int(d))
                continue
            if run:
                parts.append(self.ints(run))
                run = []
            if has_sym(d):
                parts.append(self.sym_value(d))
            elif isinstance(d, Const):
                parts.append(self.ints(np.asarray(d.array).reshape(-1)))
            elif d.rank == 0:
                parts.append(self.unsqueeze(self.cast(d, np.int64), [0]))
            else:
                parts.append(self.cast(d, np.int64))
        if run:
            parts.append(self.ints(run))
        if len(parts) == 1 and isinstance(parts[0], Value):
            return parts[0]
        return self.op("Concat", parts, np.int64, 1, is_shape=True, axis=0)


def dtype_of(v: Value | Const) -> np.dtype:
    """The NumPy dtype of a graph value or constant."""
    return v.array.dtype if isinstance(v, Const) else v.dtype


def rank_of(v: Value | Const) -> int | None:
    """The rank of a graph value or constant (None when unknown)."""
    return v.array.ndim if isinstance(v, Const) else v.rank
