"""Devices, spelled as PyTorch spells them: the CPU, and the meta device (tensors without
data, `_meta`); the default device of factories (`with torch.device(...)`)."""

from __future__ import annotations

from ._thread_state import active as _active
from ._thread_state import local as _local


class device:
    """A device such as `device('cpu')` or `device('cuda', 0)`."""

    __slots__ = ("type", "index")

    def __init__(self, type, index: int | None = None):  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if isinstance(type, int):
            type, index = "cuda", type
        name, _, idx = str(type).partition(":")
        if name not in ("cpu", "cuda", "meta", "mps"):
            raise RuntimeError(
                "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, "
                "fpga, maia, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type "
                f"at start of device string: {type}")
        self.type = name
        self.index = int(idx) if idx else index

    def _check_available(self) -> None:
        if self.type == "cuda":
            raise AssertionError("Torch not compiled with CUDA enabled")
        if self.type not in ("cpu", "meta"):
            raise RuntimeError(f"{self.type} device is not available")

    def __eq__(self, other):
        # A device equals devices only: `x.device == 'cpu'` is False, as in PyTorch, so a
        # program comparing with a string takes PyTorch's branch (`.type == 'cpu'` is True).
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __enter__(self):
        """Within the block, factories given no device make tensors on this one (on this
        thread)."""
        self._check_available()
        _active.default_device.append(None)
        _local.device_contexts = _local.device_contexts + (_local.default_device,)
        _local.default_device = self
        return self

    def __exit__(self, *exc) -> None:
        contexts = _local.device_contexts
        _local.default_device = contexts[-1]
        _local.device_contexts = contexts[:-1]
        _active.default_device.pop()


def set_default(value) -> None:
    """`set_default_device`: this thread's factories' device from now on (None: the CPU)."""
    new = None if value is None else device(value)
    if new is not None:
        new._check_available()
    before = _local.default_device
    if before is None and new is not None:
        _active.default_device.append(None)
    elif before is not None and new is None:
        _active.default_device.pop()
    _local.default_device = new


def default() -> device:
    """The device this thread's factories use when given none."""
    return _local.default_device or cpu


cpu = device("cpu")
