"""`torch.nn.quantized`: the legacy spelling of `torch.ao.nn.quantized`."""

from __future__ import annotations

from . import dynamic  # noqa: F401
