"""`fusegrad.backends.cudnn`: cuDNN is never available; its flags are recorded only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

enabled = True
benchmark = False
benchmark_limit = None
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: there is no cuDNN."""
    return False


def version() -> None:
    """None: there is no cuDNN library."""
    return None


def is_acceptable(tensor) -> bool:
    """False: no tensor can use cuDNN (all tensors live on the CPU)."""
    return False


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None,
              _allow_tf32=None, _fp32_precision="none", _depthwise_kernel=None) -> tuple:
    """Set the given flags; returns the previous (enabled, benchmark, benchmark_limit,
    deterministic, allow_tf32)."""
    import sys

    mod = sys.modules[__name__]
    old = (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    for name, value in (("enabled", _enabled), ("benchmark", _benchmark),
                        ("benchmark_limit", _benchmark_limit),
                        ("deterministic", _deterministic), ("allow_tf32", _allow_tf32)):
        if value is not None:
            setattr(mod, name, value)
    return old


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True, fp32_precision="none", depthwise_kernel="auto") -> Iterator[None]:
    """Set the flags for the block, restoring the previous ones after it."""
    old = set_flags(enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    try:
        yield
    finally:
        set_flags(*old)
