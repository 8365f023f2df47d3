"""`fusegrad.save` / `fusegrad.load`: PyTorch's zip checkpoint format, read safely.

`save` writes the format `torch.save` writes (a zip of `data.pkl` plus one file per
storage), so `torch.load` reads fusegrad checkpoints and the other way round. The pickle is
emitted opcode by opcode, for tensors, Parameters and containers of them (dict, OrderedDict,
list, tuple, set, str, numbers, None, bool, torch.Size, torch.device, dtypes) only. Tensors
viewing one buffer share one storage in the file, each at its own offset and strides, as
`torch.save` writes views. Paths are written through `write_atomically` (see
`_atomic_write`): a crash or kill never leaves half a checkpoint.

`load` never runs code from the file and never inflates more than the storages it declares
(see `_checkpoint_read`).

`save_safetensors` / `load_safetensors` read and write the safetensors format (an 8-byte
little-endian header length, a JSON header giving each tensor's dtype, shape and byte range,
then the raw little-endian data); reading only parses JSON and copies bytes. `load` also
accepts a safetensors file and returns its dict of tensors.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from typing import IO, Any

import numpy as np

from . import _dtype
from ._atomic_write import write_atomically
from ._checkpoint_read import (
    ALLOWED,
    SAFE_GLOBALS,
    STORAGE_BY_DTYPE,
    TO_META,
    compat_name,
    data_pickle,
    read_zip_checkpoint,
    user_allowed,
)
from ._device import device
from ._quantized import QuantizedTensor, pickled_params
from ._sparse import SparseTensor
from ._tensor import Size, Tensor

# ---------------------------------------------------------------- writing


class _NotPlain(Exception):
    """An object the plain writer does not lay out: the whole-object pickler takes over."""


class _PickleWriter:
    """Emits a protocol-2 pickle of containers and tensors, as torch.save lays it out.

    Tensors that view one NumPy buffer share one storage in the file, at their own offsets
    and strides, so `torch.load` (and `fusegrad.load`) gives back views of one storage."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        # id(object) -> memo index: an object reached twice (one tensor in two places of a
        # state_dict, one list twice) is written once and fetched back, so `load` gives one
        # object again, as pickle (and torch.save) do. `kept` keeps those objects alive, so
        # that their ids stay unique while the pickle is written.
        self.memo: dict[int, int] = {}
        self.kept: list = []
        # id(buffer array) -> (key, its bytes, dtype, the array, kept so that ids stay unique)
        self.storages: dict[int, tuple[str, np.ndarray, _dtype.dtype, np.ndarray]] = {}

    def w(self, b: bytes) -> None:
        self.out.write(b)

    def global_(self, module: str, name: str) -> None:
        self.w(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def dump(self, obj: Any) -> bytes:
        self.w(b"\x80\x02")
        self.obj(obj)
        self.w(b".")
        return self.out.getvalue()

    def memoized(self, x: Any) -> bool:
        """Write a fetch of `x` from the memo if it was written before."""
        index = self.memo.get(id(x))
        if index is None:
            return False
        self.w(b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index))
        return True

    def put(self, x: Any) -> None:
        """Store the object just built (top of the stack) as `x` in the memo."""
        index = self.memo[id(x)] = len(self.memo)
        self.kept.append(x)
        self.w(b"q" + bytes([index]) if index < 256 else b"r" + struct.pack("<I", index))

    def obj(self, x: Any) -> None:
        if x is None or x is True or x is False or x.__class__ in (int, float, str):
            self.atom(x)
        elif self.memoized(x):
            pass
        elif isinstance(x, (list, dict)):  # memoized before their items: they may hold
            self.container(x)              # themselves
        else:
            self.atom(x)
            if isinstance(x, (Tensor, set)):  # (tuples are immutable: copies do as well)
                self.put(x)

    def container(self, x: Any) -> None:
        if isinstance(x, OrderedDict):
            self.global_("collections", "OrderedDict")
            self.w(b")R")
            self.put(x)
            self.items(x)
            meta = getattr(x, "_metadata", None)
            if meta is not None:
                self.w(b"}(")
                self.obj("_metadata")
                self.ordered_dict(meta)
                self.w(b"ub")
        elif isinstance(x, dict):
            self.w(b"}")
            self.put(x)
            self.items(x)
        else:
            self.w(b"]")
            self.put(x)
            self.appends(x)

    def atom(self, x: Any) -> None:
        """Write `x` (anything but a list or dict) without memoizing it."""
        from .nn.parameter import Buffer, Parameter

        if x is None:
            self.w(b"N")
        elif x is True:
            self.w(b"\x88")
        elif x is False:
            self.w(b"\x89")
        elif isinstance(x, int):
            self.int_(x)
        elif isinstance(x, float):
            self.w(b"G" + struct.pack(">d", x))
        elif isinstance(x, str):
            data = x.encode("utf-8")
            self.w(b"X" + struct.pack("<I", len(data)) + data)
        elif isinstance(x, Parameter):
            state = x._attributes()  # the program's attributes, as PyTorch writes its dict
            self.global_("torch._utils", "_rebuild_parameter_with_state" if state
                         else "_rebuild_parameter")
            self.w(b"(")
            # (its data, which a meta parameter's pickle says requires no grad)
            self.tensor(x, False if x.is_meta else None)
            self.obj(bool(x.requires_grad))
            self.ordered_dict({})
            if state:
                self.obj(state)
            self.w(b"tR")
        elif isinstance(x, SparseTensor):  # PyTorch's form: layout, indices, values, size
            self.global_("torch._utils", "_rebuild_sparse_tensor")
            self.w(b"(")
            self.call("torch.serialization", "_get_layout", ("torch.sparse_coo",))
            self.obj((x._indices(), x._values(), x.shape, x.is_coalesced()))
            self.w(b"tR")
        elif isinstance(x, QuantizedTensor):
            self.qtensor(x)
        elif isinstance(x, Tensor):
            if x.__class__ not in (Tensor, Buffer) and not _fusegrad_class(x):
                # a program's subclass: written with its class (`_rebuild_from_type_v2`) by
                # the whole-object pickler
                raise _NotPlain(type(x).__name__)
            self.tensor(x)
        elif isinstance(x, Size):
            self.call("torch", "Size", (tuple(x),))
        elif isinstance(x, tuple):
            self.w(b"(")
            for v in x:
                self.obj(v)
            self.w(b"t")
        elif isinstance(x, set):
            self.global_("__builtin__", "set")
            self.w(b"(]")
            self.appends(list(x))
            self.w(b"tR")
        elif isinstance(x, device):
            self.call("torch", "device", (x.type,) if x.index is None else (x.type, x.index))
        elif isinstance(x, _dtype.dtype):
            self.global_("torch", x.name)
        elif isinstance(x, np.generic):
            self.obj(x.item())
        else:
            raise _NotPlain(type(x).__name__)

    def call(self, module: str, name: str, args: tuple) -> None:
        self.global_(module, name)
        self.obj(args)
        self.w(b"R")

    def int_(self, x: int) -> None:
        if -(2 ** 31) <= x < 2 ** 31:
            self.w(b"J" + struct.pack("<i", x))
        else:
            data = x.to_bytes((x.bit_length() + 8) // 8, "little", signed=True)
            self.w(b"\x8a" + bytes([len(data)]) + data)

    def appends(self, xs: list) -> None:
        if xs:
            self.w(b"(")
            for v in xs:
                self.obj(v)
            self.w(b"e")

    def items(self, d: dict) -> None:
        if d:
            self.w(b"(")
            for k, v in d.items():
                self.obj(k)
                self.obj(v)
            self.w(b"u")

    def ordered_dict(self, d: dict) -> None:
        self.global_("collections", "OrderedDict")
        self.w(b")R")
        self.items(d)

    def storage_of(self, t: Tensor) -> tuple[str, int, int, tuple, tuple]:
        """(key, storage numel, storage offset, size, stride) of `t`; views of one buffer get
        one storage, as in PyTorch."""
        arr, dt = t._data, t.dtype
        found = _buffer_view(arr)
        if found is None:  # a buffer we cannot address as a whole: store this tensor alone
            buf = np.ascontiguousarray(arr).reshape(-1)
            key = self.add(buf, dt, buf)
            return key, arr.size, 0, arr.shape, _contiguous_strides(arr.shape)
        owner, buf, offset, strides = found
        entry = self.storages.get(id(owner))
        if entry is None:
            key = self.add(buf, dt, owner)
        else:
            key, _, other, _ = entry
            if other is not dt:
                raise RuntimeError("Cannot save multiple tensors or storages that view the "
                                   "same data as different types")
        return key, buf.size // dt.itemsize, offset, arr.shape, strides

    def qstorage_of(self, t: QuantizedTensor) -> tuple[str, int, int, tuple, tuple]:
        """`storage_of` for quantized tensor `t`; quint4x2's integers go alone, packed two to
        a byte as PyTorch stores them (its storage's size counts bytes)."""
        if t.dtype is not _dtype.quint4x2:
            return self.storage_of(t)
        packed = t.int_repr()._data
        key = self.add(packed, t.dtype, packed)
        return key, packed.size, 0, t._data.shape, _contiguous_strides(t._data.shape)

    def qtensor(self, t: QuantizedTensor) -> None:
        """Write quantized tensor `t` as PyTorch does (`_rebuild_qtensor`): its integers'
        storage and geometry, then its scheme and parameters."""
        key, numel, offset, shape, strides = self.qstorage_of(t)
        self.global_("torch._utils", "_rebuild_qtensor")
        self.w(b"((")
        self.obj("storage")
        self.global_("torch", f"{t.dtype.legacy}Storage")
        self.obj(key)
        self.obj("cpu")
        self.obj(numel)
        self.w(b"tQ")
        self.obj(int(offset))
        self.obj(tuple(int(s) for s in shape))
        self.obj(tuple(int(s) for s in strides))
        self.w(b"(")
        self.global_("torch", t._qscheme._name)
        for value in pickled_params(t)[1:]:
            self.obj(value)
        self.w(b"t")
        self.obj(False)
        self.ordered_dict({})
        self.w(b"tR")

    def add(self, buf: np.ndarray, dt: _dtype.dtype, owner: np.ndarray) -> str:
        """A new storage holding the bytes `buf` of the buffer array `owner`."""
        key = str(len(self.storages))
        self.storages[id(owner)] = (key, buf, dt, owner)
        return key

    def tensor(self, t: Tensor, requires_grad: bool | None = None) -> None:
        """Write `t` (`requires_grad`: what to write for it instead of its own)."""
        if requires_grad is None:
            requires_grad = t.requires_grad
        if t.is_meta:  # no storage: PyTorch's dtype, size, strides
            self.global_("torch._utils", "_rebuild_meta_tensor_no_storage")
            self.obj((t.dtype, tuple(t.shape), tuple(t.stride()), bool(requires_grad)))
            self.w(b"R")
            return
        key, numel, offset, shape, strides = self.storage_of(t)
        untyped = t.dtype.name not in STORAGE_BY_DTYPE  # newer dtypes use untyped storages
        self.global_("torch._utils", "_rebuild_tensor_v3" if untyped else "_rebuild_tensor_v2")
        self.w(b"((")
        self.obj("storage")
        if untyped:
            self.global_("torch.storage", "UntypedStorage")
        else:
            self.global_("torch", STORAGE_BY_DTYPE[t.dtype.name])
        self.obj(key)
        self.obj("cpu")
        self.obj(numel * t.dtype.itemsize if untyped else numel)
        self.w(b"tQ")
        self.obj(int(offset))
        self.obj(tuple(int(s) for s in shape))
        self.obj(tuple(int(s) for s in strides))
        self.obj(bool(requires_grad))
        self.ordered_dict({})
        if untyped:
            self.obj(t.dtype)
        self.w(b"tR")


def _fusegrad_class(x: Tensor) -> bool:
    """Whether `x`'s class is fusegrad's own (a fake tensor): saved as a plain tensor."""
    return x.__class__.__module__.startswith("fusegrad.")


def _buffer_view(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, tuple] | None:
    """The array owning the buffer `arr` views, that whole buffer as flat bytes, and `arr`'s
    offset and strides in its elements; None when that buffer cannot be read as one
    contiguous block or `arr` does not sit on it at whole elements."""
    if arr.size == 0:
        return None
    owner = arr
    while True:
        base = owner.base
        if not isinstance(base, np.ndarray):
            # NumPy's stride tricks (broadcast_to: expanded tensors) wrap the array they view
            # in an object whose `.base` is that array: look through it, so an expanded
            # tensor is saved as its storage with zero strides, as PyTorch saves it.
            base = getattr(base, "base", None)
            if not isinstance(base, np.ndarray):
                break
        owner = base
    in_memory_order = owner if owner.flags.c_contiguous or owner.flags.f_contiguous else \
        _dense_permutation(owner)
    if in_memory_order is None:
        return None
    low = owner.__array_interface__["data"][0]
    item = arr.itemsize
    delta = arr.__array_interface__["data"][0] - low
    if delta % item or owner.nbytes % item or any(s < 0 or s % item for s in arr.strides):
        return None
    last = delta + sum((n - 1) * st for n, st in zip(arr.shape, arr.strides)) + item
    if delta < 0 or last > owner.nbytes:  # not inside that buffer after all
        return None
    # The buffer in memory order (a reshape of the axes so ordered: no copy).
    raw = in_memory_order.reshape(-1, order="A").view(np.uint8)
    return owner, raw, delta // item, tuple(s // item for s in arr.strides)


def _dense_permutation(a: np.ndarray) -> np.ndarray | None:
    """`a`'s axes put in the order of its memory, C-contiguous (a view), when `a` fills its
    buffer with no gaps in another axis order (an op's result on a channels_last tensor:
    NumPy keeps its input's layout); else None."""
    if any(s <= 0 for s in a.strides):
        return None
    permuted = a.transpose(sorted(range(a.ndim), key=lambda d: -a.strides[d]))
    return permuted if permuted.flags.c_contiguous else None


def _contiguous_strides(shape) -> tuple:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _write_zip(f: IO[bytes], obj: Any) -> None:
    writer = _PickleWriter()
    try:
        data = writer.dump(obj)
    except _NotPlain:
        # Modules, optimizers, ...: pickled by reference (see `_object_pickle`).
        from ._object_pickle import ObjectPickler

        writer = _PickleWriter()
        out = io.BytesIO()
        ObjectPickler(out, writer).dump(obj)
        data = out.getvalue()
    root = "archive"
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", data)
        z.writestr(f"{root}/byteorder", "little")
        for key, buf, _, _ in writer.storages.values():
            with z.open(f"{root}/data/{key}", "w", force_zip64=buf.nbytes >= 1 << 31) as out:
                out.write(memoryview(buf))
        z.writestr(f"{root}/version", "3\n")
        z.writestr(f"{root}/.data/serialization_id", "0" * 40)


DEFAULT_PROTOCOL = 2  # the pickle protocol `save` writes with unless told another


def save(obj: Any, f, pickle_module: Any = None, pickle_protocol: int = DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write `obj` to `f` (a path or a binary file) in PyTorch's checkpoint format. Tensors,
    state_dicts and containers of them read back with the default `load`; other objects
    (whole modules, optimizers) are pickled by reference and read back only with
    `load(f, weights_only=False)`. Paths are written atomically."""
    if isinstance(f, (str, os.PathLike)):
        write_atomically(f, lambda out: _write_zip(out, obj))
    else:
        _write_zip(f, obj)


# ---------------------------------------------------------------- reading


def load(f, map_location=None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args) -> Any:
    """Read a checkpoint written by `fusegrad.save` or `torch.save` (zip format), or a
    safetensors file.

    By default (`weights_only=True`, as PyTorch's default) no code from the file runs: only
    tensors, containers and the globals allowed by `add_safe_globals` are rebuilt, and no
    more is read than the storages the file declares. `weights_only=False` unpickles whole
    objects (modules, optimizers), running the code the file names: only for trusted files.
    """
    if _check_map_location(map_location):
        token = TO_META.set(True)
        try:
            return load(f, None, pickle_module, weights_only=weights_only, mmap=mmap,
                        **pickle_load_args)
        finally:
            TO_META.reset(token)
    trusted = weights_only is False
    if isinstance(f, (str, os.PathLike)):
        # (the storages are read into memory: with `mmap` the values are the same)
        with open(f, "rb") as fh:
            return _load_file(fh, trusted, mmap, f)
    if not (hasattr(f, "seekable") and f.seekable()):
        f = io.BytesIO(f.read())
    return _load_file(f, trusted, mmap)


def _check_map_location(map_location) -> bool:
    """Whether `map_location` maps the storages to the meta device (then none is read);
    PyTorch's error for a CUDA device (on a machine without CUDA, as every one here)."""
    if isinstance(map_location, dict):
        targets = list(map_location.values())
    elif isinstance(map_location, (str, device)):
        targets = [map_location]
    else:  # None or a function: storages stay on the CPU
        return False
    to_meta = False
    for target in targets:
        kind = device(target).type if isinstance(target, (str, device)) else None
        if kind == "meta":  # (a dict maps the storages saved on the CPU only if it says so)
            to_meta = to_meta or not isinstance(map_location, dict) or \
                map_location.get("cpu") is target
        if kind == "cuda":  # PyTorch's error on a machine without CUDA, as every one here
            raise RuntimeError(
                "Attempting to deserialize object on a CUDA device but "
                "torch.cuda.is_available() is False. If you are running on a CPU-only "
                "machine, please use torch.load with map_location=torch.device('cpu') to map "
                "your storages to the CPU.")
    return to_meta


def _load_file(f: IO[bytes], trusted: bool = False, mmap: bool | None = None,
               path=None) -> Any:
    start = f.tell()
    head = f.read(9)
    size = f.seek(0, os.SEEK_END) - start
    f.seek(start)
    if head[:4] != b"PK\x03\x04" and _looks_like_safetensors(head):
        return _safetensors_from_bytes(f.read())
    try:
        z = zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        f.seek(start)
        if mmap:  # PyTorch's refusal, before it reads the old format
            name = f"{path}, " if isinstance(path, str) else ""
            raise RuntimeError(
                "mmap can only be used with files saved with "
                f"`torch.save({name}_use_new_zipfile_serialization=True), please torch.save "
                "your checkpoint with this option in order to use mmap.") from None
        raise _not_a_checkpoint(f, size, head, trusted) from None
    with z:
        if mmap and path is None:  # (a buffer or open file cannot be mapped)
            raise ValueError("f must be a file path in order to use the mmap argument")
        return read_zip_checkpoint(z, size, weights_only=not trusted)


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first value of PyTorch's pre-1.6 format
_CORRUPT_ZIP = (
    "PytorchStreamReader failed reading zip archive: not a ZIP archive. This is an internal "
    "miniz error. If you are seeing this error, there is a high likelihood that your "
    "checkpoint file is corrupted. This can happen if the checkpoint was not saved properly, "
    "was transferred incorrectly, or the file was modified after saving.")
_UNSUPPORTED_OPERAND = (
    "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
    "`weights_only` argument in `torch.load` from `False` to `True`. Re-running `torch.load` "
    "with `weights_only` set to `False` will likely succeed, but it can result in arbitrary "
    "code execution. Do it only if you got the file from a trusted source.\nPlease file an "
    "issue with the following so that we can make `weights_only=True` compatible with your "
    "use case: WeightsUnpickler error: \n\nUnsupported operand {}\n\nCheck the "
    "documentation of torch.load to learn more about types accepted by default with "
    "weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")


class _FirstValue(pickle.Unpickler):
    """Reads a pickle's first value, refusing every global (a number needs none)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {module}.{name}")


def _not_a_checkpoint(f: IO[bytes], size: int, head: bytes, trusted: bool) -> Exception:
    """The error PyTorch gives for a file that is no zip checkpoint, where it tries its
    pre-1.6 format (whose first value is a magic number) next: an empty file ends the
    input, a zip's header that is not a zip is corrupt, a first byte that is no pickle is
    an invalid key (an unsupported operand to the weights-only reader); a pickle of another
    first value has the wrong magic number. The old format itself is not read here."""
    if not size:
        return EOFError("" if not trusted else "Ran out of input")
    if head[:4] == b"PK\x03\x04":
        return RuntimeError(_CORRUPT_ZIP)
    if not trusted and head[0] != 0x80:  # the weights-only reader wants PROTO first
        return pickle.UnpicklingError(_UNSUPPORTED_OPERAND.format(head[0]))
    try:
        first = _FirstValue(f).load()
    except Exception as e:  # noqa: BLE001 - a broken pickle's own error, as PyTorch's
        return e
    if first != _LEGACY_MAGIC:
        return RuntimeError("Invalid magic number; corrupt file?")
    return RuntimeError("fusegrad.load reads only the zip checkpoint format (torch.save's "
                        "default since PyTorch 1.6)")


# ---------------------------------------------------------------- the weights-only allowlist


def add_safe_globals(safe_globals: list) -> None:
    """Let weights-only loads rebuild these classes and functions (or `(obj, "dotted.name")`
    pairs, for an object saved under another name). Process-wide, as in PyTorch."""
    SAFE_GLOBALS.extend(safe_globals)


def get_safe_globals() -> list:
    """The objects `add_safe_globals` allowed."""
    return list(SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every object `add_safe_globals` allowed."""
    SAFE_GLOBALS.clear()


class safe_globals:
    """`with safe_globals([...]):` allows these objects for the block's weights-only loads."""

    def __init__(self, safe_globals: list) -> None:
        self.safe_globals = safe_globals

    def __enter__(self) -> None:
        self._before = list(SAFE_GLOBALS)
        SAFE_GLOBALS.extend(self.safe_globals)

    def __exit__(self, *exc) -> None:
        SAFE_GLOBALS[:] = self._before


def get_unsafe_globals_in_checkpoint(f) -> list[str]:
    """The dotted names of the globals in checkpoint `f` that a weights-only load refuses
    (read from the pickle's opcodes; nothing in the file runs)."""
    import pickletools

    with (open(f, "rb") if isinstance(f, (str, os.PathLike)) else contextlib.nullcontext(f)) as fh:
        with zipfile.ZipFile(fh) as z:
            data = z.read(data_pickle(z))
    names, strings = [], []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            names.append(tuple(arg.split(" ", 1)))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            names.append((strings[-2], strings[-1]))
        elif isinstance(arg, str):
            strings.append(arg)
    unsafe = []
    for module, name in names:
        module, name = compat_name(2, module, name)
        full = f"{module}.{name}"
        if (module, name) not in ALLOWED and user_allowed(module, name) is None \
                and full not in unsafe:
            unsafe.append(full)
    return unsafe


# ---------------------------------------------------------------- safetensors

_ST_DTYPES = {  # safetensors dtype name -> fusegrad dtype
    "BOOL": _dtype.bool_, "U8": _dtype.uint8, "I8": _dtype.int8, "I16": _dtype.int16,
    "I32": _dtype.int32, "I64": _dtype.int64, "F16": _dtype.float16, "BF16": _dtype.bfloat16,
    "F32": _dtype.float32, "F64": _dtype.float64,
}
_ST_NAMES = {d.name: k for k, d in _ST_DTYPES.items()}
_ST_MAX_HEADER = 100_000_000


def _safetensors_bytes(tensors: dict, metadata: dict | None) -> bytes:
    """The whole safetensors file for `tensors` (name -> Tensor) as bytes."""
    if not isinstance(tensors, dict):
        raise TypeError(f"expected a dict of name -> tensor, got {type(tensors).__name__}")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str)
                                        for k, v in metadata.items()):
        raise ValueError("safetensors metadata must map str to str")
    items = []
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"invalid tensor name {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"{name!r} is a {type(t).__name__}, not a tensor")
        if t.dtype.name not in _ST_NAMES:
            raise ValueError(f"{name!r}: dtype {t.dtype} cannot be stored in safetensors")
        items.append((name, t))
    # larger items first, then by name (the order the reference writer uses)
    items.sort(key=lambda kv: (-kv[1].dtype.itemsize, kv[0]))
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name, t in items:
        arr = t.detach().numpy()  # tobytes() below is C order whatever the strides
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": _ST_NAMES[t.dtype.name], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)  # pad so the data starts 8-byte aligned
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("invalid safetensors header: duplicate key")
    return dict(pairs)


def _looks_like_safetensors(head: bytes) -> bool:
    """Whether a file starting with `head` (its first 9 bytes or more) is safetensors."""
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= _ST_MAX_HEADER and head[8:9] == b"{"


def _safetensors_header(raw: bytes) -> tuple[dict, int]:
    """The parsed JSON header and where the data begins; checks the header's framing."""
    if len(raw) < 8:
        raise ValueError("invalid safetensors file: shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > _ST_MAX_HEADER:
        raise ValueError(f"invalid safetensors file: header length {n} is too large")
    if 8 + n > len(raw):
        raise ValueError("invalid safetensors file: header longer than the file")
    text = raw[8:8 + n]
    if not text.startswith(b"{"):
        raise ValueError("invalid safetensors header: it must be a JSON object")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"invalid safetensors header: {exc}") from None
    if not isinstance(header, dict):
        raise ValueError("invalid safetensors header: it must be a JSON object")
    return header, 8 + n


def _safetensors_from_bytes(raw: bytes, with_metadata: bool = False):
    """Parse a safetensors file's bytes into an (ordered by offset) dict of tensors."""
    header, start = _safetensors_header(raw)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(v, str) for v in metadata.values())):
        raise ValueError("invalid safetensors header: __metadata__ must map str to str")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"invalid safetensors header entry for {name!r}")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _ST_DTYPES:
            raise ValueError(f"{name!r}: unsupported safetensors dtype {dt!r}")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise ValueError(f"{name!r}: invalid shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(
                type(o) is int for o in offs) and 0 <= offs[0] <= offs[1]):
            raise ValueError(f"{name!r}: invalid data_offsets {offs!r}")
        fdt = _ST_DTYPES[dt]
        if offs[1] - offs[0] != math.prod(shape) * fdt.itemsize:
            raise ValueError(f"{name!r}: data_offsets {offs} do not match shape {shape} and "
                             f"dtype {dt}")
        entries.append((offs[0], offs[1], name, fdt, shape))
    entries.sort(key=lambda e: (e[0], e[1]))
    body = len(raw) - start
    pos = 0
    for begin, end, name, _, _ in entries:
        if begin != pos:
            raise ValueError(f"invalid safetensors file: {name!r} does not start where the "
                             "previous tensor ends (gap or overlap)")
        pos = end
    if pos != body:
        raise ValueError(f"invalid safetensors file: the data is {body} bytes but the header "
                         f"describes {pos}")
    out: dict[str, Tensor] = {}
    for begin, _end, name, fdt, shape in entries:
        count = math.prod(shape)
        arr = np.frombuffer(raw, dtype=fdt.np.newbyteorder("<"), count=count,
                            offset=start + begin)
        arr = arr.astype(fdt.np, copy=True).reshape(shape)
        out[name] = Tensor._make(arr, fdt)
    return (out, metadata) if with_metadata else out


def save_safetensors(tensors: dict, f, metadata: dict | None = None) -> None:
    """Write `tensors` (name -> Tensor) in the safetensors format to `f` (a path, written
    atomically, or a binary file), with optional str -> str `metadata`."""
    raw = _safetensors_bytes(tensors, metadata)
    if not isinstance(f, (str, os.PathLike)):
        f.write(raw)
        return
    write_atomically(f, lambda out: out.write(raw))


def load_safetensors(f, *, with_metadata: bool = False):
    """Read a safetensors file (a path, a binary file or its bytes) into a dict of tensors
    (and, with `with_metadata=True`, also its `__metadata__` dict or None)."""
    if isinstance(f, (bytes, bytearray, memoryview)):
        raw = bytes(f)
    elif isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            raw = fh.read()
    else:
        raw = f.read()
    return _safetensors_from_bytes(raw, with_metadata)


__all__ = ["load", "load_safetensors", "save", "save_safetensors"]
