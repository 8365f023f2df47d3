"""PyTorch's `out=` behaviour of the public functions, as a declarative table beside the
registry (PyTorch keeps it in its `*.out` overloads of `native_functions.yaml` and their
kernels): how the result's dtype must relate to out's, which ATen op the autograd refusal
names, who resizes without the warning, which composites copy through autograd. Keyed by
public name ("add", "special.sigmoid", "linalg.inv"; an alias by its function's name), read by
`fusegrad._out.write_out`, which holds the mechanism; a function no table names follows the
defaults. Measured against torch 2.13 function by function (`tests/test_out_argument.py`).
"""

from __future__ import annotations

from .spellings import ALIASES

# Messages, formatted with {R}/{O} (the result's and out's dtypes as PyTorch's scalar type
# names: Float, Long; {I}: the first tensor argument's), {r}/{o} (as C++ names: float, long
# int), {tR}/{tO} (as legacy tensor types: torch.FloatTensor) and {name} (the function's
# public name).
CAST = "result type {R} can't be cast to the desired output type {O}"
EXACT = "Expected out tensor to have dtype {r}, but got {o} instead"
FOUND = "Found dtype {O} but expected {R}"
SAFELY = "Expected result to be safely castable from {R} dtype, but got result with dtype {O}"

# Kinds of dtype test: "cast" (the result's dtype casts to out's by `can_cast`), "exact"
# (they are equal), "exact_direct" (equal where `out` is resized for the function to write
# into directly: lstsq's residuals, when its solution's out has the result's dtype and its
# driver computes some; otherwise they go through a temporary and a cast), "bool" (out is bool),
# "floating" (out is floating or complex), "any" (no test: the write casts whatever it is
# given).
# A rule is one (kind, message) test, a tuple of them applied in turn, or a list with one
# test per output of a function returning several tensors. A message starting "TypeError:"
# or "NotImplementedError:" raises that type (PyTorch's `cat`, `nansum`), the others
# RuntimeError.
_CAT = ("cast", "TypeError:torch.cat(): input types can't be cast to the desired output type "
                "{O}")
_MEDIAN = [("exact", "Expected tensor for 'values' to have the same type as tensor for "
                     "argument #2 'self'; but type {tO} does not equal {tR} (while checking "
                     "arguments for median)"),
           ("exact", "Expected tensor for argument #1 'indices' to have scalar type Long; but "
                     "got {tO} instead (while checking arguments for median)")]
_HISTOGRAM = ("exact", "torch.histogram: input tensor and hist tensor should have the same "
                       "dtype, but got input {r} and hist {o}")
_SEARCHSORTED = ("exact", "torch.searchsorted(): output tensor's dtype is wrong, it can only "
                          "be Int(int32) or Long(int64) depending on whether out_int32 flag is "
                          "True, but we got output tensor's dtype {O} and out_int32 flag is "
                          "{int32}")
_NANSUM = ("floating", "NotImplementedError:\"nansum_cpu\" not implemented for '{O}'")
_RULE_GROUPS: list[tuple[object, str]] = [
    (("exact", EXACT), """
        sum prod cumsum cumprod mm bmm matmul addmm addmv baddbmm cross inverse qr svd
        triangular_solve tril triu gather index_add index_copy index_reduce take_along_dim norm
        aminmax
        msort max min sort topk argmax argmin lu_solve lu_unpack linalg.matmul linalg.inv
        linalg.inv_ex
        linalg.det linalg.slogdet linalg.eigh linalg.eigvalsh linalg.qr linalg.svd
        linalg.svdvals linalg.cholesky linalg.cholesky_ex linalg.vector_norm linalg.solve
        linalg.solve_ex linalg.lu linalg.lu_factor linalg.lu_factor_ex linalg.cross
        linalg.lu_solve linalg.ldl_factor linalg.ldl_factor_ex
        linalg.ldl_solve renorm scatter
        softmax log_softmax scatter_add scatter_reduce slice_scatter isin frobenius_norm
        permute_copy t_copy view_copy alias_copy detach_copy expand_copy select_copy
        slice_copy unfold_copy diagonal_copy squeeze_copy unsqueeze_copy transpose_copy
        as_strided_copy"""),
    (("exact", "Expected self.dtype() == output.dtype() to be true, but got false.  (Could "
               "this error message be improved?  If so, please report an enhancement request "
               "to PyTorch.)"), "narrow_copy"),
    (("exact", FOUND), """
        abs ceil floor frac neg round sgn sign trunc conj_physical clamp clamp_min clamp_max
        bitwise_not special.round hardshrink"""),
    (_CAT, "cat stack hstack vstack dstack row_stack column_stack"),
    (("bool", "{name} does not support non-boolean outputs."), "isneginf isposinf signbit"),
    (("bool", "{name} only supports bool tensor for result, got: {O}"), "all any"),
    (("floating", "logsumexp(): Expected floating point type for result tensor, but got: {O}"),
     "logsumexp special.logsumexp"),
    (("exact", "Expected object of scalar type {R} but got scalar type {O} for argument "
               "'out'"), "complex polar"),
    (("exact", "Expected the dtype for input and out to match, but got {R} for input's dtype "
               "and {O} for out's dtype."), "amax amin"),
    (("exact", "expected scalar_type {R} but found {O}"), "cummax cummin logcumsumexp"),
    (("exact", "quantile() out tensor must be same dtype as the input tensor"),
     "quantile nanquantile"),
    (("exact", "result dtype {O} does not match input dtype {R}"), "dot vdot"),
    (("exact", "tensordot: Expected the output tensor to have dtype {R}, but got an output "
               "tensor with dtype {O}"), "tensordot inner"),
    (("exact", "multi_dot(): expected out tensor to have dtype {r} but got {o}"),
     "chain_matmul linalg.multi_dot"),
    (_SEARCHSORTED, "searchsorted bucketize"),
    (("exact", "nan_to_num: dtype of out: {O} should be same as input: {R}"), "nan_to_num"),
    (("exact", "the output given to float_power has dtype {O} but the operation's result "
               "requires dtype {R}"), "float_power"),
    (("exact", "heaviside is not yet implemented for tensors with different dtypes."),
     "heaviside"),
    (("exact", "Expected out type to be {R} but got {O}"), "where"),
    ([("exact", "torch.frexp() expects mantissa to have dtype {r} but got {o}"),
      ("exact", "torch.frexp() expects exponent to have int dtype but got {o}")], "frexp"),
    (_MEDIAN, "median nanmedian"),
    ([("exact", "expected scalar type '{R}' but got '{O}' for values output"),
      ("exact", "expected scalar type '{R}' but got '{O}' for indices output")], "mode"),
    ([("exact", "output values must be of same type as input"),
      ("exact", "output indices must be of scalar type Long")], "kthvalue"),
    (_HISTOGRAM, "histc"),
    ([_HISTOGRAM, ("exact", "torch.histogram: input tensor and bin_edges tensor should have "
                            "the same dtype, but got input {r} and bin_edges {o} for dimension "
                            "0")], "histogram"),
    (("exact", "addmv input tensors must have the same dtype, but got {O}, {R}, and {R}"), "mv"),
    (("exact", "self and mat2 must have the same dtype, but got {O} and {R}"), "addbmm"),
    (("exact", "{name}(): self and result must have the same scalar type"),
     "index_select masked_select"),
    (("exact", "nonzero: Expected out tensor to have scalar type Long but got scalar type{O}"),
     "nonzero"),
    (("exact", "linalg.norm expected out tensor dtype {R} but got: {O}"), "linalg.norm"),
    (("exact", "linalg.matrix_norm expected out tensor dtype {R} but got: {O}"),
     "linalg.matrix_norm nuclear_norm"),
    (("exact", "linalg.vecdot: Expected out of dtype{R} but found {O}"), "linalg.vecdot"),
    (("exact", "expected scalar type {R} but found {O}"), "linalg.solve_triangular"),
    (("cast", "{name}: " + SAFELY), "cholesky cholesky_inverse cholesky_solve"),
    (("cast", "linalg.cond: " + SAFELY), "linalg.cond"),
    (("cast", "linalg.pinv: " + SAFELY), "linalg.pinv"),
    (("cast", "tensorinv: " + SAFELY), "linalg.tensorinv"),
    (("cast", "tensorsolve: " + SAFELY), "linalg.tensorsolve"),
    (("cast", "torch.linalg.matrix_rank: " + SAFELY), "linalg.matrix_rank"),
    ((("cast", "matrix_power: " + SAFELY), ("exact", EXACT)), "matrix_power linalg.matrix_power"),
    (("cast", "torch.linalg.householder_product: " + SAFELY),
     "linalg.householder_product orgqr"),
    # (PyTorch's message names the input's dtype, then the result's: never out's)
    (("cast", "mvlgamma: result type {I} can't be cast to the desired output type {R}"),
     "mvlgamma special.mvlgamma"),
    (("cast", "ldexp can't be cast to the desired output type {O}"), "ldexp"),
    ((_NANSUM, ("exact", EXACT)), "nansum"),
    (_NANSUM, "nanmean"),
    (("exact", "take(): self and out expected to have the same dtype, but got self.dtype = "
               "{R} and out.dtype = {O}"), "take"),
    (("any", ""), "lu"),
    ((("cast", "diag: result type {R} can't be cast to the desired out= type {O}"),
      ("exact", EXACT)), "diag"),
    ([("cast", "torch.linalg.eig: Expected eigenvalues to be safely castable from {R} dtype, "
               "but got eigenvalues with dtype {O}"),
      ("cast", "torch.linalg.eig: Expected eigenvectors to be safely castable from {R} dtype, "
               "but got eigenvectors with dtype {O}")], "linalg.eig"),
    (("cast", "torch.linalg.eigvals: Expected eigenvalues to be safely castable from {R} "
              "dtype, but got eigenvalues with dtype {O}"), "linalg.eigvals"),
    ([("cast", "torch.geqrf: Expected a to be safely castable from {R} dtype, but got a with "
               "dtype {O}"),
      ("cast", "torch.geqrf: Expected tau to be safely castable from {R} dtype, but got tau "
               "with dtype {O}")], "geqrf"),
    (("exact", "torch.ormqr: Expected input and result to have the same dtype, but input has "
               "dtype{I} and result has dtype {O}"), "ormqr"),
    ([("cast", "torch.linalg.lstsq: Expected solution to be safely castable from {R} dtype, "
               "but got solution with dtype {O}"),
      # (its residuals' message names the solution, as PyTorch's does)
      (("cast", "torch.linalg.lstsq: Expected solution to be safely castable from {R} dtype, "
                "but got solution with dtype {O}"), ("exact_direct", EXACT)),
      ("cast", "torch.linalg.lstsq: Expected rank to be safely castable from {R} dtype, but "
               "got rank with dtype {O}"),
      ("cast", "torch.linalg.lstsq: Expected singular_values to be safely castable from {R} "
               "dtype, but got singular_values with dtype {O}")], "linalg.lstsq"),
]
# The rule of the functions no group names: PyTorch's TensorIterator cast check.
DEFAULT_RULE = ("cast", CAST)
DTYPE_RULES: dict[str, object] = {name: rule for rule, names in _RULE_GROUPS
                                  for name in names.split()}
# The rule of a function's form returning one tensor where the form returning several (with
# `dim`) has another; and the functions whose one-tensor form PyTorch gives no `out`.
SINGLE_RESULT_RULES: dict[str, object] = dict.fromkeys(("max", "min"), (
    "cast", "Expected canCast( typeMetaToScalarType(self.dtype()), typeMetaToScalarType("
            "out.dtype())) to be true, but got false.  (Could this error message be improved?  "
            "If so, please report an enhancement request to PyTorch.)"))
SINGLE_RESULT_REFUSED = frozenset({"median", "nanmedian"})

# Functions whose `dtype` argument, when not given, is out's dtype (PyTorch computes in it):
# the factories, where a given dtype must equal out's; and the reductions that accumulate
# in their result's dtype, where a given dtype is the result's (checked as `EXACT`).
FACTORIES = frozenset("""
zeros ones full empty eye arange range linspace logspace rand randn randint randperm
""".split())
DTYPE_FROM_OUT = FACTORIES | {"sum", "prod", "nansum", "cumsum", "cumprod"}

# Functions PyTorch resizes `out` for without the deprecation warning, and those that warn
# in their own words.
SILENT_RESIZE = FACTORIES - {"arange"} | {"addbmm", "lu", "narrow_copy"}
RESIZE_WARNINGS = {
    "arange": "The number of elements in the out tensor of shape {old} is {old_numel} which "
              "does not match the computed number of elements {numel}. Note that this may "
              "occur as a result of rounding error. The out tensor will be resized to a "
              "tensor of shape {new_tuple}.",
}

# The ATen op PyTorch's autograd error names, where it is not the function's own name
# (`ALIASES` gives the canonical name of an alias; `special.x` is `special_x` unless listed
# here; `linalg.x` is `linalg_x`). A name "aten::x" is an op PyTorch cannot differentiate:
# an input requiring grad is no error there, only an `out` that requires grad.
GRAD_NAMES: dict[str, str] = {
    "square": "pow", "float_power": "pow", "outer": "mul", "ger": "mul", "kron": "mul",
    "msort": "sort", "take_along_dim": "gather", "cross": "linalg_cross", "chain_matmul": "mm",
    "inverse": "linalg_inv_ex", "qr": "linalg_qr", "svd": "_linalg_svd",
    "norm": "linalg_vector_norm", "lu_solve": "linalg_lu_solve", "hstack": "cat",
    "vstack": "cat", "dstack": "cat", "row_stack": "cat", "column_stack": "cat",
    # `special.expit` is `special.sigmoid`, `gammaln` is `lgamma`, `psi` is `digamma`, ...
    **{f"special.{n}": n for n in """digamma erf erfc erfinv exp2 expm1 i0 log1p logit round
                                     sinc xlogy polygamma logsumexp igamma igammac sigmoid
                                     lgamma""".split()},
    "special.special_i1": "special_i1", "matrix_power": "matmul", "nanmean": "nansum",
    "linalg.matmul": "matmul", "linalg.inv": "linalg_inv_ex", "linalg.det": "_linalg_det",
    "linalg.slogdet": "_linalg_slogdet", "linalg.eigh": "_linalg_eigh",
    "linalg.eigvalsh": "_linalg_eigh", "linalg.svd": "_linalg_svd",
    "linalg.svdvals": "_linalg_svd", "linalg.cholesky": "linalg_cholesky_ex",
    "linalg.solve": "_linalg_solve_ex", "linalg.solve_ex": "_linalg_solve_ex",
    "linalg.lu_factor": "linalg_lu_factor_ex", "linalg.matrix_power": "matmul",
    "linalg.multi_dot": "mm", "linalg.vecdot": "sum",
    # `diff` writes its last difference with `sub`'s out= kernel
    "diff": "sub",
    "special.mvlgamma": "mvlgamma", "frobenius_norm": "norm",
    "orgqr": "linalg_householder_product",
    # PyTorch has no derivative for these: its error comes from the op's own fallback.
    "heaviside": "aten::heaviside", "floor_divide": "aten::floor_divide",
    "conj_physical": "aten::conj_physical", "diag": "aten::diag_embed",
    "histogram": "aten::histogram", "linalg.eigvals": "aten::linalg_eigvals",
    "linalg.ldl_factor": "aten::linalg_ldl_factor_ex",
    "linalg.ldl_factor_ex": "aten::linalg_ldl_factor_ex",
    "linalg.ldl_solve": "aten::linalg_ldl_solve",
    **{name: f"aten::{name}" for name in FACTORIES},
    # (their out= overloads have no derivative, while the functions themselves have one)
    **{name: f"aten::{name}" for name in """softmax log_softmax slice_scatter permute_copy
       t_copy view_copy alias_copy detach_copy expand_copy select_copy slice_copy unfold_copy
       diagonal_copy squeeze_copy unsqueeze_copy transpose_copy as_strided_copy""".split()},
}

# PyTorch's composites that compute their result and copy it into `out` through autograd:
# an input requiring grad is no error (out gets `CopyBackwards`), an `out` requiring grad is
# the in-place error on a leaf.
COPIES_THROUGH_AUTOGRAD = frozenset("""
quantile nanquantile tensordot inner lu special.ndtr linalg.norm linalg.matrix_norm linalg.cond
linalg.tensorinv linalg.tensorsolve nuclear_norm
""".split())

# Outputs PyTorch's LAPACK-backed kernels (and nonzero's) resize column-major (a matrix's two
# last dimensions in Fortran order: strides (1, 3) for a 3x3 result, (9, 1, 3) for a batch
# of two): the function's public name -> the output's index -> "any" (every resize) or
# "empty" (only an `out` without elements; one of another shape is resized row-major), or
# "result" (an `out` without elements takes the result's own strides).
# Outputs not named, and an `out` of the result's shape, keep the common rule (row-major;
# its own strides).
_COLUMN_MAJOR_GROUPS: list[tuple[dict, str]] = [
    ({0: "any"}, """linalg.inv inverse linalg.inv_ex linalg.solve linalg.solve_ex
                    linalg.cholesky linalg.cholesky_ex linalg.lu_factor linalg.lu_factor_ex
                    linalg.lu_solve lu_solve linalg.ldl_factor linalg.ldl_factor_ex
                    linalg.ldl_solve linalg.solve_triangular svd nonzero"""),
    ({0: "any", 1: "any"}, "linalg.qr qr triangular_solve"),
    ({0: "any", 2: "any"}, "linalg.svd"),
    ({1: "any"}, "linalg.eigh"),
    ({0: "empty"}, "cholesky_inverse orgqr linalg.householder_product geqrf ormqr"),
    ({0: "result"}, "linalg.lstsq"),
    ({1: "empty"}, "linalg.eig"),
]
COLUMN_MAJOR_RESIZE: dict[str, dict] = {name: outputs for outputs, names in _COLUMN_MAJOR_GROUPS
                                        for name in names.split()}

# Functions PyTorch resizes `out` for on every call, which refuses an `out` requiring grad.
ALWAYS_RESIZED = frozenset({"empty", "randn", "lu"})

# Functions with floating results that PyTorch never differentiates: their `out` may require
# grad.
NOT_DIFFERENTIABLE = frozenset("""
histc special.bessel_j0 special.bessel_j1 special.spherical_bessel_j0 special.airy_ai
special.bessel_y0 special.bessel_y1 special.modified_bessel_i0 special.modified_bessel_i1
special.modified_bessel_k0 special.modified_bessel_k1 special.scaled_modified_bessel_k0
special.scaled_modified_bessel_k1 special.chebyshev_polynomial_t special.chebyshev_polynomial_u
special.chebyshev_polynomial_v special.chebyshev_polynomial_w
special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u
special.shifted_chebyshev_polynomial_v special.shifted_chebyshev_polynomial_w
special.hermite_polynomial_h special.hermite_polynomial_he special.laguerre_polynomial_l
special.legendre_polynomial_p
""".split())

# How `out` may share memory with an input, where the registry's default (an op over a list
# of tensors refuses any overlap, a TensorIterator op a partial one, the others none) is not
# PyTorch's: a pair (with `self`, the first tensor argument; with the other tensor inputs) of
# the least overlap refused, "partial" (same elements in the same strides allowed), "any", or
# None; or a list of such pairs, one per output. The refusal is PyTorch's `assert_no_overlap`
# (any) or `assert_no_partial_overlap` (partial) in each op's out= kernel.
_PARTIAL, _ANY = "partial", "any"
_OVERLAP_GROUPS: list[tuple[object, str]] = [
    # gather-like kernels read inputs at arbitrary places while writing
    ((_ANY, _ANY), """index_select gather take take_along_dim masked_select nonzero cross
                      linalg.cross hstack vstack dstack row_stack column_stack"""),
    # scans, selections and products written in the operands' order
    ((_PARTIAL, _PARTIAL), """cumsum cumprod logcumsumexp msort topk mode median nanmedian max
                              min aminmax outer ger kron addr frexp"""),
    # out starts as a copy of `self`; the matrix operands are read from a packed copy
    ((_PARTIAL, None), "addmm addmv baddbmm addbmm"),
    ((_PARTIAL, _ANY), "index_add index_reduce index_copy scatter"),
    # the norms of `self` are taken first, then `self` is scaled into out
    ((_PARTIAL, None), "renorm"),
    # values are `self` copied then sorted in place; indices are written apart
    ([(_PARTIAL, _PARTIAL), (None, None)], "sort"),
    ([(_ANY, _ANY), (None, None)], "kthvalue"),
]
OVERLAP_RULES: dict[str, object] = {name: rule for rule, names in _OVERLAP_GROUPS
                                    for name in names.split()}

# Functions whose out= overload takes tensors where the others take numbers too: the
# parameters that must be tensors when `out` is given (PyTorch's argument parser refuses
# anything else with a TypeError).
TENSOR_ARGUMENTS: dict[str, tuple[str, ...]] = {"where": ("condition", "input", "other")}

# Functions whose fusegrad signature has `out` but PyTorch's has none: its TypeError.
REFUSED = frozenset("""isfinite isinf isnan relu std_mean var_mean histogramdd special.softmax
special.log_softmax""".split())

RESIZE_WARNING = (
    "An output with one or more elements was resized since it had shape {old}, which does "
    "not match the required output shape {new}. This behavior is deprecated, and in a future "
    "PyTorch release outputs will not be resized unless they have zero elements. You can "
    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
    "t.resize_(0).")

GRAD_ERROR = ("{}(): functions with out=... arguments don't support automatic "
              "differentiation, but one of the arguments requires grad.")


def grad_name(name: str, kwargs: dict | None = None) -> str:
    """The op PyTorch's autograd error names for public function `name` called with keyword
    arguments `kwargs` (`scatter` with a `reduce` is an op without a derivative)."""
    if name == "scatter" and kwargs and kwargs.get("reduce") is not None:
        return "aten::scatter"
    found = GRAD_NAMES.get(name)
    if found is not None:
        return found
    space, _, short = name.rpartition(".")
    if space:
        return f"{space}_{short}"
    return ALIASES.get(name, name)


# ---------------------------------------------------------------------------- forward AD


def _first_two_tensors(args: tuple, kwargs: dict) -> list:
    return [a for a in (*args, *kwargs.values()) if hasattr(a, "dim")][:2]


def _matmul_op(args: tuple, kwargs: dict) -> str:
    """The ATen op whose out= kernel PyTorch's `matmul` of operands of these ranks runs."""
    a, b = (t.dim() for t in _first_two_tensors(args, kwargs))
    if b == 1:
        return "dot" if a == 1 else "mv"
    return "mm" if b == 2 else "bmm"


def _matrix_power_op(args: tuple, kwargs: dict) -> str | None:
    n = args[1] if len(args) > 1 else kwargs.get("n")
    return None if n in (0, 1) else "mm"  # (a copy or an identity: written through autograd)


def _vecdot_op(args: tuple, kwargs: dict) -> str:
    a, b = (t.dim() for t in _first_two_tensors(args, kwargs))
    return "vdot" if a == b == 1 else "sum"


# The ATen op whose out= kernel PyTorch's forward AD names refusing a call at an open level
# ("Trying to use forward AD with <op>_out ... out= function"), where it is not the op
# `grad_name` gives: a function of the call's arguments, None where no kernel refuses.
FORWARD_AD_OPS = {"matmul": _matmul_op, "linalg.matmul": _matmul_op,
                  "matrix_power": _matrix_power_op, "linalg.matrix_power": _matrix_power_op,
                  "linalg.vecdot": _vecdot_op}


def forward_ad_op(name: str, args: tuple, kwargs: dict) -> str | None:
    """The op PyTorch's forward AD error names for `name(*args, **kwargs, out=...)` with a
    tangent among its tensors ("aten::x": an op without derivative, refused by autograd's
    fallback), or None where PyTorch copies the result into `out` through autograd."""
    if name in COPIES_THROUGH_AUTOGRAD:
        return None
    rule = FORWARD_AD_OPS.get(name)
    return grad_name(name) if rule is None else rule(args, kwargs)
