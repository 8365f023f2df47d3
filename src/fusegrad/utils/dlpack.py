"""`fusegrad.utils.dlpack`: tensors exchanged with other array libraries through DLPack,
sharing memory (`from_dlpack`, `to_dlpack`; `Tensor.__dlpack__` is the exporting side)."""

from __future__ import annotations

import enum

from .._functions.numeric_more import from_dlpack, to_dlpack


class DLDeviceType(enum.IntEnum):
    """DLPack's device type codes."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]
