"""`GraphModule`: a Module that owns a Graph, generates its Python source and runs it."""

from __future__ import annotations

import copy
import itertools
import linecache
from typing import Any

from ._module import Module, is_module
from .graph import Graph

_counter = itertools.count()


def _exec_source(src: str, globals_: dict, name: str = "forward") -> Any:
    """Compile `src` under a unique file name kept in linecache, so tracebacks show it."""
    key = f"<eval_with_key>.{next(_counter)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    scope = dict(globals_)
    exec(compile(src, key, "exec"), scope)
    return scope[name]


def _new_module() -> Any:
    return Module()


def _copy_attr(src: Any, dst: Any, target: str) -> None:
    """Give `dst` the object at dotted path `target` of `src` (making empty parents)."""
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(src, item)
        t = getattr(dst, item, None)
        if f is t:
            return
        if t is None:
            t = _new_module()
            setattr(dst, item, t)
        src, dst = f, t
    value = getattr(src, field)
    if field in (getattr(src, "_buffers", None) or {}) and hasattr(dst, "register_buffer") \
            and not is_module(value):
        dst.register_buffer(field, value)
    else:
        setattr(dst, field, value)


def _assign_attr(value: Any, dst: Any, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(dst, item, None)
        if t is None:
            t = _new_module()
            setattr(dst, item, t)
        dst = t
    setattr(dst, field, value)


class GraphModule(Module):
    """A Module made from a Graph: `forward` is Python source generated from the graph.

    `root` provides the submodules and attributes that `call_module` and `get_attr` nodes
    name (a Module, or a dict from qualified name to object). After editing `graph`, call
    `recompile()`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        # Each instance gets its own class, so `forward` can be installed on the class.
        base = next(c for c in cls.__mro__ if not getattr(c, "_fx_impl", False))

        class GraphModuleImpl(base):  # type: ignore[valid-type, misc]
            _fx_impl = True

        return object.__new__(GraphModuleImpl)

    def __init__(self, root: Any, graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        self.__class__.__name__ = class_name
        self.__class__.__qualname__ = class_name
        if is_module(root):
            if hasattr(root, "training"):
                object.__setattr__(self, "training", root.training)
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but "
                                           "that target was not provided in ``root``!")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.meta: dict[str, Any] = {}  # (passes and the compiler note facts here)
        self.graph = graph

    @property
    def graph(self) -> Graph:
        """The graph this module runs."""
        return self._graph

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"Expected a Graph, got {type(g).__name__}")
        object.__setattr__(self, "_graph", g)
        g.owning_module = self
        self.recompile()

    @property
    def _in_spec(self) -> Any:
        """The structure of structured inputs (concrete_args with PH leaves)."""
        info = getattr(self._graph, "_pytree_info", None)
        return info[1] if info is not None else None

    @property
    def _out_spec(self) -> Any:
        return None

    @property
    def code(self) -> str:
        """The Python source of `forward`, generated from the graph."""
        return self._code

    def recompile(self) -> Any:
        """Regenerate `forward` from the graph (call after editing it)."""
        code = self._graph.python_code(root_module="self")
        object.__setattr__(self, "_code", code.src)
        type(self).forward = _exec_source(code.src, code.globals)
        return code

    def print_readable(self, print_output: bool = True, **kwargs: Any) -> str:
        """The module as a class definition, as torch.fx shows it: each run of nodes from
        one stack trace under a comment, each value its metadata records annotated
        (`x: "f32[2, 3]"`; `include_stride=True`, `include_device=True` append its strides and
        device), and the submodules that are GraphModules as classes nested in it. Printed
        unless `print_output` is False."""
        text = self._readable(type(self).__name__, bool(kwargs.get("include_stride")),
                              bool(kwargs.get("include_device")))
        if print_output:
            print(text)
        return text

    def _readable(self, name: str, include_stride: bool = False,
                  include_device: bool = False) -> str:
        body = self._graph.python_code(root_module="self", verbose=True,
                                       include_stride=include_stride,
                                       include_device=include_device).src
        body = body.strip("\n").rstrip()
        text = f"class {name}(fusegrad.nn.Module):\n" + "\n".join(
            f"    {line}" if line else line for line in body.splitlines()) + "\n"
        for child_name, child in self.named_children():
            if isinstance(child, GraphModule):
                nested = child._readable(child_name, include_stride, include_device)
                text += "\n" + "\n".join(f"    {line}" if line else line
                                          for line in nested.splitlines()) + "\n"
        return text

    def add_submodule(self, target: str, m: Any) -> bool:
        """Install module `m` at dotted path `target` (making empty parents)."""
        _assign_attr(m, self, target)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Remove the submodule at dotted path `target`; False if there is none."""
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if mod is None:
                return False
        if not is_module(getattr(mod, field, None)):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Remove submodules that no node calls or reads."""
        used = set()
        for node in self._graph.nodes:
            if node.op in ("call_module", "get_attr"):
                atoms = node.target.split(".")
                for i in range(1, len(atoms) + 1):
                    used.add(".".join(atoms[:i]))
                if node.op == "call_module":
                    # a called module runs its own children, so they stay too
                    sub = self
                    for atom in atoms:
                        sub = getattr(sub, atom, None)
                    for name, _ in _iter_modules(sub, node.target):
                        used.add(name)
        for name, _ in list(_iter_modules(self)):
            if name and name not in used:
                self.delete_submodule(name)

    def to_folder(self, folder: Any, module_name: str = "FxModule") -> None:
        """Write this module to `folder` as a package, as torch.fx does: `module.py` (a class
        `module_name` whose `forward` is this module's code), `__init__.py` (re-exporting it),
        `state_dict.pt` (the parameters and buffers, `fusegrad.save`d) and one `<name>.pt`
        per child module with no constructor spelling (pickled whole). `from <folder> import
        <module_name>` then gives a module that computes what this one does; the files are
        read by their paths as `folder` spells them."""
        import os
        import warnings

        import fusegrad

        os.makedirs(folder, exist_ok=True)
        where = str(folder)
        fusegrad.save(self.state_dict(), os.path.join(folder, "state_dict.pt"))
        init_lines, pickled = [], []
        for name, child in self.named_children():
            spelling, comment = _constructor_spelling(child), ""
            if spelling is None:
                fusegrad.save(child, os.path.join(folder, f"{name}.pt"))
                pickled.append(name)
                spelling = f"fusegrad.load(r'{where}/{name}.pt', weights_only=False)"
                comment = " # " + repr(child).replace("\n", " ")
            init_lines.append(f"setattr(self, '{name}', {spelling}){comment}")
        for name, buffer in self._buffers.items():
            if buffer is not None:
                init_lines.append(f"self.register_buffer('{name}', {_empty_spelling(buffer)})")
        for name, param in self._parameters.items():
            if param is not None:
                init_lines.append(f"setattr(self, '{name}', "
                                  f"fusegrad.nn.Parameter({_empty_spelling(param)}))")
        init_lines.append(f"self.load_state_dict(fusegrad.load(r'{where}/state_dict.pt'))")
        code = self._graph.python_code(root_module="self")
        body = "\n".join(f"    {line}" if line.strip() else ""
                         for line in code.src.strip("\n").splitlines())
        source = "\n".join([
            "import fusegrad", "from math import inf", "from math import nan",
            "NoneType = type(None)", "from fusegrad import device",
            *_import_lines(code.globals), "", "from fusegrad.nn import *",
            f"class {module_name}(fusegrad.nn.Module):",
            "    def __init__(self):", "        super().__init__()",
            *(f"        {line}" for line in init_lines), "", body, ""])
        with open(os.path.join(folder, "module.py"), "w", encoding="utf-8") as f:
            f.write(source)
        with open(os.path.join(folder, "__init__.py"), "w", encoding="utf-8") as f:
            f.write("from .module import *")
        if pickled:
            warnings.warn("Was not able to save the following children modules as reprs -"
                          f"saved as pickled files instead: {pickled}", stacklevel=2)

    def __deepcopy__(self, memo: dict) -> GraphModule:
        """A copy with its own graph, submodules and attributes (and its own class)."""
        res = GraphModule.__new__(GraphModule)
        memo[id(self)] = res
        state = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        res.__dict__.update(copy.deepcopy(state, memo))
        # PyTorch rebuilds copies as plain `GraphModule(...)`: the traced class name is lost
        _plain_name(res)
        res.graph = copy.deepcopy(self._graph, memo)
        return res

    def __reduce__(self) -> tuple:
        # (`meta` starts empty in the unpickled module, as in torch.fx's, which builds it anew)
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("_graph", "_code", "meta")}
        return (_rebuild_graph_module, (state, self._graph, type(self).__name__))

    def __copy__(self) -> GraphModule:
        res = GraphModule.__new__(GraphModule)
        res.__dict__.update(self.__dict__)
        _plain_name(res)
        res.recompile()
        return res

    def __str__(self) -> str:
        return f"{super().__repr__()}\n{self._code}\n# To see more debug info, please use " \
               "`graph_module.print_readable()`"


# The layers whose repr is a call of their constructor that builds them again (torch.fx's
# choice: any other child is pickled by `to_folder`).
_REPR_LAYERS = ("Linear", "Conv1d", "Conv2d", "Conv3d", "BatchNorm1d", "BatchNorm2d",
                "BatchNorm3d")


def _constructor_spelling(child: Any) -> str | None:
    """`Linear(in_features=3, ...)` for a layer `to_folder` builds from its repr, else None."""
    import fusegrad.nn as nn

    for name in _REPR_LAYERS:
        if type(child) is getattr(nn, name):
            return f"{name}({child.extra_repr()})"
    return None


def _empty_spelling(t: Any) -> str:
    """The source of an empty tensor of `t`'s shape and dtype (the state dict fills it)."""
    return f"fusegrad.empty({list(t.shape)}, dtype={t.dtype})".replace("torch.", "fusegrad.")


def _import_lines(globals_: dict) -> list[str]:
    """Imports that bind the generated code's globals (other than `fusegrad`, `inf`, `nan`)
    to the objects they name: modules by their name, functions and classes by their module
    and qualified name."""
    import types

    lines = []
    for name, obj in globals_.items():
        if name in ("fusegrad", "inf", "nan"):
            continue
        if isinstance(obj, types.ModuleType):
            lines.append(f"import {obj.__name__} as {name}")
            continue
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not module or not qualname or "<" in qualname:
            raise RuntimeError(f"to_folder: cannot write an import of the global {name!r} "
                               f"({obj!r}) that the generated code uses")
        head, _, rest = qualname.partition(".")
        if rest:
            lines.append(f"from {module} import {head} as _{name}_owner")
            lines.append(f"{name} = _{name}_owner.{rest}")
        else:
            lines.append(f"from {module} import {qualname} as {name}")
    return lines


def _plain_name(gm: GraphModule) -> None:
    type(gm).__name__ = type(gm).__qualname__ = "GraphModule"


def _rebuild_graph_module(state: dict, graph: Graph, class_name: str) -> GraphModule:
    gm = GraphModule.__new__(GraphModule)
    gm.__dict__.update(state)
    gm.meta = {}
    _plain_name(gm)  # as PyTorch's unpickling, whatever class name was traced
    gm.graph = graph
    return gm


def _iter_modules(mod: Any, prefix: str = ""):
    for name, child in list(getattr(mod, "_modules", {}).items()):
        path = f"{prefix}.{name}" if prefix else name
        yield path, child
        yield from _iter_modules(child, path)
