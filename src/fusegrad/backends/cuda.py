"""`fusegrad.backends.cuda`: CUDA is not built in; its matmul and attention flags are recorded."""

from __future__ import annotations


def is_built() -> bool:
    """False: fusegrad has no CUDA support."""
    return False


class cuBLASModule:  # noqa: N801  (PyTorch's name)
    """`backends.cuda.matmul`: reduced-precision switches, recorded and read back."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.allow_fp16_accumulation = False


matmul = cuBLASModule()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled() -> bool:
    """Whether the flash scaled-dot-product kernel may be chosen (recorded flag)."""
    return _sdp["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    """Record the flash scaled-dot-product switch."""
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """Whether the memory-efficient attention kernel may be chosen (recorded flag)."""
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Record the memory-efficient attention switch."""
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    """Whether the reference attention implementation may be chosen (recorded flag)."""
    return _sdp["math"]


def enable_math_sdp(enabled: bool) -> None:
    """Record the reference attention switch."""
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """Whether the cuDNN attention kernel may be chosen (recorded flag)."""
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Record the cuDNN attention switch."""
    _sdp["cudnn"] = bool(enabled)


def is_flash_attention_available() -> bool:
    """False: no flash attention kernels without CUDA."""
    return False
