"""Exceptions in captured code: `raise`, `assert`, `try/except/finally` and `with` blocks
(CPython 3.11+ exception tables), as a mixin of the translator.

Symbolically, an exception the code raises itself (`raise ValueError("...")`, an assertion
whose condition is known while translating) is an ordinary value: `raise` looks up the
handler of the instruction in the code's exception table and jumps there, as CPython does,
so a `try` whose `except` catches it stays in the graph. An exception no handler of the
captured frames catches is a graph break at the `raise`: the graph so far runs, then the
`raise` runs for real. A raise on a path not taken is never translated and costs nothing.

`assert` on a graph tensor becomes an `_assert_async` node that raises the same
AssertionError when the graph runs (no break).

In concrete mode (one instruction run for real) a real exception is routed to the handler of
the instruction the same way; the handler and the rest of the frame then run eagerly.
"""

from __future__ import annotations

import copy
import dis
import types
import warnings
import weakref

from ...fx import has_side_effect
from .blocks import (
    BlockExitVariable,
    CatchWarningsExitVariable,
    CatchWarningsVariable,
    InferenceModeVariable,
    enter_block,
    leave_graph_block,
)
from .builder import SdpaExitVariable, SdpaKernelContext
from .guards import _is_plain_data
from .variables import (
    AutocastExitVariable,
    BoundFunctionVariable,
    ConstantVariable,
    DictVariable,
    GeneratorContextVariable,
    GeneratorExitVariable,
    GradExit,
    GradModeVariable,
    ListVariable,
    ObjectVariable,
    TensorVariable,
    TruthVariable,
    Unsupported,
    Variable,
    ignored_region_exit,
)

# Modules whose Python functions are called for real, never inlined (a call is a break, as
# Dynamo skips them): `warnings` swaps its module's filters and functions, each statement a
# side effect (`calls._is_user_function`).
NOT_INLINED_MODULES = frozenset({"warnings"})
# Context managers not inlined (a `with` over one is a break): fusegrad's own change global
# modes, and those of the modules above (`warnings.catch_warnings`).
_NOT_INLINED_MANAGERS = ("fusegrad", *sorted(NOT_INLINED_MODULES))


def _record_function_class() -> type:
    from ...profiler import record_function

    return record_function


def _autocast_class() -> type:
    from ...amp.autocast_mode import autocast

    return autocast


def is_autocast_type(cls) -> bool:
    """`cls` is `fusegrad.autocast` or one of its deprecated per-device spellings
    (`cuda.amp.autocast`, `cpu.amp.autocast`: the same class with the device filled in)."""
    base = _autocast_class()
    if cls is base:
        return True
    from ...cuda.amp import autocast as cuda_autocast

    # (every deprecated spelling is made by one factory: their constructors share code)
    init = getattr(vars(cls).get("__init__") if isinstance(cls, type) else None,
                   "__code__", None)
    return init is not None and init is vars(cuda_autocast)["__init__"].__code__ and \
        cls.__bases__ == (base,) and len(vars(cls).keys() - _FACTORY_NAMES) == 0


# What the deprecated autocast factory's classes define (no method of the region's own).
_FACTORY_NAMES = frozenset({"__init__", "__doc__", "__module__", "__qualname__", "__dict__",
                            "__weakref__", "__firstlineno__", "__static_attributes__"})


def catch_warnings_break(tr) -> Unsupported:
    """The break at `warnings.catch_warnings()` (its call, or a `with` over one from
    outside). The block swaps the warnings module's filters and functions for real, so each
    of its statements would break again: as Dynamo gives up on a function's frame there
    (counting the break, keeping no graph of it), the segment runs eagerly from its start
    (`segments.py`), the ops before the block included. A module's forward, which Dynamo
    reaches through the module's call, keeps the graph before the block unless it is
    empty."""
    error = Unsupported("a with block over warnings.catch_warnings()")
    error.warnings_block = True
    if tr.parent is None and (not tr.builder.module_frame or not any(
            n.op not in ("placeholder", "output") for n in tr.builder.graph.nodes)):
        error.rest_eager = "at the block's entry"
    return error


def _type_of(v: Variable) -> type | None:
    """The type of the value `v` stands for, or None where the variable cannot say."""
    try:
        return v.python_type()
    except NotImplementedError:
        return None


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> its entries


def exception_entries(code: types.CodeType) -> list:
    """The exception table of `code`: (start, end, target, depth, lasti) entries."""
    entries = _TABLES.get(code)
    if entries is None:
        entries = _TABLES[code] = [(e.start, e.end, e.target, e.depth, e.lasti)
                                   for e in dis.Bytecode(code).exception_entries]
    return entries


_CLEANUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cleanups(tr) -> set:
    """Offsets of `tr.code`'s comprehension cleanup handlers (3.12+), cached per code."""
    found = _CLEANUPS.get(tr.code)
    if found is None:
        from .versions import comprehension_cleanups

        found = _CLEANUPS[tr.code] = comprehension_cleanups(tr.code, tr.insts, tr.index_of)
    return found


class Raised(Unsupported):
    """An exception raised by the code being translated (its value is a constant). A frame
    with a handler for it continues there; one no frame catches is a graph break."""

    def __init__(self, exc: ConstantVariable):
        super().__init__(f"an exception is raised: {exc.value!r}")
        self.exc = exc


def _plain_exception_class(cls) -> bool:
    """An exception class whose construction runs no Python code (so making an instance
    while translating has no side effect): builtins and subclasses that add no __init__."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return False
    for k in cls.__mro__:
        if k.__module__ == "builtins":
            continue
        if "__init__" in vars(k) or "__new__" in vars(k):
            return False
    return True


def make_exception(cls, args: list, kwargs: dict):
    """`cls(*args)` for an exception class that runs no Python code, else None."""
    if kwargs or not _plain_exception_class(cls):
        return None
    return cls(*args)


def fresh_exception(exc: BaseException) -> BaseException:
    """A new exception like `exc` (made once while translating, raised on every call), with
    its cause and context."""
    try:
        new = copy.copy(exc)
    except Exception:  # noqa: BLE001 - `cls(*args)` fails: an __init__ of other parameters
        # (`MyError(msg, code)` passing only `msg` on): the instance is made without its
        # __init__, with the original's arguments and attributes.
        new = BaseException.__new__(type(exc), *exc.args)
        new.args = exc.args
        if hasattr(exc, "__dict__"):
            new.__dict__.update(exc.__dict__)
    new.__cause__, new.__context__ = exc.__cause__, exc.__context__
    new.__suppress_context__ = exc.__suppress_context__
    return new


def assert_async(condition, message=None) -> None:
    """Graph node target: `assert condition, message` on a tensor the graph computed."""
    from ... import _thread_state
    from ..._fake import FakeTensor

    if isinstance(condition, FakeTensor):
        # While translating only the real run knows the value; a tracer (AOT autograd)
        # records the check into the graph it builds instead.
        for mode in reversed(_thread_state.local.modes):
            if hasattr(mode, "record_call"):
                mode.record_call(assert_async, (condition, message))
                break
        return
    if not condition:
        raise AssertionError(message) if message is not None else AssertionError


assert_async.__name__ = "_assert_async"
has_side_effect(assert_async)  # graph passes keep its nodes although nothing reads them
# Generated code calls it between kernels on the condition's value, so it raises as here.
assert_async.lowering = lambda v, condition, message=None: v.effect(assert_async, condition,
                                                                     message)


@has_side_effect  # kept by graph passes although nothing reads it
def check_values(bad, message: str) -> None:
    """Graph node target: raise `RuntimeError(message)` when boolean tensor `bad` holds True
    (the values check an eager op makes before it computes, such as `normal`'s of a std
    tensor's signs), when the graph runs."""
    from ... import _thread_state
    from ..._fake import FakeTensor

    if isinstance(bad, FakeTensor):  # (recorded by a tracer, as `assert_async`)
        for mode in reversed(_thread_state.local.modes):
            if hasattr(mode, "record_call"):
                mode.record_call(check_values, (bad, message))
                break
        return
    if bad:
        raise RuntimeError(message)


check_values.lowering = lambda v, bad, message: v.effect(check_values, bad, message)


class ExceptionOpcodes:
    """`raise`, `assert`, exception handlers and `with` exits (a mixin of `Translator`).

    Uses `self.handled`: the exceptions being handled (innermost last), as CPython's
    exception state; `self.raised`: set in concrete mode when a real exception was routed
    to a handler (the rest of the frame then runs eagerly)."""

    def handler_entry(self, offset: int):
        """The exception table entry covering `offset`, or None."""
        for entry in exception_entries(self.code):
            if entry[0] <= offset < entry[1]:
                return entry
        return None

    def route_exception(self, entry, exc: Variable, offset: int) -> None:
        """Continue at `entry`'s handler with `exc` raised by the instruction at `offset`."""
        _start, _end, target, depth, lasti = entry
        del self.stack[depth:]
        if lasti:
            self.push(ConstantVariable(offset))
        self.push(exc)
        self.pc = self.index_of[target]

    def in_try_block(self, offset: int) -> bool:
        """Whether the instruction at `offset` lies in a `try` block or an exception handler
        of this frame, seen through the `with` blocks around it (whose cleanup passes an
        exception on to the block enclosing them) and 3.12+ comprehension cleanups. Dynamo
        (3.11+) resumes after a graph break only in `with` blocks that are not inside a try
        block: elsewhere it gives the frame up."""
        entry = self.handler_entry(offset)
        while entry is not None:
            target = entry[2]
            k = self.index_of[target]
            names = [i.opname for i in self.insts[k:k + 2]]
            if names == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]:
                # A with block's cleanup: its own handler (which pops the exception) is
                # covered by the entry of the block enclosing the with statement.
                inner = self.handler_entry(target)
                entry = None if inner is None else self.handler_entry(inner[2])
            elif target in _cleanups(self):
                entry = self.handler_entry(target)
            else:
                return self.insts[k].opname != "CALL_INTRINSIC_1"  # (a generator's wrapper)
        return False

    def protected(self, offset: int) -> bool:
        """Whether an exception at `offset` could be caught in this frame by code that is
        not a grad-mode `with` block's exit (which only restores the mode and re-raises)."""
        entry = self.handler_entry(offset)
        if entry is None:
            return False
        if self.insts[self.index_of[entry[2]]].opname == "CALL_INTRINSIC_1":
            return False  # a generator's StopIteration check: other exceptions pass through
        if entry[2] in _cleanups(self):
            return False  # an inlined comprehension's: it only restores a variable
        depth = entry[3]
        k = self.index_of[entry[2]]
        # Only a `with` block's own cleanup: a `try` inside the block has the block's exit
        # below its handler's depth too.
        if [i.opname for i in self.insts[k:k + 2]] == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"] \
                and 0 < depth <= len(self.stack):
            below = self.stack[depth - 1]
            if isinstance(below, (GradModeVariable, AutocastExitVariable,
                                  SdpaExitVariable)) or (
                    isinstance(below, ConstantVariable) and isinstance(below.value, GradExit)):
                return False
        return True

    # ---------------------------------------------------------------- opcodes

    def LOAD_ASSERTION_ERROR(self, inst):  # noqa: N802
        self.push(ConstantVariable(AssertionError))

    def RAISE_VARARGS(self, inst):  # noqa: N802
        cause = self.pop() if inst.arg == 2 else None
        if inst.arg == 0:  # bare `raise`: the exception being handled
            if not self.handled:
                if self.concrete:
                    raise RuntimeError("No active exception to reraise")
                raise Unsupported("a bare raise outside an except block")
            exc = self.handled[-1]
        else:
            exc = self._exception_value(self.pop())
        if cause is not None:
            if not self.concrete and (exc.source is not None or
                                      not isinstance(cause, ConstantVariable)):
                raise Unsupported("raise ... from ... of an exception from outside the graph")
            value = None if cause.value is None else self._exception_value(cause).value
            exc.value.__cause__ = value  # `raise X from Y` (or from None)
            exc.value.__suppress_context__ = True
        self.raise_exception(exc)

    def _exception_value(self, v: Variable) -> ConstantVariable:
        if not isinstance(v, ConstantVariable):
            raise Unsupported(f"raise of a {type(v).__name__}")
        value = v.value
        if isinstance(value, type):
            made = value() if self.concrete else make_exception(value, [], {})
            if made is None:
                raise Unsupported(f"raise of {value.__name__} (its constructor runs code)")
            return ConstantVariable(made)
        if not isinstance(value, BaseException):
            if self.concrete:
                raise TypeError("exceptions must derive from BaseException")
            raise Unsupported("raise of a value that is not an exception")
        return v

    def raise_exception(self, exc: ConstantVariable) -> None:
        """Raise `exc` in the program: for real in concrete mode, symbolically otherwise."""
        value = exc.value
        if self.handled and value.__context__ is None and value is not \
                self.handled[-1].value and (self.concrete or exc.source is None):
            value.__context__ = self.handled[-1].value  # what Python's raise would set
        if self.concrete:
            raise value
        raise Raised(exc)

    def PUSH_EXC_INFO(self, inst):  # noqa: N802
        exc = self.pop()
        self.push(self.handled[-1] if self.handled else ConstantVariable(None))
        self.handled.append(exc)
        self.push(exc)

    def POP_EXCEPT(self, inst):  # noqa: N802
        self.pop()
        if self.handled:
            self.handled.pop()

    def CHECK_EXC_MATCH(self, inst):  # noqa: N802
        cls = self.as_python(self.pop())  # a class or a tuple of classes
        exc = self.stack[-1]
        if not isinstance(exc, ConstantVariable):
            raise Unsupported("except clause on a value not known while translating")
        self.push(ConstantVariable(isinstance(exc.value, cls)))

    def RERAISE(self, inst):  # noqa: N802
        exc = self.pop()
        if inst.arg:
            self.pop()  # the offset CPython sets as f_lasti
        self.raise_exception(exc)

    def BEFORE_WITH(self, inst):  # noqa: N802
        if self.concrete:
            value = self.pop().value
            self.push(ConstantVariable(type(value).__exit__.__get__(value)))
            self.push(ConstantVariable(type(value).__enter__(value)))
            return
        cm = self.pop()
        try:
            self._enter_with(cm)
        except Unsupported as e:
            # A block whose entry breaks (a context capture does not understand, a class's
            # `__enter__` that breaks): Dynamo cannot resume inside such a block and runs
            # the frame from its resume point eagerly, block and all, counting no break;
            # so does the compiled frame (not an inlined one: its caller breaks at the
            # call, and the callee is a frame of its own). `catch_warnings` keeps its own
            # rule (`catch_warnings_break`), and a `@contextmanager` generator that breaks
            # before its `yield` is entered for real at the `with`, the block captured
            # after it (the generator's state is the context's, not the frame's), a break
            # that counts none, as Dynamo's giving up there.
            if self.parent is None and isinstance(cm, GeneratorContextVariable):
                e.counted = False
            elif self.parent is None and not getattr(e, "warnings_block", False):
                e.rest_eager = "at a with block's entry"
                e.skips_frame = True
                # (Dynamo counts the one at a `contextlib` manager it refuses by name,
                # `redirect_stdout`, and none where it gives up inside `__enter__`)
                e.counted = getattr(_type_of(cm), "__module__", None) == "contextlib"
            raise

    def _enter_with(self, cm) -> None:
        """BEFORE_WITH of context manager `cm` (popped) while translating."""
        from ..._thread_state import local
        from ...autograd.grad_mode import _NoParamContext

        if isinstance(cm, GeneratorContextVariable):  # a `@contextmanager` function's
            from .calls import enter_generator_context

            value = enter_generator_context(self, cm)
            self.push(GeneratorExitVariable(cm))
            self.push(value)
            return
        if isinstance(cm, ConstantVariable) and isinstance(cm.value, _NoParamContext):
            cm = GradModeVariable(type(cm.value)._target)  # a kept `no_grad()` object
        cls = type(cm.value) if isinstance(cm, ConstantVariable) else None
        if cls is not None and not _is_plain_data(cm.value) and \
                not cls.__module__.startswith(_NOT_INLINED_MANAGERS):
            # A user's context manager written in Python: inline __enter__, and __exit__
            # later. (fusegrad's own, a kept no_grad() object, change global modes.)
            enter, exit_ = getattr(cls, "__enter__", None), getattr(cls, "__exit__", None)
            if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
                src = self.guard_root(cm)
                if src is not None:
                    guards = self.builder.guards
                    guards.add(f"type({src}).__enter__ is {guards.ref(enter, 'fn')} and "
                               f"type({src}).__exit__ is {guards.ref(exit_, 'fn')}")
                self.push(BoundFunctionVariable(exit_, cm))
                self.push(self.call(BoundFunctionVariable(enter, cm), [], {}))
                return
        if isinstance(cm, ObjectVariable) and cm.mapping is None and \
                not cm.cls.__module__.startswith(_NOT_INLINED_MANAGERS):
            # A context manager made in the frame (`contextlib.nullcontext()`, a user's
            # class): its Python __enter__ inlined now and its __exit__ when the block ends
            # (what either does outside the frame is a break, as for any inlined code).
            enter = getattr(cm.cls, "__enter__", None)
            exit_ = getattr(cm.cls, "__exit__", None)
            if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
                self.push(BoundFunctionVariable(exit_, cm))
                self.push(self.call(BoundFunctionVariable(enter, cm), [], {}))
                return
        if isinstance(cm, ConstantVariable) and type(cm.value) is _record_function_class():
            # A profiler label: Dynamo leaves it out of compiled code (no event recorded).
            self.push(ConstantVariable(ignored_region_exit))
            self.push(cm)  # what record_function.__enter__ returns: the object itself
            return
        if isinstance(cm, ConstantVariable) and type(cm.value) is SdpaKernelContext:
            self.push(self.builder.enter_sdpa_kernel(cm.value.switches))  # the __exit__
            self.push(DictVariable({}))  # what the block's `as` target gets
            return
        if isinstance(cm, ConstantVariable) and is_autocast_type(type(cm.value)):
            self.push(self.builder.enter_autocast(cm.value))  # the region's __exit__
            self.push(cm)  # what autocast.__enter__ returns: the object itself
            return
        if isinstance(cm, CatchWarningsVariable):  # an empty block (see `blocks.py`)
            self.push(CatchWarningsExitVariable(cm.made_at, cm.record))
            if cm.record:  # (its ops' warnings are watched: `GraphBuilder.call`)
                self.builder.record_blocks += 1
            self.push(ListVariable([]) if cm.record else self.const(None))
            return
        if isinstance(cm, InferenceModeVariable):  # `with inference_mode(mode):`
            self.push(enter_block(self.builder, cm.mode))  # the block's __exit__
            self.push(self.const(None))
            return
        if _type_of(cm) is warnings.catch_warnings:
            raise catch_warnings_break(self)
        if not isinstance(cm, GradModeVariable):
            raise Unsupported("a with block whose context is not a grad mode")
        self.push(GradModeVariable(
            cm.mode, exit_to=local.grad_mode if cm.before is None else cm.before))
        self.builder.set_grad_enabled(cm.mode)
        self.push(self.const(None))

    def WITH_EXCEPT_START(self, inst):  # noqa: N802
        exc = self.stack[-1]
        exit_fn = self.stack[-4]
        if isinstance(exit_fn, BlockExitVariable):  # an autocast, inference-mode block
            leave_graph_block(self.builder, exit_fn.kind)
            self.push(ConstantVariable(False))
            return
        if isinstance(exit_fn, GradModeVariable):  # a grad-mode block: restore the mode
            self.builder.set_grad_enabled(exit_fn.exit)
            self.push(ConstantVariable(False))
            return
        if isinstance(exit_fn, CatchWarningsExitVariable):  # (nothing to undo)
            exit_fn.leave_block(self.builder)
            self.push(ConstantVariable(False))
            return
        if isinstance(exit_fn, SdpaExitVariable):  # restore the attention switches
            self.builder.exit_sdpa_kernel()
            self.push(ConstantVariable(False))
            return
        value = exc.value
        args = [ConstantVariable(type(value)), exc, ConstantVariable(value.__traceback__)]
        self.push(self.call(exit_fn, args, {}))

    # ---------------------------------------------------------------- assert on a tensor

    def tensor_assert(self, inst, v: Variable) -> bool:
        """`assert tensor, "msg"`: record an `_assert_async` node and skip the raise (True),
        or False where the jump is not an assert's."""
        if self.concrete or not inst.opname.endswith("IF_TRUE"):
            return False
        k = self.pc
        insts = self.insts
        if k >= len(insts) or insts[k].opname != "LOAD_ASSERTION_ERROR":
            return False
        message = None
        tail = [i.opname for i in insts[k + 1:k + 5]]
        if tail[:1] == ["RAISE_VARARGS"]:
            pass
        elif insts[k + 1].opname == "LOAD_CONST" and isinstance(insts[k + 1].argval, str) \
                and [n for n in tail[1:] if n != "PRECALL"][:2] == ["CALL", "RAISE_VARARGS"]:
            message = insts[k + 1].argval
        else:
            return False  # a message computed at run time
        tensor = v.tensor if isinstance(v, TruthVariable) else v
        if not isinstance(tensor, TensorVariable):
            return False
        node = self.builder.graph.call_function(assert_async, (tensor.node, message))
        self.builder.created.append(node)
        self.jump_to(inst.argval)
        return True
