"""`export`: run a Module under a capturing dispatch mode and write it as an ONNX model.

Steps: put the model in eval mode (as torch.onnx.export does by default), run it on the
example inputs under `_Capture`, a dispatch mode that sees every registry op call; each call
is mapped to ONNX through its `OpDef.onnx` entry (the registry is the only list of ops).
Parameters and buffers become initializers named after their state_dict keys; an op whose
inputs are all constants is folded (its example result becomes a constant). The
`ModelProto` is then built, checked and saved atomically.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np

from .._dispatch import DispatchMode, call
from ._graph import Builder, Const, UnsupportedOperatorError, Value, dtype_of

MIN_OPSET = 13


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
            f"{opset} is not supported.")


class _Unmapped:
    """Stands for an op output the op's mapping does not produce (batch norm's saved
    statistics, max pool's indices): using it in the graph is an error."""

    def __init__(self, op: Any, index: int) -> None:
        self.op = op
        self.index = index


def _tensor_cls() -> type:
    from .._tensor import Tensor

    return Tensor


class _Capture(DispatchMode):
    """Runs each op for real (the example values drive folding and shape-dependent
    mappings) and hands the call to the exporter."""

    def __init__(self, exporter: _Exporter) -> None:
        self.exporter = exporter

    def __fusegrad_dispatch__(self, op: Any, args: tuple) -> Any:
        result = call(op, *args)
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
                return value
        if any(isinstance(value, Value) for _, value in shared):
            raise UnsupportedOperatorError(
                "a tensor computed from the model's inputs outside the registry ops (a view "
                "or copy made without dispatch) cannot be exported")
        return Const(np.array(a._data))  # made in forward from constants: a constant

    # ------------------------------------------------------------------ one op call

    def record(self, op: Any, args: tuple, result: Any) -> None:
        """Map one op call (its example `result` computed) to ONNX nodes."""
        Tensor = _tensor_cls()
        inputs = [self.lookup(a) for a in args]
        flat = [v for x in inputs for v in (x if isinstance(x, list) else [x])]
        results = list(result) if isinstance(result, tuple) else [result]
        if op.inplace and args[0]._base is not None:
            # A write into part of a tensor changes its base and every view of it.
            if any(isinstance(v, Value) for v in flat):
                raise UnsupportedOperatorError(
                    f"{unsupported_message(op, self.opset)[:-1]} when it writes into a view.")
            for t, _ in self.by_counter.pop(id(args[0]._vc), ()):
                self.env.pop(id(t), None)  # constants: read again from the data when used
        if not any(isinstance(v, Value) for v in flat):
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
        if isinstance(entry, str):
            outs = _string_rule(b, op, entry, inputs, args, first)
        else:
            outs = entry(b, inputs, args, {}, self.opset)
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
        if isinstance(a, Tensor) or (i in op.tensor_args and isinstance(a, (int, float))):
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


def _grown_inputs(model: Any, args: tuple, input_names: list | None,
                  dynamic_axes: dict) -> tuple | None:
    """`args` with every dynamic axis of a tensor input one longer (its first slice
    repeated at the end), or None when no input has a dynamic axis."""
    Tensor = _tensor_cls()
    names = list(input_names or [])
    grown, changed = [], False
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            name = names[i] if i < len(names) else _arg_name(model, i)
            data = a._data
            for axis in _dynamic(dynamic_axes, name):
                if data.shape[axis]:
                    data = np.concatenate([data, data.take([0], axis)], axis)
                    changed = True
            if data is not a._data:
                a = Tensor._make(data)
        grown.append(a)
    return tuple(grown) if changed else None


def _check_dynamic_axes(proto: Any, model: Any, args: Any, opset: int, fold: bool,
                        export_params: bool, input_names: list | None,
                        output_names: list | None, dynamic_axes: dict | None) -> None:
    """Refuse a graph that computes with the example's size of a dynamic axis (a size read
    as a number: `x.sum(0) / x.shape[0]`, `x[-1]`, `arange(x.size(0))`), which would give
    wrong results, silently, at other sizes: the model is captured again on inputs one
    longer on each dynamic axis, and the two graphs must be the same."""
    if not dynamic_axes:
        return
    grown = _grown_inputs(model, args if isinstance(args, tuple) else (args,), input_names,
                          dynamic_axes)
    if grown is None:
        return
    try:
        other = capture(model, grown, opset, fold, export_params, input_names, output_names,
                        dynamic_axes)[0]
    except Exception:  # the model does not run at another size: nothing to compare
        return

    def content(p):
        return ([n.SerializeToString() for n in p.graph.node],
                [t.SerializeToString() for t in p.graph.initializer])

    if content(other) != content(proto):
        raise RuntimeError(
            "torch.onnx.export: the exported graph depends on the example's size of a "
            f"dynamic axis ({dynamic_axes}): the model reads a size as a number (such as "
            "x.shape[0] in arithmetic, a negative index, or a factory of x.size(0)), which "
            "the graph would keep as a constant and compute wrongly at other sizes; export "
            "without those dynamic axes")


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


def export(model: Any, args: Any, f: Any, export_params: bool = True, opset_version: int = 17,
           do_constant_folding: bool = True, input_names: list[str] | None = None,
           output_names: list[str] | None = None, dynamic_axes: dict | None = None,
           verbose: bool = False, *, dynamo: bool = True) -> Any:
    """Export `model` called on example `args` (a tensor or a tuple) to ONNX file `f`.

    Mirrors `torch.onnx.export`: the model runs in eval mode during export; parameters and
    buffers become initializers named after their state_dict keys (graph inputs when
    `export_params` is False); `dynamic_axes` maps an input or output name to
    `{axis: "dim_name"}` (or a list of axes) to make those dimensions symbolic. Raises
    `UnsupportedOperatorError` naming any operator without an ONNX mapping. Returns the
    `onnx.ModelProto` that was written. `dynamo` chooses between PyTorch's two exporters;
    there is one here, and `dynamo=False` only brings PyTorch's warning about the old one.
    """
    if not dynamo:
        warnings.warn(_LEGACY_WARNING, DeprecationWarning, stacklevel=2)
    onnx = _import_onnx()
    proto = capture(model, args, opset_version, do_constant_folding, export_params,
                    input_names, output_names, dynamic_axes)[0]
    _check_dynamic_axes(proto, model, args, opset_version, do_constant_folding,
                        export_params, input_names, output_names, dynamic_axes)
    onnx.checker.check_model(proto)
    if verbose:
        printer = getattr(onnx, "printer", None)
        print(printer.to_text(proto.graph) if printer else
              onnx.helper.printable_graph(proto.graph))
    _save_atomic(onnx, proto, f)
    return proto


def capture(model: Any, args: Any, opset: int = 17, fold: bool = True,
            export_params: bool = True, input_names: list | None = None,
            output_names: list | None = None,
            dynamic_axes: dict | None = None) -> tuple[Any, _Exporter]:
    """The unchecked `ModelProto` of `model` on `args`, and the exporter that built it (its
    `handled` list holds the OpDef of every op call that was mapped)."""
    import fusegrad

    onnx = _import_onnx()
    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"opset_version must be in [{MIN_OPSET}, {max_opset}], got {opset}")
    if not isinstance(args, tuple):
        args = (args,)
    Tensor = _tensor_cls()
    ex = _Exporter(onnx, model, opset, fold)
    b = ex.b
    input_names = list(input_names or [])
    graph_inputs = []
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            continue
        name = b.reserve(input_names[i] if i < len(input_names) else _arg_name(model, i))
        dims: list = list(a.shape)
        for axis, dim_name in _dynamic(dynamic_axes, name).items():
            dims[axis] = dim_name
        dtype = np.dtype(a._data.dtype)
        graph_inputs.append(_value_info(onnx, name, dtype, dims))
        ex.bind(a, Value(name, dtype, a.dim()))
    names = list(output_names or [])
    for name in names:  # before any node is named
        b.reserve(name)
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    for m, _ in modes:
        m.training = False
    try:
        with fusegrad.no_grad(), _Capture(ex):
            out = model(*args)
    finally:
        for m, mode in modes:
            m.training = mode
    outputs = [ex.lookup(t) for t in _flatten_outputs(out) if isinstance(t, Tensor)]
    if not names:
        names = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in
                                                       range(len(outputs))]
        names = [b.fresh(name) for name in names]
    if len(outputs) != len(names):
        raise ValueError(f"the model has {len(outputs)} tensor outputs but "
                         f"{len(names)} output_names were given")
    proto = _model(onnx, ex, type(model).__name__ or "main", graph_inputs, outputs, names,
                   export_params, dynamic_axes)
    return proto, ex


def _model(onnx: Any, ex: _Exporter, graph_name: str, graph_inputs: list, outputs: list,
           names: list, export_params: bool, dynamic_axes: dict | None) -> Any:
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
    initializers = list(b.initializers.values())
    if not export_params:
        keep = []
        for init in initializers:
            if init.name in ex.param_keys:
                arr = onnx.numpy_helper.to_array(init)
                graph_inputs.append(_value_info(onnx, init.name, arr.dtype, list(arr.shape)))
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
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
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
