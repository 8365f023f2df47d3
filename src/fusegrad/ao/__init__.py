"""`torch.ao`: quantization (`ao.quantization`) and quantized modules (`ao.nn`), loaded on
first access."""

from __future__ import annotations

_SUBMODULES = frozenset(("quantization", "nn"))


def __getattr__(name: str):
    """Import a submodule on first access."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
