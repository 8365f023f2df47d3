"""`fusegrad.backends.mha`: the MultiheadAttention fast-path switch. When it is on,
MultiheadAttention and TransformerEncoderLayer take their inference path under PyTorch's
conditions (eval, no grad, batch-first self-attention, ...), with its boolean masks, NaN rows
for fully masked queries and contiguous outputs."""

from __future__ import annotations

_fastpath_enabled = True


def get_fastpath_enabled() -> bool:
    """Whether MultiheadAttention may take its fused inference path."""
    return _fastpath_enabled


def set_fastpath_enabled(value: bool) -> None:
    """Record the fast-path switch."""
    global _fastpath_enabled
    _fastpath_enabled = value
