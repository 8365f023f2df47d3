"""Activation checkpointing: keep a region's inputs, recompute its intermediates in backward.

`checkpoint(fn, *args, use_reentrant=False)` runs `fn` under `saved_tensors_hooks` whose pack
hook keeps only a position number; the first unpack in backward re-runs `fn` (with the random
state it saw the first time) and hands back the tensors that run saved, in order.
`use_reentrant=True` is the older design: a custom Function whose forward runs `fn` without
recording and whose backward re-runs it with recording and calls backward inside backward.
"""

from __future__ import annotations

import warnings

from .. import _random
from .._thread_state import local as _thread_local
from ..autograd import backward as _backward
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError"]

_NO_USE_REENTRANT = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants.")


class CheckpointError(RuntimeError):
    """The recomputation did not save the same tensors as the original forward."""


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
        leaves = [inputs[i] for i in ctx.tensor_idx if inputs[i].requires_grad]
        got = _grad_of(roots, root_grads, leaves)
        it = iter(got)
        result = [None, None]
        for a in inputs:
            if isinstance(a, Tensor):
                result.append(next(it) if a.requires_grad else None)
            else:
                result.append(None)
        return tuple(result)


def _grad_of(roots, grads, leaves):
    from ..autograd import grad as _grad

    if not leaves:
        _backward(roots, grads)
        return []
    return _grad(roots, leaves, grads, allow_unused=True)


class _Recompute:
    """State shared by one checkpointed call's pack and unpack hooks."""

    __slots__ = ("fn", "args", "kwargs", "rng_state", "count", "saved", "grad_enabled")

    def __init__(self, fn, args, kwargs, rng_state):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
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
            with enable_grad(), saved_tensors_hooks(pack, unpack):
                self.fn(*self.args, **self.kwargs)
        finally:
            if current is not None:
                _random.set_rng_state(current)
        self.saved = saved
        self.args = self.kwargs = None


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=None,
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
        Tensor = _tensor_cls()
        if _thread_local.grad_enabled and not any(
                isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
        return CheckpointFunction.apply(function, preserve, *args)
    state = _Recompute(function, args, kwargs,
                       _random.get_rng_state() if preserve else None)
    with saved_tensors_hooks(state.pack, state.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          **kwargs):
    """Run a sequence of modules/functions in `segments` pieces, checkpointing all but the
    last piece."""
    if use_reentrant is None:
        warnings.warn(_NO_USE_REENTRANT, UserWarning, stacklevel=2)
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
    start = 0
    for _ in range(segments - 1):
        input = checkpoint(run(start, start + size), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
        start += size
    return run(start, len(functions))(input)
