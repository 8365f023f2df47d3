"""`fusegrad.amp`: automatic mixed precision, as `torch.amp`: `autocast`, `GradScaler`, and
the `custom_fwd`/`custom_bwd` decorators for autograd Functions."""

from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "GradScaler"]
