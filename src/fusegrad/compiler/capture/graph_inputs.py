"""The order of a captured graph's inputs: Dynamo's, the order it realizes them in.

Dynamo reads a module's parameter or buffer into the graph (a placeholder) when the program
reads the attribute, but the frame's other tensors (its arguments, items of its lists, a
global, a closure's, a plain tensor attribute) only when an operation first uses them: in
`self.fc(x)` the linear layer's weight and bias come before `x`, and in `y * 2 + self.fc(x)`
`y` comes first. Capture makes placeholders as it reads values; `order_inputs` puts them in
that order when the graph is done: a parameter where it was read (after the op nodes made
before it), any other input at its first use (ahead of a parameter read after that op's
arguments were taken). Inputs are bound by position from the graph's order afterwards
(`FrameRunner._finish` reads it), so the order changes no result. A graph with symbolic
sizes or numbers as inputs keeps the order it was built in.
"""

from __future__ import annotations


def is_state_source(source: str) -> bool:
    """Whether `source` reads a module's parameter or buffer."""
    return "._parameters[" in source or "._buffers[" in source


def last_op(created: list):
    """The newest node of `created` that is not a placeholder, or None: what a parameter's
    placeholder made now is read after."""
    for node in reversed(created):
        if node.op != "placeholder":
            return node
    return None


def order_inputs(graph, outputs: list) -> None:
    """Put `graph`'s placeholders in the order Dynamo makes them (see the module docstring);
    `outputs`: the nodes the graph will return, in order (an input used by no op is used
    there)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) < 2 or any(
            n.meta.get("symbol") or n.meta.get("float_input") or "source" not in n.meta
            for n in placeholders):
        return
    ops = [n for n in graph.nodes if n.op not in ("placeholder", "output")]
    where = {n: i for i, n in enumerate(ops)}
    first_use: dict = {}
    for i, node in enumerate(ops):
        for j, arg in enumerate(node.all_input_nodes):
            if arg.op == "placeholder" and arg not in first_use:
                first_use[arg] = (i, j)
    for j, node in enumerate(outputs):
        if node.op == "placeholder" and node not in first_use:
            first_use[node] = (len(ops), j)
    keys = {}
    for k, node in enumerate(placeholders):
        if is_state_source(node.meta["source"]):
            after = node.meta.get("read_after")
            if after is not None and after not in where:
                return  # (the node it was read after is gone: keep the order it was built in)
            keys[node] = (-0.5 if after is None else where[after] + 0.5, 0, k)
        else:
            i, j = first_use.get(node, (len(ops) + 1, k))
            keys[node] = (i, 1, j)
    ordered = sorted(placeholders, key=keys.__getitem__)
    if ordered == placeholders:
        return
    anchor = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if anchor is None:
        return
    for node in ordered:
        anchor.prepend(node)
