"""PyTorch's `torch._dynamo.utils` names that programs read: the compiler's `counters`."""

from __future__ import annotations

from ..compiler.logs import counters

__all__ = ["counters"]
