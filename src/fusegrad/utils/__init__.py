"""Utilities: `fusegrad.utils.checkpoint` (activation checkpointing), `fusegrad.utils.data`.

Both load on first use (PEP 562): the DataLoader's worker machinery imports multiprocessing,
which `import fusegrad` should not pay for."""

_LAZY_MODULES = frozenset({"checkpoint", "data"})


def __getattr__(name: str):
    """Import `checkpoint` or `data` on first access."""
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The namespace including the submodules not loaded yet."""
    return sorted(set(globals()) | _LAZY_MODULES)
