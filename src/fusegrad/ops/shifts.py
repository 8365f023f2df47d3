"""Bit shifts of integer tensors: `bitwise_left_shift` / `bitwise_right_shift` (`<<`, `>>`).
A shift by the type's width or more gives 0 (or -1 for a negative value shifted right), as
PyTorch's CPU kernels do."""

from __future__ import annotations

import numpy as np

from ._util import as_dtype, laid_if_empty, not_implemented_for, result_np
from .arithmetic import inplace_checks_first
from .comparison import _bitwise_meta
from .registry import Sample, inplace_variant, register


def _shift_kernel(left: bool, cpu_name: str):
    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind not in "iu":  # no bool kernel either (`bool >> 1` is int64, `bool >> bool`)
            raise not_implemented_for(f"{cpu_name}_cpu", dt)
        x, s = as_dtype(a, dt), as_dtype(b, dt)
        bits = dt.itemsize * 8
        wide = s >= bits
        s_ok = np.where(wide, 0, s)
        if left:
            return laid_if_empty(np.where(wide, 0, np.left_shift(x, s_ok)).astype(dt), a, b)
        fill = np.where(x < 0, -1, 0) if dt.kind == "i" else 0
        return laid_if_empty(np.where(wide, fill, np.right_shift(x, s_ok)).astype(dt), a, b)

    return kernel


def _samples(rng, dtype):
    i64 = np.dtype(np.int64)
    return [Sample((rng.integers(-40, 41, a).astype(i64), rng.integers(0, 9, b)),
                   name=f"{a}x{b}") for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)))]


def _register(name: str, left: bool, cpu_name: str):
    kernel = _shift_kernel(left, cpu_name)
    meta = _bitwise_meta(cpu_name, bool_ok=False)
    op = register(f"{name}.Tensor", kernel=kernel, meta=meta,
                  differentiable=False, samples=_samples, public=name, result_order="operands")
    scalar = register(f"{name}.Tensor_Scalar", kernel=kernel, meta=meta,
                      differentiable=False, public=name, result_order="operands",
                      samples=lambda rng, dt: [Sample((rng.integers(-8, 9, (3, 4)), 3))])
    # (the in-place form refuses a result that `self` cannot hold before the dtype's kernel)
    inplace = inplace_variant(op, f"{name}_.Tensor", differentiable=False,
                              kernel=inplace_checks_first(kernel))
    return op, scalar, inplace


left_shift, left_shift_scalar, left_shift_ = _register("bitwise_left_shift", True, "lshift")
right_shift, right_shift_scalar, right_shift_ = _register("bitwise_right_shift", False,
                                                          "rshift")
