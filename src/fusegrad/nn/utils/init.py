"""`skip_init`: build a module whose parameters the caller will overwrite."""

from __future__ import annotations

import inspect
from typing import Any


def skip_init(module_cls: type, *args: Any, **kwargs: Any):
    """Instantiate `module_cls(*args, **kwargs)` for a caller that sets every parameter and
    buffer itself, so their values are unspecified: built on the meta device (its
    initialisation computes and draws nothing), then given storage on the requested device
    (`to_empty`), as PyTorch's."""
    from ..modules.module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
