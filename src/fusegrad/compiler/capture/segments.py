"""Running a captured function: a chain of guarded graph segments per code object.

A *segment* is what the translator captured from one instruction offset and frame state: a
compiled graph, its guards, and how it ends: `return` (the value, rebuilt from graph outputs
and constants), `break` at an instruction (the stack and locals to rebuild, then that one
instruction runs for real and the next segment starts after it), or `eager` (a break inside a
loop: as PyTorch does, the rest of the frame runs eagerly).

On a call, the runner binds the arguments to locals, picks the first segment at offset 0 whose
guards pass (translating a new one if none does), runs its graph, rebuilds the frame state,
and continues until a segment returns. Only values the graph computed are graph outputs;
everything else is rebuilt from its source (an input) or kept as a constant.
"""

from __future__ import annotations

import re
import types
import warnings
import weakref
from dataclasses import dataclass, field

from ..._random import get_rng_state, set_rng_state
from ..._symbolic import SymInt
from ..._tensor import Tensor
from ..._thread_state import local as _thread_local
from ..._thread_state import set_grad_enabled as _set_grad
from ..._thread_state import suspended as _suspended
from ...fx.experimental.symbolic_shapes import ConstraintViolationError
from ...fx.node import is_impure_call
from ...ops.surface import INPLACE, RANDOM, has_flag
from .. import logs
from .. import stance as _stance
from ..exc import UserError
from .blocks import (
    BlockExit,
    BlockExitVariable,
    CatchWarningsExitVariable,
    CatchWarningsVariable,
    InferenceModeVariable,
    block_depths,
    enter_frame_blocks,
    enter_graph_block,
    leave_frame_blocks,
    leave_graph_block,
    new_catch_warnings,
    unwind_blocks,
)
from .builder import (
    _INPLACE_OPERATORS,
    GraphBuilder,
    SdpaExitVariable,
    _has_symbol,
    _mutates,
    drop_grad_mode_round_trips,
    holds_symbol,
    restore_sdpa,
    sdpa_state,
)
from .calls import _in_package, _is_module, is_graph_made_wrapper, rebuilt_at_break
from .dynamic import DynamicPolicy
from .exceptions import Raised, catch_warnings_break, exception_entries
from .frame_filter import frame_holds_tensors
from .graph_inputs import order_inputs
from .guards import fast_sizes
from .hooks import registers_hooks
from .locations import resume_name
from .segment_code import NULL, branch_test, compile_segment, segment_source
from .symfloat import SymFloat, SymText
from .translator import Jump, Return, Translator, instructions_of
from .variables import (
    AttrDictVariable,
    BoundFunctionVariable,
    CellVariable,
    ConstantVariable,
    DefaultDictVariable,
    DictContents,
    DictVariable,
    DictViewVariable,
    GeneratorContextVariable,
    GradModeVariable,
    IteratorVariable,
    ListContents,
    ListVariable,
    MethodVariable,
    NestedFunctionVariable,
    NullVariable,
    ObjectVariable,
    OrderedDictVariable,
    OutsideIteratorVariable,
    OutsideListVariable,
    PartialVariable,
    SetVariable,
    SliceVariable,
    TensorVariable,
    TruthVariable,
    TupleVariable,
    Unsupported,
    WeakRefVariable,
)
from .versions import comprehension_regions, normal_flow

# A failed identity guard on a value of the stack at a resume point (`S[2] is ___obj1`).
_STACK_IDENTITY = re.compile(r"S\[(\d+)\] is (___\w+(?:\(\))?)")
_MISSING = object()


@dataclass
class Segment:
    """One captured graph and how the frame continues after it."""

    start: int
    kind: str  # "return", "break" or "eager"
    check: object = None
    guards: object = None
    graph_module: object = None
    compiled: object = None
    run: object = None  # (L, S, G) -> (next offset, None) or (None, value): segment_code.py
    source: str = ""  # the Python of `run`
    result: object = None  # spec of the return value
    stack: list = field(default_factory=list)  # specs of the stack at the break
    locals: dict = field(default_factory=dict)  # specs of the locals that changed
    kw_names: tuple = ()
    offset: int = 0  # the breaking instruction
    target: int | None = None  # where a branch written out as Python jumps
    reason: str = ""
    line: int | None = None
    scope: dict = field(default_factory=dict)  # names the guard and source texts use
    native: bool = False  # an eager segment from offset 0 that runs the function natively
    # (object expression, name, spec, whether set as object's `__setattr__`) to set
    stores: list = field(default_factory=list)
    protected: bool = False  # has exception handlers: if the graph raises, rerun eagerly
    # The kinds of the frame's blocks open where the segment starts (a resume point inside
    # `with autocast()` or `with inference_mode()` blocks), innermost first: its code
    # leaves them before the graph, which enters them (see `blocks.py`).
    blocks: tuple = ()
    # The grad mode at a break inside such blocks, set again after the segment code
    # entered them again (each in the mode it found).
    grad_after: bool | None = None
    # An eager rest after a break in a loop, guarded (`FrameRunner._loop_break_guarded`).
    loop_guarded: bool = False


# The code of functions called for real after a graph break and captured on their own
# frame (a module's forward that broke while inlined): see `FrameRunner._varying_module`.
_CALLEE_CODES: weakref.WeakSet = weakref.WeakSet()


def _suspended_in_handler(builder) -> bool:
    """Whether a generator the graph started is left suspended inside a `try` or `with`
    block of its code: eagerly, closing it (when it is dropped) runs its handler, which the
    graph cannot (a `finally` that logs, a lock released)."""
    for gen in builder.started_generators:
        if gen.frame is None or gen.done:
            continue
        code = gen.func.__code__
        insts, index_of = instructions_of(code)
        # (3.12+ wrap a generator's body in a handler of their own: CALL_INTRINSIC_1)
        if any(insts[index_of[target]].opname != "CALL_INTRINSIC_1"
               for _, _, target, _, _ in exception_entries(code)):
            return True
    return False


_SUSPENDED = Unsupported("a generator left suspended inside its try or with block (closing "
                         "it runs its handler)")


def _note_callee(f):
    """`f`, its code remembered in `_CALLEE_CODES` (a function called for real)."""
    code = getattr(f, "__code__", None)
    if code is not None:
        _CALLEE_CODES.add(code)
    return f


def _never(L, S, G) -> bool:
    """The check of a cache entry whose guards named an object that died."""
    return False


def _holding(seg: Segment, run, held: list):
    """`run` for the call that captured `seg`, holding the objects its guards name weakly
    (`held`) until it returned; later calls run `run` itself."""
    def first_run(L, S, G):
        seg.run = run
        try:
            return run(L, S, G)
        finally:
            held.clear()

    return first_run


def _forget(segments: dict, seg: Segment):
    """What to do when an object `seg`'s guards name by identity dies: its check fails
    for good and its runner's cache (`segments`) drops it, as Dynamo invalidates such a
    cache entry. The cache gets a new list rather than an edit of its list: the callback
    runs at whatever allocation collects the object, even while `_segment` reads it."""
    seg_ref = weakref.ref(seg)

    def forget() -> None:
        seg = seg_ref()
        if seg is None:
            return
        seg.check = _never
        entries = segments.get(seg.start)
        if entries is not None:
            segments[seg.start] = [s for s in entries if s is not seg]

    return forget


# The runners of each code object, whatever their backend or settings: the recompile limit
# counts the graphs of all of them at a start offset, as Dynamo's counts a code object's
# cache entries (each guarded on its backend), so one function compiled anew with another
# backend or counter on every call still stops at the limit.
_RUNNERS_OF_CODE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def entries_of_code(runner: FrameRunner, offset: int) -> int:
    """How many captures every runner of `runner`'s code object holds at `offset` (runners
    sharing one cache counted once)."""
    seen: set = set()
    total = 0
    for other in list(_RUNNERS_OF_CODE.get(runner.code, ())):
        if id(other.segments) not in seen:
            seen.add(id(other.segments))
            total += len(other.segments.get(offset, ()))
    return total


class FrameRunner:
    """The segments of one code object under one backend, and how to run them."""

    def __init__(self, fn, backend, config, fullgraph: bool = False, dynamic=None,
                 recompile_limit: int | None = None):
        self.fn = fn
        self.recompile_limit = recompile_limit  # None: `config.recompile_limit`
        self.dynamic = DynamicPolicy(dynamic, config)
        self.code = fn.__code__
        self.backend = backend
        self.config = config
        self.fullgraph = fullgraph
        self.segments: dict[int, list[Segment]] = {}
        # A function called for real after a break inside it (`compile_callee`): like a
        # resume point, skipped where its frame holds no tensor (`frame_filter.py`).
        self.skips_tensorless = False
        self.insts, self.index_of = instructions_of(self.code)
        # Backward jumps in exception handlers (3.12+ `with` blocks end with one) are no loops.
        flow = normal_flow(self.insts, self.index_of)
        self.loops = [(i.argval, i.offset) for i in self.insts
                      if i.opname.startswith(("JUMP_BACKWARD", "POP_JUMP_BACKWARD"))
                      and i.offset in flow]
        # 3.12+'s inlined comprehensions ({start: end}): a break inside one ends the graph
        # at its start, the comprehension runs whole for real and the frame resumes after
        # it, as on 3.11 where it is a function of its own. A break inside a `with
        # warnings.catch_warnings()` block translated as an empty one ends the graph at the
        # `catch_warnings()` call instead. `stops`: start offset of a translation -> (the
        # offset where it ends, the break met inside, None for a warnings block's).
        self.comprehensions = comprehension_regions(self.code, self.insts, self.index_of)
        self.stops: dict[int, tuple] = {}
        self.eager_only = False
        self.warned = False
        self._state = None  # (translator, builder) while capturing
        self.history = _History()  # (event, detail) for explain and logs
        # Modules by source (`L['self']`): the first one a capture read there (its class
        # and a weak reference), and the sources where another instance of its class came
        # since, followed from then on by type and attributes (`_varying_module`).
        self.module_seen: dict = {}
        self.varied_modules: set = set()
        self._self_source = f"L[{self.code.co_varnames[0]!r}]" if self.code.co_argcount \
            else None
        # Set for a function compiled as it is (`compile(Block.forward)`): a module that is
        # its first argument, and of a class whose method it is, is followed by type from
        # the first capture (it is called with each instance).
        self.self_by_type = False
        _RUNNERS_OF_CODE.setdefault(self.code, weakref.WeakSet()).add(self)

    def share_cache(self, other: FrameRunner) -> None:
        """Use the cache of `other`, a runner of the same function and backend for another
        `compile()` of it (with another `fullgraph`): what either captures, the other
        reuses, as the compiled wrappers of one code object share its cache entries in
        PyTorch."""
        self.segments, self.stops = other.segments, other.stops
        self.dynamic = other.dynamic
        self.module_seen, self.varied_modules = other.module_seen, other.varied_modules

    @property
    def limit(self) -> int:
        """How many graphs one start offset may hold (`compile(recompile_limit=)`, else the
        config's)."""
        return self.config.recompile_limit if self.recompile_limit is None else \
            self.recompile_limit

    def _varying_module(self, source: str, module) -> bool:
        """Whether module `module`, read at `source` by a capture, is one of several
        instances of its class the frame has seen there (a method compiled once and called
        on each layer of a model): then it, and the modules read through it, are followed
        by type and attributes, as Dynamo guards a module, so one graph serves them all.
        A frame that only ever sees one module keeps its identity guard. The `self` of a
        module's method called for real after a graph break (each layer of a model calls
        it) is followed from the first capture."""
        if source == self._self_source and (self.code in _CALLEE_CODES or self.self_by_type) \
                and getattr(type(module), self.code.co_name, None) is self.fn:
            self.varied_modules.add(source)
        if source in self.varied_modules or any(
                source.startswith((s + ".", s + "[")) for s in self.varied_modules):
            return True
        seen = self.module_seen.get(source)
        if seen is None or seen[1]() is None:
            self.module_seen[source] = (type(module), weakref.ref(module))
            return False
        if seen[1]() is module or seen[0] is not type(module):
            return False
        self.varied_modules.add(source)
        return True

    # ---------------------------------------------------------------- running

    def __call__(self, L: dict):
        depths = block_depths()
        try:
            return self._run(L)
        except BaseException:
            # An autocast region or inference-mode block a graph (or segment code) entered
            # and an exception left. (Grad mode: a graph that raised restores its own, see
            # `segment_code`; a mode set without a `with` block stays set, as in eager mode.)
            unwind_blocks(depths)
            raise

    def _run(self, L: dict):
        G = self.fn.__globals__
        S: list = []
        offset = 0
        while True:
            if (offset or self.skips_tensorless) and not frame_holds_tensors(
                    self.fn, offset, L, S, self.insts, self.index_of):
                # Dynamo skips a frame other than the compiled function's first one where
                # nothing is a tensor: the rest runs as plain Python (no graph, no break).
                return self._run_concrete(offset, L, S, ())
            seg = self._segment(offset, L, S)
            if seg is None or seg.native:  # the rest runs eagerly (reported)
                if offset == 0:
                    return self.fn(*L.pop("___args"), **L.pop("___kwargs"))
                return self._run_concrete(offset, L, S, ())
            if seg.kind == "eager":
                return self._run_concrete(seg.start, L, S, ())
            offset, result = seg.run(L, S, G)
            if offset is None:
                return result

    def _segment(self, offset: int, L: dict, S: list):
        G = self.fn.__globals__
        entries = self.segments.setdefault(offset, [])
        for seg in entries:
            if seg.check is None or seg.check(L, S, G):
                return seg
        # The limit holds at every start offset: a resume point after a graph break has its
        # own cache (as Dynamo's resume functions do), and values that are new objects on
        # every call (a generator, a function made before the break) fail identity guards.
        if entries_of_code(self, offset) >= self.limit:
            self._limit_hit(offset, entries, L, S)
            return None
        if entries and self.config.error_on_recompile:
            self._recompile_error(offset, entries, L, S)
        if entries:
            reason = entries[-1].guards.failure(L, S, G) if entries[-1].guards else ""
            if _stance.current.stance == "eager_on_recompile":
                return None  # the rest of this call runs eagerly, nothing is recorded
            if _stance.current.stance == "fail_on_recompile":
                line = _line_of(self.code, offset) if offset else self.code.co_firstlineno
                raise RuntimeError(
                    "Detected recompile when torch.compile stance is 'fail_on_recompile'. "
                    f"filename: '{self.code.co_filename}', function name: "
                    f"'{self.code.co_name}', line number: {line}\n    triggered by the "
                    f"following guard failure(s):\n    - {reason}")
            fresh = self._fresh_on_stack(offset, entries[-1], reason, S)
            if fresh is not None:
                self.segments.setdefault(offset, []).append(fresh)
                return fresh
            self.history.append(("recompile", reason))
            where = "" if offset == 0 else f" at offset {offset}"
            logs.emit("recompiles", f"Recompiling function {self.code.co_name}{where} in "
                      f"{self.code.co_filename}:{self.code.co_firstlineno}; triggered "
                      f"by the following guard failure(s): {reason}")
        seg = self.capture(offset, L, S)
        self.segments.setdefault(offset, []).append(seg)  # (the list `_forget` left)
        if seg.guards is not None and seg.guards.weak:
            held = seg.guards.take()
            if seg.run is not None and seg.kind != "eager" and not seg.native:
                seg.run = _holding(seg, seg.run, held)  # (this call runs it next)
            seg.guards.when_dead(_forget(self.segments, seg))
        return seg

    def _fresh_on_stack(self, offset: int, last: Segment, reason: str, S: list):
        """An eager segment for resume point `offset` when `last`'s capture failed only
        because a value on the stack is another object of the same type (`S[i] is ___obj`):
        a value the frame made before the break (a NumPy array, a list's iterator), new on
        every call, so every capture would fail the same way until the recompile limit. The
        rest of the frame runs eagerly from there, reported once as a graph break, with no
        capture and no warning. None for any other failure."""
        found = _STACK_IDENTITY.fullmatch(reason or "")
        if offset == 0 or found is None or last.guards is None:
            return None
        index, name = int(found.group(1)), found.group(2)
        before = last.guards.referent(name, _MISSING)
        if before is _MISSING or index >= len(S) or type(S[index]) is not type(before) or \
                isinstance(before, type):  # (a class the frame made: Dynamo recompiles)
            return None
        line = _line_of(self.code, offset)
        why = (f"a new {type(before).__name__} on the stack at every call (S[{index}]): the "
               "rest of the frame runs eagerly")
        self.history.append(("break", logs.graph_break(why, self.code, line, fallback=True)))
        return Segment(offset, "eager", reason=why, line=line)

    def _recompile_error(self, offset: int, entries: list, L: dict, S: list) -> None:
        """`config.error_on_recompile`: a recompile raises, naming the failed guard."""
        from ..exc import RecompileError

        G = self.fn.__globals__
        reason = entries[-1].guards.failure(L, S, G) if entries[-1].guards else ""
        line = _line_of(self.code, offset) if offset else self.code.co_firstlineno
        raise RecompileError(
            f"Recompiling function {self.code.co_name} in {self.code.co_filename}:{line}\n"
            f"    triggered by the following guard failure(s):\n    - {reason}")

    def _limit_hit(self, offset: int, entries: list, L: dict, S: list) -> None:
        """Past `recompile_limit` at `offset`: a reported fallback (warned once), or with
        fullgraph=True an error."""
        from ..exc import FailOnRecompileLimitHit

        if self.warned and _History.listener is None and not self.fullgraph:
            return  # reported once
        G = self.fn.__globals__
        last = entries[-1].guards.failure(L, S, G) if entries and entries[-1].guards else ""
        where = "" if offset == 0 else f" (resuming at offset {offset})"
        line = _line_of(self.code, offset) if offset else self.code.co_firstlineno
        reason = f"hit config.recompile_limit ({self.limit})"
        if last:
            reason += f"; last failed guard: {last}"
        if self.fullgraph:
            raise FailOnRecompileLimitHit(
                f"{reason} (in {self.code.co_name}{where}, {self.code.co_filename}:{line}); "
                "hard failure due to fullgraph=True")
        # Logged, but no graph break: Dynamo counts none in `counters["graph_break"]` and
        # `explain` lists none for a frame past its limit (it just runs eagerly).
        logs.graph_break(reason, self.code, line, fallback=True, counted=False)
        if not self.warned:
            self.warned = True
            warnings.warn(f"fusegrad.compile: {self.code.co_name}{where} {reason}. It now "
                          "runs eagerly.", UserWarning, stacklevel=6)

    def _step(self, offset: int, L: dict, S: list, kw_names: tuple):
        """Run one instruction for real (a whole comprehension where one a break was met
        in starts); returns (next offset, None) or (None, result)."""
        tr = self._concrete(offset, L, S, kw_names)
        end = self.comprehensions.get(offset) if self.stops else None
        while True:
            try:
                tr.step()
            except Jump:
                if tr.raised:  # an exception went to a handler: it and the rest run eagerly
                    return None, self._continue_concrete(tr)
            except Return as r:
                return None, r.value.value
            if end is None or tr.insts[tr.pc].offset == end:
                break
        _store_back(tr, L, S)
        return tr.insts[tr.pc].offset, None

    def _stop_for(self, offset: int, start: int, met: Unsupported, stack: list):
        """Where a translation from `start` that met break `met` at `offset` (`stack`: the
        stack before it) ends when translated again, with what (see `stops`), or None."""
        blocks = [v.made_at for v in stack if isinstance(v, CatchWarningsExitVariable)]
        if blocks and blocks[0] is not None and blocks[0] >= start:
            return blocks[0], None
        found = self._comprehension_at(offset, start)
        return None if found is None or blocks else (found, met)

    def _comprehension_at(self, offset: int, start: int) -> int | None:
        """The start of the outermost inlined comprehension holding `offset` that a
        translation from `start` reaches whole and that no loop of the frame's own holds
        (a break in such a loop runs the rest of the frame eagerly), else None."""
        found = [s for s, e in self.comprehensions.items() if s <= offset < e and s >= start]
        if not found:
            return None
        first = min(found)
        end = self.comprehensions[first]
        if any(target <= first <= jump and not first <= target < end
               for target, jump in self.loops):
            return None
        return first

    def _run_concrete(self, offset, L, S, kw_names=()):
        return self._continue_concrete(self._concrete(offset, L, S, kw_names))

    @staticmethod
    def _continue_concrete(tr: Translator):
        while True:
            try:
                tr.step()
            except Jump:
                continue
            except Return as r:
                return r.value.value

    def _concrete(self, offset, L, S, kw_names) -> Translator:
        from .. import compile_callee

        tr = Translator(self.code, self.fn.__globals__, self.fn.__closure__, None,
                        {k: ConstantVariable(v) for k, v in L.items() if not k.startswith("___")},
                        [NullVariable() if v is NULL else ConstantVariable(v) for v in S],
                        start=offset, concrete=True,
                        callee_wrapper=lambda f: compile_callee(_note_callee(f),
                                                                self.backend,
                                                                self.dynamic.dynamic))
        tr.kw_names = kw_names
        return tr

    # ---------------------------------------------------------------- capturing

    def capture(self, start: int, L: dict, S: list) -> Segment:
        """Translate from `start` with the real frame state L, S into a new segment."""
        seg = self._capture_once(start, L, S)
        if seg is _RETRY:  # (a break inside a comprehension or a warnings block)
            logs.counters["frames"]["total"] -= 1
            logs.counters["frames"]["ok"] -= 1
            seg = self._capture_once(start, L, S)
        return seg

    def _capture_once(self, start: int, L: dict, S: list) -> Segment:
        grad_mode = _thread_local.grad_mode
        # The frame's open blocks (autocast regions, inference-mode blocks: their exits on
        # the stack): translation leaves them for the graph to enter (see `_capture`); they
        # are entered again after it.
        inherited = [v for v in S if type(v) is BlockExit]
        depths = block_depths()
        self._state = None
        rng = get_rng_state()  # fake random ops must not draw from the real generator
        sdpa = sdpa_state()  # (a translation that stops in a `with sdpa_kernel()` block)
        logs.counters["frames"]["total"] += 1
        try:
            # The program's saved-tensor hooks (a checkpoint's) see the compiled code's saves
            # when it runs, never the fake tensors of its tracing.
            with _suspended("saved_hooks"):
                seg = self._capture(start, L, S)
            logs.counters["frames"]["ok"] += 1
            return seg
        except (Unsupported, ConstraintViolationError, UserError):
            raise  # fullgraph=True; a size marked dynamic made constant
        except Exception as e:  # a translator bug must not fail a program eager would run
            return self._translator_error(start, e)
        finally:
            _set_grad(grad_mode)  # translation switches it for the fake ops
            # (and enters blocks: the frame's are left and entered again, in their modes)
            leave_frame_blocks(depths, inherited)
            enter_frame_blocks(inherited)
            self._state = None
            set_rng_state(rng)
            _set_grad(grad_mode)  # (entering an inference-mode block switched it off)
            restore_sdpa(sdpa)

    def _translator_error(self, start: int, error: Exception) -> Segment:
        """The translator failed: report it as the bug it is (a graph break with the line it
        was at); the frame runs eagerly from `start` while the guards read so far hold."""
        from ..exc import InternalTorchDynamoError

        tr, builder = self._state or (None, None)
        inst = getattr(tr, "current", None)
        offset = inst.offset if inst is not None else start
        line = _line_of(self.code, offset)
        reason = (f"fusegrad's translator failed ({type(error).__name__}: {error}); this is a "
                  "bug in fusegrad, not in the program")
        if self.fullgraph:
            raise InternalTorchDynamoError(
                f"{reason} (in {self.code.co_name}, {self.code.co_filename}:{line})") \
                from error
        self.history.append(("break", logs.graph_break(reason, self.code, line,
                                                       fallback=True)))
        # Not through the concrete translator from the start: it may share the failing code.
        seg = Segment(start, "eager", reason=reason, line=line, native=start == 0)
        if builder is not None:
            # Guarded by what the translator had read: other inputs are translated afresh.
            seg.guards = builder.guards_with_sizes()
            seg.check = seg.guards.compile()
        return seg

    def _capture(self, start: int, L: dict, S: list) -> Segment:
        if start and any(isinstance(v, warnings.catch_warnings) or
                         isinstance(v, types.MethodType) and
                         isinstance(v.__self__, warnings.catch_warnings) for v in S):
            # At a `with warnings.catch_warnings()` block made or entered for real: its
            # statements call the warnings module, which capture does not follow, so the
            # block and the rest of the frame run eagerly (Dynamo cannot resume inside it).
            line = _line_of(self.code, start)
            reason = "inside a with block over warnings.catch_warnings()"
            self.history.append(("break", logs.graph_break(
                f"{reason} (the rest of the frame runs eagerly)", self.code, line,
                fallback=True, counted=False)))  # (Dynamo gives up there, counting none)
            return Segment(start, "eager", reason=reason, line=line)
        builder = GraphBuilder()
        builder.dynamic_dims = self.dynamic.for_capture(start)
        builder.dynamic_ints = self.dynamic.int_for_capture(start)
        builder.dynamic_floats = self.dynamic.float_for_capture(start)
        builder.duck_sizing = self.dynamic.dynamic is True
        builder.fullgraph = self.fullgraph
        builder.follow_objects = True
        # (a module's forward: Dynamo reaches it through the module's call, which it inlines)
        builder.module_frame = bool(self.code.co_argcount) and \
            _is_module(L.get(self.code.co_varnames[0]))
        builder.varying_modules = self._varying_module
        if self.fn.__closure__:
            builder.guards.values["___closure"] = self.fn.__closure__
            builder.closure_names = self.code.co_freevars
        # The NULL below a callable (the stack at a call after a break) stays a NULL.
        stack = [NullVariable() if v is NULL else builder.wrap(v, f"S[{i}]")
                 for i, v in enumerate(S)]
        local_vars = _LazyLocals(builder, {k: v for k, v in L.items()
                                           if not k.startswith("___")})
        # Every graph leaves the blocks it entered (autocast regions, inference-mode blocks;
        # see `blocks.py`): one that resumes inside such blocks enters them first, in the
        # stack's order and each in the grad mode it found, and the segment code leaves the
        # real ones before the graph runs (guarded above by the state at entry).
        opened = [v for v in stack if isinstance(v, BlockExitVariable)]
        inside = _thread_local.grad_mode
        bases = leave_frame_blocks(block_depths(), opened)
        for v in opened:
            if _thread_local.grad_mode != v.grad:  # (a grad-mode block between two)
                builder.set_grad_enabled(v.grad)
            enter_graph_block(builder, v.kind, v.args)
        if _thread_local.grad_mode != inside:  # (a grad-mode block inside)
            builder.set_grad_enabled(inside)
        tr = Translator(self.code, self.fn.__globals__, self.fn.__closure__, builder,
                        local_vars, stack, start=start)
        if tr.pc:  # a graph after a break: its frame is named as Dynamo's resume function
            tr.frame_name = resume_name(self.code, tr.insts[tr.pc - 1])
        stop = self.stops.get(start)
        self._state = (tr, builder)  # for the report if the translator fails
        seg = None
        while True:
            before_stack = list(tr.stack)
            before_locals = dict(tr.locals.loaded)
            before_kw = tr.kw_names
            mark = len(builder.created)
            guard_mark = builder.guards.mark()
            n_stores = len(builder.stores)
            # An inlined call that breaks may already have changed containers of the frame
            # (advanced an iterator, appended to a list, a context manager's inlined
            # `__enter__` marked it entered): the break needs them as before.
            saved = _snapshot(before_stack + list(before_locals.values())) \
                if tr.insts[tr.pc].opname in _CALL_OPCODES else ()
            try:
                if stop is not None and tr.insts[tr.pc].offset == stop[0]:
                    # The comprehension or warnings block a break was met in starts here.
                    tr.current = tr.insts[tr.pc]
                    tr.pc += 1
                    raise catch_warnings_break(tr) if stop[1] is None else \
                        _at_comprehension(stop[1])
                tr.step()
            except Return as r:
                if _suspended_in_handler(builder):
                    return self._eager_return(start, tr, _SUSPENDED)
                seg = Segment(start, "return")
                outputs = _Outputs(builder)
                try:
                    seg.result = _spec(r.value, outputs)
                except Unsupported as why:  # (a function made in the graph is returned)
                    return self._eager_return(start, tr, why)
                break
            except Unsupported as e:
                builder.discard_since(mark)  # what the failed instruction recorded
                builder.guards.rollback(guard_mark)  # and what it read (it runs for real)
                del builder.stores[n_stores:]
                _restore(saved)
                inst = tr.current
                line = _line_of(self.code, inst.offset)
                if not self.fullgraph and stop is None:
                    found = self._stop_for(inst.offset, start, e, before_stack)
                    if found is not None:
                        self.stops[start] = found
                        return _RETRY
                if self.fullgraph:
                    from ..exc import Unsupported as FullgraphUnsupported

                    raise FullgraphUnsupported(
                        f"{e} (graph break in {self.code.co_name}, "
                        f"{self.code.co_filename}:{line})") from None
                inner = _inlined_frames(tr, e)
                if isinstance(e, Raised):  # (leaving the frame: no handler of it caught it)
                    return self._raised_eagerly(start, e, line, inner)
                # A break in a loop, or in an except/finally block the graph entered: the rest
                # of the frame runs eagerly.
                where = None
                if tr.parent is None:
                    where = "inside a loop" if self._in_loop(inst.offset) else \
                        "inside an exception handler" if tr.handled else \
                        "inside a try block" if tr.in_try_block(inst.offset) and not \
                        getattr(e, "in_graph_error", False) else \
                        getattr(e, "rest_eager", None)
                    counts = None if where is not None else _packed_recurrence(e)
                    if counts is not None:
                        where = "at a recurrent layer given a packed sequence"
                        e.counted = counts
                text = getattr(e, "reason", None) or str(e)  # (PyTorch's words, if any)
                reason = f"{text} ({where}: the rest of the frame runs eagerly)" if where \
                    else text
                # Where Dynamo gives up on the frame at a break in its own loop or in an
                # exception handler, it counts no graph break (a break inside a call the loop
                # makes is counted once, in the callee's own frame, captured on its own). A
                # compiled layer of fusegrad's own (`nn.Sequential`) is the exception:
                # Dynamo compiles such a layer through a wrapper frame that inlines its
                # forward, and counts the break at that frame's call into it. A with block's
                # entry and `warnings.catch_warnings()` are counted (Dynamo counts the
                # block's call into the warnings module).
                # (the break a guarded eager rest of this loop met before, met again by a
                # translation afresh after its guards failed: counted once)
                again = where == "inside a loop" and any(
                    s.loop_guarded and s.reason == str(e) for s in self.segments.get(start, ()))
                counted = getattr(e, "counted", True) and not again and (
                    where not in ("inside a loop", "inside an exception handler",
                                  "inside a try block") or
                    where == "inside a loop" and bool(inner) and
                    _in_package(self.code.co_filename))
                record = logs.graph_break(reason, self.code, line, fallback=where is not None,
                                          inner=inner, counted=counted)
                if where is not None:
                    # Dynamo gives up on a frame whose loop breaks (none of its graphs, no
                    # break counted): `explain` counts this fallback as it does.
                    record.in_loop = where in ("inside a loop", "inside a try block") or \
                        getattr(e, "skips_frame", False)
                    # A break inside a call the loop makes, not counted here, is the
                    # callee's: its own frame, captured on its own, lists it at each capture
                    # (none past its recompile limit), as Dynamo lists it: `explain` leaves
                    # this record out.
                    record.listed = not (where == "inside a loop" and inner and not counted)
                    self.history.append(("break", record))
                    seg = Segment(start, "eager", reason=str(e), line=line)
                    if where == "inside a loop" and self._loop_break_guarded(start, L, inner):
                        # (guarded by what the translation read before the break: a call
                        # that fails them, `m.eval()`, is translated afresh)
                        seg.guards = builder.guards_with_sizes()
                        seg.check = seg.guards.compile()
                        seg.loop_guarded = True
                    return seg
                if _suspended_in_handler(builder):
                    return self._eager_return(start, tr, _SUSPENDED)
                seg = Segment(start, "break", offset=inst.offset, kw_names=before_kw,
                              reason=str(e), line=line)
                outputs = _Outputs(builder)
                outputs.at_break = True
                try:
                    seg.stack = [_spec(v, outputs) for v in before_stack]
                    seg.locals = {k: _spec(v, outputs) for k, v in before_locals.items()}
                except Unsupported as why:  # the state cannot be rebuilt: run the rest eagerly
                    # (counted once, as the break it follows was)
                    self.history.append(("break", logs.graph_break(
                        f"{why} (the rest of the frame runs eagerly)", self.code, line,
                        fallback=True, inner=_inlined_frames(tr, e), counted=False)))
                    return Segment(start, "eager", reason=str(why), line=line)
                # The graph leaves the blocks open at the break, innermost first; the
                # segment code enters them again (the `block` specs on the stack), then
                # sets the break's grad mode again.
                if any(isinstance(v, BlockExitVariable) for v in before_stack):
                    seg.grad_after = _thread_local.grad_mode
                for v in reversed(before_stack):
                    if isinstance(v, BlockExitVariable):
                        leave_graph_block(builder, v.kind)
                break
        # The backend traces the graph from the state it starts in (an inlined call that
        # broke may have left a block it entered).
        unwind_blocks(bases)
        seg.blocks = tuple(v.kind for v in reversed(opened))
        try:
            if registers_hooks(builder.stores) and any(_mutates(n) for n in builder.graph.nodes):
                # (eager registers the hook before or after the write: the graph's replay
                # after it would attach it elsewhere)
                raise Unsupported("Tensor.register_hook() on a graph input in a graph with "
                                  "an in-place op")
            # (an object followed by its type: its attributes set as object's, since its
            # own __setattr__ already ran in the graph)
            seg.stores = [(target, name, _store_spec(name, v, outputs),
                           isinstance(obj, ObjectVariable))
                          for obj, name, v, target in builder.stores]
        except Unsupported as why:
            self.history.append(("break", logs.graph_break(
                f"{why} (the segment runs eagerly)", self.code, seg.line, fallback=True)))
            return Segment(start, "eager", reason=str(why), line=seg.line)
        # If the graph raises, eager would have made the assignments before the failing op:
        # run the segment again eagerly (only where the graph changes no input in place).
        seg.protected = builder.protected or bool(builder.stores) and not any(
            _mutates(n) for n in builder.graph.nodes)
        self._finish(seg, builder, outputs)
        if seg.kind == "break":
            self.history.append(("break", record))
        return seg

    def _raised_eagerly(self, start: int, e: Raised, line, inner) -> Segment:
        """An exception no handler of the frame catches, met translating from `start`: the
        frame runs eagerly from there, now and whenever no graph captured there before
        fits (the segment has no guards), counting no graph break, as Dynamo gives up on
        the frame (or resume function) that raised and skips its code from then on."""
        record = logs.graph_break(f"{e} (the rest of the frame runs eagerly)", self.code,
                                  line, fallback=True, inner=inner, counted=False)
        record.in_loop = True  # (nor does `explain` count it)
        self.history.append(("break", record))
        return Segment(start, "eager", reason=str(e), line=line)

    def _eager_return(self, start: int, tr: Translator, why: Unsupported) -> Segment:
        """The value returned cannot be rebuilt from the graph's outputs: the segment runs
        eagerly (reported as a fallback; under fullgraph=True, raised as a break)."""
        line = _line_of(self.code, tr.current.offset)
        if self.fullgraph:
            from ..exc import Unsupported as FullgraphUnsupported

            raise FullgraphUnsupported(f"{why} (graph break in {self.code.co_name}, "
                                       f"{self.code.co_filename}:{line})") from None
        self.history.append(("break", logs.graph_break(
            f"{why} (the segment runs eagerly)", self.code, line, fallback=True)))
        return Segment(start, "eager", reason=str(why), line=line)

    def _loop_break_guarded(self, start: int, L: dict, inner: tuple) -> bool:
        """Whether the eager rest of a frame whose loop broke at `start` holds only while
        what its translation read holds. Dynamo skips a frame whose own loop breaks for good,
        but a break inside a call the loop makes (a layer's `item()` in a `Sequential`'s
        loop) is a break at that call in the caller (a module's `__call__`, which Dynamo
        compiles for `compile(module)`), whose guards recompile it when they fail: after
        `m.eval()` the same frame is captured whole. A second such break at one start
        offset runs the frame eagerly for good (no recompile per call)."""
        first = self.code.co_varnames[0] if self.code.co_argcount else None
        from ...nn import Module

        module_forward = self.code.co_name == "forward" and isinstance(L.get(first), Module)
        if not (inner or module_forward):
            return False
        return not any(seg.loop_guarded for seg in self.segments.get(start, ()))

    def _in_loop(self, offset: int) -> bool:
        return any(target <= offset <= jump for target, jump in self.loops)

    def _finish(self, seg: Segment, builder: GraphBuilder, outputs: _Outputs) -> None:
        _check_constraints(builder)
        graph = builder.graph
        for name in builder.shape_env.unified:  # a size equal to another: dropped if unused
            builder.symbol_nodes[name].meta["unified"] = True
        order_inputs(graph, outputs.nodes)  # (as Dynamo realizes them: before dead code goes)
        _eliminate_dead_code(graph, outputs.nodes)
        drop_grad_mode_round_trips(graph, builder.grad_mode_at_start)
        if builder.grad_write and len(builder.input_values) > 1:
            # The graph writes with history into a tensor input, captured with no inputs
            # sharing memory: inputs that do must recompile (the write then runs for real).
            builder.guards.add(f"___distinct_storage({', '.join(builder.input_values)})")
        seg.guards = builder.guards_with_sizes()
        self.history.append(("guards", builder.guards.lines()))
        logs.emit("guards", "GUARDS:\n" + "\n".join(builder.guards.lines()))
        scope = seg.scope = dict(builder.guards.values)
        seg.check = builder.guards.compile()
        has_ops = any(n.op not in ("placeholder", "output") for n in graph.nodes)
        values = {v.source: builder.input_values[v.source] for v in builder.inputs.values()}
        values.update(builder.symbol_values)  # symbolic sizes: integer inputs
        order = [n.meta["source"] for n in graph.nodes if n.op == "placeholder"]
        sources = [s for s in order if s in values]
        if outputs.nodes or has_ops:
            graph.output(tuple(outputs.nodes))
            from ... import fx

            gm = fx.GraphModule({}, graph)
            seg.graph_module = gm
            example_inputs = [values[s] for s in sources]
            logs.emit("graph_code", f"TRACED GRAPH ({self.code.co_name} from offset "
                      f"{seg.start})\n{gm.code}")
            seg.compiled = self.backend(gm, example_inputs)
            self.history.append(("graph", gm))
            stats = logs.counters["stats"]
            stats["unique_graphs"] += 1
            stats["calls_captured"] += sum(n.op.startswith("call_") for n in graph.nodes)
        self._generate(seg, scope, [fast_sizes(s) for s in sources])
        # The graph is made: a symbol met later (a fake tensor's size kept in the graph's
        # metadata) specialises in float arithmetic, as outside capture.
        builder.shape_env.float_arithmetic = None

    def _generate(self, seg: Segment, scope: dict, sources: list) -> None:
        """Write the Python that runs `seg` on every call (segment_code.py)."""
        branch = next_offset = None
        if seg.kind == "break":
            k = self.index_of[seg.offset]
            inst = self.insts[k]
            # A branch is written out, unless an exception it raises must reach a handler.
            branch = branch_test(inst.opname)
            if branch is not None and seg.stack and seg.stack[-1][0] == "truth":
                # 3.13's TO_BOOL of a graph tensor: the branch itself takes its truth, so an
                # error (a tensor of many values) comes from the branch, inside its `try`.
                seg.stack[-1] = seg.stack[-1][1]
            if branch is not None and not any(e[0] <= seg.offset < e[1]
                                              for e in exception_entries(self.code)):
                seg.target, next_offset = inst.argval, self.insts[k + 1].offset
            else:
                branch = None
        name = f"{self.code.co_name}_from_{seg.start}".replace("<", "_").replace(">", "_")
        consts: dict = {}
        seg.source = segment_source(seg, name, sources, branch, next_offset, consts)
        logs.emit("segment_code", f"SEGMENT ({self.code.co_name} from offset {seg.start})\n"
                  f"{seg.source}")
        seg.run = compile_segment(seg, scope, name, seg.source, consts, self._step,
                                  self._run_concrete)


_CALL_OPCODES = {"CALL", "CALL_KW", "CALL_FUNCTION_EX", "BEFORE_WITH"}
_RETRY = object()  # `_capture`: translate again, up to a stop (`FrameRunner.stops`)


def _at_comprehension(met: Unsupported) -> Unsupported:
    """The break `met` inside an inlined comprehension, taken at the comprehension's start
    (which runs whole for real), counted as `met` would be."""
    error = Unsupported(str(met))
    for name in ("reason", "counted"):
        if hasattr(met, name):
            setattr(error, name, getattr(met, name))
    return error


def _packed_recurrence(error: BaseException) -> bool | None:
    """For a break inside a recurrent layer given a packed sequence (its batch sizes read as
    numbers), whether it counts, else None: the rest of the frame then runs eagerly, as
    Dynamo gives up on a frame at a recurrent layer, counting the break unless the layer is
    a submodule read from a module."""
    from ...nn.modules.rnn import RNNBase

    packed = RNNBase._forward_packed.__code__
    tb = error.__traceback__
    while tb is not None:
        t = tb.tb_frame.f_locals.get("self")
        if isinstance(t, Translator) and t.code is packed:
            source = getattr(dict.get(t.locals, "self"), "source", None) or ""
            return "._modules[" not in source
        tb = tb.tb_next
    return None


def _inlined_frames(tr: Translator, error: BaseException) -> tuple:
    """(code, line) of the inlined calls `error` came from, outermost first (what PyTorch's
    break reasons list after the frame itself)."""
    frames, seen = [], {id(tr)}
    tb = error.__traceback__
    while tb is not None:
        t = tb.tb_frame.f_locals.get("self")
        if isinstance(t, Translator) and id(t) not in seen and t.current is not None:
            seen.add(id(t))
            frames.append((t.code, _line_of(t.code, t.current.offset)))
        tb = tb.tb_next
    return tuple(frames)


def _snapshot(roots: list) -> list:
    """The contents of the mutable variables reachable from `roots`, to undo a failed call."""
    saved, seen, todo = [], set(), list(roots)
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, DictViewVariable):  # its items are its dict's
            todo.append(v.dict_var)
        elif isinstance(v, OutsideListVariable) and not v.materialized():
            # (its items not read: only what the graph appended is undone)
            pending = v.pending
            saved.append((v, "outside", (pending, list(pending.items) if pending else None)))
        elif isinstance(v, (TupleVariable, IteratorVariable)):
            saved.append((v, getattr(v, "index", None), list(v.items)))
            todo.extend(v.items)
            if isinstance(v, IteratorVariable) and v.watch is not None:
                todo.append(v.watch[0])
        elif isinstance(v, SetVariable):
            saved.append((v, "set", (dict(v.items), len(v.history))))
            todo.extend(v.items.values())
        elif isinstance(v, (DictVariable, ObjectVariable)):
            saved.append((v, None, dict(v.items)))
            todo.extend(v.items.values())
            if isinstance(v, ObjectVariable) and v.mapping is not None:
                todo.append(v.mapping)  # a dict subclass's dict part
        elif isinstance(v, MethodVariable):
            todo.append(v.obj)
        elif isinstance(v, BoundFunctionVariable):
            todo.append(v.obj)
        elif isinstance(v, NestedFunctionVariable):
            todo.extend(v.closure)
        elif isinstance(v, PartialVariable):
            todo.extend([v.func, *v.args, *v.kwargs.values()])
        elif isinstance(v, WeakRefVariable):
            todo.append(v.target)
        elif isinstance(v, CellVariable):
            saved.append((v, "cell", v.contents))
            if v.contents is not None:
                todo.append(v.contents)
    return saved


def _restore(saved) -> None:
    for v, index, items in saved:
        if index == "cell":
            v.contents = items
            continue
        if index == "set":
            v.items = items[0]
            del v.history[items[1]:]
            continue
        if index == "outside":
            v.pending = items[0]
            if items[0] is not None:
                items[0].items[:] = items[1]
            if v.materialized():  # (read by the failed call: its guards are rolled back)
                v.forget_items()
            continue
        # In place: an iterator over a list shares the list's items (see GET_ITER).
        if isinstance(v.items, list):
            v.items[:] = items
        else:
            v.items.clear()
            v.items.update(items)
        if index is not None:
            v.index = index


class _History(list):
    """A runner's events; while `explain` listens, every runner's events also go there."""

    listener: list | None = None

    def append(self, item) -> None:
        super().append(item)
        if _History.listener is not None:
            _History.listener.append(item)


class _LazyLocals(dict):
    """Locals that wrap the frame's real values on first read (so unused inputs never become
    graph inputs, and inputs appear in first-use order)."""

    def __init__(self, builder, real: dict):
        super().__init__()
        self.builder = builder
        self.real = real
        self.loaded: dict = self  # what the translator has read or written

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.real

    def __getitem__(self, name):
        if not dict.__contains__(self, name):
            dict.__setitem__(self, name, self.builder.wrap(self.real[name], f"L[{name!r}]"))
        return dict.__getitem__(self, name)

    def pop(self, name, default=None):
        self.real.pop(name, None)
        return dict.pop(self, name, default)


class _Outputs:
    """The graph nodes a segment must output, numbered in order."""

    def __init__(self, builder=None):
        self.builder = builder  # where sizes computed from symbols become nodes
        self.nodes: list = []
        self.index: dict = {}
        self.aliases: dict = {}  # id of a mutable container variable -> its number
        self.at_break = False  # (the frame's state at a graph break, not a returned value)

    def add(self, node) -> int:
        k = self.index.get(node)
        if k is None:
            k = self.index[node] = len(self.nodes)
            self.nodes.append(node)
        return k


def _spec(v, outputs: _Outputs):
    """How to rebuild variable `v` after the graph ran."""
    if isinstance(v, AttrDictVariable):  # the rebuilt object's own table
        return ("method", _spec(v.owner, outputs), "__dict__")
    if isinstance(v, (ListVariable, DictVariable, SetVariable, IteratorVariable,
                      CellVariable, ObjectVariable)) and v.source is None:
        # One real object per variable: a list both in a local and on the stack (an argument
        # of the breaking call) must stay one list, or a mutation by the call is lost.
        k = outputs.aliases.setdefault(id(v), len(outputs.aliases))
        return ("alias", k, _spec_value(v, outputs))
    return _spec_value(v, outputs)


def _spec_function(v: NestedFunctionVariable, outputs: _Outputs):
    """How to rebuild function variable `v`: a new function of its code, its cells the
    frame's, as MAKE_FUNCTION makes it on every call (a comprehension's function on the
    stack at a break inside it, a grad-mode wrapper)."""
    return ("function", v.code, v.f_globals, [_spec(c, outputs) for c in v.closure],
            None if v.defaults is None else _spec(v.defaults, outputs),
            None if v.kwdefaults is None else _spec(v.kwdefaults, outputs))


def _store_spec(name, v, outputs: _Outputs):
    """How to rebuild the value a recorded store sets: for the items of a list from outside
    (`ListContents`), a new list of the items its variable holds at the end of the segment
    (the variable itself is rebuilt as the real list, read from its source)."""
    if isinstance(name, ListContents):
        return ("list", [_spec(i, outputs) for i in v.items])
    if type(name) is DictContents:  # (the items in order: rebuilt as an OrderedDict)
        return ("odict", {k: _spec(i, outputs) for k, i in v.items.items()})
    return _spec(v, outputs)


def _spec_value(v, outputs: _Outputs):
    if outputs.at_break and is_graph_made_wrapper(v):
        # A grad-mode wrapper made in the graph, live at a break: rebuilt marked, as Dynamo's
        # rebuilt one breaks where it is called (`calls.rebuilt_at_break`).
        made = ("const", v.value) if isinstance(v, ConstantVariable) else \
            _spec_function(v, outputs)
        return ("named", rebuilt_at_break, [made])
    if isinstance(v, TensorVariable):
        if v.node.op == "placeholder":
            return ("source", v.node.meta["source"])
        return ("out", outputs.add(v.node))
    if isinstance(v, ConstantVariable) and v.source is None and _has_symbol(v.value):
        return _size_spec(v.value, outputs)
    if isinstance(v, ConstantVariable):
        if isinstance(v.value, Tensor) and v.source is None:
            raise Unsupported("a tensor constant in the frame state")
        return ("source", v.source) if v.source is not None else ("const", v.value)
    if isinstance(v, DictViewVariable):  # a live view of the rebuilt dict
        return ("view", _spec(v.dict_var, outputs), v.kind)
    if isinstance(v, (TupleVariable, DictVariable)) and v.source is not None:
        return ("source", v.source)  # an input container: never mutated in a graph
    if isinstance(v, ListVariable):
        return ("list", [_spec(i, outputs) for i in v.items])
    if isinstance(v, TupleVariable) and v.cls is not None:  # rebuilt as its named tuple
        return ("named", v.cls, [_spec(i, outputs) for i in v.items])
    if isinstance(v, TupleVariable):
        return ("tuple", [_spec(i, outputs) for i in v.items])
    if isinstance(v, DefaultDictVariable):
        if not isinstance(v.factory, ConstantVariable):
            raise Unsupported("a defaultdict whose factory was made in the graph, live at a "
                              "graph break")
        return ("ddict", {k: _spec(i, outputs) for k, i in v.items.items()}, v.factory.value)
    if isinstance(v, OrderedDictVariable):
        return ("odict", {k: _spec(i, outputs) for k, i in v.items.items()})
    if isinstance(v, DictVariable):
        return ("dict", {k: _spec(i, outputs) for k, i in v.items.items()})
    if isinstance(v, SliceVariable):
        return ("slice", [_spec(i, outputs) for i in (v.start, v.stop, v.step)])
    if isinstance(v, SetVariable) and not holds_symbol(list(v.items)):
        # A real set filled as the program filled its set (same layout, same iteration
        # order; a copy of one may not be), new on every call.
        return ("set_replay", tuple(v.history))
    if isinstance(v, SetVariable):
        return ("set", [_spec(i, outputs) for i in v.items.values()])
    if isinstance(v, TruthVariable):  # bool() of a tensor the graph outputs, for real
        return ("truth", _spec(v.tensor, outputs))
    if isinstance(v, MethodVariable):
        return ("method", _spec(v.obj, outputs), v.name)
    if isinstance(v, NullVariable):
        return ("null",)
    if isinstance(v, IteratorVariable) and v.watch is not None:
        container, size, kind = v.watch
        if len(container.items) != size:  # its next step raises: let Python's iterator do it
            raise Unsupported("a dict or set resized while it is iterated, at a graph break")
        # The real container's own iterator, advanced as far: it raises if the rest of the
        # loop resizes the container.
        return ("resume_iter", _spec(container, outputs), v.index, kind)
    if isinstance(v, IteratorVariable):
        return ("iter", [_spec(i, outputs) for i in v.items[v.index:]])
    if isinstance(v, NestedFunctionVariable):
        return _spec_function(v, outputs)
    if isinstance(v, BoundFunctionVariable):  # a method of a value the graph rebuilt
        return ("bound", v.func, _spec(v.obj, outputs))
    if isinstance(v, PartialVariable) and v.source is not None:  # read from the frame
        return ("source", v.source)
    if isinstance(v, PartialVariable):  # a real functools.partial of the rebuilt parts
        return ("partial", _spec(v.func, outputs), [_spec(a, outputs) for a in v.args],
                {k: _spec(a, outputs) for k, a in v.kwargs.items()})
    if isinstance(v, BlockExitVariable):  # entered again for real after the graph
        return ("block", v.kind, v.args, v.grad)
    if isinstance(v, ObjectVariable) and v.source is not None:
        return ("source", v.source)  # a real object from outside (its writes replayed)
    if isinstance(v, OutsideIteratorVariable):
        return ("source", v.source)  # (never read while translating)
    if isinstance(v, (ObjectVariable, WeakRefVariable)):
        # A new instance holding the rebuilt attributes, or a weak reference to one.
        from .objects import object_spec

        return object_spec(v, lambda item: _spec(item, outputs))
    if isinstance(v, GeneratorContextVariable) and v.frame is None and not v.kwargs:
        # (not entered yet: made again for real from its function and arguments)
        return ("named", v.helper, [_spec(a, outputs) for a in v.args])
    if isinstance(v, SdpaExitVariable):
        raise Unsupported("a graph break inside a with sdpa_kernel() block")
    if isinstance(v, CatchWarningsExitVariable):  # (made in an inlined call)
        raise Unsupported("a graph break inside a with warnings.catch_warnings() block")
    if isinstance(v, CatchWarningsVariable):  # not entered yet: a new one on every call
        return ("named", new_catch_warnings, [("const", v.record)])
    if isinstance(v, InferenceModeVariable):  # not entered yet: a new one on every call
        from ...autograd.grad_mode import inference_mode

        return ("named", inference_mode, [("const", v.mode)])
    if isinstance(v, GradModeVariable) and v.exit is None:
        if v.before is not None:  # `set_grad_enabled(m)` switched the mode as it was made
            raise Unsupported("a set_grad_enabled() object live at a graph break")
        # `no_grad()` not entered yet (a decorator, a context kept for later): a new one of
        # the same kind on every call.
        from ...autograd import grad_mode

        return ("named", grad_mode.enable_grad if v.mode else grad_mode.no_grad, [])
    if isinstance(v, GradModeVariable):
        return ("grad_exit", v.exit)
    if isinstance(v, CellVariable):  # a cell the frame made: a real cell from now on
        if v.source is not None:  # a real cell of this call's frame or closure
            return ("source", v.source)
        if v.real is not None:
            return ("const", v.real)
        return ("cell", None if v.contents is None else _spec(v.contents, outputs))
    raise Unsupported(f"cannot rebuild a {type(v).__name__}")


def _size_spec(value, outputs: _Outputs):
    """A size computed from symbols, live after the graph: a symbol is read again from its
    source, an expression is a graph output, a shape is made again from its items (a named
    tuple holding them is specialised, guarded)."""
    if isinstance(value, SymText):  # formatted from the floats' values of the call
        return ("text", [p if isinstance(p, str) else (_size_spec(p[0], outputs), p[1], p[2])
                         for p in value.parts])
    if isinstance(value, SymFloat):  # a dynamic float: its input, or computed by the graph
        if value.leaf is not None:
            return ("source", value.leaf)
        return ("out", outputs.add(value.node()))
    if isinstance(value, SymInt):
        builder = outputs.builder
        if value._is_symbol():
            return ("source", builder.shape_env.sources[value.expr])
        return ("out", outputs.add(value.node(builder.graph, builder.symbol_nodes,
                                              builder.created)))
    if isinstance(value, (tuple, list)) and not hasattr(type(value), "_fields"):
        # A shape (`x.shape` returned): rebuilt from its items, each symbol read again.
        items = [_size_spec(v, outputs) if holds_symbol(v) or isinstance(v, SymFloat)
                 else ("const", v) for v in value]
        return ("named", type(value), [("list", items)])
    return ("const", type(value)(float(v) if isinstance(v, SymFloat) else int(v)
                                 for v in value))


def _store_back(tr: Translator, L: dict, S: list) -> None:
    for k, v in tr.locals.items():
        L[k] = v.value if isinstance(v, ConstantVariable) else v
    S[:] = [NULL if isinstance(v, NullVariable) else v.value for v in tr.stack]


def _keeps(name: str) -> bool:
    """Whether a call spelled `name` (a method, or a function's name) stays although nothing
    reads it: it writes into an argument (`add_`, `iadd`) or draws from the generator
    (`rand`, `dropout`: eager's later draws must see the generator where eager leaves it). A
    protocol method (`__setitem__`, `__iadd__`, ...) may write into its object, so it stays
    too."""
    return has_flag(name, INPLACE) or has_flag(name, RANDOM) \
        or name.strip("_") in _INPLACE_OPERATORS or (name.startswith("__") and name.endswith("__"))


def kept_call(node) -> bool:
    """Whether call node `node` of a captured graph stays although nothing reads it: its
    target is impure (`fx.node.is_impure_call`: a marked function such as a region's edge or
    an assertion, a registry op handle that writes or draws), or its public spelling writes
    or draws (`_keeps`; a capture graph calls methods and `inplace=True` layers that
    torch.fx's elimination would drop)."""
    if node.op not in ("call_function", "call_method"):
        return False
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__",
                                                                    "")
    return is_impure_call(node.target) or _keeps(name) or node.kwargs.get("inplace") is True


def _eliminate_dead_code(graph, keep) -> None:
    keep = set(keep)
    for node in reversed(list(graph.nodes)):
        if node.op == "output" or node in keep or node.users:
            continue
        if node.op == "placeholder" and node.meta.get("symbol") and \
                not node.meta.get("unified"):
            continue  # a size input: Dynamo keeps these even where unused
        if node.op == "placeholder":  # an input nothing uses (Dynamo drops these too)
            graph.erase_node(node)
            continue
        if kept_call(node):
            continue  # in-place ops change their inputs; an autocast region's edges: keep
        graph.erase_node(node)


def _line_of(code, offset: int) -> int | None:
    line = None
    for start, _end, ln in code.co_lines():
        if start <= offset and ln is not None:
            line = ln
    return line


def _check_constraints(builder: GraphBuilder) -> None:
    """Raise PyTorch's ConstraintViolationError when the capture specialised a size the
    program marked with `mark_dynamic` (a graph for one value would pass silently)."""
    env = builder.shape_env
    fixed = [(name, source) for name, source in builder.strict_symbols.items()
             if name in env.specialized]
    if not fixed:
        return
    sources = ", ".join(source for _, source in fixed)
    lines = [f"Constraints violated ({sources})! For more information, run with "
             'TORCH_LOGS="+dynamic".']
    for name, source in fixed:
        lines.append(f"  - You marked {source} as dynamic but your code specialized it to be a "
                     f"constant ({env.hints[name]}). If you're using mark_dynamic, either "
                     "remove it or use maybe_mark_dynamic. If you're using Dim.DYNAMIC, "
                     "replace it with either Dim.STATIC or Dim.AUTO.")
    raise ConstraintViolationError("\n".join(lines))
