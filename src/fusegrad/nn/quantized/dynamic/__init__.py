"""`torch.nn.quantized.dynamic`: the legacy spelling of `torch.ao.nn.quantized.dynamic`."""

from __future__ import annotations

from ....ao.nn.quantized.dynamic import *  # noqa: F403
from ....ao.nn.quantized.dynamic import __all__  # noqa: F401
