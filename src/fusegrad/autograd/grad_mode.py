"""Grad mode: whether operations record autograd history; and inference mode.

Both are per thread, as in PyTorch (`fusegrad._thread_state`): a new thread starts with grad
on and inference off whatever other threads do. Ops record while grad mode is on and inference
mode off (`enable_grad()` inside `inference_mode()` turns grad mode on, not recording); every
op with an input requiring grad asks, so dispatch reads the combined flag (`grad_enabled`)
from `_thread_state` directly.
"""

from __future__ import annotations

import functools
import inspect
import sys
from _thread import allocate_lock

from .._thread_state import local as _local
from .._thread_state import set_grad_enabled as _set_grad
from .._thread_state import set_inference as _set_inference


def is_grad_enabled() -> bool:
    """True when grad mode is on in the calling thread (operations record history for
    backward unless inference mode is on too)."""
    return _local.grad_mode


def _decorate(factory, fn):
    """`fn` run under a fresh context from `factory()` at each call; a generator function's
    body runs under it at each resumption, and its caller's code between items outside."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with factory():
                    item = gen.send(None)
                while True:
                    try:
                        sent = yield item
                    except GeneratorExit:
                        with factory():
                            gen.close()
                        raise
                    except BaseException:
                        with factory():
                            item = gen.throw(*sys.exc_info())
                    else:
                        with factory():
                            item = gen.send(sent)
            except StopIteration as stop:
                return stop.value

        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with factory():
            return fn(*args, **kwargs)

    return wrapper


class _GradModeContext:
    """Base of the grad-mode context managers; each also works as a function decorator."""

    _target: bool = True

    def __enter__(self) -> None:
        self._prev = _local.grad_mode
        _set_grad(self._target)

    def __exit__(self, *exc) -> None:
        _set_grad(self._prev)

    def __call__(self, fn):
        return _decorate(self.__class__, fn)

    def clone(self):
        """A fresh context manager of the same kind (PyTorch's API)."""
        return self.__class__()


class _NoParamContext(_GradModeContext):
    """Also usable as a bare decorator: `@no_grad` as well as `@no_grad()`."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if fn is None:
            return self
        return self(fn)


class no_grad(_NoParamContext):
    """Context manager and decorator that disables gradient recording."""

    _target = False


class enable_grad(_NoParamContext):
    """Context manager and decorator that enables gradient recording."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode: as a call it takes effect at once; as a context it restores on exit."""

    def __init__(self, mode: bool):
        if type(mode).__name__ not in ("bool", "bool_"):  # (NumPy's bool is taken too)
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be "
                            f"bool, not {type(mode).__name__}")
        self._prev = _local.grad_mode
        self._target = bool(mode)
        _set_grad(self._target)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _set_grad(self._prev)

    def __call__(self, fn):
        # Used as a decorator: the constructor already switched the mode; undo that.
        _set_grad(self._prev)
        return _decorate(functools.partial(set_grad_enabled, self._target), fn)

    def clone(self):
        """A fresh context manager with the same mode."""
        return self.__class__(self._target)


class set_multithreading_enabled(_GradModeContext):
    """Allow or forbid the backward engine's worker threads (per thread, set at once, restored
    on exit; also a decorator). fusegrad's engine runs backward in the calling thread, so
    only the setting is kept, for code that sets and restores it."""

    def __init__(self, mode: bool):
        self._prev = _local.multithreading
        self.mode = bool(mode)
        _local.multithreading = self.mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _local.multithreading = self._prev

    def __call__(self, fn):
        _local.multithreading = self._prev  # as a decorator: the call sets it, not this
        return _decorate(functools.partial(set_multithreading_enabled, self.mode), fn)

    def clone(self):
        """A fresh context manager with the same mode."""
        return self.__class__(self.mode)


def is_inference_mode_enabled() -> bool:
    """True inside `inference_mode()` (in the calling thread)."""
    return _local.inference


class InferenceVersion(list):
    """The version counter of an inference tensor: a tensor made inside `inference_mode` (a
    view shares its base's counter, so a view of one is one too; a view of a normal tensor
    is not). Its class is the mark, so a normal tensor's counter stays a plain list: outside
    inference mode an inference tensor may not be written in place, saved for backward or
    made to require grad."""

    __slots__ = ()


_SAVE_INFERENCE = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`.")


def check_inference_save(t) -> None:
    """PyTorch's error for saving inference tensor `t` for backward (a no-op for others):
    the recorders call it for a saved tensor whose version counter is not a plain list."""
    if t._vc.__class__ is InferenceVersion:
        raise RuntimeError(_SAVE_INFERENCE)


# While some thread is inside inference mode, every new tensor is shown to `_mark_inference`
# (through `_tensor.watch_new_tensors`, registered here by Tensor, which sits above), which
# marks those made by the threads inside. Outside it tensors are made as if it did not exist.
_inside = [0]  # the inference contexts entered in all threads and not yet left
_inside_lock = allocate_lock()
_watch = None  # fusegrad._tensor.watch_new_tensors, given by `use_new_tensor_watch`


def use_new_tensor_watch(watch) -> None:
    """Registration by fusegrad._tensor: the function that shows new tensors to a watcher."""
    global _watch
    _watch = watch


def _inference_entered(step: int) -> None:
    with _inside_lock:
        _inside[0] += step
        if _inside[0] == step or not _inside[0]:  # the first entered, or the last left
            _watch("inference mode", _mark_inference if step > 0 else None)


def _mark_inference(t) -> None:
    """Make new tensor `t` an inference tensor if this thread is in inference mode and `t`
    has storage of its own (not a view: a view of a normal tensor stays normal)."""
    if _local.inference and t._base is None and t._vc.__class__ is list:
        t._vc = InferenceVersion((0,))


class inference_mode(_GradModeContext):
    """Like `no_grad`, for code that will never need gradients (also a decorator).

    `inference_mode(False)` enables grad (under `no_grad` or `inference_mode()` too), as in
    PyTorch.
    """

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode) and not isinstance(mode, bool):
            self.mode = True
            return self(mode)
        return self

    def __init__(self, mode: bool = True):
        if callable(mode) and not isinstance(mode, bool):
            return
        self.mode = bool(mode)

    def __enter__(self) -> None:
        self._prev = _local.grad_mode
        self._prev_inf = _local.inference
        if self.mode:
            _inference_entered(1)
        _set_inference(self.mode)
        _set_grad(not self.mode)  # `inference_mode(False)` enables grad, even under no_grad

    def __exit__(self, *exc) -> None:
        _set_inference(self._prev_inf)
        _set_grad(self._prev)
        if self.mode:
            _inference_entered(-1)

    def __call__(self, fn):
        return _decorate(functools.partial(inference_mode, self.mode), fn)

    def clone(self):
        """A fresh context manager with the same mode."""
        return self.__class__(self.mode)
