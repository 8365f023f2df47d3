"""Inlining a scripted module's method calls (`inlined_graph`, `freeze`).

`inline_calls` copies a method's graph, replacing each `prim::CallMethod` on a submodule
(reached by `prim::GetAttr` from `self`) with a copy of that submodule's compiled method,
recursively, as TorchScript's inliner does. `fold_attributes` then turns the reads of the
module tree's attributes into constants, as freezing does: tensors become tensor constants
of the program, numbers, strings, None and tuples of them plain constants, and the reads of
submodules disappear. A call it cannot inline (a traced submodule's recording) stays a call.
"""

from __future__ import annotations

from ._ir import Block, Graph, Node, Value


class _Copier:
    """Copies nodes into `graph`, mapping old values to new ones."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.owner: dict[Value, object] = {}  # new value -> the ScriptModule it is

    def value(self, v: Value, mapping: dict) -> Value:
        return mapping.get(v, v)

    def fresh(self, old: Value, node: Node | None) -> Value:
        hint = old.name.split(".")[0]
        return self.graph.fresh(hint if not hint.isdigit() else None, old.type, node)

    def block(self, src: Block, dst: Block, mapping: dict) -> None:
        for node in src.nodes:
            self.node(node, dst, mapping)

    def node(self, node: Node, dst: Block, mapping: dict) -> None:
        inputs = [self.value(v, mapping) for v in node.inputs]
        if node.kind == "prim::CallMethod" and inputs and inputs[0] in self.owner:
            callee = self.owner[inputs[0]]
            method = callee._jit_methods.get(node.attrs["name"])
            if method is not None and "_jit_engine" not in callee.__dict__:
                inner = {p: a for p, a in zip(method.graph.params, inputs)}
                self.block(method.graph, dst, inner)
                for out, ret in zip(node.outputs, method.graph.returns):
                    mapping[out] = self.value(ret, inner)
                return
        copy = Node(node.kind, inputs, node.attrs, node.source)
        for out in node.outputs:
            new = self.fresh(out, copy)
            copy.outputs.append(new)
            mapping[out] = new
        if node.kind == "prim::GetAttr" and inputs[0] in self.owner:
            child = self.owner[inputs[0]]._modules.get(node.attrs["name"])
            if child is not None and hasattr(child, "_jit_methods"):
                self.owner[copy.outputs[0]] = child
        for b in node.blocks:
            nb = Block()
            for p in b.params:
                nb.params.append(self.fresh(p, None))
                mapping[p] = nb.params[-1]
            self.block(b, nb, mapping)
            nb.returns = [self.value(v, mapping) for v in b.returns]
            copy.blocks.append(nb)
        dst.nodes.append(copy)


def inline_calls(module, name: str = "forward") -> tuple[Graph, dict]:
    """A copy of `module`'s method `name` with its calls of submodules' methods inlined, and
    the map from the copy's module values to the modules they are."""
    method = module._jit_methods[name]
    graph = Graph()
    copier = _Copier(graph)
    mapping: dict = {}
    for p in method.graph.params:
        graph.params.append(copier.fresh(p, None))
        mapping[p] = graph.params[-1]
    copier.owner[graph.params[0]] = module
    copier.block(method.graph, graph, mapping)
    graph.returns = [copier.value(v, mapping) for v in method.graph.returns]
    return graph, copier.owner


def count_uses(block: Block, counts: dict) -> None:
    """Add to `counts` how many times each value is read in `block` (nested blocks and
    returns included)."""
    for node in block.nodes:
        for v in node.inputs:
            counts[v] = counts.get(v, 0) + 1
        for b in node.blocks:
            count_uses(b, counts)
    for v in block.returns:
        counts[v] = counts.get(v, 0) + 1


def fold_attributes(graph: Graph, owner: dict, unit, preserved: frozenset = frozenset()) -> bool:
    """Make `graph`'s reads of module attributes constants (in place), except the reads of
    the module's own attributes named in `preserved` (they stay reads, and writes stay
    writes): True when no module value is left in use but `self`'s reads and writes of
    preserved attributes, so the frozen module needs no submodules."""
    import fusegrad

    top = graph.params[0] if graph.params else None

    def const(value, type_: str) -> Node:
        attrs: dict = {}
        if isinstance(value, fusegrad.Tensor):
            n = len(unit.tensors)
            while f"c{n}" in unit.tensors:
                n += 1
            key = f"c{n}"
            unit.tensors[key] = value.detach()
            attrs["tensor"] = key
        elif isinstance(value, (tuple, list)):
            attrs = {"value": list(value), "tuple": True} if isinstance(value, tuple) \
                else {"value": list(value)}
        elif value is not None:
            attrs["value"] = value
        node = Node("prim::Constant", [], attrs)
        node.outputs.append(graph.fresh(None, type_, node))
        return node

    def fold(block: Block, mapping: dict) -> None:
        kept = []
        for node in block.nodes:
            node.inputs = [mapping.get(v, v) for v in node.inputs]
            if node.kind == "prim::GetAttr" and node.inputs[0] in owner and not (
                    node.inputs[0] is top and node.attrs["name"] in preserved):
                module, name = owner[node.inputs[0]], node.attrs["name"]
                if node.outputs[0] in owner:
                    kept.append(node)  # a submodule: dropped below once unused
                    continue
                try:
                    value = module.jit_getattr(name)
                except RuntimeError:
                    kept.append(node)
                    continue
                if value is None or isinstance(value, (bool, int, float, str, tuple, list,
                                                       fusegrad.Tensor)):
                    c = const(value, node.outputs[0].type)
                    made.append(c)
                    mapping[node.outputs[0]] = c.outputs[0]
                    continue
            for b in node.blocks:
                fold(b, mapping)
            kept.append(node)
        block.nodes[:] = kept
        block.returns = [mapping.get(v, v) for v in block.returns]

    made: list = []  # the constants, put at the top of the graph afterwards
    fold(graph, {})
    graph.nodes[:0] = made
    # the reads of submodules nothing uses any more go, innermost first
    while True:
        counts: dict = {}
        count_uses(graph, counts)
        dead = _dead_reads(graph, counts, owner)
        if not dead:
            break
    counts = {}
    count_uses(graph, counts)
    if top is not None and counts.get(top):
        counts[top] -= _preserved_uses(graph, top, preserved)
    return not any(counts.get(v) for v in owner)


def _preserved_uses(block: Block, top: Value, preserved: frozenset) -> int:
    """How many reads and writes of `top`'s attributes named in `preserved` `block` has."""
    n = 0
    for node in block.nodes:
        if node.kind in ("prim::GetAttr", "prim::SetAttr") and node.inputs[0] is top and \
                node.attrs["name"] in preserved:
            n += 1
        for b in node.blocks:
            n += _preserved_uses(b, top, preserved)
    return n


def _dead_reads(block: Block, counts: dict, owner: dict) -> bool:
    removed = False
    kept = []
    for node in block.nodes:
        if node.kind == "prim::GetAttr" and node.outputs[0] in owner and \
                not counts.get(node.outputs[0]):
            removed = True
            continue
        for b in node.blocks:
            removed = _dead_reads(b, counts, owner) or removed
        kept.append(node)
    block.nodes[:] = kept
    return removed


_PURE = {"prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::TupleConstruct"}


def simplify(graph: Graph) -> None:
    """Constant propagation as freezing runs it, in place: Python operators on constant
    numbers, strings and None are computed, an If on a constant keeps the branch taken,
    equal constants are made one, and constants and attribute reads nothing uses are
    dropped."""
    from ._interpreter import OPERATORS

    made: list = []
    pooled: dict = {}

    def constant(v: Value):
        node = v.node
        if node is None or node.kind != "prim::Constant" or "tensor" in node.attrs or \
                node.attrs.get("tuple") or "dtype" in node.attrs:
            return None, False
        value = node.attrs.get("value")
        return value, value is None or isinstance(value, (bool, int, float, str))

    def fold(block: Block, mapping: dict) -> list:
        out = []
        for node in block.nodes:
            node.inputs = [mapping.get(v, v) for v in node.inputs]
            if node.kind == "prim::Constant" and node.outputs:
                key = (node.outputs[0].type, repr(sorted(node.attrs.items())))
                if key in pooled:
                    mapping[node.outputs[0]] = pooled[key]
                    continue
                pooled[key] = node.outputs[0]
                made.append(node)
                continue
            name = node.kind[len("aten::"):] if node.kind.startswith("aten::") else ""
            fn = OPERATORS.get(name)
            if fn is not None and node.attrs.get("form") == "operator" and \
                    not name.endswith("_") and len(node.outputs) == 1 and \
                    not node.attrs.get("kwargs") and node.outputs[0].type in (
                        "bool", "int", "float", "str"):
                values = [constant(v) for v in node.inputs]
                if values and all(ok for _, ok in values):
                    try:
                        result = fn(*[x for x, _ in values])
                    except Exception:  # (left to fail when it runs, as it would)
                        result = None
                    if isinstance(result, (bool, int, float, str)):
                        c = Node("prim::Constant", [], {"value": result})
                        c.outputs.append(graph.fresh(None, node.outputs[0].type, c))
                        made.append(c)
                        mapping[node.outputs[0]] = c.outputs[0]
                        continue
            if node.kind == "prim::If":
                value, ok = constant(node.inputs[0])
                if ok and isinstance(value, bool):
                    taken = node.blocks[0 if value else 1]
                    out += fold(taken, mapping)
                    for o, r in zip(node.outputs, taken.returns):
                        mapping[o] = mapping.get(r, r)
                    continue
            for b in node.blocks:
                b.nodes[:] = fold(b, mapping)
                b.returns = [mapping.get(v, v) for v in b.returns]
            out.append(node)
        return out

    mapping: dict = {}
    body = fold(graph, mapping)
    graph.returns = [mapping.get(v, v) for v in graph.returns]
    graph.nodes[:] = made + body
    while True:
        counts: dict = {}
        count_uses(graph, counts)
        if not _drop_unused(graph, counts):
            break


def _drop_unused(block: Block, counts: dict) -> bool:
    removed = False
    kept = []
    for node in block.nodes:
        if node.kind in _PURE and node.outputs and \
                not any(counts.get(o) for o in node.outputs):
            removed = True
            continue
        for b in node.blocks:
            removed = _drop_unused(b, counts) or removed
        kept.append(node)
    block.nodes[:] = kept
    return removed
