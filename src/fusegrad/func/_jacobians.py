"""`jacrev`, `jacfwd` and `hessian`.

Both Jacobians are built row by row in reverse mode (one vector-Jacobian product per output
element, `autograd.functional`'s blocks, with history so that they compose): fusegrad has no
forward mode, and the rows give forward mode's values. `jacfwd` keeps its own signature and
checks (`randomness` included: `f` runs under vmap's randomness rules, as PyTorch runs it
under vmap over the tangent basis).
"""

from __future__ import annotations

import functools

from ..autograd.functional import _jac_blocks
from ..autograd.grad_mode import enable_grad
from ..utils import _pytree
from ._common import Level, check_tensors, replace_selected, selected
from ._transforms import _outputs, _split_aux
from ._vmap import check_randomness, random_guard


def _jacobian(func, argnums, has_aux: bool, args: tuple, kwargs: dict, where: str):
    """(jacobian, aux) of `func` at `args` for the arguments `argnums` selects."""
    level = Level()
    diff = selected(args, argnums)
    leaves, spec = _pytree.tree_flatten(diff)
    check_tensors(leaves)
    if where == "jacfwd":
        for x in leaves:
            if not (x.is_floating_point() or x.is_complex()):
                raise ValueError("Expected primal to be floating point or complex, but got: "
                                 f"{x.dtype}")
    lifted = [level.lift(x) for x in leaves]
    with enable_grad():
        call_args = replace_selected(args, argnums, _pytree.tree_unflatten(lifted, spec))
        out = func(*call_args, **kwargs)
        out, aux = _split_aux(out, has_aux, "vjp(f, *primals)")
        outs, out_spec = _outputs(out, "vjp(f, *primals)", "f(*primals)")
        blocks = _jac_blocks(outs, lifted, create_graph=True)
    per_output = [_pytree.tree_unflatten(list(row), spec) for row in blocks]
    jac = _pytree.tree_unflatten(per_output, out_spec)
    return level.finish(jac), level.finish(aux)


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
        jac, aux = _jacobian(func, argnums, has_aux, args, kwargs, "jacrev")
        return (jac, aux) if has_aux else jac

    return wrapper


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """`func` made to return its Jacobian with respect to the arguments `argnums` selects,
    as `jacrev` (see the module docstring); random operations in `func` follow
    `randomness` as under vmap."""
    check_randomness(randomness)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with random_guard(randomness):
            jac, aux = _jacobian(func, argnums, has_aux, args, kwargs, "jacfwd")
        return (jac, aux) if has_aux else jac

    return wrapper


def hessian(func, argnums=0):
    """`func` made to return its Hessian with respect to the arguments `argnums` selects:
    `jacfwd(jacrev(func, argnums), argnums)`."""
    return jacfwd(jacrev(func, argnums), argnums)
