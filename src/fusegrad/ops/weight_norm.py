"""`_weight_norm_interface(v, g, dim)`: w = v * g / ||v|| with the norm over every dimension
but `dim` (the first or the last), and the norms, shaped as `g`. PyTorch's `_weight_norm`
(which both `nn.utils.weight_norm`s call) runs it for those two dims, so their weights
carry `WeightNormInterfaceBackward0`.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import HALF, Spec, rand_array
from .registry import Sample, register


def _check(v_ndim: int, dim: int, v_dtype, g_dtype) -> None:
    if dim != 0 and dim != v_ndim - 1:
        raise RuntimeError(
            "dim == 0 || dim == v.dim() - 1 INTERNAL ASSERT FAILED at \"/__w/pytorch/pytorch/"
            "aten/src/ATen/native/cpu/WeightNormKernel.cpp\":408, please report a bug to "
            "PyTorch. fused kernels can only be applied for first or last dim")
    if v_dtype != g_dtype:
        raise RuntimeError(f"expected scalar type {v_dtype.legacy} but found {g_dtype.legacy}")


def _other_axes(ndim: int, dim: int) -> tuple:
    return tuple(d for d in range(ndim) if d != dim)


def _kernel(v, g, dim=0):
    _check(v.ndim, dim, _dtype.FROM_NP[v.dtype], _dtype.FROM_NP[g.dtype])
    work = np.float32 if v.dtype in HALF else v.dtype
    vw = v.astype(work, copy=False)
    norms = np.sqrt(np.sum(vw * vw, axis=_other_axes(v.ndim, dim), keepdims=True))
    # g holds one magnitude per slice along `dim`, whatever its shape.
    w = vw * (g.astype(work, copy=False).reshape(norms.shape) / norms)
    return w.astype(v.dtype, copy=False), norms.reshape(g.shape)


def _meta(v, g, dim=0):
    _check(len(v.shape), dim, v.dtype, g.dtype)
    norm_dt = _dtype.float32 if v.dtype in (_dtype.float16, _dtype.bfloat16) else v.dtype
    return [Spec(tuple(v.shape), v.dtype), Spec(tuple(g.shape), norm_dt)]


def _derivative(grads, v, g, norms, dim):
    gw = grads[0] if isinstance(grads, (list, tuple)) else grads
    if gw is None:
        return (None, None, None)
    axes = list(_other_axes(v.dim(), dim))
    n = norms.reshape([v.shape[d] if d == dim else 1 for d in range(v.dim())])
    projection = (gw * v).sum(axes, keepdim=True)
    grad_g = (projection / n).reshape(g.shape)
    grad_v = (g.reshape(n.shape) / n) * (gw - v * (projection / (n * n)))
    return (grad_v, grad_g, None)


def _samples(rng, dt):
    out = []
    for vs, gs, dim in (((4, 3), (4, 1), 0), ((4, 3), (1, 3), 1), ((4, 3), (4,), 0),
                        ((2, 3, 4), (2, 1, 1), 0), ((2, 3, 4), (1, 1, 4), 2)):
        out.append(Sample((rand_array(rng, vs, dt), rand_array(rng, gs, dt), dim),
                          name=f"{vs} dim {dim}"))
    return out


weight_norm_interface = register(
    "_weight_norm_interface", kernel=_kernel, meta=_meta, node="WeightNormInterfaceBackward0",
    derivative=_derivative, save=lambda out, v, g, dim=0: (v, g, out[1], dim),
    saved_names=("v", "g", "result1", "dim"), nondiff_outputs=(1,), samples=_samples)
