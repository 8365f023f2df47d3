"""Bytecode that differs between the CPython versions capture supports (3.11, 3.12, 3.13).

3.12 adds RETURN_CONST, BINARY_SLICE/STORE_SLICE, END_FOR, CALL_INTRINSIC_1 and inlines
list/dict/set comprehensions into their function (PEP 709: LOAD_FAST_AND_CLEAR saves the loop
variable, SWAPs move the iterator under the new list, and an exception handler restores the
variable). 3.13 adds super-instructions (LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST,
STORE_FAST_STORE_FAST), TO_BOOL and COMPARE_OP's bool flag, CALL_KW (KW_NAMES is gone),
FORMAT_SIMPLE/FORMAT_WITH_SPEC/CONVERT_VALUE, MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE, an END_FOR
that pops one value (FOR_ITER skips it and the POP_TOP after it), and it pushes a callable
*before* its NULL-or-self (3.11 and 3.12 push NULL first).

`NewerOpcodes` holds the handlers of these opcodes; `Translator` inherits them. The version
switches below are read by the translator's load and call opcodes.
"""

from __future__ import annotations

import dis
import sys
import types

from ..._tensor import Tensor
from .variables import (
    ConstantVariable,
    NullVariable,
    ObjectVariable,
    TensorVariable,
    TruthVariable,
    Unsupported,
    Variable,
)

SUPPORTED_VERSIONS = ((3, 11), (3, 12), (3, 13))
PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)
# 3.12+: LOAD_ATTR's low bit asks for a method load (3.11 has LOAD_METHOD).
METHOD_LOAD_ATTR = PY312
# 3.13 pushes `callable, NULL-or-self`; 3.11 and 3.12 push `NULL-or-method, callable-or-self`.
NULL_AFTER_CALLABLE = PY313
# 3.13's COMPARE_OP: bit 4 of the oparg asks for bool(result) (the compare feeds a branch).
COMPARE_TO_BOOL = 16

# Opcodes of 3.12 and 3.13 (handled below or aliased in the translator).
NEWER_OPCODES = {
    "LOAD_FAST_CHECK", "RETURN_CONST", "BINARY_SLICE", "STORE_SLICE", "END_FOR",
    "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE",
    "CALL_INTRINSIC_1", "LOAD_FAST_AND_CLEAR",
    # 3.13
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "TO_BOOL",
    "CALL_KW", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "SET_FUNCTION_ATTRIBUTE",
}
# What an inlined comprehension's exception handler does: put the saved loop variable back
# and re-raise. Skipping it is sound because an exception always leaves the frame (try/except
# makes a function run natively), so the restored variable is never seen.
_CLEANUP_OPCODES = {"SWAP", "POP_TOP", "STORE_FAST", "RERAISE"}
_UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                  "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT"}
_TERMINAL = {"RETURN_VALUE", "RETURN_CONST", "RERAISE", "RAISE_VARARGS"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def comprehension_cleanups(code: types.CodeType, insts: list, index_of: dict) -> set[int]:
    """Offsets of the instructions of `code`'s exception handlers that only restore an inlined
    comprehension's variable and re-raise (3.12+); the translator never runs them."""
    offsets: set[int] = set()
    for entry in dis.Bytecode(code).exception_entries:
        k = index_of.get(entry.target)
        block = []
        while k is not None and k < len(insts) and insts[k].opname in _CLEANUP_OPCODES:
            block.append(insts[k].offset)
            if insts[k].opname == "RERAISE":
                offsets.update(block)
                break
            k += 1
    return offsets


def comprehension_regions(code: types.CodeType, insts: list, index_of: dict) -> dict:
    """3.12+: the inlined comprehensions of `code`, as {start: end} offsets: from the
    GET_ITER that makes the comprehension's iterator to just after the STORE_FASTs that put
    back the variables it saved (a graph break inside one runs it whole, for real, and the
    frame resumes after it). Empty on 3.11, whose comprehensions are functions."""
    regions: dict[int, int] = {}
    if not PY312:
        return regions
    starts: dict[int, int] = {}  # handler -> first protected offset (a nested one splits
    for entry in dis.Bytecode(code).exception_entries:  # its range into several entries)
        starts[entry.target] = min(starts.get(entry.target, entry.start), entry.start)
    for target, start in starts.items():
        k = index_of.get(target)
        saved = []  # the variables the cleanup handler puts back
        while k is not None and k < len(insts) and insts[k].opname in _CLEANUP_OPCODES:
            if insts[k].opname == "STORE_FAST":
                saved.append(insts[k].argval)
            if insts[k].opname == "RERAISE":
                break
            k += 1
        else:
            continue
        first = index_of.get(start)
        if not saved or first is None:
            continue
        # Its loop is the first FOR_ITER of the range; the variables are put back after it.
        loop = next((i for i in insts[first:] if i.opname == "FOR_ITER"), None)
        first -= 1
        while first >= 0 and insts[first].opname in ("LOAD_FAST_AND_CLEAR", "SWAP"):
            first -= 1
        last = len(insts) if loop is None else index_of.get(loop.argval, len(insts))
        left = set(saved)
        while last < len(insts) and left and insts[last].opcode not in _JUMPS and \
                insts[last].opname not in _TERMINAL:
            if insts[last].opname == "STORE_FAST":
                left.discard(insts[last].argval)
            last += 1
        if first >= 0 and insts[first].opname == "GET_ITER" and not left and \
                last < len(insts):
            regions[insts[first].offset] = insts[last].offset
    return regions


def normal_flow(insts: list, index_of: dict) -> set[int]:
    """Offsets reachable from the first instruction without an exception (so a backward jump
    in a `with` block's exception handler, as 3.12+ emit, is not taken for a loop)."""
    seen: set[int] = set()
    todo = [0]
    while todo:
        k = todo.pop()
        while k < len(insts) and insts[k].offset not in seen:
            inst = insts[k]
            seen.add(inst.offset)
            if inst.opcode in _JUMPS and inst.argval in index_of:
                todo.append(index_of[inst.argval])
                if inst.opname in _UNCONDITIONAL:
                    break
            if inst.opname in _TERMINAL:
                break
            k += 1
    return seen


class NewerOpcodes:
    """Handlers of the opcodes 3.12 and 3.13 added (a mixin of `Translator`)."""

    # ---------------------------------------------------------------- 3.12

    def RETURN_CONST(self, inst):  # noqa: N802
        from .translator import Return

        raise Return(self.const(inst.argval))

    def BINARY_SLICE(self, inst):  # noqa: N802
        self._slice_from_bounds()
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst):  # noqa: N802
        self._slice_from_bounds()
        self.STORE_SUBSCR(inst)

    def _slice_from_bounds(self) -> None:
        # The slice opcodes take start and stop on the stack: make the slice object.
        from .translator import _Arg

        self.push(self.const(None))
        self.BUILD_SLICE(_Arg(3))

    def END_FOR(self, inst):  # noqa: N802
        # Never reached in practice (FOR_ITER jumps past it); 3.12's pops the iterator and
        # the value, 3.13's only the value (a POP_TOP follows for the iterator).
        self.pop()
        if not PY313:
            self.pop()

    def CALL_INTRINSIC_1(self, inst):  # noqa: N802
        if inst.arg == 5:  # unary positive
            self.UNARY_POSITIVE(inst)
        elif inst.arg == 6:  # list to tuple
            self.LIST_TO_TUPLE(inst)
        else:
            raise Unsupported(f"intrinsic function {inst.argrepr}")

    def LOAD_FAST_AND_CLEAR(self, inst):  # noqa: N802
        # An inlined comprehension saves its loop variable (NULL when unbound); the
        # STORE_FAST after the loop puts it back (a NULL unbinds it again).
        name = inst.argval
        self.push(self.locals[name] if name in self.locals else NullVariable())
        self.locals.pop(name, None)

    # ---------------------------------------------------------------- 3.13

    def LOAD_FAST_LOAD_FAST(self, inst):  # noqa: N802
        first, second = inst.argval
        self._load_fast(first)
        self._load_fast(second)

    def STORE_FAST_LOAD_FAST(self, inst):  # noqa: N802
        store, load = inst.argval
        self._store_fast(store, self.pop())
        self._load_fast(load)

    def STORE_FAST_STORE_FAST(self, inst):  # noqa: N802
        first, second = inst.argval  # the first name takes the top of the stack
        self._store_fast(first, self.pop())
        self._store_fast(second, self.pop())

    def TO_BOOL(self, inst):  # noqa: N802
        self.push(self.to_bool(self.pop()))

    def to_bool(self, v: Variable) -> Variable:
        """`bool(v)`: a constant, or a `TruthVariable` for a graph tensor (so that, as on 3.11
        and 3.12, the graph break comes at the branch that reads it, not before)."""
        if isinstance(v, TensorVariable):
            return TruthVariable(v)
        if isinstance(v, TruthVariable):
            return v
        return self.const(self.truth(v))

    def CALL_KW(self, inst):  # noqa: N802
        names = self.pop()  # a constant tuple of the keyword names, above their values
        self.kw_names = names.value
        self.CALL(inst)

    def FORMAT_SIMPLE(self, inst):  # noqa: N802
        self.push(self._format(self.pop(), self.const("")))

    def FORMAT_WITH_SPEC(self, inst):  # noqa: N802
        spec = self.pop()
        self.push(self._format(self.pop(), spec))

    def CONVERT_VALUE(self, inst):  # noqa: N802
        v = self.pop()
        if self._plain_container(v) is None and not isinstance(
                v, (ConstantVariable, ObjectVariable)) or (
                isinstance(v, ConstantVariable) and not self.concrete and
                isinstance(v.value, Tensor)):
            raise Unsupported("formatting a tensor")
        conv = {1: str, 2: repr, 3: ascii}[inst.arg]
        self.push(self.converted(v, conv))

    def SET_FUNCTION_ATTRIBUTE(self, inst):  # noqa: N802
        pass  # MAKE_FUNCTION applied it already (see `function_attribute_flags`)

    def function_attribute_flags(self) -> int:
        """3.13: the flags of the SET_FUNCTION_ATTRIBUTEs after the MAKE_FUNCTION being run
        (they pop the attributes in the order 3.11's MAKE_FUNCTION flags did)."""
        flags = 0
        k = self.pc
        while k < len(self.insts) and self.insts[k].opname == "SET_FUNCTION_ATTRIBUTE":
            flags |= self.insts[k].arg
            k += 1
        return flags
