"""Gradients of relu, leaky_relu, hardtanh (relu6) and threshold taken with create_graph
record PyTorch's backward ops (`ThresholdBackwardBackward0` ...): they require grad through
the saved input, and differentiating them again gives the input a zero gradient, as in
PyTorch (a gradient penalty on a network of these layers)."""

import numpy as np
import pytest
import torch

import fusegrad

CALLS = {
    "relu": (lambda L, x: L.nn.functional.relu(x), "ThresholdBackwardBackward0"),
    "leaky_relu": (lambda L, x: L.nn.functional.leaky_relu(x, 0.2),
                   "LeakyReluBackwardBackward0"),
    "hardtanh": (lambda L, x: L.nn.functional.hardtanh(x, -0.5, 0.5),
                 "HardtanhBackwardBackward0"),
    "relu6": (lambda L, x: L.nn.functional.relu6(x), "HardtanhBackwardBackward0"),
    "threshold": (lambda L, x: L.nn.functional.threshold(x, 0.1, 2.0),
                  "ThresholdBackwardBackward0"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_create_graph_gradient_as_torch(name):
    fn, node = CALLS[name]
    values = np.array([-1.0, 2.0, 0.3, -0.2, 0.7, 1.6], np.float32)
    got = []
    for lib in (fusegrad, torch):
        x = lib.from_numpy(values.copy()).requires_grad_()
        (g,) = lib.autograd.grad((fn(lib, x) * lib.arange(6.0)).sum(), x, create_graph=True)
        names = type(g.grad_fn).__name__
        (g * g).sum().backward()
        got.append((g.detach().numpy().tolist(), g.requires_grad, names, x.grad.tolist()))
    assert got[0] == got[1]
    assert got[0][2] == node


def test_penalty_through_a_network_as_torch():
    """WGAN-GP's penalty on a small LeakyReLU / ReLU critic: its value and every gradient."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((8, 4)).astype(np.float32)
    w2 = rng.standard_normal((1, 8)).astype(np.float32)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    results = []
    for lib in (fusegrad, torch):
        a, b = (lib.from_numpy(w.copy()).requires_grad_() for w in (w1, w2))
        inp = lib.from_numpy(x.copy()).requires_grad_()
        hidden = lib.nn.functional.leaky_relu(inp @ a.T, 0.2)
        out = lib.nn.functional.relu(hidden) @ b.T
        (g,) = lib.autograd.grad(out.sum(), inp, create_graph=True)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        results.append([penalty.item(), a.grad.numpy(), b.grad.numpy(), inp.grad.numpy()])
    assert abs(results[0][0] - results[1][0]) < 1e-5
    for p, q in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["threshold_backward", "leaky_relu_backward",
                                  "hardtanh_backward"])
def test_backward_ops_gradcheck(name):
    op = {"threshold_backward": lambda g, x: fusegrad.ops.aten.threshold_backward(g, x, 0.0),
          "leaky_relu_backward": lambda g, x: fusegrad.ops.aten.leaky_relu_backward(
              g, x, 0.2, False),
          "hardtanh_backward": lambda g, x: fusegrad.ops.aten.hardtanh_backward(
              g, x, -1.0, 1.0)}[name]
    g = fusegrad.randn(3, 4, dtype=fusegrad.float64, requires_grad=True)
    x = (fusegrad.rand(3, 4, dtype=fusegrad.float64) + 0.2) * fusegrad.tensor(
        [1.0, -1.0, 1.0, -1.0], dtype=fusegrad.float64)
    x.requires_grad_()
    assert fusegrad.autograd.gradcheck(op, (g, x))
    assert fusegrad.autograd.gradgradcheck(op, (g, x))
