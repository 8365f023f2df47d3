"""`fusegrad.cpu.amp`: PyTorch's deprecated CPU spellings of `autocast` (bfloat16 by default)
and `GradScaler`, `fusegrad.amp`'s with the device filled in, warning at construction."""

from ... import _dtype
from ...amp._deprecated import autocast_for, grad_scaler_for

autocast = autocast_for("cpu", _dtype.bfloat16, __name__)
GradScaler = grad_scaler_for("cpu", __name__)

__all__ = ["autocast", "GradScaler"]
