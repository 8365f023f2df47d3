"""GraphBuilder: the FX graph being captured, its inputs, guards and example values.

Real values from the frame enter through `wrap(value, source)`: tensors become placeholders
(created on first use, in first-use order, named `l_x_` from `L['x']` as PyTorch names them),
plain data becomes constants guarded by value, other objects constants guarded by identity.
Every recorded call also runs on fake tensors, so each node knows its output's shape and
dtype (`node.meta['example_value']`) without computing anything.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import functools
import inspect
import operator
import os
import re
import threading
import traceback
import types
import warnings

import numpy as np

from ..._dtype import python_scalar
from ..._fake import DataDependentOutputError, FakeTensor
from ..._shapes import dense_strides
from ..._symbolic import ShapeEnv, SymInt
from ..._tensor import Tensor, tensors_in
from ..._thread_state import local as _thread_local
from ...fx import has_side_effect
from ...ops.surface import FACTORY, FRESH, INPLACE, SHARES_MEMORY, has_flag
from ..markers import enter_recompute_region, exit_recompute_region
from . import reasons
from .blocks import BlockExit, BlockExitVariable, BlockKind, enter_graph_block, leave_graph_block
from .dynamic import input_order, strict_dims
from .functional_call import check_not_replaced, overridden_read
from .graph_inputs import is_state_source, last_op
from .guards import GuardSet, _is_plain_data, _shares_memory
from .layouts import LayoutFakeMode
from .locations import LocatedGraph
from .symfloat import (
    SymFloat,
    SymText,
    has_symfloat,
    hints,
    is_frame_input,
    perturbed,
    size_arithmetic,
    specialize_all,
)
from .variables import (
    AutocastExitVariable,
    CellVariable,
    ConstantVariable,
    DequeContents,
    DequeVariable,
    DictContents,
    DictVariable,
    ItemKey,
    ListAppends,
    ListContents,
    ListVariable,
    MethodVariable,
    OutsideIteratorVariable,
    OutsideListVariable,
    OutsideOrderedDictVariable,
    PartialVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)


def placeholder_name(source: str) -> str:
    """`L['x']` -> `L_x_`, `L['xs'][0]` -> `L_xs_0_`: the placeholder's target, as Dynamo
    names its inputs (the graph names the node in lower case, `l_x_`)."""
    return re.sub(r"[^0-9a-zA-Z]+", "_", source)


def _unique_name(graph, name: str) -> str:
    """`name`, or `name` with the first free suffix `_1`, `_2`, ... where another input
    already has it: sources that spell alike once stripped (`linears[-1]` and
    `linears[1]`) are two inputs, and two parameters of one name do not compile."""
    taken = {n.target for n in graph.nodes if n.op == "placeholder"}
    if name not in taken:
        return name
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


_NOTHING = object()
# A cell of the compiled frame's closure (`GraphBuilder._named_source`).
_CLOSURE_SOURCE = re.compile(r"___closure\[(\d+)\]\.cell_contents")
# What may read an object's `__dict__` without naming it: its views, iterators and proxies.
_TABLE_VIEWS = frozenset(type(w) for w in (
    {}.keys(), {}.values(), {}.items(), iter({}), iter({}.values()), iter({}.items()),
    types.MappingProxyType({})))


class GraphBuilder:
    """One graph under construction (shared by a frame and the functions it inlines)."""

    def __init__(self):
        from ... import fx

        self.fx = fx
        # The translator running now (innermost frame), which `LocatedGraph` reads.
        self.translator = None
        self.graph = LocatedGraph(self)
        self.guards = GuardSet()
        self.guards.global_state()
        self.grad_mode_at_start = _thread_local.grad_mode  # (the graph's first switch's)
        self.inputs: dict[str, TensorVariable] = {}  # source -> placeholder variable
        self.input_values: dict[str, Tensor] = {}
        self.fake_mode = LayoutFakeMode()  # (results with eager's strides where known)
        self.created: list = []  # nodes in creation order (to undo a failed instruction)
        # Functions MAKE_FUNCTION built while translating: their cells and defaults hold
        # values of variables that were guarded where they were read.
        self.fresh_functions: list = []
        # Generators whose code started running in the graph (GeneratorVariable).
        self.started_generators: list = []
        # Set by the first in-place op into a tensor that may be an input's memory.
        self.mutated = False
        self.grad_write = False  # an in-place op with history into a possible input
        # Open `warnings.catch_warnings(record=True)` blocks: an op that warns inside one is
        # a break (the block then runs for real and records the warning).
        self.record_blocks = 0
        self.module_frame = False  # whether the frame is a module's forward (set by its runner)
        self.class_stores = False  # whether an attribute of a class was assigned (a store)
        # Attribute assignments to objects from outside, replayed on the real objects after
        # the graph ran: (object, name, variable, expression naming the object at run
        # time), in program order.
        self.stores: list = []
        self.closure_names: tuple = ()  # the frame's free variables (`___closure[i]`)
        # The blocks (kind, arguments) this graph entered and has not left, innermost last:
        # an autocast query inside them answers from its regions (`regions`).
        self.open_blocks: list = []
        # Inside a translated `functional_call`: the tensors standing for module state.
        self.state_overrides = None
        # Some recorded instruction has an exception handler in its frame (a try block): if
        # the graph raises when it runs, the segment runs again eagerly from its start, so
        # it must not have changed its inputs in place.
        self.protected = False
        # Dynamic shapes: `dynamic_dims(source, tensor)` says which sizes of an input are
        # symbolic (None: all static); each symbol is an integer input of the graph.
        self.dynamic_dims = None
        self.dynamic_ints = None  # `(source, int) -> bool`: an integer input made symbolic
        # fullgraph=True: a float `.item()` is a graph node (an `UnbackedFloat`), as
        # PyTorch's capture of scalar outputs there, rather than a break that raises.
        self.fullgraph = False
        self.dynamic_floats = None  # `(source, float) -> bool`: a float input (symfloat.py)
        self.float_nodes: dict = {}  # source -> placeholder of a dynamic float
        # id(variable) -> (variable, real object) of the containers read from the frame:
        # `is` between two of them is decided on the real objects (and guarded).
        self.container_objects: dict = {}
        # id(list) -> its OutsideListVariable: every read of one list from outside is one
        # variable (appends through one name are seen through the others)
        self.outside_lists: dict = {}
        # id(container) -> (its variable, the container) of the deques and OrderedDicts
        # read from the frame, whose edits the graph replays after it runs
        self.outside_deques: dict = {}
        # Equal sizes share a symbol under `dynamic=True`, as in PyTorch; sizes made dynamic
        # automatically (after a change) each get their own.
        self.duck_sizing = False
        self.shape_env = ShapeEnv()
        self.shape_env.float_arithmetic = size_arithmetic(self)
        # Symbols of sizes the program marked with `mark_dynamic`: specialising one is an
        # error (symbol -> the size's source).
        self.strict_symbols: dict[str, str] = {}
        self.symbol_nodes: dict = {}  # symbol name -> its placeholder
        self.symbol_values: dict = {}  # symbol source -> its value (an example input)
        # Objects of plain classes read from the frame (one it made before a break, one
        # passed in) are followed by their type and the attributes read, not their
        # identity, as Dynamo guards them: a new one on every call reuses the graph
        # (objects.py `follow_outside`).
        self.follow_objects = False
        self.followed: list = []  # (variable, real object) of the objects followed
        # `(source, module) -> bool`: whether the frame has seen other modules of that class
        # at `source` (one method called on several instances): such a module is followed
        # by its type and attributes too, not guarded by identity (None: never).
        self.varying_modules = None
        # id -> dict from outside that a recorded store assigns an item of: reading it
        # again in this graph would miss the item (it is set after the graph ran).
        self.written_dicts: dict = {}
        # id(real dict) -> (its DictVariable, the dict): a dict from outside reached again
        # (another local, the global itself) is the same variable, guarded as the same
        # object, so items the graph stored into it are read back (as Dynamo keys a dict's
        # mutations by the object, not by the name that reached it). Once the graph writes
        # into one, the other dicts it read are guarded to be other objects.
        self.dict_variables: dict = {}
        # id -> `__dict__` of an object a recorded store assigns an attribute of: reading it
        # as a dict again in this graph would miss the attribute.
        self.stored_tables: dict = {}

    # ---------------------------------------------------------------- side effects

    def stored_attr(self, obj, name: str) -> Variable | None:
        """The variable last assigned to `obj.name` in this graph, or None."""
        for target, attr, value, _ in reversed(self.stores):
            if target is obj and attr == name:
                return value
        return None

    def stored_class_attr(self, cls: type, name: str) -> Variable | None:
        """The variable a class attribute `name` that `cls` or an instance of it (without
        an attribute of its own) reads was assigned in this graph (`type(self).n += 1`,
        set after the graph), or None where it reads the real class."""
        if not self.class_stores:
            return None
        for klass in getattr(cls, "__mro__", ()):
            stored = self.stored_attr(klass, name)
            if stored is not None:
                if hasattr(type(getattr(stored, "value", None)), "__get__"):
                    # (a function or descriptor binds or runs code when read)
                    raise Unsupported(f"reading {name!r}, a descriptor assigned to a class "
                                      "in this graph")
                return stored
            if name in vars(klass):
                return None
        return None

    def store_attr(self, obj, name: str, value: Variable, target: str | None = None) -> None:
        """Record `obj.name = value`, replayed after the graph on `target` (an expression;
        by default the object itself, kept in the guard scope: it is guarded by identity)."""
        if overridden_read(self.state_overrides, obj, name) is not None:
            # (eagerly set into the swapped table, then undone when the call returns)
            raise Unsupported(f"assignment to {name!r}, given to a functional_call")
        table = self._attribute_table(obj)
        if table is not None:
            # The object's `__dict__` read as a dict in this graph would miss the assignment
            # (it is made after the graph ran): before it (a variable holds it), or after.
            if any(real is table for _, real in self.container_objects.values()):
                raise Unsupported("an attribute assignment to an object whose __dict__ the "
                                  "graph read as a dict")
            self.stored_tables[id(table)] = table
        self.class_stores = self.class_stores or isinstance(obj, type)
        self.stores.append((obj, name, value, target or self.guards.ref(obj)))

    def namespace_written(self, obj) -> bool:
        """Whether `obj`'s attribute table (its `__dict__`, a module's globals) is a dict from
        outside that a recorded item store assigns (`vars(p)["w"] = x`, set after the graph):
        reading an attribute of `obj` in this graph would miss the item."""
        if not self.written_dicts:
            return False
        try:
            table = object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            return False
        return self.written_dicts.get(id(table), _NOTHING) is table

    def _attribute_table(self, obj) -> dict | None:
        """The `__dict__` of the real object a recorded attribute store assigns (None for a
        followed object of a class with `__slots__` or one without a table)."""
        if isinstance(obj, Variable):  # an object from outside followed by its type
            obj = next((r for v, r in self.followed if v is obj), None)
            if obj is None:
                return None
        try:
            table = object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            return None
        return table if type(table) is dict else None

    def store_item(self, d: dict, key, value: Variable, target: str) -> None:
        """Record `d[key] = value` of a dict from outside, replayed after the graph on
        `target`; the dict may not be read again in this graph (`wrap` refuses it)."""
        self.stores.append((d, ItemKey(key), value, target))
        known = self.dict_variables.get(id(d))
        if known is not None and known[1] is d and id(d) not in self.written_dicts:
            # The items written are read back through the names that reached this dict (the
            # same object, guarded) and through no other: the other dicts the graph read are
            # other objects on every call.
            for other, real in self.dict_variables.values():
                if real is not d:
                    self.guards.add(f"{other.source} is not {known[0].source}")
        self.written_dicts[id(d)] = d

    def store_list(self, real: list, var: Variable) -> None:
        """Record that the graph changed the items of `real`, a list from outside read as
        `var` (`lst.reverse()`): its items as the segment leaves them are set on it after the
        graph (`lst[:] = [...]`), once however often the graph changed it."""
        if self.written_list(real) is None:
            self.stores.append((real, ListContents(), var, var.source))

    def store_deque(self, real: collections.deque, var: DequeVariable) -> None:
        """Record that the graph changed the items of `real`, a deque from outside read as
        `var`: its items as the segment leaves them are set on it after the graph, once."""
        if self.written_list(real) is None:
            self.stores.append((real, DequeContents(), var, var.source))

    def store_ordered_dict(self, real: collections.OrderedDict, var) -> None:
        """Record that the graph changed `real`, an OrderedDict from outside read as `var`:
        its items, in the order the segment leaves them, are set on it after the graph."""
        if not any(target is real and type(key) is DictContents
                   for target, key, _, _ in self.stores):
            self.stores.append((real, DictContents(), var, var.source))

    def _ordered_dict_input(self, value: collections.OrderedDict,
                            source: str) -> OutsideOrderedDictVariable:
        """An OrderedDict read from the frame: one variable per real dict (its type, keys in
        order and items guarded)."""
        found = self.outside_deques.get(id(value))
        if found is not None and found[1] is value:
            if found[0].source != source:
                self.guards.add(f"{source} is {found[0].source}")
            return found[0]
        odict = self.guards.ref(collections.OrderedDict, "type")
        self.guards.add(f"type({source}) is {odict} and list({source}) == {list(value)!r}")
        if any(type(k) is int for k in value):  # 1 == 1.0 == True: the types matter too
            types_text = ", ".join(type(k).__name__ for k in value)
            self.guards.add(f"list(map(type, {source})) == [{types_text}]")
        var = OutsideOrderedDictVariable(
            {k: self.wrap(v, f"{source}[{k!r}]") for k, v in value.items()}, source)
        self.outside_deques[id(value)] = (var, value)
        self.container_objects[id(var)] = (var, value)
        return var

    def _deque_input(self, value: collections.deque, source: str) -> DequeVariable:
        """A deque read from the frame: one variable per real deque (its type, `maxlen`,
        length and items guarded)."""
        known = self.written_list(value) if self.stores else None
        if known is None:
            found = self.outside_deques.get(id(value))
            known = found[0] if found is not None and found[1] is value else None
        if known is not None:
            if known.source != source:
                self.guards.add(f"{source} is {known.source}")
            return known
        self.guards.add(f"type({source}) is {self.guards.ref(collections.deque, 'type')} and "
                        f"{source}.maxlen == {value.maxlen!r} and len({source}) == {len(value)}")
        var = DequeVariable([self.wrap(v, f"{source}[{i}]") for i, v in enumerate(value)],
                            source, value.maxlen)
        self.outside_deques[id(value)] = (var, value)
        self.container_objects[id(var)] = (var, value)
        return var

    def materialize_list(self, var) -> None:
        """Read the items of an `OutsideListVariable` (its length and items guarded)."""
        source, value = var.source, var.real
        self.guards.add(f"len({source}) == {len(value)}")
        var.items = [self.wrap(v, f"{source}[{i}]") for i, v in enumerate(value)]
        self.container_objects[id(var)] = (var, value)

    def outside_list_length(self, var) -> int:
        """The length of the list from outside `var` stands for, its items not read: the
        real list's (guarded) and the items the graph appended to it."""
        self.guards.add(f"len({var.source}) == {len(var.real)}")
        return len(var.real) + (0 if var.pending is None else len(var.pending.items))

    def append_to_list(self, var, items: list) -> None:
        """Record `items` appended to the list from outside `var` stands for (its items
        not read): added to the real list after the graph, in order."""
        if var.pending is None or not any(v is var.pending for _, _, v, _ in self.stores):
            # (a new record also where an inlined call that broke dropped the last one)
            var.pending = ListVariable([])
            self.stores.append((var.real, ListAppends(), var.pending, var.source))
        var.pending.items.extend(items)

    def written_list(self, real) -> Variable | None:
        """The variable of list `real` from outside whose items the graph changed, or None.
        Read from the recorded stores, so a store an inlined call that broke recorded (and
        the segment dropped) no longer counts."""
        for target, key, value, _ in self.stores:
            if target is real and isinstance(key, ListContents):
                return value
        return None

    def same_tensor(self, node, other) -> bool:
        """Whether `node` is `other` or an in-place op's result on it (`x.add_(1)`, `x += 1`
        return x itself)."""
        while node is not other and node.meta.get("inplace_of") is not None:
            node = node.meta["inplace_of"]
        return node is other

    def enter_protected(self) -> None:
        """The graph reaches code with an exception handler (see `protected`)."""
        if any(_mutates(n) for n in self.graph.nodes):
            raise Unsupported("a try block after an in-place op (the graph could not be "
                              "run again if it raised)")
        self.protected = True

    # ---------------------------------------------------------------- inputs

    def wrap(self, value, source: str | None) -> Variable:
        """A variable for a real value read from the frame (guarded when it has a source)."""
        if type(value) is dict and source is not None:
            known = self.dict_variables.get(id(value))
            if known is not None and known[1] is value:
                if known[0].source != source:  # (its items are guarded through the first)
                    self.guards.add(f"{source} is {known[0].source}")
                return known[0]
        if self.written_dicts:
            from .objects import DICT_WRAPPERS

            bound = getattr(value, "__self__", None) if isinstance(
                value, types.BuiltinMethodType) else None
            if any(self.written_dicts.get(id(v), _NOTHING) is v for v in (value, bound)) or \
                    type(value) in DICT_WRAPPERS:  # (a view may read one)
                raise Unsupported("a dict read again after an item assignment in the graph")
        if self.stored_tables and (self.stored_tables.get(id(value), _NOTHING) is value or
                                   type(value) in _TABLE_VIEWS):
            raise Unsupported("an object's __dict__ read after an attribute assignment in the "
                              "graph")
        if isinstance(value, Tensor):
            if source is None:
                raise Unsupported("a tensor created outside the captured code without a "
                                  "source")
            check_not_replaced(self.state_overrides, value)
            return self._tensor_input(value, source)
        if source is None:
            return ConstantVariable(value)
        if type(value) is BlockExit:
            # The `__exit__` of a block a graph break split (an autocast region, an
            # inference-mode block), on the stack at a resume point: a new object on every
            # call, guarded by the block it leaves.
            self.guards.add(f"type({source}) is {self.guards.ref(BlockExit, 'type')} and "
                            f"{source}.kind is {self.guards.ref(value.kind, 'kind')} and "
                            f"{source}.args == {self.guards.ref(value.args, 'const')} and "
                            f"{source}.grad is {bool(value.grad)!r}")
            return value.kind.variable(value.kind, value.args, value.grad)
        if type(value) is int and self.dynamic_ints is not None and \
                self.dynamic_ints(source, value):
            return self._int_input(value, source)
        if type(value) is float and self.dynamic_floats is not None and \
                is_frame_input(source) and self.dynamic_floats(source, value):
            return self._float_input(value, source)
        if type(value) is list and self.stores:
            known = self.written_list(value)
            if known is not None:  # changed by the graph: its variable holds the new items
                if known.source != source:
                    self.guards.add(f"{source} is {known.source}")
                return known
        if type(value) is collections.deque:
            return self._deque_input(value, source)
        if type(value) is collections.OrderedDict and all(type(k) in (str, int)
                                                          for k in value):
            return self._ordered_dict_input(value, source)
        if type(value) is list:
            # read lazily (`OutsideListVariable`): one variable per real list
            known = self.outside_lists.get(id(value))
            if known is not None and known.real is value:
                if known.source != source:
                    self.guards.add(f"{source} is {known.source}")
                return known
            self.guards.add(f"type({source}) is list")
            var = OutsideListVariable(value, source, self)
            self.outside_lists[id(value)] = var
            return var
        if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
            self.guards.add(f"type({source}) is {type(value).__name__} and len({source}) == "
                            f"{len(value)}")
            items = [self.wrap(v, f"{source}[{i}]") for i, v in enumerate(value)]
            var = TupleVariable(items, source) if type(value) is tuple else \
                ListVariable(items, source)
            self.container_objects[id(var)] = (var, value)
            return var
        if isinstance(value, tuple) and type(value).__module__ == "fusegrad.return_types":
            # An op's named-tuple result carried across a graph break (`x.max(0)`).
            cls = type(value)
            self.guards.add(f"type({source}).__module__ == 'fusegrad.return_types' and "
                            f"type({source}).__name__ == {cls.__name__!r} and "
                            f"len({source}) == {len(value)}")
            items = [self.wrap(v, f"{source}[{i}]") for i, v in enumerate(value)]
            return TupleVariable(items, source, cls=cls)
        if isinstance(value, tuple) and _reads_fields(type(value)):
            # A named tuple from outside (a PackedSequence an LSTM gets, or one a call at a
            # break returned): guarded by its class and items, not its identity (a new
            # object on every call); its methods are inlined.
            cls = type(value)
            self.guards.add(f"type({source}) is {self.guards.ref(cls, 'type')} and "
                            f"len({source}) == {len(value)}")
            items = [self.wrap(v, f"{source}[{i}]") for i, v in enumerate(value)]
            var = TupleVariable(items, source, cls=cls)
            self.container_objects[id(var)] = (var, value)
            return var
        if type(value) is dict and all(type(k) in (str, int) for k in value):
            self.guards.add(f"type({source}) is dict and list({source}) == {list(value)!r}")
            if any(type(k) is int for k in value):  # 1 == 1.0 == True: the types matter too
                types_text = ", ".join(type(k).__name__ for k in value)
                self.guards.add(f"list(map(type, {source})) == [{types_text}]")
            var = DictVariable({k: self.wrap(v, f"{source}[{k!r}]") for k, v in value.items()},
                               source)
            self.container_objects[id(var)] = (var, value)
            for other, real in self.dict_variables.values():
                if id(real) in self.written_dicts:  # another dict now, on every call
                    self.guards.add(f"{source} is not {other.source}")
            self.dict_variables[id(value)] = (var, value)
            return var
        if isinstance(value, types.CellType):  # a frame's cell rebuilt at a graph break
            self.guards.add(f"type({source}) is {self.guards.ref(types.CellType, 'cell')}")
            return CellVariable(None, real=value, source=source)
        if isinstance(value, types.MethodType):
            # A bound method is a new object on every attribute read: guard what it binds.
            self.guards.add(f"type({source}) is {self.guards.ref(types.MethodType, 'method')}")
            self.guards.constant(f"{source}.__func__", value.__func__)
            bound = self.wrap(value.__self__, f"{source}.__self__")
            name = getattr(value.__func__, "__name__", "")
            if isinstance(bound, TensorVariable) and \
                    getattr(Tensor, name, None) is value.__func__:
                # A tensor's method (`y.backward` on the stack at a resume point): a method
                # call on the graph's tensor, never Tensor's Python run on fake values.
                return MethodVariable(bound, name)
            return ConstantVariable(value, source)
        if isinstance(value, types.BuiltinMethodType) and value.__self__ is not None and \
                not isinstance(value.__self__, types.ModuleType):
            self.guards.add(f"type({source}) is {self.guards.ref(type(value), 'method')} and "
                            f"{source}.__name__ == {value.__name__!r}")
            self.guards.constant(f"{source}.__self__", value.__self__)
            return ConstantVariable(value, source)
        if type(value) is functools.partial:
            # Guarded by what it holds, not by identity: a partial is often new on every
            # read (a compiled method, bound through `CompiledFunction.__get__`).
            self.guards.add(f"type({source}) is {self.guards.ref(functools.partial, 'partial')}")
            func = self.wrap(value.func, f"{source}.func")
            args = self.wrap(value.args, f"{source}.args")
            keywords = self.wrap(value.keywords, f"{source}.keywords")
            partial = PartialVariable(func, args.items, keywords.items)
            partial.source = source
            return partial
        if type(value) is set and all(_is_plain_data(v) for v in value):
            self.guards.add(f"type({source}) is set")
            self.guards.contents(source, value)
            return ConstantVariable(value, source)
        if type(value) is types.GeneratorType:
            self.guards.add(f"type({source}) is "
                            f"{self.guards.ref(types.GeneratorType, 'generator')}")
            return OutsideIteratorVariable(types.GeneratorType, source)
        if self.follow_objects:
            from .objects import follow_outside, is_layer_class

            varied = self.varying_modules is not None and is_layer_class(type(value)) and \
                self.varying_modules(source, value)
            followed = follow_outside(self, value, source, varied=varied)
            if followed is not None:
                return followed
        self.guards.constant(source, value)
        return ConstantVariable(value, source)

    def same_object(self, a, b) -> bool | None:
        """`a is b` for two containers read from the frame (their variables differ, their
        objects may not: one list passed twice), guarded; None unless both are such."""
        if a is b or a.source is None or b.source is None:
            return None
        ra, rb = self.container_objects.get(id(a)), self.container_objects.get(id(b))
        if ra is None or rb is None or ra[0] is not a or rb[0] is not b:
            return None
        same = ra[1] is rb[1]
        self.guards.add(f"{a.source} {'is' if same else 'is not'} {b.source}")
        return same

    def function_ref(self, func) -> str | None:
        """How guards name function `func` (whose cells and defaults an inlined call reads),
        or None for a function made during translation."""
        if any(f is func for f in self.fresh_functions):
            return None
        name = re.sub(r"[^0-9a-zA-Z]+", "_", getattr(func, "__name__", "fn"))
        return self.guards.ref(func, f"fn_{name}", weak=True)

    def _tensor_input(self, value: Tensor, source: str) -> TensorVariable:
        var = self.inputs.get(source)
        if var is not None:
            return var
        for other_source, other in self.input_values.items():
            if other is value:  # the same tensor reached by two paths: one input
                self.guards.add(f"{source} is {other_source}")
                return self.inputs[other_source]
        if self.grad_write:
            self._refuse_aliasing(value)
        dims = self.dynamic_dims(source, value) if self.dynamic_dims is not None else ()
        self.guards.tensor(source, value, dims)
        name = _unique_name(self.graph, placeholder_name(self._named_source(source)))
        # Parameters and buffers come first, then other inputs in first-use order (as Dynamo).
        is_param = is_state_source(source)
        first = next(iter(n for n in self.graph.nodes if n.op != "placeholder" or (
            is_param and "._parameters[" not in n.meta.get("source", "")
            and "._buffers[" not in n.meta.get("source", ""))), None)
        if first is not None:
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(name)
        else:
            node = self.graph.placeholder(name)
        fake = FakeTensor.from_tensor(value)
        if dims:
            fake = self._symbolic_fake(value, source, dims, node)
        node.meta["example_value"] = fake
        node.meta["source"] = source
        if is_param:  # (read here: its place among the inputs, `graph_inputs.py`)
            node.meta["read_after"] = last_op(self.created)
        self.created.append(node)
        var = TensorVariable(node, fake, source)
        self.inputs[source] = var
        self.input_values[source] = value
        return var

    def _named_source(self, source: str) -> str:
        """`source` as Dynamo names an input read through it: a cell of the frame's closure
        (`___closure[0].cell_contents`) by its variable's name (`L['scale']`), as the frame
        locals Dynamo reads it from."""
        found = _CLOSURE_SOURCE.match(source)
        if found is None or int(found.group(1)) >= len(self.closure_names):
            return source
        return f"L[{self.closure_names[int(found.group(1))]!r}]" + source[found.end():]

    def _symbolic_fake(self, value: Tensor, source: str, dims, node) -> FakeTensor:
        """A fake of densely laid out `value` whose sizes at `dims` are symbols (its strides
        products of them); each new symbol
        becomes a placeholder just before the tensor's (where Dynamo puts it)."""
        shape = list(value.shape)
        strict = strict_dims(value)
        for d in sorted(dims):
            sym_source = f"{source}.size()[{d}]"
            sym, new = self.shape_env.symbol(sym_source, shape[d], self.duck_sizing)
            shape[d] = sym
            if d in strict:
                self.strict_symbols.setdefault(sym.expr, sym_source)
            if new:
                with self.graph.inserting_before(node):
                    p = self.graph.placeholder(sym.expr)
                p.meta["example_value"] = sym
                p.meta["source"] = sym_source
                p.meta["symbol"] = True
                self.created.append(p)
                self.symbol_nodes[sym.expr] = p
                self.symbol_values[sym_source] = value.shape[d]
        # The input's strides as products of its sizes, in the order its dims lie in memory.
        fake = FakeTensor._make_fake(shape, value.dtype,
                                     dense_strides(shape, input_order(value)))
        fake._rg = value.requires_grad
        return fake

    def _int_input(self, value: int, source: str) -> ConstantVariable:
        """An integer read from the frame that is a symbol (it changed between captures):
        an integer input of the graph, as Dynamo makes it."""
        self.guards.add(f"type({source}) is int")
        for p in self.symbol_nodes.values():
            if p.meta.get("symbol") and p.meta.get("source") == source and \
                    p.meta["example_value"].hint == value:
                # Read again (`self.qp` twice): the same input, not a second placeholder of
                # the same name (and a second symbol the graph could not tell equal).
                return ConstantVariable(p.meta["example_value"])
        sym, new = self.shape_env.symbol(source, value, self.duck_sizing)
        if new:
            # Named after its source (`l_n_`), as Dynamo names an integer input.
            name = _unique_name(self.graph, placeholder_name(source))
            first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            if first is not None:
                with self.graph.inserting_before(first):
                    p = self.graph.placeholder(name)
            else:
                p = self.graph.placeholder(name)
            p.meta.update(example_value=sym, source=source, symbol=True)
            self.created.append(p)
            self.symbol_nodes[sym.expr] = p
            self.symbol_values[source] = value
        return ConstantVariable(sym)

    def derived_int(self, value: int, source: str):
        """A size computed from dynamic floats (`int((1 - r) * n)` of a float input `r`): an
        integer input of the graph that the segment computes from `source` on every call,
        a new symbol while translating (PyTorch keeps `sym_int` of the float in its graph).
        The symbol's range guard (`2 <= source`) keeps the values 0 and 1 (and negatives)
        out, as for sizes; `source` fails the guards where it raises (a NaN's `int`)."""
        for p in self.symbol_nodes.values():
            if p.meta.get("source") == source and p.meta["example_value"].hint == value:
                return p.meta["example_value"]
        sym, new = self.shape_env.symbol(source, value, self.duck_sizing)
        if new:
            first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            if first is not None:
                with self.graph.inserting_before(first):
                    p = self.graph.placeholder(sym.expr)
            else:
                p = self.graph.placeholder(sym.expr)
            p.meta.update(example_value=sym, source=source, symbol=True)
            self.created.append(p)
            self.symbol_nodes[sym.expr] = p
            self.symbol_values[source] = value
        return sym

    def _float_input(self, value: float, source: str) -> ConstantVariable:
        """A float read from the frame that changed between captures: a float input of the
        graph (a placeholder named after its source), a SymFloat while translating."""
        if source not in self.float_nodes:
            self.guards.add(f"type({source}) is float")
            first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            name = _unique_name(self.graph, placeholder_name(source))
            if first is not None:
                with self.graph.inserting_before(first):
                    p = self.graph.placeholder(name)
            else:
                p = self.graph.placeholder(name)
            p.meta.update(example_value=value, source=source, float_input=True)
            self.created.append(p)
            self.float_nodes[source] = p
            self.symbol_values[source] = value
        return ConstantVariable(SymFloat(value, self, leaf=source))

    def guards_with_sizes(self) -> GuardSet:
        """The guard set with what the symbolic sizes assumed (their ranges, the branches
        taken on them) added, as Python over sources."""
        for expr in self.shape_env.source_guards():
            self.guards.add(expr)
        return self.guards

    def as_node(self, v):
        """The graph argument for variable `v` (sizes computed from symbols become nodes)."""
        return _as_node(v, self)

    # ---------------------------------------------------------------- recording

    def call(self, kind: str, target, args: tuple, kwargs: dict) -> Variable:
        """Record a call_function / call_method node and compute its fake example."""
        if any(_holds_symfloat(a) for a in (*args, *kwargs.values())) and \
                self._depends_on_float(kind, target, args, kwargs):
            # The result's shape or dtype follows a float's value (`arange(v)`): the value
            # is fixed for this graph.
            args = tuple(_specialize_var(a) for a in args)
            kwargs = {k: _specialize_var(v) for k, v in kwargs.items()}
        node_args = _map(args, self.as_node)
        node_kwargs = {k: _map(v, self.as_node) for k, v in kwargs.items()}
        fake_args = _map(args, _as_example)
        fake_kwargs = {k: _map(v, _as_example) for k, v in kwargs.items()}
        if not self.grad_write and (_is_inplace(_target_name(target)) or any(
                k == "inplace" and isinstance(v, ConstantVariable) and v.value is True
                for k, v in kwargs.items())) and not (
                _is_fresh(args[0] if args else None) and
                not has_flag(_target_name(target), SHARES_MEMORY) and "out" not in kwargs):
            # (A write into a tensor the graph made, which no input can alias, leaves the
            # inputs alone whatever memory they share.)
            self.mutated = True
            if _thread_local.grad_enabled and any(
                    t.requires_grad for t in tensors_in((*fake_args, *fake_kwargs.values()))):
                # A write with history changes the autograd state of every alias of its
                # tensor (`requires_grad`, `grad_fn`), which the translation reads from
                # the fakes, one per input: aliasing inputs cannot share that graph.
                for value in self.input_values.values():
                    self._refuse_aliasing(value)
                self.grad_write = True
        unknown = self.fake_mode.unknown
        self.fake_mode.free.clear()
        watch = warnings.catch_warnings(record=True) if self.record_blocks else None
        try:
            with self.fake_mode, watch or contextlib.nullcontext() as caught:
                if watch is not None:
                    warnings.simplefilter("always")
                if kind == "call_function":
                    example = target(*fake_args, **fake_kwargs)
                else:
                    example = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
            if caught:
                raise Unsupported(f"{_target_name(target)} warns inside a "
                                  "warnings.catch_warnings(record=True) block")
        except DataDependentOutputError as e:
            raise Unsupported(f"data-dependent operation: {e}",
                              reason=reasons.data_dependent_output(str(e))) from None
        except (NotImplementedError, AttributeError, TypeError) as e:
            raise Unsupported(_fake_failure(target, e)) from None
        except (RuntimeError, ValueError, IndexError) as e:
            # The op fails for this input (a view of a non-contiguous tensor, a bad index):
            # run it for real, where it raises as it does eagerly.
            raise Unsupported(f"{_target_name(target)} raised {type(e).__name__}: {e}") \
                from None
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        self.created.append(node)
        if _makes_fresh(_target_name(target), args, kwargs):
            node.meta["fresh"] = True
        # Whether every op the call ran gave its result eager's strides (`layouts`), and
        # whether those of the call's results do not depend on its operands' layout.
        node.meta["layout_exact"] = self.fake_mode.unknown == unknown
        results = example if isinstance(example, (tuple, list)) else (example,)
        node.meta["layout_free"] = all(self.fake_mode.free.get(id(r)) is r for r in results)
        self.fake_mode.free.clear()
        if _mutates(node):
            if self.protected:
                raise Unsupported("an in-place op inside a try block (the graph could not "
                                  "be run again if it raised)")
            if node_args and hasattr(node_args[0], "op"):
                node.meta["inplace_of"] = node_args[0]
        return self.wrap_result(node, example)

    def _depends_on_float(self, kind, target, args, kwargs) -> bool:
        """Whether a call's result (shape, dtype) changes with the value of a dynamic float
        among its arguments: computed again with other values, on fake tensors."""
        def run(a, kw):
            with self.fake_mode:
                if kind == "call_function":
                    return target(*a, **kw)
                return getattr(a[0], target)(*a[1:], **kw)

        def shapes(r):
            if isinstance(r, Tensor):
                return (tuple(r.shape), r.dtype)
            if isinstance(r, (tuple, list)):
                return tuple(shapes(x) for x in r)
            return type(r)

        def example(numbers):
            return run(tuple(_as_example(a, numbers) for a in args),
                       {k: _as_example(v, numbers) for k, v in kwargs.items()})

        try:
            first = shapes(example(hints))
        except Exception:  # noqa: BLE001 (the call below raises it as capture does)
            return False
        for k in (0, 1):
            try:
                if shapes(example(lambda v, k=k: perturbed(v, k))) != first:
                    return True
            except Exception:  # noqa: BLE001, S112 (a value the op refuses: it raises
                continue  # that error when the graph runs, as eager does)
        return False

    def _refuse_aliasing(self, value: Tensor) -> None:
        """A graph break if `value` shares memory with another tensor input (the in-place op
        with history then runs for real, and what follows sees its effect through every
        alias). A write without history needs none: the graph's ops run on the inputs in
        the program's order, and AOT autograd refuses a trace that writes an input another
        one aliases."""
        for source, other in self.input_values.items():
            if other is not value and _shares_memory(other, value):
                raise Unsupported(f"an in-place op while tensor input {source} shares memory "
                                  "with another input")

    def set_grad_enabled(self, mode: bool) -> None:
        """Switch grad mode here in the graph (and now, for the fake ops that follow). A
        switch to the mode already on records no node, as Dynamo coalesces them: the mode
        the graph starts in is guarded, and every switch it makes is followed here."""
        from ..._thread_state import set_grad_enabled as set_mode

        if _thread_local.grad_mode != bool(mode):
            node = self.graph.call_function(set_grad_enabled, (bool(mode),))
            self.created.append(node)
        set_mode(mode)

    def enter_autocast(self, ctx) -> RegionExitVariable:
        """Enter autocast region `ctx` (a `fusegrad.autocast` object) here in the graph, and
        now, so the fake ops that follow cast as the program's ops will; returns the
        variable of the region's `__exit__`."""
        args = (ctx.device, ctx.fast_dtype, bool(ctx._enabled), bool(ctx._cache_enabled))
        return self.enter_region(args)

    def enter_region(self, args: tuple) -> RegionExitVariable:
        """Enter the autocast region of `enter_autocast` arguments `args` (in the graph and
        now); returns the variable of the region's `__exit__`."""
        return enter_graph_block(self, AUTOCAST, args)

    def exit_autocast(self) -> None:
        """Leave the innermost autocast region the graph entered (in the graph and now)."""
        leave_graph_block(self, AUTOCAST)

    @property
    def regions(self) -> list:
        """The `enter_autocast` arguments of the regions this graph entered and has not
        left, innermost last."""
        return [args for kind, args in self.open_blocks if kind is AUTOCAST]

    def enter_sdpa_kernel(self, switches: tuple) -> SdpaExitVariable:
        """Set the attention switches of a `with sdpa_kernel(...)` block (`switches`: pairs
        of switch name and value) here in the graph, and now, for the fake calls that
        follow; returns the variable of the block's `__exit__`."""
        self.created.append(self.graph.call_function(sdpa_kernel_enter, (switches,)))
        sdpa_kernel_enter(switches)
        return SdpaExitVariable()

    def exit_sdpa_kernel(self) -> None:
        """Restore the switches the innermost `with sdpa_kernel(...)` block found (in the
        graph and now)."""
        self.created.append(self.graph.call_function(sdpa_kernel_exit, ()))
        sdpa_kernel_exit()

    def recompute_region(self, enter: bool) -> None:
        """Enter (or leave) a region whose ops the backward recomputes (a checkpointed
        function's), here in the graph: nothing changes while translating."""
        target = enter_recompute_region if enter else exit_recompute_region
        self.created.append(self.graph.call_function(target, ()))

    def rename(self, node, name: str) -> None:
        """Give `node` a fresh name made from `name`; its old name stays taken, as in FX."""
        node.name = self.graph._namespace.create_name(name)

    def discard_since(self, mark: int) -> None:
        """Erase the nodes created after `mark` (newest first) and forget their inputs."""
        for node in reversed(self.created[mark:]):
            if node.op == "placeholder":
                source = node.meta["source"]
                if node.meta.get("float_input"):
                    self.float_nodes.pop(source, None)
                    self.symbol_values.pop(source, None)
                if node.meta.get("symbol"):
                    name = node.meta["example_value"].expr
                    self.shape_env.forget(name)
                    self.symbol_nodes.pop(name, None)
                    self.symbol_values.pop(source, None)
                self.inputs.pop(source, None)
                self.input_values.pop(source, None)
            for user in list(node.users):
                if user not in self.created[mark:]:
                    raise Unsupported("cannot undo a partly recorded instruction")
            self.graph.erase_node(node)
        del self.created[mark:]

    def wrap_result(self, node, example) -> Variable:
        """The variable for a node whose fake example is `example` (tensors, tuples, numbers)."""
        if isinstance(example, Tensor):
            node.meta["example_value"] = example
            return TensorVariable(node, example)
        if isinstance(example, tuple) and all(isinstance(e, Tensor) for e in example):
            node.meta["example_value"] = example

            items = []
            for i, e in enumerate(example):
                item = self.graph.call_function(operator.getitem, (node, i))
                self.created.append(item)
                item.meta["example_value"] = e
                items.append(TensorVariable(item, e))
            named = type(example) if hasattr(type(example), "_fields") else None
            return TupleVariable(items, cls=named)
        if example is None and node.target is operator.setitem:
            return ConstantVariable(None)
        if example is None:  # (a call done for its effects: a hook, an object's method)
            raise Unsupported(f"a call of {_target_name(node.target)} returned None, not a "
                              "tensor")
        if isinstance(example, (bool, int, float)):
            raise Unsupported("an op returned a Python number computed from tensor values")
        raise Unsupported(f"an op returned {type(example).__name__}")


# The `operator` functions that write into their first argument (`x += 1`, `x[i] = v`).
_INPLACE_OPERATORS = frozenset(["setitem"] + [f"i{n}" for n in (
    "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift").split()])


def _fake_failure(target, error: Exception) -> str:
    """Why a call failed on fake tensors. Code that reads a tensor's NumPy data (`._data`,
    which a fake tensor does not have) needs the values: named as such, with the line that
    reads them."""
    name = _target_name(target)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.line and "._data" in frame.line:
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
            return (f"{name} reads its input's values (`{frame.line.strip()}` at {where}), "
                    f"which the capture's fake tensors do not have: data-dependent, it runs "
                    f"for real ({type(error).__name__}: {error})")
    return f"{name} on fake tensors: {error}"


def _mutates(node) -> bool:
    """Whether a recorded node changes its first argument in place (`add_`, `iadd`,
    `__setitem__`, `relu(x, inplace=True)`)."""
    if node.op not in ("call_function", "call_method"):
        return False
    return _is_inplace(_target_name(node.target)) or node.kwargs.get("inplace") is True


def drop_grad_mode_round_trips(graph, mode: bool) -> None:
    """Erase each pair of adjacent nodes of `graph` that switch grad mode away from `mode`
    (the mode in force there) and straight back: a `no_grad` block left empty because an
    `enable_grad` block filled it. Dynamo's graphs leave these out, so the counts of ops
    they report agree."""
    nodes = list(graph.nodes)
    erased = set()
    for first, second in zip(nodes, nodes[1:]):
        if first.target is not set_grad_enabled or first in erased or \
                first.args != (not mode,):
            continue
        mode = first.args[0]
        if second.target is set_grad_enabled and second.args == (not mode,):
            mode = second.args[0]
            erased.update((first, second))
            graph.erase_node(first)
            graph.erase_node(second)


@has_side_effect
def set_grad_enabled(mode: bool) -> None:
    """Graph node target: set grad mode (what a `with no_grad()` block does on entry/exit)."""
    from ..._thread_state import set_grad_enabled as set_mode

    set_mode(mode)


class _Regions(threading.local):
    """The autocast regions graphs entered in this thread, innermost last."""

    def __init__(self):
        self.stack: list = []


_regions = _Regions()


@has_side_effect
def enter_autocast(device: str, dtype, enabled: bool, cache_enabled: bool) -> None:
    """Graph node target: enter an autocast region (a `with autocast(...)` block's entry)."""
    from ...amp.autocast_mode import autocast

    ctx = autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
    ctx.__enter__()
    _regions.stack.append(ctx)


@has_side_effect
def exit_autocast() -> None:
    """Graph node target: leave the innermost autocast region a graph entered."""
    _regions.stack.pop().__exit__(None, None, None)


class _SdpaBlocks(threading.local):
    """The attention switches each `with sdpa_kernel(...)` block a graph entered found (to
    restore on its exit), innermost last."""

    def __init__(self):
        self.stack: list = []


_sdpa_blocks = _SdpaBlocks()


def _sdpa_switches() -> dict:
    """The attention switches `scaled_dot_product_attention` reads (`backends.cuda`)."""
    from ...backends import cuda

    return cuda._sdp


@has_side_effect
def sdpa_kernel_enter(switches: tuple) -> None:
    """Graph node target: a `with sdpa_kernel(...)` block's entry (`switches`: pairs of
    switch name and value), as PyTorch's graph sets the attention backends."""
    table = _sdpa_switches()
    _sdpa_blocks.stack.append(dict(table))
    table.update(switches)


@has_side_effect
def sdpa_kernel_exit() -> None:
    """Graph node target: a `with sdpa_kernel(...)` block's exit (the switches restored)."""
    _sdpa_switches().update(_sdpa_blocks.stack.pop())


def sdpa_state() -> tuple:
    """The attention switches and the blocks graphs entered (to undo a graph that raised
    inside a block, or a translation that stopped in one)."""
    return dict(_sdpa_switches()), len(_sdpa_blocks.stack)


def restore_sdpa(state: tuple) -> None:
    """Undo what happened to the attention switches since `sdpa_state()` gave `state`."""
    del _sdpa_blocks.stack[state[1]:]
    _sdpa_switches().update(state[0])


class SdpaKernelContext:
    """The context manager `sdpa_kernel(backends)` gives in captured code, for the switches
    `switches` (pairs of switch name and value): the graph enters its block
    (`GraphBuilder.enter_sdpa_kernel`); code run for real (after a graph break) enters it
    as it would enter PyTorch's."""

    __slots__ = ("switches",)

    def __init__(self, switches: tuple):
        self.switches = switches

    def __enter__(self) -> dict:
        sdpa_kernel_enter(self.switches)
        return {}

    def __exit__(self, *exc) -> bool:
        sdpa_kernel_exit()
        return False


class SdpaExitVariable(Variable):
    """The `__exit__` of a `with sdpa_kernel(...)` block the graph entered: calling it (or an
    exception leaving the block) restores the switches, in the graph. It cannot be rebuilt
    at a graph break (the frame then runs eagerly from the segment's start)."""

    __slots__ = ()

    def __init__(self):
        super().__init__(None)

    def python_type(self) -> type:
        return object


def autocast_depth() -> int:
    """How many autocast regions graphs have entered and not left in this thread."""
    return len(_regions.stack)


def unwind_autocast(depth: int) -> None:
    """Leave the regions entered since `autocast_depth()` was `depth` (a translation that
    stopped inside a `with autocast()` block)."""
    while len(_regions.stack) > depth:
        exit_autocast()


class RegionExitVariable(AutocastExitVariable, BlockExitVariable):
    """The `__exit__` of an autocast region the graph entered (`args`: the region's
    `enter_autocast` arguments)."""

    __slots__ = ()

    def __init__(self, kind: BlockKind, args: tuple, grad: bool):
        BlockExitVariable.__init__(self, kind, args, grad)


AUTOCAST = BlockKind("autocast", enter_autocast, exit_autocast, autocast_depth, unwind_autocast,
                     RegionExitVariable)


def _as_node(v, builder=None):
    if isinstance(v, TensorVariable):
        return v.node
    if isinstance(v, ConstantVariable):
        if isinstance(v.value, Tensor):
            raise Unsupported("a tensor constant in a graph call")
        if builder is not None and _has_symbol(v.value):
            return _size_nodes(v.value, builder)
        if isinstance(v.value, (np.bool_, np.integer, np.floating)):
            # Graph code writes constants as Python literals: the number PyTorch reads.
            return python_scalar(v.value)
        return _plain_number(v.value)
    if isinstance(v, SliceVariable):
        return slice(_as_node(v.start, builder), _as_node(v.stop, builder),
                     _as_node(v.step, builder))
    if isinstance(v, ListVariable):
        return [_as_node(i, builder) for i in v.items]
    if isinstance(v, TupleVariable):
        return tuple(_as_node(i, builder) for i in v.items)
    raise Unsupported(f"argument of type {type(v).__name__} in a graph call")


def _plain_number(value):
    """An `IntEnum`/`IntFlag` member (or a float Enum's) as the plain number PyTorch reads
    it as: graph code writes constants as literals, and a member's repr is none."""
    if isinstance(value, enum.Enum) and isinstance(value, (int, float)) and \
            not isinstance(value, bool):
        return int(value) if isinstance(value, int) else float(value)
    return value


def _has_symbol(value) -> bool:
    if isinstance(value, (SymInt, SymFloat, SymText)):
        return True
    if isinstance(value, slice):
        return any(isinstance(v, SymInt) for v in (value.start, value.stop, value.step))
    return isinstance(value, (tuple, list)) and any(_has_symbol(v) for v in value)


def holds_symbol(value, depth: int = 0) -> bool:
    """Whether a plain Python value (nested in tuples, lists, dicts, sets, slices) holds a
    dynamic size or float: a value that differs between the calls one graph serves, so it
    must not be stored in a real object made while translating (that object is reused)."""
    if _has_symbol(value):
        return True
    if depth > 8:
        return False
    if isinstance(value, dict):
        return any(holds_symbol(k, depth + 1) or holds_symbol(v, depth + 1)
                   for k, v in value.items())
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(holds_symbol(v, depth + 1) for v in value)
    return False


def _size_nodes(value, builder):
    """A size (or a shape) holding symbols as graph arguments: symbols are the graph's
    integer inputs, expressions over them operator nodes (`s77 * 4`)."""
    if isinstance(value, SymInt):
        return value.node(builder.graph, builder.symbol_nodes, builder.created)
    if isinstance(value, SymFloat):
        return value.node()
    if isinstance(value, SymText):
        return value.text()
    if isinstance(value, slice):
        return slice(*(_size_nodes(v, builder) for v in (value.start, value.stop, value.step)))
    if not isinstance(value, (tuple, list)):
        return value
    items = [_size_nodes(v, builder) for v in value]
    return items if isinstance(value, list) else tuple(items)


def _as_example(v, numbers=hints):
    """The example (fake) argument for variable `v`; dynamic floats become `numbers(...)`
    of them (their hints)."""
    if isinstance(v, TensorVariable):
        return v.example
    if isinstance(v, ConstantVariable):
        return numbers(_plain_number(v.value))
    if isinstance(v, SliceVariable):
        return slice(*(_as_example(i, numbers) for i in (v.start, v.stop, v.step)))
    if isinstance(v, ListVariable):
        return [_as_example(i, numbers) for i in v.items]
    if isinstance(v, TupleVariable):
        return tuple(_as_example(i, numbers) for i in v.items)
    raise Unsupported(f"argument of type {type(v).__name__} in a graph call")


def _holds_symfloat(v) -> bool:
    if isinstance(v, ConstantVariable):
        return has_symfloat(v.value)
    if isinstance(v, (ListVariable, TupleVariable)):
        return any(_holds_symfloat(i) for i in v.items)
    return False


def _specialize_var(v):
    """Variable `v` with its dynamic floats fixed to their values (guarded)."""
    if isinstance(v, ConstantVariable) and has_symfloat(v.value):
        return ConstantVariable(specialize_all(v.value))
    if isinstance(v, ListVariable) and _holds_symfloat(v):
        return ListVariable([_specialize_var(i) for i in v.items])
    if isinstance(v, TupleVariable) and _holds_symfloat(v):
        return TupleVariable([_specialize_var(i) for i in v.items])
    return v


def _map(value, fn):
    if isinstance(value, tuple):
        return tuple(fn(v) for v in value)
    return fn(value)


def _is_inplace(name: str) -> bool:
    """True for an op that writes into its first argument (`add_`, `iadd`, `__setitem__`)."""
    if name.startswith("_") and not name.startswith("__"):
        return False  # private helpers (`_assert_async`) are not in-place ops
    return has_flag(name, INPLACE) or name.strip("_") in _INPLACE_OPERATORS


def _is_fresh(v) -> bool:
    """Whether graph variable `v` is a tensor whose memory the graph made (`_makes_fresh`),
    which no input of the graph can share."""
    return isinstance(v, TensorVariable) and v.node.meta.get("fresh", False)


def _makes_fresh(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether the result of call `name(*args, **kwargs)` is memory the graph made: a
    factory's or a copy's, or any op's on such a tensor as first argument (its result is
    new memory or a view of that argument; `out=` and `set_` excepted)."""
    if "out" in kwargs or has_flag(name, SHARES_MEMORY):
        return False
    if has_flag(name, FRESH) or has_flag(name, FACTORY):
        return True
    return bool(args) and _is_fresh(args[0])


def _target_name(target) -> str:
    # (an object called: its class, not its repr, which names an address)
    return target if isinstance(target, str) else getattr(
        target, "__name__", f"a {type(target).__qualname__} object")


_FIELD_GETTER = type(collections.namedtuple("_Probe", "a").a)


def _reads_fields(cls) -> bool:
    """Whether `cls` is a named tuple whose fields read its items (no field replaced by a
    property of the subclass), so a `TupleVariable` of it answers as the object does."""
    fields = getattr(cls, "_fields", None)
    if not issubclass(cls, tuple) or not isinstance(fields, tuple):
        return False
    return all(isinstance(inspect.getattr_static(cls, f, None), _FIELD_GETTER)
               for f in fields)
