"""`fusegrad.autocast` (`fusegrad.amp.autocast`): the context manager and decorator, and the
`custom_fwd`/`custom_bwd` decorators for autograd Functions, as PyTorch has them.

The context saves the thread's autocast state for its device type on entry, sets its own and
puts the saved state back on exit; leaving the outermost context empties the weight cache.
The state and the casts themselves are `fusegrad._autocast`'s.
"""

from __future__ import annotations

import collections.abc
import functools
import warnings

import numpy as np

from .. import _autocast, _dtype
from .._autocast import get_autocast_dtype, is_autocast_available

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]


def _check_device_type(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


class autocast:  # noqa: N801  (PyTorch's spelling)
    """Run the ops of a region in mixed precision: on the CPU, matrix products and
    convolutions in `dtype` (bfloat16 by default, or float16), losses and a few others in
    float32, the rest in their inputs' dtype. Usable as a context manager or a decorator;
    `enabled=False` switches autocast off inside an enclosing region."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        _check_device_type(device_type)
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'")
        self.custom_backend_name = "privateuseone"
        if device_type == self.custom_backend_name:
            raise AssertionError(
                f"Tried to use AMP with the `{device_type}` backend, but the backend has not "
                "registered a module or  the module miss some necessary funcs. The backend "
                "should register a module by `torch._register_device_module`, and the module "
                "must have these funcs: \n`get_amp_supported_dtype() -> List[torch.dtype]`. \n")
        self._cache_enabled = (_autocast.is_autocast_cache_enabled() if cache_enabled is None
                               else cache_enabled)
        if enabled:
            if device_type == "cuda":  # this build has no CUDA: autocast stays off
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                              "autocast.", stacklevel=2)
                enabled = False
            elif self.fast_dtype not in (_dtype.bfloat16, _dtype.float16):
                name = device_type.upper()
                warnings.warn(
                    f"In {name} autocast, but the target dtype is not supported. Disabling "
                    f"autocast.\n{name} Autocast only supports dtypes of torch.bfloat16, "
                    "torch.float16 currently.", stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = _autocast.is_autocast_cache_enabled()
        self.prev = _autocast.is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        _autocast.set_autocast_enabled(self.device, self._enabled)
        _autocast.set_autocast_dtype(self.device, self.fast_dtype)
        _autocast.autocast_increment_nesting()
        _autocast.set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        if _autocast.autocast_decrement_nesting() == 0:
            _autocast.clear_autocast_cache()
        _autocast.set_autocast_enabled(self.device, self.prev)
        _autocast.set_autocast_dtype(self.device, self.prev_fastdtype)
        _autocast.set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        """`func` run inside this autocast region on every call."""
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                "Did you mean to use autocast as a context manager? For example:\n"
                "    with torch.autocast(device_type=...):\n"
                "        output = model(input)")

        return autocast_decorator(self, func)


def autocast_decorator(autocast_instance: autocast,
                       func: collections.abc.Callable) -> collections.abc.Callable:
    """`func` run inside the region `autocast_instance` (an `autocast`, entered afresh on
    every call)."""

    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


def _cast(value, device_type: str, dtype):
    """`value` with its floating tensors (not float64) cast to `dtype`, through containers."""
    from .._tensor import Tensor

    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and \
            value.dtype is not _dtype.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        items = (_cast(v, device_type, dtype) for v in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorate an autograd Function's `forward`: note the autocast state for `custom_bwd`;
    with `cast_inputs`, inside an autocast region, cast floating tensor inputs to it and run
    `forward` with autocast off."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _autocast.is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not _autocast.is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs),
                       **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorate an autograd Function's `backward`: run it in the autocast state its
    `forward` (decorated with `custom_fwd`) ran in."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast,
                      dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
