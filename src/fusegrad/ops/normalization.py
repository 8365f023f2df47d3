"""Group normalisation as one op, `native_group_norm` (`NativeGroupNormBackward0`).

As ATen's, it takes the input with its sizes spelled out (N, C, HxW, group) and returns the
output with the per-(sample, group) mean and reciprocal standard deviation; all three carry
the node, as in PyTorch. The derivative recomputes the statistics with fusegrad ops, so double
backward sees them.
"""

from __future__ import annotations

import numpy as np

from ._util import F32, HALF, Spec, rand_array, size_str
from .nn import _check_norm_dtypes, _legacy
from .registry import Sample, register


def _check_gn(shape: tuple, w, b, n: int, c: int, hxw: int, group: int) -> None:
    if group <= 0 or c % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {size_str(shape)} and "
                           f"num_groups={group}")
    for name, p in (("weight", w), ("bias", b)):
        if p is not None and (len(p.shape) != 1 or p.shape[0] != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{size_str(p.shape)} and input of shape {size_str(shape)}")
    numel = int(np.prod(shape))
    if n * c * hxw != numel:
        raise RuntimeError(f"Expected input to have {n * c * hxw} elements, but got {numel}")


def _check_float(x) -> None:
    name = _legacy(x)
    if name not in ("Float", "Double", "Half", "BFloat16"):
        raise NotImplementedError(f'"GroupNormKernelImpl" not implemented for \'{name}\'')


def _gn_kernel(x, w, b, n, c, hxw, group, eps):
    _check_float(x)
    _check_norm_dtypes(x, w, b)
    _check_gn(x.shape, w, b, n, c, hxw, group)
    dt = x.dtype
    xw = x.astype(F32) if dt in HALF else x
    xg = xw.reshape(n, group, -1)
    mean = xg.mean(-1, keepdims=True)
    centred = xg - mean
    rstd = 1.0 / np.sqrt((centred * centred).mean(-1, keepdims=True) + eps)
    out = (centred * rstd).reshape(n, c, -1)
    if w is not None:
        out = out * (w.astype(F32) if w.dtype in HALF else w).reshape(1, c, 1)
    if b is not None:
        out = out + (b.astype(F32) if b.dtype in HALF else b).reshape(1, c, 1)
    return (out.reshape(x.shape).astype(dt, copy=False), mean.reshape(n, group).astype(dt),
            rstd.reshape(n, group).astype(dt))


def _gn_meta(x, w, b, n, c, hxw, group, eps):
    _check_float(x)
    _check_norm_dtypes(x, w, b)
    _check_gn(tuple(x.shape), w, b, n, c, hxw, group)
    return [Spec(tuple(x.shape), x.dtype), Spec((n, group), x.dtype),
            Spec((n, group), x.dtype)]


def _gn_derivative(grads, x, w, has_bias, n, c, group, eps):
    g, gmean, grstd = grads if isinstance(grads, list) else (grads, None, None)
    shape = tuple(x.shape)
    xg = x.reshape(n, group, -1)
    mean = xg.mean(-1, keepdim=True)
    centred = xg - mean
    rstd = ((centred * centred).mean(-1, keepdim=True) + eps) ** -0.5
    xhat = (centred * rstd).reshape(n, c, -1)
    g3 = g.reshape(n, c, -1)
    gx = (g3 * w.reshape(1, c, 1) if w is not None else g3).reshape(n, group, -1)
    xh = xhat.reshape(n, group, -1)
    gi = rstd * (gx - gx.mean(-1, keepdim=True) - xh * (gx * xh).mean(-1, keepdim=True))
    if gmean is not None and grstd is not None:
        # Gradients reaching the statistics themselves (PyTorch adds them when both arrive;
        # unused outputs arrive here as zeros, which add nothing).
        m = xh.shape[-1]
        gi = gi + gmean.unsqueeze(-1) / m - (grstd.unsqueeze(-1) * rstd * rstd / m) * xh
    gw = (g3 * xhat).sum((0, 2)) if w is not None else None
    gb = g3.sum((0, 2)) if has_bias else None
    return (gi.reshape(shape), gw, gb, None, None, None, None, None)


def _gn_samples(rng, dt):
    cases = [((2, 6, 4), 3, True, True), ((3, 4, 2, 3), 2, True, False),
             ((2, 4), 4, False, False), ((1, 6, 5), 6, False, False), ((2, 6, 3), 1, True, False),
             ((2, 4, 2, 2, 2), 2, True, True)]
    out = []
    for shape, group, has_w, has_b in cases:
        c = shape[1]
        hxw = int(np.prod(shape[2:]))
        w = rand_array(rng, (c,), dt) if has_w else None
        b = rand_array(rng, (c,), dt) if has_b else None
        out.append(Sample((rand_array(rng, shape, dt), w, b, shape[0], c, hxw, group, 1e-5),
                          name=f"{shape} groups={group} w={has_w} b={has_b}"))
    return out


native_group_norm = register(
    "native_group_norm", kernel=_gn_kernel, meta=_gn_meta, node="NativeGroupNormBackward0",
    derivative=_gn_derivative,
    save=lambda out, x, w, b, n, c, hxw, group, eps: (x, w, b is not None, n, c, group, eps),
    # (No sample has a bias without a weight: PyTorch's backward of that case fails when
    # the statistics' gradients are used, as the oracle uses them.)
    samples=_gn_samples, public="native_group_norm",
    optional_tensor_args=(1, 2), tolerance={"float32": 1e-4})
