"""`torch.ao.nn.quantized.dynamic`: modules with quantized weights that quantize their
activations on the fly."""

from __future__ import annotations

from .linear import Linear, LinearPackedParams

__all__ = ["Linear", "LinearPackedParams"]
