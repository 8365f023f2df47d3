"""Activation checkpointing: keep a region's inputs, recompute its intermediates in backward.

`checkpoint(fn, *args, use_reentrant=False)` runs `fn` under `saved_tensors_hooks` whose pack
hook keeps only a position number; the first unpack in backward re-runs `fn` (with the random
state it saw the first time) and hands back the tensors that run saved, in order.
`use_reentrant=True` is the older design: a custom Function whose forward runs `fn` without
recording and whose backward re-runs it with recording and calls backward inside backward.
"""

from __future__ import annotations

import contextlib
import warnings

from .. import _random
from ..autograd import backward as _backward
from ..autograd.engine import checkpoint_valid as _checkpoint_valid
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]

_NO_USE_REENTRANT = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants.")


_NO_USE_REENTRANT_SEQUENTIAL = (
    "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
    "passed explicitly. In version 2.9 we will raise an exception if use_reentrant is not "
    "passed. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on "
    "the differences between the two variants.")

_REENTRANT_IN_GRAD = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
    "an `inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument.")


class CheckpointError(RuntimeError):
    """The recomputation did not save the same tensors as the original forward."""


def noop_context_fn() -> tuple:
    """The default `context_fn`: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def _tensor_cls():
    from .._tensor import Tensor

    return Tensor


def _detach_like(x):
    Tensor = _tensor_cls()
    if not isinstance(x, Tensor):
        return x
    d = x.detach()
    d._rg = x._rg
    return d


class CheckpointFunction(Function):
    """The reentrant checkpoint: forward without history, backward recomputes and backprops."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        Tensor = _tensor_cls()
        # Warned whatever the grad mode: with no input requiring grad the output has no
        # history, so nothing reaches the function's parameters either.
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _random.get_rng_state()
        ctx.tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not _checkpoint_valid():
            raise RuntimeError(_REENTRANT_IN_GRAD)
        Tensor = _tensor_cls()
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_idx, ctx.saved_tensors):
            inputs[i] = _detach_like(t)
        current = _random.get_rng_state() if ctx.preserve_rng_state else None
        try:
            if current is not None:
                _random.set_rng_state(ctx.rng_state)
            with enable_grad():
                outputs = ctx.run_function(*inputs)
        finally:
            if current is not None:
                _random.set_rng_state(current)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        roots, root_grads = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o.requires_grad:
                roots.append(o)
                root_grads.append(g)
        if not roots:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        # A full accumulating backward: besides the detached inputs, every leaf the function
        # reached without receiving it as an argument (a module's own parameters) gets .grad.
        _backward(roots, root_grads)
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


class _Recompute:
    """State shared by one checkpointed call's pack and unpack hooks."""

    __slots__ = ("fn", "args", "kwargs", "rng_state", "count", "saved", "context")

    def __init__(self, fn, args, kwargs, rng_state, context):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.context = context
        self.count = 0
        self.saved = None

    def pack(self, t) -> int:
        k = self.count
        self.count += 1
        return k

    def unpack(self, k: int):
        if self.saved is None:
            self._recompute()
        if k >= len(self.saved):
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass.")
        return self.saved[k]

    def _recompute(self) -> None:
        saved = []

        def pack(t):
            saved.append(t.detach())
            return None

        def unpack(_):
            raise CheckpointError("torch.utils.checkpoint: a tensor saved during "
                                  "recomputation was unpacked.")

        current = _random.get_rng_state() if self.rng_state is not None else None
        try:
            if current is not None:
                _random.set_rng_state(self.rng_state)
            with enable_grad(), self.context, saved_tensors_hooks(pack, unpack):
                self.fn(*self.args, **self.kwargs)
        finally:
            if current is not None:
                _random.set_rng_state(current)
        self.saved = saved
        self.args = self.kwargs = self.context = None


def checkpoint(function, *args, use_reentrant: bool | None = None,
               context_fn=noop_context_fn,
               determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, **kwargs):
    """Run `function(*args)` keeping only its inputs; its intermediates are recomputed in
    backward."""
    if use_reentrant is None:
        warnings.warn(_NO_USE_REENTRANT, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    forward_context, recompute_context = context_fn()
    state = _Recompute(function, args, kwargs,
                       _random.get_rng_state() if preserve else None, recompute_context)
    with forward_context, saved_tensors_hooks(state.pack, state.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          **kwargs):
    """Run a sequence of modules/functions in `segments` pieces, checkpointing all but the
    last piece."""
    if use_reentrant is None:
        warnings.warn(_NO_USE_REENTRANT_SEQUENTIAL, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)

    def run(start: int, stop: int):
        def forward(x):
            for f in functions[start:stop]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = 0
    # with more segments than functions the step is 0, and range() refuses it (as in torch)
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end, len(functions))(input)
