"""Nodes that receive no gradient still count as done for their inputs, and `normal` of
tensors records PyTorch's `NormalBackward1/2/3` with zero gradients.

A node reached only through an input whose gradient came back None (a custom Function's
backward returning None for `s = f(w)` while `w` is another input) passes None on: before,
`w`'s node waited for it for ever and the leaf got no gradient, silently (a compiled
function with two outputs, only one of them used, lost its parameters' gradients so)."""

from __future__ import annotations

import numpy as np
import pytest
from compile_support import BACKENDS

import fusegrad as fg

torch = pytest.importorskip("torch")


def _shared_ancestor(lib):
    class KeepsOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, s, w):
            return w * 3

        @staticmethod
        def backward(ctx, g):
            return None, g * 3

    mu = lib.full((3,), 0.1, requires_grad=True)
    nu = lib.full((3,), 0.2, requires_grad=True)
    w = mu * 2
    s = w * 5 + nu
    seen = []
    s.register_hook(lambda g: seen.append(g))
    KeepsOne.apply(s, w).sum().backward()
    return mu.grad, nu.grad, seen


def test_function_returning_none_for_an_input_sharing_an_ancestor():
    want = _shared_ancestor(torch)
    got = _shared_ancestor(fg)
    assert want[0].tolist() == got[0].tolist() == [6.0, 6.0, 6.0]
    assert want[1] is None and got[1] is None  # reached only through the None
    assert want[2] == got[2] == [None]  # (its tensor hook sees None)


def _longer_chain(lib):
    class KeepsLast(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, w):
            return w.clone()

        @staticmethod
        def backward(ctx, g):
            return None, None, g

    mu = lib.tensor([0.5, -1.0], requires_grad=True)
    w = mu.exp()
    a = (w * 2).sin().sum()
    b = w.tanh()
    (KeepsLast.apply(a, b, w) * lib.tensor([1.0, 2.0])).sum().backward()
    return mu.grad


def test_chains_behind_a_none_gradient_pass_it_on():
    np.testing.assert_allclose(_longer_chain(fg).numpy(), _longer_chain(torch).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_function_with_an_unused_output(backend):
    """Two inputs with a common ancestor, backward through one output only."""
    def f(s, x, w):
        return x * w, s * 2

    grads = []
    for fn in (f, fg.compile(f, backend=backend)):
        mu = fg.full((3,), 0.1, requires_grad=True)
        w = mu * 2
        s = -(w ** 2) / 2
        out = fn(s, fg.ones(3), w)
        out[0].sum().backward()
        grads.append(mu.grad)
    assert grads[1] is not None
    assert grads[0].tolist() == grads[1].tolist() == [2.0, 2.0, 2.0]


# ---------------------------------------------------------------- normal of tensors


@pytest.mark.parametrize("form", ["tensor_float", "float_tensor", "tensor_tensor",
                                  "broadcast"])
def test_normal_of_tensors_records_pytorchs_node(form):
    def run(lib):
        lib.manual_seed(7)
        m = lib.zeros(3, requires_grad=True)
        s = lib.full((2, 3), 0.5, requires_grad=True)
        args = {"tensor_float": (m, 2.0), "float_tensor": (1.5, s), "tensor_tensor": (m * 1, s),
                "broadcast": (m, s)}[form]
        y = lib.normal(*args)
        (y * 3).sum().backward()
        node = y.grad_fn
        sizes = {k: getattr(node, f"_saved_{k}_sym_sizes") for k in ("mean", "std")
                 if hasattr(node, f"_saved_{k}_sym_sizes")}
        return (y.detach().numpy(), type(node).__name__, sizes,
                None if m.grad is None else m.grad.tolist(),
                None if s.grad is None else s.grad.tolist())

    want, got = run(torch), run(fg)
    np.testing.assert_array_equal(got[0], want[0])  # the same draws
    assert got[1:] == want[1:]


@pytest.mark.parametrize("args", [
    lambda T: (T.zeros(3), -1.0), lambda T: (T.zeros(3), -0.25),
    lambda T: (T.zeros(3), -T.ones(3)), lambda T: (0.0, -T.ones(3)),
    lambda T: (T.zeros(3, dtype=T.long), 1.0), lambda T: (T.zeros(2), T.ones(3))])
def test_normal_of_tensors_refuses_as_pytorch(args):
    with pytest.raises(Exception) as want:
        torch.normal(*args(torch))
    with pytest.raises(type(want.value)) as got:
        fg.normal(*args(fg))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_normal_of_a_tensor_that_requires_grad(backend):
    def f(m, s):
        return fg.normal(m * 2, s).sum() + m.sum()

    results = []
    for fn in (f, fg.compile(f, backend=backend)):
        fg.manual_seed(3)
        m = fg.zeros(4, requires_grad=True)
        s = fg.full((4,), 2.0, requires_grad=True)
        out = fn(m, s)
        out.backward()
        results.append((out.item(), m.grad.tolist(), s.grad.tolist()))
    assert results[0][1:] == results[1][1:] == ([1.0] * 4, [0.0] * 4)
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-6)


# ---------------------------------------------------------------- row kernels' layouts


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("layout", ["t", "permute", "slice"])
def test_softmax_gradient_of_a_non_contiguous_incoming_gradient(fn, layout, dtype):
    """The C row gradient took a transposed incoming gradient's rows along the other
    dimension (`x.softmax(-1).t()`): every gradient was wrong, silently."""
    rng = np.random.default_rng(0)
    shape = (3, 5, 4) if layout == "permute" else (5, 4)
    xs = rng.standard_normal(shape).astype(dtype)
    ws = rng.standard_normal((4, 5, 3) if layout == "permute" else (4, 5)).astype(dtype)

    def grad(lib):
        x = lib.tensor(xs, requires_grad=True)
        y = getattr(x, fn)(-1)
        y = {"t": lambda: y.t(), "permute": lambda: y.permute(2, 1, 0),
             "slice": lambda: y.t()[::1]}[layout]()
        (y * lib.tensor(ws)).sum().backward()
        return x.grad.numpy()

    np.testing.assert_allclose(grad(fg), grad(torch), rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-6 if dtype == "float32" else 1e-12)
