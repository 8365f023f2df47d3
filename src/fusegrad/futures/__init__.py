"""`fusegrad.futures`: a value that becomes available later (`Future`), and helpers to wait
for several (`collect_all`, `wait_all`). `fusegrad.jit.fork` returns one; `Future` is the
class PyTorch calls `torch.jit.Future`.

A future is completed once, with a result (`set_result`) or an error (`set_exception`);
`wait()` blocks until then (another thread may complete it) and returns the result or raises
the error; callbacks added with `then` or `add_done_callback` run when it completes (at once
if it already has), in the order added.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_PENDING = object()


class Future:
    """A value computed elsewhere: completed once with a result or an exception."""

    def __init__(self, *, devices=None):
        self._done = threading.Condition()
        self._result: Any = _PENDING
        self._error: BaseException | None = None
        self._callbacks: list[Callable] = []

    def done(self) -> bool:
        """Whether the future has a result or an exception."""
        return self._result is not _PENDING or self._error is not None

    def wait(self) -> Any:
        """Block until the future completes; its result, or raise its exception."""
        with self._done:
            self._done.wait_for(self.done)
        return self.value()

    def value(self) -> Any:
        """The result of a completed future (its exception raised)."""
        if self._error is not None:
            raise self._error
        if self._result is _PENDING:
            raise RuntimeError("Future.value() called on a Future that has not completed; "
                               "call wait() to block until it does")
        return self._result

    def set_result(self, result: Any) -> None:
        """Complete the future with `result`, waking its waiters and running callbacks."""
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with the exception `result` (raised by `wait`/`value`)."""
        if not isinstance(result, BaseException):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(_PENDING, result)

    def _complete(self, result: Any, error: BaseException | None) -> None:
        with self._done:
            if self.done():
                raise RuntimeError("Attempting to mark a completed Future as complete again. "
                                   "Note that a Future can only be marked completed once.")
            self._result, self._error = result, error
            callbacks, self._callbacks = self._callbacks, []
            self._done.notify_all()
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[Future], None]) -> None:
        """Run `callback(self)` when the future completes (now, if it has)."""
        with self._done:
            if not self.done():
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """A new future completed with `callback(self)` once this one completes (or with a
        RuntimeError naming the exception the callback raised)."""
        chained = Future()

        def run(fut: Future) -> None:
            try:
                chained.set_result(callback(fut))
            except Exception as error:  # the callback's error completes the chained future
                chained.set_exception(RuntimeError(
                    "Got the following error when running the callback: "
                    f"{type(error).__name__}: {error}"))

        self.add_done_callback(run)
        return chained

    def __repr__(self) -> str:
        return "Future(done)" if self.done() else "Future(pending)"


Future.__module__ = "fusegrad.jit"  # PyTorch's name for the class: torch.jit.Future


def collect_all(futures: list[Future]) -> Future:
    """A future completed with the list of `futures` once every one of them has completed."""
    futures = list(futures)
    together = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            together.set_result(futures)

    if not futures:
        together.set_result([])
    for fut in futures:
        fut.add_done_callback(one_done)
    return together


def wait_all(futures: list[Future]) -> list:
    """Wait for every one of `futures`; their results in order (the first error raised)."""
    return [fut.wait() for fut in collect_all(futures).wait()]


__all__ = ["Future", "collect_all", "wait_all"]
