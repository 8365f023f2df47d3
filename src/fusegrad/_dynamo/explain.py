"""`explain(fn)(*args)`: what capture made of one call: graphs, breaks and their reasons.

The result has PyTorch's `ExplainOutput` fields and text layout. Every place capture stopped
is a break reason: a graph break, and also code left to run eagerly (an opcode the translator
does not know, a break inside a loop, a translator failure); a frame past the recompile
limit runs eagerly with no break, as in PyTorch.
`graph_break_count` is PyTorch's `graph_count - 1` (-1 where nothing was captured), or with
eager fallbacks Dynamo does not have (an unknown opcode, a translator failure) the breaks
between graphs plus one per fallback. A break inside a loop, whose frame Dynamo also runs
eagerly, is listed but not counted, as Dynamo counts it; one inside a call that loop makes is
listed where the callee's own frame, captured on its own, meets it (as Dynamo lists it), not
again at the caller's loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class ExplainOutput:
    """Graphs, graph breaks (reasons with the user's frame) and guards of one call."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)  # GraphCompileReason: reason, user_stack
    op_count: int = 0
    ops_per_graph: list | None = None  # the call_function targets of each graph
    out_guards: list | None = None  # guard expressions, as readable Python
    compile_times: str | None = None

    def __str__(self) -> str:
        out = [f"Graph Count: {self.graph_count}\n",
               f"Graph Break Count: {self.graph_break_count}\n",
               f"Op Count: {self.op_count}\n", "Break Reasons:\n"]
        for i, reason in enumerate(self.break_reasons, 1):
            out.append(f"  Break Reason {i}:\n    Reason: {reason.reason}\n    User Stack:\n")
            out += [f"      {frame}\n" for frame in reason.user_stack]
        if self.ops_per_graph is not None:
            out.append("Ops per Graph:\n")
            for i, ops in enumerate(self.ops_per_graph, 1):
                out.append(f"  Ops {i}:\n")
                out += [f"    {op}\n" for op in ops]
        if self.out_guards is not None:
            out.append("Out Guards:\n")
            for i, guard in enumerate(self.out_guards, 1):
                out.append(f"  Guard {i}:\n    {guard}\n")
        if self.compile_times is not None:
            out.append(f"Compile Times: {self.compile_times}\n")
        return "".join(out)


def explain(fn, *extra_args, **extra_kwargs):
    """`explain(fn)(*args, **kwargs)` compiles `fn` (a function or module) afresh, calls it
    once and reports what capture made of it."""

    def run(*args, **kwargs) -> ExplainOutput:
        from ..compiler import compile as compile_fn
        from ..compiler import reset
        from ..compiler.capture.segments import _History

        # As PyTorch's: forget every capture first (functions it calls would otherwise reuse
        # their graphs and report nothing) and after.
        reset()
        compiled = compile_fn(_unwrap(fn), backend="eager")
        events: list = []
        _History.listener = events
        start = time.perf_counter()
        try:
            compiled(*args, **kwargs)
        finally:
            _History.listener = None
            reset()
        elapsed = time.perf_counter() - start
        out = ExplainOutput(ops_per_graph=[], out_guards=[])
        for event, detail in events:
            if event == "graph":
                out.graphs.append(detail)
                ops = [n.target for n in detail.graph.nodes if n.op == "call_function"]
                out.ops_per_graph.append(ops)
                out.op_count += len(ops)
            elif event == "break" and getattr(detail, "listed", True):
                out.break_reasons.append(detail)
            elif event == "guards":
                out.out_guards += detail
        out.graph_count = len(out.graphs)
        # PyTorch counts the breaks between graphs, graph_count - 1 (-1 with no graph at
        # all); code left to run eagerly counts as well, each fallback as one break, except
        # the rest of a frame after a break inside a loop: Dynamo runs such a frame eagerly
        # too, and counts nothing for it.
        fallbacks = sum(r.fallback and not getattr(r, "in_loop", False)
                        for r in out.break_reasons)
        out.graph_break_count = max(out.graph_count - 1, 0) + fallbacks if fallbacks else \
            out.graph_count - 1
        out.compile_times = ("fusegrad compilation metrics:\nFunction    Runtimes (s)\n"
                             f"----------  --------------\n_compile    {elapsed:.4f}")
        return out

    if extra_args or extra_kwargs:
        import warnings

        warnings.warn("explain(f, *args, **kwargs) is deprecated, use explain(f)(*args, "
                      "**kwargs) instead.  If you don't migrate, we may break your explain "
                      "call in the future if your user defined kwargs conflict with future "
                      "kwargs added to explain(f).", FutureWarning, stacklevel=2)
        return run(*extra_args, **extra_kwargs)
    return run


def _unwrap(fn):
    """The plain function or module behind a compiled one."""
    from ..compiler import CompiledFunction

    if isinstance(fn, CompiledFunction):
        return fn._orig
    orig = getattr(fn, "_orig_mod", None)  # an OptimizedModule
    return orig if orig is not None else fn
