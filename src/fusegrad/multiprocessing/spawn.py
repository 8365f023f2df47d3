"""`spawn` / `start_processes`: run `fn(i, *args)` in `nprocs` new processes and report the
first one that fails (its traceback, or its exit code or signal) after stopping the others,
as `torch.multiprocessing.spawn` does."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback

_log = logging.getLogger(__name__)


class ProcessException(Exception):
    """A spawned process failed: `error_index` is its index, `error_pid` its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised: the message holds its traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg, error_index, error_pid)


class ProcessExitedException(ProcessException):
    """A spawned process exited with a nonzero code or was killed by a signal."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i: int, args: tuple, error_file: str) -> None:
    """What each process runs: `fn(i, *args)`, its traceback written to `error_file` when it
    raises (exit code 1); an interrupt ends it quietly."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping everything
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes `start_processes` started; `join` waits for them."""

    def __init__(self, processes: list, error_files: list):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        """The processes' ids."""
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait (up to `timeout` seconds) for a process to end: True once all have ended
        well; the first failure stops the others and raises `ProcessRaisedException` (with
        its traceback) or `ProcessExitedException` (its exit code or signal)."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        for process in self.processes:  # stop the others, then report
            if process.is_alive():
                _log.warning("Terminating process %s via signal SIGTERM", process.pid)
                process.terminate()
        deadline = time.monotonic() + 30
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        process = self.processes[failed]
        error_file = self.error_files[failed]
        if os.path.exists(error_file) and os.path.getsize(error_file):
            with open(error_file) as f:
                original = f.read()
            message = (f"\n\n-- Process {failed} terminated with the following error:\n"
                       + original)
            raise ProcessRaisedException(message, failed, process.pid)
        code = process.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}",
                                         failed, process.pid, code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}",
                                     failed, process.pid, code)

    def __del__(self):
        for path in getattr(self, "error_files", ()):
            try:
                os.unlink(path)
            except OSError:
                pass


def start_processes(fn, args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn"):
    """Start `nprocs` processes (by `start_method`) each running `fn(i, *args)`; with `join`,
    wait for all and raise the first failure, else return their `ProcessContext`."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="fusegrad-spawn-", suffix=".err")
        os.close(fd)
        process = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(path)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """`start_processes` with the "spawn" start method (the only one PyTorch's `spawn`
    takes without a warning)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
