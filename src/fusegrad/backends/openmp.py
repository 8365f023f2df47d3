"""`fusegrad.backends.openmp`."""

from __future__ import annotations


def is_available() -> bool:
    """True, as on PyTorch's CPU build (NumPy's BLAS threads where fusegrad runs in parallel)."""
    return True
