"""OptimizedModule: what `compile(module)` returns, wrapping the original as `_orig_mod`."""

from __future__ import annotations

from ..nn import Module


class OptimizedModule(Module):
    """A module whose `forward` runs through captured graphs; its state is `_orig_mod`'s."""

    def __init__(self, mod: Module, compiled_forward):
        super().__init__()
        self._orig_mod = mod
        self._compiled_forward = compiled_forward

    def forward(self, *args, **kwargs):
        return self._compiled_forward(self._orig_mod, *args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)
