"""OptimizedModule: what `compile(module)` returns, wrapping the original as `_orig_mod`."""

from __future__ import annotations

import copy
import types

from ..nn import Module
from ..nn.modules._global_hooks import any_call_hooks


class OptimizedModule(Module):
    """A module whose `forward` runs through captured graphs; its state is `_orig_mod`'s."""

    def __init__(self, mod: Module, compiled_forward):
        super().__init__()
        self._orig_mod = mod
        self._compiled_forward = compiled_forward

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        if mod._forward_pre_hooks or mod._forward_hooks or mod._backward_hooks or \
                mod._backward_pre_hooks or "forward" in mod.__dict__ or any_call_hooks():
            # `mod(...)` would run its hooks (its own or every module's) or an instance's own
            # forward, which the compiled class forward does not: run exactly that, eagerly.
            return mod(*args, **kwargs)
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
