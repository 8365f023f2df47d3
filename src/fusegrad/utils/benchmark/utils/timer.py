"""`Timer`: time a Python statement (`stmt`, after `setup`, in `globals`) with
`timeit.Timer`, at a given number of threads, and return Measurements: `timeit(number)`,
`blocked_autorange` (blocks of runs until `min_run_time` has passed) and
`adaptive_autorange` (blocks until the interquartile range is within `threshold` of the
median)."""

from __future__ import annotations

import enum
import timeit
from collections.abc import Callable
from typing import Any

from .common import Measurement, TaskSpec

__all__ = ["Timer", "Language"]


class Language(enum.Enum):
    """The language of the statement: fusegrad times Python only."""

    PYTHON = 0
    CPP = 1


def timer() -> float:
    """The clock Timer reads by default."""
    return timeit.default_timer()


class Timer:
    """Time `stmt` (run after `setup`, with `globals`) at `num_threads` threads."""

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict[str, Any] | None = None,
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("fusegrad's Timer times Python statements only")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        self._globals = dict(globals or {})
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup,
                                   label=label, sub_label=sub_label, description=description,
                                   env=env, num_threads=num_threads)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)

    def _timeit(self, number: int) -> float:
        """Seconds for `number` runs, at the task's thread count (restored after)."""
        import fusegrad

        previous = fusegrad.get_num_threads()
        fusegrad.set_num_threads(self._task_spec.num_threads)
        try:
            return max(self._timer.timeit(number), 1e-9)
        finally:
            fusegrad.set_num_threads(previous)

    def timeit(self, number: int = 1000000) -> Measurement:
        """One block of `number` runs (after a short warm-up)."""
        self._timeit(number=max(int(number // 100), 2))
        return Measurement(number_per_run=number, raw_times=[self._timeit(number=number)],
                           task_spec=self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        """Not offered, as in PyTorch."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable[[int, float], None] | None = None) -> None:
        """Not offered, as in PyTorch."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self) -> int:
        """Runs per block: the first power of ten whose block takes at least a millisecond,
        so the clock's resolution and the loop's overhead are small beside it."""
        number = 1
        while True:
            if self._timeit(number) >= 1e-3 or number >= 10 ** 9:
                return number
            number *= 10

    def _blocks(self, number: int, min_run_time: float, max_run_time: float | None,
                stop: Callable[[list[float]], bool], callback) -> list[float]:
        times: list[float] = []
        total = 0.0
        while True:
            elapsed = self._timeit(number)
            total += elapsed
            times.append(elapsed)
            if callback is not None:
                callback(number, elapsed)
            if total >= min_run_time and stop(times):
                return times
            if max_run_time is not None and total >= max_run_time:
                return times

    def blocked_autorange(self, callback: Callable[[int, float], None] | None = None,
                          min_run_time: float = 0.2) -> Measurement:
        """Blocks of runs until at least `min_run_time` seconds have been measured."""
        number = self._block_size()
        times = self._blocks(number, min_run_time, None, lambda t: True, callback)
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0,
                           callback: Callable[[int, float], None] | None = None
                           ) -> Measurement:
        """Blocks of runs until the interquartile range is below `threshold` times the
        median (at least `min_run_time` seconds and three blocks, at most `max_run_time`)."""
        number = self._block_size()

        def confident(times: list[float]) -> bool:
            if len(times) < 3:
                return False
            return Measurement(number, times, self._task_spec).meets_confidence(threshold)

        times = self._blocks(number, min_run_time, max_run_time, confident, callback)
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
