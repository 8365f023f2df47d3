"""`torch.nn.attention`: which kernels `scaled_dot_product_attention` may choose.

The choice is made from `fusegrad.backends.cuda`'s switches (PyTorch's global attention
flags, read on CPU too): the flash kernel where the inputs fit it and its switch is on, else
the math (composite) path where that switch is on, else PyTorch's "no viable backend" error.
`sdpa_kernel` turns on only the backends it is given, and restores the switches after.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

from ...backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The kernels of scaled dot product attention (PyTorch's values)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self) -> int:
        return self.value

    __index__ = __int__


# Each backend's switch in `backends.cuda` (OVERRIDEABLE and ERROR have none).
_SWITCHES = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
             SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
             SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends: list | SDPBackend, set_priority: bool = False) -> Iterator[dict]:
    """Within the block, only `backends` (one or a list) may run scaled dot product
    attention; the switches are restored on exit. `set_priority` (an order among fused
    kernels) changes nothing on CPU, which has one fused kernel."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    chosen = {backends} if isinstance(backends, SDPBackend) else set(backends)
    saved = dict(_cuda._sdp)
    try:
        for backend, switch in _SWITCHES.items():
            _cuda._sdp[switch] = backend in chosen
        yield {}
    finally:
        _cuda._sdp.update(saved)
