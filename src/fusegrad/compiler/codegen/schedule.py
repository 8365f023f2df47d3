"""The scheduler: which values get buffers of their own, and in what order kernels run.

Fusion is by inlining: a pointwise value is computed inside each loop nest that reads it (its
expression is substituted), so pointwise chains become one kernel and a pointwise producer
becomes part of a reduction's input loop. A pointwise value gets its own buffer (is not
fused) when it is a graph output, an extern call's input, or read by several consumers and
too large to recompute; a reduction's result always has its buffer, read by later loop nests.
A value that only reads a buffer's elements at a strided geometry (a transpose, permute,
slice, expand or reshape of it) gets none as an extern's input: the wrapper passes a NumPy
view of the buffer (`ir.View`); as a graph output it is returned as a view of an
intermediate buffer that nothing else returns (`_output_views`).
`FUSEGRAD_LOGS=fusion` says, for each such boundary, why the two nodes were not fused.
"""

from __future__ import annotations

from .. import logs
from .ir import (
    Buffer,
    Extern,
    Pointwise,
    Reduction,
    ScalarInput,
    View,
    contiguous_strides,
    numel,
    walk,
)
from .lower import GraphLowering

# Operations an inlined value may hold and still be recomputed by each of several readers.
RECOMPUTE_LIMIT = 12


def _size(value: Pointwise) -> int:
    from .ir import IVar

    idx = tuple(IVar(f"x{i}") for i in range(len(value.shape)))
    return sum(1 for _ in walk(value.fn(idx)))


# A small value whose operations are costly (a division, a square root, a call of a math
# function: `c.costly`) is computed once into a buffer rather than in every element of the
# larger loops that read it broadcast: layer norm's `1 / sqrt(var + eps)` per row, read by
# each element of the row in its backward (3-4 ns an element where a load costs 0.3).
# A value read by loops over this many times its elements or more is read broadcast.
BROADCAST_RATIO = 8


def _costly(value: Pointwise) -> str | None:
    """The name of a costly operation `value` computes (`c.costly`), or None."""
    from .c import costly
    from .ir import IVar, Op

    idx = tuple(IVar(f"x{i}") for i in range(len(value.shape)))
    for e in walk(value.fn(idx)):
        if isinstance(e, Op) and costly(e):
            return e.name
    return None




def _broadcast_read(g: GraphLowering, readers: list, value: Pointwise) -> bool:
    """Whether a reader of `value` loops over `BROADCAST_RATIO` times its elements or more
    (a reduction over its shape and reduced shape), so each of its elements would be
    computed again for many of the reader's."""
    size = max(numel(value.shape), 1)
    for u in readers:
        r = g.env.get(u)
        for v in (r if isinstance(r, (list, tuple)) else [r]):
            if isinstance(v, Pointwise):
                work = numel(v.shape)
            elif isinstance(v, Reduction):
                work = numel(v.shape) * numel(v.reduced_shape)
            else:
                continue
            if work >= BROADCAST_RATIO * size:
                return True
    return False


def _label(node) -> str:
    names = [o.name for o in getattr(node, "origins", [])]
    return ", ".join(names) or "?"


def schedule(g: GraphLowering) -> list:
    """Decide buffers for `g`'s values and return its computations in execution order."""
    outputs = []
    for n, value in list(g.env.items()):
        if not isinstance(value, Pointwise) or value.buffer is not None:
            continue
        readers = [u for u in n.users if u.op == "call_function"]
        if n in g.outputs:
            outputs.append((n, value))
        elif len(readers) > 1 and _size(value) > RECOMPUTE_LIMIT:
            g.realize(value, f"read by {len(readers)} nodes and too large to recompute "
                      f"({_size(value)} operations > {RECOMPUTE_LIMIT})")
        else:
            costly = _costly(value)
            if costly and _broadcast_read(g, readers, value):
                g.realize(value, f"holds {costly} and is read broadcast over loops "
                          f"{BROADCAST_RATIO} or more times its size")
    _output_views(g, outputs)
    g.resolve_extern_args()
    _share_equal_reductions(g)
    order = {n: i for i, n in enumerate(g.gm.graph.nodes)}

    def position(c):
        return min((order.get(o, 0) for o in c.origins), default=0)

    return _after_producers(g, sorted(g.computations, key=position))


def _share_equal_reductions(g: GraphLowering) -> None:
    """A reduction that computes what an earlier one computes (the same kind, shapes, dtype
    and value expression, over the same buffers, none of them written in place by the
    graph) becomes a copy of the earlier one's buffer: batch norm's sum of squared
    deviations, once for the normalisation and once for the running variance, is one
    pass over the activation instead of two. The copy has the first one's bits."""
    seen: dict = {}
    for i, c in enumerate(g.computations):
        if not isinstance(c, Reduction):
            continue
        key = _reduction_key(c, g._written)
        if key is None:
            continue
        first = seen.setdefault(key, c)
        if first is c:
            continue
        source = g.buffers[first]
        copy = Pointwise(c.shape, c.dtype, lambda idx, b=source: b.load(idx), list(c.origins))
        copy.buffer = g.buffers.pop(c)
        copy.realized_because = f"the value of {source.name}, a reduction computed before"
        g.computations[i] = copy
        g.buffers[copy] = copy.buffer
        logs.emit("fusion", f"{_label(c)}: computed as {source.name} (the same reduction)")


def _reduction_key(c: Reduction, written: set) -> tuple | None:
    """What `c` computes, comparable between reductions; None where an operand is not
    understood or is a buffer written in place (read before and after, it holds two
    values)."""
    from .ir import IVar

    idx = tuple(IVar(f"x{i}") for i in range(len(c.shape)))
    ridx = tuple(IVar(f"r{i}") for i in range(len(c.reduced_shape)))
    value = c.body(idx, ridx)  # (alive while its sub-expressions are memoised by id)
    try:
        body = _expr_key(value, written, {})
    except RecursionError:  # a chain too deep to compare: computed on its own
        return None
    if body is None:
        return None
    return (c.kind, tuple(c.shape), tuple(c.reduced_shape), c.dtype, body)


def _expr_key(e, written: set, memo: dict) -> tuple | None:
    """A value expression as nested tuples: equal exactly when the expressions compute the
    same operations on the same elements (buffers by identity, numbers by type and exact
    text); None for anything else. `memo`: keys of the sub-expressions seen, by id (a
    value read twice, as `d` in `d * d`, is one object)."""
    k = memo.get(id(e), memo)
    if k is memo:
        k = memo[id(e)] = _node_key(e, written, memo)
    return k


def _node_key(e, written: set, memo: dict) -> tuple | None:
    from .ir import Const, Index, Load, Op

    if isinstance(e, Load):
        if e.buffer in written:
            return None
        return ("load", id(e.buffer), tuple(e.index), e.dtype)
    if isinstance(e, Const):
        v = e.value
        if not isinstance(v, (bool, int, float)):
            return None
        return ("const", type(v), repr(v), e.dtype)
    if isinstance(e, Index):
        return ("index", e.expr, e.dtype)
    if isinstance(e, Op):
        args = []
        for a in e.args:
            if isinstance(a, (Const, Index, Load, Op)):
                k = _expr_key(a, written, memo)
            elif a is None or isinstance(a, (bool, int, float, str)):
                k = ("py", type(a), repr(a))
            else:
                k = None
            if k is None:
                return None
            args.append(k)
        return ("op", e.name, tuple(args), e.dtype)
    return None


def _output_views(g: GraphLowering, outputs: list) -> None:
    """Realise the graph outputs `outputs` ((node, Pointwise) pairs), except those that
    are strided views of an intermediate buffer in eager's layout (a weight's gradient
    as a reshape of a sum, a reshape of an extern's result): those are returned as views
    of it (`g.output_views`), copying nothing. The buffer then lives to the end of the
    graph; it must not be an input or another output, nor be the base of another output
    view, so that no two returned tensors share memory."""
    from .layout import non_overlapping

    candidates = []
    for n, value in outputs:
        view = g.view_of(value)
        if view is None or view.geometry() is None:
            g.realize(value, "a graph output")
        else:
            candidates.append((n, value, view))
    if not candidates:
        return
    taken = set()
    for o in g.outputs:
        v = g.env.get(o) if hasattr(o, "op") else None
        if isinstance(v, Pointwise):
            v = v.buffer
        if isinstance(v, Buffer):
            taken.add(v)
    taken.update(b for b in g.inputs if isinstance(b, Buffer))
    for n, value, view in candidates:
        strides, offset = view.geometry()
        fake = g.layouts().get(n)
        if hasattr(fake, "stride"):
            want, want_offset = tuple(fake.stride()), fake.storage_offset()
        else:
            want, want_offset = contiguous_strides(view.shape), 0
        same = len(want) == len(strides) and all(
            int(d) == 1 or int(a) == int(b) for d, a, b in zip(view.shape, strides, want))
        # (An expanded output, whose elements share memory, stays the kernel's: it is
        # returned read-only, as eager's `expand`.)
        if view.base in taken or isinstance(view.base, ScalarInput) or not same or \
                offset or want_offset or not non_overlapping(view.shape, strides):
            g.realize(value, "a graph output")
            continue
        taken.add(view.base)
        g.output_views[value] = view


def _after_producers(g: GraphLowering, computations: list) -> list:
    """`computations` reordered (stably) so that each runs after those whose buffers it
    reads: a value realised late (a graph output that an earlier loop nest of the same node
    reads through its buffer) moves before its readers."""
    producer = {}
    for c in computations:
        for b in (c.outputs if isinstance(c, Extern) else [g.buffers[c]]):
            producer[b] = c
    placed: set = set()
    out: list = []

    def place(c) -> None:
        if c in placed:
            return
        placed.add(c)
        if isinstance(c, Extern):
            reads = [a.buffer if isinstance(a, Pointwise) else a.base if isinstance(a, View)
                     else a for a in _flat(list(c.args) + list(c.kwargs.values()))
                     if isinstance(a, (Buffer, Pointwise, View))]
        else:
            reads = [ld.buffer for ld in _reads(c)]
        for b in reads:
            p = producer.get(b)
            if p is not None and p is not c:
                place(p)
        out.append(c)

    for c in computations:
        place(c)
    return out


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


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
    dims equal the group's output shape, it reads the members only in the current outer
    row, and (for a reduction) its output has that same shape."""

    out: list = []
    current: list = []
    rest = list(computations)

    def close():
        if current:
            out.append(list(current))
            current.clear()

    def join(c, why: str = "") -> None:
        logs.emit("fusion", f"fusing {_label(c)} into the loop nest of "
                  f"{_label(current[0])}: same rows, read at the current row only{why}")
        current.append(c)

    i = 0
    while i < len(rest):
        c = rest[i]
        i += 1
        if isinstance(c, Extern):
            close()
            out.append(c)
            continue
        if current and _joins(g, current, c):
            join(c)
            continue
        if current:
            for m in _joining_later(g, current, rest, i - 1):
                join(m, f" (computed before {_label(c)}, which it does not read)")
                rest.remove(m)
        close()
        current.append(c)
        if isinstance(c, Reduction):
            row = _row_value_before(g, out, c)
            if row is not None:
                out.pop()
                join(row, " (a value per row computed before it, which it does not read)")
        else:
            close()
    close()
    out = _absorb_producers(g, out)
    if "fusion" in logs.enabled:
        kernel_of = {m: i for i, item in enumerate(out) if isinstance(item, list)
                     for m in item}
        _log_boundaries(g, computations, kernel_of)
    return out


# How many computations after one that cannot join a group are tried for joining it ahead
# of that one (layer norm's input gradient, after its weight's column sums).
LOOKAHEAD = 4


def _joining_later(g: GraphLowering, current: list, rest: list, at: int) -> list:
    """The computations of `rest` after `rest[at]` (which cannot join group `current`), up
    to the next extern and at most `LOOKAHEAD` of them, that can join the group ahead of
    those they pass: each reads no buffer a passed one computes. A row group only (its
    first member a row reduction): layer norm's backward computes its weight's column sums
    between its row sums and its input gradient, which then joins the row sums' loop."""
    if not isinstance(current[0], Reduction) or _is_column_reduction(current[0]):
        return []
    passed = [rest[at]]
    moved: list = []
    for c in rest[at + 1:at + 1 + LOOKAHEAD]:
        if isinstance(c, Extern):
            break
        written = {g.buffers[p] for p in passed}
        if not any(ld.buffer in written for ld in _reads(c)) and \
                _joins(g, current + moved, c):
            moved.append(c)
        else:
            passed.append(c)
    return moved


def _is_column_reduction(c) -> bool:
    from .c import _is_column

    return isinstance(c, Reduction) and _is_column(c)


def _row_value_before(g: GraphLowering, items: list, first: Reduction):
    """The pointwise value of the item just before reduction `first` (which starts a row
    group) when it is one value per row of `first`'s output (its shape that output's shape
    then dims of one: layer norm's `1 / sqrt(var + eps)`, computed once into a buffer) that
    `first` does not read: it is then computed in the group's loop after `first` (a kernel
    fewer); else None."""
    if not items or isinstance(items[-1], Extern) or len(items[-1]) != 1 or \
            _is_column_reduction(first):
        return None
    p = items[-1][0]
    k = len(first.shape)
    if not isinstance(p, Pointwise) or p.pieces is not None or not k or \
            tuple(p.shape[:k]) != tuple(first.shape) or any(int(d) != 1 for d in p.shape[k:]):
        return None
    if any(ld.buffer is g.buffers[p] for ld in _reads(first)) or \
            not _joins(g, [first], p):
        return None
    return p


# The most elements a producer is checked over (every element's address is computed) before
# its kernel is merged into its reader's.
ABSORB_LIMIT = 1 << 22


def _absorb_producers(g: GraphLowering, items: list) -> list:
    """`items` with pointwise kernels merged into the one pointwise kernel that reads them:
    a producer P whose buffer must exist (a graph output: GELU's input and `erf(x / sqrt 2)
    + 1`, both saved for the backward) and that only kernel Q reads, where Q reads every
    element of P at the memory position Q writes (checked element by element), is computed
    inside Q's loop and stored there (`c.render_kernel`'s `absorbed`): Q's pass reads its
    operands once instead of reading P's result back. The same operations on the same
    values, so the same bits. Q's item becomes [Q, P, ...] (Q first: the kernel's name)."""

    outputs = set()
    for o in g.outputs:
        v = g.env.get(o) if hasattr(o, "op") else None
        if isinstance(v, Pointwise) and v.buffer is not None:
            outputs.add(v.buffer)
    if not outputs:
        return items
    readers: dict = {}  # buffer -> computations / externs reading it
    producer: dict = {}  # buffer -> index of the single-pointwise item computing it
    for i, item in enumerate(items):
        if isinstance(item, Extern):
            from .wrapper import _buffer_args

            for b in _buffer_args(list(item.args) + list(item.kwargs.values())):
                readers.setdefault(b, set()).add(item)
            continue
        for m in item:
            for ld in _reads(m):
                readers.setdefault(ld.buffer, set()).add(m)
        if len(item) == 1 and isinstance(item[0], Pointwise) and item[0].pieces is None:
            producer[g.buffers[item[0]]] = i
    removed: set = set()
    for qi, item in enumerate(items):
        if isinstance(item, Extern) or len(item) != 1 or not isinstance(item[0], Pointwise) \
                or item[0].pieces is not None:
            continue
        q = item[0]
        absorbed: list = []
        changed = True
        while changed:
            changed = False
            for ld in _effective_loads(q, absorbed):
                b = ld.buffer
                pi = producer.get(b)
                # (a producer that has absorbed producers of its own stays: its item holds
                # them, which this kernel would not compute)
                if pi is None or pi in removed or pi >= qi or b not in outputs or \
                        len(items[pi]) != 1:
                    continue
                p = items[pi][0]
                if readers.get(b, set()) - {q, *absorbed} or \
                        any(r.buffer in g._written for r in _reads(p)) or \
                        not _same_positions(g, q, absorbed, p):
                    continue
                absorbed.append(p)
                removed.add(pi)
                logs.emit("fusion", f"computing {_label(p)} inside the loop of {_label(q)}: "
                          "its only reader, reading each element where it writes its own")
                changed = True
                break
        if absorbed:
            items[qi] = [q] + absorbed
    return [item for i, item in enumerate(items) if i not in removed]


def _effective_loads(q: Pointwise, absorbed: list) -> list:
    """The loads of `q`'s expression with the `absorbed` producers computed inline."""
    from .ir import IVar, Load, inline_producers

    idx = tuple(IVar(f"x{i}") for i in range(len(q.shape)))
    value = inline_producers(q.fn(idx), {p.buffer: p for p in absorbed})
    return [e for e in walk(value) if isinstance(e, Load)]


def _same_positions(g: GraphLowering, q: Pointwise, absorbed: list, p: Pointwise) -> bool:
    """Whether every load of `p`'s buffer in `q` (with `absorbed` inline) reads, at each
    element of `q`, the memory position (in elements from the buffer's start) at which `q`
    writes that element, and `p` has as many elements, none sharing memory: then `q`'s loop
    writes each element of `p` once, in its own order."""
    import numpy as np

    from .ir import evaluate_index
    from .layout import non_overlapping

    pbuf, qbuf = p.buffer, g.buffers[q]
    n = numel(q.shape)
    if n != numel(p.shape) or not n or n > ABSORB_LIMIT or pbuf.dtype is None or \
            not non_overlapping(q.shape, qbuf.strides) or \
            not non_overlapping(p.shape, pbuf.strides):
        return False
    nd = len(q.shape)
    grids = {f"x{i}": np.arange(int(s), dtype=np.int64).reshape(
        [-1 if i == j else 1 for j in range(nd)]) for i, s in enumerate(q.shape)}

    def position(buf, index) -> np.ndarray:
        at = np.zeros((), np.int64)
        for e, s in zip(index, buf.strides):
            at = at + evaluate_index(e, grids) * int(s)
        return np.broadcast_to(at, tuple(int(s) for s in q.shape))

    from .ir import IVar

    want = position(qbuf, tuple(IVar(f"x{i}") for i in range(nd)))
    loads = [ld for ld in _effective_loads(q, absorbed) if ld.buffer is pbuf]
    if not loads:
        return False
    for ld in {tuple(ld.index): ld for ld in loads}.values():
        if len(ld.index) != len(pbuf.strides) or \
                not np.array_equal(position(pbuf, ld.index), want):
            return False
    return True


def _joins(g: GraphLowering, members: list, c) -> bool:
    from .ir import IVar

    outer = tuple(members[0].shape)
    if not isinstance(members[0], Reduction) or not outer or \
            not isinstance(c, (Reduction, Pointwise)):  # (a scatter kernel runs alone)
        return False
    k = len(outer)
    if tuple(c.shape[:k]) != outer or (isinstance(c, Reduction) and tuple(c.shape) != outer):
        return False
    from .c import _is_column

    # Column sums read whole rows in loop nests of their own (`c._column_nest`); a kernel
    # sharing their outer loop would make every member read one element per cache line (a
    # bias gradient beside the transposed ReLU gradient, 256x1024: 2.2 ms against 0.25).
    column = _is_column(members[0])
    if column != (isinstance(c, Reduction) and _is_column(c)):
        return False
    mine = {g.buffers[m] for m in members}
    row = tuple(IVar(f"x{i}") for i in range(k))
    for ld in _reads(c):
        # A member computes its whole row (all of its dims after the outer ones) in the
        # current outer iteration: any element of the current row is ready.
        if ld.buffer in mine and tuple(ld.index[:k]) != row:
            return False
    return True


def buffer_of(g: GraphLowering, c) -> Buffer:
    """The output buffer of a kernel computation."""
    return g.buffers[c]
