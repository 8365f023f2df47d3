"""Building kernels: the system C compiler, an on-disk cache of shared objects, ctypes.

Cache entries live in `~/.cache/fusegrad/` (`FUSEGRAD_CACHE_DIR` overrides), one `.so` per
graph named by a hash of the source, the flags, the compiler's version and the CPU's
features. An entry is written to a temporary file and renamed into place (`os.replace`), so
processes building the same graph at once each install a complete file and readers never see
a partial one. The file ends with the SHA-256 of what precedes it (the loader ignores trailing
bytes): an entry whose digest does not match is corrupt and is rebuilt, never loaded. The
graph-level cache (`graph_cache.py`) keeps its entries the same way (`write_entry`,
`read_entry`).

Variants: `"default"` builds with OpenMP, `"serial"` without it (one thread; the same
source, the pragmas ignored), which autotuning times against each other.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache

# -ffp-contract=off: a * b + c stays two roundings, as eager computes it (fused into one
# FMA it differs in the last bit; PyTorch's compiled kernels match its eager ones there).
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fwrapv",
         "-ffp-contract=off", "-fopenmp", "-fPIC", "-shared")
VARIANTS = {"default": FLAGS, "serial": tuple(f for f in FLAGS if f != "-fopenmp")}


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


def cache_key(source: str, cc: str, variant: str = "default") -> str:
    """The hash naming a build of `source` with `cc` on this CPU."""
    h = hashlib.sha256()
    for part in (source, " ".join(VARIANTS[variant]), compiler_version(cc), cpu_features()):
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


_loaded: dict = {}


def build(source: str, variant: str = "default", units: list | None = None) -> ctypes.CDLL:
    """Compile `source` to a shared object (or take it from the cache) and load it.
    `units`: the same code as several translation units (see `split`), compiled at once
    by parallel compiler processes and linked into the one shared object."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler found (set CC or install cc)")
    key = cache_key(source, cc, variant)
    if key in _loaded:
        return _loaded[key]
    root = cache_dir()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"fg_{key}.so")
    if read_entry(path) is None:
        _compile(cc, units or [source], path, root, VARIANTS[variant])
    lib = ctypes.CDLL(path)
    _loaded[key] = lib
    return lib


def split(prefix: str, kernels: list, jobs: int | None = None) -> list | None:
    """Translation units for a parallel build: `kernels` (C sources of functions, each
    whole) shared among the usable cores, each unit `prefix` (the static math functions)
    and its share; None when one unit is cheaper (few kernels, or one core)."""
    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except AttributeError:
            jobs = os.cpu_count() or 1
    total = sum(len(k) for k in kernels)
    jobs = min(jobs, 8, len(kernels) // 4)
    if jobs < 2 or total < PARALLEL_SOURCE:
        return None
    shares: list = [[0, []] for _ in range(jobs)]
    for k in sorted(kernels, key=len, reverse=True):  # largest first, to the lightest unit
        share = min(shares, key=lambda s: s[0])
        share[0] += len(k)
        share[1].append(k)
    return [prefix + "\n\n" + "\n\n".join(ks) + "\n" for _, ks in shares]


# Kernel source (characters) from which compiling in several processes pays for parsing the
# math functions once per unit (measured: 37 kernels, 39 KB, take 1.6 s in one unit).
PARALLEL_SOURCE = 12_000


def _compile(cc: str, units: list, path: str, root: str, flags: tuple) -> None:
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        out = os.path.join(tmp, "kernel.so")
        if len(units) == 1:
            src = os.path.join(tmp, "kernel.c")
            with open(src, "w") as f:
                f.write(units[0])
            _run(cc, [*flags, "-o", out, src, "-lm"])
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
            _run(cc, [*flags, "-o", out, *objs, "-lm"])
        with open(out, "rb") as f:
            data = f.read()
        write_entry(path, data)  # atomic: other processes see the old entry or this one


def _run(cc: str, args: list) -> None:
    proc = subprocess.run([cc, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError(f"{cc} failed:\n{proc.stderr}")
