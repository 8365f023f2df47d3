"""Pieces the linear algebra ops share (`factorizations.py`, `solvers.py`): `LinAlgError`,
PyTorch's argument checks and messages, and a batched LU with partial pivoting (NumPy's
`linalg` has none) whose pivots and `info` follow LAPACK's `getrf`, so error messages can name
the zero pivot as PyTorch does.
"""

from __future__ import annotations

import functools

import numpy as np

from .._shapes import contiguous_strides
from .._thread_state import active as _active
from ._util import F32, F64, HALF, dtype_of

C64 = np.dtype(np.complex64)
C128 = np.dtype(np.complex128)
# The dtypes LAPACK works in: PyTorch's linalg functions take these four.
LAPACK_NP = (F32, F64, C64, C128)


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (PyTorch's `torch.linalg.LinAlgError`)."""


# Named as PyTorch names it (`torch._C._LinAlgError`, which tracebacks, reprs and pickles
# print); `fusegrad._C` holds it under that name.
LinAlgError.__module__ = "fusegrad._C"
LinAlgError.__name__ = LinAlgError.__qualname__ = "_LinAlgError"


# ---------------------------------------------------------------- checks shared with solvers


def check_floating(name: str, a) -> None:
    """PyTorch's dtype checks of the linalg functions (float32/float64, complex64/128)."""
    dt = dtype_of(a)
    if dt.np in HALF:
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {dt.legacy}")
    if dt.np not in LAPACK_NP:
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {dt.legacy}")


def check_matrix(name: str, a, arg: str = "A") -> None:
    """At least 2-D."""
    if len(a.shape) < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")


def check_square(name: str, a, arg: str = "A") -> None:
    """At least 2-D and square in the last two dims."""
    check_matrix(name, a, arg)
    m, n = a.shape[-2:]
    if m != n:
        raise RuntimeError(
            f"{name}: {arg} must be batches of square matrices, but they are {m} by {n} "
            "matrices")


def check_square_float(name: str, a, arg: str = "A") -> None:
    """Both checks, in PyTorch's order."""
    check_square(name, a, arg)
    check_floating(name, a)


def batch_prefix(info: np.ndarray, k: int) -> str:
    """"(Batch element k): " for batched inputs, as PyTorch prefixes its LAPACK errors."""
    return f"(Batch element {k}): " if info.ndim else ""


def first_failure(info: np.ndarray):
    """(flat batch index, code) of the first nonzero `info`, or None."""
    flat = np.ravel(info)
    bad = np.flatnonzero(flat)
    return None if not len(bad) else (int(bad[0]), int(flat[bad[0]]))


def lu_np(a: np.ndarray):
    """Batched LU with partial pivoting: (LU, 1-based int32 pivots, int32 info).

    Pivot choice and `info` (1-based index of the first exactly-zero pivot) follow LAPACK's
    getrf (complex entries compared by |Re| + |Im|, as izamax); a zero pivot leaves its
    column unscaled, as getrf does."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    count = int(np.prod(batch, dtype=np.int64))
    lu = np.array(a, dtype=a.dtype).reshape((count, m, n))
    piv = np.zeros((count, k), np.int32)
    info = np.zeros(count, np.int32)
    rows = np.arange(count)
    for j in range(k):
        col = lu[:, j:, j]
        # LAPACK's i?amax: |Re| + |Im| for complex entries (cabs1), not the modulus.
        size = np.abs(col.real) + np.abs(col.imag) if col.dtype.kind == "c" else np.abs(col)
        p = j + np.argmax(size, axis=1)
        piv[:, j] = p + 1
        top = lu[rows, j].copy()
        lu[rows, j] = lu[rows, p]
        lu[rows, p] = top
        d = lu[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        scale = np.where(zero, 1, d)
        lu[:, j + 1:, j] /= scale[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(batch + (m, n)), piv.reshape(batch + (k,)), info.reshape(batch)


def pivots_to_perm(piv: np.ndarray, m: int) -> np.ndarray:
    """The row permutation (as indices) that LAPACK's sequential swaps describe."""
    batch = piv.shape[:-1]
    count = int(np.prod(batch, dtype=np.int64))
    flat = piv.reshape((count, piv.shape[-1])).astype(np.int64) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        top = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = top
    return perm.reshape(batch + (m,))


def real_np(dt: np.dtype) -> np.dtype:
    """The real dtype of a complex NumPy dtype's components (singular values, eigenvalues of
    Hermitian matrices, log |det|); a real dtype itself."""
    return np.empty(0, dt).real.dtype


def is_complex(t) -> bool:
    """Whether a tensor (or fake) has a complex dtype."""
    return t.dtype.is_complex


def adj(t):
    """The conjugate transpose (PyTorch's `mH`); the transpose alone for real tensors, so the
    real derivatives record what they did before complex support."""
    return t.mH if t.dtype.is_complex else t.mT


def eye_like(a, n: int | None = None):
    """An identity matrix with `a`'s dtype (a tensor without history)."""
    from .._tensor import Tensor

    n = a.shape[-1] if n is None else n
    if a.is_meta:  # (beside meta tensors, on the meta device)
        from .. import _meta

        return _meta.make((n, n), a.dtype)
    if _active.modes:
        # Made by the factory, so that a tracer (AOT autograd tracing a derivative) records
        # it as an op rather than meeting an unknown tensor.
        from .._creation import eye

        return eye(n, dtype=a.dtype)
    return Tensor._make(np.eye(n, dtype=a.dtype.np))


# ---------------------------------------------------------------- LAPACK's result layout
#
# PyTorch's LAPACK-backed results are batches of column-major matrices (each matrix stored
# by columns, the batch outside): `linalg.inv(A).stride()` is `(1, n)`, `qr`, `svd`, `eigh`,
# `solve`, `cholesky`, `lu_factor`... alike. Programs see it (`stride()`, `is_contiguous()`,
# whether `view` works) and elementwise ops on such a result keep its order, so the kernels
# below lay their results out the same way, and their metas say so.


def col_major_strides(shape: tuple) -> tuple | None:
    """The element strides of a batch of column-major matrices of `shape` (None below 2-D:
    nothing to reorder)."""
    if len(shape) < 2:
        return None
    strides = contiguous_strides(tuple(shape[:-2]) + (shape[-1], shape[-2]))
    return strides[:-2] + (strides[-1], strides[-2])


def col_major(a: np.ndarray) -> np.ndarray:
    """`a`'s values as a batch of column-major matrices (`a` itself when it is one already,
    or below 2-D)."""
    if a.ndim < 2:
        return a
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


def _pick(results, which, fix):
    if isinstance(results, tuple):
        return tuple(fix(r) if i in which else r for i, r in enumerate(results))
    return fix(results)


def col_major_results(which: tuple = (0,), when=None):
    """Decorate a kernel and its meta (the same decorator for both) so results number
    `which` (of a tuple; a single result otherwise) are column-major batches, as LAPACK
    leaves PyTorch's; `when(*args, **kwargs)` says for which arguments (default: all)."""

    def fix(r):
        if isinstance(r, np.ndarray):
            return col_major(r)
        r.strides = col_major_strides(tuple(r.shape))  # a meta's Spec (fresh per call)
        return r

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if when is not None and not when(*args, **kwargs):
                return out
            return _pick(out, which, fix)

        return wrapper

    return decorate
