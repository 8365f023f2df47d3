"""The profiler's summary table, laid out as PyTorch prints it: right-aligned columns two
spaces apart, dashed rules, names cut to the name column, and a closing total line."""

from __future__ import annotations

from typing import Any

from ._events import _time_with_unit, format_memory, format_share
from ._flops import scale

_WIDTH = 12  # the width of every figure column
_GAP = "  "


def _cut(text: str, width: int | None) -> str:
    if width is not None and len(text) >= width - 3:
        return text[:width - 3] + "..."
    return text


def _trim_path(path: str, width: int) -> str:
    """The end of a long source location, marked with '...'."""
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def build_table(events: list, sort_by: str | None = None, header: str | None = None,
                row_limit: int = 100, max_src_column_width: int = 75,
                max_name_column_width: int = 55, max_shapes_column_width: int = 80,
                profile_memory: bool = False, top_level_events_only: bool = False,
                time_unit: str | None = None, with_flops: bool = False) -> str:
    """The table of `events` (FunctionEvent or FunctionEventAvg entries)."""
    if not events:
        return ""
    if sort_by is not None:
        attribute = sort_by.replace("cuda", "device").replace("xpu", "device")
        events = sorted(events, key=lambda e: getattr(e, attribute), reverse=True)
    with_shapes = any(e.input_shapes for e in events)
    stacks = [e.stack for e in events if e.stack]

    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers.append("# of Calls")
    columns: list[tuple[int, str]] = [(name_width, ">")]
    columns += [(_WIDTH, ">")] * (len(headers) - 1)
    if with_shapes:
        shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
        if max_shapes_column_width is not None:
            shapes_width = min(shapes_width, max_shapes_column_width)
        headers.append("Input Shapes")
        columns.append((shapes_width, ">"))
    if stacks:
        src_width = max(len(frame) for stack in stacks for frame in stack) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)
        headers.append("Source Location")
        columns.append((src_width, "<"))
    flops = [e.flops for e in events if e.flops is not None and e.flops > 0]
    with_flops = with_flops and bool(flops)
    if with_flops:
        # PyTorch puts this header after the source column but the figures before it.
        flops_scale, unit = scale(min(flops))
        headers.append(f"Total {unit}")
        columns.append((_WIDTH, ">"))

    row_format = "".join("{: " + align + str(w) + "}" + _GAP for w, align in columns)
    rule = "".join("-" * w + _GAP for w, _ in columns)
    line_length = sum(w for w, _ in columns) + len(_GAP) * (len(columns) - 1)

    total_self = sum(e.self_cpu_time_total for e in events)
    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [rule, row_format.format(*headers), rule]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        row: list[Any] = [
            _cut(e.key, max_name_column_width),
            format_share(e.self_cpu_time_total, total_self),
            _time_with_unit(e.self_cpu_time_total, time_unit),
            format_share(e.cpu_time_total, total_self),
            _time_with_unit(e.cpu_time_total, time_unit),
            _time_with_unit(e.cpu_time, time_unit),
        ]
        if profile_memory:
            row += [format_memory(e.cpu_memory_usage), format_memory(e.self_cpu_memory_usage)]
        row.append(e.count)
        if with_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if with_flops:
            row.append("--" if not e.flops or e.flops <= 0 else f"{e.flops * flops_scale:8.3f}")
        if stacks:
            row.append(_trim_path(e.stack[0], src_width) if e.stack else "")
        lines.append(row_format.format(*row))
        if stacks:
            blank = [""] * (len(headers) - 1)
            for frame in (e.stack or [])[1:]:
                lines.append(row_format.format(*blank, _trim_path(frame, src_width)))
            lines.append(row_format.format(*blank, ""))
    lines += [rule, f"Self CPU time total: {_time_with_unit(total_self, time_unit)}"]
    return "\n".join(lines) + "\n"
