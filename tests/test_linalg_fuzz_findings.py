"""Linear algebra cases a fuzzer found differing from PyTorch, each checked against torch.

Each case runs the same call on torch and fusegrad with the same data and compares values,
dtypes, shapes, grad_fn names, gradients, errors (type and message) and warnings.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _arr(rng, shape, dt):
    a = rng.standard_normal(shape)
    if np.issubdtype(dt, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dt)


def _spd(rng, shape, dt):
    a = _arr(rng, shape, dt)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dt)


def _run(mod, fn, arrays, grad):
    """(outputs, error, inputs) of fn(mod, *tensors)."""
    ts = []
    for x in arrays:
        t = mod.tensor(x)
        if grad and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_()
        ts.append(t)
    try:
        out = fn(mod, *ts)
    except Exception as e:  # noqa: BLE001 (compared with torch's)
        return None, (type(e).__name__.lstrip("_"), str(e).split(" (Triggered")[0]), ts
    return out, None, ts


def _np(t):
    return np.asarray(t.detach().resolve_conj().resolve_neg().numpy())


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flat(x)]
    return [o]


def _same(fn, arrays, grad=True, tol=None):
    """The call on both libraries: same error, or same outputs and input gradients."""
    to, te, tin = _run(torch, fn, arrays, grad)
    fo, fe, fin = _run(fg, fn, arrays, grad)
    assert fe == te
    if te is not None:
        return
    tl, fl = _flat(to), _flat(fo)
    assert len(tl) == len(fl)
    loss_t, loss_f = 0, 0
    for t, f in zip(tl, fl):
        assert str(f.dtype) == str(t.dtype)
        assert tuple(f.shape) == tuple(t.shape)
        name = (lambda x: type(x.grad_fn).__name__ if x.grad_fn is not None else None)
        assert name(f) == name(t)
        rt = tol or (1e-4 if t.dtype in (torch.float32, torch.complex64) else 1e-10)
        np.testing.assert_allclose(_np(f), _np(t), rtol=rt, atol=rt)
        if t.requires_grad and (t.is_floating_point() or t.is_complex()):
            loss_t = loss_t + (t.abs() if t.is_complex() else t).sum()
            loss_f = loss_f + (f.abs() if f.is_complex() else f).sum()
    if not grad or isinstance(loss_t, int):
        return
    loss_t.backward()
    loss_f.backward()
    for t, f in zip(tin, fin):
        if t.grad is None:
            assert f.grad is None
            continue
        rt = tol or (2e-3 if t.dtype in (torch.float32, torch.complex64) else 1e-7)
        np.testing.assert_allclose(_np(f.grad), _np(t.grad), rtol=rt, atol=rt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", ["inv", "cholesky", "eigvalsh", "svdvals", "det", "lu_factor"])
def test_batch_of_0x0_matrices_backward(name, dt):
    """A (2, 0, 0) batch: backward folded the batch with -1, ambiguous for 0 elements."""
    rng = np.random.default_rng(0)
    _same(lambda m, a: getattr(m.linalg, name)(a), [_spd(rng, (2, 0, 0), dt)])


@pytest.mark.parametrize("dt", DTYPES)
def test_batch_of_0x0_matmul_and_solve(dt):
    rng = np.random.default_rng(0)
    _same(lambda m, a: m.linalg.matrix_power(a, 3), [_arr(rng, (2, 0, 0), dt)])
    _same(lambda m, a, b: m.linalg.solve(a, b), [_arr(rng, (2, 0, 0), dt),
                                               _arr(rng, (2, 0, 2), dt)])


@pytest.mark.parametrize("dt", [np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, float("inf"), -float("inf"),
                               0, 3, "abc"])
def test_cond_empty_and_invalid_orders(shape, p, dt):
    """Empty input: fresh real zeros (no graph); an invalid order: PyTorch's own message."""
    rng = np.random.default_rng(0)
    _same(lambda m, a: m.linalg.cond(a, p), [_arr(rng, shape, dt)])


@pytest.mark.parametrize("dt", DTYPES)
def test_cond_nuc_node_and_singular(dt):
    """cond(A, 'nuc') has no nan_to_num (its node is the product's); a singular matrix gives
    NaN there and inf for the other orders (the SVD of an inf matrix is NaN, no error)."""
    rng = np.random.default_rng(0)
    _same(lambda m, a: m.linalg.cond(a, "nuc"), [_arr(rng, (2, 3, 3), dt)])
    for p in ("nuc", "fro", 1):
        _same(lambda m, a, p=p: m.linalg.cond(a, p), [np.zeros((2, 2), dt)], grad=False)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (3, 0)])
@pytest.mark.parametrize("p", [1, 2, float("inf")])
def test_matrix_norm_of_empty_is_outside_the_graph(shape, p):
    rng = np.random.default_rng(0)
    _same(lambda m, a: m.linalg.matrix_norm(a, p), [_arr(rng, shape, np.float32)])


def test_svd_of_non_finite_input():
    """NaN: LAPACK's non-convergence error (with the batch index); inf alone: NaN values."""
    nan, inf = float("nan"), float("inf")
    good = [[1.0, 2.0], [3.0, 4.0]]
    for x in ([[nan, 1.0], [1.0, 1.0]], [[inf, 1.0], [1.0, 1.0]], [good, [[nan, 1], [1, 1]]],
              [good, [[inf, inf], [inf, inf]]]):
        for dt in (np.float64, np.complex128):
            _same(lambda m, a: m.linalg.svdvals(a), [np.array(x, dt)], grad=False)
            _same(lambda m, a: m.linalg.svd(a)[1], [np.array(x, dt)], grad=False)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (0, 3, 3), (2, 2, 4)])
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_result_dtypes_and_shapes(shape, driver, dt):
    """Residuals are real for complex input; an empty batch keeps min(m, n) singular values."""
    rng = np.random.default_rng(0)
    _same(lambda m, a, b: m.linalg.lstsq(a, b, driver=driver),
          [_arr(rng, shape, dt), _arr(rng, shape[:-1] + (2,), dt)], grad=False, tol=1e-3)


def test_mixed_dtype_errors():
    rng = np.random.default_rng(0)
    f32, f64 = _arr(rng, (3, 3), np.float32), _arr(rng, (3, 1), np.float64)
    _same(lambda m, a, b: m.linalg.lstsq(a, b), [f32, f64], grad=False)
    _same(lambda m, a, b: m.linalg.lstsq(a, b), [f32, f64[:, 0]], grad=False)
    _same(lambda m, a, b: m.cholesky_solve(b, a), [f32, f64], grad=False)


@pytest.mark.parametrize("b_shape, a_shape, b_dt, a_dt", [
    ((3,), (3, 3), np.float64, np.float32), ((3, 1), (3,), np.float32, np.float32),
    ((3, 1), (3, 2), np.float32, np.float32), ((3, 1), (3, 3), np.int64, np.int64),
    ((3, 1), (3, 3), np.float16, np.float16), ((2, 3, 1), (3, 3, 3), np.float32, np.float32)])
def test_cholesky_solve_checks(b_shape, a_shape, b_dt, a_dt):
    b, a = np.ones(b_shape, b_dt), np.ones(a_shape, a_dt)
    _same(lambda m, b, a: m.cholesky_solve(b, a), [b, a], grad=False)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_failure_leaves_lapacks_partial_factor(upper, dt):
    """At the failing column: the pivot's value on the diagonal, the input's entries after."""
    rng = np.random.default_rng(0)
    a = _spd(rng, (2, 4, 4), dt)
    a[0, 2, 2] = -5
    a[1, 0, 0] = -1
    _same(lambda m, x: m.linalg.cholesky_ex(x, upper=upper), [a], grad=False)


@pytest.mark.parametrize("a_shape, b_shape, dims", [
    ((2, 3, 6), (3, 6), None), ((6, 2, 3), (5,), None), ((6, 6), (6, 6), None),
    ((2, 3, 6), (3, 6), (0,)), ((6, 2, 3), (6,), None)])
def test_tensorsolve_size_check(a_shape, b_shape, dims):
    rng = np.random.default_rng(0)
    kw = {} if dims is None else {"dims": dims}
    _same(lambda m, a, b: m.linalg.tensorsolve(a, b, **kw),
          [_arr(rng, a_shape, np.float64), _arr(rng, b_shape, np.float64)])
    # (`dims=None` given explicitly: the same outcome, not an argument-type error)
    _same(lambda m, a, b: m.linalg.tensorsolve(a, b, dims=dims),
          [_arr(rng, a_shape, np.float64), _arr(rng, b_shape, np.float64)])


def test_deprecation_warnings():
    """torch.cholesky, triangular_solve and lu_solve warn (once, or always when asked)."""
    def calls(m):
        a = m.eye(3, dtype=m.float64) * 2
        lu, piv = m.linalg.lu_factor(a)
        return [lambda: m.cholesky(a), lambda: m.triangular_solve(a, a),
                lambda: m.lu_solve(a, lu, piv)]

    before = torch.is_warn_always_enabled(), fg.is_warn_always_enabled()
    torch.set_warn_always(True)
    fg.set_warn_always(True)
    try:
        for tf, ff in zip(calls(torch), calls(fg)):
            seen = []
            for f in (tf, ff):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    f()
                seen.append([(x.category, str(x.message).split(" (Triggered")[0])
                             for x in w])
            assert len(seen[0]) == 1
            assert seen[1] == seen[0]
    finally:
        torch.set_warn_always(before[0])
        fg.set_warn_always(before[1])


@pytest.mark.parametrize("dt", [np.float64, np.complex128])
def test_cholesky_double_backward_node(dt):
    """The gradient of cholesky, built with create_graph, ends in a triangular solve."""
    rng = np.random.default_rng(0)

    def fn(m, a):
        return m.autograd.grad(m.linalg.cholesky(a).abs().sum(), a, create_graph=True)[0]

    _same(fn, [_spd(rng, (2, 3, 3), dt)])


@pytest.mark.parametrize("p", ["nuc", "fro", 1, -1, float("inf")])
def test_cond_of_a_batch_with_singular_members(p):
    a = np.stack([np.diag([1.0, 0.0, 1.0]), 2 * np.eye(3), np.zeros((3, 3))])
    _same(lambda m, x: m.linalg.cond(x, p), [a], grad=False)


@pytest.mark.parametrize("kw", [
    {"atol": [0.5, 2.0]}, {"rtol": [0.5, 0.01]}, {"tol": [0.5, 2.0]},
    {"atol": [[0.5], [2.0]]}, {"atol": -1.0}, {"atol": 1.0, "rtol": 0.3}])
def test_matrix_rank_tensor_tolerances(kw):
    """Tolerance tensors give one tolerance per matrix of the batch (broadcast)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4))

    def fn(m, x):
        return m.linalg.matrix_rank(x, **{k: m.tensor(v) for k, v in kw.items()})

    _same(fn, [a], grad=False)


@pytest.mark.parametrize("x, n", [
    (np.array(2.0), None), (np.array(2.0), 3), (np.ones(3), 1), (np.ones(3), 0),
    (np.array([True, False]), None), (np.arange(3), None), (np.ones(0), None)])
def test_vander_checks(x, n):
    _same(lambda m, t: m.linalg.vander(t, N=n), [x], grad=False)


@pytest.mark.parametrize("shapes, dts", [
    (((2, 2), (2, 2, 2)), None), (((2, 2, 2), (2, 2)), None),
    (((2, 2), (2, 2, 2), (2,)), None), (((2, 2), (2, 2), (2,)), (0, 1, 0)),
    (((2, 2), (2, 2), (2,)), (0, 0, 2)), (((2,), (3, 2), (2,)), None)])
def test_multi_dot_checks(shapes, dts):
    kinds = (np.float32, np.float64, np.int64)
    arrays = [np.ones(s, kinds[dts[i]] if dts else np.float32) for i, s in enumerate(shapes)]
    _same(lambda m, *ts: m.linalg.multi_dot(ts), arrays, grad=False)


def test_chain_matmul_of_nothing():
    _same(lambda m: m.chain_matmul(), [], grad=False)


@pytest.mark.parametrize("lu_dt, piv, b", [
    (np.float32, np.ones(3, np.int64), np.ones((3, 1))),
    (np.float32, np.ones(3, np.int64), np.ones((3, 1), np.float32)),
    (np.float32, np.ones(2, np.int32), np.ones((3, 1), np.float32)),
    (np.float32, np.ones((2, 3), np.int32), np.ones((3, 1), np.float32))])
def test_lu_solve_checks(lu_dt, piv, b):
    _same(lambda m, lu, p, x: m.linalg.lu_solve(lu, p, x), [np.eye(3, dtype=lu_dt), piv, b],
          grad=False)


@pytest.mark.parametrize("shape, dt", [
    ((2, 3), np.float16), ((2, 2), np.float16), ((2, 2), np.int64), ((3,), np.float16)])
def test_det_low_precision(shape, dt):
    _same(lambda m, a: m.linalg.det(a), [np.ones(shape, dt)], grad=False)
    _same(lambda m, a: m.det(a), [np.ones(shape, dt)], grad=False)


@pytest.mark.parametrize("case", ["batch", "zero", "upper", "empty"])
def test_cholesky_inverse_of_a_singular_factor(case):
    """A zero on the factor's diagonal raises LAPACK's error, with the batch index."""
    a = np.eye(3)
    a[1, 1] = a[2, 2] = 0
    x = {"batch": np.stack([np.eye(3), np.zeros((3, 3))])[:, None], "zero": np.zeros((3, 3)),
         "upper": a, "empty": np.zeros((2, 0, 0))}[case]
    _same(lambda m, t: m.cholesky_inverse(t, upper=case == "upper"), [x], grad=False)


@pytest.mark.parametrize("shape, ind", [((2, 3, 6), 2), ((6, 2, 3), 1)])
def test_tensorinv_of_a_singular_tensor(shape, ind):
    _same(lambda m, t: m.linalg.tensorinv(t, ind=ind), [np.zeros(shape)], grad=False)


@pytest.mark.parametrize("name", ["addbmm", "baddbmm"])
@pytest.mark.parametrize("dts", [
    ("float64", "float32", "float32"), ("float32", "float64", "float32"),
    ("float32", "float32", "float64"), ("float64", "float64", "float32")])
def test_batched_product_dtype_checks(name, dts):
    """addbmm/baddbmm of mixed dtypes: PyTorch's errors, in its order of checks."""
    shapes = ((2, 2), (1, 2, 2), (1, 2, 2)) if name == "addbmm" else ((1, 2, 2),) * 3
    outcomes = []
    for lib in (fg, torch):
        try:
            getattr(lib, name)(*[lib.ones(s, dtype=getattr(lib, d))
                                 for s, d in zip(shapes, dts)])
            outcomes.append(None)
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1] and outcomes[0] is not None
