"""What the functions a captured graph holds read when they run: read again on every call.

A captured graph may hold a user function as a constant argument (flex_attention's
`score_mod` and `mask_mod`). Capture does not look inside it: eagerly, each call runs it, and it
reads the module globals and closure cells it names then. A trace runs it once and keeps what
it read, so before each call of a compiled graph the runner reads them again (`Reads`):

- a tensor (a bias table) becomes an input of the trace, passed anew on each call (a write
  into it, or another tensor bound to the name, is seen; its metadata is in the cache key).
  The trace takes the tensor the function reads as that input (`Tracer.lift`); one that
  requires grad is refused (the function's reads reach its autograd history outside the
  trace), and the graph runs eagerly;
- a number, string, None or a tuple of them is part of the cache key by value (another value
  traces again, as Dynamo's guards on a global constant recompile);
- a function the program defined is scanned in turn (what it reads is read again too);
  other objects (modules, classes, fusegrad's functions) are keyed by identity.

The names read are those the function's code (and the code nested in it) names that its
globals hold, and its closure cells; reads through an object's attributes are not followed.
"""

from __future__ import annotations

import functools
import os
import types

from ..._tensor import Tensor
from ..._thread_state import local as _thread_local

# Values keyed by what they are; a tuple of them too.
_PLAIN = (int, float, bool, str, bytes, complex, type(None))
_OWN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_MISSING = object()
_DEPTH = 6  # functions reached through functions (deeper ones are keyed by identity)


def _user_function(f) -> bool:
    """Whether `f` is a Python function of the program (not fusegrad's own)."""
    return isinstance(f, types.FunctionType) and not f.__code__.co_filename.startswith(_OWN)


def _names(code) -> set:
    """The global names `code` and the code nested in it (lambdas, comprehensions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _functions_in(value, found: list) -> None:
    """Append the user functions in a node argument `value` (through containers and
    `functools.partial`) to `found`."""
    if isinstance(value, (list, tuple)):
        for v in value:
            _functions_in(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _functions_in(v, found)
    elif isinstance(value, functools.partial):
        _functions_in((value.func, value.args, value.keywords), found)
    elif isinstance(value, types.MethodType):
        _functions_in(value.__func__, found)
    elif _user_function(value) and all(value is not f for f in found):
        found.append(value)


def _global_getter(namespace: dict, name: str):
    return lambda: namespace.get(name, _MISSING)


def _cell_getter(cell):
    def get():
        try:
            return cell.cell_contents
        except ValueError:  # (an empty cell)
            return _MISSING
    return get


class Reads:
    """The globals and closure cells the user functions of a graph read (see the module
    docstring): `tensors` of them become inputs of the trace, the others make a key."""

    def __init__(self, functions: list) -> None:
        self.getters: list = []  # one per global name or cell read
        seen: set = set()
        todo = [(f, 0) for f in functions]
        while todo:
            f, depth = todo.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            getters = [_global_getter(f.__globals__, name) for name in
                       sorted(_names(f.__code__)) if name in f.__globals__]
            getters += [_cell_getter(cell) for cell in f.__closure__ or ()]
            for get in getters:
                self.getters.append(get)
                value = get()
                if depth < _DEPTH:
                    inner: list = []
                    _functions_in(value, inner)
                    todo += [(g, depth + 1) for g in inner]
        values = [get() for get in self.getters]
        # The reads holding tensors now are the trace's inputs; the others make the key.
        self.tensor_slots = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
        tensor_slots = set(self.tensor_slots)
        self.other_slots = [i for i in range(len(values)) if i not in tensor_slots]
        # The functions scanned: what another function bound to a name reads is not read
        # again, so a call meeting one runs eagerly.
        self.scanned = {i: v for i, v in enumerate(values) if id(v) in seen}
        self.held: dict = {}  # the objects keyed by identity (their ids stay theirs)

    def __bool__(self) -> bool:
        return bool(self.tensor_slots) or bool(self.other_slots)

    def current(self) -> tuple | None:
        """(the tensors read now, the key of the other values read now); None where a read
        holds what the trace cannot take (a tensor where there was none, or the reverse)."""
        values = [get() for get in self.getters]
        tensors = tuple(values[i] for i in self.tensor_slots)
        if not all(isinstance(t, Tensor) for t in tensors):
            return None
        for i, f in self.scanned.items():
            if values[i] is not f:
                return None
        key = []
        for i in self.other_slots:
            v = values[i]
            if isinstance(v, Tensor):
                return None
            if type(v) in _PLAIN or type(v) is tuple and all(type(x) in _PLAIN for x in v):
                # (1, 1.0 and True are equal: the type tells them apart, as a trace may)
                key.append((type(v), v))
            else:
                self.held.setdefault(id(v), v)  # (no other object takes its id)
                key.append((id(v),))
        return tensors, _ReadsKey(key)


class _ReadsKey(tuple):
    """The key of the values read (an argument of the trace it does not read): its repr is
    the cache key's part, which states each value and each object's identity."""

    def __repr__(self) -> str:
        return "Reads(" + ", ".join(
            f"{k[0].__name__}:{k[1]!r}" if len(k) == 2 else f"id:{k[0]}" for k in self) + ")"


def reads_of(gm) -> Reads | None:
    """The reads of the user functions graph module `gm`'s nodes take as arguments, or
    None when there are none."""
    found: list = []
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            _functions_in((n.args, n.kwargs), found)
    if not found:
        return None
    reads = Reads(found)
    return reads if reads else None


def _active_tracer():
    """The AOT tracer recording on this thread, or None."""
    from .tracing import Tracer

    for mode in reversed(_thread_local.modes or ()):
        if isinstance(mode, Tracer) and mode.functional:
            return mode
    return None


class WithReads:
    """The program called with the tensors its functions read, and the key of their other
    reads, after its first `at` arguments (its state): it drops them, but while traced it
    tells the tracer that each tensor it reads is the input standing for it."""

    def __init__(self, program, reads: Reads, at: int) -> None:
        # (underscored: `AOTCompiled` copies a program's attributes onto itself)
        self._program = program
        self._reads = reads
        self._at = at
        self.__qualname__ = getattr(program, "__qualname__", type(program).__qualname__)

    def __call__(self, *args):
        at, n = self._at, len(self._reads.tensor_slots)
        stand_ins = args[at:at + n]
        tracer = _active_tracer()
        if tracer is not None:
            found = self._reads.current()
            if found is None:
                from .functionalize import AOTUnsupported

                raise AOTUnsupported("a value a function of the graph reads changed kind")
            for t, stand_in in zip(found[0], stand_ins):
                if stand_in is not t:
                    tracer.lift(t, stand_in)
        return self._program(*args[:at], *args[at + n + 1:])
