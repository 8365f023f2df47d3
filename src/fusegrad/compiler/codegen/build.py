"""Building kernels: the system C compiler, an on-disk cache of shared objects, ctypes.

The compiler, the cache and its entries are `fusegrad._cbuild`'s (shared with the eager
kernels written in C): one `.so` per graph, named by a hash of the source, the flags, the
compiler's version and the CPU's features, installed atomically and checked by its digest.
The graph-level cache (`graph_cache.py`) keeps its entries the same way (`write_entry`,
`read_entry`).

Variants: `"default"` cuts a large kernel into pieces run by the C workers, `"serial"` runs
it whole (one thread; the same source built with `FG_SERIAL`, see `c.PRELUDE`), which
autotuning times against each other.
"""

from __future__ import annotations

import ctypes
import os

from ..._cbuild import (  # noqa: F401  (the cache's parts, used here and by graph_cache)
    CompileError,
    cache_dir,
    compiler,
    compiler_version,
    cpu_features,
    read_entry,
    shared_object,
    source_key,
    write_entry,
)


def vector_width_flags(features: str) -> tuple:
    """`-mprefer-vector-width=512` on a CPU with AVX-512 (its `features`), else nothing.
    gcc's tuning for Intel's AVX-512 cores vectorises with 256-bit registers unless told
    otherwise; the generated kernels are long loops of float math (erf, exp, GELU's two
    passes), which full-width registers run 1.2-1.4x faster there. The lanes only change
    how many elements one instruction computes, never the order of any sum (reductions
    keep their own 16 lanes in the source), so the bits are the same."""
    return ("-mprefer-vector-width=512",) if "avx512f" in features.split() else ()


# -ffp-contract=off: a * b + c stays two roundings, as eager computes it (fused into one
# FMA it differs in the last bit; PyTorch's compiled kernels match its eager ones there).
FLAGS = ("-O3", "-march=native", *vector_width_flags(cpu_features()), "-fno-math-errno",
         "-fno-trapping-math", "-fwrapv", "-ffp-contract=off", "-fPIC", "-shared")
VARIANTS = {"default": FLAGS, "serial": FLAGS + ("-DFG_SERIAL",)}


def cache_key(source: str, cc: str, variant: str = "default") -> str:
    """The hash naming a build of `source` with `cc` on this CPU."""
    return source_key(source, cc, VARIANTS[variant])


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
    path = shared_object(cc, units or [source], VARIANTS[variant], key)
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
