"""Grad mode: whether operations record autograd history.

The flag is process-wide (PyTorch keeps it per thread); it is read on every op that has an
input requiring grad, so it lives in one slot of one object.
"""

from __future__ import annotations

import functools


class _GradState:
    __slots__ = ("enabled",)

    def __init__(self):
        self.enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    """True when operations record history for backward."""
    return state.enabled


class _GradModeContext:
    """Base of the grad-mode context managers; each also works as a function decorator."""

    _target: bool = True

    def __enter__(self) -> None:
        self._prev = state.enabled
        state.enabled = self._target

    def __exit__(self, *exc) -> None:
        state.enabled = self._prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper

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
        self._prev = state.enabled
        self._target = bool(mode)
        state.enabled = self._target

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        state.enabled = self._prev

    def __call__(self, fn):
        # Used as a decorator: the constructor already switched the mode; undo that.
        state.enabled = self._prev
        mode = self._target

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        """A fresh context manager with the same mode."""
        return self.__class__(self._target)


class _InferenceState:
    __slots__ = ("enabled",)

    def __init__(self):
        self.enabled = False


inference_state = _InferenceState()


def is_inference_mode_enabled() -> bool:
    """True inside `inference_mode()`."""
    return inference_state.enabled


class inference_mode(_GradModeContext):
    """Like `no_grad`, for code that will never need gradients (also a decorator).

    `inference_mode(False)` is a no-op context, as in PyTorch.
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
        self._prev = state.enabled
        self._prev_inf = inference_state.enabled
        if self.mode:
            state.enabled = False
        inference_state.enabled = self.mode

    def __exit__(self, *exc) -> None:
        state.enabled = self._prev
        inference_state.enabled = self._prev_inf

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        """A fresh context manager with the same mode."""
        return self.__class__(self.mode)
