"""The context manager the backend modules' `flags(...)` blocks share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def flag_context(module: ModuleType, **values) -> Iterator[None]:
    """Set `module`'s flags for the block (None leaves one as it is), restoring them after."""
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        if v is not None:
            setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)
