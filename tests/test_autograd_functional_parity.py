"""`fusegrad.autograd.functional` and `gradcheck` against PyTorch 2.13: forward-mode Jacobians
(values, NaN/inf placement, containers and strides), `strict=True` errors, argument checks,
and gradcheck's handling of outputs that do not require grad."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _x(lib):
    return lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)


def _y(lib):
    return lib.tensor([1.0, 2.0], dtype=lib.float64)


def _desc(obj):
    """Nested result as comparable data: container types, and each tensor's values, dtype,
    shape and strides."""
    if isinstance(obj, (torch.Tensor, fusegrad.Tensor)):
        return ("T", obj.detach().numpy().astype(np.float64), str(obj.dtype).split(".")[-1],
                tuple(obj.shape), tuple(obj.stride()))
    if isinstance(obj, (tuple, list)):
        return type(obj).__name__, [_desc(v) for v in obj]
    return obj


def _same(got, want):
    if isinstance(want, tuple) and want and want[0] == "T":
        assert got[0] == "T" and got[2:] == want[2:], (got, want)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12, equal_nan=True)
    elif isinstance(want, tuple):
        assert got[0] == want[0] and len(got[1]) == len(want[1]), (got, want)
        for g, w in zip(got[1], want[1]):
            _same(g, w)
    else:
        assert got == want


def same(fn):
    want, got = (_desc(fn(lib)) for lib in LIBS)
    _same(got, want)


def same_error(fn):
    raised = []
    for lib in LIBS:
        with pytest.raises(Exception) as info:
            fn(lib)
        raised.append((type(info.value).__name__, str(info.value)))
    assert raised[1] == raised[0]


def _where(lib):
    return lambda x: lib.where(x > 0, x.sqrt(), x ** 2)


FORWARD = {
    "where": lambda L: L.autograd.functional.jacobian(
        _where(L), L.tensor([-1.0, 4.0]), vectorize=True, strategy="forward-mode"),
    "sqrt_at_zero": lambda L: L.autograd.functional.jacobian(
        L.sqrt, L.tensor([1.0, 0.0]), vectorize=True, strategy="forward-mode"),
    "tuple_in_out": lambda L: L.autograd.functional.jacobian(
        lambda a, b: (a * b.sum(), b * a[0]), (_x(L), _y(L)), vectorize=True,
        strategy="forward-mode"),
    "tuple_out": lambda L: L.autograd.functional.jacobian(
        lambda a: (a.sin(), a.sum()), _x(L), vectorize=True, strategy="forward-mode"),
    "tuple_in": lambda L: L.autograd.functional.jacobian(
        lambda a, b: a * b.sum(), (_x(L), _y(L)), vectorize=True, strategy="forward-mode"),
    "matrix": lambda L: L.autograd.functional.jacobian(
        lambda a: a.exp() * 2, L.ones(2, 3, dtype=L.float64), vectorize=True,
        strategy="forward-mode"),
    "constant_output": lambda L: L.autograd.functional.jacobian(
        lambda a: L.ones(2), _x(L), vectorize=True, strategy="forward-mode"),
    "integer_output": lambda L: L.autograd.functional.jacobian(
        lambda a: (a * 2, (a > 1).long()), _x(L), vectorize=True, strategy="forward-mode"),
    "scalar_input": lambda L: L.autograd.functional.jacobian(
        lambda a: a * _x(L), L.tensor(2.0, dtype=L.float64), vectorize=True,
        strategy="forward-mode"),
    "hessian_forward": lambda L: L.autograd.functional.hessian(
        lambda a: (a.sqrt() * a).sum(), L.ones(2, 3), vectorize=True,
        outer_jacobian_strategy="forward-mode").detach(),
    "hessian_forward_tuple": lambda L: [[h.detach() for h in row] for row in
                                        L.autograd.functional.hessian(
        lambda a, b: (a * a * b.sum()).sum(), (_x(L), _y(L)), vectorize=True,
        outer_jacobian_strategy="forward-mode")],
}


@pytest.mark.parametrize("case", sorted(FORWARD))
def test_forward_mode_jacobian(case):
    same(FORWARD[case])


def _detach(x):
    return x.detach()


ERRORS = {
    "jac_strict_detach": lambda L, F, x, y: F.jacobian(_detach, x, strict=True),
    "jac_strict_const": lambda L, F, x, y: F.jacobian(
        lambda a: (a * 2, L.ones(3, dtype=L.float64)), x, strict=True),
    "jac_strict_unused_input": lambda L, F, x, y: F.jacobian(
        lambda a, b: a * 2, (x, y), strict=True),
    "jac_strict_create_graph": lambda L, F, x, y: F.jacobian(
        lambda a: a * 2, x, strict=True, create_graph=True),
    "jac_strict_vectorize": lambda L, F, x, y: F.jacobian(
        lambda a: a.sum(), x, strict=True, vectorize=True),
    "jac_strict_forward": lambda L, F, x, y: F.jacobian(
        lambda a: a.sum(), x, strict=True, vectorize=True, strategy="forward-mode"),
    "jac_forward_no_vectorize": lambda L, F, x, y: F.jacobian(
        lambda a: a * 2, x, strategy="forward-mode"),
    "jac_forward_create_graph": lambda L, F, x, y: F.jacobian(
        lambda a: a * 2, x, strategy="forward-mode", vectorize=True, create_graph=True),
    "jac_forward_list_output": lambda L, F, x, y: F.jacobian(
        lambda a: [a], x, strategy="forward-mode", vectorize=True),
    "jac_bad_strategy": lambda L, F, x, y: F.jacobian(lambda a: a, x, strategy="bogus"),
    "jac_list_inputs": lambda L, F, x, y: F.jacobian(lambda a, b: a * b, [x, x]),
    "jac_list_outputs": lambda L, F, x, y: F.jacobian(lambda a: [a, a], x),
    "jac_int_output": lambda L, F, x, y: F.jacobian(lambda a: (a, 3), x),
    "jvp_two_v": lambda L, F, x, y: F.jvp(lambda a: a, x, (x, x)),
    "jvp_list_v": lambda L, F, x, y: F.jvp(lambda a: a, x, [x]),
    "jvp_short_v": lambda L, F, x, y: F.jvp(lambda a, b: a, (x, y), (x,)),
    "jvp_strict_detach": lambda L, F, x, y: F.jvp(_detach, x, x, strict=True),
    "jvp_strict_unused": lambda L, F, x, y: F.jvp(lambda a, b: a * 2, (x, y), (x, y),
                                                  strict=True),
    "jvp_strict_create_graph": lambda L, F, x, y: F.jvp(lambda a: a * 2, x, x, strict=True,
                                                        create_graph=True),
    "vjp_strict_detach": lambda L, F, x, y: F.vjp(_detach, x, x, strict=True),
    "vjp_strict_unused": lambda L, F, x, y: F.vjp(lambda a, b: a * 2, (x, y), x, strict=True),
    "vjp_strict_create_graph": lambda L, F, x, y: F.vjp(lambda a, b: a * 2, (x, y), x,
                                                        strict=True, create_graph=True),
    "vjp_two_v": lambda L, F, x, y: F.vjp(lambda a: a, x, (x, x)),
    "vjp_list_outputs": lambda L, F, x, y: F.vjp(lambda a: [a, a], x, (x, x)),
    "hess_strict_linear": lambda L, F, x, y: F.hessian(lambda a: (2 * a).sum(), x,
                                                       strict=True),
    "hess_strict_detach": lambda L, F, x, y: F.hessian(lambda a: a.detach().sum(), x,
                                                       strict=True),
    "hess_strict_second_input": lambda L, F, x, y: F.hessian(
        lambda a, b: (a ** 3).sum() + b.sum(), (x, y), strict=True),
    "hess_strict_vectorize": lambda L, F, x, y: F.hessian(lambda a: (a ** 3).sum(), x,
                                                          strict=True, vectorize=True),
    "hess_forward_no_vectorize": lambda L, F, x, y: F.hessian(
        lambda a: (a ** 3).sum(), x, outer_jacobian_strategy="forward-mode"),
    "hess_bad_strategy": lambda L, F, x, y: F.hessian(
        lambda a: (a ** 3).sum(), x, outer_jacobian_strategy="bogus"),
    "hess_list_output": lambda L, F, x, y: F.hessian(lambda a: [(a ** 3).sum()], x),
    "hvp_strict_linear": lambda L, F, x, y: F.hvp(lambda a: (2 * a).sum(), x, x, strict=True),
    "hvp_strict_detach": lambda L, F, x, y: F.hvp(lambda a: a.detach().sum(), x, x,
                                                  strict=True),
    "hvp_strict_second_input": lambda L, F, x, y: F.hvp(
        lambda a, b: (a ** 3).sum() + b.sum(), (x, y), (x, y), strict=True),
    "hvp_two_v": lambda L, F, x, y: F.hvp(lambda a: (a ** 3).sum(), x, (x, x)),
    "vhp_strict_linear": lambda L, F, x, y: F.vhp(lambda a: (2 * a).sum(), x, x, strict=True),
    "vhp_strict_second_input": lambda L, F, x, y: F.vhp(
        lambda a, b: (a ** 3).sum() + b.sum(), (x, y), (x, y), strict=True),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_functional_errors(case):
    same_error(lambda L: ERRORS[case](L, L.autograd.functional, _x(L), _y(L)))


STRICT_OK = {
    "jac_independent_values": lambda L, F, x: F.jacobian(lambda a: a * 0 + 1, x, strict=True),
    "jvp_linear": lambda L, F, x: F.jvp(lambda a: a * 2, x, x, strict=True),
    "vjp_linear": lambda L, F, x: F.vjp(lambda a: a * 2, x, x, strict=True),
    "hess_cubic": lambda L, F, x: F.hessian(lambda a: (a ** 3).sum(), x, strict=True),
    "hvp_cubic": lambda L, F, x: F.hvp(lambda a: (a ** 3).sum(), x, x, strict=True),
    "vhp_cubic": lambda L, F, x: F.vhp(lambda a: (a ** 3).sum(), x, x, strict=True),
}


@pytest.mark.parametrize("case", sorted(STRICT_OK))
def test_strict_passes_where_torch_passes(case):
    same(lambda L: STRICT_OK[case](L, L.autograd.functional, _x(L)))


def _gradcheck(L, fn, **kw):
    x = L.tensor([0.3, -0.7], dtype=L.float64, requires_grad=True)
    return L.autograd.gradcheck(fn, (x,), **kw)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_output_without_grad(fast_mode):
    for L in LIBS:
        assert _gradcheck(L, lambda a: a.detach() * 2, raise_exception=False,
                          fast_mode=fast_mode) is False
        assert _gradcheck(L, lambda a: (a * 2, a.detach()), fast_mode=fast_mode) is True
        assert _gradcheck(L, lambda a: a.detach() * 0, fast_mode=fast_mode) is True
    same_error(lambda L: _gradcheck(L, lambda a: a.detach() * 2, fast_mode=fast_mode))


def test_gradcheck_messages():
    same_error(lambda L: _gradcheck(L, lambda a: a * 3, atol=1e-12, rtol=0))
    same_error(lambda L: L.autograd.gradcheck(lambda a: a, (L.ones(2, dtype=L.float64),)))


def test_gradgradcheck_keywords():
    for L in LIBS:
        x = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        assert L.autograd.gradgradcheck(lambda a: a * a, (x,), check_fwd_over_rev=True)
        assert L.autograd.gradgradcheck(lambda a: a * a * a, (x,), check_rev_over_rev=True,
                                        gen_non_contig_grad_outputs=False)
