"""`export`: run a Module under a capturing dispatch mode and write it as an ONNX model.

Steps: put the model in eval mode (as torch.onnx.export does by default), run it on the
example inputs under `_Capture`, a dispatch mode that sees every registry op call; each call
is mapped to ONNX through its `OpDef.onnx` entry (the registry is the only list of ops).
Parameters and buffers become initializers named after their state_dict keys; an op whose
inputs are all constants is folded (its example result becomes a constant). The
`ModelProto` is then built (nodes no output needs dropped), checked and saved atomically.

With dynamic axes, sizes are traced as PyTorch's tracer traces `aten::size`: while the model
runs, `Tensor.shape`/`size()` give a `SymInt` (`_symbolic.py`) for each dim of a graph value
that ONNX shape inference of the graph so far does not find fixed (an input's dynamic axis
keeps its own symbol), and the factories of sizes (`arange`, `zeros`, `ones`, `full`, their
`_like` and `new_` forms) given such sizes become graph nodes. A mapping hands the sizes it
receives to `Builder.ints`/`operand`, which compute symbolic ones at run time. A size read
as a plain number (`len(x)`, `int(x.size(0))`) stays the example's: the graph is then
captured again at other sizes and refused if it differs (`_check_dynamic_axes`).
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import threading
import warnings
from typing import Any

import numpy as np

from .._dispatch import DispatchMode, call
from .._symbolic import ShapeEnv, SymInt
from ..ops import _onnx_mappings  # noqa: F401  (before any mapping runs: `ops/_onnx.py`)
from ._graph import Builder, Const, UnsupportedOperatorError, Value, dtype_of, has_sym

MIN_OPSET = 13
# PyTorch's default for both of its exporters (`opset_version=None`).
DEFAULT_OPSET = 20
# The newest opset PyTorch's TorchScript-based exporter writes; it refuses newer ones.
TORCH_MAX_OPSET = 23


class TrainingMode(enum.Enum):
    """The mode modules are exported in (`torch.onnx.TrainingMode`): EVAL puts the model in
    eval mode for the export, PRESERVE keeps each module's own mode, TRAINING puts it in
    training mode; the model's modes are restored afterwards in every case."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2

    def __repr__(self) -> str:
        return f"<TrainingMode.{self.name}: {self.value}>"

    def __int__(self) -> int:
        return self.value


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fusegrad.onnx.export needs the 'onnx' package: "
                          "pip install onnx onnxruntime (or pip install fusegrad[onnx])") from e
    return onnx


def ir_version_for(onnx: Any, opset: int) -> int:
    """The lowest IR version of an onnx release that supports `opset` (17 -> 8)."""
    for row in onnx.helper.VERSION_TABLE:
        if row[2] >= opset:
            return int(row[1])
    return int(onnx.IR_VERSION)


def unsupported_message(op: Any, opset: int) -> str:
    """The error text for an op without an ONNX mapping (torch.onnx's wording)."""
    return (f"Exporting the operator 'aten::{op.name.split('.')[0]}' to ONNX opset version "
            f"{opset} is not supported")


class _Unmapped:
    """Stands for an op output the op's mapping does not produce (batch norm's saved
    statistics, max pool's indices): using it in the graph is an error."""

    def __init__(self, op: Any, index: int) -> None:
        self.op = op
        self.index = index


class _Lazy:
    """A tensor's graph value, made on first use: the new value of a tensor sharing storage
    with one written in place (nodes for a view nobody reads again would be dead weight)."""

    def __init__(self, make: Any) -> None:
        self.make = make
        self.value: Any = None

    def get(self) -> Any:
        if self.value is None:
            self.value = self.make()
        return self.value


def _tensor_cls() -> type:
    from .._tensor import Tensor

    return Tensor


# The exporter reading sizes symbolically, and the thread it runs in (other threads read
# plain sizes meanwhile).
_SYMBOLIC: list = []
_PATCH_LOCK = threading.Lock()


def _active() -> Any:
    if _SYMBOLIC and _SYMBOLIC[-1][1] == threading.get_ident():
        return _SYMBOLIC[-1][0]
    return None


_SAVED: list = []  # (owner, attribute name, plain value) of each patch in place


def _spread_sizes(args: tuple, kwargs: dict) -> Any:
    """The sizes of a `zeros(*sizes)`-style factory call (spread, one sequence, size=)."""
    if "size" in kwargs:
        return kwargs["size"]
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return args[0]
    return args


def _full_sizes(args: tuple, kwargs: dict) -> Any:
    """The sizes of a `full(size, fill_value)` call."""
    return kwargs["size"] if "size" in kwargs else args[0] if args else ()


def _set(owner: Any, name: str, value: Any) -> None:
    _SAVED.append((owner, name, owner.__dict__[name] if isinstance(owner, type)
                   else getattr(owner, name)))
    setattr(owner, name, value)


def _patch() -> None:
    """Put the symbolic `Tensor.shape`/`size` and the traced factories in place."""
    import fusegrad

    from .. import _creation
    from .._shapes import Size

    Tensor = _tensor_cls()
    plain_shape, plain_size = Tensor.__dict__["shape"], Tensor.__dict__["size"]

    def shape(self):
        ex = _active()
        return plain_shape.fget(self) if ex is None else Size(ex.sizes(self))

    def size(self, dim=None):
        plain = plain_size(self, dim)  # PyTorch's errors for a bad dim
        ex = _active()
        if ex is None:
            return plain
        sizes = ex.sizes(self)
        return Size(sizes) if dim is None else sizes[dim if dim >= 0 else dim + len(sizes)]

    def traced(plain: Any, bind: Any) -> Any:
        """`plain` (a factory), its result bound to graph nodes when its arguments hold a
        symbolic size."""
        def factory(*args, **kwargs):
            out = plain(*args, **kwargs)
            ex = _active()
            if ex is not None and id(out) not in ex.env and (
                    has_sym(args) or has_sym(list(kwargs.values()))):
                bind(ex, out, args, kwargs)
            return out

        return _named(factory, plain)

    def like(plain: Any) -> Any:
        """`plain` (zeros_like and its kin), its result bound to graph nodes when its
        input's sizes are symbolic."""
        def factory(input, *args, **kwargs):
            out = plain(input, *args, **kwargs)
            ex = _active()
            if ex is not None and id(out) not in ex.env and isinstance(input, Tensor):
                sizes = ex.sizes(input)
                if has_sym(sizes):
                    ex.bind_filled(out, sizes)
            return out

        return _named(factory, plain)

    def filled(sizes_of: Any) -> Any:
        return lambda ex, out, args, kwargs: ex.bind_filled(out, sizes_of(args, kwargs))

    def method(sizes_of: Any) -> Any:  # `self.new_zeros(*sizes)`: the sizes after self
        return filled(lambda args, kwargs: sizes_of(args[1:], kwargs))

    def ranged(ex: _Exporter, out: Any, args: tuple, kwargs: dict) -> None:
        ex.bind_range(out, args, kwargs)

    shape.__doc__ = plain_shape.__doc__
    _set(Tensor, "shape", property(shape))
    _set(Tensor, "size", _named(size, plain_size))
    # the factories of sizes a model computes (PyTorch's tracer records them as ops)
    _set(Tensor, "new_zeros", traced(Tensor.new_zeros, method(_spread_sizes)))
    _set(Tensor, "new_ones", traced(Tensor.new_ones, method(_spread_sizes)))
    _set(Tensor, "new_full", traced(Tensor.new_full, method(_full_sizes)))
    for module in (fusegrad, _creation):  # (the package's own functions wrap _creation's)
        _set(module, "arange", traced(module.arange, ranged))
        _set(module, "zeros", traced(module.zeros, filled(_spread_sizes)))
        _set(module, "ones", traced(module.ones, filled(_spread_sizes)))
        _set(module, "full", traced(module.full, filled(_full_sizes)))
        _set(module, "zeros_like", like(module.zeros_like))
        _set(module, "ones_like", like(module.ones_like))
        _set(module, "full_like", like(module.full_like))


def _named(wrapper: Any, plain: Any) -> Any:
    """`wrapper` with the name, module and docstring of the function it stands for."""
    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(wrapper, attr, getattr(plain, attr, None))
    return wrapper


def _unpatch() -> None:
    while _SAVED:
        owner, name, value = _SAVED.pop()
        setattr(owner, name, value)


@contextlib.contextmanager
def _symbolic_sizes(ex: _Exporter) -> Any:
    """While the model runs: `Tensor.shape` and `Tensor.size()` give `SymInt`s for the
    dynamic dims of graph values, and `arange` of a symbolic size is a Range node, as
    PyTorch's tracer records `aten::size` and `aten::arange` on traced sizes. The patches
    are in place while any export runs; other threads read plain sizes meanwhile."""
    entry = (ex, threading.get_ident())
    with _PATCH_LOCK:
        if not _SYMBOLIC:
            _patch()
        _SYMBOLIC.append(entry)
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _SYMBOLIC.remove(entry)
            if not _SYMBOLIC:
                _unpatch()


class _SymbolicFailure(Exception):
    """An op's mapping could not take a symbolic size: the capture is done again with the
    example's sizes (and the dynamic-axes check decides)."""


class _Capture(DispatchMode):
    """Runs each op for real (the example values drive folding and shape-dependent
    mappings) and hands the call to the exporter."""

    def __init__(self, exporter: _Exporter) -> None:
        self.exporter = exporter

    def __fusegrad_dispatch__(self, op: Any, args: tuple) -> Any:
        # A symbolic size in a number's place runs as the Python int it stands for: a number
        # there is a weak operand (`x.sum() / x.shape[0]` stays float32); the graph reads the
        # symbolic size from `args`.
        concrete = args
        if any(a.__class__ is SymInt for a in args):
            concrete = tuple(int(a) if a.__class__ is SymInt else a for a in args)
        result = call(op, *concrete)
        self.exporter.record(op, args, result)
        return result


class _Exporter:
    """The tensor -> graph value map, and the mapping of one op call at a time."""

    def __init__(self, onnx: Any, model: Any, opset: int, fold: bool) -> None:
        self.b = Builder(onnx, opset, fold)
        self.opset = opset
        self.fold = fold
        self.env: dict[int, Any] = {}
        self.keep: list = []  # tensors whose ids are keys of `env` stay alive
        # id(version counter) -> [(tensor, value)]: the tensors sharing one storage
        self.by_counter: dict[int, list] = {}
        self.param_names: dict[int, str] = {}
        self.param_keys: set[str] = set()
        self.params: dict[str, Const] = {}
        self.handled: list[Any] = []  # the OpDefs mapped, in call order
        # With dynamic axes: the graph's inputs (for shape inference of the graph so far),
        # each value's inferred dims (None where not a fixed number), and the run-time
        # value of each dynamic dim read.
        self.graph_inputs: list = []
        self.inferred: dict[str, list] = {}
        self.dim_values: dict[tuple[str, int], Value] = {}
        self.dim_symbols: dict[tuple[str, int], Any] = {}
        self.types: dict[str, Any] = {}  # a value's inferred TypeProto
        self.producer: dict[str, int] = {}  # a value -> the index of the node making it
        self.inferred_upto = 0  # the nodes before this index have been inferred
        self.axis_symbols: dict[str, Any] = {}  # a dynamic axis's name -> its symbol
        self.shape_env = ShapeEnv()
        if hasattr(model, "named_parameters"):
            for name, t in list(model.named_parameters()) + list(model.named_buffers()):
                self.param_names.setdefault(id(t), name)
                self.keep.append(t)

    # ------------------------------------------------------------------ tensor -> value

    def bind(self, t: Any, value: Any) -> None:
        """Make `value` the graph value of tensor `t`."""
        self.env[id(t)] = value
        self.keep.append(t)
        self.by_counter.setdefault(id(t._vc), []).append((t, value))

    def lookup(self, a: Any) -> Any:
        """The graph value of argument `a` (tensors in lists too); other objects as they are."""
        Tensor = _tensor_cls()
        if isinstance(a, (list, tuple)):
            if any(isinstance(x, Tensor) for x in a):
                return [self.lookup(x) for x in a]
            return a
        if not isinstance(a, Tensor):
            return a
        v = self.env.get(id(a))
        if isinstance(v, _Lazy):
            v = v.get()
        if isinstance(v, _Unmapped):
            raise UnsupportedOperatorError(
                f"output {v.index} of 'aten::{v.op.name.split('.')[0]}' is used, but its ONNX "
                "mapping does not compute it")
        if v is not None:
            return v
        key = self.param_names.get(id(a))
        if key is not None:
            if key not in self.params:
                self.params[key] = Const(np.array(a._data), name=key)
                self.param_keys.add(key)
            return self.params[key]
        # Not made by a registry op: `detach()` shares the data and version counter of a
        # graph value; anything else sharing its counter was computed outside the registry.
        shared = self.by_counter.get(id(a._vc), ())
        for t, value in reversed(shared):  # the latest binding (after in-place ops)
            if t._data is a._data or (t.shape == a.shape and t._data.__array_interface__
                                      == a._data.__array_interface__):
                return value.get() if isinstance(value, _Lazy) else value
        if any(isinstance(value, (Value, _Lazy)) for _, value in shared):
            raise UnsupportedOperatorError(
                "a tensor computed from the model's inputs outside the registry ops (a view "
                "or copy made without dispatch) cannot be exported")
        return Const(np.array(a._data))  # made in forward from constants: a constant

    # ------------------------------------------------------------------ symbolic sizes

    def sizes(self, t: Any) -> tuple:
        """The sizes of tensor `t` as the model reads them: a dim of a graph value that is
        not a fixed number (a dynamic axis, or one computed from it) is a `SymInt`, so the
        ops it is passed to compute it at run time, as PyTorch's tracer records
        `aten::size`. A dim that shape inference finds to be a dynamic axis of an input is
        that axis's symbol; another one a symbol of its own, read from `t`'s shape."""
        shape = t._data.shape
        v = self.env.get(id(t))
        if isinstance(v, _Lazy):
            v = v.value
        if not isinstance(v, Value) or not shape:
            return shape
        dims = self._inferred_dims(v)
        out = []
        for d, n in enumerate(shape):
            known = None if dims is None else dims[d]
            if isinstance(known, int) or n < 2:  # sizes 0 and 1 stay static, as Dynamo's
                out.append(n)
            elif isinstance(known, str) and known in self.axis_symbols \
                    and self.axis_symbols[known].hint == n:
                out.append(self.axis_symbols[known])
            else:
                key = (v.name, d)
                if key not in self.dim_symbols:
                    self.dim_symbols[key] = self.new_symbol(f"{v.name}.size({d})", n, v, d)
                out.append(self.dim_symbols[key])
        return tuple(out)

    def new_symbol(self, source: str, hint: int, v: Value, d: int) -> Any:
        """A fresh symbol for dim `d` of graph value `v` (its value read by Shape when a
        mapping first uses it)."""
        sym, _ = self.shape_env.symbol(source, hint, duck=False)

        def make(b: Builder) -> Value:
            key = (v.name, d)
            if key not in self.dim_values:
                self.dim_values[key] = b.shape(v, d, d + 1)
            return self.dim_values[key]

        self.b.symbols[sym.expr] = make
        return sym

    def _inferred_dims(self, v: Value) -> list | None:
        """The dims of `v` that ONNX shape inference finds fixed (None for the others), from
        the graph built so far; None when inference says nothing of `v`."""
        if v.name not in self.inferred:
            self._infer()
        dims = self.inferred.get(v.name)
        return dims if dims is not None and len(dims) == (v.rank or 0) else None

    def _infer(self) -> None:
        """Shape inference of the nodes added since the last call, with the types found
        before for their inputs (so each node is inferred once), and the earlier nodes that
        computed the small int64 values among those inputs (shapes, sizes: inference reads
        their values through its data propagation)."""
        onnx, b = self.b.onnx, self.b
        nodes = b.nodes
        new = range(self.inferred_upto, len(nodes))
        for k in new:
            for out in nodes[k].output:
                self.producer[out] = k
        chosen = set(new)
        stack = [i for k in new for i in nodes[k].input if i]
        while stack:
            k = self.producer.get(stack.pop())
            if k is not None and k not in chosen and all(
                    self._small_int(o) for o in nodes[k].output):
                chosen.add(k)
                stack.extend(i for i in nodes[k].input if i)
        order = sorted(chosen)
        produced = {o for k in order for o in nodes[k].output}
        declared = {i.name: i for i in self.graph_inputs}
        inputs, inits = [], []
        for name in dict.fromkeys(i for k in order for i in nodes[k].input if i):
            if name in produced:
                continue
            init = b.initializers.get(name)
            if init is not None:
                if int(np.prod(list(init.dims))) <= 64:  # shapes, axes: values matter
                    inits.append(init)
                else:  # weights: their type and shape are enough
                    inputs.append(onnx.helper.make_tensor_value_info(
                        init.name, init.data_type, list(init.dims)))
            elif name in self.types:
                inputs.append(onnx.helper.make_value_info(name, self.types[name]))
            elif name in declared:
                inputs.append(declared[name])
        graph = onnx.helper.make_graph([nodes[k] for k in order], "partial", inputs, [],
                                       initializer=inits)
        # Reshape propagates a computed shape's values from opset 14 (its opset 13 form
        # infers nothing), and the two read this graph's nodes alike
        opset = max(b.opset, 14)
        model = onnx.helper.make_model(graph, opset_imports=[
            onnx.helper.make_opsetid("", opset)])
        model.ir_version = ir_version_for(onnx, opset)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False,
                                                         data_prop=True)
        except Exception:  # noqa: BLE001 - every dim unknown: read at run time
            inferred = model
        for info in list(inferred.graph.input) + list(inferred.graph.value_info):
            tt = info.type.tensor_type
            if not tt.HasField("shape"):
                continue
            kept = onnx.TypeProto()
            kept.CopyFrom(info.type)
            for d in kept.tensor_type.shape.dim:  # inference's own names mean nothing later
                if d.HasField("dim_param") and d.dim_param not in self.axis_symbols:
                    d.Clear()
            self.types.setdefault(info.name, kept)
            self.inferred[info.name] = [
                d.dim_value if d.HasField("dim_value") else
                d.dim_param if d.dim_param in self.axis_symbols else None
                for d in tt.shape.dim]
        for k in new:  # values inference said nothing of: not asked again
            for out in nodes[k].output:
                self.inferred.setdefault(out, None)
        self.inferred_upto = len(nodes)

    def _small_int(self, name: str) -> bool:
        """Whether value `name` is a small int64 tensor (a shape, a size) by its type."""
        t = self.types.get(name)
        if t is None or t.tensor_type.elem_type != self.b.onnx.TensorProto.INT64:
            return False
        dims = t.tensor_type.shape.dim
        return len(dims) <= 1 and all(d.HasField("dim_value") and d.dim_value <= 64
                                      for d in dims)

    def bind_range(self, out: Any, args: tuple, kwargs: dict) -> None:
        """Make `out`, `arange(*args, **kwargs)` with a symbolic bound, a Range node."""
        names = ("start", "end", "step")
        given = dict(zip(names, args)) if len(args) > 1 else {"end": args[0]} if args else {}
        given.update({k: v for k, v in kwargs.items() if k in names})
        start, end, step = given.get("start", 0), given.get("end"), given.get("step", 1)
        if end is None:
            start, end = 0, start
        b = self.b
        dtype = np.dtype(out._data.dtype)
        whole = not any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        calc = np.dtype(np.int64) if whole else np.dtype(np.float64)

        def scalar(v: Any) -> Any:
            if has_sym(v):
                return b.cast(b.squeeze(b.sym_value(v), [0]), calc)
            return b.const(np.asarray(v, calc))

        b.origin = "arange"
        r = b.op("Range", [scalar(start), scalar(end), scalar(step)], calc, 1, name="arange")
        self.bind(out, b.cast(r, dtype))

    def bind_filled(self, out: Any, sizes: Any) -> None:
        """Make `out`, a factory's tensor of one value with symbolic `sizes`, that value
        expanded to the sizes computed at run time."""
        b = self.b
        data = out._data
        value = data.reshape(-1)[0] if data.size else np.zeros((), data.dtype)
        b.origin = "full"
        sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
        self.bind(out, b.op("Expand", [b.const(np.asarray(value, data.dtype)),
                                       b.shape_tensor(sizes)], data.dtype, data.ndim,
                            name="full"))

    # ------------------------------------------------------------------ one op call

    def record(self, op: Any, args: tuple, result: Any) -> None:
        """Map one op call (its example `result` computed) to ONNX nodes."""
        Tensor = _tensor_cls()
        inputs = [self.lookup(a) for a in args]
        flat = [v for x in inputs for v in (x if isinstance(x, list) else [x])]
        results = list(result) if isinstance(result, tuple) else [result]
        # A write into a tensor changes every tensor sharing its storage (its base, its
        # views): `written` says the graph must compute their new values.
        written = False
        if op.inplace and isinstance(args[0], Tensor):
            shared = self.by_counter.get(id(args[0]._vc), ())
            written = any(isinstance(v, Value) for v in flat) or any(
                isinstance(v, (Value, _Lazy)) for _, v in shared)
            if args[0]._base is not None and not written:
                for t, _ in self.by_counter.pop(id(args[0]._vc), ()):
                    self.env.pop(id(t), None)  # constants: read again from the data when used
        # a symbolic size among the arguments is computed by the graph: never folded
        if not any(isinstance(v, Value) for v in flat) and not any(has_sym(a) for a in args):
            if self.fold or not any(isinstance(v, Const) for v in flat):
                for r in results:
                    if isinstance(r, Tensor):
                        self.bind(r, self._folded(op, inputs, r))
                return
        entry = op.onnx
        if entry is None:
            raise UnsupportedOperatorError(unsupported_message(op, self.opset))
        first = results[0]
        b = self.b
        b.origin = op.name
        b.out_dtype = np.dtype(first._data.dtype) if isinstance(first, Tensor) else None
        b.out_rank = first.dim() if isinstance(first, Tensor) else None
        try:
            if isinstance(entry, str):
                outs = _string_rule(b, op, entry, inputs, args, first)
            else:
                outs = entry(b, inputs, args, {}, self.opset)
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            if not has_sym(list(args)):
                raise
            raise _SymbolicFailure(op.name) from e  # a mapping that reads sizes as ints
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        self.handled.append(op)
        for i, r in enumerate(results):
            if not isinstance(r, Tensor):
                continue
            v = outs[i] if i < len(outs) else None
            if v is None:
                self.bind(r, _Unmapped(op, i))
                continue
            if isinstance(v, Value):
                # the result's own dtype (an in-place comparison keeps self's dtype)
                v = b.cast(v, r._data.dtype)
                v.rank = r.dim()
            self.bind(r, v)
        if written:
            self._propagate_write(op, args[0])

    def _propagate_write(self, op: Any, w: Any) -> None:
        """After in-place op `op` wrote tensor `w` (bound to its new value), give every other
        tensor sharing its storage its new value: the base gets `w`'s elements scattered
        into it (ScatterElements on the flattened base), each other view the elements it
        covers gathered from the new base. The positions are constants of the example's
        shapes (a dynamic axis among them is refused by the dynamic-axes check)."""
        b = self.b
        base = w._base if w._base is not None else w
        tensors, seen = [], set()
        for t, _ in self.by_counter.get(id(w._vc), ()):
            if id(t) not in seen and t is not w:
                seen.add(id(t))
                tensors.append(t)
        if w is not base and id(base) not in seen:
            tensors.append(base)
        if not tensors:
            return
        data = base._data
        if not data.flags.c_contiguous:
            raise UnsupportedOperatorError(
                f"{unsupported_message(op, self.opset)} when it writes into a view of a "
                "non-contiguous tensor")
        w_value = self.env[id(w)]
        if w is base:
            base_value = _Lazy(lambda: w_value)
        else:
            old = self.env.get(id(base))
            if old is None and id(base) not in self.param_names:
                # made outside the registry (a factory's constant): its data after the write
                # is right outside `w`, and the scatter rewrites `w`'s part anyway
                old = Const(np.array(data))
            elif old is None or isinstance(old, _Unmapped):
                old = self.lookup(base)
            idx = self._positions(op, base, w).reshape(-1)
            old = old.get() if isinstance(old, _Lazy) else old  # the value before this write

            def scatter():
                flat = b.op("Reshape", [old, b.ints([-1])], data.dtype, 1,
                            name="inplace_base")
                upd = b.op("Reshape", [b.cast(w_value, data.dtype), b.ints([-1])],
                           data.dtype, 1, name="inplace_update")
                new = b.op("ScatterElements", [flat, b.const(idx), upd], data.dtype, 1,
                           name="inplace_write", axis=0)
                return b.op("Reshape", [new, b.ints(list(data.shape))], data.dtype,
                            data.ndim, name="inplace_base")

            base_value = _Lazy(scatter)
        for t in tensors:
            if t is base:
                self.bind(t, base_value)
                continue
            idx_t, rank = self._positions(op, base, t), t.dim()

            def gather(idx_t=idx_t, rank=rank):
                flat = b.op("Reshape", [base_value.get(), b.ints([-1])], data.dtype, 1,
                            name="inplace_base")
                return b.op("Gather", [flat, b.const(idx_t)], data.dtype, rank,
                            name="inplace_view", axis=0)

            self.bind(t, _Lazy(gather))

    def _positions(self, op: Any, base: Any, t: Any) -> np.ndarray:
        """The flat positions in (C-contiguous) `base` of each element of view `t`."""
        data, view = base._data, t._data
        size = data.dtype.itemsize
        start = view.__array_interface__["data"][0] - data.__array_interface__["data"][0]
        if (start % size or any(s % size for s in view.strides)
                or view.dtype.itemsize != size):
            raise UnsupportedOperatorError(
                f"{unsupported_message(op, self.opset)} when it writes into a view that "
                "reinterprets its base's elements")
        pos = np.full(view.shape, start // size, dtype=np.int64)
        for axis, (n, stride) in enumerate(zip(view.shape, view.strides)):
            steps = np.arange(n, dtype=np.int64) * (stride // size)
            pos = pos + steps.reshape((n,) + (1,) * (view.ndim - axis - 1))
        if pos.size and (pos.min() < 0 or pos.max() >= data.size):
            raise UnsupportedOperatorError(
                f"{unsupported_message(op, self.opset)} when it writes into a view that is "
                "not inside its base")
        return pos

    def _folded(self, op: Any, inputs: list, r: Any) -> Const:
        c = Const(np.array(r._data))
        src = inputs[0] if inputs else None
        if (op.permutes and isinstance(src, Const)
                and src.array.ndim == 2 and c.array.shape == src.array.shape[::-1]):
            c.transpose_of = src
        return c


_DEFAULTS: dict[str, tuple | None] = {}


def _kernel_defaults(op: Any) -> tuple | None:
    """The kernel's positional parameters' defaults (inspect.Parameter.empty where none);
    None when the signature cannot be read."""
    if op.name not in _DEFAULTS:
        try:
            params = [p for p in inspect.signature(op.kernel).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            _DEFAULTS[op.name] = tuple(p.default for p in params)
        except (TypeError, ValueError):
            _DEFAULTS[op.name] = None
    return _DEFAULTS[op.name]


def _string_rule(b: Builder, op: Any, op_type: str, inputs: list, args: tuple,
                 result: Any) -> Value:
    """The shared rule of an `onnx="OpType"` entry: one node whose inputs are the op's
    tensor arguments (numbers in Tensor-typed slots become constants), all cast to one dtype
    (the result's, or for a boolean result such as a comparison, the promoted inputs');
    every other argument must keep its default."""
    from .. import _dtype

    Tensor = _tensor_cls()
    defaults = _kernel_defaults(op)
    positions = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor) or (i in op.tensor_args and (isinstance(a, (int, float))
                                                               or has_sym(a))):
            positions.append(i)
            continue
        empty = inspect.Parameter.empty
        default = empty if defaults is None or i >= len(defaults) else defaults[i]
        if default is empty or a != default:
            b.fail(f"with argument {i} = {a!r}")
    dtype = b.out_dtype
    if dtype is None or dtype.kind == "b":
        dtype = np.dtype(_dtype.result_type(*[args[i] for i in positions]).np)
    return b.emit(op_type, [b.operand(inputs[i], dtype) for i in positions])


# ---------------------------------------------------------------------- the model


def _value_info(onnx: Any, name: str, dtype: np.dtype, shape: list | None) -> Any:
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return onnx.helper.make_tensor_value_info(name, elem, shape)


def _dynamic(dynamic_axes: dict | None, name: str) -> dict[int, str]:
    spec = (dynamic_axes or {}).get(name)
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {int(k): str(v) for k, v in spec.items()}
    return {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(spec)}


# The sizes a dynamic axis of example size n is captured again at: one longer (x[-1],
# x.sum(0) / n), clearly longer (n // 2 is the same at 4 and 5, not at 11), and twice as long
# (a model that needs an even size, x.view(b, t // 2, 2 * c), runs there).
_OTHER_SIZES = (lambda n: n + 1, lambda n: 2 * n + 3, lambda n: 2 * n)


def _grown_inputs(model: Any, args: tuple, kwargs: dict, input_names: list | None,
                  dynamic_axes: dict, size: Any) -> tuple[tuple, dict] | None:
    """`args` and `kwargs` with every dynamic axis of a tensor input of size n made
    `size(n)` long (its slices repeated cyclically), or None when no input has a dynamic
    axis."""
    Tensor = _tensor_cls()
    names = list(input_names or [])
    items = [(i, a, None) for i, a in enumerate(args)]
    items += [(len(args) + j, a, k) for j, (k, a) in enumerate(kwargs.items())]
    grown, changed = [], False
    for i, a, key in items:
        if isinstance(a, Tensor):
            default = key if key is not None else _arg_name(model, i)
            name = names[i] if i < len(names) else default
            data = a._data
            for axis in _dynamic(dynamic_axes, name):
                n = data.shape[axis]
                if n:
                    data = data.take(np.arange(size(n)) % n, axis)
                    changed = True
            if data is not a._data:
                a = Tensor._make(np.ascontiguousarray(data))
        grown.append(a)
    if not changed:
        return None
    return tuple(grown[:len(args)]), dict(zip(kwargs, grown[len(args):]))


def _check_dynamic_axes(proto: Any, model: Any, args: Any, opset: int, fold: bool,
                        export_params: bool, input_names: list | None,
                        output_names: list | None, dynamic_axes: dict | None,
                        kwargs: dict | None = None,
                        training: TrainingMode = TrainingMode.EVAL) -> None:
    """Refuse a graph that computes with the example's size of a dynamic axis (a size read
    as a number: `x.sum(0) / x.shape[0]`, `x[-1]`, `x[:, :x.size(1) // 2]`), which would
    give wrong results, silently, at other sizes: the model is captured again at several
    other sizes of its dynamic axes (`_OTHER_SIZES`), and every graph it runs to must be
    the same as the example's."""
    if not dynamic_axes:
        return
    args = args if isinstance(args, tuple) else (args,)

    def content(p):
        return ([n.SerializeToString() for n in p.graph.node],
                [t.SerializeToString() for t in p.graph.initializer])

    expected = content(proto)
    for size in _OTHER_SIZES:
        grown = _grown_inputs(model, args, dict(kwargs or {}), input_names, dynamic_axes,
                              size)
        if grown is None:
            return
        saved = _state(model)
        try:
            other = capture(model, grown[0], opset, fold, export_params, input_names,
                            output_names, dynamic_axes, kwargs=grown[1], training=training)[0]
        except Exception:  # the model does not run at this size: nothing to compare
            continue
        finally:
            # the model ran once for the export, as PyTorch's does (a training-mode export
            # updates batch norm's statistics once), not once more for each check
            _restore(saved)
        if content(other) != expected:
            raise RuntimeError(
                "torch.onnx.export: the exported graph depends on the example's size of a "
                f"dynamic axis ({dynamic_axes}): the model reads a size as a number (such as "
                "x.shape[0] in arithmetic, a negative index, or a factory of x.size(0)), "
                "which the graph would keep as a constant and compute wrongly at other "
                "sizes; export without those dynamic axes")


def _state(model: Any) -> list:
    """The data of `model`'s buffers (what a forward updates: running statistics), copied."""
    if not hasattr(model, "named_buffers"):
        return []
    return [(t, t._data, t._data.copy()) for _, t in model.named_buffers()
            if t._data is not None]


def _restore(saved: list) -> None:
    """Put back the data `_state` copied (in place where the array is still the tensor's)."""
    for t, array, copy in saved:
        if t._data is array and array.flags.writeable:
            np.copyto(array, copy)
        else:
            t._data = copy


def _save_atomic(onnx: Any, proto: Any, f: Any) -> None:
    """Write `proto` to path `f` through a temporary file in the same folder and a rename
    (or to a writable binary file object)."""
    if hasattr(f, "write"):
        f.write(proto.SerializeToString())
        return
    from ..serialization import write_atomically

    write_atomically(f, lambda out: out.write(proto.SerializeToString()))


def _arg_name(model: Any, i: int) -> str:
    """The name of `forward`'s i-th parameter (`input_i` when it has none)."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (AttributeError, TypeError, ValueError):
        params = []
    if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                              params[i].POSITIONAL_OR_KEYWORD):
        return params[i].name
    return f"input_{i}"


def _flatten_outputs(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flatten_outputs(o)]
    if isinstance(out, dict):
        return [x for o in out.values() for x in _flatten_outputs(o)]
    return [out]


_LEGACY_WARNING = (
    "You are using the legacy TorchScript-based ONNX export. Starting in PyTorch 2.9, the new "
    "torch.export-based ONNX exporter has become the default. Learn more about the new export "
    "logic: https://docs.pytorch.org/docs/stable/onnx_export.html. For exporting control "
    "flow: https://pytorch.org/tutorials/beginner/onnx/export_control_flow_model_to_onnx_"
    "tutorial.html")


def _check_training(training: Any) -> TrainingMode:
    """`training` as a TrainingMode (PyTorch accepts its enum only, not bools or ints)."""
    if isinstance(training, TrainingMode):
        return training
    real = getattr(type(training), "__name__", "") == "TrainingMode" and hasattr(training, "name")
    if real:  # torch's own enum, passed to fusegrad's exporter
        return TrainingMode[training.name]
    raise TypeError("'mode' should be a torch.onnx.TrainingMode enum, but got "
                    f"'{type(training)}'.")


def _check_opset(onnx: Any, opset: int) -> None:
    """Refuse an opset this exporter cannot write: PyTorch's own limit above, and below
    MIN_OPSET the older operator forms (Squeeze/Unsqueeze/ReduceSum axes as attributes,
    Split, Resize) that the registry's mappings do not write."""
    if opset > TORCH_MAX_OPSET:
        raise RuntimeError(f"Unsupported onnx_opset_version: {opset}")
    max_opset = min(onnx.defs.onnx_opset_version(), TORCH_MAX_OPSET)
    if not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"opset_version {opset} is not supported: fusegrad's ONNX exporter "
                         f"writes opset versions {MIN_OPSET} to {max_opset} (PyTorch's "
                         "TorchScript-based exporter also writes 7 to 12); export with "
                         f"opset_version={MIN_OPSET} or newer")


# Options of torch.onnx.export that only tune PyTorch's own machinery (its optimizer, report
# files, profiling): accepted and ignored, whatever their value.
_IGNORED = ("external_data", "optimize", "report", "verify", "profile", "dump_exported_program",
            "artifacts_dir", "autograd_inlining")
# Options that change the exported model: only their defaults can be honoured here.
_DEFAULT_ONLY = {"custom_translation_table": None,
                 "custom_opsets": None, "export_modules_as_functions": False}


# How many `export` calls are running the model now (`is_in_onnx_export`).
_exporting = 0


def is_in_onnx_export() -> bool:
    """Whether an ONNX export is running the model now (PyTorch's `torch.onnx.
    is_in_onnx_export`: a forward may take an export-friendly path)."""
    return _exporting > 0


def export(model: Any, args: Any = (), f: Any = None, *, kwargs: dict | None = None,
           verbose: bool | None = None, input_names: list[str] | None = None,
           output_names: list[str] | None = None, opset_version: int | None = None,
           dynamo: bool = True, export_params: bool = True,
           keep_initializers_as_inputs: bool = False, dynamic_axes: dict | None = None,
           training: Any = TrainingMode.EVAL, operator_export_type: Any = None,
           do_constant_folding: bool = True, **options: Any) -> Any:
    """Export `model` called on example `args` (a tensor or a tuple) to ONNX file `f`.

    Mirrors `torch.onnx.export`: keyword inputs come from `kwargs` or from a dict at the end
    of `args` (PyTorch's rule: add an empty dict to pass a dict positionally); `training`
    (a `TrainingMode`) chooses the modules' mode during export, eval by default, and the
    model's modes are restored afterwards; parameters and buffers become initializers named
    after their state_dict keys (graph inputs when `export_params` is False, and also inputs
    with `keep_initializers_as_inputs`); `dynamic_axes` maps an input or output name to
    `{axis: "dim_name"}` (or a list of axes) to make those dimensions symbolic;
    `opset_version` defaults to PyTorch's 20. Raises `UnsupportedOperatorError` naming any
    operator without an ONNX mapping. `dynamic_shapes` (`torch.export`'s form: `Dim`s per
    argument) is read as `dynamic_axes` of the inputs. Returns None with `dynamo=False` (as
    PyTorch's TorchScript-based exporter does); with `dynamo=True`, an `ONNXProgram`
    (`_program.py`: `model_proto`, `save`, calls run in ONNX Runtime). There is one exporter
    here: `dynamo=False` only adds PyTorch's warning about its old one.
    """
    dynamic_shapes = options.pop("dynamic_shapes", None)
    for name in options:
        if name not in _IGNORED and name not in _DEFAULT_ONLY:
            raise TypeError(f"export() got an unexpected keyword argument '{name}'")
        if name in _DEFAULT_ONLY and options[name] not in (_DEFAULT_ONLY[name], {}, ()):
            raise NotImplementedError(f"fusegrad.onnx.export does not support {name}=")
    if operator_export_type is not None and getattr(operator_export_type, "name",
                                                    "ONNX") != "ONNX":
        raise NotImplementedError("fusegrad.onnx.export writes plain ONNX only "
                                  "(operator_export_type=OperatorExportTypes.ONNX)")
    mode = _check_training(training)
    if not dynamo:
        warnings.warn(_LEGACY_WARNING, DeprecationWarning, stacklevel=2)
    onnx = _import_onnx()
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    _check_opset(onnx, opset)
    args, kwargs = _split_args(args, kwargs)
    if dynamic_shapes is not None:
        from ._program import dynamic_axes_from_shapes

        dynamic_axes = {**(dynamic_axes or {}), **dynamic_axes_from_shapes(
            dynamic_shapes, model, args, input_names)}
        input_names = input_names or [_arg_name(model, i) for i in range(len(args))]
    _validate_dynamic_axes(dynamic_axes, input_names, output_names)
    global _exporting
    _exporting += 1
    try:
        proto = capture(model, args, opset, do_constant_folding, export_params,
                        input_names, output_names, dynamic_axes, kwargs=kwargs, training=mode,
                        keep_initializers_as_inputs=keep_initializers_as_inputs)[0]
        _check_dynamic_axes(proto, model, args, opset, do_constant_folding, export_params,
                            input_names, output_names, dynamic_axes, kwargs, mode)
    finally:
        _exporting -= 1
    onnx.checker.check_model(proto)
    if verbose:
        printer = getattr(onnx, "printer", None)
        print(printer.to_text(proto.graph) if printer else
              onnx.helper.printable_graph(proto.graph))
    if f is not None:
        _save_atomic(onnx, proto, f)
    if not dynamo:
        return None
    from ._program import ONNXProgram

    return ONNXProgram(proto)


def _validate_dynamic_axes(dynamic_axes: dict | None, input_names: list | None,
                           output_names: list | None) -> None:
    """PyTorch's warnings for `dynamic_axes`: a key that is none of the given input and
    output names, and axes given as a list (which get generated names: the dict is updated
    in place, as PyTorch's is)."""
    if not dynamic_axes:
        return
    valid = set(input_names or []) | set(output_names or [])
    for key, axes in dynamic_axes.items():
        if key not in valid:
            warnings.warn(f"Provided key {key} for dynamic axes is not a valid input/output "
                          "name", UserWarning, stacklevel=3)
        if isinstance(axes, list):
            warnings.warn("No names were found for specified dynamic axes of provided input."
                          "Automatically generated names will be applied to each dynamic "
                          f"axes of input {key}", UserWarning, stacklevel=3)
            dynamic_axes[key] = {int(a): f"{key}_dynamic_axes_{i + 1}"
                                 for i, a in enumerate(axes)}


def _split_args(args: Any, kwargs: dict | None) -> tuple[tuple, dict]:
    """The positional example inputs and the keyword ones: a dict ending `args` holds
    keyword inputs (PyTorch's rule), merged with `kwargs`."""
    if not isinstance(args, tuple):
        args = (args,)
    kw: dict = {}
    if args and isinstance(args[-1], dict):
        kw.update(args[-1])
        args = args[:-1]
    kw.update(kwargs or {})
    return args, kw


def capture(model: Any, args: Any, opset: int = 17, fold: bool = True,
            export_params: bool = True, input_names: list | None = None,
            output_names: list | None = None, dynamic_axes: dict | None = None, *,
            kwargs: dict | None = None, training: TrainingMode = TrainingMode.EVAL,
            keep_initializers_as_inputs: bool = False,
            symbolic: bool = True) -> tuple[Any, _Exporter]:
    """The unchecked `ModelProto` of `model` on `args` (and keyword inputs `kwargs`), and
    the exporter that built it (its `handled` list holds the OpDef of every op call that
    was mapped). With dynamic axes the sizes are symbolic (`symbolic`); where the model or
    a mapping fails on them, the capture is made again with plain sizes."""
    import fusegrad

    onnx = _import_onnx()
    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"opset_version must be in [{MIN_OPSET}, {max_opset}], got {opset}")
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    Tensor = _tensor_cls()
    ex = _Exporter(onnx, model, opset, fold)
    b = ex.b
    input_names = list(input_names or [])
    graph_inputs = []
    # Keyword inputs follow the positional ones, in the dict's order (as PyTorch's).
    examples = [(i, a, None) for i, a in enumerate(args)]
    examples += [(len(args) + j, a, key) for j, (key, a) in enumerate(kwargs.items())]
    for i, a, key in examples:
        if not isinstance(a, Tensor):
            continue
        default = key if key is not None else _arg_name(model, i)
        name = b.reserve(input_names[i] if i < len(input_names) else default)
        dims: list = list(a.shape)
        for axis, dim_name in _dynamic(dynamic_axes, name).items():
            dims[axis] = dim_name
        dtype = np.dtype(a._data.dtype)
        graph_inputs.append(_value_info(onnx, name, dtype, dims))
        value = Value(name, dtype, a.dim())
        ex.bind(a, value)
        for axis, dim_name in _dynamic(dynamic_axes, name).items():
            n = a._data.shape[axis]
            if dim_name not in ex.axis_symbols and n >= 2:  # sizes 0 and 1 stay static
                ex.axis_symbols[dim_name] = ex.new_symbol(f"{name}.size({axis})", n, value,
                                                          axis)
    ex.graph_inputs = list(graph_inputs)
    names = list(output_names or [])
    for name in names:  # before any node is named
        b.reserve(name)
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    if training is not TrainingMode.PRESERVE:
        for m, _ in modes:
            m.training = training is TrainingMode.TRAINING
    symbolic = bool(symbolic and dynamic_axes)
    saved = _state(model) if symbolic else []
    try:
        sizes = _symbolic_sizes(ex) if symbolic else contextlib.nullcontext()
        with fusegrad.no_grad(), sizes, _Capture(ex):
            out = model(*args, **kwargs)
    except UnsupportedOperatorError:
        raise
    except Exception:
        if not symbolic:
            raise
        failed = True
    else:
        failed = False
    finally:
        for m, mode in modes:
            m.training = mode
    if failed:  # code that needs plain sizes: the example's, as before symbolic sizes
        _restore(saved)
        return capture(model, args, opset, fold, export_params, input_names, output_names,
                       dynamic_axes, kwargs=kwargs, training=training,
                       keep_initializers_as_inputs=keep_initializers_as_inputs,
                       symbolic=False)
    outputs = [ex.lookup(t) for t in _flatten_outputs(out) if isinstance(t, Tensor)]
    if len(names) > len(outputs):
        raise RuntimeError(f"number of output names provided ({len(names)}) exceeded number "
                           f"of outputs ({len(outputs)})")
    # Outputs without a given name get the default ones (PyTorch names the rest itself).
    if not names and len(outputs) == 1:
        names = [b.fresh("output")]
    else:
        names += [b.fresh(f"output_{i}") for i in range(len(names), len(outputs))]
    proto = _model(onnx, ex, type(model).__name__ or "main", graph_inputs, outputs, names,
                   export_params, dynamic_axes, keep_initializers_as_inputs)
    return proto, ex


def _drop_dead(b: Builder, outputs: list[str]) -> None:
    """Remove the nodes no output depends on (a buffer's in-place update in training mode, a
    size computed and not used), as PyTorch's exporter eliminates dead code."""
    needed = set(outputs)
    keep = [False] * len(b.nodes)
    for k in range(len(b.nodes) - 1, -1, -1):
        node = b.nodes[k]
        if any(o in needed for o in node.output):
            keep[k] = True
            needed.update(i for i in node.input if i)
    if all(keep):
        return
    b.nodes = [n for n, k in zip(b.nodes, keep) if k]
    b.origins = [o for o, k in zip(b.origins, keep) if k]


def _model(onnx: Any, ex: _Exporter, graph_name: str, graph_inputs: list, outputs: list,
           names: list, export_params: bool, dynamic_axes: dict | None,
           keep_initializers_as_inputs: bool = False) -> Any:
    b = ex.b
    produced = {o for node in b.nodes for o in node.output}
    renamed: dict[str, str] = {}
    out_types, out_ranks = [], []
    for v, name in zip(outputs, names):
        src = b.name_of(v)
        if isinstance(v, Value) and src in produced and src not in renamed:
            renamed[src] = name
        else:
            b.nodes.append(onnx.helper.make_node("Identity", [src], [name],
                                                 name=b.fresh(f"Identity_{name}")))
            b.origins.append("")
        out_types.append(dtype_of(v))
        out_ranks.append(v.rank if isinstance(v, Value) else v.array.ndim)
    for node in b.nodes:
        for seq in (node.input, node.output):
            for i, s in enumerate(seq):
                if s in renamed:
                    seq[i] = renamed[s]
    _drop_dead(b, names)
    used = {i for node in b.nodes for i in node.input} | set(names)
    initializers = [init for init in b.initializers.values() if init.name in used]
    if not export_params or keep_initializers_as_inputs:
        keep = []
        for init in initializers:
            if init.name in ex.param_keys:
                arr = onnx.numpy_helper.to_array(init)
                graph_inputs.append(_value_info(onnx, init.name, arr.dtype, list(arr.shape)))
                if export_params:  # an input whose default is the initializer
                    keep.append(init)
            else:
                keep.append(init)
        initializers = keep
    graph_outputs = [_value_info(onnx, name, dt, None) for name, dt in zip(names, out_types)]
    ranks = dict(zip(names, out_ranks))
    graph = onnx.helper.make_graph(b.nodes, graph_name, graph_inputs, graph_outputs,
                                   initializer=initializers)
    from ..version import fusegrad as package_version

    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", b.opset)],
                                   producer_name="fusegrad", producer_version=package_version)
    model.ir_version = ir_version_for(onnx, b.opset)
    _output_shapes(onnx, model, ranks, dynamic_axes)
    return model


def _output_shapes(onnx: Any, model: Any, ranks: dict[str, int | None],
                   dynamic_axes: dict | None) -> None:
    """Fill the outputs' shapes from ONNX shape inference (dims of unknown size where it
    cannot tell), with the requested dim names."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - shapes are optional information
        inferred = model
    known = {o.name: o for o in inferred.graph.output}
    known.update({v.name: v for v in inferred.graph.value_info})
    for out in model.graph.output:
        src = known.get(out.name)
        if src is not None and src.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.CopyFrom(src.type.tensor_type.shape)
            for dim in out.type.tensor_type.shape.dim:
                if dim.dim_param.startswith("unk__"):  # inference's placeholder names
                    dim.Clear()
        elif ranks.get(out.name) is not None:
            shape = out.type.tensor_type.shape
            shape.SetInParent()
            for _ in range(ranks[out.name]):
                shape.dim.add()
        axes = _dynamic(dynamic_axes, out.name)
        if axes:
            shape = out.type.tensor_type.shape
            if not out.type.tensor_type.HasField("shape") or not shape.dim:
                continue
            for axis, dim_name in axes.items():
                dim = shape.dim[axis]
                dim.Clear()
                dim.dim_param = dim_name
