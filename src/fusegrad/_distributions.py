"""Random sampling as PyTorch spells it: `Tensor.uniform_`, `normal_`, `bernoulli_`,
`random_`, ..., and `fusegrad.bernoulli`, `poisson`, `multinomial`.

Each runs a registry op of `ops/random.py`; the generator (or the default one) travels as the
op's last positional argument.
"""

from __future__ import annotations

from . import _creation, _dtype
from ._dispatch import call
from ._random import (
    bad_generator,
    check_generator,
    invalid_generator_combination,
    random_signatures,
)
from ._tensor import Tensor
from .autograd.grad_mode import is_grad_enabled
from .ops import random as R

__all__ = ["bernoulli", "poisson", "multinomial", "normal"]


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, requires_grad=False):
    """Normal random values with the given mean and std (numbers or tensors). With a tensor
    mean or std, a registry op (`normal.Tensor_float`, `float_Tensor`, `Tensor_Tensor`) whose
    result has PyTorch's node (`NormalBackward1/2/3`, zero gradients); with numbers, a
    factory (`_creation.normal`)."""
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


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None,
             **kwargs) -> Tensor:
    """Fill with draws from U[from, to)."""
    from_ = kwargs.pop("from", from_)
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


def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
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
    over [0, to), `random_(from, to)` over [from, to) (`to=None`: up to the dtype's top)."""
    bounds = dict(zip(("from", "to") if len(args) > 1 or "to" in kwargs else ("to",), args))
    for key in ("from", "to"):
        if key in kwargs:
            if key in bounds:
                raise TypeError(f"random_() got multiple values for argument '{key}'")
            bounds[key] = kwargs.pop(key)
    _no_extra("random_", kwargs)
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    if bad_generator(generator):
        _bad_random_generator(args, bounds, generator)
    if "from" in bounds:
        to = bounds.get("to")
        return call(R.random_from, self, int(bounds["from"]), None if to is None else int(to),
                    generator)
    if bounds.get("to") is not None:
        return call(R.random_to, self, int(bounds["to"]), generator)
    return call(R.random_default, self, generator)


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


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None, out: Tensor | None = None) -> Tensor:
    """Draw `num_samples` category indices per row of (unnormalised) weights."""
    check_generator(generator, "multinomial")
    if out is not None and isinstance(input, Tensor):
        R.multinomial_input_check(input)  # PyTorch checks these before out's dtype
    if out is not None and out.dtype is not _dtype.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {out.dtype.legacy}")
    return _to_out(call(R.multinomial, input, int(num_samples), bool(replacement), generator),
                   out)


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


