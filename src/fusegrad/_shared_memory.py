"""Memory that processes share: the buffers `Tensor.share_memory_` moves a tensor's data into.

Each buffer is a shared mapping of a memory file (`os.memfd_create`, Linux) kept open for the
buffer's life: a forked process inherits the mapping, and another process (spawned, or reading
a queue) maps the same memory from the file descriptor passed to it
(`fusegrad.multiprocessing`'s reductions), so both see each other's writes, as with PyTorch's
`file_descriptor` sharing strategy. Without memory files the buffer is an anonymous shared
mapping, which only forked processes share.
"""

from __future__ import annotations

import mmap
import os
import weakref


class SharedBuffer(mmap.mmap):
    """A shared mapping; `fd` is its memory file's descriptor (None for an anonymous one)."""

    fd: int | None = None


def allocate(nbytes: int) -> SharedBuffer:
    """A new zero-filled shared buffer of `nbytes` bytes (at least one)."""
    nbytes = max(nbytes, 1)
    create = getattr(os, "memfd_create", None)
    if create is None:
        return SharedBuffer(-1, nbytes)
    fd = create("fusegrad-shared", getattr(os, "MFD_CLOEXEC", 0))
    try:
        os.ftruncate(fd, nbytes)
        buffer = SharedBuffer(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    buffer.fd = fd
    weakref.finalize(buffer, os.close, fd)
    return buffer


def attach(fd: int, nbytes: int) -> SharedBuffer:
    """Map the memory file `fd` (received from another process; this buffer owns it now)."""
    buffer = SharedBuffer(fd, nbytes)
    buffer.fd = fd
    weakref.finalize(buffer, os.close, fd)
    return buffer


def buffer_of(a) -> mmap.mmap | None:
    """The shared mapping array `a`'s memory lies in, or None."""
    while a is not None:
        if isinstance(a, mmap.mmap):
            return a
        a = a.obj if isinstance(a, memoryview) else getattr(a, "base", None)
    return None
