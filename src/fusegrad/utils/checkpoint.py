"""Activation checkpointing: keep a region's inputs, recompute its intermediates in backward.

`checkpoint(fn, *args, use_reentrant=False)` runs `fn` under `saved_tensors_hooks` whose pack
hook keeps only a position number (and the tensor's shape, dtype and device); the first
unpack in backward re-runs `fn` (with the random state it saw the first time), stopping once
it has saved as many tensors as the forward (`early_stop`), checks that it saved the same
number with the same metadata (PyTorch's CheckpointErrors otherwise), and hands them back.
`use_reentrant=True` is the older design: a custom Function whose forward runs `fn` without
recording and whose backward re-runs it with recording and calls backward inside backward.

Either way the recomputation runs under the autocast state the forward saw (enabled, dtype,
cache), for the inputs' device type and for the CPU, as PyTorch's does: backward usually runs
outside the forward's `autocast` region, and a recomputation without it would save tensors
of other dtypes (and give other values) than the forward's.
"""

from __future__ import annotations

import contextlib
import warnings

from .. import _autocast, _random
from ..autograd import backward as _backward
from ..autograd.engine import checkpoint_valid as _checkpoint_valid
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..autograd.graph import _current_graph_task_id, saved_tensors_hooks
from ._pytree import tree_leaves
from ._selective_checkpoint import (
    CheckpointPolicy,
    SelectiveCheckpointContext,
    create_selective_checkpoint_contexts,
)

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn",
           "set_checkpoint_early_stop",
           "CheckpointFunction", "detach_variable", "get_device_states", "set_device_states",
           "CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts"]

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


_DEBUG_TIP = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint\u2011debug mode globally.

If this error occurs under torch.compile with automatic_dynamic_shapes enabled,
it may be because the recomputation selected a different compiled graph than the
forward pass (e.g., a dynamic graph instead of the original static graph).
To fix this, either:
  - Use torch._dynamo.mark_dynamic() to explicitly mark varying dimensions as
    dynamic upfront, avoiding the static-to-dynamic transition.
  - Call torch._C._dynamo.eval_frame._set_lru_cache(False) to disable LRU cache
    reordering, which can change which graph is checked first between forward
    and recompute.
See https://github.com/pytorch/pytorch/issues/166926 for more details and
workaround examples.
"""

# `set_checkpoint_early_stop`'s setting (None: each call's `early_stop` argument decides).
_EARLY_STOP: list = [None]


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Within the block, non-reentrant checkpoints stop recomputing once every tensor the
    backward needs is recomputed (`enable`), or run the whole function again, whatever
    their own `early_stop` argument says."""
    before = _EARLY_STOP[0]
    _EARLY_STOP[0] = enable
    try:
        yield
    finally:
        _EARLY_STOP[0] = before


class _StopRecomputation(Exception):
    """Raised by the recomputation's pack hook once it has every tensor it needs."""


def _metadata(t) -> dict:
    """What the recomputation must reproduce of a saved tensor (`determinism_check`)."""
    return {"shape": t.shape, "dtype": t.dtype, "device": t.device}


def detach_variable(inputs: tuple) -> tuple:
    """`inputs` with each tensor detached, keeping whether it requires grad."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    Tensor = _tensor_cls()
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            detached = x.detach()
            detached.requires_grad = x.requires_grad
            x = detached
        out.append(x)
    return tuple(out)


def get_device_states(*args) -> tuple[list, list]:
    """The accelerator devices of the tensors in `args` and their generators' states: none,
    on a CPU-only build (the CPU's state is kept by `checkpoint` itself)."""
    return [], []


def set_device_states(devices, states, *, device_type=None) -> None:
    """Restore the generator states `get_device_states` gave (none, on a CPU-only build)."""
    if list(devices) or list(states):
        raise AssertionError("Torch not compiled with CUDA enabled")


def noop_context_fn() -> tuple:
    """The default `context_fn`: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def _tensor_cls():
    from .._tensor import Tensor

    return Tensor


def _infer_device_type(args) -> str:
    """The device type whose autocast state checkpoint saves besides the CPU's: that of the
    non-CPU tensors among `args` (nested ones too; "cuda" wins, else the first), or PyTorch's
    default device type ("cpu": this build has no accelerator) when there are none."""
    Tensor = _tensor_cls()
    types = [t.device.type for t in tree_leaves(args)
             if isinstance(t, Tensor) and t.device.type != "cpu"]
    if not types:
        return "cpu"
    if len(set(types)) > 1:
        warnings.warn(
            "Tensor arguments, excluding CPU tensors, are detected on at least two types of "
            "devices. Device state will only be saved for devices of a single device type, "
            "and the remaining devices will be ignored. Consequently, if any checkpointed "
            "functions involve randomness, this may result in incorrect gradients. (Note "
            "that if CUDA devices are among the devices detected, it will be prioritized; "
            "otherwise, the first device encountered will be selected.)\nDevice types: "
            f"{sorted(set(types))} first device type: {types[0]}", stacklevel=2)
    return "cuda" if "cuda" in types else types[0]


def _get_autocast_kwargs(device_type: str) -> tuple:
    """The thread's autocast state now, as `autocast` keyword arguments: for `device_type`
    (None where it has no autocast) and for the CPU."""
    cache = _autocast.is_autocast_cache_enabled()
    device = None
    if _autocast.is_autocast_available(device_type):
        device = {"enabled": _autocast.is_autocast_enabled(device_type),
                  "dtype": _autocast.get_autocast_dtype(device_type), "cache_enabled": cache}
    cpu = {"enabled": _autocast.is_autocast_enabled("cpu"),
           "dtype": _autocast.get_autocast_dtype("cpu"), "cache_enabled": cache}
    return device, cpu


def _autocast_context(device_type: str, device_kwargs, cpu_kwargs):
    """A context that puts back the autocast state `_get_autocast_kwargs` saved (each part
    an `autocast` region, as PyTorch's recomputation enters them: the device's, then the
    CPU's)."""
    from ..amp.autocast_mode import autocast

    stack = contextlib.ExitStack()
    if device_kwargs is not None:
        stack.enter_context(autocast(device_type, **device_kwargs))
    stack.enter_context(autocast("cpu", **cpu_kwargs))
    return stack


def _detach_like(x):
    Tensor = _tensor_cls()
    if not isinstance(x, Tensor):
        return x
    d = x.detach()
    d._rg = x._rg
    return d


class CheckpointFunction(Function):
    """The reentrant checkpoint: forward without history, backward recomputes and backprops."""

    _user_rules = True  # (under function transforms: refused for want of `setup_context`)

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
        ctx.device_type = _infer_device_type(args)
        ctx.device_autocast_kwargs, ctx.cpu_autocast_kwargs = _get_autocast_kwargs(
            ctx.device_type)
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
            with enable_grad(), _autocast_context(ctx.device_type, ctx.device_autocast_kwargs,
                                                  ctx.cpu_autocast_kwargs):
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

    __slots__ = ("fn", "args", "kwargs", "rng_state", "count", "saved", "task", "context",
                 "autocast", "metadata", "check", "early_stop")

    def __init__(self, fn, args, kwargs, rng_state, context, autocast, check: bool = True,
                 early_stop: bool = True):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.context = context
        self.autocast = autocast  # (device type, its autocast kwargs, the CPU's)
        self.count = 0
        self.saved = None
        self.task = -1  # the backward pass `saved` was recomputed for
        self.metadata: list = []  # per saved tensor: what its recomputation must match
        self.check = check  # determinism_check="default"
        self.early_stop = early_stop

    def pack(self, t) -> int:
        k = self.count
        self.count += 1
        self.metadata.append(_metadata(t) if self.check else None)
        return k

    def unpack(self, k: int):
        # Each backward pass recomputes once (a second one under `retain_graph` again, as
        # PyTorch does: a selective checkpoint's kept results then refuse a second use).
        task = _current_graph_task_id()
        if self.saved is None or self.task != task:
            self._recompute()
            self.task = task
            self._check_recomputed()
        return self.saved[k]

    def _check_recomputed(self) -> None:
        """PyTorch's errors when the recomputation saved fewer tensors than the forward, or
        tensors of other shapes, dtypes or devices."""
        if len(self.saved) != len(self.metadata):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the "
                "original forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.metadata)}\n"
                f"Number of tensors saved during recomputation: {len(self.saved)}.\n"
                f"{_DEBUG_TIP}")
        if not self.check:
            return
        different = "".join(
            f"tensor at position {i}:\nsaved metadata: {meta}\n"
            f"recomputed metadata: {_metadata(t)}\n"
            for i, (meta, t) in enumerate(zip(self.metadata, self.saved))
            if meta != _metadata(t))
        if different:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass.\n{different}.\n"
                f"{_DEBUG_TIP}")

    def _recompute(self) -> None:
        saved = []
        wanted = len(self.metadata)
        early_stop = self.early_stop if _EARLY_STOP[0] is None else _EARLY_STOP[0]

        def pack(t):
            if len(saved) == wanted:
                if early_stop:  # everything the backward reads is here: stop
                    raise _StopRecomputation
                raise CheckpointError(
                    "torch.utils.checkpoint: trying to save more tensors during "
                    f"recomputation than during the original forward pass.\n{_DEBUG_TIP}")
            saved.append(t.detach())
            return None

        def unpack(_):
            raise CheckpointError("torch.utils.checkpoint: a tensor saved during "
                                  "recomputation was unpacked.")

        current = _random.get_rng_state() if self.rng_state is not None else None
        try:
            if current is not None:
                _random.set_rng_state(self.rng_state)
            # PyTorch's order: grad mode, the forward's autocast state, then `context_fn`'s
            # recompute context (which may change autocast again).
            with enable_grad(), _autocast_context(*self.autocast), self.context, \
                    saved_tensors_hooks(pack, unpack):
                self.fn(*self.args, **self.kwargs)
        except _StopRecomputation:
            pass
        finally:
            if current is not None:
                _random.set_rng_state(current)
        self.saved = saved


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
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    device_type = _infer_device_type(args)
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():
        # As in PyTorch: without grad mode nothing is saved, so the function runs as it is,
        # without the hooks and without `forward_context`.
        return function(*args, **kwargs)
    state = _Recompute(function, args, kwargs,
                       _random.get_rng_state() if preserve else None, recompute_context,
                       (device_type, *_get_autocast_kwargs(device_type)),
                       determinism_check == "default", early_stop)
    suppressed = True
    with forward_context, saved_tensors_hooks(state.pack, state.unpack):
        out = function(*args, **kwargs)
        suppressed = False
    if suppressed:  # the function raised and `forward_context` swallowed the exception
        raise RuntimeError(
            "torch.utils.checkpoint: the forward context provided by context_fn suppressed an "
            "exception raised during the checkpointed forward. This is not supported because "
            "checkpoint cannot return a value for a failed forward.")
    return out


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
