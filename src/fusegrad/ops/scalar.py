"""The `.Scalar` overloads of the arithmetic ops (`add.Scalar`, `sub.Scalar`, `mul.Scalar`,
`div.Scalar`) and `clamp_min`.

Python's `x * 2` records `MulBackward0` (the `.Tensor` overload with a wrapped number), but
PyTorch's C++ composites (cross_entropy's label smoothing, the margin losses, RMSNorm's eps)
call the `.Scalar` overloads, whose nodes are `AddBackward1`, `SubBackward1`, `MulBackward1`
and `DivBackward1`. The functionals that reproduce those composites call these entries.
"""

from __future__ import annotations

import numpy as np

from . import _onnx as ox
from ._util import binary_kernel, binary_meta, rand_array
from .arithmetic import _add_kernel, _alpha_meta, _sub_meta
from .registry import Sample, register


def _scalar_samples(*scalars):
    def samples(rng, dt):
        out = [Sample((rand_array(rng, (3, 4), dt), c), name=f"(3, 4) {c}") for c in scalars]
        out.append(Sample((rand_array(rng, (), dt), scalars[0]), name=f"() {scalars[0]}"))
        return out

    return samples


add_scalar = register(
    "add.Scalar", kernel=_add_kernel(np.add), meta=_alpha_meta, node="AddBackward1",
    derivative=lambda g: (g, None, None), save=lambda out, a, b, alpha=1: (),
    samples=_scalar_samples(2.5, -1.0), public="add",
    decomposition=lambda a, b, alpha=1: a + b * alpha,
    lowering=lambda v, a, b, alpha=1: v.add(a, v.mul(b, alpha)), onnx=ox.add_like("Add"))
sub_scalar = register(
    "sub.Scalar", kernel=_add_kernel(np.subtract), meta=_sub_meta, node="SubBackward1",
    derivative=lambda g: (g, None, None), save=lambda out, a, b, alpha=1: (),
    samples=_scalar_samples(2.5, -1.0), public="sub",
    decomposition=lambda a, b, alpha=1: a - b * alpha,
    lowering=lambda v, a, b, alpha=1: v.sub(a, v.mul(b, alpha)), onnx=ox.add_like("Sub"))
mul_scalar = register(
    "mul.Scalar", kernel=binary_kernel(np.multiply, scalar_at_full_precision=True),
    meta=binary_meta(), node="MulBackward1",
    derivative=lambda g, b: (g * b, None), save=lambda out, a, b: (b,),
    samples=_scalar_samples(2.5, -0.5), public="mul", saved_names=("other",),
    decomposition=lambda a, b: a * b,
    lowering=lambda v, a, b: v.mul(a, b), onnx=ox.with_number("Mul"))
div_scalar = register(
    "div.Scalar", kernel=binary_kernel(np.true_divide, to_float=True,
                                      scalar_at_full_precision=True),
    meta=binary_meta(to_float=True), node="DivBackward1",
    derivative=lambda g, b: (g / b, None), save=lambda out, a, b: (b,),
    samples=_scalar_samples(2.5, -0.5), public="div", saved_names=("other",),
    decomposition=lambda a, b: a / b,
    lowering=lambda v, a, b: v.truediv(a, b), onnx=ox.with_number("Div"))


_maximum = binary_kernel(np.maximum)  # propagates NaN, as PyTorch's clamp_min does


def _clamp_min_kernel(a, lo):
    return _maximum(a, lo)


clamp_min = register(
    "clamp_min", kernel=_clamp_min_kernel, meta=lambda a, lo: binary_meta()(a, lo),
    node="ClampMinBackward0",
    derivative=lambda g, a, lo: (g * (a >= lo), None), save=lambda out, a, lo: (a, lo),
    samples=_scalar_samples(0.0, 0.5), saved_names=("self", "min"),
    decomposition=lambda a, lo: a.clamp(lo, None),
    lowering=lambda v, a, lo: v.maximum(a, lo), onnx=ox.with_number("Max"))
