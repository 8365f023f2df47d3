"""Autotuning (modes "max-autotune", "max-autotune-no-cudagraphs"): each kernel of a graph
is timed in its build variants (`build.VARIANTS`: cut into pieces run by the C workers, or
whole on one thread) on the first call's inputs, and the fastest is kept.

The variants run the same C source, and the pieces only cut the outer loop (every output
element is computed by one thread, in the same order), so they give the same bits; the
tuner checks it (a variant whose results differ in any byte is never chosen), so the
choice, which depends on timings, never changes a result. Kernels never write their
inputs, so running one several times in place is harmless. A graph with random or
in-place extern calls is not tuned: its tuning run would advance the generator or write
its inputs.
"""

from __future__ import annotations

import ctypes
import time

from .. import logs

_BUDGET_S = 0.02  # timing per kernel and variant


def _snapshot(P, writes: list) -> list:
    return [ctypes.string_at(P[slot], n) if n else b"" for slot, n in writes]


def _best(fn, P, K) -> float:
    t = time.perf_counter()
    fn(P, K)
    first = time.perf_counter() - t
    best = first
    for _ in range(max(1, min(20, int(_BUDGET_S / max(first, 1e-7))))):
        t = time.perf_counter()
        fn(P, K)
        best = min(best, time.perf_counter() - t)
    return best


def tunable(art) -> bool:
    """Whether a tuning run of `art` is free of side effects."""
    from ...ops import REGISTRY

    externs = [REGISTRY[r[1]] for r in art.refs.values() if r[0] == "extern"]
    return bool(art.writes) and not any(op.random or op.inplace for op in externs) and \
        not any(r[0] == "write" for r in art.refs.values())


def tune(art, libs: dict, args) -> dict:
    """Run the graph once on `args`, timing every kernel in each variant of `libs`;
    updates `art.refs` with the fastest identical variant per kernel and returns
    {kernel: (variant, {variant: seconds})}."""
    from . import wrapper

    call = wrapper.load(art, libs)
    scope = call.scope
    chosen: dict = {}

    def shim(kname):
        def run(P, K):
            times, results = {}, {}
            for variant, lib in libs.items():
                fn = getattr(lib, kname)
                times[variant] = _best(fn, P, K)
                results[variant] = _snapshot(P, art.writes[kname])
            same = [v for v in times if results[v] == results["default"]]
            best = min(same, key=lambda v: (times[v], v != "default"))
            chosen[kname] = (best, times)
            getattr(libs["default"], kname)(P, K)  # the buffers hold the default's result
        return run

    for kname in art.writes:
        scope[kname] = shim(kname)
    call(args)
    for kname, (variant, times) in chosen.items():
        art.refs[kname] = ("kernel", kname, variant)
        logs.emit("output_code", f"autotune {kname}: {variant} "
                  + ", ".join(f"{v} {t * 1e6:.1f} us" for v, t in sorted(times.items())))
    return chosen
