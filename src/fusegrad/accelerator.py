"""`fusegrad.accelerator`: the device-agnostic accelerator API, as PyTorch's CPU build answers it.

fusegrad runs on the CPU only, so no accelerator is ever available: the queries report that
(`is_available()` False, `device_count()` 0, `current_accelerator()` None) and everything that
needs a device raises PyTorch's RuntimeError.
"""

from __future__ import annotations

import warnings

__all__ = [
    "current_accelerator", "current_device_idx", "current_device_index", "current_stream",
    "device_count", "device_index", "empty_cache", "empty_host_cache", "get_device_capability",
    "get_memory_info", "is_available", "max_memory_allocated", "max_memory_reserved",
    "memory_allocated", "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "set_device_idx", "set_device_index", "set_stream", "synchronize",
]

_NONE = "Cannot access accelerator device when none is available."


def _unavailable() -> RuntimeError:
    return RuntimeError(_NONE)


def is_available() -> bool:
    """False: fusegrad has no accelerator."""
    return False


def device_count() -> int:
    """0: no accelerator devices."""
    return 0


def current_accelerator(check_available: bool = False):
    """None: there is no accelerator (PyTorch's CPU build answers the same)."""
    return None


def current_device_index() -> int:
    """Raises: there is no accelerator device."""
    raise _unavailable()


def current_device_idx() -> int:
    """Deprecated spelling of `current_device_index`."""
    warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device, /) -> None:
    """Raises: there is no accelerator device to select."""
    from ._device import device as _device_cls

    if device is None or (isinstance(device, _device_cls) and device.index is None):
        raise ValueError("Expected a torch.device with a specified index or an integer, "
                         f"but got:{device}")
    raise _unavailable()


def set_device_idx(device, /) -> None:
    """Deprecated spelling of `set_device_index`."""
    warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    set_device_index(device)


def current_stream(device=None, /):
    """Raises: there is no accelerator stream."""
    raise _unavailable()


def set_stream(stream) -> None:
    """Raises: there is no accelerator stream to set."""
    raise TypeError("_accelerator_setStream(): incompatible function arguments. The following "
                    "argument types are supported:\n    1. (arg0: torch.Stream) -> None\n\n"
                    f"Invoked with: {stream}")


def synchronize(device=None, /) -> None:
    """Raises: there is no accelerator to wait for."""
    raise _unavailable()


def empty_cache() -> None:
    """Raises: there is no accelerator allocator."""
    raise _unavailable()


def empty_host_cache() -> None:
    """Raises: there is no pinned-host allocator."""
    raise _unavailable()



def _named(name: str, doc: str):
    def query(device_index=None, /):
        raise _unavailable()

    query.__name__ = query.__qualname__ = name
    query.__doc__ = doc
    return query


max_memory_allocated = _named("max_memory_allocated", "Raises: no accelerator memory.")
max_memory_reserved = _named("max_memory_reserved", "Raises: no accelerator memory.")
memory_allocated = _named("memory_allocated", "Raises: no accelerator memory.")
memory_reserved = _named("memory_reserved", "Raises: no accelerator memory.")
memory_stats = _named("memory_stats", "Raises: no accelerator memory.")
reset_accumulated_memory_stats = _named("reset_accumulated_memory_stats",
                                        "Raises: no accelerator memory.")
reset_peak_memory_stats = _named("reset_peak_memory_stats", "Raises: no accelerator memory.")
get_memory_info = _named("get_memory_info", "Raises: no accelerator memory.")
get_device_capability = _named("get_device_capability", "Raises: no accelerator device.")


class device_index:  # noqa: N801  (PyTorch's name)
    """Context manager selecting an accelerator device; `None` selects nothing."""

    def __init__(self, device, /) -> None:
        self.idx = device

    def __enter__(self) -> None:
        if self.idx is not None:
            raise _unavailable()

    def __exit__(self, *exc) -> bool:
        return False
