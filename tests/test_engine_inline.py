"""The backward engine's inline path for registry nodes gives what PyTorch gives: a
multi-output node handed one gradient (the others zero-filled), a broadcast or cast
gradient fitted only where an edge needs it, a saved input modified in place, a graph
backpropagated twice, and random graphs of shared, branching and multi-output nodes."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import fusegrad

DATA = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)


def _error(fn, lib):
    try:
        fn(lib)
    except Exception as e:  # noqa: BLE001 - the oracle decides what is expected
        return type(e), str(e)
    return None


def _split_one_part(lib):
    x = lib.tensor(DATA, requires_grad=True)
    a, b, c = x.split([1, 2, 3], dim=1)
    (b.exp() * 2).sum().backward()  # SplitBackward gets output 1's gradient only
    return x.grad


def _max_values(lib):
    x = lib.tensor(DATA, requires_grad=True)
    values, _ = x.max(dim=1)  # a second, non-differentiable output
    (values * values).sum().backward()
    return x.grad


def _broadcast(lib):
    x = lib.tensor(DATA[:1], requires_grad=True)  # (1, 6), broadcast against (4, 6)
    w = lib.tensor(DATA[:, :1].astype(np.float64), requires_grad=True)  # float64 column
    c = lib.tensor(DATA)  # needs no grad: its edge is empty
    y = (x * c) * w.to(lib.float32)
    for _ in range(3):
        y = y * x
    y.sum().backward()
    return x.grad, w.grad


@pytest.mark.parametrize("build", [_split_one_part, _max_values, _broadcast])
def test_gradients_match_torch(build):
    got, want = build(fusegrad), build(torch)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert str(g.dtype) == str(w.dtype)  # both print as torch.float32, ...
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def _modified_saved(lib):
    x = lib.tensor(DATA, requires_grad=True)
    c = lib.tensor(DATA)
    y = x * 2
    z = y * c  # saves c
    c.add_(1)
    z.sum().backward()


def _backward_twice(lib):
    x = lib.tensor(DATA, requires_grad=True)
    c = lib.tensor(DATA)
    z = (x * 2 * c).sum()
    z.backward()
    z.backward()


def _retained_twice(lib):
    x = lib.tensor(DATA, requires_grad=True)
    c = lib.tensor(DATA)
    z = (x * 2 * c).sum()
    z.backward(retain_graph=True)
    z.backward()
    return x.grad


@pytest.mark.parametrize("build", [_modified_saved, _backward_twice])
def test_errors_match_torch(build):
    want = _error(build, torch)
    assert want is not None
    got = _error(build, fusegrad)
    assert got == want


def test_retained_graph_runs_twice():
    np.testing.assert_allclose(_retained_twice(fusegrad).numpy(),
                               _retained_twice(torch).numpy(), rtol=1e-6)


def _random_graph(lib, seed: int):
    rng = random.Random(seed)
    x = lib.tensor(DATA, requires_grad=True)
    w = lib.tensor(DATA[:, :1] * 0.5, requires_grad=True)
    pool = [x, w]
    for _ in range(25):
        k = rng.randrange(6)
        a, b = pool[rng.randrange(len(pool))], pool[rng.randrange(len(pool))]
        if k == 0:
            pool.append(a * b)
        elif k == 1:
            pool.append(a + b * 0.5)
        elif k == 2 and a.shape[1] >= 2:
            first, rest = a.split([1, a.shape[1] - 1], dim=1)
            pool.append(first.tanh() * 2)
            if rng.random() < 0.5:
                pool.append(rest.sum(1, keepdim=True))
        elif k == 3:
            pool.append(a.sum(1, keepdim=True) * b)
        elif k == 4:
            pool.append(a.max(dim=1, keepdim=True)[0] + b)
        else:
            pool.append(a.sigmoid() - b)
    loss = pool[-1].sum() + pool[-2].sum() + pool[-3].mean()
    grads = lib.autograd.grad(loss, [x, w], retain_graph=True, allow_unused=True)
    loss.backward()
    return [g for g in grads] + [x.grad, w.grad]


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_match_torch(seed):
    for g, w in zip(_random_graph(fusegrad, seed), _random_graph(torch, seed)):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-4,
                                       atol=1e-5)


def _custom_function_with_op_attribute(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx._op = "scale"  # the user's attribute on ctx, which is also the node
            ctx._pos = (3.0,)
            return x * 3.0

        @staticmethod
        def backward(ctx, g):
            return g * ctx._pos[0]

    x = lib.tensor(DATA, requires_grad=True)
    (Scale.apply(x * 2) * x).sum().backward()
    return x.grad


def test_custom_function_ctx_attributes_do_not_steer_the_engine():
    np.testing.assert_allclose(_custom_function_with_op_attribute(fusegrad).numpy(),
                               _custom_function_with_op_attribute(torch).numpy(), rtol=1e-6)
