"""`jacrev`, `jacfwd` and `hessian`.

`jacrev` is built row by row in reverse mode (one vector-Jacobian product per output element,
`autograd.functional`'s blocks, with history so that it composes). `jacfwd` is built column
by column from Jacobian-vector products along the standard basis of the inputs (`jvp`'s
transposed vjp), so its entries are forward mode's, NaN and inf included where a row-wise
Jacobian would differ (`where` over a branch with an infinite derivative); the columns are
stacked and moved last as PyTorch's vmap over the basis leaves them, so strides agree.
`jacfwd` keeps its own checks (`randomness` included: `f` runs under vmap's randomness
rules, as PyTorch runs it under vmap over the tangent basis). `hessian` is
`jacfwd(jacrev(f))`.
"""

from __future__ import annotations

import functools

from .._functions import stack
from .._tensor import Tensor
from ..autograd.functional import _jac_blocks, column_blocks
from ..utils import _pytree
from ._common import Level, check_tensors, recording, replace_selected, running_reverse, selected
from ._transforms import _Linear, _outputs, _split_aux, check_floating_outputs
from ._vmap import check_randomness, random_guard


def _jacobian(func, argnums, has_aux: bool, args: tuple, kwargs: dict):
    """(jacobian, aux) of `func` at `args` for the arguments `argnums` selects."""
    level = Level()
    diff = selected(args, argnums)
    leaves, spec = _pytree.tree_flatten(diff)
    check_tensors(leaves)
    lifted = [level.lift(x) for x in leaves]
    with recording():
        call_args = replace_selected(args, argnums, _pytree.tree_unflatten(lifted, spec))
        with running_reverse(level):
            out = func(*call_args, **kwargs)
        out, aux = _split_aux(out, has_aux, "vjp(f, *primals)")
        outs, out_spec = _outputs(out, "vjp(f, *primals)", "f(*primals)")
        check_floating_outputs(outs)
        blocks = _jac_blocks(outs, lifted, create_graph=True)
    per_output = [_pytree.tree_unflatten(list(row), spec) for row in blocks]
    jac = _pytree.tree_unflatten(per_output, out_spec)
    return level.finish(jac), level.finish(aux)


def _forward_jacobian(func, argnums, has_aux: bool, args: tuple, kwargs: dict):
    """(jacobian, aux) of `func` at `args` for the arguments `argnums` selects, one
    Jacobian-vector product per input element (see the module docstring)."""
    diff = selected(args, argnums)
    leaves, spec = _pytree.tree_flatten(diff)
    for x in leaves:
        if not isinstance(x, Tensor):
            # PyTorch counts the elements of each input first.
            raise AttributeError(f"'{type(x).__name__}' object has no attribute 'numel'")
        if not (x.is_floating_point() or x.is_complex()):
            raise ValueError("Expected primal to be floating point or complex, but got: "
                             f"{x.dtype}")

    def call(*xs):
        return func(*replace_selected(args, argnums, _pytree.tree_unflatten(list(xs), spec)),
                    **kwargs)

    lin = _Linear(call, tuple(leaves), has_aux, "jvp(f, primals, tangents)", batched=True)
    numels = [x.numel() for x in leaves]
    total = sum(numels)
    # (Under `inference_mode()` too the Jacobian is a normal tensor, as PyTorch's.)
    with recording():
        columns = [lin.tangent_out(t) for t in _basis(leaves)]
        per_output = []
        for i, (out, dummy) in enumerate(zip(lin.outs, lin.dummies)):
            if dummy is None or not out.requires_grad or total == 0:
                # No tangent reaches this output: zeros, broadcast over the columns as PyTorch's
                # vmap broadcasts an unbatched result.
                stacked = out.new_zeros(out.shape).unsqueeze(0).expand(total, *out.shape)
            else:
                stacked = stack([c[i] for c in columns])
            row = column_blocks(stacked, tuple(out.shape), leaves, numels)
            per_output.append(_pytree.tree_unflatten(row, spec))
        jac = _pytree.tree_unflatten(per_output, lin.out_spec)
        aux = lin.level.finish(lin.aux)
        if total:
            # PyTorch's vmap over the basis expands the (unbatched) aux along the basis and
            # jacfwd hands back its first entry: a view with that history.
            aux = _pytree.tree_map(
                lambda a: a.expand(total, *a.shape).select(0, 0) if isinstance(a, Tensor) else a,
                aux)
    return lin.level.finish(jac), aux


def _basis(leaves) -> list:
    """The standard basis of all `leaves` together: one list of tangents (one per leaf) for
    each element, one-hot in the leaf holding it and zero elsewhere."""
    basis = []
    for j, x in enumerate(leaves):
        for k in range(x.numel()):
            tangents = [y.new_zeros(y.shape) for y in leaves]
            tangents[j] = _one_hot(x, k)
            basis.append(tangents)
    return basis


def _one_hot(like, k: int):
    flat = like.new_zeros((like.numel(),))
    flat[k] = 1
    return flat.reshape(like.shape)


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False):
    """`func` made to return its Jacobian with respect to the arguments `argnums` selects:
    for each output, shaped output.shape + input.shape (nested as outputs, then inputs);
    with `has_aux`, (jacobian, aux). `chunk_size` is accepted and checked (the rows are
    computed one at a time)."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    if chunk_size is not None and not isinstance(chunk_size, int):
        raise TypeError(f"can't multiply sequence by non-int of type "
                        f"'{type(chunk_size).__name__}'")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        jac, aux = _jacobian(func, argnums, has_aux, args, kwargs)
        return (jac, aux) if has_aux else jac

    return wrapper


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """`func` made to return its Jacobian with respect to the arguments `argnums` selects,
    shaped as `jacrev`'s, computed in columns as forward mode computes it (see the module
    docstring); random operations in `func` follow `randomness` as under vmap."""
    check_randomness(randomness)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with random_guard(randomness):
            jac, aux = _forward_jacobian(func, argnums, has_aux, args, kwargs)
        return (jac, aux) if has_aux else jac

    return wrapper


def hessian(func, argnums=0):
    """`func` made to return its Hessian with respect to the arguments `argnums` selects:
    `jacfwd(jacrev(func, argnums), argnums)`."""
    return jacfwd(jacrev(func, argnums), argnums)
