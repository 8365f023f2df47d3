"""C source to a loaded shared object: the system C compiler, an on-disk cache, ctypes.

Both users of C share this: the code generator's kernels (`compiler.codegen.build`) and the
eager kernels written in C (`ops._native`).

Cache entries live in `~/.cache/fusegrad/` (`FUSEGRAD_CACHE_DIR` overrides), one `.so` per
source, named by a hash of the source, the flags, the compiler's version and the CPU's
features. An entry is written to a temporary file and renamed into place (`os.replace`), so
processes building the same source at once each install a complete file and readers never
see a partial one. The file ends with the SHA-256 of what precedes it (the loader ignores
trailing bytes): an entry whose digest does not match is corrupt and is rebuilt, never
loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache


class CompileError(RuntimeError):
    """The C compiler rejected a kernel's source."""


def compiler() -> str | None:
    """The C compiler to use (`$CC`, else `cc`), or None when there is none."""
    cc = os.environ.get("CC", "cc")
    return shutil.which(cc)


@cache
def compiler_version(cc: str) -> str:
    """The first line of `cc --version` (part of every cache key)."""
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


def source_key(source: str, cc: str, flags: tuple) -> str:
    """The hash naming a build of `source` with `cc` and `flags` on this CPU."""
    h = hashlib.sha256()
    for part in (source, " ".join(flags), compiler_version(cc), cpu_features()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def read_entry(path: str) -> bytes | None:
    """The contents of cache entry `path` without its digest; None when it is missing or
    its digest does not match (a torn or corrupt entry)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]:
        return data[:-32]
    return None


def write_entry(path: str, data: bytes) -> None:
    """Install `data` (with its digest appended) as cache entry `path`, atomically: it is
    written to a private temporary file and renamed into place, so a concurrent reader
    sees the old entry or the new one, never a partial file."""
    root = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".entry-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data + hashlib.sha256(data).digest())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def shared_object(cc: str, units: list, flags: tuple, key: str):
    """The path of the cached shared object `fg_<key>.so`, compiled from `units` (C
    sources, each one translation unit) with `flags` first when it is missing or corrupt."""
    root = cache_dir()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"fg_{key}.so")
    if read_entry(path) is None:
        with _build_lock(path):
            # (another process may have built it while this one waited: test workers and
            # distributed ranks ask for the same kernels at once)
            if read_entry(path) is None:
                compile_units(cc, units, path, root, flags)
    return path


@contextlib.contextmanager
def _build_lock(path: str):
    """Hold an exclusive lock on `path`'s lock file while building it, so that processes
    wanting the same entry compile it once (no lock where `fcntl` is missing)."""
    try:
        import fcntl
    except ImportError:  # (not POSIX: each process builds, the install stays atomic)
        yield
        return
    with open(path + ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def compile_units(cc: str, units: list, path: str, root: str, flags: tuple) -> None:
    """Compile `units` with `flags` into the shared object installed (atomically) at `path`;
    several units are compiled by parallel compiler processes and linked into one."""
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        out = os.path.join(tmp, "kernel.so")
        if len(units) == 1:
            src = os.path.join(tmp, "kernel.c")
            with open(src, "w") as f:
                f.write(units[0])
            run_compiler(cc, [*flags, "-o", out, src, "-lm"])
        else:
            compile_only = [f for f in flags if f != "-shared"]
            procs, objs = [], []
            for i, unit in enumerate(units):
                src, obj = os.path.join(tmp, f"unit{i}.c"), os.path.join(tmp, f"unit{i}.o")
                with open(src, "w") as f:
                    f.write(unit)
                procs.append(subprocess.Popen([cc, *compile_only, "-c", "-o", obj, src],
                                              stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
                objs.append(obj)
            errors = [p.communicate()[1] for p in procs]
            for p, err in zip(procs, errors):
                if p.returncode != 0:
                    raise CompileError(f"{cc} failed:\n{err}")
            run_compiler(cc, [*flags, "-o", out, *objs, "-lm"])
        with open(out, "rb") as f:
            data = f.read()
        write_entry(path, data)  # atomic: other processes see the old entry or this one


def run_compiler(cc: str, args: list) -> None:
    """Run `cc args`; a CompileError with its messages when it fails."""
    proc = subprocess.run([cc, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError(f"{cc} failed:\n{proc.stderr}")
