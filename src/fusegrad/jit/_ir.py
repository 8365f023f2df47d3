"""The scripted program's IR: SSA values, nodes with nested blocks, and graphs.

A `Graph` is a top-level `Block`: its `params` are the function's inputs and its `returns`
its outputs. Every `Value` is defined once (a block parameter or a node output) and named
uniquely within its graph, so the text form and the JSON form can refer to values by name.
Control flow is structured, as in TorchScript: `prim::If` holds two blocks that each end by
yielding the If's outputs, and `prim::Loop(max_trip, cond, *carried)` holds one body block
with parameters `(iteration, *carried)` that yields `(cond, *carried)`.

Types are strings in Python annotation spelling ("Tensor", "int", "List[int]",
"Optional[Tensor]", "Tuple[Tensor, int]", a module's class type "__torch__.Net"); the graph
printer spells them as TorchScript's graphs do (`int[]`, `Tensor?`, `(Tensor, int)`).
"""

from __future__ import annotations

import re
from typing import Any


class Value:
    """One SSA value: a name unique in its graph, a type, and what defines it."""

    __slots__ = ("name", "type", "node")

    def __init__(self, name: str, type_: str, node: Node | None = None):
        self.name = name
        self.type = type_
        self.node = node

    def __repr__(self) -> str:
        return f"%{self.name}"


class Node:
    """One operation: `kind` ("aten::mul", "prim::If"), inputs, outputs, nested blocks,
    attributes (JSON values) and the source position it came from ("file:line:col")."""

    __slots__ = ("kind", "inputs", "outputs", "blocks", "attrs", "source", "impl")

    def __init__(self, kind: str, inputs: list[Value], attrs: dict | None = None,
                 source: str | None = None):
        self.kind = kind
        self.inputs = list(inputs)
        self.outputs: list[Value] = []
        self.blocks: list[Block] = []
        self.attrs = dict(attrs or {})
        self.source = source
        self.impl = None  # what an `aten::` node runs, found on first use


class Block:
    """A list of nodes with parameters and the values it yields (`returns`)."""

    __slots__ = ("params", "nodes", "returns")

    def __init__(self):
        self.params: list[Value] = []
        self.nodes: list[Node] = []
        self.returns: list[Value] = []


class Graph(Block):
    """A function's body; hands out unique value names (`fresh`)."""

    __slots__ = ("_taken", "_counts")

    def __init__(self):
        super().__init__()
        self._taken: set[str] = set()
        self._counts: dict[str, int] = {}

    def fresh(self, hint: str | None, type_: str, node: Node | None = None) -> Value:
        """A new value named after `hint` (`x`, then `x.1`, `x.2`), or numbered."""
        base = hint if hint and re.fullmatch(r"[A-Za-z_]\w*", hint) else ""
        k = self._counts.get(base, 0)
        name = base if base and k == 0 else (f"{base}.{k}" if base else str(k + 1))
        while name in self._taken:
            k += 1
            name = f"{base}.{k}" if base else str(k + 1)
        self._counts[base] = k + 1
        self._taken.add(name)
        return Value(name, type_, node)

    def __str__(self) -> str:
        return graph_text(self)

    __repr__ = __str__


# ----------------------------------------------------------------------------------------
# Types


def split_args(inner: str) -> list[str]:
    """Split "A, B[C, D], E" at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_generic(t: str) -> tuple[str, list[str]]:
    """("List", ["int"]) for "List[int]"; (t, []) for a plain type."""
    m = re.fullmatch(r"(\w+)\[(.*)\]", t)
    if not m:
        return t, []
    return m.group(1), split_args(m.group(2))


def graph_type(t: str) -> str:
    """A type as TorchScript's graph printer spells it."""
    head, args = parse_generic(t)
    if head == "List" and len(args) == 1:
        return graph_type(args[0]) + "[]"
    if head == "Optional" and len(args) == 1:
        return graph_type(args[0]) + "?"
    if head == "Tuple":
        return "(" + ", ".join(graph_type(a) for a in args) + ")"
    return t


# ----------------------------------------------------------------------------------------
# Printing


def _attr_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return f"{key}={int(value)}"
    if isinstance(value, str):
        return f'{key}="{value}"'
    return f"{key}={value!r}"


def _node_text(node: Node, indent: str, lines: list[str]) -> None:
    outs = ", ".join(f"%{v.name} : {graph_type(v.type)}" for v in node.outputs)
    attrs = {k: v for k, v in node.attrs.items() if k not in ("kwargs", "form", "overload")}
    shown = ", ".join(_attr_text(k, v) for k, v in attrs.items())
    if node.kind.startswith("aten::") and "overload" in node.attrs:
        kind = f"{node.kind}.{node.attrs['overload']}" if node.attrs["overload"] != \
            "default" else node.kind
    else:
        kind = node.kind
    kwargs = node.attrs.get("kwargs") or []
    npos = len(node.inputs) - len(kwargs)
    args = [f"%{v.name}" for v in node.inputs[:npos]]
    args += [f"{k}=%{v.name}" for k, v in zip(kwargs, node.inputs[npos:])]
    text = f"{kind}[{shown}]({', '.join(args)})" if shown else f"{kind}({', '.join(args)})"
    where = f" # {node.source}" if node.source else ""
    lines.append(f"{indent}{outs + ' = ' if outs else ''}{text}{where}")
    for i, block in enumerate(node.blocks):
        params = ", ".join(f"%{v.name} : {graph_type(v.type)}" for v in block.params)
        lines.append(f"{indent}  block{i}({params}):")
        for inner in block.nodes:
            _node_text(inner, indent + "    ", lines)
        lines.append(f"{indent}    -> ({', '.join('%' + v.name for v in block.returns)})")


def graph_text(graph: Graph) -> str:
    """The graph in TorchScript's layout: `graph(%x : Tensor): ... return (%y)`."""
    params = [f"%{v.name} : {graph_type(v.type)}" for v in graph.params]
    head = "graph(" + ",\n      ".join(params) + "):"
    lines = [head]
    for node in graph.nodes:
        _node_text(node, "  ", lines)
    lines.append(f"  return ({', '.join('%' + v.name for v in graph.returns)})")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# JSON form


def _block_json(block: Block) -> dict:
    return {"params": [[v.name, v.type] for v in block.params],
            "nodes": [_node_json(n) for n in block.nodes],
            "returns": [v.name for v in block.returns]}


def _node_json(node: Node) -> dict:
    out: dict[str, Any] = {"kind": node.kind, "inputs": [v.name for v in node.inputs],
                           "outputs": [[v.name, v.type] for v in node.outputs]}
    if node.attrs:
        out["attrs"] = node.attrs
    if node.blocks:
        out["blocks"] = [_block_json(b) for b in node.blocks]
    if node.source:
        out["source"] = node.source
    return out


def graph_to_json(graph: Graph) -> dict:
    """The graph as JSON data (names, types, kinds and attributes only)."""
    return _block_json(graph)


class IRFormatError(ValueError):
    """A saved graph that is not well formed."""


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise IRFormatError(f"invalid saved graph: {what}")


def _is_name(x: Any) -> bool:
    return isinstance(x, str) and re.fullmatch(r"[A-Za-z_0-9][\w.]*", x) is not None


def _is_type(x: Any) -> bool:
    return isinstance(x, str) and re.fullmatch(r"[\w.\[\], ]+", x) is not None


def _json_attr_ok(v: Any, depth: int = 0) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, list) and depth < 4:
        return all(_json_attr_ok(x, depth + 1) for x in v)
    return False


def graph_from_json(data: Any, allowed_kind) -> Graph:
    """Rebuild a graph from `graph_to_json`'s data, checking its shape: known node kinds
    only (`allowed_kind(kind, attrs)` decides), every input defined before it is used and
    visible in its block, every name defined once."""
    graph = Graph()
    defined: set[str] = set()

    def define(entry: Any, node: Node | None, scope: dict) -> Value:
        _expect(isinstance(entry, list) and len(entry) == 2 and _is_name(entry[0])
                and _is_type(entry[1]), f"bad value entry {entry!r}")
        _expect(entry[0] not in defined, f"value %{entry[0]} defined twice")
        defined.add(entry[0])
        v = Value(entry[0], entry[1], node)
        scope[entry[0]] = v
        graph._taken.add(entry[0])
        return v

    def block(data: Any, target: Block, scope: dict) -> None:
        _expect(isinstance(data, dict) and set(data) <= {"params", "nodes", "returns"},
                "a block must be an object of params, nodes and returns")
        _expect(isinstance(data.get("params", []), list) and isinstance(
            data.get("nodes", []), list) and isinstance(data.get("returns", []), list),
            "block fields must be lists")
        target.params = [define(p, None, scope) for p in data.get("params", [])]
        for nd in data.get("nodes", []):
            target.nodes.append(node(nd, scope))
        target.returns = [lookup(n, scope) for n in data.get("returns", [])]

    def lookup(name: Any, scope: dict) -> Value:
        _expect(isinstance(name, str) and name in scope, f"value %{name} used before "
                "it is defined or outside its block")
        return scope[name]

    def node(nd: Any, scope: dict) -> Node:
        _expect(isinstance(nd, dict) and set(nd) <= {"kind", "inputs", "outputs", "attrs",
                                                     "blocks", "source"}, "bad node entry")
        kind, attrs = nd.get("kind"), nd.get("attrs", {})
        _expect(isinstance(kind, str) and isinstance(attrs, dict) and all(
            isinstance(k, str) and _json_attr_ok(v) for k, v in attrs.items()),
            f"bad node kind or attributes {kind!r}")
        _expect(allowed_kind(kind, attrs), f"unknown operation {kind!r}")
        source = nd.get("source")
        _expect(source is None or isinstance(source, str), "bad source position")
        n = Node(kind, [lookup(i, scope) for i in nd.get("inputs", [])], attrs, source)
        for bd in nd.get("blocks", []):
            b = Block()
            block(bd, b, dict(scope))  # a block sees the enclosing values, not vice versa
            n.blocks.append(b)
        n.outputs = [define(o, n, scope) for o in nd.get("outputs", [])]
        return n

    block(data, graph, {})
    return graph
