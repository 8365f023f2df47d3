"""`fusegrad.backends.mps`: Apple's Metal backend is neither built nor available."""

from __future__ import annotations


def is_available() -> bool:
    """False: there is no MPS device."""
    return False


def is_built() -> bool:
    """False: fusegrad is not built with MPS."""
    return False
