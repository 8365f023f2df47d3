"""`fusegrad.cuda.amp.autocast`: `fusegrad.amp.autocast("cuda", ...)` under its deprecated
name (off in this build, which has no CUDA)."""

from __future__ import annotations

import functools
import warnings

from ... import _dtype
from ...amp import autocast_mode as _mode

__all__ = ["autocast"]


class autocast(_mode.autocast):  # noqa: N801  (PyTorch's spelling)
    """Deprecated: `fusegrad.amp.autocast("cuda", ...)`."""

    def __init__(self, enabled: bool = True, dtype=_dtype.float16,
                 cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


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
