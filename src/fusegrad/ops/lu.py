"""The LU factorization with partial pivoting: `linalg_lu_factor_ex`, `linalg_lu`,
`lu_unpack` and `linalg_lu_solve`, with PyTorch's derivatives (square, tall and wide) in
fusegrad ops. The factorization itself is `_linalg_common.lu_np` (LAPACK's pivots and info).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call
from ._linalg_common import (
    LAPACK_NP,
    adj,
    batch_prefix,
    check_matrix,
    check_square_float,
    col_major_results,
    first_failure,
    lu_np,
    pivots_to_perm,
)
from ._util import Spec, dtype_of, not_implemented_for, rand_array
from .factorizations import _cat_last, _int_spec
from .registry import Sample, register

# LAPACK's results are batches of column-major matrices in PyTorch: these results too
# (`lu_solve`'s on the left only: on the right it transposes back).
_COL0 = col_major_results((0,))
_LEFT_COL = col_major_results((0,), when=lambda lu, piv, b, left=True, adjoint=False: left)


def _lu_check(a, pivot):
    if len(a.shape) < 2:
        shape = ", ".join(str(s) for s in a.shape)
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: [{shape}] instead")
    dt = dtype_of(a)
    if dt.np not in LAPACK_NP:
        raise not_implemented_for("lu_cpu", dt)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


def lu_factor_error(name: str, info: np.ndarray) -> None:
    """PyTorch's error for an exactly zero pivot of U."""
    fail = first_failure(info)
    if fail is not None:
        k = fail[1]
        raise RuntimeError(
            f"{name}: {batch_prefix(info, fail[0])}U[{k},{k}] is zero and using it on lu_solve "
            "would result in a division by zero. If you still want to perform the "
            "factorization, consider calling linalg.lu(A, pivot) or "
            "linalg.lu_factor_ex(A, pivot)")


def _lu_factor_kernel(a, pivot=True, check_errors=False):
    _lu_check(a, pivot)
    lu, piv, info = lu_np(a)
    if check_errors:
        lu_factor_error("torch.linalg.lu_factor_ex", info)
    return lu, piv, info


def _lu_factor_meta(a, pivot=True, check_errors=False):
    _lu_check(a, pivot)
    m, n = a.shape[-2:]
    batch = tuple(a.shape[:-2])
    return Spec(tuple(a.shape), a.dtype), _int_spec(batch + (min(m, n),)), _int_spec(batch)


def _perm_matrix(piv: np.ndarray, m: int, dtype) -> np.ndarray:
    """P with A = P L U, from LAPACK's pivots."""
    perm = pivots_to_perm(piv, m)
    # (row-major, as PyTorch's P)
    return np.ascontiguousarray(np.swapaxes(np.eye(m, dtype=dtype)[perm], -1, -2))


def _unpack(lu):
    """(L, U) of a packed LU tensor, in fusegrad ops (differentiable; the identity made by
    the factory, so that AOT autograd tracing a derivative records it)."""
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    from .._creation import eye

    ones = eye(m, k, dtype=lu.dtype, device=lu.device)
    return lu[..., :, :k].tril(-1) + ones, lu[..., :k, :].triu()


def lu_backward(gl, gu, p, low, up):
    """Gradient of A = P L U (PyTorch's formulas; tall and wide through their square block)."""
    from .solvers import solve_triangular as st

    m, n = low.shape[-2], up.shape[-1]
    k = min(m, n)

    def square(phi, l1, u1):  # L1^{-H} phi U1^{-H}
        x = call(st, adj(u1), phi, False, False, False)
        return call(st, adj(l1), x, True, True, True)

    if m == n:
        phi = adj(low).matmul(gl).tril(-1) + gu.matmul(adj(up)).triu()
        return p.matmul(square(phi, low, up))
    if m < n:
        u1, u2, gu1, gu2 = up[..., :, :k], up[..., :, k:], gu[..., :, :k], gu[..., :, k:]
        phi = (adj(low).matmul(gl) - gu2.matmul(adj(u2))).tril(-1) + \
            gu1.matmul(adj(u1)).triu()
        x2 = call(st, adj(low), gu2, True, True, True)
        return p.matmul(_cat_last(square(phi, low, u1), x2))
    l1, l2, gl1, gl2 = low[..., :k, :], low[..., k:, :], gl[..., :k, :], gl[..., k:, :]
    phi = adj(l1).matmul(gl1).tril(-1) + (gu.matmul(adj(up)) - adj(l2).matmul(gl2)).triu()
    x2 = call(st, adj(up), gl2, False, False, False)
    from .joins import cat

    return p.matmul(call(cat, [square(phi, l1, up), x2], -2))


def _lu_factor_derivative(grads, lu, piv):
    g = grads[0]
    p = _p_tensor(piv, lu)
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    low, up = _unpack(lu)
    return (lu_backward(g[..., :, :k].tril(-1), g[..., :k, :].triu(), p, low, up), None, None)


def _p_tensor(piv, like):
    """P from saved pivots, by `lu_unpack` (an op: AOT autograd traces it, where reading
    the pivots' values could not be)."""
    return call(lu_unpack, like.detach(), piv, False, True)[0]


def _lu_samples(rng, dt):
    from .solvers import well_conditioned

    return [Sample((well_conditioned(rng, s, dt),), name=str(s))
            for s in ((3, 3), (2, 4, 4), (4, 3), (3, 5))]


linalg_lu_factor_ex = register(
    "linalg_lu_factor_ex", kernel=_COL0(_lu_factor_kernel), meta=_COL0(_lu_factor_meta),
    node="LinalgLuFactorExBackward0", derivative=_lu_factor_derivative,
    save=lambda out, a, pivot=True, check_errors=False: (out[0], out[1]),
    samples=_lu_samples, nondiff_outputs=(1, 2), public="linalg_lu_factor_ex",
    saved_names=("LU", "pivots"))


def _lu_kernel(a, pivot=True):
    _lu_check(a, pivot)
    m, n = a.shape[-2:]
    k = min(m, n)
    lu, piv, _ = lu_np(a)
    low = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=a.dtype)
    return _perm_matrix(piv, m, a.dtype), low, np.ascontiguousarray(np.triu(lu[..., :k, :]))


def _lu_meta(a, pivot=True):
    _lu_check(a, pivot)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = tuple(a.shape[:-2])
    return (Spec(batch + (m, m), a.dtype), Spec(batch + (m, k), a.dtype),
            Spec(batch + (k, n), a.dtype))


linalg_lu = register(
    "linalg_lu", kernel=_lu_kernel, meta=_lu_meta, node="LinalgLuBackward0",
    derivative=lambda grads, p, low, up: (lu_backward(grads[1], grads[2], p, low, up), None),
    save=lambda out, a, pivot=True: (out[0], out[1], out[2]),
    samples=_lu_samples, nondiff_outputs=(0,), public="lu", saved_names=("P", "L", "U"))


def _lu_unpack_check(lu, piv):
    if len(lu.shape) < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(lu.shape)} instead")


def _lu_unpack_kernel(lu, piv, unpack_data=True, unpack_pivots=True):
    _lu_unpack_check(lu, piv)
    m, n = lu.shape[-2:]
    k = min(m, n)
    empty = np.zeros((0,), lu.dtype)
    p = _perm_matrix(piv, m, lu.dtype) if unpack_pivots else empty
    if not unpack_data:
        return p, empty, empty.copy()
    low = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    return p, low, np.ascontiguousarray(np.triu(lu[..., :k, :]))


def _lu_unpack_meta(lu, piv, unpack_data=True, unpack_pivots=True):
    _lu_unpack_check(lu, piv)
    m, n = lu.shape[-2:]
    k = min(m, n)
    batch = tuple(lu.shape[:-2])
    p = Spec(batch + (m, m) if unpack_pivots else (0,), lu.dtype)
    if not unpack_data:
        return p, Spec((0,), lu.dtype), Spec((0,), lu.dtype)
    return p, Spec(batch + (m, k), lu.dtype), Spec(batch + (k, n), lu.dtype)


def _lu_unpack_derivative(grads, shape, unpack_data):
    """L and U are the strict lower and the upper part of LU: their gradients go back there
    (zero-padded where the factors are narrower than LU)."""
    from .joins import cat

    _, gl, gu = grads
    if not unpack_data:
        return (None, None, None, None)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    gl, gu = gl.tril(-1), gu.triu()
    if m > k:
        gu = call(cat, [gu, gu.new_zeros(tuple(shape[:-2]) + (m - k, n))], -2)
    if n > k:
        gl = call(cat, [gl, gl.new_zeros(tuple(shape[:-2]) + (m, n - k))], -1)
    return (gl + gu, None, None, None)


def _lu_unpack_samples(rng, dt):
    out = []
    for s, data, pivots in (((3, 3), True, True), ((2, 4, 3), True, True), ((3, 5), True, True),
                            ((3, 3), True, False)):
        lu, piv, _ = lu_np(rand_array(rng, s, np.float64))
        out.append(Sample((lu.astype(dt), piv, data, pivots), name=f"{s} {data} {pivots}"))
    return out


lu_unpack = register(
    "lu_unpack", kernel=_lu_unpack_kernel, meta=_lu_unpack_meta, node="LuUnpackBackward0",
    derivative=_lu_unpack_derivative,
    save=lambda out, lu, piv, unpack_data=True, unpack_pivots=True: (tuple(lu.shape),
                                                                      unpack_data),
    samples=_lu_unpack_samples, nondiff_outputs=(0,), nondiff_args=(1,),
    saved_names=("", "unpack_data"))


def _lu_solve_check(lu, piv, b, left):
    dl, db = dtype_of(lu), dtype_of(b)
    if dl is not db:  # (PyTorch's first checks: the dtypes, then the pivots')
        raise RuntimeError("linalg.lu_solve: Expected LU and B to have the same dtype, but "
                           f"found LU of type {dl.legacy} and B of type {db.legacy} instead")
    if dtype_of(piv) is not _dtype.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type "
                           "torch.int32")
    check_square_float("linalg.lu_solve", lu, "LU")
    check_matrix("linalg.lu_solve", b, "B")
    n = lu.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{eq} ({n}x{n} and {b.shape[-2]}x{b.shape[-1]})")
    if len(piv.shape) < 1 or piv.shape[-1] != n:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the "
                           "dimension of the matrix")
    if tuple(piv.shape) != tuple(lu.shape[:-1]):
        raise RuntimeError("linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the "
                           f"same, but got pivots with shape {list(piv.shape)} instead")
    batch = np.broadcast_shapes(tuple(lu.shape[:-2]), tuple(b.shape[:-2]))
    return tuple(batch) + tuple(b.shape[-2:])


def _lu_solve_kernel(lu, piv, b, left=True, adjoint=False):
    _lu_solve_check(lu, piv, b, left)
    n = lu.shape[-1]
    low = np.tril(lu, -1) + np.eye(n, dtype=lu.dtype)
    a = _perm_matrix(piv, n, lu.dtype) @ low @ np.triu(lu)
    if adjoint:
        a = np.swapaxes(a, -1, -2).conj()
    if not left:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    x = np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]),
                        np.broadcast_to(b, batch + b.shape[-2:]))
    if not left:
        x = np.swapaxes(x, -1, -2)
    return np.ascontiguousarray(x).astype(lu.dtype, copy=False)


def _lu_solve_derivative(g, lu, piv, x, left, adjoint):
    from .solvers import solve_triangular as st

    p = _p_tensor(piv, lu)

    gb = call(linalg_lu_solve, lu, piv, g, left, not adjoint)
    low, up = _unpack(lu)
    if left != adjoint:
        rhs = -(g if left else adj(g)).matmul(adj(x) if left else x)
        gr = call(st, adj(up), rhs, False, True, False)
        gl = call(st, adj(low), gr.matmul(adj(up)), True, True, True).tril(-1)
        glu = gl + gr.triu()
    else:
        gr = -p.mT.matmul(x if left else adj(x)).matmul(adj(g) if left else g).matmul(p)
        gr = call(st, adj(low), gr, True, False, True)
        gu = call(st, adj(up), adj(low).matmul(gr), False, False, False).triu()
        glu = gr.tril(-1) + gu
    return (glu, None, gb, None, None)


def _lu_solve_samples(rng, dt):
    from .solvers import well_conditioned

    out = []
    for a, b, left, adjoint in (((3, 3), (3, 2), True, False), ((3, 3), (3, 2), True, True),
                                ((2, 3, 3), (4, 3), False, False),
                                ((3, 3), (2, 3), False, True)):
        lu, piv, _ = lu_np(well_conditioned(rng, a, np.float64))
        out.append(Sample((lu.astype(dt), piv, rand_array(rng, b, dt), left, adjoint),
                          name=f"{a} {b} left={left} adjoint={adjoint}"))
    return out


linalg_lu_solve = register(
    "linalg_lu_solve", kernel=_LEFT_COL(_lu_solve_kernel),
    meta=_LEFT_COL(lambda lu, piv, b, left=True, adjoint=False: Spec(
        _lu_solve_check(lu, piv, b, left), lu.dtype)),
    node="LinalgLuSolveBackward0", derivative=_lu_solve_derivative,
    save=lambda out, lu, piv, b, left=True, adjoint=False: (lu, piv, out, left, adjoint),
    samples=_lu_solve_samples, nondiff_args=(1,), public="lu_solve",
    saved_names=("LU", "pivots", "result", "left", "adjoint"))
