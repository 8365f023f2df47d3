"""`explain(fn)(*args)`: what capture made of one call: graphs, breaks and their reasons."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ExplainOutput:
    """Graphs, graph breaks (reasons with file:line) and guards of one call."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)
    out_guards: list = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:\n    Reason: {reason}")
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {i}:")
            lines += [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        lines += [f"  {g}" for g in self.out_guards]
        return "\n".join(lines)


def explain(fn, *extra_args, **extra_kwargs):
    """`explain(fn)(*args, **kwargs)` compiles `fn` afresh, calls it once and reports."""
    from ..compiler import CompiledFunction

    def run(*args, **kwargs):
        from ..compiler.capture.segments import _History

        compiled = CompiledFunction(getattr(fn, "_orig", fn), "eager")
        events: list = []
        _History.listener = events
        try:
            compiled(*args, **kwargs)
        finally:
            _History.listener = None
        out = ExplainOutput()
        for event, detail in events:
            if event == "graph":
                out.graphs.append(detail)
                ops = [n.target for n in detail.graph.nodes
                       if n.op in ("call_function", "call_method", "call_module")]
                out.ops_per_graph.append(ops)
                out.op_count += len(ops)
            elif event == "break":
                out.break_reasons.append(detail)
            elif event == "guards":
                out.out_guards += detail
        out.graph_count = len(out.graphs)
        out.graph_break_count = len(out.break_reasons)
        return out

    if extra_args or extra_kwargs:
        return run(*extra_args, **extra_kwargs)
    return run
