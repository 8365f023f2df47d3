"""Conjugate transposes and complex gradients of the products, against torch.

`.mH`, `.H`, `.adjoint()` and `torch.adjoint` conjugate complex tensors (values, nodes,
deprecation warnings on 0-D tensors, PyTorch's messages for the wrong ranks). The products
(dot, vdot, mv, matmul's 1-D cases, inner, outer, tensordot, einsum, bmm, addmv, addr,
baddbmm, addbmm, cross, kron, multi_dot, linalg.vecdot) give PyTorch's gradients for complex
operands: the incoming gradient times the conjugate of each partner. `ldexp` differentiates
its exponent too.
"""

from __future__ import annotations

import math
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (fusegrad, torch)


def _c(rng, *shape):
    """Random complex128 data."""
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _np(t):
    """A tensor's values as NumPy (torch's lazily conjugated views resolved)."""
    t = t.detach()
    if isinstance(t, torch.Tensor):
        t = t.resolve_conj()
    return np.array(t.numpy(), copy=True)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return e
    return None


def _same_error(fn):
    """fn(lib) raises the same type and message under both libraries."""
    e_fg, e_th = _raised(lambda: fn(fusegrad)), _raised(lambda: fn(torch))
    assert e_th is not None, "torch did not raise: the test is wrong"
    assert e_fg is not None, f"fusegrad did not raise; torch raised {e_th!r}"
    assert type(e_fg).__name__ == type(e_th).__name__, (e_fg, e_th)
    assert str(e_fg) == str(e_th), (str(e_fg), str(e_th))


# ---------------------------------------------------------------- mH, H, adjoint

_C = np.array([[1 + 2j, 3 - 1j], [0.5j, -2.0]])
_ADJOINTS = {
    "mH": lambda T, x: x.mH,
    "H": lambda T, x: x.H,
    "adjoint": lambda T, x: x.adjoint(),
    "torch.adjoint": lambda T, x: T.adjoint(x),
}


@pytest.mark.parametrize("name", list(_ADJOINTS))
@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float32"])
def test_adjoint_values_and_node(name, dtype):
    data = _C if dtype.startswith("complex") else _C.real
    out = []
    for T in LIBS:
        x = T.tensor(data, dtype=getattr(T, dtype), requires_grad=True)
        r = _ADJOINTS[name](T, x)
        out.append(r)
        assert str(r.dtype).split(".")[-1] == dtype
    _close(*out, tol=1e-6)
    np.testing.assert_array_equal(_np(out[0]), data.conj().T.astype(dtype))
    assert type(out[0].grad_fn).__name__ == type(out[1].grad_fn).__name__


@pytest.mark.parametrize("name", ["mH", "adjoint", "torch.adjoint"])
def test_batched_adjoint(name):
    data = _c(np.random.default_rng(1), 2, 3, 4)
    r_fg, r_th = (_ADJOINTS[name](T, T.tensor(data)) for T in LIBS)
    assert tuple(r_fg.shape) == (2, 4, 3)
    _close(r_fg, r_th)


def test_transposes_do_not_conjugate():
    for get in (lambda x: x.mT, lambda x: x.T, lambda x: x.t(), lambda x: x.transpose(0, 1)):
        _close(get(fusegrad.tensor(_C)), get(torch.tensor(_C)))
        np.testing.assert_array_equal(_np(get(fusegrad.tensor(_C))), _C.T)


@pytest.mark.parametrize("name", list(_ADJOINTS))
def test_adjoint_gradient(name):
    w = np.array([[1, 2j], [3, 4 - 1j]])
    grads = []
    for T in LIBS:
        x = T.tensor(_C, requires_grad=True)
        (_ADJOINTS[name](T, x) * T.tensor(w)).sum().abs().backward()
        grads.append(x.grad)
    _close(*grads)


def test_adjoint_graph_names():
    """Complex: ConjBackward0 over TransposeBackward0; real: TransposeBackward0 alone."""
    for data in (_C, _C.real):
        for name in _ADJOINTS:
            names = []
            for T in LIBS:
                r = _ADJOINTS[name](T, T.tensor(data, requires_grad=True))
                chain, fn = [], r.grad_fn
                while fn is not None:
                    chain.append(type(fn).__name__)
                    fn = fn.next_functions[0][0] if fn.next_functions else None
                names.append(chain)
            assert names[0] == names[1], (name, names)


@pytest.mark.parametrize("shape", [(3,), (2, 2, 2), (2, 1, 2, 3)])
@pytest.mark.parametrize("name", list(_ADJOINTS))
def test_adjoint_rank_errors(shape, name):
    if name != "H" and len(shape) > 2:
        return  # batches are fine for mH and adjoint
    data = np.zeros(shape, np.complex64)
    _same_error(lambda T: _ADJOINTS[name](T, T.tensor(data)))


def test_h_message_names_mh_for_batches():
    e = _raised(lambda: fusegrad.zeros(2, 2, 2).H)
    assert str(e) == ("tensor.H is only supported on matrices (2-D tensors). Got 3-D tensor. "
                      "For batches of matrices, consider using tensor.mH")
    e = _raised(lambda: fusegrad.zeros(3).H)
    assert str(e) == "tensor.H is only supported on matrices (2-D tensors). Got 1-D tensor."


@pytest.mark.parametrize("name,message", [
    ("mH", "Tensor.mH is deprecated on 0-D tensors. Consider using x.conj()."),
    ("H", "Tensor.H is deprecated on 0-D tensors. Consider using x.conj()."),
    ("adjoint", "adjoint() is deprecated on 0-D tensors. Consider using x.conj()."),
    ("torch.adjoint", "adjoint() is deprecated on 0-D tensors. Consider using x.conj()."),
])
def test_zero_dim_is_conjugated_with_a_warning(name, message):
    fusegrad.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = _ADJOINTS[name](fusegrad, fusegrad.tensor(1 + 2j))
    finally:
        fusegrad.set_warn_always(False)
    assert r.item() == 1 - 2j
    assert [str(x.message) for x in w] == [message]
    assert w[0].filename == __file__  # named at the caller's line, as PyTorch's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r_th = _ADJOINTS[name](torch, torch.tensor(1 + 2j))
    assert r_th.item() == r.item()


# ---------------------------------------------------------------- complex product gradients

_PRODUCTS = {
    "dot": (lambda T, a, b: T.dot(a, b), [(3,), (3,)]),
    "vdot": (lambda T, a, b: T.vdot(a, b), [(3,), (3,)]),
    "mv": (lambda T, a, b: T.mv(a, b), [(2, 3), (3,)]),
    "mm": (lambda T, a, b: T.mm(a, b), [(2, 3), (3, 2)]),
    "bmm": (lambda T, a, b: T.bmm(a, b), [(2, 2, 3), (2, 3, 2)]),
    "inner_1d": (lambda T, a, b: T.inner(a, b), [(3,), (3,)]),
    "inner_2d": (lambda T, a, b: T.inner(a, b), [(2, 3), (4, 3)]),
    "outer": (lambda T, a, b: T.outer(a, b), [(3,), (2,)]),
    "matmul_1_1": (lambda T, a, b: T.matmul(a, b), [(3,), (3,)]),
    "matmul_2_1": (lambda T, a, b: a @ b, [(2, 3), (3,)]),
    "matmul_1_2": (lambda T, a, b: a @ b, [(3,), (3, 2)]),
    "matmul_3_1": (lambda T, a, b: a @ b, [(2, 2, 3), (3,)]),
    "matmul_1_3": (lambda T, a, b: a @ b, [(3,), (2, 3, 2)]),
    "matmul_4_1": (lambda T, a, b: a @ b, [(2, 2, 2, 3), (3,)]),
    "matmul_3_2": (lambda T, a, b: a @ b, [(2, 2, 3), (3, 2)]),
    "matmul_2_3": (lambda T, a, b: a @ b, [(2, 3), (2, 3, 2)]),
    "matmul_3_3": (lambda T, a, b: a @ b, [(2, 2, 3), (2, 3, 2)]),
    "tensordot": (lambda T, a, b: T.tensordot(a, b, 1), [(2, 3), (3, 2)]),
    "tensordot_pairs": (lambda T, a, b: T.tensordot(a, b, ([0, 1], [1, 0])), [(2, 3), (3, 2)]),
    "einsum_dot": (lambda T, a, b: T.einsum("i,i->", a, b), [(3,), (3,)]),
    "einsum_mv": (lambda T, a, b: T.einsum("ij,j->i", a, b), [(2, 3), (3,)]),
    "einsum_outer": (lambda T, a, b: T.einsum("i,j->ij", a, b), [(3,), (2,)]),
    "einsum_bmm": (lambda T, a, b: T.einsum("bij,bjk->bik", a, b), [(2, 2, 3), (2, 3, 2)]),
    "cross": (lambda T, a, b: T.cross(a, b, dim=-1), [(2, 3), (2, 3)]),
    "linalg_cross": (lambda T, a, b: T.linalg.cross(a, b), [(2, 3), (1, 3)]),
    "kron": (lambda T, a, b: T.kron(a, b), [(2,), (2, 2)]),
    "multi_dot": (lambda T, a, b: T.linalg.multi_dot([a, b]), [(2, 3), (3,)]),
    "vecdot": (lambda T, a, b: T.linalg.vecdot(a, b), [(2, 3), (2, 3)]),
    "vecdot_1d": (lambda T, a, b: T.linalg.vecdot(a, b), [(3,), (3,)]),
    "vecdot_dim0": (lambda T, a, b: T.linalg.vecdot(a, b, dim=0), [(3, 2), (3, 1)]),
    "mH_matmul": (lambda T, a, b: a.mH @ b, [(3, 2), (3, 2)]),
    "mv_of_adjoint": (lambda T, a, b: T.mv(T.adjoint(a), b), [(3, 2), (3,)]),
    "addmv": (lambda T, a, b, i: T.addmv(i, a, b), [(2, 3), (3,), (2,)]),
    "addmv_scaled": (lambda T, a, b, i: T.addmv(i, a, b, beta=0.5 - 1j, alpha=2 + 1j),
                     [(2, 3), (3,), (2,)]),
    "addr": (lambda T, a, b, i: T.addr(i, a, b), [(3,), (2,), (3, 2)]),
    "addr_scaled": (lambda T, a, b, i: T.addr(i, a, b, beta=0.5 + 2j, alpha=2 - 1j),
                    [(3,), (2,), (3, 2)]),
    "addr_beta0": (lambda T, a, b, i: T.addr(i, a, b, beta=0, alpha=2 - 1j),
                   [(3,), (2,), (3, 2)]),
    "addr_": (lambda T, a, b, i: i.clone().addr_(a, b, beta=0.5 + 1j, alpha=2 - 1j),
              [(3,), (2,), (3, 2)]),
    "baddbmm": (lambda T, a, b, i: T.baddbmm(i, a, b, beta=0.5, alpha=2),
                [(2, 2, 3), (2, 3, 2), (2, 2, 2)]),
    "baddbmm_scaled": (lambda T, a, b, i: T.baddbmm(i, a, b, beta=0.5 - 1j, alpha=2 + 1j),
                       [(2, 2, 3), (2, 3, 2), (2, 2, 2)]),
    "baddbmm_beta0": (lambda T, a, b, i: T.baddbmm(i, a, b, beta=0, alpha=2 + 1j),
                      [(2, 2, 3), (2, 3, 2), (2, 2, 2)]),
    "baddbmm_": (lambda T, a, b, i: i.clone().baddbmm_(a, b, beta=0.5 - 1j, alpha=2 + 1j),
                 [(2, 2, 3), (2, 3, 2), (2, 2, 2)]),
    "addbmm_scaled": (lambda T, a, b, i: T.addbmm(i, a, b, beta=0.5 + 1j, alpha=2 - 1j),
                      [(2, 2, 3), (2, 3, 2), (2, 2)]),
    "addbmm_": (lambda T, a, b, i: i.clone().addbmm_(a, b, beta=0.5 + 1j, alpha=2 - 1j),
                [(2, 2, 3), (2, 3, 2), (2, 2)]),
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_complex_product_gradients(name, dtype):
    """Values and the gradients of every operand, all requiring grad, for a real loss that
    mixes the real and imaginary parts of a random complex weighting."""
    fn, shapes = _PRODUCTS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    arrays = [_c(rng, *s) for s in shapes]
    tol = 1e-4 if dtype == "complex64" else 1e-10
    weight = None
    results = []
    for T in LIBS:
        dt = getattr(T, dtype)
        ins = [T.tensor(a, dtype=dt, requires_grad=True) for a in arrays]
        r = fn(T, *ins)
        if weight is None:
            weight = _c(rng, *tuple(r.shape))
        p = r * T.tensor(weight, dtype=dt)
        (p.real.sum() + 0.3 * p.imag.sum()).backward()
        results.append((r, [t.grad for t in ins]))
    (r_fg, g_fg), (r_th, g_th) = results
    assert str(r_fg.dtype).split(".")[-1] == str(r_th.dtype).split(".")[-1]
    _close(r_fg, r_th, tol)
    for a, b in zip(g_fg, g_th):
        _close(a, b, tol)


@pytest.mark.parametrize("scaled", [False, True])
def test_complex_addmm_gradients(scaled):
    kwargs = {"beta": 0.5 + 1j, "alpha": 2j} if scaled else {}
    rng = np.random.default_rng(5)
    arrays = [_c(rng, 2, 2), _c(rng, 2, 3), _c(rng, 3, 2)]
    grads = []
    for T in LIBS:
        ins = [T.tensor(a, requires_grad=True) for a in arrays]
        T.addmm(*ins, **kwargs).abs().sum().backward()
        grads.append([t.grad for t in ins])
    for a, b in zip(*grads):
        _close(a, b)


@pytest.mark.parametrize("name", ["dot", "mv", "matmul_2_1", "bmm", "baddbmm", "addr", "cross"])
def test_real_product_gradients_unchanged(name):
    fn, shapes = _PRODUCTS[name]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in shapes]
    grads = []
    for T in LIBS:
        ins = [T.tensor(a, requires_grad=True) for a in arrays]
        (fn(T, *ins) ** 2).sum().backward()
        grads.append([t.grad for t in ins])
    for a, b in zip(*grads):
        _close(a, b)


def test_dot_gradient_example():
    out = []
    for T in LIBS:
        a = T.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        T.dot(a, T.tensor([1 - 1j, 2j])).real.backward()
        out.append(a.grad)
    np.testing.assert_array_equal(_np(out[0]), np.array([1 + 1j, -2j], np.complex64))
    _close(*out)


def test_baddbmm_beta_zero_still_gives_input_a_gradient():
    for dt in ("float32", "complex64"):
        grads = []
        for T in LIBS:
            i = T.ones(2, 2, 2, dtype=getattr(T, dt), requires_grad=True)
            a = T.ones(2, 2, 3, dtype=getattr(T, dt), requires_grad=True)
            b = T.ones(2, 3, 2, dtype=getattr(T, dt), requires_grad=True)
            T.baddbmm(i, a, b, beta=0).sum().abs().backward()
            grads.append(i.grad)
        assert grads[0] is not None
        _close(*grads)


@pytest.mark.parametrize("args", [
    ("float32", "float64", (3,), (3,)), ("int64", "int64", (3,), (3,)),
    ("bool", "bool", (3,), (3,)), ("int32", "float32", (3,), (3,)),
    ("float32", "int32", (3,), (3,)), ("float32", "float32", (3,), (4,)),
])
def test_vecdot_errors(args):
    dx, dy, sx, sy = args
    _same_error(lambda T: T.linalg.vecdot(T.ones(sx, dtype=getattr(T, dx)),
                                          T.ones(sy, dtype=getattr(T, dy))))


def test_vecdot_nodes():
    for shapes, node in (([(3,), (3,)], "VdotBackward0"), ([(2, 3), (2, 3)], "SumBackward1")):
        for T in LIBS:
            x, y = (T.ones(s, dtype=T.complex64, requires_grad=True) for s in shapes)
            assert type(T.linalg.vecdot(x, y).grad_fn).__name__ == node


# ---------------------------------------------------------------- ldexp


@pytest.mark.parametrize("dtypes", [
    ("float32", "float32"), ("float64", "float32"), ("float32", "float64"),
    ("float32", "int64"), ("int64", "float32"), ("int64", "int64"), ("float16", "float32"),
])
def test_ldexp_values_and_gradients(dtypes):
    dx, de = dtypes
    x_data, e_data = np.array([1.0, -2.0, 0.0, 3.0]), np.array([1.5, -2.0, 3.0, -1.0])
    if de.startswith("int"):
        e_data = np.array([1, -2, 3, -1])
    out = []
    for T in LIBS:
        x = T.tensor(x_data, dtype=getattr(T, dx))
        e = T.tensor(e_data, dtype=getattr(T, de))
        for t in (x, e):
            if t.dtype.is_floating_point:
                t.requires_grad_()
        r = T.ldexp(x, e)
        if r.requires_grad:
            (r * T.tensor([1.0, 2.0, -1.0, 0.5])).sum().backward()
        out.append((r, x.grad, e.grad))
    (r_fg, gx_fg, ge_fg), (r_th, gx_th, ge_th) = out
    assert str(r_fg.dtype).split(".")[-1] == str(r_th.dtype).split(".")[-1]
    _close(r_fg.double(), r_th.double(), 1e-6)
    for a, b in ((gx_fg, gx_th), (ge_fg, ge_th)):
        assert (a is None) == (b is None)
        if b is not None:
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
            _close(a.double(), b.double(), 1e-3 if b.dtype == torch.float16 else 1e-6)


def test_ldexp_exponent_gradient_example():
    x = fusegrad.tensor([1.0, 2.0], requires_grad=True)
    e = fusegrad.tensor([1.5, 2.0], requires_grad=True)
    r = fusegrad.ldexp(x, e)
    # PyTorch's node saves the exponent and the result (e's gradient is out * ln 2).
    assert type(r.grad_fn).__name__ == "LdexpBackward0"
    assert r.grad_fn._saved_other is e
    np.testing.assert_array_equal(r.grad_fn._saved_result.detach().numpy(), r.detach().numpy())
    r.sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), r.detach().numpy() * math.log(2), rtol=1e-6)


def test_ldexp_double_backward():
    out = []
    for T in LIBS:
        x = T.tensor([1.0, 2.0], requires_grad=True)
        e = T.tensor([1.5, 2.0], requires_grad=True)
        gx, ge = T.autograd.grad(T.ldexp(x, e).sum(), [x, e], create_graph=True)
        out.append(T.autograd.grad((gx * ge).sum() + ge.sum(), [x, e]))
    for a, b in zip(*out):
        _close(a, b, 1e-6)


def test_ldexp_only_exponent_requires_grad():
    grads = []
    for T in LIBS:
        e = T.tensor([1.5, -2.0], requires_grad=True)
        T.ldexp(T.tensor([3.0, 2.0]), e).sum().backward()
        grads.append(e.grad)
    _close(*grads, 1e-6)
