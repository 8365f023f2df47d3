"""`fusegrad.save` / `fusegrad.load`: PyTorch's zip checkpoint format, read safely.

`save` writes the format `torch.save` writes (a zip of `data.pkl` plus one file per
storage), so `torch.load` reads fusegrad checkpoints and the other way round. The pickle is
emitted opcode by opcode, for tensors, Parameters and containers of them (dict, OrderedDict,
list, tuple, str, numbers, None, bool) only; the file is written to a temporary name and then
renamed, so a crash never leaves half a checkpoint.

`load` never runs code from the file: its unpickler resolves only the handful of globals a
checkpoint of tensors needs (the tensor and parameter rebuild functions, the storage types,
`OrderedDict`) and refuses every other global before anything is called.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import tempfile
import zipfile
from collections import OrderedDict
from typing import IO, Any

import numpy as np

from . import _dtype
from ._tensor import Tensor

_STORAGE_BY_DTYPE = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage",
}
_DTYPE_BY_STORAGE = {v: k for k, v in _STORAGE_BY_DTYPE.items()}


# ---------------------------------------------------------------- writing


class _PickleWriter:
    """Emits a protocol-2 pickle of containers and tensors, as torch.save lays it out."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.storages: dict[int, tuple[str, np.ndarray]] = {}  # id(tensor) -> (key, array)

    def w(self, b: bytes) -> None:
        self.out.write(b)

    def global_(self, module: str, name: str) -> None:
        self.w(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def dump(self, obj: Any) -> bytes:
        self.w(b"\x80\x02")
        self.obj(obj)
        self.w(b".")
        return self.out.getvalue()

    def obj(self, x: Any) -> None:
        from .nn.parameter import Parameter

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
            self.global_("torch._utils", "_rebuild_parameter")
            self.w(b"(")
            self.tensor(x)
            self.obj(bool(x.requires_grad))
            self.ordered_dict({})
            self.w(b"tR")
        elif isinstance(x, Tensor):
            self.tensor(x)
        elif isinstance(x, OrderedDict):
            self.ordered_dict(x)
            meta = getattr(x, "_metadata", None)
            if meta is not None:
                self.w(b"}(")
                self.obj("_metadata")
                self.ordered_dict(meta)
                self.w(b"ub")
        elif isinstance(x, dict):
            self.w(b"}")
            self.items(x)
        elif isinstance(x, list):
            self.w(b"]")
            if x:
                self.w(b"(")
                for v in x:
                    self.obj(v)
                self.w(b"e")
        elif isinstance(x, tuple):
            self.w(b"(")
            for v in x:
                self.obj(v)
            self.w(b"t")
        elif isinstance(x, _dtype.dtype):
            self.global_("torch", x.name)
        elif isinstance(x, np.generic):
            self.obj(x.item())
        else:
            raise pickle.PicklingError(
                f"fusegrad.save can only write tensors and containers of tensors, numbers and "
                f"strings, not {type(x).__name__}")

    def int_(self, x: int) -> None:
        if -(2 ** 31) <= x < 2 ** 31:
            self.w(b"J" + struct.pack("<i", x))
        else:
            data = x.to_bytes((x.bit_length() + 8) // 8, "little", signed=True)
            self.w(b"\x8a" + bytes([len(data)]) + data)

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

    def tensor(self, t: Tensor) -> None:
        key = self.storages.get(id(t))
        if key is None:
            arr = t._data
            if not arr.flags.c_contiguous:  # (ascontiguousarray would make 0-d arrays 1-d)
                arr = arr.copy(order="C")
            key = (str(len(self.storages)), arr)
            self.storages[id(t)] = key
        name, arr = key
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.w(b"((")
        self.obj("storage")
        self.global_("torch", _STORAGE_BY_DTYPE[t.dtype.name])
        self.obj(name)
        self.obj("cpu")
        self.obj(int(arr.size))
        self.w(b"tQ")
        self.obj(0)
        self.obj(tuple(int(s) for s in arr.shape))
        self.obj(_contiguous_strides(arr.shape))
        self.obj(bool(t.requires_grad))
        self.ordered_dict({})
        self.w(b"tR")


def _contiguous_strides(shape) -> tuple:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _write_zip(f: IO[bytes], obj: Any) -> None:
    writer = _PickleWriter()
    data = writer.dump(obj)
    root = "archive"
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", data)
        z.writestr(f"{root}/byteorder", "little")
        for key, arr in writer.storages.values():
            z.writestr(f"{root}/data/{key}", arr.tobytes())
        z.writestr(f"{root}/version", "3\n")
        z.writestr(f"{root}/.data/serialization_id", "0" * 40)


def save(obj: Any, f, pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write `obj` (tensors, Parameters, state_dicts, nested containers) to `f` (a path or a
    binary file) in PyTorch's checkpoint format. Paths are written atomically."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".fusegrad-save-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                _write_zip(out, obj)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    else:
        _write_zip(f, obj)


# ---------------------------------------------------------------- reading


class _Storage:
    """A storage read from the checkpoint: a flat array of one dtype."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None) -> Tensor:
    arr = storage.array
    itemsize = arr.dtype.itemsize
    if len(size) and 0 not in size:
        last = storage_offset + sum((s - 1) * st for s, st in zip(size, stride))
        if storage_offset < 0 or last >= arr.size or any(st < 0 for st in stride):
            raise pickle.UnpicklingError("tensor geometry lies outside its storage")
    elif not len(size) and storage_offset >= arr.size:
        raise pickle.UnpicklingError("tensor geometry lies outside its storage")
    view = np.lib.stride_tricks.as_strided(
        arr[storage_offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride))
    t = Tensor._make(view, _dtype.FROM_NP[arr.dtype])
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks=None):
    from .nn.parameter import Parameter

    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _rebuild_parameter(data, requires_grad)


class _StorageType:
    """Stands for `torch.FloatStorage` and friends inside a checkpoint's pickle."""

    def __init__(self, dtype_name: str) -> None:
        self.dtype_name = dtype_name


_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
}
for _name, _dt in _DTYPE_BY_STORAGE.items():
    _ALLOWED[("torch", _name)] = _StorageType(_dt)
for _dt in _dtype.ALL:
    _ALLOWED[("torch", _dt.name)] = _dt


class _SafeUnpickler(pickle._Unpickler):
    """Resolves only the globals in `_ALLOWED`; storages come from the zip archive. BUILD
    (setting object state) is allowed only as a dict of attributes on an OrderedDict, which is
    how a state_dict carries `_metadata`."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is not OrderedDict or not isinstance(state, dict) or any(
                not isinstance(k, str) or k.startswith("__") for k in state):
            raise pickle.UnpicklingError("fusegrad.load refuses to set the state of "
                                         f"{type(inst).__name__} objects")
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build

    def __init__(self, file, archive: zipfile.ZipFile, root: str) -> None:
        super().__init__(file)
        self.archive = archive
        self.root = root
        self.loaded: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(
                f"fusegrad.load refuses the global {module}.{name}: a checkpoint may hold "
                "only tensors, storages and containers")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        storage = self.loaded.get(key)
        if storage is None:
            np_dtype = _dtype.BY_NAME[kind.dtype_name].np
            raw = self.archive.read(f"{self.root}/data/{key}")
            arr = np.frombuffer(raw, dtype=np_dtype).copy()
            if arr.size < numel:
                raise pickle.UnpicklingError(f"storage {key} is shorter than declared")
            storage = self.loaded[key] = _Storage(arr)
        return storage


def load(f, map_location=None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args) -> Any:
    """Read a checkpoint written by `fusegrad.save` or `torch.save` (zip format), without
    running any code from it."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load_bytes(fh.read())
    return _load_bytes(f.read())


def _load_bytes(raw: bytes) -> Any:
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise RuntimeError("fusegrad.load reads only the zip checkpoint format (torch.save's "
                           "default since PyTorch 1.6)")
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        pkl = next((n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1),
                   None)
        if pkl is None:
            raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not "
                               "found")
        root = pkl.split("/", 1)[0]
        return _SafeUnpickler(io.BytesIO(z.read(pkl)), z, root).load()


__all__ = ["load", "save"]
