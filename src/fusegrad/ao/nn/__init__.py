"""`torch.ao.nn`: quantized modules."""

from __future__ import annotations

from . import quantized  # noqa: F401
