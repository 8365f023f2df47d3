"""`fusegrad.cuda`: the CUDA namespace of a build without CUDA, as PyTorch's CPU build has it.

There is no CUDA device. PyTorch's CPU build answers queries that need no device (memory
figures: 0, `memory_stats()`: empty, `is_available()`: False) and raises for calls that do,
each with its own error type and text (`AssertionError: Torch not compiled with CUDA
enabled` for most; a few reach a missing binding and raise AttributeError); both are
reproduced here, so a program that probes CUDA takes the same branches as under PyTorch.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from .._legacy_types import CUDA_TYPES

_NOT_COMPILED = "Torch not compiled with CUDA enabled"


def _not_compiled(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(_NOT_COMPILED)


def _missing_binding(name: str) -> AttributeError:
    """The error PyTorch's CPU build raises where it calls a CUDA binding it lacks."""
    return AttributeError(f"module 'torch._C' has no attribute '{name}'")


def is_available() -> bool:
    """False: this build has no CUDA backend."""
    return False


def is_initialized() -> bool:
    """False: CUDA is never initialised without CUDA."""
    return False


def _is_compiled() -> bool:
    """False: built without CUDA."""
    return False


def device_count() -> int:
    """0 devices."""
    return 0


def get_arch_list() -> list[str]:
    """No CUDA architectures: []."""
    return []


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch's CPU build does (no CUDA generator exists)."""


manual_seed_all = manual_seed


def seed() -> None:
    """Accepted and ignored without CUDA."""


def seed_all() -> None:
    """Accepted and ignored without CUDA."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False without CUDA."""
    return False


def synchronize(device: Any = None) -> None:
    """Raises: there is no CUDA device to wait for (PyTorch's CPU build raises too)."""
    raise AssertionError(_NOT_COMPILED)


def current_device() -> int:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def get_device_name(device: Any = None) -> str:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def get_device_properties(device: Any = None) -> Any:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def init() -> None:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def current_stream(device: Any = None) -> Stream:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def default_stream(device: Any = None) -> Stream:
    """Raises AssertionError: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


initial_seed = get_rng_state = get_rng_state_all = ipc_collect = _not_compiled


def _device_index(device: Any) -> int:
    """The CUDA index `device` names (PyTorch's checks and messages for other devices)."""
    from .._device import device as device_cls

    if isinstance(device, str):
        device = device_cls(device)
    if isinstance(device, device_cls):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return -1 if device.index is None else device.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise ValueError("Expected a torch.device with a specified index or an integer, but got:"
                     f"{device}")


def set_device(device: Any) -> None:
    """A negative index is accepted and ignored; any real device index fails (no CUDA)."""
    if _device_index(device) >= 0:
        raise _missing_binding("_cuda_setDevice")


class device:
    """Context manager selecting a CUDA device: index -1 does nothing, a real index raises
    on entry (no CUDA)."""

    def __init__(self, device: Any) -> None:
        self.idx = device if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:  # None compares as in PyTorch: a TypeError
            return
        raise RuntimeError("PyTorch was compiled without CUDA support")

    def __exit__(self, *exc: Any) -> bool:
        return False


# ------------------------------------------------------------------ memory

def memory_allocated(device: Any = None) -> int:
    """0 bytes: no CUDA memory exists."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """0 bytes."""
    return 0


def memory_reserved(device: Any = None) -> int:
    """0 bytes."""
    return 0


def max_memory_reserved(device: Any = None) -> int:
    """0 bytes."""
    return 0


def memory_cached(device: Any = None) -> int:
    """Deprecated spelling of `memory_reserved` (with PyTorch's FutureWarning)."""
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
                  FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated spelling of `max_memory_reserved` (with PyTorch's FutureWarning)."""
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to "
                  "`torch.cuda.max_memory_reserved`", FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def memory_stats(device: Any = None) -> OrderedDict:
    """An empty OrderedDict: CUDA was never initialised."""
    return OrderedDict()


def memory_stats_as_nested_dict(device: Any = None) -> dict:
    """An empty dict."""
    return {}


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """Raises KeyError, as PyTorch's CPU build (its summary reads stats that are empty)."""
    raise KeyError("allocated_bytes.all.current")


def reset_peak_memory_stats(device: Any = None) -> None:
    """Raises AttributeError, as PyTorch's CPU build (no allocator binding)."""
    raise _missing_binding("_cuda_resetPeakMemoryStats")


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated: warns, then behaves as `reset_peak_memory_stats`."""
    warnings.warn("torch.cuda.reset_max_memory_allocated now calls "
                  "torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.",
                  FutureWarning, stacklevel=2)
    return reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated: warns, then behaves as `reset_peak_memory_stats`."""
    warnings.warn("torch.cuda.reset_max_memory_cached now calls "
                  "torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.",
                  FutureWarning, stacklevel=2)
    return reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Raises AttributeError, as PyTorch's CPU build."""
    raise _missing_binding("_cuda_resetAccumulatedMemoryStats")


def empty_cache() -> None:
    """Nothing cached: returns None."""


# ------------------------------------------------------------------ streams and events

class Stream:
    """A CUDA stream: cannot be made without CUDA."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> Stream:
        raise RuntimeError("torch.cuda.Stream requires CUDA support")


class Event:
    """A CUDA event: cannot be made without CUDA."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False) -> Event:
        raise RuntimeError("Tried to instantiate dummy base class Event")


class StreamContext:
    """`with stream(s):`; without CUDA only `None` streams exist and it does nothing."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = None
        self.idx = -1
        self.src_prev_stream = None
        self.dst_prev_stream = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def stream(stream: Stream | None) -> StreamContext:
    """A context manager making `stream` current (nothing to do without CUDA)."""
    return StreamContext(stream)


def set_stream(stream: Stream | None) -> None:
    """Make `stream` current: None does nothing."""
    if stream is None:
        return
    raise AttributeError(f"'{type(stream).__name__}' object has no attribute 'stream_id'")


# `FloatTensor`, `LongTensor`, ...: the CUDA typed classes, which a CPU build has but cannot
# construct.
globals().update(CUDA_TYPES)


def __getattr__(name: str):
    """`fusegrad.cuda.amp` and `fusegrad.cuda.sparse`, loaded on first use (also after a plain
    `import fusegrad.cuda`)."""
    if name in ("amp", "sparse"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
