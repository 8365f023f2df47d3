"""fusegrad.jit.trace records functions and modules (as ScriptFunctions and traced modules)
that agree with them on new inputs and print their code."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.nn as fnn
from fusegrad.models import resnet as fresnet


def close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_trace_function():
    def f(x, y):
        return (x * 2 + y).relu().sum(dim=1)

    traced = fusegrad.jit.trace(f, (fusegrad.randn(3, 4), fusegrad.randn(3, 4)))
    assert type(traced) is fusegrad.jit.ScriptFunction  # as PyTorch's trace of a function
    assert traced.code.startswith("def f(x: Tensor,")
    assert [v.name for v in traced.graph.params] == ["x", "y"]
    x, y = fusegrad.randn(5, 4), fusegrad.randn(5, 4)
    close(traced(x, y), f(x, y))


def test_trace_module_single_input_and_grads():
    torch_like = fnn.Sequential(fnn.Linear(4, 8), fnn.ReLU(), fnn.Linear(8, 2))
    traced = fusegrad.jit.trace(torch_like, fusegrad.randn(2, 4))
    assert isinstance(traced.code, str) and "def forward" in traced.code
    x = fusegrad.randn(6, 4)
    close(traced(x), torch_like(x))
    traced(x).sum().backward()  # parameters are shared with the original module
    assert torch_like[0].weight.grad is not None


def test_trace_resnet18_eval():
    model = fresnet.resnet18(num_classes=3).eval()
    traced = fusegrad.jit.trace(model, (fusegrad.randn(1, 3, 32, 32),))
    x = fusegrad.randn(2, 3, 32, 32)
    with fusegrad.no_grad():
        close(traced(x), model(x))


def test_trace_falls_back_to_a_run_on_the_example_inputs():
    class ShapeBranch(fnn.Module):
        """Control flow on a shape: symbolic tracing fails; a traced run fixes the branch."""

        def __init__(self):
            super().__init__()
            self.lin = fnn.Linear(4, 4)

        def forward(self, x):
            if x.shape[0] > 1:
                return self.lin(x) * 2, x.sum()
            return self.lin(x), x.sum()

    m = ShapeBranch()
    traced = fusegrad.jit.trace(m, fusegrad.randn(3, 4))
    assert "def forward" in traced.code
    x = fusegrad.randn(5, 4)
    for got, want in zip(traced(x), m(x)):
        close(got, want)


def test_trace_records_the_branch_taken_with_a_tracer_warning():
    import torch

    def f(x):
        if x.sum() > 0:
            return x * 2
        return x

    with pytest.warns(fusegrad.jit.TracerWarning) as got:
        traced = fusegrad.jit.trace(f, fusegrad.ones(3))
    with pytest.warns(torch.jit.TracerWarning) as want:
        torch.jit.trace(f, torch.ones(3))
    mine = [w for w in got if w.category is fusegrad.jit.TracerWarning]
    theirs = [w for w in want if w.category is torch.jit.TracerWarning]
    assert str(mine[0].message) == str(theirs[0].message)
    assert (mine[0].filename, mine[0].lineno) == (theirs[0].filename, theirs[0].lineno)
    # the branch taken on the example is kept, whatever the new input
    close(traced(-fusegrad.ones(3)), -fusegrad.ones(3) * 2)


def test_script_still_there():
    f = fusegrad.jit.script(lambda x: x + 1)
    close(f(fusegrad.ones(2)), fusegrad.ones(2) * 2)


def test_trace_with_example_kwarg_inputs():
    def f(x, y):
        return x * 2 + y

    def branchy(x, scale):
        if x.shape[0] > 1:  # symbolic tracing fails; the run on the example is captured
            return x * scale
        return x

    class AddOptional(fnn.Module):
        def forward(self, a, b=None):
            return a if b is None else a + b

    x, y = fusegrad.randn(3), fusegrad.randn(3)
    traced = fusegrad.jit.trace(f, example_kwarg_inputs={"y": fusegrad.ones(3),
                                                          "x": fusegrad.ones(3)})
    close(traced(x, y), f(x, y))
    close(traced(y=y, x=x), f(x, y))
    traced = fusegrad.jit.trace(branchy, example_kwarg_inputs={"scale": fusegrad.ones(4),
                                                                "x": fusegrad.ones(4)})
    close(traced(scale=y, x=x), branchy(x, y))
    traced = fusegrad.jit.trace(AddOptional(), example_kwarg_inputs={"a": x, "b": y})
    close(traced(a=y, b=x), x + y)


def test_trace_argument_errors():
    with pytest.raises(TypeError, match="give example_inputs"):
        fusegrad.jit.trace(lambda x: x)
    with pytest.raises(TypeError, match="must be a dict"):
        fusegrad.jit.trace(lambda x: x, example_kwarg_inputs=[fusegrad.ones(1)])
    with pytest.raises(TypeError, match="do not fit"):
        fusegrad.jit.trace(lambda x: x, example_kwarg_inputs={"z": fusegrad.ones(1)})


def test_trace_module_with_a_value_branch_shares_parameters_and_saves(tmp_path):
    class Branchy(fnn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fnn.Linear(3, 3)

        def forward(self, x):
            if x.sum() > 0:
                return self.lin(x).relu()
            return x

    m = Branchy()
    with pytest.warns(fusegrad.jit.TracerWarning):
        traced = fusegrad.jit.trace(m, fusegrad.ones(2, 3))
    x = fusegrad.randn(4, 3)
    close(traced(x), m.lin(x).relu())  # the branch the example took, on any input
    traced(x).sum().backward()
    assert m.lin.weight.grad is not None  # through the module's own parameters
    traced.save(tmp_path / "t.pt")
    loaded = fusegrad.jit.load(tmp_path / "t.pt")
    close(loaded(x), m.lin(x).relu())
    assert sorted(k for k, _ in loaded.named_parameters()) == ["lin.bias", "lin.weight"]
