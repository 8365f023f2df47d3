"""What the `__torch_function__` protocol costs plain tensors, per call.

Each statement is timed with the protocol's wrappers in place and with the functions they
wrap put back on Tensor (and `fusegrad.add`), alternating between the two many times in one
process, so machine noise hits both alike; each figure is the minimum over the rounds. The
difference is the protocol's cost on the plain-tensor path.

Run from the repository root: `python benchmarks/torch_function_overhead.py` (about a
minute; `--rounds 50` for a quicker, noisier run).
"""

from __future__ import annotations

import argparse
import gc
import os
import timeit

STATEMENTS = ("a + b", "a * 1.5", "a.exp()", "a.sum()", "a @ b", "a.transpose(0, 1)",
              "a.view(k)", "a.relu()", "a[0]", "a.sum(dim=0)", "a.add(b)", "fg.add(a, b)",
              "a.shape")


def main() -> None:
    """Print, per statement, the time with and without the protocol and the difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="alternations per statement")
    parser.add_argument("--number", type=int, default=200, help="calls per timed loop")
    options = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import fusegrad as fg

    tensor = fg.Tensor
    wrapped = {n: v for n, v in vars(tensor).items() if hasattr(v, "_torch_function_info")}
    unwrapped = {n: v._torch_function_info[1] for n, v in wrapped.items()}
    add_wrapped = fg.add
    add_unwrapped = add_wrapped._torch_function_info[1]

    def install(table: dict, add) -> None:
        for name, value in table.items():
            setattr(tensor, name, value)
        fg.add = add

    names = {"fg": fg, "a": fg.randn(4, 4), "b": fg.randn(4, 4), "k": 16}
    gc.disable()
    try:
        print(f"{'statement':20s} {'without ns':>11s} {'with ns':>9s} {'cost ns':>8s}")
        for stmt in STATEMENTS:
            timer = timeit.Timer(stmt, globals=names)
            without, with_ = [], []
            for _ in range(options.rounds):
                install(unwrapped, add_unwrapped)
                without.append(timer.timeit(options.number) / options.number * 1e9)
                install(wrapped, add_wrapped)
                with_.append(timer.timeit(options.number) / options.number * 1e9)
            print(f"{stmt:20s} {min(without):11.0f} {min(with_):9.0f} "
                  f"{min(with_) - min(without):8.0f}", flush=True)
    finally:
        install(wrapped, add_wrapped)
        gc.enable()


if __name__ == "__main__":
    main()
