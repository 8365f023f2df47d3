"""Splitting a joint graph into a forward graph and a backward graph.

`default_partition` (PyTorch's default): the forward graph computes what the forward outputs
need (and the write-backs into inputs); every forward value the backward reads is *saved*
(returned by the forward after its outputs, received by the backward before the tangents);
values the backward needs that the forward does not (`t(weight)` for a matmul's gradient) are
computed in the backward from saved values. A view of an input is recomputed from the input
rather than saved beside it, so an input and its views cost one saved tensor. The values of a
checkpointed function (`recompute_tagged`) are recomputed in the backward from the values
its ops read, as eager checkpointing recomputes them.

`min_cut_rematerialization_partition` (mincut.py) saves fewer bytes by recomputing cheap
pointwise values in the backward; it builds its graphs with `_build` below.
"""

from __future__ import annotations

import operator

from ...ops.overloads import OpOverload, aten
from .joint import is_impure, recompute_tagged


def _is_primal(node) -> bool:
    return node.op == "placeholder" and "tangents" not in node.target


def _is_tangent(node) -> bool:
    return node.op == "placeholder" and "tangents" in node.target


def _ancestors(roots) -> set:
    seen = set()
    stack = [r for r in roots if r is not None]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n._input_nodes)
    return seen


def _is_view_of(node, fw: set):
    """The input a view node reads, when that input is a forward value (else None)."""
    t = node.target
    if isinstance(t, OpOverload) and t.op.view and node.args and \
            getattr(node.args[0], "op", None) is not None and node.args[0] in fw:
        if all(n is node.args[0] for n in node._input_nodes):
            return node.args[0]
    return None


def _split(joint_module, num_fwd_outputs: int):
    graph = joint_module.graph
    nodes = list(graph.nodes)
    outputs = list(graph.output_node().args[0])
    fwd_outputs, bwd_outputs = outputs[:num_fwd_outputs], outputs[num_fwd_outputs:]
    tangent_dependent = set()
    for n in nodes:
        if _is_tangent(n) or any(i in tangent_dependent for i in n._input_nodes):
            tangent_dependent.add(n)
    fw_roots = [o for o in fwd_outputs if hasattr(o, "_input_nodes")]
    fw_roots += [n for n in nodes if n.op == "call_function" and is_impure(n)
                 and n not in tangent_dependent]
    fw = _ancestors(fw_roots) | {n for n in nodes if _is_primal(n)}
    # The parts of a forward op's result are forward values too (saved one by one).
    fw |= {n for n in nodes if n.target is operator.getitem and n.args[0] in fw}
    return nodes, fwd_outputs, bwd_outputs, fw


def default_partition(joint_module, _joint_inputs=None, *, num_fwd_outputs: int,
                      static_lifetime_input_indices=None):
    """(forward GraphModule, backward GraphModule) of a joint graph whose output is the
    `num_fwd_outputs` forward outputs followed by the gradients (see the module docstring)."""
    nodes, fwd_outputs, bwd_outputs, fw = _split(joint_module, num_fwd_outputs)
    # Walk back from the gradients: forward values are saved, the rest is backward work.
    saved: set = set()
    bw: set = set()
    stack = [o for o in bwd_outputs if hasattr(o, "_input_nodes")]
    stack += [n for n in nodes if n.op == "call_function" and is_impure(n) and n not in fw]
    while stack:
        n = stack.pop()
        if n in bw or n in saved:
            continue
        if n in fw and recompute_tagged(n):  # a checkpointed function's: computed again
            bw.add(n)
            stack.extend(n._input_nodes)
            continue
        if n in fw or n.op == "get_attr":
            if n.op == "get_attr":
                bw.add(n)  # constants are read where they are used
            else:
                saved.add(n)
            continue
        bw.add(n)
        stack.extend(n._input_nodes)
    # Save an input rather than a view of it, or a view of a view of it (`a[1:4, 2:]`, two
    # slices): the views are recomputed in the backward.
    changed = True
    while changed:
        changed = False
        for n in list(saved):
            chain = [n]
            src = _is_view_of(n, fw)
            while src is not None and not _is_primal(src) and src not in saved:
                chain.append(src)
                src = _is_view_of(src, fw)
            if src is not None:
                saved.discard(n)
                bw.update(chain)
                saved.add(src)
                changed = True
    order = {n: i for i, n in enumerate(nodes)}
    saved_list = sorted(saved, key=order.__getitem__)
    return _build(joint_module, nodes, fw, bw, saved_list, fwd_outputs, bwd_outputs)


def _written_inputs(nodes) -> set:
    return {n.args[0] for n in nodes if n.op == "call_function" and
            n.target is aten.copy_.default and _is_primal(n.args[0])}


def _build(joint_module, nodes, fw, bw, saved_list, fwd_outputs, bwd_outputs):
    from ...fx import Graph, GraphModule

    written = _written_inputs(nodes)
    # Forward: every primal (the runtime passes all inputs), the forward nodes in order.
    fg = Graph()
    env: dict = {}
    for n in nodes:
        if _is_primal(n):
            env[n] = fg.node_copy(n)
    # An input the forward writes into is saved as a copy taken before the write.
    saved_env = {}
    for n in saved_list:
        if n in written:
            saved_env[n] = fg.call_function(aten.clone.default, (env[n],))
    for n in nodes:
        if n in fw and n.op not in ("placeholder", "output"):
            env[n] = fg.node_copy(n, env.__getitem__)
    fw_out = [env[o] if o in env else o for o in fwd_outputs]
    fw_out += [saved_env.get(n, env[n]) for n in saved_list]
    fg.output(tuple(fw_out))
    fg.eliminate_dead_code(is_impure)
    # Backward: the saved values, then the tangents, then its nodes in order.
    bg = Graph()
    benv: dict = {}
    for n in saved_list:
        benv[n] = bg.placeholder(n.name)
        benv[n].meta["val"] = n.meta.get("val")  # the example value its compiler is shown
    for n in nodes:
        if _is_tangent(n):
            benv[n] = bg.node_copy(n)
    for n in nodes:
        if n in bw and n.op != "placeholder":
            benv[n] = bg.node_copy(n, benv.__getitem__)
    bg.output(tuple(benv[o] if o in benv else o for o in bwd_outputs))
    bg.eliminate_dead_code(is_impure)
    return GraphModule(joint_module, fg), GraphModule(joint_module, bg)



from .mincut import min_cut_rematerialization_partition  # noqa: E402  (uses _build)

__all__ = ["default_partition", "min_cut_rematerialization_partition"]
