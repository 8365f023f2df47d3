"""`Work`: a pending collective (non-blocking MPI requests, or the TCP transport's, which
have the same `Request.Testall`) and its bounded wait.

Every collective, blocking or not, is issued as non-blocking MPI requests and completed by
polling them against the group's deadline, so a peer that stopped answering becomes a
`RuntimeError` after `timeout` instead of a hang (a peer that died is also reported by mpiexec,
which stops the job).

A collective made of several rounds (the ring all-reduce) moves on only when this process
posts its next round. Every poll of any `Work` (and so every blocking call) first moves all
such collectives along, in the order they were issued: the ranks may then wait on their
pending collectives in any order, or do point-to-point traffic in between, as with gloo,
whose collectives progress on threads of their own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# Polling without sleeping for this long keeps short collectives fast (Open MPI progresses
# messages only inside MPI calls); it yields the core on every turn so that a peer rank
# sharing it can run. After it the poll sleeps with growing pauses: a rank that waits for a
# slower one must not take the CPU that one needs.
_SPIN_SECONDS = 0.002
_MAX_PAUSE = 1e-3

# Multi-round collectives not finished yet, oldest first (see `progress`).
_PENDING: list = []


def register(driver) -> None:
    """Have `progress()` move `driver` (an object with `test()`) along until it finishes."""
    _PENDING.append(driver)


def progress() -> None:
    """Move every pending multi-round collective along, in issue order, without blocking.

    A rank that waits on one collective (or on a receive) keeps posting the rounds of the
    others, so a peer that waits on them in another order still sees them complete."""
    if not _PENDING:
        return
    finished = [driver for driver in list(_PENDING) if driver.test()]
    for driver in finished:
        _PENDING.remove(driver)


class Work:
    """A collective in flight: `wait()` completes it, then runs its finishing step once.

    `finish` copies received data into tensors that could not be written in place and bumps
    their version counters; `result()` gives the output tensors.
    """

    def __init__(self, requests: list, group, what: str,
                 finish: Callable[[], None] | None = None, outputs: list | None = None,
                 statuses: list | None = None, driver=None, source=None) -> None:
        self._requests = requests
        # A receive's `source()` gives the sender's global rank once it has completed.
        self._source = source
        self._statuses = statuses
        # A collective made of several rounds of requests (the ring all-reduce) passes an
        # object whose `test()` moves it along and says when it is done.
        self._driver = driver
        if driver is not None:
            register(driver)
        self._group = group
        self._what = what
        self._finish = finish
        self._outputs = outputs or []
        self._done = False
        self._error: BaseException | None = None

    def _complete(self) -> None:
        self._done = True
        self._requests = []
        self._driver = None
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()

    def is_completed(self) -> bool:
        """True once the collective has finished, or failed (drives MPI's progress as a side
        effect)."""
        if self._error is not None:
            return True
        if not self._done and self._test():
            self._complete()
        return self._done

    def is_success(self) -> bool:
        """True when the collective completed without error."""
        return self.is_completed() and self._error is None

    def exception(self):
        """The error of a failed wait, or None."""
        return self._error

    def wait(self, timeout=None) -> bool:
        """Block until the collective completes; RuntimeError after the group's timeout."""
        if self._done:
            return True
        limit = self._group.timeout if timeout is None else timeout
        seconds = limit.total_seconds() if hasattr(limit, "total_seconds") else float(limit)
        try:
            _wait_all(self._test, seconds, self._what, self._group, timeout is not None)
        except RuntimeError as exc:
            self._error = exc
            raise
        self._complete()
        return True

    def _test(self) -> bool:
        progress()
        if self._driver is not None:
            return self._driver.test()
        if not self._requests:
            return True
        return self._group.mpi.Request.Testall(self._requests, self._statuses)

    def result(self) -> list:
        """The output tensors of a completed collective (PyTorch's errors before `wait()` and
        for point-to-point operations, which have no result)."""
        if self._what in ("send", "recv"):
            raise RuntimeError("result() not implemented.")
        if not self.is_completed():
            raise RuntimeError("Work needs to be completed before calling result(). Should "
                               "call wait() before result().")
        return list(self._outputs)

    def get_future(self):
        """A `fusegrad.futures.Future` of the collective's output tensors (as `result()`).

        The collectives here move only while some rank's thread waits on them, so the future
        is completed by waiting for the work first (bounded by the group's timeout); callbacks
        chained with `then` then run at once."""
        from ..futures import Future

        self.wait()
        future = Future()
        future.set_result(list(self._outputs))
        return future

    def source_rank(self) -> int:
        """The global rank a receive got its message from (waits for it first)."""
        if self._source is None:
            raise RuntimeError("sourceRank() may only be called on work objects that "
                               "correspond to a recv or recv-from-any call.")
        self.wait()
        return self._source()

    def synchronize(self) -> None:
        """Same as `wait()` on CPU."""
        self.wait()


def _wait_all(test: Callable[[], bool], seconds: float, what: str, group,
              explicit: bool = False) -> None:
    """Poll `test()` until it says the collective is complete, or raise after `seconds`
    (`explicit`: the caller of `wait` gave the timeout)."""
    if test():
        return
    start = time.monotonic()
    spin_until = start + _SPIN_SECONDS
    deadline = start + seconds
    pause = 1e-5
    while not test():
        now = time.monotonic()
        if now > deadline:
            raise group._timeout_error(seconds, what, explicit)
        if now > spin_until:
            time.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE)
        else:
            os.sched_yield()
