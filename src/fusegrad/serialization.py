"""`fusegrad.save` / `fusegrad.load`: PyTorch's zip checkpoint format, read safely.

`save` writes the format `torch.save` writes (a zip of `data.pkl` plus one file per
storage), so `torch.load` reads fusegrad checkpoints and the other way round. The pickle is
emitted opcode by opcode, for tensors, Parameters and containers of them (dict, OrderedDict,
list, tuple, str, numbers, None, bool) only; the file is written to a temporary name and then
renamed, so a crash never leaves half a checkpoint.

`load` never runs code from the file: its unpickler resolves only the handful of globals a
checkpoint of tensors needs (the tensor and parameter rebuild functions, the storage types,
`OrderedDict`) and refuses every other global before anything is called.

`save_safetensors` / `load_safetensors` read and write the safetensors format (an 8-byte
little-endian header length, a JSON header giving each tensor's dtype, shape and byte range,
then the raw little-endian data); reading only parses JSON and copies bytes. `load` also
accepts a safetensors file and returns its dict of tensors.
"""

from __future__ import annotations

import io
import json
import math
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


def write_atomically(path, write) -> None:
    """Call `write(binary_file)` on a temporary file next to `path`, then rename it over
    `path`: a crash mid-write never leaves a partial file behind."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".fusegrad-save-", dir=os.path.dirname(
        os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(obj: Any, f, pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write `obj` (tensors, Parameters, state_dicts, nested containers) to `f` (a path or a
    binary file) in PyTorch's checkpoint format. Paths are written atomically."""
    if isinstance(f, (str, os.PathLike)):
        write_atomically(f, lambda out: _write_zip(out, obj))
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
    if not zipfile.is_zipfile(io.BytesIO(raw)) and _looks_like_safetensors(raw):
        return _safetensors_from_bytes(raw)
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


def _looks_like_safetensors(raw: bytes) -> bool:
    if len(raw) < 10:
        return False
    (n,) = struct.unpack("<Q", raw[:8])
    return 2 <= n <= min(_ST_MAX_HEADER, len(raw) - 8) and raw[8:9] == b"{"


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
