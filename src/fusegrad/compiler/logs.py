"""`FUSEGRAD_LOGS`: what the compiler prints as it works (PyTorch's TORCH_LOGS names).

`FUSEGRAD_LOGS=graph_code,graph_breaks,recompiles,guards,aot_graphs,aot_joint_graph` (or
`all`) selects artifacts (`segment_code`: the Python each captured segment runs per call),
and PyTorch's components select theirs (`dynamo`, `+aot`, `-inductor`: INFO, DEBUG, off);
`set_logs(graph_code=True, ...)` does the same from Python. Output goes to the
`fusegrad.compiler` logger, which prints to stderr unless configured otherwise.
"""

from __future__ import annotations

import collections
import logging
import os
import traceback
from dataclasses import dataclass, field

ARTIFACTS = ("graph_code", "graph_breaks", "recompiles", "guards", "output_code",
             "perf_hints", "aot_graphs", "aot_joint_graph", "segment_code", "fusion")
enabled: set[str] = set()
log = logging.getLogger("fusegrad.compiler")
# What the compiler did, under PyTorch's `torch._dynamo.utils.counters` keys: "stats"
# ("calls_captured": ops put in graphs, "unique_graphs": graphs given to a backend),
# "frames" ("total": captures begun, "ok": finished) and "graph_break" (reason -> count).
# Never cleared by fusegrad (`reset()` leaves them, as PyTorch's): programs clear them.
counters: collections.defaultdict = collections.defaultdict(collections.Counter)

# PyTorch's log artifacts fusegrad has no output for: accepted and ignored by `set_logs`.
_OTHER_ARTIFACTS = frozenset({
    "bytecode", "ddp_graphs", "graph", "graph_code_verbose", "side_effects", "graph_sizes",
    "recompiles_verbose", "trace_source", "trace_call", "trace_bytecode", "kernel_code",
    "schedule", "pre_grad_graphs", "post_grad_graphs", "ir_pre_fusion", "ir_post_fusion",
    "onnx_diagnostics", "overlap", "cudagraphs", "sym_node", "compiled_autograd",
    "compiled_autograd_verbose", "cudagraph_static_inputs", "benchmarking", "autotuning",
    "incremental", "graph_region_expansion", "inductor_metrics", "hierarchical_compile",
    "compute_dependencies", "caching"})
# PyTorch's log components (set to a logging level): the artifacts each turns on at INFO,
# and those it adds at DEBUG. Components without artifacts here are accepted and ignored.
_COMPONENTS = {
    "dynamo": (("graph_breaks", "recompiles"), ("guards", "graph_code")),
    "aot": ((), ("aot_graphs", "aot_joint_graph")),
    "inductor": (("perf_hints",), ("output_code", "fusion")),
    "dynamic": ((), ()), "autograd": ((), ()), "distributed": ((), ()), "c10d": ((), ()),
    "ddp": ((), ()), "fsdp": ((), ()), "dtensor": ((), ()), "onnx": ((), ()),
    "export": ((), ()),
}


def _component_artifacts(name: str, level) -> dict:
    """The artifacts PyTorch component `name` set to logging `level` turns on or off."""
    at_info, at_debug = (ARTIFACTS, ()) if name == "all" else _COMPONENTS[name]
    on = level is not None and level <= logging.INFO
    chosen = dict.fromkeys(at_info, on)
    chosen.update(dict.fromkeys(at_debug, level is not None and level <= logging.DEBUG))
    return chosen


def set_logs(*, modules=None, **artifacts) -> None:
    """Turn log artifacts on or off, e.g. `set_logs(graph_breaks=True)`: each one named
    changes, the others stay. PyTorch's keywords are accepted: its component levels
    (`dynamo=logging.DEBUG`, `all=logging.INFO`; None leaves them) map to the artifacts
    fusegrad has, and artifacts fusegrad does not make (`bytecode`, `kernel_code`, ...) or
    `modules=` are ignored."""
    wanted: dict = {}
    for name, value in artifacts.items():  # components first: an artifact named wins
        if name == "all" or name in _COMPONENTS:
            if value is not None:
                wanted.update(_component_artifacts(name, value))
        elif name not in ARTIFACTS and name not in _OTHER_ARTIFACTS:
            raise ValueError(f"unknown log artifact {name!r}; known: {', '.join(ARTIFACTS)}")
    wanted.update((name, bool(on)) for name, on in artifacts.items() if name in ARTIFACTS)
    for name, on in wanted.items():
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


def emit_graph(artifact: str, name: str, gm, graph_id: int | None = None) -> None:
    """Log graph module `gm` if `artifact` is on, as PyTorch logs a traced graph: a
    `TRACED GRAPH` line, `===== {name} {graph_id} =====`, the file of its code, and its
    readable form with strides and devices (`print_readable`); made only when logged."""
    if artifact in enabled:
        title = name if graph_id is None else f"{name} {graph_id}"
        readable = gm.print_readable(print_output=False, include_stride=True,
                                     include_device=True)
        emit(artifact, f"TRACED GRAPH\n ===== {title} =====\n "
                       f"{gm.forward.__code__.co_filename} {readable}\n")


def _from_environment() -> None:
    """`FUSEGRAD_LOGS`, read as PyTorch reads `TORCH_LOGS`: a comma-separated list of
    artifacts (`graph_breaks`) and components, a component at INFO by its name (`dynamo`), at
    DEBUG with a `+` (`+aot`) and at ERROR with a `-` (`-inductor`: its artifacts off).
    Names fusegrad does not know are ignored."""
    chosen: dict = {}
    for entry in os.environ.get("FUSEGRAD_LOGS", "").split(","):
        entry = entry.strip()
        name = entry.lstrip("+-")
        if name == "all" or name in _COMPONENTS:
            chosen[name] = (logging.DEBUG if entry.startswith("+") else
                            logging.ERROR if entry.startswith("-") else logging.INFO)
        elif name in ARTIFACTS:
            chosen[name] = True
    if chosen:
        set_logs(**chosen)


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
                inner: tuple = (), counted: bool = True) -> GraphCompileReason:
    """Record and log (`graph_breaks`) a break in `code` at `line`; `inner`: the (code, line)
    of the inlined calls it happened in, outermost first; `counted`: whether it adds to
    `counters["graph_break"]` (not the same break met again by a frame translated afresh,
    which Dynamo, skipping the frame at the first, never meets)."""
    frames = [traceback.FrameSummary(c.co_filename, n or c.co_firstlineno, c.co_name,
                                     lookup_line=False) for c, n in ((code, line), *inner)]
    record = GraphCompileReason(reason, frames, fallback=fallback)
    if counted:
        counters["graph_break"][reason] += 1
    what = "Eager fallback" if fallback else "Graph break"
    emit("graph_breaks", f"{what} in {frames[-1].name} at {record.where()}: {reason}")
    return record


_from_environment()
