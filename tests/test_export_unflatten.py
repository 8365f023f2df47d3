"""`export.unflatten` against torch's: the exported program rebuilt as the module hierarchy it
came from (the same submodule names, parameters and buffers, a graph per called submodule
that calls its children), computing what the original module computes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad as fg


def _models(T):
    nn = T.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.lin(x)) + x

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.b1, self.b2 = Block(), Block()
            self.head = nn.Linear(4, 2)
            self.register_buffer("scale", T.ones(2))

        def forward(self, x):
            return self.head(self.b2(self.b1(x))) * self.scale

    class TwoOutputs(nn.Module):
        """A child returning two values, a parent reading a child's weight itself, a
        keyword argument and a tuple result."""

        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(3, 5), nn.Tanh())
            self.norm = nn.LayerNorm(5)
            self.split = Halves()

        def forward(self, x, *, bias):
            h = self.norm(self.enc(x))
            a, b = self.split(h)
            return a + bias, b * self.enc[0].weight.sum()

    class Halves(nn.Module):
        def forward(self, h):
            return h[:, :2] * 2, h[:, 2:] - 1

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4),
                                          nn.ReLU(), nn.MaxPool2d(2))
            self.fc = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.features(x).flatten(1))

    return {
        "stack": (Stack, lambda: ((T.randn(3, 4),), {})),
        "two_outputs": (TwoOutputs, lambda: ((T.randn(2, 3),), {"bias": T.randn(2)})),
        "conv_eval": (ConvNet, lambda: ((T.randn(2, 2, 4, 4),), {})),
    }


def _tree(mod):
    return ([n for n, _ in mod.named_modules()], [n for n, _ in mod.named_parameters()],
            [n for n, _ in mod.named_buffers()], [type(m).__name__ for m in mod.modules()])


@pytest.mark.parametrize("name", ["stack", "two_outputs", "conv_eval"])
def test_unflatten_matches_torch(name):
    results, weights = {}, {}
    for T in (torch, fg):
        T.manual_seed(0)
        cls, make = _models(T)[name]
        model = cls()
        model.eval()
        if T is fg:  # the same weights as torch's model
            model.load_state_dict({k: fg.tensor(v.numpy()) for k, v in weights.items()})
        else:
            weights = model.state_dict()
        rng = np.random.default_rng(1)
        args, kwargs = make()
        args = tuple(T.tensor(rng.standard_normal(tuple(a.shape)).astype("float32"))
                     for a in args)
        kwargs = {k: T.tensor(rng.standard_normal(tuple(v.shape)).astype("float32"))
                  for k, v in kwargs.items()}
        unflat = T.export.unflatten(T.export.export(model, args, kwargs))
        out = unflat(*args, **kwargs)
        expected = model(*args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        for got, want in zip(outs, expected if isinstance(expected, tuple) else (expected,)):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
        called = [n for n, m in unflat.named_modules()
                  if n and getattr(m, "graph", None) is not None]
        results[T] = (_tree(unflat), called)
    assert results[fg] == results[torch]


def test_child_graph_calls_its_children():
    fg.manual_seed(0)
    cls, make = _models(fg)["stack"]
    model = cls()
    args, _ = make()
    unflat = fg.export.unflatten(fg.export.export(model, args))
    calls = [n.target for n in unflat.graph.nodes if n.op == "call_module"]
    assert calls == ["b1", "b2", "head"]
    assert [n.target for n in unflat.b1.graph.nodes if n.op == "call_module"] == ["lin", "act"]
    assert [n.target for n in unflat.b1.lin.graph.nodes if n.op == "get_attr"] == \
        ["weight", "bias"]


def test_module_called_twice_is_refused():
    class Twice(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fg.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(self.lin(x))

    ep = fg.export.export(Twice(), (fg.randn(2, 3),))
    with pytest.raises(NotImplementedError, match="called more than once"):
        fg.export.unflatten(ep)
