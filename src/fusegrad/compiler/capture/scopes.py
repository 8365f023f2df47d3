"""Names beyond locals and globals: closure cells, `super()`, `import` inside a function and
generator expressions, class statements (a mixin of the translator).

Cells: a function whose variable a nested function captures keeps it in a cell (MAKE_CELL,
LOAD_DEREF/STORE_DEREF, LOAD_CLOSURE). While translating, a cell the frame made is a
`CellVariable` shared by the frame and every function made with it, so a nested function
that rebinds it (`nonlocal n; n += 1`) is seen by the frame, as in Python. A real cell from
outside (the compiled function's closure, or the frame's own after a graph break) is read
through its source and guarded; storing into it is replayed after the graph, like an
attribute. In concrete mode cells are real `types.CellType` objects in the frame's locals;
at a graph break a frame's cells are rebuilt as real cells.
"""

from __future__ import annotations

import builtins
import dis
import importlib
import importlib.util
import operator
import sys
import types
import weakref

from .builder import holds_symbol
from .variables import (
    BoundFunctionVariable,
    CellVariable,
    ConstantVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyAccumulateVariable,
    LazyChainVariable,
    LazyIteratorVariable,
    LazyMapVariable,
    LazyPairwiseVariable,
    ObjectVariable,
    SuperVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)
from .versions import PY312

_REBOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> {name: bool}


def cell_rebound(code: types.CodeType, name: str) -> bool:
    """Whether cell `name` of `code` is stored into (by `code` or a nested function's
    `nonlocal`) besides MAKE_CELL's initial argument value."""
    names = _REBOUND.setdefault(code, {})
    known = names.get(name)
    if known is None:
        known = names[name] = _stores(code, name)
    return known


def _stores(code: types.CodeType, name: str) -> bool:
    for inst in dis.get_instructions(code):
        if inst.opname in ("STORE_DEREF", "DELETE_DEREF") and inst.argval == name:
            return True
    return any(isinstance(c, types.CodeType) and name in c.co_freevars and _stores(c, name)
               for c in code.co_consts)


class ScopeOpcodes:
    """Cells, super(), imports and generator expressions (a mixin of `Translator`)."""

    # ---------------------------------------------------------------- cells

    def MAKE_CELL(self, inst):  # noqa: N802
        name = inst.argval
        bound = name in self.locals
        if self.concrete:
            value = self.locals[name].value if bound else None
            cell = types.CellType(value) if bound else types.CellType()
            self.locals[name] = ConstantVariable(cell)
            return
        self.locals[name] = CellVariable(self.locals[name] if bound else None,
                                         rebound=cell_rebound(self.code, name))

    def cell_of(self, name: str) -> Variable:
        """The cell variable (or, in concrete mode, the real cell) holding `name`."""
        if name in self.locals:
            cell = self.locals[name]
            if isinstance(cell, CellVariable) or (
                    isinstance(cell, ConstantVariable) and isinstance(cell.value, types.CellType)):
                return cell
            raise Unsupported(f"cell variable {name!r} holds no cell")
        k = self.code.co_freevars.index(name) if name in self.code.co_freevars else -1
        if k < 0 or k >= len(self.closure):
            raise Unsupported(f"cell variable {name!r}")
        cell = self.closure[k]
        if isinstance(cell, Variable):  # a cell made while translating
            return cell
        if self.concrete:
            return ConstantVariable(cell)
        source = None if self.closure_ref is None else f"{self.closure_ref}[{k}]"
        return CellVariable(None, real=cell, source=source, rebound=True)

    def _load_deref(self, name: str) -> None:
        self.push(self.cell_contents(self.cell_of(name), name))

    def cell_contents(self, cell: Variable, name: str) -> Variable:
        """What a cell holds (a NameError-free read: an empty cell is a graph break)."""
        if isinstance(cell, ConstantVariable):  # concrete: a real cell
            try:
                return ConstantVariable(cell.value.cell_contents)
            except ValueError:
                raise NameError(f"cannot access free variable {name!r} where it is not "
                                "associated with a value in enclosing scope") from None
        if cell.real is not None and cell.contents is None:
            stored = self.builder.stored_attr(cell.real, "cell_contents")
            if stored is not None:  # rebound earlier in this graph
                return stored
            try:
                value = cell.real.cell_contents
            except ValueError:
                raise Unsupported(f"empty cell {name!r}") from None
            # Cells can be rebound (`nonlocal`, or a mutable object's new contents): guard
            # the contents as any other input.
            return self.wrap(value, None if cell.source is None else
                             f"{cell.source}.cell_contents")
        if cell.contents is None:
            raise Unsupported(f"empty cell {name!r}")
        return cell.contents

    def STORE_DEREF(self, inst):  # noqa: N802
        cell = self.cell_of(inst.argval)
        value = self.pop()
        if isinstance(cell, ConstantVariable):
            cell.value.cell_contents = value.value
            return
        if cell.real is not None:
            if cell.source is None:
                raise Unsupported(f"storing into the closure cell {inst.argval!r} of a "
                                  "function made outside the graph (a side effect)")
            # A cell that exists outside the graph: set after the graph ran, as attributes.
            self.builder.store_attr(cell.real, "cell_contents", value, cell.source)
            return
        if isinstance(value, TensorVariable) and value.source is None:
            self._name_node(value.node, inst.argval)
        cell.contents = value

    def DELETE_DEREF(self, inst):  # noqa: N802
        cell = self.cell_of(inst.argval)
        if isinstance(cell, ConstantVariable):
            del cell.value.cell_contents
        elif cell.real is not None:
            raise Unsupported("deleting a closure cell made outside the graph")
        else:
            cell.contents = None

    def closure_cells(self, items: list):
        """Real cells for MAKE_FUNCTION where that is sound (cells of functions made while
        translating, or cells made here holding a constant never rebound), else None: the
        function is then a variable sharing the frame's cells."""
        cells = []
        for c in items:
            if isinstance(c, ConstantVariable) and isinstance(c.value, types.CellType):
                cells.append(c.value)
            elif isinstance(c, CellVariable) and c.real is not None and (
                    self.concrete or c.source is None):
                cells.append(c.real)  # (a cell read through a source stays a variable: its
                # contents are guarded through that source when the function reads them)
            elif isinstance(c, CellVariable) and not c.rebound and \
                    isinstance(c.contents, ConstantVariable) and \
                    (self.concrete or not holds_symbol(c.contents.value)):
                # (a dynamic size in a real cell would be the value of this capture's
                # example in every later call the graph serves)
                cells.append(types.CellType(c.contents.value))
            else:
                return None
        return tuple(cells)

    # ---------------------------------------------------------------- super()

    def make_super(self, args: list) -> Variable:
        """`super()` (the frame's `__class__` cell and first argument) or `super(cls, obj)`."""
        if len(args) == 2:
            cls = self.as_python(args[0])
            obj = args[1]
        elif not args and "__class__" in self.code.co_freevars and self.code.co_argcount:
            cls = self.cell_contents(self.cell_of("__class__"), "__class__")
            cls = self.as_python(cls)
            first = self.code.co_varnames[0]
            obj = self.locals[first]
            if isinstance(obj, CellVariable):
                obj = self.cell_contents(obj, first)
        else:
            raise Unsupported("super() outside a method")
        if self.concrete:
            return ConstantVariable(super(cls, obj.value))
        if not isinstance(cls, type) or not isinstance(obj, (ConstantVariable, ObjectVariable)):
            raise Unsupported("super() of a value not known while translating")
        return SuperVariable(cls, obj)

    def super_attr(self, sup, name: str) -> Variable:
        """`super(cls, obj).name`: a user method binds to obj (and is inlined when called);
        other attributes are constants. Guards that the class defining it still does."""
        obj = sup.obj.value
        mro = type(obj).__mro__ if not isinstance(obj, type) else obj.__mro__
        if sup.cls not in mro:
            raise Unsupported("super() with an unrelated class")
        owner = next((k for k in mro[mro.index(sup.cls) + 1:] if name in vars(k)), None)
        if owner is None:
            raise Unsupported(f"super() attribute {name!r} not found")
        raw = vars(owner)[name]
        guards = self.builder.guards
        guards.add(f"{guards.ref(owner, 'type')}.__dict__.get({name!r}) is "
                   f"{guards.ref(raw, 'attr')}")
        if isinstance(raw, types.FunctionType) and not isinstance(obj, type):
            return BoundFunctionVariable(raw, sup.obj)
        value = getattr(super(sup.cls, obj), name)
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            return BoundFunctionVariable(value.__func__, ConstantVariable(value.__self__))
        return ConstantVariable(value)

    def LOAD_SUPER_ATTR(self, inst):  # noqa: N802
        obj = self.pop()
        cls = self.pop()
        sup = self.pop()
        if not (isinstance(sup, ConstantVariable) and sup.value is super):
            raise Unsupported("LOAD_SUPER_ATTR with a `super` that is not the builtin")
        if inst.arg & 2:  # super(cls, obj)
            made = self.make_super([cls, obj])
        else:
            made = self._zero_arg_super(cls, obj)
        self._push_callable(self.get_attr(made, inst.argval), inst.arg & 1)

    def _zero_arg_super(self, cls: Variable, obj: Variable) -> Variable:
        if self.concrete:
            return ConstantVariable(super(cls.value, obj.value))
        if not isinstance(obj, (ConstantVariable, ObjectVariable)):
            raise Unsupported("super() of a value not known while translating")
        return SuperVariable(self.as_python(cls), obj)

    # ---------------------------------------------------------------- import

    def IMPORT_NAME(self, inst):  # noqa: N802
        fromlist = self.pop()
        level = self.pop()
        fromlist, level = self.as_python(fromlist), self.as_python(level)
        name = inst.argval
        if not self.concrete:
            # Importing a module that is already loaded runs no code: it is a lookup.
            package = self.f_globals.get("__package__") or self.f_globals.get("__name__")
            try:
                full = importlib.util.resolve_name("." * level + name, package) if level \
                    else name
            except (ImportError, ValueError) as e:
                raise Unsupported(f"import of {name!r}: {e}") from None
            if full not in sys.modules or any(
                    f"{full}.{f}" not in sys.modules and not hasattr(sys.modules[full], f)
                    for f in fromlist or ()):
                raise Unsupported(f"import of {full!r}, which is not loaded yet")
        module = importlib.__import__(name, self.f_globals, None, fromlist, level)
        self.push(ConstantVariable(module))

    def IMPORT_FROM(self, inst):  # noqa: N802
        module = self.stack[-1]
        if self.concrete:
            try:
                value = getattr(module.value, inst.argval)
            except AttributeError:
                full = f"{module.value.__name__}.{inst.argval}"
                value = importlib.import_module(full)
            self.push(ConstantVariable(value))
            return
        self.push(self.get_attr(module, inst.argval))

    # ---------------------------------------------------------------- class statements

    def LOAD_BUILD_CLASS(self, inst):  # noqa: N802
        # A `class` statement calls `__build_class__` with its body's function: that call is
        # a graph break (calls.py), so the body runs for real, once per call as in eager,
        # and capture resumes after the statement, as Dynamo does.
        self.push(ConstantVariable(builtins.__build_class__))

    # ---------------------------------------------------------------- generator expressions

    def RETURN_GENERATOR(self, inst):  # noqa: N802
        self.push(ConstantVariable(None))  # only run when a generator is consumed

    def YIELD_VALUE(self, inst):  # noqa: N802
        if self.yields is None:
            raise Unsupported("yield outside a generator expression being consumed")
        self.yields.append(self.pop())
        self.push(ConstantVariable(None))  # what `next()` sends

    def GET_YIELD_FROM_ITER(self, inst):  # noqa: N802
        if not isinstance(self.stack[-1], GeneratorVariable):  # (a generator is kept)
            self.push(self.iterator_of(self.pop()))

    def SEND(self, inst):  # noqa: N802
        """`yield from it`'s step: the delegated iterator's next item (yielded next), or
        its return value once it is used up (the jump to the code after the loop)."""
        sent = self.pop()
        it = self.stack[-1]
        if not (isinstance(sent, ConstantVariable) and sent.value is None):
            raise Unsupported("a value sent into a generator delegated to by yield from")
        if not isinstance(it, (LazyIteratorVariable, IteratorVariable)) or \
                isinstance(it, IteratorVariable) and it.watch is not None:
            raise Unsupported("yield from an iterator capture does not follow")
        item = self._part_next(it)
        if item is not None:
            self.push(item)
            return
        if not PY312:  # (3.11's SEND pops the iterator; 3.12's END_SEND does)
            self.pop()
        self.push(it.returned if isinstance(it, GeneratorVariable) else ConstantVariable(None))
        self.jump_to(inst.argval)

    def END_SEND(self, inst):  # noqa: N802
        value = self.pop()
        self.pop()
        self.push(value)

    def next_item(self, it: Variable) -> Variable | None:
        """The next item of a lazy iterator (a generator expression's code run up to its next
        `yield`; an enumerate/zip of such), or None once it is used up."""
        if it.done:
            return None
        if isinstance(it, GeneratorVariable):
            return self._generator_next(it)
        if isinstance(it, LazyMapVariable):
            return self._map_next(it)
        if isinstance(it, LazyChainVariable):
            return self._chain_next(it)
        if isinstance(it, LazyPairwiseVariable):
            return self._pairwise_next(it)
        if isinstance(it, LazyAccumulateVariable):
            return self._accumulate_next(it)
        parts = self._next_parts(it)
        if parts is None:
            return None
        if it.start is None:
            return TupleVariable(parts)
        it.start += 1
        return TupleVariable([ConstantVariable(it.start - 1), parts[0]])

    def _next_parts(self, it) -> list | None:
        """The next item of each of `it`'s parts, or None (and `it` used up) once one is."""
        parts = []
        for part in it.parts:  # (a zip takes the parts' items in order, as the builtin)
            item = self._part_next(part)
            if item is None:
                it.done = True
                return None
            parts.append(item)
        return parts

    def _part_next(self, part) -> Variable | None:
        """The next item of an iterator taken apart (lazy, or a list's), or None."""
        if isinstance(part, LazyIteratorVariable):
            return self.next_item(part)
        if part.index < len(part.items):
            part.index += 1
            return part.items[part.index - 1]
        return None

    def _pairwise_next(self, it) -> Variable | None:
        if it.last is None:  # the first pair takes two items
            it.last = self._part_next(it.part)
        item = None if it.last is None else self._part_next(it.part)
        if item is None:
            it.done = True
            return None
        pair, it.last = TupleVariable([it.last, item]), item
        return pair

    def _accumulate_next(self, it) -> Variable | None:
        from .calls import call_variable

        if it.initial is not None:  # given: the first total, before any item is taken
            it.total, it.initial = it.initial, None
            return it.total
        item = self._part_next(it.part)
        if item is None:
            it.done = True
            return None
        if it.total is None:
            it.total = item
        elif it.func is None:
            it.total = self.apply(operator.add, (it.total, item))
        else:
            it.total = call_variable(self, it.func, [it.total, item], {})
        return it.total

    def _chain_next(self, it) -> Variable | None:
        while it.parts:
            item = self._part_next(it.parts[0])
            if item is not None:
                return item
            it.parts.pop(0)  # used up: the next part's items follow
        it.done = True
        return None

    def _map_next(self, it) -> Variable | None:
        from .calls import _evaluate, call_variable

        while (parts := self._next_parts(it)) is not None:
            if not it.keep:
                return call_variable(self, it.func, parts, {})
            test = parts[0] if it.func is None else call_variable(self, it.func, parts, {})
            if _evaluate(self, bool, [test], {}).value:
                return parts[0]
        return None

    def _generator_next(self, gen: GeneratorVariable) -> Variable | None:
        from .calls import start_inline
        from .exceptions import Raised
        from .translator import Return

        if gen.frame is None:  # (Python runs none of its code before the first item)
            gen.frame = start_inline(self, gen.func, list(gen.args), dict(gen.kwargs),
                                     closure=gen.closure, yields=[], defaults=gen.defaults)
            self.builder.started_generators.append(gen)
        frame = gen.frame
        while not frame.yields:
            try:
                frame.step()
            except Return as r:
                gen.done, gen.frame, gen.returned = True, None, r.value
                return None
            except Raised:  # an exception leaving a generator finishes it, as in Python
                gen.done, gen.frame = True, None
                raise
        return frame.yields.pop()

    def generator_items(self, it: Variable) -> list:
        """The items a lazy iterator has left, made now for what consumes them all at once
        (`tuple(...)`, `sum`, unpacking; a second consumer finds it used up, as in Python)."""
        items = []
        while (item := self.next_item(it)) is not None:
            items.append(item)
        return items
