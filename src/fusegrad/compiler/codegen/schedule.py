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

    return sorted(g.computations, key=position)


def _log_boundaries(g: GraphLowering, computations: list, kernel_of: dict) -> None:

    producers = {}
    for c in computations:
        for b in (c.outputs if isinstance(c, Extern) else [g.buffers[c]]):
            producers[b] = c
    for c in computations:
        if isinstance(c, Extern):
            logs.emit("fusion", f"{_label(c)}: extern call {c.op.name} runs its NumPy kernel "
                      "between kernels (no lowering)")
            continue
        for b in {ld.buffer for ld in _reads(c)}:
            p = producers.get(b)
            if p is None or (p in kernel_of and kernel_of.get(p) == kernel_of.get(c)):
                continue
            if isinstance(p, Reduction):
                why = "it is a reduction: its result is complete only after its loop nest"
            elif isinstance(p, Extern):
                why = f"it is an extern call ({p.op.name})"
            else:
                why = f"it has a buffer of its own: {p.realized_because}"
            logs.emit("fusion", f"not fusing {_label(p)} into {_label(c)}: {why}")


def _reads(c) -> list:
    """The loads of computation `c`'s expression at symbolic indices."""
    from .ir import IVar, Load

    idx = tuple(IVar(f"x{i}") for i in range(len(c.shape)))
    if isinstance(c, Reduction):
        ridx = tuple(IVar(f"r{i}") for i in range(len(c.reduced_shape)))
        expr = c.fn(idx, ridx)
    else:
        expr = c.fn(idx)
    return [e for e in walk(expr) if isinstance(e, Load)]


def group(g: GraphLowering, computations: list) -> list:
    """Kernels: lists of computations sharing one outer loop (see `c.render_group`), and
    externs. A group starts at a reduction; a later computation joins while its leading
    dims equal the group's output shape, it reads the members only at the current outer
    index, and (for a reduction) its output has that same shape."""

    out: list = []
    current: list = []

    def close():
        if current:
            out.append(list(current))
            current.clear()

    for c in computations:
        if isinstance(c, Extern):
            close()
            out.append(c)
            continue
        if current and _joins(g, current, c):
            logs.emit("fusion", f"fusing {_label(c)} into the loop nest of "
                      f"{_label(current[0])}: same rows, read at the current row only")
            current.append(c)
            continue
        close()
        current.append(c)
        if not isinstance(c, Reduction):
            close()
    close()
    if "fusion" in logs.enabled:
        kernel_of = {m: i for i, item in enumerate(out) if isinstance(item, list)
                     for m in item}
        _log_boundaries(g, computations, kernel_of)
    return out


def _joins(g: GraphLowering, members: list, c) -> bool:
    from .ir import IVar

    outer = tuple(members[0].shape)
    if not isinstance(members[0], Reduction) or not outer:
        return False
    k = len(outer)
    if tuple(c.shape[:k]) != outer or (isinstance(c, Reduction) and tuple(c.shape) != outer):
        return False
    mine = {g.buffers[m] for m in members}
    row = tuple(IVar(f"x{i}") for i in range(k))
    for ld in _reads(c):
        if ld.buffer in mine and tuple(ld.index) != row:
            return False
    return True


def buffer_of(g: GraphLowering, c) -> Buffer:
    """The output buffer of a kernel computation."""
    return g.buffers[c]
