"""What a benchmark measured: `TaskSpec` (the statement and its labels) and `Measurement`
(the times of one or more blocks of runs, their median and interquartile range), printed in
PyTorch's layout."""

from __future__ import annotations

import collections
import math
import textwrap
from typing import Any

import numpy as np

__all__ = ["TaskSpec", "Measurement", "select_unit", "trim_sigfig", "unit_to_english"]

_IQR_WARN_THRESHOLD = 0.1
_UNITS = {-3: "ns", -2: "us", -1: "ms"}
_UNIT_SCALES = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}


def select_unit(t: float) -> tuple[str, float]:
    """The unit a time of `t` seconds is shown in (ns, us, ms or s) and its scale."""
    unit = _UNITS.get(int(np.log10(np.array(t)) // 3), "s")
    return unit, _UNIT_SCALES[unit]


def unit_to_english(u: str) -> str:
    """"us" -> "microsecond"."""
    return _ENGLISH[u]


def trim_sigfig(x: float, n: int) -> float:
    """`x` rounded to `n` significant figures (as a float32, as PyTorch's helper gives)."""
    magnitude = int(math.ceil(math.log10(abs(x))))
    scale = 10 ** (magnitude - n)
    return float(np.float32(round(x / scale) * scale))


class TaskSpec:
    """The statement timed, its setup, labels and thread count."""

    _FIELDS = ("stmt", "setup", "global_setup", "label", "sub_label", "description", "env",
               "num_threads")

    def __init__(self, stmt: str, setup: str, global_setup: str = "", label: str | None = None,
                 sub_label: str | None = None, description: str | None = None,
                 env: str | None = None, num_threads: int = 1) -> None:
        self.stmt = stmt
        self.setup = setup
        self.global_setup = global_setup
        self.label = label
        self.sub_label = sub_label
        self.description = description
        self.env = env
        self.num_threads = num_threads

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __eq__(self, other) -> bool:
        return isinstance(other, TaskSpec) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def title(self) -> str:
        """The label (with the sub-label), or the statement."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return (f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
                f"{textwrap.indent(self.stmt, '  ')}")

    def summarize(self) -> str:
        """The title, description and setup lines a Measurement's repr starts with."""
        title = self.title
        sections = [title + "\n" if "\n" in title else title, self.description or ""]
        setup = textwrap.dedent(self.setup).strip()
        if "\n" in setup:
            sections.append(f"setup:\n{textwrap.indent(setup, '  ')}\n")
        elif setup and setup != "pass":
            sections.append(f"setup: {setup}")
        return "\n".join(s for s in sections if s)


class Measurement:
    """The times of `len(raw_times)` blocks of `number_per_run` runs each."""

    def __init__(self, number_per_run: int, raw_times: list[float], task_spec: TaskSpec,
                 metadata: dict[Any, Any] | None = None) -> None:
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec
        self.metadata = metadata

    def __getattr__(self, name: str):
        # The task's fields read as the measurement's own (`m.label`, `m.num_threads`).
        if name in TaskSpec._FIELDS:
            return getattr(self.__dict__["task_spec"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def times(self) -> list[float]:
        """Seconds per run of each block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        return float(np.median(self.times))

    @property
    def mean(self) -> float:
        return float(np.mean(self.times))

    @property
    def iqr(self) -> float:
        """The interquartile range of the per-run times."""
        return float(np.percentile(self.times, 75) - np.percentile(self.times, 25))

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def as_row_name(self) -> str:
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

    @property
    def has_warnings(self) -> bool:
        return not self.meets_confidence(_IQR_WARN_THRESHOLD)

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether the interquartile range is below `threshold` times the median."""
        return self.iqr / self.median < threshold

    def __repr__(self) -> str:
        unit, scale = select_unit(self.median)
        n = len(self.times)
        lines = [f"{object.__repr__(self)}", self.task_spec.summarize()]
        if n > 1:
            lines.append(f"  Median: {self.median / scale:.2f} {unit}")
            if n >= 4:
                low, high = np.percentile(self.times, 25), np.percentile(self.times, 75)
                lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                             f"({low / scale:.2f} to {high / scale:.2f})")
        else:
            lines.append(f"  {self.median / scale:.2f} {unit}")
        threads = self.task_spec.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement' if n > 1 else ''}, {threads} "
                     f"thread{'s' if threads > 1 else ''}")
        if self.has_warnings:
            spread = self.iqr / self.median
            cause = ("This suggests significant environmental influence." if spread >= 0.25
                     else "This could indicate system fluctuation.")
            lines.append(f"  WARNING: Interquartile range is {spread * 100:.1f}% of the median "
                         f"measurement.\n           {cause}")
        return "\n".join(lines)

    __str__ = __repr__

    @staticmethod
    def merge(measurements) -> list[Measurement]:
        """One Measurement per task, its blocks the per-run times of all given for it."""
        grouped = collections.defaultdict(list)
        for m in measurements:
            grouped[m.task_spec].append(m)
        merged = []
        for spec, group in grouped.items():
            times = [t for m in group for t in m.times]
            merged.append(Measurement(1, times, spec, group[0].metadata))
        return merged
