"""Wrong answers a second differential fuzzing of `fusegrad.compile` found, in what capture
records of user `autograd.Function.apply`, `func.functional_call`, `out=` calls and grad
mode after exceptions (compiled against eager fusegrad, over several calls).

Each program runs eagerly and compiled on fresh inputs; results (values, requires_grad,
whether they have history), gradients, errors (type and text) and the grad mode afterwards
must be equal. No torch here: the 3.12/3.13 runs use this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "aot_eager", "inductor"]


def _state(t):
    """What a caller can see of tensor `t` (None for no tensor)."""
    if t is None:
        return None
    return (np.round(t.detach().numpy(), 5).tolist(), tuple(t.shape), t.requires_grad,
            t.grad_fn is None)


def _run(fn, x, y):
    """fn(x, y), then a backward through its result where it requires grad."""
    try:
        out = fn(x, y)
        if out.requires_grad:
            out.sum().backward()
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        fg.set_grad_enabled(True)
        return ("error", type(e), str(e))
    return (_state(out), _state(x.grad), _state(y.grad), fg.is_grad_enabled())


def _compare(fn, flags, backend) -> None:
    """fn eager and compiled on inputs requiring grad as `flags` say, call by call."""
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    rng = np.random.default_rng(0)
    for rx, ry in flags:
        values = rng.standard_normal((2, 3)).astype("float32")
        got = []
        for f in (fn, compiled):
            x = fg.tensor(values[0], requires_grad=rx)
            y = fg.tensor(values[1], requires_grad=ry)
            got.append(_run(f, x, y))
        assert got[1] == got[0]


# -------------------------------------- a backward giving no input a gradient (None only)


class NoGradients(fg.autograd.Function):
    """Eager records its node (outputs require grad) though backward returns None alone."""

    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return None, None


class NoneUnlessFirst(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        if not ctx.needs_input_grad[0]:
            return None, None
        return g * 2, g * 0.5


class NoneWithNumber(fg.autograd.Function):
    """setup_context style, a number among the outputs, backward once_differentiable."""

    @staticmethod
    def forward(x, y):
        return x.sin() * y, 7

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.scale = 3.0

    @staticmethod
    @fg.autograd.function.once_differentiable
    def backward(ctx, g, g_number):
        return None, None


def _no_gradients(x, y):
    return NoGradients.apply(x, y) * 2


def _none_unless_first(x, y):
    return NoneUnlessFirst.apply(x, y) + 1


def _none_with_number(x, y):
    out, n = NoneWithNumber.apply(x, y)
    return out * n


FLAGS = [(True, True), (False, True), (True, False)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_no_gradients, _none_unless_first, _none_with_number],
                         ids=lambda f: f.__name__)
def test_backward_giving_no_gradient_keeps_requires_grad(fn, backend):
    _compare(fn, FLAGS, backend)


def test_backward_giving_no_gradient_is_a_break():
    # Compiled, the node would take such inputs detached: the outputs would not require grad.
    explained = fg._dynamo.explain(_no_gradients)(fg.ones(3, requires_grad=True), fg.ones(3))
    assert "no input requiring grad a gradient" in explained.break_reasons[0].reason


def test_backward_giving_some_gradient_stays_in_the_graph():
    explained = fg._dynamo.explain(_none_unless_first)(fg.ones(3, requires_grad=True),
                                                       fg.ones(3))
    assert explained.graph_count == 1 and not explained.break_reasons


# ------------------------------------- a backward changing ctx (seen by the next backward)


class CountsBackwards(fg.autograd.Function):
    """Eager's second backward through the node (retain_graph) sees what the first stored."""

    @staticmethod
    def forward(ctx, x):
        ctx.k = 1
        return x * 2

    @staticmethod
    def backward(ctx, g):
        ctx.k += 1
        return g * ctx.k


class AppendsToCtxList(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.seen = []
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        ctx.seen.append(1)
        x, = ctx.saved_tensors
        return g * x.cos() * len(ctx.seen)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("function", [CountsBackwards, AppendsToCtxList],
                         ids=lambda c: c.__name__)
def test_backward_changing_ctx_runs_as_eager(function, backend):
    def program(x):
        return function.apply(x * 1) + 1

    fg._dynamo.reset()
    compiled = fg.compile(program, backend=backend)
    got = []
    for f in (program, compiled):
        x = fg.tensor([0.5, -1.0, 2.0], requires_grad=True)
        out = f(x)
        out.sum().backward(retain_graph=True)
        first = x.grad.clone()
        out.sum().backward()
        got.append((first.tolist(), x.grad.tolist()))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6)


# ------------------------------------------- numbers a forward returns read under no_grad


class ReturnsGradMode(fg.autograd.Function):
    """A number among the outputs made from the grad mode (no_grad inside forward)."""

    @staticmethod
    def forward(ctx, x):
        y = x * 2
        return y, fg.is_grad_enabled(), y.requires_grad

    @staticmethod
    def backward(ctx, g, g_mode, g_flag):
        return g * 3


class SetupReadsGradMode(fg.autograd.Function):
    @staticmethod
    def forward(x):
        return x.sin(), int(fg.is_grad_enabled()) + 1

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g, g_number):
        x, = ctx.saved_tensors
        return g * x.cos()


def _returns_grad_mode(x, y):
    out, mode, flag = ReturnsGradMode.apply(x)
    return out * (7 if mode else 1) + (5 if flag else 0) + y


def _setup_reads_grad_mode(x, y):
    out, n = SetupReadsGradMode.apply(x * y)
    return out * n


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_returns_grad_mode, _setup_reads_grad_mode],
                         ids=lambda f: f.__name__)
def test_forward_numbers_see_no_grad(fn, backend):
    _compare(fn, FLAGS, backend)


# ------------------------- a tensor kept on ctx (not saved), written before the backward


class KeepsOnCtx(fg.autograd.Function):
    """Eager's backward reads `ctx.w` as it is then: no saved-tensor version check."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w, None


class KeepsOutputOnCtx(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2
        ctx.kept = [out]
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.kept[0]


class KeepsOwnMask(fg.autograd.Function):
    """A tensor forward made for itself alone: nothing can write it, it stays in the graph."""

    @staticmethod
    def forward(ctx, x):
        ctx.mask = (x > 0).float()
        return x * ctx.mask

    @staticmethod
    def backward(ctx, g):
        return g * ctx.mask


def _keeps_on_ctx(x, w):
    return KeepsOnCtx.apply(x, w)


def _keeps_output_on_ctx(x, w):
    return KeepsOutputOnCtx.apply(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,written", [(_keeps_on_ctx, "w"), (_keeps_output_on_ctx, "out")],
                         ids=["input", "output"])
def test_ctx_tensor_written_after_forward(fn, written, backend):
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    got = []
    for f in (fn, compiled):
        x = fg.tensor([1.0, -2.0], requires_grad=True)
        w = fg.tensor([3.0, 4.0])
        out = f(x, w)
        with fg.no_grad():
            (w if written == "w" else out).add_(1)
        try:
            out.sum().backward()
            got.append(x.grad.tolist())
        except RuntimeError as e:
            got.append(str(e))
    assert got[1] == got[0]


def test_ctx_tensor_made_in_forward_stays_in_the_graph():
    def program(x):
        return KeepsOwnMask.apply(x) + 1

    explained = fg._dynamo.explain(program)(fg.ones(3, requires_grad=True))
    assert explained.graph_count == 1 and not explained.break_reasons
