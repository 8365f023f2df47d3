"""`cond` in traced graphs: a select of both branches' results.

A captured graph calls `cond(pred, true_fn, false_fn, operands)` with a tensor predicate,
whose value the fake tensors AOT autograd traces with do not have. Where both branches are
pure (no random draw, no write outside themselves, no check, no grad-mode switch: effects
the branch not taken would have where eager has none) and their results agree in layout and
alias nothing, the trace runs both and selects each result with `where(pred, t, f)`, so
the graph computes eager's values for either value of the predicate. Gradients reach the
operands from the taken branch only: each branch reads its operands through a gate whose
backward keeps the gradient where its branch is taken and selects zeros where not, so the
untaken branch's backward (which may make NaN from a zero gradient: 0 * inf) never adds into
an operand's gradient. Anything else raises `AOTUnsupported` (the graph runs eagerly).
Both branches run on every call: the select costs the branch not taken.
"""

from __future__ import annotations

import functools

from ... import _dtype
from ..._fake import FakeTensor
from ..._tensor import Tensor
from ..._thread_state import local as _thread_local
from ...autograd.graph import ACCUMULATE_SEQ, SEQUENCE
from .functionalize import AOTUnsupported


def _cond():
    from ..._functions.compat_layers import cond

    return cond


def traced_cond(pred, true_fn, false_fn, operands=()):
    """Graph node target standing for `cond`: eager's call, or under AOT autograd's tracer
    (a fake predicate) both branches traced and their results selected."""
    from .tracing import Tracer

    tracer = None
    for mode in reversed(_thread_local.modes):
        if isinstance(mode, Tracer) and mode.functional:  # (AOT autograd's)
            tracer = mode
            break
    if tracer is None or not isinstance(pred, FakeTensor):
        return _cond()(pred, true_fn, false_fn, operands)
    return select_branches(tracer, pred, true_fn, false_fn, tuple(operands))


def route_cond(gm) -> None:
    """Make graph module `gm`'s `cond` nodes call `traced_cond` (the same call when run
    eagerly), so that a trace of the graph can select between the branches."""
    from ..capture.control_flow import is_cond

    graph = getattr(gm, "graph", None)
    changed = False
    for n in getattr(graph, "nodes", ()):
        if n.op == "call_function" and n.target is not traced_cond and is_cond(n.target):
            n.target = traced_cond
            changed = True
    if changed:
        gm.recompile()


@functools.cache
def _gates():
    """The autograd Functions through which each branch reads its operands (made on first
    use: the autograd package imports late)."""
    from ...autograd.function import Function

    def make(taken_when_true: bool):
        class CondGate(Function):
            @staticmethod
            def forward(ctx, p, x):
                ctx.save_for_backward(p)
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                from ... import where, zeros_like

                (p,) = ctx.saved_tensors
                zero = zeros_like(g)
                # (a select, not a product: a NaN the untaken branch made is dropped)
                return None, where(p, g, zero) if taken_when_true else where(p, zero, g)

        return CondGate

    return make(True), make(False)


def _flat(out, what: str) -> tuple[tuple, bool]:
    if isinstance(out, Tensor):
        return (out,), True
    if isinstance(out, (tuple, list)) and all(isinstance(t, Tensor) for t in out):
        return tuple(out), False
    raise AOTUnsupported(f"cond(): {what} returns something other than tensors")


def _operands_reached(t: Tensor, gates: dict, mark: int) -> frozenset:
    """The operands (indices) whose gates branch result `t`'s history reaches. A path to a
    tensor with history that is no operand (a leaf the branch reads, such as a parameter)
    is refused: no gate would keep the untaken branch's gradient from it."""
    found, seen, stack = set(), set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in gates:
            found.add(gates[id(node)])
        elif node._seq > mark and node._seq != ACCUMULATE_SEQ:
            stack.extend(fn for fn, _ in node.next_functions)
        else:
            raise AOTUnsupported("cond(): a branch reads a tensor with history other than "
                                 "its operands")
    return frozenset(found)


def _aliases(t: Tensor, operands: tuple) -> bool:
    """Whether branch result `t` shares memory with an operand (eager's cond returns that
    alias; a select makes a new tensor)."""
    root = t._base if t._base is not None else t
    for o in operands:
        base = o._base if o._base is not None else o
        if root is base or t is o:
            return True
    return False


def select_branches(tracer, pred, true_fn, false_fn, operands: tuple):
    """Both branches of a cond traced on `operands` and each result selected by `pred`."""
    from ... import where
    from .joint import is_impure
    from .tracing import _set_grad_enabled

    if not all(isinstance(o, Tensor) for o in operands):
        raise AOTUnsupported("cond() with operands other than tensors")
    if pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    p = pred.reshape(())
    if p.dtype is not _dtype.bool_:
        p = p != 0  # (Python's truth of the one element)
    before = list(tracer.graph.nodes)
    versions = [o._vc[0] for o in operands]
    gate_true, gate_false = _gates()
    mark = next(SEQUENCE)  # (autograd nodes made from here on are the branches')
    outs, reach = [], []
    for fn, gate, what in ((true_fn, gate_true, "the true branch"),
                           (false_fn, gate_false, "the false branch")):
        gated = tuple(gate.apply(p, o) if o.requires_grad else o for o in operands)
        gates = {id(g.grad_fn): i for i, g in enumerate(gated) if g.grad_fn is not None}
        outs.append(_flat(fn(*gated), what))
        reach.append([_operands_reached(t, gates, mark) for t in outs[-1][0]])
    (first, single), (second, single2) = outs
    if reach[0] != reach[1]:
        # (eager gives an operand no gradient, None, where the taken branch does not reach
        # it; a select would give it zeros)
        raise AOTUnsupported("cond(): the branches' results depend on different operands")
    if [o._vc[0] for o in operands] != versions:
        raise AOTUnsupported("cond(): a branch writes an operand")
    seen = set(map(id, before))
    for n in tracer.graph.nodes:
        # (Grad-mode switches are no effect here: the gates' forwards run under no_grad,
        # and the mode the graph leaves is set after it runs.)
        if id(n) not in seen and n.op == "call_function" and is_impure(n) and \
                n.target is not _set_grad_enabled:
            raise AOTUnsupported("cond(): a branch has effects (a random draw, a write, a "
                                 "check or a grad-mode switch) the branch not taken must not "
                                 "have")
    if single != single2 or len(first) != len(second):
        raise AOTUnsupported("cond(): the branches return different structures")
    results = []
    for a, b in zip(first, second):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or \
                a.requires_grad != b.requires_grad:
            raise AOTUnsupported("cond(): the branches return tensors of different shapes, "
                                 "dtypes or requires_grad")
        if tuple(a.stride()) != tuple(b.stride()):
            raise AOTUnsupported("cond(): the branches lay their results out differently")
        if _aliases(a, operands) or _aliases(b, operands):
            raise AOTUnsupported("cond(): a branch returns an alias of an operand")
        r = where(p, a, b)
        if tuple(r.stride()) != tuple(a.stride()):
            r = _laid_out_as(r, a)
        results.append(r)
    return results[0] if single else tuple(results)


def _laid_out_as(r: Tensor, like: Tensor) -> Tensor:
    """`r` copied into `like`'s memory order (a dense permutation of its dims)."""
    from .functionalize import dense_order

    order = dense_order(like)
    if order is None:
        raise AOTUnsupported("cond(): a branch's result has a layout a select cannot give")
    back = [0] * len(order)
    for i, d in enumerate(order):
        back[d] = i
    out = r.permute(order).contiguous().permute(back)
    if tuple(out.stride()) != tuple(like.stride()):
        raise AOTUnsupported("cond(): a branch's result has a layout a select cannot give")
    return out
