"""`FUSEGRAD_LOGS`: what the compiler prints as it works (PyTorch's TORCH_LOGS names).

`FUSEGRAD_LOGS=graph_code,graph_breaks,recompiles,guards,aot_graphs,aot_joint_graph` (or
`all`) selects artifacts (`segment_code`: the Python each captured segment runs per call);
`set_logs(graph_code=True, ...)` does the same from Python. Output goes to the
`fusegrad.compiler` logger, which prints to stderr unless configured otherwise.
"""

from __future__ import annotations

import logging
import os
import traceback
from dataclasses import dataclass, field

ARTIFACTS = ("graph_code", "graph_breaks", "recompiles", "guards", "output_code",
             "perf_hints", "aot_graphs", "aot_joint_graph", "segment_code", "fusion")
enabled: set[str] = set()
log = logging.getLogger("fusegrad.compiler")


def set_logs(**artifacts: bool) -> None:
    """Turn log artifacts on or off, e.g. `set_logs(graph_breaks=True)`."""
    for name, on in artifacts.items():
        if name not in ARTIFACTS:
            raise ValueError(f"unknown log artifact {name!r}; known: {', '.join(ARTIFACTS)}")
        (enabled.add if on else enabled.discard)(name)
    if enabled and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[fusegrad %(levelname)s] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def emit(artifact: str, message: str) -> None:
    """Log `message` if `artifact` is on."""
    if artifact in enabled:
        log.info("%s: %s", artifact, message)


def _from_environment() -> None:
    names = [n.strip() for n in os.environ.get("FUSEGRAD_LOGS", "").split(",") if n.strip()]
    if "all" in names:
        names = list(ARTIFACTS)
    known = [n.lstrip("+") for n in names if n.lstrip("+") in ARTIFACTS]
    if known:
        set_logs(**dict.fromkeys(known, True))



@dataclass
class GraphCompileReason:
    """Why capture stopped: a graph break, or code left to run eagerly (PyTorch's record,
    shown by `explain`): the reason and the user's frame (file, line, function)."""

    reason: str
    user_stack: list = field(default_factory=list)
    graph_break: bool = True
    fallback: bool = False  # code left to run eagerly, rather than a break between graphs

    def where(self) -> str:
        """`file:line` of the innermost user frame."""
        if not self.user_stack:
            return "<unknown>"
        frame = self.user_stack[-1]
        return f"{frame.filename}:{frame.lineno}"


def graph_break(reason: str, code, line: int | None, fallback: bool = False,
                inner: tuple = ()) -> GraphCompileReason:
    """Record and log (`graph_breaks`) a break in `code` at `line`; `inner`: the (code, line)
    of the inlined calls it happened in, outermost first."""
    frames = [traceback.FrameSummary(c.co_filename, n or c.co_firstlineno, c.co_name,
                                     lookup_line=False) for c, n in ((code, line), *inner)]
    record = GraphCompileReason(reason, frames, fallback=fallback)
    what = "Eager fallback" if fallback else "Graph break"
    emit("graph_breaks", f"{what} in {frames[-1].name} at {record.where()}: {reason}")
    return record


_from_environment()
