"""Milliseconds per training step: fusegrad beside PyTorch eager.

A training step is `zero_grad`, forward, cross-entropy loss, backward and an SGD update
(lr 0.01, momentum 0.9). Models:

1. MLP 784-1024-1024-10 (ReLU), batch 256;
2. LeNet-5 on 1x32x32 images, batch 64 (`fusegrad.models.LeNet5`);
3. ResNet-18 (BasicBlock, torchvision layout, 10 classes) on 3x32x32 images, batch 32
   (`fusegrad.models.resnet18`);
4. MLP 784-128-10, batch 64: the MNIST tutorial model, whose step is a millisecond or two,
   so per-op overhead counts as much as the GEMMs.

The torch twins are built from the same model sources with `torch.nn` in place of
`fusegrad.nn` (as tests/test_models.py does), so both sides run the same structure; the
torch model gets fusegrad's initial weights. Both frameworks are timed in turns (the starting
framework alternates between rounds) so that machine noise hits both alike; each figure is
the minimum (or `--stat median`) over the rounds, each round timing steps back to back after
warm-up (a few of a large model, fifty of the small MLP: `Case.steps`).

Each framework runs in a process of its own (two frameworks in one process share its
thread pools and its C heap: fusegrad tunes glibc's malloc at import, `fusegrad._heap`, which
would speed up PyTorch beside it): two worker processes, each with `OMP_NUM_THREADS=N` and
`set_num_threads(N)`, build the same model and are told in turns to time a round, so only one
computes at a time. The PyTorch worker never imports fusegrad: it reads the model sources as
files and the initial weights from a file the fusegrad worker wrote.

Run from the repository root: `OMP_NUM_THREADS=1 python benchmarks/train_step.py`
(a few minutes), `--quick` (under a minute), `--markdown` for a GitHub table, `--phases` for
the forward / backward / optimizer-step split (each framework's worker times the phases of
every step), `--threads 2` for both cores.

On a shared machine, `--undisturbed` keeps only the rounds during which the thread running
the steps waited for a CPU less than 1% of the round (Linux's run-queue wait, read from
/proc/thread-self/schedstat), so that other people's work does not enter the figures; the
table then says how many rounds qualified. More `--rounds` give it more to choose from.
Only the stepping thread counts: helper threads that hand each other their CPU (fusegrad's
C workers yield theirs to the pool thread beside them) count as waiting by design.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

# Seconds between one worker's round and the next one's (see `run_case_separate`).
SETTLE_S = 0.2


def torch_twin(name: str) -> dict:
    """Execute fusegrad model module `name`'s source with torch.nn in place of fusegrad.nn,
    read as a file: the PyTorch worker does not import fusegrad."""
    from importlib.util import find_spec

    root = find_spec("fusegrad").submodule_search_locations[0]  # finds, does not import
    path = os.path.join(root, "models", f"{name}.py")
    with open(path) as f:
        src = f.read().replace("from .. import nn", "from torch import nn")
    ns: dict = {"__name__": "twin"}
    exec(compile(src, path, "exec"), ns)
    return ns


@dataclass
class Case:
    """One model: how to build it from a models namespace (`fusegrad.models` or the torch
    twins), its input shape and batch size."""

    name: str
    build: Callable  # (models namespace) -> module
    input_shape: tuple[int, ...]
    batch: int
    limit: str  # what bounds the ratio (for the docs)
    # Steps per round (and warm-up steps): enough for a round of tens of milliseconds. Three
    # steps of a millisecond right after the pause between rounds timed a CPU coming back
    # from idle (its caches cold), not a training loop: 1.4-1.7 ms per step against 0.9 ms
    # run back to back.
    steps: int = 3
    warmup: int = 2


CASES = (
    Case("MLP 784-1024-1024-10", lambda m: m.MLP(784, (1024, 1024), 10), (784,), 256,
         "sgemm (BLAS)"),
    Case("LeNet-5", lambda m: m.LeNet5(), (1, 32, 32), 64, "im2col/col2im copies"),
    Case("ResNet-18 (3x32x32)", lambda m: m.resnet18(num_classes=10), (3, 32, 32), 32,
         "conv GEMMs"),
    Case("MLP 784-128-10", lambda m: m.MLP(784, (128,), 10), (784,), 64, "per-op overhead",
         steps=50, warmup=20),
)


def build_model(case: Case, framework: str):
    """`case`'s model in `framework` ("fusegrad" or "torch"), seeded alike."""
    if framework == "fusegrad":
        import fusegrad
        import fusegrad.models

        fusegrad.manual_seed(0)
        return case.build(fusegrad.models)
    import torch

    torch.manual_seed(0)
    twins = {**torch_twin("simple"), **torch_twin("resnet")}
    return case.build(SimpleNamespace(**twins))


def state_arrays(model) -> dict[str, np.ndarray]:
    """A model's parameters and buffers as NumPy arrays (copies)."""
    return {k: np.array(v.numpy(), copy=True) for k, v in model.state_dict().items()}


def load_arrays(model, arrays: dict[str, np.ndarray]) -> None:
    """Give a torch model the parameters and buffers in `arrays`."""
    import torch

    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in arrays.items()})


def inputs(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """The batch both frameworks train on: images (or vectors) and class labels."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((case.batch, *case.input_shape)).astype(np.float32)
    return xs, rng.integers(0, 10, case.batch)


def make_step(lib, model, x, y) -> Callable[[], float]:
    """A closure running one training step of `model` with library `lib` (fusegrad or torch)."""
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()
    model.train()

    def step() -> float:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def make_phases(lib, model, x, y) -> Callable[[], tuple[float, float, float]]:
    """Like `make_step`, but the closure returns the seconds of (zero_grad + forward + loss,
    backward, optimizer step), to show where a ratio comes from."""
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()
    model.train()
    clock = time.perf_counter

    def step() -> tuple[float, float, float]:
        t0 = clock()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        t1 = clock()
        loss.backward()
        t2 = clock()
        opt.step()
        return t1 - t0, t2 - t1, clock() - t2

    return step


def run_queue_ns() -> int | None:
    """Nanoseconds the calling thread has spent runnable but waiting for a CPU (Linux
    schedstat), or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def time_steps(step: Callable, n: int) -> tuple[float, float]:
    """(milliseconds per step, milliseconds this thread waited for a CPU in all) over `n`
    consecutive steps, garbage collector off."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        q0 = run_queue_ns()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        ms = (time.perf_counter() - t0) * 1e3 / n
        q1 = run_queue_ns()
        waited = (q1 - q0) / 1e6 if q0 is not None and q1 is not None else float("nan")
        return ms, waited
    finally:
        if gc_was:
            gc.enable()


def aggregate(samples: list[tuple[float, float]], stat: str, undisturbed: bool,
              steps: int) -> tuple[float, int]:
    """(the figure of a framework's rounds, how many rounds it is taken over): the minimum
    or median ms per step; with `undisturbed`, of the rounds whose stepping thread waited for
    a CPU under 1% of the round (NaN when none did)."""
    if undisturbed:
        samples = [s for s in samples if s[1] <= 0.01 * s[0] * steps]
    agg = min if stat == "min" else statistics.median
    return (agg(s[0] for s in samples) if samples else float("nan")), len(samples)


def worker(framework: str, case_index: int, threads: int, steps: int, warmup: int,
           weights: str, phases: bool = False) -> None:
    """One framework in a process of its own: the fusegrad worker writes its initial weights
    to `weights` (an .npz file), the torch worker reads them; then each reads a command per
    line on stdin ("round" times `steps` steps and prints the ms per step and the ms its
    stepping thread waited for a CPU; with `phases`, the milliseconds of each phase of each
    step, three per step; "quit" ends)."""
    lib = __import__(framework)
    lib.set_num_threads(threads)
    case = CASES[case_index]
    model = build_model(case, framework)
    if framework == "fusegrad":
        np.savez(weights, **state_arrays(model))
    else:
        with np.load(weights) as f:
            load_arrays(model, dict(f))
    xs, ys = inputs(case)
    make = make_phases if phases else make_step
    step = make(lib, model, lib.tensor(xs), lib.tensor(ys))
    for _ in range(warmup):
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        if phases:
            print(" ".join(f"{t * 1e3:.6f}" for t in time_phases(step, steps)), flush=True)
            continue
        ms, waited = time_steps(step, steps)
        print(f"{ms:.6f} {waited:.6f}", flush=True)


def time_phases(step: Callable, n: int) -> list[float]:
    """The seconds of each phase of `n` consecutive steps of a `make_phases` closure (three
    per step, in order), garbage collector off."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        return [t for _ in range(n) for t in step()]
    finally:
        if gc_was:
            gc.enable()


def run_case_separate(case: Case, rounds: int, steps: int, warmup: int, stat: str,
                      threads: int, undisturbed: bool = False, phases: bool = False) -> dict:
    """Time fusegrad and torch on one model, each framework in its own worker process,
    alternating rounds; returns each framework's (ms per step, rounds it is taken over), or
    with `phases` each framework's (forward, backward, step) milliseconds: the minimum (or
    `stat`) of each phase over every step of every round."""
    weights = os.path.join(tempfile.mkdtemp(prefix="train_step_"), "weights.npz")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    procs = {}
    for name in ("fusegrad", "torch"):
        # Started one after the other: warm-up runs alone, like the timed rounds.
        procs[name] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", name,
             "--case-index", str(CASES.index(case)), "--threads", str(threads),
             "--steps", str(steps), "--warmup", str(warmup), "--weights", weights,
             *(["--phases"] if phases else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if procs[name].stdout.readline().strip() != "ready":
            raise RuntimeError(f"{name} worker failed to start")
    samples: dict[str, list] = {k: [] for k in procs}
    order = list(procs)
    try:
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                # The other worker's threads may still be spinning for work after its round
                # (OpenMP's and OpenBLAS's watch for tens of milliseconds): let them settle,
                # so that only one framework computes at a time.
                time.sleep(SETTLE_S)
                procs[name].stdin.write("round\n")
                procs[name].stdin.flush()
                values = [float(v) for v in procs[name].stdout.readline().split()]
                if phases:  # one sample per step: (forward, backward, step)
                    samples[name] += [tuple(values[i:i + 3]) for i in range(0, len(values), 3)]
                else:
                    samples[name].append(tuple(values))
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
        shutil.rmtree(os.path.dirname(weights), ignore_errors=True)
    if phases:
        agg = min if stat == "min" else statistics.median
        return {k: tuple(agg(s[i] for s in v) for i in range(3)) for k, v in samples.items()}
    return {k: aggregate(v, stat, undisturbed, steps) for k, v in samples.items()}


def machine_line() -> str:
    """Python, NumPy and torch versions, NumPy's OpenBLAS kernels (and OPENBLAS_CORETYPE,
    which chooses them), CPU count, OMP_NUM_THREADS and the load average."""
    import torch

    from fusegrad.ops import _blas

    return (f"Python {platform.python_version()}, NumPy {np.__version__}, "
            f"torch {torch.__version__}, OpenBLAS kernels {_blas.core_name()} "
            f"(OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}), "
            f"{os.cpu_count()} CPUs, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
            f"load average {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every case and print the table."""
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    p.add_argument("--markdown", action="store_true", help="GitHub table")
    p.add_argument("--stat", choices=("min", "median"), default="min")
    p.add_argument("--only", default="", help="run the cases whose name contains this")
    p.add_argument("--phases", action="store_true",
                   help="forward / backward / optimizer step split (minimum, or --stat, per "
                   "phase over every step)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 1)),
                   help="intra-op threads of both frameworks")
    p.add_argument("--undisturbed", action="store_true",
                   help="only rounds in which the stepping thread hardly waited for a CPU")
    p.add_argument("--rounds", type=int, default=0, help="rounds per framework (default 7, "
                   "3 with --quick)")
    p.add_argument("--worker", choices=("fusegrad", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--case-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--weights", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.case_index, args.threads, args.steps, args.warmup,
               args.weights, args.phases)
        return 0
    rounds = args.rounds or (3 if args.quick else 7)

    def counts(case: Case) -> tuple[int, int]:  # (steps per round, warm-up steps)
        return (max(2, case.steps // 2), max(1, case.warmup // 2)) if args.quick else \
            (case.steps, case.warmup)

    rows = []
    if args.phases:
        for case in CASES:
            if args.only.lower() not in case.name.lower():
                continue
            res = run_case_separate(case, rounds, *counts(case), args.stat, args.threads,
                                    phases=True)
            fg, th = res["fusegrad"], res["torch"]
            for i, phase in enumerate(("forward", "backward", "step")):
                rows.append([case.name, phase, f"{fg[i]:.2f}", f"{th[i]:.2f}",
                             f"{fg[i] / th[i]:.2f}x"])
            print(f"  {case.name}: done", file=sys.stderr, flush=True)
        print(machine_line())
        print(tabulate(rows, headers=["model", "phase", "fusegrad (ms)", "torch (ms)",
                                      "fusegrad/torch"],
                       tablefmt="github" if args.markdown else "simple",
                       colalign=("left", "left", "right", "right", "right")))
        return 0
    for case in CASES:
        if args.only.lower() not in case.name.lower():
            continue
        res = run_case_separate(case, rounds, *counts(case), args.stat, args.threads,
                                args.undisturbed)
        (fg, fg_n), (th, th_n) = res["fusegrad"], res["torch"]
        digits = 2 if min(fg, th) < 10 else 1  # (a step of a millisecond: hundredths)
        row = [case.name, case.batch, f"{fg:.{digits}f}", f"{th:.{digits}f}",
               f"{fg / th:.2f}x"]
        rows.append(row + [f"{fg_n}/{rounds}, {th_n}/{rounds}"] if args.undisturbed else row)
        print(f"  {case.name}: done", file=sys.stderr, flush=True)
    headers = ["model", "batch", "fusegrad (ms/step)", "torch (ms/step)", "fusegrad/torch"]
    if args.undisturbed:
        headers.append("undisturbed rounds")
    print(machine_line())
    print(tabulate(rows, headers=headers, tablefmt="github" if args.markdown else "simple",
                   disable_numparse=True,
                   colalign=("left", "right", "right", "right", "right", "right")[
                       :len(headers)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
