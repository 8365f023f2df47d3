"""`skip_init`: build a module whose parameters the caller will overwrite."""

from __future__ import annotations

import inspect
from typing import Any


def skip_init(module_cls: type, *args: Any, **kwargs: Any):
    """Instantiate `module_cls(*args, **kwargs)` for a caller that sets every parameter and
    buffer itself, so their values are unspecified. PyTorch builds on the meta device and
    then allocates; fusegrad has no meta device, so the constructor's initialisation runs
    (the same checks and the same result up to those unspecified values)."""
    from ..modules.module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs.setdefault("device", "cpu")
    return module_cls(*args, **kwargs)
