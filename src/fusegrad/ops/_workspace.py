"""Reused work arrays for kernels' temporaries (im2col columns, padded inputs, layout copies
around a GEMM, col2im accumulators).

A fresh multi-megabyte NumPy array is new memory: the system maps it page by page on first
write, and a convolution's columns are written once and read once, so those page faults can
cost as much as the copy itself (and a large share of a small GEMM). Each thread keeps one
buffer per named slot instead, grown to the largest request and reused by the next call.

A slot's array is valid until the same thread asks for that slot again: it must never escape
the kernel (be returned, saved for backward or cached). Requests above `MAX_BYTES` get a fresh
array, so a huge layer does not pin its memory for the rest of the process.
"""

from __future__ import annotations

from _thread import _local as _ThreadLocal  # `threading.local`, without importing threading

import numpy as np

# Each slot keeps at most this much; larger temporaries are allocated per call.
MAX_BYTES = 1 << 24


# Views remembered per thread (by slot, shape and dtype): cleared when this many are held.
MAX_VIEWS = 256


class _Buffers(_ThreadLocal):
    def __init__(self) -> None:
        self.slots: dict[str, np.ndarray] = {}
        # The shaped view of a slot's buffer last handed out for (slot, shape, dtype): a
        # training loop asks for the same few every step, and building one (dtype, size,
        # slice, view, reshape) costs more than a small kernel's arithmetic.
        self.views: dict[tuple, np.ndarray] = {}


_local = _Buffers()


def scratch(slot: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of `shape` (a tuple) and `dtype`, held in this
    thread's buffer `slot` (valid until the next request for `slot` on this thread)."""
    local = _local
    key = (slot, shape, dtype)
    view = local.views.get(key)
    if view is not None:
        return view
    dtype = np.dtype(dtype)
    size = 1
    for v in shape:
        size *= int(v)
    nbytes = size * dtype.itemsize
    if nbytes > MAX_BYTES:
        return np.empty(shape, dtype=dtype)
    buf = local.slots.get(slot)
    if buf is None or buf.nbytes < nbytes:
        # Doubling past the last size: a growing sequence of requests allocates O(log) times.
        cap = max(nbytes, min(2 * (0 if buf is None else buf.nbytes), MAX_BYTES), 64)
        buf = np.empty(cap, dtype=np.uint8)
        local.slots[slot] = buf
        # Views of the old buffer must not be handed out again (nor keep it alive).
        local.views = {k: v for k, v in local.views.items() if k[0] != slot}
    view = buf[:nbytes].view(dtype).reshape(shape)
    if len(local.views) >= MAX_VIEWS:
        local.views.clear()
    local.views[key] = view
    return view


def zeros(slot: str, shape: tuple, dtype) -> np.ndarray:
    """`scratch` filled with zeros (an in-cache pass instead of fresh zeroed pages)."""
    out = scratch(slot, shape, dtype)
    out.fill(0)
    return out
