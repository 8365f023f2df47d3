"""The deprecated per-device spellings of `autocast` and `GradScaler` (`torch.cpu.amp.*`,
`torch.cuda.amp.*`): `fusegrad.amp`'s classes with the device filled in, warning as PyTorch
does at each construction."""

from __future__ import annotations

import warnings

from . import autocast_mode as _mode
from . import grad_scaler as _scaler


def autocast_for(device: str, default_dtype, module: str) -> type:
    """`torch.<device>.amp.autocast`: `fusegrad.amp.autocast(device, ...)` under its old name
    (`module` is where the class lives, for its repr and pickling)."""

    class autocast(_mode.autocast):  # noqa: N801  (PyTorch's spelling)
        __doc__ = f"Deprecated: `fusegrad.amp.autocast({device!r}, ...)`."

        def __init__(self, enabled: bool = True, dtype=default_dtype,
                     cache_enabled: bool = True) -> None:
            warnings.warn(f"`torch.{device}.amp.autocast(args...)` is deprecated. Please use "
                          f"`torch.amp.autocast('{device}', args...)` instead.",
                          FutureWarning, stacklevel=2)
            super().__init__(device, enabled=enabled, dtype=dtype,
                             cache_enabled=cache_enabled)

    autocast.__module__ = module
    autocast.__qualname__ = "autocast"
    return autocast


def grad_scaler_for(device: str, module: str) -> type:
    """`torch.<device>.amp.GradScaler`: `fusegrad.amp.GradScaler(device, ...)` under its old
    name."""

    class GradScaler(_scaler.GradScaler):
        __doc__ = f"Deprecated: `fusegrad.amp.GradScaler({device!r}, ...)`."

        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                     backoff_factor: float = 0.5, growth_interval: int = 2000,
                     enabled: bool = True) -> None:
            warnings.warn(f"`torch.{device}.amp.GradScaler(args...)` is deprecated. Please "
                          f"use `torch.amp.GradScaler('{device}', args...)` instead.",
                          FutureWarning, stacklevel=2)
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval,
                             enabled=enabled)

    GradScaler.__module__ = module
    GradScaler.__qualname__ = "GradScaler"
    return GradScaler
