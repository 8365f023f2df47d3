"""A backward pass that records nothing runs mul's derivative on arrays (`OpDef.on_arrays`):
no dispatch per product, and the same gradients as PyTorch for every kind of operand the
array form takes or leaves to the Tensor derivative (0-dim, broadcast, promoted, integer,
complex, numbers, parameters, one tensor twice), with hooks, retained gradients, a root
gradient, repeated passes and `create_graph`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import arithmetic

RNG = np.random.default_rng(7)
A = (RNG.standard_normal((4, 6)) * 0.5 + 1.0).astype(np.float32)
B = (RNG.standard_normal((4, 6)) * 0.5 + 1.0).astype(np.float32)


def _leaf_chain(lib, data=A, n=6):
    x = lib.tensor(data, requires_grad=True)
    y = x
    for _ in range(n):
        y = x * y
    y.sum().backward()
    return (x.grad,)


def _scalar_leaf(lib):
    return _leaf_chain(lib, np.float32(1.1), n=5)  # 0-dim products are NumPy scalars


def _float64(lib):
    return _leaf_chain(lib, A.astype(np.float64))


def _one_element(lib):
    return _leaf_chain(lib, A[:1, :1])


def _numbers(lib):
    x = lib.tensor(A, requires_grad=True)
    y = (x * 1.5) * 3
    y = 2 * (y * True)  # a bool factor: the Tensor derivative's promotion
    y.sum().backward()
    return (x.grad,)


def _broadcast(lib):
    x = lib.tensor(A[:1], requires_grad=True)  # (1, 6) against (4, 6): fitted by the engine
    c = lib.tensor(B)
    w = lib.tensor(B[:, :1], requires_grad=True)
    y = (x * c) * w
    (y * x).sum().backward()
    return x.grad, w.grad


def _promoted(lib):
    x = lib.tensor(A, requires_grad=True)
    d = lib.tensor(B.astype(np.float64), requires_grad=True)
    i = lib.tensor(np.arange(24).reshape(4, 6))  # int64: no grad, a promoted product
    y = (x * d) * x
    (y * i).sum().backward()
    return x.grad, d.grad


def _complex(lib):
    x = lib.tensor(A + 1j * B, requires_grad=True)
    w = lib.tensor(B - 0.5j * A, requires_grad=True)
    y = x * w * x
    (y.real + y.imag).sum().backward()
    return x.grad, w.grad


def _parameter(lib):
    p = lib.nn.Parameter(lib.tensor(A))
    x = lib.tensor(B, requires_grad=True)
    y = (p * x) * p
    (y * x).sum().backward()
    return p.grad, x.grad


def _same_tensor_twice(lib):
    x = lib.tensor(A, requires_grad=True)
    y = x * x
    z = y * y + y * 3.0  # y's node gets two gradients, one from each branch
    z.sum().backward()
    return (x.grad,)


def _hooks_and_retained(lib):
    x = lib.tensor(A, requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * 2)
    z = x * y
    z.retain_grad()
    w = x * z
    w.sum().backward()
    return x.grad, z.grad


def _root_gradient_twice(lib):
    x = lib.tensor(A, requires_grad=True)
    c = lib.tensor(B)
    y = x * c * x
    y.backward(lib.tensor(B), retain_graph=True)
    y.backward(lib.tensor(A))  # .grad accumulates over the two passes
    return (x.grad,)


def _grad_of_inputs(lib):
    x = lib.tensor(A, requires_grad=True)
    y = x * x * x
    return lib.autograd.grad(y.sum(), [x])


def _double_backward(lib):
    x = lib.tensor(A, requires_grad=True)
    y = x * x * x
    (g,) = lib.autograd.grad(y.sum(), [x], create_graph=True)
    (g * x).sum().backward()
    return x.grad, g


CASES = [_leaf_chain, _scalar_leaf, _float64, _one_element, _numbers, _broadcast, _promoted,
         _complex, _parameter, _same_tensor_twice, _hooks_and_retained, _root_gradient_twice,
         _grad_of_inputs, _double_backward]


@pytest.mark.parametrize("build", CASES)
def test_gradients_match_torch(build):
    got, want = build(fusegrad), build(torch)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype) == str(w.dtype)
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def _count_products(monkeypatch) -> list:
    """Count the products mul's Tensor derivative dispatches (`call2` in arithmetic)."""
    calls = []
    real = arithmetic.call2

    def counting(op, a, b):
        calls.append(op.name)
        return real(op, a, b)

    monkeypatch.setattr(arithmetic, "call2", counting)
    return calls


def test_products_run_without_dispatch(monkeypatch):
    x = fusegrad.tensor(A, requires_grad=True)
    y = x
    for _ in range(20):
        y = x * y
    loss = y.sum()
    calls = _count_products(monkeypatch)
    loss.backward()
    assert calls == []
    np.testing.assert_allclose(x.grad.numpy(), _leaf_chain(torch, A, 20)[0].numpy(),
                               rtol=1e-5)


def test_create_graph_keeps_the_tensor_derivative(monkeypatch):
    x = fusegrad.tensor(A, requires_grad=True)
    y = x * x
    calls = _count_products(monkeypatch)
    (g,) = fusegrad.autograd.grad(y.sum(), [x], create_graph=True)
    assert calls == ["mul.Tensor", "mul.Tensor"]  # recorded, so it can be differentiated
    assert g.grad_fn is not None
