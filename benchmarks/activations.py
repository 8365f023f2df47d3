"""Activations and pointwise functions on a transformer-sized batch: fusegrad beside PyTorch.

Each function runs on a 64 x 3072 float32 tensor that requires grad (an MLP block's hidden
layer at batch 64), timed as a forward alone and as forward, `.sum().backward()` and clearing
the gradient. Each framework runs in a fresh process of its own with `OMP_NUM_THREADS=N` and
`set_num_threads(N)` (two frameworks' thread pools in one process slow each other), the two
processes alternating for `--rounds` rounds; each figure is the minimum over its rounds of the
mean of a few calls, and the table gives fusegrad's time over PyTorch's.

Run from the repository root: `python benchmarks/activations.py` (`--threads 2`,
`--markdown` for a table, `--only gelu,silu` for some rows).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPE = (64, 3072)

# name -> the call, as source over the framework `T` and its `F = T.nn.functional`.
CASES = {
    "gelu": "F.gelu(x)",
    "gelu (tanh)": "F.gelu(x, approximate='tanh')",
    "silu": "F.silu(x)",
    "sigmoid": "T.sigmoid(x)",
    "tanh": "T.tanh(x)",
    "relu": "F.relu(x)",
    "leaky_relu": "F.leaky_relu(x, 0.2)",
    "elu": "F.elu(x)",
    "softplus": "F.softplus(x)",
    "mish": "F.mish(x)",
    "hardswish": "F.hardswish(x)",
    "softmax": "F.softmax(x, -1)",
    "log_softmax": "F.log_softmax(x, -1)",
    "layer_norm": "F.layer_norm(x, (3072,))",
    "exp": "T.exp(x)",
    "erf": "T.erf(x)",
    "x ** 2": "x ** 2",
}


def _worker(framework: str, threads: int, names: list[str], calls: int) -> dict:
    """Time every case in this process; returns {name: [forward_s, step_s]}."""
    import numpy as np

    if framework == "torch":
        import torch as T
    else:
        sys.path.insert(0, str(ROOT / "src"))
        import fusegrad as T
    T.set_num_threads(threads)
    F = T.nn.functional  # noqa: F841  (read by the cases' source)
    data = np.random.default_rng(0).uniform(-3, 3, SHAPE).astype(np.float32)
    out = {}
    for name in names:
        x = T.tensor(data).requires_grad_()
        forward = eval("lambda: " + CASES[name], {"T": T, "F": F, "x": x})

        def step(forward=forward, x=x):
            forward().sum().backward()
            x.grad = None

        step()
        out[name] = [min(timeit.repeat(forward, number=calls, repeat=3)) / calls,
                     min(timeit.repeat(step, number=calls, repeat=3)) / calls]
    return out


def _run(framework: str, threads: int, names: list[str], calls: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
            f"import activations; print(json.dumps(activations._worker("
            f"{framework!r}, {threads}, {names!r}, {calls})))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> None:
    """Parse the arguments, time both frameworks in turns and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {list(CASES)}")
    best: dict[str, dict[str, list[float]]] = {"fusegrad": {}, "torch": {}}
    for r in range(args.rounds):
        order = ("fusegrad", "torch") if r % 2 == 0 else ("torch", "fusegrad")
        for framework in order:
            for name, times in _run(framework, args.threads, names, args.calls).items():
                old = best[framework].get(name)
                best[framework][name] = times if old is None else \
                    [min(a, b) for a, b in zip(old, times)]
    rows = []
    for name in names:
        (f_fw, f_st), (t_fw, t_st) = best["fusegrad"][name], best["torch"][name]
        rows.append((name, f_fw * 1e6, t_fw * 1e6, f_fw / t_fw, f_st * 1e6, t_st * 1e6,
                     f_st / t_st))
    title = (f"{SHAPE[0]} x {SHAPE[1]} float32, {args.threads} thread(s), minimum of "
             f"{args.rounds} rounds, microseconds")
    if args.markdown:
        print(f"{title}\n\n| function | forward | torch | ratio | forward + backward | torch "
              "| ratio |\n|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]:.0f} | {r[2]:.0f} | {r[3]:.2f}x | {r[4]:.0f} | {r[5]:.0f} "
                  f"| {r[6]:.2f}x |")
    else:
        print(title)
        for r in rows:
            print(f"{r[0]:<14} {r[1]:8.0f} {r[2]:8.0f} {r[3]:6.2f}x   {r[4]:8.0f} {r[5]:8.0f} "
                  f"{r[6]:6.2f}x")


if __name__ == "__main__":
    main()
