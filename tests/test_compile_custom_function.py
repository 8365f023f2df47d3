"""`MyFunction.apply(...)` of a user `autograd.Function` under `fusegrad.compile`.

A Function whose forward and backward have no effect outside themselves is one node of the
graph (PyTorch's graph counts: one graph, no break), and its values and gradients - through
its own backward - equal eager's on every backend. A Function with an effect outside itself
(an append, a write into a buffer, a print, a backward counting its calls), one whose forward
needs tensor values, or one returning a tensor it did not make, runs for real at a break:
its effects happen as often as in eager mode. Oracle: eager fusegrad on the same inputs
(no torch here: the 3.12/3.13 runs use this file).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "aot_eager", "inductor"]
LOG: list = []
BUFFER = fg.zeros(4)
SCALE = fg.ones(4)


class Exp(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


class GradReverse(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.lam * g, None


class StraightThrough(fg.autograd.Function):
    """A backward that is not the forward's derivative (rounding's gradient is zero)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.round()

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * (x.abs() < 1.5)


class TwoOutputs(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y, x + y

    @staticmethod
    def backward(ctx, ga, gb):
        x, y = ctx.saved_tensors
        return ga * y + gb, ga * x + gb


class NeedsInputGrad(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return (g * 2 if ctx.needs_input_grad[0] else None,
                g * 3 if ctx.needs_input_grad[1] else None)


class SetupContext(fg.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return (g * ctx.k * 2).reshape(ctx.shape), None


class OnceDifferentiable(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    @fg.autograd.function.once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()


class Noisy(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        noise = fg.rand_like(x)
        ctx.save_for_backward(noise)
        return x + noise

    @staticmethod
    def backward(ctx, g):
        noise, = ctx.saved_tensors
        return g * noise


class ReadsGlobal(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SCALE

    @staticmethod
    def backward(ctx, g):
        return g * SCALE * 2


class Nested(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Exp.apply(x) * 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x.exp()


class AppendsInForward(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        LOG.append("forward")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class CountsBackward(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        LOG.append("backward")
        return g * 2


class WritesBuffer(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        BUFFER.add_(1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class WritesSaved(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        x.mul_(0)
        return g * 2


class DataDependent(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.positive = bool(x.sum() > 0)
        return x * 2 if ctx.positive else x * 3

    @staticmethod
    def backward(ctx, g):
        return g * (2 if ctx.positive else 3)


class ReturnsInput(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


class NumbersAmongOutputs(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k, "tag", x.sin(), k + 1

    @staticmethod
    def backward(ctx, ga, _, gb, __):
        return ga * ctx.k + gb * 0.5, None


def _numbers_among_outputs(x):
    a, tag, b, n = NumbersAmongOutputs.apply(x, 3.0)
    assert tag == "tag"
    return (a + b).sum() * n


def _vector(i: int):
    rng = np.random.default_rng(i)
    return fg.tensor(rng.standard_normal(4).astype("float32") + (1 if i % 2 else -1),
                     requires_grad=True)


PURE = {
    "exp": lambda x: (Exp.apply(x * 2) + 1).sum(),
    "grad_reverse": lambda x: (GradReverse.apply(x * 2, 0.5) ** 2).sum(),
    "straight_through": lambda x: (StraightThrough.apply(x * 1.5) * x).sum(),
    "two_outputs": lambda x: (lambda a, b: (a * b).sum())(*TwoOutputs.apply(x, x * 2)),
    "needs_input_grad": lambda x: NeedsInputGrad.apply(x, x.detach() + 1).sum(),
    "setup_context": lambda x: SetupContext.apply(x.reshape(2, 2), 1.5).sum(),
    "once_differentiable": lambda x: OnceDifferentiable.apply(x).sum(),
    "reads_global": lambda x: ReadsGlobal.apply(x).sum(),
    "nested": lambda x: Nested.apply(x).sum(),
    "numbers_among_outputs": _numbers_among_outputs,
}


def _compare(fn, backend: str, calls: int = 3) -> None:
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    for i in range(calls):
        x_eager, x_compiled = _vector(i), _vector(i)
        LOG.clear()
        expected = fn(x_eager)
        expected.backward()
        eager_log = list(LOG)
        LOG.clear()
        got = compiled(x_compiled)
        got.backward()
        assert LOG == eager_log
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x_compiled.grad.numpy(), x_eager.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PURE))
def test_pure_function_is_one_graph_with_its_own_backward(name, backend):
    _compare(PURE[name], backend)
    fg._dynamo.reset()
    explained = fg._dynamo.explain(PURE[name])(_vector(0))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_forward_draws_as_eager(backend):
    def fn(x):
        return (Noisy.apply(x) * fg.rand_like(x)).sum()

    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    for seed in (0, 1):
        x1, x2 = _vector(seed), _vector(seed)
        fg.manual_seed(seed)
        expected = fn(x1)
        expected.backward()
        fg.manual_seed(seed)
        got = compiled(x2)
        got.backward()
        assert got.item() == pytest.approx(expected.item(), rel=1e-6)
        np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_read_by_forward_follows_its_writes(backend):
    fn = PURE["reads_global"]
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    try:
        for step in range(3):
            SCALE.add_(0.5)  # changed in place between calls: the graph reads it anew
            x1, x2 = _vector(step), _vector(step)
            fn(x1).backward()
            got = compiled(x2)
            got.backward()
            assert got.item() == pytest.approx((x1 * SCALE).sum().item(), rel=1e-6)
            np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-6)
    finally:
        SCALE.fill_(1.0)


IMPURE = {
    "appends_in_forward": (lambda x: (AppendsInForward.apply(x) + 1).sum(), "side effect"),
    "counts_backward": (lambda x: (CountsBackward.apply(x * 1) + 1).sum(), "side effect"),
    "writes_buffer": (lambda x: (WritesBuffer.apply(x) + 1).sum(), "writes into a tensor"),
    "writes_saved": (lambda x: (WritesSaved.apply(x * 1) + 1).sum(), "writes into a tensor"),
    "data_dependent": (lambda x: DataDependent.apply(x).sum(), "bool()"),
    "returns_input": (lambda x: (ReturnsInput.apply(x) * 2).sum(), "did not make"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(IMPURE))
def test_function_with_effects_runs_for_real(name, backend):
    fn, why = IMPURE[name]
    before = BUFFER.clone()
    _compare(fn, backend)
    if name == "writes_buffer":  # three eager and three compiled calls, one write each
        np.testing.assert_array_equal(BUFFER.numpy(), (before + 6).numpy())
    fg._dynamo.reset()
    explained = fg._dynamo.explain(fn)(_vector(0))
    assert len(explained.break_reasons) == 1
    assert why in explained.break_reasons[0].reason


def test_function_output_modified_in_place_raises_as_eager():
    class View(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g * 3

    def fn(x):
        y = View.apply(x * 1)
        y.mul_(2)
        return y

    with pytest.raises(RuntimeError) as eager:
        fn(_vector(0))
    for backend in BACKENDS:
        fg._dynamo.reset()
        with pytest.raises(RuntimeError) as compiled:
            fg.compile(fn, backend=backend)(_vector(0))
        assert str(compiled.value) == str(eager.value)


def test_wrong_gradient_count_raises_at_backward_as_eager():
    class TooMany(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    for backend in BACKENDS:
        fg._dynamo.reset()
        out = fg.compile(lambda x: TooMany.apply(x) + 1, backend=backend)(_vector(0))
        with pytest.raises(RuntimeError, match="incorrect number of gradients"):
            out.sum().backward()
