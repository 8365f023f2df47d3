"""Collation: turning a list of samples into a batch (`default_collate`, `collate` and its
registry `default_collate_fn_map`) and converting NumPy data to tensors (`default_convert`).

`collate` picks a function for the batch by the type of its first element: an exact match in
the registry first, then the first registry key the element is an instance of (in insertion
order, so a user's entries added with `update` come after the built-in ones unless they
match exactly), then the containers: mappings, namedtuples and other sequences are collated
field by field. The registry maps types to functions `fn(batch, *, collate_fn_map)`.

Tensors are joined with `stack`, so dtypes promote and autograd records `StackBackward0` as
PyTorch's does. A batch of plain tensors of one dtype that need no graph (the DataLoader's
usual case) is stacked straight in NumPy, which gives the same tensor for a fraction of the
dispatch cost.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable

import numpy as np

from .... import _thread_state
from ...._tensor import _FROM_NP, Tensor, make_plain
from ...._torch_function import _fast

__all__ = ["collate", "collate_float_fn", "collate_int_fn", "collate_numpy_array_fn",
           "collate_numpy_scalar_fn", "collate_str_fn", "collate_tensor_fn",
           "default_collate", "default_collate_err_msg_format", "default_collate_fn_map",
           "default_convert", "np_str_obj_array_pattern"]

# NumPy dtype strings of bytes, unicode and object arrays, which have no tensor form.
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found {}")


def _torch():
    """The package namespace (imported late: this module loads while it is being built)."""
    import fusegrad

    return fusegrad


def default_convert(data):
    """Convert NumPy arrays and scalars in `data` to tensors, recursing through mappings,
    namedtuples and sequences (a plain tuple becomes a list); anything else is returned as
    it is."""
    if isinstance(data, Tensor):
        return data
    cls = type(data)
    # NumPy's own types only (an ndarray subclass from another module is left alone), and not
    # its string scalars, which have no tensor form.
    if cls.__module__ == "numpy" and cls.__name__ not in ("str_", "string_"):
        if cls.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return _torch().as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        return _rebuild_mapping(data, converted)
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # a namedtuple keeps its type
            return cls(*(default_convert(d) for d in data))
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like, items: dict):
    """`items` in a mapping of `like`'s type where that type allows it, else a dict.

    A mutable mapping is copied and updated, which keeps state its constructor would not
    take (a defaultdict's factory); another mapping type is called with a dict."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            out = copy.copy(like)
            out.update(items)
            return out
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items: list):
    """`items` in a sequence of `like`'s type where that type allows it, else a list (the
    same rules as `_rebuild_mapping`: a mutable sequence is copied and filled in)."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            out = copy.copy(like)
            for i, item in enumerate(items):
                out[i] = item
            return out
        return type(like)(items)
    except TypeError:
        return items


def collate(batch, *, collate_fn_map: dict[type | tuple[type, ...], Callable] | None = None):
    """Collate `batch` (a list of samples of one structure) using the element functions in
    `collate_fn_map`, recursing through mappings, namedtuples and sequences; raises TypeError
    for an element type nothing handles."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        fn = collate_fn_map.get(elem_type)
        if fn is not None:
            return fn(batch, collate_fn_map=collate_fn_map)
        for key, fn in collate_fn_map.items():
            if isinstance(elem, key):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                  for key in elem}
        return _rebuild_mapping(elem, fields)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map)
                           for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        # Each field's samples go on as the tuple zip makes, so a field of strings collates
        # to a tuple of them, as in PyTorch.
        fields = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):  # plain tuples collate to lists
            return fields
        return _rebuild_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def _unobserved() -> bool:
    """Whether no TorchFunctionMode or dispatch mode (a profiler, FakeTensorMode) is active,
    so that building a tensor directly cannot differ from calling the public function."""
    return not _thread_state.active.modes and Tensor in _fast


def _stack_plain(batch):
    """`batch` stacked along a new dim 0 without dispatch when that cannot differ from
    `stack`: exact Tensors of one dtype, none requiring grad, and no mode that would see the
    call; None otherwise (and for unequal shapes, whose message `stack` owns)."""
    if not _unobserved():
        return None
    elem = batch[0]
    dtype = elem._dtype
    for b in batch:
        if b.__class__ is not Tensor or b._rg or b._dtype is not dtype:
            return None
    try:
        data = np.stack([b._data for b in batch])
    except ValueError:
        return None
    if not data.flags.c_contiguous:  # NumPy kept the samples' layout; `stack` would not
        return None
    return make_plain(data, dtype)


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Tensors stacked along a new first dim (dtypes promoted, autograd recorded)."""
    elem = batch[0]
    # A plain Tensor is dense and not nested; the attributes are read anyway where a mode
    # may watch them being read.
    if elem.__class__ is not Tensor or not _unobserved():
        if getattr(elem, "is_nested", False):
            raise RuntimeError(
                "Batches of nested tensors are not currently supported by the default "
                "collate_fn; please provide a custom collate_fn to handle them appropriately.")
        if getattr(elem, "layout", None) in _sparse_layouts():
            raise RuntimeError(
                "Batches of sparse tensors are not currently supported by the default "
                "collate_fn; please provide a custom collate_fn to handle them appropriately.")
    out = _stack_plain(batch)
    if out is not None:
        return out
    return _torch().stack(batch, 0)


_SPARSE_LAYOUTS: tuple | None = None


def _sparse_layouts() -> tuple:
    """The sparse layouts this build defines (those it lacks cannot occur)."""
    global _SPARSE_LAYOUTS
    if _SPARSE_LAYOUTS is None:
        torch = _torch()
        names = ("sparse_coo", "sparse_csr", "sparse_bsr", "sparse_csc", "sparse_bsc")
        _SPARSE_LAYOUTS = tuple(getattr(torch, n) for n in names if hasattr(torch, n))
    return _SPARSE_LAYOUTS


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    """NumPy arrays as tensors, stacked; string and object arrays raise TypeError."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    if collate_fn_map is not None and collate_fn_map.get(Tensor) is collate_tensor_fn:
        # The tensors would be stacked by collate_tensor_fn: stack the arrays themselves when
        # that is sure to give the same tensor (skipping a tensor per sample).
        out = _stack_arrays(batch)
        if out is not None:
            return out
    as_tensor = _torch().as_tensor
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def _stack_arrays(batch):
    """Plain NumPy arrays of one native numeric dtype stacked into a tensor, as
    `as_tensor` then `_stack_plain` would make it; None where that path may differ."""
    if not _unobserved():
        return None
    dt = batch[0].dtype
    if not dt.isnative or dt.kind not in "biufc":
        return None
    dtype = _FROM_NP.get(dt)
    if dtype is None:
        return None
    for b in batch:
        if b.__class__ is not np.ndarray or b.dtype != dt:
            return None
    try:
        data = np.stack(batch)
    except ValueError:  # unequal shapes: `stack` owns the message
        return None
    if not data.flags.c_contiguous:  # NumPy kept the samples' layout; `stack` would not
        return None
    return make_plain(data, dtype)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    """NumPy scalars as one tensor (their dtypes promoted as `as_tensor` does)."""
    return _torch().as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    """Python floats (and whatever numbers follow them) as a float64 tensor."""
    if _unobserved():
        for b in batch:
            if b.__class__ is not float:
                break
        else:  # all exact floats: nothing to infer
            return make_plain(np.array(batch, dtype=np.float64))
    torch = _torch()
    return torch.tensor(batch, dtype=torch.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    """Python ints and bools as a tensor whose dtype is inferred from all of them (bool,
    int64, or the default float dtype when a float follows)."""
    # All ints, or all bools, need no inference: NumPy builds the same array directly.
    cls = batch[0].__class__
    if (cls is int or cls is bool) and _unobserved():
        for b in batch:
            if b.__class__ is not cls:
                break
        else:
            try:
                return make_plain(np.array(batch, dtype=np.int64 if cls is int else np.bool_))
            except OverflowError:  # beyond int64: `tensor` raises PyTorch's error
                pass
    return _torch().tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    """Strings and bytes stay as the list they came in."""
    return batch


default_collate_fn_map: dict[type | tuple[type, ...], Callable] = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Stack a list of samples into a batch: tensors, NumPy arrays and numbers become one
    tensor with a new first dim; strings stay a list; mappings, namedtuples and sequences are
    collated field by field. Extend it by adding entries to `default_collate_fn_map`."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
