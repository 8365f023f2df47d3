"""`fusegrad.viz`: draw a tensor's autograd graph with Graphviz, as torchviz's `make_dot` does.

`make_dot(loss, params=dict(model.named_parameters()))` walks `loss.grad_fn` backwards and
returns a `graphviz.Digraph`: one grey box per backward node (its class name, `MulBackward0`),
a light blue box per leaf parameter (its name and shape) feeding its `AccumulateGrad` node, a
green box per output tensor (a lighter green for the base of an output that is a view) and,
with `show_saved=True`, an orange box per tensor a node saved for backward. `show_attrs=True`
lists each node's saved values under its name.

Saved values: nodes expose them as `_saved_<name>` attributes, named after ATen's arguments
and results as in PyTorch (`MmBackward0` has `_saved_self` and `_saved_mat2`); fusegrad's op
nodes get them from their registry entry's `saved_names`. For an op without those names, the
`_saved` list is named after the parameters of the op's derivative; custom Function nodes show
their `saved_tensors`.

The `graphviz` package (and Graphviz's `dot` to render) is needed only when `make_dot` runs:
`pip install fusegrad[viz]`.
"""

from __future__ import annotations

import inspect

__all__ = ["make_dot", "resize_graph"]

_SAVED_PREFIX = "_saved_"
_NODE_STYLE = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1",
                   height="0.2", fontname="monospace")


def _digraph_class():
    try:
        from graphviz import Digraph
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "fusegrad.viz.make_dot needs the 'graphviz' Python package "
            "(pip install graphviz, or pip install 'fusegrad[viz]'); rendering also needs "
            "Graphviz's 'dot' program (for example apt-get install graphviz).") from e
    return Digraph


def _is_tensor(x) -> bool:
    from .._tensor import Tensor

    return isinstance(x, Tensor)


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ")"


def _saved_names(node) -> list[str] | None:
    """Names for the entries of a fusegrad op node's `_saved` list (its derivative's
    parameters after the incoming gradient), or None when the node has none."""
    op = getattr(type(node), "_op", None)
    derivative = getattr(op, "derivative", None)
    if derivative is None:
        return None
    try:
        params = list(inspect.signature(derivative).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = []
    for p in params[1:]:
        if p.kind not in positional:
            break  # *args: the rest are named by position
        names.append(p.name)
    return names


def saved_values(node) -> dict:
    """The values `node` kept for its backward, by name (empty once they were freed).

    `_saved_<name>` attributes are used where a node has them (PyTorch's nodes, and fusegrad's
    for ops whose entry names what they save); otherwise fusegrad's `_saved` list, named after
    the derivative's parameters (`saved_<i>` where a name is unknown), or a custom Function's
    `saved_tensors`.
    """
    out = {}
    for attr in dir(node):
        if attr.startswith(_SAVED_PREFIX):
            try:
                out[attr[len(_SAVED_PREFIX):]] = getattr(node, attr)
            except RuntimeError:  # freed by a backward without retain_graph
                pass
    if out:
        return out
    if hasattr(type(node), "saved_tensors"):  # a custom Function's node
        try:
            saved = node.saved_tensors
        except RuntimeError:
            return {}
        return {f"saved_tensors[{i}]": t for i, t in enumerate(saved)}
    raw = getattr(node, "_saved", None)
    if not raw:
        return {}
    try:
        from ..autograd.graph import unpack_saved

        values = unpack_saved(node, raw, getattr(node, "_versions", None))
    except RuntimeError:  # freed, or modified in place since
        return {}
    names = _saved_names(node) or []
    for i, value in enumerate(values):
        out[names[i] if i < len(names) else f"saved_{i}"] = value
    return out


def _node_label(node, show_attrs: bool, max_attr_chars: int) -> str:
    """The node's class name and, with `show_attrs`, a two-column table of its saved values."""
    name = type(node).__name__
    if not show_attrs:
        return name
    attrs = {}
    for key, value in saved_values(node).items():
        if _is_tensor(value):
            attrs[key] = "[saved tensor]"
        elif isinstance(value, (tuple, list)) and any(_is_tensor(v) for v in value):
            attrs[key] = "[saved tensors]"
        else:
            attrs[key] = str(value)
    if not attrs:
        return name
    width = max(max_attr_chars, 3)
    left = max(len(k) for k in attrs)
    right = min(max(len(v) for v in attrs.values()), width)

    def cut(s: str) -> str:
        return s[:right - 3] + "..." if len(s) > right else s

    rows = [f"{k:<{left}}: {cut(v):>{right}}" for k, v in attrs.items()]
    rule = "-" * max(left + right + 2, len(name))
    return "\n".join([name, rule, *rows])


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """A `graphviz.Digraph` of the autograd graph that produced `var` (a tensor or a tuple).

    params: an optional dict name -> tensor, used to label leaf tensors by name.
    show_attrs: list each backward node's saved values under its name.
    show_saved: draw the tensors each node saved for backward (orange).
    max_attr_chars: the widest a value shown by `show_attrs` may be.
    """
    Digraph = _digraph_class()
    names = {}
    if params is not None:
        for key, value in params.items():
            if not _is_tensor(value):
                raise TypeError(f"params[{key!r}] is a {type(value).__name__}, not a Tensor")
            names[id(value)] = key

    dot = Digraph(node_attr=dict(_NODE_STYLE), graph_attr=dict(size="12,12"))
    seen = set()  # ids of drawn nodes and tensors
    keep = []  # keeps tensors unpacked for drawing alive, so that their ids stay unique

    def tensor_label(t, name=None) -> str:
        if not name:
            name = names.get(id(t), "")
        return f"{name}\n {_shape_text(t.shape)}"

    def draw_saved(node) -> None:
        for key, value in saved_values(node).items():
            items = [(key, value)] if _is_tensor(value) else (
                [(f"{key}[{i}]", v) for i, v in enumerate(value) if _is_tensor(v)]
                if isinstance(value, (tuple, list)) else [])
            for label, t in items:
                keep.append(t)
                tid = str(id(t))
                seen.add(id(t))
                dot.edge(str(id(node)), tid, dir="none")
                dot.node(tid, tensor_label(t, label), fillcolor="orange")

    def add_node(root) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if show_saved:
                draw_saved(node)
            leaf = getattr(node, "variable", None)
            if leaf is not None and _is_tensor(leaf):
                seen.add(id(leaf))
                dot.node(str(id(leaf)), tensor_label(leaf), fillcolor="lightblue")
                dot.edge(str(id(leaf)), str(id(node)))
            dot.node(str(id(node)), _node_label(node, show_attrs, max_attr_chars))
            children = [c for c, _ in getattr(node, "next_functions", ()) if c is not None]
            for child in children:
                dot.edge(str(id(child)), str(id(node)))
            stack.extend(reversed(children))

    def add_output(t, color="darkolivegreen1") -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        dot.node(str(id(t)), tensor_label(t), fillcolor=color)
        if t.grad_fn is not None:
            add_node(t.grad_fn)
            dot.edge(str(id(t.grad_fn)), str(id(t)))
        base = getattr(t, "_base", None)
        if base is not None:
            add_output(base, color="darkolivegreen3")
            dot.edge(str(id(base)), str(id(t)), style="dotted")

    for t in (var if isinstance(var, (tuple, list)) else (var,)):
        add_output(t)
    resize_graph(dot)
    return dot


def resize_graph(dot, size_per_element=0.15, min_size=12) -> None:
    """Grow `dot`'s drawing size with its number of statements (at least `min_size` inches)."""
    size = max(min_size, len(dot.body) * size_per_element)
    dot.graph_attr.update(size=f"{size},{size}")
