"""Floating point operation estimates for `profile(with_flops=True)`, by PyTorch's formulas.

PyTorch estimates FLOPs for a handful of ops only (`aten::mm`, `aten::addmm`, `aten::bmm`,
`aten::baddbmm`, `aten::add`, `aten::mul` and `aten::conv2d`), from the input shapes of the
call: a matrix product counts a multiply and an add per term (2 * M * K * N, batched by B),
an elementwise add or multiply one per element of its first input, a 2-d convolution
2 * N * H_out * W_out * (the weight's elements). Every other op is 0 (shown as "--").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..ops._flop_formulas import bmm_flop, mm_flop


def _product(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _matmul(a: list, b: list, batched: bool) -> int:
    rank = 3 if batched else 2
    if len(a) != rank or len(b) != rank:
        return 0
    formula = bmm_flop if batched else mm_flop  # (the registry entries' formulas)
    return formula(tuple(int(d) for d in a), tuple(int(d) for d in b))


def op_flops(name: str, shapes: list) -> int:
    """The FLOPs of a call of the op event `name` with input shapes `shapes` (one list per
    argument, [] for a non-tensor)."""
    if name == "aten::mm" and len(shapes) >= 2:
        return _matmul(shapes[0], shapes[1], False)
    if name == "aten::addmm" and len(shapes) >= 3:
        return _matmul(shapes[1], shapes[2], False)
    if name == "aten::bmm" and len(shapes) >= 2:
        return _matmul(shapes[0], shapes[1], True)
    if name == "aten::baddbmm" and len(shapes) >= 3:
        return _matmul(shapes[1], shapes[2], True)
    if name in ("aten::add", "aten::mul") and shapes:
        return _product(shapes[0])
    return 0


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int):
        return value, value
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) == 1:
            return int(value[0]), int(value[0])
        if len(value) == 2:
            return int(value[0]), int(value[1])
    return None


def conv2d_flops(input_shape: list, weight_shape: list, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1) -> int:
    """The FLOPs of `F.conv2d` on a batched (4-d) input; 0 for anything else (an unbatched
    input, or a padding given by name)."""
    if len(input_shape) != 4 or len(weight_shape) != 4:
        return 0
    st, pad, dil = _pair(stride), _pair(padding), _pair(dilation)
    if st is None or pad is None or dil is None:
        return 0
    out = []
    for k in range(2):
        size = input_shape[2 + k] + 2 * pad[k] - dil[k] * (weight_shape[2 + k] - 1) - 1
        out.append(size // st[k] + 1)
    return 2 * input_shape[0] * out[0] * out[1] * _product(weight_shape)


def scale(smallest: int) -> tuple[float, str]:
    """The factor and unit the table's FLOPs column uses, chosen by the smallest positive
    figure: FLOPs, KFLOPs, ... PFLOPs (a power of 1000 each)."""
    units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
    level = max(0.0, min(math.log10(smallest) / 3, float(len(units) - 1)))
    return 10.0 ** (math.floor(level) * -3.0), units[int(level)]
