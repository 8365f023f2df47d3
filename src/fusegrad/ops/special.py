"""`xlogy.Tensor` (x * log(y), 0 where x == 0) and `norm.ScalarOpt_dim` (the legacy `norm`,
whose node is `NormBackward1`; `F.pairwise_distance` and the triplet loss record it)."""

from __future__ import annotations

import numpy as np

from . import _onnx as ox
from ._util import (
    HALF,
    binary_kernel,
    binary_meta,
    float_np,
    iterator_laid,
    laid_if_empty,
    rand_array,
    result_np,
)
from .norms import _norm_derivative, _norm_kernel, _norm_meta, _norm_samples
from .registry import Sample, register


def _xlogy_np(x, y, log_type=None):
    with np.errstate(all="ignore"):
        log = np.log(y)
        if log_type is not None:  # PyTorch's half kernel rounds log(y) before the product
            log = log.astype(log_type).astype(log.dtype)
        out = x * log
    # 0 where x is 0, unless y is NaN (PyTorch propagates NaN in y).
    return np.where((x == 0) & ~np.isnan(y), np.zeros((), out.dtype), out)


def _xlogy_kernel(a, b):
    dt = float_np(result_np(a, b))
    if dt in HALF:
        # The operands are the half type's values first (PyTorch's iterator casts them, a
        # number too: xlogy(x, 1e5) of float16 is x * log(inf))
        a, b = (np.asarray(x).astype(np.float32).astype(dt) for x in (a, b))
        return binary_kernel(lambda x, y: _xlogy_np(x, y, dt), to_float=True)(a, b)
    # (its formula's temporaries leave NumPy's order: PyTorch's iterator's, as for lerp; an
    # empty result's over both operands, a number wrapped as one)
    out = binary_kernel(_xlogy_np, to_float=True, real_only="xlogy_cpu")(a, b)
    return iterator_laid(out, a, b, dt=dt) if out.size else laid_if_empty(out, a, b)


def _xlogy_samples(rng, dt):
    out = []
    for sa, sb in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())):
        x = rand_array(rng, sa, dt, (-2, 2))
        if x.ndim:
            x.flat[0] = 0
        out.append(Sample((x, rand_array(rng, sb, dt, (0.2, 3))), name=f"{sa}x{sb}"))
    return out


xlogy = register(
    "xlogy.Tensor", kernel=_xlogy_kernel, meta=binary_meta(to_float=True, real_only="xlogy_cpu"),
    node="XlogyBackward0",
    derivative=lambda g, a, b: (
        (g * b.log()).where((a != 0) | (b > 0) | b.isnan(), g.new_zeros(())), g * a / b),
    save=lambda out, a, b: (a, b), samples=_xlogy_samples, public="xlogy",
    tensor_args=(0, 1), saved_names=("self", "other"), result_order="iterator", onnx=ox.xlogy)

def _legacy_norm_samples(rng, dt):
    return [s for s in _norm_samples(rng, dt) if s.args[2] is not None and s.args[1] != 0]


norm_dim = register(
    "norm.ScalarOpt_dim", kernel=_norm_kernel, meta=_norm_meta, node="NormBackward1",
    derivative=_norm_derivative,
    save=lambda out, a, p=2, dims=None, keepdim=False: (a, out, p, dims, keepdim),
    samples=_legacy_norm_samples, public="norm",
    saved_names=("self", "result", "p", "dim", "keepdim"), onnx=ox.legacy_norm)
