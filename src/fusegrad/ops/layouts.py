"""The memory order of an op's result in eager mode, which its kernel decides: NumPy's
ufuncs (and the kernels written over them) lay a new result out in their operands' order
(NumPy's order "K"), other kernels allocate it contiguous. Each op's entry says which
(`OpDef.result_order`); compiled code gives its outputs the same layout
(`compiler/codegen/layout.py`)."""

from __future__ import annotations


def is_view_copy(base: str) -> bool:
    """Whether `base` names the copying form of a view op (`slice_copy`, `alias_copy`)."""
    return base.endswith("_copy") and base not in ("_to_copy", "copy")


def follows_operands(op) -> bool:
    """Whether eager's result of registry op `op` (not a view) follows its tensor operands'
    memory order rather than being contiguous."""
    return op.result_order == "operands"
