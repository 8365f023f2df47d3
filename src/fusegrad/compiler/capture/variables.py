"""What the translator's stack and locals hold: variables that stand for Python values.

A `TensorVariable` is a value the graph computes: an FX node plus a fake tensor with its
shape and dtype. A `ConstantVariable` is an ordinary Python value known while translating (a
number, a module, a function, a real tensor that is not part of the graph ...). Containers
built during translation hold variables. Every variable that came from the frame's inputs
carries its `source`: the Python expression that reads it (`L['x']`, `G['torch'].nn`), used
for guards and to fetch graph inputs at run time.
"""

from __future__ import annotations

import collections
import sys


class Unsupported(Exception):
    """The translator cannot put this into a graph: a graph break (with the reason).
    `reason`: PyTorch's wording of the same break, where it has one (what `explain` and the
    `graph_breaks` log report; the message is the short form errors quote)."""

    def __init__(self, *args, reason: str | None = None):
        super().__init__(*args)
        self.reason = reason


class Variable:
    """Base of all variables."""

    __slots__ = ("source",)

    def __init__(self, source: str | None = None):
        self.source = source

    def python_type(self) -> type:
        """The type of the value this variable stands for."""
        raise NotImplementedError


class ConstantVariable(Variable):
    """A Python value known at translation time."""

    __slots__ = ("value",)

    def __init__(self, value, source: str | None = None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def __repr__(self) -> str:
        return f"Const({self.value!r})"


class TensorVariable(Variable):
    """A tensor the graph computes: its FX node and a fake example of it."""

    __slots__ = ("node", "example")

    def __init__(self, node, example, source: str | None = None):
        super().__init__(source)
        self.node = node
        self.example = example

    def python_type(self) -> type:
        from ..._tensor import Tensor

        return Tensor

    def __repr__(self) -> str:
        return f"Tensor({self.node.name})"


def is_plain_namedtuple(cls) -> bool:
    """A class made by `collections.namedtuple` (or `typing.NamedTuple`), maybe subclassed,
    whose construction runs only the generated `__new__`: building one while translating
    then runs no user code."""
    if not isinstance(cls, type) or not issubclass(cls, tuple) or \
            not hasattr(cls, "_fields") or not hasattr(cls, "_make"):
        return False
    for k in cls.__mro__[:cls.__mro__.index(tuple)]:
        if "__init__" in vars(k):
            return False
        new = vars(k).get("__new__")
        if new is not None:
            # The generated one: `namedtuple` documents it so (3.11-3.13).
            doc = getattr(getattr(new, "__func__", new), "__doc__", None) or ""
            if "_fields" not in vars(k) or not doc.startswith("Create new instance of "):
                return False
    return True


class TupleVariable(Variable):
    """A tuple built from variables; `cls` is the named-tuple type of an op's result
    (`torch.return_types.max`, ...) or of a plain named tuple the code built (`Pair(x, y)`),
    None for a plain tuple."""

    __slots__ = ("items", "cls")

    def __init__(self, items, source: str | None = None, cls: type | None = None):
        super().__init__(source)
        self.items = list(items)
        self.cls = cls

    def python_type(self) -> type:
        return self.cls or tuple

    def field(self, name: str) -> Variable | None:
        """The item a named tuple's field `name` refers to (None: not a field)."""
        fields = getattr(self.cls, "_fields", ())
        return self.items[fields.index(name)] if name in fields else None


class ListVariable(TupleVariable):
    """A list built during translation (mutations stay inside the graph's view of it)."""

    __slots__ = ()

    def python_type(self) -> type:
        return list


class DequeVariable(TupleVariable):
    """A `collections.deque` from outside the graph (a streaming window), its length,
    `maxlen` and items read and guarded: the graph's edits (`append`, `popleft`, ...) change
    the variable's items as the real deque would (the oldest dropped past `maxlen`), and
    the items it ends with are set on the real deque after the graph (`clear` and `extend`:
    the same object, its `maxlen` kept)."""

    __slots__ = ("maxlen", "iterated")

    def __init__(self, items, source: str, maxlen: int | None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self.iterated = False  # an iterator over it was made (an edit then raises in eager)

    def python_type(self) -> type:
        return collections.deque


_ITEMS = TupleVariable.__dict__["items"]  # the slot the items of a tuple variable live in


class OutsideListVariable(ListVariable):
    """A list from outside the graph (`log` of `log.append(x)`), read lazily: appends and
    extends only add to `pending`, replayed on the real list after the graph (`lst[n:] =
    [...]`, an extend), so the graph guards the list's type but not its length or items (a
    list the step appends to on every call would otherwise recompile on every call). Any
    other use reads the items (`materialize`: the length and items guarded, as any list
    from outside, as they are when the frame starts); after an append the items the graph
    appended follow them (still added to the real list after the graph), as Dynamo reads a
    list its graph appended to."""

    __slots__ = ("real", "builder", "pending")

    def __init__(self, real: list, source: str, builder):
        Variable.__init__(self, source)
        self.cls = None
        self.real = real
        self.builder = builder
        self.pending: ListVariable | None = None

    @property
    def items(self) -> list:
        try:
            return _ITEMS.__get__(self)
        except AttributeError:
            self.builder.materialize_list(self)
            items = _ITEMS.__get__(self)
            if self.pending is not None:
                items.extend(self.pending.items)
            return items

    @items.setter
    def items(self, value) -> None:
        _ITEMS.__set__(self, list(value))

    def forget_items(self) -> None:
        """Drop the items read (a failed call read them, and its guards are rolled back)."""
        _ITEMS.__delete__(self)

    def materialized(self) -> bool:
        """Whether the items have been read (and guarded)."""
        try:
            _ITEMS.__get__(self)
        except AttributeError:
            return False
        return True


class OutsideIteratorVariable(Variable):
    """A generator from outside the graph (`model.parameters()` passed in): new on every
    call, so it is guarded by its type, not its identity. Nothing reads it while translating
    (iterating it would use it up, and a graph could not read it again): any use of it is
    a graph break, and the state rebuilt at a break reads it from its source."""

    __slots__ = ("cls",)

    def __init__(self, cls: type, source: str):
        super().__init__(source)
        self.cls = cls

    def python_type(self) -> type:
        return self.cls


class DictViewVariable(TupleVariable):
    """`d.keys()`, `d.values()` or `d.items()` of a dict variable: a live view, whose items
    are the dict's as they are when it is read (a key added later is seen), unlike a tuple
    taken when the view was made."""

    __slots__ = ("dict_var", "kind")

    def __init__(self, dict_var: DictVariable, kind: str):
        Variable.__init__(self, None)
        self.dict_var = dict_var
        self.kind = kind  # "keys", "values" or "items"
        self.cls = None

    @property
    def items(self) -> list:
        held = self.dict_var.items
        if self.kind == "keys":
            return [ConstantVariable(k) for k in held]
        if self.kind == "values":
            return list(held.values())
        return [TupleVariable([ConstantVariable(k), v]) for k, v in held.items()]

    @items.setter
    def items(self, value) -> None:  # restored through its dict (see segments._restore)
        pass

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())


class DictVariable(Variable):
    """A dict with constant keys built during translation."""

    __slots__ = ("items",)

    def __init__(self, items: dict, source: str | None = None):
        super().__init__(source)
        self.items = dict(items)

    def python_type(self) -> type:
        return dict


class OrderedDictVariable(DictVariable):
    """An `OrderedDict()` made during translation (a new layer's hook tables): a dict
    variable that is rebuilt, and evaluated, as an OrderedDict. Its order-specific methods
    (`move_to_end`, `popitem`) are not followed (a break)."""

    __slots__ = ()

    def python_type(self) -> type:
        return collections.OrderedDict


class OutsideOrderedDictVariable(OrderedDictVariable):
    """An `OrderedDict` from outside the graph (an LRU cache), its keys (in order) and items
    read and guarded: item assignment, `move_to_end`, `popitem` and `pop` change the
    variable's items as the real dict would, and the items it ends with are set on the real
    dict after the graph (`clear` and `update`: the same object)."""

    __slots__ = ("iterated",)

    def __init__(self, items: dict, source: str):
        super().__init__(items, source)
        self.iterated = False  # an iterator over it was made (an edit then raises in eager)


class DefaultDictVariable(DictVariable):
    """A `collections.defaultdict(factory)` made during translation: reading a missing key
    calls `factory` (inlined or recorded like any call) and stores what it made, as the real
    `__missing__` does; rebuilt as a real defaultdict of the same factory."""

    __slots__ = ("factory",)

    def __init__(self, factory: Variable, items: dict | None = None):
        super().__init__(items or {})
        self.factory = factory

    def python_type(self) -> type:
        return collections.defaultdict


class ItemKey:
    """The name of a recorded store that assigns an item (`d[key] = v` of a dict from
    outside the graph) rather than an attribute (see `GraphBuilder.stores`)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


class ListContents(ItemKey):
    """The name of a recorded store that sets all the items of a list from outside the graph
    (`lst[:] = [...]`, replayed after the graph): what `lst.reverse()`, `sort`, `insert` and
    `pop` in the graph left in it. Its value is the list's variable, whose items at the end
    of the segment are what is stored."""

    __slots__ = ()

    def __init__(self):
        super().__init__(slice(None))


class DequeContents(ListContents):
    """The name of a recorded store that sets all the items of a deque from outside the
    graph (`dq.clear(); dq.extend([...])`, replayed after the graph): what the graph's
    `append`, `popleft` and other edits left in it. Its value is the deque's variable."""

    __slots__ = ()


class DictContents(ItemKey):
    """The name of a recorded store that sets all the items of an `OrderedDict` from outside
    the graph, in order (`d.clear(); d.update(...)`, replayed after the graph). Its value is
    the dict's variable, whose items at the end of the segment are what is stored."""

    __slots__ = ()

    def __init__(self):
        super().__init__(None)


class ListAppends(ItemKey):
    """The name of a recorded store that appends to a list from outside the graph
    (`lst[maxsize:] = [...]`: an extend, replayed after the graph): what `lst.append` and
    `lst.extend` in the graph added. Its value is a list variable of the added items."""

    __slots__ = ()

    def __init__(self):
        super().__init__(slice(sys.maxsize, None))


class AttrDictVariable(DictVariable):
    """`obj.__dict__` of an object made in the graph: its `items` are the object's own
    attribute table (`ObjectVariable.items`, the same dict)."""

    __slots__ = ("owner",)

    def __init__(self, items: dict, owner: ObjectVariable):
        super().__init__(items)
        self.owner = owner


class SetVariable(Variable):
    """A set of constants built during translation (`{...}`, a set comprehension); `items`
    maps each value to its variable in insertion order, as the real set would hold them."""

    __slots__ = ("items", "history")

    def __init__(self, items: dict | None = None):
        super().__init__(None)
        self.items = dict(items or {})
        # What filled the set, in order ("add", key) / ("discard", key) / ("update", a real
        # set): a real set
        # filled the same way has the same layout, so it iterates in the order the
        # program's set does (by hash and history, not insertion order; a copy may not).
        self.history: list = [("add", key) for key in self.items]

    def python_type(self) -> type:
        return set

    def real(self) -> set:
        """A real set filled as this one was (see `history`)."""
        return replay_set(self.history)


def replay_set(history) -> set:
    """A new set filled by the operations `history` lists (see `SetVariable.history`)."""
    out: set = set()
    for op, value in history:
        if op == "add":
            out.add(value)
        elif op == "discard":
            out.discard(value)
        else:
            out.update(value)
    return out


class TruthVariable(Variable):
    """`bool(tensor)` of a graph tensor (3.13's TO_BOOL, COMPARE_OP's bool flag): only run
    time knows it, so a branch on it is a graph break, taken after the graph ran."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: TensorVariable):
        super().__init__(None)
        self.tensor = tensor

    def python_type(self) -> type:
        return bool


class SliceVariable(Variable):
    """A slice whose bounds are variables."""

    __slots__ = ("start", "stop", "step")

    def __init__(self, start, stop, step):
        super().__init__(None)
        self.start, self.stop, self.step = start, stop, step

    def python_type(self) -> type:
        return slice


class MethodVariable(Variable):
    """`obj.name` for a tensor (a call records call_method) or a container."""

    __slots__ = ("obj", "name")

    def __init__(self, obj: Variable, name: str):
        super().__init__(None)
        self.obj = obj
        self.name = name

    def python_type(self) -> type:
        return type(print)


class IteratorVariable(Variable):
    """An iterator over variables known in advance (loops are unrolled)."""

    __slots__ = ("items", "index", "watch")

    def __init__(self, items, watch: tuple | None = None):
        super().__init__(None)
        self.items = list(items)
        self.index = 0
        # (dict or set variable, its size when iteration began, "keys"/"items"/"values"/
        # "set"): Python raises if the container changes size while it is iterated.
        self.watch = watch

    def python_type(self) -> type:
        return type(iter(()))


class NestedFunctionVariable(Variable):
    """A function made during translation (a comprehension, a nested def) whose closure
    holds variables; calling it inlines its code."""

    __slots__ = ("code", "closure", "defaults", "kwdefaults", "f_globals")

    def __init__(self, code, closure, defaults, kwdefaults, f_globals):
        super().__init__(None)
        self.code = code
        self.closure = list(closure)
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.f_globals = f_globals

    def python_type(self) -> type:
        return type(lambda: None)


class GradModeVariable(Variable):
    """`no_grad()`, `enable_grad()` or `set_grad_enabled(mode)` used as a `with` context:
    entering switches grad mode to `mode`; `exit` holds the mode to restore. A
    `set_grad_enabled(mode)` call switches the mode at once (a `with` block is optional):
    `before` holds the mode it found, which its block restores."""

    __slots__ = ("mode", "exit", "before")

    def __init__(self, mode: bool, exit_to: bool | None = None, before: bool | None = None):
        super().__init__(None)
        self.mode = mode
        self.exit = exit_to
        self.before = before

    def python_type(self) -> type:
        return object


class AutocastExitVariable(Variable):
    """The `__exit__` of an autocast region a graph entered (`with autocast(...)`): calling
    it leaves the region, in the graph."""

    __slots__ = ()

    def __init__(self):
        super().__init__(None)

    def python_type(self) -> type:
        return object


class GradExit:
    """A grad-mode context's `__exit__` rebuilt for real when a graph break happens inside
    its `with` block: calling it restores the grad mode from before the block."""

    def __init__(self, mode: bool):
        self.mode = mode

    def __call__(self, *exc) -> bool:
        from ..._thread_state import set_grad_enabled

        set_grad_enabled(self.mode)
        return False


def ignored_region_exit(*exc) -> bool:
    """The `__exit__` of a profiler region that compiled code leaves out (a
    `record_function` block: Dynamo ignores it, so no event is recorded around the graph's
    ops); called for real when a graph break happens inside the block, it does nothing."""
    return False


class NullVariable(Variable):
    """The NULL that PUSH_NULL and LOAD_GLOBAL put below a callable."""

    __slots__ = ()

    def python_type(self) -> type:
        return type(None)


class CellVariable(Variable):
    """A closure cell: one made while translating (`contents` is its variable, None while
    empty) or a real cell from outside (`real`, read through `source`). `rebound`: some code
    stores into it after it is made (STORE_DEREF), so functions must share it, not copy it."""

    __slots__ = ("contents", "real", "rebound")

    def __init__(self, contents: Variable | None = None, real=None, source: str | None = None,
                 rebound: bool = True):
        super().__init__(source)
        self.contents = contents
        self.real = real
        self.rebound = rebound

    def python_type(self) -> type:
        import types

        return types.CellType


class SuperVariable(Variable):
    """`super()` or `super(cls, obj)`: attribute reads resolve past `cls` in obj's MRO."""

    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Variable):
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def python_type(self) -> type:
        return super


class BoundFunctionVariable(Variable):
    """A user function bound to a variable (a method found through `super()`)."""

    __slots__ = ("func", "obj")

    def __init__(self, func, obj: Variable):
        super().__init__(None)
        self.func = func
        self.obj = obj

    def python_type(self) -> type:
        import types

        return types.MethodType


class LazyIteratorVariable(Variable):
    """An iterator whose items are made only when asked for (`FOR_ITER`, `next()`, a
    consumer builtin), as Python's are: what the program does between two items (a loop
    body's in-place write, a random draw, a call with effects) comes before the next item
    is made, in Python's order. Never rebuilt at a graph break (a break with one live runs
    the rest of the frame eagerly)."""

    __slots__ = ("done",)

    def __init__(self):
        super().__init__(None)
        self.done = False


class GeneratorVariable(LazyIteratorVariable):
    """A generator expression, or a call of a user's generator function, made while
    translating. Its code runs in a child translator (`frame`, made at the first item and
    kept between items) up to each `yield`."""

    __slots__ = ("func", "args", "closure", "frame", "kwargs", "defaults", "returned")

    def __init__(self, func, args: list, closure=None, kwargs: dict | None = None,
                 defaults: tuple | None = None):
        super().__init__()
        self.func = func
        self.args = args
        self.closure = closure
        self.frame = None
        self.kwargs = kwargs or {}
        self.defaults = defaults  # (a function made in the frame: its default variables)
        self.returned = ConstantVariable(None)  # what its frame returned (`yield from`)

    def python_type(self) -> type:
        import types

        return types.GeneratorType


class GeneratorContextVariable(Variable):
    """`cm(...)` of a `@contextlib.contextmanager` function, made while translating: the
    generator's code runs in a child translator (`frame`, made when a `with` block enters
    it) up to its `yield`, and on to its end when the block exits (`helper`: the decorated
    function, which makes the real object where this one must be rebuilt)."""

    __slots__ = ("helper", "func", "args", "kwargs", "frame")

    def __init__(self, helper, func, args: list, kwargs: dict):
        super().__init__()
        self.helper = helper
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.frame = None

    def python_type(self) -> type:
        import contextlib

        return contextlib._GeneratorContextManager


class GeneratorExitVariable(Variable):
    """The `__exit__` of a generator context manager a `with` block entered (`cm`)."""

    __slots__ = ("cm",)

    def __init__(self, cm: GeneratorContextVariable):
        super().__init__()
        self.cm = cm

    def python_type(self) -> type:
        import types

        return types.MethodType


class LazyZipVariable(LazyIteratorVariable):
    """`enumerate(it, start)` (`start` an int) or `zip(*its)` (`start` None) of iterators
    among which a lazy one: each item takes the next of every part in order, as the builtin
    does (a zip stops at the first part used up, having taken the items before it)."""

    __slots__ = ("parts", "start")

    def __init__(self, parts: list, start: int | None):
        super().__init__()
        self.parts = parts
        self.start = start

    def python_type(self) -> type:
        return zip if self.start is None else enumerate


class LazyChainVariable(LazyIteratorVariable):
    """`itertools.chain(*its)` made while translating: the items of each part in turn, each
    made when asked for (a lazy part, a module's `parameters()`, runs only then), as the
    real chain takes them."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        super().__init__()
        self.parts = parts

    def python_type(self) -> type:
        import itertools

        return itertools.chain


class LazyMapVariable(LazyIteratorVariable):
    """`map(func, *its)` (or `filter(func, it)`, with `keep`) made while translating: each
    item calls `func` (inlined or recorded like any call) on the parts' next items when it
    is asked for, as the builtin calls it; a filter skips the items whose result is false."""

    __slots__ = ("func", "parts", "keep")

    def __init__(self, func: Variable, parts: list, keep: bool = False):
        super().__init__()
        self.func = func
        self.parts = parts
        self.keep = keep

    def python_type(self) -> type:
        return filter if self.keep else map


class LazyPairwiseVariable(LazyIteratorVariable):
    """`itertools.pairwise(it)` made while translating: each item pairs the part's previous
    item with its next one, taken when asked for, as the real iterator takes them."""

    __slots__ = ("part", "last")

    def __init__(self, part: Variable):
        super().__init__()
        self.part = part
        self.last = None

    def python_type(self) -> type:
        import itertools

        return itertools.pairwise


class LazyAccumulateVariable(LazyIteratorVariable):
    """`itertools.accumulate(it, func, initial=...)` made while translating: running totals
    (`func` None: `+`), each computed when asked for, as the real iterator computes it;
    `initial` (if given) comes first."""

    __slots__ = ("part", "func", "total", "initial")

    def __init__(self, part: Variable, func: Variable | None, initial: Variable | None):
        super().__init__()
        self.part = part
        self.func = func
        self.total = None
        self.initial = initial

    def python_type(self) -> type:
        import itertools

        return itertools.accumulate


class PartialVariable(Variable):
    """`functools.partial(func, *args, **kwargs)` made while translating: calling it calls
    `func` with the stored arguments first, as the real partial does (so its call is
    inlined or recorded like a direct one); rebuilt as a real partial at a graph break."""

    __slots__ = ("func", "args", "kwargs")

    def __init__(self, func: Variable, args: list, kwargs: dict):
        super().__init__(None)
        self.func = func
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def python_type(self) -> type:
        import functools

        return functools.partial


class ObjectVariable(Variable):
    """An instance of a plain Python class made while translating (`Out(loss, logits)`, a
    distribution): `items` holds its instance attributes (its `__dict__`, in assignment
    order) as variables. Its `__init__`, methods and properties are inlined; after the graph
    it is rebuilt as a real instance holding the attributes' values (see `objects.py`)."""

    __slots__ = ("cls", "items", "mapping")

    def __init__(self, cls: type, items: dict | None = None, mapping: DictVariable | None = None):
        super().__init__(None)
        self.cls = cls
        self.items = dict(items or {})
        # The dict an instance of a dict subclass is (HF's ModelOutput), None for others.
        self.mapping = mapping

    def python_type(self) -> type:
        return self.cls

    def __repr__(self) -> str:
        return f"Object({self.cls.__name__})"


class WeakRefVariable(Variable):
    """`weakref.ref(obj)` of an object made in the graph (a transform's cached inverse).
    Calling it is a graph break: whether eager's target is still alive depends on who else
    holds it. Rebuilt as a real weak reference to the rebuilt object."""

    __slots__ = ("target",)

    def __init__(self, target: ObjectVariable):
        super().__init__(None)
        self.target = target

    def python_type(self) -> type:
        import weakref

        return weakref.ReferenceType
