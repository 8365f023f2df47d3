"""What capture costs: per-call overhead of a compiled function and translation time.

For fusegrad.compile and torch.compile(backend="eager"), in one process:
- per call: a compiled 2-op function minus calling its captured graph directly (guards,
  argument binding and dispatch into the graph), on 16-element tensors;
- translation: the first call of functions of 10, 100 and 1,000 ops (capture + backend).

Run: `python benchmarks/compile_overhead.py` (add `--quick` for a short run).
"""

from __future__ import annotations

import argparse
import os
import time
import timeit

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import fusegrad  # noqa: E402


def make_chain(n_ops: int):
    """Source of a function applying `n_ops` pointwise ops to its input."""
    lines = ["def f(x, y):"]
    ops = ["x = x + y", "x = x * 0.5", "x = x.tanh()", "x = x - y"]
    for i in range(n_ops):
        lines.append("    " + ops[i % len(ops)])
    lines.append("    return x")
    return "\n".join(lines)


def _function(src: str):
    namespace: dict = {}
    exec(compile(src, "<bench>", "exec"), namespace)
    return namespace["f"]


class _Keep:
    def __init__(self):
        self.graph = None

    def __call__(self, gm, example_inputs):
        self.graph = gm
        return gm.forward


def per_call(lib, compile_fn, repeat: int, number: int) -> tuple[float, float]:
    """(µs per compiled call, µs per direct call of the captured graph)."""
    f = _function(make_chain(2))
    keep = _Keep()
    c = compile_fn(f, keep)
    x, y = lib.ones(16), lib.ones(16)
    c(x, y)
    gm = keep.graph
    compiled = min(timeit.repeat(lambda: c(x, y), number=number, repeat=repeat)) / number
    direct = min(timeit.repeat(lambda: gm(x, y), number=number, repeat=repeat)) / number
    return compiled * 1e6, direct * 1e6


def translation(lib, compile_fn, n_ops: int) -> float:
    """Seconds for the first call (capture and backend) of an `n_ops` function."""
    f = _function(make_chain(n_ops))
    c = compile_fn(f, _Keep())
    x, y = lib.ones(16), lib.ones(16)
    t = time.perf_counter()
    c(x, y)
    return time.perf_counter() - t


def _fg(f, backend):
    return fusegrad.compile(f, backend=backend)


def _th(f, backend):
    torch._dynamo.reset()
    return torch.compile(f, backend=backend)


def main() -> None:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat, number = (3, 500) if args.quick else (5, 3000)
    rows = []
    fg_c, fg_d = per_call(fusegrad, _fg, repeat, number)
    th_c, th_d = per_call(torch, _th, repeat, number)
    rows.append(("per-call overhead (µs)", fg_c - fg_d, th_c - th_d))
    rows.append(("compiled 2-op call (µs)", fg_c, th_c))
    sizes = (10, 100) if args.quick else (10, 100, 1000)
    for n in sizes:
        rows.append((f"translate {n} ops (ms)", translation(fusegrad, _fg, n) * 1e3,
                     translation(torch, _th, n) * 1e3))
    try:
        from tabulate import tabulate
    except ImportError:  # pragma: no cover
        tabulate = None
    header = ["case", "fusegrad", "torch (eager backend)", "fusegrad/torch"]
    table = [(c, f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}x") for c, a, b in rows]
    if tabulate:
        print(tabulate(table, headers=header))
    else:
        for row in [header] + table:
            print(" | ".join(row))


if __name__ == "__main__":
    main()
