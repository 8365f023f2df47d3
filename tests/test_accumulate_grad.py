"""A leaf's first gradient: its array is taken without a copy only when nothing else can
see it (PyTorch steals an incoming gradient nothing else holds); `x.grad` never aliases a
tensor the user holds (a hook's, a gradient passed in, another leaf's grad, a saved tensor)
and has PyTorch's values, strides and, with create_graph, graph."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import Tensor
from fusegrad.ops import _parallel


def _both(build):
    """`build(lib)` run on fusegrad and torch: (fusegrad's, torch's) results."""
    return build(fusegrad), build(torch)


def _np(t):
    return np.array(t.detach().numpy())


def _check(ours, theirs):
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)
        assert a.stride() == b.stride()


def test_two_leaves_given_the_same_gradient_do_not_share_it():
    def build(lib):
        a = lib.ones(40, 50, requires_grad=True)
        b = lib.ones(40, 50, requires_grad=True)
        (a + b).sum().backward()  # add passes one gradient to both inputs
        return a, b

    (a, b), (ta, tb) = _both(build)
    _check((a.grad, b.grad), (ta.grad, tb.grad))
    with fusegrad.no_grad():
        a.grad.add_(1)
    np.testing.assert_array_equal(_np(b.grad), _np(tb.grad))


def test_a_leaf_used_twice_gets_the_sum_and_a_second_backward_accumulates():
    def build(lib):
        x = lib.arange(6.0).reshape(2, 3).requires_grad_()
        (x * x + x * 3).sum().backward()
        first = x.grad.clone()
        (x * 2).sum().backward()
        return first, x.grad

    ours, theirs = _both(build)
    _check(ours, theirs)


@pytest.mark.parametrize("case", ["expand", "broadcast", "scalar"])
def test_gradients_of_expanded_and_broadcast_leaves(case):
    def build(lib):
        x = lib.arange(4.0).reshape(4, 1).requires_grad_()
        s = lib.tensor(2.0, requires_grad=True)
        y = lib.ones(4, 5, requires_grad=True)
        if case == "expand":
            z = x.expand(4, 5) * y
        elif case == "broadcast":
            z = x + y
        else:
            z = (y * s).expand(3, 4, 5)
        z.sum().backward()
        return x.grad if x.grad is not None else s.grad, y.grad

    (g, gy), theirs = _both(build)
    _check((g, gy), theirs)
    with fusegrad.no_grad():
        gy.mul_(7)
    np.testing.assert_allclose(_np(g), _np(theirs[0]))


def test_a_hook_that_returns_a_tensor_the_user_keeps():
    kept = {}

    def build(lib):
        x = lib.ones(30, 40, requires_grad=True)

        def hook(g):
            kept[lib] = g * 3
            return kept[lib]

        x.register_hook(hook)
        (x * 2).sum().backward()
        return x

    x, tx = _both(build)
    _check((x.grad,), (tx.grad,))
    with fusegrad.no_grad():
        kept[fusegrad].add_(100)
    np.testing.assert_array_equal(_np(x.grad), _np(tx.grad))


def test_a_hook_that_keeps_the_incoming_gradient():
    kept = {}

    def build(lib):
        x = lib.ones(30, 40, requires_grad=True)
        x.register_hook(lambda g: kept.__setitem__(lib, g))
        (x * 2).sum().backward()
        return x

    x, tx = _both(build)
    assert x.grad is not kept[fusegrad]
    with fusegrad.no_grad():
        kept[fusegrad].add_(100)
    np.testing.assert_array_equal(_np(x.grad), _np(tx.grad))


def test_retain_grad_and_the_leaf_below_do_not_share():
    def build(lib):
        x = lib.ones(30, 40, requires_grad=True)
        y = x.clone()  # passes its gradient on unchanged
        y.retain_grad()
        (y * 3).sum().backward()
        return x, y

    (x, y), (tx, ty) = _both(build)
    _check((x.grad, y.grad), (tx.grad, ty.grad))
    with fusegrad.no_grad():
        x.grad.add_(1)
    np.testing.assert_array_equal(_np(y.grad), _np(ty.grad))


def test_a_gradient_passed_to_backward_is_not_taken():
    def build(lib):
        w = lib.ones(64, 32, requires_grad=True)
        g = lib.full((32, 64), 2.0)
        w.t().backward(g)
        v = lib.ones(64, 32, requires_grad=True)
        h = lib.full((64, 32), 3.0)
        v.backward(h)  # a leaf's own accumulator receives the caller's tensor
        return w.grad, v.grad, g, h

    (gw, gv, g, h), (tw, tv, _, _) = _both(build)
    _check((gw, gv), (tw, tv))
    with fusegrad.no_grad():
        g.add_(5)
        h.add_(5)
    np.testing.assert_array_equal(_np(gw), _np(tw))
    np.testing.assert_array_equal(_np(gv), _np(tv))


def test_the_gradient_of_a_view_of_a_gradient_passed_in_is_not_taken():
    """PyTorch takes the reshaped gradient here (its `.grad` then shares memory with `g`);
    a leaf's gradient never aliases a tensor the caller holds, so this one is a copy."""
    w = fusegrad.ones(4, 5, requires_grad=True)
    g = fusegrad.ones(20)
    w.view(20).backward(g)
    with fusegrad.no_grad():
        g.add_(5)
    np.testing.assert_array_equal(_np(w.grad), np.ones((4, 5), np.float32))


def test_gradients_of_views_of_a_leaf():
    def build(lib):
        x = lib.arange(60.0).reshape(6, 10).requires_grad_()
        (x[1:4, ::2] * 2).sum().backward()
        a = x.grad.clone()
        x.grad = None
        x.view(60).sum().backward()
        b = x.grad
        x.grad = None
        (x.t() * lib.arange(6.0)).sum().backward()  # arrives transposed
        return a, b, x.grad

    ours, theirs = _both(build)
    _check(ours, theirs)
    assert ours[2]._data.flags.c_contiguous


def test_a_custom_backward_returning_a_tensor_the_user_holds():
    held = fusegrad.full((8, 8), 4.0)
    flat = fusegrad.full((64,), 4.0)

    class Give(fusegrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            ctx.save_for_backward(y)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            # None of these may become a leaf's grad as it is.
            return held, y, flat.view(8, 8)

    x = fusegrad.ones(8, 8, requires_grad=True)
    y = fusegrad.ones(8, 8, requires_grad=True)
    z = fusegrad.ones(8, 8, requires_grad=True)
    Give.apply(x, y, z).sum().backward()
    with fusegrad.no_grad():
        x.grad.add_(1)
        y.grad.add_(1)
        z.grad.add_(1)
    np.testing.assert_array_equal(_np(held), np.full((8, 8), 4.0, np.float32))
    np.testing.assert_array_equal(_np(flat), np.full(64, 4.0, np.float32))
    np.testing.assert_array_equal(_np(y), np.ones((8, 8), np.float32))
    np.testing.assert_array_equal(_np(x.grad), np.full((8, 8), 5.0, np.float32))


def test_create_graph_records_the_copy_as_pytorch_does_and_does_not_alias_a_hook():
    kept = {}

    def build(lib):
        x = lib.full((3, 4), 2.0, requires_grad=True)
        x.register_hook(lambda g: kept.__setitem__(lib, g))
        y = x * x
        y.retain_grad()
        (y * y).sum().backward(create_graph=True)
        return x, y

    (x, y), (tx, ty) = _both(build)
    _check((x.grad, y.grad), (tx.grad, ty.grad))
    assert x.grad.grad_fn.name() == tx.grad.grad_fn.name()
    assert y.grad.grad_fn.name() == ty.grad.grad_fn.name()
    assert x.grad is not kept[fusegrad]
    with fusegrad.no_grad():
        kept[fusegrad].add_(1)
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad))
    # The recorded gradient differentiates again to PyTorch's values.
    gx, = fusegrad.autograd.grad(x.grad.sum(), x)
    tgx, = torch.autograd.grad(tx.grad.sum(), tx)
    np.testing.assert_allclose(_np(gx), _np(tgx))


def test_a_gradient_nothing_else_holds_is_taken_without_a_copy(monkeypatch):
    """The point of it: a gradient the backward pass made and nobody else sees becomes the
    leaf's `.grad` without a copy."""
    copies = []
    real_copy, real_detached = _parallel.copy, Tensor._detached_copy
    monkeypatch.setattr(_parallel, "copy", lambda a: copies.append(a) or real_copy(a))
    monkeypatch.setattr(Tensor, "_detached_copy",
                        lambda t: copies.append(t) or real_detached(t))
    w = fusegrad.ones(300, 200, requires_grad=True)
    b = fusegrad.ones(200, requires_grad=True)
    x = fusegrad.ones(16, 300)
    (x @ w + b).relu().sum().backward()
    assert copies == []
    np.testing.assert_array_equal(_np(w.grad), np.full((300, 200), 16.0, np.float32))
    np.testing.assert_array_equal(_np(b.grad), np.full(200, 16.0, np.float32))


def test_a_linear_layers_first_gradients_taken_in_the_engine_loop():
    """A linear layer's parameters get their first gradients as arrays of the pass (the
    engine takes them without a tensor in between): PyTorch's values, memory of their own
    (not the input's, the saved activations' or each other's), a second backward adds into
    them, and a post-accumulate hook (which takes the general path) still runs once each."""
    def build(lib, hook):
        lib.manual_seed(0)
        layer = lib.nn.Linear(6, 4)
        with lib.no_grad():
            layer.weight.copy_(lib.arange(24.0).reshape(4, 6) / 10)
            layer.bias.copy_(lib.arange(4.0))
        x = lib.arange(18.0).reshape(3, 6) / 7
        calls = []
        if hook:
            for p in layer.parameters():
                p.register_post_accumulate_grad_hook(lambda p: calls.append(tuple(p.shape)))
        h = lib.relu(layer(x))
        h.sum().backward()
        first = [p.grad.clone() for p in layer.parameters()]
        lib.relu(layer(x)).sum().backward()
        return first, [p.grad for p in layer.parameters()], x, h, calls

    for hook in (False, True):
        ours, theirs = build(fusegrad, hook), build(torch, hook)
        for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)
        w, b = ours[1]
        arrays = [w.numpy(), b.numpy(), ours[2].numpy(), ours[3].detach().numpy()]
        for i in range(len(arrays)):
            for j in range(i + 1, len(arrays)):
                assert not np.shares_memory(arrays[i], arrays[j])
        assert ours[4] == theirs[4] == ([(4,), (4, 6)] * 2 if hook else [])
