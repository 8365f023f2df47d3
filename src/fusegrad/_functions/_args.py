"""Arguments as PyTorch's C-level argument parser reads them, for the public functions whose
Tensor methods run without the `__torch_function__` wrapper (the self-only methods), which
therefore meet every spelling PyTorch accepts themselves:

- a 0-d integer tensor where an int (or a list of ints) is expected: `x.sum(torch.tensor(1))`
  reads it as the int its `__index__` gives;
- NumPy's keyword names, `axis` for `dim` and `keepdims` for `keepdim` (`x.sum(axis=0)`);
- PyTorch's own wording of a missing required argument, for parameters that became optional
  so that `axis` can stand in for them.

Each helper runs only once a call has left its function's common path.
"""

from __future__ import annotations

import numbers
import sys
import types

import numpy as np

from .. import _dtype
from .._device import device as Device
from .._symbolic import SymInt
from .._tensor import Tensor, int_list_error, is_int_argument
from .._type_names import WRAPPER_FILE, call_keywords, python_type_name
from ._signatures import _parse, _resolve


def index(value):
    """`value`, or the int a tensor given for an int stands for (a 0-d integer tensor: its
    `__index__`, whose TypeError names anything else)."""
    return value.__index__() if isinstance(value, Tensor) else value


def dims(dim) -> tuple | None:
    """The dims of an `int[]` parameter as a tuple (None stays None): one int, a 0-d integer
    tensor (read as its int) or a sequence of either."""
    if dim is None:
        return None
    if dim.__class__ is int or dim.__class__ is SymInt:  # (a traced size stays symbolic)
        return (dim,)
    if isinstance(dim, numbers.Integral):
        return (int(dim),)
    if isinstance(dim, Tensor):
        return (dim.__index__(),)
    return tuple(dim)


def reduced_dims(dim) -> tuple | None:
    """`dims(dim)`, where an empty list means every dim (None), as PyTorch's sum and mean
    read `dim=()`: a reduction over all dims, not over none."""
    return dims(dim) or None


def axis(name: str, dim, given, default=None):
    """`dim`, or NumPy's `axis` (`given`) standing for it. PyTorch's parser takes the NumPy
    name only for a parameter not filled otherwise: `dim` must still hold its `default`."""
    if given is None:
        return dim
    if not (dim is default or (dim.__class__ is int and dim == default)):
        raise TypeError(f"{name}() got an unexpected keyword argument 'axis'")
    return given


def keepdims(name: str, keepdim, given):
    """`keepdim`, or NumPy's `keepdims` (`given`) standing for it."""
    if given is None:
        return keepdim
    if keepdim:
        raise TypeError(f"{name}() got an unexpected keyword argument 'keepdims'")
    return given


def bound(name: str, params: tuple, args: tuple, kwargs: dict, method: bool) -> tuple:
    """(the arguments given by name, where each given by position sits) for a function that
    reads `params` (its parameters after `input`) from `*args, **kwargs`: the place is
    PyTorch's ` (position n)`, counted from `self` for a method and from `input` for a
    function. Too many, unknown or repeated arguments are Python's TypeErrors."""
    first = 1 if method else 2  # (a function counts `input`)
    if len(args) > len(params):
        raise TypeError(f"{name}() takes from {first} to {first + len(params) - 1} positional "
                        f"arguments but {len(args) + first - 1} were given")
    given = dict(zip(params, args))
    where = {k: f" (position {first + i})" for i, k in enumerate(given)}
    for key, value in kwargs.items():
        if key not in params:
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
        if key in given:
            raise TypeError(f"{name}() got multiple values for argument '{key}'")
        given[key] = value
    return given, where


def missing(name: str, parameter: str) -> TypeError:
    """PyTorch's error for a required argument left out (its own wording, not Python's)."""
    return TypeError(f'{name}() missing 1 required positional arguments: "{parameter}"')


def required_dim(name: str, dim, given):
    """A required `dim`, given by position or keyword or as NumPy's `axis`."""
    if given is not None:
        if dim is not None:
            raise TypeError(f"{name}() got an unexpected keyword argument 'axis'")
        return given
    if dim is None:
        raise missing(name, "dim")
    return dim


def tensor_sequence(name: str, tensors, argument: str = "'tensors' (position 1)",
                    index: int = 0) -> list:
    """`tensors` (a list or tuple of tensors, as `cat` and `stack` take) as a list, with
    PyTorch's argument parser's errors for anything else (`argument`: how the first names
    the argument, `index`: its index in the second)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument {argument} must be tuple of Tensors, "
                        f"not {python_type_name(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument {index}, but got "
                            f"{python_type_name(t)}")
    return list(tensors)


def int_parameter(value, name: str, param: str, position: int | None):
    """`value` (an `int` parameter: anything with `__index__` but a bool), or PyTorch's
    parser's TypeError naming the argument and its `position` (None: given by keyword,
    which PyTorch's message names without one)."""
    if value.__class__ is int or is_int_argument(value):
        return value
    where = "" if position is None else f" (position {position})"
    raise TypeError(f"{name}(): argument '{param}'{where} must be int, not "
                    f"{python_type_name(value)}")


def as_called(names: tuple, values: tuple, depth: int = 1, input=None) -> tuple:
    """(args, kwargs): `values` of the parameters `names`, which the public function or
    Tensor method `depth` frames up (1: the one asking) took, split as its call gave them
    (`call_keywords`): what PyTorch's overload message lists (`got (dim=float, )`). The
    function's `input`, where the call named it, is among the keywords too (`parsed`)."""
    keywords = call_keywords(depth + 1)
    given = dict(zip(names, values))
    if input is not None:
        given["input"] = input
    kwargs = {k: given[k] for k in keywords if k in given}
    return tuple(v for k, v in zip(names, values) if k not in kwargs), kwargs


def called_as_method(depth: int = 1) -> bool:
    """Whether the public function `depth` frames up (1: the function asking) was called as
    a Tensor method, not through the torch namespace's protocol wrapper: for
    the functions without `out`, whose method is the function itself (`method_form`). Asked on
    error paths only, where PyTorch's parser counts positions from the first argument after
    `self` for a method and from `input` for a function."""
    caller = sys._getframe(depth + 1)
    if caller.f_code.co_filename != WRAPPER_FILE:
        return True
    # (a wrapper's namespace holds its `info`: [public, fn, label, flags]; while a mode is
    # active the methods are wrappers too, labelled `torch.Tensor.<name>`)
    info = caller.f_globals.get("info")
    return info is not None and info[2].startswith("torch.Tensor.")


def int_arguments(name: str, *named, skip: int = 0) -> None:
    """PyTorch's parser's TypeError for the first of `named` (parameter, value) pairs, the
    parameters a public function without `out` takes after `input` (after `skip` others), in
    order, that is no int; positions counted as the caller's caller was called
    (`called_as_method`)."""
    method = called_as_method(2)
    for position, (param, value) in enumerate(named, (1 if method else 2) + skip):
        if value.__class__ is not int and not is_int_argument(value):
            # (read from the call's code only for the argument refused)
            keyword = method and param in call_keywords(2)
            int_parameter(value, name, param, None if keyword else position)


def int_list_argument(value, name: str, param: str, index: int):
    """`value` (an `int[]` parameter of a public function without `out`, the `index`-th
    after `input`), or PyTorch's parser's TypeError (`int_list_error`), its position counted
    as the caller's caller was called (`called_as_method`)."""
    if int_list_error(value, name, param, index) is not None:
        if param in call_keywords(2):
            raise int_list_error(value, name, param, None)
        raise int_list_error(value, name, param, index if called_as_method(2) else index + 1)
    return value


def not_a_tensor(value, name: str, param: str, position: int) -> TypeError:
    """PyTorch's parser's TypeError for `value` given for the Tensor parameter `param` of the
    method asking (its `position`, which PyTorch names unless the call gave it by keyword)."""
    where = "" if param in call_keywords(2) else f" (position {position})"
    return TypeError(f"{name}(): argument '{param}'{where} must be Tensor, not "
                     f"{python_type_name(value)}")


def int_parameters(name: str, first: int, *named) -> None:
    """`int_parameter`'s check of each (parameter, value) pair in `named`, given by position
    from `first` on."""
    for position, (param, value) in enumerate(named, first):
        int_parameter(value, name, param, position)


def int_list_parameter(value, name: str, param: str, position: int):
    """`value` (an `int[]` parameter: one int or a sequence of them), or PyTorch's parser's
    TypeError naming the argument and its `position` (`int_list_error`)."""
    error = int_list_error(value, name, param, position)
    if error is not None:
        raise error
    return value


# The name a method's copy gives the public function's `out` parameter: no call passes it,
# so `x.exp(out=y)` finds no `out` and raises Python's TypeError.
_HIDDEN_OUT = "_out_of_the_function_form"

_COPIES: dict = {}  # a public function -> its `method_form` (aliases share one copy)


def method_form(fn):
    """`fn` as a Tensor method, refusing `out=`: PyTorch's Tensor methods take no `out`
    (`x.diff(out=y)` raises TypeError), while the public functions they share code with do
    (the function form's out= guard writes into it; the bare function ignores it). For a
    plain function with a keyword-only `out`, a copy whose code calls that parameter
    otherwise: no wrapper frame, so `x.exp()` costs what it did, and Python's message is
    PyTorch's for methods with keywords (`diff() got an unexpected keyword argument
    'out'`). A closure wrapping such a function (autocast's `__wrapped__`) is copied around
    the inner copy, again without a frame. Anything else is `fn`.

    A copy's `with_out` is the function itself, which the out= guard of the public name
    runs (`_out.handle_out`)."""
    if fn.__class__ is not types.FunctionType:
        return fn
    copy = _COPIES.get(fn)
    if copy is None:
        inner = getattr(fn, "__wrapped__", None)
        copy = _COPIES[fn] = _hide_out(fn) if inner is None else _rewrapped(fn, inner)
    return copy


def is_method_copy(local_names) -> bool:
    """Whether the running function is a Tensor method's copy (`method_form`), given its
    `locals()`: the copy's `out` parameter goes by another name. Asked on error paths only,
    where PyTorch's parser counts positions from `input` for a function and from the first
    argument after `self` for a method."""
    return _HIDDEN_OUT in local_names


def method_copy(fn):
    """The `method_form` made of `fn` so far (None: none made yet)."""
    try:
        return _COPIES.get(fn)
    except TypeError:  # (an unhashable value)
        return None


def _hide_out(fn):
    """A copy of plain function `fn` whose keyword-only `out` no call can name (`fn` itself
    when it has none)."""
    code = fn.__code__
    names = code.co_varnames
    first, last = code.co_argcount, code.co_argcount + code.co_kwonlyargcount
    if "out" not in names[first:last] or "out" in code.co_cellvars:
        return fn  # (an `out` a nested function reads lives in a cell of that name)
    at = names.index("out")
    hidden = code.replace(co_varnames=names[:at] + (_HIDDEN_OUT,) + names[at + 1:])
    copy = types.FunctionType(hidden, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = {(_HIDDEN_OUT if k == "out" else k): v
                           for k, v in (fn.__kwdefaults__ or {}).items()}
    copy.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "out"}
    return _with_metadata(copy, fn, None)


def _rewrapped(fn, inner):
    """Wrapper `fn` (a closure over `inner`) made again over `method_form(inner)`."""
    bare = method_form(inner)
    if bare is inner or not fn.__closure__:
        return fn
    cells = tuple(types.CellType(bare) if c.cell_contents is inner else c
                  for c in fn.__closure__)
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              cells)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__annotations__ = dict(fn.__annotations__)
    return _with_metadata(copy, fn, bare)


def _with_metadata(copy, fn, wrapped):
    """`copy` of `fn` with its name, documentation, module and attributes, wrapping `wrapped`
    (a plain function's copy wraps nothing: the protocol's exact wrappers, `a @ b`'s among
    them, are for functions that wrap none)."""
    copy.__dict__.update(fn.__dict__)
    copy.__doc__, copy.__module__ = fn.__doc__, fn.__module__
    copy.__qualname__ = fn.__qualname__
    if wrapped is not None:
        copy.__wrapped__ = wrapped
    copy.with_out = fn
    return copy


# ---------------------------------------------------------------- PyTorch's overloads


class Overloads:
    """One function's overloads as PyTorch's messages write them, for a function (`input`
    first) and for a method, parsed at the first call that needs them."""

    __slots__ = ("_texts", "_parsed")

    def __init__(self, function: tuple, method: tuple) -> None:
        self._texts = (function, method)
        self._parsed = None

    def of(self, method: bool) -> tuple:
        """The overloads of the method (`method`) or of the function, parsed."""
        if self._parsed is None:
            self._parsed = tuple(tuple(_parse(t) for t in texts) for texts in self._texts)
        return self._parsed[method]


def parsed(name: str, overloads: Overloads, input, args: tuple, kwargs: dict,
           method: bool) -> tuple:
    """(the index of the overload the call fits, its arguments by name), or PyTorch's
    TypeError for a call that fits none (`input` among `kwargs` where the call named it).
    NumPy's `axis` and `keepdims` stand for `dim` and `keepdim`, as PyTorch's parser reads
    them."""
    found = overloads.of(method)
    given = args if method or "input" in kwargs else (input, *args)
    if "axis" in kwargs or "keepdims" in kwargs:
        # (a NumPy name stands for a parameter no other argument fills)
        filled = {p.name for params in found
                  for p in [q for q in params if not q.keyword_only][:len(given)]}
        renamed = {}
        for k, v in kwargs.items():
            target = {"axis": "dim", "keepdims": "keepdim"}.get(k, k)
            if target != k and (target in kwargs or target in filled):
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            renamed[target] = v
        kwargs = renamed
    params, bound = _resolve(name, found, given, kwargs)
    return found.index(params), bound


# `Tensor.to`'s overloads, in the order PyTorch tries them: a number stands for the tensor
# PyTorch would make of it (`x.to(1.5)` converts to float64), while an int is a device index.
_TO_TAIL = "bool non_blocking=False, bool copy=False, *, MemoryFormat memory_format=None"
_TO_TEXTS = (f"Device? device=None, ScalarType? dtype=None, {_TO_TAIL}",
             f"ScalarType dtype, {_TO_TAIL}", f"TensorOrNumber tensor, {_TO_TAIL}")
_TO = Overloads(_TO_TEXTS, _TO_TEXTS)
_TO_KEYWORDS = {"device", "dtype", "non_blocking", "copy", "memory_format"}


def _number_dtype(value):
    """The dtype of the tensor PyTorch's parser makes of a number given for a tensor."""
    if value.__class__ is bool:
        return _dtype.bool_
    if isinstance(value, complex):  # (NumPy's complex128 is one; its complex64 is not)
        return _dtype.complex128
    if isinstance(value, (int, np.integer)):
        return _dtype.int64
    return _dtype.float64  # (NumPy's bool and complex64 too, which PyTorch reads as floats)


def to_arguments(args: tuple, kwargs: dict) -> tuple:
    """(device, dtype, copy, memory_format) of a `Tensor.to` call, bound to the overload it
    fits as PyTorch's parser binds it, or PyTorch's TypeError for one that fits none."""
    # The common calls, bound without the parser: `to(device)`, `to(other)`, keywords alone.
    if not args:
        if kwargs.keys() <= _TO_KEYWORDS:
            device, dtype = kwargs.get("device"), kwargs.get("dtype")
            memory_format = kwargs.get("memory_format")
            if (device is None or device.__class__ is str or isinstance(device, Device)) and \
                    (dtype is None or dtype.__class__ is _dtype.dtype) and \
                    kwargs.get("non_blocking", False).__class__ is bool and \
                    kwargs.get("copy", False).__class__ is bool and memory_format is None:
                return device, dtype, kwargs.get("copy", False), None
    elif len(args) == 1 and not kwargs:
        given = args[0]
        if given.__class__ is str or isinstance(given, Device):
            return given, None, False, None
        if isinstance(given, Tensor):
            return given.device, given.dtype, False, None
    index, given = parsed("to", _TO, None, args, kwargs, True)
    if index == 2:
        other = given["tensor"]
        if isinstance(other, Tensor):
            device, dtype = other.device, other.dtype
        else:
            device, dtype = None, _number_dtype(other)
    else:
        device, dtype = given.get("device"), given["dtype"]
    if dtype is not None:
        dtype = _dtype.as_dtype(dtype)
    if isinstance(device, np.integer):
        device = int(device)
    return device, dtype, given["copy"], given["memory_format"]
