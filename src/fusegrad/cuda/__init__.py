"""`fusegrad.cuda`: the CUDA namespace of a build without CUDA, as PyTorch's CPU build has it.

There is no CUDA device: queries say so, and the calls that need a device are the place to
add PyTorch's errors for them.
"""

from __future__ import annotations


def is_available() -> bool:
    """False: this build has no CUDA backend."""
    return False


def device_count() -> int:
    """0 devices."""
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch's CPU build does (no CUDA generator exists)."""


manual_seed_all = manual_seed


def synchronize(device=None) -> None:
    """Nothing to wait for on the CPU."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False without CUDA."""
    return False
