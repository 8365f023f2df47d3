"""What compiled code must keep of eager semantics, found by user programs: double backward
through a compiled graph refuses (as PyTorch's) instead of dropping second-order terms;
tensors made to require grad inside stay leaves; outputs that are views of one another share
memory; bound methods, callable objects and partials compile."""

import functools

import numpy as np
import pytest
import torch

import fusegrad

BACKENDS = ["inductor", "aot_eager"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_double_backward_through_a_compiled_graph_refuses_as_torch(backend):
    def f(x, w):
        return (x * w).sin().sum()

    for lib, kwargs in ((fusegrad, {"backend": backend}), (torch, {"backend": "aot_eager"})):
        w = lib.ones(4, requires_grad=True)
        x = lib.ones(4, requires_grad=True)
        y = lib.compile(f, **kwargs)(x, w)
        (gx,) = lib.autograd.grad(y, x, create_graph=True)
        assert gx.requires_grad
        with pytest.raises(RuntimeError, match="does not currently support double backward"):
            (y + gx.pow(2).sum()).backward()


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_order_gradients_under_create_graph_equal_eager(backend):
    def f(x, w):
        return (x * w).tanh().sum()

    results = []
    for fn in (f, fusegrad.compile(f, backend=backend)):
        x = fusegrad.arange(4.0).requires_grad_()
        w = fusegrad.full((4,), 0.5, requires_grad=True)
        results.append(fusegrad.autograd.grad(fn(x, w), (x, w), create_graph=True))
    for a, b in zip(*results):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_made_to_require_grad_inside_stay_leaves(backend):
    def f(a):
        b = fusegrad.ones(3).requires_grad_()
        c = fusegrad.zeros(3, requires_grad=True)
        d = a.new_ones(3, requires_grad=True)
        return (a * b + c * d).sum(), b, c, d

    for needs_grad in (True, False):
        a = fusegrad.arange(3.0).requires_grad_(needs_grad)
        loss, b, c, d = fusegrad.compile(f, backend=backend)(a)
        loss.backward()
        assert b.is_leaf and c.is_leaf and d.is_leaf
        assert b.grad.tolist() == [0.0, 1.0, 2.0] and c.grad.tolist() == [1.0] * 3
        assert d.grad.tolist() == [0.0] * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_that_are_views_of_one_another_share_memory(backend):
    def views(x):
        y = (x * 2).t()
        return y, y[1:], y[0]

    def base_last(x):
        y = x * 2
        return y[1:], y

    for fn in (views, base_last):
        results = []
        for call in (fn, fusegrad.compile(fn, backend=backend)):
            x = fusegrad.arange(6.0).view(2, 3).requires_grad_()
            outs = call(x)
            sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
            with fusegrad.no_grad():
                outs[-1].zero_()
            results.append(([o.tolist() for o in outs], x.grad.tolist()))
        assert results[0] == results[1]
    a, b = fusegrad.compile(lambda x: ((x + 1), (x + 1)[1:]), backend=backend)(fusegrad.zeros(3))
    assert b._base is None or b._base is not a  # two results of two ops stay apart


class _Scaler:
    def __init__(self):
        self.s = 2.0

    def scale(self, x):
        return x * self.s

    def __call__(self, x):
        return x + self.s


def test_bound_methods_callable_objects_and_partials_compile():
    x = fusegrad.ones(2)
    assert fusegrad.compile(_Scaler().scale)(x).tolist() == [2.0, 2.0]
    assert fusegrad.compile(_Scaler())(x).tolist() == [3.0, 3.0]
    part = functools.partial(lambda v, a: v * a, a=3.0)
    assert fusegrad.compile(part)(x).tolist() == [3.0, 3.0]
    assert fusegrad.compile(fusegrad.sin)(fusegrad.zeros(2)).tolist() == [0.0, 0.0]
    lin = fusegrad.nn.Linear(2, 2)
    np.testing.assert_allclose(fusegrad.compile(lin.forward)(x).detach().numpy(),
                               lin(x).detach().numpy(), rtol=1e-6)


def test_module_compile_in_place():
    """`module.compile()` compiles the forward in place: same values and gradients, the
    module's type, state dict and hooks unchanged, compiling again compiles the original."""
    fusegrad.manual_seed(0)
    m = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 3), fusegrad.nn.ReLU(),
                               fusegrad.nn.Linear(3, 2))
    x = fusegrad.randn(5, 4)
    ref = m(x)
    ref.sum().backward()
    want = m[0].weight.grad.clone()
    m.zero_grad()
    assert m.compile(backend="aot_eager") is None
    out = m(x)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(m[0].weight.grad.numpy(), want.numpy(), rtol=1e-6)
    assert type(m) is fusegrad.nn.Sequential and list(m.state_dict()) == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    seen = []
    m.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    m.compile()
    m(x)
    assert seen == [fusegrad.Size([5, 2])]
