"""`fusegrad.cuda.amp`: PyTorch's deprecated CUDA spellings of `autocast` and `GradScaler`.

This build has no CUDA, so both warn as PyTorch's CPU build does and switch themselves off:
a program written for a GPU (`GradScaler()`, `with autocast():`) runs unchanged in float32.
"""

from ...amp import custom_bwd, custom_fwd
from .autocast_mode import autocast
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler"]
