"""Tensor methods named by their module path, and those whose module `import fusegrad` does
not load: a forwarding method imports it on its first call (`x.storage()`: most programs
never ask for a storage). The forwarding frame is a wrapper's, which warnings' stack levels
do not count (`_warn`)."""

from __future__ import annotations

import importlib
import sys


def resolve(path: str):
    """The object at `module.name` under fusegrad (`_functions.inplace.zero_`)."""
    module, _, name = path.rpartition(".")
    module = f"fusegrad.{module}"
    # Nearly always imported already: a dict look-up, not the import machinery's.
    loaded = sys.modules.get(module)
    return getattr(loaded if loaded is not None else importlib.import_module(module), name)


def forwarding_method(name: str, path: str):
    """Tensor method `name`: the function at `path` (`resolve`), its module imported on the
    first call."""
    def method(self, *args, **kwargs):
        return resolve(path)(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = f"`fusegrad.{path}` as a method."
    return method
