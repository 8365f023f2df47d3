"""The wrappers that put the public surface behind the `__torch_function__` protocol.

`wrap_namespace` (each public namespace, once built) and `wrap_tensor` (Tensor's methods,
operators and properties) replace functions by wrappers generated for their parameter
lists; the protocol they call into (`_slow`, the `_fast` classes) is `_torch_function`.
Which names are routed and how PyTorch reports them are flags of the surface tables
(`ops/surface.py`'s `PROTOCOL`, `ops/spellings.py`'s `OPERATOR_REPORTS`), read once here.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import types

import numpy as np

from . import _torch_function, _type_names
from ._dtype import dtype as _dtype_cls
from ._metadata import copy_metadata
from ._recorded_calls import make_matrix_operator, make_operator
from ._tensor import Tensor
from ._torch_function import (
    _OPERATOR,
    _PYTHON_LEVEL,
    CurrentTensorAttribute,
    _fast,
    _slow,
    parameters,
)
from ._type_names import python_type_name
from .ops import deferred
from .ops import surface as _surface
from .ops.spellings import ALIASES, OPERATOR_REPORTS


def _wrap_function(fn, label: str, flags: int = 0, module: str | None = None,
                   name: str | None = None, qualname: str | None = None,
                   method: str | None = None):
    """`fn` behind the protocol check, named `module`, `name` and `qualname` (by default
    `fn`'s). The wrapper's `_torch_function_info` is [the object handlers receive as `func`
    (bound by the caller once it exists), fn, the name in error messages, flags]. `method`:
    the attribute name of a Tensor method.

    Which wrapper fits `fn` (`_plan`) is decided on its first call: `import fusegrad` wraps
    some 750 functions, and most programs call a few dozen of them."""
    info = [None, fn, label, flags]
    namespace = {"fn": fn, "info": info, "__name__": module or fn.__module__,
                 "_shape_": None, "_specialise_": _specialise, "_method_": method}
    wrapper = namespace["_self_"] = types.FunctionType(_FIRST_CALL, namespace,
                                                       name or fn.__name__)
    _copy_metadata(wrapper, fn, info, qualname)
    return wrapper


def _plan(namespace: dict) -> tuple:
    """The shape of the wrapper whose globals are `namespace` (made by `_wrap_function`),
    with the globals that shape reads filled in: for a Tensor method (`_method_` names it),
    the exact wrapper where its parameters allow (`_method_shape`); else a prefix wrapper of
    the function's own positional slots (the usual case), or the packing one (`*args,
    **kwargs` frames)."""
    fn, info = namespace["fn"], namespace["info"]
    method = namespace.get("_method_")
    shape = None if method is None or info[3] & _PYTHON_LEVEL else _method_shape(method, fn)
    if shape is not None:
        for key, value in _EXACT_GLOBALS.items():
            namespace.setdefault(key, value)
        binary, keywords = shape
        path = getattr(fn, "plain_path", None) if binary and not keywords else None
        if path is None:
            return ("exact", binary, keywords)
        guard, expression, names = path
        namespace.update(names)
        return ("exact", binary, keywords, guard, expression)
    slots = _positional_slots(fn)
    for key, value in (_PACKING_GLOBALS if slots is None else _PREFIX_GLOBALS).items():
        namespace.setdefault(key, value)
    if slots is None:
        return ("packing",)
    namespace["fn0"] = _without_out_guard(fn)
    strict = _tensor_slots(namespace, slots)
    if strict:  # (a shape of its own: the other functions' wrappers stay as they were)
        namespace["Tensor"] = Tensor
        return ("prefix", slots, _refused_slots(fn, info[2], info[3]), strict)
    return ("prefix", slots, _refused_slots(fn, info[2], info[3]))


def _packing_source() -> str:
    """The source of the wrapper of a function that no prefix wrapper fits: `*args,
    **kwargs`."""
    return """def wrapper(*args, **kwargs):
    for a in args:
        if a.__class__ not in fast:
            if a.__class__ is tuple or a.__class__ is list:
                for b in a:
                    if b.__class__ not in fast:
                        return _slow(info, args, kwargs)
            else:
                return _slow(info, args, kwargs)
    if kwargs:
        for a in kwargs.values():
            if a.__class__ not in fast:
                return _slow(info, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if (renamed := _retry(info, kwargs, len(args), e)) is None:
                _refuse(info, args, kwargs, e)
                raise
        return fn(*args, **renamed)
    try:
        return fn(*args)
    except Exception as e:
        _refuse(info, args, None, e)
        raise
"""


def _copy_metadata(wrapper, fn, info: list, qualname: str | None = None) -> None:
    """`functools.update_wrapper(wrapper, fn)` and the protocol's `_torch_function_info`."""
    copy_metadata(wrapper, fn, {"_torch_function_info": info}, qualname)


def _is_wrapped(obj) -> bool:
    return hasattr(obj, "_torch_function_info")


def implementation(obj):
    """The function behind `obj`'s protocol wrapper (`obj` itself when it has none): what
    the public layer attached, so `Tensor.arctan2` and `Tensor.atan2` are one function
    beneath their wrappers."""
    info = getattr(obj, "_torch_function_info", None)
    return obj if info is None else info[1]


def wrap_namespace(namespace: dict, label: str, skip: frozenset = frozenset(),
                   python_level: bool | frozenset = False) -> None:
    """Put every public function of `namespace` (a module's globals) behind the protocol,
    except the names in `skip` and helpers imported from dispatch or the registry. `label` is
    PyTorch's module name used in error messages (`torch`, `torch.nn.functional`).
    `python_level`: True, or the names, of the functions PyTorch writes in Python (their
    arguments reach handlers normalised, and their errors read "no implementation found");
    a name in `C_LEVEL` is not, even when `python_level` is True."""
    done: dict = {}
    where_name = namespace.get("__name__")
    overridable = _OVERRIDABLE.setdefault(label, [])
    function = types.FunctionType
    for name, fn in list(namespace.items()):
        if fn.__class__ is not function or name[0] == "_" or name in skip:
            continue
        wrapper = done.get(fn)
        own = None  # an alias whose refusals name it (`arctan2(): argument ...`), as its
        if wrapper is not None and name in ALIASES and _surface.tensors_only(name, load=False):
            wrapper, own = None, name  # wrapper's `__name__` does
        if wrapper is None:
            if hasattr(fn, "_torch_function_info"):  # wrapped already
                continue
            routed = _ROUTED_MODULES.get(fn.__module__)
            if routed is None:
                module = fn.__module__ or ""
                routed = _ROUTED_MODULES[fn.__module__] = module.startswith("fusegrad") and \
                    not module.startswith(_INTERNAL_MODULES)
            if not routed:
                continue
            python = python_level is True and name not in C_LEVEL or (
                python_level is not True and python_level and name in python_level)
            where = TORCH_FUNCTIONAL if python and label == "torch" else label
            # Named where it is found, so pickle (by reference) finds this object.
            wrapper = _wrap_function(fn, f"{where}.{name}", _PYTHON_LEVEL if python else 0,
                                     where_name, own, name)
            done.setdefault(fn, wrapper)
            wrapper._torch_function_info[0] = wrapper
            overridable.append(wrapper)
        namespace[name] = wrapper


# The protocol's facts about public names, read from the surface tables (fusegrad.ops).
C_LEVEL = _surface.names_with(_surface.C_FUNCTIONAL)  # nn.functional's functions in C
# Top-level functions PyTorch writes in Python (`torch.functional`).
TORCH_FUNCTIONAL = "torch.functional"
TOP_LEVEL_PYTHON = _surface.names_with(_surface.PYTHON_FUNCTION)
# Tensor methods PyTorch writes in Python that hand their defaults to handlers by keyword.
TENSOR_PYTHON = _surface.names_with(_surface.PYTHON_METHOD)
# Top-level helpers PyTorch does not route (configuration, seeding, predicates on objects).
TOP_LEVEL_NOT_ROUTED = _surface.names_with(_surface.NOT_ROUTED)
_INTERNAL_MODULES = ("fusegrad._dispatch", "fusegrad.ops", "fusegrad.autograd",
                     "fusegrad._thread_state", "fusegrad._torch_function")
_OVERRIDABLE: dict = {}  # PyTorch module name -> the wrapped public functions
_ROUTED_MODULES: dict = {}  # module name -> whether its public functions are routed

# Tensor attributes PyTorch does not route through the protocol (object machinery, hashing,
# iteration, which calls the routed `dim`, `unbind` and `__len__`).
_TENSOR_SKIP = frozenset({
    "__init__", "__new__", "__init_subclass__", "__torch_function__", "__hash__", "__iter__",
    "__getattribute__", "__setattr__", "__delattr__", "__dir__", "__sizeof__", "__reduce__",
    "__subclasshook__", "__class__", "__getstate__", "__setstate__",
    "__array_wrap__", "as_subclass", "_make_subclass", "_make",
})
# Methods whose arguments other than self are never tensors (PyTorch's schemas): plain
# tensors keep Tensor's own function, at no cost; each protocol subclass is given the
# checking wrapper (as for properties), and Tensor itself while a mode is active.
SELF_ONLY = _surface.names_with(_surface.SELF_ONLY)
_TENSOR_NAMES = {"__pow__": "pow"}  # PyTorch's `Tensor.__pow__` is named `pow`
# Python's binary operators (`__add__`, `__radd__`, `__iadd__` share the core `add`).
_BINARY_OPERATORS = frozenset({
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
    "lshift", "rshift", "eq", "ne", "lt", "le", "gt", "ge"})


# Their dunder names: `__add__`, the reflected `__radd__` and the in-place `__iadd__`.
_OPERATOR_NAMES = frozenset(f"__{prefix}{core}__" for core in _BINARY_OPERATORS
                            for prefix in ("", "r", "i"))


def _is_operator(name: str) -> bool:
    return name in _OPERATOR_NAMES


def _wrap_property(name: str, prop: property) -> property:
    """The property a protocol subclass gets in place of Tensor's `prop`: plain tensors keep
    Tensor's own property (no cost), and handlers receive `Tensor.<name>.__get__`."""
    fget, fset = prop.fget, prop.fset
    fast = _fast
    get_info = [CurrentTensorAttribute(name, "__get__"), fget,
                f"torch.Tensor.{name}.__get__", 0]
    set_info = [CurrentTensorAttribute(name, "__set__"), fset,
                f"torch.Tensor.{name}.__set__", 0]

    def getter(self):
        if self.__class__ in fast:
            return fget(self)
        return _slow(get_info, (self,), {})

    functools.update_wrapper(getter, fget)
    setter = None
    if fset is not None:
        def setter(self, value):
            if self.__class__ in fast and value.__class__ in fast:
                return fset(self, value)
            return _slow(set_info, (self, value), {})

        functools.update_wrapper(setter, fset)
    getter._torch_function_info = get_info
    return property(getter, setter, prop.fdel, prop.__doc__)


# Tensor's own properties and self-only methods, and the checking forms protocol subclasses
# (and Tensor, while a mode is active) get instead. Most programs never need the checking
# forms, so they are made when first needed (`_subclass_attributes`), not by `wrap_tensor`.
_SUBCLASS_PROPERTIES: dict = {}  # name -> the wrapped property protocol subclasses get
_RAW_PROPERTIES: dict = {}  # name -> Tensor's own property
_SUBCLASS_METHODS: dict = {}  # name -> the wrapper of a self-only method
_RAW_METHODS: dict = {}  # name -> Tensor's own self-only method


def _subclass_attributes() -> None:
    """Make the wrapped properties and self-only methods not made yet."""
    if len(_SUBCLASS_PROPERTIES) < len(_RAW_PROPERTIES):
        for name, prop in list(_RAW_PROPERTIES.items()):
            if name not in _SUBCLASS_PROPERTIES:
                _SUBCLASS_PROPERTIES.setdefault(name, _wrap_property(name, prop))
    if len(_SUBCLASS_METHODS) < len(_RAW_METHODS):
        for name, fn in list(_RAW_METHODS.items()):
            if name not in _SUBCLASS_METHODS:
                wrapper = _method_wrapper(name, fn)
                # Handlers get Tensor's own function, which stays in place on Tensor.
                wrapper._torch_function_info[0] = CurrentTensorAttribute(name)
                _SUBCLASS_METHODS.setdefault(name, wrapper)


def install_on_subclass(cls: type) -> None:
    """Give protocol subclass `cls` the wrapped properties and self-only methods it does not
    define itself (nor inherit from a class between it and Tensor)."""
    _subclass_attributes()
    for table in (_SUBCLASS_PROPERTIES, _SUBCLASS_METHODS):
        for name, wrapped in table.items():
            for klass in cls.__mro__:
                if klass is Tensor:
                    setattr(cls, name, wrapped)
                    break
                if name in klass.__dict__:
                    break


def set_tensor_attributes(wrapped: bool) -> None:
    """Tensor's own attributes (no mode active) or the checking ones (a mode is active)."""
    _subclass_attributes()
    for name in _SUBCLASS_PROPERTIES:
        setattr(Tensor, name, (_SUBCLASS_PROPERTIES if wrapped else _RAW_PROPERTIES)[name])
    for name in _SUBCLASS_METHODS:
        setattr(Tensor, name, (_SUBCLASS_METHODS if wrapped else _RAW_METHODS)[name])


def _exact_source(binary: bool, keywords: tuple, guard: str | None = None,
                  expression: str | None = None) -> str:
    """The source of an exact wrapper. `guard` and `expression`, a binary method's
    `plain_path` (Python source over `self`, `other` and the names it brings), are
    evaluated in the wrapper's own frame once `self` is plain: where `guard` holds, the
    method's result is `expression`, so the common call (`a * b`, `a[0]`) reaches dispatch
    without a second Python frame. A guard holds only for arguments the protocol lets
    through (its classes are in `_fast`)."""
    params = ["self", "other"] if binary else ["self"]
    kw = "".join(f", {k}=_MISSING" for k in keywords)
    star = ", *" if keywords else ""
    passed = ", ".join(params)
    given = "".join(f"\n    if {k} is not _MISSING:\n        kwargs[{k!r}] = {k}"
                    for k in keywords)
    # An index tuple `x[0, 1]`, a list operand: plain items pass.
    items = ("if other.__class__ is tuple or other.__class__ is list:\n"
             "        for b in other:\n            if b.__class__ not in fast:\n"
             "                break\n        else:\n            return fn(self, other)")
    if guard is not None:
        return (f"def wrapper(self, other):\n    if self.__class__ in fast:\n"
                f"        if {guard}:\n            return {expression}\n"
                f"        if other.__class__ in fast:\n            return fn(self, other)\n"
                f"        {items.replace(chr(10), chr(10) + '    ')}\n"
                f"    return _slow(info, (self, other), {{}})\n")
    check = "self.__class__ in fast" + (" and other.__class__ in fast" if binary else "")
    check += "".join(f" and {k} is _MISSING" for k in keywords)
    fallback = ""
    if binary and not keywords:
        fallback = "\n    if self.__class__ in fast:\n        " + items.replace(
            "\n", "\n    ")
    return (f"def wrapper({passed}{star}{kw}):\n"
            f"    if {check}:\n        return fn({passed})"
            f"{fallback}\n    kwargs = {{}}{given}\n"
            f"    return _slow(info, ({passed},), kwargs)\n")


_CODE: dict = {}  # wrapper shape -> (function code, defaults, keyword defaults)


def _first_call(*args, **kwargs):
    # The code every wrapper starts with; its globals are the wrapper's namespace, which
    # names the wrapper itself (`_self_`). Every wrapper of a shape shares one code object,
    # compiled on the first call of a wrapper of that shape: compiling the twenty-odd shapes
    # the public surface has took longer than the rest of `import fusegrad`'s wrapping.
    _specialise_(_self_)  # noqa: F821
    return _self_(*args, **kwargs)  # noqa: F821


_FIRST_CALL = _first_call.__code__.replace(co_name="wrapper")
_type_names.PASSING_CODES.add(_FIRST_CALL)


def _specialise(wrapper) -> None:
    """Give `wrapper` its shape's compiled code (compiling the shape if no wrapper has yet):
    the function object stays the same, so every name bound to it gets the compiled form."""
    namespace = wrapper.__globals__
    key = namespace["_shape_"]
    if key is None:
        key = namespace["_shape_"] = _plan(namespace)
    made = _CODE.get(key)
    if made is None:
        scratch = dict(namespace)
        source = _SOURCES[key[0]](*key[1:])
        exec(compile(source, "<torch function wrapper>", "exec"), scratch)  # noqa: S102
        f = scratch["wrapper"]
        made = _CODE[key] = (f.__code__, f.__defaults__, f.__kwdefaults__)
    code, defaults, kwdefaults = made
    wrapper.__defaults__ = defaults
    wrapper.__kwdefaults__ = kwdefaults
    wrapper.__code__ = code


_MISSING = object()
_VARARG_SLOTS = 4  # positional slots a `*shape` method gets before packing the rest


def _plain_items(seq) -> bool:
    """Whether every item of list/tuple `seq` is of a class in `_fast`."""
    fast = _fast
    for b in seq:
        if b.__class__ not in fast:
            return False
    return True


def _positional_slots(fn) -> int | None:
    """How many positional slots a prefix wrapper of `fn` needs (None: not applicable)."""
    raw = fn  # `inspect.unwrap`, without its cycle check: a thousand calls at import
    while (inner := getattr(raw, "__wrapped__", None)) is not None:
        raw = inner
    code = getattr(raw, "__code__", None)
    if code is None or hasattr(raw, "__signature__"):
        return None
    n = code.co_argcount
    if code.co_flags & inspect.CO_VARARGS:
        n += _VARARG_SLOTS
    return n if 1 <= n <= 12 else None


def _without_out_guard(fn):
    """What a call without keywords may run: the function inside `fn`'s `out=` guard when
    `out` is keyword-only there (so such a call cannot pass it), else `fn` itself."""
    if not getattr(fn, "handles_out", False):
        return fn
    inner = fn.__wrapped__
    code = getattr(inner, "__code__", None)
    if code is None or "out" in code.co_varnames[:code.co_argcount]:
        return fn
    return inner


def _prefix_source(slots: int, refused: tuple = (), strict: tuple = ()) -> str:
    """The source of a prefix wrapper of `slots` slots: positional-only arguments, the rest
    packed. A call passing plain arguments by position reaches `fn` (or `fn0`, the same
    function without its `out=` guard) with the same arguments and no packing, and a call
    passing keywords checks their values and passes them on to `fn`; arguments reach
    handlers exactly as given. A list or tuple in a slot of
    `refused` (a parameter PyTorch's parser takes as a Tensor only) takes the slow path,
    whose check refuses it as PyTorch does; so does anything but a tensor in a slot of
    `strict` (an operand with no overload for a number: `OpDef.tensors_only`), and any call
    with keywords when there are such slots (a keyword may name one)."""
    names = [f"a{i}" for i in range(slots)]
    listed = ", ".join(names)
    lines = [f"def wrapper({', '.join(n + '=_MISSING' for n in names)}, /, *rest, **kwargs):",
             "    if rest:",
             f"        return _slow(info, _given(({listed},)) + rest, kwargs)",
             "    if kwargs:"]
    if strict:
        lines.append(f"        return _slow(info, _given(({listed},)), kwargs)")
    else:
        lines += ["        for v in kwargs.values():",
                  "            if v.__class__ not in fast:",
                  f"                return _slow(info, _given(({listed},)), kwargs)"]

    def call(count: int, indent: str) -> list:
        given = ", ".join(names[:count])
        sep = ", " if given else ""
        # A keyword only NumPy spells (`axis=`) fails binding, and is renamed and retried
        # after the `except`; any other error is looked at again (`refuse`: an argument
        # PyTorch's parser refuses is its TypeError). The successful call pays for neither.
        return [f"{indent}if kwargs:", f"{indent}    try:",
                f"{indent}        return fn({given}{sep}**kwargs)",
                f"{indent}    except Exception as e:",
                f"{indent}        if (renamed := _retry(info, kwargs, {count}, e)) is None:",
                f"{indent}            _refuse(info, ({given}{',' if count == 1 else ''}), "
                f"kwargs, e)",
                f"{indent}            raise",
                f"{indent}    return fn({given}{sep}**renamed)",
                f"{indent}try:", f"{indent}    return fn0({given})",
                f"{indent}except Exception as e:",
                f"{indent}    _refuse(info, ({given}{',' if count == 1 else ''}), None, e)",
                f"{indent}    raise"]

    # A present argument costs one class test; the first empty slot ends the call.
    tail: list = []
    for i in range(slots - 1, -1, -1):
        name = names[i]
        indent = "    " * (i + 1)
        body = tail if tail else call(slots, indent + "    ")
        listed_ok = "" if i in refused else (
            f" or (({name}.__class__ is tuple or {name}.__class__ is list) and "
            f"_plain_items({name}))")
        if i in strict:
            listed_ok = f" and isinstance({name}, Tensor)"
        tail = ([f"{indent}if {name}.__class__ in fast{listed_ok}:"] + body
                + [f"{indent}elif {name} is _MISSING:"] + call(i, indent + "    "))
    lines += tail + [f"    return _slow(info, _given(({listed},)), kwargs)"]
    return "\n".join(lines) + "\n"


# Wrapper shape kind -> the function writing a shape's source from the rest of its key.
_SOURCES = {"exact": _exact_source, "prefix": _prefix_source, "packing": _packing_source}


# The NumPy names PyTorch's C-level argument parser takes for four parameters (its functions
# written in Python take only their own names).
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input",
                "x1": "input", "x2": "other"}
def _numpy_keywords(info: list, kwargs: dict, given: int) -> dict | None:
    """`kwargs` with NumPy's names (`axis`, `keepdims`, ...) given PyTorch's (`dim`,
    `keepdim`), for a C-level function (`info[3]`) that has the PyTorch name, lacks the NumPy
    one and was not passed both (by keyword, or among the `given` positional arguments);
    None when nothing is renamed. Called only once a call with `kwargs` raised TypeError: a
    renamed keyword could not have bound, so the error came from binding, before the
    function's body ran, and the call may be made again."""
    if info[3] & _PYTHON_LEVEL or not kwargs.keys() & _NUMPY_NAMES.keys():
        return None
    found = parameters(info[1])
    if found is None:
        return None
    names, positional = found
    filled = names[:min(given, positional)]
    renamed: dict = {}
    for key, value in kwargs.items():
        own = _NUMPY_NAMES.get(key)
        if own is not None and key not in names and own in names and own not in kwargs \
                and own not in filled:
            key = own
        renamed[key] = value
    return None if renamed.keys() == kwargs.keys() else renamed


def _retry(info: list, kwargs: dict, given: int, error: BaseException) -> dict | None:
    """The keywords to call again with after `error`: NumPy's names renamed where binding
    failed on one (`_numpy_keywords`), else None."""
    if not isinstance(error, TypeError):
        return None
    return _numpy_keywords(info, kwargs, given)


# ---------------------------------------------------------------- arguments PyTorch refuses
# PyTorch's C functions read their arguments with an argument parser that refuses anything
# but a tensor for a Tensor parameter (`exp(): argument 'input' (position 1) must be Tensor,
# not list`); fusegrad's functions run Python that fails on the first attribute it reads, or
# take a list or an array as NumPy would. Checking every call would cost the tensor path, so
# the check runs where a call already left it: after the call raised (`refuse`), or on the
# slow path that a NumPy array, or a list in a Tensor parameter, takes (`argument_error`).

# The parameter names PyTorch's schemas give tensors.
_TENSOR_PARAMETERS = frozenset({
    "input", "other", "index", "mask", "src", "source", "mat", "mat1", "mat2", "vec", "vec1",
    "vec2", "batch1", "batch2", "tensor", "tensor1", "tensor2", "weight", "bias", "target",
    "x1", "x2", "input1", "input2", "anchor", "positive", "negative", "query", "key",
    "exponent", "condition", "end", "logits", "A", "B", "LU"})
# Those where a list is never a valid argument (so a list there takes the slow path).
_LIST_REFUSING = frozenset({
    "input", "other", "index", "mask", "src", "source", "mat1", "mat2", "vec", "vec1", "vec2",
    "batch1", "batch2", "tensor1", "tensor2", "exponent", "end", "A", "B", "LU"})
_NUMBERS = (int, float, complex, np.generic)
_DIMS_PARAMETERS: dict = {}  # function -> `_dims_parameters(function)`


def _dims_parameters(fn) -> dict:
    """The parameters of `fn` (unwrapped) whose annotation declares ints, not tensors, though
    PyTorch's schemas give their name to tensors elsewhere: movedim's `source` is a dim (or
    dims), index_copy's a tensor. The names alone cannot tell them apart; the annotation
    (a string, under postponed evaluation) does. Name -> annotation."""
    found = _DIMS_PARAMETERS.get(fn)
    if found is None:
        raw = fn
        while (inner := getattr(raw, "__wrapped__", None)) is not None:
            raw = inner
        notes = getattr(raw, "__annotations__", None) or {}
        found = _DIMS_PARAMETERS[fn] = {
            name: note for name, note in notes.items() if name in _TENSOR_PARAMETERS and
            isinstance(note, str) and "int" in note and "Tensor" not in note}
    return found


def _int_like(v) -> bool:
    # (lists and tuples are other overloads' dims: `sum(x, (0, 1))`)
    return v is None or isinstance(v, (list, tuple, Tensor)) or hasattr(type(v), "__index__")


def _number_like(v) -> bool:
    return isinstance(v, (int, float, complex, np.generic, Tensor))


def _dtype_like(v) -> bool:
    return v is None or isinstance(v, (_dtype_cls, type))


def _ints_like(v) -> bool:
    return isinstance(v, (list, tuple, Tensor)) or hasattr(type(v), "__index__")


# Parameters of other types PyTorch's parser checks: name -> (its type's name in the
# message, the test of a value it accepts).
_TYPED_PARAMETERS = {
    "dtype": ("torch.dtype", _dtype_like), "alpha": ("Number", _number_like),
    "beta": ("Number", _number_like), "fill_value": ("Number", _number_like),
    **{name: ("tuple of ints", _ints_like) for name in ("shape", "shifts", "dims")},
    **{name: ("int", _int_like) for name in (
        "dim", "dim0", "dim1", "dim2", "start_dim", "end_dim", "k", "diagonal", "chunks",
        "offset", "n", "row", "col", "num_classes", "upscale_factor", "downscale_factor",
        "groups", "N")},
    **{name: ("bool", lambda v: v.__class__ is bool) for name in ("largest", "sorted")},
}
_DEFAULTS: dict = {}  # function -> {parameter name: default}


def _refused_slots(fn, label: str, flags: int) -> tuple:
    """The positional slots of `fn`'s prefix wrapper that hold a parameter PyTorch takes as
    a Tensor only (a C-level function's or method's)."""
    if flags & (_PYTHON_LEVEL | _OPERATOR) or not label.startswith("torch.") or \
            label.rpartition(".")[2][0] == "_":
        return ()
    # Read from the code object, as `_positional_slots` reads the slots (a signature per
    # function cost a tenth of `import fusegrad`).
    raw = fn
    while (inner := getattr(raw, "__wrapped__", None)) is not None:
        raw = inner
    code = raw.__code__
    if code.co_flags & inspect.CO_VARKEYWORDS:
        return ()
    names = code.co_varnames[:code.co_argcount]
    start = 1 if label.startswith("torch.Tensor.") else 0  # (self is a tensor)
    dims = _dims_parameters(fn)
    return tuple(i for i in range(start, len(names))
                 if names[i] in _LIST_REFUSING and names[i] not in dims)


def _tensors_only(label: str, load: bool = True) -> tuple:
    """(the operands PyTorch's parser takes as tensors only, by name, and whether `label`
    is a Tensor method) for a top-level function or Tensor method, from its op's
    `OpDef.tensors_only` (`ops.surface.tensors_only`); ((), False) for any other label.
    Without `load`, the operands are None for an op whose deferred module has not run."""
    found = _TENSORS_ONLY.get(label)
    if found is None:
        space, _, name = label.rpartition(".")
        method = space == "torch.Tensor"
        if not (method or space == "torch"):
            operands = ()
        else:
            operands = _surface.tensors_only(name, method, load)
            if operands is None:
                return None, method
        found = _TENSORS_ONLY[label] = (operands, method)
    return found


_TENSORS_ONLY: dict = {}  # label -> `_tensors_only(label)`
# The namespaces of the wrappers planned before their op's module ran (`_tensor_slots`).
_UNRESOLVED: list = []


def refused_operands(label: str, args: tuple, kwargs: dict | None):
    """PyTorch's parser's refusal of a non-tensor operand of the function `label` names
    (`OpDef.tensors_only`), or None: asked on the slow path before any override runs. An op
    whose deferred module has not run is not looked up here (the checks after the call's
    overrides ask for it)."""
    found = _TENSORS_ONLY.get(label)
    if found is None:
        found = _tensors_only(label, load=False)
    operands, method = found
    if not operands:
        return None
    return _tensors_only_error(label.rpartition(".")[2], operands, method, args, kwargs)


def _tensor_slots(namespace: dict, slots: int) -> tuple:
    """The positional slots of a prefix wrapper that must hold a tensor (`OpDef.
    tensors_only`), asked on its first call, of one with two slots or more (an op of one
    operand refuses a number by failing on it). The op of a deferred module that has not
    run is not looked up (that would run the modules before it too): until it has run,
    each slot whose parameter could be such an operand (`_maybe_operands`) takes the slow
    path for anything but a tensor, and the wrapper is planned again once a deferred module
    has run (`_plan_again`)."""
    info = namespace["info"]
    if slots < 2 or info[3] & (_PYTHON_LEVEL | _OPERATOR):
        return ()
    operands, method = _tensors_only(info[2], load=False)
    if operands is None:
        maybe = _maybe_operands(info[1], 1 if method else 0)
        if maybe:
            _UNRESOLVED.append(namespace)
        return tuple(i for i in maybe if i < slots)
    return tuple(range(1, len(operands))) if method else tuple(range(len(operands)))


# The parameter names an `OpDef.tensors_only` gives (PyTorch's, which the public functions'
# own parameters spell): the tensor parameters, and heaviside's `values`.
_OPERAND_NAMES = _TENSOR_PARAMETERS | {"values"}


def _positional_names(fn) -> tuple:
    """The names of the positional parameters of `fn` (unwrapped), () where it has no code."""
    raw = fn
    while (inner := getattr(raw, "__wrapped__", None)) is not None:
        raw = inner
    code = getattr(raw, "__code__", None)
    return () if code is None else code.co_varnames[:code.co_argcount]


def _maybe_operands(fn, start: int) -> tuple:
    """The positions (from `start`) of `fn`'s positional parameters that an op's
    `tensors_only` could name."""
    names = _positional_names(fn)
    dims = _dims_parameters(fn)
    return tuple(i for i in range(start, len(names))
                 if names[i] in _OPERAND_NAMES and names[i] not in dims)


def _plan_again() -> None:
    """After a deferred op module ran: the wrappers planned without knowing their op start
    again from their first call, so the next call plans each with its op's facts."""
    for namespace in _UNRESOLVED:
        namespace["_shape_"] = None
        wrapper = namespace["_self_"]
        wrapper.__code__ = _FIRST_CALL
        wrapper.__defaults__ = wrapper.__kwdefaults__ = None
    _UNRESOLVED.clear()


deferred.after_execute(_plan_again)


def _maybe_refused(fn, method: bool, args: tuple, kwargs: dict | None) -> bool:
    """Whether this call gives anything but a tensor for a parameter of `fn` that an op's
    `tensors_only` could name."""
    names = _positional_names(fn)
    for i in _maybe_operands(fn, 1 if method else 0):
        if i < len(args):
            value = args[i]
        elif kwargs and names[i] in kwargs:
            value = kwargs[names[i]]
        else:
            continue
        if not isinstance(value, Tensor) and not _overridable(value):
            return True
    return False


def _tensors_only_error(name: str, operands: tuple, method: bool, args: tuple,
                        kwargs: dict | None):
    """PyTorch's parser's refusal of anything but a tensor for one of `operands` (a method's
    first is `self`, its `args[0]`), named by position when passed by position, else by
    keyword."""
    for i, param in enumerate(operands):
        if method and i == 0:
            continue
        if i < len(args):
            value, position = args[i], i if method else i + 1
        elif kwargs and param in kwargs:
            value, position = kwargs[param], None
        else:
            continue
        if not isinstance(value, Tensor) and not _overridable(value):
            return _not_tensor(name, param, position, value)
    return None


def _defaults(fn) -> dict:
    found = _DEFAULTS.get(fn)
    if found is None:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = ()
        found = _DEFAULTS[fn] = {p.name: p.default for p in params}
    return found


def _overridable(value) -> bool:
    cls = type(value)
    return isinstance(value, Tensor) or hasattr(cls, "__torch_function__") or \
        hasattr(cls, "__fusegrad_function__")


def _not_tensor(fname: str, param: str, position: int | None, value,
                expected: str = "Tensor") -> TypeError:
    where = "" if position is None else f" (position {position})"
    return TypeError(f"{fname}(): argument '{param}'{where} must be {expected}, not "
                     f"{python_type_name(value)}")


def argument_error(info: list, args: tuple, kwargs: dict | None, before: bool = False):
    """The error PyTorch's argument parser raises for this call of the public function
    `info` describes (a non-tensor given for a Tensor parameter), or None. `before`: the
    call has not run (the slow path), so only the values fusegrad would take silently (a
    list, a tuple, a NumPy array) are looked at."""
    public, fn, label, flags = info
    space, _, name = label.rpartition(".")
    if flags & _OPERATOR or name[0] == "_":  # (`x[i]` and the operators: Python's protocols)
        return None
    if flags & _PYTHON_LEVEL:
        if before or space != "torch.nn.functional":
            return None
        return _functional_error(fn, name, args, kwargs)
    if space == "torch.nn.functional":  # (a builtin named otherwise: `log_sigmoid`)
        name = _surface.FUNCTIONAL_PARSER_NAMES.get(name, name).split()[0]
    elif space == "torch.linalg":  # (`linalg_inv(): argument 'A' ...`)
        name = "linalg_" + name
    operands, method = _tensors_only(label, load=False)
    if operands is None:  # (its op's module has not run: looked up only for a call that
        # gives something other than a tensor for a parameter it could refuse that for)
        operands, method = _tensors_only(label) if _maybe_refused(fn, method, args, kwargs) \
            else ((), method)
    if operands:
        error = _tensors_only_error(name, operands, method, args, kwargs)
        if error is not None:
            return error
    found = parameters(fn)
    if found is None:
        found = _leading_parameters(fn)
        if found is None:
            return None
    names, positional = found
    defaults = None
    dims = _dims_parameters(fn)
    for i, param in enumerate(names):
        if i < len(args) and i < positional:
            value, position = args[i], i + (0 if method else 1)
        elif kwargs and param in kwargs:
            value, position = kwargs[param], None
        else:
            continue
        if not before and param in _TYPED_PARAMETERS:
            expected, accepts = _TYPED_PARAMETERS[param]
            if value is None:  # (None where the parameter's default is None is no error)
                if defaults is None:
                    defaults = _defaults(fn)
                if defaults.get(param, inspect.Parameter.empty) is None:
                    continue
                if expected == "int" and \
                        defaults.get(param, inspect.Parameter.empty) is not None:
                    # (an int parameter with an int default takes no None: `topk(x, 2,
                    # dim=None)`)
                    return _not_tensor(name, param, position, value, expected)
            if not accepts(value) and not _overridable(value):
                return _not_tensor(name, param, position, value, expected)
            continue
        if param in dims:
            # (a plain `int` refuses what has no `__index__`, a bool too, as PyTorch's parser)
            if not before and dims[param] == "int" and not _overridable(value) and \
                    (value.__class__ is bool or not hasattr(type(value), "__index__")):
                return _not_tensor(name, param, position, value, "int")
            continue
        if (method and i == 0) or param not in _TENSOR_PARAMETERS or _overridable(value):
            continue
        if before:
            if value.__class__ in (list, tuple, np.ndarray) and param in _LIST_REFUSING:
                return _not_tensor(name, param, position, value)
            continue
        if value is None:  # refused where the parameter is no optional one
            if param not in _LIST_REFUSING:
                continue
            if defaults is None:
                defaults = _defaults(fn)
            if defaults.get(param, inspect.Parameter.empty) is None:
                continue
        elif isinstance(value, _NUMBERS) and i > 0:
            continue  # a number stands for a tensor past the first argument
        return _not_tensor(name, param, position, value)
    return None


def _leading_parameters(fn) -> tuple | None:
    """(the named parameters before `*args`, their count) of a function taking `*args` and
    `**kwargs` (which reads the rest with PyTorch's overloads, `_functions._args.parsed`):
    its `input` is still checked as a C-level function's (`topk(): argument 'input'
    (position 1) must be Tensor, not list`). None for any other function."""
    raw = fn
    while (inner := getattr(raw, "__wrapped__", None)) is not None:
        raw = inner
    code = getattr(raw, "__code__", None)
    if code is None or not code.co_flags & inspect.CO_VARARGS or not code.co_argcount:
        return None
    return code.co_varnames[:code.co_argcount], code.co_argcount


def _functional_error(fn, name: str, args: tuple, kwargs: dict | None):
    """`argument_error` for a function of nn.functional PyTorch writes in Python: what its
    code does first with a non-tensor first argument (or target), as `ops.surface`'s tables
    say."""
    if name in _surface.FUNCTIONAL_OWN_ERRORS:
        return None
    found = parameters(fn)
    if found is None or not found[0]:
        return None
    names = found[0]
    if names[0] not in _TENSOR_PARAMETERS:  # (a helper: `assert_int_or_pair(arg, ...)`)
        return None
    spec = _surface.FUNCTIONAL_PARSER_NAMES.get(name, name).split()
    # fusegrad's parameter -> (the C function's parameter, its position)
    where = {names[0]: ("input", 1)}
    if "target" in names[:2]:
        where["target"] = ("target", 2)
    for item in spec[1:]:
        ours, _, theirs = item.partition("=")
        param, _, position = theirs.partition(":")
        where[ours] = (param, int(position))
    attribute = _surface.FUNCTIONAL_INPUT_ATTRIBUTES.get(name)
    for i, ours in enumerate(names[:2]):
        if ours not in where:
            continue
        if i < len(args):
            value = args[i]
        elif kwargs and ours in kwargs:
            value = kwargs[ours]
        else:
            continue
        if _overridable(value):
            continue
        if attribute is not None:
            if hasattr(value, attribute):
                return None
            return AttributeError(f"'{type(value).__name__}' object has no attribute "
                                  f"'{attribute}'")
        param, position = where[ours]
        return _not_tensor(spec[0], param, position, value)
    return None


# A parser message naming an argument's position: `cat(): argument 'tensors' (position 1)
# must be tuple of Tensors, not int`.
_POSITIONED = re.compile(r"(?P<head>\w+\(\): argument '(?P<param>\w+)') \(position \d+\)"
                         r"(?P<rest> must be .*)", re.S)


def refuse(info: list, args: tuple, kwargs: dict | None,
           raised: BaseException | None = None, depth: int = 1) -> None:
    """Called when a call raised (`raised`, where known, `depth` frames below the caller's):
    PyTorch's error instead, where its argument parser (or its Python) would have refused
    an argument before anything ran."""
    if raised is not None and kwargs and raised.__class__ is TypeError:
        error = _unexpected_keyword_error(info, raised, args, kwargs)
        if error is not None:
            raise error from None
    if raised is not None and raised.__class__ is TypeError and (
            "argument '" in (text := str(raised)) or "invalid combination" in text):
        # fusegrad's own wording of PyTorch's parser (`masked_fill() received ...`), which
        # names an argument's position; PyTorch's names none for an argument a C-level
        # function was given by keyword (`cat(tensors=5)`; its functions written in Python
        # pass theirs on by position)
        found = _POSITIONED.match(text) if kwargs and not info[3] & _PYTHON_LEVEL else None
        if found is not None and found["param"] in kwargs:
            raise TypeError(f"{found['head']}{found['rest']}") from None
        return
    if raised is not None and not isinstance(raised, (TypeError, AttributeError)) and args \
            and isinstance(args[0], _NUMBERS):
        # A leading number that reached a kernel's own error: a Scalar overload took it
        # (`pow(True, t)`, `remainder(3, t)`), so the kernel's error is PyTorch's too.
        return
    try:
        error = argument_error(info, args, kwargs)
        if error is None and raised is not None:
            error = _missing_error(info, raised, depth)
    except Exception:  # the check itself must never hide the call's own error
        return
    if error is not None:
        raise error from None


# Public name -> `parse(input, args, kwargs, method)`, PyTorch's parser over the function's
# overloads (raising its TypeError for arguments no overload takes), registered by the
# functions whose overloads are written down (`_functions.reduction`): a call naming a
# keyword none of them has gets its message rather than Python's.
KEYWORD_PARSERS: dict = {}


# The files of the frames that call a public function's own code: its protocol wrapper
# (the module's and the generated ones) and the `out=` guard (`_out.py`).
_CALLING_FILES = frozenset((__file__, "<torch function wrapper>",
                            __file__.rpartition(os.sep)[0] + os.sep + "_out.py"))


def _unexpected_keyword_error(info: list, raised: BaseException, args: tuple, kwargs: dict):
    """PyTorch's parser's error for a keyword no overload of a function in
    `KEYWORD_PARSERS` has (Python's `sum() got an unexpected keyword argument 'foo'`, raised
    where the call bound its arguments: in a frame that calls the function), or None."""
    space, _, name = info[2].rpartition(".")
    parse = KEYWORD_PARSERS.get(name)
    if parse is None or space not in ("torch", "torch.Tensor") or \
            not (args or "input" in kwargs) or \
            not str(raised).startswith(f"{name}() got an unexpected keyword argument"):
        return None
    tb = raised.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_code.co_filename not in _CALLING_FILES:
        return None
    try:
        if args:
            parse(args[0], args[1:], kwargs, space == "torch.Tensor")
        else:  # (`input` among the keywords)
            parse(None, (), kwargs, False)
    except TypeError as error:
        return error
    return None


def _missing_error(info: list, raised: BaseException, depth: int):
    """PyTorch's parser's wording of Python's error for required arguments not given to a
    C-level function (`mm() missing 1 required positional arguments: "mat2"`), or None."""
    tb = raised.__traceback__
    for _ in range(depth - 1):
        tb = tb.tb_next if tb is not None else None
    if raised.__class__ is not TypeError or info[3] & (_PYTHON_LEVEL | _OPERATOR) or \
            tb is None or tb.tb_next is not None:  # (raised inside the function: its own)
        return None
    text = str(raised)
    head, found, rest = text.partition(" required positional argument")
    if not found or " missing " not in head:
        return None
    fname, _, count = head.partition(" missing ")
    names = [part.split("'")[1] for part in rest.split(": ", 1)[1].split(", ")
             for part in part.split(" and ") if part.count("'") >= 2]
    # PyTorch's plural is the other way round: "1 ... arguments", "2 ... argument".
    noun = "arguments" if count == "1" else "argument"
    listed = ", ".join(f'"{n}"' for n in names)
    return TypeError(f"{fname} missing {count} required positional {noun}: {listed}")


def _given(values: tuple) -> tuple:
    """The positional arguments actually passed (the slots before the first empty one)."""
    for i, v in enumerate(values):
        if v is _MISSING:
            return values[:i]
    return values


# The globals each shape of wrapper reads besides its own (`fn`, `info`, ...), added to a
# wrapper's namespace when its shape is planned (`_plan`).
_PREFIX_GLOBALS = {"fast": _fast, "_slow": _slow, "_given": _given,
                   "_plain_items": _plain_items, "_MISSING": _MISSING,
                   "_retry": _retry, "_refuse": refuse}
_PACKING_GLOBALS = {"fast": _fast, "_slow": _slow, "_retry": _retry, "_refuse": refuse}
_EXACT_GLOBALS = {"fast": _fast, "_slow": _slow, "_MISSING": _MISSING}


def _method_shape(name: str, fn) -> tuple | None:
    """(binary, keyword-only names) when method `fn` can take an exact wrapper, else None.
    Read from the code object (a signature per method would cost milliseconds at import)."""
    if hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return None
    code = fn.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or fn.__defaults__:
        return None
    n, k = code.co_argcount, code.co_kwonlyargcount
    keywords = code.co_varnames[n:n + k]
    if k and len(fn.__kwdefaults__ or ()) != k:  # a required keyword-only parameter
        return None
    if n == 1:
        return False, keywords
    if n == 2 and (_is_operator(name) or name == "__getitem__") and code.co_posonlyargcount < 2:
        return True, ()  # the interpreter passes an operator's operand alone
    return None


def _method_wrapper(name: str, value):
    """The protocol wrapper of Tensor method `value`, attached as `name`."""
    flags = _OPERATOR if _is_operator(name) else 0
    if name in TENSOR_PYTHON:
        flags |= _PYTHON_LEVEL
    label = f"torch.Tensor.{name}"
    public_name = _TENSOR_NAMES.get(name, name)
    qualname = f"Tensor.{name}"
    wrapper = _wrap_function(value, label, flags, None, public_name, qualname, name)
    op = getattr(value, "binary_op", None)
    matrix_op = getattr(value, "matrix_op", None) if name == "__matmul__" else None
    if op is not None and op.inplace or op is None and matrix_op is None or \
            flags & _PYTHON_LEVEL or _method_shape(name, value) is None:
        return wrapper
    info = wrapper._torch_function_info
    if op is not None:
        # A binary operator (`__mul__`): dispatch's `call2` over `op` written into the
        # method, the wrapper serving every call but a plain tensor's with a plain tensor or
        # a Python number (one Python frame less on the commonest op of all).
        wrapper = make_operator(op, wrapper, _fast)
    else:
        wrapper = make_matrix_operator(matrix_op, wrapper, _fast)  # `a @ b` of matrices
    wrapper.__name__ = public_name
    _copy_metadata(wrapper, value, info, qualname)
    return wrapper


def wrap_tensor() -> None:
    """Put Tensor's methods and operators behind the protocol, and note the properties and
    self-only methods whose checking forms protocol subclasses get (idempotent: an attribute
    attached later is wrapped by calling this again)."""
    made: dict = {}
    for name, value in list(Tensor.__dict__.items()):
        if name in _TENSOR_SKIP or (name.startswith("_") and not name.startswith("__")):
            continue
        if isinstance(value, property):
            if name not in _RAW_PROPERTIES:  # its wrapped form: `_subclass_attributes`
                _RAW_PROPERTIES[name] = value
                _TENSOR_PROPERTIES.append(value)
            continue
        if not isinstance(value, types.FunctionType) or _is_wrapped(value) or \
                name in _RAW_METHODS:
            continue
        if value.__name__ == "<lambda>":  # handlers read `func.__name__`
            value.__name__ = "positive" if name == "__pos__" else name
            value.__qualname__ = f"Tensor.{value.__name__}"
        if name in SELF_ONLY:  # Tensor keeps its own; the wrapper: `_subclass_attributes`
            _RAW_METHODS[name] = value
            _TENSOR_METHODS.append(value)
            continue
        wrapper = made[name] = _method_wrapper(name, value)
        setattr(Tensor, name, wrapper)
    attributes = Tensor.__dict__
    for name, wrapper in made.items():
        report = attributes.get(OPERATOR_REPORTS.get(name, name), wrapper)
        wrapper._torch_function_info[0] = report
        if report is wrapper:
            _TENSOR_METHODS.append(wrapper)


_TENSOR_METHODS: list = []
_TENSOR_PROPERTIES: list = []


def overridable_functions() -> dict:
    """Namespace -> list of the public objects the protocol routes."""
    out: dict = {}
    for label, fns in _OVERRIDABLE.items():
        module = sys.modules.get(label.replace("torch", "fusegrad", 1))
        out.setdefault(module if module is not None else label, []).extend(fns)
    out[Tensor] = list(_TENSOR_METHODS) + [p.__get__ for p in _TENSOR_PROPERTIES]
    return out


def is_tensor_method_or_property(func) -> bool:
    """Whether `func` is a routed Tensor method or property getter."""
    return func in _TENSOR_METHODS or any(func == p.__get__ for p in _TENSOR_PROPERTIES)


_torch_function.use_wrappers(sys.modules[__name__])
