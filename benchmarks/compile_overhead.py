"""What capture costs: per-call overhead of a compiled function and translation time.

For fusegrad.compile and torch.compile(backend="eager"), in one process:
- per call: a compiled 2-op function minus calling its captured graph directly (guards,
  argument binding and dispatch into the graph), on 16-element tensors;
- per call, whole: a one-graph 3-op function, and the seeds' `toy_example` (one graph break
  on a tensor's value, three graphs; both branches taken in turn), on 10-element tensors;
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


def toy_example_source(lib_name: str) -> str:
    """The seeds' `toy_example`: a break at the branch on `b.sum() < 0`, three graphs."""
    return (f"def f(a, b):\n    x = a / ({lib_name}.abs(a) + 1)\n    if b.sum() < 0:\n"
            "        b = b * -1\n    return x * b\n")


def per_call_whole(lib, compile_fn, src: str, repeat: int, number: int) -> float:
    """µs per compiled call of `src`'s `f(a, b)`, with `b` and `-b` in turn (a branch on
    `b`'s sign then goes both ways)."""
    namespace: dict = {lib.__name__: lib}
    exec(compile(src, "<bench>", "exec"), namespace)
    c = compile_fn(namespace["f"], "eager")
    a, b = lib.randn(10), lib.randn(10)
    nb = -b
    c(a, b), c(a, nb)
    both = min(timeit.repeat(lambda: (c(a, b), c(a, nb)), number=number, repeat=repeat))
    return both / number / 2 * 1e6


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
    for case, src in (("compiled 3-op call, one graph (µs)", make_chain(3)),
                      ("compiled toy_example call, one break (µs)", None)):
        rows.append((case, *(per_call_whole(lib, fn, src or toy_example_source(lib.__name__),
                                            repeat, number)
                             for lib, fn in ((fusegrad, _fg), (torch, _th)))))
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
