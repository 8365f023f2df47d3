"""The `.Scalar` overloads of the arithmetic ops (`add.Scalar`, `sub.Scalar`, `mul.Scalar`,
`div.Scalar`), their in-place forms, and `clamp_min`.

Python's `x * 2` records `MulBackward0` (the `.Tensor` overload with a wrapped number), but
PyTorch's C++ composites (cross_entropy's label smoothing, the margin losses, RMSNorm's eps)
call the `.Scalar` overloads, whose nodes are `AddBackward1`, `SubBackward1`, `MulBackward1`
and `DivBackward1`. The functionals that reproduce those composites call these entries.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import binary_kernel, binary_meta, rand_array
from .arithmetic import REFUSES_NUMBER, _add_kernel, _alpha_meta, _sub_meta
from .comparison import clamp_number_kernel, clamp_number_meta
from .registry import Sample, inplace_variant, register


def _scalar_samples(*scalars):
    def samples(rng, dt):
        out = [Sample((rand_array(rng, (3, 4), dt), c), name=f"(3, 4) {c}") for c in scalars]
        out.append(Sample((rand_array(rng, (), dt), scalars[0]), name=f"() {scalars[0]}"))
        return out

    return samples


def _scaled(a, b, alpha):
    """`b * alpha` for a decomposition of add.Scalar or sub.Scalar, in the kind of number
    the op computes with: `True * 2` is an int, which would promote a bool `a` (the op's
    bool sum is an or), so a bool `a` and `b` keep a bool."""
    if alpha == 1:
        return b
    if isinstance(b, bool) and isinstance(alpha, (bool, int)) and a.dtype is _dtype.bool_:
        return bool(b and alpha)
    return b * alpha


add_scalar = register(
    "add.Scalar", kernel=_add_kernel(np.add), meta=_alpha_meta, node="AddBackward1",
    quantized=REFUSES_NUMBER,
    derivative=lambda g: (g, None, None), save=lambda out, a, b, alpha=1: (),
    samples=_scalar_samples(2.5, -1.0), public="add",
    decomposition=lambda a, b, alpha=1: a + _scaled(a, b, alpha),
    lowering=lambda v, a, b, alpha=1: v.add(a, v.mul(b, alpha)), onnx=ox.add_like("Add"))
sub_scalar = register(
    "sub.Scalar", kernel=_add_kernel(np.subtract), meta=_sub_meta, node="SubBackward1",
    quantized=REFUSES_NUMBER,
    derivative=lambda g: (g, None, None), save=lambda out, a, b, alpha=1: (),
    samples=_scalar_samples(2.5, -1.0), public="sub",
    decomposition=lambda a, b, alpha=1: a - _scaled(a, b, alpha),
    lowering=lambda v, a, b, alpha=1: v.sub(a, v.mul(b, alpha)), onnx=ox.add_like("Sub"))
mul_scalar = register(
    "mul.Scalar", forward_ad="product",
    quantized=REFUSES_NUMBER,
    kernel=binary_kernel(np.multiply, scalar_at_full_precision=True),
    meta=binary_meta(), node="MulBackward1",
    derivative=lambda g, b: (g * b, None), save=lambda out, a, b: (b,),
    samples=_scalar_samples(2.5, -0.5), public="mul", saved_names=("other",),
    decomposition=lambda a, b: a * b,
    lowering=lambda v, a, b: v.mul(a, b), onnx=ox.with_number("Mul"))
div_scalar = register(
    "div.Scalar", forward_ad="product",
    quantized=REFUSES_NUMBER,
    kernel=binary_kernel(np.true_divide, to_float=True, scalar_at_full_precision=True),
    meta=binary_meta(to_float=True), node="DivBackward1",
    derivative=lambda g, b: (g / b, None), save=lambda out, a, b: (b,),
    samples=_scalar_samples(2.5, -0.5), public="div", saved_names=("other",),
    decomposition=lambda a, b: a / b,
    lowering=lambda v, a, b: v.truediv(a, b), onnx=ox.with_number("Div"))

# Their in-place forms, which `_foreach_add_(tensors, 2.0)` and its relatives call per tensor
# (the derivatives read no `self`, so nothing is saved before the write).
add_scalar_ = inplace_variant(add_scalar, "add_.Scalar")
sub_scalar_ = inplace_variant(sub_scalar, "sub_.Scalar")
# (in place, PyTorch's mul.Scalar rounds the number to a half type first; out of place not)
mul_scalar_ = inplace_variant(mul_scalar, "mul_.Scalar", kernel=binary_kernel(np.multiply),
                              forward_ad="product")
div_scalar_ = inplace_variant(div_scalar, "div_.Scalar", forward_ad="product")


def _clamp_min_kernel(a, lo):
    # clamp's (NaN propagates, ties keep `a`), with clamp_min's refusal of complex bounds.
    return clamp_number_kernel(a, lo, real_part_ok=False)


clamp_min = register(
    "clamp_min", kernel=_clamp_min_kernel,
    meta=lambda a, lo: clamp_number_meta(a, lo, real_part_ok=False),
    node="ClampMinBackward0",
    derivative=lambda g, a, lo: (g * (a >= lo), None), save=lambda out, a, lo: (a, lo),
    samples=_scalar_samples(0.0, 0.5), saved_names=("self", "min"),
    decomposition=lambda a, lo: a.clamp(lo, None),
    lowering=lambda v, a, lo: v.clamp(a, lo), onnx=ox.with_number("Max"))
