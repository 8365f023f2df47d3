"""Indexing: `Tensor.__getitem__` / `__setitem__` (basic indices as views, index tensors
through `index.Tensor` / `index_put_`) and the indexing functions (index_select, gather,
scatter, masked_fill, nonzero, one_hot, ...).
"""

from __future__ import annotations

import builtins
import numbers
import warnings

import numpy as np

from .. import _dtype
from .._creation import records_factory_calls
from .._creation import tensor as _creation_tensor
from .._dispatch import call
from .._scalar_conversion import checked_scalar
from .._shapes import broadcast_shapes as _broadcast_shapes
from .._shapes import wrap_dim as _wrap_dim
from .._symbolic import SymInt
from .._tensor import Tensor
from .._thread_state import active as _active
from .._torch_function import warn_once_at, warning_stacklevel
from ..ops import indexing as X
from ..ops import inplace as I  # noqa: E741
from ..ops import scatter as SC
from ..ops import shape as S
from ..ops._view_calls import select_first
from ..ops.views import _expand_shape
from . import _args

# ---------------------------------------------------------------- indexing


def _normalize_index(index) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for i in index:
        if isinstance(i, Tensor):
            if _selects(i):
                i = int(i.item())
            else:
                raise IndexError(
                    "indexing with tensors (advanced indexing) is not supported yet")
        out.append(i)
    return tuple(out)


def _selects(i: Tensor) -> bool:
    """Whether a tensor index selects, as an int does: a 0-d integer tensor other than uint8
    (a 0-d byte tensor is a mask, as a 0-d bool one is)."""
    return i.ndim == 0 and i.dtype.category == _dtype.INT and i.dtype is not _dtype.uint8


def _is_advanced(i) -> bool:
    if isinstance(i, Tensor):
        return not _selects(i)
    if isinstance(i, np.ndarray):
        # (A 0-d one too unless it is an integer: PyTorch converts it as a list, to a bool
        # tensor or else to a long one, which then selects.)
        return i.ndim > 0 or i.dtype.kind not in "iu"
    # A Python bool indexes as a 0-d bool tensor does (a new dim of size 1 or 0).
    return isinstance(i, (list, range, builtins.bool)) or (
        hasattr(i, "__array__") and hasattr(i, "dtype") and getattr(i, "ndim", 0) > 0)


def _is_advanced_item(i) -> bool:
    """`_is_advanced` for an item of an index tuple, where a tuple is a sequence of positions
    as a list is (`x[(0, 2),]`)."""
    return i.__class__ is tuple or _is_advanced(i)


def _sequence_index(i) -> Tensor:
    """A list or array index as PyTorch converts one: a bool (or uint8) one stays a mask, any
    other becomes a long tensor (floats truncated)."""
    from .._creation import literal as _tensor

    if isinstance(i, np.ndarray) and i.dtype.kind not in "b" and i.dtype != np.uint8:
        i = i.astype(np.int64)  # (any integer or float width, as PyTorch's `to(kLong)`)
    t = _tensor(i)
    if t.dtype not in (_dtype.bool_, _dtype.uint8, _dtype.int64):
        t = t.to(_dtype.int64)
    return t


def _expand_ellipsis(items: list, fill: int) -> tuple[list, list]:
    """`items` with its ellipsis (if any) replaced by `fill` full slices, and each item's
    position in the index as written, which PyTorch's out-of-bounds message names as the
    dimension (`x[0, 9]`: dimension 1, though the 9 selects from dimension 0 of `x[0]`)."""
    if Ellipsis not in items:
        return items, list(range(len(items)))
    k = items.index(Ellipsis)
    return (items[:k] + [slice(None)] * fill + items[k + 1:],
            list(range(k)) + [k] * fill + list(range(k + 1, len(items))))


def _advanced(input, index):
    """Split an index with tensors into basic indexing (views, as PyTorch applies first) and
    the list of index tensors for `index.Tensor` / `index_put` on that view."""
    from .._creation import literal as _tensor

    items = []
    for i in index:
        if isinstance(i, (list, tuple, range)) and not len(i):  # no positions: an empty index
            i = Tensor._make(np.zeros(0, np.int64))
        elif isinstance(i, range):  # a sequence of positions, as a list is
            i = _tensor(list(i))
        elif isinstance(i, builtins.bool):
            i = _tensor(i)
        elif isinstance(i, Tensor) and _selects(i):
            i = int(i.item())  # a 0-d integer tensor selects, as an int does (PyTorch's rule)
        elif isinstance(i, np.generic):
            pass  # a NumPy scalar: an integer selects (`_int_index`), any other is refused
        elif isinstance(i, (list, tuple)) or (
                not isinstance(i, Tensor) and hasattr(i, "__array__")):
            i = _sequence_index(i)
            if i.ndim == 0 and i.dtype is _dtype.int64:
                i = int(i.item())  # (a 0-d array: a long one selects as a 0-d tensor does)
        items.append(i)
    consumed = builtins.sum(
        (i.ndim if isinstance(i, Tensor) and i.dtype in (_dtype.bool_, _dtype.uint8) else 1)
        for i in items if i is not None and i is not Ellipsis)
    if items.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    items, where = _expand_ellipsis(items, input.ndim - consumed)
    result = input
    dim = 0
    indices = []
    for i, position in zip(items, where):
        if i is None:
            result = call(S.unsqueeze, result, dim)
            indices.append(None)
            dim += 1
        elif isinstance(i, slice):
            step = 1 if i.step is None else i.step
            size = result.shape[dim]
            if not ((i.start in (None, 0)) and (i.stop is None or i.stop >= size) and step == 1):
                result = call(S.slice_, result, dim, _index_int(i.start), _index_int(i.stop),
                              int(step))
            indices.append(None)
            dim += 1
        elif isinstance(i, Tensor):
            if i.ndim == 0 and i.dtype in (_dtype.bool_, _dtype.uint8) and \
                    i.__class__ is Tensor:
                # A 0-d bool is a new dim indexed by [0] (True) or [] (False), as PyTorch
                # reads it: an index tensor, not a mask (`x[True] = v` is no masked fill).
                result = call(S.unsqueeze, result, dim)
                i = Tensor._make(np.zeros(1 if i.item() else 0, np.int64), _dtype.int64)
            indices.append(i)
            dim += i.ndim if i.dtype in (_dtype.bool_, _dtype.uint8) else 1
        else:
            i = _int_index(i)
            size = result.shape[dim]
            if not -size <= i < size:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {position} with size {size}")
            result = call(S.select, result, dim, i)
    while indices and indices[-1] is None:
        indices.pop()
    return result, indices


_SEQUENCE_INDEX = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be "
    "changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will "
    "be interpreted as tensor index, x[torch.tensor(seq)], which will result either in an "
    "error or a different result")


def _sequence_as_tuple(index) -> tuple | list:
    """A list index as PyTorch reads it: a short list holding a sequence, a tensor, a slice,
    None or Ellipsis stands for a tuple of indices (`x[[[0, 2], [1, 3]]]` is
    `x[[0, 2], [1, 3]]`), with PyTorch's deprecation warning; any other list is itself."""
    if len(index) < 32 and builtins.any(
            isinstance(i, (list, tuple, slice, Tensor, np.ndarray)) or i is None or
            i is Ellipsis for i in index):
        warnings.warn(_SEQUENCE_INDEX, UserWarning, stacklevel=warning_stacklevel(3))
        return tuple(index)
    return index


def getitem(input, index):
    """Indexing: basic indices give a view; index tensors and lists use `index.Tensor`."""
    if index.__class__ is list:
        index = _sequence_as_tuple(index)
    if index.__class__ is int:  # the common `x[i]`
        # A plain tensor's array shape: `input.shape` would build a Size for one number.
        shape = input._data.shape if input.__class__ is Tensor else input.shape
        if shape:
            size = shape[0]
            if not -size <= index < size:
                raise IndexError(
                    f"index {index} is out of bounds for dimension 0 with size {size}")
            return call(S.select, input, 0, index)
    elif index.__class__ is tuple and input.__class__ is Tensor:
        # `x[i, j]` with ints within their dims: a select of dim 0 per int, as the general
        # walk below makes them, each in one frame.
        data = input._data
        shape = data.shape
        if len(index) <= len(shape):
            k = 0
            for i in index:
                if i.__class__ is not int or not -shape[k] <= i < shape[k]:
                    break
                k += 1
            else:
                result = input
                for i in index:
                    result = select_first(result, i, data, shape)
                    data = result._data
                    shape = data.shape
                return result
    elif index.__class__ is slice:  # `x[i:j]`, `x[::k]`: a slice of dim 0, even a full one
        start, stop, step = index.start, index.stop, index.step
        if (start is None or start.__class__ is int) and (
                stop is None or stop.__class__ is int) and (
                step is None or step.__class__ is int) and input.ndim:
            return call(S.slice_, input, 0, start, stop, 1 if step is None else step)
    if isinstance(index, tuple) and builtins.any(_is_advanced_item(i) for i in index) or \
            _is_advanced(index):
        result, indices = _advanced(input, index if isinstance(index, tuple) else (index,))
        if not indices:  # (only 0-d arrays, which select: a view, as PyTorch's)
            return call(S.alias, input) if result is input else result
        return call(X.index, result, indices)
    single_slice = isinstance(index, slice)
    if single_slice and input.ndim == 0:
        if index.step is not None:  # (the step's errors come first)
            if _index_int(index.step) == 0:
                raise ValueError("slice step cannot be zero")
            if _index_int(index.step) < 0:
                raise ValueError("step must be greater than zero")
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if input.ndim == 0 and isinstance(index, numbers.Integral) and not isinstance(index, bool):
        if index != 0:  # PyTorch tests the bounds (a 0-d tensor's dim 0 has size 0) first
            raise IndexError(f"index {int(index)} is out of bounds for dimension 0 with size 0")
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    index = _normalize_index(index)
    n_ell = index.count(Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    index, where = _expand_ellipsis(list(index), input.ndim - consumed)
    result = input
    dim = 0
    for i, position in zip(index, where):
        if i is None:
            result = call(S.unsqueeze, result, dim)
            dim += 1
        elif isinstance(i, slice):
            start, stop, step = i.start, i.stop, 1 if i.step is None else i.step
            size = result.shape[dim]
            full = (start in (None, 0)) and (stop is None or stop >= size) and step == 1
            if not full or single_slice:
                start, stop = _index_int(start), _index_int(stop)
                result = call(S.slice_, result, dim, start, stop, int(step))
            dim += 1
        else:
            i = _int_index(i)
            size = result.shape[dim]
            if not -size <= i < size:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {position} with size {size}")
            result = call(S.select, result, dim, i)
    if result is input:
        result = call(S.alias, input)
    return result


# `x[i]` of a plain tensor, an int in bounds, run in the protocol wrapper's own frame
# (`_exact_source`): the view and its Node made by one function (`select_first`) between the
# expression and the result.
getitem.plain_path = ("other.__class__ is int and self.__class__ is Tensor and "
                      "(shape := (data := self._data).shape) and -shape[0] <= other < shape[0]",
                      "select_first(self, other, data, shape)",
                      {"Tensor": Tensor, "select_first": select_first})


def _index_int(v):
    """A slice bound as an int; like Python's slices, only integers (`__index__`) or None."""
    if v is None or v.__class__ is int or v.__class__ is SymInt:
        return v  # a symbolic size stays symbolic (a slice of a captured graph)
    if not hasattr(v, "__index__"):
        raise TypeError("slice indices must be integers or None or have an __index__ method")
    return v.__index__()


def _int_index(i) -> int:
    """A single-position index as an int: integers and objects with `__index__` (NumPy
    integers, 0-d integer tensors) only; a float is an error, not a truncation."""
    if i.__class__ is int:
        return i
    if isinstance(i, Tensor):
        return int(i.item())
    if isinstance(i, str):  # a sequence to PyTorch, whose elements make no tensor
        raise TypeError("new(): invalid data type 'str'")
    if not hasattr(i, "__index__"):
        cls = type(i)
        name = cls.__qualname__ if cls.__module__ == "builtins" else \
            f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                         f"Variables are valid indices (got {name})")
    return i.__index__()


def _writes_whole(input, index) -> bool:
    """Whether a basic index selects all of `input` without making a view (only Ellipsis and
    slices covering their dims, as PyTorch's indexing skips): `x[...] = v`, `x[:] = v`,
    `x[:, 0:n] = v` write into `x` itself."""
    if index.__class__ is slice:  # (the common case, decided at once)
        shape = input.shape
        return bool(shape) and _covers(index, shape[0])
    if index.__class__ is not tuple:
        return False
    n = len(index)
    k = n  # the ellipsis's place
    for j in range(n):
        i = index[j]
        if i is Ellipsis:
            if k != n:
                return False
            k = j
        elif i.__class__ is not slice:
            return False
    shape = input.shape
    slices = n - (k != n)
    if slices > len(shape):
        return False
    for j in range(n):
        if j == k:
            continue
        d = j if j < k else len(shape) - (n - j)  # (dims after the ellipsis from the end)
        if not _covers(index[j], shape[d]):
            return False
    return True


def _covers(i: slice, size: int) -> bool:
    """Whether slice `i` (of ints) takes a whole dim of `size` in order (a negative start is
    never taken as the whole)."""
    start, stop, step = i.start, i.stop, i.step
    return (start is None or start.__class__ is int and start == 0) and \
        (step is None or step.__class__ is int and step == 1) and \
        (stop is None or stop.__class__ is int and stop >= size)


def setitem(input, index, value) -> None:
    """`input[index] = value`: a copy into the indexed view, or `index_put_` for index
    tensors."""
    literal = False
    if not isinstance(value, Tensor):
        # The number is converted (and range-checked) first, as PyTorch converts it before it
        # reads the index.
        value = _assigned_number(value, input.dtype)
        if _active.modes and records_factory_calls():
            # (traced as PyTorch's make_fx records it: a literal 0-d tensor of the input's
            # dtype, copied into a 0-d target, filling any other)
            value, literal = _creation_tensor(value, dtype=input.dtype), True
    if index.__class__ is list:
        index = _sequence_as_tuple(index)
    elif index.__class__ is builtins.bool:
        # PyTorch's own case: `x[True] = v` copies into `x[None]`; `x[False] = v` does nothing
        if index:
            setitem(call(S.unsqueeze, input, 0), Ellipsis, value)
        return
    if isinstance(index, tuple) and builtins.any(_is_advanced_item(i) for i in index) or \
            _is_advanced(index):
        target, indices = _advanced(input, index if isinstance(index, tuple) else (index,))
        if not indices:  # (only 0-d arrays, which select): a copy into that view
            setitem(target, Ellipsis, value)
            return
        if not isinstance(value, Tensor):
            from .._creation import tensor as _tensor

            value = _tensor(value, dtype=target.dtype)  # (converted above)
        else:
            value = _without_leading_ones(value)
        # (A one-element value of another dtype is index_put_'s to convert or refuse.)
        call(X.index_put_, target, indices, value, False)
        return
    # `x[...] = v` (or full slices) writes into `x` itself (CopyBackwards, or FillBackward3
    # for a number, which PyTorch fills as a 0-d tensor), any other index into a view of it.
    whole = index is Ellipsis or _writes_whole(input, index)
    target = input if whole else getitem(input, index)
    if isinstance(value, Tensor):
        if (whole or literal) and not value.ndim and target.ndim:  # (a 0-d value fills a
            # larger x, as PyTorch's copy_to does)
            call(I.fill_tensor, target, value)
            return
        shape = tuple(target.shape)
        if tuple(value.shape) != shape:
            value = _fit_value(value, shape)
        call(I.copy_, target, value)
    else:
        number = value  # (converted for input's dtype, which a view keeps)
        data = target._data  # (None for a meta or fake tensor: fill_'s meta checks it)
        if data is not None and not data.flags.writeable and target.numel() > 1:
            # Possibly an expanded view: PyTorch assigns through copy_, which refuses one
            # whose elements share memory, where fill_ would write it.
            dt = target.dtype
            call(I.copy_, target, Tensor._make(np.asarray(number, dt.np), dt))
            return
        if whole:
            dt = target.dtype
            call(I.fill_tensor, target, Tensor._make(np.asarray(number, dt.np), dt))
            return
        call(I.fill_scalar, target, number)


def _assigned_number(value, dtype):
    """A Python number assigned into a tensor of `dtype` (`x[i] = v`), as PyTorch converts it:
    checked against the dtype's range as `fill_` checks it (uint8 takes -1 as 255), except
    that a half type takes it rounded (2 ** 31 into float16 is inf, where `fill_` refuses it)."""
    cls = value.__class__
    if cls is int and not -(1 << 63) <= value < 1 << 63:
        # (assignment reads an int as int64 only, for every dtype)
        raise ValueError("Overflow when unpacking long long")
    if cls is not int and cls is not float:
        if not isinstance(value, (int, float, complex, np.integer, SymInt)) or \
                isinstance(value, np.bool_):
            # PyTorch's assignment takes numbers (NumPy's integers and float64, a float,
            # too) and tensors; a list, an array or a NumPy float32 is refused by type.
            raise TypeError(f"can't assign a {_type_name(value)} to a "
                            f"torch.{dtype.legacy}Tensor")
        if cls is not complex or not dtype.is_floating_point or dtype.itemsize != 2:
            return value
        if value.imag:  # (a half type's value is converted through double here)
            raise RuntimeError("value cannot be converted to type double without overflow")
        value = value.real
    dt = dtype.np
    if dtype.is_floating_point and dt.itemsize == 2:
        with np.errstate(over="ignore"):
            return float(dt.type(value))
    return checked_scalar(value, dt)


def _type_name(value) -> str:
    """A value's type as CPython names it in messages: a class defined in Python by its name
    (`Fraction`), a built-in type by its qualified name (`numpy.ndarray`, `list`)."""
    cls = type(value)
    if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins":  # (a heap type: Python's)
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _fit_value(value: Tensor, shape: tuple) -> Tensor:
    """`value` as `x[i] = value` writes it into a result of `shape`, as PyTorch does: its
    leading size-1 dims dropped (`x[0] = row[None]`), then expanded to `shape` (its error
    if that fails)."""
    have = tuple(value.shape)
    k = 0
    while k < len(have) and have[k] == 1:
        k += 1
    _expand_shape(have[k:], shape, value.dtype)
    # (viewed and expanded, as PyTorch's assignment does: the value's gradient passes their
    # nodes, ViewBackward0 and ExpandBackward0)
    return value.view(have[k:]).expand(shape)


def _without_leading_ones(value: Tensor) -> Tensor:
    """`value` viewed without its leading size-1 dims, as PyTorch's `x[i] = value` passes it
    to index_put_ (a value of shape [1, 1, 3] puts as one of shape [3])."""
    have = tuple(value.shape)
    k = 0
    while k < len(have) and have[k] == 1:
        k += 1
    return value.view(have[k:]) if k else value
# ---------------------------------------------------------------- indexing ops


_INDEX_SELECT = _args.Overloads(("Tensor input, int dim, Tensor index, *, Tensor out=None",),
                                ("int dim, Tensor index",))


def index_select(input, *args, out=None, **kwargs):
    """The entries at `index` (a tensor) along `dim`."""
    if len(args) == 2 and not kwargs and args[0].__class__ is int and \
            isinstance(args[1], Tensor):
        return call(X.index_select, input, args[0], args[1])
    bound = _args.parsed("index_select", _INDEX_SELECT, input, args, kwargs,
                         _args.is_method_copy(locals()))[1]
    return call(X.index_select, input, bound["dim"], bound["index"])


_GATHER = _args.Overloads(
    ("Tensor input, int dim, Tensor index, *, bool sparse_grad=False, Tensor out=None",),
    ("int dim, Tensor index, *, bool sparse_grad=False",))


def gather(input, *args, out=None, **kwargs):
    """out[i][j] = input[index[i][j]][j] (for dim 0), and so on: `index` a tensor."""
    if len(args) == 2 and not kwargs and args[0].__class__ is int and \
            isinstance(args[1], Tensor):
        return call(X.gather, input, args[0], args[1])
    bound = _args.parsed("gather", _GATHER, input, args, kwargs,
                         _args.is_method_copy(locals()))[1]
    return call(X.gather, input, bound["dim"], bound["index"])


def take_along_dim(input, indices, dim=None, *, out=None):
    """gather of `indices` along `dim` (of the flattened tensor without `dim`); along a dim,
    indices are taken modulo its size (PyTorch's `remainder`: -1 is the last, so is
    size - 1 + size)."""
    if dim is None:  # (views, as PyTorch's: a tensor that cannot be viewed flat is refused)
        return gather(input.view(-1), 0, indices.view(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of "
            f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
            "dimensions for indices")
    if indices.dtype is not _dtype.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.legacy}")
    d = _wrap_dim(dim, input.ndim)
    if not input.ndim:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    # Both broadcast against each other except along `dim` (the input's expand is in the
    # graph, ExpandBackward0, as PyTorch records it).
    sizes = list(input.shape)
    sizes[d] = indices.shape[d]
    shape = list(_broadcast_shapes(tuple(sizes), tuple(indices.shape)))
    indices = indices.expand(shape)
    shape[d] = input.shape[d]
    input = input.expand(shape)
    # Taken modulo the size into a new tensor, always, as PyTorch's: the index gather saves
    # is not the caller's, which may then change in place.
    indices = indices.remainder(input.shape[d])
    return gather(input, d, indices)


def scatter_with_reduce(input, dim, index, src, reduce: str, inplace: bool):
    """`scatter(..., reduce=)` (and `scatter_`): colliding values combined by "add" or
    "multiply" with what is there; a number `src` is spread over the index's shape. PyTorch
    records no derivative for this form (a NotImplemented node)."""
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if isinstance(src, Tensor):
        # (Level 3: the caller of `scatter` or `scatter_`, past the protocol's wrappers.)
        warn_once_at(3, "The reduce argument of torch.scatter with Tensor src is deprecated and "
                        "will be removed in a future PyTorch release. Use torch.scatter_reduce "
                        "instead for more reduction options.")
        op = SC.scatter_reduce_src_ if inplace else SC.scatter_reduce_src
    else:
        op = SC.scatter_reduce_value_ if inplace else SC.scatter_reduce_value
    return call(op, input, dim, index, src, reduce)


def scatter(input, dim, index, src=None, *, value=None, reduce=None, out=None):
    """A copy of `input` with `src` (or `value`) written at `index` along `dim` (combined
    with what is there by `reduce`, "add" or "multiply", where given)."""
    if src is None:
        src = value
    if reduce is not None:
        return scatter_with_reduce(input, dim, index, src, reduce, False)
    if isinstance(src, Tensor):
        return call(X.scatter, input, dim, index, src)
    return call(X.scatter_value, input, dim, index, src)


def scatter_add(input, dim, index, src, *, out=None):
    """A copy of `input` with `src` added at `index` along `dim`."""
    return call(X.scatter_add, input, dim, index, src)


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """A copy of `input` with `alpha * source` added at `index` along `dim`."""
    return call(X.index_add, input, dim, index, source, alpha)


def masked_fill(input, mask, value):
    """A copy of `input` with `value` where `mask` holds."""
    X.masked_fill_arguments_check("masked_fill", mask, value)
    if isinstance(value, Tensor):
        return call(X.masked_fill_tensor, input, mask, value)
    return call(X.masked_fill, input, mask, value)


def masked_select(input, mask, *, out=None):
    """The elements where `mask` holds, as a 1-D tensor."""
    return call(X.masked_select, input, mask)


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements, one row each (or one tensor per dim)."""
    if as_tuple:
        if input.ndim == 0:  # as a 1-element 1-D tensor: (tensor([0]),) where it is nonzero
            return (call(X.nonzero, input.reshape(1)).select(1, 0),)
        result = call(X.nonzero, input)
        return tuple(result.select(1, k) for k in range(input.ndim))
    return call(X.nonzero, input)


def argwhere(input):
    """nonzero(input)."""
    return call(X.nonzero, input)


def index_put_indices(indices, position: int | None = None) -> list:
    """The public `index_put`'s (and, `position` 0, the method `index_put_`'s) index list:
    tensors only, as PyTorch's binding takes them (None, which keeps a dimension whole, is
    for `x[:, i]` alone); `position` is the list's place among the arguments (its message's;
    None: 0 for a call of the method `index_put`, 1 for the function)."""
    indices = list(indices)
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            if position is None:
                position = 0 if _args.called_as_method(2) else 1
            raise TypeError(f"expected Tensor as element {k} in argument {position}, but got "
                            f"{type(i).__name__}")
    return indices


def index_put(input, indices, values, accumulate=False):
    """A copy of `input` with `values` put at the advanced index `indices`."""
    return call(X.index_put, input, index_put_indices(indices), values, accumulate)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding of an index tensor (for nn.functional.one_hot)."""
    return call(X.one_hot, tensor, num_classes)
