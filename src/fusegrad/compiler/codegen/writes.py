"""In-place ops in compiled graphs: the op writes the memory of the tensor it is given.

A graph given to `compile_graph` directly may hold in-place ops (`add_`, `copy_`,
`index_put_` ...) on its inputs or on tensors it made; AOT autograd functionalises its
graphs first, so `fusegrad.compile` meets them only where the written tensor is fresh
(`GraphLowering._fresh_destination`). Eager semantics, which the compiled graph keeps:

- the write changes the memory of the tensor and of every view of it: the op runs eager's
  in-place path between kernels (`Extern.writes`), on the buffer of the tensor the written
  one is a view of (its *root*: the graph input, or the non-view node that made it), or on
  a NumPy view of that buffer;
- a value the graph computed before the write (not a view of the root) keeps the old
  elements: a lazy value read after the write is computed into a buffer of its own before
  it; a view of the root made before the write and read after reads the memory again (its
  IR value is renewed, placed after the write);
- the op's result is the written tensor.

What cannot be written exactly is refused with `NotImplementedError` (the inductor backend
then runs the graph as FX code): ops that change their input's geometry (`squeeze_`,
`t_`), lists of tensors, keyword arguments a kernel cannot take by position, a write
through a view the graph has copied, random draws into an intermediate buffer whose
layout is not eager's.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

from .ir import Buffer, Extern, IVar, Load, Pointwise, ScalarInput, View, loads


def _refuse(op, why: str):
    raise NotImplementedError(f"codegen: {op.name} cannot be compiled here: {why}")


def alias_root(g, node) -> Any:
    """The node whose memory `node`'s tensor is: itself, or the root of the tensor a view op
    (or an in-place op, which returns its input) was given."""
    from .lower import resolve_op

    roots = g.__dict__.setdefault("_roots", {})
    seen = []
    while node not in roots:
        seen.append(node)
        nxt = None
        if getattr(node, "op", None) == "call_function" and node.args:
            src = node.args[0]
            if node.target is operator.getitem:
                # An element of a view op's results (split, unbind) is a view of its input.
                if alias_root(g, src) is not src:
                    nxt = src
            else:
                op = resolve_op(node.target)
                if op is not None and (op.view or op.inplace or _reshapes(op)) and \
                        hasattr(src, "op"):
                    nxt = src
        if nxt is None:
            roots[node] = node
            break
        node = nxt
    root = roots[node]
    for s in seen:
        roots[s] = root
    return root


def _reshapes(op) -> bool:
    """Whether `op` is a spelling of `reshape` (ATen's `_unsafe_view`, which autograd
    treats as a new tensor): its eager kernel returns a view of its input's memory."""
    return getattr(op, "public", None) == "reshape"


def _positional(op, args: tuple, kwargs: dict) -> tuple:
    """`args` with `kwargs` placed by position (eager's in-place path takes positions)."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(op.kernel).bind(*args, **kwargs)
    except (TypeError, ValueError):
        _refuse(op, f"keyword arguments {sorted(kwargs)} its kernel does not take")
    if bound.kwargs:
        _refuse(op, f"keyword-only arguments {sorted(bound.kwargs)}")
    return tuple(bound.args)


def _reads(value: Pointwise, buf: Buffer) -> bool:
    """Whether lazy `value` loads from `buf` (through the values it inlines)."""
    idx = tuple(IVar(f"x{i}") for i in range(len(value.shape)))
    return any(ld.buffer is buf for ld in loads(value.fn(idx)))


def _renewed(value: Pointwise, n) -> Pointwise:
    """A lazy view read after the write at node `n`: the same elements, computed after it."""
    return Pointwise(tuple(value.shape), value.dtype, value.fn, [n])


def _written_view(op, d, root_value, base: Buffer) -> View | None:
    """The view of `base` that `d` (the op's first argument) is; None for `base` whole."""
    if d is base or d is root_value:
        return None
    if not isinstance(d, Pointwise):
        _refuse(op, "it writes a tensor the graph holds as a copy of the one it views")
    idx = tuple(IVar(f"x{i}") for i in range(len(d.shape)))
    e = d.fn(idx)
    if not isinstance(e, Load) or e.buffer is not base or e.dtype is not d.dtype:
        _refuse(op, "it writes a view the graph has copied (or converted)")
    view = View(base, tuple(d.shape), d.dtype, tuple(e.index))
    if view.geometry() is None:
        _refuse(op, "it writes a view that is no strided view of its base's memory")
    return view


def lower_write(g, n, op, args: tuple, kwargs: dict) -> Any:
    """Lower in-place node `n` (registry op `op` on lowered `args`) as a write of its first
    argument's memory (see the module's docstring); returns the node's value."""
    if op.metadata_only:
        _refuse(op, "it changes its input's shape or strides in place (functionalize the "
                    "graph first, as fusegrad.compile does)")
    dst = n.args[0] if n.args else None
    d = args[0] if args else None
    if not hasattr(dst, "op") or not isinstance(d, (Buffer, Pointwise)) or \
            isinstance(d, ScalarInput):
        _refuse(op, "it writes no single tensor of the graph")
    args = _positional(op, tuple(args), dict(kwargs))
    root = alias_root(g, dst)
    value = g.env.get(root)
    if isinstance(value, Pointwise):
        base = value.buffer or g.realize(value, f"written in place by {op.name}")
    elif isinstance(value, Buffer) and not isinstance(value, ScalarInput):
        base = value
    else:
        _refuse(op, "it writes a tensor the graph does not hold in memory of its own")
    if op.random and base not in g.inputs:
        # (a random kernel draws in its tensor's memory order: an intermediate buffer's
        # row-major layout need not be eager's)
        _refuse(op, "it draws random numbers into an intermediate tensor")
    view = _written_view(op, d, value, base)
    _keep_old_values(g, n, op, root, base)
    nodes = _positional(op, tuple(n.args), dict(n.kwargs))
    rest = [_argument(g, op, a, node) for a, node in zip(args[1:], nodes[1:])]
    ext = Extern(op, (view if view is not None else base, *rest), {}, [])
    ext.writes = base
    ext.origins.append(n)
    g.computations.append(ext)
    g._written.add(base)
    if view is None:
        return value
    return _renewed(d, n)


def _argument(g, op, a, node) -> Any:
    """An operand of the write as the wrapper passes it: a view of the root's memory stays
    a NumPy view (eager's overlap checks see it); any other computed value gets a buffer."""
    if isinstance(a, (list, tuple)):
        nodes = node if isinstance(node, (list, tuple)) else [None] * len(a)
        return type(a)(_argument(g, op, x, m) for x, m in zip(a, nodes))
    if not isinstance(a, Pointwise):
        return a
    if a.buffer is None and hasattr(node, "op") and alias_root(g, node) is not node:
        view = g.view_of(a)
        if view is not None and view.geometry() is not None:
            return view
    return g.realize(a, f"input of the in-place extern {op.name}")


def _keep_old_values(g, n, op, root, base: Buffer) -> None:
    """Before the write at `n`: realise every lazy value made earlier that reads `base` and
    is read after it (it keeps the old elements); renew every lazy view of `root` (it reads
    the memory where it is read)."""
    order = g.__dict__.get("_order")
    if order is None:
        order = g._order = {m: i for i, m in enumerate(g.gm.graph.nodes)}
    at = order[n]
    outputs = {a for a in g.gm.graph.nodes if a.op == "output" for a in _flat(a.args)}

    def read_after(m) -> bool:
        return m in outputs or any(order.get(u, -1) > at for u in m.users)

    for m in list(g.env):
        if m is n or not hasattr(m, "op"):
            continue
        is_view = alias_root(g, m) is root

        def fix(v, m=m, is_view=is_view):
            if isinstance(v, (list, tuple)):
                return type(v)(fix(x) for x in v)
            if v is base or isinstance(v, Pointwise) and v.buffer is base:
                return v
            if not isinstance(v, Pointwise):
                if is_view and isinstance(v, Buffer) and read_after(m):
                    # (a view op run as an extern: its result is a copy, not the memory)
                    _refuse(op, f"the view {m.name} of the written tensor is a copy the "
                                "graph made, read after the write")
                return v
            if v.buffer is not None:  # (computed where it is made)
                if is_view and read_after(m):
                    _refuse(op, f"a copy the graph made of a view of the written tensor "
                                f"({m.name}) is read after the write")
                return v
            if not _reads(v, base):
                if is_view and read_after(m):
                    _refuse(op, f"the view {m.name} of the written tensor is read after "
                                "the write through a copy")
                return v
            if is_view:
                return _renewed(v, n)
            if read_after(m):
                g.realize(v, f"read after {op.name} writes its input in place")
            return v

        g.env[m] = fix(g.env[m])


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        elif isinstance(a, dict):
            yield from _flat(list(a.values()))
        else:
            yield a
