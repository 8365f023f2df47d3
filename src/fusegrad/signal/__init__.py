"""`fusegrad.signal` (torch.signal): window functions in `signal.windows`."""

from . import windows

__all__ = ["windows"]
