"""Warnings given once per process, as PyTorch gives those raised from its C++ core
(`TORCH_WARN_ONCE`), or every time under `torch.set_warn_always(True)`."""

from __future__ import annotations

import sys
import warnings


class _State:
    always = False
    given: set = set()


_state = _State()


# Frames of wrappers around public functions, which a warning's stack level does not count:
# the `__torch_function__` protocol's generated wrappers, its modules (the slow path), and
# autocast's wrappers around composites (`_autocast.composite`), and the methods forwarding
# to a module loaded on first use (`_functions/lazy_methods.py`).
_HERE = __file__[:-len("_warn.py")]
_WRAPPER_FILES = frozenset({"<torch function wrapper>", _HERE + "_torch_function.py",
                            _HERE + "_torch_function_wrappers.py", _HERE + "_autocast.py",
                            _HERE + "_functions/lazy_methods.py"})


def warning_stacklevel(level: int) -> int:
    """The `stacklevel` for a warning raised `level` frames below the user's code when the
    wrapper frames in between are not counted: the warning names the user's line, as
    PyTorch's do."""
    frame = sys._getframe(1)  # the function that warns
    actual, counted = 1, 1
    while counted < level and frame.f_back is not None:
        frame = frame.f_back
        actual += 1
        if frame.f_code.co_filename not in _WRAPPER_FILES:
            counted += 1
    return actual


def warn_once(message: str, stacklevel: int = 3) -> None:
    """`message` as a UserWarning, the first time only unless `set_warn_always(True)`;
    `stacklevel` counts as `warnings.warn`'s does, from this function's caller."""
    if _state.always or message not in _state.given:
        _state.given.add(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def warn_once_at_caller(message: str) -> None:
    """`warn_at_caller`, the first time only unless `set_warn_always(True)` (PyTorch's
    TORCH_WARN_ONCE from its core)."""
    if _state.always or message not in _state.given:
        _state.given.add(message)
        warn_at_caller(message)


def warn_at_caller(message: str) -> None:
    """`message` as a UserWarning naming the first frame outside fusegrad, as PyTorch's
    warnings from its C++ core name the Python line that called into it."""
    frame, level = sys._getframe(0), 1  # stacklevel 1 is this function's frame
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "fusegrad" and not module.startswith("fusegrad."):
            break
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def set_warn_always(b: bool) -> None:
    """Whether warnings PyTorch gives once per process are given every time."""
    _state.always = bool(b)


def is_warn_always_enabled() -> bool:
    """The setting of `set_warn_always`."""
    return _state.always
