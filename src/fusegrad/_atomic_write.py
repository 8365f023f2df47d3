"""Writing a file all at once: readers see the old file or the new one, never a torn one.

`write_atomically` writes to a temporary file in the target's folder and renames it over the
target. Where the kernel offers `O_TMPFILE` (Linux), the temporary file has no name while its
bytes are written, so a process killed mid-write leaves nothing behind; it is given a name
only for the instant between the last byte and the rename. Elsewhere it is named from the
start. Either way its name carries the writing process's id (and a hash of the host name), so
a later write into that folder removes the leftovers of processes that have died, and never
the file of a process still running.

The result is what `open(path, "wb")` gives: a new file has mode `0666 & ~umask`, an existing
file keeps its permission bits, and a symbolic link is written through (its target is
replaced, not the link).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import stat
from collections.abc import Callable
from typing import IO

PREFIX = ".fusegrad-save-"
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_NAME = re.compile(re.escape(PREFIX) + r"([0-9a-f]{8})-(\d+)-[0-9a-f]+\.tmp\Z")


def _temp_name(folder: str) -> str:
    return os.path.join(folder, f"{PREFIX}{_HOST}-{os.getpid()}-{secrets.token_hex(6)}.tmp")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # exists but belongs to someone else, or not a pid we can ask about
    return True


def remove_stale(folder: str) -> list[str]:
    """Delete the temporary files that dead processes of this host left in `folder`; return
    their paths. Files of live processes, of other hosts and of other names stay."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _NAME.match(name)
        if m is None or m.group(1) != _HOST or _pid_alive(int(m.group(2))):
            continue
        path = os.path.join(folder, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
                removed.append(path)
        except OSError:
            pass  # another writer removed it first, or we may not
    return removed


_LINKABLE: dict[int, bool] = {}  # st_dev -> whether a nameless file there can be named


def _tmpfile(folder: str) -> int | None:
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if isinstance(exc, (FileNotFoundError, NotADirectoryError, PermissionError)):
            raise
        return None  # the file system does not support it (EOPNOTSUPP, EISDIR, EINVAL)


def _open_unnamed(folder: str) -> int | None:
    """A nameless file in `folder` (Linux O_TMPFILE), or None where that is unsupported or
    such a file cannot be given a name afterwards (checked once per file system)."""
    fd = _tmpfile(folder)
    if fd is None:
        return None
    dev = os.fstat(fd).st_dev
    ok = _LINKABLE.get(dev)
    if ok is None:
        probe = _tmpfile(folder)  # a file once named and unlinked cannot be named again
        try:
            os.unlink(_give_name(probe, folder))
            ok = True
        except OSError:
            ok = False  # e.g. EXDEV where /proc's links cannot be followed across mounts
        finally:
            os.close(probe)
        _LINKABLE[dev] = ok
    if not ok:
        os.close(fd)
        return None
    return fd


def _give_name(fd: int, folder: str) -> str:
    """Link the nameless file `fd` into `folder` under a fresh temporary name."""
    while True:
        tmp = _temp_name(folder)
        try:
            os.link(f"/proc/self/fd/{fd}", tmp, follow_symlinks=True)
            return tmp
        except FileExistsError:
            continue


def _open_named(folder: str) -> tuple[int, str]:
    while True:
        tmp = _temp_name(folder)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _sync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is still atomic
    finally:
        os.close(fd)


def write_atomically(path, write: Callable[[IO[bytes]], object]) -> None:
    """Call `write(binary_file)` on a temporary file next to `path` (next to the target of a
    symbolic link), then rename it over that file: a crash or kill mid-write never leaves a
    partial file, and the old file stays until the new one is complete."""
    target = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None  # a new file: 0666 & ~umask, as the kernel applies it at creation
    remove_stale(folder)
    fd = _open_unnamed(folder)
    tmp = None
    if fd is None:
        fd, tmp = _open_named(folder)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
            if tmp is None:
                tmp = _give_name(out.fileno(), folder)
        os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    _sync_folder(folder)
