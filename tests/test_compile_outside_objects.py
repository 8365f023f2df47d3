"""Objects from outside the graph (arguments, globals, objects alive at a graph break) whose
state or class changes between calls: each program runs several calls eagerly and compiled,
each from the same fresh state, and every call's value, raised exception and the objects'
attributes afterwards must agree (compile never returns a wrong answer: what it cannot
follow is a graph break).

1. Classes changed after the first call: a property, a `__setattr__`, a `__bool__`, a
   `__call__` or a `__getattribute__` assigned to the class of an object the graph followed
   by its type (or one made in the graph, or one guarded by identity); a class registered
   with an ABC; a metaclass whose `__instancecheck__` reads the object.
2. Reading an attribute runs the program's code each time (a property of an object with
   `__slots__`, a Python `__getattribute__` or `__getattr__` that counts its calls): read
   once per read, as eagerly.
3. An object's attribute table written as a dict (`vars(p)["w"] = x`, a module's
   `__dict__`, `globals()`) and then read as attributes, or an attribute assigned and the
   table then read as a dict.
4. State that changes between calls where the graph is reused: attribute types, tensor
   metadata, None <-> tensor, aliasing, deleted attributes, subclasses, weak references
   whose target dies, frozen dataclasses, unset slots.

No torch is imported (this file runs on 3.12 and 3.13 too); graphs run through `Counter`
(the run's FUSEGRAD_TEST_BACKEND).
"""

from __future__ import annotations

import abc
import dataclasses
import types
import weakref

import numpy as np
import pytest
from compile_support import Counter, tolerances

import fusegrad as fg
from fusegrad._dynamo import graph_break


def snapshot(value, depth: int = 0):
    """A comparable copy of `value`: tensors as (shape, dtype, requires_grad, values),
    containers and objects' attributes (their `__dict__` or slots) item by item."""
    if depth > 5:
        return "..."
    if isinstance(value, fg.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), value.requires_grad,
                value.detach().numpy().copy())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v, depth + 1) for v in value])
    if isinstance(value, dict):
        return ("dict", [(repr(k), snapshot(v, depth + 1)) for k, v in value.items()])
    if isinstance(value, BaseException):
        return ("raised", type(value).__name__, str(value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (type, types.FunctionType, types.ModuleType)):
        return repr(value)
    slots = [s for k in type(value).__mro__ for s in vars(k).get("__slots__", ())]
    table = vars(value) if hasattr(value, "__dict__") else {}
    return (type(value).__name__, snapshot(dict(table), depth + 1),
            [(s, snapshot(getattr(value, s, "<unset>"), depth + 1)) for s in slots])


def same(expected, got) -> None:
    """Snapshots equal: tensors within the backend's tolerances, the rest exactly."""
    if isinstance(expected, tuple) and expected and expected[0] == "tensor":
        assert isinstance(got, tuple) and got[:4] == expected[:4], (got, expected)
        np.testing.assert_allclose(got[4], expected[4], **tolerances(expected[2]))
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), (got, expected)
        for e, g in zip(expected, got, strict=True):
            same(e, g)
    else:
        assert got == expected, (got, expected)


def calls(fn, setup, step, n: int) -> list:
    """Snapshots of `n` calls of `fn` from a fresh `setup()` (a dict; its "state", when
    there, returns what to compare after each call), `step(i, ctx)` giving the arguments."""
    ctx = setup()
    out = []
    for i in range(n):
        args = step(i, ctx)
        try:
            result = fn(*args)
        except Exception as e:  # compared by type and message
            result = e
        out.append(snapshot((result, ctx["state"]() if "state" in ctx else None)))
    return out


def check(fn, setup, step, n: int = 4, **kwargs) -> Counter:
    """Compiled calls agree with eager ones, call by call."""
    want = calls(fn, setup, step, n)
    counter = Counter()
    got = calls(fg.compile(fn, backend=counter, **kwargs), setup, step, n)
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        try:
            same(w, g)
        except AssertionError as e:
            raise AssertionError(f"call {i}: {e}") from None
    return counter


def fresh():
    """A new plain class (a test may change it without touching the others')."""
    class Plain:
        def __init__(self, w):
            self.w = w

    return Plain


def new_class():
    return {"cls": fresh()}


def arange():
    return fg.arange(3.0)


# ---------------------------------------------------------------- 1. classes changed


def write_read_back(x, p):
    p.w = x * 2
    return p.w + 1


def counted_getter(cls):
    def get(self):
        cls.reads = getattr(cls, "reads", 0) + 1
        return self.__dict__["_w"] * 10

    def put(self, v):
        self.__dict__["_w"] = v + 1000

    return property(get, put)


def test_property_added_to_the_class_of_an_object_passed_in():
    def step(i, ctx):
        cls = ctx["cls"]
        p = cls.__new__(cls)
        if i == 2:
            cls.w = counted_getter(cls)
        ctx["state"] = lambda: (vars(p), getattr(cls, "reads", 0))
        return arange(), p

    check(write_read_back, new_class, step)


MADE = {}


def made_here(x, w):
    p = MADE["cls"](w)
    return p.w + x


def test_property_added_to_the_class_of_an_object_made_in_the_graph():
    def setup():
        MADE["cls"] = fresh()
        return {}

    def step(i, ctx):
        if i == 2:
            MADE["cls"].w = counted_getter(MADE["cls"])
        return arange(), fg.ones(3)

    check(made_here, setup, step)


def truth(x, p):
    return x + 1 if p else x - 1


def truth_made_here(x, w):
    return x + 1 if MADE["cls"](w) else x - 1


@pytest.mark.parametrize("made", [False, True], ids=["passed", "made"])
def test_bool_added_to_the_class(made):
    def setup():
        MADE["cls"] = fresh()
        return {}

    def step(i, ctx):
        if i == 2:
            MADE["cls"].__bool__ = lambda self: False
        return arange(), (1.0 if made else MADE["cls"](1.0))

    check(truth_made_here if made else truth, setup, step)


def two_reads(x, p):
    return x * p.w + p.w


def test_getattribute_added_to_the_class_runs_once_per_read():
    def step(i, ctx):
        cls = ctx["cls"]
        p = cls(fg.ones(3))
        if i == 2:
            cls.reads = 0

            def lookup(self, name):
                value = object.__getattribute__(self, name)
                if name == "w":
                    cls.reads += 1
                    return value * cls.reads
                return value

            cls.__getattribute__ = lookup
        ctx["state"] = lambda: getattr(cls, "reads", None)
        return arange(), p

    check(two_reads, new_class, step)


class Sized:
    """Not followed by its type (its own `__len__`): guarded by identity."""

    def __init__(self, w):
        self.w = w

    def __len__(self):
        return 1


@pytest.mark.parametrize("change", ["property", "setattr"])
def test_class_of_an_object_guarded_by_identity_changed(change):
    def setup():
        cls = type("Held", (Sized,), {})
        ctx = {"cls": cls, "p": cls(None)}
        ctx["state"] = lambda: vars(ctx["p"])
        return ctx

    def step(i, ctx):
        cls = ctx["cls"]
        if i == 2 and change == "property":
            cls.w = counted_getter(cls)
        elif i == 2:
            cls.__setattr__ = lambda self, n, v: object.__setattr__(self, n, v * 3)
        return arange(), ctx["p"]

    check(write_read_back, setup, step)


def abc_pair():
    class Proto(abc.ABC):  # noqa: B024 (registered with, never subclassed)
        pass

    return {"proto": Proto, "cls": fresh()}


def is_instance(x, p, proto):
    return x + 1 if isinstance(p, proto) else x - 1


def is_subclass(x, p, proto):
    return x + 1 if issubclass(type(p), (int, proto)) else x - 1


@pytest.mark.parametrize("fn", [is_instance, is_subclass], ids=lambda f: f.__name__)
def test_class_registered_with_an_abc_after_the_first_call(fn):
    def step(i, ctx):
        if i == 2:
            ctx["proto"].register(ctx["cls"])
        return arange(), ctx["cls"](1.0), ctx["proto"]

    check(fn, abc_pair, step)


class ByWeight(type):
    def __instancecheck__(cls, inst):
        return getattr(inst, "w", 0) > 1


class Heavy(metaclass=ByWeight):
    pass


def test_metaclass_instancecheck_reading_the_object():
    check(is_instance, new_class,
          lambda i, ctx: (arange(), ctx["cls"]([0, 2, 0, 3][i]), Heavy))


def test_callable_after_the_class_gains_call():
    def step(i, ctx):
        if i == 2:
            ctx["cls"].__call__ = lambda self: 1
        return arange(), ctx["cls"](1.0)

    check(lambda x, p: x + 1 if callable(p) else x - 1, new_class, step)


# ---------------------------------------------------------------- 2. reads that run code


class SlotsCounter:
    __slots__ = ("w", "n")

    def __init__(self, w):
        self.w, self.n = w, 0

    @property
    def v(self):
        self.n += 1
        return self.w * self.n


class LookupCounter:
    def __init__(self, w):
        self.w, self.n = w, 0

    def __getattribute__(self, name):
        table = object.__getattribute__(self, "__dict__")
        if name == "v":
            table["n"] += 1
            return table["w"] * table["n"]
        return object.__getattribute__(self, name)


class MissingCounter:
    def __init__(self, w):
        self.w, self.n = w, 0

    def __getattr__(self, name):
        self.n += 1
        return self.w * self.n

    def __len__(self):  # (not followed: guarded by identity)
        return 1


def read_v_twice(x, o):
    return x * o.v + o.v


@pytest.mark.parametrize("cls", [SlotsCounter, LookupCounter, MissingCounter],
                         ids=lambda c: c.__name__)
def test_reads_that_count_run_once_per_read(cls):
    def setup():
        ctx = {"o": cls(fg.ones(3))}
        ctx["state"] = lambda: ctx["o"].n
        return ctx

    check(read_v_twice, setup, lambda i, ctx: (arange(), ctx["o"]))


# ---------------------------------------------------------------- 3. attribute tables


def table_item_then_attr(x, p, table):
    table["w"] = x * 2
    return p.w + 1


def table_of_arg(x, p):
    vars(p)["w"] = x * 2
    return p.w + 1


def dunder_table_of_arg(x, p):
    p.__dict__["w"] = x * 2
    return p.w + 1


def attr_then_table(x, p, table):
    p.w = x * 2
    return table["w"] + 1


def table_attr_table(x, p, table):
    before = table["w"]
    p.w = x * 2
    return table["w"] + before


def attr_then_vars(x, p):
    p.w = x * 2
    return list(vars(p).values())[0] + 1


@pytest.mark.parametrize("fn", [table_item_then_attr, attr_then_table, table_attr_table],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("cls", ["plain", "sized", "namespace"])
def test_attribute_table_and_attributes_agree(fn, cls):
    def setup():
        p = {"plain": fresh(), "sized": Sized,
             "namespace": lambda w: types.SimpleNamespace(w=w)}[cls](fg.ones(3))
        return {"p": p, "state": lambda: vars(p)}

    check(fn, setup, lambda i, ctx: (arange() + i, ctx["p"], vars(ctx["p"])))


@pytest.mark.parametrize("fn", [table_of_arg, dunder_table_of_arg, attr_then_vars],
                         ids=lambda f: f.__name__)
def test_attribute_table_of_an_object_guarded_by_identity(fn):
    def step(i, ctx):
        p = Sized(fg.ones(3))
        ctx["state"] = lambda: vars(p)
        return arange() + i, p

    check(fn, dict, step)


class Scaled(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x):
        self.__dict__["scale"] = self.scale + 2.0
        return x * self.scale


def test_module_dict_item_then_attribute():
    def setup():
        ctx = {"m": Scaled()}
        ctx["state"] = lambda: ctx["m"].scale
        return ctx

    check(lambda m, x: m(x), setup, lambda i, ctx: (ctx["m"], arange()))


def global_item_then_global(x, table):
    table["SEEN_GLOBAL"] = x * 2
    return SEEN_GLOBAL + 1  # noqa: F821 (set by the program)


def test_globals_item_then_global_read():
    def setup():
        globals()["SEEN_GLOBAL"] = fg.zeros(3)
        return {}

    check(global_item_then_global, setup, lambda i, ctx: (arange() + i, globals()))


# ---------------------------------------------------------------- 4. state across calls


def scale(x, p):
    return x * p.w + 1


def test_attribute_type_and_tensor_metadata_change():
    values = [2, 2.5, fg.ones(3) * 3, True, fg.ones(3, dtype=fg.float64), fg.ones(1),
              fg.ones(3).requires_grad_()]

    def step(i, ctx):
        return arange(), ctx["cls"](values[i])

    check(scale, new_class, step, n=len(values))


def optional(x, p):
    if p.w is None:
        return x + 1
    return x * p.w


def test_none_and_tensor_alternate():
    check(optional, new_class,
          lambda i, ctx: (arange(), ctx["cls"]([None, fg.ones(3) * 2][i % 2])))


def alias_writes(x, a, b):
    a.w = x + 1
    b.w = b.w * 2
    return a.w + b.w


def test_aliasing_changes_between_calls():
    def step(i, ctx):
        a = ctx["cls"](fg.ones(3))
        b = a if i % 2 else ctx["cls"](fg.ones(3) * 5)
        ctx["state"] = lambda: (vars(a), vars(b))
        return arange(), a, b

    check(alias_writes, new_class, step)


def maybe_missing(x, p):
    if hasattr(p, "w"):
        return x * p.w
    return x - 1


def test_attribute_deleted_and_restored():
    def setup():
        ctx = new_class()
        ctx["p"] = ctx["cls"](3.0)
        return ctx

    def step(i, ctx):
        if i == 2:
            del ctx["p"].w
        if i == 3:
            ctx["p"].w = 4.0
        return arange(), ctx["p"]

    check(maybe_missing, setup, step)
    check(scale, setup, step)  # (reading it raises AttributeError on call 2)


class Base:
    def __init__(self):
        self.w = 1.0

    def get(self):
        return self.w


class Sub(Base):
    def get(self):
        return self.w * 100


def test_subclass_passed_after_its_base():
    check(lambda x, o: x * o.get(), dict, lambda i, ctx: (arange(), [Base(), Sub()][i % 2]))


def write_break_read(x, p):
    p.w = p.w + x
    graph_break()
    p.w = p.w * 2
    return p.w


def test_write_break_read_on_the_same_object():
    def setup():
        ctx = new_class()
        ctx["p"] = ctx["cls"](fg.ones(3))
        ctx["state"] = lambda: vars(ctx["p"])
        return ctx

    check(write_break_read, setup, lambda i, ctx: (arange(), ctx["p"]))


class Target:
    def __init__(self, v):
        self.v = v


def dereference(x, ref):
    o = ref()
    return x - 1 if o is None else x * o.v


def test_weak_reference_whose_target_dies():
    def step(i, ctx):
        o = Target(float(i + 1))
        if i % 2 == 0:
            ctx.setdefault("keep", []).append(o)
        return arange(), weakref.ref(o)

    check(dereference, dict, step)


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: object


def frozen_write(x, f):
    y = x * f.w
    f.w = y
    return y


def test_frozen_dataclass_write_raises():
    check(frozen_write, dict, lambda i, ctx: (arange(), Frozen(float(i))))


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


def test_unset_slot_raises_until_set():
    def setup():
        return {"s": Slotted(2.0)}

    def step(i, ctx):
        if i == 2:
            ctx["s"].b = 5.0
        if i == 3:
            del ctx["s"].b
        return arange(), ctx["s"]

    check(lambda x, s: x * s.b, setup, step)
