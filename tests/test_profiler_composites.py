"""Composite functions in the profiler: `aten::linear` around the `aten::t` and `aten::addmm`
its body runs, as PyTorch's profiler shows them. For each call the event tree is compared with
PyTorch's, projected onto the events fusegrad records (PyTorch's allocation events, such as
`aten::empty`, and its deeper kernel layers have no counterpart here)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.profiler import _composites  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
LW = RNG.standard_normal((5, 192)).astype(np.float32)
LB = RNG.standard_normal(5).astype(np.float32)

CASES = {
    "conv2d": lambda lib, x: lib.nn.functional.conv2d(x, lib.tensor(W), padding=1),
    "linear": lambda lib, x: lib.nn.functional.linear(x.flatten(1), lib.tensor(LW),
                                                      lib.tensor(LB)),
    "linear_3d": lambda lib, x: lib.nn.functional.linear(x.flatten(2), lib.tensor(LW[:, :64]),
                                                         lib.tensor(LB)),
    "matmul": lambda lib, x: lib.matmul(x, x),
    "matmul_operator": lambda lib, x: x[0, 0] @ x[0, 1],
    "matmul_operator_batched": lambda lib, x: x @ x,
    "batch_norm": lambda lib, x: lib.nn.functional.batch_norm(x, lib.zeros(3), lib.ones(3),
                                                              training=True),
    "layer_norm": lambda lib, x: lib.nn.functional.layer_norm(x, (8,)),
    "softmax": lambda lib, x: lib.nn.functional.softmax(x, -1),
    "log_softmax_method": lambda lib, x: x.log_softmax(-1),
    "cross_entropy": lambda lib, x: lib.nn.functional.cross_entropy(
        x.flatten(2).sum(-1), lib.tensor([0, 2])),
    "max_pool2d": lambda lib, x: lib.nn.functional.max_pool2d(x, 2),
    "reshape": lambda lib, x: x.reshape(2, -1),
    "to": lambda lib, x: x.to(lib.float64),
    "mlp_module": lambda lib, x: lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(192, 4),
                                                   lib.nn.ReLU())(x),
}


def _tree(lib, case) -> list[tuple[int, str]]:
    x = lib.tensor(X, requires_grad=True)
    with lib.profiler.profile() as prof:
        CASES[case](lib, x)
    out = []

    def walk(event, depth):
        out.append((depth, event.name))
        for child in event.cpu_children:
            walk(child, depth + 1)

    for event in prof.events():
        if event.cpu_parent is None:
            walk(event, 0)
    return out


def _project(tree: list[tuple[int, str]], keep: set) -> list[tuple[int, str]]:
    """The events named in `keep`, each at the depth of its kept ancestors."""
    out, stack = [], []  # stack: depths of the kept ancestors of the current event
    for depth, name in tree:
        while stack and stack[-1] >= depth:
            stack.pop()
        if name in keep:
            out.append((len(stack), name))
            stack.append(depth)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_composite_events_nest_as_pytorchs(case):
    ours = _tree(fusegrad, case)
    theirs = _project(_tree(torch, case), {name for _, name in ours})
    assert ours == theirs
    assert any(name in {n for names in fusegrad.ops.surface.PROFILED_AS.values()
                        for spelled in names.values() for n in spelled}
               for _, name in ours)


def test_swaps_are_undone_and_other_threads_record_nothing():
    import threading

    linear = fusegrad.nn.functional.linear
    inner = linear.__globals__["fn"]
    seen = []

    def other():
        a = fusegrad.ones(2, 3)
        seen.append(fusegrad.nn.functional.linear(a, fusegrad.ones(4, 3)).sum().item())

    with fusegrad.profiler.profile() as prof:
        assert _composites.swapped() > 0 and linear.__globals__["fn"] is not inner
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [24.0]
    assert not any(e.name == "aten::linear" for e in prof.events())
    assert _composites.swapped() == 0 and linear.__globals__["fn"] is inner
    assert fusegrad.nn.functional.linear is linear
