"""Shapes and views: view, reshape, permute, transpose, expand, squeeze, cat, stack, split,
flatten, movedim, repeat, flip, roll, tril/triu, diagonal, meshgrid and their aliases.
"""

from __future__ import annotations

import builtins
import itertools
import numbers
import operator

import numpy as np

from .. import _dtype
from .._dispatch import call, call1, call3
from .._symbolic import SymInt, size_int
from .._tensor import Tensor
from .._torch_function import warning_stacklevel as _warning_stacklevel
from .._type_names import python_type_name
from ..ops import reductions as RD
from ..ops import rnn as RN
from ..ops import shape as S
from ..ops import views as V
from ..ops._util import wrap_dim
from ..ops._view_calls import view_shape
from ..ops.views import view_dtype, view_dtype_check
from . import _args
from .inplace import clone, contiguous_format

# ---------------------------------------------------------------- shapes and views


_UNSET = object()  # (an argument not given: PyTorch's parser names the overloads)


def _shape_args(shape) -> tuple:
    # (one size alone: an int, or a tensor read as one, never as a list of sizes)
    if len(shape) == 1 and shape[0].__class__ is not int and \
            not isinstance(shape[0], (numbers.Integral, Tensor)):
        shape = shape[0]
    if shape.__class__ is tuple:  # the common case, a tuple of ints: nothing to convert
        for s in shape:
            if s.__class__ is not int:
                break
        else:
            return shape
    return tuple(map(int_argument, shape))


def int_argument(value, fake_tensor: bool = False):
    """An int parameter's value or one size of a shape argument: an integer (a 0-d integer
    tensor read as one) or a traced size kept symbolic; with `fake_tensor`, a tensor without
    data (capture's stand-in for a 0-d integer tensor) too, as it is. Anything else (a float)
    is the TypeError of `__index__`, never truncated: PyTorch's parser takes ints only, and
    the public function's wrapper words that error as PyTorch's parser does (`argument
    'diagonal' (position 2) must be int, not float`)."""
    if value.__class__ is int or value.__class__ is SymInt:
        return value
    if fake_tensor and isinstance(value, Tensor) and value._data is None:
        return value
    return operator.index(value)


def _keyword_shape(caller: str, name: str, given: tuple, keyword) -> tuple:
    """The sizes of a method taking them either spread or as one sequence by position
    (`x.view(2, 3)`, `x.view((2, 3))`) or by PyTorch's keyword (`x.view(size=(2, 3))`)."""
    if given:
        raise TypeError(f"{caller}() got multiple values for argument '{name}'")
    if not isinstance(keyword, (list, tuple)):
        raise _not_a_list(caller, name, keyword, None)
    return (_args.int_list_parameter(keyword, caller, name, None),)


def _not_a_list(caller: str, name: str, value, position: int | None) -> TypeError:
    """PyTorch's parser's TypeError for `value`, no list or tuple, given for a list of sizes
    or dims otherwise than spread out over a method's arguments, where one int alone is
    taken (`x.flip(0)`, but not `x.flip(dims=0)` nor `torch.flip(x, 0)`)."""
    at = "" if position is None else f" (position {position})"
    return TypeError(f"{caller}(): argument '{name}'{at} must be tuple of ints, not "
                     f"{python_type_name(value)}")


def _spread(caller: str, name: str, given: tuple, keyword):
    """The one list argument of a method PyTorch also takes spread out (`x.flip(0, 1)` is
    `x.flip((0, 1))`; its C-level parser allows that for a leading list of ints): one value
    given by position is the argument itself, several are the list."""
    if keyword is not None:
        raise TypeError(f"{caller}() got multiple values for argument '{name}'")
    return given[0] if len(given) == 1 else given


def view(input, *shape, dtype=None, size=None):
    """A view with a new shape (no copy; an error if the strides do not allow one), or of the
    same bytes as another dtype (`view(dtype)`)."""
    if dtype is None:
        if len(shape) == 1 and shape[0].__class__ is int and size is None:  # `x.view(n)`
            if input.__class__ is Tensor:  # the view and its Node in one frame
                return view_shape(input, shape)
            return call(S.view, input, shape)
    elif not shape and size is None:
        shape = (_dtype.as_dtype(dtype),)
    if size is not None:
        if shape or dtype is not None:  # PyTorch's two overloads take one argument each
            keywords = ([] if dtype is None else ["dtype=torch.dtype"]) + [
                "size=" + type(size).__name__]
            # PyTorch's listing ends in ", " when only keywords were given.
            got = ", ".join([type(s).__name__ for s in shape] + keywords) if shape else \
                "".join(k + ", " for k in keywords)
            raise TypeError(f"view() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n"
                            " * (torch.dtype dtype)\n * (tuple of ints size)\n")
        if not isinstance(size, (list, tuple)):  # (one argument: PyTorch's notes on both)
            given = f"size={python_type_name(size)}"
            raise TypeError(
                f"view() received an invalid combination of arguments - got ({given}, ), but "
                "expected one of:\n * (torch.dtype dtype)\n      didn't match because some of "
                "the keywords were incorrect: size\n * (tuple of ints size)\n      didn't match "
                f"because some of the arguments have invalid types: (!{given}!, )\n")
        shape = (size,)
    if len(shape) == 1 and shape[0].__class__ is type:  # `x.view(int)`: Python's int64
        shape = (_dtype.as_dtype(shape[0]),)
    if len(shape) == 1 and isinstance(shape[0], _dtype.dtype):
        view_dtype_check(input, shape[0])
        return call(view_dtype, input, shape[0])
    if input.__class__ is Tensor:
        return view_shape(input, _shape_args(shape))
    return call(S.view, input, _shape_args(shape))


def reshape(input, *sizes, shape=None):
    """A view with a new shape when the strides allow, otherwise a copy."""
    if shape is not None:
        sizes = _keyword_shape("reshape", "shape", sizes, shape)
    shape = S.infer_size(_shape_args(sizes), input.numel())
    if S.view_strides(tuple(input.shape), input.stride(), shape) is not None:
        return call(S.view, input, shape)
    return call(S.unsafe_view, clone(input, memory_format=contiguous_format), shape)


def permute(input, *order, dims=None):
    """A view with the dimensions reordered."""
    if dims is not None:
        order = _keyword_shape("permute", "dims", order, dims)
    return call(S.permute, input, _shape_args(order))


def _one_list(caller: str, name: str, given: tuple, keyword) -> tuple:
    """The one list of ints of a function (`torch.reshape(x, shape)`) whose method also takes
    it spread out (`x.reshape(2, 3)`), given by position or by keyword: a bare int or more
    than one argument is PyTorch's parser's TypeError. The methods keep their own path."""
    if keyword is not _UNSET:
        if given:
            raise TypeError(f"{caller}() got multiple values for argument '{name}'")
        return _keyword_shape(caller, name, (), keyword)
    if len(given) != 1:
        if not given:
            raise _args.missing(caller, name)
        raise TypeError(f"{caller}() takes 2 positional arguments but {len(given) + 1} were "
                        "given")
    if not isinstance(given[0], (list, tuple)):
        raise _not_a_list(caller, name, given[0], 2)
    return (_args.int_list_parameter(given[0], caller, name, 2),)


def reshape_function(input, *given, shape=_UNSET):
    """`torch.reshape(input, shape)`: `Tensor.reshape` with its sizes as one list."""
    return reshape(input, *_one_list("reshape", "shape", given, shape))


def permute_function(input, *given, dims=_UNSET):
    """`torch.permute(input, dims)`: `Tensor.permute` with its dims as one list."""
    return permute(input, *_one_list("permute", "dims", given, dims))


reshape_function.__name__ = reshape_function.__qualname__ = "reshape"
permute_function.__name__ = permute_function.__qualname__ = "permute"


def transpose(input, dim0, dim1):
    """A view with two dimensions swapped."""
    if dim0.__class__ is not int or dim1.__class__ is not int:  # (a bool is no dim either)
        _args.int_arguments("transpose", ("dim0", dim0), ("dim1", dim1))
    return call3(S.transpose, input, dim0, dim1)


def t(input):
    """Transpose of a tensor of at most 2 dimensions."""
    return call1(S.t, input)


def expand(input, *sizes, size=None):
    """A broadcast view with the given sizes (-1 keeps a size)."""
    if size is not None:
        sizes = _keyword_shape("expand", "size", sizes, size)
    return call(S.expand, input, _shape_args(sizes))


def unsqueeze(input, dim=None, *, axis=None):
    """A view with a size-1 dimension inserted at `dim`."""
    if dim.__class__ is not int or axis is not None:
        if axis is None and dim is not None and not _args.is_int_argument(dim):
            _args.int_arguments("unsqueeze", ("dim", dim))
        dim = _args.index(_args.required_dim("unsqueeze", dim, axis))
    return call(S.unsqueeze, input, dim)


def squeeze(input, *dims, dim=None, axis=None):
    """A view without size-1 dimensions (all, one, or a tuple of them; the method takes
    them spread out too, `x.squeeze(0, 2)`)."""
    if dims:
        dim = dims[0] if dim is None and len(dims) == 1 else _spread("squeeze", "dim", dims, dim)
    if axis is not None:
        dim = _args.axis("squeeze", dim, axis)
    if dim is None:
        return call(S.squeeze, input)
    if dim.__class__ is int or (isinstance(dim, (numbers.Integral, Tensor)) and
                                dim.__class__ is not bool):
        return call(S.squeeze_dim, input, dim.__index__())
    if not isinstance(dim, (list, tuple)):  # (PyTorch's overloads: none, an int, a list)
        _args.parsed("squeeze", _SQUEEZE, input,
                     *_args.as_called(("dim",), (dim,), input=input),
                     _args.called_as_method())
    return call(S.squeeze_dims, input, tuple(dim))


_SQUEEZE = _args.Overloads(("Tensor input", "Tensor input, int dim", "Tensor input, int[] dim"),
                           ("", "int dim", "int[] dim"))


def cat(tensors, dim=0, *, out=None):
    """Concatenate tensors along `dim`."""
    tensors = _args.tensor_sequence("cat", tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    return call(S.cat, tensors, dim)


def _dim_at(name: str, dim, axis):
    """`dim` (default 0; an int, or a 0-d integer tensor read as one), or NumPy's `axis`
    given for it."""
    return _args.index(_args.axis(name, dim, axis, 0))


def unbind(input, dim=0, *, axis=None):
    """The slices along `dim`, as a tuple of views."""
    if dim.__class__ is not int or axis is not None:
        dim = _dim_at("unbind", dim, axis)
    return call(S.unbind, input, dim)


def select(input, dim: int = None, index: int = None, *, axis=None):
    """The slice at `index` of dimension `dim` (a view, one dimension fewer)."""
    if dim is None and axis is None:
        raise TypeError('select() missing 2 required positional argument: "dim", "index"')
    if axis is None and not _args.is_int_argument(dim):
        _args.int_arguments("select", ("dim", dim))
    dim = _args.index(_args.required_dim("select", dim, axis))
    if index is None:
        raise _args.missing("select", "index")
    if index.__class__ is not int and not _args.is_int_argument(index):
        _args.int_arguments("select", ("index", index), skip=1)
    # (an integer only: a float is a TypeError, which the public function's wrapper words
    # as PyTorch's parser does, its `int` annotation naming the type expected)
    return call(S.select, input, dim, index if index.__class__ is int else operator.index(index))


_NARROW = _args.Overloads(
    ("Tensor input, int dim, Tensor start, int length",
     "Tensor input, int dim, int start, int length"),
    ("int dim, Tensor start, int length", "int dim, int start, int length"))


def narrow(input, dim, start, length):
    """The view of `length` elements of dimension `dim` from `start` (an int, or a 0-dim
    integer tensor read as one)."""
    if not (_args.is_int_argument(dim) and _args.is_int_argument(length) and
            (isinstance(start, Tensor) or _args.is_int_argument(start))):
        # PyTorch's overloads name what fits neither (a bool or float dim, start or length)
        _args.parsed("narrow", _NARROW, input,
                     *_args.as_called(("dim", "start", "length"), (dim, start, length),
                                      input=input),
                     _args.called_as_method())
    if isinstance(start, Tensor):
        if start.ndim != 0 or start.dtype.is_floating_point or start.dtype.is_complex or \
                start.dtype is _dtype.bool_:
            raise RuntimeError("start must be an 0-dim integral Tensor.")
        start = int(start.item())
    dim, length = _args.index(dim), _args.index(length)
    # PyTorch's checks, in its order
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    size = input.shape[wrap_dim(dim, input.ndim)]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(
            f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return call(S.slice_, input, dim, start, start + length, 1)


def as_strided(input, size, stride, storage_offset=None):
    """A view of the storage with the given sizes, strides and offset."""
    return call(S.as_strided, input, tuple(size), tuple(stride), storage_offset)
def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------- more shape ops


def flatten(input, start_dim=0, end_dim=-1):
    """Dims `start_dim`..`end_dim` merged into one (a view when the strides allow)."""
    if start_dim.__class__ is not int or end_dim.__class__ is not int:
        _args.int_arguments("flatten", ("start_dim", start_dim), ("end_dim", end_dim))
    n = input.ndim
    s, e = wrap_dim(start_dim, n), wrap_dim(end_dim, n)  # a scalar's range is [-1, 0]
    if n == 0:
        return reshape(input, (1,))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (_prod(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    """Dim `dim` split into `sizes` (a view), with PyTorch's errors: a size that is not an
    int, no sizes, sizes that do not fit the dim (named after the op)."""
    if dim.__class__ is not int:  # (PyTorch names its position, even by keyword)
        _args.int_parameter(dim, "unflatten", "dim", 1 if _args.called_as_method() else 2)
        dim = dim.__index__()  # (a 0-d integer tensor: its int)
    if not isinstance(sizes, (list, tuple)):  # (PyTorch names its position, even by keyword)
        _args.int_list_parameter(sizes, "unflatten", "sizes",
                                 2 if _args.called_as_method() else 3)
    for idx, elem in enumerate(sizes):
        if isinstance(elem, bool):  # PyTorch's two wordings: a bool, any other non-int
            raise TypeError("unflatten(): argument 'sizes' (position 2) must be tuple of ints, "
                            f"but found element of type bool at pos {idx}")
        if isinstance(elem, Tensor) and _args.is_int_argument(elem):
            sizes = (*sizes[:idx], elem.__index__(), *sizes[idx + 1:])  # (read as its int)
        elif not isinstance(elem, (int, SymInt)):  # (a traced size stays symbolic)
            raise TypeError("unflatten(): argument 'sizes' failed to unpack the object at pos 2 "
                            f'with error "type must be tuple of ints,but got '
                            f'{type(elem).__name__}"')
    if len(sizes) == 0:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if input.ndim == 0:
        raise RuntimeError(f"unflatten got an unexpected error:\nDimension specified as {dim} "
                           "but tensor has no dimensions")
    d = wrap_dim(dim, input.ndim)
    shape = tuple(input.shape)
    try:
        inferred = S.infer_size(tuple(sizes), shape[d])
    except RuntimeError as exc:
        if "is invalid for input of size" in str(exc):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to "
                               f"the size of dim {d} ({shape[d]}) in the input tensor") from None
        raise RuntimeError(f"unflatten got an unexpected error:\n{exc}") from None
    return view(input, shape[:d] + inferred + shape[d + 1:])


_MOVEDIM = _args.Overloads(
    ("Tensor input, int source, int destination",
     "Tensor input, int[] source, int[] destination"),
    ("int source, int destination", "int[] source, int[] destination"))


def _movedim(input, source, destination, method: bool, extra: tuple = (),
             unknown: dict | None = None):
    if source.__class__ is int and destination.__class__ is int and \
            input.__class__ is Tensor and not extra and not unknown and input.ndim:
        # The common call: one dim moved (taken out of the order, put back at its place).
        n = input.ndim
        source = wrap_dim(source, n)
        order = list(range(n))
        order.pop(source)
        order.insert(wrap_dim(destination, n), source)
        return call(S.permute, input, tuple(order))
    if extra or unknown or not (
            source.__class__ is int and destination.__class__ is int or
            source.__class__ in (list, tuple) and destination.__class__ in (list, tuple)) or \
            not isinstance(input, Tensor):
        # (PyTorch's parser: an int pair or a pair of int sequences, nothing else; the
        # arguments given are named as given by position, the usual spelling)
        given = tuple(v for v in (source, destination) if v is not _UNSET)
        if len(given) == 1 and destination is not _UNSET:  # (`movedim(x, destination=1)`)
            given, unknown = (), {"destination": destination, **(unknown or {})}
        elif len(given) == 2 and not extra:  # (keywords as the call gave them)
            given, named = _args.as_called(("source", "destination"), given, 2)
            unknown = {**named, **(unknown or {})}
        bound = _args.parsed("movedim", _MOVEDIM, input, given + extra, unknown or {},
                             method)[1]
        source, destination = bound["source"], bound["destination"]
    n = input.ndim
    src, dst = list(_args.dims(source)), list(_args.dims(destination))
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
            f"the same number of dims as destination ({dst} dims)")
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    if len(src) > 1:
        for name, dims in (("source", src), ("destination", dst)):
            if len(set(dims)) != len(dims):
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    if n == 0:  # (dim 0 or -1 of a 0-d tensor: an alias, as PyTorch's)
        return call(V.alias, input)
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return call(S.permute, input, tuple(order))


# (`source` and `destination` are annotated as ints: the protocol's wrappers read that to
# keep a list of dims there off their check of a tensor parameter of that name)
def movedim(input, source: int | list[int] | tuple[int, ...] = _UNSET,
            destination: int | list[int] | tuple[int, ...] = _UNSET, *extra, **unknown):
    """A view with dims `source` (an int or a sequence of them) moved to positions
    `destination`."""
    return _movedim(input, source, destination, False, extra, unknown)


def _movedim_method(self, source: int | list[int] | tuple[int, ...] = _UNSET,
                    destination: int | list[int] | tuple[int, ...] = _UNSET, *extra,
                    **unknown):
    """`Tensor.movedim`: the function, but PyTorch's messages name the method's overloads
    (no `input`)."""
    return _movedim(self, source, destination, True, extra, unknown)


moveaxis = movedim


def broadcast_to(input, *sizes, size=None):
    """A broadcast view of `input` with shape `size` (the method takes the sizes spread out
    too, `x.broadcast_to(2, 3)`)."""
    if sizes:
        size = _spread("broadcast_to", "size", sizes, size)
    elif size is None:
        raise _args.missing("broadcast_to", "size")
    if not isinstance(size, (list, tuple)):
        if not (sizes and _args.called_as_method()):
            raise _not_a_list("broadcast_to", "size", size, 2 if sizes else None)
        _args.int_list_argument(size, "broadcast_to", "size", 1)
        size = (size,)
    return expand(input, tuple(size))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape."""
    from ..ops._util import broadcast_shapes

    shape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    # A tensor of the broadcast shape already is itself in the result, as in PyTorch (no
    # expand and no ExpandBackward0 node).
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


def repeat(input, *times, repeats=None):
    """The tensor tiled `repeats` times along each dim."""
    if repeats is not None:
        times = _keyword_shape("repeat", "repeats", times, repeats)
    return call(S.repeat, input, _shape_args(times))


def tile(input, *spread, dims=None):
    """repeat with `dims` padded with leading ones to the tensor's rank (the method takes
    them spread out too, `x.tile(2, 1)`)."""
    if spread:
        dims = _spread("tile", "dims", spread, dims)
    elif dims is None:
        raise _args.missing("tile", "dims")
    if not isinstance(dims, (list, tuple)) and not (spread and _args.called_as_method()):
        raise _not_a_list("tile", "dims", dims, 2 if spread else None)
    try:
        dims = tuple(map(int_argument, _args.dims(dims)))
    except TypeError:
        _args.int_list_argument(dims, "tile", "dims", 1)
        raise
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return call(S.repeat, input, dims)


def stack(tensors, dim=0, *, out=None):
    """Tensors of equal shape joined along a new dim."""
    return call(S.stack, _args.tensor_sequence("stack", tensors), dim)


def hstack(tensors, *, out=None):
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    tensors = [t if t.ndim else t.reshape(1) for t in _args.tensor_sequence("hstack", tensors)]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors, *, out=None):
    """Concatenate along dim 0, 1-D tensors as rows."""
    return cat([t.reshape(1, -1) if t.ndim < 2 else t
                for t in _args.tensor_sequence("vstack", tensors)], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Views of `split_size` elements (or of the listed sizes) along `dim`."""
    dim, size = _args.index(dim), split_size_or_sections
    if isinstance(size, Tensor) and not size.ndim:  # a 0-d tensor is a size (as `int` reads it)
        size = int(size)
    if isinstance(size, (int, SymInt)):  # (a traced size stays symbolic)
        return call(S.split, tensor, size_int(size), dim)
    if not isinstance(size, (list, tuple)):  # (a NumPy integer is none of PyTorch's ints)
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 2) must be "
                        f"tuple of ints, not {python_type_name(size)}")
    # (anything else is split_with_sizes's list of sizes, as PyTorch's `Tensor.split` passes
    # it on, by position, to the C function, whose parser refuses what is no int)
    _args.int_list_parameter(size, "split_with_sizes", "split_sizes", 2)
    return call(S.split_with_sizes, tensor, [int(s) for s in size], dim)


def chunk(input, chunks, dim=0, *, axis=None):
    """At most `chunks` views of equal size (the last may be smaller) along `dim`."""
    if dim.__class__ is not int or axis is not None:
        if not _args.is_int_argument(dim) and axis is None:
            _args.int_arguments("chunk", ("chunks", 0), ("dim", dim))
        dim = _dim_at("chunk", dim, axis)
    if chunks.__class__ is not int:
        if not (isinstance(chunks, Tensor) and chunks._data is None):  # (capture's stand-in)
            _args.int_arguments("chunk", ("chunks", chunks))
        chunks = int_argument(chunks, fake_tensor=True)
    if isinstance(input, Tensor) and not input.ndim:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[wrap_dim(dim, input.ndim)]
    if not size and input.ndim:  # an empty dim still gives `chunks` (empty) pieces
        return call(S.split_with_sizes, input, [0] * chunks, dim)
    return call(S.split, input, builtins.max((size + chunks - 1) // chunks, 1), dim)


def unsafe_split(tensor, split_size, dim=0, *, axis=None):
    """Like `split`, but the pieces are independent tensors (no views, though they share the
    input's memory) whose gradient node is UnsafeSplitBackward0."""
    if split_size.__class__ is not int or dim.__class__ is not int:
        _args.int_arguments("unsafe_split", ("split_size", split_size),
                            ("dim", dim if axis is None else 0))
    if dim.__class__ is not int or axis is not None:
        dim = _dim_at("unsafe_split", dim, axis)
    return call(RN.unsafe_split, tensor, int_argument(split_size), dim)


def unsafe_chunk(input, chunks, dim=0, *, axis=None):
    """Like `chunk`, but the pieces are independent tensors (UnsafeSplitBackward0)."""
    if chunks.__class__ is not int or dim.__class__ is not int:
        _args.int_arguments("unsafe_chunk", ("chunks", chunks),
                            ("dim", dim if axis is None else 0))
    if dim.__class__ is not int or axis is not None:
        dim = _dim_at("unsafe_chunk", dim, axis)
    chunks = int_argument(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    return call(RN.unsafe_chunk, input, chunks, dim)


def transpose_(self, dim0, dim1):
    """Swap two dimensions of `self` in place (its strides change; no data moves)."""
    if dim0.__class__ is not int or dim1.__class__ is not int:
        _args.int_parameters("transpose_", 1, ("dim0", dim0), ("dim1", dim1))
    return call(RN.transpose_, self, dim0, dim1)


_TENSOR_SPLIT_FORMS = (" * (tuple of ints indices, int dim = 0)",
                       " * (Tensor tensor_indices_or_sections, int dim = 0)",
                       " * (int sections, int dim = 0)")


_TENSOR_SPLIT_TEXTS = ("int[] indices, int dim=0", "Tensor tensor_indices_or_sections, int dim=0",
                       "int sections, int dim=0")
_TENSOR_SPLIT = _args.Overloads(tuple(f"Tensor input, {t}" for t in _TENSOR_SPLIT_TEXTS),
                                _TENSOR_SPLIT_TEXTS)


def _tensor_split_keyword(given: tuple, keywords: dict):
    """The one split argument of `tensor_split` passed by one of PyTorch's keywords
    (`sections`, `indices`, `tensor_indices_or_sections`), or PyTorch's error."""
    ok = len(keywords) == 1 and not given
    if ok:
        (name, value), = keywords.items()
        ok = (isinstance(value, numbers.Integral) if name == "sections" else
              isinstance(value, Tensor) if name == "tensor_indices_or_sections" else
              isinstance(value, (list, tuple)))
    if ok:
        return value
    got = [type(g).__name__ for g in given] + [f"{k}={type(v).__name__}"
                                                 for k, v in keywords.items()]
    got_text = ", ".join(got) if given else "".join(g + ", " for g in got)
    lines = []
    for form in _TENSOR_SPLIT_FORMS:
        lines.append(form)
        if given:  # a positional argument as well: PyTorch says which keywords did not fit
            lines.append("      didn't match because some of the keywords were incorrect: "
                         + ", ".join(keywords))
    raise TypeError(f"tensor_split() received an invalid combination of arguments - got "
                    f"({got_text}), but expected one of:\n" + "\n".join(lines) + "\n")


def tensor_split(input, indices_or_sections=None, dim=_UNSET, *, sections=None, indices=None,
                 tensor_indices_or_sections=None):
    """Views split at the given indices, or into `n` nearly equal parts (a 0-d tensor is a
    count, a 1-d one indices)."""
    keywords = {k: v for k, v in (("sections", sections), ("indices", indices),
                                  ("tensor_indices_or_sections", tensor_indices_or_sections))
                if v is not None}
    if keywords:
        given = () if indices_or_sections is None else (indices_or_sections,)
        indices_or_sections = _tensor_split_keyword(given, keywords)
    if not isinstance(indices_or_sections, (Tensor, numbers.Integral, list, tuple)) or (
            dim is not _UNSET and (not isinstance(dim, numbers.Integral) or dim.__class__ is bool)):
        given = ("indices_or_sections", "dim") if dim is not _UNSET else ("indices_or_sections",)
        args, kwargs = _args.as_called(given, (indices_or_sections, dim)[:len(given)],
                                       input=input)
        _args.parsed("tensor_split", _TENSOR_SPLIT, input, args, kwargs,
                     _args.called_as_method())
    if isinstance(indices_or_sections, Tensor):
        t = indices_or_sections  # PyTorch's checks of the tensor form, in its order
        if t.dtype is not _dtype.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {t.dtype.legacy}")
        if t.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {t.ndim} dims")
        indices_or_sections = t.tolist()
    # (a default PyTorch's parser tells from a 0 given; a tensor given is its int)
    dim = 0 if dim is _UNSET else _args.index(dim)
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        ends = list(itertools.accumulate(size // n + (1 if i < size % n else 0)
                                         for i in range(n)))
        starts = [0] + ends[:-1]
    else:
        # Each part is its own slice (SliceBackward0, as PyTorch composes it), between the
        # index before and this one, as slice reads them (negative from the end, clamped;
        # an end before its start gives an empty part).
        ends = [int(i) for i in indices_or_sections] + [size]
        starts = [0] + ends[:-1]
    return tuple(call(V.slice_, input, d, a, b, 1) for a, b in zip(starts, ends))


def flip(input, *spread, dims=None):
    """A copy with the order of elements reversed along `dims` (the method takes them
    spread out too, `x.flip(0, 1)`)."""
    if spread:
        dims = _spread("flip", "dims", spread, dims)
    elif dims is None:
        raise _args.missing("flip", "dims")
    if not isinstance(dims, (list, tuple)) and not (spread and _args.called_as_method()):
        raise _not_a_list("flip", "dims", dims, 2 if spread else None)
    return call(S.flip, input, _args.dims(_args.int_list_argument(dims, "flip", "dims", 1)))


def fliplr(input):
    """flip along dim 1."""
    if isinstance(input, Tensor) and input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    """flip along dim 0."""
    if isinstance(input, Tensor) and input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    """Elements shifted cyclically along `dims` (of the flattened tensor without `dims`)."""
    shifts = _args.int_list_argument(shifts, "roll", "shifts", 1)
    shifts = tuple(map(_args.index, _args.dims(shifts)))
    if dims is None:
        return call(S.roll, input, shifts)
    return call(S.roll, input, shifts, _args.dims(_args.int_list_argument(dims, "roll", "dims", 2)))


def tril(input, diagonal=0, *, out=None):
    """The lower triangle (below `diagonal`) of the last two dims; zeros elsewhere."""
    if diagonal.__class__ is not int:
        diagonal = diagonal_argument("tril", diagonal, _args.is_method_copy(locals()))
    return call(S.tril, input, diagonal)


def triu(input, diagonal=0, *, out=None):
    """The upper triangle (above `diagonal`) of the last two dims; zeros elsewhere."""
    if diagonal.__class__ is not int:
        diagonal = diagonal_argument("triu", diagonal, _args.is_method_copy(locals()))
    return call(S.triu, input, diagonal)


def diagonal_argument(name: str, diagonal, method: bool):
    """tril's or triu's `diagonal` (`int_argument`'s), or PyTorch's parser's TypeError for
    anything else (a bool, a float, a floating tensor), which names its position for a call
    of the method (`method`) or the function, or none for a method given it by keyword."""
    if diagonal.__class__ is not bool:
        try:
            return int_argument(diagonal, fake_tensor=True)
        except TypeError:
            pass
    at = "" if method and "diagonal" in _args.call_keywords(2) else \
        f" (position {1 if method else 2})"
    raise TypeError(f"{name}(): argument 'diagonal'{at} must be int, not "
                    f"{python_type_name(diagonal)}")


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal of dims `dim1`, `dim2` (as the last dim)."""
    try:
        return call(S.diagonal, input, offset, dim1, dim2)
    except TypeError:
        _args.int_arguments("diagonal", ("offset", offset), ("dim1", dim1), ("dim2", dim2))
        raise


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) diagonals are the last dim of `input`."""
    return call(S.diag_embed, input, offset, dim1, dim2)


def diag(input, diagonal=0, *, out=None):
    """The diagonal of a matrix, or the matrix with a vector on its diagonal."""
    if diagonal.__class__ is not int:
        diagonal = diagonal_argument("diag", diagonal, _args.is_method_copy(locals()))
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return clone(diagonal_fn(input, diagonal))


diagonal_fn = diagonal


def trace(input):
    """Sum of the main diagonal."""
    return call(RD.trace, input)


def _matrix_lines(values) -> list:
    """The rows of a 2-D array as PyTorch's C++ printer writes them: every value in one
    width (its widest magnitude's and a sign), integers as they are, others with 4 decimals."""
    integral = values.dtype.kind in "iub" or bool(np.all(np.mod(values, 1) == 0))
    texts = [[str(int(v)) if integral else f"{v:.4f}" for v in row] for row in values]
    width = max(len(t.lstrip("-")) for row in texts for t in row) + 1
    return [" ".join(t.rjust(width) for t in row) for row in texts]


def _printed_as_in_cpp(t: Tensor) -> str:
    """`t` as PyTorch's C++ printer writes it in messages (its values, then `[ torch.
    FloatTensor{2,2} ]`), for tensors of two dims or more."""
    footer = f"[ torch.{t.dtype.legacy}Tensor{{{','.join(str(n) for n in t.shape)}}} ]"
    values = t.detach().numpy()
    if values.size == 0:
        return footer
    if values.ndim == 2:
        return "\n".join(_matrix_lines(values)) + "\n" + footer
    blocks = []
    for index in np.ndindex(values.shape[:-2]):
        head = "(" + ",".join(str(i + 1) for i in index) + ",.,.) = \n"
        blocks.append(head + "\n ".join(_matrix_lines(values[index])))
    return "\n\n".join(blocks) + "\n" + footer


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (`ij` indexing unless `xy` is asked for)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.", UserWarning, stacklevel=_warning_stacklevel(2))
        indexing = "ij"
    # PyTorch's checks, in its order
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {_printed_as_in_cpp(t)}")
    swap = indexing == "xy" and len(tensors) >= 2
    ts = list(tensors)
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        view_shape = [1] * len(ts)
        view_shape[i] = -1
        out.append(expand(view(t, tuple(view_shape)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)
