"""Random sampling as PyTorch spells it: `Tensor.uniform_`, `normal_`, `bernoulli_`,
`random_`, ..., and `fusegrad.bernoulli`, `poisson`, `multinomial`.

Each runs a registry op of `ops/random.py`; the generator (or the default one) travels as the
op's last positional argument.
"""

from __future__ import annotations

import operator

from . import _creation, _dtype
from ._dispatch import call
from ._functions._args import bound, is_method_copy
from ._random import (
    bad_generator,
    check_generator,
    invalid_generator_combination,
    parser_type_name,
    random_signatures,
)
from ._tensor import Tensor, is_int_argument
from .autograd.grad_mode import is_grad_enabled
from .ops import random as R

__all__ = ["bernoulli", "poisson", "multinomial", "normal"]

_UNSET = object()  # (an argument not given)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, requires_grad=False):
    """Normal random values with the given mean and std (numbers or tensors). With a tensor
    mean or std, a registry op (`normal.Tensor_float`, `float_Tensor`, `Tensor_Tensor`) whose
    result has PyTorch's node (`NormalBackward1/2/3`, zero gradients); with numbers, a
    factory (`_creation.normal`)."""
    if size is not None and (isinstance(mean, Tensor) or isinstance(std, Tensor)):
        # only the overload of numbers takes a size: 0-d tensors stand for their numbers
        if any(isinstance(t, Tensor) and t.ndim for t in (mean, std)):
            raise invalid_generator_combination("normal", (mean, std, size), {},
                                                _creation._NORMAL_SIGNATURES)
        mean, std = (t.item() if isinstance(t, Tensor) else t for t in (mean, std))
    mean_tensor, std_tensor = isinstance(mean, Tensor), isinstance(std, Tensor)
    meta = any(t._data is None and t.is_meta for t in (mean, std) if isinstance(t, Tensor))
    if (mean_tensor or std_tensor) and not meta and \
            not (generator is not None and bad_generator(generator)):
        op = R.normal_tensor_tensor if mean_tensor and std_tensor else \
            R.normal_tensor_float if mean_tensor else R.normal_float_tensor
        return call(op, mean if mean_tensor else float(mean), std if std_tensor else float(std),
                    generator)
    return _creation.normal(mean, std, size, generator=generator, out=out, dtype=dtype,
                            layout=layout, device=device, requires_grad=requires_grad)


def uniform_(self: Tensor, from_: float = _UNSET, to: float = _UNSET, /, *, generator=None,
             **kwargs) -> Tensor:
    """Fill with draws from U[from, to) (`from`, as PyTorch names it, and `to` by keyword
    too)."""
    for name, given in (("from", from_), ("to", to)):
        if name in kwargs and given is not _UNSET:
            raise TypeError(f"uniform_() got multiple values for argument '{name}'")
    from_ = kwargs.pop("from", 0.0 if from_ is _UNSET else from_)
    to = kwargs.pop("to", 1.0 if to is _UNSET else to)
    _no_extra("uniform_", kwargs)
    check_generator(generator, "uniform_")
    return call(R.uniform_, self, float(from_), float(to), generator)


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with draws from N(mean, std^2)."""
    check_generator(generator, "normal_")
    return call(R.normal_, self, float(mean), float(std), generator)


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator=None) -> Tensor:
    """Fill with exp(N(mean, std^2)) draws."""
    check_generator(generator, "log_normal_")
    return call(R.log_normal_, self, float(mean), float(std), generator)


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator=None) -> Tensor:
    """Fill with Cauchy(median, sigma) draws."""
    check_generator(generator, "cauchy_")
    return call(R.cauchy_, self, float(median), float(sigma), generator)


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Exponential(lambd) draws."""
    check_generator(generator, "exponential_")
    return call(R.exponential_, self, float(lambd), generator)


def geometric_(self: Tensor, p: float = _UNSET, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if p is _UNSET:  # (PyTorch's wording of the missing argument)
        raise TypeError('geometric_() missing 1 required positional arguments: "p"')
    check_generator(generator, "geometric_")
    return call(R.geometric_, self, float(p), generator)


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 with probability `p` (a number or a tensor of probabilities), else 0."""
    if bad_generator(generator):  # (a p of 0.5 counts as not given)
        raise invalid_generator_combination(
            "bernoulli_", () if p is None or (not isinstance(p, Tensor) and p == 0.5) else (p,),
            {"generator": generator},
            " * (Tensor p, *, torch.Generator generator = None)\n"
            " * (float p = 0.5, *, torch.Generator generator = None)\n")
    if isinstance(p, Tensor):
        return call(R.bernoulli_tensor, self, p, generator)
    return call(R.bernoulli_float, self, float(p), generator)


def random_(self: Tensor, *args, generator=None, **kwargs) -> Tensor:
    """Fill with integers: `random_()` over the values the dtype holds exactly, `random_(to)`
    over [0, to), `random_(from, to)` over [from, to) (`to=None`: up to the dtype's top).
    The bounds are ints (a 0-d integer tensor reads as one); anything else, a bool or a float
    included, matches none of PyTorch's overloads."""
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    bounds = dict(zip(("from", "to") if len(args) > 1 or "to" in kwargs else ("to",), args))
    for key, value in kwargs.items():
        if key not in ("from", "to"):
            raise _random_mismatch(args, kwargs)
        if key in bounds:
            raise TypeError(f"random_() got multiple values for argument '{key}'")
        bounds[key] = value
    if bad_generator(generator):
        _bad_random_generator(args, bounds, generator)
    for value in bounds.values():
        # (only the two-bound form takes a `to` of None: up to the dtype's top)
        if not is_int_argument(value) and not (value is None and "from" in bounds):
            raise _random_mismatch(args, kwargs)
    if "from" in bounds:
        to = bounds.get("to")
        return call(R.random_from, self, operator.index(bounds["from"]),
                    None if to is None else operator.index(to), generator)
    if bounds:
        return call(R.random_to, self, operator.index(bounds["to"]), generator)
    return call(R.random_default, self, generator)


def _random_mismatch(args: tuple, kwargs: dict) -> TypeError:
    """PyTorch's error for `random_` bounds that fit none of its overloads: with two
    positional bounds its note marks both types, with one and a keyword it names the
    keywords."""
    if len(args) == 2:
        marked = ", ".join(f"!{parser_type_name(a)}!" for a in args)
        note = f"      didn't match because some of the arguments have invalid types: ({marked})\n"
    elif args and kwargs:
        note = ("      didn't match because some of the keywords were incorrect: "
                f"{', '.join(reversed(kwargs))}\n")
    else:
        note = ""
    return invalid_generator_combination("random_", args, kwargs, random_signatures(note))


_BERNOULLI_SIGNATURES = (
    " * (Tensor input, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (Tensor input, float p, *, torch.Generator generator = None)\n")


def _bad_random_generator(args: tuple, bounds: dict, generator) -> None:
    """PyTorch's error for `random_` given a `generator` that is no Generator: the
    two-bound form names the argument, the others list the overloads."""
    if len(args) == 2 or "from" in bounds:
        check_generator(generator, "random_")
    keywords = {"generator": generator}
    if "to" in bounds and not args:
        keywords = {"to": bounds["to"], "generator": generator}
    # (the overload without bounds notes the keywords that it does not take)
    note = ("      didn't match because some of the keywords were incorrect: "
            f"{', '.join(reversed(keywords))}\n") if bounds else ""
    raise invalid_generator_combination("random_", args, keywords, random_signatures(note))


def bernoulli(input: Tensor, p: float | None = None, *, generator=None,
              out: Tensor | None = None) -> Tensor:
    """Draw 1 with probability `input` (elementwise), else 0; with `p`, every element uses
    probability `p` and the result has `input`'s shape and dtype."""
    if bad_generator(generator):
        raise invalid_generator_combination(
            "bernoulli", (input,) if p is None else (input, p),
            {"generator": generator} if out is None else {"generator": generator, "out": out},
            _BERNOULLI_SIGNATURES)
    if out is not None:  # checked before drawing, so a refused call leaves the stream as is
        if p is not None:
            raise TypeError(
                "bernoulli() received an invalid combination of arguments - got (Tensor, float, "
                "out=Tensor), but expected one of:\n"
                " * (Tensor input, *, torch.Generator generator = None, Tensor out = None)\n"
                " * (Tensor input, float p, *, torch.Generator generator = None)\n")
        if is_grad_enabled() and (input.requires_grad or out.requires_grad):
            raise RuntimeError(
                "bernoulli(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad.")
    if p is not None:
        result = call(R.bernoulli_p, input, float(p), generator)
    else:
        result = call(R.bernoulli, input, generator)
    return _to_out(result, out)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Draw from Poisson(rate) for each rate in `input`."""
    check_generator(generator, "poisson")
    return call(R.poisson, input, generator)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Draw from Binomial(count, prob), elementwise, in `count`'s dtype."""
    check_generator(generator, "binomial")
    return call(R.binomial, count, prob, generator)


def multinomial(input: Tensor, *args, generator=None, out: Tensor | None = None,
                **kwargs) -> Tensor:
    """Draw `num_samples` category indices per row of (unnormalised) weights:
    `multinomial(input, num_samples, replacement=False)`."""
    if len(args) == 1 and not kwargs and args[0].__class__ is int:
        num_samples, replacement = args[0], False
    else:
        num_samples, replacement = _multinomial_args(args, kwargs, is_method_copy(locals()))
    check_generator(generator, "multinomial")
    if out is not None and isinstance(input, Tensor):
        R.multinomial_input_check(input)  # PyTorch checks these before out's dtype
    if out is not None and out.dtype is not _dtype.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {out.dtype.legacy}")
    return _to_out(call(R.multinomial, input, num_samples, replacement, generator), out)


def _multinomial_args(args: tuple, kwargs: dict, method: bool) -> tuple:
    """multinomial's (num_samples, replacement) as PyTorch's parser reads them: an int (not a
    bool) and a bool (nothing else), each refused in its words, which name the position of
    an argument given by position (counted from `self` for a method, `input` otherwise)."""
    given, where = bound("multinomial", ("num_samples", "replacement"), args, kwargs, method)
    if "num_samples" not in given:
        raise TypeError('multinomial() missing 1 required positional arguments: "num_samples"')
    num_samples, replacement = given["num_samples"], given.get("replacement", False)
    if not is_int_argument(num_samples):
        raise TypeError(f"multinomial(): argument 'num_samples'{where.get('num_samples', '')} "
                        f"must be int, not {parser_type_name(num_samples)}")
    if replacement.__class__ is not bool:
        raise TypeError(f"multinomial(): argument 'replacement'{where.get('replacement', '')} "
                        f"must be bool, not {parser_type_name(replacement)}")
    return operator.index(num_samples), replacement


def _to_out(result: Tensor, out: Tensor | None) -> Tensor:
    if out is None:
        return result
    if out.shape != result.shape:  # PyTorch resizes `out` to the result's shape
        out.data = result.to(out.dtype)
        return out
    return out.copy_(result)


def _no_extra(name: str, kwargs: dict) -> None:
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")


