"""`fusegrad.cuda.amp.autocast`: `fusegrad.amp.autocast("cuda", ...)` under its deprecated
name (off in this build, which has no CUDA)."""

from __future__ import annotations

import functools
import warnings

from ... import _dtype
from ...amp import autocast_mode as _mode
from ...amp._deprecated import autocast_for

__all__ = ["autocast"]


autocast = autocast_for("cuda", _dtype.float16, __name__)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: `fusegrad.amp.custom_fwd(device_type="cuda", ...)`."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return functools.partial(_mode.custom_fwd, device_type="cuda")(fwd=fwd,
                                                                   cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """Deprecated: `fusegrad.amp.custom_bwd(device_type="cuda")`."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return functools.partial(_mode.custom_bwd, device_type="cuda")(bwd)
