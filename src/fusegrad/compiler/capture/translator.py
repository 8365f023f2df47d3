"""The bytecode translator: symbolic execution of CPython 3.11-3.13 bytecode, one method per
opcode (what changed in 3.12 and 3.13 is in versions.py).

It runs a function's instructions over a stack of variables (see variables.py), recording
tensor operations into an FX graph, evaluating plain Python on constants, unrolling loops
over known values and inlining calls into user functions and module `forward`s. Where it
cannot continue (a branch on a tensor's value, `.item()`, `print`, an unsupported call), it
raises `Unsupported`; the segment then ends there (see segments.py).

The same class runs in *concrete* mode to execute one breaking instruction on real values:
then every variable is a constant and calls are made for real.
"""

from __future__ import annotations

import builtins
import collections
import dis
import inspect
import operator
import sys
import types
import weakref

import numpy as np

from ..._symbolic import SymInt
from ..._tensor import Tensor
from . import reasons
from .builder import holds_symbol
from .containers import ContainerOpcodes
from .exceptions import ExceptionOpcodes, Raised
from .functional_call import overridden_read
from .guards import _is_plain_data, literal_or_none
from .objects import followed_identity
from .scopes import ScopeOpcodes
from .variables import (
    BoundFunctionVariable,
    ConstantVariable,
    DefaultDictVariable,
    DequeVariable,
    DictVariable,
    DictViewVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyIteratorVariable,
    ListVariable,
    MethodVariable,
    NestedFunctionVariable,
    NullVariable,
    ObjectVariable,
    OutsideIteratorVariable,
    OutsideListVariable,
    OutsideOrderedDictVariable,
    PartialVariable,
    SetVariable,
    SliceVariable,
    SuperVariable,
    TensorVariable,
    TruthVariable,
    TupleVariable,
    Unsupported,
    Variable,
    is_plain_namedtuple,
)
from .versions import (
    COMPARE_TO_BOOL,
    METHOD_LOAD_ATTR,
    NEWER_OPCODES,
    NULL_AFTER_CALLABLE,
    PY313,
    SUPPORTED_VERSIONS,
    NewerOpcodes,
    comprehension_cleanups,
)

BINARY_OPS = {
    0: operator.add, 1: operator.and_, 2: operator.floordiv, 3: operator.lshift,
    4: operator.matmul, 5: operator.mul, 6: operator.mod, 7: operator.or_, 8: operator.pow,
    9: operator.rshift, 10: operator.sub, 11: operator.truediv, 12: operator.xor,
    13: operator.iadd, 14: operator.iand, 15: operator.ifloordiv, 16: operator.ilshift,
    17: operator.imatmul, 18: operator.imul, 19: operator.imod, 20: operator.ior,
    21: operator.ipow, 22: operator.irshift, 23: operator.isub, 24: operator.itruediv,
    25: operator.ixor,
}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
               ">": operator.gt, ">=": operator.ge}
# Builtins that are pure functions of their (constant) arguments.
PURE_BUILTINS = {len, range, isinstance, issubclass, int, float, bool, str, abs, min, max,
                 tuple, list, dict, enumerate, zip, getattr, hasattr, round, sorted, reversed,
                 type, divmod, pow, sum, any, all, slice, repr, id, callable, hash}
# The iterators pure builtins return (`reversed(range(3))`, `zip(a, b)`): unrolled into an
# IteratorVariable when made while translating.
_ONE_SHOT_ITERATORS = frozenset({
    reversed, zip, enumerate, map, filter, type(iter(())), type(iter([])), type(iter(range(0))),
    type(reversed(())), type(reversed([])), type(reversed(range(0))), type(iter({})),
    type(iter({}.values())), type(iter({}.items())), type(iter("")), type(iter(set())),
})
# Opcodes the translator handles; a code object using any other runs eagerly.
SUPPORTED_OPCODES = {
    "RESUME", "NOP", "CACHE", "PRECALL", "LOAD_FAST", "STORE_FAST", "DELETE_FAST",
    "LOAD_CONST", "LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "LOAD_DEREF",
    "LOAD_CLOSURE", "COPY_FREE_VARS", "MAKE_CELL", "PUSH_NULL", "KW_NAMES", "CALL",
    "CALL_FUNCTION_EX", "BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NEGATIVE",
    "UNARY_NOT", "UNARY_POSITIVE", "UNARY_INVERT", "BINARY_SUBSCR", "STORE_SUBSCR",
    "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SLICE",
    "LIST_APPEND", "LIST_EXTEND", "LIST_TO_TUPLE", "MAP_ADD", "DICT_UPDATE", "DICT_MERGE",
    "UNPACK_SEQUENCE", "POP_TOP", "COPY", "SWAP", "RETURN_VALUE", "GET_ITER", "FOR_ITER",
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
    "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "JUMP_IF_FALSE_OR_POP",
    "JUMP_IF_TRUE_OR_POP", "FORMAT_VALUE", "BUILD_STRING", "MAKE_FUNCTION", "EXTENDED_ARG",
    "BUILD_SET", "SET_ADD", "SET_UPDATE", "UNPACK_EX", "DELETE_SUBSCR", "STORE_GLOBAL",
    # exceptions and `with` blocks (exceptions.py)
    "LOAD_ASSERTION_ERROR", "RAISE_VARARGS", "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH",
    "RERAISE", "BEFORE_WITH", "WITH_EXCEPT_START",
    # cells, super(), import (scopes.py)
    "STORE_DEREF", "DELETE_DEREF", "LOAD_SUPER_ATTR", "IMPORT_NAME", "IMPORT_FROM",
    "LOAD_BUILD_CLASS",
} | NEWER_OPCODES
# What a generator expression adds; its code runs only when a builtin consumes it.
GENERATOR_OPCODES = {"RETURN_GENERATOR", "YIELD_VALUE", "CALL_INTRINSIC_1",
                     "GET_YIELD_FROM_ITER", "SEND", "END_SEND", "CLEANUP_THROW"}
# Generator expressions; other generators and coroutines run natively.
_GENERATOR_FLAGS = 0x20
_NATIVE_FLAGS = 0x80 | 0x100 | 0x200


# Real containers whose contents can change between calls (and arrays, written in place).
_IN_PLACE_OPERATORS = frozenset({operator.iadd, operator.imul, operator.ior, operator.iand,
                                 operator.isub, operator.ixor})
_MUTABLE_CONTAINERS = (list, dict, set, bytearray, collections.deque, np.ndarray)


# Values `GraphBuilder.wrap` guards by something other than identity (or not at all).
_NOT_BY_IDENTITY = (Tensor, np.ndarray, range, set, list, tuple, dict, types.MethodType,
                    types.BuiltinMethodType)


class _Arg:
    """Stands for an instruction when one handler calls another with a different arg."""

    def __init__(self, arg: int):
        self.arg = arg


class Return(Exception):
    """Raised by RETURN_VALUE to end a frame with its value."""

    def __init__(self, value: Variable):
        self.value = value


class Jump(Exception):
    """Raised in concrete mode when the one instruction executed moved elsewhere."""


def instructions_of(code: types.CodeType) -> tuple[list, dict]:
    """The instructions of `code` and a map from offset to index (decoded once per code
    object: a translator is made for every instruction run for real after a break)."""
    found = _INSTRUCTIONS.get(code)
    if found is None:
        insts = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        found = _INSTRUCTIONS[code] = (insts, {inst.offset: k for k, inst in enumerate(insts)})
    return found


# Code objects are immutable: their instructions never change. Weak keys let code go.
_INSTRUCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def unsupported_opcodes(code: types.CodeType, generator: bool = False) -> set[str]:
    """Opcodes of `code` (and nothing nested) the translator does not handle (`generator`:
    a generator expression being consumed, whose yields are collected)."""
    if sys.version_info[:2] not in SUPPORTED_VERSIONS:
        return {f"Python {sys.version_info[0]}.{sys.version_info[1]} bytecode"}
    if code.co_flags & _NATIVE_FLAGS or (code.co_flags & _GENERATOR_FLAGS and not generator):
        return {"generator"}
    insts, index_of = instructions_of(code)
    skipped = comprehension_cleanups(code, insts, index_of)
    known = SUPPORTED_OPCODES | GENERATOR_OPCODES if generator else SUPPORTED_OPCODES
    missing = {i.opname for i in insts if i.offset not in skipped} - known
    if _FRAME_READERS.intersection(code.co_names):
        # The running frame itself (`sys._getframe()`, `inspect.currentframe()`): captured
        # code runs in no frame of its own, so the function runs as it is.
        missing.add("a frame read (sys._getframe / inspect.currentframe)")
    return missing


_FRAME_READERS = frozenset({"_getframe", "currentframe"})


def is_generator_expression(code: types.CodeType) -> bool:
    """A generator expression's code (run when a builtin consumes it)."""
    return bool(code.co_flags & _GENERATOR_FLAGS) and code.co_name == "<genexpr>" and \
        not code.co_flags & _NATIVE_FLAGS


_OPERATOR_DUNDERS = frozenset(
    f"__{n}__" for n in (
        "add radd iadd sub rsub isub mul rmul imul truediv rtruediv itruediv floordiv "
        "rfloordiv ifloordiv mod rmod imod pow rpow ipow matmul rmatmul imatmul and rand iand "
        "or ror ior xor rxor ixor lshift rlshift ilshift rshift rrshift irshift eq ne lt le "
        "gt ge neg pos invert abs contains").split())
_PYTHON_OPERATORS: dict[type, bool] = {}


def _constant_key(key) -> bool:
    """A dict key the replayed assignment can name: plain data, a class, or tuples of them."""
    if type(key) is tuple:
        return all(_constant_key(k) for k in key)
    return _is_plain_data(key) or isinstance(key, type)


def _python_operators(cls: type) -> bool:
    """Whether `cls` (a user's class, not fusegrad's, NumPy's or a builtin) defines an
    operator in Python: running it during capture could read state that no guard covers."""
    known = _PYTHON_OPERATORS.get(cls)
    if known is None:
        module = getattr(cls, "__module__", "") or ""
        # (the `enum` module's own operators, an `enum.Flag`'s `|`, `&`, `~` and `in`, read
        # only the members' values: constants while translating)
        known = not module.startswith(("builtins", "fusegrad", "numpy", "ml_dtypes")) and any(
            isinstance(vars(k).get(name), types.FunctionType) and
            vars(k)[name].__module__ != "enum"
            for k in cls.__mro__[:-1] for name in _OPERATOR_DUNDERS)
        _PYTHON_OPERATORS[cls] = known
    return known


# What builtins call on their arguments besides operators (`str`, `hash`, `float`, `range`,
# an index): written in the program's Python, each may read state no guard covers.
_CONVERSION_DUNDERS = frozenset(
    f"__{n}__" for n in (
        "str repr format hash index int float complex bool len iter getitem round trunc "
        "floor ceil bytes").split())
_PYTHON_METHODS: dict[type, bool] = {}


def python_methods(cls: type) -> bool:
    """Whether `cls` has an operator or conversion (`__str__`, `__hash__`, `__index__` ...)
    written in the program's own Python (a dataclass's generated `__repr__` too; the
    standard library's, such as an Enum's or a named tuple's, are not): a builtin run on an
    instance while translating would run it once and keep a result that reads the
    instance's state (its `str()` after an attribute changed)."""
    known = _PYTHON_METHODS.get(cls)
    if known is None:
        known = any(_user_code(vars(k).get(name)) for k in cls.__mro__[:-1]
                    for name in _CONVERSION_DUNDERS | _OPERATOR_DUNDERS)
        _PYTHON_METHODS[cls] = known
    return known


def _is_user_class(value) -> bool:
    """Whether `value` is a class of the program's own (made by `type` itself, not a
    builtin's, the standard library's `enum` or fusegrad's): an attribute assigned to it
    (`type(self).calls += 1`) is set after the graph, as an object's is."""
    module = getattr(value, "__module__", None) or ""
    return type(value) is type and not value.__flags__ & _IMMUTABLE_TYPE and \
        module != "builtins" and not module.startswith("fusegrad")


_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a static or immutable class


def _refuse_python_index(index) -> None:
    """A graph break for an index or key whose `__index__`/`__hash__`/`__eq__` is the
    program's Python (it may read state that no guard covers)."""
    if python_methods(type(index)):
        raise Unsupported(f"an index of a {type(index).__name__}, whose methods are Python "
                          "code")


def _module_property(obj, name: str, stored: bool = False):
    """The property `name` of nn.Module `obj`'s class (of any object's class when the graph
    `stored` attributes of it, or when the getter is a user's), when its getter is Python
    code."""
    value = inspect.getattr_static(type(obj), name, None)
    if isinstance(value, property) and isinstance(value.fget, types.FunctionType) and (
            _is_nn_module(obj) or stored or _user_code(value.fget)):
        return value
    return None


def _property_setter(obj, name: str, value: Variable):
    """The Python setter that `obj.name = value` runs (`name` a property of its class with a
    setter of the program's), or None. On an nn.Module, only where `Module.__setattr__`
    hands the value on to the property: not a parameter, module or buffer's name, and not
    a module or a tensor from outside (which may be a parameter it would register)."""
    prop = inspect.getattr_static(type(obj), name, None)
    if type(prop) is not property or not _user_code(prop.fset):
        return None
    if _is_nn_module(obj):
        tables = ("_parameters", "_buffers", "_modules")
        if any(name in (getattr(obj, t, None) or {}) for t in tables) or \
                isinstance(value, TensorVariable) and value.source is not None or \
                isinstance(value, ConstantVariable) and (
                    _is_nn_module(value.value) or isinstance(value.value, Tensor)):
            return None
    return prop.fset


def _user_code(f) -> bool:
    """Whether `f` is a Python function of the program's (not fusegrad's or the standard
    library's, whose getters and lookups have no side effects the capture must follow)."""
    if not isinstance(f, types.FunctionType):
        return False
    top = (getattr(f, "__module__", None) or "").split(".")[0]
    return top != "fusegrad" and top not in sys.stdlib_module_names


def _attr_runs_code(obj, name: str) -> str | None:
    """Why reading `obj.name` of an object from outside runs the program's own code that
    reading it once during capture (and again for the guards and the graph's input) cannot
    stand for: the class's Python `__getattribute__`, a descriptor with a Python `__get__`,
    or a Python `__getattr__` answering an attribute the instance lacks (each may count its
    calls or return something new each time); None where it does not."""
    cls = type(obj)
    if isinstance(obj, (type, types.ModuleType)):
        return None
    if _user_code(inspect.getattr_static(cls, "__getattribute__", None)):
        return f"{cls.__name__}.__getattribute__ runs Python code"
    raw = inspect.getattr_static(cls, name, None)
    if raw is not None and not isinstance(raw, property) and \
            _user_code(inspect.getattr_static(type(raw), "__get__", None)):
        return f"the descriptor {cls.__name__}.{name} runs Python code"
    if _user_code(inspect.getattr_static(cls, "__getattr__", None)):
        try:
            own = name in object.__getattribute__(obj, "__dict__")
        except AttributeError:  # (slots only)
            own = False
        slot = isinstance(raw, types.MemberDescriptorType)
        if not own and (raw is None or slot):  # (an unset slot falls back to it too)
            return f"{cls.__name__}.__getattr__ may answer {name!r}"
    return None


class _GlobalsWriter:
    """Sets a module's globals as attributes (`setattr(w, "n", 1)` is `G["n"] = 1`): how a
    `global n; n = 1` in captured code is replayed after the graph, like an attribute."""

    __slots__ = ("globals_dict",)

    def __init__(self, globals_dict: dict):
        object.__setattr__(self, "globals_dict", globals_dict)

    def __setattr__(self, name: str, value) -> None:
        self.globals_dict[name] = value


_GLOBALS_WRITERS: dict = {}  # id(globals dict) -> its writer (module globals live on)


def globals_writer(globals_dict: dict) -> _GlobalsWriter:
    """The one writer of `globals_dict` (the key its stores are recorded under)."""
    writer = _GLOBALS_WRITERS.get(id(globals_dict))
    if writer is None or writer.globals_dict is not globals_dict:
        writer = _GLOBALS_WRITERS[id(globals_dict)] = _GlobalsWriter(globals_dict)
    return writer


def _variable_defaults(tr, v) -> bool:
    """Whether a function's defaults (a tuple or dict variable, None: none) must stay
    variables: they hold a value made in the graph (a list, a tensor) or a dynamic size."""
    if v is None:
        return False
    if isinstance(v, ConstantVariable):
        return holds_symbol(v.value)
    items = v.items.values() if isinstance(v, DictVariable) else getattr(v, "items", ())
    if not all(isinstance(i, ConstantVariable) for i in items):
        return True
    return holds_symbol(tr.as_python(v))


def _written_into(node):
    """The node whose tensor `node` is: an in-place op's result is the tensor it wrote into
    (`x.add_(1)` and `x += 1` return x itself)."""
    while node.meta.get("inplace_of") is not None:
        node = node.meta["inplace_of"]
    return node


def _is_nn_module(obj) -> bool:
    from ...nn import Module

    return isinstance(obj, Module)


_WRITING_OPCODES = frozenset({"STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL", "DELETE_GLOBAL",
                              "STORE_DEREF", "DELETE_DEREF", "STORE_SUBSCR", "DELETE_SUBSCR"})


def _writes_anything(code) -> bool:
    """Whether `code` (or a function made in it) stores into anything but its own locals."""
    for inst in dis.get_instructions(code):
        if inst.opname in _WRITING_OPCODES:
            return True
    return any(_writes_anything(c) for c in code.co_consts if isinstance(c, types.CodeType))


class Translator(ContainerOpcodes, ExceptionOpcodes, ScopeOpcodes, NewerOpcodes):
    """Executes one frame's bytecode over variables."""

    def __init__(self, code, f_globals, closure, builder, local_vars: dict, stack: list,
                 start: int = 0, concrete: bool = False, parent: Translator | None = None,
                 callee_wrapper=None, closure_ref: str | None = None):
        self.code = code
        self.f_globals = f_globals
        self.closure = closure or ()
        # How guards read this frame's closure cells: the compiled function's are `___closure`;
        # an inlined function's are its `__closure__` (None: cells made while translating).
        self.closure_ref = closure_ref if parent is not None or concrete else "___closure"
        self.builder = builder
        self.locals = local_vars
        self.stack = stack
        self.insts, self.index_of = instructions_of(code)
        self.pc = self.index_of[start]
        self.concrete = concrete
        self.parent = parent
        self.kw_names: tuple = ()
        self.callee_wrapper = callee_wrapper
        self.depth = 0 if parent is None else parent.depth + 1
        self.current = None
        self.frame_name = code.co_name  # (what the nodes' stack traces call this frame)
        self.handled: list = []  # exceptions being handled (except/finally blocks)
        self.raised = False  # concrete mode: a real exception went to a handler
        self.yields: list | None = None  # a generator expression's yielded values

    # ---------------------------------------------------------------- driving

    def run(self) -> Variable:
        """Run until RETURN_VALUE (returns its variable) or raise Unsupported."""
        while True:
            self.step()

    def step(self) -> None:
        """Execute the instruction at `pc`."""
        inst = self.insts[self.pc]
        self.current = inst
        self.pc += 1
        handler = getattr(self, inst.opname, None)
        if handler is None:
            raise Unsupported(f"opcode {inst.opname}")
        builder = self.builder
        if not self.concrete and not builder.protected and self.protected(inst.offset):
            builder.enter_protected()
        if builder is not None:  # (the nodes made now are located in this frame)
            outer = builder.translator
            builder.translator = self
        try:
            handler(inst)
        except Raised as r:  # the program raised an exception it created
            entry = self.handler_entry(inst.offset)
            if entry is None:
                raise
            self.route_exception(entry, r.exc, inst.offset)
        except (Jump, Return, Unsupported):
            raise
        except Exception as e:
            if not self.concrete:
                raise
            entry = self.handler_entry(inst.offset)
            if entry is None:
                raise
            self.route_exception(entry, ConstantVariable(e), inst.offset)
            self.raised = True
            raise Jump() from None
        finally:
            if builder is not None:
                builder.translator = outer

    def jump_to(self, offset: int) -> None:
        """Continue at instruction `offset`."""
        self.pc = self.index_of[offset]
        if self.concrete:
            raise Jump()

    def offset(self) -> int:
        """The offset of the instruction being executed."""
        return self.current.offset

    def push(self, v: Variable) -> None:
        self.stack.append(v)

    def pop(self) -> Variable:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def const(self, value) -> ConstantVariable:
        return ConstantVariable(value)

    # ---------------------------------------------------------------- loads and stores

    def RESUME(self, inst):  # noqa: N802
        pass

    NOP = PRECALL = COPY_FREE_VARS = EXTENDED_ARG = RESUME

    def LOAD_FAST(self, inst):  # noqa: N802
        self._load_fast(inst.argval)

    LOAD_CLOSURE = LOAD_FAST_CHECK = LOAD_FAST

    def _load_fast(self, name: str) -> None:
        if name not in self.locals and name in self.code.co_freevars:
            self.push(self.cell_of(name))  # LOAD_CLOSURE of a free variable: its cell
            return
        if name not in self.locals:
            self._unbound_local(name)
        self.push(self.locals[name])

    def _unbound_local(self, name: str) -> None:
        """A local read (or deleted) while unbound. Symbolically a graph break, so that the
        instruction runs for real; run for real (concrete mode) it raises Python's own
        UnboundLocalError, which the program's handlers may catch."""
        if self.concrete and name not in self.code.co_cellvars:
            raise UnboundLocalError(f"cannot access local variable {name!r} where it is not "
                                    "associated with a value")
        raise Unsupported(f"local {name!r} read before assignment")

    def STORE_FAST(self, inst):  # noqa: N802
        self._store_fast(inst.argval, self.pop())

    def _store_fast(self, name: str, value: Variable) -> None:
        if isinstance(value, NullVariable):  # 3.12+: a comprehension's unbound variable
            self.locals.pop(name, None)
            return
        if isinstance(value, TensorVariable) and value.source is None and not self.concrete:
            self._name_node(value.node, name)
        self.locals[name] = value

    def _name_node(self, node, name: str) -> None:
        # Dynamo names a node after the local it is stored in (`x = a / b` makes node `x`).
        if node.op in ("call_function", "call_method") and not node.meta.get("named") \
                and name.isidentifier():
            node.meta["named"] = True
            self.builder.rename(node, name)

    def DELETE_FAST(self, inst):  # noqa: N802
        if inst.argval not in self.locals:  # `del` of an unbound local raises too
            self._unbound_local(inst.argval)
        del self.locals[inst.argval]

    def LOAD_CONST(self, inst):  # noqa: N802
        self.push(self.const(inst.argval))

    def LOAD_GLOBAL(self, inst):  # noqa: N802
        name = inst.argval
        if not self.concrete and self.builder.written_dicts.get(
                id(self.f_globals)) is self.f_globals:  # (`globals()[k] = v` earlier)
            raise Unsupported("a global read after an item assignment into the globals dict")
        if not self.concrete:
            stored = self.builder.stored_attr(globals_writer(self.f_globals), name)
            if stored is not None:  # assigned earlier in this graph (set after it ran)
                self._push_callable(stored, inst.arg & 1)
                return
        if name in self.f_globals:
            value, source = self.f_globals[name], f"{self._globals_source()}[{name!r}]"
        elif hasattr(builtins, name):
            value, source = getattr(builtins, name), None
            if not self.concrete:  # a global defined later by that name would hide it
                self.builder.guards.add(f"{name!r} not in {self._globals_source()}")
        else:
            raise Unsupported(f"name {name!r} is not defined")
        self._push_callable(self.wrap(value, source), inst.arg & 1)

    def STORE_GLOBAL(self, inst):  # noqa: N802
        value = self.pop()
        if self.concrete:
            self.f_globals[inst.argval] = value.value
            return
        # Set in the module's globals after the graph ran (as attribute stores are); reads
        # later in this graph see the new value.
        self.builder.store_attr(globals_writer(self.f_globals), inst.argval, value)

    def _globals_source(self) -> str:
        """How sources name this frame's globals: `G` for the compiled function's; a scope
        entry for a function inlined from another module (its `G[...]` would be wrong)."""
        root = self
        while root.parent is not None:
            root = root.parent
        if self.concrete or self.f_globals is root.f_globals:
            return "G"
        module = str(self.f_globals.get("__name__", "")).replace(".", "_")
        name = f"___G_{module}" if module.isidentifier() else f"___G{id(self.f_globals)}"
        values = self.builder.guards.values
        if values.setdefault(name, self.f_globals) is not self.f_globals:  # a namesake
            name = f"___G{id(self.f_globals)}"
            values[name] = self.f_globals
        return name

    def _push_callable(self, fn: Variable, with_null: bool) -> None:
        """Push `fn`, with a NULL on the side the running version puts it when asked."""
        if with_null and not NULL_AFTER_CALLABLE:
            self.push(NullVariable())
        self.push(fn)
        if with_null and NULL_AFTER_CALLABLE:
            self.push(NullVariable())

    def LOAD_DEREF(self, inst):  # noqa: N802
        self._load_deref(inst.argval)

    def wrap(self, value, source):
        """A variable for a real value (guarded through the builder when it has a source)."""
        if self.concrete:
            return ConstantVariable(value)
        return self.builder.wrap(value, source)

    def LOAD_ATTR(self, inst):  # noqa: N802
        obj = self.pop()
        # 3.12+: the low bit asks for a method load, as 3.11's LOAD_METHOD.
        self._push_callable(self.get_attr(obj, inst.argval), METHOD_LOAD_ATTR and inst.arg & 1)

    def LOAD_METHOD(self, inst):  # noqa: N802
        obj = self.pop()
        self.push(NullVariable())
        self.push(self.get_attr(obj, inst.argval))

    def get_attr(self, obj: Variable, name: str) -> Variable:
        """`obj.name`."""
        if isinstance(obj, TensorVariable):
            return self.tensor_attr(obj, name)
        if isinstance(obj, ObjectVariable) or isinstance(obj, SuperVariable) and \
                isinstance(obj.obj, ObjectVariable):  # an object made in the graph
            from .objects import read_attr, super_attr

            return (read_attr if isinstance(obj, ObjectVariable) else super_attr)(
                self, obj, name)
        if isinstance(obj, SuperVariable):
            if self.concrete:
                return ConstantVariable(getattr(super(obj.cls, obj.obj.value), name))
            return self.super_attr(obj, name)
        if isinstance(obj, ConstantVariable) and not self.concrete and \
                isinstance(obj.value, types.ModuleType):
            # A module's global assigned earlier in this graph (`global n; n = 1` in a
            # function of that module) is set after the graph ran: read what was assigned.
            writer = _GLOBALS_WRITERS.get(id(vars(obj.value)))
            if writer is not None and writer.globals_dict is vars(obj.value):
                stored = self.builder.stored_attr(writer, name)
                if stored is not None:
                    return stored
                if name == "__dict__" and any(s[0] is writer for s in self.builder.stores):
                    raise Unsupported("a module's __dict__ read before its globals are set")
        if isinstance(obj, ConstantVariable) and not self.concrete:
            given = overridden_read(self.builder.state_overrides, obj.value, name)
            if given is not None:  # (a module's state inside a `functional_call`)
                return given
            if self.builder.namespace_written(obj.value):  # (`vars(obj)[k] = v` earlier)
                raise Unsupported("an attribute read after an item assignment into the "
                                  "object's __dict__")
            stored = self.builder.stored_attr(obj.value, name)
            if stored is not None:  # assigned earlier in this graph (replayed after it)
                return stored
            if isinstance(obj.value, type) or name not in getattr(obj.value, "__dict__", {}):
                stored = self.builder.stored_class_attr(
                    obj.value if isinstance(obj.value, type) else type(obj.value), name)
                if stored is not None:  # a class's attribute assigned earlier in this graph
                    return stored
            # A property of an object the graph assigned attributes of is traced too: run
            # on the real object now, it would read the attributes' old values.
            prop = _module_property(obj.value, name, stored=any(
                s[0] is obj.value for s in self.builder.stores))
            if prop is not None:
                # A module's property runs code (a parametrization's power iteration, a
                # counter): its getter is traced, as Dynamo inlines it, not read for a guard
                # and again by the graph's caller (which ran it twice per call).
                ref = f"{self.builder.guards.ref(type(obj.value), 'type')}.{name}"
                self.builder.guards.constant(ref, prop)
                return self.call(BoundFunctionVariable(prop.fget, obj), [], {})
            why = _attr_runs_code(obj.value, name)
            if why is not None and why.endswith(f"__getattr__ may answer {name!r}"):
                answer = self._python_getattr(obj, name)
                if answer is not None:
                    return answer
            if why is not None:  # read for real, once, as eager reads it
                raise Unsupported(why)
        if isinstance(obj, ConstantVariable):
            try:
                value = getattr(obj.value, name)
            except AttributeError as e:
                if self.concrete:
                    raise
                raise Unsupported(f"attribute error: {e}") from None
            if self.concrete:
                return ConstantVariable(value)
            if isinstance(value, (types.MethodType, types.BuiltinMethodType)) and \
                    getattr(value, "__self__", None) is obj.value and \
                    not isinstance(obj.value, types.ModuleType):  # `math.sqrt` is a function
                return MethodVariable(obj, name)
            return self.builder.wrap(value, self._attr_source(obj, name, value))
        if isinstance(obj, TupleVariable) and obj.field(name) is not None:
            return obj.field(name)  # `x.max(0).values`
        if isinstance(obj, TupleVariable) and not self.concrete and obj.cls is not None and \
                (is_plain_namedtuple(obj.cls) or obj.source is not None) and \
                hasattr(obj.cls, name) and \
                name not in vars(tuple):
            return self._namedtuple_attr(obj, name)
        if isinstance(obj, DefaultDictVariable) and name == "default_factory":
            return obj.factory  # (its one data attribute; the rest are methods)
        if isinstance(obj, (TupleVariable, DictVariable)) or \
                isinstance(obj, SetVariable) and name in ("add", "discard"):
            return MethodVariable(obj, name)
        if isinstance(obj, PartialVariable) and name in ("func", "args"):
            # (not `keywords`: the real partial's dict, which a copy here would not be)
            return obj.func if name == "func" else TupleVariable(obj.args)
        if isinstance(obj, GeneratorVariable) and name in ("send", "__next__"):
            return MethodVariable(obj, name)  # (run into the graph: `calls.py`)
        raise Unsupported(f"attribute {name!r} of {type(obj).__name__}")

    def _python_getattr(self, obj: ConstantVariable, name: str) -> Variable | None:
        """`obj.name` answered by the class's Python `__getattr__` (a wrapper forwarding
        what it lacks to the module it wraps, as LoRA adapters do), traced as Dynamo traces
        it: inlined with the name, guarded on the class's `__getattr__` and on the instance
        still lacking the attribute (then Python would not call it). None where the object
        has no source to guard it through, or the method is not a plain function."""
        from .calls import effect_since

        src = self.guard_root(obj)
        cls = type(obj.value)
        fn = inspect.getattr_static(cls, "__getattr__", None)
        if src is None or not isinstance(fn, types.FunctionType) or \
                inspect.getattr_static(cls, name, None) is not None or \
                not isinstance(getattr(obj.value, "__dict__", None), dict):
            return None  # (an unset slot, which a later assignment sets)
        if _writes_anything(fn.__code__):
            # (a `__getattr__` that counts its reads must run once per read, for real: the
            # translation also asks the real object things, each a call of it)
            return None
        builder = self.builder
        guards = builder.guards
        mark, n_stores, mutated = len(builder.created), len(builder.stores), builder.mutated
        grad_write = builder.grad_write
        guard_mark = guards.mark()
        lookup = guards.ref(inspect.getattr_static, "fn")
        guards.add(f"type({src}).__getattr__ is {guards.ref(fn, 'fn')} and "
                   f"{name!r} not in {src}.__dict__ and "
                   f"{lookup}(type({src}), {name!r}, None) is None")
        answer = self.call(BoundFunctionVariable(fn, obj), [ConstantVariable(name)], {})
        if effect_since(builder, mark, n_stores) is not None:
            # A `__getattr__` that changes something (a counter of reads) is read for real,
            # once per read, as eager reads it: undo the translation of it.
            builder.discard_since(mark)
            del builder.stores[n_stores:]
            builder.mutated, builder.grad_write = mutated, grad_write
            guards.rollback(guard_mark)
            return None
        return answer

    def _namedtuple_attr(self, obj: TupleVariable, name: str) -> Variable:
        """A class attribute read through a named tuple built in the graph: a method the
        class defines (inlined with the tuple as `self`) or plain data (`_fields`); guarded
        through the class, whose attributes may be reassigned."""
        value = inspect.getattr_static(obj.cls, name)
        ref = f"{self.builder.guards.ref(obj.cls, 'type')}.{name}"
        if isinstance(value, types.FunctionType):
            self.builder.guards.constant(ref, value)
            return BoundFunctionVariable(value, obj)
        if isinstance(value, property) and isinstance(value.fget, types.FunctionType):
            self.builder.guards.constant(ref, value)
            return self.call(BoundFunctionVariable(value.fget, obj), [], {})
        if _is_plain_data(value):
            self.builder.guards.constant(ref, value)
            return ConstantVariable(value)
        raise Unsupported(f"attribute {name!r} of named tuple {obj.cls.__name__}")

    def _attr_source(self, obj: ConstantVariable, name: str, value=None) -> str | None:
        root = obj.source
        if root is None and (not isinstance(value, Tensor) or _is_nn_module(obj.value)):
            root = self.source_of(obj)  # a module from a listing: its tensors through it
        if root is None:
            return None
        for table in ("_modules", "_parameters", "_buffers"):
            entries = getattr(obj.value, table, None)
            if isinstance(entries, dict) and name in entries:
                return f"{root}.{table}[{name!r}]"
        return f"{root}.{name}"

    def source_of(self, v: Variable) -> str | None:
        """How guards read `v`'s value: its source, or (for an object that no source reaches,
        such as `type(self)`) a reference to the object itself, so that what is read out of
        it is still guarded. None for plain data, tensors and arrays (their reads are fixed
        by their own guards or are views)."""
        if v.source is not None or self.concrete or not isinstance(v, ConstantVariable):
            return v.source
        value = v.value
        if _is_plain_data(value) or isinstance(value, (Tensor, np.ndarray, range)):
            return None
        return self.builder.guards.ref(value)

    def guard_root(self, v: Variable) -> str | None:
        """Like `source_of`, but an object guarded by identity is named by its reference in
        the guard scope: guards on what it holds then skip re-reading the source's chain."""
        if isinstance(v, ConstantVariable) and v.source is not None and not self.concrete and \
                not _is_plain_data(v.value) and not isinstance(v.value, _NOT_BY_IDENTITY):
            return self.builder.guards.ref(v.value, weak=True)
        return self.source_of(v)

    def tensor_attr(self, t: TensorVariable, name: str) -> Variable:
        """An attribute of a graph tensor: metadata is constant, views are recorded."""
        ex = t.example
        if name in ("shape",):
            return ConstantVariable(ex.shape)
        if name in ("dtype", "device", "ndim", "is_cuda", "layout"):
            return ConstantVariable(getattr(ex, name))
        if name == "requires_grad":
            return ConstantVariable(ex.requires_grad)
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            return self.builder.call("call_function", getattr, (t, ConstantVariable(name)), {})
        if name == "grad":
            grad = self._input_grad(t)
            if grad is not None:
                return grad
        if name == "data":
            # `p.data.mul_(...)` of an optimizer: the tensor's values without its history, a
            # detached alias in the graph (writes through it reach `p`, as eager's do; only
            # `p._version` counts them, which `.data`'s writes leave alone in eager).
            from .calls import call_variable

            return call_variable(self, MethodVariable(t, "detach"), [], {})
        if name in ("grad", "grad_fn", "_version", "is_leaf", "_base"):
            raise Unsupported(f"tensor attribute {name!r}")
        # A method that needs the values (`loss.backward`, `y.item`) breaks where it is
        # called, not where it is read: the break then comes once, at the call, as Dynamo's
        # (read here, the resume point holding the real method broke again at its call).
        return MethodVariable(t, name)

    def _input_grad(self, t: TensorVariable) -> Variable | None:
        """`.grad` of a leaf the graph takes as an input, read as an input of its own (None
        guarded to stay None), as Dynamo reads `p.grad`; None (a break) for other tensors.
        Nothing in a graph changes a gradient but in place (a backward, an assignment to
        `.grad`, break the graph)."""
        source = t.node.meta.get("source") if t.node.op == "placeholder" else None
        real = self.builder.input_values.get(source) if source else None
        if real is None or real.grad_fn is not None:
            return None
        grad = real.grad
        if grad is None:
            self.builder.guards.add(f"{source}.grad is None")
            return ConstantVariable(None)
        return self.builder.wrap(grad, f"{source}.grad")

    def STORE_ATTR(self, inst):  # noqa: N802
        obj = self.pop()
        value = self.pop()
        name = inst.argval
        if self.concrete:
            setattr(obj.value, name, value.value)
            return
        self.store_attribute(obj, name, value)

    def store_attribute(self, obj: Variable, name: str, value: Variable) -> None:
        """`obj.name = value` (STORE_ATTR, `setattr(obj, name, value)`) while translating:
        a followed object's variable changes; a real object's attribute is set after the
        graph, where that is exactly eager's assignment (else a break)."""
        if isinstance(obj, ObjectVariable):  # an object made in the graph
            from .objects import store_attr

            store_attr(self, obj, name, value)
            return
        user_class = isinstance(obj, ConstantVariable) and _is_user_class(obj.value)
        if not isinstance(obj, ConstantVariable) or _is_plain_data(obj.value) or \
                isinstance(obj.value, (Tensor, types.ModuleType, BaseException)) or \
                isinstance(obj.value, type) and not user_class or (
                type(obj.value).__module__.startswith("fusegrad") and
                not _is_nn_module(obj.value)):  # fusegrad's own state (grad mode, RNG)
            what = obj.value if isinstance(obj, ConstantVariable) else obj
            raise Unsupported(f"attribute assignment {name!r} on a {type(what).__name__} "
                              "(a side effect)")
        if user_class and self.guard_root(obj) is not None and \
                not isinstance(getattr(type, name, None), types.GetSetDescriptorType):
            # (its metaclass is `type`, whose __setattr__ runs no code for a plain name;
            # the class is guarded by identity where the value read from it is)
            self.builder.store_attr(obj.value, name, value)
            return
        if type(obj.value).__setattr__ is not object.__setattr__ and \
                not _is_nn_module(obj.value):
            # Its own __setattr__ (a frozen dataclass's raises) runs code when the store is
            # replayed after the graph: run it for real, where a handler can catch it.
            raise Unsupported(f"attribute assignment {name!r} on a "
                              f"{type(obj.value).__name__} with its own __setattr__")
        descriptor = getattr(type(obj.value), name, None)
        if descriptor is not None and hasattr(type(descriptor), "__set__"):
            setter = _property_setter(obj.value, name, value)
            if setter is None or self.guard_root(obj) is None:
                raise Unsupported(f"assignment to the property {name!r} (runs code)")
            # The setter is the program's Python: inlined, as Dynamo inlines it (its own
            # stores are replayed after the graph), the property guarded by identity.
            guards = self.builder.guards
            guards.constant(f"{guards.ref(type(obj.value), 'type')}.{name}", descriptor)
            if not _is_nn_module(obj.value):
                guards.add(f"{guards.ref(type(obj.value), 'type')}.__setattr__ is "
                           f"{guards.ref(object.__setattr__, 'setattr')}")
            self.call(BoundFunctionVariable(setter, obj), [value], {})
            return
        if not hasattr(obj.value, "__dict__"):
            raise Unsupported(f"attribute assignment {name!r} on an object without __dict__")
        old = getattr(obj.value, name, None)
        if isinstance(value, TensorVariable) and isinstance(old, Tensor) and any(
                t is old for t in self.builder.input_values.values()):
            # (Only a tensor the graph reads can be the one assigned: reading another
            # would make it an input for nothing, one that may alias the rest.)
            current = self.get_attr(obj, name)
            if isinstance(current, TensorVariable) and \
                    self.builder.same_tensor(value.node, current.node):
                return  # `self.buf += 1`: the in-place op changed the attribute's tensor
        if self.guard_root(obj) is None:
            raise Unsupported(f"attribute assignment {name!r} on an object no guard reaches")
        # The class may gain a setter or its own __setattr__ after this capture (the object
        # is guarded by identity, not its class's contents): the graph's later reads of the
        # assigned value would miss what they do.
        from .objects import guard_instance_wins

        guards = self.builder.guards
        cls_ref = guards.ref(type(obj.value), "type")
        guard_instance_wins(guards, type(obj.value), name)
        if not _is_nn_module(obj.value):
            guards.add(f"{cls_ref}.__setattr__ is {guards.ref(object.__setattr__, 'setattr')}")
        # Attributes are set on the real object after the graph ran (before a break's
        # instruction); reads later in this graph see the new value.
        self.builder.store_attr(obj.value, name, value)

    # ---------------------------------------------------------------- operators

    def BINARY_OP(self, inst):  # noqa: N802
        b = self.pop()
        a = self.pop()
        self.push(self.apply(BINARY_OPS[inst.arg], (a, b)))

    def COMPARE_OP(self, inst):  # noqa: N802
        b = self.pop()
        a = self.pop()
        result = self.apply(COMPARE_OPS[inst.argval], (a, b))
        if PY313 and inst.arg & COMPARE_TO_BOOL:  # the compare feeds a branch
            result = self.to_bool(result)
        self.push(result)

    def IS_OP(self, inst):  # noqa: N802
        b = self.pop()
        a = self.pop()
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            # `b += y` and `b.add_(y)` return b itself: an in-place op's result is the
            # tensor it wrote into.
            same = a is b or (isinstance(a, TensorVariable) and isinstance(b, TensorVariable)
                              and _written_into(a.node) is _written_into(b.node))
        elif isinstance(a, ConstantVariable) and isinstance(b, ConstantVariable):
            same = a.value is b.value
        elif (found := self.builder.same_object(a, b)) is not None:
            same = found  # two containers read from the frame: the real objects decide
        elif (found := followed_identity(self.builder, a, b)) is not None:
            same = found  # an object followed by its type and one known by identity
        elif a is not b and (isinstance(a, PartialVariable) or isinstance(b, PartialVariable)):
            # A partial read from the frame is guarded by its parts, not its identity.
            raise Unsupported("an identity test of a functools.partial")
        else:
            same = a is b
        self.push(self.const(same != bool(inst.arg)))

    def CONTAINS_OP(self, inst):  # noqa: N802
        b = self.pop()
        a = self.pop()
        if isinstance(b, (DictVariable, SetVariable)) and isinstance(a, ConstantVariable) \
                and not self.concrete:  # keys are constants (values may be tensors)
            found = a.value in b.items
            self.push(self.const(found != bool(inst.arg)))
            return
        result = self.apply(operator.contains, (b, a))
        if isinstance(b, ConstantVariable) and isinstance(a, ConstantVariable) and \
                isinstance(result, ConstantVariable) and not self.concrete and \
                not _is_plain_data(b.value):
            src = self.guard_root(b)
            if src is not None:  # a mutable container: membership can change between calls
                key = literal_or_none(a.value) or self.builder.guards.ref(a.value)
                self.builder.guards.add(f"({key} in {src}) is {bool(result.value)}")
        if inst.arg:
            result = self.apply(operator.not_, (result,))
        self.push(result)

    def UNARY_NEGATIVE(self, inst):  # noqa: N802
        self.push(self.apply(operator.neg, (self.pop(),)))

    def UNARY_POSITIVE(self, inst):  # noqa: N802
        self.push(self.apply(operator.pos, (self.pop(),)))

    def UNARY_INVERT(self, inst):  # noqa: N802
        self.push(self.apply(operator.invert, (self.pop(),)))

    def UNARY_NOT(self, inst):  # noqa: N802
        v = self.pop()
        self.push(self.const(not self.truth(v)))

    def BINARY_SUBSCR(self, inst):  # noqa: N802
        index = self.pop()
        obj = self.pop()
        if isinstance(obj, ObjectVariable):  # an object made in the graph
            from .objects import get_item

            self.push(get_item(self, obj, index))
            return
        if isinstance(obj, DefaultDictVariable) and isinstance(index, ConstantVariable) and \
                not (isinstance(obj.factory, ConstantVariable) and obj.factory.value is None) \
                and not holds_symbol(index.value):
            try:
                missing = index.value not in obj.items
            except TypeError as e:  # unhashable: the real lookup raises it
                raise Unsupported(f"subscript error: {e}") from None
            if missing:  # `__missing__`: the factory's value, stored under the key
                obj.items[index.value] = self.call(obj.factory, [], {})
        if isinstance(obj, DequeVariable) and isinstance(index, ConstantVariable) and \
                isinstance(index.value, slice):
            raise Unsupported("a deque sliced (the real one raises TypeError)")
        if isinstance(obj, (TupleVariable, DictVariable)) and isinstance(
                index, ConstantVariable):
            _refuse_python_index(index.value)
            try:
                item = obj.items[index.value]
            except (IndexError, KeyError) as e:  # as the real container would raise
                raise Raised(ConstantVariable(type(e)(*e.args))) from None
            except TypeError as e:
                raise Unsupported(f"subscript error: {e}") from None
            self.push(ListVariable(item) if isinstance(index.value, slice) and
                      isinstance(obj, ListVariable) else
                      TupleVariable(item) if isinstance(index.value, slice) else item)
            return
        if isinstance(obj, ConstantVariable) and isinstance(index, ConstantVariable) and \
                not self.concrete and not _is_plain_data(obj.value):
            self.push(self._constant_item(obj, index.value))
            return
        if isinstance(obj, ConstantVariable) and isinstance(index, TensorVariable) and \
                not self.concrete and isinstance(obj.value, collections.abc.Mapping):
            self.push(self._item_by_tensor(obj, index))
            return
        self.push(self.apply(operator.getitem, (obj, index)))

    def _item_by_tensor(self, obj: ConstantVariable, index: TensorVariable) -> Variable:
        """`mapping[t]` of a real mapping (an optimizer's `state[p]`) keyed by a tensor the
        graph takes as an input: the real tensor's item, read (and guarded) through both
        sources. A missing key breaks: a defaultdict would make its item (an effect), a dict
        raises KeyError for real."""
        source = index.node.meta.get("source") if index.node.op == "placeholder" else None
        key = self.builder.input_values.get(source) if source else None
        src = self.source_of(obj)
        if key is None or src is None:
            raise Unsupported("a mapping indexed by a tensor the graph computes")
        if key not in obj.value:
            if type(obj.value) is not collections.defaultdict or \
                    obj.value.default_factory is not dict:
                raise Unsupported("a missing tensor key of a mapping (a defaultdict makes it)")
            # An optimizer's lazy state (`self.state[p]` of its first step): the entry is
            # made now, as the read makes it eagerly (this path is the one the program takes
            # on every call these guards pass); the items the graph stores into it are set
            # after the graph.
            obj.value[key] = {}
        return self.builder.wrap(obj.value[key], f"{src}[{source}]")

    def _constant_item(self, obj: ConstantVariable, index) -> Variable:
        """`obj[index]` of a real container: the item is guarded through `obj[index]` (the
        container may be mutated between calls), or by the container's contents."""
        if isinstance(obj.value, Tensor):
            raise Unsupported("operation on a tensor that is not a graph input")
        _refuse_python_index(index)
        try:
            value = obj.value[index]
        except Exception as e:
            raise Unsupported(f"subscript error: {e!r}") from None
        src = self.source_of(obj)
        key = literal_or_none(index)
        if src is None or isinstance(obj.value, type) or \
                type(obj.value).__module__ == "typing":
            return ConstantVariable(value)  # `list[int]`, `Dict[str, T]`: a new alias each time
        if isinstance(obj.value, np.ndarray) and isinstance(value, np.ndarray):
            if value.base is None:  # a copy (fancy indexing) does not see later writes
                self.builder.guards.contents(src, obj.value)
            return ConstantVariable(value)  # a view sees them
        if key is None:  # a slice or an object: the whole container decides the result
            if hasattr(type(obj.value), "__iter__"):
                self.builder.guards.contents(src, obj.value)
            return self.from_python(value)
        return self.builder.wrap(value, f"{src}[{key}]")

    def STORE_SUBSCR(self, inst):  # noqa: N802
        index = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, ObjectVariable):  # an object made in the graph
            from .objects import set_item

            set_item(self, obj, index, value)
            return
        if isinstance(obj, TensorVariable):
            self.builder.call("call_function", operator.setitem, (obj, index, value), {})
            return
        if isinstance(obj, ListVariable) and obj.source is None and isinstance(
                index, ConstantVariable) and isinstance(index.value, (int, slice)) and \
                not holds_symbol(index.value) and not self.concrete:
            if isinstance(index.value, slice):  # `lst[1:3] = ...`: its items, in place
                value = self.unpack(value)
            try:
                obj.items[index.value] = value
            except (IndexError, ValueError) as e:  # what the real list raises
                raise Raised(ConstantVariable(e)) from None
            return
        if type(obj) in (ListVariable, OutsideListVariable) and obj.source is not None and \
                isinstance(index, ConstantVariable) and type(index.value) is int and \
                not self.concrete and self._store_outside_list_item(obj, index.value, value):
            return
        if isinstance(obj, DictVariable) and obj.source is None and isinstance(
                index, ConstantVariable):
            _refuse_python_index(index.value)
            obj.items[index.value] = value
            return
        if isinstance(obj, OutsideOrderedDictVariable) and not self.concrete:
            from .calls import edit_ordered_dict

            edit_ordered_dict(self, obj, "__setitem__", [index, value], {})
            return
        if self.concrete:
            obj.value[index.value] = value.value
            return
        if isinstance(obj, ConstantVariable) and type(obj.value) is dict:
            self._store_outside_item(obj, index, value, obj.value)
            return
        real = self.builder.container_objects.get(id(obj))
        if type(obj) is DictVariable and real is not None and real[0] is obj and \
                type(real[1]) is dict:  # a dict read from the frame, its keys guarded
            self._store_outside_item(obj, index, value, real[1])
            return
        raise Unsupported("item assignment into an object from outside the graph")

    def _store_outside_list_item(self, obj: ListVariable, index: int,
                                 value: Variable) -> bool:
        """`lst[i] = value` of a list from outside the graph (its length and items read and
        guarded): set in the variable's items, and the list's items set on the real list
        after the graph (`lst[:] = [...]`), as its other edits are (after what the graph
        appended to it). False (the caller refuses it) where no guard reaches the list;
        refused where another variable of the frame holds it (it would keep the old
        items)."""
        from .objects import holds_real

        items = obj.items  # (read and guarded now, for a list from outside read lazily)
        known = self.builder.container_objects.get(id(obj))
        if known is None or known[0] is not obj or type(known[1]) is not list:
            return False
        if holds_real(self, known[1], obj):
            raise Unsupported("item assignment into a list from outside the graph that "
                              "another variable of the frame holds")
        try:
            items[index] = value
        except IndexError as e:  # what the real list raises
            raise Raised(ConstantVariable(e)) from None
        self.builder.store_list(known[1], obj)
        return True

    def _store_outside_item(self, obj: Variable, index: Variable, value: Variable,
                            real: dict) -> None:
        """`d[key] = value` of a dict from outside the graph (a memo table such as
        `kl_divergence`'s), of a constant key: set on the real dict after the graph, as an
        attribute assignment is (a dict variable read from the frame holds it from now
        on). Refused (a graph break) where the graph could read the dict again through
        another variable (a local holds it) and would miss the item."""
        try:
            key = self.as_python(index)
            if isinstance(key, SymInt):  # a dynamic size as the key: this value (guarded)
                key = int(key)
            hash(key)
        except (Unsupported, TypeError):
            raise Unsupported("item assignment into a dict from outside the graph of a key "
                              "that is not a constant") from None
        if not _constant_key(key) or holds_symbol(key):
            raise Unsupported("item assignment into a dict from outside the graph of a key "
                              "that is not a constant")
        target = obj.source if isinstance(obj, DictVariable) else self.guard_root(obj)
        if target is None:
            raise Unsupported("item assignment into a dict no guard reaches")
        from .objects import holds_real

        if holds_real(self, real, obj):
            raise Unsupported("item assignment into a dict from outside the graph that a "
                              "variable of the frame still holds")
        if isinstance(obj, DictVariable):
            obj.items[key] = value
        self.builder.store_item(real, key, value, target)

    def DELETE_SUBSCR(self, inst):  # noqa: N802
        index = self.pop()
        obj = self.pop()
        if self.concrete:
            del obj.value[index.value]
            return
        if type(obj) in (ListVariable, DictVariable) and obj.source is None and \
                isinstance(index, ConstantVariable) and not holds_symbol(index.value) and \
                not isinstance(index.value, Tensor):
            try:  # a list or dict made in the graph: its items, as the real one would
                del obj.items[index.value]
            except (IndexError, KeyError, TypeError) as e:
                raise Raised(ConstantVariable(e)) from None
            return
        raise Unsupported("deleting an item of an object from outside the graph")

    def apply(self, fn, args: tuple) -> Variable:
        """Apply a Python operator or builtin to variables."""
        if any(isinstance(a, TensorVariable) for a in args):
            return self.builder.call("call_function", fn, tuple(args), {})
        if args and isinstance(args[0], (DequeVariable, OutsideOrderedDictVariable)) and \
                fn in _IN_PLACE_OPERATORS:
            # (`window += [x]`, `table |= d` change the real container: run for real)
            raise Unsupported(f"an in-place operator on a {args[0].python_type().__name__} "
                              "from outside the graph")
        if fn in (operator.add, operator.iadd) and not self.concrete:
            joined = self._concatenate(fn, *args)
            if joined is not None:
                return joined
        if fn in (operator.mul, operator.imul) and not self.concrete:
            repeated = self._repeat(fn, *args)
            if repeated is not None:
                return repeated
        if not self.concrete:
            for a in args:
                if isinstance(a, ConstantVariable) and _python_operators(type(a.value)):
                    # Its result may depend on state no guard covers: run it for real.
                    raise Unsupported(f"an operator written in Python on "
                                      f"{type(a.value).__name__}")
        if all(isinstance(a, ConstantVariable) for a in args):
            values = [a.value for a in args]
            if not self.concrete and any(isinstance(v, Tensor) for v in values):
                raise Unsupported("operation on a tensor that is not a graph input")
            self.guard_contents(args)
            return ConstantVariable(self._operate(fn, values))
        if len(args) == 2 and any(isinstance(a, ObjectVariable) for a in args):
            from .objects import compare  # an object made in the graph: its own methods

            compared = compare(self, fn, *args)
            if compared is not None:
                return compared
        values = [self.as_python(a) for a in args]
        self.guard_contents(args)
        return self.from_python(self._operate(fn, values))

    def _operate(self, fn, values: list):
        """`fn(*values)` on Python values. What it raises while translating is the
        program's exception (`1 / 0`, `"a" + 1`), which a handler may catch; where a dynamic
        size or float takes part, the operation may only be unsupported on the symbol: a
        graph break, where the real values answer."""
        if self.concrete:
            return fn(*values)
        try:
            return fn(*values)
        except Exception as e:  # noqa: BLE001 - any exception the real operation raises
            if type(e).__module__.startswith("fusegrad"):
                raise  # the compiler's own (a graph break, a data-dependent UserError)
            if holds_symbol(values):
                raise Unsupported(f"{getattr(fn, '__name__', fn)} on a dynamic value raised "
                                  f"{type(e).__name__}") from None
            raise Raised(ConstantVariable(e)) from None

    def _concatenate(self, fn, a: Variable, b: Variable) -> Variable | None:
        """`a + b` (`a += b`) of two lists or two plain tuples of variables (`parts + [b]`
        with tensors in them; one side may be a constant tuple such as `()`, or a real
        list, whose items are read and guarded), or None where that is not the case."""
        if fn is operator.iadd and isinstance(a, OutsideListVariable) and \
                isinstance(b, (ListVariable, TupleVariable)):
            from .calls import _list_method

            _list_method(self, a, "extend", [b], {})  # `lst += items` extends it in place
            return a
        # (`lst += [t]` of a real list changes it in place: not a copy of its items)
        a = a if fn is operator.iadd else self._as_sequence(a, b)
        b = self._as_sequence(b, a)
        if type(a) is not type(b) or type(a) not in (ListVariable, TupleVariable) or \
                a.cls is not None or b.cls is not None:
            return None
        if fn is operator.iadd and type(a) is ListVariable:
            if a.source is not None:
                raise Unsupported("+= on a list from outside the graph")
            a.items.extend(b.items)  # in place, seen wherever the list is referenced
            return a
        return type(a)(a.items + b.items)

    def _repeat(self, fn, a: Variable, b: Variable) -> Variable | None:
        """`a * n` (`a *= n`, `n * a`) of a list or plain tuple of variables and a constant
        int: the same variables repeated (`[h0] * layers` holds one tensor `layers` times),
        or None where that is not the case."""
        if isinstance(a, ConstantVariable) and fn is operator.mul:
            a, b = b, a
        if type(a) not in (ListVariable, TupleVariable, OutsideListVariable) or \
                a.cls is not None or not isinstance(b, ConstantVariable) or \
                type(b.value) not in (int, bool):
            return None
        if fn is operator.imul and isinstance(a, ListVariable):
            if a.source is not None:
                raise Unsupported("*= on a list from outside the graph")
            a.items = a.items * b.value  # in place, seen wherever the list is referenced
            return a
        kind = TupleVariable if type(a) is TupleVariable else ListVariable
        return kind(a.items * b.value)

    def _as_sequence(self, v: Variable, other: Variable) -> Variable:
        """`v`, a constant tuple (or list) added to a tuple (list) variable, as a new
        variable of its items (guarded); any other `v` as it is."""
        kind = {TupleVariable: tuple, ListVariable: list}.get(type(other))
        if isinstance(v, OutsideListVariable) and kind is list and other.cls is None:
            return ListVariable(list(v.items))  # (its length and items read and guarded)
        if not isinstance(v, ConstantVariable) or kind is None or type(v.value) is not kind or \
                getattr(other, "cls", None) is not None or self.concrete:
            return v
        return (TupleVariable if kind is tuple else ListVariable)(self.unpack(v))

    def guard_contents(self, args, consume: bool = False) -> None:
        """Guard the contents of real mutable containers and arrays among `args`, whose
        values a result computed now depends on (`consume`: the computation iterates over
        them, which an iterator cannot be: a graph break)."""
        if self.concrete:
            return
        for a in args:
            if not isinstance(a, ConstantVariable):
                continue
            value = a.value
            if _is_plain_data(value) or isinstance(value, (Tensor, range, type)):
                continue
            if consume and hasattr(type(value), "__next__"):
                raise Unsupported("iterating over an iterator from outside the graph")
            if isinstance(value, _MUTABLE_CONTAINERS) or (
                    consume and hasattr(type(value), "__iter__")):
                src = self.guard_root(a)
                if src is not None:
                    self.builder.guards.contents(src, value)

    # ---------------------------------------------------------------- stack

    def POP_TOP(self, inst):  # noqa: N802
        self.pop()

    def COPY(self, inst):  # noqa: N802
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):  # noqa: N802
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    def PUSH_NULL(self, inst):  # noqa: N802
        self.push(NullVariable())

    def RETURN_VALUE(self, inst):  # noqa: N802
        raise Return(self.pop())

    # ---------------------------------------------------------------- control flow

    def truth(self, v: Variable) -> bool:
        """Python truth of a variable; a tensor's truth is data-dependent."""
        if isinstance(v, (TensorVariable, TruthVariable)):
            raise Unsupported("a branch on a tensor's value (data-dependent control flow)",
                              reason=reasons.TENSOR_BRANCH)
        if isinstance(v, ConstantVariable):
            if not self.concrete and isinstance(v.value, Tensor):
                raise Unsupported("a branch on a tensor's value")
            result = bool(v.value)
            cls = type(v.value)
            if not self.concrete and not _is_plain_data(v.value) and (
                    hasattr(cls, "__len__") or hasattr(cls, "__bool__")):
                src = self.guard_root(v)
                if src is not None:  # a container's emptiness can change between calls
                    self.builder.guards.add(f"bool({src}) is {result}")
            return result
        if isinstance(v, (TupleVariable, DictVariable, SetVariable)):
            return bool(v.items)
        if isinstance(v, ObjectVariable):  # a dict subclass's emptiness
            from .objects import truth

            return truth(v)
        return True

    def _pop_jump(self, inst, when: bool):
        v = self.stack[-1]
        if isinstance(v, (TensorVariable, TruthVariable)) and self.tensor_assert(inst, v):
            self.pop()
            return
        taken = self.branch_truth(v) == when
        self.pop()
        if taken:
            self.jump_to(inst.argval)

    def branch_truth(self, v: Variable) -> bool:
        """The truth a conditional jump takes of `v`. Dynamo counts no graph break at a
        branch on a tensor in the compiled frame itself (it ends the graph there, resuming
        in either branch's function), only one inside an inlined call (the caller breaks at
        the call)."""
        try:
            return self.truth(v)
        except Unsupported as e:
            if self.parent is None and isinstance(v, (TensorVariable, TruthVariable)):
                e.counted = False
            raise

    def POP_JUMP_FORWARD_IF_FALSE(self, inst):  # noqa: N802
        self._pop_jump(inst, False)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst):  # noqa: N802
        self._pop_jump(inst, True)

    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE
    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE

    def _pop_jump_none(self, inst, when_none: bool):
        v = self.pop()
        is_none = isinstance(v, ConstantVariable) and v.value is None
        if is_none == when_none:
            self.jump_to(inst.argval)

    def POP_JUMP_FORWARD_IF_NONE(self, inst):  # noqa: N802
        self._pop_jump_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst):  # noqa: N802
        self._pop_jump_none(inst, False)

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_FALSE_OR_POP(self, inst):  # noqa: N802
        if not self.branch_truth(self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst):  # noqa: N802
        if self.branch_truth(self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_FORWARD(self, inst):  # noqa: N802
        self.jump_to(inst.argval)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def GET_ITER(self, inst):  # noqa: N802
        self.push(self.iterator_of(self.pop()))

    def iterator_of(self, v: Variable) -> Variable:
        """`iter(v)` while translating."""
        if isinstance(v, (IteratorVariable, LazyIteratorVariable)):  # its own iterator
            return v
        if isinstance(v, ConstantVariable) and self.concrete:
            return ConstantVariable(iter(v.value))
        if isinstance(v, OutsideOrderedDictVariable) or isinstance(v, DictViewVariable) and \
                isinstance(v.dict_var, OutsideOrderedDictVariable):
            (v if isinstance(v, OutsideOrderedDictVariable) else v.dict_var).iterated = True
        if isinstance(v, (DictVariable, SetVariable, DictViewVariable)):
            # Iterating a dict or set that the loop body resizes raises, as in Python.
            container, kind = (v.dict_var, v.kind) if isinstance(v, DictViewVariable) else (
                v, "keys" if isinstance(v, DictVariable) else "set")
            return IteratorVariable(self.unpack(v), watch=(container, len(container.items), kind))
        if isinstance(v, DequeVariable):  # (an edit of the deque while it is iterated raises)
            v.iterated = True
            return IteratorVariable(v.items)
        if type(v) is ListVariable:
            # A list's iterator reads the list as it is at each step: items appended after
            # `iter(lst)` (a generator expression made before `lst.append`) are seen.
            it = IteratorVariable(())
            it.items = v.items
            return it
        return IteratorVariable(self.unpack(v))

    def FOR_ITER(self, inst):  # noqa: N802
        it = self.stack[-1]
        if isinstance(it, (ConstantVariable, OutsideIteratorVariable)) and not self.concrete:
            # A real iterator (a comprehension's argument on 3.11): next() would consume it.
            raise Unsupported("iterating over an iterator from outside the graph")
        if isinstance(it, ConstantVariable):  # concrete mode
            try:
                self.push(ConstantVariable(next(it.value)))
            except StopIteration:
                self.pop()
                self.jump_to(self._loop_exit(inst))
            return
        if isinstance(it, LazyIteratorVariable):  # its next item is made now
            item = self.next_item(it)
            if item is not None:
                self.push(item)
            else:
                exit_offset = self._loop_exit(inst)
                self.pop()
                self.jump_to(exit_offset)
            return
        if it.watch is not None and len(it.watch[0].items) != it.watch[1]:
            what = "Set" if it.watch[2] == "set" else "dictionary"
            raise Raised(ConstantVariable(RuntimeError(
                f"{what} changed size during iteration")))
        if it.index < len(it.items):
            self.push(it.items[it.index])
            it.index += 1
        else:
            exit_offset = self._loop_exit(inst)
            self.pop()
            self.jump_to(exit_offset)

    def _loop_exit(self, inst) -> int:
        # 3.12+ jump to END_FOR, but an exhausted iterator skips it (3.12's END_FOR would pop
        # twice); 3.13 also skips the POP_TOP after it (END_FOR pops one value there).
        k = self.index_of[inst.argval]
        if self.insts[k].opname != "END_FOR":
            return inst.argval
        k += 1
        if PY313:
            if self.insts[k].opname != "POP_TOP":
                raise Unsupported("a loop whose END_FOR is not followed by POP_TOP")
            k += 1
        return self.insts[k].offset

    # ---------------------------------------------------------------- calls

    def KW_NAMES(self, inst):  # noqa: N802
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst):  # noqa: N802
        args = self.popn(inst.arg)
        if NULL_AFTER_CALLABLE:  # 3.13: callable, then self or NULL
            self_or_null = self.pop()
            fn = self.pop()
            if not isinstance(self_or_null, NullVariable):
                args = [self_or_null] + args
        else:  # 3.11/3.12: NULL or a method, then the callable or self
            fn = self.pop()
            below = self.pop()
            if not isinstance(below, NullVariable):  # a method: self comes first
                args = [fn] + args
                fn = below
        kw_names, self.kw_names = self.kw_names, ()
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[:len(args) - len(kw_names)]
        else:
            kwargs = {}
        self.push(self.call(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):  # noqa: N802
        kwargs = self.pop() if inst.arg & 1 else DictVariable({})
        args = self.pop()
        if NULL_AFTER_CALLABLE:  # 3.13: callable, NULL (unused), args, kwargs
            self.pop()
            fn = self.pop()
        else:
            fn = self.pop()
            if isinstance(self.stack[-1] if self.stack else None, NullVariable):
                self.pop()
        if self.concrete:
            self.push(self.call(fn, self.unpack(args), {
                k: ConstantVariable(v) for k, v in (kwargs.value if isinstance(
                    kwargs, ConstantVariable) else {}).items()}))
            return
        if not isinstance(kwargs, DictVariable):
            raise Unsupported(f"** of a {type(kwargs).__name__}")
        self.push(self.call(fn, self.unpack(args), dict(kwargs.items)))

    def MAKE_FUNCTION(self, inst):  # noqa: N802
        flags = self.function_attribute_flags() if PY313 else inst.arg
        code = self.pop()
        closure = self.pop() if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        del annotations
        cells = None
        if closure is not None:
            items = closure.value if isinstance(closure, ConstantVariable) else closure.items
            if self.concrete:
                items = [ConstantVariable(c) for c in items] if isinstance(
                    closure, ConstantVariable) else items
            cells = self.closure_cells(list(items))
            if cells is None:  # shares cells the frame may still rebind
                self.push(NestedFunctionVariable(code.value, items, defaults, kwdefaults,
                                                 self.f_globals))
                return
        if not self.concrete and any(_variable_defaults(self, v)
                                     for v in (defaults, kwdefaults)):
            # A real function would keep this capture's objects as its defaults (a list
            # made here, a dynamic size's example value) in every later call the graph
            # serves: a variable, inlined where it is called, whose defaults are variables.
            self.push(NestedFunctionVariable(code.value, list(cells or ()), defaults,
                                             kwdefaults, self.f_globals))
            return
        fn = types.FunctionType(code.value, self.f_globals, code.value.co_name,
                                self.as_python(defaults) if defaults else None, cells)
        if kwdefaults is not None:
            fn.__kwdefaults__ = self.as_python(kwdefaults)
        if not self.concrete:
            self.builder.fresh_functions.append(fn)
        self.push(ConstantVariable(fn))

    def LOAD_CLOSURE_CELL(self, inst):  # pragma: no cover - 3.11 uses LOAD_CLOSURE
        raise Unsupported("closure cell")

    def call(self, fn: Variable, args: list, kwargs: dict) -> Variable:
        """Call `fn` with variables: record, inline, evaluate, or raise Unsupported."""
        from .calls import call_variable

        return call_variable(self, fn, list(args), kwargs)

    # ---------------------------------------------------------------- conversions

    def as_python(self, v: Variable):
        """The Python value of a variable made only of constants."""
        if isinstance(v, ConstantVariable):
            return v.value
        if isinstance(v, DequeVariable):
            return collections.deque((self.as_python(i) for i in v.items), v.maxlen)
        if isinstance(v, ListVariable):
            return [self.as_python(i) for i in v.items]
        if isinstance(v, DictViewVariable):  # a real view (`d.keys() == {"a"}` is a set test)
            if v.kind == "keys":  # (the values may be tensors)
                return dict.fromkeys(v.dict_var.items).keys()
            return getattr(self.as_python(v.dict_var), v.kind)()
        if isinstance(v, TupleVariable) and is_plain_namedtuple(v.cls):
            return v.cls(*(self.as_python(i) for i in v.items))  # its class's str, methods
        if isinstance(v, TupleVariable):
            return tuple(self.as_python(i) for i in v.items)
        if isinstance(v, DefaultDictVariable):
            if not isinstance(v.factory, ConstantVariable):
                raise Unsupported("a defaultdict whose factory was made in the graph, read "
                                  "as a Python value")
            return collections.defaultdict(v.factory.value, ((k, self.as_python(i))
                                                             for k, i in v.items.items()))
        if isinstance(v, DictVariable):
            return v.python_type()((k, self.as_python(i)) for k, i in v.items.items())
        if isinstance(v, SliceVariable):
            return slice(self.as_python(v.start), self.as_python(v.stop),
                         self.as_python(v.step))
        if isinstance(v, SetVariable):
            return {self.as_python(i) for i in v.items.values()}
        raise Unsupported(f"a {type(v).__name__} used as a Python value")

    def from_python(self, value) -> Variable:
        """A variable for a Python value computed during translation. A mutable container or
        a one-shot iterator becomes a variable of its own: as a constant it would be one
        object that every call of the compiled code shares (and has used up)."""
        kind = type(value)
        if kind is list:
            return ListVariable([self.from_python(v) for v in value])
        if kind is tuple:
            return TupleVariable([self.from_python(v) for v in value])
        if kind is dict:
            return DictVariable({k: self.from_python(v) for k, v in value.items()})
        if kind in _ONE_SHOT_ITERATORS:
            try:
                items = list(value)
            except Exception as e:  # noqa: BLE001 - `zip(a, b, strict=True)` raises as it
                # is iterated, not where it was made: run it for real
                if type(e).__module__.startswith("fusegrad"):
                    raise  # the compiler's own
                raise Unsupported(f"iterating {kind.__name__} raised {type(e).__name__}") \
                    from None
            return IteratorVariable([self.from_python(v) for v in items])
        return ConstantVariable(value)
