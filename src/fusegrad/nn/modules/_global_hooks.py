"""Hooks for every module at once (`torch.nn.modules.module.register_module_*_hook`).

The call-time tables (forward pre, forward, full backward pre and full backward) are
`_CallHooks` dicts: while any of them holds a hook, `Module.__call__` is the hooked call,
and it returns to the plain one when the last is removed, so a model without global hooks
pays nothing for their existence. Global hooks run before each module's own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ...autograd.graph import RemovableHandle


class _CallHooks(OrderedDict):
    """A global hook table that switches `Module.__call__` when it becomes (non-)empty."""

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        _sync_call()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        _sync_call()

    def pop(self, *args):
        """Remove a hook (what `RemovableHandle.remove` calls)."""
        out = super().pop(*args)
        _sync_call()
        return out

    def popitem(self, last: bool = True):
        """Remove the last (or first) hook."""
        out = super().popitem(last)
        _sync_call()
        return out

    def clear(self) -> None:
        """Remove every hook."""
        super().clear()
        _sync_call()

    def update(self, *args, **kwargs) -> None:
        """Add hooks."""
        super().update(*args, **kwargs)
        _sync_call()


_global_forward_pre_hooks: OrderedDict = _CallHooks()
_global_forward_hooks: OrderedDict = _CallHooks()
_global_forward_hooks_with_kwargs: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_backward_pre_hooks: OrderedDict = _CallHooks()
_global_backward_hooks: OrderedDict = _CallHooks()
# None until a global backward hook is registered: True for full hooks, False for the
# deprecated kind; the table holds one kind only, and the kind stays set (PyTorch's rule).
_global_is_full_backward_hook: bool | None = None
_global_buffer_registration_hooks: OrderedDict = OrderedDict()
_global_module_registration_hooks: OrderedDict = OrderedDict()
_global_parameter_registration_hooks: OrderedDict = OrderedDict()
_CALL_TABLES = (_global_forward_pre_hooks, _global_forward_hooks, _global_backward_pre_hooks,
                _global_backward_hooks)


def any_call_hooks() -> bool:
    """True while a global forward or backward hook is registered (what the compiler asks
    before it inlines a module's forward)."""
    return any(_CALL_TABLES)


def _sync_call() -> None:
    from .module import Module

    hooked = any(_CALL_TABLES)
    wanted = Module._call_with_global_hooks if hooked else Module._call_plain
    if Module.__dict__["__call__"] is not wanted:
        Module.__call__ = wanted


def _add(table: OrderedDict, hook: Callable, extra=None) -> RemovableHandle:
    handle = RemovableHandle(table, extra_dict=extra)
    table[handle.id] = hook
    return handle


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, args)` before the forward of every module (before the module's own
    pre-hooks); it may return new args."""
    return _add(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """Call `hook(module, args, output)` (or `(module, args, kwargs, output)` with
    `with_kwargs`) after the forward of every module, before the module's own hooks; it may
    return a new output. `always_call` runs it even when the forward raises."""
    handle = RemovableHandle(_global_forward_hooks, extra_dict=[
        _global_forward_hooks_with_kwargs, _global_forward_hooks_always_called])
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    _global_forward_hooks[handle.id] = hook
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, grad_output)` before the backward of every module, before the
    module's own backward pre-hooks; it may return new grad_output."""
    return _add(_global_backward_pre_hooks, hook)


_MIXED_GLOBAL_BACKWARD_HOOKS = (
    "Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
    "Please use only one of them.")


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, grad_input, grad_output)` when the input gradients of every module
    are computed, before the module's own backward hooks; it may return new grad_input."""
    return _add_global_backward_hook(hook, True)


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """Deprecated (use `register_module_full_backward_hook`): every module's deprecated
    backward hook (see `Module.register_backward_hook`), before the module's own."""
    return _add_global_backward_hook(hook, False)


def _add_global_backward_hook(hook: Callable, full: bool) -> RemovableHandle:
    """Add a global backward hook of the full kind (`full`) or the deprecated one; the two
    kinds do not mix, as in PyTorch."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError(_MIXED_GLOBAL_BACKWARD_HOOKS)
    _global_is_full_backward_hook = full
    return _add(_global_backward_hooks, hook)


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, name, buffer)` whenever a module registers or assigns a buffer; it
    may return the buffer to store instead."""
    return _add(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, name, submodule)` whenever a module registers or assigns a child;
    it may return the module to store instead."""
    return _add(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """Call `hook(module, name, param)` whenever a module registers a parameter (not None);
    it may return the parameter to store instead."""
    return _add(_global_parameter_registration_hooks, hook)


def _registered(table: OrderedDict, module, name: str, value):
    """`value` after the registration hooks of `table` (each may replace it)."""
    for hook in list(table.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value
