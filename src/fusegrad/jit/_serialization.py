"""`save` and `load` for scripted programs: one safetensors file, no pickled code.

The file is a safetensors file (written atomically when given a path) whose tensors are the
program's parameters, buffers and tensor constants, and whose `__metadata__` entry
`fusegrad.jit` is the program as JSON: the graphs of its functions and methods (node kinds,
value names and types, JSON attributes), the module tree (attribute names, the tensor each
parameter and buffer is, plain attributes), the parameter schemas and the classes scripted
code makes objects of (attribute types and method graphs; loading makes a plain class for
each, whose methods run those graphs).

Loading parses that JSON and rebuilds the graphs; it never imports, unpickles or evaluates
anything from the file. Every node must be a known `prim::` kind or an `aten::` operation
that `_interpreter.resolve` finds among fusegrad's tensor operations, and every value must be
defined before use, or the file is refused. A PyTorch TorchScript archive (a zip holding
`code/` and `constants.pkl`) is recognised and refused with a message saying why.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

from .._tensor import Tensor
from ..nn.parameter import Parameter
from ..serialization import _looks_like_safetensors, _safetensors_from_bytes, save_safetensors
from ._classes import ScriptClass
from ._interpreter import allowed_kind
from ._ir import IRFormatError, graph_from_json, graph_to_json
from ._script import (
    Method,
    RecursiveScriptModule,
    Schema,
    ScriptFunction,
    ScriptModule,
    Unit,
)

FORMAT = "fusegrad.jit"
VERSION = 1


def _walk(block):
    for node in block.nodes:
        yield node
        for b in node.blocks:
            yield from _walk(b)


def _json_value(value):
    if isinstance(value, tuple):
        return {"tuple": [_json_value(v) for v in value]}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _from_json_value(value):
    if isinstance(value, dict):
        if set(value) != {"tuple"} or not isinstance(value["tuple"], list):
            raise IRFormatError("invalid saved graph: bad constant")
        return tuple(_from_json_value(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_from_json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise IRFormatError("invalid saved graph: bad constant")


def _schema_json(schema: Schema) -> dict:
    return {"params": [list(p) for p in schema.params],
            "defaults": {k: _json_value(v) for k, v in schema.defaults.items()},
            "return": schema.return_type, "inferred": sorted(schema.inferred)}


def _schema_from_json(data) -> Schema:
    if not isinstance(data, dict) or not isinstance(data.get("params"), list):
        raise IRFormatError("invalid saved schema")
    params = []
    for p in data["params"]:
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise IRFormatError("invalid saved schema parameter")
        params.append((p[0], p[1]))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise IRFormatError("invalid saved schema defaults")
    schema = Schema(params, {k: _from_json_value(v) for k, v in defaults.items()},
                    str(data.get("return", "")))
    schema.inferred = frozenset(x for x in data.get("inferred", []) if isinstance(x, str))
    return schema


def _rename_constants(block: dict, renames: dict) -> None:
    """Rename tensor constants in a graph's JSON (copying the attribute dicts, which
    `graph_to_json` shares with the graph)."""
    for node in block["nodes"]:
        attrs = node.get("attrs")
        if node["kind"] == "prim::Constant" and attrs and attrs.get("tensor") in renames:
            node["attrs"] = dict(attrs, tensor=renames[attrs["tensor"]])
        for inner in node.get("blocks", ()):
            _rename_constants(inner, renames)


class _Writer:
    def __init__(self, unit: Unit):
        self.unit = unit
        self.tensors: dict = {}
        self.keys: dict[int, str] = {}
        self.functions: dict = {}
        self.foreign: dict = {}  # (id(unit), constant name) -> its name in the file
        self.classes: dict = {}  # type name -> a script class's attributes and methods

    def tensor(self, t, key: str) -> str:
        if id(t) not in self.keys:
            self.keys[id(t)] = key
            self.tensors[key] = t.detach()
        return self.keys[id(t)]

    def graph(self, graph, unit: Unit | None = None) -> dict:
        """`graph` (of `unit`: the program's, or a traced submodule's own) as JSON, with the
        tensor constants and functions it uses."""
        unit = unit or self.unit
        renames: dict = {}
        for node in _walk(graph):
            if node.kind == "prim::PythonOp":
                raise RuntimeError(
                    "Could not export Python function call "
                    f"'{node.attrs['name'].rsplit('.', 1)[-1]}'. Remove "
                    "calls to Python functions before export. Did you forget to add @script "
                    "or @script_method annotation? If this is a nn.ModuleList, add it to "
                    "__constants__")
            if node.kind == "prim::CallFunction":
                self.function(unit.functions[node.attrs["name"]])
            if node.kind == "prim::CreateObject" or (
                    node.kind == "prim::TupleConstruct" and "type" in node.attrs):
                self.script_class(unit.module_of(node.attrs["type"]))
            if node.kind == "prim::Constant" and "tensor" in node.attrs:
                name = node.attrs["tensor"]
                t = unit.tensors[name]
                if unit is not self.unit:  # another unit's names may clash with ours
                    renames[name] = self.foreign.setdefault(
                        (id(unit), name), f"{name}_{len(self.foreign)}")
                    name = renames[name]
                key = f"constants/{name}"
                if self.tensor(t, key) != key:
                    # also a module attribute (a frozen weight): the loader reads the
                    # constant by its own key
                    self.tensors[key] = t.detach()
        data = graph_to_json(graph)
        if renames:
            _rename_constants(data, renames)
        return data

    def script_class(self, sc) -> None:
        """A class scripted code makes objects of: its attribute types and methods."""
        if sc.type_name in self.classes:
            return
        self.classes[sc.type_name] = None  # before its methods: they may make its objects
        self.classes[sc.type_name] = {
            "name": sc.cls.__name__, "attributes": dict(sc.attrs),
            "fields": getattr(sc, "fields", None),
            "methods": {name: {"graph": self.graph(m.graph, m.unit),
                               "schema": _schema_json(m.schema)}
                        for name, m in sc.methods.items()}}

    def function(self, fn: ScriptFunction) -> None:
        if fn.qualified_name in self.functions:
            return
        self.functions[fn.qualified_name] = None  # before its graph: calls may recur
        self.functions[fn.qualified_name] = {"name": fn.name,
                                             "graph": self.graph(fn.graph, fn.unit),
                                             "schema": _schema_json(fn.schema)}

    def module(self, sm: ScriptModule, prefix: str) -> dict:
        training = sm.__dict__.get("training")
        # a frozen trace keeps only the submodules preserved, its program none
        children = sm._modules if sm.__dict__.get("_jit_frozen") else None
        sm = sm._jit_program()  # a traced (or frozen) module saves as its program
        children = sm._modules if children is None else children
        params, grads, buffers = {}, {}, {}
        for name, p in sm._parameters.items():
            params[name] = None if p is None else self.tensor(p, prefix + name)
            grads[name] = bool(p is not None and p.requires_grad)
        for name, b in sm._buffers.items():
            buffers[name] = None if b is None else self.tensor(b, prefix + name)
        # (a frozen module has no training flag until train() or eval() gives it one)
        return {"type": sm._jit_type, "name": sm.original_name,
                "training": training,
                "parameters": params, "requires_grad": grads, "buffers": buffers,
                "constants": {k: {"tensor": self.tensor(v, prefix + k)} if isinstance(
                    v, Tensor) else _json_value(v) for k, v in sm._jit_consts.items()},
                "children": sm._jit_children,
                "modules": {k: None if m is None else self.module(m, f"{prefix}{k}.")
                            for k, m in children.items()},
                "methods": {k: {"graph": self.graph(m.graph, sm._jit_unit),
                                "schema": _schema_json(m.schema)}
                            for k, m in sm._jit_methods.items()}}


def save(obj, f) -> None:
    """Write a ScriptFunction or ScriptModule to `f` (a path, written atomically, or a
    binary file)."""
    if isinstance(obj, ScriptFunction):
        writer = _Writer(obj.unit)
        writer.function(obj)
        program = {"kind": "function", "root": obj.qualified_name}
    elif isinstance(obj, ScriptModule):
        writer = _Writer(obj._jit_unit)
        program = {"kind": "module", "root": writer.module(obj, "")}
    else:
        raise TypeError(f"fusegrad.jit.save expects a ScriptModule or ScriptFunction, got "
                        f"{type(obj).__name__}")
    program.update(format=FORMAT, version=VERSION, functions=writer.functions,
                   classes=writer.classes)
    save_safetensors(writer.tensors, f, metadata={FORMAT: json.dumps(program)})


def _read(f) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read(), os.fspath(f)
    if isinstance(f, (bytes, bytearray)):
        return bytes(f), "<bytes>"
    return f.read(), getattr(f, "name", "<file>")


def _refuse_zip(raw: bytes, where: str) -> None:
    try:
        names = zipfile.ZipFile(io.BytesIO(raw)).namelist()
    except zipfile.BadZipFile:
        names = []
    if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
        raise RuntimeError(
            f"fusegrad.jit.load: {where} is a PyTorch TorchScript archive (a zip with code/ "
            "and constants.pkl). Its program is Python source and pickles, which fusegrad "
            "does not run; fusegrad.jit.load reads the files fusegrad.jit.save writes. Load "
            "the weights instead (fusegrad.load with weights_only=True on a state_dict "
            "saved by torch.save) and script the model's code with fusegrad.jit.script.")
    raise RuntimeError(f"fusegrad.jit.load: {where} is a zip archive, not a file written by "
                       "fusegrad.jit.save (for a checkpoint, use fusegrad.load)")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Read a program written by `save`/`.save` back as a ScriptModule or ScriptFunction.

    Nothing from the file is executed: the graphs are data, checked node by node."""
    raw, where = _read(f)
    if raw[:4] == b"PK\x03\x04":
        _refuse_zip(raw, where)
    if not _looks_like_safetensors(raw[:9]):
        raise RuntimeError(f"fusegrad.jit.load: {where} is not a file written by "
                           "fusegrad.jit.save")
    try:
        tensors, meta = _safetensors_from_bytes(raw, with_metadata=True)
        program = json.loads((meta or {})[FORMAT])
    except (KeyError, ValueError) as e:
        raise RuntimeError(f"fusegrad.jit.load: {where} is not a file written by "
                           f"fusegrad.jit.save ({e})") from None
    if not isinstance(program, dict) or program.get("format") != FORMAT:
        raise RuntimeError(f"fusegrad.jit.load: {where} is not a fusegrad script program")
    if program.get("version") != VERSION:
        raise RuntimeError(f"fusegrad.jit.load: {where} has format version "
                           f"{program.get('version')!r}; this fusegrad reads {VERSION}")
    try:
        return _build(program, tensors)
    except (IRFormatError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"fusegrad.jit.load: {where} holds an invalid program: {e}") \
            from None


def _build(program: dict, tensors: dict):
    unit = Unit()
    unit.tensors = {k[len("constants/"):]: t for k, t in tensors.items()
                    if k.startswith("constants/")}
    functions = program.get("functions", {})
    if not isinstance(functions, dict):
        raise IRFormatError("functions must be an object")
    for qual, spec in functions.items():
        graph = graph_from_json(spec["graph"], allowed_kind)
        unit.functions[qual] = ScriptFunction(str(spec["name"]), qual, graph,
                                              _schema_from_json(spec["schema"]), unit)
    classes = program.get("classes", {})
    if not isinstance(classes, dict):
        raise IRFormatError("classes must be an object")
    for type_name, spec in classes.items():
        methods = {name: (graph_from_json(m["graph"], allowed_kind),
                          _schema_from_json(m["schema"]))
                   for name, m in spec["methods"].items()}
        fields = spec.get("fields")
        if fields is not None and not (isinstance(fields, list) and all(
                isinstance(f, str) and f.isidentifier() for f in fields)):
            raise IRFormatError("a NamedTuple's fields must be a list of names")
        ScriptClass.from_saved(unit, str(type_name), str(spec["name"]),
                               {str(k): str(v) for k, v in spec["attributes"].items()},
                               methods, fields)
    for fn in unit.functions.values():
        _check_calls(fn.graph, unit)
    for sc in unit.classes.values():
        for method in sc.methods.values():
            _check_calls(method.graph, unit)
    if program.get("kind") == "function":
        return unit.functions[program["root"]]
    if program.get("kind") != "module":
        raise IRFormatError(f"unknown program kind {program.get('kind')!r}")
    shared: dict = {}
    return _module(program["root"], tensors, unit, shared)


def _check_calls(graph, unit: Unit) -> None:
    """The checks a graph's shape needs beyond definitions before use: callees exist, and
    each If and Loop has the blocks, parameters and results its outputs need."""
    if len(graph.returns) != 1:
        raise IRFormatError("a graph returns one value")
    for node in _walk(graph):
        if node.kind == "prim::If" and (len(node.blocks) != 2 or len(node.inputs) != 1 or any(
                b.params or len(b.returns) != len(node.outputs) for b in node.blocks)):
            raise IRFormatError("prim::If needs a condition and two blocks yielding its "
                                "outputs")
        if node.kind == "prim::Loop":
            carried = len(node.inputs) - 2
            body = node.blocks[0] if len(node.blocks) == 1 else None
            if carried < 0 or body is None or len(body.params) != carried + 1 or \
                    len(body.returns) != carried + 1 or len(node.outputs) != carried:
                raise IRFormatError("prim::Loop needs a trip count, a condition and one "
                                    "body carrying its outputs")
        elif node.blocks and node.kind != "prim::If":
            raise IRFormatError(f"{node.kind} has no blocks")
        if node.kind == "prim::CallFunction" and node.attrs.get("name") not in unit.functions:
            raise IRFormatError(f"call of unknown function {node.attrs.get('name')!r}")
        if (node.kind == "prim::CreateObject" or node.kind == "prim::TupleConstruct" and
                "type" in node.attrs) and not any(
                sc.type_name == node.attrs.get("type") for sc in unit.classes.values()):
            raise IRFormatError(f"object of unknown class {node.attrs.get('type')!r}")
        if node.kind in ("prim::GetAttr", "prim::SetAttr", "prim::CallMethod") and \
                not isinstance(node.attrs.get("name"), str):
            raise IRFormatError(f"{node.kind} without a name")


def _tensor(tensors: dict, key):
    if key is None:
        return None
    if not isinstance(key, str) or key not in tensors:
        raise IRFormatError(f"missing tensor {key!r}")
    return tensors[key]


def _module(spec: dict, tensors: dict, unit: Unit, shared: dict) -> ScriptModule:
    if not isinstance(spec, dict):
        raise IRFormatError("a module must be an object")
    children = spec.get("children")
    if children is not None and not (isinstance(children, list) and all(
            isinstance(c, str) for c in children)):
        raise IRFormatError("bad module children")
    sm = RecursiveScriptModule(str(spec["type"]), str(spec["name"]), unit, None, children)
    if spec.get("training", True) is None:
        del sm.training
    else:
        sm.training = bool(spec.get("training", True))
    grads = spec.get("requires_grad", {})
    for name, key in spec.get("parameters", {}).items():
        t = _tensor(tensors, key)
        if t is not None:
            if key not in shared:
                shared[key] = Parameter(t, requires_grad=bool(grads.get(name, True)))
            t = shared[key]
        sm._parameters[name] = t
    for name, key in spec.get("buffers", {}).items():
        sm._buffers[name] = _tensor(tensors, key)
    reserved = set(vars(sm))  # the module's own bookkeeping (parameters, hooks, methods)
    for name, value in spec.get("constants", {}).items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__") or \
                name.startswith("_jit") or name in reserved or hasattr(ScriptModule, name):
            raise IRFormatError(f"bad attribute name {name!r}")
        if isinstance(value, dict) and set(value) == {"tensor"}:  # a plain tensor attribute
            sm._jit_consts[name] = _tensor(tensors, value["tensor"])
        else:
            sm._jit_consts[name] = _from_json_value(value)
        sm.__dict__[name] = sm._jit_consts[name]
    for name, child in spec.get("modules", {}).items():
        sm._modules[name] = None if child is None else _module(child, tensors, unit, shared)
    for name, m in spec.get("methods", {}).items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise IRFormatError(f"bad method name {name!r}")
        graph = graph_from_json(m["graph"], allowed_kind)
        _check_calls(graph, unit)
        sm._jit_methods[name] = Method(name, graph, _schema_from_json(m["schema"]), unit)
    sm._bind_methods()
    return sm
