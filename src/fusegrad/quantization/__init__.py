"""`torch.quantization`: the legacy spelling of `torch.ao.quantization`."""

from __future__ import annotations

from ..ao.quantization import *  # noqa: F403
from ..ao.quantization import __all__  # noqa: F401
