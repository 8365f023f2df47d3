"""Devices, spelled as PyTorch spells them. Only the CPU exists for now."""

from __future__ import annotations


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
        return self

    def __exit__(self, *exc) -> None:
        pass


cpu = device("cpu")
