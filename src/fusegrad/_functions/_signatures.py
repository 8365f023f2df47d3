"""PyTorch's argument parser for functions declared by signature strings (`ops/foreach.py`'s
overloads, and the reductions' whose messages it gives): an overload's parameters parsed
from its text, the call's arguments bound to the first overload they fit, and PyTorch's
TypeError naming what is wrong where they fit none."""

from __future__ import annotations

import numbers
from operator import itemgetter
from typing import Any

import numpy as np

from .. import _dtype
from .._device import device as Device
from .._symbolic import SymInt
from .._tensor import Tensor
from .._type_names import python_type_name

_REQUIRED = object()  # a parameter without a default


class _Param(tuple):
    """One parameter of an overload: (kind, name, default, keyword_only). A tuple with named
    fields written out (a `NamedTuple` class takes a sixth of a millisecond to make at
    import)."""

    __slots__ = ()
    kind = property(itemgetter(0))  # TensorList, ScalarList, Number, Tensor, bool, ...
    name = property(itemgetter(1))
    default = property(itemgetter(2))  # (_REQUIRED for none)
    keyword_only = property(itemgetter(3))

    def __new__(cls, kind: str, name: str, default: Any, keyword_only: bool) -> _Param:
        return tuple.__new__(cls, (kind, name, default, keyword_only))


# The defaults the signatures write (`ops/foreach.py`'s, and the reductions' that share this
# parser for their messages).
_DEFAULTS = {"0": 0, "1": 1, "2": 2, "-1": -1, "None": None, "False": False, "True": True}
_PARSED: dict[str, tuple[_Param, ...]] = {}


def _parse(signature: str) -> tuple[_Param, ...]:
    """The parameters of an overload written as `ops/foreach.py` writes them (each signature
    parsed once: the in-place and out-of-place forms share theirs)."""
    parsed = _PARSED.get(signature)
    if parsed is not None:
        return parsed
    params, keyword_only = [], False
    for part in signature.split(", ") if signature else ():  # ("": a method's `()`)
        if part == "*":
            keyword_only = True
            continue
        declared, _, default = part.partition("=")
        kind, name = declared.split()
        params.append(_Param(kind, name, _DEFAULTS[default] if default else _REQUIRED,
                             keyword_only))
    parsed = _PARSED[signature] = tuple(params)
    return parsed


# How PyTorch's messages spell each kind.
_SHOWN = {"TensorList": "tuple of Tensors", "ScalarList": "tuple of Scalars",
          "int[]": "tuple of ints", "int[1]": "tuple of ints", "ScalarType?": "torch.dtype",
          "ScalarType": "torch.dtype", "MemoryFormat?": "torch.memory_format",
          "MemoryFormat": "torch.memory_format", "Device?": "torch.device",
          "TensorOrNumber": "Tensor"}


def _shown(p: _Param) -> str:
    text = f"{_SHOWN.get(p.kind, p.kind.rstrip('?'))} {p.name}"
    return text if p.default is _REQUIRED else f"{text} = {p.default}"


def _overload_text(params: tuple[_Param, ...]) -> str:
    """An overload's parameters as PyTorch's messages list them."""
    shown = [_shown(p) for p in params if not p.keyword_only]
    keyword = [_shown(p) for p in params if p.keyword_only]
    return ", ".join(shown + (["*", *keyword] if keyword else []))


def _type_name(value) -> str:
    """A value's type as PyTorch's argument errors name it (`Tensor`, `float`,
    `numpy.ndarray`, `torch.dtype`)."""
    cls = type(value)
    if isinstance(value, Tensor):
        return cls.__name__  # `Tensor`, or a subclass's own name (`Parameter`)
    if cls.__module__ == "fusegrad":  # (PyTorch's are C types: `torch.dtype`, `torch.device`)
        return f"torch.{cls.__qualname__}"
    if cls.__name__ == "MemoryFormat" and cls.__module__.startswith("fusegrad."):
        return "torch.memory_format"
    return python_type_name(value)


# ---------------------------------------------------------------- argument matching


def _is_number(value) -> bool:
    return isinstance(value, (numbers.Number, np.bool_)) and not isinstance(value, Tensor)


def _matches(kind: str, value) -> bool:
    """Whether `value` can be an argument of `kind`, as PyTorch's parser decides."""
    if kind == "TensorList":
        return isinstance(value, (list, tuple))  # the elements are checked when converted
    if kind == "ScalarList":
        return isinstance(value, (list, tuple)) and all(_is_number(v) for v in value)
    if kind == "Number":  # a 0-dim tensor outside the graph is a number, too
        return _is_number(value) or (isinstance(value, Tensor) and value.ndim == 0 and
                                     not value.requires_grad)
    if kind == "Tensor":
        return isinstance(value, Tensor)
    if kind == "int[]":  # a list or tuple of integers (`tuple of ints`)
        return isinstance(value, (list, tuple)) and all(_matches("int", v) for v in value)
    if kind == "int[1]":  # the same, or one integer
        return _matches("int", value) or _matches("int[]", value)
    if kind == "bool":  # (not NumPy's bool: PyTorch's parser names it `numpy.bool`)
        return value.__class__ is bool
    if kind == "int":  # an integer, or a tensor of one integer (not a bool)
        if isinstance(value, Tensor):
            return value.numel() == 1 and not value.dtype.is_floating_point and \
                not value.dtype.is_complex and value.dtype is not _dtype.bool_
        return isinstance(value, (int, np.integer, SymInt)) and not isinstance(value, bool)
    if kind == "ScalarType?" or kind == "ScalarType":  # a dtype, or a Python type for one
        return (value is None and kind == "ScalarType?") or isinstance(value, _dtype.dtype) \
            or (value.__class__ is type and value in _dtype.PYTHON_TYPES)
    if kind == "Device?":  # a device, its name, or a device index (not a bool)
        return value is None or isinstance(value, (str, Device)) or \
            (isinstance(value, (int, np.integer)) and not isinstance(value, bool))
    if kind == "TensorOrNumber":  # `Tensor.to`'s, where a number stands for its tensor
        return isinstance(value, Tensor) or _is_number(value)
    if kind == "MemoryFormat":  # (`Tensor.to`'s, which meets no other check)
        return value is None or (type(value).__name__ == "MemoryFormat" and
                                 type(value).__module__.startswith("fusegrad."))
    return True  # MemoryFormat?: clone checks it itself


def _bind(params: tuple[_Param, ...], args: tuple, kwargs: dict) -> dict | None:
    """The arguments by parameter name, or None when they do not fit these parameters."""
    positional = [p for p in params if not p.keyword_only]
    if len(args) > len(positional):
        return None
    bound = {p.name: a for p, a in zip(positional, args)}
    for name, value in kwargs.items():
        if name in bound or all(p.name != name for p in params):
            return None
        bound[name] = value
    for p in params:
        if p.name not in bound:
            if p.default is _REQUIRED:
                return None
            bound[p.name] = p.default
        elif not _matches(p.kind, bound[p.name]):
            return None
    return bound


def _signature_error(fname: str, params: tuple[_Param, ...], args: tuple,
                     kwargs: dict) -> TypeError:
    """PyTorch's message for arguments that do not fit the one overload they could be meant
    for: too many, missing, of a wrong type (the first such parameter), or unknown."""
    positional = [p for p in params if not p.keyword_only]
    if len(args) > len(positional):
        low, high = sum(p.default is _REQUIRED for p in positional), len(positional)
        takes = f"{high} positional argument{'s' if high > 1 else ''}" if low == high else \
            f"from {low} to {high} positional arguments"
        return TypeError(f"{fname}() takes {takes} but {len(args)} were given")
    for i, p in enumerate(params):
        if i < len(args) and not p.keyword_only:
            given, where = args[i], f" (position {i + 1})"
        elif p.name in kwargs:
            given, where = kwargs[p.name], ""
        elif p.default is _REQUIRED:
            missing = [q.name for q in params[i:] if q.default is _REQUIRED and
                       q.name not in kwargs]
            quoted = ", ".join(f'"{m}"' for m in missing)
            # (sic: PyTorch's plural is the other way round)
            return TypeError(f"{fname}() missing {len(missing)} required positional "
                             f"argument{'s' if len(missing) == 1 else ''}: {quoted}")
        else:
            continue
        if not _matches(p.kind, given):
            return TypeError(f"{fname}(): argument '{p.name}'{where} must be "
                             f"{_SHOWN.get(p.kind, p.kind.rstrip('?'))}, not "
                             f"{_type_name(given)}")
    names = [p.name for p in params]
    for name in kwargs:
        if name not in names:
            return TypeError(f"{fname}() got an unexpected keyword argument '{name}'")
        if names.index(name) < len(args):
            return TypeError(f"{fname}() got multiple values for argument '{name}'")
    return TypeError(f"{fname}(): invalid arguments")


class _Shown(str):
    """A string that `repr` writes without quotes (in a tuple's repr)."""

    def __repr__(self) -> str:
        return str(self)


def _described(value) -> str:
    """A value as PyTorch's notes on a failed overload describe it (`list of [Tensor]`)."""
    if isinstance(value, list):
        return f"list of [{', '.join(_type_name(v) for v in value)}]"
    if isinstance(value, tuple):  # written as Python writes a tuple: `(Tensor,)`
        return f"tuple of {tuple(_Shown(_type_name(v)) for v in value)!r}"
    return _type_name(value)


def _note(params: tuple[_Param, ...], args: tuple, kwargs: dict) -> str:
    """PyTorch's note under an overload taking as many arguments as were given (counting its
    `*`): the keywords it does not know, or every argument, each marked `!...!` unless it
    is a tensor given for a `Tensor` or an int for an `int` (the kinds its check
    recognises) without a default (which its check does not recognise either)."""
    # (PyTorch counts the parts of the overload's text: `*` is one, and `()` one too)
    slots = max(1, len(params) + any(p.keyword_only for p in params))
    if len(args) + len(kwargs) != slots:
        return ""
    # A parameter with a default is known by a name with its default appended, which no
    # keyword spells: PyTorch reports those keywords as incorrect, too (in the reverse of
    # their order in the call, as it lists them).
    known = {p.name for p in params if p.default is _REQUIRED}
    wrong = [k for k in reversed(kwargs) if k not in known]
    if wrong:
        return f"      didn't match because some of the keywords were incorrect: " \
               f"{', '.join(wrong)}\n"
    shown = []
    positional = [p for p in params if not p.keyword_only]
    for i, a in enumerate(args):
        fits = i < len(positional) and _recognised(positional[i], a)
        shown.append(_described(a) if fits else f"!{_described(a)}!")
    for p in params:
        if p.name in kwargs:
            value = kwargs[p.name]
            text = f"{p.name}={_described(value)}"
            shown.append(text if _recognised(p, value) else f"!{text}!")
    # (a trailing comma after keywords alone, as in the list of what was given)
    return "      didn't match because some of the arguments have invalid types: " \
           f"({', '.join(shown)}{', ' if kwargs and not args else ''})\n"


def _recognised(p: _Param, value) -> bool:
    """Whether PyTorch's note takes `value` for parameter `p`: a tensor for a `Tensor`, an int
    for an `int`, the parameter without a default."""
    return p.default is _REQUIRED and p.kind in ("Tensor", "int") and _matches(p.kind, value) \
        and (p.kind == "Tensor" or not isinstance(value, Tensor))


def _invalid_combination(fname: str, overloads, args: tuple, kwargs: dict) -> TypeError:
    """PyTorch's message for arguments that fit none of several overloads."""
    given = [_type_name(a) for a in args]
    # (keywords in the reverse of their order in the call, as PyTorch lists them)
    keywords = [f"{k}={_type_name(v)}" for k, v in reversed(kwargs.items())]
    got = ", ".join(given + keywords) if given else "".join(f"{k}, " for k in keywords)
    lines = "".join(f" * ({_overload_text(params)})\n{_note(params, args, kwargs)}"
                    for params in overloads)
    return TypeError(f"{fname}() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{lines}")


def _resolve(fname: str, overloads, args: tuple, kwargs: dict):
    """The first overload the arguments fit, and the arguments by name, with each tensor list
    checked to hold tensors only."""
    for params in overloads:
        bound = _bind(params, args, kwargs)
        if bound is not None:
            break
    else:
        # When the number of arguments leaves one overload, PyTorch says what is wrong with
        # them for it; otherwise it lists the overloads.
        count = len(args) + len(kwargs)
        plausible = [ps for ps in overloads
                     if sum(p.default is _REQUIRED for p in ps) <= count <= len(ps)]
        if len(overloads) == 1 or len(plausible) == 1:
            raise _signature_error(fname, (plausible or overloads)[0], args, kwargs)
        raise _invalid_combination(fname, overloads, args, kwargs)
    for i, p in enumerate(params):
        value = bound[p.name]
        if p.kind == "TensorList" and value is not None:  # (None: an `out` not given)
            for j, t in enumerate(value):
                if not isinstance(t, Tensor):
                    raise TypeError(f"expected Tensor as element {j} in argument {i}, but got "
                                    f"{_type_name(t)}")
        elif p.kind == "Number" and isinstance(value, Tensor):
            bound[p.name] = value.item()
        elif p.kind in ("Number", "ScalarList"):
            bound[p.name] = _plain(value)
    return params, bound


def _plain(value):
    """Python numbers for NumPy scalars (in a list, too), as PyTorch reads them."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


# ---------------------------------------------------------------- PyTorch's list checks
