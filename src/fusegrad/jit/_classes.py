"""Classes in scripted code (`@jit.script class Pair`, or any user class a scripted function
makes): a `ScriptClass` holds the class's attribute types, read off the assignments its
`__init__` makes to `self`, and its methods, compiled as module methods are.

Instances are the Python class's own objects: scripted code makes one with `__new__`
(`prim::CreateObject`), runs the compiled `__init__` on it (`prim::CallMethod`) and reads and
writes its attributes, so an object returned to Python is an ordinary instance of the class.
"""

from __future__ import annotations

import inspect

from ._markers import IGNORE, UNUSED
from .frontend import NotSupportedError


class ScriptClass:
    """A user class compiled for scripted code (see the module docstring). It answers the
    compiler's questions about the type as a script module does (`jit_attr_type`,
    `jit_method_type`, ...), and runs its methods for the interpreter (`jit_call`)."""

    def __init__(self, cls: type, unit):
        self.cls = cls
        self.unit = unit
        self.type_name = unit.type_name(cls.__name__, cls.__module__)
        self.attrs: dict[str, str] = {}
        self.methods: dict = {}
        self.declaring = False  # compiling `__init__`: assignments to self declare attributes
        unit.modules[self.type_name] = self
        unit.classes[cls] = self

    def compile_all(self) -> None:
        """Compile `__init__` (declaring the attributes) and then every other method the
        class defines, so that errors show when the class is scripted."""
        if not inspect.isfunction(self.cls.__dict__.get("__init__")):
            raise NotSupportedError(f"class {self.cls.__name__} needs an __init__ to be "
                                    "used in script")
        self.declaring = True
        try:
            self._compile_method("__init__")
        finally:
            self.declaring = False
        for name, fn in vars(self.cls).items():
            if inspect.isfunction(fn) and name not in self.methods and \
                    not getattr(fn, IGNORE, False) and not getattr(fn, UNUSED, False):
                self._compile_method(name)

    @classmethod
    def from_saved(cls_, unit, type_name: str, name: str, attrs: dict, methods: dict,
                   fields: list | None = None) -> ScriptClass:
        """A class read back from a saved program: a new plain Python class named `name`
        whose methods run the saved graphs (`methods`: name -> (graph, schema)), or a
        named tuple class of `fields`."""
        import collections

        from ._script import Method

        if fields is not None:
            made = collections.namedtuple(name, fields)
            made.__module__ = "__torch__"
            sc = NamedTupleClass.__new__(NamedTupleClass)
        else:
            made = type(name, (), {"__module__": "__torch__"})
            sc = cls_.__new__(cls_)
        sc.cls, sc.unit, sc.type_name, sc.declaring = made, unit, type_name, False
        sc.attrs = dict(attrs)
        sc.methods = {m: Method(m, graph, schema, unit) for m, (graph, schema) in
                      methods.items()}
        for m in sc.methods:
            if m != "__init__":
                setattr(made, m, _python_method(sc, m))
        unit.modules[type_name] = sc
        unit.classes[made] = sc
        return sc

    # the compiler's questions about the type

    def jit_class_name(self) -> str:
        return self.cls.__name__

    def jit_children(self) -> None:
        return None

    def jit_is_dict(self) -> bool:
        return False

    def jit_attr_type(self, name: str) -> str | None:
        return self.attrs.get(name)

    def declare(self, name: str, type_: str) -> None:
        """Record attribute `name` of type `type_` (an assignment to self in `__init__`)."""
        if self.declaring:
            self.attrs.setdefault(name, type_)

    def jit_class_constant(self, name: str):
        """(True, value) for a plain constant of the class (`scale = 2`)."""
        from ._script import _constant_ok

        if name in self.attrs or not hasattr(self.cls, name):
            return False, None
        value = getattr(self.cls, name)
        return (True, value) if _constant_ok(value) and not callable(value) else (False, None)

    def jit_static_method(self, name: str):
        try:
            raw = inspect.getattr_static(self.cls, name)
        except AttributeError:
            return None
        return raw.__func__ if isinstance(raw, staticmethod) else None

    def jit_python_method(self, name: str):
        fn = getattr(self.cls, name, None)
        if inspect.isfunction(fn) and (getattr(fn, UNUSED, False) or
                                       getattr(fn, IGNORE, False)):
            return fn
        return None

    def jit_method_type(self, name: str) -> str | None:
        method = self.methods.get(name) or self._compile_method(name)
        return method.schema.return_type if method is not None else None

    def jit_method_schema(self, name: str):
        method = self.methods.get(name)
        return method.schema if method is not None else None

    def _compile_method(self, name: str):
        from ._script import Method, _compile_graph, function_schema
        from .frontend import Source

        fn = getattr(self.cls, name, None)
        if fn is None or not inspect.isfunction(fn):
            return None
        source = Source(fn)
        schema = function_schema(fn, source, skip_self=True)
        if name == "__init__":
            schema.return_type = "NoneType"
        graph = _compile_graph(fn, self.unit, source, schema, self.type_name)
        method = Method(name, graph, schema, self.unit)
        self.methods[name] = method
        return method

    # running

    def new(self):
        """A fresh instance, not yet initialised (what `prim::CreateObject` makes)."""
        return self.cls.__new__(self.cls)

    def jit_call(self, obj, name: str, args: list):
        method = self.methods.get(name)
        if method is None:
            raise RuntimeError(f"Class '{self.cls.__name__}' has no method '{name}'")
        return method.call_graph([obj, *args])


class NamedTupleClass(ScriptClass):
    """A `typing.NamedTuple` class in scripted code: a tuple whose fields have names and
    types (read off the class's annotations); made by `prim::TupleConstruct` of its type."""

    def __init__(self, cls: type, unit):
        from ._types import python_type

        super().__init__(cls, unit)
        hints = getattr(cls, "__annotations__", {})
        for field in cls._fields:
            type_ = python_type(hints.get(field, "Tensor"))
            if type_ is None:
                raise NotSupportedError(f"Unknown type annotation of field '{field}' of "
                                        f"NamedTuple {cls.__name__}: {hints.get(field)!r}")
            self.attrs[field] = type_

    def compile_all(self) -> None:
        """Nothing to compile: the fields are the class."""

    @property
    def fields(self) -> list[str]:
        return list(self.cls._fields)


def _python_method(sc: ScriptClass, name: str):
    """A Python method running compiled method `name` of a loaded class."""
    def call(self, *args):
        return sc.jit_call(self, name, list(args))
    call.__name__ = name
    return call


def scriptable_class(cls) -> bool:
    """Whether scripted code may compile `cls` as a class of its own: a user's class, not a
    builtin, a fusegrad (or torch) class or a module."""
    from ..nn.modules.module import Module

    module = getattr(cls, "__module__", "") or ""
    return inspect.isclass(cls) and not issubclass(cls, (Module, BaseException)) and \
        (not issubclass(cls, tuple) or is_named_tuple(cls)) and \
        module not in ("builtins", "typing", "collections") and \
        not module.startswith(("fusegrad", "torch", "numpy"))


def is_named_tuple(cls) -> bool:
    """Whether `cls` is a NamedTuple class (a tuple subclass with `_fields`)."""
    return inspect.isclass(cls) and issubclass(cls, tuple) and hasattr(cls, "_fields")
