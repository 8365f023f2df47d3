"""Building kernels: the system C compiler, an on-disk cache of shared objects, ctypes.

Cache entries live in `~/.cache/fusegrad/` (`FUSEGRAD_CACHE_DIR` overrides), one `.so` per
graph named by a hash of the source, the flags, the compiler's version and the CPU's
features. An entry is written to a temporary file and renamed into place (`os.replace`), so
processes building the same graph at once each install a complete file and readers never see
a partial one. The file ends with the SHA-256 of what precedes it (the loader ignores trailing
bytes): an entry whose digest does not match is corrupt and is rebuilt, never loaded.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache

FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fwrapv",
         "-fopenmp", "-fPIC", "-shared")


class CompileError(RuntimeError):
    """The C compiler rejected a kernel's source."""


def compiler() -> str | None:
    """The C compiler to use (`$CC`, else `cc`), or None when there is none."""
    cc = os.environ.get("CC", "cc")
    return shutil.which(cc)


@cache
def _compiler_version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else cc


@cache
def cpu_features() -> str:
    """The CPU's feature flags (they decide what -march=native emits)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.machine() + " " + platform.processor()


def cache_dir() -> str:
    """Where built kernels are kept."""
    return os.environ.get("FUSEGRAD_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "fusegrad")


def cache_key(source: str, cc: str) -> str:
    """The hash naming a build of `source` with `cc` on this CPU."""
    h = hashlib.sha256()
    for part in (source, " ".join(FLAGS), _compiler_version(cc), cpu_features()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _valid(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]


_loaded: dict = {}


def build(source: str) -> ctypes.CDLL:
    """Compile `source` to a shared object (or take it from the cache) and load it."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler found (set CC or install cc)")
    key = cache_key(source, cc)
    if key in _loaded:
        return _loaded[key]
    root = cache_dir()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"fg_{key}.so")
    if not _valid(path):
        _compile(cc, source, path, root)
    lib = ctypes.CDLL(path)
    _loaded[key] = lib
    return lib


def _compile(cc: str, source: str, path: str, root: str) -> None:
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        src = os.path.join(tmp, "kernel.c")
        out = os.path.join(tmp, "kernel.so")
        with open(src, "w") as f:
            f.write(source)
        proc = subprocess.run([cc, *FLAGS, "-o", out, src, "-lm"], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(f"{cc} failed:\n{proc.stderr}")
        with open(out, "rb") as f:
            data = f.read()
        final = os.path.join(tmp, "entry.so")
        with open(final, "wb") as f:
            f.write(data + hashlib.sha256(data).digest())
        os.replace(final, path)  # atomic: other processes see the old entry or this one
