"""The scheduler: which values get buffers of their own, and in what order kernels run.

Fusion is by inlining: a pointwise value is computed inside each loop nest that reads it (its
expression is substituted), so pointwise chains become one kernel and a pointwise producer
becomes part of a reduction's input loop. A pointwise value gets its own buffer (is not
fused) when it is a graph output, an extern call's input, or read by several consumers and
too large to recompute; a reduction's result always has its buffer, read by later loop nests.
`FUSEGRAD_LOGS=fusion` says, for each such boundary, why the two nodes were not fused.
"""

from __future__ import annotations

from .. import logs
from .ir import Buffer, Extern, Pointwise, Reduction, walk
from .lower import GraphLowering

# Operations an inlined value may hold and still be recomputed by each of several readers.
RECOMPUTE_LIMIT = 12


def _size(value: Pointwise) -> int:
    from .ir import IVar

    idx = tuple(IVar(f"x{i}") for i in range(len(value.shape)))
    return sum(1 for _ in walk(value.fn(idx)))


def _label(node) -> str:
    names = [o.name for o in getattr(node, "origins", [])]
    return ", ".join(names) or "?"


def schedule(g: GraphLowering) -> list:
    """Decide buffers for `g`'s values and return its computations in execution order."""
    for n, value in list(g.env.items()):
        if not isinstance(value, Pointwise) or value.buffer is not None:
            continue
        readers = [u for u in n.users if u.op == "call_function"]
        if n in g.outputs:
            g.realize(value, "a graph output")
        elif len(readers) > 1 and _size(value) > RECOMPUTE_LIMIT:
            g.realize(value, f"read by {len(readers)} nodes and too large to recompute "
                      f"({_size(value)} operations > {RECOMPUTE_LIMIT})")
    order = {n: i for i, n in enumerate(g.gm.graph.nodes)}

    def position(c):
        return min((order.get(o, 0) for o in c.origins), default=0)

    computations = sorted(g.computations, key=position)
    if "fusion" in logs.enabled:
        _log_boundaries(g, computations)
    return computations


def _log_boundaries(g: GraphLowering, computations: list) -> None:
    from .ir import IVar

    producers = {}
    for c in computations:
        for b in (c.outputs if isinstance(c, Extern) else [g.buffers[c]]):
            producers[b] = c
    for c in computations:
        if isinstance(c, Extern):
            logs.emit("fusion", f"{_label(c)}: extern call {c.op.name} runs its NumPy kernel "
                      "between kernels (no lowering)")
            continue
        idx = tuple(IVar(f"x{i}") for i in range(len(c.shape)))
        if isinstance(c, Reduction):
            ridx = tuple(IVar(f"r{i}") for i in range(len(c.reduced_shape)))
            expr = c.fn(idx, ridx)
        else:
            expr = c.fn(idx)
        read = {e.buffer for e in walk(expr) if hasattr(e, "buffer")}
        for b in read:
            p = producers.get(b)
            if p is None:
                continue
            if isinstance(p, Reduction):
                why = "it is a reduction: its result is complete only after its loop nest"
            elif isinstance(p, Extern):
                why = f"it is an extern call ({p.op.name})"
            else:
                why = f"it has a buffer of its own: {p.realized_because}"
            logs.emit("fusion", f"not fusing {_label(p)} into {_label(c)}: {why}")


def buffer_of(g: GraphLowering, c) -> Buffer:
    """The output buffer of a kernel computation."""
    return g.buffers[c]
