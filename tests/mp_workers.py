"""Functions the multiprocessing tests run in other processes (a module of its own: a
spawned process imports it, and it imports neither torch nor pytest, which would slow each
start). Each takes the library's name, so the same function serves fusegrad and torch."""

from __future__ import annotations

import importlib
import sys


def fails(i: int, lib: str) -> None:
    """Process 1 raises."""
    if i == 1:
        raise ValueError(f"process {i} broke")


def exits(i: int, lib: str) -> None:
    """Process 1 exits with code 3."""
    sys.exit(3 if i == 1 else 0)


def train(i: int, lib: str, model, xs, steps: int) -> None:
    """SGD steps on the shared `model` with this process's slice of `xs`."""
    torch = importlib.import_module(lib)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = xs[i]
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        loss.backward()
        opt.step()


def add_rank(i: int, lib: str, t, q) -> None:
    """Write into the shared tensor `t` and report what this process saw."""
    t[i] += i + 1
    q.put((i, bool(t.is_shared())))


def double(lib: str, q_in, q_out) -> None:
    """Double the tensor received, in place, and say whether it arrived shared."""
    t = q_in.get()
    t.mul_(2)
    q_out.put((bool(t.is_shared()), t.tolist()))
