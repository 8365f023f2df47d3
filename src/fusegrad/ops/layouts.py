"""The memory order of an op's result in eager mode, which its kernel decides: NumPy's
ufuncs (and the kernels written over them) lay a new result out in their operands' order
(NumPy's order "K"), other kernels allocate it contiguous. Compiled code gives its outputs
the same layout (`compiler/codegen/layout.py`); the facts are kept here, with the ops."""

from __future__ import annotations

# Non-view ops whose eager result follows the memory order of their tensor operands
# (besides NumPy ufuncs and the elementwise `recomputable` ops), found by comparing eager
# results on permuted inputs.
_OPERAND_ORDER = frozenset("""
clone _to_copy where masked_fill copy lerp addcmul addcdiv floor_divide _softmax _log_softmax
_safe_softmax angle _conj conj_physical xlogy nextafter heaviside ldexp signbit isneginf
isposinf isclose tril triu cumsum cumprod softshrink hardshrink _prelu_kernel
rrelu_with_noise special_xlog1py special_bessel_j0 special_bessel_j1
special_spherical_bessel_j0 logcumsumexp nan_to_num isfinite
""".split())
# Elementwise ops whose eager kernel allocates a contiguous result all the same.
_CONTIGUOUS = frozenset(["lgamma", "special_erfcx", "special_log_ndtr", "round.decimals"])


def is_view_copy(base: str) -> bool:
    """Whether `base` names the copying form of a view op (`slice_copy`, `alias_copy`)."""
    return base.endswith("_copy") and base not in ("_to_copy", "copy")


def follows_operands(op) -> bool:
    """Whether eager's result of registry op `op` (not a view) follows its tensor operands'
    memory order rather than being contiguous."""
    base = op.name.partition(".")[0]
    if op.name in _CONTIGUOUS or base in _CONTIGUOUS or is_view_copy(base):
        return False
    return op.ufunc is not None or op.recomputable or base in _OPERAND_ORDER
