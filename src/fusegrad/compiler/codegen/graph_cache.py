"""The graph-level cache: a process that compiles a graph built before (by any process)
takes its wrapper from disk and skips lowering, scheduling and rendering.

The key hashes the graph's canonical text (each node's op, its registry op or function,
its arguments with nodes as positions), the input signature (shapes, strides, dtypes; the
values of integer inputs), the options that change the generated code, the compiler's
version, the flags, the CPU's features and the code generator's own source (this package,
the registry's op files and the dtype rules: a changed lowering never meets an old entry).
A graph whose arguments hold a value without an exact text (a tensor, an arbitrary object)
has no key and is compiled each time, never wrongly shared.

The value (`graph_<key>.pkl` beside the kernels' `.so` entries, written as they are:
atomically, digest appended) holds the wrapper's `Artifact`, the C source (which the kernel
cache finds again, rebuilding a missing or corrupt `.so`), each kernel's source and the
text `FUSEGRAD_LOGS=output_code` prints. Values in it are plain data: registry ops by
name, fusegrad's dtypes, memory formats and layouts by their attribute name.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from functools import cache
from typing import Any

from . import build

FORMAT = 1


class _Global:
    """A fusegrad module attribute stored by name (memory formats, layouts: their identity
    matters to the kernels that read them)."""

    def __init__(self, name: str):
        self.name = name


@cache
def _globals() -> dict:
    import fusegrad

    out = {}
    for name in ("contiguous_format", "channels_last", "channels_last_3d",
                 "preserve_format", "strided", "sparse_coo", "_mkldnn"):
        value = fusegrad.__dict__.get(name)
        if value is not None:
            out[id(value)] = (name, value)
    return out


def _canon(value: Any, nodes: dict) -> str | None:
    """Exact text of a graph argument (None when there is none)."""
    from ... import _device, _dtype
    from ...fx.node import Node

    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, Node):
        return f"%{nodes[value]}"
    if isinstance(value, (list, tuple)):
        parts = [_canon(v, nodes) for v in value]
        if any(p is None for p in parts):
            return None
        return f"{type(value).__name__}[{','.join(parts)}]"
    if isinstance(value, dict):
        parts = [(_canon(k, nodes), _canon(v, nodes)) for k, v in value.items()]
        if any(k is None or v is None for k, v in parts):
            return None
        return "dict{" + ",".join(f"{k}:{v}" for k, v in parts) + "}"
    if isinstance(value, slice):
        return _canon((value.start, value.stop, value.step), nodes)
    if value is Ellipsis:
        return "..."
    if isinstance(value, (_dtype.dtype, _device.device)):
        return f"{type(value).__name__}:{value!r}"
    hit = _globals().get(id(value))
    if hit is not None:
        return f"global:{hit[0]}"
    return None


def _target(target: Any) -> str | None:
    from .lower import resolve_op

    op = resolve_op(target)
    if op is not None:
        return "op:" + op.name
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module in ("operator", "_operator", "builtins") and name:
        return f"fn:{module}.{name}"
    return None


@cache
def _codegen_version() -> str:
    """A hash of the sources that decide what the code generator emits."""
    from ... import _dtype, ops

    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here, os.path.dirname(os.path.abspath(ops.__file__))]
    files = [os.path.join(d, f) for d in dirs for f in sorted(os.listdir(d))
             if f.endswith(".py")] + [os.path.abspath(_dtype.__file__)]
    for path in files:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def graph_key(gm: Any, signature: tuple, flags: tuple) -> str | None:
    """The cache key of compiling `gm` for inputs of `signature` with code-changing
    `flags`; None when the graph has an argument without an exact text."""
    cc = build.compiler()
    if cc is None:
        return None
    nodes: dict = {}
    lines = []
    for i, n in enumerate(gm.graph.nodes):
        nodes[n] = i
        if n.op == "call_function":
            target = _target(n.target)
            if target is None:
                return None
        elif n.op in ("placeholder", "output"):
            target = n.op
        else:
            return None
        args, kwargs = _canon(n.args, nodes), _canon(dict(n.kwargs), nodes)
        if args is None or kwargs is None:
            return None
        lines.append(f"{n.op} {target} {args} {kwargs}")
    sig = []
    for s in signature:
        if len(s) == 3:
            sig.append(f"{s[0]}/{s[1]}/{s[2].name}/{s[2].str}")
        else:
            text = _canon(s[1], nodes)
            if text is None:
                return None
            sig.append(text)
    h = hashlib.sha256()
    for part in ("\n".join(lines), "|".join(sig), repr(flags), str(FORMAT),
                 " ".join(build.FLAGS), build.compiler_version(cc), build.cpu_features(),
                 _codegen_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _path(key: str) -> str:
    return os.path.join(build.cache_dir(), f"graph_{key}.pkl")


def _encode(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_encode(v) for v in value)
    hit = _globals().get(id(value))
    return _Global(hit[0]) if hit is not None else value


def _decode(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_decode(v) for v in value)
    if isinstance(value, _Global):
        return _globals_by_name()[value.name]
    return value


def _globals_by_name() -> dict:
    return {name: v for name, v in _globals().values()}


def load(key: str) -> dict | None:
    """The cached compilation of `key` (None: missing or corrupt, then compiled again)."""
    data = build.read_entry(_path(key))
    if data is None:
        return None
    try:
        entry = pickle.loads(data)
    except Exception:  # noqa: BLE001  (a digest-valid entry of an older format)
        return None
    art = entry["artifact"]
    art.refs = {k: (r[0], _decode(r[1]), *r[2:]) if r[0] == "value" else r
                for k, r in art.refs.items()}
    return entry


def store(key: str, entry: dict) -> bool:
    """Write `entry` under `key`; False (nothing written) when a value in it cannot be
    stored exactly."""
    art = entry["artifact"]
    refs = art.refs
    try:
        art.refs = {k: (r[0], _encode(r[1]), *r[2:]) if r[0] == "value" else r
                    for k, r in refs.items()}
        data = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        back = pickle.loads(data)["artifact"].refs
    except Exception:  # noqa: BLE001  (an unpicklable constant: compile each time)
        return False
    finally:
        art.refs = refs
    for k, r in refs.items():
        if r[0] == "value" and not isinstance(back[k][1], _Global) and \
                not _same(back[k][1], r[1]):
            return False
    os.makedirs(build.cache_dir(), exist_ok=True)
    build.write_entry(_path(key), data)
    return True


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # noqa: BLE001
        return False
