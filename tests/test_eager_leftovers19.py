"""Eager fidelity against torch 2.13: the gradient of a broadcast to a 0-d tensor (a full
sum, so jvp's tangent of `x.sin().sum()` too), window functions refusing a shape parameter
given without the earlier ones, and saved-tensor hooks and the reentrant checkpoint under
function transforms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from oracle import expression_cases, outcome

import fusegrad as fg

# ---------------------------------------------------------------- sums to a 0-d shape


def _chain(fn, depth=3):
    """The node names from `fn` down its first edges."""
    names = []
    while fn is not None and len(names) < depth:
        names.append(type(fn).__name__)
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return names


@pytest.mark.parametrize("rg", [False, True])
@pytest.mark.parametrize("shape", [(2,), (2, 3)])
def test_jvp_tangent_of_full_sum(rg, shape):
    got = []
    for L in (torch, fg):
        x = L.arange(float(math.prod(shape))).reshape(shape).requires_grad_(rg)
        primal, tangent = L.func.jvp(lambda a: a.sin().sum(), (x,), (L.ones(shape),))
        got.append((_chain(tangent.grad_fn, 1), tangent.detach().tolist()))
    assert got[0][0] == got[1][0]
    assert got[0][1] == pytest.approx(got[1][1], rel=1e-6)


@pytest.mark.parametrize("src,dst", [((), (3,)), ((), (2, 3)), ((1,), (3,)), ((3,), (2, 3))])
def test_double_backward_of_broadcast(src, dst):
    got = []
    for L in (torch, fg):
        x = L.ones(src, requires_grad=True)
        v = L.arange(float(L.ones(dst).numel())).reshape(dst).requires_grad_()
        g, = L.autograd.grad(x * L.full(dst, 2.0), x, v, create_graph=True)
        gg, = L.autograd.grad(g.sum(), v)
        got.append((_chain(g.grad_fn), g.tolist(), gg.tolist()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- window parameters


@pytest.mark.parametrize("expression", expression_cases("""
    L.kaiser_window(5, beta=4.0)
    L.kaiser_window(5, beta=4.0, periodic=False)
    L.kaiser_window(5, False, beta=4.0, dtype=L.float64)
    L.kaiser_window(5, True, 4.0)
    L.kaiser_window(6)
    L.kaiser_window(5, beta=L.tensor(1.0))
    L.hamming_window(5, alpha=0.5)
    L.hamming_window(5, True, beta=0.5)
    L.hamming_window(5, periodic=True, alpha=0.5, beta=0.4)
    L.hamming_window(5, False, 0.5)
    L.hamming_window(4)
"""))
def test_window_shape_parameters(expression):
    # (values agree to float32 rounding only: fusegrad computes windows in float64)
    got = [outcome(lambda L=L: eval(expression, {"L": L}), _plain)  # noqa: S307
           for L in (torch, fg)]
    _same(got)


# ---------------------------------------------------------------- hooks under transforms


def _hooked(L):
    def f(x):
        with L.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            return (x.sin() * x).sum()
    return f


def _checkpointed(L, reentrant):
    def f(x):
        return L.utils.checkpoint.checkpoint(lambda a: a.sin() * a, x,
                                             use_reentrant=reentrant).sum()
    return f


_CALLS = {
    "grad": lambda L, f, x: L.func.grad(f)(x),
    "vjp": lambda L, f, x: L.func.vjp(f, x)[0],
    "jacrev": lambda L, f, x: L.func.jacrev(f)(x),
    "hessian": lambda L, f, x: L.func.hessian(f)(x),
    "jvp": lambda L, f, x: L.func.jvp(f, (x,), (L.ones(3),)),
    "jacfwd": lambda L, f, x: L.func.jacfwd(f)(x),
    "vmap": lambda L, f, x: L.func.vmap(f)(x.expand(2, 3)),
}


@pytest.mark.parametrize("body", ["hooks", "checkpoint", "reentrant"])
@pytest.mark.parametrize("transform", list(_CALLS))
def test_saved_hooks_and_checkpoint_under_transforms(body, transform):
    def run(L):
        f = {"hooks": lambda: _hooked(L), "checkpoint": lambda: _checkpointed(L, False),
             "reentrant": lambda: _checkpointed(L, True)}[body]()
        return _CALLS[transform](L, f, L.linspace(0.1, 0.9, 3))

    _same([outcome(lambda L=L: run(L), _plain) for L in (torch, fg)])


def _same(got: list) -> None:
    """The same error (type and message), or the same values up to float32 rounding."""
    assert got[0][0] == got[1][0], got
    if got[0][0] == "error":
        assert got[0] == got[1]
    else:
        assert got[0][1:] == pytest.approx(got[1][1:], rel=1e-5, abs=1e-6)


def _plain(r):
    """Values of a result (nested tuples of tensors) as flat floats."""
    if isinstance(r, (tuple, list)):
        return ("ok",) + tuple(v for x in r for v in _plain(x)[1:])
    return ("ok",) + tuple(r.detach().reshape(-1).tolist())


def test_reverse_transform_refused_while_hooks_active():
    got = []
    for L in (torch, fg):
        with L.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            got.append(outcome(lambda L=L: L.func.grad(lambda a: a.sin().sum())(L.ones(2)),
                               _plain))
            got.append(outcome(lambda L=L: L.func.jvp(lambda a: a.sin(), (L.ones(2),),
                                                      (L.ones(2),)), _plain))
    assert got[0] == got[2] and got[0][0] == "error"
    assert got[1][0] == got[3][0] == "ok"


def test_nan_reductions_gradients_at_nan_inputs_follow_torchs_product():
    """nansum's gradient is the incoming gradient times the not-NaN mask, as PyTorch's
    formula: an infinite incoming gradient gives NaN at NaN inputs, so nanmean over an
    all-NaN slice has NaN gradients there (a selection gave 0)."""
    data = [[0.1, float("nan"), 0.3], [0.2, float("nan"), float("nan")]]
    got = []
    for lib in (torch, fg):
        x = lib.tensor(data, requires_grad=True)
        lib.nanmean(x, 0).sum().backward()
        y = lib.tensor(data, requires_grad=True)
        y.nansum().backward(lib.tensor(float("inf")))
        got.append((x.grad.tolist(), y.grad.tolist()))
    np.testing.assert_array_equal(np.array(got[1][0]), np.array(got[0][0]))
    np.testing.assert_array_equal(np.array(got[1][1]), np.array(got[0][1]))
    assert np.isnan(got[1][0][0][1]) and got[1][0][1][2] == 0.0
