"""`func.vmap(f)(...)` inside a captured frame.

fusegrad's vmap runs `f` once per example and stacks the results (`func/_vmap.py`). Capture
does the same in the graph: each mapped argument's example is a `select` of it, `f` is
inlined on each in turn, and the results are stacked along `out_dims`, so the call is part
of one graph (Dynamo records one higher-order op) with eager's values, gradients and
result layout. Only the plain case is taken, where eager's result is that stack:

- `in_dims` an int or a tuple (one int or None per positional argument); a mapped argument
  is a tensor, or a dict of tensors (a `functional_call`'s parameters), mapped along the
  same dim; keyword arguments are passed unmapped; at most `_MAX_EXAMPLES` examples;
- `f` has no effect outside itself (no attribute store, append, in-place write, random draw
  or grad-mode switch: eager's vmap refuses or treats those specially);
- `out_dims` an int, and every result a tensor (or a tuple of tensors) that each example
  computed from its mapped inputs, laid out contiguously, with the same shape and dtype in
  every example (eager expands a result that does not depend on them, or returns a view of
  the input where each result is one).

Anything else is a graph break at the call, which then runs for real (eager's vmap, with
its checks and errors)."""

from __future__ import annotations

import types

from .variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)

_MAX_EXAMPLES = 64  # (each example is inlined: the graph grows with the batch)

_WRAPPER_CODE: list = []


def is_vmap_wrapper(f) -> bool:
    """Whether `f` is what `func.vmap(fn, ...)` returns."""
    if not isinstance(f, types.FunctionType):
        return False
    if not _WRAPPER_CODE:
        from ...func._vmap import vmap

        _WRAPPER_CODE.append(vmap(len).__code__)
    return f.__code__ is _WRAPPER_CODE[0]


def _cells(f) -> dict:
    return {name: cell.cell_contents for name, cell in zip(f.__code__.co_freevars,
                                                             f.__closure__ or ())}


def call_vmap(tr, wrapper, args: list, kwargs: dict) -> Variable:
    """`wrapper(*args, **kwargs)` for a vmap wrapper, unrolled into the graph (see the
    module docstring), or `Unsupported`."""
    from .calls import effect_since

    cells = _cells(wrapper)
    func, in_dims, out_dims = cells.get("func"), cells.get("in_dims"), cells.get("out_dims")
    if func is None or not callable(func):
        raise Unsupported("vmap() of something other than a function")
    dims = _in_dims(in_dims, len(args))
    mapped = [(i, d) for i, d in enumerate(dims) if d is not None]
    if not mapped:
        raise Unsupported("vmap() with no mapped argument")
    size = None
    for i, d in mapped:
        for t in _mapped_tensors(args[i]):
            n = t.example.dim()
            if not -n <= d < n:
                raise Unsupported("vmap() of a dimension the argument does not have")
            s = t.example.shape[d]
            if type(s) is not int or size not in (None, s):
                raise Unsupported("vmap() over inputs of different or symbolic sizes")
            size = s
    if not size or size > _MAX_EXAMPLES:
        raise Unsupported(f"vmap() over {size} examples (capture unrolls up to "
                          f"{_MAX_EXAMPLES})")
    if isinstance(out_dims, bool) or not isinstance(out_dims, int):
        raise Unsupported("vmap() with out_dims other than an int")
    builder = tr.builder
    mark, n_stores = len(builder.created), len(builder.stores)
    results = []
    for k in range(size):
        example = list(args)
        for i, d in mapped:
            example[i] = _select(builder, args[i], d, k)
        results.append(_leaves(tr.call(ConstantVariable(func), example, dict(kwargs))))
    if effect_since(builder, mark, n_stores) is not None or any(
            _impure(n) for n in builder.created[mark:]):
        raise Unsupported("vmap() of a function with effects outside itself")
    single, first = results[0]
    if any(s != single or len(r) != len(first) for s, r in results):
        raise Unsupported("vmap() of a function whose results differ in structure")
    selects = {id(n) for n in builder.created[mark:] if n.meta.get("vmap_example")}
    out = []
    for j in range(len(first)):
        column = [r[j] for _, r in results]
        a = column[0].example
        for v in column:
            e = v.example
            if tuple(e.shape) != tuple(a.shape) or e.dtype != a.dtype or \
                    not e.is_contiguous() or getattr(e, "_base", None) is not None or \
                    not _reaches(v.node, selects, mark, builder):
                raise Unsupported("vmap() of a function whose results are not a plain stack")
        if not -a.dim() - 1 <= out_dims <= a.dim():
            raise Unsupported("vmap() with out_dims the results do not have")
        stacked = builder.call("call_function", _stack(),
                               (ListVariable(column), ConstantVariable(0)), {})
        if out_dims not in (0, -a.dim() - 1):
            stacked = builder.call("call_method", "movedim", (
                stacked, ConstantVariable(0), ConstantVariable(out_dims)), {})
        out.append(stacked)
    return out[0] if single else TupleVariable(out)


def _stack():
    from ... import stack

    return stack


def _in_dims(in_dims, n: int) -> list:
    if isinstance(in_dims, int) and not isinstance(in_dims, bool):
        return [in_dims] * n
    if isinstance(in_dims, tuple) and len(in_dims) == n and all(
            d is None or isinstance(d, int) and not isinstance(d, bool) for d in in_dims):
        return list(in_dims)
    raise Unsupported("vmap() with in_dims other than an int or one per argument")


def _mapped_tensors(v: Variable) -> list:
    if isinstance(v, TensorVariable):
        return [v]
    if type(v) is DictVariable and all(isinstance(t, TensorVariable)
                                       for t in v.items.values()):
        return list(v.items.values())
    raise Unsupported("vmap() of an argument other than a tensor or a dict of tensors "
                      f"({type(v).__name__})")


def _select(builder, v: Variable, d: int, k: int) -> Variable:
    if isinstance(v, TensorVariable):
        out = builder.call("call_method", "select", (v, ConstantVariable(d),
                                                       ConstantVariable(k)), {})
        out.node.meta["vmap_example"] = True
        return out
    return DictVariable({key: _select(builder, t, d, k) for key, t in v.items.items()})


def _leaves(v: Variable) -> tuple:
    """(single, [tensor variables]) of an example's result."""
    if isinstance(v, TensorVariable):
        return True, [v]
    if type(v) is TupleVariable and v.cls is None and v.items and all(
            isinstance(i, TensorVariable) for i in v.items):
        return False, list(v.items)
    raise Unsupported("vmap() of a function returning something other than tensors")


def _impure(node) -> bool:
    """A node eager's vmap would treat apart: a write, a random draw, another effect."""
    from .segments import kept_call

    return kept_call(node)


def _reaches(node, selects: set, mark: int, builder) -> bool:
    """Whether `node` was computed in the unrolled region from an example's `select`, and
    is not that select (or a view of it) itself: eager stacks such a result."""
    made = {id(n) for n in builder.created[mark:]}
    if id(node) in selects or id(node) not in made:
        return False
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in selects:
            return True
        todo += [a for a in n.all_input_nodes if id(a) in made]
    return False
