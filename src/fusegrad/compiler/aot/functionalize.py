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


def scatter_into_base(emit, aten, op: OpDef, args: tuple, index, parent, base_node,
                      value_node):
    """The node of `parent`'s new value after its view `op(parent, *args)[index]` was given
    the value `value_node`. `emit(overload, args)` records one op; `aten` is the namespace."""
    name = op.name
    shape = list(parent.shape)
    if name in ("alias",):
        return value_node
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
