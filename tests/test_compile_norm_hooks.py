"""Layers whose weight a forward pre-hook object computes (`nn.utils.spectral_norm`,
`nn.utils.weight_norm`, the hook forms) compile into one graph with no break, as under
torch.compile (2.13, backend="eager"): the hook's `__call__` is followed like a user's
callable object, and assigning the computed weight to the layer does not make the weight it
replaces an input of the graph (`spectral_norm` leaves the parameter's own memory there
until the first call, an alias of `<name>_orig` that would make the hook's in-place power
iteration a break).

Each program trains a few steps; compiled fusegrad must give eager fusegrad's values, eager
fusegrad torch's values, and both frameworks the same counts of graphs and breaks."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from program_support import compare, maybe_compile, observe_compiled  # noqa: E402

import fusegrad as fg  # noqa: E402

try:
    import torch
except ImportError:  # (other Pythons: fusegrad against its own eager runs and torch's counts)
    torch = None


def _train(T, compiled, model, x, steps: int = 3):
    """`steps` SGD steps of `model` on `x`: the losses, the hook's buffers and the final
    parameters (the weight the hook computed included)."""
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = maybe_compile(T, compiled)(model)
    losses = []
    for _ in range(steps):
        loss = step(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    return {"losses": losses, "buffers": dict(model.named_buffers()),
            "params": dict(model.named_parameters())}


def spectral_linear(T, compiled):
    nn = T.nn
    T.manual_seed(0)
    model = nn.Sequential(nn.utils.spectral_norm(nn.Linear(3, 8)), nn.LeakyReLU(0.2),
                          nn.utils.spectral_norm(nn.Linear(8, 1), n_power_iterations=2))
    return _train(T, compiled, model, T.randn(5, 3))


def spectral_conv(T, compiled):
    nn = T.nn
    T.manual_seed(1)
    model = nn.Sequential(nn.utils.spectral_norm(nn.Conv2d(2, 3, 3)), nn.ReLU(),
                          nn.Flatten(), nn.Linear(12, 2))
    return _train(T, compiled, model, T.randn(2, 2, 4, 4))


def spectral_eval(T, compiled):
    """In eval mode the hook skips the power iteration (no in-place op at all)."""
    nn = T.nn
    T.manual_seed(2)
    model = nn.utils.spectral_norm(nn.Linear(4, 3), dim=1)
    model.eval()
    x = T.randn(2, 4)
    step = maybe_compile(T, compiled)(model)
    return [step(x) for _ in range(2)]


def weight_norm_layers(T, compiled):
    nn = T.nn
    T.manual_seed(3)
    model = nn.Sequential(nn.utils.weight_norm(nn.Linear(3, 4)), nn.Tanh(),
                          nn.utils.weight_norm(nn.Linear(4, 2), dim=None))
    return _train(T, compiled, model, T.randn(5, 3))


def weight_norm_conv(T, compiled):
    nn = T.nn
    T.manual_seed(4)
    model = nn.Sequential(nn.utils.weight_norm(nn.Conv1d(2, 3, 3), dim=1), nn.Flatten())
    return _train(T, compiled, model, T.randn(2, 2, 5))


PROGRAMS = [spectral_linear, spectral_conv, spectral_eval, weight_norm_layers, weight_norm_conv]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_one_graph_as_torch(prog):
    want, got = observe_compiled(fg, prog, False), observe_compiled(fg, prog, True)
    compare(want[0], got[0], prog.__name__, 1e-5, 1e-6)
    assert got[2] == (1, 0), prog.__name__
    if torch is not None:
        compare(observe_compiled(torch, prog, False)[0], want[0], prog.__name__, 1e-4, 1e-5)
        assert observe_compiled(torch, prog, True)[2] == (1, 0), prog.__name__


def test_assigned_attribute_not_read_is_no_input():
    """Assigning a tensor attribute over one the graph never read adds no input (the old
    value aliases a parameter here, which would otherwise refuse the in-place op)."""

    class Layer(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = fg.nn.Parameter(fg.ones(3))
            self.register_buffer("count", fg.zeros(()))
            self.shown = self.w.data  # (an alias of the parameter, as spectral_norm leaves)

        def forward(self, x):
            self.count.add_(1)
            self.shown = self.w * 2
            return x * self.shown

    def run(compiled):
        layer = Layer()
        f = fg.compile(layer, backend="eager") if compiled else layer
        return [f(fg.ones(3)) for _ in range(2)], layer.count, layer.shown, layer.w

    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    got, want = run(True), run(False)
    assert (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())) == (1, 0)
    for a, b in zip(want[0], got[0]):
        assert a.tolist() == b.tolist()
    assert got[1].item() == want[1].item() == 2
    assert got[2].tolist() == want[2].tolist() and got[3].tolist() == want[3].tolist()
