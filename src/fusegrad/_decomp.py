"""Decomposition tables for AOT autograd (PyTorch's `torch._decomp`).

A registry entry's `decomposition` rewrites the op into simpler registry ops: it takes the
op's positional arguments and returns what the op returns, computing it with fusegrad ops
(Tensor methods and `dispatch.call`), so that tracing it records those ops and autograd
differentiates through them. A tracer given a table `{OpDef: fn}` runs `fn` in place of
recording the op, and does so again for any op `fn` calls that is also in the table.

The ops with no decomposition are the *core* set: what remains of a program once every
decomposition has run, and what the code generator lowers. Following every decomposition
down ends in core ops (tests/test_decompositions.py checks this closure on every entry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .ops.registry import REGISTRY, OpDef

__all__ = ["core_aten_decompositions", "core_ops", "get_decompositions", "is_core",
           "remove_decompositions"]


def is_core(op: OpDef) -> bool:
    """Whether `op` is primitive: it has no decomposition, so tracing records it as is."""
    return op.decomposition is None


def core_ops() -> frozenset[OpDef]:
    """The core set: every registry entry without a decomposition."""
    return frozenset(op for op in REGISTRY.values() if is_core(op))


def core_aten_decompositions() -> dict[OpDef, Callable]:
    """Every registry decomposition, keyed by its entry: applied recursively, it rewrites a
    traced program into core ops only."""
    return {op: op.decomposition for op in REGISTRY.values() if not is_core(op)}


def _overloads(op: OpDef | str) -> list[OpDef]:
    """The entries `op` names: itself, the entry of that exact name (`"var.correction"`), or
    every overload of a base name (`"var"`, as PyTorch's overload packets)."""
    if isinstance(op, OpDef):
        return [op]
    if not isinstance(op, str):
        raise TypeError(f"expected a registry op or an op name, got {type(op).__name__}")
    if op in REGISTRY:
        return [REGISTRY[op]]
    return [entry for name, entry in REGISTRY.items() if name.split(".")[0] == op]


def get_decompositions(aten_ops: Iterable[OpDef | str]) -> dict[OpDef, Callable]:
    """The decompositions of the ops named (entries or names; a base name stands for all its
    overloads). Ops without a decomposition are left out silently, as in PyTorch."""
    table: dict[OpDef, Callable] = {}
    for op in aten_ops:
        for entry in _overloads(op):
            if not is_core(entry):
                table[entry] = entry.decomposition
    return table


def remove_decompositions(decompositions: dict[OpDef, Callable],
                          aten_ops: Iterable[OpDef | str]) -> None:
    """Drop the ops named (entries or names, as in `get_decompositions`) from a table, in
    place: a backend that lowers an op itself keeps it whole."""
    for op in aten_ops:
        for entry in _overloads(op):
            decompositions.pop(entry, None)
