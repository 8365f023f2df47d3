"""`fusegrad.func` against `torch.func` 2.13: values, gradients, which results carry history,
and error types and messages; finite differences for the Jacobians; per-example gradients
and model ensembling as users write them."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)
RNG = np.random.default_rng(0)
X = RNG.standard_normal(3)
Y = RNG.standard_normal(3)
M = RNG.standard_normal((4, 3))


def _np(obj):
    """Nested results with tensors as float64 arrays (and whether each requires grad)."""
    if isinstance(obj, (torch.Tensor, fusegrad.Tensor)):
        return ("T", obj.detach().numpy().astype(np.float64), tuple(obj.shape),
                obj.requires_grad)
    if isinstance(obj, dict):
        return {k: _np(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj).__name__, [_np(v) for v in obj]
    return obj


def _assert_same(got, want, rtol=1e-12, atol=1e-12):
    if isinstance(want, tuple) and want and want[0] == "T":
        assert got[0] == "T", (got, want)
        assert got[2] == want[2], (got[2], want[2])
        assert got[3] == want[3], "requires_grad differs"
        np.testing.assert_allclose(got[1], want[1], rtol=rtol, atol=atol)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            _assert_same(got[k], want[k], rtol, atol)
    elif isinstance(want, tuple):
        assert got[0] == want[0] and len(got[1]) == len(want[1]), (got, want)
        for g, w in zip(got[1], want[1]):
            _assert_same(g, w, rtol, atol)
    else:
        assert got == want


def same(fn, rtol=1e-12, atol=1e-12):
    """Run `fn(lib)` with torch and fusegrad; the results must agree."""
    want, got = (_np(fn(lib)) for lib in LIBS)
    _assert_same(got, want, rtol, atol)


def same_error(fn):
    """`fn(lib)` raises the same error type and message with torch and fusegrad."""
    raised = []
    for lib in LIBS:
        with pytest.raises(Exception) as info:
            fn(lib)
        raised.append((type(info.value).__name__, str(info.value)))
    assert raised[1] == raised[0]


def t(lib, data, **kw):
    return lib.tensor(np.asarray(data), dtype=lib.float64, **kw)


# ---------------------------------------------------------------- grad


GRAD_CASES = {
    "cube": lambda lib: lib.func.grad(lambda x: (x ** 3).sum())(t(lib, X)),
    "argnums 1": lambda lib: lib.func.grad(lambda x, y: (x.sin() * y).sum(), argnums=1)(
        t(lib, X), t(lib, Y)),
    "argnums -1": lambda lib: lib.func.grad(lambda x, y: (x * y.exp()).sum(), argnums=-1)(
        t(lib, X), t(lib, Y)),
    "argnums tuple": lambda lib: lib.func.grad(lambda x, y: (x * y * y).sum(),
                                               argnums=(0, 1))(t(lib, X), t(lib, Y)),
    "list input": lambda lib: lib.func.grad(lambda p: (p[0] * p[1].tanh()).sum())(
        [t(lib, X), t(lib, Y)]),
    "dict input": lambda lib: lib.func.grad(lambda d: (d["a"] ** 2 * d["b"]).sum())(
        {"a": t(lib, X), "b": t(lib, Y)}),
    "has_aux": lambda lib: lib.func.grad(
        lambda x: ((x ** 2).sum(), {"y": x * 2, "n": [x.sum()]}), has_aux=True)(t(lib, X)),
    "grad_and_value": lambda lib: lib.func.grad_and_value(lambda x: (x.sin() ** 2).sum())(
        t(lib, X)),
    "grad_and_value aux": lambda lib: lib.func.grad_and_value(
        lambda x: ((x ** 2).sum(), x.cos()), has_aux=True)(t(lib, X)),
    "unused": lambda lib: lib.func.grad(lambda x, y: x.sum(), argnums=1)(t(lib, X),
                                                                       t(lib, Y)),
    "independent": lambda lib: lib.func.grad(lambda x: x.detach().sum())(t(lib, X)),
    "integer output": lambda lib: lib.func.grad(lambda x: x.long().sum())(t(lib, X)),
    "keyword args": lambda lib: lib.func.grad(lambda x, *, s: (x * s).sum())(t(lib, X),
                                                                             s=2.5),
    "float32": lambda lib: lib.func.grad(lambda x: (x ** 2).sum())(
        lib.tensor([1.0, 2.0])),
    "inner no_grad": lambda lib: lib.func.grad(_inner_no_grad(lib))(t(lib, X)),
    "grad of grad": lambda lib: lib.func.grad(lib.func.grad(lambda x: x.sin() * x))(
        t(lib, 0.7)),
    "closure of the outer": lambda lib: lib.func.grad(_closure_of_outer(lib))(t(lib, 3.0)),
    "perturbation": lambda lib: lib.func.grad(_perturbation(lib))(t(lib, 3.0)),
}


def _inner_no_grad(lib):
    def f(x):
        with lib.no_grad():
            y = x * 2
        return (y * x).sum()
    return f


def _closure_of_outer(lib):
    return lambda x: lib.func.grad(lambda y: (x + y) ** 2)(lib.tensor(1.0, dtype=lib.float64))


def _perturbation(lib):
    """x * d/dy (x * y): the inner x is a constant of the inner transform."""
    return lambda x: x * lib.func.grad(lambda y: x * y)(x)


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grad_values(case):
    same(GRAD_CASES[case])


GRAD_ERRORS = {
    "non-scalar": lambda lib: lib.func.grad(lambda x: x * 2)(t(lib, X)),
    "argnums out of range": lambda lib: lib.func.grad(lambda x: x.sum(), argnums=1)(
        t(lib, X)),
    "argnums negative out of range": lambda lib: lib.func.grad(
        lambda x, y: x.sum(), argnums=-3)(t(lib, X), t(lib, Y)),
    "argnums float": lambda lib: lib.func.grad(lambda x: x.sum(), argnums=1.0)(t(lib, X)),
    "argnums list": lambda lib: lib.func.grad(lambda x: x.sum(), argnums=[0])(t(lib, X)),
    "argnums empty": lambda lib: lib.func.grad(lambda x: x.sum(), argnums=())(t(lib, X)),
    "argnums element": lambda lib: lib.func.grad(lambda x: x.sum(), argnums=(0, 1.0))(
        t(lib, X)),
    "argnums repeated": lambda lib: lib.func.grad(lambda x, y: x.sum(), argnums=(0, 0))(
        t(lib, X), t(lib, Y)),
    "no inputs": lambda lib: lib.func.grad(lambda: lib.tensor(1.0))(),
    "has_aux not a tuple": lambda lib: lib.func.grad(lambda x: x.sum(), has_aux=True)(
        t(lib, X)),
    "has_aux three": lambda lib: lib.func.grad(lambda x: (x.sum(), 1, 2), has_aux=True)(
        t(lib, X)),
    "has_aux list": lambda lib: lib.func.grad(lambda x: [x.sum(), x], has_aux=True)(
        t(lib, X)),
    "aux not tensors": lambda lib: lib.func.grad(lambda x: (x.sum(), {"a": 1}),
                                                 has_aux=True)(t(lib, X)),
    "output not a tensor": lambda lib: lib.func.grad(lambda x: 3.0)(t(lib, X)),
    "output a tuple": lambda lib: lib.func.grad(lambda x: (x.sum(),))(t(lib, X)),
    "integer input": lambda lib: lib.func.grad(lambda x: x.sum())(lib.arange(3)),
    "number input": lambda lib: lib.func.grad(lambda x: x)(3.0),
    "complex output": lambda lib: lib.func.grad(lambda x: (x * 1j).sum())(t(lib, X)),
}


@pytest.mark.parametrize("case", sorted(GRAD_ERRORS))
def test_grad_errors(case):
    same_error(GRAD_ERRORS[case])


def _history_cases(lib):
    """(result, requires_grad) in the situations where PyTorch keeps or drops history."""
    x = t(lib, X)
    xr = t(lib, X, requires_grad=True)
    w = t(lib, Y, requires_grad=True)
    cube = lib.func.grad(lambda v: (v ** 3).sum())
    out = {"plain": cube(x), "input requires grad": cube(xr),
           "closure requires grad": lib.func.grad(lambda v: (w * v ** 2).sum())(x)}
    with lib.no_grad():
        out["outer no_grad"] = cube(xr)
        out["outer no_grad, closure"] = lib.func.grad(lambda v: (w * v ** 3).sum())(x)
    out["grad of grad, input requires grad"] = lib.func.grad(
        lib.func.grad(lambda v: v.sin()))(t(lib, 0.5, requires_grad=True))
    return out


def test_results_carry_history_only_from_outside():
    same(_history_cases)


def test_backward_through_a_gradient():
    """`g = grad(f)(x); g.sum().backward()` differentiates the gradient (here: the Hessian's
    row sums) into x.grad, as in PyTorch."""
    def run(lib):
        x = t(lib, X, requires_grad=True)
        g = lib.func.grad(lambda v: (v.sin() * v ** 3).sum())(x)
        (g * t(lib, Y)).sum().backward()
        return x.grad
    same(run)


# ---------------------------------------------------------------- vjp, jvp, linearize


def _f(lib):
    return lambda x: x.sin() * 2


VJP_CASES = {
    "vjp": lambda lib: lib.func.vjp(_f(lib), t(lib, X))[1](t(lib, Y)),
    "vjp output": lambda lib: lib.func.vjp(_f(lib), t(lib, X))[0],
    "vjp two primals": lambda lib: lib.func.vjp(lambda a, b: a * b.exp(), t(lib, X),
                                                t(lib, Y))[1](t(lib, Y)),
    "vjp pytree": lambda lib: lib.func.vjp(
        lambda d: {"o": d["a"] * 2, "p": [d["a"].sum()]}, {"a": t(lib, X)})[1](
        {"o": t(lib, Y), "p": [t(lib, 1.5)]}),
    "vjp aux": lambda lib: lib.func.vjp(lambda x: (x * 3, x.sum()), t(lib, X),
                                        has_aux=True)[2],
    "vjp twice": lambda lib: _vjp_twice(lib),
    "vjp cotangent requires grad": lambda lib: lib.func.vjp(lambda x: x ** 2, t(lib, X))[1](
        t(lib, Y, requires_grad=True)),
    "jvp": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), (t(lib, Y),)),
    "jvp tuple out": lambda lib: lib.func.jvp(lambda x: (x, x.exp() * 2), (t(lib, X),),
                                              (t(lib, Y),)),
    "jvp two primals": lambda lib: lib.func.jvp(lambda a, b: (a * b).sum(),
                                                (t(lib, X), t(lib, Y)),
                                                (t(lib, Y), t(lib, X))),
    "jvp aux": lambda lib: lib.func.jvp(lambda x: (x.cos(), {"a": x}), (t(lib, X),),
                                        (t(lib, Y),), has_aux=True),
    "jvp float32 tangent": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),),
                                                    (t(lib, Y).float(),)),
    "jvp input requires grad": lambda lib: lib.func.jvp(
        lambda a: a ** 2, (t(lib, X, requires_grad=True),), (t(lib, Y),)),
    "linearize": lambda lib: _linearized(lib),
}


def _vjp_twice(lib):
    _, fn = lib.func.vjp(lambda x: x.exp() * x, t(lib, X))
    return fn(t(lib, Y)), fn(t(lib, X))


def _linearized(lib):
    out, fn = lib.func.linearize(lambda x: x.sin() * x, t(lib, X))
    return out, fn(t(lib, Y)), fn(t(lib, X))


@pytest.mark.parametrize("case", sorted(VJP_CASES))
def test_vjp_jvp_values(case):
    same(VJP_CASES[case])


VJP_ERRORS = {
    "vjp cotangent shape": lambda lib: lib.func.vjp(_f(lib), t(lib, X))[1](t(lib, X[:2])),
    "vjp cotangent structure": lambda lib: lib.func.vjp(_f(lib), t(lib, X))[1](
        (t(lib, X),)),
    "vjp has_aux": lambda lib: lib.func.vjp(_f(lib), t(lib, X), has_aux=True),
    "vjp output": lambda lib: lib.func.vjp(lambda x: 3, t(lib, X)),
    "vjp primal": lambda lib: lib.func.vjp(lambda x: x, 3.0),
    "jvp primals not a tuple": lambda lib: lib.func.jvp(_f(lib), t(lib, X), t(lib, X)),
    "jvp primals a list": lambda lib: lib.func.jvp(_f(lib), [t(lib, X)], [t(lib, X)]),
    "jvp structures": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), (t(lib, X), t(lib, X))),
    "jvp tangents not a tuple": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), t(lib, X)),
    "jvp dict keys": lambda lib: lib.func.jvp(lambda d: d["a"], ({"a": t(lib, X)},),
                                              ({"b": t(lib, X)},)),
    "jvp tangent shape": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), (t(lib, X[:2]),)),
    "jvp empty": lambda lib: lib.func.jvp(lambda: t(lib, X), (), ()),
    "jvp primal type": lambda lib: lib.func.jvp(lambda x: x, (3.0,), (3.0,)),
    "jvp tangent type": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), (3.0,)),
    "jvp has_aux": lambda lib: lib.func.jvp(_f(lib), (t(lib, X),), (t(lib, X),),
                                            has_aux=True),
    "jvp output": lambda lib: lib.func.jvp(lambda x: 3, (t(lib, X),), (t(lib, X),)),
    "jvp strict": lambda lib: lib.func.jvp(lambda x: lib.ones(2), (t(lib, X),), (t(lib, X),),
                                           strict=True),
    "linearize shape": lambda lib: lib.func.linearize(_f(lib), t(lib, X))[1](t(lib, X[:2])),
    "linearize dtype": lambda lib: lib.func.linearize(_f(lib), t(lib, X))[1](
        t(lib, X).float()),
    "linearize structure": lambda lib: lib.func.linearize(_f(lib), t(lib, X))[1](
        (t(lib, X),)),
}


@pytest.mark.parametrize("case", sorted(VJP_ERRORS))
def test_vjp_jvp_errors(case):
    same_error(VJP_ERRORS[case])


# ---------------------------------------------------------------- Jacobians


def _g(lib):
    return lambda a, b: (a.sin() * b, (a * b.exp()).sum())


JAC_CASES = {
    "jacrev": lambda lib: lib.func.jacrev(_f(lib))(t(lib, X)),
    "jacrev matrix": lambda lib: lib.func.jacrev(lambda m: m @ m.T)(t(lib, M)),
    "jacrev argnums": lambda lib: lib.func.jacrev(_g(lib), argnums=(0, 1))(t(lib, X),
                                                                          t(lib, Y)),
    "jacrev argnum 1": lambda lib: lib.func.jacrev(_g(lib), argnums=1)(t(lib, X), t(lib, Y)),
    "jacrev aux": lambda lib: lib.func.jacrev(lambda a: (a * 2, a.sum()), has_aux=True)(
        t(lib, X)),
    "jacrev pytree": lambda lib: lib.func.jacrev(lambda d: {"o": d["a"] * d["b"]})(
        {"a": t(lib, X), "b": t(lib, Y)}),
    "jacrev chunk_size": lambda lib: lib.func.jacrev(_f(lib), chunk_size=1)(t(lib, X)),
    "jacrev 0-dim": lambda lib: lib.func.jacrev(lambda a: a * 2)(t(lib, 2.0)),
    "jacrev input requires grad": lambda lib: lib.func.jacrev(lambda a: a ** 2)(
        t(lib, X, requires_grad=True)),
    "jacfwd": lambda lib: lib.func.jacfwd(_f(lib))(t(lib, X)),
    "jacfwd argnums": lambda lib: lib.func.jacfwd(_g(lib), argnums=(0, 1))(t(lib, X),
                                                                          t(lib, Y)),
    "jacfwd aux": lambda lib: lib.func.jacfwd(lambda a: (a * 2, a.sum()), has_aux=True)(
        t(lib, X)),
    "jacfwd random different": lambda lib: lib.func.jacfwd(
        lambda a: a * 3 + lib.rand(3, dtype=lib.float64) * 0, randomness="different")(
        t(lib, X)),
    "hessian": lambda lib: lib.func.hessian(lambda a: (a ** 3 * a.sin()).sum())(t(lib, X)),
    "hessian argnums": lambda lib: lib.func.hessian(lambda a, b: (a ** 2 * b.exp()).sum(),
                                                    argnums=(0, 1))(t(lib, X), t(lib, Y)),
    "hessian pytree": lambda lib: lib.func.hessian(lambda d: (d["a"] ** 3).sum())(
        {"a": t(lib, X)}),
    "jacfwd of jacrev": lambda lib: lib.func.jacfwd(lib.func.jacrev(
        lambda a: (a.exp() * a).sum()))(t(lib, X)),
    "jacrev of jacrev": lambda lib: lib.func.jacrev(lib.func.jacrev(
        lambda a: a.sin() * a.sum()))(t(lib, X)),
}


@pytest.mark.parametrize("case", sorted(JAC_CASES))
def test_jacobian_values(case):
    same(JAC_CASES[case])


JAC_ERRORS = {
    "jacrev chunk_size 0": lambda lib: lib.func.jacrev(_f(lib), chunk_size=0)(t(lib, X)),
    "jacrev chunk_size float": lambda lib: lib.func.jacrev(_f(lib), chunk_size=1.5)(
        t(lib, X)),
    "jacrev argnums": lambda lib: lib.func.jacrev(_f(lib), argnums=2)(t(lib, X)),
    "jacrev output": lambda lib: lib.func.jacrev(lambda x: 3.0)(t(lib, X)),
    "jacrev aux": lambda lib: lib.func.jacrev(lambda a: (a * 2, 3), has_aux=True)(t(lib, X)),
    "jacrev integer input": lambda lib: lib.func.jacrev(lambda a: a * 2)(lib.arange(3)),
    "jacfwd integer input": lambda lib: lib.func.jacfwd(lambda a: a * 2)(lib.arange(3)),
    "jacfwd argnums": lambda lib: lib.func.jacfwd(_f(lib), argnums=2)(t(lib, X)),
    "jacfwd randomness": lambda lib: lib.func.jacfwd(_f(lib), randomness="foo")(t(lib, X)),
    "jacfwd random error": lambda lib: lib.func.jacfwd(
        lambda a: a * lib.rand(3, dtype=lib.float64))(t(lib, X)),
}


@pytest.mark.parametrize("case", sorted(JAC_ERRORS))
def test_jacobian_errors(case):
    same_error(JAC_ERRORS[case])


def test_jacobian_and_hessian_against_finite_differences():
    """Central differences of f and of its gradient, in float64."""
    def f(v):
        return (v.sin() * v.roll(1) + v ** 3 / 3).sum()

    x = fusegrad.tensor(X, dtype=fusegrad.float64)
    eps = 1e-6
    g = fusegrad.func.grad(f)(x).numpy()
    h = fusegrad.func.hessian(f)(x).numpy()
    basis = np.eye(3)
    fd_g = np.array([(f(x + eps * fusegrad.tensor(e)).item() -
                      f(x - eps * fusegrad.tensor(e)).item()) / (2 * eps) for e in basis])
    grad = fusegrad.func.grad(f)
    fd_h = np.stack([(grad(x + eps * fusegrad.tensor(e)).numpy() -
                      grad(x - eps * fusegrad.tensor(e)).numpy()) / (2 * eps) for e in basis])
    np.testing.assert_allclose(g, fd_g, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(h, fd_h, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, h.T, rtol=1e-12)


# ---------------------------------------------------------------- vmap


def test_vmap_is_the_top_level_vmap():
    assert fusegrad.vmap is fusegrad.func.vmap
    assert torch.vmap is torch.func.vmap


VMAP_CASES = {
    "in_dims tuple": lambda lib: lib.func.vmap(lambda u, v: (u * v).sum(), in_dims=(0, None))(
        t(lib, M), t(lib, X)),
    "in_dims negative": lambda lib: lib.func.vmap(lambda u, v: u * v, in_dims=(1, -2))(
        t(lib, M), t(lib, M.T)),
    "in_dims nested dict": lambda lib: lib.func.vmap(
        lambda d: d["a"] + d["b"], in_dims=({"a": 0, "b": None},))(
        {"a": t(lib, M), "b": t(lib, X)}),
    "in_dims int over a dict": lambda lib: lib.func.vmap(lambda d: d["a"] * d["b"])(
        {"a": t(lib, M), "b": t(lib, M)}),
    "non-tensor unmapped": lambda lib: lib.func.vmap(lambda u, s: u * s, in_dims=(0, None))(
        t(lib, M), 3.0),
    "keyword args": lambda lib: lib.func.vmap(lambda u, *, s: u * s)(t(lib, M), s=t(lib, X)),
    "out_dims 1": lambda lib: lib.func.vmap(lambda u: u * 2, out_dims=1)(t(lib, M)),
    "out_dims -1": lambda lib: lib.func.vmap(lambda u: u * 2, out_dims=-1)(t(lib, M)),
    "out_dims tuple": lambda lib: lib.func.vmap(lambda u: (u, u.sum()), out_dims=(1, 0))(
        t(lib, M)),
    "out_dims None": lambda lib: lib.func.vmap(lambda u: (u, lib.ones(2)),
                                               out_dims=(0, None))(t(lib, M)),
    "out_dims dict": lambda lib: lib.func.vmap(lambda u: {"s": u.sum(), "l": [u]},
                                               out_dims={"s": 0, "l": [1]})(t(lib, M)),
    "pytree output": lambda lib: lib.func.vmap(lambda u: {"s": u.sum(), "l": [u]})(
        t(lib, M)),
    "unbatched output": lambda lib: lib.func.vmap(lambda u: lib.ones(2))(t(lib, M)),
    "chunk_size": lambda lib: lib.func.vmap(lambda u: u * 2, chunk_size=3)(t(lib, M)),
    "nested": lambda lib: lib.func.vmap(lib.func.vmap(lambda u: u * u))(t(lib, M)),
    "nested in_dims": lambda lib: lib.func.vmap(lib.func.vmap(lambda u, v: u @ v,
                                                              in_dims=(None, 1)),
                                                in_dims=(0, None))(t(lib, M), t(lib, M.T)),
    "vmap of grad": lambda lib: lib.func.vmap(lib.func.grad(lambda u: (u.sin() * u).sum()))(
        t(lib, M)),
    "vmap of jacrev": lambda lib: lib.func.vmap(lib.func.jacrev(lambda u: u.exp() * u))(
        t(lib, M)),
    "grad of vmap": lambda lib: lib.func.grad(
        lambda w: lib.func.vmap(lambda row: (row * w).sin().sum())(t(lib, M)).sum())(
        t(lib, X)),
    "vmap of vjp_fn": lambda lib: lib.func.vmap(lib.func.vjp(lambda u: u.sin(), t(lib, X))[1])(
        lib.eye(3, dtype=lib.float64)),
    "eval dropout": lambda lib: lib.func.vmap(
        lambda u: lib.nn.functional.dropout(u, 0.5, training=False))(t(lib, M)),
    "history": lambda lib: lib.func.vmap(lambda u: u * 2)(t(lib, M, requires_grad=True)),
}


@pytest.mark.parametrize("case", sorted(VMAP_CASES))
def test_vmap_values(case):
    same(VMAP_CASES[case])


def test_vmap_gradients_flow_back():
    def run(lib):
        x = t(lib, M, requires_grad=True)
        out = lib.func.vmap(lambda u, v: (u * v).sum(), in_dims=(0, None))(x, t(lib, X))
        pair = lib.func.vmap(lambda u: (u * 2, u.sum()), out_dims=(1, 0))(x)
        (out.sum() + pair[0].sum() + pair[1].sum()).backward()
        return x.grad
    same(run)


VMAP_ERRORS = {
    "sizes": lambda lib: lib.func.vmap(lambda a, b: a)(t(lib, M), t(lib, M.T)),
    "in_dims list": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=[0, 1])(
        t(lib, M), t(lib, M)),
    "in_dims str": lambda lib: lib.func.vmap(lambda a, b: a, in_dims="a")(t(lib, M),
                                                                          t(lib, M)),
    "in_dims short": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(0,))(t(lib, M),
                                                                             t(lib, M)),
    "in_dims long": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(0, 0, 0))(
        t(lib, M), t(lib, M)),
    "in_dims out of range": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(0, 5))(
        t(lib, M), t(lib, M)),
    "in_dims float": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(0, 1.0))(
        t(lib, M), t(lib, M)),
    "in_dims over a number": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(0, 0))(
        t(lib, M), 3.0),
    "in_dims dict keys": lambda lib: lib.func.vmap(lambda d: d["a"], in_dims=({"a": 0},))(
        {"a": t(lib, M), "b": t(lib, X)}),
    "nothing mapped": lambda lib: lib.func.vmap(lambda a, b: a, in_dims=(None, None))(
        t(lib, M), t(lib, M)),
    "no inputs": lambda lib: lib.func.vmap(lambda: lib.ones(2))(),
    "0-dim input": lambda lib: lib.func.vmap(lambda a: a)(t(lib, 1.0)),
    "out_dims out of range": lambda lib: lib.func.vmap(lambda a: a * 2, out_dims=3)(
        t(lib, M)),
    "out_dims short": lambda lib: lib.func.vmap(lambda a: (a, a), out_dims=(0,))(t(lib, M)),
    "out_dims float": lambda lib: lib.func.vmap(lambda a: a, out_dims=1.0)(t(lib, M)),
    "out_dims None, mapped output": lambda lib: lib.func.vmap(lambda a: a, out_dims=None)(
        t(lib, M)),
    "number output": lambda lib: lib.func.vmap(lambda a: 3.0)(t(lib, M)),
    "None output": lambda lib: lib.func.vmap(lambda a: None)(t(lib, M)),
    "chunk_size 0": lambda lib: lib.func.vmap(lambda a: a, chunk_size=0)(t(lib, M)),
    "chunk_size -1": lambda lib: lib.func.vmap(lambda a: a, chunk_size=-1)(t(lib, M)),
    "chunk_size float": lambda lib: lib.func.vmap(lambda a: a, chunk_size=1.5)(t(lib, M)),
    "randomness value": lambda lib: lib.func.vmap(lambda a: a, randomness="x")(t(lib, M)),
    "random op": lambda lib: lib.func.vmap(lambda a: a * lib.rand(3))(t(lib, M)),
    "rand_like": lambda lib: lib.func.vmap(lambda a: lib.rand_like(a))(t(lib, M)),
    "dropout": lambda lib: lib.func.vmap(lambda a: lib.nn.functional.dropout(a, 0.5))(
        t(lib, M)),
    "normal_": lambda lib: lib.func.vmap(lambda a: a.clone().normal_())(t(lib, M)),
    "not callable": lambda lib: lib.func.vmap(3)(t(lib, M)),
}


@pytest.mark.parametrize("case", sorted(VMAP_ERRORS))
def test_vmap_errors(case):
    same_error(VMAP_ERRORS[case])


@pytest.mark.parametrize("lib", LIBS)
def test_vmap_randomness_same_and_different(lib):
    """"same" gives every example the same draws, "different" its own, as PyTorch's."""
    x = lib.zeros(4, 3)
    same_rows = lib.func.vmap(lambda a: a + lib.rand(3), randomness="same")(x)
    assert all(lib.equal(row, same_rows[0]) for row in same_rows)
    dropped = lib.func.vmap(lambda a: lib.nn.functional.dropout(a + 1, 0.5),
                            randomness="same")(lib.zeros(4, 50))
    assert all(lib.equal(row, dropped[0]) for row in dropped)
    different = lib.func.vmap(lambda a: a + lib.rand(3), randomness="different")(x)
    assert not lib.equal(different[0], different[1])


@pytest.mark.parametrize("lib", LIBS)
def test_vmap_randomness_with_a_generator_and_the_rng_state(lib):
    """An explicit generator follows the rules as the default one; reading the generator
    state is no draw."""
    x = lib.zeros(3, 2)
    gen = lib.Generator()
    kept = lib.func.vmap(lambda a: a + lib.get_rng_state().float().sum() * 0)(x)
    assert kept.shape == (3, 2)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        lib.func.vmap(lambda a: a + lib.rand(2, generator=gen))(x)
    rows = lib.func.vmap(lambda a: a + lib.rand(2, generator=gen), randomness="same")(x)
    assert all(lib.equal(row, rows[0]) for row in rows)


def test_vmap_randomness_rules_are_the_calling_threads():
    """Another thread draws freely while a vmap in "error" mode runs (PyTorch's transform
    stack is per thread too)."""
    import threading

    drawn = []

    def other():
        drawn.append(fusegrad.rand(2).shape)

    def f(a):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        return a * 2

    fusegrad.func.vmap(f)(fusegrad.zeros(2, 3))
    assert drawn == [(2,), (2,)]


def test_vmap_same_randomness_draws_once_from_the_generator():
    """After a "same" vmap the generator stands where one example's draws left it."""
    fusegrad.manual_seed(7)
    fusegrad.func.vmap(lambda a: a + fusegrad.rand(3), randomness="same")(fusegrad.zeros(5, 3))
    after = fusegrad.rand(2)
    fusegrad.manual_seed(7)
    fusegrad.rand(3)
    assert fusegrad.equal(after, fusegrad.rand(2))


# ---------------------------------------------------------------- functional_call


class _Net:
    """The same small MLP in torch and fusegrad, with the same weights."""

    def __init__(self, lib, widths=(5, 8, 3), batch_norm=False):
        layers = []
        for a, b in zip(widths[:-1], widths[1:]):
            layers += [lib.nn.Linear(a, b), lib.nn.Tanh()]
        if batch_norm:
            layers.append(lib.nn.BatchNorm1d(widths[-1]))
        self.model = lib.nn.Sequential(*layers[:-1] if not batch_norm else layers).double()


def _models(widths=(5, 8, 3), batch_norm=False):
    tm = _Net(torch, widths, batch_norm).model
    fm = _Net(fusegrad, widths, batch_norm).model
    fm.load_state_dict({k: fusegrad.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})
    return {torch: tm, fusegrad: fm}


def test_functional_call_values_and_gradients():
    models = _models(batch_norm=True)
    inp = RNG.standard_normal((6, 5))

    def run(lib):
        m = models[lib]
        params = {k: v.detach().mul(0.5).requires_grad_() for k, v in m.named_parameters()}
        buffers = {k: v.clone() for k, v in m.named_buffers()}
        out = lib.func.functional_call(m, (params, buffers), (t(lib, inp),))
        out.pow(2).sum().backward()
        return out, {k: p.grad for k, p in params.items()}, buffers, \
            {k: p.grad for k, p in m.named_parameters()}
    same(run)


@pytest.mark.parametrize("lib", LIBS)
def test_functional_call_restores_the_module_even_on_error(lib):
    """Inside the call the given tensors are the module's (plain tensors in `_parameters`);
    afterwards the Parameters are back, after an exception too, and an extra name is gone."""
    inner = lib.nn.Linear(2, 2)
    before = dict(inner.named_parameters())
    seen = []

    class Boom(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = inner

        def forward(self, x):
            seen.append((type(self.lin.weight), "weight" in self.lin._parameters,
                         float(self.extra.sum())))
            raise ValueError("boom")

    module = Boom()
    with pytest.raises(ValueError, match="boom"):
        lib.func.functional_call(module, {"lin.weight": lib.zeros(2, 2),
                                          "extra": lib.ones(3)}, lib.ones(2))
    assert seen == [(lib.Tensor, True, 3.0)]
    assert dict(inner.named_parameters()) == before
    assert all(isinstance(p, lib.nn.Parameter) for p in inner.parameters())
    assert not hasattr(module, "extra")


def _tied(lib, three=True):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 2, bias=False)
            self.b = lib.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            if three:
                self.c = lib.nn.Linear(2, 2, bias=False)
                self.c.weight = self.a.weight

        def forward(self, x):
            return self.a(x) + 2 * self.b(x)
    return Tied()


CALL_CASES = {
    "single tensor args": lambda lib: lib.func.functional_call(
        lib.nn.Linear(2, 2), {"weight": lib.eye(2), "bias": lib.ones(2)}, lib.ones(3, 2)),
    "kwargs": lambda lib: lib.func.functional_call(
        lib.nn.Linear(2, 2), {"weight": lib.eye(2), "bias": lib.ones(2)}, (),
        {"input": lib.ones(1, 2)}),
    "tied": lambda lib: lib.func.functional_call(_tied(lib), {"a.weight": lib.eye(2)},
                                                 lib.ones(1, 2)),
    "tied strict": lambda lib: lib.func.functional_call(_tied(lib), {"b.weight": lib.eye(2)},
                                                        lib.ones(1, 2), strict=True),
    "tied, same tensor twice": lambda lib: _tied_twice(lib),
    "unknown name": lambda lib: lib.func.functional_call(
        lib.nn.Linear(2, 2), {"weight": lib.eye(2), "bias": lib.ones(2),
                              "foo": lib.ones(1)}, lib.ones(1, 2)),
}


def _tied_twice(lib):
    e = lib.eye(2)
    return lib.func.functional_call(_tied(lib, three=False), {"a.weight": e, "b.weight": e},
                                    lib.ones(1, 2))


@pytest.mark.parametrize("case", sorted(CALL_CASES))
def test_functional_call_cases(case):
    same(CALL_CASES[case])


CALL_ERRORS = {
    "strict missing": lambda lib: lib.func.functional_call(
        lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2)),
        {"0.weight": lib.zeros(2, 2)}, lib.ones(3, 2), strict=True),
    "strict both": lambda lib: lib.func.functional_call(
        lib.nn.Linear(2, 2), {"weight": lib.zeros(2, 2), "zz": lib.ones(1),
                              "aa": lib.ones(1)}, lib.ones(1, 2), strict=True),
    "tied strict without tying": lambda lib: lib.func.functional_call(
        _tied(lib), {"b.weight": lib.eye(2)}, lib.ones(1, 2), strict=True,
        tie_weights=False),
    "tied, two values": lambda lib: lib.func.functional_call(
        _tied(lib), {"c.weight": lib.eye(2), "b.weight": lib.zeros(2, 2),
                     "a.weight": lib.ones(2, 2)}, lib.ones(1, 2)),
    "repeated keys": lambda lib: lib.func.functional_call(
        lib.nn.Linear(2, 2), ({"weight": lib.eye(2)}, {"weight": lib.eye(2)}),
        lib.ones(1, 2)),
    "not dicts": lambda lib: lib.func.functional_call(lib.nn.Linear(2, 2), [1],
                                                      lib.ones(1, 2)),
    "not a dict": lambda lib: lib.func.functional_call(lib.nn.Linear(2, 2), 3,
                                                       lib.ones(1, 2)),
    "missing submodule": lambda lib: lib.func.functional_call(
        lib.nn.Sequential(lib.nn.Linear(2, 2)), {"9.foo": lib.ones(1)}, lib.ones(1, 2)),
}


@pytest.mark.parametrize("case", sorted(CALL_ERRORS))
def test_functional_call_errors(case):
    same_error(CALL_ERRORS[case])


def test_stateless_functional_call_warns_as_pytorch():
    results = []
    for lib in LIBS:
        m = lib.nn.Linear(2, 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lib.nn.utils.stateless.functional_call(
                m, {"weight": lib.eye(2), "bias": lib.zeros(2)}, (lib.ones(1, 2),))
        results.append((out.tolist(), [(type(w.message).__name__, str(w.message))
                                       for w in caught]))
    assert results[1] == results[0]


# ---------------------------------------------------------------- realistic uses


def test_per_example_gradients_of_an_mlp():
    """vmap(grad(loss of functional_call)) gives each example's gradient, equal to
    PyTorch's and to one backward per example."""
    models = _models()
    data = RNG.standard_normal((7, 5))
    targets = RNG.integers(0, 3, 7)

    def run(lib):
        m = models[lib]
        params = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p, x, y):
            logits = lib.func.functional_call(m, p, (x.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(logits, y.unsqueeze(0))

        return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
            params, t(lib, data), lib.tensor(targets))
    same(run)
    fm = models[fusegrad]
    per_example = run(fusegrad)
    for i in range(3):
        fm.zero_grad()
        logits = fm(fusegrad.tensor(data[i:i + 1]))
        fusegrad.nn.functional.cross_entropy(logits, fusegrad.tensor(targets[i:i + 1])
                                             ).backward()
        for k, p in fm.named_parameters():
            np.testing.assert_allclose(per_example[k][i].numpy(), p.grad.numpy(),
                                       rtol=1e-12, atol=1e-14)


def test_model_ensembling_with_stack_module_state():
    """Several models' states stacked and run by vmap over functional_call, as PyTorch's
    ensembling recipe; the stacked parameters are leaves that gradients reach."""
    torch_models = [_Net(torch).model for _ in range(3)]
    ours = []
    for tm in torch_models:
        fm = _Net(fusegrad).model
        fm.load_state_dict({k: fusegrad.tensor(v.detach().numpy())
                            for k, v in tm.state_dict().items()})
        ours.append(fm)
    models = {torch: torch_models, fusegrad: ours}
    data = RNG.standard_normal((4, 5))

    def run(lib):
        params, buffers = lib.func.stack_module_state(models[lib])
        base = models[lib][0]

        def one(p, b, x):
            return lib.func.functional_call(base, (p, b), (x,))

        out = lib.func.vmap(one, in_dims=(0, 0, None))(params, buffers, t(lib, data))
        out.sum().backward()
        return out, params, {k: p.grad for k, p in params.items()}, \
            [m(t(lib, data)) for m in models[lib]]
    same(run)


STACK_ERRORS = {
    "empty": lambda lib: lib.func.stack_module_state([]),
    "sizes": lambda lib: lib.func.stack_module_state([lib.nn.Linear(2, 3),
                                                      lib.nn.Linear(2, 4)]),
    "names": lambda lib: lib.func.stack_module_state([lib.nn.Linear(2, 3),
                                                      lib.nn.Linear(2, 3, bias=False)]),
    "modes": lambda lib: lib.func.stack_module_state([lib.nn.Linear(2, 3),
                                                      lib.nn.Linear(2, 3).eval()]),
    "requires_grad": lambda lib: lib.func.stack_module_state(
        [lib.nn.Linear(2, 3), lib.nn.Linear(2, 3).requires_grad_(False)]),
}


@pytest.mark.parametrize("case", sorted(STACK_ERRORS))
def test_stack_module_state_errors(case):
    same_error(STACK_ERRORS[case])


def test_stack_module_state_buffers():
    def run(lib):
        bns = [lib.nn.BatchNorm1d(2) for _ in range(2)]
        with lib.no_grad():
            bns[1].running_mean.fill_(3.0)
        return lib.func.stack_module_state(bns)
    same(run)
