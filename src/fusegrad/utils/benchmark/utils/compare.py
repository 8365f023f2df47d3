"""`Compare`: Measurements as tables, one per label: a row per sub-label (grouped by thread
count), a column per description, each cell the median in the table's time unit."""

from __future__ import annotations

import math

from .common import Measurement, select_unit, unit_to_english

__all__ = ["Compare"]

_ROW_INDENT = " " * 6


def _unique(values) -> list:
    return list(dict.fromkeys(values))


class Compare:
    """Tables of `results`, printed with `print()` or `str()`."""

    def __init__(self, results: list[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)

    def extend_results(self, results: list[Measurement]) -> None:
        """Add Measurements to the tables."""
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} "
                                 "instead.")
        self._results.extend(results)

    def __str__(self) -> str:
        return "\n".join(self._render())

    def print(self) -> None:
        """Print the tables."""
        print(str(self))

    def _render(self) -> list[str]:
        merged = Measurement.merge(self._results)
        by_label: dict = {}
        for m in merged:
            by_label.setdefault(m.task_spec.label, []).append(m)
        return [self._layout(group) for group in by_label.values()]

    def _layout(self, results: list[Measurement]) -> str:
        unit, scale = select_unit(min(r.median for r in results))
        columns = _unique(r.task_spec.description for r in results)
        threads = sorted(_unique(r.task_spec.num_threads for r in results))
        rows = _unique(r.as_row_name for r in results)
        values = {(r.task_spec.num_threads, r.as_row_name, r.task_spec.description):
                  r.median / scale for r in results}
        # A column's numbers are right-aligned to the digits of its largest value before the
        # point (one decimal after it), then centred under the heading.
        number_width = {}
        for c in columns:
            largest = max(v for k, v in values.items() if k[2] == c)
            digits = max(math.ceil(math.log10(largest)), 1) if largest > 0 else 1
            number_width[c] = digits + 2
        cells = {k: f"{v:>{number_width[k[2]]}.1f}" for k, v in values.items()}
        width = {c: max(max(len(v) for k, v in cells.items() if k[2] == c), len(c))
                 for c in columns}
        name_width = max(len(_ROW_INDENT + r) for r in rows)

        def line(first: str, values: list[str]) -> str:
            return "  |  ".join([first.ljust(name_width)] +
                                [v.center(width[c]) for c, v in zip(columns, values)])

        body = []
        for count in threads:
            body.append(None)  # the thread count's rule, drawn once the width is known
            for row in rows:
                if not any((count, row, c) in cells for c in columns):
                    continue
                shown = [cells.get((count, row, c), "") for c in columns]
                body.append((count, line(_ROW_INDENT + row, shown)))
        header = line("", columns)
        total = len(header)
        label = results[0].task_spec.label or ""
        lines = ["[" + f" {label} ".center(total - 2, "-") + "]", header]
        pending = list(threads)
        for item in body:
            if item is None:
                rule = f"{pending.pop(0)} threads: "
                lines.append(rule + "-" * (total - len(rule)))
            else:
                lines.append(item[1])
        lines += ["", f"Times are in {unit_to_english(unit)}s ({unit}).", ""]
        return "\n".join(lines)
