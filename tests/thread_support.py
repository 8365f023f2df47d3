"""Running a step at two threads and telling whether its work was shared: on the intra-op
pool (`ops/_parallel.py`) or handed to the C workers (`_native.run_pieces`)."""

from __future__ import annotations

from collections.abc import Callable

from fusegrad.ops import _native, _parallel


def run_shared(step: Callable):
    """(`step()`'s result, whether it shared work between threads), run with a fresh pool:
    shared when the pool was started or a kernel was handed to the C workers."""
    _parallel._forget_pool()
    handed = []  # kernels handed to the C workers (`run_pieces` looks the call up)
    lookup = _native.function

    def looked_up(family, name, *rest):
        if name == "fg_workers_call":
            handed.append(family)
        return lookup(family, name, *rest)

    _native.function = looked_up
    try:
        result = step()
    finally:
        _native.function = lookup
    shared = _parallel._state.pool is not None or bool(
        handed and _native.workers_call_address())
    return result, shared
