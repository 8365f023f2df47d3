"""What the differentiating transforms share: argument selection (`argnums`), the inputs a
transform differentiates at, and the results it hands back.

A transform differentiates `f` on fusegrad's tape: each selected input is replaced by a tensor
the tape records from (a fresh leaf, or a view of the caller's tensor when that is already
part of an autograd graph, so an enclosing transform or `backward` still reaches it), `f` runs
with grad mode on, and `autograd.grad` with `create_graph=True` computes the derivative, so
that an enclosing transform can differentiate it again. A result keeps its history only if
it depends on a tensor from outside the transform that requires grad (an enclosing
transform's input, a closed-over parameter) and grad mode was on when the transform was
called; otherwise it is handed back detached, a plain tensor as PyTorch's.
"""

from __future__ import annotations

import contextlib
import weakref

from .._tensor import Tensor
from .._thread_state import local as _thread_local
from ..autograd.grad_mode import inference_mode, is_grad_enabled
from ..autograd.graph import AccumulateGrad, disable_saved_tensors_hooks
from ..utils import _pytree


def check_argnums(argnums, num_args: int):
    """The positions `argnums` selects (an int, or a tuple of ints), checked as PyTorch."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return _one_argnum(argnums, num_args)
    if not isinstance(argnums, tuple):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if len(argnums) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(_one_argnum(a, num_args) for a in argnums)


def _one_argnum(argnum, num_args: int) -> int:
    if not isinstance(argnum, int) or isinstance(argnum, bool):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if argnum >= 0 and argnum < num_args:
        return argnum
    if argnum < 0 and argnum >= -num_args:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def selected(args: tuple, argnums):
    """The argument (or tuple of arguments) `argnums` picks from `args`."""
    positions = check_argnums(argnums, len(args))
    if isinstance(positions, int):
        return args[positions]
    return tuple(args[p] for p in positions)


def replace_selected(args: tuple, argnums, values) -> tuple:
    """`args` with the arguments `argnums` picks replaced by `values`."""
    positions = check_argnums(argnums, len(args))
    out = list(args)
    if isinstance(positions, int):
        out[positions] = values
    else:
        for p, v in zip(positions, values):
            out[p] = v
    return tuple(out)


def check_tensors(leaves) -> None:
    """The inputs a transform differentiates at must be tensors."""
    for x in leaves:
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")


def recording():
    """The mode a differentiating transform runs its function in: grad mode on and inference
    mode off (under `inference_mode()` too, as PyTorch's transforms run it)."""
    return inference_mode(False)


def recordable(t: Tensor) -> Tensor:
    """`t`, or a normal copy of it where it is an inference tensor (a tangent or cotangent
    made under `inference_mode()`), which the tape could not save."""
    if not t.is_inference():
        return t
    with recording():
        return t.clone()


def lift(x: Tensor) -> Tensor:
    """The tensor `f` is differentiated at in place of `x`: a view of `x` when `x` is part of
    an autograd graph (so the result stays connected to it), else a fresh leaf (a normal
    copy of an inference tensor, which could not be recorded)."""
    if x.requires_grad and is_grad_enabled():
        return x.view_as(x)
    if x.is_inference():
        with recording():
            return x.clone()._requires_grad_unguarded(True)
    return x.detach()._requires_grad_unguarded(True)


def running_transforms() -> tuple:
    """The transforms (Levels, vmap frames) running their function in this thread, innermost
    last: what `autograd.Function.apply` consults to follow PyTorch's rules under them."""
    return _thread_local.transforms


@contextlib.contextmanager
def running(entry):
    """Mark `entry` as running its function for the duration of the block."""
    before = _thread_local.transforms
    _thread_local.transforms = before + (entry,)
    try:
        yield entry
    finally:
        _thread_local.transforms = before


_NO_SAVED_HOOKS = ("torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor "
                   "hooks. Please open an issue with your use case.")


@contextlib.contextmanager
def running_reverse(level):
    """`running(level)` for a reverse-mode transform (grad, vjp, jacrev, hessian): as
    PyTorch's, these refuse saved-tensor hooks (`checkpoint(use_reentrant=False)` among
    them) inside their function, and refuse to start while such hooks are active."""
    with disable_saved_tensors_hooks(_NO_SAVED_HOOKS), running(level):
        yield level


def inside_transform() -> bool:
    """Whether a function transform (grad, vjp, jvp, jacrev, jacfwd, vmap...) is running its
    function in this thread."""
    return bool(_thread_local.transforms)


# The leaves each transform made, by id: id -> (a weak reference to the leaf, its Level).
# The entry goes when the leaf dies, so an id is never mistaken for a later tensor's.
_MADE: dict[int, tuple] = {}


def _register(leaf: Tensor, level: Level) -> None:
    key = id(leaf)
    _MADE[key] = (weakref.ref(leaf, lambda _ref, key=key: _MADE.pop(key, None)), level)


class Level:
    """One application of a transform: the leaves it made, whether it is still running its
    function (`open`), and whether grad mode was on when it was called (off: its results
    never carry history out)."""

    # A forward-mode transform's level (jvp, jacfwd, linearize): custom Functions must then
    # define `jvp`, as in PyTorch (the product itself is computed by reverse passes here).
    forward_mode = False
    # Whether `Tensor.requires_grad_()` is refused while the function runs, as under
    # PyTorch's transforms (not under linearize, whose function PyTorch traces plainly).
    refuses_requires_grad = True

    def __init__(self) -> None:
        self.outer_grad = is_grad_enabled()
        self.open = True

    def lift(self, x: Tensor) -> Tensor:
        """`lift(x)`, remembering a fresh leaf as this level's own."""
        y = lift(x)
        if y.grad_fn is None:
            _register(y, self)
        return y

    def leaf(self, like: Tensor) -> Tensor:
        """A fresh zero leaf shaped as `like`, this level's own (a dummy cotangent)."""
        y = like.new_zeros(like.shape)._requires_grad_unguarded(True)
        _register(y, self)
        return y

    def close(self) -> None:
        """The function has run: this level's leaves no longer count as another level's
        outside (an enclosing transform's result does not depend on them)."""
        self.open = False

    def finish(self, tree):
        """The pytree `tree` as the transform hands it back: each tensor detached unless it
        depends on a tensor outside this level that requires grad."""
        self.close()
        leaves, spec = _pytree.tree_flatten(tree)
        leaves = [x.detach() if isinstance(x, Tensor) and x.requires_grad and not (
            self.outer_grad and self._reaches_outside(x)) else x for x in leaves]
        return _pytree.tree_unflatten(leaves, spec)

    def _outside(self, leaf: Tensor) -> bool:
        """Whether leaf tensor `leaf` is from outside this level: the caller's, or made by
        an enclosing transform still running (not by this one or one that has finished)."""
        entry = _MADE.get(id(leaf))
        if entry is None or entry[0]() is not leaf:
            return True
        return entry[1] is not self and entry[1].open

    def _reaches_outside(self, x: Tensor) -> bool:
        """Whether the graph behind `x` ends in a leaf from outside this level."""
        if x.grad_fn is None:
            return self._outside(x)
        seen: set[int] = set()
        stack = [x.grad_fn]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                if self._outside(node.variable):
                    return True
                continue
            for edge in node.next_functions:
                if edge[0] is not None:
                    stack.append(edge[0])
        return False


def grads(outputs, inputs, cotangents, *, retain: bool = True) -> tuple:
    """d(outputs . cotangents)/d inputs with history (`create_graph`), zeros for an input
    the outputs do not reach (as PyTorch's transforms give)."""
    from ..autograd._grad import grad

    pairs = [(o, g) for o, g in zip(outputs, cotangents)
             if isinstance(o, Tensor) and o.requires_grad]
    if not pairs or not inputs:
        return tuple(x.new_zeros(x.shape) for x in inputs)
    got = grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], create_graph=True,
               retain_graph=retain, allow_unused=True)
    return tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(got, inputs))
