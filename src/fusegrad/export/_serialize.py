"""`save` / `load` for exported programs: one safetensors file, no pickled code.

The tensors are the program's state and constants; the `__metadata__` entry
`fusegrad.export` is the program as JSON: its nodes (op kind, name, target, arguments), its
signature, the structure of its inputs and outputs (as skeletons of nested tuples, lists and
dicts) and the example's shapes. Loading parses that JSON and rebuilds the graph; every
`call_function` target must be a registry op (by its registry name) or one of the few
helpers export itself writes, or the file is refused. Nothing from the file is imported,
unpickled or evaluated.
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any

from .._device import device as _device_cls
from .._dtype import dtype as _dtype_cls
from .._tensor import Tensor
from ..utils import _pytree as pytree
from .graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

FORMAT = "fusegrad.export"
VERSION = 1


def _helpers() -> dict:

    return {"getitem": operator.getitem}


class ExportFormatError(ValueError):
    """A file that is no valid saved exported program."""


def _target_name(target: Any) -> str:
    from ..ops.call_handles import CallOverload

    op = getattr(target, "op", None)
    if op is not None and hasattr(op, "name"):
        return "op:" + op.name
    if isinstance(target, CallOverload):  # (a factory, a layer kept whole)
        return f"call:{target.__name__}.{target._overloadname}"
    for name, fn in _helpers().items():
        if fn is target:
            return "fn:" + name
    raise ValueError(f"fusegrad.export.save: cannot save a node calling {target!r}")


def _resolve(name: str) -> Any:
    from ..ops.overloads import overload_of
    from ..ops.registry import REGISTRY

    kind, _, rest = name.partition(":")
    if kind == "op" and rest in REGISTRY:
        return overload_of(REGISTRY[rest])
    if kind == "fn" and rest in _helpers():
        return _helpers()[rest]
    if kind == "call":
        from ..ops.call_handles import is_call
        from ..ops.overloads import _overload_of_handle

        if is_call(rest):
            return _overload_of_handle(*rest.split("."))
    raise ExportFormatError(f"invalid saved program: unknown call target {name!r}")


def _enc(v: Any) -> Any:
    from ..fx.node import Node

    if isinstance(v, Node):
        return {"node": v.name}
    if isinstance(v, tuple):
        return {"tuple": [_enc(a) for a in v]}
    if isinstance(v, list):
        return [_enc(a) for a in v]
    if isinstance(v, dict):
        return {"dict": [[k, _enc(a)] for k, a in v.items()]}
    if isinstance(v, _dtype_cls):
        return {"dtype": str(v).split(".")[-1]}
    if isinstance(v, _device_cls):
        return {"device": str(v)}
    if isinstance(v, float) and v != v or isinstance(v, float) and abs(v) == float("inf"):
        return {"float": repr(v)}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f"fusegrad.export.save: cannot save the argument {v!r}")


def _dec(v: Any, env: dict) -> Any:
    import fusegrad

    if isinstance(v, list):
        return [_dec(a, env) for a in v]
    if isinstance(v, dict):
        if set(v) == {"node"}:
            if v["node"] not in env:
                raise ExportFormatError(f"invalid saved program: {v['node']!r} used before "
                                        "it is defined")
            return env[v["node"]]
        if set(v) == {"tuple"}:
            return tuple(_dec(a, env) for a in v["tuple"])
        if set(v) == {"dict"}:
            return {k: _dec(a, env) for k, a in v["dict"]}
        if set(v) == {"dtype"}:
            d = vars(fusegrad).get(str(v["dtype"]))  # (no lazy import on a forged name)
            if not isinstance(d, _dtype_cls):
                raise ExportFormatError("invalid saved program: bad dtype")
            return d
        if set(v) == {"device"} and v["device"] in ("cpu", "meta"):
            return _device_cls(v["device"])
        if set(v) == {"float"} and v["float"] in ("nan", "inf", "-inf"):
            return float(v["float"])
        raise ExportFormatError("invalid saved program: bad argument")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ExportFormatError("invalid saved program: bad argument")


def _skeleton(spec: Any) -> Any:
    """A JSON structure with `spec`'s shape: leaves are their indices."""
    tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)

    def enc(t):
        if isinstance(t, int):
            return t
        if type(t) is tuple:
            return {"tuple": [enc(a) for a in t]}
        if type(t) is list:
            return [enc(a) for a in t]
        if type(t) is dict and all(isinstance(k, str) for k in t):
            return {"dict": [[k, enc(a)] for k, a in t.items()]}
        if t is None:
            return None
        raise ValueError(f"fusegrad.export.save: cannot save a {type(t).__name__} in the "
                         "program's inputs or outputs")

    return enc(tree)


def _spec_of(skeleton: Any) -> Any:
    def dec(t):
        if isinstance(t, int) and not isinstance(t, bool):
            return t
        if isinstance(t, list):
            return [dec(a) for a in t]
        if isinstance(t, dict) and set(t) == {"tuple"}:
            return tuple(dec(a) for a in t["tuple"])
        if isinstance(t, dict) and set(t) == {"dict"}:
            return {str(k): dec(a) for k, a in t["dict"]}
        if t is None:
            return None
        raise ExportFormatError("invalid saved program: bad input or output structure")

    return pytree.tree_flatten(dec(skeleton))[1]


def save(ep: Any, f: Any, *, extra_files: dict | None = None, opset_version: Any = None,
         pickle_protocol: int = 2) -> None:
    """Write `ep` to `f` (a path, written atomically, or a binary file)."""
    from ..serialization import save_safetensors
    from .exported_program import ExportedProgram

    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got "
                        f"'{type(ep).__name__}' instead.")
    nodes = []
    for n in ep.graph.nodes:
        entry = {"op": n.op, "name": n.name}
        if n.op == "call_function":
            entry["target"] = _target_name(n.target)
        elif n.op == "get_attr":
            entry["target"] = n.target
        if n.op != "placeholder":
            entry["args"] = _enc(tuple(n.args))
            entry["kwargs"] = _enc(dict(n.kwargs))
        nodes.append(entry)
    sig = ep.graph_signature
    program = {
        "format": FORMAT, "version": VERSION, "nodes": nodes,
        "inputs": [{"kind": s.kind.name, "name": s.arg.name, "target": s.target,
                    "persistent": s.persistent,
                    "constant": _enc(s.arg.value) if isinstance(s.arg, ConstantArgument)
                    else None, "is_constant": isinstance(s.arg, ConstantArgument)}
                   for s in sig.input_specs],
        "outputs": [{"kind": s.kind.name, "name": s.arg.name, "target": s.target}
                    for s in sig.output_specs],
        "in_spec": _skeleton(ep._in_spec), "out_spec": _skeleton(ep._out_spec),
        "leaf_shapes": [None if s is None else list(s) for s in ep._leaf_shapes],
        "arg_order": ep._arg_order, "forward_arg_names": ep._forward_arg_names,
        "training": ep._is_training,
        "state": list(ep.state_dict), "constants": list(ep.constants),
        "parameters": [k for k, _ in ep.named_parameters()],
    }
    tensors = {}
    for k, v in {**ep.state_dict, **ep.constants}.items():
        if isinstance(v, Tensor):
            tensors[k] = v.detach()
    save_safetensors(tensors, f, metadata={FORMAT: json.dumps(program)})


def load(f: Any, *, extra_files: dict | None = None, expected_opset_version: Any = None) -> Any:
    """Read a program `save` wrote (never runs code from the file)."""
    from ..fx import Graph
    from ..nn.parameter import Parameter
    from ..serialization import _looks_like_safetensors, _safetensors_from_bytes
    from .exported_program import ExportedProgram

    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            raw = fh.read()
    else:
        raw = f.read()
    if not _looks_like_safetensors(raw[:9]):
        raise ExportFormatError("not a saved fusegrad exported program")
    tensors, metadata = _safetensors_from_bytes(raw, with_metadata=True)
    try:
        program = json.loads((metadata or {})[FORMAT])
    except (KeyError, ValueError) as e:
        raise ExportFormatError("not a saved fusegrad exported program") from e
    if program.get("format") != FORMAT or program.get("version") != VERSION:
        raise ExportFormatError("unsupported saved exported program version")
    graph = Graph()
    env: dict = {}
    for entry in program["nodes"]:
        op, name = entry["op"], entry["name"]
        if op == "placeholder":
            node = graph.placeholder(name)
        elif op == "get_attr":
            if entry["target"] not in tensors:
                raise ExportFormatError("invalid saved program: unknown attribute")
            node = graph.get_attr(entry["target"])
        elif op == "call_function":
            node = graph.call_function(_resolve(entry["target"]),
                                       _dec(entry["args"], env), _dec(entry["kwargs"], env))
        elif op == "output":
            node = graph.output(_dec(entry["args"], env)[0])
        else:
            raise ExportFormatError(f"invalid saved program: node kind {op!r}")
        node.name = name
        env[name] = node
    params = set(program["parameters"])
    state = {k: Parameter(tensors[k]) if k in params else tensors[k]
             for k in program["state"]}
    constants = {k: tensors[k] for k in program["constants"]}
    inputs = [InputSpec(InputKind[s["kind"]],
                        ConstantArgument(s["name"], _dec(s["constant"], {}))
                        if s["is_constant"] else TensorArgument(s["name"]),
                        s["target"], s["persistent"]) for s in program["inputs"]]
    outputs = [OutputSpec(OutputKind[s["kind"]], TensorArgument(s["name"]), s["target"])
               for s in program["outputs"]]
    ep = ExportedProgram(
        graph=graph, signature=ExportGraphSignature(inputs, outputs), state_dict=state,
        constants=constants, in_spec=_spec_of(program["in_spec"]),
        out_spec=_spec_of(program["out_spec"]), example_inputs=None,
        leaves=[],
        arg_order=program["arg_order"], forward_arg_names=program["forward_arg_names"],
        is_training=program["training"])
    ep._leaf_shapes = [None if s is None else tuple(s) for s in program["leaf_shapes"]]
    return ep
