"""`grad`, `grad_and_value`, `vjp`, `jvp` and `linearize` over fusegrad's reverse-mode tape.

There is no forward-mode AD: a Jacobian-vector product is the transpose of a vector-Jacobian
product. With a dummy cotangent `u` (a zero leaf), `g = J^T u` is computed with history, is
linear in `u`, and differentiating `g . t` with respect to `u` gives `J t` (the "double vjp").
The values are forward mode's; the cost is two reverse passes.
"""

from __future__ import annotations

import functools
import sys

from .._dispatch import call
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled
from ..ops import REGISTRY
from ..utils import _pytree
from ._common import (
    Level,
    check_tensors,
    grads,
    recordable,
    recording,
    replace_selected,
    running,
    running_reverse,
    selected,
)


def _size(t: Tensor) -> str:
    return f"torch.Size({list(t.shape)})"


def _check_aux(aux) -> None:
    for leaf in _pytree.tree_flatten(aux)[0]:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(leaf)}")


def _split_aux(out, has_aux: bool, where: str):
    """(output, aux) of `f`'s result under `has_aux`."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{where}: output of function f should be a tuple: (output, aux) "
                           "if has_aux is True")
    _check_aux(out[1])
    return out


def _ones_like(t: Tensor) -> Tensor:
    return t.new_ones(t.shape)


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """`func` made to return (the gradient of its scalar output with respect to the arguments
    `argnums` selects, the output); with `has_aux`, `func` returns (output, aux) and the
    result is (gradient, (output, aux))."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        level = Level()
        diff = selected(args, argnums)
        leaves, spec = _pytree.tree_flatten(diff)
        check_tensors(leaves)
        lifted = [level.lift(x) for x in leaves]
        with recording():
            call_args = replace_selected(args, argnums, _pytree.tree_unflatten(lifted, spec))
            with running_reverse(level):
                out = func(*call_args, **kwargs)
            output, aux = _split_aux(out, has_aux, "grad_and_value(f)(*args)")
            if not isinstance(output, Tensor):
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"Tensor, got {type(output)}")
            if output.dim() != 0:
                raise RuntimeError(
                    "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, "
                    f"got tensor with {output.dim()} dims. Maybe you wanted to use the vjp or "
                    "jacrev APIs instead?")
            if output.is_complex():
                raise RuntimeError("grad can be implicitly created only for real scalar "
                                   f"outputs but got {output.dtype}")
            got = grads([output], lifted, [_ones_like(output)])
        gradient = level.finish(_pytree.tree_unflatten(list(got), spec))
        value = level.finish((output, aux) if has_aux else output)
        return gradient, value

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """`func` made to return the gradient of its scalar output with respect to the arguments
    `argnums` selects (an int, or a tuple of ints: then a tuple of gradients), each shaped
    (as a pytree) as its argument; with `has_aux`, (gradient, aux)."""
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = inner(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def _outputs(out, where: str, call: str):
    leaves, spec = _pytree.tree_flatten(out)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{where}: expected {call} to return only tensors, got "
                               f"unsupported type {type(leaf)}")
    return leaves, spec


def check_floating_outputs(outs) -> None:
    """Reverse mode differentiates floating-point and complex outputs only (PyTorch's
    check in `vjp`, and so in `jacrev`)."""
    for o in outs:
        if not (o.is_floating_point() or o.is_complex()):
            raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or "
                               f"complex Tensors, got Tensor with dtype {o.dtype}")


def vjp(func, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn[, aux]): `vjp_fn(cotangents)` gives the vector-Jacobian
    product of `func` at `primals` for cotangents shaped as the output, as a tuple with one
    entry per primal. `vjp_fn` may be called any number of times."""
    level = Level()
    leaves, spec = _pytree.tree_flatten(primals)
    check_tensors(leaves)
    lifted = [level.lift(x) for x in leaves]
    with recording(), running_reverse(level):
        out = func(*_pytree.tree_unflatten(lifted, spec))
    with recording():
        out, aux = _split_aux(out, has_aux, "vjp(f, *primals)")
        outs, out_spec = _outputs(out, "vjp(f, *primals)", "f(*primals)")
        check_floating_outputs(outs)
    level.close()

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        """The vector-Jacobian product for `cotangents` (shaped as the output)."""
        cots, cot_spec = _pytree.tree_flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure "
                "of outputs to the function. cotangents: "
                f"{_pytree.treespec_pprint(cot_spec)}, primal output: "
                f"{_pytree.treespec_pprint(out_spec)}")
        for i, (c, o) in enumerate(zip(cots, outs)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{_size(c)} and output[{i}] has a shape of {_size(o)}.")
        with recording():
            cots = [recordable(c.to(o.dtype) if c.dtype != o.dtype else c)
                    for c, o in zip(cots, outs)]
            got = grads(outs, lifted, cots, retain=retain_graph)
        res = _pytree.tree_unflatten(list(got), spec)
        if not is_grad_enabled():
            return _pytree.tree_map(_detach, res)
        return level.finish(res)

    result = (level.finish(out), vjp_fn)
    return result + (level.finish(aux),) if has_aux else result


def _detach(x):
    return x.detach() if isinstance(x, Tensor) else x


def _alias(x):
    """`x` as a view of itself recorded as an alias, where it requires grad."""
    if not (isinstance(x, Tensor) and x.requires_grad):
        return x
    return call(REGISTRY["alias"], x)


_FORWARD_AD = __name__.split(".")[0] + ".autograd.forward_ad"


class _Linear:
    """`func` at `primals`, with the history for its Jacobian-vector products: dummy
    cotangents `u` (zero leaves) and `J^T u` computed with history, so that `J t` is one
    more reverse pass (see the module docstring)."""

    def __init__(self, func, primals: tuple, has_aux: bool, where: str,
                 batched: bool = False, traced: bool = False) -> None:
        forward_ad = sys.modules.get(_FORWARD_AD)
        if forward_ad is not None and forward_ad._current_level >= 0:
            # (PyTorch's forward-mode transforms take a level of their own: one is open)
            raise RuntimeError("Nested forward mode AD is not supported at the moment")
        self.level = level = Level()
        # (`batched`: PyTorch's transform runs jvp under vmap, as jacfwd does: a custom
        # Function then needs a vmap rule too.)
        level.forward_mode = "batched" if batched else True
        level.refuses_requires_grad = not traced
        leaves, self.spec = _pytree.tree_flatten(primals)
        self.primals = leaves
        self.lifted = [level.lift(x) for x in leaves]
        with recording():
            with running(level):
                out = func(*_pytree.tree_unflatten(self.lifted, self.spec))
            out, self.aux = _split_aux(out, has_aux, where)
            self.outs, self.out_spec = _outputs(out, where, "f(*primals)")
            self.dummies = [level.leaf(o) if o.is_floating_point() or o.is_complex() else None
                            for o in self.outs]
            used = [(o, u) for o, u in zip(self.outs, self.dummies) if u is not None]
            from ..autograd import forward_ad

            # PyTorch's forward AD errors: an op without a forward formula on the way, and
            # (below) one whose backward has no derivative of its own.
            forward_ad.check_formulas(self.outs, self.lifted)
            with forward_ad._as_forward_error():
                self.transposed = grads([o for o, _ in used], self.lifted,
                                        [u for _, u in used])
        level.close()

    def independent(self) -> bool:
        """Whether no output depends on the inputs."""
        return not any(g.requires_grad for g in self.transposed)

    def tangent_out(self, tangents: list) -> list:
        """J t for tangents (one per flattened primal), one entry per flattened output."""
        live = [u for u in self.dummies if u is not None]
        with recording():
            pairs = [(g, recordable(t.to(g.dtype) if t.dtype != g.dtype else t))
                     for g, t in zip(self.transposed, tangents)]
            from ..autograd import forward_ad

            with forward_ad._as_forward_error():
                got = iter(grads([g for g, _ in pairs], live, [t for _, t in pairs]))
        return [next(got) if u is not None else o.new_zeros(o.shape)
                for o, u in zip(self.outs, self.dummies)]


def _structure_error(p_spec, t_spec):
    return RuntimeError(
        "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
        "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
        f"Got primals with structure {p_spec!r} and tangents with structure {t_spec!r}")


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), J t[, aux]): the Jacobian-vector product of `func` at `primals` for
    `tangents` (shaped as `primals`), computed as the transpose of a vjp."""
    where = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{where}: Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    p_leaves, p_spec = _pytree.tree_flatten(primals)
    t_leaves, t_spec = _pytree.tree_flatten(tangents)
    if p_spec != t_spec:
        raise _structure_error(p_spec, t_spec)
    if not p_leaves:
        raise RuntimeError(f"{where}: Expected primals to contain at least one Tensor.")
    for what, leaves in (("primals", p_leaves), ("tangents", t_leaves)):
        for leaf in leaves:
            if not isinstance(leaf, Tensor):
                raise RuntimeError(f"{where}: Expected {what} to only contain Tensors, got "
                                   f"{type(leaf)}")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the "
                "original Tensor, this is not supported. Tensor is of size "
                f"{list(p.shape)} while the given forward gradient is of size "
                f"{list(t.shape)}.")
    lin = _Linear(func, primals, has_aux, where)
    if strict and lin.independent():
        raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                           "independent of the inputs. This is not allowed with strict=True.")
    tangent_out = _pytree.tree_unflatten(lin.tangent_out(t_leaves), lin.out_spec)
    out = _pytree.tree_unflatten(lin.outs, lin.out_spec)
    # A primal output that keeps its history comes back as an alias of it, as PyTorch's
    # forward-mode level hands it back (AliasBackward0).
    result = (_pytree.tree_map(_alias, lin.level.finish(out)), lin.level.finish(tangent_out))
    return result + (lin.level.finish(lin.aux),) if has_aux else result


def linearize(func, *primals):
    """(func(*primals), jvp_fn): `jvp_fn(*tangents)` gives the Jacobian-vector product at
    `primals` without running `func` again."""
    lin = _Linear(func, primals, False, "linearize", traced=True)
    p_spec = lin.spec

    def jvp_fn(*tangents):
        """J t for `tangents` shaped as the primals."""
        t_leaves, t_spec = _pytree.tree_flatten(tangents)
        if t_spec != p_spec:
            raise RuntimeError(f"Expected the tangents {t_spec!r} to have the same argspec as "
                               f"the primals {p_spec!r}")
        for i, (t, p) in enumerate(zip(t_leaves, lin.primals)):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError(
                    f"tangent:{i} with shape {_size(t)} in flattened pytree doesn't match the "
                    f"shape {_size(p)} of the corresponding primal.")
            if t.dtype != p.dtype:
                raise RuntimeError(
                    f"tangent:{i} with dtype {t.dtype} in flattened pytree doesn't match the "
                    f"dtype {p.dtype} of the corresponding primal.")
        out = _pytree.tree_unflatten(lin.tangent_out(t_leaves), lin.out_spec)
        # In grad mode a product that depends on a tensor from outside requiring grad (a
        # parameter, a primal) requires grad, as PyTorch's (traced) jvp_fn gives it.
        grad_on = is_grad_enabled()
        return _pytree.tree_map(
            lambda x: x if grad_on and isinstance(x, Tensor) and x.requires_grad and
            lin.level._reaches_outside(x) else _detach(x), out)

    return lin.level.finish(_pytree.tree_unflatten(lin.outs, lin.out_spec)), jvp_fn
