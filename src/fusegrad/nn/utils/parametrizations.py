"""Ready-made parametrizations over `parametrize`: `weight_norm` (magnitude and direction as
`original0`/`original1`), `spectral_norm` (the weight divided by its largest singular value,
estimated by power iteration kept in the `_u`/`_v` buffers) and `orthogonal` (a weight kept
orthogonal through the matrix exponential, the Cayley map or Householder reflections)."""

from __future__ import annotations

import functools
from enum import Enum, auto

from ..._functions.compat_layers import _weight_norm
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    """`g * v / ||v||`, the norm taken over every dimension but `dim` (all for -1)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        """The weight from its magnitude `weight_g` and direction `weight_v`."""
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        """(magnitude, direction) of `weight`."""
        from ... import norm_except_dim

        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize `module.name` by magnitude (`original0`) and direction (`original1`),
    the magnitude per slice along `dim` (None: one for the whole tensor)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    module._register_load_state_dict_pre_hook(functools.partial(_weight_norm_compat, name))
    return module


def _weight_norm_compat(name: str, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs) -> None:
    """Load the hook-based `weight_norm`'s `<name>_g`/`<name>_v` entries as the
    parametrization's `original0`/`original1`."""
    g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
    if g_key in state_dict and v_key in state_dict:
        base = f"{prefix}parametrizations.{name}."
        state_dict[base + "original0"] = state_dict.pop(g_key)
        state_dict[base + "original1"] = state_dict.pop(v_key)


class _SpectralNorm(Module):
    """`W / sigma(W)`, sigma estimated by power iteration on W as a matrix with `dim` first;
    a 1-D weight is normalised instead."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            u = mat.new_empty(h).normal_(0, 1)
            v = mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        assert weight.ndim > 1
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat: Tensor, n_power_iterations: int) -> None:
        """Refine the singular vectors in place (the buffers stay the same tensors)."""
        from ... import mv

        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(mv(mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mv(mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        """The weight divided by its estimated spectral norm (one more power iteration per
        call while training)."""
        from ... import mv, vdot

        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        # The reshape and the power iteration are written out here rather than called as
        # methods: compile inlines a fusegrad layer's forward, not its other methods, and a
        # call it cannot inline would run the whole forward eagerly.
        mat = weight
        if self.dim != 0:
            mat = mat.permute(self.dim, *[d for d in range(mat.dim()) if d != self.dim])
        mat = mat.flatten(1)
        if self.training:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    self._u.copy_(F.normalize(mv(mat, self._v), dim=0, eps=self.eps))
                    self._v.copy_(F.normalize(mv(mat.mH, self._u), dim=0, eps=self.eps))
        u = self._u.clone()
        v = self._v.clone()
        sigma = vdot(u, mv(mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        """Any weight is its own preimage (the norm is recomputed on use)."""
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide `module.name` by its spectral norm; `dim` (default 0, 1 for transposed
    convolutions) is the output dimension."""
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        transposed = isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))
        dim = 1 if transposed else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H with v_i the i-th column
    of A below the diagonal and 1 on it (LAPACK's orgqr), from differentiable ops."""
    from ... import eye

    n, k = A.shape[-2], A.shape[-1]
    ident = eye(n, dtype=A.dtype)
    below = ident.new_ones(n, n).tril(-1)
    q = ident.expand(*A.shape[:-2], n, n)
    for i in range(k):
        v = A[..., :, i] * below[:, i] + ident[:, i]
        qv = (q @ v.unsqueeze(-1))
        q = q - tau[..., i, None, None] * qv @ v.conj().unsqueeze(-2)
    return q[..., :k]


def _geqrf(A: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK's QR factors of A: R on and above the diagonal, the reflectors below; tau."""
    import numpy as np

    data = A.detach()._data
    outs = [np.linalg.qr(m, mode="raw") for m in data.reshape(-1, *data.shape[-2:])]
    h = np.stack([o[0].T for o in outs]).reshape(data.shape)
    tau = np.stack([o[1] for o in outs]).reshape(*data.shape[:-2], -1)
    return (Tensor._make(np.ascontiguousarray(h).astype(data.dtype), A.dtype),
            Tensor._make(tau.astype(data.dtype), A.dtype))


def _is_orthogonal(Q: Tensor) -> bool:
    from ... import allclose, eye, finfo

    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * finfo(Q.dtype).eps
    return allclose(Q.mH @ Q, eye(k, dtype=Q.dtype, device=Q.device), atol=eps)


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A's QR decomposition with R's diagonal made positive."""
    X, tau = _geqrf(A)
    Q = _householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    """An orthogonal (unitary) matrix, or batch, from an unconstrained one."""

    base: Tensor

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex "
                             "tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        """The orthogonal matrix of `X` (times `base` when trivialized)."""
        from ... import cat, eye, linalg, matrix_exp

        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                ident = eye(n, dtype=A.dtype)
                Q = linalg.solve(ident - 0.5 * A, ident + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """An `X` with `forward(X) == Q` (with a trivialization, `Q` becomes the base and
        `X` the preimage of the identity)."""
        from ... import cat, randn, zeros_like

        with no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape "
                                 f"{self.shape}. Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the "
                        "Cayley parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                diag = A.diagonal(dim1=-2, dim2=-1)
                diag.sign_()
                diag[tau == 0.0] *= -1
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            neg_id = zeros_like(Q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep `module.name` orthogonal (its rows or columns orthonormal). `orthogonal_map` is
    "matrix_exp" (default for square or complex), "cayley" or "householder" (default
    otherwise); `use_trivialization` keeps a base so that any value can be assigned."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
