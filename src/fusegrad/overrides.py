"""`fusegrad.overrides` (PyTorch's `torch.overrides`): helpers for the `__torch_function__`
protocol and `TorchFunctionMode`. The protocol itself lives in `fusegrad._torch_function`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from ._tensor import Tensor
from ._torch_function import (
    _state,
    default_nowrap_functions,
    handle_torch_function,
    has_torch_function,
    pop_mode,
    push_mode,
)
from ._torch_function_wrappers import is_tensor_method_or_property, overridable_functions

__all__ = ["get_default_nowrap_functions", "get_ignored_functions",
           "get_overridable_functions", "wrap_torch_function",
           "handle_torch_function", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property",
           "TorchFunctionMode"]


def has_torch_function_unary(arg: Any) -> bool:
    """`has_torch_function((arg,))`."""
    return has_torch_function((arg,))


def has_torch_function_variadic(*args: Any) -> bool:
    """`has_torch_function(args)`."""
    return has_torch_function(args)


def is_tensor_like(inp: Any) -> bool:
    """True for Tensors and for objects whose type defines `__torch_function__`."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def get_overridable_functions() -> dict:
    """Namespace (module, or `Tensor`) -> the public functions `__torch_function__` can
    override there."""
    import importlib

    importlib.import_module("fusegrad.linalg")  # loaded lazily; its functions are listed too
    return overridable_functions()


def get_ignored_functions() -> set:
    """The public functions of `fusegrad` that `__torch_function__` does not reach."""
    from ._torch_function_wrappers import TOP_LEVEL_NOT_ROUTED

    top = sys.modules["fusegrad"]
    return {getattr(top, name) for name in TOP_LEVEL_NOT_ROUTED if hasattr(top, name)}


def wrap_torch_function(dispatcher: Callable) -> Callable:
    """Decorator: the decorated function honours `__torch_function__` for the arguments
    `dispatcher(*args, **kwargs)` returns."""

    def inner(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)

        return wrapped

    return inner


def get_default_nowrap_functions() -> set:
    """Public functions whose results `Tensor.__torch_function__` leaves unconverted."""
    return default_nowrap_functions()


class TorchFunctionMode:
    """A context manager that sees every public call made inside it (innermost mode first):
    subclasses override `__torch_function__(self, func, types, args=(), kwargs=None)`. While
    the handler runs, the mode is off, so the calls it makes go to the modes below it."""

    def __torch_function__(self, func: Callable, types: tuple, args: tuple = (),
                           kwargs: dict | None = None):
        raise NotImplementedError

    def __enter__(self):
        push_mode(self)
        return self

    def __exit__(self, *exc) -> None:
        pop_mode(self)

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> TorchFunctionMode:
        """Make an instance and enter it (PyTorch's `Mode.push(...)`)."""
        return cls(*args, **kwargs).__enter__()


def _get_current_function_mode():
    """This thread's innermost TorchFunctionMode, or None."""
    return _state.modes[-1] if _state.modes else None
