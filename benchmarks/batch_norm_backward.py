"""Microseconds per batch-norm backward: fusegrad beside PyTorch, at ResNet-18's shapes.

Each case is one training-mode `BatchNorm2d` layer at a shape ResNet-18 (torchvision layout,
3x32x32 images) normalises: the stem's 64x16x16 and each stage's output. Timed is
`autograd.grad(y, (x, weight, bias), g, retain_graph=True)`, so the forward and the graph are
built once. The two frameworks alternate per round; each figure is the minimum over the
rounds of the mean per call, in process CPU time by default (`--clock wall` for wall time),
so a loaded machine slows neither more than the other.

Run from the repository root: `OMP_NUM_THREADS=1 python benchmarks/batch_norm_backward.py`
(`--batch 8 32`, `--rounds 7`). To compare two trees, run it with each tree's `src` first on
`PYTHONPATH`.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

SHAPES = ((64, 16, 16), (64, 8, 8), (128, 4, 4), (256, 2, 2), (512, 1, 1))


def _case(lib, batch: int, shape: tuple):
    """(run, calls): a function running one backward of a BatchNorm2d layer of `lib`."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((batch,) + shape).astype(np.float32),
                   requires_grad=True)
    g = lib.tensor(rng.standard_normal((batch,) + shape).astype(np.float32))
    bn = lib.nn.BatchNorm2d(shape[0])
    y = bn(x)
    wrt = (x, bn.weight, bn.bias)
    calls = max(5, int(2e6 // x.numel()))

    def run():
        for _ in range(calls):
            lib.autograd.grad(y, wrt, g, retain_graph=True)

    return run, calls


def _time(run, calls: int, clock) -> float:
    start = clock()
    run()
    return (clock() - start) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, nargs="+", default=[8, 32])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = p.parse_args()
    import torch

    import fusegrad

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"fusegrad from {os.path.dirname(fusegrad.__file__)}; {args.clock} time, "
          f"min of {args.rounds} rounds")
    print(f"{'shape':>18} {'fusegrad us':>12} {'torch us':>10} {'ratio':>7}")
    for batch in args.batch:
        for shape in SHAPES:
            cases = {"fusegrad": _case(fusegrad, batch, shape), "torch": _case(torch, batch,
                                                                               shape)}
            best = {k: float("inf") for k in cases}
            for run, _ in cases.values():
                run()  # warm-up
            for r in range(args.rounds):
                order = list(cases) if r % 2 == 0 else list(reversed(cases))
                for k in order:
                    best[k] = min(best[k], _time(*cases[k], clock))
            name = "x".join(map(str, (batch,) + shape))
            print(f"{name:>18} {best['fusegrad']:12.1f} {best['torch']:10.1f} "
                  f"{best['fusegrad'] / best['torch']:6.2f}x")


if __name__ == "__main__":
    main()
