"""`min_cut_rematerialization_partition`: save fewer bytes by recomputing cheap values.

The default partition saves every forward value the backward reads. Often a cheaper set
exists: a GELU's input and output are both read by the backward (the GELU's derivative reads
the input, the next matmul's weight gradient the output), yet the output is one pointwise op
away from the input, so saving the input alone and recomputing the GELU in the backward
halves what is kept alive between the two passes.

Choosing what to save is a minimum cut. Every forward value `n` becomes two vertices,
`n.in -> n.out`, joined by an edge whose capacity is the value's size in bytes (cutting it
means saving `n`); each use `n.out -> m.in` has unbounded capacity. The source feeds the graph
inputs and every value that must not be recomputed (matmuls, convolutions, reductions, random
ops, writes: anything but cheap pointwise ops, views and `getitem`), so the cut can never
fall above one of them; every forward value a backward op reads feeds the sink. A minimum
cut is then the cheapest set of values from which everything the backward needs is
recomputed by cheap ops only. A view reachable from a saved base lies past the cut, so a view
is never saved beside its base.

networkx computes the cut; it is optional (the `compile` extra). Without it the partition
falls back to `default_partition`, saying so once in the log.
"""

from __future__ import annotations

import operator

from ...ops.overloads import OpOverload
from ...ops.registry import REGISTRY
from .. import logs
from .joint import is_impure, recompute_tagged

# The ATen base names of the ops cheap enough to recompute (`OpDef.recomputable`).
RECOMPUTABLE = frozenset(op.name.partition(".")[0] for op in REGISTRY.values()
                         if op.recomputable)

_reported: list = []


def recomputable(node) -> bool:
    """Whether `node`'s value may be recomputed in the backward instead of being saved."""
    if node.target is operator.getitem or recompute_tagged(node):
        return True
    target = node.target
    if not isinstance(target, OpOverload) or node.op != "call_function":
        return False
    op = target.op
    if op.inplace or op.random or is_impure(node):
        return False
    return op.view or op.recomputable


def value_bytes(node) -> float:
    """Bytes of `node`'s value (infinite for values that cannot be saved: tuples)."""
    val = node.meta.get("val")
    if val is None or not hasattr(val, "element_size"):
        return float("inf")
    return float(val.numel() * val.element_size())


def materialized_in_backward(fw: set) -> set:
    """The forward values a backward op that is not recomputed reads whole (a matmul's
    operand), directly or through views: the backward needs each of them in memory, so
    recomputing it there saves nothing that saving it would cost (PyTorch's min-cut bans
    their recomputation too)."""
    out: set = set()
    for n in fw:
        if n.op != "call_function" or _is_view(n) or n.target is operator.getitem or \
                recompute_tagged(n) or value_bytes(n) == float("inf"):
            # (a view is never saved beside its base, inputs are saved anyway, and a
            # checkpointed value or a tuple is never saved)
            continue
        stack, seen = [n], set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if any(u not in fw and u.op == "call_function" and not recomputable(u)
                   for u in m.users):
                out.add(n)
                break
            # (a view of it, in either pass, that the backward may read whole)
            stack += [u for u in m.users if _is_view(u)]
    return out


def _is_view(node) -> bool:
    target = node.target
    return node.op == "call_function" and isinstance(target, OpOverload) and target.op.view


def _cut(nodes, fw: set, bw_readers: dict, keep: frozenset = frozenset()):
    """The forward values to save: a minimum cut (see the module docstring); `keep`: values
    never recomputed (saved when the backward needs them)."""
    import networkx as nx

    g = nx.DiGraph()
    for n in nodes:
        if n not in fw or n.op in ("output", "get_attr"):
            continue
        # A checkpointed function's value is never saved (unbounded: never cut).
        # (a view costs a byte more than its bytes: between a base and a view of it, of
        # equal size, the base is saved and the view recomputed, never materialised)
        g.add_edge((n, "in"), (n, "out"),
                   capacity=float("inf") if recompute_tagged(n) else
                   value_bytes(n) + (1 if _is_view(n) else 0))
        if n.op == "placeholder" or not recomputable(n) or n in keep:
            g.add_edge("source", (n, "in"))  # no capacity: unbounded
        for user in n.users:
            if user in fw and user.op != "output":
                g.add_edge((n, "out"), (user, "in"))
        if bw_readers.get(n):
            g.add_edge((n, "out"), "sink")
    if "sink" not in g:
        return set()
    try:
        _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    except nx.NetworkXUnbounded:
        # (a value that cannot be saved, a tuple or one without a known size, read by the
        # backward from a value that cannot be recomputed: no finite cut)
        return None
    return {n for n in fw if (n, "in") in reachable and (n, "out") not in reachable
            and (n, "out") in g}


def min_cut_rematerialization_partition(joint_module, _joint_inputs=None, *,
                                        num_fwd_outputs: int,
                                        keep_materialized: bool = False, **kwargs):
    """(forward GraphModule, backward GraphModule) of a joint graph, saving a minimum-byte
    set of forward values and recomputing cheap pointwise ones in the backward (see the
    module docstring). `keep_materialized`: never recompute a value a backward matmul (or
    other op that is not recomputed) reads whole (`materialized_in_backward`), as PyTorch's
    partitioner. Without networkx: `default_partition`."""
    from .partitioners import _build, _split, default_partition

    try:
        import networkx  # noqa: F401
    except ImportError:
        if not _reported:
            _reported.append(True)
            logs.log.warning("min_cut_rematerialization_partition needs networkx (the "
                             "'compile' extra); using default_partition")
        return default_partition(joint_module, _joint_inputs, num_fwd_outputs=num_fwd_outputs)
    nodes, fwd_outputs, bwd_outputs, fw = _split(joint_module, num_fwd_outputs)
    bw_nodes = [n for n in nodes if n not in fw and n.op not in ("placeholder", "output")]
    bw_readers = {}
    for n in bw_nodes:
        for i in n._input_nodes:
            if i in fw:
                bw_readers.setdefault(i, []).append(n)
    keep = frozenset(materialized_in_backward(fw)) if keep_materialized else \
        frozenset()
    saved = _cut(nodes, fw, bw_readers, keep)
    if saved is None:
        logs.emit("perf_hints", "min_cut_rematerialization_partition: no finite cut (a "
                  "value without a size is read by the backward); using default_partition")
        return default_partition(joint_module, _joint_inputs, num_fwd_outputs=num_fwd_outputs)
    # The backward: walk back from the gradients; stop at saved values, recompute the rest.
    bw: set = set()
    stack = [o for o in bwd_outputs if hasattr(o, "_input_nodes")]
    stack += [n for n in nodes if n.op == "call_function" and is_impure(n) and n not in fw]
    while stack:
        n = stack.pop()
        if n in bw or n in saved:
            continue
        if n in fw and (n.op == "placeholder" or not recomputable(n)):
            saved.add(n)  # never past the cut; kept as a safeguard
            continue
        bw.add(n)
        stack.extend(n._input_nodes)
    order = {n: i for i, n in enumerate(nodes)}
    saved_list = sorted(saved, key=order.__getitem__)
    return _build(joint_module, nodes, fw, bw, saved_list, fwd_outputs, bwd_outputs)
