"""Where in the program each captured node was made: its `meta["stack_trace"]`.

Dynamo gives every node of a captured graph the user's stack at the instruction that made it
(the frames of the function and of the calls inlined into it, outermost first), and
`print_readable` heads each run of nodes with the innermost frame
(`# File: model.py:12 in forward, code: y = self.lin(x)`). Frames of fusegrad's own code
(a layer's `forward`, `Module.__call__`) are left out, as Dynamo leaves out torch's: a node
made by `nn.Linear` shows the program's line that called the layer, and a graph of fusegrad's
code alone (`compile(nn.Linear(2, 2))`) has empty stack traces.

Each frame is written as Python 3.11's `traceback` writes a frame summary that has a start
column and no end line (Dynamo's): the file, line and function, the line of code, and carets
from the instruction's first character to the end of the line, left out where they would
underline the whole line.
"""

from __future__ import annotations

import linecache
import os
import weakref

from ... import fx

# Code in these files is fusegrad's, not the program's.
_OWN_FILES = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def is_own_code(code) -> bool:
    """Whether `code` is fusegrad's own (its frames are not the program's)."""
    return code.co_filename.startswith(_OWN_FILES + os.sep)


def _line_of(code, inst) -> int:
    positions = getattr(inst, "positions", None)
    line_no = positions.lineno if positions is not None else None
    return line_no if line_no is not None else inst.starts_line or code.co_firstlineno


def resume_name(code, broken) -> str:
    """The name of a frame resumed after a break at instruction `broken` of `code`: Dynamo's
    resume function's."""
    return f"torch_dynamo_resume_in_{code.co_name}_at_{_line_of(code, broken)}"


def frame_text(code, inst, name: str | None = None) -> str:
    """One frame of a stack trace: `code` (called `name`, by default its own) running
    instruction `inst`."""
    positions = getattr(inst, "positions", None)
    line_no = _line_of(code, inst)
    text = f'  File "{code.co_filename}", line {line_no}, in {name or code.co_name}\n'
    line = linecache.getline(code.co_filename, line_no).rstrip()
    if not line.strip():
        return text
    stripped = line.lstrip()
    indent = len(line) - len(stripped)
    text += f"    {stripped}\n"
    column = positions.col_offset if positions is not None else None
    if column is not None:
        # (The offset counts UTF-8 bytes; the carets count characters.)
        start = len(line.encode("utf-8")[:column].decode("utf-8", "replace"))
        if start > indent:
            text += "    " + " " * (start - indent) + "^" * (len(line) - start) + "\n"
    return text


def stack_trace(translator) -> str:
    """The stack trace of a node made now by `translator` (the innermost frame being
    translated; its callers are its `parent`s)."""
    frames = []
    while translator is not None:
        inst = translator.current
        if inst is not None and not is_own_code(translator.code):
            frames.append(frame_text(translator.code, inst, translator.frame_name))
        translator = translator.parent
    return "".join(reversed(frames))


class LocatedGraph(fx.Graph):
    """The graph a capture builds: each node made while a frame is being translated gets
    that frame's `stack_trace`, and each input the trace of the first node reading it (the
    builder is held weakly: the graph outlives it)."""

    def __init__(self, builder) -> None:
        super().__init__()
        self._builder = weakref.ref(builder)

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        """`fx.Graph.create_node`, the node's `meta["stack_trace"]` set."""
        node = super().create_node(op, target, args, kwargs, name, type_expr)
        builder = self._builder()
        translator = builder.translator if builder is not None else None
        if translator is None or op in ("output", "placeholder"):
            return node
        trace = node.meta["stack_trace"] = stack_trace(translator)
        # An input is located where an op first reads it, as Dynamo makes it there.
        for arg in node.all_input_nodes:
            if arg.op == "placeholder" and "stack_trace" not in arg.meta:
                arg.meta["stack_trace"] = trace
        return node
