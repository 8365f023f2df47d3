"""Random sampling as PyTorch spells it: `Tensor.uniform_`, `normal_`, `bernoulli_`,
`random_`, ..., and `fusegrad.bernoulli`, `poisson`, `multinomial`.

Each runs a registry op of `ops/random.py`; the generator (or the default one) travels as the
op's last positional argument.
"""

from __future__ import annotations

from . import _dtype
from ._dispatch import call
from ._tensor import Tensor
from .autograd.grad_mode import is_grad_enabled
from .ops import random as R

__all__ = ["bernoulli", "poisson", "multinomial"]


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None,
             **kwargs) -> Tensor:
    """Fill with draws from U[from, to)."""
    from_ = kwargs.pop("from", from_)
    _no_extra("uniform_", kwargs)
    return call(R.uniform_, self, float(from_), float(to), generator)


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with draws from N(mean, std^2)."""
    return call(R.normal_, self, float(mean), float(std), generator)


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator=None) -> Tensor:
    """Fill with exp(N(mean, std^2)) draws."""
    return call(R.log_normal_, self, float(mean), float(std), generator)


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator=None) -> Tensor:
    """Fill with Cauchy(median, sigma) draws."""
    return call(R.cauchy_, self, float(median), float(sigma), generator)


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Exponential(lambd) draws."""
    return call(R.exponential_, self, float(lambd), generator)


def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    return call(R.geometric_, self, float(p), generator)


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 with probability `p` (a number or a tensor of probabilities), else 0."""
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
    if "from" in bounds:
        to = bounds.get("to")
        return call(R.random_from, self, int(bounds["from"]), None if to is None else int(to),
                    generator)
    if bounds.get("to") is not None:
        return call(R.random_to, self, int(bounds["to"]), generator)
    return call(R.random_default, self, generator)


def bernoulli(input: Tensor, p: float | None = None, *, generator=None,
              out: Tensor | None = None) -> Tensor:
    """Draw 1 with probability `input` (elementwise), else 0; with `p`, every element uses
    probability `p` and the result has `input`'s shape and dtype."""
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
        result = input.detach().clone()
        call(R.bernoulli_float, result, float(p), generator)
    else:
        result = call(R.bernoulli, input, generator)
    return _to_out(result, out)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Draw from Poisson(rate) for each rate in `input`."""
    return call(R.poisson, input, generator)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Draw from Binomial(count, prob), elementwise, in `count`'s dtype."""
    return call(R.binomial, count, prob, generator)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None, out: Tensor | None = None) -> Tensor:
    """Draw `num_samples` category indices per row of (unnormalised) weights."""
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


