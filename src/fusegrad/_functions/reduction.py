"""Reductions: sum, mean, amax/amin, max/min, argmax, prod, var/std, norm, logsumexp, the
cumulative ops, all/any, median, mode, topk, sort; softmax and log_softmax.
"""

from __future__ import annotations

import builtins
import numbers
import operator

import numpy as np

from .. import return_types
from .._dispatch import call, call1
from .._dtype import as_dtype
from .._dtype import dtype as _dtype_cls
from .._symbolic import SymInt
from .._tensor import Tensor, int_list_error
from .._torch_function_wrappers import KEYWORD_PARSERS
from .._type_names import python_type_name
from ..ops import REGISTRY
from ..ops import pointwise as P
from ..ops import reduction as R
from . import _args, _signatures
from ._args import dims as _dims

# ---------------------------------------------------------------- reductions


class _NotGiven:
    """The default of an argument PyTorch's parser tells apart when not given from given as
    None: sum's, mean's and prod's `dim` and `keepdim` (sum's None is the overload with a
    dim, prod's a type error; keepdim alone fits no overload), count_nonzero's `keepdim`
    (taken only to be refused)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not given>"


_NOT_GIVEN = _NotGiven()


def _numpy(name, dim, keepdim, axis, keepdims, default=None):
    """(dim, keepdim) once NumPy's `axis` and `keepdims` are read for them."""
    return _args.axis(name, dim, axis, default), _args.keepdims(name, keepdim, keepdims)


# The reductions take NumPy's `axis` and `keepdims` too, as PyTorch's parser does; checked
# with `is not None` first, they cost the common call two comparisons.


# sum's and mean's two overloads as PyTorch's messages list them: function, then method.
_SUM_OVERLOADS = {
    ("sum", False): (" * (Tensor input, *, torch.dtype dtype = None)\n"
                     " * (Tensor input, tuple of ints dim, bool keepdim = False, *, "
                     "torch.dtype dtype = None, Tensor out = None)\n"),
    ("mean", False): (" * (Tensor input, *, torch.dtype dtype = None, Tensor out = None)\n"
                      " * (Tensor input, tuple of ints dim, bool keepdim = False, *, "
                      "torch.dtype dtype = None, Tensor out = None)\n"),
}
for _name in ("sum", "mean"):
    _SUM_OVERLOADS[_name, True] = (" * (*, torch.dtype dtype = None)\n"
                                   " * (tuple of ints dim, bool keepdim = False, *, "
                                   "torch.dtype dtype = None)\n")


def _sum_args(name: str, dim, keepdim, dtype, method: bool, out_given: bool,
              axis, keepdims) -> tuple:
    """sum's or mean's (dim, keepdim) off the common path: `keepdim` without `dim` fits no
    overload (alone, PyTorch's message lists both; with more, the one with `dim` misses
    it), and `dim` given, None included, is the overload with `dim` (SumBackward1), None or
    an empty list meaning every dim. NumPy's `axis` and `keepdims` stand for them."""
    if axis is not None or keepdims is not None:
        dim = None if dim is _NOT_GIVEN else dim
        keepdim = False if keepdim is _NOT_GIVEN else keepdim
        dim, keepdim = _numpy(name, dim, keepdim, axis, keepdims)
        return dim, keepdim, dim is None and not keepdim
    if dim is _NOT_GIVEN:  # (and `keepdim` given)
        if (dtype is not None) + out_given == 0:
            got = f"keepdim={python_type_name(keepdim)}"
            got = f"{got}, " if method else f"Tensor, {got}"
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n{_SUM_OVERLOADS[name, method]}")
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    raise AssertionError("only called without dim or with NumPy's names")


def sum(input, dim=_NOT_GIVEN, keepdim=_NOT_GIVEN, *, dtype=None,  # noqa: A001
        out=None, axis=None, keepdims=None):
    """Sum of all elements, or over `dim` (all dims for None or an empty list)."""
    if dim is _NOT_GIVEN and keepdim is _NOT_GIVEN and axis is None and keepdims is None:
        if dtype is None:
            return call1(R.sum_, input)
        if _no_dtype(dtype):
            _args.parsed("sum", _SUM, input,
                         *_args.as_called(("dtype",), (dtype,), input=input),
                         _args.is_method_copy(locals()))
        return call(R.sum_, input, as_dtype(dtype))
    if dim.__class__ is not int and dim is not _NOT_GIVEN and not _dims_argument(dim):
        _dims_error("sum", dim)
        _args.parsed("sum", _SUM, input,
                     *_args.as_called(("dim", "keepdim"), (dim,) if keepdim is _NOT_GIVEN
                                      else (dim, keepdim), input=input),
                     _args.is_method_copy(locals()))
    if dim is _NOT_GIVEN or axis is not None or keepdims is not None:
        dim, keepdim, whole = _sum_args("sum", dim, keepdim, dtype,
                                        _args.is_method_copy(locals()), out is not None,
                                        axis, keepdims)
        if whole:  # (NumPy's spelling of no dim at all)
            return call(R.sum_, input, as_dtype(dtype)) if dtype is not None else \
                call1(R.sum_, input)
    elif keepdim is _NOT_GIVEN:
        keepdim = False
    elif keepdim.__class__ is not builtins.bool:  # (PyTorch's parser takes no other)
        _args.parsed("sum", _SUM, input,
                     *_args.as_called(("dim", "keepdim"), (dim, keepdim), input=input),
                     _args.is_method_copy(locals()))
    if dtype is not None:
        dtype = as_dtype(dtype)
    return call(R.sum_dim, input, (dim,) if dim.__class__ is int else _args.reduced_dims(dim),
                keepdim, dtype)


def mean(input, dim=_NOT_GIVEN, keepdim=_NOT_GIVEN, *, dtype=None, out=None, axis=None,
         keepdims=None):
    """Mean of all elements, or over `dim` (all dims for None or an empty list)."""
    if dim is _NOT_GIVEN and keepdim is _NOT_GIVEN and axis is None and keepdims is None:
        if dtype is None:
            return call1(R.mean, input)
        if _no_dtype(dtype):
            _args.parsed("mean", _MEAN, input,
                         *_args.as_called(("dtype",), (dtype,), input=input),
                         _args.is_method_copy(locals()))
        return call(R.mean, input, as_dtype(dtype))
    if dim.__class__ is not int and dim is not _NOT_GIVEN and not _dims_argument(dim):
        _dims_error("mean", dim)
        _args.parsed("mean", _MEAN, input,
                     *_args.as_called(("dim", "keepdim"), (dim,) if keepdim is _NOT_GIVEN
                                      else (dim, keepdim), input=input),
                     _args.is_method_copy(locals()))
    if dim is _NOT_GIVEN or axis is not None or keepdims is not None:
        dim, keepdim, whole = _sum_args("mean", dim, keepdim, dtype,
                                        _args.is_method_copy(locals()), out is not None,
                                        axis, keepdims)
        if whole:  # (NumPy's spelling of no dim at all)
            return call(R.mean, input, as_dtype(dtype)) if dtype is not None else \
                call1(R.mean, input)
    elif keepdim is _NOT_GIVEN:
        keepdim = False
    elif keepdim.__class__ is not builtins.bool:  # (PyTorch's parser takes no other)
        _args.parsed("mean", _MEAN, input,
                     *_args.as_called(("dim", "keepdim"), (dim, keepdim), input=input),
                     _args.is_method_copy(locals()))
    if dtype is not None:
        dtype = as_dtype(dtype)
    return call(R.mean_dim, input, (dim,) if dim.__class__ is int else _args.reduced_dims(dim),
                keepdim, dtype)


def _dims_argument(dim) -> bool:
    """Whether `dim` reads as sum's and mean's `dim`: None, an int or a list of ints."""
    return dim is None or _args.is_int_argument(dim) or (
        isinstance(dim, (list, tuple)) and builtins.all(map(_args.is_int_argument, dim)))


def _dims_error(name: str, dim) -> None:
    """PyTorch's parser's error for a list of dims whose first is an int and a later one is
    not (it fails to unpack the later one); other dims fit no overload (`_SUM`)."""
    if isinstance(dim, (list, tuple)) and dim and _args.is_int_argument(dim[0]):
        raise _args.int_list_error(dim, name, "dim", 1)


# sum's and mean's overloads, for the message of a dim that fits neither (the one without
# `dim` is listed first; mean's function takes `out` in both)
_DIM_OVERLOAD = "Tensor input, int[1] dim, bool keepdim=False, *, ScalarType? dtype=None, " \
    "Tensor out=None"
_METHOD_OVERLOADS = ("*, ScalarType? dtype=None",
                     "int[1] dim, bool keepdim=False, *, ScalarType? dtype=None")
_SUM = _args.Overloads(("Tensor input, *, ScalarType? dtype=None", _DIM_OVERLOAD),
                       _METHOD_OVERLOADS)
_MEAN = _args.Overloads(("Tensor input, *, ScalarType? dtype=None, Tensor out=None",
                         _DIM_OVERLOAD), _METHOD_OVERLOADS)


def amax(input, dim=(), keepdim=False, *, out=None, axis=None, keepdims=None):
    """Maximum over `dim` (all dims by default)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("amax", dim, keepdim, axis, keepdims, ())
    if dim.__class__ is not tuple and dim.__class__ is not int:  # (PyTorch's int[] check)
        _args.int_list_argument(dim, "amax", "dim", 1)
    return call(R.amax, input, _dims(dim) or (), keepdim)


def dtype_argument(fn: str, dtype):
    """`dtype` as a dtype, or the argument parser's TypeError for another object (`fn`'s
    only overload takes a `dtype`: softmax, cumsum, nansum, ...)."""
    if not isinstance(dtype, (_dtype_cls, type)):
        raise TypeError(f"{fn}(): argument 'dtype' must be torch.dtype, not "
                        f"{python_type_name(dtype)}")
    return as_dtype(dtype)


def _softmax_args(name: str, args: tuple, kwargs: dict, axis, method: bool) -> tuple:
    """softmax's (dim, dtype) from a call that left the common path (one int dim by
    position), with PyTorch's parser's errors: a missing dim, too many arguments, an unknown
    keyword, and a dim that is no int (its position named only when given by position)."""
    given, where = _args.bound(name, ("dim", "dtype"), args, kwargs, method)
    if axis is not _NOT_GIVEN:  # NumPy's name, for a dim not given otherwise
        if "dim" in given:
            raise TypeError(f"{name}() got an unexpected keyword argument 'axis'")
        given["dim"] = axis
    if "dim" not in given:
        raise _args.missing(name, "dim")
    dim = given["dim"]
    if dim is None or _not_int(dim):
        raise TypeError(f"{name}(): argument 'dim'{where.get('dim', '')} must be int, not "
                        f"{python_type_name(dim)}")
    dtype = given.get("dtype")
    return _args.index(dim), None if dtype is None else dtype_argument(name, dtype)


def _softmax_like(op, name: str, doc: str):
    """softmax or log_softmax (`op`, named `name`): the common calls (one int dim, by
    position or keyword) go straight to the op; any other is read by `_softmax_args`."""

    def fn(input, *args, _stacklevel=3, axis=_NOT_GIVEN, out=None, **kwargs):
        if axis is _NOT_GIVEN:
            if len(args) == 1 and args[0].__class__ is int and not kwargs:
                return call(op, input, args[0], False)
            if not args and len(kwargs) == 1 and kwargs.get("dim").__class__ is int:
                return call(op, input, kwargs["dim"], False)
        dim, dtype = _softmax_args(name, args, kwargs, axis, _args.is_method_copy(locals()))
        if dtype is not None:
            input = input.to(dtype)
        return call(op, input, dim, False)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


softmax = _softmax_like(R.softmax, "softmax", "exp(x) / sum(exp(x)) along `dim`.")
log_softmax = _softmax_like(R.log_softmax, "log_softmax",
                            "log(softmax(x)) along `dim`, computed stably.")


# ---------------------------------------------------------------- more reductions

def _rt(name, pair):
    return getattr(return_types, name)(*pair)


def amin(input, dim=(), keepdim=False, *, out=None, axis=None, keepdims=None):
    """Minimum over `dim` (all dims by default)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("amin", dim, keepdim, axis, keepdims, ())
    if dim.__class__ is not tuple and dim.__class__ is not int:  # (PyTorch's int[] check)
        _args.int_list_argument(dim, "amin", "dim", 1)
    return call(R.amin, input, _dims(dim) or (), keepdim)


# ---------------------------------------------------------------- PyTorch's overloads
# max, min, median, nanmedian, mode and the cumulative ops take their arguments as
# `*args, **kwargs`: the plain calls (an int dim, a bool keepdim) go straight to their op;
# any other is matched against PyTorch's overloads (`_args.parsed`), which gives its
# messages for what fits none (a None or float dim, an int keepdim, keepdim without dim)
# and the bound arguments for what fits one.


def _plain_dim(args: tuple, kwargs: dict):
    """(dim, keepdim) of a call giving an int `dim` and at most a bool `keepdim` (False if
    not), by position or keyword; None for any other call."""
    n = len(args)
    if not kwargs:
        if n == 1:
            dim, keepdim = args[0], False
        elif n == 2:
            dim, keepdim = args
        else:
            return None
    elif n == 0 and len(kwargs) == 1 + ("keepdim" in kwargs):
        dim, keepdim = kwargs.get("dim"), kwargs.get("keepdim", False)
    elif n == 1 and len(kwargs) == 1:
        dim, keepdim = args[0], kwargs.get("keepdim")
    else:
        return None
    if dim.__class__ is int and keepdim.__class__ is builtins.bool:
        return dim, keepdim
    return None


_MAXMIN = _args.Overloads(
    ("Tensor input, *, Tensor out=None", "Tensor input, Tensor other, *, Tensor out=None",
     "Tensor input, int dim, bool keepdim=False, *, TensorList out=None"),
    ("", "Tensor other", "int dim, bool keepdim=False"))


def _maxmin(op_all, op_dim, op_binary, name):
    def fn(input, *args, out=None, **kwargs):
        if not kwargs and len(args) < 2:
            if not args:
                return call(op_all, input)
            if isinstance(args[0], Tensor):
                return call(op_binary, input, args[0])
        plain = _plain_dim(args, kwargs)
        if plain is not None:
            return _rt(name, call(op_dim, input, plain[0], plain[1]))
        which, bound = _args.parsed(name, _MAXMIN, input, args, kwargs,
                               _args.is_method_copy(locals()))
        if which == 0:
            return call(op_all, input)
        if which == 1:
            return call(op_binary, input, bound["other"])
        return _rt(name, call(op_dim, input, bound["dim"].__index__(), bound["keepdim"]))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name} of all elements; with `dim`, (values, indices) along it; with a "
                  f"tensor, the elementwise {name}imum.")
    return fn


max = _maxmin(R.max_all, R.max_dim, P.maximum, "max")  # noqa: A001
min = _maxmin(R.min_all, R.min_dim, P.minimum, "min")  # noqa: A001


# PyTorch's parser reads `dim` and `keepdim` of argmax, argmin and prod; the functions take
# them as `*args` (or keywords) so that its messages can tell a position from a keyword.


def _not_int(dim) -> bool:
    return dim.__class__ is builtins.bool or not hasattr(dim, "__index__")


def _dim_keepdim(name: str, args: tuple, dim, keepdim, method: bool,
                 required: int = 0) -> tuple:
    """(dim, keepdim, where): the positional `args` (at most two) read into `dim` and
    `keepdim`, and the position text of each given positionally, in PyTorch's words for too
    many arguments or one given twice. `required`: the positional arguments the overload
    with `dim` needs besides `input`."""
    first = 0 if method else 1  # (a function counts `input`)
    if len(args) > 2:
        raise TypeError(f"{name}() takes from {first + required} to {first + 2} positional "
                        f"arguments but {len(args) + first} were given")
    where = {}
    if args:
        if dim is not None:
            raise TypeError(f"{name}() got multiple values for argument 'dim'")
        dim, where["dim"] = args[0], f" (position {first + 1})"
        if len(args) == 2:
            if keepdim is not None and keepdim is not False:
                raise TypeError(f"{name}() got multiple values for argument 'keepdim'")
            keepdim, where["keepdim"] = args[1], f" (position {first + 2})"
    return dim, keepdim, where


def _wrong_type(name: str, param: str, where: dict, value, expected: str) -> TypeError:
    return TypeError(f"{name}(): argument '{param}'{where.get(param, '')} must be {expected}, "
                     f"not {python_type_name(value)}")


def _arg_reduction_args(name: str, args: tuple, dim, keepdim, method: bool) -> tuple:
    """argmax's / argmin's (dim, keepdim) as PyTorch's parser checks them: an int or None,
    and a bool."""
    dim, keepdim, where = _dim_keepdim(name, args, dim, keepdim, method)
    if dim is not None and _not_int(dim):
        raise _wrong_type(name, "dim", where, dim, "int")
    if keepdim.__class__ is not builtins.bool:
        raise _wrong_type(name, "keepdim", where, keepdim, "bool")
    return dim, keepdim


def argmax(input, *args, dim=None, keepdim=False, out=None, axis=None, keepdims=None):
    """Index of the maximum (of the flattened tensor without `dim`)."""
    if args or (dim is not None and dim.__class__ is not int) or \
            keepdim.__class__ is not builtins.bool:
        dim, keepdim = _arg_reduction_args("argmax", args, dim, keepdim,
                                           _args.is_method_copy(locals()))
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("argmax", dim, keepdim, axis, keepdims)
    return call(R.argmax, input, dim, keepdim)


def argmin(input, *args, dim=None, keepdim=False, out=None, axis=None, keepdims=None):
    """Index of the minimum (of the flattened tensor without `dim`)."""
    if args or (dim is not None and dim.__class__ is not int) or \
            keepdim.__class__ is not builtins.bool:
        dim, keepdim = _arg_reduction_args("argmin", args, dim, keepdim,
                                           _args.is_method_copy(locals()))
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("argmin", dim, keepdim, axis, keepdims)
    return call(R.argmin, input, dim, keepdim)


# prod's two overloads as PyTorch's messages list them, for a function and for a method.
_PROD_OVERLOADS = {
    False: (" * (Tensor input, *, torch.dtype dtype = None)\n"
            " * (Tensor input, int dim, bool keepdim = False, *, torch.dtype dtype = None, "
            "Tensor out = None)\n"),
    True: (" * (*, torch.dtype dtype = None)\n"
           " * (int dim, bool keepdim = False, *, torch.dtype dtype = None)\n"),
}


def _no_dtype(dtype) -> bool:
    """Whether `dtype` (not None) is neither a dtype nor a Python type standing for one."""
    return dtype is not None and dtype.__class__ is not _dtype_cls and \
        not isinstance(dtype, _dtype_cls) and dtype not in (builtins.float, builtins.int,
                                                             builtins.bool, builtins.complex)


def _prod_args(input, args: tuple, dim, keepdim, dtype, method: bool, out_given: bool) -> tuple:
    """prod's (dim, keepdim) as PyTorch's parser reads them. Arguments that two overloads
    could take (at most `input` and one more) and fit neither get the message listing both,
    the keywords in the reverse of their order in the call (`call_keywords`); more fit the
    one with `dim`, which names the argument that is wrong."""
    if args and dim is not _NOT_GIVEN:
        raise TypeError("prod() got multiple values for argument 'dim'")
    if len(args) == 2 and keepdim is not _NOT_GIVEN:
        raise TypeError("prod() got multiple values for argument 'keepdim'")
    keyword_dim, keyword_keepdim = dim, keepdim
    dim, keepdim, where = _dim_keepdim("prod", args, None, None, method, required=1)
    given = set(where)
    if keyword_dim is not _NOT_GIVEN:
        dim = keyword_dim
        given.add("dim")
    if keyword_keepdim is not _NOT_GIVEN:
        keepdim = keyword_keepdim
        given.add("keepdim")
    keywords = [(k, v) for k, v in (("dtype", dtype), ("keepdim", keepdim), ("dim", dim))
                if k not in where and (v is not None if k == "dtype" else k in given)]
    bad_dim = "dim" in given and _not_int(dim)
    if len(args) + len(keywords) + out_given <= 1 and ("keepdim" in given or bad_dim or
                                                       _no_dtype(dtype)):
        order = _args.call_keywords(2)
        by_keyword = not method and "input" in order
        if by_keyword:
            keywords.append(("input", input))
        # (keywords in the reverse of their order in the call, as PyTorch lists them)
        keywords.sort(key=lambda kv: -order.index(kv[0]) if kv[0] in order else 0)
        names = [] if method or by_keyword else ["Tensor"]
        names += [python_type_name(a) for a in args]
        named = [f"{k}={python_type_name(v)}" for k, v in keywords]
        got = ", ".join(names + named) if names else "".join(f"{k}, " for k in named)
        raise TypeError("prod() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n{_PROD_OVERLOADS[method]}")
    if bad_dim:
        raise _wrong_type("prod", "dim", where, dim, "int")
    if _no_dtype(dtype):
        raise _wrong_type("prod", "dtype", where, dtype, "torch.dtype")
    if "dim" not in given:
        if "keepdim" in given:  # (`dim` is required by the only overload with `keepdim`)
            raise TypeError('prod() missing 1 required positional arguments: "dim"')
        return None, False
    if "keepdim" not in given:
        return dim, False
    if keepdim.__class__ is not builtins.bool:
        raise _wrong_type("prod", "keepdim", where, keepdim, "bool")
    return dim, keepdim


def prod(input, *args, dim=_NOT_GIVEN, keepdim=_NOT_GIVEN, dtype=None, out=None, axis=None,
         keepdims=None):
    """Product of all elements, or along `dim` (`keepdim`: False unless given)."""
    if args or (dim is not _NOT_GIVEN and dim.__class__ is not int) or \
            keepdim is not _NOT_GIVEN or _no_dtype(dtype):
        dim, keepdim = _prod_args(input, args, dim, keepdim, dtype,
                                  _args.is_method_copy(locals()), out is not None)
    else:
        keepdim = False
        if dim is _NOT_GIVEN:
            dim = None
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("prod", dim, keepdim, axis, keepdims)
    if dtype is not None:
        dtype = as_dtype(dtype)
    if dim is None:
        return call(R.prod, input, dtype) if dtype is not None else call(R.prod, input)
    return call(R.prod_dim, input, dim.__index__(), keepdim, dtype)


def _var_args(dim, unbiased, correction):
    if isinstance(dim, builtins.bool):  # var(x, False): the old `unbiased` positional
        unbiased, dim = dim, None
    if correction is None and unbiased is not None:
        correction = 1 if unbiased else 0
    return _dims(dim), correction


_VAR_OVERLOADS = _args.Overloads(
    ("Tensor input, int[] dim, bool unbiased=True, bool keepdim=False, *, Tensor out=None",
     "Tensor input, int[] dim=None, *, Number correction=None, bool keepdim=False, "
     "Tensor out=None",
     "Tensor input, bool unbiased=True"),
    ("int[] dim, bool unbiased=True, bool keepdim=False",
     "int[] dim=None, *, Number correction=None, bool keepdim=False",
     "bool unbiased=True"))
_LOGIC_OVERLOADS = _args.Overloads(
    ("Tensor input, *, Tensor out=None",
     "Tensor input, int[] dim=None, bool keepdim=False, *, Tensor out=None",
     "Tensor input, int dim, bool keepdim=False, *, Tensor out=None"),
    ("", "int[] dim=None, bool keepdim=False", "int dim, bool keepdim=False"))


def _refused_dtype(name: str, overloads, input, given: tuple, keywords: dict, method: bool):
    """PyTorch's parser's TypeError for a `dtype=` these reductions have no parameter for
    (`given`: the positional arguments after `input` up to the last one not at its default,
    the usual spelling of the call; `keywords`: the others given, `dtype` last)."""
    at = 0
    while at < len(given) and given[at][1] is not given[at][0]:
        at += 1  # (the leading arguments not at their defaults: by position)
    args = tuple(value for _, value in given[:at])
    names = ("dim", "unbiased", "keepdim") if len(given) == 3 else ("dim", "keepdim")
    named = {k: v for (default, v), k in zip(given[at:], names[at:]) if v is not default}
    named.update((k, v) for k, v in keywords.items() if v is not _NOT_GIVEN)
    if overloads is None:
        raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")
    _args.parsed(name, overloads, input, args, named, method)
    raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")  # (not reached)


def _var_like(op, name, overloads=None):
    def fn(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None,
           axis=None, keepdims=None, dtype=_NOT_GIVEN):
        if dtype is not _NOT_GIVEN:  # (no overload takes one)
            _refused_dtype(name, overloads, input,
                           ((None, dim), (None, unbiased),
                            (False if keepdim is False else _NOT_GIVEN, keepdim)),
                           {"correction": _NOT_GIVEN if correction is None else correction,
                            "dtype": dtype}, _args.is_method_copy(locals()))
        if axis is not None or keepdims is not None:
            dim, keepdim = _numpy(name, dim, keepdim, axis, keepdims)
        if dim is not None and not isinstance(dim, (list, tuple, builtins.bool)) and \
                not _args.is_int_argument(dim):  # (a dim that fits no overload)
            given = [(k, v) for k, v, default in (
                ("dim", dim, None), ("unbiased", unbiased, None), ("keepdim", keepdim, False),
                ("correction", correction, None)) if v is not default]
            _args.parsed(name, overloads, input,
                         *_args.as_called(tuple(k for k, _ in given),
                                          tuple(v for _, v in given), input=input),
                         _args.is_method_copy(locals()))
        dims, correction = _var_args(dim, unbiased, correction)
        result = call(op, input, dims, correction, keepdim)
        return result

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name} over `dim` with Bessel's `correction` (1 by default)."
    return fn


var = _var_like(R.var, "var", _VAR_OVERLOADS)
std = _var_like(R.std, "std", _VAR_OVERLOADS)
_VAR_MEAN_OVERLOADS = _args.Overloads(
    ("Tensor input, int[] dim, bool unbiased=True, bool keepdim=False",
     "Tensor input, int[] dim=None, *, Number correction=None, bool keepdim=False",
     "Tensor input, bool unbiased=True"), ())
var_mean = _var_like(R.var_mean, "var_mean", _VAR_MEAN_OVERLOADS)
std_mean = _var_like(R.std_mean, "std_mean", _VAR_MEAN_OVERLOADS)


def _vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The vector `ord`-norm over `dim` (all elements by default)."""
    return call(R.vector_norm, input, ord, _dims(dim), keepdim,
                None if dtype is None else as_dtype(dtype))


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The vector p-norm (`fro` is 2) over `dim` or all elements; a matrix norm
    (`linalg.matrix_norm`) for `nuc`, or for `fro` over more than two dims."""
    if isinstance(p, str) and not (p == "fro" and (
            dim is None or isinstance(dim, int) or len(dim) <= 2)):
        from ..linalg import matrix_norm  # fusegrad.linalg imports this module

        dims = tuple(range(input.ndim)) if dim is None else (
            (dim,) if isinstance(dim, int) else dim)
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    if dim is not None and dim.__class__ is not int:
        dim = _norm_dims(dim)
    return _vector_norm(input, p, dim, keepdim, dtype=dtype)


def _norm_dims(dim):
    """`dim` of a vector norm as PyTorch's parser reads it for `linalg_vector_norm`'s
    `int[1]? dim`: ints, a bool refused first in the list (alone too) and read as an int
    after it."""
    error = int_list_error((dim,) if dim.__class__ is builtins.bool else dim,
                           "linalg_vector_norm", "dim", 3)
    if error is not None:
        raise error
    return tuple(operator.index(d) for d in dim) if isinstance(dim, (list, tuple)) else dim


_LOGSUMEXP = _args.Overloads(("Tensor input, int[1] dim, bool keepdim=False, *, Tensor out=None",),
                             ("int[1] dim, bool keepdim=False",))


def logsumexp(input, *args, out=None, **kwargs):
    """log(sum(exp(input))) over `dim` (an int or a sequence of them), computed stably."""
    n = len(args)
    if not kwargs and (n == 1 or n == 2 and args[1].__class__ is builtins.bool) and \
            args[0].__class__ in (int, list, tuple):
        dim, keepdim = args[0], n == 2 and args[1]
    else:
        bound = _args.parsed("logsumexp", _LOGSUMEXP, input, args, kwargs,
                             _args.is_method_copy(locals()))[1]
        dim, keepdim = bound["dim"], bound["keepdim"]
    dims = _dims(dim)
    if not dims:
        # PyTorch reduces over every dim, but writes the reduced (1, ..., 1) result into an
        # output of the shape without them, which only keepdim (or no dims at all) fits.
        if not keepdim and input.ndim and input.numel():
            raise RuntimeError(f"output with shape [] doesn't match the broadcast shape "
                               f"{[1] * input.ndim}")
        dims = None
    return call(R.logsumexp, input, dims, keepdim)


_CUMULATIVE = _args.Overloads(
    ("Tensor input, int dim, *, ScalarType? dtype=None, Tensor out=None",),
    ("int dim, *, ScalarType? dtype=None",))


def _cumulative(name: str, op):
    # (`dtype` is a parameter of its own: the out= form reads it, to compute in out's)
    def fn(input, *args, dtype=None, out=None, **kwargs):
        if len(args) == 1 and args[0].__class__ is int and not kwargs:
            dim = args[0]
        else:
            given = kwargs if dtype is None else {**kwargs, "dtype": dtype}
            _, bound = _args.parsed(name, _CUMULATIVE, input, args, given,
                               _args.is_method_copy(locals()))
            dim = bound["dim"].__index__()
        if dtype is not None:
            return call(op, input, dim, dtype_argument(name, dtype))
        return call(op, input, dim)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Cumulative {name[3:]} along `dim` (in `dtype`, if given)."
    return fn


cumsum = _cumulative("cumsum", R.cumsum)
cumprod = _cumulative("cumprod", R.cumprod)

_RUNNING = _args.Overloads(("Tensor input, int dim, *, TensorList out=None",), ("int dim",))


def _running(name: str, op):
    def fn(input, *args, out=None, **kwargs):
        if len(args) == 1 and not kwargs and args[0].__class__ is int:
            dim = args[0]
        else:
            dim = _args.parsed(name, _RUNNING, input, args, kwargs,
                          _args.is_method_copy(locals()))[1]["dim"].__index__()
        if input.numel() == 0 and input.dim() and not -input.dim() <= dim < input.dim():
            # PyTorch returns an empty input's empty results before it checks the dim
            dim = 0
        return _rt(name, call(op, input, dim))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Running {name[3:]}imum and its index along `dim`."
    return fn


cummax = _running("cummax", R.cummax)
cummin = _running("cummin", R.cummin)


def _logic(name):
    op_all, op_dim, op_dims = (REGISTRY[name], REGISTRY[name + ".dim"],
                               REGISTRY[name + ".dims"])

    def fn(input, dim=None, keepdim=False, *, out=None, axis=None, keepdims=None,
           dtype=_NOT_GIVEN):
        if dtype is not _NOT_GIVEN:  # (no overload takes one)
            _refused_dtype(name, _LOGIC_OVERLOADS, input,
                           ((None, dim), (False if keepdim is False else _NOT_GIVEN, keepdim)),
                           {"dtype": dtype}, _args.is_method_copy(locals()))
        if axis is not None or keepdims is not None:
            dim, keepdim = _numpy(name, dim, keepdim, axis, keepdims)
        if dim is None:
            return call(op_all, input) if not keepdim else call(op_dims, input, None, True)
        if isinstance(dim, (numbers.Integral, Tensor)):  # a 0-d integer tensor: its int
            return call(op_dim, input, dim.__index__(), keepdim)
        if not isinstance(dim, (list, tuple)):  # (PyTorch's listing of the overloads)
            names, values = ("dim", "keepdim") if keepdim is not False else ("dim",), \
                (dim, keepdim) if keepdim is not False else (dim,)
            _args.parsed(name, _LOGIC_OVERLOADS, input,
                         *_args.as_called(names, values, input=input),
                         _args.is_method_copy(locals()))
        return call(op_dims, input, tuple(dim), keepdim)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Whether {name} element(s) are nonzero, overall or along `dim`."
    return fn


all = _logic("all")  # noqa: A001
any = _logic("any")  # noqa: A001


def _count_nonzero_error(method: bool, args: tuple, keywords: dict) -> TypeError:
    """PyTorch's message for count_nonzero's arguments that fit neither overload (`args`: the
    positional ones after `input`; `keywords` in the order of the call), with its note under
    each overload when the call gives as many arguments as the overload has."""
    def name(v) -> str:
        return "torch.dtype" if isinstance(v, _dtype_cls) else python_type_name(v)

    def listed(items: list, keywords_only: bool) -> str:
        # (keywords alone each end in ", ", as PyTorch writes them)
        return "".join(f"{i}, " for i in items) if keywords_only else ", ".join(items)

    head = [] if method else ["Tensor"]
    got_named = [f"{k}={name(v)}" for k, v in reversed(keywords.items())]
    got = head + [name(a) for a in args]
    got_text = listed(got + got_named, not got)
    count = len(head) + len(args) + len(keywords)
    lines = []
    for text, dim_required in (("int dim = None", False), ("tuple of ints dim", True)):
        lines.append(f" * ({'' if method else 'Tensor input, '}{text})\n")
        if count != len(head) + 1:
            continue
        wrong = [k for k in keywords if not (dim_required and k == "dim")]
        if wrong:
            note = f"keywords were incorrect: {', '.join(wrong)}"
        else:
            shown = head + [f"!{name(a)}!" for a in args] + \
                [f"!{k}={name(v)}!" for k, v in keywords.items()]
            note = f"arguments have invalid types: ({listed(shown, not head and not args)})"
        lines.append(f"      didn't match because some of the {note}\n")
    return TypeError("count_nonzero() received an invalid combination of arguments - got "
                     f"({got_text}), but expected one of:\n{''.join(lines)}")


def _count_nonzero_refused(dim) -> bool:
    """Whether `dim` fits neither overload: no int (or 0-d tensor) and no sequence."""
    return dim is not None and dim.__class__ is builtins.bool or not (
        dim is None or hasattr(dim, "__index__") or isinstance(dim, (list, tuple)))


def _count_nonzero(input, dims: tuple, dim, axis, keepdim, method: bool, dtype=_NOT_GIVEN):
    if keepdim is not _NOT_GIVEN or dtype is not _NOT_GIVEN or \
            (len(dims) == 1 and _count_nonzero_refused(dims[0])) or _count_nonzero_refused(dim):
        # (PyTorch's count_nonzero has no `keepdim` nor `dtype`; a float or str dim fits no
        # overload)
        keywords = {k: v for k, v in (("dim", dim), ("keepdim", keepdim), ("dtype", dtype))
                    if v is not None and v is not _NOT_GIVEN}
        raise _count_nonzero_error(method, dims, keywords)
    if dims:
        if dim is not None:
            raise TypeError("count_nonzero() got multiple values for argument 'dim'")
        dim = dims[0] if len(dims) == 1 else dims
    dim = _args.axis("count_nonzero", dim, axis)
    if isinstance(dim, Tensor):
        dim = dim.__index__()
    if dim is None:
        return call(R.count_nonzero_all, input)
    if isinstance(dim, numbers.Integral):
        return call(R.count_nonzero_all, input, dim)
    dim = tuple(dim)
    # An empty list counts over every dim, as PyTorch's does.
    return call(R.count_nonzero, input, dim) if dim else call(R.count_nonzero_all, input)


def count_nonzero(input, *dims, dim=None, axis=None, keepdim=_NOT_GIVEN, dtype=_NOT_GIVEN):
    """Number of nonzero elements, overall or along `dim`. The method takes the dims spread
    out too (`x.count_nonzero(0, 1)`), as PyTorch's does. There is no `keepdim` nor `dtype`:
    they are refused with PyTorch's message."""
    return _count_nonzero(input, dims, dim, axis, keepdim, False, dtype)


def _count_nonzero_method(self, *dims, dim=None, axis=None, keepdim=_NOT_GIVEN,
                          dtype=_NOT_GIVEN):
    """`Tensor.count_nonzero`: the function, but PyTorch's messages name the method's
    overloads (no `input`)."""
    return _count_nonzero(self, dims, dim, axis, keepdim, True, dtype)


_MEDIAN = _args.Overloads(
    ("Tensor input", "Tensor input, int dim, bool keepdim=False, *, TensorList out=None"),
    ("", "int dim, bool keepdim=False"))


def median(input, *args, out=None, **kwargs):
    """Lower median of all elements, or (values, indices) along `dim`."""
    if not args and not kwargs:
        return call(R.median, input)
    plain = _plain_dim(args, kwargs)
    if plain is None:
        which, bound = _args.parsed("median", _MEDIAN, input, args, kwargs,
                               _args.is_method_copy(locals()))
        if which == 0:
            return call(R.median, input)
        plain = bound["dim"].__index__(), bound["keepdim"]
    return _rt("median", call(R.median_dim, input, plain[0], plain[1]))


_MODE = _args.Overloads(("Tensor input, int dim=-1, bool keepdim=False, *, TensorList out=None",),
                   ("int dim=-1, bool keepdim=False",))


def mode(input, *args, out=None, **kwargs):
    """Most frequent value (the smallest on ties) and its last index along `dim`."""
    plain = (-1, False) if not args and not kwargs else _plain_dim(args, kwargs)
    if plain is None:
        bound = _args.parsed("mode", _MODE, input, args, kwargs, _args.is_method_copy(locals()))[1]
        plain = bound["dim"].__index__(), bound["keepdim"]
    return _rt("mode", call(R.mode, input, plain[0], plain[1]))


_KTHVALUE = _args.Overloads(
    ("Tensor input, int k, int dim=-1, bool keepdim=False, *, TensorList out=None",),
    ("int k, int dim=-1, bool keepdim=False",))


def kthvalue(input, *args, out=None, **kwargs):
    """The k-th smallest value and its index along `dim` (the last by default)."""
    n = len(args)
    if not kwargs and 1 <= n <= 3 and args[0].__class__ is int and \
            (n == 1 or args[1].__class__ is int) and \
            (n < 3 or args[2].__class__ is builtins.bool):
        k, dim, keepdim = args[0], -1 if n == 1 else args[1], n == 3 and args[2]
    else:
        bound = _args.parsed("kthvalue", _KTHVALUE, input, args, kwargs,
                             _args.is_method_copy(locals()))[1]
        k, dim, keepdim = (bound["k"].__index__(), bound["dim"].__index__(),
                           bound["keepdim"])
    return _rt("kthvalue", call(R.kthvalue, input, k, dim, keepdim))


# The method reads its arguments with PyTorch's parser (`_functions.methods._topk`), the
# function through its wrapper's (`_torch_function_wrappers.argument_error`), each naming a
# position only for an argument given by position.
TOPK = _args.Overloads(
    ("Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True, *, "
     "TensorList out=None",),
    ("int k, int dim=-1, bool largest=True, bool sorted=True",))


def _keyword_parser(name: str, overloads: _args.Overloads):
    """PyTorch's parser over `overloads` (`_torch_function_wrappers.KEYWORD_PARSERS`)."""
    def parse(input, args: tuple, kwargs: dict, method: bool):
        return _args.parsed(name, overloads, input, args, kwargs, method)

    return parse


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None, axis=None):  # noqa: A002
    """The k largest (or smallest) values and their indices along `dim`."""
    if axis is not None:
        dim = _args.axis("topk", dim, axis, -1)
    if k.__class__ is not int or dim.__class__ is not int:
        # ints only: a float is `operator.index`'s TypeError, which the wrapper words
        k, dim = (v if v.__class__ is SymInt or isinstance(v, Tensor) else operator.index(v)
                  for v in (k, dim))
    if largest.__class__ is not builtins.bool or sorted.__class__ is not builtins.bool:
        raise TypeError("topk(): largest and sorted must be bool")  # (the wrapper words it)
    return _rt("topk", call(R.topk, input, k, dim, largest, sorted))


# `sort` and `argsort` have PyTorch's two overloads: `(input, *, stable, dim, descending)`
# (stable given, everything by keyword) and `(input, dim, descending)`; a call fitting
# neither is its argument parser's TypeError.
_UNSET = object()
_np_bool = np.bool_
_SORT_SIGNATURES = {
    ("sort", False): (
        "(Tensor input, *, bool stable, int dim = -1, bool descending = False, tuple of "
        "Tensors out = None)",
        "(Tensor input, int dim = -1, bool descending = False, *, tuple of Tensors out = "
        "None)"),
    ("argsort", False): (
        "(Tensor input, *, bool stable, int dim = -1, bool descending = False, Tensor out = "
        "None)",
        "(Tensor input, int dim = -1, bool descending = False)"),
}
_SORT_METHOD_SIGNATURES = ("(*, bool stable, int dim = -1, bool descending = False)",
                           "(int dim = -1, bool descending = False)")


def _is_int(v) -> bool:
    return v.__class__ is not bool and (isinstance(v, numbers.Integral) or (
        isinstance(v, Tensor) and v.ndim == 0 and not v.is_floating_point()))


def _is_bool(v) -> bool:
    return v.__class__ is bool  # (a NumPy bool is none: PyTorch's parser refuses it)


# Each overload's (least, most) arguments and most positional ones, as PyTorch's parser counts
# them (the method's without `input`): the one with `stable` takes it by keyword only.
_SORT_COUNTS = {
    ("sort", True): ((1, 3, 0), (0, 2, 2)),
    ("argsort", True): ((1, 3, 0), (0, 2, 2)),
    ("sort", False): ((2, 5, 1), (1, 4, 3)),
    ("argsort", False): ((2, 5, 1), (1, 3, 3)),
}


def _sort_args(fname: str, method: bool, args: tuple, stable, dim, descending,
               unknown: dict, input=None) -> tuple:
    """(dim, descending, stable) of a `sort`/`argsort` call given `args` by position and the
    rest by keyword (`_UNSET` where not given), or PyTorch's TypeError."""
    n = len(args)
    if not method and fname == "argsort" and stable is not _UNSET and \
            unknown.get("out", 0) is None:
        unknown = {k: v for k, v in unknown.items() if k != "out"}  # (that overload's `out`)
    kw_ok = not unknown and (dim is _UNSET or _is_int(dim)) and (
        descending is _UNSET or _is_bool(descending))
    if stable is not _UNSET:
        stable_ok = _is_bool(stable) or (stable is None and fname == "sort")
        if n == 0 and kw_ok and stable_ok:
            return (-1 if dim is _UNSET else dim,
                    False if descending is _UNSET else descending, stable)
    elif kw_ok and n <= 2 and (n < 1 or (_is_int(args[0]) and dim is _UNSET)) and (
            n < 2 or (_is_bool(args[1]) and descending is _UNSET)):
        d = args[0] if n >= 1 else (-1 if dim is _UNSET else dim)
        desc = args[1] if n >= 2 else (False if descending is _UNSET else descending)
        return d, desc, None
    raise _sort_error(fname, method, args, stable, dim, descending, unknown, input)


_SORT_OVERLOADS = {
    "sort": _args.Overloads(
        ("Tensor input, *, bool stable, int dim=-1, bool descending=False, "
         "TensorList out=None",
         "Tensor input, int dim=-1, bool descending=False, *, TensorList out=None"),
        ("*, bool stable, int dim=-1, bool descending=False",
         "int dim=-1, bool descending=False")),
    "argsort": _args.Overloads(
        ("Tensor input, *, bool stable, int dim=-1, bool descending=False, Tensor out=None",
         "Tensor input, int dim=-1, bool descending=False"),
        ("*, bool stable, int dim=-1, bool descending=False",
         "int dim=-1, bool descending=False")),
}


def _sort_error(fname: str, method: bool, args: tuple, stable, dim, descending,
                unknown: dict, input) -> TypeError:
    """PyTorch's parser's error for a `sort`/`argsort` call that fits neither overload: where
    the number of arguments leaves one overload, what is wrong with them for it, else the
    overloads listed (the keywords in the reverse of their order in the call)."""
    n = len(args)
    given = {k: v for k, v in (("stable", stable), ("dim", dim), ("descending", descending))
             if v is not _UNSET}
    given.update(unknown)
    order = _args.call_keywords(4)  # (of the call of sort, argsort or their methods)
    if "out" in order and "out" not in given:  # (None: named, so PyTorch counts it)
        given["out"] = None
    positional = n + (not method)
    count = positional + len(given)
    fits = [c for c in _SORT_COUNTS[(fname, method)] if c[0] <= count <= c[1]]
    if len(fits) == 1 and fits[0] is _SORT_COUNTS[(fname, method)][0]:
        least, _, most = fits[0]
        if positional > most:
            return TypeError(f"{fname}() takes from {least} to {most} positional arguments "
                             f"but {positional} were given")
        if stable is _UNSET:
            return TypeError(f'{fname}() missing 1 required positional arguments: "stable"')
        for name, value, ok, kind in (
                ("stable", stable, _is_bool(stable) or (stable is None and fname == "sort"),
                 "bool"),
                ("dim", dim, dim is _UNSET or _is_int(dim), "int"),
                ("descending", descending, descending is _UNSET or _is_bool(descending),
                 "bool")):
            if not ok:
                return TypeError(f"{fname}(): argument '{name}' must be {kind}, not "
                                 f"{python_type_name(value)}")
    keys = builtins.sorted(given, key=lambda k: -order.index(k) if k in order else 0)
    if not builtins.any(k in order for k in keys):  # (a call whose keywords the bytecode hides)
        keys = [k for k in ("stable", "dim", "descending") if k in given] + \
            [k for k in given if k not in ("stable", "dim", "descending")]
    got = [python_type_name(a) if not isinstance(a, Tensor) else "Tensor" for a in args]
    got += [f"{k}={python_type_name(given[k]) if not isinstance(given[k], Tensor) else 'Tensor'}"
            for k in keys]
    if method:
        text = ", ".join(got) + (", " if keys and not args else "")
        listed = _SORT_METHOD_SIGNATURES
    else:
        text = ", ".join(["Tensor"] + got)
        listed = _SORT_SIGNATURES[(fname, False)]
    # (each overload's note as PyTorch's parser writes it: the keywords in the call's order)
    notes = [_signatures._note(params, args if method else (input, *args),
                               {k: given[k] for k in reversed(keys)})
             for params in _SORT_OVERLOADS[fname].of(method)]
    return TypeError(f"{fname}() received an invalid combination of arguments - got ({text}), "
                     f"but expected one of:\n * {listed[0]}\n{notes[0]} * {listed[1]}\n"
                     f"{notes[1]}")


def _sort(fname: str, method: bool, input, args, stable, dim, descending, axis, unknown):
    if axis is not None:
        dim = _args.axis(fname, dim, axis, _UNSET)
    return _sort_args(fname, method, args, stable, dim, descending, unknown, input)


def sort(input, *args, stable=_UNSET, dim=_UNSET, descending=_UNSET, out=None, axis=None,
         **unknown):
    """Values sorted along `dim`, and their original indices."""
    dim, descending, stable = _sort("sort", False, input, args, stable, dim, descending,
                                    axis, unknown)
    if stable is not None:
        return _rt("sort", call(R.sort_stable, input, stable, dim, descending))
    return _rt("sort", call(R.sort, input, dim, descending))


def argsort(input, *args, stable=_UNSET, dim=_UNSET, descending=_UNSET, axis=None,
            **unknown):
    """Indices that sort `input` along `dim` (equal elements keep their order when `stable`,
    as `sort(stable=True)` orders them)."""
    dim, descending, stable = _sort("argsort", False, input, args, stable, dim, descending,
                                    axis, unknown)
    if stable:
        return call(R.sort_stable, input, True, dim, descending)[1]
    return call(R.argsort, input, dim, descending)


def _sort_method(self, *args, stable=_UNSET, dim=_UNSET, descending=_UNSET, axis=None,
                 **unknown):
    """`Tensor.sort`: the function's overloads without `out` (and the method's messages)."""
    dim, descending, stable = _sort("sort", True, self, args, stable, dim, descending, axis,
                                    unknown)
    if stable is not None:
        return _rt("sort", call(R.sort_stable, self, stable, dim, descending))
    return _rt("sort", call(R.sort, self, dim, descending))


def _argsort_method(self, *args, stable=_UNSET, dim=_UNSET, descending=_UNSET, axis=None,
                    **unknown):
    """`Tensor.argsort`, with the method's messages."""
    dim, descending, stable = _sort("argsort", True, self, args, stable, dim, descending,
                                    axis, unknown)
    if stable:
        return call(R.sort_stable, self, True, dim, descending)[1]
    return call(R.argsort, self, dim, descending)


# Named as PyTorch's methods, which their argument errors quote.
_sort_method.__name__ = "sort"
_sort_method.__qualname__ = "Tensor.sort"
_argsort_method.__name__ = "argsort"
_argsort_method.__qualname__ = "Tensor.argsort"


def msort(input, *, out=None):
    """Sorted along dimension 0."""
    return sort(input, 0).values


def _msort_method(self, *args, **kwargs):
    """`Tensor.msort`, which takes no arguments (PyTorch's messages are those of a C method
    declared without any)."""
    if kwargs:
        raise TypeError("TensorBase.msort() takes no keyword arguments")
    if args:
        raise TypeError(f"TensorBase.msort() takes no arguments ({len(args)} given)")
    return sort(self, 0).values


_msort_method.__name__ = "msort"
_msort_method.__qualname__ = "Tensor.msort"


# A keyword none of these functions' overloads has: PyTorch's parser's message.
for _name, _overloads in (("sum", _SUM), ("mean", _MEAN), ("var", _VAR_OVERLOADS),
                          ("std", _VAR_OVERLOADS), ("var_mean", _VAR_MEAN_OVERLOADS),
                          ("std_mean", _VAR_MEAN_OVERLOADS), ("topk", TOPK)):
    KEYWORD_PARSERS[_name] = _keyword_parser(_name, _overloads)
