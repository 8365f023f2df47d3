"""`torch.fx.passes.split_module.split_module` against PyTorch's: the same generated code for
the top module and each `submod_<n>` (inputs in first-read order, outputs in first-use order,
`getitem` unpacking, attributes read at the top), and the same outputs."""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _two_heads(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(4, 4)
            self.b = lib.nn.Linear(4, 4)
            self.p = lib.nn.Parameter(lib.ones(4))

        def forward(self, x, y):
            z = self.a(x) + y
            w = z.relu() * self.p
            return self.b(w) + z, w.sum()

    return M(), lambda n: 0 if n.name in ("a", "add", "relu") else 1


def _stack(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = lib.nn.ModuleList([lib.nn.Linear(4, 4) for _ in range(4)])

        def forward(self, x, y):
            for layer in self.layers:
                x = layer(x).tanh()
            return x * y

    def part(n):
        return 1 if n.name.startswith(("layers_2", "layers_3", "tanh_2", "tanh_3", "mul")) \
            else 0

    return M(), part


def _late_first(lib):
    class M(lib.nn.Module):
        def forward(self, x, y):
            a = x + 1
            b = y * 2
            return a - b

    return M(), lambda n: {"add": 2, "mul": 0, "sub": 1}[n.name]


@pytest.mark.parametrize("make", [_two_heads, _stack, _late_first],
                         ids=["two_heads", "stack", "late_first"])
def test_split_module_matches_pytorch(make):
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    codes, outs = {}, {}
    for lib in (torch, fusegrad):
        lib.manual_seed(0)
        m, part = make(lib)
        gm = lib.fx.symbolic_trace(m)
        split = importlib.import_module(f"{lib.__name__}.fx.passes.split_module")
        qualnames = {}
        out = split.split_module(gm, m, part, qualname_map=qualnames)
        codes[lib] = ([out.code.replace(lib.__name__ + ".", "torch.")]
                      + [(n, c.code) for n, c in out.named_children()], qualnames)
        got = out(lib.tensor(x), lib.tensor(x * 2))
        want = m(lib.tensor(x), lib.tensor(x * 2))
        outs[lib] = [t.detach().numpy() for t in (got if isinstance(got, tuple) else (got,))]
        for a, b in zip(outs[lib], [t.detach().numpy() for t in (
                want if isinstance(want, tuple) else (want,))]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert codes[fusegrad] == codes[torch]
    for a, b in zip(outs[fusegrad], outs[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("parts", [
    {"add": 5, "mul": 3, "sub": 4, "sub_1": 7, "add_1": 7},
    {"add": 0, "mul": 2, "sub": 1, "sub_1": 9, "add_1": 9},
    {"add": "b", "mul": "a", "sub": "c", "sub_1": "d", "add_1": "d"}])
@pytest.mark.parametrize("keep_original_order", [False, True])
def test_partitions_run_in_pytorchs_order(parts, keep_original_order):
    codes = []
    for lib in (torch, fusegrad):
        class M(lib.nn.Module):
            def forward(self, x, y):
                a = x + 1
                b = y * 2
                c = x - 3
                return a - b + c

        split = importlib.import_module(f"{lib.__name__}.fx.passes.split_module")
        out = split.split_module(lib.fx.symbolic_trace(M()), M(), lambda n: parts[n.name],
                                 keep_original_order=keep_original_order)
        codes.append(out.code)
        x = lib.arange(3.0)
        assert lib.equal(out(x, x + 1), M()(x, x + 1))
    assert codes[0] == codes[1]
