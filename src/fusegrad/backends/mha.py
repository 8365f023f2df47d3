"""`fusegrad.backends.mha`: the MultiheadAttention fast-path switch (recorded; fusegrad's
attention always runs the reference computation, whose results the fast path matches)."""

from __future__ import annotations

_fastpath_enabled = True


def get_fastpath_enabled() -> bool:
    """Whether MultiheadAttention may take its fused inference path (recorded flag)."""
    return _fastpath_enabled


def set_fastpath_enabled(value: bool) -> None:
    """Record the fast-path switch."""
    global _fastpath_enabled
    _fastpath_enabled = value
