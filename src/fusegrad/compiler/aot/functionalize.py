"""Functionalization: the rules that turn in-place ops and writes through views into
out-of-place ops (PyTorch's functionalization pass, applied while tracing).

An in-place op becomes its out-of-place entry (`add_.Tensor` -> `add.Tensor`), cast back to
the written tensor's dtype where the out-of-place result would differ; an in-place op without
one (`copy_`, `fill_`, samplers) writes into a fresh `clone`, which leaves every earlier value
unchanged. A write into a view is carried back to its base through the view's inverse
(`slice` -> `slice_scatter`, `select` -> `select_scatter`, `transpose` -> `transpose`, ...):
every step from the view up to the base is replayed in reverse, so the base gets a new value
and the other views of it are regenerated from that value when next read.
"""

from __future__ import annotations

import numpy as np

from ...ops.registry import REGISTRY, OpDef


class AOTUnsupported(RuntimeError):
    """Something AOT tracing cannot express as a graph; the caller runs eagerly instead."""


def functional_variant(op: OpDef) -> OpDef | None:
    """The out-of-place entry of in-place op `op` (`add_.Tensor` -> `add.Tensor`), if any:
    the one its registration names (`pow_.Scalar` is `pow.Tensor_Scalar`; `pow.Scalar` is a
    number to a tensor's power), else by name."""
    if op.out_of_place is not None:
        return op.out_of_place
    base, dot, overload = op.name.partition(".")
    if not base.endswith("_"):
        return None
    found = REGISTRY.get(base[:-1] + dot + overload)
    if found is not None or not op.metadata_only:
        return found
    # In-place metadata ops name no overload where the view op has one (`transpose_` ->
    # `transpose.int`): take the packet's only entry.
    same = [o for k, o in REGISTRY.items() if k.partition(".")[0] == base[:-1]]
    return same[0] if len(same) == 1 else None


def _permutation_inverse(dims, ndim: int) -> list:
    dims = [d % ndim for d in dims]
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[d] = i
    return inverse


def dense_order(t) -> list | None:
    """The dims of tensor `t` from the outermost in memory to the innermost when its
    elements fill a contiguous range of its storage without overlap (any memory order:
    `t` permuted so is contiguous), else None."""
    shape, strides = [int(n) for n in t.shape], [int(s) for s in t.stride()]
    order = sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 0, d))
    span = 1
    for d in reversed(order):
        if shape[d] == 1:
            continue
        if strides[d] != span:
            return None
        span *= shape[d]
    return order


def _strided_positions(name: str, parent, args: tuple):
    """The elements of `parent` (as positions in its row-major flattening) that view
    `name(parent, *args)` (`unfold` or `as_strided`) shows, one per view element in the view's
    shape; None where some view element is not one of `parent`'s (as_strided reading storage
    beyond it)."""
    shape = tuple(int(n) for n in parent.shape)
    numel = int(np.prod(shape, dtype=np.int64))
    if name == "unfold":  # (positions follow the indices alone, whatever the layout)
        dim, size, step = (int(a) for a in args[:3])
        flat = np.arange(numel, dtype=np.int64).reshape(shape)
        if flat.ndim == 0:  # (a 0-d tensor's one window: its element, size times)
            return np.zeros((int(size),), np.int64)
        dim %= flat.ndim
        try:
            windows = np.lib.stride_tricks.sliding_window_view(flat, int(size), axis=dim)
        except ValueError:  # (a window NumPy does not make: left to eager)
            return None
        return np.take(windows, np.arange(0, windows.shape[dim], int(step)), axis=dim)
    order = dense_order(parent)
    if order is None or numel == 0:
        return None
    size, stride = [int(n) for n in args[0]], [int(s) for s in args[1]]
    start = int(parent.storage_offset())
    offset = start if len(args) < 3 or args[2] is None else int(args[2])
    # Storage position (from `parent`'s first element) of each of `parent`'s elements, then
    # of each view element; the first inverted to find which element sits where.
    where = np.zeros((), np.int64)
    for n, st in zip(shape, parent.stride()):
        where = where[..., None] + np.arange(n, dtype=np.int64) * int(st)
    inverse = np.full(numel, -1, np.int64)
    inverse[where.reshape(-1)] = np.arange(numel, dtype=np.int64)
    pos = np.full((), offset - start, np.int64)
    for n, st in zip(size, stride):
        pos = pos[..., None] + np.arange(n, dtype=np.int64) * st
    if pos.size and (pos.min() < 0 or pos.max() >= numel):
        return None
    return inverse[pos]


def _scatter_strided(emit, aten, constant, name: str, args: tuple, parent, base_node,
                     value_node):
    """`parent`'s new value after its view `name(parent, *args)` (unfold, as_strided) was
    given `value_node`: the view's elements written into the flattened value through
    `index_put` with their positions (a graph constant). A view whose elements share
    memory is refused: its write's outcome depends on the kernel's order."""
    positions = _strided_positions(name, parent, args) if constant is not None else None
    if positions is None:
        raise AOTUnsupported(f"an in-place write through a view made by {name} cannot be "
                             "functionalized")
    flat = positions.reshape(-1)
    if np.unique(flat).size != flat.size:
        raise AOTUnsupported(f"an in-place write through a view made by {name} whose "
                             "elements share memory")
    from ...ops.shape import contiguous_format

    def flattened(node):
        node = emit(aten.clone.default, (node, contiguous_format))
        return emit(aten.view.default, (node, [-1]))

    new = emit(aten.index_put.default, (flattened(base_node), [constant(flat)],
                                        flattened(value_node), False))
    return emit(aten.view.default, (new, list(parent.shape)))


def scatter_into_base(emit, aten, op: OpDef, args: tuple, index, parent, base_node,
                      value_node, constant=None):
    """The node of `parent`'s new value after its view `op(parent, *args)[index]` was given
    the value `value_node`. `emit(overload, args)` records one op; `aten` is the namespace;
    `constant(array)`, where given, makes a graph constant (the positions a strided view
    writes)."""
    name = op.name
    shape = list(parent.shape)
    if name in ("alias",):
        return value_node
    if name in ("unfold", "as_strided"):
        return _scatter_strided(emit, aten, constant, name, args, parent, base_node,
                                value_node)
    if name in ("view", "squeeze", "squeeze.dim", "squeeze.dims", "unsqueeze"):
        # The new value may have any layout: make it contiguous before viewing it back.
        return emit(aten.view.default, (emit(aten.clone.default, (value_node,)), shape))
    if name == "permute":
        return emit(aten.permute.default,
                    (value_node, _permutation_inverse(args[0], len(shape))))
    if name == "transpose.int":
        return emit(aten.transpose.int, (value_node,) + tuple(args[:2]))
    if name == "t":
        return emit(aten.t.default, (value_node,))
    if name == "slice.Tensor":
        return emit(aten.slice_scatter.default, (base_node, value_node) + tuple(args))
    if name == "select.int":
        return emit(aten.select_scatter.default, (base_node, value_node) + tuple(args))
    if name == "diagonal":
        return emit(aten.diagonal_scatter.default, (base_node, value_node) + tuple(args))
    if name == "unbind.int":
        dim = args[0] if args else 0
        return emit(aten.select_scatter.default, (base_node, value_node, dim, index))
    if name in ("split.Tensor", "split_with_sizes"):
        dim = args[1] if len(args) > 1 else 0
        n = shape[dim]
        if name == "split.Tensor":
            start = index * args[0]
            end = min(start + args[0], n)
        else:
            start = sum(args[0][:index])
            end = start + args[0][index]
        return emit(aten.slice_scatter.default, (base_node, value_node, dim, start, end, 1))
    raise AOTUnsupported(f"an in-place write through a view made by {name} cannot be "
                         "functionalized")
