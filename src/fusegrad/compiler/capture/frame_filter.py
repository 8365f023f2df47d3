"""Which frames capture skips because nothing in them is a tensor, as Dynamo skips them.

Dynamo compiles the function given to `torch.compile` whatever it holds, but any other frame
it meets (a resume function after a graph break, a function called for real after a break
inside it) is translated only if it could touch tensors: its code names a `torch` (here
`fusegrad`) or NumPy module among its globals, or its locals hold a tensor or a module,
directly or inside an exact list, tuple, dict or namedtuple. A skipped frame runs as plain
Python (the functions it calls are still compiled on their own): no graph and no break of
its own is counted. The locals of a resume point are the ones still read after it
(`live_locals`, Dynamo's resume functions take no others), its stack, and the frame's cells.
"""

from __future__ import annotations

import dis
import sys
import types
import weakref

from ..._tensor import Tensor
from .exceptions import exception_entries
from .versions import _JUMPS, _TERMINAL, _UNCONDITIONAL

_LOCAL_OPS = frozenset(dis.haslocal) | frozenset(dis.hasfree)


def _module_named(value, package: str) -> bool:
    return isinstance(value, types.ModuleType) and (
        value.__name__ == package or value.__name__.startswith(package + "."))


def names_tensor_module(code: types.CodeType, f_globals: dict) -> bool:
    """Whether a global name `code` reads is the `fusegrad` package, one of its modules, or
    NumPy's."""
    for name in code.co_names:
        value = f_globals.get(name)
        if value is not None and (_module_named(value, "fusegrad") or
                                  _module_named(value, "numpy")):
            return True
    return False


def _is_namedtuple(value) -> bool:
    """Whether `value` is a namedtuple as Dynamo counts one: made by `namedtuple(...)`, or
    of a subclass of one that keeps its `__new__` (a `PackedSequence` does not)."""
    cls = type(value)
    if not isinstance(value, tuple) or not isinstance(getattr(cls, "_fields", None), tuple) \
            or not callable(getattr(cls, "_make", None)):
        return False
    return _namedtuple_class(cls)


def _namedtuple_class(cls: type) -> bool:
    bases = tuple(b for b in cls.__bases__ if getattr(b, "__qualname__", "") != "Generic")
    if bases == (tuple,):
        return True
    return any(isinstance(getattr(b, "_fields", None), tuple) and _namedtuple_class(b) and
               cls.__new__ is b.__new__ for b in bases if issubclass(b, tuple))


def holds_tensor(values) -> bool:
    """Whether one of `values` is a tensor, a module (or a module class), a NumPy array or
    scalar, or an exact list, tuple, dict or namedtuple holding one."""
    from ...nn import Module

    seen: set[int] = set()
    todo = list(values)
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (Tensor, Module)) or type(v) is type and issubclass(v, Module):
            return True
        numpy = sys.modules.get("numpy")
        if numpy is not None and (type(v) is numpy.ndarray or isinstance(v, numpy.generic)):
            return True
        if type(v) in (list, tuple):
            todo.extend(v)
        elif type(v) is dict:
            todo.extend(list(v.values()))
        elif _is_namedtuple(v):
            todo.extend(getattr(v, f) for f in type(v)._fields)
    return False


def _names(inst) -> tuple:
    """The variable names instruction `inst` reads and writes, in order: ("r"|"w", name)."""
    op = inst.opname
    if op == "LOAD_FAST_LOAD_FAST":  # (3.13: two reads)
        return tuple(("r", n) for n in inst.argval)
    if op == "STORE_FAST_STORE_FAST":
        return tuple(("w", n) for n in inst.argval)
    if op == "STORE_FAST_LOAD_FAST":
        return ("w", inst.argval[0]), ("r", inst.argval[1])
    if "LOAD" in op or "DELETE" in op:
        return (("r", inst.argval),)
    if "STORE" in op:
        return (("w", inst.argval),)
    return ()


def live_locals(code: types.CodeType, insts: list, index_of: dict, offset: int) -> frozenset:
    """The names of `code`'s variables read from `offset` on before the straight line of
    instructions from there writes them: those a resume function at `offset` takes (a read
    after a jump or in an exception handler counts unless that straight line wrote the name
    first, as Dynamo's analysis counts it)."""
    cached = _LIVE.setdefault(code, {})
    found = cached.get(offset)
    if found is not None:
        return found
    handlers = [(start, end, target) for start, end, target, _, _ in exception_entries(code)]
    written: set[str] = set()  # by the straight line from `offset`
    reads: set[str] = set()
    visited: set[int] = set()

    def walk(k: int, straight: bool) -> None:
        # Iterative over branch targets (a long function must not exhaust the stack).
        todo = [(k, straight)]
        while todo:
            k, straight = todo.pop()
            if not straight:
                if k in visited:
                    continue
                visited.add(k)
            while k < len(insts):
                inst = insts[k]
                if inst.opcode in _LOCAL_OPS:
                    for kind, name in _names(inst):
                        if kind == "r" and name not in written:
                            reads.add(name)
                        elif kind == "w" and straight:
                            written.add(name)
                for start, end, target in handlers:
                    if start <= inst.offset < end and target in index_of:
                        todo.append((index_of[target], False))
                if inst.opcode in _JUMPS and inst.argval in index_of:
                    todo.append((index_of[inst.argval], False))
                    if inst.opname in _UNCONDITIONAL:
                        break
                    if straight:  # the fall-through is one path of two from here
                        todo.append((k + 1, False))
                        break
                if inst.opname in _TERMINAL:
                    break
                k += 1

    walk(index_of[offset], True)
    found = cached[offset] = frozenset(reads)
    return found


# code -> {offset: live names}: code objects never change.
_LIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def frame_holds_tensors(fn: types.FunctionType, offset: int, L: dict, S: list,
                        insts: list, index_of: dict) -> bool:
    """Whether the frame of `fn` at `offset` (locals `L`, stack `S`) is one Dynamo would
    translate: its code names a tensor module, or its live locals (all of them at offset 0),
    stack or cells hold a tensor."""
    code = fn.__code__
    if names_tensor_module(code, fn.__globals__):
        return True
    live = None if offset == 0 else live_locals(code, insts, index_of, offset)
    values = [v for k, v in L.items() if not k.startswith("___") and (
        live is None or k in live or k in code.co_cellvars)]
    values += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    values += [v.cell_contents if type(v) is types.CellType and _filled(v) else v for v in S]
    values = [v.cell_contents if type(v) is types.CellType and _filled(v) else v
              for v in values]
    return holds_tensor(values)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True
