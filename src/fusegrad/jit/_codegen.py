"""`.code`: a graph printed back as Python-like source, in TorchScript's style.

Operations print as `torch.<name>(...)`; a value used once, made just before where it is
read, is written inline where TorchScript's printer inlines it (a value the source names only
into the function's `return`); `prim::If` becomes an if/else that assigns the If's outputs
in each branch, and `prim::Loop` a `for ... in range(...)` (a constant true condition) or a
`while` over its condition, the carried variables assigned at the end of each iteration.
"""

from __future__ import annotations

import re

from ._ir import Block, Graph, Node, Value, parse_generic

_MAX_INT = 9223372036854775807
_CALL_NAMES = {"Bool": "bool", "Int": "int", "Float": "float"}


def _literal(value) -> str:
    """A constant as TorchScript's code writes it (strings in double quotes)."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    return repr(value)


def _code_type(t: str) -> str:
    head, args = parse_generic(t)
    if args:
        return f"{head}[{', '.join(_code_type(a) for a in args)}]"
    return t.rsplit(".", 1)[-1] if t.startswith("__torch__.") else t


class _Printer:
    def __init__(self, graph: Graph):
        self.uses: dict[Value, int] = {}
        self.where: dict[Value, Block] = {}
        self._count(graph)
        self.names: dict[Value, str] = {}
        self.taken: set[str] = set()
        self.inline: dict[Value, str] = {}
        self.temp = 0
        self.inlined: set[Node] = set()
        self.graph = graph
        self._scan(graph)

    def _count(self, block: Block) -> None:
        for node in block.nodes:
            for v in node.inputs:
                self.uses[v] = self.uses.get(v, 0) + 1
            for v in node.outputs:
                self.where[v] = block
            for b in node.blocks:
                self._count(b)
        for v in block.returns:
            self.uses[v] = self.uses.get(v, 0) + 1

    def _scan(self, block: Block) -> None:
        """Choose the values written inline, as TorchScript's printer does: a value used
        once, made by the node just before the point where it is read (walking each block
        backwards, each node's inputs last to first), so no side effect moves."""
        nodes = [n for n in block.nodes if n.kind != "prim::Constant"]
        at = {n: i for i, n in enumerate(nodes)}
        point = len(nodes)  # the return's place
        for v in reversed(block.returns):
            # a variable is written inline into a `return` or a branch's result only
            point = self._scan_value(v, point, nodes, at, result=True)
        for i in range(len(nodes) - 1, -1, -1):
            node = nodes[i]
            if node in self.inlined:
                continue
            for b in node.blocks:
                self._scan(b)
            self._scan_inputs(node, i, nodes, at)

    def _scan_inputs(self, node: Node, point: int, nodes: list, at: dict) -> int:
        # the condition and trip count of a loop may be inlined, its carried values not
        inputs = node.inputs[:2] if node.kind == "prim::Loop" else node.inputs
        for v in reversed(inputs):
            point = self._scan_value(v, point, nodes, at)
        return point

    def _scan_value(self, v: Value, point: int, nodes: list, at: dict,
                    result: bool = False) -> int:
        node = v.node
        if node is None or at.get(node) != point - 1 or not self._can_inline(node, result):
            return point
        if not result and v.name.split(".")[0].isidentifier() and not v.name[0].isdigit():
            return point  # a value the source names keeps its variable
        self.inlined.add(node)
        return self._scan_inputs(node, point - 1, nodes, at)

    def _can_inline(self, node: Node, result: bool = False) -> bool:
        if len(node.outputs) != 1 or node.blocks or self.uses.get(node.outputs[0], 0) != 1:
            return False
        if node.kind in ("prim::unchecked_cast", "prim::Uninitialized"):
            return result  # a refinement keeps a variable, unless it is a branch's result
        # module attributes keep a variable, as in TorchScript's code
        return node.kind not in ("prim::GetAttr", "prim::TupleUnpack", "prim::ListUnpack",
                                 "aten::__setitem__") and not node.kind.startswith("prim::Raise")

    def name(self, v: Value) -> str:
        if v in self.names:
            return self.names[v]
        base = v.name.split(".")[0]
        if not re.fullmatch(r"[A-Za-z_]\w*", base):
            name = f"_{self.temp}"
            self.temp += 1
        else:
            name, k = base, 0
            while name in self.taken:
                name = f"{base}{k}"
                k += 1
        self.taken.add(name)
        self.names[v] = name
        return name

    def ref(self, v: Value) -> str:
        if v in self.inline:
            return self.inline.pop(v)
        node = v.node
        if node is not None and node.kind == "prim::Constant":
            return self.constant(node)
        return self.name(v)

    @staticmethod
    def constant(node: Node) -> str:
        attrs = node.attrs
        if "tensor" in attrs:
            return f"CONSTANTS.{attrs['tensor']}"
        if "dtype" in attrs:
            return str(attrs["dtype"])
        if "memory_format" in attrs:
            return f"torch.{attrs['memory_format']}"
        value = attrs.get("value")
        if attrs.get("tuple"):
            return repr(tuple(value))
        return _literal(value)

    def call_text(self, node: Node) -> str:
        kwargs = node.attrs.get("kwargs") or []
        npos = len(node.inputs) - len(kwargs)
        args = [self.ref(v) for v in node.inputs[:npos]]
        args += [f"{k}={self.ref(v)}" for k, v in zip(kwargs, node.inputs[npos:])]
        kind, attrs = node.kind, node.attrs
        if kind.startswith("aten::"):
            op = kind[len("aten::"):]
            if op == "__getitem__" and attrs.get("form") == "operator":
                return f"{args[0]}[{args[1]}]"
            if attrs.get("form") == "attribute":
                return f"{args[0]}.{op}"
            if op in _CALL_NAMES and attrs.get("form") == "operator":
                return f"{_CALL_NAMES[op]}({args[0]})"
            return f"torch.{op}({', '.join(args)})"
        if kind == "prim::GetAttr":
            name = attrs["name"]
            return f"{args[0]}.{name}" if name.isidentifier() else \
                f'getattr({args[0]}, "{name}")'  # a Sequential's "0"
        if kind == "prim::CreateObject":
            return f"{attrs['type']}.__new__({attrs['type']})"
        if kind == "prim::CallMethod":
            # (TorchScript writes a comma after each argument here)
            return f"({args[0]}).{attrs['name']}({''.join(a + ', ' for a in args[1:])})"
        if kind in ("prim::CallFunction", "prim::PythonOp"):
            return f"{attrs['name'].rsplit('.', 1)[-1]}({', '.join(args)})"
        if kind == "prim::TupleConstruct":
            return f"({args[0]},)" if len(args) == 1 else f"({', '.join(args)})"
        if kind == "prim::ListConstruct":
            return f"[{', '.join(args)}]"
        if kind == "prim::DictConstruct":
            pairs = [f"{k}: {v}" for k, v in zip(args[::2], args[1::2])]
            return "{" + ", ".join(pairs) + "}"
        if kind == "prim::SliceConstruct":
            return f"slice({', '.join(args)})"
        if kind == "prim::unchecked_cast":
            return f"unchecked_cast({_code_type(node.outputs[0].type)}, {args[0]})"
        if kind == "prim::Uninitialized":
            return f"uninitialized({_code_type(node.outputs[0].type)})"
        return f"{kind}({', '.join(args)})"

    def block(self, block: Block, indent: str, lines: list[str]) -> None:
        for node in block.nodes:
            self.node(node, block, indent, lines)

    def assign(self, targets: list[Value], values: list[Value], indent: str,
               lines: list[str]) -> None:
        pairs = [(self.name(t), self.ref(v)) for t, v in zip(targets, values)]
        pairs = [(t, v) for t, v in pairs if t != v]
        if pairs:
            lines.append(f"{indent}{', '.join(t for t, _ in pairs)} = "
                         f"{', '.join(v for _, v in pairs)}")

    def node(self, node: Node, block: Block, indent: str, lines: list[str]) -> None:
        kind = node.kind
        if kind == "prim::Constant":
            return
        if kind == "prim::If":
            lines.append(f"{indent}if {self.ref(node.inputs[0])}:")
            for i, b in enumerate(node.blocks):
                if i == 1:
                    lines.append(f"{indent}else:")
                before = len(lines)
                self.block(b, indent + "  ", lines)
                self.assign(node.outputs, b.returns, indent + "  ", lines)
                if len(lines) == before:
                    lines.append(f"{indent}  pass")
            return  # (an empty else prints `pass`, as in TorchScript's code)
        if kind == "prim::Loop":
            self.loop(node, indent, lines)
            return
        if kind in ("prim::TupleUnpack", "prim::ListUnpack"):
            names = ", ".join(self.name(v) for v in node.outputs)
            lines.append(f"{indent}{names}{',' if len(node.outputs) == 1 else ''} = "
                         f"{self.ref(node.inputs[0])}")
            return
        if kind == "prim::RaiseException":
            # as TorchScript writes it: an assertion's message carries its prefix, other
            # exceptions are named by their qualified class
            exc = node.attrs.get("exception", "Exception")
            msg = node.inputs[0]
            if exc == "AssertionError":
                const = msg.node is not None and msg.node.kind == "prim::Constant" and \
                    isinstance(msg.node.attrs.get("value"), str)
                text = _literal(f"AssertionError: {msg.node.attrs['value']}") if const else \
                    f'torch.add("AssertionError: ", {self.ref(msg)})'
            else:
                text = f'{self.ref(msg)}, "builtins.{exc}"'
            lines.append(f"{indent}ops.prim.RaiseException({text})")
            return
        if kind == "prim::Print":
            lines.append(f"{indent}print({', '.join(self.ref(v) for v in node.inputs)})")
            return
        if kind == "aten::__setitem__":
            a = [self.ref(v) for v in node.inputs]
            lines.append(f"{indent}{a[0]}[{a[1]}] = {a[2]}")
            return
        text = self.call_text(node)
        if node in self.inlined:
            self.inline[node.outputs[0]] = text
            return
        if not node.outputs:
            lines.append(f"{indent}{text}")
        elif len(node.outputs) == 1:
            lines.append(f"{indent}{self.name(node.outputs[0])} = {text}")

    def loop(self, node: Node, indent: str, lines: list[str]) -> None:
        trip, cond, *init = node.inputs
        body = node.blocks[0]
        index, *params = body.params
        for p, out in zip(params, node.outputs):
            self.names[p] = self.name(out)
        self.assign(node.outputs, init, indent, lines)
        is_for = cond.node is not None and cond.node.kind == "prim::Constant" and \
            cond.node.attrs.get("value") is True
        if is_for:
            lines.append(f"{indent}for {self.name(index)} in range({self.ref(trip)}):")
        else:
            flag = f"_{self.temp}"
            self.temp += 1
            lines.append(f"{indent}{flag} = {self.ref(cond)}")
            lines.append(f"{indent}while {flag}:")
        before = len(lines)
        self.block(body, indent + "  ", lines)
        if is_for:
            self.assign(node.outputs, body.returns[1:], indent + "  ", lines)
            go_on = body.returns[0]
            if not (go_on.node is not None and go_on.node.kind == "prim::Constant" and
                    go_on.node.attrs.get("value") is True):  # the body may break
                lines.append(f"{indent}  if not {self.ref(go_on)}:")
                lines.append(f"{indent}    break")
        else:
            targets = [flag] + [self.name(o) for o in node.outputs]
            values = [self.ref(v) for v in body.returns]
            lines.append(f"{indent}  {', '.join(targets)} = {', '.join(values)}")
        if len(lines) == before:
            lines.append(f"{indent}  pass")


def graph_code(graph: Graph, name: str, self_name: str | None = None,
               defaults: dict | None = None) -> str:
    """The graph as the source of a function `name` (a method when `self_name` is given)."""
    p = _Printer(graph)
    params = []
    for i, v in enumerate(graph.params):
        n = p.name(v)
        if i == 0 and self_name is not None:
            params.append(n)
            continue
        default = f"={defaults[n]!r}" if defaults and n in defaults else ""
        params.append(f"{n}: {_code_type(v.type)}{default}")
    ret = _code_type(graph.returns[0].type) if graph.returns else "None"
    sep = ",\n    "
    lines = [f"def {name}({sep.join(params)}) -> {ret}:"]
    p.block(graph, "  ", lines)
    lines.append(f"  return {', '.join(p.ref(v) for v in graph.returns)}")
    return "\n".join(lines) + "\n"
