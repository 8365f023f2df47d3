"""Reading PyTorch's zip checkpoints: no code from the file runs, and memory stays bounded.

The unpickler resolves only the globals `torch.load(weights_only=True)` accepts for plain
checkpoints (tensor and parameter rebuild functions, storage types, dtypes, quantized tensors'
rebuild function and schemes, `torch.Size`,
`torch.device`, `set`, `OrderedDict`, `Counter`, and bytes, bytearray and complex as
protocol 2 spells them) and refuses every other global before anything is called.

A zip entry can inflate a thousandfold, so neither the pickle nor a storage is read whole on
trust. A storage is allocated at the size the pickle declares for it (elements times element
size), the zip entry's header must state exactly that size, and it is streamed in chunks into
that array. The pickle is streamed too, and the unpickler charges every byte it reads and
every object it builds against a budget proportional to the pickle's size in the file
(`PICKLE_BUDGET_FLOOR + PICKLE_BUDGET_PER_BYTE` per stored byte), so a small file cannot make
`load` hold much more than the storages it declares.
"""

from __future__ import annotations

import _compat_pickle
import contextvars
import pickle
import zipfile
from collections import Counter, OrderedDict
from typing import Any

import numpy as np

from . import _dtype, _quantized
from ._device import device
from ._sparse import layout, sparse_coo, strided
from ._tensor import Size, Tensor

PICKLE_BUDGET_FLOOR = 16 << 20
PICKLE_BUDGET_PER_BYTE = 32
_CHUNK = 1 << 20

STORAGE_BY_DTYPE = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
}
_DTYPE_BY_STORAGE = {v: k for k, v in STORAGE_BY_DTYPE.items()}
_MISSING = ("PytorchStreamReader failed locating file {}: file not found. This is an internal "
            "miniz error. If you are seeing this error, there is a high likelihood that your "
            "checkpoint file is corrupted. This can happen if the checkpoint was not saved "
            "properly, was transferred incorrectly, or the file was modified after saving.")


class _Storage:
    """A storage read from the checkpoint: its bytes, as a flat uint8 array (None: mapped to
    the meta device, not read)."""

    __slots__ = ("raw",)

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw


class _StorageType:
    """Stands for `torch.FloatStorage` and friends (None: `UntypedStorage`) in a pickle."""

    def __init__(self, dtype_name: str | None) -> None:
        self.dtype_name = dtype_name


# Whether the load under way maps every storage to the meta device (`map_location='meta'`):
# storages are then not read, and tensors are meta tensors of the geometry the file gives.
TO_META: contextvars.ContextVar[bool] = contextvars.ContextVar("to_meta", default=False)


def _ints(name: str, value) -> tuple:
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RuntimeError(f"{name} must be a tuple of ints, got {value!r}")
    return tuple(value)


def _view(storage, storage_offset, size, stride, dtype) -> Tensor:
    """The tensor of `dtype` laid over `storage` with this geometry, checked as PyTorch does."""
    if not isinstance(storage, _Storage) or not isinstance(dtype, _dtype.dtype):
        raise pickle.UnpicklingError("a tensor must be rebuilt from a storage of the checkpoint")
    size, stride = _ints("size", size), _ints("stride", stride)
    if not isinstance(storage_offset, int) or len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    if any(s < 0 for s in size):
        raise RuntimeError("numel: integer multiplication overflow")
    if any(st < 0 for st in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")
    if storage.raw is None:  # (a storage mapped to the meta device)
        from . import _meta

        return _meta.make(size, dtype, stride, storage_offset)
    itemsize = dtype.itemsize
    extent = 0 if 0 in size else storage_offset + 1 + sum(
        (s - 1) * st for s, st in zip(size, stride))
    if extent * itemsize > storage.raw.size:
        raise RuntimeError("Trying to resize storage that is not resizable")
    if 0 in size:
        arr = np.empty(size, dtype.np)
    else:
        # np.ndarray over the storage array keeps it as `.base`, so the offset stays visible
        arr = np.ndarray(size, dtype.np, buffer=storage.raw, offset=storage_offset * itemsize,
                         strides=tuple(st * itemsize for st in stride))
    return Tensor._make(arr, dtype)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None) -> Tensor:
    kind = getattr(storage, "kind", None)
    t = _view(storage, storage_offset, size, stride, kind)
    if requires_grad:
        t._requires_grad_unguarded(True)
    return t


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None) -> Tensor:
    t = _view(storage, storage_offset, size, stride, dtype)
    if requires_grad:
        t._requires_grad_unguarded(True)
    return t


class _TensorType:
    """Stands for `torch.Tensor` in a weights-only pickle: only `_rebuild_from_type_v2` takes
    it (the class itself would be a callable that allocates)."""


_TENSOR_TYPE = _TensorType()


def _rebuild_from_type_v2(func, new_type, args, state):
    """A tensor rebuilt by `func(*args)`, given the class `new_type` (a Tensor subclass) and
    the Python attributes `state` (a dict, or None), as PyTorch writes tensors of subclasses
    or carrying attributes."""
    if func not in (_rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter) \
            or not isinstance(args, tuple):
        raise pickle.UnpicklingError("fusegrad.load: _rebuild_from_type_v2 must rebuild a "
                                     "tensor")
    if new_type is _TENSOR_TYPE:
        new_type = Tensor
    if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
        raise pickle.UnpicklingError(f"fusegrad.load: {new_type!r} is not a Tensor subclass")
    t = func(*args)
    if type(t) is not new_type:
        t = t.as_subclass(new_type)
    if state:
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise pickle.UnpicklingError("fusegrad.load: a tensor's state must be a dict of "
                                         "attributes")
        setstate = getattr(new_type, "__setstate__", None)
        if setstate is not None and setstate is not getattr(Tensor, "__setstate__", None):
            t.__setstate__(state)
        elif hasattr(t, "__dict__"):
            for name, value in state.items():
                setattr(t, name, value)
        else:  # fusegrad's Tensor has no instance dict: it cannot keep them
            raise RuntimeError(
                f"fusegrad.load: the checkpoint gives a {new_type.__name__} the Python "
                f"attributes {sorted(state)}, but fusegrad's {new_type.__name__} objects "
                "cannot carry attributes (a Tensor subclass can)")
    return t


class _TypedStorage(_Storage):
    """A storage the pickle gave a dtype (`torch.FloatStorage`), for `_rebuild_tensor_v2`."""

    __slots__ = ("kind",)

    def __init__(self, raw: np.ndarray, kind) -> None:
        super().__init__(raw)
        self.kind = kind


def _get_layout(name) -> layout:
    """A layout pickled by its name (`"torch.sparse_coo"`)."""
    found = {"torch.strided": strided, "torch.sparse_coo": sparse_coo}.get(name)
    if found is None:
        raise pickle.UnpicklingError(f"fusegrad.load: unsupported layout {name!r}")
    return found


def _rebuild_sparse_tensor(layout, data):
    """A sparse COO tensor saved as (indices, values, size[, is_coalesced]), rebuilt as
    PyTorch rebuilds it: unchecked unless invariant checks are on (an index out of range
    fails later, as a NumPy IndexError, never as a memory error)."""
    from ._functions.sparse import sparse_coo_tensor

    if layout is not sparse_coo or not isinstance(data, tuple) or len(data) not in (3, 4):
        raise pickle.UnpicklingError(f"fusegrad.load: unsupported sparse layout {layout}")
    indices, values, size = data[:3]
    coalesced = bool(data[3]) if len(data) == 4 else None
    return sparse_coo_tensor(indices, values, size, check_invariants=False,
                             is_coalesced=coalesced)


def _unpack_4bit(storage: _Storage) -> _Storage:
    """quint4x2's storage (two values to a byte, the first in the low half) one per byte."""
    raw = storage.raw
    ints = np.empty(raw.size * 2, np.uint8)
    ints[0::2] = raw & 15
    ints[1::2] = raw >> 4
    return _Storage(ints)


def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad,
                     backward_hooks=None) -> Tensor:
    """A quantized tensor as PyTorch writes one: its integers' storage (`torch.QInt8Storage`
    and friends) and geometry, then (scheme, scale, zero point) per tensor or (scheme,
    scales, zero points, axis) per channel."""
    qdt = getattr(storage, "kind", None)
    if qdt not in _quantized.RANGES:
        raise pickle.UnpicklingError("a quantized tensor must be rebuilt from a storage of "
                                     "a quantized dtype")
    if storage.raw is None:
        raise RuntimeError("fusegrad.load: quantized tensors cannot be mapped to the meta "
                           "device")
    if requires_grad:
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    if qdt is _dtype.quint4x2:
        storage = _unpack_4bit(storage)
    ints = _view(storage, storage_offset, size, stride, _dtype.FROM_NP[qdt.storage])._data
    params = quantizer_params if isinstance(quantizer_params, tuple) else ()
    scheme = params[0] if params else None
    if scheme is _quantized.per_tensor_affine and len(params) == 3 \
            and isinstance(params[1], float) and isinstance(params[2], int):
        return _quantized._new(ints, qdt, scheme, params[1], params[2])
    if scheme is _quantized.per_channel_affine and len(params) == 4 \
            and isinstance(params[1], Tensor) and isinstance(params[2], Tensor) \
            and isinstance(params[3], int) and 0 <= params[3] < ints.ndim:
        scales = params[1]._data.astype(np.float64).reshape(-1)
        zps = params[2]._data.astype(np.int64).reshape(-1)
        if scales.size == zps.size == ints.shape[params[3]]:
            return _quantized._new(ints, qdt, scheme, scales, zps, params[3])
    raise pickle.UnpicklingError(f"fusegrad.load: unsupported quantizer parameters "
                                 f"{quantizer_params!r}")


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad=False) -> Tensor:
    """A meta tensor as PyTorch writes one: dtype, size, strides and no storage."""
    from . import _meta

    if not isinstance(dtype, _dtype.dtype):
        raise pickle.UnpicklingError("a meta tensor must be rebuilt with a dtype")
    size, stride = _ints("size", size), _ints("stride", stride)
    if len(size) != len(stride) or any(s < 0 for s in size):
        raise RuntimeError("mismatch in length of strides and shape")
    return _meta.factory_tensor(size, dtype, bool(requires_grad), stride)


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    from .nn.parameter import Parameter

    if not isinstance(data, Tensor):
        raise pickle.UnpicklingError("a Parameter must wrap a tensor")
    return Parameter(data, bool(requires_grad))


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    param = _rebuild_parameter(data, requires_grad)
    for name, value in (state or {}).items():  # the attributes the program had set
        setattr(param, name, value)
    return param


def _size(dims=()) -> Size:
    return Size(_ints("torch.Size", dims))


def _encode(text: str, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode`, as protocol-2 pickles spell a bytes object: (str, 'latin1')."""
    if not isinstance(text, str) or encoding != "latin1":
        raise pickle.UnpicklingError("fusegrad.load only rebuilds bytes from latin1 text")
    return text.encode("latin1")


def _bytearray(data=b"") -> bytearray:
    if not isinstance(data, bytes):
        raise pickle.UnpicklingError("fusegrad.load only rebuilds a bytearray from bytes")
    return bytearray(data)


def _complex(real=0.0, imag=0.0) -> complex:
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise pickle.UnpicklingError("fusegrad.load only rebuilds a complex from two numbers")
    return complex(real, imag)


def _counter(counts=None) -> Counter:
    if not isinstance(counts, (dict, type(None))):
        raise pickle.UnpicklingError("fusegrad.load only rebuilds a Counter from a dict")
    return Counter(counts or {})


ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): OrderedDict,
    ("collections", "Counter"): _counter,
    ("builtins", "set"): set,
    ("builtins", "bytearray"): _bytearray,
    ("builtins", "complex"): _complex,
    ("_codecs", "encode"): _encode,
    ("torch", "Size"): _size,
    ("torch", "device"): device,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_meta_tensor_no_storage"): _rebuild_meta_tensor_no_storage,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch.storage", "UntypedStorage"): _StorageType(None),
    ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch.serialization", "_get_layout"): _get_layout,
    ("torch._utils", "_rebuild_qtensor"): _rebuild_qtensor,
    ("torch", "per_tensor_affine"): _quantized.per_tensor_affine,
    ("torch", "per_channel_affine"): _quantized.per_channel_affine,
}
for _name, _dt in _DTYPE_BY_STORAGE.items():
    ALLOWED[("torch", _name)] = _StorageType(_dt)
for _dt in _dtype.ALL + _dtype.QUANTIZED_DTYPES:
    ALLOWED[("torch", _dt.name)] = _dt
for _dt in _dtype.QUANTIZED_DTYPES:  # (`torch.QInt8Storage`: the integers of qint8 tensors)
    ALLOWED[("torch", f"{_dt.legacy}Storage")] = _StorageType(_dt.name)


def compat_name(proto: int, module: str, name: str) -> tuple[str, str]:
    """A global's Python 3 name (protocol-2 pickles may spell builtins the Python 2 way)."""
    if proto < 3:
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return module, name


# The user's allowlist (`serialization.add_safe_globals`): process-wide, as PyTorch's.
SAFE_GLOBALS: list = []


def global_name(entry) -> str:
    """The dotted name a safe-globals entry allows: given, or the object's own."""
    if isinstance(entry, tuple):
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def user_allowed(module: str, name: str):
    """The allowlisted object the global `module.name` names (a PyTorch path counts for the
    fusegrad object at the same path), or None."""
    wanted = {f"{module}.{name}"}
    if module == "torch" or module.startswith("torch."):
        wanted.add(f"fusegrad{module[len('torch'):]}.{name}")
    for entry in SAFE_GLOBALS:
        if global_name(entry) in wanted:
            return entry[0] if isinstance(entry, tuple) else entry
    return None


_WEIGHTS_ONLY_HELP = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, "
    "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) In "
    "PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will "
    "likely succeed, but it can result in arbitrary code execution. Do it only if you got the "
    "file from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please "
    "check the recommended steps in the following error message.\n\tWeightsUnpickler error: "
    "{}\n\nCheck the documentation of torch.load to learn more about types accepted by "
    "default with weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")


def unsupported_global(module: str, name: str) -> pickle.UnpicklingError:
    """PyTorch's error for a global outside the weights-only allowlist."""
    full = f"{module}.{name}"
    return pickle.UnpicklingError(_WEIGHTS_ONLY_HELP.format(
        f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
        f"`torch.serialization.add_safe_globals([{full}])` or the "
        f"`torch.serialization.safe_globals([{full}])` context manager to allowlist this "
        f"global if you trust this class/function."))


def storage_for(pid, archive: zipfile.ZipFile, root: str, loaded: dict):
    """The storage a pickle's persistent id names, read once from the archive (`loaded`
    caches it by key)."""
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
            and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
            and isinstance(pid[4], int) and pid[4] >= 0):
        raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
    _, kind, key, _location, numel = pid
    dt = None if kind.dtype_name is None else _dtype.BY_NAME[kind.dtype_name]
    nbytes = numel * (1 if dt is None else dt.itemsize)
    got = loaded.get(key)
    if got is None:
        got = loaded[key] = (nbytes, None if TO_META.get() else
                             read_storage(archive, root, key, nbytes))
    elif got[0] != nbytes:
        raise RuntimeError(f"storage {key} is declared with {got[0]} and {nbytes} bytes")
    return _Storage(got[1]) if dt is None else _TypedStorage(got[1], dt)


class _Charged:
    """The pickle stream, each byte charged to the unpickler's budget before it is read."""

    def __init__(self, f, unpickler: SafeUnpickler) -> None:
        self.f = f
        self.u = unpickler

    # Twice each byte: the bytes read, and the object (str, int, frame) made from them.
    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.u.left // 2 + 1
        self.u.charge(2 * n)
        return self.f.read(n)

    def readinto(self, b) -> int:
        self.u.charge(2 * len(b))
        return self.f.readinto(b)

    def readline(self) -> bytes:
        line = self.f.readline(max(self.u.left // 2, 0) + 1)
        self.u.charge(2 * len(line))
        return line

    def peek(self, n: int = 1) -> bytes:
        return b""


# Bytes an opcode may add beyond what it reads, as an upper bound for CPython objects: the
# stack slot, the object it makes, a memo entry, the container slot it fills.
_COST = dict.fromkeys(range(256), 64)
for _op, _cost in ((pickle.MARK, 96), (pickle.EMPTY_DICT, 128), (pickle.EMPTY_LIST, 96),
                   (pickle.EMPTY_SET, 256), (pickle.BINPUT, 160), (pickle.LONG_BINPUT, 160),
                   (pickle.PUT, 160), (pickle.MEMOIZE, 160), (pickle.REDUCE, 384),
                   (pickle.NEWOBJ, 384), (pickle.NEWOBJ_EX, 384), (pickle.BUILD, 256),
                   (pickle.BINPERSID, 128), (pickle.PERSID, 128)):
    _COST[_op[0]] = _cost
# Opcodes whose cost also grows with the number of items since the last MARK.
_PER_ITEM = {pickle.APPENDS[0]: 16, pickle.SETITEMS[0]: 96, pickle.ADDITEMS[0]: 96,
             pickle.TUPLE[0]: 8, pickle.FROZENSET[0]: 96, pickle.LIST[0]: 8,
             pickle.DICT[0]: 96}
_PER_NEW = (pickle.SETITEM[0], pickle.APPEND[0])
_SLOT = 128  # a container entry a call or BUILD copies: hash-table slot, key, value


def _charging(op: int, handler):
    cost, per_item = _COST[op], _PER_ITEM.get(op)

    def run(self):
        self.charge(cost + (per_item * len(self.stack) if per_item else 0)
                    + (96 if op in _PER_NEW else 0))
        handler(self)
    return run


class _Opcodes(dict):
    """The unpickler's opcode table; an opcode it lacks is refused, not a KeyError."""

    def __missing__(self, op: int):
        raise pickle.UnpicklingError(f"fusegrad.load refuses the pickle opcode {bytes([op])!r}")


class SafeUnpickler(pickle._Unpickler):
    """Resolves only the globals in `ALLOWED`; storages come from the zip archive. BUILD
    (setting object state) is allowed only as a dict of attributes on an OrderedDict, which is
    how a state_dict carries `_metadata`. Every opcode is charged to a memory budget."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def load_build(self):
        inst = self.stack[-2]
        if type(inst) in self.allowlisted:  # the user trusts this class: its own setstate
            state = self.stack[-1]
            self.charge(_SLOT * (len(state) if isinstance(state, (dict, tuple)) else 1))
            pickle._Unpickler.load_build(self)
            return
        state = self.stack.pop()
        if type(inst) is not OrderedDict or not isinstance(state, dict) or any(
                not isinstance(k, str) or k.startswith("__") for k in state):
            raise pickle.UnpicklingError("fusegrad.load refuses to set the state of "
                                         f"{type(inst).__name__} objects")
        self.charge(_SLOT * len(state))  # the attributes are copied into the instance
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build

    def load_reduce(self):
        self.charge_call(self.stack[-1])
        pickle._Unpickler.load_reduce(self)

    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self):
        self.charge_call(self.stack[-1])
        pickle._Unpickler.load_newobj(self)

    dispatch[pickle.NEWOBJ[0]] = load_newobj
    # Out-of-band buffers and bytearrays (protocol 5) allocate before reading, and the old
    # instance opcodes call with keyword or unbounded arguments; no checkpoint of tensors
    # needs them (torch.save reduces with REDUCE at any protocol).
    for _op in (pickle.BYTEARRAY8, pickle.NEXT_BUFFER, pickle.READONLY_BUFFER,
                pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        del dispatch[_op[0]]
    dispatch = _Opcodes((_op, _charging(_op, _handler)) for _op, _handler in dispatch.items())

    def __init__(self, file, archive: zipfile.ZipFile, root: str, budget: int) -> None:
        super().__init__(_Charged(file, self))
        self.archive = archive
        self.root = root
        self.left = budget
        self.budget = budget
        self.loaded: dict[str, tuple[int, np.ndarray]] = {}
        self.allowlisted: set = set()

    def charge(self, n: int) -> None:
        """Account `n` more bytes of memory; refuse the file when the budget runs out."""
        self.left -= n
        if self.left < 0:
            raise pickle.UnpicklingError(
                f"fusegrad.load refuses this checkpoint: its pickle builds more than "
                f"{self.budget} bytes of objects besides the storages it declares")

    def charge_call(self, args) -> None:
        """Charge a call's arguments: an allowed callable may copy each container argument
        (`set(items)`, `OrderedDict(pairs)`), so the same large container reached again
        through the memo is paid for at every call."""
        if not isinstance(args, tuple):
            raise pickle.UnpicklingError("fusegrad.load: call arguments must be a tuple")
        self.charge(_SLOT * (len(args) + sum(
            len(a) for a in args
            if isinstance(a, (list, tuple, dict, set, frozenset, str, bytes)))))

    def find_class(self, module: str, name: str):
        module, name = compat_name(self.proto, module, name)
        found = ALLOWED.get((module, name))
        if found is None and (module, name) == ("torch", "Tensor"):
            found = _TENSOR_TYPE
        if found is None:
            found = user_allowed(module, name)
            if found is None:
                raise unsupported_global(module, name)
            if isinstance(found, type):
                self.allowlisted.add(found)
        return found

    def persistent_load(self, pid):
        return storage_for(pid, self.archive, self.root, self.loaded)


def read_storage(archive: zipfile.ZipFile, root: str, key: str, nbytes: int) -> np.ndarray:
    """The `nbytes` bytes of storage `key`, streamed from its zip entry, whose header must
    state exactly that size (so a small entry cannot inflate past what the pickle declared)."""
    name = f"data/{key}"
    try:
        info = archive.getinfo(f"{root}/{name}")
    except KeyError:
        raise RuntimeError(_MISSING.format(name)) from None
    if info.file_size != nbytes:
        raise RuntimeError(f"record size ({info.file_size} bytes) does not match expected size "
                           f"({nbytes} bytes = {nbytes} elements * 1 bytes/element) for dtype "
                           "Byte")
    raw = np.empty(nbytes, np.uint8)
    view = memoryview(raw)
    pos = 0
    with archive.open(info) as src:
        while pos < nbytes:
            chunk = src.read(min(_CHUNK, nbytes - pos))
            if not chunk:
                raise RuntimeError(f"PytorchStreamReader failed reading file {name}: file read "
                                   "failed")
            view[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
    return raw


def read_zip_checkpoint(z: zipfile.ZipFile, file_size: int, weights_only: bool = True) -> Any:
    """Unpickle the checkpoint in the open archive `z`, a file of `file_size` bytes: safely,
    or (`weights_only=False`) with any global the file names (see `_object_pickle`)."""
    pkl = data_pickle(z)
    root = pkl.filename.split("/", 1)[0]
    with z.open(pkl) as stream:
        if not weights_only:
            from ._object_pickle import ObjectUnpickler

            return ObjectUnpickler(stream, z, root).load()
        # (the header's compressed size may lie; the file's own size may not)
        budget = PICKLE_BUDGET_FLOOR + PICKLE_BUDGET_PER_BYTE * min(pkl.compress_size,
                                                                      file_size)
        return SafeUnpickler(stream, z, root, budget).load()


def data_pickle(z: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The archive's `<root>/data.pkl` entry."""
    pkl = next((i for i in z.infolist()
                if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1), None)
    if pkl is None:
        raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not found")
    return pkl


__all__ = ["ALLOWED", "SAFE_GLOBALS", "STORAGE_BY_DTYPE", "SafeUnpickler", "compat_name",
           "data_pickle", "read_storage", "read_zip_checkpoint", "storage_for",
           "unsupported_global", "user_allowed"]
