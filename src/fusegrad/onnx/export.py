"""`export`: trace a Module with fusegrad.fx and write it as an ONNX model.

Steps: put the model in eval mode (as torch.onnx.export does by default), trace it with
`symbolic_trace`, record every node's dtype and shape with `ShapeProp` on the example
inputs, map the nodes to ONNX operators (`modules.py`, `functions.py`), fold the nodes whose
inputs are all constants by running them in fusegrad, then build, check and save the
`ModelProto` atomically (a temporary file renamed over the target).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fx.proxy import flatten_arguments
from ._graph import Builder, Const, UnsupportedOperatorError, Value
from .functions import HANDLERS, OPERATOR_NAMES
from .modules import MODULE_HANDLERS

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


def _np_dtype(dt: Any) -> np.dtype | None:
    np_dt = getattr(dt, "np", None)
    return None if np_dt is None else np.dtype(np_dt)


def _meta_type(val: Any) -> tuple[np.dtype | None, int | None, tuple | None]:
    """(dtype, rank, shape) of a node's recorded result."""
    from .._tensor import Tensor

    if isinstance(val, Tensor):
        return _np_dtype(val.dtype), val.dim(), tuple(val.shape)
    if isinstance(val, bool):
        return np.dtype(np.bool_), 0, ()
    if isinstance(val, int):
        return np.dtype(np.int64), 0, ()
    if isinstance(val, float):
        return np.dtype(np.float32), 0, ()
    return None, None, None


class _Exporter:
    """Maps the nodes of one traced graph to ONNX; handlers receive it as `ctx`."""

    def __init__(self, onnx: Any, gm: Any, opset: int, fold: bool) -> None:
        self.onnx = onnx
        self.gm = gm
        self.b = Builder(onnx, opset, fold)
        self.params: dict[str, Const] = {}
        self.param_keys: set[str] = set()
        self.out_dtype: np.dtype | None = None
        self.out_rank: int | None = None
        self.node: Any = None

    # ------------------------------------------------------------------ handler API

    def emit(self, op_type: str, inputs: list, dtype: Any = None, rank: int | None = None,
             **attrs: Any) -> Value:
        """Append a node named after the current fx node; dtype and rank default to the fx
        node's result."""
        if dtype is None:
            dtype = self.out_dtype
            if dtype is None:
                dtype = next(v.dtype if isinstance(v, Value) else v.array.dtype
                             for v in inputs if v is not None)
        rank = self.out_rank if rank is None else rank
        return self.b.op(op_type, inputs, dtype, rank, name=self.node.name, **attrs)

    def param(self, key: str, tensor: Any) -> Const | None:
        """The constant for parameter or buffer `key` (its initializer is named `key`)."""
        if tensor is None:
            return None
        if key not in self.params:
            self.params[key] = Const(np.array(tensor.detach().numpy()), name=key)
            self.param_keys.add(key)
        return self.params[key]

    def input_shape(self, i: int) -> tuple | None:
        """The example shape of the current node's i-th argument."""
        arg = self.node.args[i]
        return _meta_type(getattr(arg, "meta", {}).get("val"))[2]

    # ------------------------------------------------------------------ nodes

    def _fold(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """Run `fn` in fusegrad on constants; tensors come back as Consts."""
        import fusegrad

        from .._tensor import Tensor

        def to_t(v: Any) -> Any:
            if isinstance(v, Const):
                return fusegrad.from_numpy(np.array(v.array))
            if isinstance(v, (list, tuple)):
                return type(v)(to_t(x) for x in v)
            return v

        def from_t(v: Any) -> Any:
            if isinstance(v, Tensor):
                return Const(np.array(v.detach().numpy()))
            if isinstance(v, (list, tuple)) and not isinstance(v, fusegrad.Size):
                return type(v)(from_t(x) for x in v)
            return v

        with fusegrad.no_grad():
            return from_t(fn(*to_t(args), **{k: to_t(v) for k, v in kwargs.items()}))

    def _foldable(self, args: tuple, kwargs: dict) -> bool | None:
        """True: only constants and Python values; None: no tensors at all; False: some
        input is computed by the graph."""
        items = list(flatten_arguments((args, kwargs)))
        if any(isinstance(v, Value) for v in items):
            return False
        return True if any(isinstance(v, Const) for v in items) else None

    def run_node(self, n: Any, args: tuple, kwargs: dict) -> Any:
        """The ONNX value (or Python value) of call node `n`."""
        self.node = n
        self.out_dtype, self.out_rank, _ = _meta_type(n.meta.get("val"))
        foldable = self._foldable(args, kwargs)
        if n.op == "call_module":
            m = self.gm.get_submodule(n.target)
            if foldable is None or (foldable and self.b.fold):
                return self._fold(m, args, kwargs)
            handler = None
            for cls in type(m).__mro__:
                handler = MODULE_HANDLERS.get(cls.__name__)
                if handler is not None:
                    break
            if handler is None:
                raise UnsupportedOperatorError(
                    f"module {type(m).__name__} ('{n.target}') has no ONNX mapping")
            if kwargs or len(args) != 1:
                raise UnsupportedOperatorError(f"module {type(m).__name__} called with "
                                               f"{len(args)} arguments has no ONNX mapping")
            return handler(self, m, n.target, args[0])
        if n.op == "call_method":
            name, fn = n.target, lambda s, *a, **k: getattr(s, n.target)(*a, **k)
        else:
            fn = n.target
            name = OPERATOR_NAMES.get(fn)
            if name is None:
                module = getattr(fn, "__module__", "") or ""
                name = getattr(fn, "__name__", repr(fn))
                if not module.startswith("fusegrad"):
                    name = f"{module}.{name}"
        if foldable is None or (foldable and self.b.fold):
            return self._fold(fn, args, kwargs)
        if name.endswith("_") and name[:-1] in HANDLERS and n.op == "call_method":
            name = name[:-1]
        handler = HANDLERS.get(name)
        if handler is None:
            raise UnsupportedOperatorError(f"{n.op} '{name}' has no ONNX mapping")
        if name == "getattr":
            return handler(self, *args)
        return handler(self, *args, **kwargs)


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


def _save_atomic(onnx: Any, proto: Any, f: Any) -> None:
    """Write `proto` to path `f` through a temporary file in the same folder and a rename
    (or to a writable binary file object)."""
    if hasattr(f, "write"):
        f.write(proto.SerializeToString())
        return
    from ..serialization import write_atomically

    write_atomically(f, lambda out: out.write(proto.SerializeToString()))


def export(model: Any, args: Any, f: Any, export_params: bool = True, opset_version: int = 17,
           do_constant_folding: bool = True, input_names: list[str] | None = None,
           output_names: list[str] | None = None, dynamic_axes: dict | None = None,
           verbose: bool = False) -> Any:
    """Export `model` called on example `args` (a tensor or a tuple) to ONNX file `f`.

    Mirrors `torch.onnx.export`: the model runs in eval mode during export; parameters and
    buffers become initializers named after their state_dict keys (graph inputs when
    `export_params` is False); `dynamic_axes` maps an input or output name to
    `{axis: "dim_name"}` (or a list of axes) to make those dimensions symbolic. Raises
    `UnsupportedOperatorError` naming any operator without an ONNX mapping. Returns the
    `onnx.ModelProto` that was written.
    """
    onnx = _import_onnx()
    from ..fx import symbolic_trace
    from ..fx.passes.shape_prop import ShapeProp

    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset_version <= max_opset:
        raise ValueError(f"opset_version must be in [{MIN_OPSET}, {max_opset}], "
                         f"got {opset_version}")
    if not isinstance(args, tuple):
        args = (args,)
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    for m, _ in modes:
        m.training = False
    try:
        gm = symbolic_trace(model)
        ShapeProp(gm).propagate(*args)
        proto = _build(onnx, gm, args, opset_version, do_constant_folding, export_params,
                       input_names, output_names, dynamic_axes)
    finally:
        for m, mode in modes:
            m.training = mode
    onnx.checker.check_model(proto)
    if verbose:
        print(onnx.helper.printable_graph(proto.graph))
    _save_atomic(onnx, proto, f)
    return proto


def _build(onnx: Any, gm: Any, args: tuple, opset: int, fold: bool, export_params: bool,
           input_names: list | None, output_names: list | None,
           dynamic_axes: dict | None) -> Any:
    from ..fx.node import map_arg

    ex = _Exporter(onnx, gm, opset, fold)
    b = ex.b
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    input_names = list(input_names or [])
    out_node = next(n for n in nodes if n.op == "output")
    env: dict = {}
    graph_inputs = []
    for i, n in enumerate(placeholders):
        value = args[i] if i < len(args) else None
        dtype, rank, shape = _meta_type(value)
        if dtype is None or rank is None or not hasattr(value, "shape"):
            env[n] = value
            continue
        name = b.reserve(input_names[i] if i < len(input_names) else str(n.target))
        dims: list = list(shape)
        for axis, dim_name in _dynamic(dynamic_axes, name).items():
            dims[axis] = dim_name
        graph_inputs.append(_value_info(onnx, name, dtype, dims))
        env[n] = Value(name, dtype, rank)
    results_flat = list(flatten_arguments(out_node.args[0]))
    n_out = sum(1 for r in results_flat if hasattr(r, "op"))
    names = list(output_names or [])
    if not names:
        names = ["output"] if n_out == 1 else [f"output_{i}" for i in range(n_out)]
    for name in names:
        b.reserve(name)
    for n in nodes:
        if n.op == "placeholder":
            continue
        if n.op == "get_attr":
            obj = gm
            for part in n.target.split("."):
                obj = getattr(obj, part)
            env[n] = ex.param(n.target, obj) if hasattr(obj, "detach") else obj
            continue
        if n.op == "output":
            break
        a = map_arg(n.args, lambda x: env[x])
        k = map_arg(n.kwargs, lambda x: env[x])
        env[n] = ex.run_node(n, a, k)
    outputs = [v for v in flatten_arguments(map_arg(out_node.args[0], lambda x: env[x]))
               if isinstance(v, (Value, Const))]
    if len(outputs) != len(names):
        raise ValueError(f"the model has {len(outputs)} tensor outputs but "
                         f"{len(names)} output_names were given")
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
        out_types.append(v.dtype if isinstance(v, Value) else v.array.dtype)
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
    graph = onnx.helper.make_graph(b.nodes, gm.__class__.__name__ or "main", graph_inputs,
                                   graph_outputs, initializer=initializers)
    from .. import __version__

    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)],
                                   producer_name="fusegrad", producer_version=__version__)
    model.ir_version = ir_version_for(onnx, opset)
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


