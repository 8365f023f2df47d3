"""`fusegrad.backends.mkl`: whether MKL is available (NumPy's BLAS is what fusegrad uses)."""

from __future__ import annotations

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    """True, as on PyTorch's x86 CPU build."""
    return True
