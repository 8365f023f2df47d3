"""PyTorch's `torch._foreach_*` functions, declared: their names and overloads.

Each applies one op to every tensor of a list (`_foreach_mul_(grads, 0.5)` is `g.mul_(0.5)`
for each `g`), as PyTorch's CPU kernels do one tensor at a time. They are composites, no
registry entries of their own: `fusegrad/_functions/foreach.py` builds the functions from
this table and loops over the per-tensor ops, so autograd records each tensor's own node.
`ops/surface.py` reads the names from here (the in-place ones are flagged in place).

An overload is written as PyTorch's argument parser lists it in its "expected one of"
message, in its order (which is also the order it tries them in): `TensorList` (a list or
tuple of tensors), `ScalarList` (a list or tuple of numbers), `Number` (a number, or a 0-dim
tensor that does not require grad) and `Tensor` (one tensor for every element of the list).
"""

from __future__ import annotations

# `_foreach_<name>(tensors)` and `_foreach_<name>_(tensors)`: the op of the same name applied
# to each tensor.
UNARY: tuple[str, ...] = tuple("""
abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg
reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc""".split())

_SELF = "TensorList self"
_SCALAR = f"{_SELF}, Number scalar"
_SCALARS = f"{_SELF}, ScalarList scalars"
_OTHERS = f"{_SELF}, TensorList other"
_ONE = f"{_SELF}, Tensor other"
_ALPHA = ", *, Number alpha=1"
_TERMS = f"{_SELF}, TensorList tensor1, TensorList tensor2"
_ENDS = f"{_SELF}, TensorList tensors1"
_CLAMPS = (_SCALAR, _SCALARS, _OTHERS)

# The other foreach functions: name -> overloads. Each has an out-of-place form
# (`_foreach_add`, returning a tuple) and an in-place one (`_foreach_add_`, returning its
# first argument) unless OUT_OF_PLACE_ONLY or IN_PLACE_ONLY names it; an in-place form has
# only the overloads whose first parameter is the tensor list it writes into.
OVERLOADS: dict[str, tuple[str, ...]] = {
    "add": (_SCALAR, _SCALARS, _ONE + _ALPHA, _OTHERS + _ALPHA),
    "sub": (_SCALAR, _SCALARS, _OTHERS + _ALPHA),
    "mul": (_SCALARS, _ONE, _OTHERS, _SCALAR),
    "div": (_SCALARS, _ONE, _OTHERS, _SCALAR),
    "clamp_min": _CLAMPS, "clamp_max": _CLAMPS, "maximum": _CLAMPS, "minimum": _CLAMPS,
    "pow": ("Number self, TensorList exponent", f"{_SELF}, Number exponent",
            f"{_SELF}, ScalarList exponent", f"{_SELF}, TensorList exponent"),
    "addcmul": (f"{_TERMS}, ScalarList scalars", f"{_TERMS}, Tensor scalars",
                f"{_TERMS}, Number value=1"),
    "addcdiv": (f"{_TERMS}, ScalarList scalars", f"{_TERMS}, Tensor scalars",
                f"{_TERMS}, Number value=1"),
    "lerp": (f"{_ENDS}, Number weight", f"{_ENDS}, ScalarList weight",
             f"{_ENDS}, TensorList weights"),
    "norm": (f"{_SELF}, Number ord=2, ScalarType? dtype=None",),
    "powsum": (f"{_SELF}, Number ord=2, ScalarType? dtype=None",),
    "max": (_SELF,),
    "clone": (f"{_SELF}, *, MemoryFormat? memory_format=None",),
    "mm": (f"{_SELF}, TensorList mat2",),
    "copy": (f"{_SELF}, TensorList src, bool non_blocking=False",),
    "zero": (_SELF,),
}
OUT_OF_PLACE_ONLY = frozenset({"norm", "powsum", "max", "clone", "mm"})
IN_PLACE_ONLY = frozenset({"copy", "zero"})

# The op a loop calls for a number where it is not the tensor method's own overload: ATen's
# in-place `.Scalar` overloads (which record AddBackward1, ..., as PyTorch's loops do), and
# for maximum_ and minimum_, which have no number overload of their own, clamps whose node
# raises in backward (PyTorch has no derivative for those forms). Out of place, maximum and
# minimum with a number are `_functions/foreach.py`'s own calls (a gradient halved at ties).
SCALAR_OP: dict[str, str] = {
    "add_": "add_.Scalar", "sub_": "sub_.Scalar", "mul_": "mul_.Scalar",
    "div_": "div_.Scalar", "maximum_": "_foreach_maximum_.Scalar",
    "minimum_": "_foreach_minimum_.Scalar",
}


def names() -> list[str]:
    """Every `_foreach_*` name, sorted (PyTorch 2.13's `dir(torch)` has the same)."""
    out = [f"_foreach_{n}{s}" for n in UNARY for s in ("", "_")]
    for name in OVERLOADS:
        if name not in IN_PLACE_ONLY:
            out.append(f"_foreach_{name}")
        if name not in OUT_OF_PLACE_ONLY:
            out.append(f"_foreach_{name}_")
    return sorted(out)
