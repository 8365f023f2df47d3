"""Dynamic shapes against torch.compile: the same programs, called with the same sequence of
input sizes, compile as many graphs under `dynamic=None` (automatic dynamic), `True` and
`False`, and the symbolic graph names its size inputs as Dynamo does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch._dynamo

import fusegrad


def branch(t, x):
    if x.shape[0] > 4:
        return x * 2
    return x - 1


def eqbranch(t, x):
    if x.size(0) == 3:
        return x * 2
    return x - 1


def reshape(t, x):
    n = x.shape[0]
    return x.reshape(-1), x.view(n, -1, 2).sum(2), x.reshape(n * 2, -1)


def two(t, x, y):
    return (x + y).sum(0) * x.shape[1]


def arith(t, x):
    return x.new_zeros(x.shape[0] // 2 + 1) + x.shape[0], t.ones(x.size(0), 2)


def after_break(t, x):
    y = x * 2
    n = x.shape[0]
    print(end="")  # a graph break: n is an integer input of the second graph
    return y.view(n, -1).sum(1) + n


def small_sizes(t, x):
    return x.sum(0) + x.shape[0]


def square(t, x):
    return t.nn.functional.max_pool2d(x, 2).sum((2, 3))


def slices(t, x):
    half = x[: x.shape[0] // 2] * 2
    return (half.sum(0), x[t.arange(x.shape[0] - 1)], t.zeros(x.shape) + x,
            x.unsqueeze(0).repeat(x.shape[0], 1, 1), x.new_ones(x.size()) * x)


def layers(t, x):
    f = t.nn.functional
    y = f.layer_norm(x, (4,)) @ f.softmax(x, -1).t()
    return f.cross_entropy(y, t.arange(x.shape[0]) % 2), f.pad(x, (1, 1)).mean()


def sizes_as_tensor(t, x):
    return x * 2, t.tensor(x.shape), t.tensor([x.shape[0], 3]) + 1


PROGRAMS = [
    (sizes_as_tensor, [[(b, 4)] for b in (2, 3, 5, 8)]),
    (slices, [[(b, 4)] for b in (2, 3, 5, 8)]),
    (layers, [[(b, 4)] for b in (2, 3, 5, 8)]),
    (branch, [[(b, 4)] for b in (2, 3, 5, 7, 6, 4)]),
    (eqbranch, [[(b, 4)] for b in (2, 3, 5, 7)]),
    (reshape, [[(b, 4)] for b in (2, 3, 5)]),
    (two, [[(b, b + 2), (b, b + 2)] for b in (2, 3, 5)]),
    (arith, [[(b,)] for b in (2, 3, 5, 8)]),
    (after_break, [[(b, 4)] for b in (2, 3, 5, 6)]),
    (small_sizes, [[(b, 3)] for b in (2, 3, 1, 0, 4, 1)]),
    (square, [[(2, 3, s, s)] for s in (8, 12, 16)] + [[(2, 3, 16, 20)], [(2, 3, 9, 11)]]),
]


def _count(lib, fn, calls, dynamic) -> int:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    lib._dynamo.reset()
    compiled = lib.compile(lambda *a: fn(lib, *a), backend=backend, dynamic=dynamic)
    rng = np.random.default_rng(0)
    for shapes in calls:
        args = [lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        out, ref = compiled(*args), fn(lib, *args)
        for a, b in zip(out if isinstance(out, tuple) else (out,),
                        ref if isinstance(ref, tuple) else (ref,)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    return len(graphs)


@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("fn,calls", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_graph_counts_match_torch(fn, calls, dynamic):
    assert _count(fusegrad, fn, calls, dynamic) == _count(torch, fn, calls, dynamic)


def test_symbol_names_match_torch():
    def f(lib, x, w):
        return (lib.relu(x @ w) + 1).view(x.shape[0], -1).sum(1)

    names = {}
    for lib in (torch, fusegrad):
        graphs = []
        lib._dynamo.reset()
        compiled = lib.compile(lambda x, w, lib=lib: f(lib, x, w),
                               backend=lambda gm, ex, g=graphs: (g.append(gm), gm.forward)[1])
        w = lib.randn(4, 6)
        for b in (2, 3, 5):
            compiled(lib.randn(b, 4), w)
        assert len(graphs) == 2
        names[lib] = [n.name for n in graphs[1].graph.nodes if n.op == "placeholder"]
    assert names[fusegrad][0] == names[torch][0] == "s77"
    assert "view(s77, -1)" in graphs[1].code


def pointwise(t, x):
    return (x * 2 + x.sum(0)).relu(), x.stride()


def conv(t, x):
    w = t.ones(3, x.shape[1], 3, 3) / 9
    return t.nn.functional.conv2d(x, w, padding=1).relu().mean((2, 3)), x.stride()


def contiguity_branch(t, x):
    if x.is_contiguous():
        return x + 1
    return x.contiguous().view(-1) * 3


def found(t, x):
    idx = (x > 0).nonzero()  # a graph break; its column-major result enters the second graph
    return idx.float().mean(0) * x.shape[0] + idx.shape[0]


LAYOUTS = {
    "transposed": lambda t, x: x.t(),
    "channels_last": lambda t, x: x.contiguous(memory_format=t.channels_last),
    "permuted": lambda t, x: x.permute(2, 0, 1),
    "contiguous": lambda t, x: x,
}
LAYOUT_PROGRAMS = [
    (pointwise, "transposed", [[(b, 5)] for b in (3, 4, 6, 9)]),
    (conv, "channels_last", [[(b, 2, 6, 6)] for b in (2, 3, 4, 5)]),
    (conv, "channels_last", [[(2, 2, s, s)] for s in (4, 6, 8, 9)]),
    (reshape, "permuted", [[(4, b, 2)] for b in (2, 3, 5, 7)]),
    (contiguity_branch, "transposed", [[(b, 3)] for b in (2, 3, 5, 7)]),
    (found, "contiguous", [[(b, 4)] for b in range(3, 14)]),
]


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("fn,layout,calls", LAYOUT_PROGRAMS,
                         ids=[f"{p[0].__name__}-{p[1]}-{i}" for i, p in
                              enumerate(LAYOUT_PROGRAMS)])
def test_graph_counts_for_other_layouts_match_torch(fn, layout, calls, dynamic):
    # Inputs laid out densely in another order of their dims get symbolic sizes as torch's.
    def program(t, x):
        return fn(t, x)

    counts = []
    for lib in (fusegrad, torch):
        graphs = []
        lib._dynamo.reset()
        compiled = lib.compile(lambda x, lib=lib: program(lib, x), dynamic=dynamic,
                               backend=lambda gm, ex, g=graphs: (g.append(gm), gm.forward)[1])
        rng = np.random.default_rng(0)
        for (shape,) in calls:
            x = LAYOUTS[layout](lib, lib.tensor(rng.standard_normal(shape).astype(np.float32)))
            out, ref = compiled(x), program(lib, x)
            for a, b in zip(out if isinstance(out, tuple) else (out,),
                            ref if isinstance(ref, tuple) else (ref,)):
                if isinstance(a, tuple):  # strides the graph read
                    assert a == b
                else:
                    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        counts.append(len(graphs))
    assert counts[0] == counts[1]
