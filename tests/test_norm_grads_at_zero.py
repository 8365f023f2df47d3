"""Norm gradients where the norm is not smooth, against torch.

Matrix norms over singular values at repeated singular values (the identity, a zero matrix,
rank-deficient matrices): PyTorch differentiates `svdvals` without the singular vectors'
terms, so the gradients stay finite; `eigvalsh` alike at repeated eigenvalues. Also the
argument checks of `linalg.matrix_norm` (order, rank, dtypes, dims) and `linalg.norm`'s
choice between the vector and the matrix norm, vector norms at zero elements (p < 2) and the
0-"norm", and `Tensor.norm(p='nuc')`.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (fusegrad, torch)


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return e
    return None


def _same_outcome(fn, tol=1e-10):
    """fn(lib) returns the same values (None for None) under both libraries, or raises the
    same exception type and message."""
    res = []
    for T in LIBS:
        try:
            res.append((False, fn(T)))
        except Exception as e:  # noqa: BLE001
            res.append((True, e))
    (fg_raised, fg), (th_raised, th) = res
    if th_raised:
        assert fg_raised, f"fusegrad did not raise; torch raised {th!r}"
        assert (type(fg).__name__, str(fg)) == (type(th).__name__, str(th))
        return
    assert not fg_raised, f"fusegrad raised {fg!r}"
    for a, b in zip(fg, th):
        assert (a is None) == (b is None), (a, b)
        if b is None:
            continue
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol,
                                   atol=tol)


def _value_and_grad(T, data, f, dtype="float64"):
    x = T.tensor(data, dtype=getattr(T, dtype), requires_grad=True)
    r = f(T, x)
    r.sum().backward()
    return r, x.grad


# ---------------------------------------------------------------- matrix norms

_MATRICES = {
    "identity": np.eye(2),
    "zero": np.zeros((2, 2)),
    "rank1": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "general": np.array([[3.0, 1.0], [1.0, 5.0]]),
    "wide_identity": np.eye(2, 3),
    "wide_zero": np.zeros((2, 3)),
    "tall_rank1": np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]]),
    "ties": np.array([[1.0, -1.0], [1.0, 1.0]]),
    "partly_repeated": np.diag([2.0, 2.0, 1.0]),
}
_ORDS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]


@pytest.mark.parametrize("ord", _ORDS, ids=str)
@pytest.mark.parametrize("name", list(_MATRICES))
def test_matrix_norm_degenerate(name, ord):
    _same_outcome(lambda T: _value_and_grad(
        T, _MATRICES[name], lambda T, x: T.linalg.matrix_norm(x, ord)))


def test_matrix_norm_identity_example():
    x = fusegrad.eye(2, requires_grad=True)
    fusegrad.linalg.matrix_norm(x, 2).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.5, 0.0], [0.0, 0.5]])


@pytest.mark.parametrize("ord", ["nuc", 2, -2], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_batched_degenerate(ord, keepdim):
    data = np.stack([np.eye(2), np.zeros((2, 2)), [[3.0, 1.0], [1.0, 5.0]]])
    _same_outcome(lambda T: _value_and_grad(
        T, data, lambda T, x: T.linalg.matrix_norm(x, ord, keepdim=keepdim)))
    _same_outcome(lambda T: _value_and_grad(
        T, data, lambda T, x: T.linalg.matrix_norm(x.transpose(0, 2), ord, dim=(0, 2),
                                                   keepdim=keepdim)))


@pytest.mark.parametrize("fn", ["svdvals", "eigvalsh", "svd_S", "eigh_L", "cond"])
@pytest.mark.parametrize("data", [np.eye(3), np.zeros((3, 3)), np.diag([2.0, 2.0, 1.0])],
                         ids=["identity", "zero", "repeated"])
def test_values_only_gradients_at_ties(fn, data):
    fns = {
        "svdvals": lambda T, x: T.linalg.svdvals(x).pow(2),
        "eigvalsh": lambda T, x: T.linalg.eigvalsh(x).pow(3),
        "svd_S": lambda T, x: T.linalg.svd(x)[1],
        "eigh_L": lambda T, x: T.linalg.eigh(x)[0],
        "cond": lambda T, x: T.linalg.cond(x + T.eye(3, dtype=x.dtype)),
    }
    _same_outcome(lambda T: _value_and_grad(T, data, fns[fn]))


@pytest.mark.parametrize("data", [np.array([[2.0, 1.0], [1.0, 3.0]]),
                                  np.random.default_rng(0).standard_normal((4, 3))],
                         ids=["square", "tall"])
def test_singular_vector_gradients_unchanged(data):
    """Sign-invariant uses of U and Vh still get the full formula."""
    def rec(T, x):
        u, s, vh = T.linalg.svd(x, full_matrices=False)
        return ((u * s) @ vh).pow(2) + (u @ u.mT).sum() * 0

    def only_u(T, x):
        u, _, _ = T.linalg.svd(x, full_matrices=False)
        return (u * u).pow(2).sum(-1)

    _same_outcome(lambda T: _value_and_grad(T, data, rec))
    _same_outcome(lambda T: _value_and_grad(T, data, only_u))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 3), (2, 3, 0)])
@pytest.mark.parametrize("ord", _ORDS, ids=str)
def test_matrix_norm_empty(shape, ord):
    _same_outcome(lambda T: (T.linalg.matrix_norm(T.zeros(shape), ord),))


_MATRIX_NORM_CALLS = {
    "1d_baddim": lambda T: T.linalg.matrix_norm(T.ones(3), "fro", dim=(0,)),
    "1d_badord": lambda T: T.linalg.matrix_norm(T.ones(3), "abc"),
    "int": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.int64)),
    "int_baddim": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.int64), "fro", dim=(0,)),
    "int_badord": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.int64), 3),
    "badord": lambda T: T.linalg.matrix_norm(T.ones(2, 2), 3, dim=(0,)),
    "dim3": lambda T: T.linalg.matrix_norm(T.ones(2, 2, 2), "nuc", dim=(0, 1, 2)),
    "dim1": lambda T: T.linalg.matrix_norm(T.ones(2, 2, 2), "fro", dim=(1,)),
    "same_dims": lambda T: T.linalg.matrix_norm(T.ones(2, 2, 2), "fro", dim=(1, -2)),
    "dim_out_of_range": lambda T: T.linalg.matrix_norm(T.ones(2, 2, 2), "fro", dim=(1, 3)),
    "half_svd": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.float16), 2, dim=(0, 0)),
    "half_in_float_dtype": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.float16), "nuc",
                                                          dtype=T.float32),
    "half_fro": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.float16), "fro"),
    "half_inf": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.float16), math.inf),
    "dtype_int": lambda T: T.linalg.matrix_norm(T.ones(2, 2), "fro", dtype=T.int64),
    "dtype_complex": lambda T: T.linalg.matrix_norm(T.ones(2, 2), "fro", dtype=T.complex64),
    "dtype_narrowing": lambda T: T.linalg.matrix_norm(T.ones(2, 2), 1, dtype=T.float16),
    "dtype_wider": lambda T: T.linalg.matrix_norm(T.ones(2, 2), 1, dtype=T.float64),
    "dim_before_dtype": lambda T: T.linalg.matrix_norm(T.ones(2, 2), "fro", dim=(0,),
                                                       dtype=T.int64),
    "complex_fro": lambda T: T.linalg.matrix_norm(T.tensor([[1 + 1j, 2], [0, 1j]]), "fro"),
    "complex_1": lambda T: T.linalg.matrix_norm(T.tensor([[1 + 1j, 2], [0, 1j]]), 1),
    "complex_inf": lambda T: T.linalg.matrix_norm(T.tensor([[1 + 1j, 2], [0, 1j]]), math.inf),
    "complex_real_dtype": lambda T: T.linalg.matrix_norm(T.ones(2, 2, dtype=T.complex64),
                                                         "fro", dtype=T.float32),
    "float_ord": lambda T: T.linalg.matrix_norm(T.tensor([[3.0, 1.0], [1.0, 5.0]]), 2.0),
    "list_dim": lambda T: T.linalg.matrix_norm(T.arange(8.0).reshape(2, 2, 2), "fro",
                                               dim=[0, 2]),
}


@pytest.mark.parametrize("name", list(_MATRIX_NORM_CALLS))
def test_matrix_norm_arguments(name):
    _same_outcome(lambda T: (_MATRIX_NORM_CALLS[name](T),), tol=1e-6)


_LINALG_NORM_CALLS = {
    "none_2d": lambda T, a, b: T.linalg.norm(a),
    "none_3d": lambda T, a, b: T.linalg.norm(b),
    "none_two_dims": lambda T, a, b: T.linalg.norm(b, dim=(0, 2)),
    "none_two_dims_int": lambda T, a, b: T.linalg.norm(a.long(), dim=(0, 1)),
    "two_2d": lambda T, a, b: T.linalg.norm(a, 2),
    "two_1d": lambda T, a, b: T.linalg.norm(a[0], 2),
    "three_2d": lambda T, a, b: T.linalg.norm(a, 3),
    "three_dim1": lambda T, a, b: T.linalg.norm(a, 3, dim=1),
    "nuc_dim1": lambda T, a, b: T.linalg.norm(a, "nuc", dim=1),
    "nuc_3d": lambda T, a, b: T.linalg.norm(b, "nuc"),
    "nuc_two_dims": lambda T, a, b: T.linalg.norm(b, "nuc", dim=(0, 2)),
    "ord_3d": lambda T, a, b: T.linalg.norm(b, 2),
    "three_dims": lambda T, a, b: T.linalg.norm(b, dim=(0, 1, 2)),
    "fro_1d": lambda T, a, b: T.linalg.norm(a[0], "fro"),
    "fro_dim1": lambda T, a, b: T.linalg.norm(b, "fro", dim=1),
    "inf_keepdim": lambda T, a, b: T.linalg.norm(a, math.inf, keepdim=True),
}


@pytest.mark.parametrize("name", list(_LINALG_NORM_CALLS))
def test_linalg_norm_dispatch(name):
    def run(T):
        a = T.tensor([[3.0, 1.0], [1.0, 5.0]], requires_grad=True)
        b = T.arange(24.0).reshape(2, 3, 4).requires_grad_()
        r = _LINALG_NORM_CALLS[name](T, a, b)
        r.sum().backward()
        return r, a.grad, b.grad

    _same_outcome(run, tol=1e-5)


# ---------------------------------------------------------------- vector norms

_VECTORS = {"zeros_in": [0.0, 1.0, -2.0], "all_zero": [0.0, 0.0, 0.0],
            "ties": [2.0, -2.0, 1.0], "one_zero": [0.0]}


@pytest.mark.parametrize("how", ["linalg", "method", "torch.norm"])
@pytest.mark.parametrize("p", [0.5, 1, 1.5, 2, 3, math.inf, -math.inf, 0, -1], ids=str)
@pytest.mark.parametrize("name", list(_VECTORS))
def test_vector_norm_at_zero(name, p, how):
    """0 at zero elements for p < 2, no gradient at all (None) for the 0-"norm"."""
    fns = {"linalg": lambda T, x: T.linalg.vector_norm(x, p),
           "method": lambda T, x: x.norm(p=p),
           "torch.norm": lambda T, x: T.norm(x, p=p)}
    _same_outcome(lambda T: _value_and_grad(T, _VECTORS[name], fns[how]))


def test_vector_norm_half_example():
    x = fusegrad.tensor([0.0, 1.0, -2.0], requires_grad=True)
    fusegrad.linalg.vector_norm(x, 0.5).backward()
    assert x.grad[0].item() == 0.0


@pytest.mark.parametrize("call", [
    lambda T, x: x.norm(p="nuc"),
    lambda T, x: T.norm(x, p="nuc", keepdim=True),
    lambda T, x: T.norm(x, "nuc", dim=(0, 1)),
])
def test_tensor_norm_nuclear(call):
    _same_outcome(lambda T: _value_and_grad(T, [[3.0, 1.0], [1.0, 5.0]], call))
