"""`ScriptFunction`, `ScriptModule` and `script`: compiled programs run by the interpreter.

A `Unit` (TorchScript's compilation unit) holds a program's functions by qualified name,
its tensor constants, the Python functions it leaves to Python (`jit.ignore`), and the
script modules it knows by type name. `script` compiles into one process-wide unit; a loaded
file gets a unit of its own.

A scripted module shares its parameters and buffers with the module it was made from (as
TorchScript's do); its submodules are scripted in turn; its plain attributes (numbers,
strings, None, tuples of them) become attributes of the script module. `forward`, the
methods marked `jit.export` and the methods they call are compiled; each module instance is
its own type (`__torch__.Net`, `__torch__.torch.nn.modules.linear.Linear`), so its attribute
types are known exactly: `self.downsample is not None` is decided while compiling, for a
submodule or None, as TorchScript decides it. Methods marked `jit.ignore` run in Python
(`prim::PythonOp`, given the script module), `jit.unused` ones raise when reached.
fusegrad layers whose `forward` is Python the compiler does not take (the recurrent layers
and cells, attention, the Transformer encoder layer, transposed convolutions) are compiled
from a forward written for the compiler (`_library.py`).
"""

from __future__ import annotations

import ast
import inspect
import types
import weakref

import fusegrad

from ..nn.modules.module import Module
from ._codegen import graph_code
from ._compiler import FunctionCompiler
from ._interpreter import Interpreter
from ._ir import Graph, graph_type
from ._markers import EXPORT, IGNORE, UNUSED
from ._types import NO, annotation_type, convert, python_type, value_type
from .frontend import NotSupportedError, Source, fail


class Unit:
    """A program's functions, tensor constants and module types."""

    def __init__(self):
        self.functions: dict[str, ScriptFunction] = {}
        self.tensors: dict = {}
        self.python_ops: dict = {}
        self.modules: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.by_function: dict = {}
        self.compiling: set = set()
        self.classes: dict = {}  # Python class -> its ScriptClass (`_classes.py`)
        self.interpreter = Interpreter(self)

    def module_of(self, type_name: str) -> ScriptModule:
        return self.modules[type_name]

    def script_class(self, cls: type):
        """The ScriptClass of user class `cls`, compiled on first use (all its methods: an
        error leaves nothing registered)."""
        from ._classes import NamedTupleClass, ScriptClass, is_named_tuple

        found = self.classes.get(cls)
        if found is None:
            found = (NamedTupleClass if is_named_tuple(cls) else ScriptClass)(cls, self)
            try:
                found.compile_all()
            except BaseException:
                del self.classes[cls]
                self.modules.pop(found.type_name, None)
                raise
        return found

    def type_name(self, cls_name: str, module: str | None = None) -> str:
        """A new module type's name: `__torch__.` with the class's module path as PyTorch
        names it (fusegrad's as torch's, none for `__main__`) and the class's name, mangled
        when taken."""
        path = (module or "").replace("__main__", "").strip(".")
        if path == "fusegrad" or path.startswith("fusegrad."):
            path = "torch" + path[len("fusegrad"):]
        prefix = f"__torch__.{path}." if path else "__torch__."
        name = prefix + cls_name
        k = 0
        while name in self.modules:
            name = f"{prefix}___torch_mangle_{k}.{cls_name}"
            k += 1
        return name

    def callee(self, fn):
        """How scripted code calls the Python object `fn`: (node kind, name, result type),
        or None when `fn` is not a function to compile (a fusegrad function, a builtin)."""
        if isinstance(fn, ScriptFunction):
            self.functions.setdefault(fn.qualified_name, fn)
            return "prim::CallFunction", fn.qualified_name, fn.return_type
        if not inspect.isfunction(fn) or _public_op(fn):
            return None
        if getattr(fn, IGNORE, False) or getattr(fn, UNUSED, False):
            name = fn.__qualname__
            self.python_ops[name] = fn if getattr(fn, IGNORE, False) else _unused(name)
            ret = annotation_type(_return_annotation(fn)) or "Tensor"
            return "prim::PythonOp", name, ret
        compiled = self.by_function.get(fn)
        if compiled is None:
            compiled = compile_function(fn, self)
        return "prim::CallFunction", compiled.qualified_name, compiled.return_type


def _public_op(fn) -> bool:
    """Whether `fn` is a function of `fusegrad` or `fusegrad.nn.functional`, which scripted
    code calls as an operation (fusegrad's other functions are compiled like the user's)."""
    import fusegrad
    import fusegrad.nn.functional as F

    if not (fn.__module__ or "").startswith("fusegrad"):
        return False
    name = fn.__name__
    return getattr(fusegrad, name, None) is fn or getattr(F, name, None) is fn


def _unused(name: str):
    def fail_call(*args):
        raise RuntimeError(f"Tried to execute {name}, which is marked jit.unused")
    return fail_call


def _return_annotation(fn):
    try:
        return Source(fn).fdef.returns
    except (OSError, NotSupportedError):
        return None


UNIT = Unit()


class Schema:
    """A compiled function's parameters (name, type), defaults and result type."""

    def __init__(self, params: list[tuple[str, str]], defaults: dict, return_type: str):
        self.params = params
        self.defaults = defaults
        self.return_type = return_type

    def declaration(self, name: str) -> str:
        args = []
        for n, t in self.params:
            d = f"={self.defaults[n]!r}" if n in self.defaults else ""
            args.append(f"{graph_type(t)} {n}{d}")
        return f"{name}({', '.join(args)}) -> ({graph_type(self.return_type)})"

    def bind(self, name: str, args: tuple, kwargs: dict, skip: int = 0) -> list:
        """The argument values in parameter order, checked against the types."""
        params = self.params[skip:]
        if len(args) > len(params):
            raise RuntimeError(f"{name}() expected at most {len(params)} argument(s) but "
                               f"received {len(args) + len(kwargs)} argument(s). "
                               f"Declaration: {self.declaration(name)}")
        values = list(args)
        for pname, _ in params[len(args):]:
            if pname in kwargs:
                values.append(kwargs.pop(pname))
            elif pname in self.defaults:
                values.append(self.defaults[pname])
            else:
                raise RuntimeError(f"{name}() missing value for argument '{pname}'. "
                                   f"Declaration: {self.declaration(name)}")
        if kwargs:
            raise RuntimeError(f"{name}() got an unexpected keyword argument "
                               f"'{next(iter(kwargs))}'. Declaration: "
                               f"{self.declaration(name)}")
        for pos, ((pname, ptype), value) in enumerate(zip(params, values)):
            converted = convert(ptype, value)
            values[pos] = converted
            if converted is NO:
                inferred = ptype == "Tensor" and pname in self.inferred
                shown = "Tensor (inferred)" if inferred else graph_type(ptype)
                note = (f"\nInferred '{pname}' to be of type 'Tensor' because it was not "
                        "annotated with an explicit type.") if inferred else ""
                raise RuntimeError(
                    f"{name}() Expected a value of type '{shown}' for argument '{pname}' but "
                    f"instead found type '{type(value).__name__}'.{note}\nPosition: "
                    f"{pos + skip}\nValue: {value!r}\nDeclaration: {self.declaration(name)}")
        return values

    inferred: frozenset = frozenset()


def function_schema(fn, source: Source, skip_self: bool) -> Schema:
    """Parameter types from the annotations (Tensor when there is none), as TorchScript."""
    a = source.fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs:
        node = a.vararg or a.kwarg or a.kwonlyargs[0]
        raise fail(NotSupportedError, source, node, "Compiled functions can't take variable "
                   "number of arguments or use keyword-only arguments with defaults")
    params, inferred = [], set()
    for i, arg in enumerate([*a.posonlyargs, *a.args]):
        if i == 0 and skip_self:
            params.append((arg.arg, "self"))
            continue
        type_ = annotation_type(arg.annotation)
        if arg.annotation is not None and type_ is None:
            raise fail(NotSupportedError, source, arg.annotation,
                       f"Unknown type annotation: '{ast.unparse(arg.annotation)}'")
        if type_ is None:
            inferred.add(arg.arg)
        params.append((arg.arg, type_ or "Tensor"))
    defaults = {}
    names = [p for p, _ in params]
    for pname, value in zip(names[len(names) - len(fn.__defaults__ or ()):],
                            fn.__defaults__ or ()):
        if isinstance(value, (list, dict, set)):
            raise fail(RuntimeError, source, source.fdef, "\nMutable default parameters are "
                       "not supported because Python binds them to the function and they "
                       "persist across function calls.\n As a workaround, make the default "
                       "None and instantiate the default parameter within the body of the "
                       f"function. Found {type(value)} on parameter {pname}")
        defaults[pname] = value
    schema = Schema(params, defaults, annotation_type(source.fdef.returns) or "")
    schema.inferred = frozenset(inferred)
    return schema


def _compile_graph(fn, unit: Unit, source: Source, schema: Schema, self_type=None) -> Graph:
    if fn in unit.compiling:
        raise fail(NotSupportedError, source, source.fdef,
                   "recursive calls aren't supported in script")
    unit.compiling.add(fn)
    try:
        params = [(n, self_type if t == "self" else t) for n, t in schema.params]
        compiler = FunctionCompiler(unit, fn, source, self_type)
        compiler.inferred = schema.inferred
        graph = compiler.compile(params)
    finally:
        unit.compiling.discard(fn)
    inferred = graph.returns[0].type
    if not schema.return_type:
        schema.return_type = inferred
    return graph


class ScriptFunction:
    """A compiled function: call it like the original; `.graph`, `.code`, `.save(path)`."""

    def __init__(self, name: str, qualified_name: str, graph: Graph, schema: Schema,
                 unit: Unit):
        self.name = name
        self.__name__ = name
        self.qualified_name = qualified_name
        self._graph = graph
        self._schema = schema
        self.unit = unit

    # A traced function (`jit.trace` of a function) runs its recording (`_engine`, an FX
    # GraphModule); its graph, schema and saved form are the script program made from that
    # recording, built on first use.
    _engine = None

    @classmethod
    def _from_trace(cls, engine, name: str, qualified_name: str) -> ScriptFunction:
        """The ScriptFunction `jit.trace` returns for a function recorded as `engine`."""
        fn = cls.__new__(cls)
        fn.name = fn.__name__ = name
        fn.qualified_name = qualified_name
        fn._graph = fn._schema = fn.unit = None
        fn._engine = engine
        return fn

    def _program(self) -> ScriptFunction:
        """The compiled form: this function, or the program made from its recording."""
        if self._engine is None:
            return self
        program = self.__dict__.get("_trace_program")
        if program is None:
            from ._from_fx import program_from_trace

            program = self.__dict__["_trace_program"] = program_from_trace(self._engine)
        return program

    @property
    def schema(self) -> Schema:
        """The parameters (names, types, defaults) and the result type."""
        return self._program()._schema

    @property
    def graph(self) -> Graph:
        """The function's IR (prints as TorchScript's graphs)."""
        return self._program()._graph

    @property
    def inlined_graph(self) -> Graph:
        """The IR with called functions inlined (the graph itself: calls stay calls)."""
        return self.graph

    @property
    def code(self) -> str:
        """The compiled function as readable source."""
        return graph_code(self.graph, self.name, defaults=self.schema.defaults)

    @property
    def return_type(self) -> str:
        return self.schema.return_type

    def __call__(self, *args, **kwargs):
        """Run the compiled graph on the arguments (checked against the parameter types)."""
        if self._engine is not None:
            return self._engine(*args, **kwargs)
        values = self.schema.bind(self.name, args, dict(kwargs))
        return self.unit.interpreter.run(self._graph, values)

    def call_graph(self, args: list):
        """Run with positional arguments from scripted code (missing ones defaulted)."""
        if self._engine is not None:
            return self._engine(*args)
        for pname, _ in self.schema.params[len(args):]:
            args.append(self.schema.defaults[pname])
        return self.unit.interpreter.run(self._graph, args)

    def save(self, f) -> None:
        """Write the program to `f` in fusegrad's script format (see `fusegrad.jit.load`)."""
        from ._serialization import save

        save(self._program(), f)

    def __repr__(self) -> str:
        return f"<fusegrad.jit.ScriptFunction object {self.qualified_name}>"


ScriptFunction.__module__ = "fusegrad.jit"  # PyTorch's `torch.jit.ScriptFunction`


def compile_function(fn, unit: Unit = UNIT) -> ScriptFunction:
    """Compile a Python function (and the functions it calls) into `unit`."""
    cached = unit.by_function.get(fn)
    if cached is not None:
        return cached
    source = Source(fn)
    schema = function_schema(fn, source, skip_self=False)
    module = (fn.__module__ or "").replace("__main__", "").strip(".")
    name = fn.__qualname__.replace("<locals>.", "").replace("<lambda>", "_lambda")
    qual = f"__torch__.{module}.{name}" if module else f"__torch__.{name}"
    k, base = 0, qual
    while qual in unit.functions:  # another function of the same name (a closure, say)
        k += 1
        prefix, _, last = base.rpartition(".")
        qual = f"{prefix}.___torch_mangle_{k}.{last}"
    graph = _compile_graph(fn, unit, source, schema)
    result = ScriptFunction(fn.__name__, qual, graph, schema, unit)
    unit.functions[qual] = result
    unit.by_function[fn] = result
    return result


class Method:
    """A compiled module method: its graph (parameter 0 is the module) and schema."""

    def __init__(self, name: str, graph: Graph, schema: Schema, unit: Unit):
        self.name = name
        self.graph = graph
        self.schema = schema
        self.unit = unit

    def call_graph(self, args: list):
        for pname, _ in self.schema.params[len(args):]:
            args.append(self.schema.defaults[pname])
        return self.unit.interpreter.run(self.graph, args)

    def code(self) -> str:
        return graph_code(self.graph, self.name, self_name=self.schema.params[0][0],
                          defaults=self.schema.defaults)


class RecordingMethod(Method):
    """A traced module's `forward` as scripted code calls it: the recording runs."""

    engine = None

    def call_graph(self, args: list):
        return self.engine(*args[1:])


def _sequential_forward(self, input):
    for module in self:
        input = module(input)
    return input


def _flatten_forward(self, input):
    return fusegrad.flatten(input, self.start_dim, self.end_dim)


def _library_forward(cls: type, module: ScriptModule):
    """The source scripted for a fusegrad module whose own `forward` is written with Python
    the compiler does not take (it computes the same thing)."""
    from ..nn.modules.container import Sequential
    from ..nn.modules.flatten import Flatten
    from ..nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

    if issubclass(cls, Sequential) and cls.forward is Sequential.forward:
        return _sequential_forward
    if issubclass(cls, Flatten) and cls.forward is Flatten.forward:
        return _flatten_forward
    if any(cls.forward is layer.forward for layer in (RNN, LSTM, GRU)):
        from ._library import recurrent_forward

        return recurrent_forward(module)
    for cell in (LSTMCell, GRUCell, RNNCell):
        if issubclass(cls, cell) and cls.forward is cell.forward:
            from ._library import cell_forward

            return cell_forward(module, cell.__name__)
    from ..nn.modules import conv

    for n, layer in ((1, conv.ConvTranspose1d), (2, conv.ConvTranspose2d),
                     (3, conv.ConvTranspose3d)):
        if issubclass(cls, layer) and cls.forward is layer.forward:
            from ._library import conv_transpose_forward

            return conv_transpose_forward(module, n)
    from ..nn.modules.attention import MultiheadAttention
    from ..nn.modules.transformer import TransformerEncoder, TransformerEncoderLayer

    if issubclass(cls, MultiheadAttention) and cls.forward is MultiheadAttention.forward:
        from ._library import attention_forward

        return attention_forward(module)
    if issubclass(cls, TransformerEncoderLayer) and \
            cls.forward is TransformerEncoderLayer.forward:
        from ._library import encoder_layer_forward

        return encoder_layer_forward(module, module.__dict__.get("_jit_activation"))
    if issubclass(cls, TransformerEncoder) and cls.forward is TransformerEncoder.forward:
        from ._library import encoder_forward

        return encoder_forward(module)
    return None


class ScriptModule(Module):
    """A compiled module: its methods run through the interpreter; parameters, buffers and
    submodules are ordinary module state. `.graph`/`.code` show `forward`."""

    def __init__(self, type_name: str | None = None, original_name: str | None = None,
                 unit: Unit | None = None, origin: type | None = None,
                 children: list | None = None):
        super().__init__()
        if type_name is not None:
            self._jit_setup(type_name, original_name, unit, origin, children)
        # else a user's subclass (`class M(torch.jit.ScriptModule)`): set up once its
        # `__init__` has returned (`__init_subclass__`)

    def _jit_setup(self, type_name: str, original_name: str, unit: Unit,
                   origin: type | None, children: list | None) -> None:
        d = self.__dict__
        d["_jit_type"] = type_name
        d["original_name"] = original_name
        d["_jit_unit"] = unit
        d["_jit_origin"] = origin
        d["_jit_methods"] = {}
        d["_jit_consts"] = {}
        d["_jit_children"] = children
        unit.modules[type_name] = self

    def __init_subclass__(cls, **kwargs):
        """A user's subclass compiles its `script_method`s (and exported methods) once the
        outermost `__init__` has made the submodules and attributes they read, as
        TorchScript's ScriptModule subclasses do; fusegrad's own subclasses are left be."""
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith(__name__.rpartition(".")[0]):
            return
        init = cls.__init__

        def __init__(self, *args, **kw):
            d = self.__dict__
            d["_jit_init_depth"] = d.get("_jit_init_depth", 0) + 1
            try:
                init(self, *args, **kw)
            finally:
                d["_jit_init_depth"] -= 1
            if not d["_jit_init_depth"] and "_jit_type" not in d:
                _script_in_place(self)

        __init__.__doc__ = init.__doc__
        cls.__init__ = __init__

    # the interface the compiler and the interpreter use

    def jit_class_name(self) -> str:
        return self.original_name

    def jit_children(self) -> list | None:
        return self._jit_children

    def jit_attr_type(self, name: str) -> str | None:
        declared = self.__dict__.get("_jit_types")
        if declared and name in declared:
            return declared[name]
        if name in self._parameters or name in self._buffers:
            t = self._parameters.get(name, self._buffers.get(name))
            return "Tensor" if t is not None else "NoneType"
        if name in self._modules:
            child = self._modules[name]
            return child._jit_type if child is not None else "NoneType"
        if name in self._jit_consts:
            return value_type(self._jit_consts[name])
        if name == "training":
            return "bool"
        return None

    def jit_class_constant(self, name: str):
        """(True, value) for a plain constant of the module's class (`_spatial = 2`)."""
        origin = self._jit_origin
        if origin is None or not hasattr(origin, name) or name in self._jit_consts:
            return False, None
        value = getattr(origin, name)
        return (True, value) if _constant_ok(value) and not callable(value) else (False, None)

    def jit_method_type(self, name: str) -> str | None:
        method = self._jit_methods.get(name)
        if method is None:
            method = self._compile_method(name)
        return method.schema.return_type if method is not None else None

    def jit_is_dict(self) -> bool:
        """Whether the module is a ModuleDict (its loops go over its keys)."""
        from ..nn.modules.container import ModuleDict

        return isinstance(self._jit_origin, type) and issubclass(self._jit_origin, ModuleDict)

    def jit_static_method(self, name: str):
        """The function of the class's staticmethod `name`, or None."""
        origin = self._jit_origin
        if origin is None or name in self._modules:
            return None
        try:
            raw = inspect.getattr_static(origin, name)
        except AttributeError:
            return None
        return raw.__func__ if isinstance(raw, staticmethod) else None

    def jit_python_method(self, name: str):
        """The class's function `name` when it is marked `jit.ignore` or `jit.unused`
        (scripted code calls it in Python, or raises), else None."""
        origin = self._jit_origin
        fn = getattr(origin, name, None) if origin is not None else None
        if inspect.isfunction(fn) and (getattr(fn, UNUSED, False) or
                                       getattr(fn, IGNORE, False)):
            return fn
        return None

    def jit_method_schema(self, name: str) -> Schema | None:
        method = self._jit_methods.get(name)
        return method.schema if method is not None else None

    def jit_getattr(self, name: str):
        if name == "training":
            return self.training
        for table in (self._parameters, self._buffers, self._modules, self._jit_consts):
            if name in table:
                return table[name]
        raise RuntimeError(f"Module '{self.original_name}' has no attribute '{name}'")

    def jit_setattr(self, name: str, value) -> None:
        if name in self._jit_consts:
            self._jit_consts[name] = value
            self.__dict__[name] = value
        elif name in self._buffers:
            self._buffers[name] = value
        else:
            raise RuntimeError(f"Module '{self.original_name}' attribute '{name}' cannot be "
                               "assigned")

    def jit_call(self, name: str, args: list):
        method = self._jit_methods.get(name)
        if method is None:
            raise RuntimeError(f"Module '{self.original_name}' has no method '{name}'")
        return method.call_graph([self, *args])

    def _compile_method(self, name: str) -> Method | None:
        engine = self.__dict__.get("_jit_engine")
        if engine is not None:
            # a traced module's `forward` runs the recording (typed as the program made
            # from it); it has no other methods
            if name != "forward":
                return None
            compiled = self._jit_program()._forward()
            method = RecordingMethod(name, compiled.graph, compiled.schema, self._jit_unit)
            method.engine = engine
            self._jit_methods[name] = method
            return method
        origin = self._jit_origin
        library = _library_forward(origin, self) if name == "forward" and origin else None
        if library is not None:
            fn = library
        else:
            fn = getattr(origin, name, None) if origin is not None else None
        if fn is None or not inspect.isfunction(fn):
            return None
        if getattr(fn, UNUSED, False) or getattr(fn, IGNORE, False):
            raise RuntimeError(f"method '{name}' of '{self.original_name}' is left to Python "
                               "and cannot be called from scripted code")
        source = Source(fn)
        schema = function_schema(fn, source, skip_self=True)
        graph = _compile_graph(fn, self._jit_unit, source, schema, self._jit_type)
        method = Method(name, graph, schema, self._jit_unit)
        self._jit_methods[name] = method
        return method

    # Python-side use

    def _forward(self) -> Method:
        method = self._jit_methods.get("forward")
        if method is None:
            raise RuntimeError(f"Method 'forward' is not defined on '{self.original_name}'")
        return method

    # A traced module (or a frozen one) runs a recording, `_jit_engine` (an FX GraphModule
    # made by `jit.trace`, holding `_jit_trace`); its graph, code and saved form are those of
    # the script program made from the recording, built on first use.

    def _jit_program(self) -> ScriptModule:
        """The compiled form: this module, or the program made from its recording."""
        engine = self.__dict__.get("_jit_engine")
        if engine is None:
            return self
        program = self.__dict__.get("_jit_program_cache")
        if program is None:
            if "_jit_trace" not in engine.__dict__:
                raise AttributeError(f"'{type(self).__name__}' object has no attribute 'code'")
            from ._from_fx import program_from_trace

            # frozen: the program recorded op by op, with the submodules' calls inlined and
            # their weights constants, as PyTorch's frozen modules print (and save) it
            frozen = bool(self.__dict__.get("_jit_frozen"))
            program = program_from_trace(engine, inline=frozen)
            self.__dict__["_jit_program_cache"] = program
        return program

    @property
    def graph(self) -> Graph:
        """`forward`'s IR."""
        return self._jit_program()._forward().graph

    @property
    def inlined_graph(self) -> Graph:
        """`forward`'s IR with calls of submodules' methods inlined."""
        if self.__dict__.get("_jit_engine") is None and not self.__dict__.get("_jit_source"):
            from ._inline import inline_calls

            self._forward()  # (refused without a forward)
            return inline_calls(self)[0]
        from ._from_fx import inlined_graph

        return inlined_graph(self)

    @property
    def code(self) -> str:
        """`forward` as readable source."""
        return self._jit_program()._forward().code()

    def forward(self, *args, **kwargs):
        """Run the compiled `forward`."""
        engine = self.__dict__.get("_jit_engine")
        if engine is not None:
            return engine(*args, **kwargs)
        method = self._forward()
        values = method.schema.bind("forward", args, dict(kwargs), skip=1)
        return method.call_graph([self, *values])

    def save(self, f) -> None:
        """Write the module (methods and weights) in fusegrad's script format."""
        from ._serialization import save

        save(self, f)  # (as its program, made there)

    def _bind_methods(self, over_class_methods: bool = False) -> None:
        """Make the compiled methods callable from Python (`m.norm(x)`); private helpers
        and names the module class itself has (unless `over_class_methods`: a user's
        ScriptModule subclass, whose Python methods the compiled ones replace; `forward`
        included) stay reachable from scripted code only."""
        for name in self._jit_methods:
            if over_class_methods and name not in self.__dict__:
                self.__dict__[name] = types.MethodType(_method_caller(name), self)
            elif not name.startswith("_") and not hasattr(type(self), name) and \
                    name not in self.__dict__:
                # bound to this module and looking its method up when called, so that a copy
                # (`deepcopy`, `freeze`) runs its own method on itself, not the original's
                self.__dict__[name] = types.MethodType(_method_caller(name), self)

    def _children(self) -> list:
        if self._jit_children is None:
            raise TypeError(f"'{self.original_name}' object is not subscriptable")
        return self._jit_children

    def __getitem__(self, index):
        """A Sequential's or ModuleList's module by position, a ModuleDict's by key."""
        if self._jit_children is None and self.jit_is_dict():
            return self._modules[index]
        return self._modules[self._children()[index]]

    def __len__(self) -> int:
        if self._jit_children is None and self.jit_is_dict():
            return len(self._modules)
        return len(self._children())

    def __iter__(self):
        if self._jit_children is None and self.jit_is_dict():
            return iter(self._modules)  # a ModuleDict's keys
        return iter(self._modules[n] for n in self._children())

    def __contains__(self, key) -> bool:
        if self._jit_children is None and self.jit_is_dict():
            return key in self._modules
        return key in list(self)


    def __bool__(self) -> bool:
        if self._jit_children is None and self.jit_is_dict():
            return bool(self._modules)
        return self._jit_children is None or bool(self._jit_children)

    def extra_repr(self) -> str:
        return f"original_name={self.original_name}"


def _method_caller(name: str):
    """A function calling compiled method `name` of the module it is given."""
    def call(module, *args, **kwargs):
        method = module._jit_methods[name]
        values = method.schema.bind(name, args, dict(kwargs), skip=1)
        return method.call_graph([module, *values])
    call.__name__ = name
    return call


class RecursiveScriptModule(ScriptModule):
    """The class of the modules `script` (and `load`) make, as PyTorch names them: a
    `ScriptModule` made recursively from a module and its submodules."""


def _is_sequential(cls: type) -> bool:
    from ..nn.modules.container import Sequential

    return issubclass(cls, Sequential)


def script_module(module: Module, unit: Unit = UNIT,
                  compile_methods: bool = True) -> ScriptModule:
    """Script `module` and its submodules, sharing their parameters and buffers (without
    `compile_methods`, only their state: a trace supplies the methods)."""
    from ..nn.modules.container import ModuleList, Sequential

    if isinstance(module, ScriptModule):
        return module
    cls = type(module)
    children = list(module._modules) if isinstance(module, (Sequential, ModuleList)) else None
    sm = RecursiveScriptModule(unit.type_name(cls.__name__, cls.__module__), cls.__name__,
                               unit, cls, children)
    sm.training = module.training
    for name, p in module._parameters.items():
        sm._parameters[name] = p
    for name, b in module._buffers.items():
        sm._buffers[name] = b
    for name, child in module._modules.items():
        sm._modules[name] = script_module(child, unit, compile_methods) \
            if child is not None else None
    _keep_constants(sm, vars(module))
    activation = vars(module).get("activation")
    if callable(activation) and not isinstance(activation, Module):
        sm.__dict__["_jit_activation"] = activation  # (a layer's function, for its forward)
    if compile_methods:
        _compile_methods(sm, cls, children)
    return sm


def _script_in_place(sm: ScriptModule) -> None:
    """Make a user's ScriptModule subclass instance a script module where it stands: its
    submodules scripted, its constants kept, its `script_method`s and exported methods
    compiled and run in place of the Python ones."""
    cls = type(sm)
    sm._jit_setup(UNIT.type_name(cls.__name__, cls.__module__), cls.__name__, UNIT, cls, None)
    for name, child in sm._modules.items():
        if child is not None:
            sm._modules[name] = script_module(child, UNIT)
    _keep_constants(sm, dict(vars(sm)))
    _compile_methods(sm, cls, None, bind_class_methods=True)


def _keep_constants(sm: ScriptModule, attributes: dict) -> None:
    """Keep the module attributes scripted code may read: numbers, strings, tuples and lists
    of them, public tensors."""
    from ._markers import Attribute

    for name, value in attributes.items():
        if isinstance(value, Attribute):  # `jit.Attribute(value, type)`: typed as declared
            declared = python_type(value.type)
            if declared is None:
                raise NotSupportedError(f"Unknown type annotation for attribute '{name}': "
                                        f"{value.type!r}")
            sm.__dict__.setdefault("_jit_types", {})[name] = declared
            value = value.value
            sm._jit_consts[name] = value
            sm.__dict__[name] = value
            continue
        # (a name the class already has, as a copied module's `_is_full_backward_hook`, is
        # bookkeeping, and no attribute a saved program could name)
        if name in ("training", "original_name") or name.startswith(("__", "_jit_")) or \
                hasattr(ScriptModule, name):
            continue
        # Private attributes count when they are constants (a layer's precomputed padding):
        # the Module's own bookkeeping (hook dicts, sets) is not.
        if _constant_ok(value) or (isinstance(value, fusegrad.Tensor)
                                   and not name.startswith("_")):
            sm._jit_consts[name] = value
            sm.__dict__[name] = value


def _compile_methods(sm: ScriptModule, cls: type, children: list | None,
                     bind_class_methods: bool = False) -> None:
    """Compile `forward` and the exported methods of `cls` for `sm` and make them callable
    from Python (with `bind_class_methods`, also over the class's own Python methods)."""
    if children is None or _is_sequential(cls):
        forward = getattr(cls, "forward", None)
        if forward is not None and not getattr(forward, UNUSED, False) and (
                children is not None or forward is not Module.forward) and \
                forward is not ScriptModule.forward:
            sm._compile_method("forward")
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if getattr(fn, EXPORT, False) and name not in sm._jit_methods:
            sm._compile_method(name)
    sm._bind_methods(bind_class_methods)
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        # methods left to Python stay callable from Python, given the script module
        if (getattr(fn, IGNORE, False) or getattr(fn, UNUSED, False)) and \
                not hasattr(ScriptModule, name) and name not in sm.__dict__:
            sm.__dict__[name] = fn.__get__(sm)


def _constant_ok(value, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (tuple, list)) and depth < 2:
        return all(_constant_ok(v, depth + 1) for v in value)
    return False
