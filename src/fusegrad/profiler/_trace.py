"""Chrome trace export: the events as the JSON "Trace Event Format" that chrome://tracing
and Perfetto open, laid out as PyTorch writes it (complete `X` events with `cpu_op` or
`user_annotation` categories, `[memory]` instant events, process and thread names)."""

from __future__ import annotations

import json
import os
from typing import Any

from .._atomic_write import write_atomically


def trace_document(events: list, memory: list, meta: dict[str, Any],
                   base_us: float = 0.0) -> dict:
    """The trace as a dict: `events` (FunctionEvent), `memory` ((time, bytes, total,
    storage) samples), `meta` (top-level fields); times are offset by `base_us`."""
    pid = os.getpid()
    threads = sorted({e.thread for e in events}) or [pid]
    trace: list[dict] = [
        {"ph": "M", "name": "process_name", "ts": base_us, "pid": pid, "tid": 0,
         "args": {"name": "python"}},
        {"ph": "M", "name": "process_labels", "ts": base_us, "pid": pid, "tid": 0,
         "args": {"labels": "CPU"}},
    ]
    for tid in threads:
        trace.append({"ph": "M", "name": "thread_name", "ts": base_us, "pid": pid,
                      "tid": tid, "args": {"name": f"thread {tid}"}})
    for index, e in enumerate(events):
        args: dict[str, Any] = {"External id": e.id, "Record function id": 0}
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        args["Ev Idx"] = index
        trace.append({
            "ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
            "name": e.trace_name, "pid": pid, "tid": e.thread,
            "ts": round(base_us + e.start_us, 3), "dur": round(e.end_us - e.start_us, 3),
            "args": args})
    tid = threads[0]
    for k, (t, nbytes, total, storage) in enumerate(memory):
        trace.append({
            "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
            "pid": pid, "tid": tid, "ts": round(base_us + t, 3),
            "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": nbytes,
                     "Device Id": -1, "Device Type": 0, "Addr": storage,
                     "Ev Idx": len(events) + k}})
    # PyTorch's key order: the metadata, the events, then the trace's name.
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []}
    doc.update((k, v) for k, v in meta.items() if k != "traceName")
    doc.setdefault("displayTimeUnit", "ms")
    doc["traceEvents"] = trace
    if "traceName" in meta:
        doc["traceName"] = meta["traceName"]
    return doc


def write_chrome_trace(path: str, events: list, memory: list, meta: dict[str, Any],
                       base_us: float = 0.0) -> None:
    """Write the trace to `path` at once (a reader never sees half a file)."""
    doc = trace_document(events, memory, dict(meta, traceName=os.fspath(path)), base_us)
    data = json.dumps(doc).encode()
    write_atomically(path, lambda f: f.write(data))
