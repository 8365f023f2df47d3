"""Top-level linear algebra functions beyond the products (`det`, `inverse`, `svd`, `qr`,
`cholesky`, triangular and Cholesky solves, `kron`, `inner`, ...) and their Tensor methods.

Each records what PyTorch records: the older `torch.*` forms run the same registry ops as
`torch.linalg` (`torch.inverse` is `LinalgInvExBackward0`), except where PyTorch keeps an op
of their own (`torch.cholesky` is `CholeskyBackward0`, `triangular_solve`). The Tensor methods
are attached when this module is imported.
"""

from __future__ import annotations

import math

from .. import return_types
from .._autocast import composite
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warn_once_at
from .._warn import warn_once_at_caller
from ..ops import factorizations as D
from ..ops import linalg as P
from ..ops import lu as LUO
from ..ops import solvers as V
from ..ops.views import unsafe_view as _unsafe_view_op
from .linear_algebra import tensordot
from .pointwise import where
from .shape import int_argument

__all__ = [
    "det", "inverse", "slogdet", "logdet", "pinverse", "svd", "qr", "cholesky",
    "cholesky_solve", "cholesky_inverse", "triangular_solve", "matrix_power", "matrix_exp",
    "cross", "inner", "vdot", "addr", "addbmm", "kron", "chain_matmul", "lu_solve", "lu",
    "lu_unpack", "eig", "lstsq", "solve", "symeig", "matrix_rank", "orgqr", "geqrf", "ormqr",
]


def _linalg():
    """`fusegrad.linalg`, imported on first use: `import fusegrad` leaves it unloaded (the
    functions here that are `torch.linalg`'s under another name call its public ones)."""
    from .. import linalg

    return linalg


def det(input: Tensor) -> Tensor:
    """The determinant (`linalg.det`)."""
    return _linalg().det(input)


@composite("fp32")
def inverse(input: Tensor, *, out=None) -> Tensor:
    """The matrix inverse (`linalg.inv`)."""
    return _linalg().inv(input)


def slogdet(input: Tensor):
    """(sign, log |det|), as `linalg.slogdet`."""
    return return_types.slogdet(*call(V.linalg_slogdet, input))


def logdet(input: Tensor) -> Tensor:
    """log det: NaN for a negative determinant, -inf for a singular matrix; for complex
    input log(sign) + log |det|, as PyTorch."""
    D.check_square_float("logdet", input)
    sign, logabs = call(V.linalg_slogdet, input)
    if input.dtype.is_complex:
        return sign.log() + logabs
    return where(sign == -1, math.nan, logabs)


@composite("fp32")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """The pseudo-inverse, dropping singular values below `rcond` times the largest."""
    return call(V.linalg_pinv, input, None, rcond, False)


@composite("fp32")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out=None):
    """(U, S, V) with A = U diag(S) V^T (V, not Vh); reduced unless `some` is False. Without
    `compute_uv`, U and V are zero-filled, as in PyTorch."""
    if not compute_uv:
        s = _linalg().svdvals(input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return return_types.svd(input.new_zeros(batch + (m, m)), s, input.new_zeros(batch + (n, n)))
    u, s, vh = call(D.linalg_svd, input, not some, True, None)
    return return_types.svd(u, s, vh.mT)


_QR_DEPRECATED = (
    "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
    "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string "
    "parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = "
    "torch.linalg.qr(A, 'reduced' if some else 'complete')")


@composite("fp32")
def qr(input: Tensor, some: bool = True, *, out=None):
    """(Q, R); reduced unless `some` is False (with PyTorch's deprecation warning, once)."""
    warn_once_at(2, _QR_DEPRECATED)
    return return_types.qr(*call(D.linalg_qr, input, "reduced" if some else "complete"))


def cholesky(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """The Cholesky factor (the older form: its node is CholeskyBackward0), with PyTorch's
    deprecation warning (once per process)."""
    warn_once_at_caller(_CHOLESKY_DEPRECATED)
    return call(D.cholesky, input, upper)


# PyTorch's deprecation warnings from its core (TORCH_WARN_ONCE), in its words (its missing
# spaces included).
_CHOLESKY_DEPRECATED = (
    "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a "
    "future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\n"
    "L = torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be "
    "replaced with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent "
    "results for all valid (symmetric positive definite) inputs.")
_TRIANGULAR_SOLVE_DEPRECATED = (
    "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular"
    "and will be removed in a future PyTorch release.\ntorch.linalg.solve_triangular has "
    "its arguments reversed and does not return a copy of one of the inputs.\n"
    "X = torch.triangular_solve(B, A).solution\nshould be replaced with\n"
    "X = torch.linalg.solve_triangular(A, B).")
_LU_SOLVE_DEPRECATED = (
    "torch.lu_solve is deprecated in favor of torch.linalg.lu_solve"
    "and will be removed in a future PyTorch release.\nNote that torch.linalg.lu_solve has "
    "its arguments reversed.\nX = torch.lu_solve(B, LU, pivots)\nshould be replaced with\n"
    "X = torch.linalg.lu_solve(LU, pivots, B)")


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """X with (L L^T) X = input, from the Cholesky factor `input2`."""
    return call(V.cholesky_solve, input, input2, upper)


def cholesky_inverse(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """The inverse of L L^T from the Cholesky factor `input`."""
    return call(V.cholesky_inverse, input, upper)


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,  # noqa: N803
                     unitriangular: bool = False, *, out=None):
    """(solution, cloned_coefficient) of a triangular system A X = b."""
    warn_once_at_caller(_TRIANGULAR_SOLVE_DEPRECATED)
    return return_types.triangular_solve(*call(V.triangular_solve, b, A, upper, transpose,
                                               unitriangular))


_LU_DEPRECATED = (
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and "
    "will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\n"
    "should be replaced with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\n"
    "LU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with\n"
    "LU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)")


@composite("fp32")  # (PyTorch's CPU autocast: _lu_with_info)
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False, out=None):  # noqa: N803
    """The older `torch.lu`: (LU, pivots), with `info` when `get_infos`, and PyTorch's
    deprecation warning (once per process)."""
    warn_once_at(2, _LU_DEPRECATED)
    lu_, piv, info = call(LUO.linalg_lu_factor_ex, A, pivot, False)
    return (lu_, piv, info) if get_infos else (lu_, piv)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True, *, out=None):
    """(P, L, U) from a packed LU factorization (empty where not unpacked)."""
    return return_types.lu_unpack(*call(LUO.lu_unpack, LU_data, LU_pivots, unpack_data,
                                        unpack_pivots))


@composite("fp32")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out=None) -> Tensor:  # noqa: N803
    """The older `torch.lu_solve(b, LU, pivots)`."""
    warn_once_at_caller(_LU_SOLVE_DEPRECATED)
    return _linalg().lu_solve(LU_data, LU_pivots, b)


def orgqr(input: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """`torch.linalg.householder_product` under LAPACK's name."""
    return call(D.linalg_householder_product, input, tau)


def geqrf(input: Tensor, *, out=None):
    """LAPACK's QR factorization in its packed form: (a, tau), R on and above a's diagonal,
    the Householder vectors below it."""
    return return_types.geqrf(*call(D.geqrf, input))


def ormqr(input: Tensor, input2: Tensor, input3: Tensor, left: bool = True,
          transpose: bool = False, *, out=None) -> Tensor:
    """`input3` multiplied by the Q of `geqrf`'s (input, input2): on the left, or the right
    with `left=False`; Q's conjugate transpose with `transpose`."""
    return call(D.ormqr, input, input2, input3, left, transpose)


def matrix_power(input: Tensor, n: int, *, out=None) -> Tensor:
    """`linalg.matrix_power`."""
    if n.__class__ is not int:
        n = int_argument(n)  # (never a float truncated: PyTorch's parser takes ints only)
    return _linalg().matrix_power(input, n)


def matrix_exp(input: Tensor) -> Tensor:
    """`linalg.matrix_exp`."""
    return _linalg().matrix_exp(input)


def cross(input: Tensor, other: Tensor, dim: int | None = None, *, out=None) -> Tensor:
    """The cross product along `dim` (default: the first dimension of size 3)."""
    if dim is None:
        dim = next((d for d, s in enumerate(input.shape) if s == 3), -1)
    return call(P.linalg_cross, input, other, dim)


def inner(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Sum of products over the last dims (a product with a 0-d operand)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def vdot(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Dot product of two 1-D tensors."""
    return call(P.vdot, input, other)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1, out=None) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2)."""
    return call(P.addr, input, vec1, vec2, beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1,
           out=None) -> Tensor:
    """beta * input + alpha * sum_i batch1[i] @ batch2[i]."""
    return call(P.addbmm, input, batch1, batch2, beta, alpha)


def kron(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """The Kronecker product."""
    nd = max(input.ndim, other.ndim)
    a_shape = (1,) * (nd - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (nd - other.ndim) + tuple(other.shape)
    # (`_unsafe_view`, as PyTorch's: no view of the inputs, so MulBackward0 saves tensors
    # with versions of their own, and an input may change in place before backward.)
    a = call(_unsafe_view_op, input, sum(((s, 1) for s in a_shape), ()))
    b = call(_unsafe_view_op, other, sum(((1, s) for s in b_shape), ()))
    out_shape = tuple(x * y for x, y in zip(a_shape, b_shape))
    return call(_unsafe_view_op, a * b, out_shape)


def chain_matmul(*matrices, out=None) -> Tensor:
    """The product of a chain of 2-D matrices (`linalg.multi_dot`), with PyTorch's
    deprecation warning (once per process)."""
    warn_once_at(2, "torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                 "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                 "more tensors rather than multiple parameters.")
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        return matrices[0].clone()
    return _linalg().multi_dot(matrices)


def _addr_(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In place: self = beta * self + alpha * outer(vec1, vec2)."""
    return call(P.addr_, self, vec1, vec2, beta, alpha)


def _addbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In place: self = beta * self + alpha * sum_i batch1[i] @ batch2[i]."""
    return call(P.addbmm_, self, batch1, batch2, beta, alpha)


# ---------------------------------------------------------------- removed functions
# PyTorch keeps the names of the linear-algebra functions it removed in 1.9, each raising
# the error that says what replaces it (whatever the keywords: its `out=` among them).

_REMOVED = "This function was deprecated since version 1.9 and is now removed."


def eig(self: Tensor, eigenvectors: bool = False, *, e=None, v=None):
    """Removed: raises PyTorch's error pointing to `linalg.eig` and `linalg.eigvals`."""
    raise RuntimeError(
        f"{_REMOVED} `torch.linalg.eig` returns complex tensors of dtype `cfloat` or "
        "`cdouble` rather than real tensors mimicking complex tensors.\n\nL, _ = "
        "torch.eig(A) should be replaced with:\nL_complex = torch.linalg.eigvals(A)\n\nand"
        "\n\nL, V = torch.eig(A, eigenvectors=True) should be replaced with:\nL_complex, "
        "V_complex = torch.linalg.eig(A)")


def lstsq(input: Tensor, A: Tensor, **kwargs):  # noqa: N803
    """Removed: raises PyTorch's error pointing to `linalg.lstsq`."""
    raise RuntimeError(
        f"{_REMOVED} `torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n"
        "`torch.linalg.lstsq` has reversed arguments and does not return the QR "
        "decomposition in the returned tuple (although it returns other information about "
        "the problem).\n\nTo get the QR decomposition consider using `torch.linalg.qr`.\n\n"
        "The returned solution in `torch.lstsq` stored the residuals of the solution in the "
        "last m - n columns of the returned value whenever m > n. In torch.linalg.lstsq, the "
        "residuals are in the field 'residuals' of the returned named tuple.\n\nThe "
        "unpacking of the solution, as in\nX, _ = torch.lstsq(B, A).solution[:A.size(1)]\n"
        "should be replaced with:\nX = torch.linalg.lstsq(A, B).solution")


def solve(input: Tensor, A: Tensor, **kwargs):  # noqa: N803
    """Removed: raises PyTorch's error pointing to `linalg.solve`."""
    raise RuntimeError(
        f"{_REMOVED} `torch.solve` is deprecated in favor of `torch.linalg.solve`. "
        "`torch.linalg.solve` has its arguments reversed and does not return the LU "
        "factorization.\n\nTo get the LU factorization see `torch.lu`, which can be used "
        "with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution should "
        "be replaced with:\nX = torch.linalg.solve(A, B)")


def symeig(input: Tensor, eigenvectors: bool = False, upper: bool = True, **kwargs):
    """Removed: raises PyTorch's error pointing to `linalg.eigh` and `linalg.eigvalsh`."""
    raise RuntimeError(
        f"{_REMOVED} The default behavior has changed from using the upper triangular "
        "portion of the matrix by default to using the lower triangular portion.\n\nL, _ = "
        "torch.symeig(A, upper=upper) should be replaced with:\nL = torch.linalg.eigvalsh(A, "
        "UPLO='U' if upper else 'L')\n\nand\n\nL, V = torch.symeig(A, eigenvectors=True) "
        "should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')")


def matrix_rank(input: Tensor, tol=None, symmetric: bool = False, **kwargs):
    """Removed: raises PyTorch's error pointing to `linalg.matrix_rank`."""
    raise RuntimeError(
        f"{_REMOVED}\nPlease use the `torch.linalg.matrix_rank` function instead. The "
        "parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.")
