"""Devices, spelled as PyTorch spells them: the CPU, and the meta device (tensors without
data, `_meta`); the default device of factories (`with torch.device(...)`)."""

from __future__ import annotations

from ._thread_state import active as _active
from ._thread_state import local as _local

# The device types PyTorch's parser knows (its message lists them in this order).
_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
          "privateuseone")
_NO_INDEX = object()  # `index` not passed (None passed is explicit)
_INDEX_LIMIT = 2 ** 31  # PyTorch parses the index as a C int


def _type_name(value) -> str:
    return "NoneType" if value is None else value.__class__.__name__


def _parse(text: str) -> tuple:
    """(type, index or None) of a device string, with PyTorch's errors for malformed ones:
    a type of letters and underscores, then optionally `:` and a decimal index without
    sign or leading zeros."""
    if not text:
        raise RuntimeError("Device string must not be empty")
    name, colon, idx = text.partition(":")
    if not (name and all(c == "_" or (c.isascii() and c.isalpha()) for c in name)) or (
            colon and not (idx.isascii() and idx.isdigit()
                           and (idx == "0" or idx[0] != "0"))):
        raise RuntimeError(f"Invalid device string: '{text}'")
    if name not in _TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of "
                           f"device string: {text}")
    if not colon:
        return name, None
    if int(idx) >= _INDEX_LIMIT:
        raise RuntimeError(f"Could not parse device index '{idx}' in device string '{text}'")
    return name, int(idx)


class device:
    """A device such as `device('cpu')` or `device('cuda', 0)`."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=_NO_INDEX):  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if index is not _NO_INDEX and index is not None and (
                index.__class__ is bool or not isinstance(index, int)):
            raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                            f"{_type_name(index)}")
        if isinstance(type, int) and type.__class__ is not bool:
            if type < 0:
                raise RuntimeError("Device index must not be negative")
            # PyTorch reads a bare index as the current accelerator's, and there is none.
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if isinstance(type, bytes):
            type = type.decode()
        if not isinstance(type, str):
            raise TypeError(
                "device() received an invalid combination of arguments - got "
                f"({_type_name(type)}), but expected one of:\n * (torch.device device)\n"
                "      didn't match because some of the arguments have invalid types: "
                f"(!{_type_name(type)}!)\n * (str type, int index = -1)\n")
        name, idx = _parse(type)
        if idx is not None and index is not _NO_INDEX:
            raise RuntimeError("type (string) must not include an index because index was "
                               f"passed explicitly: {type}")
        if index is not _NO_INDEX and index is not None:
            if index < 0:
                raise RuntimeError("Device index must not be negative")
            idx = index
        self.type = name
        self.index = idx

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
meta = device("meta")
