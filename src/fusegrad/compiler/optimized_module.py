"""OptimizedModule: what `compile(module)` returns, wrapping the original as `_orig_mod`."""

from __future__ import annotations

import copy
import types

from ..nn import Module
from ..nn.modules import _global_hooks
from ..nn.modules._global_hooks import any_call_hooks
from ..nn.modules.module import is_module_call


class OptimizedModule(Module):
    """A module whose `forward` runs through captured graphs; its state is `_orig_mod`'s."""

    def __init__(self, mod: Module, compiled_forward):
        super().__init__()
        self._orig_mod = mod
        self._compiled_forward = compiled_forward
        self._compiled_call = None

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        hooked = any_call_hooks()
        if mod._backward_hooks or mod._backward_pre_hooks or \
                hooked and (_global_hooks._global_backward_hooks or
                            _global_hooks._global_backward_pre_hooks):
            # `mod(...)` would run its full backward hooks or every module's backward hooks,
            # which the compiled code does not: run exactly that, eagerly.
            return mod(*args, **kwargs)
        if mod._forward_pre_hooks or mod._forward_hooks or "forward" in mod.__dict__ or \
                hooked or not is_module_call(type(mod).__call__):
            # `mod(...)` runs its forward hooks, every module's forward hooks, an instance's
            # own forward or the class's own `__call__`, which the compiled class forward
            # does not: the whole call is compiled instead (as PyTorch compiles the module's
            # `__call__`), its hooks traced with the forward (capture guards the global hooks
            # it traced).
            call = self._compiled_call
            if call is None:
                call = self._compiled_call = self._compiled_forward.with_function(
                    _module_call)
            return call(mod, *args, **kwargs)
        compiled = self._compiled_forward
        forward = type(mod).forward
        if forward is not compiled._orig:
            # The class's forward was replaced after compiling (patched, as adapters do):
            # the new one is compiled in its place, or runs eagerly if it has no bytecode.
            if not isinstance(forward, types.FunctionType):
                return mod(*args, **kwargs)
            compiled = self._compiled_forward = compiled.with_function(forward)
        return compiled(mod, *args, **kwargs)

    def __deepcopy__(self, memo) -> OptimizedModule:
        """A copy compiling a deep copy of the original module, with the same settings (as
        PyTorch's copy; the captured graphs belong to the original, the copy captures its own
        on its first call)."""
        compiled = self._compiled_forward
        new = OptimizedModule(copy.deepcopy(self._orig_mod, memo),
                              compiled.with_function(compiled._orig))
        memo[id(self)] = new
        return new

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


def _module_call(mod, *args, **kwargs):
    """`mod(*args, **kwargs)`: hooks and forward, the function a module with forward hooks
    (or its own `forward` attribute) is compiled as."""
    return mod(*args, **kwargs)
