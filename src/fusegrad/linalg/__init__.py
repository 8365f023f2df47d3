"""`fusegrad.linalg`: PyTorch's `torch.linalg` namespace.

Each function picks the registry op PyTorch records (`linalg.inv` runs `linalg_inv_ex` with
`check_errors=True`, so its node is `LinalgInvExBackward0`), or composes ops as PyTorch's
composite does (`matrix_norm(A, 2)` is an `amax` over `svdvals`), so graphs carry the same
node names. Errors are PyTorch's, a singular or non-positive-definite input raising
`LinAlgError` (a RuntimeError).

Every function takes float32/float64 and complex64/complex128 input, as PyTorch's; `eig` and
`eigvals` return complex results for real input too.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype, return_types
from .. import _tensor as _tensor_module
from .._autocast import composite as _composite
from .._dispatch import call
from .._functions.linear_algebra import matmul
from .._functions.reduction import _vector_norm
from .._out import guard_namespace as _guard_out
from .._shapes import wrap_dim as _wrap_dim
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled
from ..ops import factorizations as D
from ..ops import linalg as P
from ..ops import lu as LUO
from ..ops import solvers as V
from ..ops._linalg_common import (
    LAPACK_NP,
    LinAlgError,
    check_floating,
    check_matrix,
    check_square,
    check_square_float,
)
from ..ops._util import HALF as _HALF_NP
from ..ops.joins import cat as _cat_op

__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig",
    "eigh", "eigvals", "eigvalsh", "householder_product", "inv", "inv_ex", "ldl_factor",
    "ldl_factor_ex", "ldl_solve", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
    "matmul", "matrix_exp", "matrix_norm", "matrix_power",
    "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex",
    "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
    "vector_norm",
]


def _needs_grad(a: Tensor) -> bool:
    # As PyTorch: value-only functions (svdvals, eigvalsh) compute the vectors only when a
    # backward will need them, or a tangent (at an open forward AD level).
    if a.requires_grad and is_grad_enabled():
        return True
    lookup = _tensor_module.tangent_lookup
    return lookup is not None and lookup(a) is not None


# ---------------------------------------------------------------- inverses and determinants


def inv_ex(A: Tensor, *, check_errors: bool = False, out=None):
    """The inverse of square matrices and LAPACK's `info` (nonzero where singular)."""
    return return_types.linalg_inv_ex(*call(V.linalg_inv_ex, A, check_errors))


@_composite("fp32")
def inv(A: Tensor, *, out=None) -> Tensor:
    """The inverse of square matrices; a singular matrix raises LinAlgError."""
    return call(V.linalg_inv_ex, A, True)[0]


def det(A: Tensor, *, out=None) -> Tensor:
    """The determinant of square matrices."""
    return call(V.linalg_det, A)


def slogdet(A: Tensor, *, out=None):
    """(sign, log |det|) of square matrices."""
    return return_types.linalg_slogdet(*call(V.linalg_slogdet, A))


def pinv(A: Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None,
         out=None) -> Tensor:
    """The Moore-Penrose pseudo-inverse; singular values at most max(atol, rtol * largest)
    are treated as zero (`rcond` is the older name of `rtol`)."""
    if rcond is not None:
        if atol is not None or rtol is not None:
            _pinv_overload_error(A, rcond, atol, rtol, "rcond")
        rtol = rcond
    elif isinstance(atol, Tensor) != isinstance(rtol, Tensor) and \
            atol is not None and rtol is not None:
        _pinv_overload_error(A, rtol, atol, None, "rtol")
    if isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        # Per-matrix tolerances, broadcast against the batch (PyTorch's Tensor overload).
        return call(V.linalg_pinv_tensor, A, atol, rtol, hermitian)
    return call(V.linalg_pinv, A, atol, rtol, hermitian)


def _pinv_overload_error(A, first, atol, rtol, first_name: str):
    """PyTorch's TypeError for a mix of tolerances no overload of linalg_pinv takes."""
    def kind(x):
        return "Tensor" if isinstance(x, Tensor) else type(x).__name__

    got = [f"{first_name}={kind(first)}"] + [f"{n}={kind(v)}" for n, v in (
        ("atol", atol), ("rtol", rtol)) if v is not None]
    raise TypeError(
        f"linalg_pinv() received an invalid combination of arguments - got ({kind(A)}, "
        f"{', '.join(got)}), but expected one of:\n"
        " * (Tensor input, *, Tensor atol = None, Tensor rtol = None, bool hermitian = False, "
        "Tensor out = None)\n"
        " * (Tensor input, *, float atol = None, float rtol = None, bool hermitian = False, "
        "Tensor out = None)\n"
        " * (Tensor input, Tensor rcond, bool hermitian = False, *, Tensor out = None)\n"
        " * (Tensor input, float rcond, bool hermitian = False, *, Tensor out = None)\n")


def _number(x):
    return x.item() if isinstance(x, Tensor) else x


def _tolerance(x):
    """A tolerance (None, a number or a tensor) as a NumPy array, or None."""
    if x is None:
        return None
    return np.asarray(x.detach().numpy() if isinstance(x, Tensor) else x, dtype=np.float64)


def matrix_power(A: Tensor, n: int, *, out=None) -> Tensor:
    """A to the integer power `n` (the inverse's power for negative `n`)."""
    check_square_float("linalg.matrix_power", A) if A.is_floating_point() else \
        D.check_square("linalg.matrix_power", A)
    if n == 0:
        eye = Tensor._make(np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype.np),
                                           tuple(A.shape)).copy())
        return A.clone().copy_(eye)
    inverted = n < 0
    if inverted:
        A = inv(A)
        n = -n
    if n == 1:  # PyTorch copies A, but returns the inverse itself
        return A if inverted else A.clone()
    if n == 2:
        return matmul(A, A)
    if n == 3:
        return matmul(matmul(A, A), A)
    z = result = None
    while n > 0:  # binary powering from the lowest bit, as PyTorch
        bit, n = n % 2, n // 2
        z = A if z is None else matmul(z, z)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential."""
    return call(V.matrix_exp, A)


# ---------------------------------------------------------------- factorizations


def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first n columns of the product of the Householder reflectors I - tau_i v_i v_i^H
    stored below A's diagonal (LAPACK's orgqr): the Q of a `geqrf` factorization."""
    return call(D.linalg_householder_product, A, tau)


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False,
                  out=None):
    """The Bunch-Kaufman LDL factorization of symmetric matrices (LAPACK's sytrf, lower):
    the packed L and D, the pivots and LAPACK's `info` (nonzero where D is singular)."""
    return return_types.linalg_ldl_factor_ex(
        *call(D.linalg_ldl_factor_ex, A, hermitian, check_errors))


def ldl_factor(A: Tensor, *, hermitian: bool = False, out=None):
    """`ldl_factor_ex` without `info`, raising PyTorch's error where D is singular."""
    ld, piv, info = call(D.linalg_ldl_factor_ex, A, hermitian, False)
    D.ldl_error("torch.linalg.ldl_factor", info.numpy())
    return return_types.linalg_ldl_factor(ld, piv)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *,  # noqa: N803
              hermitian: bool = False, out=None) -> Tensor:
    """The solution X of A X = B from A's `ldl_factor`."""
    return call(D.linalg_ldl_solve, LD, pivots, B, hermitian)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False, out=None):
    """The Cholesky factor and LAPACK's `info` (the order of the first non-positive minor)."""
    return return_types.linalg_cholesky_ex(*call(D.linalg_cholesky_ex, A, upper, check_errors))


@_composite("fp32")
def cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor of symmetric positive-definite matrices (lower by default)."""
    return call(D.linalg_cholesky_ex, A, upper, True)[0]


def qr(A: Tensor, mode: str = "reduced", *, out=None):
    """The QR decomposition; mode 'reduced', 'complete' or 'r'."""
    return return_types.linalg_qr(*call(D.linalg_qr, A, mode))


@_composite("fp32")
def svd(A: Tensor, full_matrices: bool = True, *, driver=None, out=None):
    """The singular value decomposition A = U diag(S) Vh (signs of the vectors may differ
    from PyTorch's LAPACK)."""
    return return_types.linalg_svd(*call(D.linalg_svd, A, full_matrices, True, driver))


@_composite("fp32")
def svdvals(A: Tensor, *, driver=None, out=None) -> Tensor:
    """The singular values, in descending order."""
    return call(D.linalg_svd, A, False, _needs_grad(A), driver)[1]


@_composite("fp32")
def eigh(A: Tensor, UPLO: str = "L", *, out=None):  # noqa: N803 (PyTorch's name)
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, from one triangle."""
    return return_types.linalg_eigh(*call(D.linalg_eigh, A, UPLO, True))


@_composite("fp32")
def eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:  # noqa: N803
    """Eigenvalues (ascending) of symmetric matrices."""
    return call(D.linalg_eigh, A, UPLO, _needs_grad(A))[0]


def eig(A: Tensor, *, out=None):
    """Eigenvalues and eigenvectors of general square matrices, complex even for real input
    (LAPACK's geev: unit-norm vectors whose largest component is real)."""
    return return_types.linalg_eig(*call(D.linalg_eig, A))


@_composite("fp32")  # (PyTorch's CPU autocast)
def eigvals(A: Tensor, *, out=None) -> Tensor:
    """Eigenvalues of general square matrices (complex), in LAPACK's order."""
    D._eig_dtype_check(A)
    D.check_square("linalg.eigvals", A)  # before the values are read, as PyTorch
    return call(D.linalg_eig, A)[0]


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False, out=None):
    """The packed LU factorization with partial pivoting, its pivots and LAPACK's `info`."""
    return return_types.linalg_lu_factor_ex(*call(LUO.linalg_lu_factor_ex, A, pivot, check_errors))


def lu_factor(A: Tensor, *, pivot: bool = True, out=None):
    """The packed LU factorization and pivots; an exactly singular U raises."""
    lu_, piv, info = call(LUO.linalg_lu_factor_ex, A, pivot, False)
    if not info.is_meta:  # (a meta factorization has no info to check)
        LUO.lu_factor_error("torch.linalg.lu_factor", info.numpy())
    return return_types.linalg_lu_factor(lu_, piv)


def lu(A: Tensor, *, pivot: bool = True, out=None):
    """A = P L U with P a permutation, L unit lower and U upper triangular."""
    return return_types.linalg_lu(*call(LUO.linalg_lu, A, pivot))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
             adjoint: bool = False, out=None) -> Tensor:
    """Solve with a packed LU factorization (from `lu_factor`)."""
    return call(LUO.linalg_lu_solve, LU, pivots, B, left, adjoint)


# ---------------------------------------------------------------- solvers


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False,
             out=None):
    """The solution of AX = B (XA = B when not `left`) and LAPACK's `info`."""
    return return_types.linalg_solve_ex(*call(V.linalg_solve_ex, A, B, left, check_errors))


@_composite("fp32")
def solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    """The solution of AX = B (XA = B when not `left`); a singular A raises LinAlgError."""
    return call(V.linalg_solve_ex, A, B, left, True)[0]


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out=None) -> Tensor:
    """The solution of a triangular system (only A's `upper` or lower triangle is read)."""
    return call(V.solve_triangular, A, B, upper, left, unitriangular)


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None, out=None):
    """Least-squares solution of AX = B, with residuals, rank and singular values as the
    `driver` (default 'gelsy') reports them."""
    return return_types.linalg_lstsq(*call(V.linalg_lstsq, A, B, rcond, driver))


@_composite("fp32")
def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The inverse of A for `tensordot` over its first `ind` dims."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    head, tail = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows = math.prod(head)
    if rows != math.prod(tail):
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            f"prod(self.shape[:ind]), but got {math.prod(tail)} != {rows}")
    inverse, info = inv_ex(A.reshape(rows, rows))
    if int(info) > 0:  # (PyTorch's message names `inv` here)
        raise LinAlgError(f"inv: The diagonal element {int(info)} is zero, the inversion "
                          "could not be completed because the input matrix is singular.")
    return inverse.reshape(tail + head)


@_composite("fp32")
def tensorsolve(A: Tensor, B: Tensor, dims=None, *, out=None) -> Tensor:
    """X such that tensordot(A, X, X.ndim) == B."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        keep = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*keep, *dims)
    rest = tuple(A.shape[B.ndim:])
    n = B.numel()
    if math.prod(rest) != n:  # (PyTorch's words; its right side is B's size)
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
            f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != {n}")
    result = solve(A.reshape(n, -1), B.reshape(n))
    return result.view(rest)


# ---------------------------------------------------------------- norms


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None,
                out=None) -> Tensor:
    """The vector `ord`-norm of `x` over `dim` (all elements by default)."""
    return _vector_norm(x, ord, dim, keepdim, dtype=dtype)


def _amax_amin(x, dim, keepdim, smallest):
    if smallest:
        return x.amin(dim, keepdim)
    if x.shape[dim] == 0:
        # An empty matrix's norm is 0 (amax itself refuses an empty dim); PyTorch returns
        # fresh zeros there, outside the graph.
        return x.detach().sum(dim, keepdim)
    return x.amax(dim, keepdim)


_SVD_ORDS = ("nuc", 2, -2)
_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def _matrix_norm_checks(A: Tensor, ord, dim, dtype) -> tuple:
    """PyTorch's checks of matrix_norm's arguments, in its order and with its messages; the
    two reduced dims, wrapped."""
    name = "linalg.matrix_norm"
    if not (ord in _MATRIX_ORDS if isinstance(ord, (str, numbers.Number)) else False):
        raise RuntimeError(f"{name}: Order {ord} not supported.")
    check_matrix(name, A)
    dt = A.dtype
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {dt.legacy}")
    if ord in _SVD_ORDS and dt.np in _HALF_NP:  # LAPACK has no half-precision SVD
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {dt.legacy}")
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = (_wrap_dim(d, A.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({d0}, {d1})")
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(f"{name}: dtype should be floating point or complex, but got "
                               f"{dtype.legacy}")
        if dt.is_complex != dtype.is_complex:
            kind = "complex for complex" if dt.is_complex else "real for real"
            raise RuntimeError(f"{name}: dtype should be {kind} inputs, but got {dtype.legacy}")
        if _dtype.promote_types(dt, dtype) is not dtype:
            raise RuntimeError(f"{name}: the dtype of the input ({dt.legacy}) should be "
                               "convertible without narrowing to the specified dtype "
                               f"({dtype.legacy})")
    return d0, d1


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None,
                out=None) -> Tensor:
    """Matrix norms: 'fro', 'nuc', 2, -2 (extreme singular values), 1, -1, inf, -inf."""
    d0, d1 = _matrix_norm_checks(A, ord, dim, dtype)
    if dtype is not None:
        A = A.to(dtype)
    nd = A.ndim
    if ord == "fro":
        return _vector_norm(A, 2, (d0, d1), keepdim)
    if ord in _SVD_ORDS:
        keep = [d for d in range(nd) if d not in (d0, d1)]
        perm = keep + [d0, d1]
        s = svdvals(A.permute(*perm))
        if ord == "nuc":
            r = s.sum(-1, keepdim)
        elif ord == -2 and s.shape[-1] == 0:
            # PyTorch's message names the dim as it reduces it (amin's own wraps it).
            raise IndexError("amin(): Expected reduction dim -1 to have non-zero size.")
        else:
            r = _amax_amin(s, -1, keepdim, ord == -2)
        if keepdim:
            inverse = [perm.index(d) for d in range(nd)]
            r = r.unsqueeze(-1).permute(*inverse)
        return r
    # 1, -1 (column sums), inf, -inf (row sums)
    if abs(ord) == math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    return _amax_amin(_vector_norm(A, 1, d0, keepdim), d1, keepdim, ord < 0)


def norm(input: Tensor, ord=None, dim=None, keepdim: bool = False, *, out=None,
         dtype=None) -> Tensor:
    """Vector or matrix norm, chosen from `ord` and `dim` as PyTorch does: a matrix norm for
    a string `ord`, or for a numeric one over two dims (two given, or a 2-D input's); else
    the vector norm (the 2-norm when `ord` is None)."""
    if isinstance(dim, numbers.Integral):
        dim = (int(dim),)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dim)}")
    elif (ord is not None) and input.ndim not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {input.ndim}D.")
    if isinstance(ord, str) or (ord is not None and (
            len(dim) == 2 if dim is not None else input.ndim == 2)):
        return matrix_norm(input, ord, (0, 1) if dim is None else dim, keepdim, dtype=dtype)
    return _vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


@_composite("fp32")
def cond(A: Tensor, p=None, *, out=None) -> Tensor:
    """The condition number in the norm `p` (the 2-norm by default)."""
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    is_number = isinstance(p, numbers.Number) and not isinstance(p, bool)
    if is_number and p not in (2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {_shown(p)}")
    if A.numel() == 0 and (p is None or is_number or A.shape[-1] == A.shape[-2]):
        if not is_number and p is not None and p not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
        # PyTorch answers an empty input with fresh zeros (real), outside the graph.
        real = A.dtype.to_real() if A.dtype.is_complex else A.dtype
        return A.detach().new_zeros(tuple(A.shape[:-2]), dtype=real)
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = s.narrow(-1, 0, 1), s.narrow(-1, s.shape[-1] - 1, 1)
        r = big / small if p != -2 else small / big
        return r.squeeze(-1)
    check_square(f"linalg.cond(ord={_shown(p)})", A)
    if p not in ("fro", "nuc") and not is_number:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    check_floating("linalg.inv", A)  # (the inverse's check comes next)
    inverse, info = inv_ex(A)
    singular = info > 0
    if bool(singular.any()):
        # A singular matrix's inverse norm is inf (LAPACK's partial inverse holds NaNs, whose
        # SVD would raise): cond is inf there, or NaN where A's own norm is 0, as PyTorch.
        inverse = inverse.masked_fill(singular[..., None, None], 0)
        r = matrix_norm(A, p) * matrix_norm(inverse, p).masked_fill(singular, math.inf)
    else:
        r = matrix_norm(A, p) * matrix_norm(inverse, p)
    if p == "nuc":
        return r  # (PyTorch leaves out the nan_to_num here: its node is the product's)
    return r.nan_to_num(math.inf, math.inf)


def _shown(p) -> str:
    """An order as PyTorch's messages print it (C++'s stream: 1.0 is 1)."""
    return f"{p:g}" if isinstance(p, float) else str(p)


@_composite("fp32")
def matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None,
                out=None) -> Tensor:
    """The number of singular values above max(atol, rtol * largest) (int64)."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least "
                           "2 dimensions.")
    if A.dtype.np not in LAPACK_NP:
        raise RuntimeError("This function doesn't handle types other than float and double")
    if tol is not None:
        atol, rtol = tol, 0.0
    data = A.detach().numpy()
    m, n = data.shape[-2:]
    if data.size == 0:
        return Tensor._make(np.zeros(data.shape[:-2], np.int64))
    s = np.abs(np.linalg.eigvalsh(data)) if hermitian else np.linalg.svd(data, compute_uv=False)
    # atol and rtol may be tensors, one tolerance per matrix of the batch (broadcast).
    atol, rtol = _tolerance(atol), _tolerance(rtol)
    if rtol is None:
        eps = np.finfo(s.dtype).eps * max(m, n)
        rtol = np.asarray(eps) if atol is None else np.where(atol > 0, 0.0, eps)
    atol = np.asarray(0.0) if atol is None else atol
    tol_ = np.maximum(atol[..., None], rtol[..., None] * s.max(-1, keepdims=True))
    return Tensor._make(np.asarray((s > tol_).sum(-1), dtype=np.int64))


# ---------------------------------------------------------------- products


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """The cross product of 3-vectors along `dim`."""
    return call(P.linalg_cross, input, other, dim)


@_composite("lower")
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """The dot product of vectors along `dim` (broadcast), conjugating `x`: `sum(conj(x) y)`."""
    dx, dy = x.dtype, y.dtype
    if not (dx.is_floating_point or dx.is_complex):
        raise RuntimeError("linalg.vecdot: Expected a floating point or complex tensor as input. "
                           f"Got {dx.legacy}")
    if dx is not dy:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x "
                           f"of type {dx.legacy} and y of type {dy.legacy} instead")
    if x.ndim == 1 and y.ndim == 1 and dim in (0, -1):
        return call(P.vdot, x, y)
    # A real x is its own conjugate: only complex dtypes record the ConjBackward0.
    return ((x.conj() if dx.is_complex else x) * y).sum(dim)


def multi_dot(tensors, *, out=None) -> Tensor:
    """The product of a chain of matrices, in the cheapest order (the first and last may be
    vectors)."""
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    # PyTorch's checks, in its order: the ends, the middle, then one dtype for all.
    for i, which in ((0, "first"), (n - 1, "last")):
        if tensors[i].ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got "
                               f"{tensors[i].ndim}D")
    for i in range(1, n - 1):
        if tensors[i].ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got "
                               f"{tensors[i].ndim}D")
    for i in range(1, n):
        if tensors[i].dtype is not tensors[0].dtype:
            raise RuntimeError("multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {tensors[0].dtype.cpp} and tensor {i} "
                               f"{tensors[i].dtype.cpp}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(n - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} "
                f"and {list(tensors[i + 1].shape)} cannot be multiplied")
    out_shape = ((mats[0].shape[0],) if not first_vec else ()) + \
        ((mats[-1].shape[1],) if not last_vec else ())
    return _chain(mats).view(out_shape)


def _chain(mats):
    """Matrix-chain product in the order of least multiplications (dynamic programming)."""
    n = len(mats)
    if n == 2:
        return mats[0].mm(mats[1])
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    if n == 3:  # (AB)C or A(BC), as PyTorch compares them
        a, b, c, d = dims
        if a * c * (b + d) < b * d * (a + c):
            return mats[0].mm(mats[1]).mm(mats[2])
        return mats[0].mm(mats[1].mm(mats[2]))
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def build(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return build(i, k).mm(build(k + 1, j))

    return build(0, n - 1)


def vander(x: Tensor, N: int | None = None) -> Tensor:  # noqa: N803 (PyTorch's name)
    """The Vandermonde matrix of `x`: columns x^0, x^1, ..., x^(N-1)."""
    if x.dtype.np == np.bool_:
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {x.dtype.legacy}")
    if x.ndim < 1:  # (PyTorch takes a scalar as one element)
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    ones = x.new_ones(tuple(x.shape) + (1,))
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return call(_cat_op, [ones, powers], -1)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonal of (a batch of) matrices (a view)."""
    return A.diagonal(offset, dim1, dim2)


# Last, once every function exists: PyTorch's out= on each (`_out.write_out`).
_guard_out(globals(), "fusegrad.linalg")
# Then every public function honours `__torch_function__` (see fusegrad._torch_function).
from .._torch_function_wrappers import wrap_namespace as _wrap_torch_function  # noqa: E402

_wrap_torch_function(globals(), "torch.linalg")
