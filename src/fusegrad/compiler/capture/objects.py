"""Instances of plain Python classes made inside captured code, followed without a break.

`Out(loss, logits)` of a dataclass, `Normal(mu, sigma)` of a distribution, HF's
`ModelOutput` (an OrderedDict subclass), an object of any plain class: the call becomes an
`ObjectVariable` whose instance attributes (and, for a dict subclass, items) are variables,
as Dynamo's UserDefinedObjectVariable. `__init__` (and the `__post_init__` it calls),
methods, properties, `__call__`, `__getitem__`/`__setitem__` and a Python
`__setattr__`/`__delattr__` (a frozen dataclass's) are inlined; writes change the variable,
so the graph sees every value the program's object holds. When the object outlives the
graph (returned, stored on an outside object, live at a break) it is rebuilt as a real
instance holding those values, once per call (`rebuild`; its `__init__` does not run again).

An object of such a class that the frame reads (one made before a graph break, on the stack
or in a local at the resume point; one passed in) is followed the same way
(`follow_outside`; not a dict subclass, nor a class with `__slots__` and a `__getattr__`):
guarded by its type and by the attributes the graph reads (a slot's presence by `hasattr`),
not by its identity, so that a new object of the same kind
reuses the graph, as Dynamo guards a user object. Its attribute writes are replayed on the
real object after the graph (as object's `__setattr__`: its class's own ran in the graph),
and the real object (read from its source) is what the frame holds afterwards.

`__slots__` of an object made here are items like its other attributes; a Python
`__getattr__` answers missing attributes (inlined); `__dict__` is a dict variable sharing the
object's attribute table; rich comparisons, `min`/`max`, `str`/`repr`/`format` go through
the class's Python methods.

A module made in the frame (`nn.ReLU()(x)`, `nn.PairwiseDistance()` handed to a loss, a
user's `nn.Module` subclass) is such an object too, as Dynamo traces a module it sees made:
`Module.__init__` fills its tables (dict, OrderedDict and set variables), the class's
`__setattr__`/`__getattr__` are inlined, and a call runs its `forward` directly while its hook
tables are empty and no global hook exists (guarded). A `Parameter(...)` made in `__init__`
(`nn.Linear(4, 4)`) is a break, as in Dynamo: the module is then made for real. A module
made either way and live at a break is followed after it by its type and attributes
(`_MADE_LAYERS`), its parameters read as inputs through `_parameters`, since it is new on
every call. So is a module from outside that a frame sees several instances of at one
source (`varied`: a method compiled once and called on each layer of a model, the `self` of
a module's forward called for real after a break), with the modules reached through it:
the instances share graphs, and what the graph read of them (an int attribute, a child's
type, the names its listings gave) is guarded.

Only classes whose instances are their `__dict__` or slots (and dict items) plus their
class's attributes are followed: written in Python over `object`, `dict` or `OrderedDict`,
no `__new__`/`__getattribute__` of their own, no `__del__` (the object made here is not the
program's), no truth or length of their own, no metaclass but `type`/`ABCMeta`. Anything
else, and anything the capture cannot follow on such an object (`id()`, object's `repr()`
naming its address, a missing attribute), is a graph break: the real object is made and
used there.
"""

from __future__ import annotations

import abc
import collections
import functools
import operator
import types
import weakref

from .guards import _is_plain_data
from .variables import (
    AttrDictVariable,
    BoundFunctionVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    MethodVariable,
    ObjectVariable,
    OutsideListVariable,
    PartialVariable,
    SuperVariable,
    TupleVariable,
    Unsupported,
    Variable,
    WeakRefVariable,
)

# Special methods whose own definition makes an instance more than its `__dict__`.
_OWN_BEHAVIOUR = ("__new__", "__getattribute__", "__del__")
# Special methods that decide an instance's truth: a module's hook object may define them in
# Python (a container of pruning methods, `PruningContainer`, has `__len__`); it is followed
# all the same (`constructible(cls, truth_ok=True)`), its truth a break (`truth`).
_TRUTH_METHODS = ("__bool__", "__len__")
# Special methods a class may define in Python (inlined on every attribute write or delete:
# a frozen dataclass's raise FrozenInstanceError).
_PYTHON_HOOKS = ("__setattr__", "__delattr__")
# Packages of fusegrad whose classes are user-level Python, followed like a user's.
FOLLOWED_PACKAGES = ("fusegrad.distributions", "fusegrad.nn.utils.prune",
                     "fusegrad.nn.utils.spectral_norm", "fusegrad.nn.utils.weight_norm",
                     "fusegrad.nn.utils.clip_grad")
_MISSING = object()


def _in_graph_error(reason: str) -> Unsupported:
    """The break at an attribute read or assignment that raises AttributeError for real,
    where Dynamo raises it inside its graph (a handler may catch it): inside a try block it
    resumes rather than giving the frame up (`in_graph_error`)."""
    error = Unsupported(reason)
    error.in_graph_error = True
    return error


def _is_heap_type(k: type) -> bool:
    """A class written in Python (not a builtin or extension type)."""
    return bool(k.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE


# Builtin bases an instance may have besides object: its dict part is a DictVariable.
_MAPPING_BASES = (dict, collections.OrderedDict)
# What a dict subclass must not define in Python: the translator reads its dict part
# directly for iteration, truth and len().
_MAPPING_PROTOCOL = ("__iter__", "__len__", "__bool__", "__missing__")


def _mapping_base(cls: type) -> type | None:
    """The builtin dict class `cls` derives from (dict or OrderedDict), or None."""
    return next((k for k in cls.__mro__ if k in _MAPPING_BASES), None)


def constructible(cls, truth_ok: bool = False, layer: bool = False) -> bool:
    """Whether calling `cls(...)` can be followed as an `ObjectVariable` (see the module);
    with `truth_ok`, also a class whose own Python `__bool__`/`__len__` decides its
    instances' truth (which `truth` then refuses to answer: a module's hook object, only
    ever called); with `layer`, also a module class (`nn.ReLU()` made in the frame: see
    `is_layer_class`)."""
    if not isinstance(cls, type) or type(cls) not in (type, abc.ABCMeta) or \
            not _is_heap_type(cls):  # (a builtin class itself: dict, object)
        return False
    if layer and is_layer_class(cls):
        # (a container layer's `__len__` decides its truth: followed, its truth a break)
        return _plain_layout(cls, truth_ok=True)
    module = getattr(cls, "__module__", "") or ""
    if module.startswith("fusegrad") and not module.startswith(FOLLOWED_PACKAGES):
        return False  # fusegrad's own objects (tensors, sizes, modules, generators)
    if not _plain_layout(cls, truth_ok):
        return False
    try:
        from ...nn import Module
    except ImportError:  # pragma: no cover - nn is always there
        return True
    return not issubclass(cls, Module)


def is_layer_class(cls) -> bool:
    """Whether `cls` is a module class (fusegrad's layers or a user's) whose new instances
    can be followed as objects: made in the frame, an instance is only its `__dict__` (the
    tables `Module.__init__` fills) until something registers a parameter or buffer, which
    the capture leaves to a break (`Parameter(...)`, as Dynamo does). Calling one runs its
    `forward` (`_call_layer`), as Dynamo traces a module it saw made."""
    module = _module_class()
    return isinstance(cls, type) and issubclass(cls, module) and cls is not module


@functools.cache
def _module_class() -> type:
    """`nn.Module` (imported on first use: nn imports the compiler's package)."""
    from ...nn import Module

    return Module


def _plain_layout(cls: type, truth_ok: bool) -> bool:
    """Whether instances of `cls` are their `__dict__` (or slots, and dict items) plus
    their class's attributes (see the module), their special methods written in Python."""
    if getattr(cls, "__abstractmethods__", None):
        return False  # instantiating it raises TypeError
    mapping = _mapping_base(cls)
    for k in cls.__mro__[:-1]:
        if k in _MAPPING_BASES:
            continue
        if not _is_heap_type(k) or any(name in vars(k) for name in _OWN_BEHAVIOUR) or any(
                not truth_ok and name in vars(k) or
                not isinstance(vars(k).get(name, _hook), types.FunctionType)
                for name in _TRUTH_METHODS) or any(
                not isinstance(vars(k).get(name, _hook), types.FunctionType)
                for name in _PYTHON_HOOKS) or mapping is not None and any(
                name in vars(k) for name in _MAPPING_PROTOCOL):
            return False
    if mapping is not None and any(not _is_heap_type(k) and k not in (mapping, dict, object)
                                   for k in cls.__mro__):
        return False  # another builtin base besides its dict
    return cls.__mro__[-1] is object


def keeps_plain(cls: type, decides_truth: bool = False) -> bool:
    """Whether `cls` still has none of the special methods that `constructible` refuses
    (`_OWN_BEHAVIOUR`, a dict subclass's `_MAPPING_PROTOCOL`), and still has (or still
    lacks, as `decides_truth` says) one deciding its instances' truth: a class may gain one
    after a graph followed its instances (`P.__bool__ = ...`, a `__getattribute__`)."""
    mapping = _mapping_base(cls) is not None
    for k in cls.__mro__[:-1]:
        if k in _MAPPING_BASES:
            continue
        names = vars(k)
        if any(n in names for n in _OWN_BEHAVIOUR) or mapping and any(
                n in names for n in _MAPPING_PROTOCOL):
            return False
    return _decides_truth(cls) == decides_truth


def _decides_truth(cls: type) -> bool:
    """Whether `cls` defines `__bool__` or `__len__` (other than the builtin dict's)."""
    return any(n in vars(k) for k in cls.__mro__[:-1] if k not in _MAPPING_BASES
               for n in _TRUTH_METHODS)


def guard_plain(guards, cls: type) -> None:
    """Guard `keeps_plain(cls)` (see there) for a graph that follows an instance of `cls`."""
    guards.add(f"{guards.ref(keeps_plain, 'keeps_plain')}({guards.ref(cls, 'type')}, "
               f"{_decides_truth(cls)})", first=True)


def _owner(cls: type, name: str, start: int = 0):
    """(the class in `cls.__mro__[start:]` that defines `name`, its raw value), or
    (None, _MISSING)."""
    for k in cls.__mro__[start:]:
        if name in vars(k):
            return k, vars(k)[name]
    return None, _MISSING


def _guard_class_attr(tr, cls: type, name: str, raw) -> None:
    """Guard that `cls` still resolves `name` to `raw` along its MRO (a class attribute may
    be reassigned, or one defined later may shadow it)."""
    guards = tr.builder.guards
    ref = guards.ref(cls, "type")
    lookup = (f"next((k.__dict__[{name!r}] for k in {ref}.__mro__ if {name!r} in k.__dict__)"
              f", {guards.ref(_MISSING, 'missing')})")
    guards.constant(lookup, raw)


def _instance_wins(cls: type, name: str) -> bool:
    """Whether `cls` leaves attribute `name` to its instances' `__dict__`: nothing along its
    MRO defines it as a data descriptor (a property added later would take over)."""
    raw = _owner(cls, name)[1]
    return raw is _MISSING or not _is_data_descriptor(raw)


def _guard_instance_wins(tr, cls: type, name: str) -> None:
    """Guard `_instance_wins(cls, name)`: an instance attribute read or written through
    the object's `__dict__` stays so while the class (its MRO, a base's attributes) may
    change between calls, as a property assigned to the class after the first call."""
    guard_instance_wins(tr.builder.guards, cls, name)


def guard_instance_wins(guards, cls: type, name: str) -> None:
    """See `_guard_instance_wins` (for a guard set)."""
    check = guards.ref(_instance_wins, "instance_wins")
    guards.add(f"{check}({guards.ref(cls, 'type')}, {name!r})", first=True)


def _is_slot(raw) -> bool:
    """A `__slots__` entry of a class (a member descriptor): an instance attribute stored
    outside `__dict__`, which the object variable holds among its items like the others."""
    return isinstance(raw, types.MemberDescriptorType)


def _own_getattr(tr, cls: type):
    """The class's Python `__getattr__` (guarded), called when an attribute is missing;
    None where it has none."""
    _, raw = _owner(cls, "__getattr__")
    _guard_class_attr(tr, cls, "__getattr__", raw)
    if raw is _MISSING:
        return None
    if not isinstance(raw, types.FunctionType):
        raise Unsupported(f"{cls.__name__}.__getattr__ is not a Python function")
    return raw


def _module_getattr():
    return _module_class().__getattr__


def _module_table_entry(obj: ObjectVariable, name: str) -> Variable | None:
    """What `Module.__getattr__` answers for `name` of a module from outside followed by
    its attributes (`follow_outside`): the entry of its parameters, buffers or children,
    each table read (and its keys guarded) through the object's source; None where none
    has it (an AttributeError). (Its Python reads `self.__dict__`, which such an object
    does not give.)"""
    for store in ("_parameters", "_buffers", "_modules"):
        if store not in obj.items:
            continue
        if isinstance(obj.items, _OutsideAttrs) and not dict.__contains__(obj.items, store):
            # The real table's one entry, read through its source (the key's presence
            # guarded): reading the whole table made every parameter an input, guarded.
            found = obj.items.table_entry(store, name)
            if found is _MISSING:
                continue
            return found
        table = obj.items[store]
        if not isinstance(table, DictVariable) or table.source is None:
            raise Unsupported(f"the {store} of a {obj.cls.__name__} that is not a dict")
        if name in table.items:
            return table.items[name]
    return None


def _has_instance_dict(cls: type) -> bool:
    """Whether instances of `cls` have a `__dict__` (not a class with only `__slots__`)."""
    return isinstance(_owner(cls, "__dict__")[1], types.GetSetDescriptorType)


def _is_data_descriptor(raw) -> bool:
    kind = type(raw)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def construct(tr, cls: type, args: list, kwargs: dict) -> Variable:
    """`cls(*args, **kwargs)`: a new object variable, its `__init__` inlined."""
    guard_plain(tr.builder.guards, cls)
    obj = ObjectVariable(cls, mapping=DictVariable({}) if _mapping_base(cls) else None)
    owner, init = _owner(cls, "__init__")
    _guard_class_attr(tr, cls, "__init__", init)
    result = _call_slot(tr, init, obj, args, kwargs, "__init__")
    if not (isinstance(result, ConstantVariable) and result.value is None):
        raise Unsupported(f"{cls.__name__}.__init__() returned a value (a TypeError)")
    return obj


def _call_slot(tr, raw, obj: ObjectVariable, args: list, kwargs: dict, name: str):
    """Call the raw class attribute `raw` (a method found on the class) with `obj` first."""
    from .calls import inline

    if isinstance(raw, types.FunctionType):
        return inline(tr, raw, [obj, *args], kwargs)
    if raw is object.__init__:
        if args or kwargs:  # object.__init__ takes no arguments: a TypeError
            raise Unsupported(f"{obj.cls.__name__}() takes no arguments")
        return ConstantVariable(None)
    if obj.mapping is not None and any(raw is k.__init__ for k in _MAPPING_BASES):
        if args or kwargs and isinstance(_owner(obj.cls, "__setitem__")[1],
                                         types.FunctionType):
            # Pairs or a mapping, or items an OrderedDict's __init__ would store through
            # the class's own __setitem__: made for real.
            raise Unsupported(f"{obj.cls.__name__}() of initial items")
        obj.mapping.items.update(kwargs)
        return ConstantVariable(None)
    raise Unsupported(f"{obj.cls.__name__}.{name} is not a Python function")


def new_object(tr, cls_var: Variable) -> Variable:
    """`object.__new__(cls)` (`self.__new__(type(self))` of `Distribution.expand`)."""
    cls = cls_var.value if isinstance(cls_var, ConstantVariable) else None
    if not constructible(cls) or _mapping_base(cls) is not None:
        raise Unsupported(f"object.__new__({getattr(cls, '__name__', cls)})")
    guard_plain(tr.builder.guards, cls)
    return ObjectVariable(cls)


def read_attr(tr, obj: ObjectVariable, name: str) -> Variable:
    """`obj.name`, in Python's order: a data descriptor of the class (a property), the
    instance's attribute, then the class's (a method binds to obj)."""
    cls = obj.cls
    if name == "__class__":
        return ConstantVariable(cls)
    if name == "__dict__":
        return attr_dict(obj)
    if name not in obj.items:
        stored = tr.builder.stored_class_attr(cls, name)
        if stored is not None:  # a class's attribute assigned earlier in this graph
            return stored
    _, raw = _owner(cls, name)
    if name in obj.items and not _is_data_descriptor(raw):
        _guard_instance_wins(tr, cls, name)  # (the instance's value, whatever the class's)
    else:
        _guard_class_attr(tr, cls, name, raw)
    if _is_slot(raw) and name in obj.items:
        return obj.items[name]
    if raw is not _MISSING and _is_data_descriptor(raw) and not _is_slot(raw):
        if _owner(cls, "__getattr__")[1] is not _MISSING:  # (called if the getter raises
            # AttributeError)
            raise Unsupported(f"the descriptor {cls.__name__}.{name} of a class with "
                              "__getattr__")
        if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):
            return tr.call(BoundFunctionVariable(raw.fget, obj), [], {})
        raise Unsupported(f"the descriptor {cls.__name__}.{name}")
    if name in obj.items and not _is_slot(raw):
        return obj.items[name]
    if raw is _MISSING or _is_slot(raw):
        # Missing: the class's `__getattr__` answers, else the real attribute read raises
        # AttributeError (a handler may catch it).
        hook = _own_getattr(tr, cls)
        if hook is not None and obj.source is not None and hook is _module_getattr():
            found = _module_table_entry(obj, name)
            if found is None:
                raise Unsupported(f"{cls.__name__} object has no attribute {name!r}")
            return found
        if hook is not None:
            return tr.call(BoundFunctionVariable(hook, obj), [ConstantVariable(name)], {})
        raise _in_graph_error(f"{cls.__name__} object has no attribute {name!r}")
    return _class_value(tr, obj, raw, name)


def attr_dict(obj: ObjectVariable) -> Variable:
    """`obj.__dict__` (`vars(obj)`): a dict variable holding the object's own attribute
    table, so that writes through either show through the other; after the graph it is
    the rebuilt object's `__dict__`. An object from outside (whose attributes are read one
    by one) breaks: the real one answers."""
    if obj.source is not None or any("__slots__" in vars(k) for k in obj.cls.__mro__) or \
            not isinstance(_owner(obj.cls, "__dict__")[1], types.GetSetDescriptorType):
        raise Unsupported(f"{obj.cls.__name__}.__dict__ of an object from outside the graph")
    table = AttrDictVariable({}, obj)
    table.items = obj.items
    return table


def text_of(tr, obj: ObjectVariable, kind: str, spec: str = "") -> Variable:
    """`str(obj)`, `repr(obj)` or `format(obj, spec)` (`kind`): the class's own Python
    method inlined (`__format__` of object's is `str()` for an empty spec, whose `__str__`
    is `repr()`); object's `repr` names the real object's address: a graph break."""
    name = {"str": "__str__", "repr": "__repr__", "format": "__format__"}[kind]
    _, raw = _owner(obj.cls, name)
    _guard_class_attr(tr, obj.cls, name, raw)
    if isinstance(raw, types.FunctionType):
        args = [ConstantVariable(spec)] if kind == "format" else []
        result = tr.call(BoundFunctionVariable(raw, obj), args, {})
        if not (isinstance(result, ConstantVariable) and type(result.value) is str):
            raise Unsupported(f"{obj.cls.__name__}.{name} returned a value that is not a "
                              "constant string")
        return result
    if raw is object.__format__ and spec == "":
        return text_of(tr, obj, "str")
    if raw is object.__str__:
        return text_of(tr, obj, "repr")
    raise Unsupported(f"{kind}() of a {obj.cls.__name__} object made in the graph")


def _class_value(tr, obj: ObjectVariable, raw, name: str) -> Variable:
    """A class attribute read through an instance made in the graph."""
    cls = obj.cls
    if isinstance(raw, types.FunctionType):
        return BoundFunctionVariable(raw, obj)
    if isinstance(raw, staticmethod):
        return ConstantVariable(raw.__func__)
    if isinstance(raw, classmethod):
        return ConstantVariable(types.MethodType(raw.__func__, cls))
    get = getattr(type(raw), "__get__", None)
    if isinstance(get, types.FunctionType):
        # A descriptor written in Python (`lazy_property`, which computes the value and
        # stores it on the instance): its __get__ is inlined.
        from .calls import inline

        return inline(tr, get, [ConstantVariable(raw), obj, ConstantVariable(cls)], {})
    if _is_plain_data(raw) or isinstance(raw, type):
        return ConstantVariable(raw)
    if get is not None:  # a builtin descriptor (a slot wrapper, a C function)
        if raw in _OBJECT_SLOTS or obj.mapping is not None and raw in _MAPPING_INITS:
            return PartialVariable(ConstantVariable(raw), [obj], {})
        if obj.mapping is not None and name in _DICT_METHODS and \
                any(vars(k).get(name) is raw for k in _MAPPING_BASES):
            # The dict part's own method (`self.keys()`, `super().__setitem__(k, v)`).
            return MethodVariable(obj.mapping, name)
        raise Unsupported(f"the class attribute {cls.__name__}.{name}")
    # An object the class holds (a dict of constraints, a constraint): read through the
    # class, whose attribute the guard above pins.
    return tr.builder.wrap(raw, f"{tr.builder.guards.ref(cls, 'type')}.{name}")


# object's own methods that an instance made in the graph may call (`super().__init__()`).
_OBJECT_SLOTS = (object.__init__, object.__setattr__, object.__getattribute__,
                 object.__delattr__)
_MAPPING_INITS = tuple(k.__init__ for k in _MAPPING_BASES)
# Methods of a dict subclass's dict part that the dict variable answers (see calls).
_DICT_METHODS = ("keys", "items", "values", "get", "__setitem__")


def _hook(self, *args):
    """Stands for a special method a class does not define (see `constructible`)."""


def _own_hook(tr, cls: type, name: str):
    """The Python `__setattr__`/`__delattr__` of `cls` (guarded), or None for object's."""
    _, raw = _owner(cls, name)
    _guard_class_attr(tr, cls, name, raw)
    return raw if isinstance(raw, types.FunctionType) else None


def store_attr(tr, obj: ObjectVariable, name: str, value: Variable) -> None:
    """`obj.name = value` (STORE_ATTR, `setattr`): the class's own `__setattr__` runs
    (inlined), else object's (`write_attr`)."""
    hook = _own_hook(tr, obj.cls, "__setattr__")
    if hook is not None and obj.source is not None and hook is _module_class().__setattr__:
        _write_layer_attr(tr, obj, name, value)
    elif hook is None:
        write_attr(tr, obj, name, value)
    else:
        tr.call(BoundFunctionVariable(hook, obj), [ConstantVariable(name), value], {})


def _write_layer_attr(tr, obj: ObjectVariable, name: str, value: Variable) -> None:
    """`layer.name = value` of a module from outside followed by its attributes (a counter
    `self.calls += 1`): what `Module.__setattr__` does for a plain value that names no
    parameter, buffer or child (their tables' keys are guarded), object's assignment,
    replayed on the real module after the graph. (Its Python reads `self.__dict__`, which
    such an object does not give.) A tensor the graph computed (or a plain tensor input) is
    such a value too, and the in-place result of a parameter or buffer stored back under its
    name (`self.steps += 1`) changes nothing; parameters and modules, which it registers,
    break."""
    from .variables import TensorVariable

    if isinstance(value, TensorVariable):
        entry = _module_table_entry(obj, name)
        if isinstance(entry, TensorVariable) and entry.node is not None and \
                value.node is not None and tr.builder.same_tensor(value.node, entry.node):
            return  # (the in-place op already changed the registered tensor)
        real = tr.builder.input_values.get(value.source) if value.source else None
        if entry is None and value.node is not None and (
                value.node.op != "placeholder" or type(real) is _tensor_class()):
            write_attr(tr, obj, name, value)
            return
    if not isinstance(value, ConstantVariable) or \
            isinstance(value.value, (_module_class(), _tensor_class())) or \
            _module_table_entry(obj, name) is not None:
        raise Unsupported(f"assignment to {obj.cls.__name__}.{name} that Module.__setattr__ "
                          "may register")
    write_attr(tr, obj, name, value)


def _tensor_class() -> type:
    from ..._tensor import Tensor

    return Tensor


def remove_attr(tr, obj: ObjectVariable, name: str) -> None:
    """`delattr(obj, name)`: the class's own `__delattr__` (inlined), else object's."""
    hook = _own_hook(tr, obj.cls, "__delattr__")
    if hook is None:
        delete_attr(tr, obj, name)
    else:
        tr.call(BoundFunctionVariable(hook, obj), [ConstantVariable(name)], {})


class _OutsideAttrs(dict):
    """The instance attributes of an object from outside (`follow_outside`), each read from
    the real object's `__dict__` (and guarded through its source) on first use; whether
    the object has one is guarded too."""

    def __init__(self, builder, real, source: str):
        super().__init__()
        self.builder = builder
        self.real = real
        self.source = source

    def _attr_source(self, name: str) -> str:
        if name.isidentifier():
            return f"{self.source}.{name}"
        return f"{self.source}.__dict__[{name!r}]"

    def _check_table(self) -> None:
        if self.builder.namespace_written(self.real):  # (`vars(obj)[k] = v` earlier)
            raise Unsupported("an attribute read after an item assignment into the "
                              "object's __dict__")

    def _slot(self, name: str):
        """The class's `__slots__` entry `name` (its type is guarded, so is the entry), or
        None where the attribute lives in `__dict__`."""
        raw = _owner(type(self.real), name)[1]
        return raw if _is_slot(raw) else None

    def __contains__(self, name) -> bool:
        self._check_table()
        if dict.__contains__(self, name):
            return True
        slot = self._slot(name)
        if slot is not None:  # set or not: `hasattr` (the class has no `__getattr__`)
            try:
                slot.__get__(self.real)
                present = True
            except AttributeError:
                present = False
            self.builder.guards.add(f"{'' if present else 'not '}hasattr({self.source}, "
                                    f"{name!r})")
            return present
        try:
            table = object.__getattribute__(self.real, "__dict__")
        except AttributeError:  # slots only: no instance attribute but the slots (the
            return False  # guarded type says so)
        present = name in table
        self.builder.guards.add(f"{name!r} {'in' if present else 'not in'} "
                                f"{self.source}.__dict__")
        return present

    def table_entry(self, store: str, name: str):
        """The entry `name` of the real object's table `store` (a module's `_parameters`,
        `_buffers` or `_modules`, a dict: guarded), wrapped through its source, its
        presence guarded; `_MISSING` where the table lacks it."""
        table = self.real.__dict__[store]
        if type(table) is not dict:
            raise Unsupported(f"the {store} of a {type(self.real).__name__} that is not a dict")
        source, guards = f"{self.source}.{store}", self.builder.guards
        guards.add(f"type({source}) is dict")
        if name not in table:
            guards.add(f"{name!r} not in {source}")
            return _MISSING
        guards.add(f"{name!r} in {source}")
        return self.builder.wrap(table[name], f"{source}[{name!r}]")

    def __getitem__(self, name):
        self._check_table()
        if not dict.__contains__(self, name) and (slot := self._slot(name)) is not None:
            try:
                value = slot.__get__(self.real)
            except AttributeError:
                raise KeyError(name) from None
            dict.__setitem__(self, name, self.builder.wrap(value, f"{self.source}.{name}"))
        if not dict.__contains__(self, name):
            attrs = getattr(self.real, "__dict__", {})
            if name not in attrs:
                raise KeyError(name)
            dict.__setitem__(self, name, self.builder.wrap(attrs[name], self._attr_source(name)))
        return dict.__getitem__(self, name)


def follow_outside(builder, value, source: str, truth_ok: bool = False,
                   varied: bool = False) -> ObjectVariable | None:
    """An object variable for `value`, an instance of a plain class (see `constructible`;
    not a dict subclass) read from `source` at a resume point, guarded by its type; None for
    any other value. One real object is one variable: its other sources are guarded to be
    it, and distinct objects to stay distinct (a write through one must show through the
    other only when eager's would). A module is followed where the program made it
    (`_MADE_LAYERS`) or where `varied` says the frame sees several instances there."""
    cls = type(value)
    layer = is_layer_class(cls) and (varied or value in _MADE_LAYERS)
    if not constructible(cls, truth_ok, layer=layer) or \
            _mapping_base(cls) is not None or (
            any("__slots__" in vars(k) for k in cls.__mro__) and
            _owner(cls, "__getattr__")[1] is not _MISSING):  # (a slot's guard is `hasattr`)
        return None
    guards = builder.guards
    for var, real in builder.followed:
        if real is value:
            guards.add(f"{source} is {var.source}")
            return var
    guards.add(f"type({source}) is {guards.ref(cls, 'type')}", first=True)
    guard_plain(guards, cls)
    for var, _ in builder.followed:
        guards.add(f"{source} is not {var.source}")
    var = ObjectVariable(cls)
    var.source = source
    var.items = _OutsideAttrs(builder, value, source)
    builder.followed.append((var, value))
    return var


def followed_identity(builder, a: Variable, b: Variable) -> bool | None:
    """`a is b` between an object from outside followed by its type (`follow_outside`) and
    a constant holding a real object (guarded: the followed one may be that object on one
    call and not on another); None for other pairs."""
    if isinstance(b, ObjectVariable):
        a, b = b, a
    if not (isinstance(a, ObjectVariable) and a.source is not None and
            isinstance(b, ConstantVariable)) or b.value is None or _is_plain_data(b.value):
        return None
    real = next(r for v, r in builder.followed if v is a)
    same = real is b.value
    builder.guards.add(f"{a.source} {'is' if same else 'is not'} "
                       f"{builder.guards.ref(b.value)}")
    return same


def write_attr(tr, obj: ObjectVariable, name: str, value: Variable) -> None:
    """`object.__setattr__(obj, name, value)`: a property's setter runs (inlined); else the
    instance's attribute changes."""
    cls = obj.cls
    _, raw = _owner(cls, name)
    if raw is _MISSING:
        _guard_instance_wins(tr, cls, name)  # (no setter defined since)
    else:
        _guard_class_attr(tr, cls, name, raw)
        if _is_slot(raw):
            obj.items[name] = value
            if obj.source is not None:  # an object from outside: set on it after the graph
                tr.builder.store_attr(obj, name, value, obj.source)
            return
        if _is_data_descriptor(raw):
            if isinstance(raw, property) and isinstance(raw.fset, types.FunctionType):
                tr.call(BoundFunctionVariable(raw.fset, obj), [value], {})
                return
            raise Unsupported(f"assignment to the descriptor {cls.__name__}.{name}")
    if name.startswith("__") and name.endswith("__"):
        raise Unsupported(f"assignment to {cls.__name__}.{name}")
    if not _has_instance_dict(cls):  # slots only: the real assignment raises AttributeError
        raise _in_graph_error(f"assignment to {cls.__name__}.{name}, neither a slot nor in a "
                              "__dict__")
    obj.items[name] = value
    if obj.source is not None:  # an object from outside: set on it after the graph
        tr.builder.store_attr(obj, name, value, obj.source)


def delete_attr(tr, obj: ObjectVariable, name: str) -> None:
    """`object.__delattr__(obj, name)` of an instance attribute."""
    _, raw = _owner(obj.cls, name)
    if raw is not _MISSING and _is_data_descriptor(raw) and not _is_slot(raw) or \
            name not in obj.items or obj.source is not None:  # (from outside: for real)
        raise Unsupported(f"del {obj.cls.__name__}.{name}")
    if _is_slot(raw):
        _guard_class_attr(tr, obj.cls, name, raw)
    else:
        _guard_instance_wins(tr, obj.cls, name)  # (no deleter defined since)
    del obj.items[name]


def super_attr(tr, sup: SuperVariable, name: str) -> Variable:
    """`super(cls, obj).name` for an object made in the graph."""
    obj = sup.obj
    mro = obj.cls.__mro__
    if sup.cls not in mro:
        raise Unsupported("super() with an unrelated class")
    owner, raw = _owner(obj.cls, name, mro.index(sup.cls) + 1)
    if owner is None:
        raise Unsupported(f"super() attribute {name!r} not found")
    guards = tr.builder.guards
    guards.add(f"{guards.ref(owner, 'type')}.__dict__.get({name!r}) is "
               f"{guards.ref(raw, 'attr')}")
    if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):
        return tr.call(BoundFunctionVariable(raw.fget, obj), [], {})
    if raw in _OBJECT_SLOTS:
        return PartialVariable(ConstantVariable(raw), [obj], {})
    return _class_value(tr, obj, raw, name)


def call_object(tr, obj: ObjectVariable, args: list, kwargs: dict) -> Variable:
    """`obj(*args)`: its class's `__call__`, inlined."""
    _, raw = _owner(obj.cls, "__call__")
    _guard_class_attr(tr, obj.cls, "__call__", raw)
    if is_layer_class(obj.cls) and (raw is _plain_module_call() or obj.source is not None and
                                    raw is _module_class()._call_with_global_hooks):
        return _call_layer(tr, obj, args, kwargs)
    if not isinstance(raw, types.FunctionType):
        raise Unsupported(f"calling a {obj.cls.__name__} object")
    return _call_slot(tr, raw, obj, args, kwargs, "__call__")


# The tables `Module.__call__` reads: while all are empty it calls `forward` alone.
_LAYER_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks",
                      "_backward_pre_hooks")


def _plain_module_call():
    """`Module.__call__` while no global module hook exists (they swap in another)."""
    return _module_class()._call_plain


def _call_layer(tr, obj: ObjectVariable, args: list, kwargs: dict) -> Variable:
    """`layer(*args)` of a module made in the frame: what `Module.__call__` runs while the
    module has no hooks, its `forward` (an instance attribute shadows the class's), inlined
    directly. (`__call__`'s own `try` only rewords a failing forward's error, which the real
    call gives at the break a failing forward is; translated, it would make every in-place
    op after it a break.)"""
    guards = tr.builder.guards
    if obj.source is not None:  # from outside (`follow_outside`): its real tables
        from .calls import _call_module

        # (its hooks, and the hooks registered for every module, inlined around forward
        # as for a module the graph holds as a constant; all of them guarded)
        real = next(r for v, r in tr.builder.followed if v is obj)
        return _call_module(tr, obj, args, kwargs, real, plain=True)
    for table in _LAYER_HOOK_TABLES:
        hooks = obj.items.get(table)
        if not isinstance(hooks, DictVariable) or hooks.items:
            raise Unsupported(f"calling a {obj.cls.__name__} made in the graph that has "
                              "hooks")
    guards.add("___no_global_module_hooks()")
    return tr.call(read_attr(tr, obj, "forward"), args, kwargs)


def get_item(tr, obj: ObjectVariable, index: Variable) -> Variable:
    """`obj[index]`: the class's Python `__getitem__` (inlined), else the dict part's item."""
    _, raw = _owner(obj.cls, "__getitem__")
    _guard_class_attr(tr, obj.cls, "__getitem__", raw)
    if isinstance(raw, types.FunctionType):
        return tr.call(BoundFunctionVariable(raw, obj), [index], {})
    if obj.mapping is None or not isinstance(index, ConstantVariable):
        raise Unsupported(f"subscript of a {obj.cls.__name__} object made in the graph")
    try:
        return obj.mapping.items[index.value]
    except (KeyError, TypeError):  # raised by the real object (a handler may catch it)
        raise Unsupported(f"a missing key of a {obj.cls.__name__} object") from None


def set_item(tr, obj: ObjectVariable, index: Variable, value: Variable) -> None:
    """`obj[index] = value`: the class's Python `__setitem__` (inlined), else the dict
    part's item."""
    _, raw = _owner(obj.cls, "__setitem__")
    _guard_class_attr(tr, obj.cls, "__setitem__", raw)
    if isinstance(raw, types.FunctionType):
        tr.call(BoundFunctionVariable(raw, obj), [index, value], {})
        return
    if obj.mapping is None or not isinstance(index, ConstantVariable):
        raise Unsupported(f"item assignment into a {obj.cls.__name__} object")
    try:
        obj.mapping.items[index.value] = value
    except TypeError:  # unhashable: the real assignment raises
        raise Unsupported("an unhashable key") from None


# Rich comparisons: (the method, its reflection), by operator.
_COMPARISONS = {operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
                operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__"),
                operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__")}


def _comparable(v: Variable) -> bool:
    """An operand `compare` answers for: an object made in the graph (not a dict subclass,
    whose dict part compares too), or plain data, whose comparisons with such an object
    return NotImplemented."""
    if isinstance(v, ObjectVariable):
        return v.mapping is None
    return isinstance(v, ConstantVariable) and (v.value is None or _is_plain_data(v.value))


def compare(tr, op, a: Variable, b: Variable) -> Variable | None:
    """`a < b` (any rich comparison) where an operand is an object made in the graph, in
    Python's order: the right operand's reflected method first when its class is a proper
    subclass of the left's that overrides it, else the left's method, then the reflected;
    `==`/`!=` fall back to identity. Methods written in Python are inlined. None where the
    capture does not answer (a graph break)."""
    if op not in _COMPARISONS or not any(isinstance(v, ObjectVariable) for v in (a, b)) or \
            not (_comparable(a) and _comparable(b)):
        return None
    name, reflected = _COMPARISONS[op]
    ta, tb = a.python_type(), b.python_type()
    tried_reflected = False
    if ta is not tb and issubclass(tb, ta) and isinstance(b, ObjectVariable) and \
            _owner(tb, reflected)[1] is not _owner(ta, reflected)[1]:
        result = _compare_slot(tr, b, reflected, a)
        if not _not_implemented(result):
            return result
        tried_reflected = True
    result = _compare_slot(tr, a, name, b)
    if not _not_implemented(result):
        return result
    if not tried_reflected:
        result = _compare_slot(tr, b, reflected, a)
        if not _not_implemented(result):
            return result
    if op in (operator.eq, operator.ne):
        return ConstantVariable((a is b) == (op is operator.eq))
    raise Unsupported(f"'{op.__name__}' between {ta.__name__} and {tb.__name__} (a "
                      "TypeError)")


def _not_implemented(v: Variable) -> bool:
    return isinstance(v, ConstantVariable) and v.value is NotImplemented


def _compare_slot(tr, obj: Variable, name: str, other: Variable) -> Variable:
    """`type(obj).name(obj, other)`: NotImplemented for plain data (see `_comparable`)."""
    if not isinstance(obj, ObjectVariable):
        return ConstantVariable(NotImplemented)
    _, raw = _owner(obj.cls, name)
    _guard_class_attr(tr, obj.cls, name, raw)
    if isinstance(raw, types.FunctionType):
        return tr.call(BoundFunctionVariable(raw, obj), [other], {})
    if raw is object.__eq__:
        return ConstantVariable(True if obj is other else NotImplemented)
    if raw is object.__ne__:  # the inverse of the class's `__eq__`
        equal = _compare_slot(tr, obj, "__eq__", other)
        if _not_implemented(equal):
            return equal
        return ConstantVariable(not tr.truth(equal))
    if raw in (object.__lt__, object.__le__, object.__gt__, object.__ge__):
        return ConstantVariable(NotImplemented)
    raise Unsupported(f"the comparison {obj.cls.__name__}.{name}")


def extreme(tr, f, args: list, kwargs: dict) -> Variable | None:
    """`min(items)` / `max(items)` of objects made in the graph (no key or default): the
    first smallest (largest) by `item < best` (`>`), as Python compares them. None where
    the items are not such objects."""
    if kwargs or not args:
        return None
    if len(args) > 1:
        items = list(args)
    elif isinstance(args[0], (TupleVariable, ListVariable)):  # (a generator's items too)
        items = list(args[0].items)
    else:
        return None  # (an iterator is left unconsumed for the real call)
    if not items or not any(isinstance(v, ObjectVariable) for v in items):
        return None
    op = operator.lt if f is min else operator.gt
    best = items[0]
    for item in items[1:]:
        better = compare(tr, op, item, best)
        if better is None:
            return None
        if tr.truth(better):
            best = item
    return best


def is_callable(tr, obj: ObjectVariable) -> bool:
    """`callable(obj)`: whether its class defines `__call__` (guarded: a class may gain one
    after the graph was made)."""
    _, raw = _owner(obj.cls, "__call__")
    _guard_class_attr(tr, obj.cls, "__call__", raw)
    return raw is not _MISSING


def truth(obj: ObjectVariable) -> bool:
    """`bool(obj)`: a dict subclass's is its dict part's (`constructible` refuses those with
    their own `__bool__`/`__len__`); an object whose class defines either is a break (its
    Python decides, for real); any other object is true."""
    if _decides_truth(obj.cls):
        raise Unsupported(f"the truth of a {obj.cls.__name__} object (its own "
                          "__bool__/__len__)")
    return True if obj.mapping is None else bool(obj.mapping.items)


def keys(tr, obj: ObjectVariable) -> list:
    """What iterating `obj` yields: a dict subclass's keys, or what the iterator its
    class's Python `__iter__` returns yields (a container layer's `iter(self._modules.
    values())`, inlined)."""
    if obj.mapping is not None:
        return [ConstantVariable(k) for k in obj.mapping.items]
    _, raw = _owner(obj.cls, "__iter__")
    _guard_class_attr(tr, obj.cls, "__iter__", raw)
    if not isinstance(raw, types.FunctionType):
        raise Unsupported(f"iterating a {obj.cls.__name__} object made in the graph")
    from .calls import inline
    from .variables import IteratorVariable, LazyIteratorVariable

    it = inline(tr, raw, [obj], {})
    if not isinstance(it, (IteratorVariable, LazyIteratorVariable)):
        raise Unsupported(f"{obj.cls.__name__}.__iter__ returned no iterator")
    return tr.unpack(it)


def call_object_slot(tr, f, args: list, kwargs: dict) -> Variable | None:
    """`object.__setattr__(obj, name, v)` and the like on an object made in the graph (a
    dataclass's `__init__`, `super().__init__()`), or None where `f` is no such call."""
    if f not in _OBJECT_SLOTS + _MAPPING_INITS or not args or \
            not isinstance(args[0], ObjectVariable):
        return None
    obj, rest = args[0], args[1:]
    if f is object.__init__ or f in _MAPPING_INITS:
        return _call_slot(tr, f, obj, rest, kwargs, "__init__")
    if kwargs:
        return None
    names = [tr.as_python(a) for a in rest[:1]]
    if not names or not isinstance(names[0], str):
        raise Unsupported(f"object.{f.__name__} with a name that is not a string")
    if f is object.__setattr__ and len(rest) == 2:
        write_attr(tr, obj, names[0], rest[1])
        return ConstantVariable(None)
    if f is object.__getattribute__ and len(rest) == 1:
        return read_attr(tr, obj, names[0])
    if f is object.__delattr__ and len(rest) == 1:
        delete_attr(tr, obj, names[0])
        return ConstantVariable(None)
    raise Unsupported(f"object.{f.__name__} with {len(rest)} arguments")


def length(tr, obj: ObjectVariable) -> Variable:
    """`len(obj)` through its class's Python `__len__` (a container layer's), inlined;
    a break where it has none or answers other than a plain count (the builtin raises)."""
    _, raw = _owner(obj.cls, "__len__")
    _guard_class_attr(tr, obj.cls, "__len__", raw)
    if not isinstance(raw, types.FunctionType):
        raise Unsupported(f"len() of a {obj.cls.__name__} object")
    from .calls import inline

    result = inline(tr, raw, [obj], {})
    if not (isinstance(result, ConstantVariable) and type(result.value) is int and
            result.value >= 0):
        raise Unsupported(f"{obj.cls.__name__}.__len__ gave no count")
    return result


def has_attr(tr, obj: ObjectVariable, name: str) -> bool:
    """`hasattr(obj, name)` (an instance attribute, or the class's, guarded)."""
    if name in ("__class__", "__dict__"):
        return True
    _, raw = _owner(obj.cls, name)
    _guard_class_attr(tr, obj.cls, name, raw)
    if _is_slot(raw):
        found = name in obj.items
    elif raw is not _MISSING and _is_data_descriptor(raw):  # (a getter may raise)
        raise Unsupported(f"hasattr() of the descriptor {obj.cls.__name__}.{name}")
    else:
        found = name in obj.items or raw is not _MISSING
    hook = None if found else _own_getattr(tr, obj.cls)
    if hook is not None and obj.source is not None and hook is _module_getattr():
        return _module_table_entry(obj, name) is not None
    if hook is not None:
        # As the builtin: the class's `__getattr__` answers (inlined, its effects kept as
        # eager keeps them); only an AttributeError it raises means False.
        from .exceptions import Raised

        try:
            tr.call(BoundFunctionVariable(hook, obj), [ConstantVariable(name)], {})
        except Raised as r:
            if isinstance(r.exc.value, AttributeError):
                return False
            raise
        return True
    return found


# Modules made by the program in compiled code (rebuilt after a graph, or made for real at a
# break): a frame holding one after a break follows it by its type and attributes, as an
# object of a plain class, since it is new on every call (an identity guard recompiled
# every call). Any instance of the class passes the same guards: what the graph reads of
# it is read through its source and guarded.
_MADE_LAYERS: weakref.WeakSet = weakref.WeakSet()


def note_made_layer(value) -> None:
    """Remember `value`, a module the program just made, if it is one (see `_MADE_LAYERS`)."""
    if is_layer_class(type(value)):
        _MADE_LAYERS.add(value)


def rebuild(cls: type, attrs: dict, items: dict | None = None):
    """The real object an `ObjectVariable` stands for, after the graph: a new instance of
    `cls` (no `__init__` runs again) holding `attrs` (and, a dict subclass, `items`)."""
    base = _mapping_base(cls)
    if base is None:
        made = object.__new__(cls)
    else:
        made = base.__new__(cls)
        for key, value in (items or {}).items():  # the base's own: not the class's hooks
            base.__setitem__(made, key, value)
    for key, value in attrs.items():
        raw = _owner(cls, key)[1]
        if _is_slot(raw):
            raw.__set__(made, value)
        else:
            made.__dict__[key] = value
    note_made_layer(made)
    return made


def weak_reference(args: list, kwargs: dict) -> Variable | None:
    """`weakref.ref(obj)` of an object made in the graph (no callback), or None."""
    if len(args) == 1 and not kwargs and isinstance(args[0], ObjectVariable):
        if "__weakref__" not in {n for k in args[0].cls.__mro__ for n in vars(k)}:
            raise Unsupported(f"cannot create weak reference to {args[0].cls.__name__!r}")
        return WeakRefVariable(args[0])
    return None


def _frame_variables(tr):
    """Every variable a local or the stack of a frame being translated (this one or a
    caller it is inlined into) reaches, directly or through containers and objects."""
    from .variables import CellVariable, IteratorVariable, SetVariable

    seen: set = set()
    todo: list = []
    frame = tr
    while frame is not None:
        todo += [v for v in dict.values(frame.locals) if isinstance(v, Variable)]
        todo += frame.stack
        frame = frame.parent
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        yield v
        if isinstance(v, OutsideListVariable) and not v.materialized():
            continue  # (its items are not read: reading them here would guard them)
        if isinstance(v, (TupleVariable, ListVariable, IteratorVariable)):
            todo.extend(v.items)
        elif isinstance(v, (DictVariable, SetVariable)):
            todo.extend(v.items.values())
        elif isinstance(v, ObjectVariable):
            todo.extend(dict.values(v.items))
            if v.mapping is not None:
                todo.append(v.mapping)
        elif isinstance(v, CellVariable) and v.contents is not None:
            todo.append(v.contents)
        elif isinstance(v, (BoundFunctionVariable, MethodVariable)):
            todo.append(v.obj)
        elif isinstance(v, PartialVariable):
            todo.extend([v.func, *v.args, *v.kwargs.values()])


def weak_target_held(tr, target: ObjectVariable) -> bool:
    """Whether the frames being translated hold `target` (`_frame_variables`): then the
    program's real object is alive, and its weak reference returns it."""
    return any(v is target for v in _frame_variables(tr))


def holds_real(tr, value, but: Variable) -> bool:
    """Whether a variable of the frames being translated other than `but` is `value`
    itself (a constant, or a container variable read from it), a method bound to it, or a
    real tuple or list holding it (such a variable reads it without `wrap`)."""
    containers = tr.builder.container_objects
    for v in _frame_variables(tr):
        if v is not but and containers.get(id(v), (None, None))[1] is value:
            return True
        if isinstance(v, OutsideListVariable) and not v.materialized() and v is not but and (
                v.real is value or any(x is value for x in v.real)):
            return True
        if not isinstance(v, ConstantVariable) or v is but:
            continue
        held = v.value
        if held is value or getattr(held, "__self__", None) is value or \
                type(held) in (tuple, list) and any(x is value for x in held) or \
                type(held) in DICT_WRAPPERS:  # (whose dict cannot be told: any)
            return True
    return False


# Builtin objects that read a dict they do not name: its views, iterators and proxies.
DICT_WRAPPERS = frozenset(type(w) for w in (
    {}.keys(), {}.values(), {}.items(), iter({}), iter({}.values()), iter({}.items()),
    reversed({}), reversed({}.values()), reversed({}.items()), types.MappingProxyType({})))


_REBUILDING: set = set()  # ids of the objects whose specs are being made (cycles)


def object_spec(v: ObjectVariable | WeakRefVariable, spec) -> tuple:
    """How `segments` rebuilds `v` after the graph (`spec`: the spec of an attribute's
    variable): `rebuild(cls, {name: value, ...})`, or a weak reference to the rebuilt
    object. An object reachable from its own attributes (`self.me = self`) cannot be made
    in one expression: a graph break."""
    if isinstance(v, WeakRefVariable):
        return ("named", weakref.ref, [spec(v.target)])
    if id(v) in _REBUILDING:
        raise Unsupported(f"a {v.cls.__name__} object made in the graph refers to itself")
    _REBUILDING.add(id(v))
    try:
        parts = [("const", v.cls), ("dict", {k: spec(i) for k, i in v.items.items()})]
        if v.mapping is not None:
            parts.append(spec(v.mapping))
        return ("named", rebuild, parts)
    finally:
        _REBUILDING.discard(id(v))


