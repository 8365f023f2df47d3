"""`torch.cond(pred, true_fn, false_fn, operands)` inside a captured frame.

A constant `pred` (a Python bool, or a size's comparison the capture decided) picks its
branch while translating, which is inlined. A tensor `pred` keeps the frame in one graph, as
Dynamo's cond does: both branches are speculated on the operands (each must have no effect
outside itself and need no graph break, and both must return tensors of the same shapes and
dtypes, or a tuple of such), then erased, and one node calls `cond` itself, so the branch
the value picks runs when the graph runs. What each branch recorded while speculated is kept
as a graph module of its own, the branch the node calls: its inputs are the operands, then
every value either branch read from the enclosing graph (a parameter of a module the branch
closes over, a tensor computed before the `cond`), passed as extra operands, as Dynamo
lifts them. (A branch that reads a number input of the graph is called as the function it
is, where its closure holds constants only.) The node's result has the true branch's
geometry (its strides known where both branches agree).

Run eagerly (the "eager" backend) that is eager's call. AOT autograd, whose predicate is
fake, traces both branches and selects each result by it (`compiler/aot/control_flow.py`).
"""

from __future__ import annotations

from .hooks import real_function, speculate_call
from .variables import ConstantVariable, TensorVariable, TupleVariable, Unsupported, Variable


def is_cond(f) -> bool:
    """Whether `f` is the library's `cond` (its public wrapper or the function itself)."""
    from ..._functions.compat_layers import cond

    return f is cond or getattr(f, "__wrapped__", None) is cond


def _operand_items(operands: Variable) -> list:
    if isinstance(operands, TupleVariable):  # (a tuple or a list)
        items = list(operands.items)
    elif isinstance(operands, ConstantVariable) and operands.value in ((), []):
        items = []
    else:
        raise Unsupported("cond() with operands other than a tuple or list of tensors")
    if not all(isinstance(i, TensorVariable) for i in items):
        raise Unsupported("cond() with operands other than tensors")
    return items


def _outputs(v: Variable, what: str) -> tuple:
    """A branch result's fake tensors (and whether it is a single tensor)."""
    if isinstance(v, TensorVariable):
        return (v.example,), True
    if type(v) is TupleVariable and getattr(v, "cls", None) is None and v.items and all(
            isinstance(i, TensorVariable) for i in v.items):
        return tuple(i.example for i in v.items), False
    raise Unsupported(f"cond(): {what} returns something other than a tensor or a tuple of "
                      "tensors")


def call_cond(tr, args: list, kwargs: dict) -> Variable:
    """`cond(pred, true_fn, false_fn, operands)` during translation."""
    names = ("pred", "true_fn", "false_fn", "operands")
    if len(args) > len(names) or any(k not in names[len(args):] for k in kwargs):
        raise Unsupported("cond() with other arguments")
    given = dict(zip(names, args)) | kwargs
    if any(n not in given for n in names[:3]):
        raise Unsupported("cond() with arguments missing")
    pred, true_fn, false_fn = given["pred"], given["true_fn"], given["false_fn"]
    operands = _operand_items(given.get("operands", ConstantVariable(())))
    if isinstance(pred, ConstantVariable) and type(pred.value) in (bool, int):
        return tr.call(true_fn if pred.value else false_fn, operands, {})
    if not isinstance(pred, TensorVariable) or pred.example.numel() != 1:
        raise Unsupported("cond() of a predicate other than a one-element tensor or a bool")
    from ..._thread_state import local

    # Each branch becomes a graph of its own over the operands and what it reads of the
    # frame (parameters, tensors the graph made before), as Dynamo lifts them; where that
    # fails (a branch reads a number input), the branch functions themselves are called.
    lifted = _Lifted(tr.builder, operands)
    results = []
    for f, what in ((true_fn, "the true branch"), (false_fn, "the false branch")):
        out = speculate_call(tr, f, operands, f"cond(): {what}", local.grad_mode,
                             lifted.inspect)
        results.append(_outputs(out, what))
    reals = None
    if lifted.refused:
        reals = [real_function(tr, f, "cond()") for f in (true_fn, false_fn)]
    (first, single), (second, single2) = results
    if single != single2 or len(first) != len(second) or any(
            tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or
            a.requires_grad != b.requires_grad for a, b in zip(first, second)):
        raise Unsupported("cond(): the branches return tensors of different shapes, dtypes "
                          "or requires_grad")
    builder = tr.builder
    args = tuple(o.node for o in operands)
    if reals is None:
        reals, args = lifted.finish()
    node = builder.graph.create_node(
        "call_function", _cond_target(), (pred.node, *reals, args), {})
    builder.created.append(node)
    # (strides: known where both branches give the same, in both branches' rules)
    node.meta["layout_exact"] = all(tuple(a.stride()) == tuple(b.stride())
                                    for a, b in zip(first, second))
    return builder.wrap_result(node, first[0] if single else tuple(first))


def _cond_target():
    from ..._functions.compat_layers import cond

    return cond


class _Refused(Exception):
    """A branch read a value that cannot be a lifted operand."""


class _Lifted:
    """The branches of a `cond` as graphs of their own: each takes the operands, then every
    value either branch reads from the enclosing graph (a parameter, a tensor computed
    before the `cond`), in first-use order, as extra operands."""

    def __init__(self, builder, operands: list):
        self.builder = builder
        self.operands = operands
        self.keys: list = []  # the extra operands: ("node", node) or ("input", source)
        self.values: dict = {}  # ("input", source) -> the real tensor
        self.protos: list = []  # per branch: (graph, {key: its placeholder})
        self.refused = False  # a branch read what cannot be an operand (a number input)

    def inspect(self, mark: int, returned) -> None:
        """Copy the nodes a branch's speculation recorded (`created[mark:]`) into a graph."""
        try:
            self._copy(mark, returned)
        except _Refused:
            self.refused = True

    def _copy(self, mark: int, returned) -> None:
        from ... import fx

        builder = self.builder
        region = builder.created[mark:]
        made = {id(n) for n in region}
        g = fx.Graph()
        env: dict = {}
        for i, o in enumerate(self.operands):
            p = g.placeholder(f"operand_{i}")
            env.setdefault(o.node, p)
        extra: dict = {}

        def free(n):
            if n in env:
                return env[n]
            if id(n) in made:  # an input the branch read first: read again after it
                meta = n.meta
                source = meta.get("source")
                if n.op != "placeholder" or meta.get("symbol") or meta.get("float_input") \
                        or source not in builder.input_values:
                    raise _Refused
                key = ("input", source)
                self.values[key] = builder.input_values[source]
            else:
                key = ("node", n)
            if key not in self.keys:
                self.keys.append(key)
            first = next(m for m in g.nodes if m.op != "placeholder") if any(
                m.op != "placeholder" for m in g.nodes) else None
            if first is not None:
                with g.inserting_before(first):
                    p = g.placeholder(f"lifted_{len(extra)}")
            else:
                p = g.placeholder(f"lifted_{len(extra)}")
            p.meta.update(n.meta)
            extra[key] = p
            env[n] = p
            return p

        for n in region:
            if n.op == "placeholder":
                continue
            env[n] = g.node_copy(n, free)
        if isinstance(returned, TensorVariable):
            g.output(free(returned.node))
        elif isinstance(returned, TupleVariable) and all(
                isinstance(i, TensorVariable) for i in returned.items):
            g.output(tuple(free(i.node) for i in returned.items))
        else:
            raise _Refused  # (refused below as the branch's result)
        self.protos.append((g, extra))

    def finish(self) -> tuple:
        """The two branch graph modules, and the operand nodes the `cond` node passes (the
        lifted inputs read again into the enclosing graph)."""
        from ... import fx

        modules = []
        for proto, extra in self.protos:
            g = fx.Graph()
            val_map: dict = {}
            placeholders = [n for n in proto.nodes if n.op == "placeholder"]
            for i, p in enumerate(placeholders[:len(self.operands)]):
                val_map[p] = g.placeholder(f"operand_{i}")
            for k, key in enumerate(self.keys):
                p = g.placeholder(f"lifted_{k}")
                if key in extra:
                    val_map[extra[key]] = p
            g.output(g.graph_copy(proto, val_map))
            modules.append(fx.GraphModule({}, g))
        nodes = [o.node for o in self.operands]
        for key in self.keys:
            if key[0] == "node":
                nodes.append(key[1])
            else:
                nodes.append(self.builder.wrap(self.values[key], key[1]).node)
        return modules, tuple(nodes)
