"""`torch.cond(pred, true_fn, false_fn, operands)` inside a captured frame.

A constant `pred` (a Python bool, or a size's comparison the capture decided) picks its
branch while translating, which is inlined. A tensor `pred` keeps the frame in one graph, as
Dynamo's cond does: both branches are speculated on the operands (each must have no effect
outside itself and need no graph break, and both must return tensors of the same shapes and
dtypes, or a tuple of such), then erased, and one node calls `cond` itself with the branch
functions, so the branch the value picks runs when the graph runs. The node's result has the
true branch's geometry (its strides known where both branches agree).

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
    reals = [real_function(tr, f, "cond()") for f in (true_fn, false_fn)]
    from ..._thread_state import local

    results = []
    for f, what in ((true_fn, "the true branch"), (false_fn, "the false branch")):
        out = speculate_call(tr, f, operands, f"cond(): {what}", local.grad_enabled)
        results.append(_outputs(out, what))
    (first, single), (second, single2) = results
    if single != single2 or len(first) != len(second) or any(
            tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or
            a.requires_grad != b.requires_grad for a, b in zip(first, second)):
        raise Unsupported("cond(): the branches return tensors of different shapes, dtypes "
                          "or requires_grad")
    builder = tr.builder
    node = builder.graph.create_node(
        "call_function", _cond_target(), (pred.node, *reals, tuple(o.node for o in operands)),
        {})
    builder.created.append(node)
    # (strides: known where both branches give the same, in both branches' rules)
    node.meta["layout_exact"] = all(tuple(a.stride()) == tuple(b.stride())
                                    for a, b in zip(first, second))
    return builder.wrap_result(node, first[0] if single else tuple(first))


def _cond_target():
    from ..._functions.compat_layers import cond

    return cond
