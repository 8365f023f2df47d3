"""Numeric helpers of PyTorch's namespace built over existing ops: `gradient` (central
differences, uniform or by coordinates), `histogramdd`, `binomial` sampling, DLPack exchange
(`from_dlpack`, `to_dlpack`), and the public spellings of the incomplete gamma ops (`igamma`,
`igammac`). (`vmap` is `fusegrad.func`'s.)
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import _dtype, return_types
from .._tensor import Tensor
from .shape import cat

# ---------------------------------------------------------------- gradient


def _gradient_one(f: Tensor, d: int, space, edge_order: int) -> Tensor:
    """The derivative estimate of `f` along dimension `d` for one spacing: a number (uniform
    step) or a 1-D tensor of coordinates."""
    n = f.shape[d]

    def part(start, stop):
        return f.narrow(d, start, stop - start)

    if not isinstance(space, Tensor):
        h = float(space)
        interior = (part(2, n) - part(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (part(1, 2) - part(0, 1)) / h
            last = (part(n - 1, n) - part(n - 2, n - 1)) / h
        else:
            first = (part(0, 1) * -1.5 + part(1, 2) * 2 - part(2, 3) * 0.5) / h
            last = (part(n - 3, n - 2) * 0.5 - part(n - 2, n - 1) * 2 + part(n - 1, n) * 1.5) / h
        return cat([first, interior, last], d)
    shape = [1] * f.dim()
    shape[d] = -1
    x = space.to(f.dtype) if f.is_floating_point() else space
    dx = x[1:] - x[:-1]
    hd, hs = dx[:-1], dx[1:]

    def coeff(c):
        return c.reshape(shape)

    interior = (part(0, n - 2) * coeff(-hs / (hd * (hd + hs)))
                + part(1, n - 1) * coeff((hs - hd) / (hd * hs))
                + part(2, n) * coeff(hd / (hs * (hd + hs))))
    if edge_order == 1:
        first = (part(1, 2) - part(0, 1)) / dx[0]
        last = (part(n - 1, n) - part(n - 2, n - 1)) / dx[-1]
    else:
        a1, a2 = dx[0], dx[1]
        first = (part(0, 1) * (-(2 * a1 + a2) / (a1 * (a1 + a2)))
                 + part(1, 2) * ((a1 + a2) / (a1 * a2)) + part(2, 3) * (-a1 / (a2 * (a1 + a2))))
        b1, b2 = dx[-2], dx[-1]
        last = (part(n - 3, n - 2) * (b2 / (b1 * (b1 + b2)))
                + part(n - 2, n - 1) * (-(b2 + b1) / (b1 * b2))
                + part(n - 1, n) * ((2 * b2 + b1) / (b2 * (b1 + b2))))
    return cat([first, interior, last], d)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """Estimates of the partial derivatives of `input` along each dimension in `dim` (all by
    default): central differences inside, one-sided of order `edge_order` at the ends."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.dim())) if dim is None else (
        [dim] if isinstance(dim, numbers.Integral) else list(dim))
    dims = [d % input.dim() for d in dims]
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.dim() == 1 and len(dims) == 1):
        spaces = [spacing.item() if isinstance(spacing, Tensor) else spacing] * len(dims)
    else:
        spaces = list(spacing)
        if len(spaces) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar "
                               f"or it's spacing and dim arguments to have the same length, "
                               f"but got a spacing argument of length {len(spaces)} and a dim "
                               f"argument of length {len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    return tuple(_gradient_one(input, d, s, edge_order) for d, s in zip(dims, spaces))


# ---------------------------------------------------------------- histogramdd


def histogramdd(input: Tensor, bins=10, *, range=None, weight=None,  # noqa: A002
                density: bool = False, out=None):
    """The D-dimensional histogram of the rows of `input` (..., D): (hist, bin_edges)."""
    data = input.detach().numpy().reshape(-1, input.shape[-1])
    if isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor):
        bins = [b.detach().numpy() for b in bins]
    pairs = None if range is None else [(range[2 * i], range[2 * i + 1])
                                       for i in builtins.range(len(range) // 2)]
    w = None if weight is None else weight.detach().numpy().reshape(-1)
    hist, edges = np.histogramdd(data, bins=bins, range=pairs, weights=w, density=density)
    dt = input.dtype
    return return_types.histogramdd(Tensor._make(hist.astype(dt.np), dt),
                        tuple(Tensor._make(e.astype(dt.np), dt) for e in edges))


# ---------------------------------------------------------------- DLPack


class _Capsule:
    """A bare DLPack capsule offered through the protocol NumPy reads."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing memory with a DLPack-exporting object (or a capsule)."""
    source = ext_tensor if hasattr(ext_tensor, "__dlpack__") else _Capsule(ext_tensor)
    if isinstance(ext_tensor, Tensor):
        return ext_tensor.detach()
    arr = np.from_dlpack(source)
    return Tensor._make(arr, _dtype.from_numpy_dtype(arr.dtype))


def to_dlpack(tensor: Tensor):
    """A DLPack capsule of `tensor`'s memory."""
    return tensor.detach().numpy().__dlpack__()


# ---------------------------------------------------------------- low-rank SVD and PCA


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2, M: Tensor | None = None) -> tuple:
    """The leading `q` singular triplets (U, S, V) of A - M. PyTorch approximates them by
    randomized subspace iteration; this computes them exactly (the same result up to the
    approximation and the signs of singular vectors)."""
    from ..linalg import svd

    matrix = A if M is None else A - M
    m, n = matrix.shape[-2:]
    k = min(6 if q is None else q, m, n)
    u, s, vh = svd(matrix, full_matrices=False)
    return u[..., :k], s[..., :k], vh[..., :k, :].transpose(-2, -1)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> tuple:
    """Principal components of the rows of A: (U, S, V) of the column-centred matrix."""
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, "
                         f"n)={min(m, n)}")
    if niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    centred = A - A.mean(dim=-2, keepdim=True) if center else A
    return svd_lowrank(centred, q, niter)


# ---------------------------------------------------------------- incomplete gamma


def igamma(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """The regularized lower incomplete gamma function P(input, other)."""
    from .._dispatch import call
    from ..ops import incomplete_gamma as IG

    return call(IG.igamma, input, other)


def igammac(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P."""
    from .._dispatch import call
    from ..ops import incomplete_gamma as IG

    return call(IG.igammac, input, other)


__all__ = ["gradient", "histogramdd", "from_dlpack", "to_dlpack",
           "igamma", "igammac", "svd_lowrank", "pca_lowrank"]
