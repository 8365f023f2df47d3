"""Eager per-op overhead on tiny tensors: fusegrad beside PyTorch and NumPy.

On a 16-element (4x4) or 1-element (1x1) float32 tensor the arithmetic is free, so what is
timed is the framework: argument parsing, dispatch, wrapping the result and, with grad, the
autograd Node recorded per op and the engine's work per node in backward.

Measured, all in one process:

1. forward without grad: add, mul by a Python scalar, exp, sum, matmul, transpose, view,
   relu and `x[0]` (NumPy runs the same expression on plain arrays as the floor);
2. forward with grad: the same ops on inputs that require grad (one Node per op);
3. chains of N ops (`y = y * 1.0001`; `y = y * c` with `c` a tensor without grad; and
   `y = x * y` with `x` the leaf, whose gradient then sums N contributions): the forward per
   op and `y.sum().backward()` per node, the graph being rebuilt for every repeat;
4. the headline: forward + backward per op with grad, from the chains.

The frameworks are measured in turns (fusegrad, torch, numpy, then again with the starting
framework rotated) so that machine noise hits all of them alike, and each round of repeats
goes over every row, so a row's samples are spread over the whole run; each figure is the minimum
(or, with `--stat median`, the median) over the repeats: on a shared machine the minimum is
the figure least disturbed by other processes. The garbage collector is off while a loop is
timed, as `timeit` does.

On a loaded machine a timed region longer than the scheduler's time slice (a chain of 1000
ops takes 2-30 ms) includes the time other processes held the CPU, in every sample; with
`--clock cpu` each figure is the calling thread's CPU time instead (`time.thread_time`), which
leaves that out (both frameworks compute in the calling thread at one intra-op thread).

Run from the repository root: `python benchmarks/eager_overhead.py` (under a minute),
`--quick` (under ten seconds), `--markdown` for GitHub tables, `--clock cpu` under load.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from dataclasses import dataclass, field

FRAMEWORKS = ("fusegrad", "torch", "numpy")


@dataclass(frozen=True)
class OpCase:
    """One forward op: the expression run by fusegrad and torch, and its NumPy twin.

    Names in the expressions: `a`, `b` (n x n inputs), `k` (their element count), `np`.
    """

    name: str
    stmt: str
    np_stmt: str


OPS = (
    OpCase("add (a + b)", "a + b", "a + b"),
    OpCase("mul scalar (a * 1.5)", "a * 1.5", "a * 1.5"),
    OpCase("exp", "a.exp()", "np.exp(a)"),
    OpCase("sum", "a.sum()", "a.sum()"),
    OpCase("matmul (a @ b)", "a @ b", "a @ b"),
    OpCase("transpose(0, 1)", "a.transpose(0, 1)", "a.swapaxes(0, 1)"),
    OpCase("view(k)", "a.view(k)", "a.reshape(k)"),
    OpCase("relu", "a.relu()", "np.maximum(a, 0)"),
    OpCase("index a[0]", "a[0]", "a[0]"),
)

SIZES = (4, 1)  # n: inputs are n x n, i.e. 16 and 1 elements


@dataclass
class Settings:
    """How long to measure: repeats per figure, seconds per timed loop, chain length."""

    repeats: int
    target_s: float
    chain_n: int
    chain_repeats: int
    stat: str
    clock: object = time.perf_counter  # what a figure measures: wall or this thread's CPU time


@dataclass
class Row:
    """One line of a result table (seconds per op; None where not measured)."""

    case: str
    fusegrad: float | None
    torch: float | None
    numpy: float | None = None


def _import_frameworks():
    """Import NumPy, torch and fusegrad with one intra-op thread each."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import torch

    import fusegrad as fg

    torch.set_num_threads(1)
    return np, torch, fg


def _summary(samples: list[float], stat: str) -> float:
    return min(samples) if stat == "min" else statistics.median(samples)


def _calibrate(timer: timeit.Timer, target_s: float) -> int:
    """Loop count that makes one timed loop last about `target_s` seconds."""
    timer.timeit(20)  # warm caches and lazily created objects
    number = 20
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= target_s / 4 or number >= 1 << 24:
            break
        number *= 4
    return max(1, int(number * target_s / max(elapsed, 1e-9)))


@dataclass
class Series:
    """The timers of one table row, one per framework, and their per-call samples."""

    label: str
    timers: dict
    numbers: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)

    def summary(self, stat: str) -> dict:
        """Seconds per call for each framework."""
        return {fw: _summary(v, stat) for fw, v in self.samples.items()}


def measure_round_robin(series: list[Series], cfg: Settings) -> None:
    """Fill each series' samples: every round times every row, frameworks in rotating turns.

    A round goes over all rows, so each row's samples are spread over the whole run and a
    burst of load from another process cannot spoil all of them.
    """
    for s in series:
        s.numbers = {fw: _calibrate(t, cfg.target_s) for fw, t in s.timers.items()}
        s.samples = {fw: [] for fw in s.timers}
    for r in range(cfg.repeats):
        for s in series:
            keys = list(s.timers)
            if not keys:
                continue
            shift = r % len(keys)
            for fw in keys[shift:] + keys[:shift]:
                number = s.numbers[fw]
                s.samples[fw].append(s.timers[fw].timeit(number) / number)


def _inputs(mods, n: int, requires_grad: bool):
    """The same n x n float32 data as arrays and as fusegrad and torch tensors."""
    np, torch, fg = mods["numpy"], mods["torch"], mods["fusegrad"]
    rng = np.random.default_rng(0)
    data = [rng.uniform(0.5, 1.5, (n, n)).astype(np.float32) for _ in range(2)]
    out = {"numpy": data}
    for name, mod in (("fusegrad", fg), ("torch", torch)):
        out[name] = [mod.from_numpy(d.copy()).requires_grad_(requires_grad) for d in data]
    return out


def _to_numpy(value):
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    return value


def _check(case: OpCase, namespaces: dict, requires_grad: bool) -> dict:
    """Run each framework once; the frameworks whose result is wrong or that raise, why."""
    np = namespaces["numpy"]["np"]
    expected = eval(case.np_stmt, namespaces["numpy"])
    problems = {}
    for fw in ("fusegrad", "torch"):
        try:
            got = eval(case.stmt, namespaces[fw])
        except Exception as e:  # a missing or broken op: leave the case out, say why
            problems[fw] = f"{type(e).__name__}: {e}"
            continue
        if requires_grad and got.grad_fn is None:
            problems[fw] = "no grad_fn recorded"
        elif not np.allclose(_to_numpy(got), expected, rtol=1e-5, atol=1e-6):
            problems[fw] = "result differs from NumPy"
    return problems


def forward_series(mods, requires_grad: bool, problems: list,
                   clock=time.perf_counter) -> list[Series]:
    """One Series per OpCase and size; cases a framework fails are left out and noted."""
    series = []
    for n in SIZES:
        inputs = _inputs(mods, n, requires_grad)
        namespaces = {}
        for fw in FRAMEWORKS:
            a, b = inputs[fw]
            namespaces[fw] = {"a": a, "b": b, "k": n * n, "np": mods["numpy"]}
        for case in OPS:
            label = f"{case.name} [{n * n}]"
            bad = _check(case, namespaces, requires_grad)
            for fw, why in bad.items():
                problems.append(f"{label} ({'grad' if requires_grad else 'no grad'}), {fw}: "
                                f"{why}")
            timers = {}
            for fw in FRAMEWORKS:
                if fw in bad or (requires_grad and fw == "numpy"):
                    continue
                stmt = case.np_stmt if fw == "numpy" else case.stmt
                timers[fw] = timeit.Timer(stmt, timer=clock, globals=namespaces[fw])
            series.append(Series(label, timers))
    return series


def _rows(series: list[Series], stat: str) -> list[Row]:
    rows = []
    for s in series:
        got = s.summary(stat)
        rows.append(Row(s.label, got.get("fusegrad"), got.get("torch"), got.get("numpy")))
    return rows


def _scalar_chain(x, n: int):
    y = x
    for _ in range(n):
        y = y * 1.0001
    return y


def _const_chain(x, n: int):
    c = x.detach()  # a tensor that does not require grad
    y = x
    for _ in range(n):
        y = y * c
    return y


def _leaf_chain(x, n: int):
    y = x
    for _ in range(n):
        y = x * y
    return y


CHAINS = (("y = y * 1.0001", _scalar_chain), ("y = y * c", _const_chain),
          ("y = x * y", _leaf_chain))


def _chain_once(make_leaf, build, n: int, clock=time.perf_counter) -> tuple[float, float]:
    """Build a chain of `n` ops and backpropagate through it: (forward s, backward s)."""
    x = make_leaf()
    gc.disable()
    try:
        t0 = clock()
        y = build(x, n)
        t1 = clock()
        y.sum().backward()
        t2 = clock()
    finally:
        gc.enable()
    del y  # the graph is freed here, outside the timed region
    return t1 - t0, t2 - t1


def bench_chains(mods, cfg: Settings) -> list[Row]:
    """Forward per op, backward per node and their sum for chains of `chain_n` ops.

    Every repeat rebuilds each chain (for each size and framework, in rotating turns); the
    graph is freed outside the timed region.
    """
    np = mods["numpy"]
    n_ops = cfg.chain_n
    configs = []
    for n in SIZES:
        # Values near 1, so x ** n_ops stays normal (no overflow, no denormals).
        data = (1.0 + 1e-4 * np.random.default_rng(1).standard_normal((n, n))).astype(
            np.float32)
        leaves = {fw: (lambda mod=mods[fw], d=data: mod.from_numpy(d.copy()).requires_grad_())
                  for fw in ("fusegrad", "torch")}
        for chain_name, build in CHAINS:
            grads = {}
            for fw, make in leaves.items():  # warm-up, and a check that gradients agree
                x = make()
                build(x, 10).sum().backward()
                grads[fw] = x.grad.numpy()
            if not np.allclose(grads["fusegrad"], grads["torch"], rtol=1e-4):
                raise RuntimeError(f"chain {chain_name!r}: fusegrad and torch grads differ")
            configs.append((f"{chain_name} [{n * n}]", build, leaves))
    fwd = {(tag, fw): [] for tag, _, leaves in configs for fw in leaves}
    bwd = {key: [] for key in fwd}
    for r in range(cfg.chain_repeats):
        gc.collect()  # once a round: a full collection costs milliseconds with torch loaded
        for tag, build, leaves in configs:
            keys = list(leaves)
            shift = r % len(keys)
            for fw in keys[shift:] + keys[:shift]:
                tf, tb = _chain_once(leaves[fw], build, n_ops, cfg.clock)
                fwd[tag, fw].append(tf / n_ops)
                bwd[tag, fw].append(tb / n_ops)
    rows = []
    for tag, _, _ in configs:
        f = {fw: _summary(fwd[tag, fw], cfg.stat) for fw in ("fusegrad", "torch")}
        b = {fw: _summary(bwd[tag, fw], cfg.stat) for fw in ("fusegrad", "torch")}
        rows.append(Row(f"{tag} forward/op", f["fusegrad"], f["torch"]))
        rows.append(Row(f"{tag} backward/node", b["fusegrad"], b["torch"]))
        rows.append(Row(f"{tag} fwd+bwd/op", f["fusegrad"] + b["fusegrad"],
                        f["torch"] + b["torch"]))
    return rows


def _fmt_us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.2f}"


def _table(rows: list[Row], markdown: bool) -> str:
    headers = ["case", "fusegrad µs", "torch µs", "numpy µs", "fusegrad/torch"]
    body = []
    for r in rows:
        ratio = (f"{r.fusegrad / r.torch:.1f}x" if r.fusegrad is not None and r.torch
                 else "-")
        body.append([r.case, _fmt_us(r.fusegrad), _fmt_us(r.torch), _fmt_us(r.numpy), ratio])
    try:
        from tabulate import tabulate
    except ImportError:
        tabulate = None
    if tabulate is not None:
        return tabulate(body, headers, tablefmt="github" if markdown else "simple",
                        colalign=("left", "right", "right", "right", "right"))
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *body)]
    lines = []
    for i, line in enumerate([headers] + body):
        cells = [str(c).ljust(w) if j == 0 else str(c).rjust(w)
                 for j, (c, w) in enumerate(zip(line, widths))]
        lines.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
        if i == 0:
            if markdown:
                lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
            else:
                lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _command(*args: str) -> str | None:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def environment(mods) -> str:
    """One line describing the machine, the library versions and the fusegrad commit."""
    date = _command("date", "-u", "+%F") or time.strftime("%Y-%m-%d", time.gmtime())
    commit = _command("git", "rev-parse", "--short", "HEAD")
    if commit and _command("git", "status", "--porcelain", "--", "../src"):
        commit += " + uncommitted changes in src/"
    return (f"{date}; {os.cpu_count()} CPUs, {_cpu_model()}; "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; "
            f"Python {platform.python_version()}, NumPy {mods['numpy'].__version__}, "
            f"torch {mods['torch'].__version__}, fusegrad {mods['fusegrad'].__version__}"
            + (f" at {commit}" if commit else ""))


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run every measurement and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast, noisier run (~10 s)")
    parser.add_argument("--stat", choices=("min", "median"), default="min",
                        help="summary of the repeats (default: min)")
    parser.add_argument("--markdown", action="store_true", help="print GitHub tables")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time each figure by the wall clock (default) or by this "
                             "thread's CPU time, which leaves out the time other processes "
                             "hold the CPU (for a loaded machine)")
    args = parser.parse_args(argv)

    np, torch, fg = _import_frameworks()
    mods = {"numpy": np, "torch": torch, "fusegrad": fg}
    if args.quick:
        cfg = Settings(repeats=7, target_s=0.001, chain_n=300, chain_repeats=5, stat=args.stat)
    else:
        cfg = Settings(repeats=20, target_s=0.007, chain_n=1000, chain_repeats=25,
                       stat=args.stat)
    cfg.clock = time.thread_time if args.clock == "cpu" else time.perf_counter

    start = time.perf_counter()
    print(f"# eager per-op overhead: {environment(mods)}")
    print(f"# {cfg.stat} of {cfg.repeats} round-robin repeats of ~{cfg.target_s * 1e3:g} ms "
          f"loops; chains of {cfg.chain_n} ops, {cfg.chain_repeats} repeats; {args.clock} "
          "clock; [n] = elements per input")
    problems: list[str] = []
    no_grad = forward_series(mods, False, problems, cfg.clock)
    with_grad = forward_series(mods, True, problems, cfg.clock)
    measure_round_robin(no_grad + with_grad, cfg)
    chains = bench_chains(mods, cfg)
    headline = [r for r in chains if r.case.endswith("fwd+bwd/op")]
    sections = [
        ("Forward, no grad", _rows(no_grad, cfg.stat)),
        ("Forward, inputs require grad (one Node per op)", _rows(with_grad, cfg.stat)),
        (f"Chains of {cfg.chain_n} ops with grad: forward per op, y.sum().backward() per node",
         chains),
        ("Headline: forward + backward per op, with grad", headline),
    ]
    for title, rows in sections:
        print(f"\n{'### ' if args.markdown else ''}{title}\n")
        print(_table(rows, args.markdown))
    if problems:
        print("\nLeft out (missing or broken):")
        for p in problems:
            print(f"  - {p}")
    print(f"\n# total {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
