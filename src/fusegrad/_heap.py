"""How the C heap keeps the memory that freed NumPy buffers give back.

A training step frees the arrays it made (activations, gradients, im2col columns) and makes
arrays of the same sizes in the next step. With glibc's default settings part of that memory
goes back to the kernel between steps: buffers of 128 KiB and more start out as their own
`mmap` (the threshold then rises with the sizes freed, up to 32 MiB), and free memory at the
top of the heap beyond twice that threshold is trimmed. The next step touches the pages anew,
and each first touch is a page fault: a few microseconds on a virtual machine. A LeNet-5
step (batch 64) took ~850 faults, 2-3 ms of its ~9 ms.

Decision: on Linux with glibc, fusegrad sets the thresholds once at import (`mallopt`):
buffers below 32 MiB (glibc's own ceiling for the rising threshold) come from the heap, and
up to `TRIM_THRESHOLD` of free memory at its top is kept for the next step. That bounds the
memory kept beyond what the program holds, and LeNet-5's step then takes no page fault.
A program that tunes glibc's malloc itself (`MALLOC_*_` variables or `GLIBC_TUNABLES`) keeps
its own settings: fusegrad then changes nothing. Other C libraries and allocators preloaded
in glibc's place (jemalloc, tcmalloc) are left as they are (`mallopt` of glibc then tunes a
heap nobody uses).
"""

from __future__ import annotations

import os
import sys

# glibc's `mallopt` parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Buffers below this size come from the heap (glibc's maximum for its rising threshold).
MMAP_THRESHOLD = 32 << 20
# Free memory at the top of the heap kept for reuse rather than given back to the kernel.
TRIM_THRESHOLD = 64 << 20
# Environment variables through which a program tunes glibc's malloc itself.
_USER_TUNING = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                "MALLOC_MMAP_MAX_")


def user_tuned(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether the environment sets any of glibc's malloc thresholds."""
    if any(name in environ for name in _USER_TUNING):
        return True
    return "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")


def keep_freed_memory() -> bool:
    """Set glibc's malloc thresholds as the module docstring says; returns whether they were
    set (False off Linux, without glibc, or when the environment tunes malloc itself)."""
    if not sys.platform.startswith("linux") or user_tuned():
        return False
    import ctypes  # NumPy has imported it already

    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if getattr(libc, "gnu_get_libc_version", None) is None:  # musl: `mallopt` does nothing
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # Setting either threshold also stops glibc from moving them: both are set together.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
