"""`torch.ao.nn.quantized`: modules computing with quantized tensors."""

from __future__ import annotations

from . import dynamic  # noqa: F401
