"""`out=` on the public functions, against PyTorch: every function taking `out` writes its
result into it as PyTorch 2.13 does (values, dtype rules and their messages, resizing and its
warning, the autograd refusal, tuple outputs and their named tuples), or raises PyTorch's
TypeError where PyTorch has no `out`; compiled and traced calls stay correct."""

from __future__ import annotations

import functools
import inspect
import io
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.linalg  # noqa: E402, F401
import fusegrad.special  # noqa: E402, F401
from fusegrad.ops import out_facts  # noqa: E402

LIBS = (torch, fusegrad)


def _data(T, shape=(2, 3), dtype="float32", lo=0.1, hi=0.9, seed=0):
    """The same values as a torch or a fusegrad tensor."""
    rng = np.random.default_rng(seed)
    if dtype in ("int64", "int32"):
        a = rng.integers(1, 6, size=shape).astype(dtype)
    else:
        a = rng.uniform(lo, hi, shape).astype(dtype)
    return T.tensor(a.tolist(), dtype=getattr(T, dtype))


X = _data

UNARY = """abs absolute acos arccos asin arcsin atan arctan atanh arctanh asinh arcsinh ceil cos
cosh deg2rad digamma erf erfc erfinv exp exp2 expm1 fix floor frac i0 isneginf isposinf lgamma
log log10 log1p log2 logical_not logit neg negative rad2deg reciprocal round rsqrt sgn sigmoid
sign signbit sin sinc sinh sqrt square tan tanh trunc nan_to_num conj_physical angle
msort""".split()
BINARY = """add sub subtract mul multiply div divide true_divide atan2 arctan2 copysign eq ne
not_equal lt le gt ge less less_equal greater greater_equal fmax fmin fmod remainder hypot
logaddexp logaddexp2 maximum minimum nextafter pow xlogy float_power heaviside igamma igammac
logical_and logical_or logical_xor floor_divide""".split()
INT_BINARY = "bitwise_and bitwise_or bitwise_xor gcd lcm bitwise_left_shift bitwise_right_shift"
SPECIAL_UNARY = """bessel_j0 bessel_j1 digamma entr erf erfc erfcx erfinv exp2 expit expm1
gammaln i0 i0e i1 i1e log1p log_ndtr logit ndtr ndtri psi round sinc
spherical_bessel_j0 airy_ai bessel_y0 bessel_y1 modified_bessel_i0 modified_bessel_i1
modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0
scaled_modified_bessel_k1""".split()
# Orthogonal polynomials of `torch.special`: (x, n).
SPECIAL_POLYNOMIALS = """chebyshev_polynomial_t chebyshev_polynomial_u chebyshev_polynomial_v
chebyshev_polynomial_w shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w hermite_polynomial_h
hermite_polynomial_he laguerre_polynomial_l legendre_polynomial_p""".split()
JOINS = "cat concat concatenate stack hstack vstack dstack row_stack column_stack".split()
FACTORIES = {
    "zeros": ((2, 3), {}), "ones": ((2, 3), {}), "full": (((2, 3), 1.5), {}),
    "full.int": (((2, 3), 7), {}), "eye": ((3,), {}), "arange": ((5,), {}),
    "arange.float": ((0.0, 2.5, 0.5), {}), "range": ((0, 4), {}), "linspace": ((0, 1, 5), {}),
    "logspace": ((0, 1, 5), {}), "empty": ((2, 3), {}), "rand": ((2, 3), {}),
    "randn": ((2, 3), {}), "randint": ((0, 5, (2, 3)), {}), "randperm": ((5,), {}),
}
RANDOM = {"empty", "rand", "randn", "randint", "randperm", "normal"}


def _calls(T) -> dict:
    """Public name (a ".suffix" tells two calls apart) -> (function, args, kwargs)."""
    def square():
        return T.eye(3) * 2 + X(T, (3, 3))

    def spd():
        a = X(T, (3, 3))
        return T.eye(3) * 2 + a @ a.mT

    c = {}
    for n in UNARY:
        c[n] = (getattr(T, n), (X(T),), {})
    for n in BINARY:
        c[n] = (getattr(T, n), (X(T), X(T, (3,), seed=1)), {})
    for n in INT_BINARY.split():
        c[n] = (getattr(T, n), (X(T, dtype="int64"), X(T, (3,), "int64", seed=1)), {})
    for n in SPECIAL_UNARY:
        c[f"special.{n}"] = (getattr(T.special, n), (X(T),), {})
    for n in SPECIAL_POLYNOMIALS:
        c[f"special.{n}"] = (getattr(T.special, n), (X(T), T.tensor([0.0, 2.0, 3.0])), {})
    for n in "xlog1py xlogy zeta gammainc gammaincc".split():
        c[f"special.{n}"] = (getattr(T.special, n),
                             (X(T, lo=1.1, hi=2), X(T, (3,), lo=1.1, hi=2, seed=1)), {})
    for n in JOINS:
        c[n] = (getattr(T, n), ([X(T), X(T, seed=1)],), {})
    for key, (args, kwargs) in FACTORIES.items():
        c[key] = (getattr(T, key.partition(".")[0]), args, kwargs)
    c.update({
        "acosh": (T.acosh, (X(T, lo=1.5, hi=3),), {}),
        "bitwise_not": (T.bitwise_not, (X(T, dtype="int64"),), {}),
        "add.alpha": (T.add, (X(T), X(T, seed=1)), {"alpha": 2}),
        "div.floor": (T.div, (X(T), X(T, seed=1)), {"rounding_mode": "floor"}),
        "ldexp": (T.ldexp, (X(T), X(T, (3,), "int64")), {}),
        "polygamma": (T.polygamma, (1, X(T)), {}),
        "lerp": (T.lerp, (X(T), X(T, seed=1), 0.3), {}),
        "addcmul": (T.addcmul, (X(T), X(T, seed=1), X(T, seed=2)), {"value": 0.5}),
        "addcdiv": (T.addcdiv, (X(T), X(T, seed=1), X(T, seed=2)), {"value": 0.5}),
        "clamp": (T.clamp, (X(T), 0.3, 0.6), {}), "clip": (T.clip, (X(T), 0.3, 0.6), {}),
        "clamp_min": (T.clamp_min, (X(T), 0.3), {}),
        "clamp_max": (T.clamp_max, (X(T), 0.6), {}),
        "where": (T.where, (X(T) > 0.5, X(T), X(T, seed=1)), {}),
        "complex": (T.complex, (X(T), X(T, seed=1)), {}),
        "polar": (T.polar, (X(T), X(T, seed=1)), {}),
        "frexp": (T.frexp, (X(T),), {}),
        "special.polygamma": (T.special.polygamma, (1, X(T)), {}),
        "special.logsumexp": (T.special.logsumexp, (X(T), 1), {}),
        # reductions and scans
        "sum": (T.sum, (X(T), 1), {}), "sum.dtype": (T.sum, (X(T), 1), {"dtype": T.float64}),
        "prod": (T.prod, (X(T), 1), {}), "nansum": (T.nansum, (X(T), 1), {}),
        "mean": (T.mean, (X(T), 0), {"keepdim": True}), "nanmean": (T.nanmean, (X(T), 1), {}),
        "amax": (T.amax, (X(T), 1), {}), "amin": (T.amin, (X(T), 1), {}),
        "logsumexp": (T.logsumexp, (X(T), 1), {}), "std": (T.std, (X(T), 1), {}),
        "var": (T.var, (X(T), 1), {}), "cumsum": (T.cumsum, (X(T), 1), {}),
        "cumprod": (T.cumprod, (X(T), 1), {}), "logcumsumexp": (T.logcumsumexp, (X(T), 1), {}),
        "all": (T.all, (X(T), 1), {}), "any": (T.any, (X(T), 1), {}),
        "argmax": (T.argmax, (X(T), 1), {}), "argmin": (T.argmin, (X(T), 1), {}),
        "norm": (T.norm, (X(T),), {"dim": 1}), "max.all": (T.max, (X(T),), {}),
        "max": (T.max, (X(T), 1), {}), "min": (T.min, (X(T), 1), {}),
        "median": (T.median, (X(T), 1), {}), "nanmedian": (T.nanmedian, (X(T), 1), {}),
        "mode": (T.mode, (X(T, dtype="int64"), 1), {}),
        "kthvalue": (T.kthvalue, (X(T), 2, 1), {}), "sort": (T.sort, (X(T), 1), {}),
        "topk": (T.topk, (X(T), 2), {}), "cummax": (T.cummax, (X(T), 1), {}),
        "cummin": (T.cummin, (X(T), 1), {}), "aminmax": (T.aminmax, (X(T),), {"dim": 1}),
        "quantile": (T.quantile, (X(T), 0.3), {"dim": 1}),
        "nanquantile": (T.nanquantile, (X(T), 0.3), {"dim": 1}),
        "histc": (T.histc, (X(T),), {"bins": 4}),
        "histogram": (T.histogram, (X(T, (6,)),), {"bins": 3}),
        # linear algebra
        "mm": (T.mm, (X(T), X(T, (3, 4))), {}), "matmul": (T.matmul, (X(T), X(T, (3, 4))), {}),
        "bmm": (T.bmm, (X(T, (2, 2, 3)), X(T, (2, 3, 4))), {}),
        "mv": (T.mv, (X(T), X(T, (3,))), {}),
        "dot": (T.dot, (X(T, (3,)), X(T, (3,), seed=1)), {}),
        "vdot": (T.vdot, (X(T, (3,)), X(T, (3,), seed=1)), {}),
        "inner": (T.inner, (X(T, (3,)), X(T, (3,), seed=1)), {}),
        "outer": (T.outer, (X(T, (3,)), X(T, (2,), seed=1)), {}),
        "ger": (T.ger, (X(T, (3,)), X(T, (2,), seed=1)), {}),
        "addmm": (T.addmm, (X(T, (2, 4)), X(T), X(T, (3, 4))), {}),
        "addmv": (T.addmv, (X(T, (2,)), X(T), X(T, (3,))), {}),
        "addr": (T.addr, (X(T), X(T, (2,)), X(T, (3,))), {}),
        "baddbmm": (T.baddbmm, (X(T, (2, 2, 4)), X(T, (2, 2, 3)), X(T, (2, 3, 4))), {}),
        "addbmm": (T.addbmm, (X(T, (2, 4)), X(T, (2, 2, 3)), X(T, (2, 3, 4))), {}),
        "kron": (T.kron, (X(T), X(T, (2, 2))), {}),
        "cross": (T.cross, (X(T), X(T, seed=1)), {"dim": 1}),
        "tensordot": (T.tensordot, (X(T), X(T, (3, 4)), 1), {}),
        "chain_matmul": (T.chain_matmul, (X(T), X(T, (3, 4))), {}),
        "matrix_power": (T.matrix_power, (square(), 2), {}),
        "cholesky": (T.cholesky, (spd(),), {}),
        "cholesky_inverse": (T.cholesky_inverse, (T.eye(3) * 2,), {}),
        "cholesky_solve": (T.cholesky_solve, (X(T, (3, 2)), T.eye(3) * 2), {}),
        "inverse": (T.inverse, (square(),), {}), "qr": (T.qr, (square(),), {}),
        "svd": (T.svd, (square(),), {}),
        "triangular_solve": (T.triangular_solve, (X(T, (3, 2)), square().triu()), {}),
        "lu_solve": (T.lu_solve, (X(T, (3, 2)), *T.linalg.lu_factor(square())), {}),
        "lu_unpack": (T.lu_unpack, tuple(T.linalg.lu_factor(square())), {}),
        "lu": (T.lu, (square(),), {}),
        # shapes and indexing
        "diag": (T.diag, (X(T, (3,)),), {}), "tril": (T.tril, (X(T, (3, 3)),), {}),
        "triu": (T.triu, (X(T, (3, 3)),), {}),
        "gather": (T.gather, (X(T), 1, T.tensor([[0, 2], [1, 1]])), {}),
        "index_select": (T.index_select, (X(T), 1, T.tensor([0, 2])), {}),
        "index_add": (T.index_add, (X(T), 1, T.tensor([0, 2]), X(T, (2, 2))), {}),
        "index_reduce": (T.index_reduce, (X(T), 1, T.tensor([0, 2]), X(T, (2, 2)), "prod"),
                         {}),
        "take_along_dim": (T.take_along_dim, (X(T), T.tensor([[0, 2], [1, 1]]), 1), {}),
        "take": (T.take, (X(T), T.tensor([0, 4])), {}),
        "diff": (T.diff, (X(T),), {}),
        "narrow_copy": (T.narrow_copy, (X(T), 1, 1, 2), {}),
        "index_copy": (T.index_copy, (X(T), 1, T.tensor([0, 2]), X(T, (2, 2))), {}),
        "renorm": (T.renorm, (X(T), 2, 0, 0.5), {}),
        "scatter": (T.scatter, (X(T), 1, T.tensor([[0, 2], [1, 1]]), X(T, seed=1)), {}),
        "scatter.value": (T.scatter, (X(T), 1, T.tensor([[0, 2], [1, 1]])), {"value": 0.25}),
        "masked_select": (T.masked_select, (X(T), X(T) > 0.5), {}),
        "nonzero": (T.nonzero, (X(T) > 0.5,), {}),
        "searchsorted": (T.searchsorted, (T.tensor([0.1, 0.5, 0.9]), X(T)), {}),
        "bucketize": (T.bucketize, (X(T), T.tensor([0.1, 0.5, 0.9])), {}),
        "normal": (T.normal, (X(T), 1.0), {}),
        # linalg
        "linalg.inv": (T.linalg.inv, (square(),), {}),
        "linalg.inv_ex": (T.linalg.inv_ex, (square(),), {}),
        "linalg.det": (T.linalg.det, (square(),), {}),
        "linalg.slogdet": (T.linalg.slogdet, (square(),), {}),
        "linalg.eigh": (T.linalg.eigh, (spd(),), {}),
        "linalg.eigvalsh": (T.linalg.eigvalsh, (spd(),), {}),
        "linalg.eig": (T.linalg.eig, (spd(),), {}),
        "linalg.eigvals": (T.linalg.eigvals, (spd(),), {}),
        "linalg.qr": (T.linalg.qr, (square(),), {}),
        "linalg.svd": (T.linalg.svd, (square(),), {}),
        "linalg.svdvals": (T.linalg.svdvals, (square(),), {}),
        "linalg.cholesky": (T.linalg.cholesky, (spd(),), {}),
        "linalg.cholesky_ex": (T.linalg.cholesky_ex, (spd(),), {}),
        "linalg.norm": (T.linalg.norm, (X(T),), {}),
        "linalg.vector_norm": (T.linalg.vector_norm, (X(T),), {"dim": 1}),
        "linalg.matrix_norm": (T.linalg.matrix_norm, (X(T),), {}),
        "linalg.solve": (T.linalg.solve, (square(), X(T, (3, 2))), {}),
        "linalg.solve_ex": (T.linalg.solve_ex, (square(), X(T, (3, 2))), {}),
        "linalg.lu_factor": (T.linalg.lu_factor, (square(),), {}),
        "linalg.lu_factor_ex": (T.linalg.lu_factor_ex, (square(),), {}),
        "linalg.lu": (T.linalg.lu, (square(),), {}),
        "linalg.lu_solve": (T.linalg.lu_solve, (*T.linalg.lu_factor(square()),
                                                X(T, (3, 2))), {}),
        "linalg.matmul": (T.linalg.matmul, (X(T), X(T, (3, 4))), {}),
        "linalg.matrix_power": (T.linalg.matrix_power, (square(), 2), {}),
        "linalg.matrix_rank": (T.linalg.matrix_rank, (square(),), {}),
        "linalg.pinv": (T.linalg.pinv, (X(T),), {}),
        "linalg.multi_dot": (T.linalg.multi_dot, ([X(T), X(T, (3, 4)), X(T, (4, 2))],), {}),
        "linalg.cross": (T.linalg.cross, (X(T), X(T, seed=1)), {}),
        "linalg.vecdot": (T.linalg.vecdot, (X(T), X(T, seed=1)), {}),
        "linalg.cond": (T.linalg.cond, (square(),), {}),
        "linalg.solve_triangular": (T.linalg.solve_triangular, (square().triu(), X(T, (3, 2))),
                                    {"upper": True}),
        "linalg.tensorinv": (T.linalg.tensorinv, (square(),), {"ind": 1}),
        "linalg.tensorsolve": (T.linalg.tensorsolve, (square(), X(T, (3,))), {}),
        "linalg.householder_product": (T.linalg.householder_product,
                                       (X(T, (3, 3)), X(T, (2,))), {}),
        "linalg.ldl_factor": (T.linalg.ldl_factor, (spd(),), {}),
        "linalg.ldl_factor_ex": (T.linalg.ldl_factor_ex, (spd(),), {}),
        "linalg.ldl_solve": (T.linalg.ldl_solve, (*T.linalg.ldl_factor(spd()),
                                                  X(T, (3, 2))), {}),
        # softmax, scatters, the deprecated norms, the copying forms of the views
        "softmax": (T.softmax, (X(T), 1), {}),
        "softmax.dtype": (T.softmax, (X(T), 0), {"dtype": T.float64}),
        "log_softmax": (T.log_softmax, (X(T), 1), {}),
        "scatter_add": (T.scatter_add, (X(T), 1, T.tensor([[0, 2], [1, 1]]), X(T, seed=1)),
                        {}),
        "scatter_reduce": (T.scatter_reduce, (X(T), 1, T.tensor([[0, 2], [1, 1]]),
                                              X(T, seed=1), "amax"), {"include_self": False}),
        "slice_scatter": (T.slice_scatter, (X(T), X(T, (2, 1), seed=1), 1, 0, 1), {}),
        "isin": (T.isin, (X(T), X(T, (3,))), {}),
        "hardshrink": (T.hardshrink, (X(T), 0.5), {}),
        "mvlgamma": (T.mvlgamma, (X(T, lo=1.5, hi=3), 2), {}),
        "special.multigammaln": (T.special.multigammaln, (X(T, lo=1.5, hi=3), 2), {}),
        "nuclear_norm": (T.nuclear_norm, (X(T),), {}),
        "nuclear_norm.dim": (T.nuclear_norm, (X(T, (2, 3, 2)), (0, 2)), {"keepdim": True}),
        "frobenius_norm": (T.frobenius_norm, (X(T), (0, 1)), {}),
        "orgqr": (T.orgqr, (X(T, (3, 3)), X(T, (2,))), {}),
        "geqrf": (T.geqrf, (X(T, (3, 2)),), {}),
        "ormqr": (T.ormqr, (X(T, (3, 2)), X(T, (2,)), X(T, (3, 2))), {}),
        "linalg.lstsq": (T.linalg.lstsq, (X(T, (3, 2)), X(T, (3, 1))), {"driver": "gelsd"}),
        "permute_copy": (T.permute_copy, (X(T), (1, 0)), {}),
        "t_copy": (T.t_copy, (X(T),), {}),
        "view_copy": (T.view_copy, (X(T), (3, 2)), {}),
        "alias_copy": (T.alias_copy, (X(T),), {}),
        "detach_copy": (T.detach_copy, (X(T),), {}),
        "expand_copy": (T.expand_copy, (X(T), (2, 2, 3)), {}),
        "select_copy": (T.select_copy, (X(T), 1, 2), {}),
        "slice_copy": (T.slice_copy, (X(T), 1, 0, 2), {}),
        "unfold_copy": (T.unfold_copy, (X(T), 1, 2, 1), {}),
        "diagonal_copy": (T.diagonal_copy, (X(T),), {"offset": 1}),
        "squeeze_copy": (T.squeeze_copy, (X(T, (2, 1, 3)),), {}),
        "squeeze_copy.dim": (T.squeeze_copy, (X(T, (2, 1, 3)), 1), {}),
        "unsqueeze_copy": (T.unsqueeze_copy, (X(T), 0), {}),
        "transpose_copy": (T.transpose_copy, (X(T), 0, 1), {}),
        "as_strided_copy": (T.as_strided_copy, (X(T), (2, 2), (1, 2)), {}),
    })
    return c


@functools.cache
def _all_calls(lib_name: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _calls(torch if lib_name == "torch" else fusegrad)


def _call(T, key):
    return _all_calls(T.__name__)[key]


# Functions PyTorch gives no out=: fusegrad raises PyTorch's TypeError.
REFUSED = {"isfinite": (X,), "isinf": (X,), "isnan": (X,), "relu": (X,),
           "std_mean": (X,), "var_mean": (X,)}

ALL = sorted(_all_calls("fusegrad"))
TUPLES = {"frexp", "max", "min", "median", "nanmedian", "mode", "kthvalue", "sort", "topk",
          "cummax", "cummin", "aminmax", "histogram", "qr", "svd", "triangular_solve", "lu",
          "lu_unpack", "linalg.inv_ex", "linalg.slogdet", "linalg.eigh", "linalg.eig",
          "linalg.qr", "linalg.svd", "linalg.cholesky_ex", "linalg.solve_ex",
          "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu", "linalg.ldl_factor",
          "linalg.ldl_factor_ex", "geqrf", "linalg.lstsq"}
# Values that differ with the algorithm (eigenvector signs): checked against fusegrad's own
# result without out=.
OWN_VALUES = {"linalg.eigh", "linalg.eig"}
DTYPES = ["float32", "float64", "float16", "int64", "int32", "bool", "complex64"]
# (name, out dtype) where the two differ for reasons of the function, not of out=: dtypes a
# PyTorch kernel does not implement (fusegrad computes them), a PyTorch internal assert.
DTYPE_DIFFERENCES = {
    *((n, d) for n in ("arange", "arange.float", "range", "linspace", "logspace", "randperm",
                       "randint") for d in ("bool", "complex64")),
    *(("rand", d) for d in ("int64", "int32", "bool")),
    *(("randn", d) for d in ("int64", "int32", "bool")),
    ("arange.float", "int64"), ("arange.float", "int32"), ("cumsum", "bool"),
    ("cumprod", "bool"), ("std", "complex64"), ("var", "complex64"), ("nanmean", "complex64"),
    ("nansum", "complex64"), ("ldexp", "float64"), ("ldexp", "float16"),
    ("ldexp", "complex64"), ("heaviside", "complex64"),
}


def _quiet(fn, *args, **kwargs):
    """`fn(...)` -> ("ok", result, resize warnings) or ("err", "Type: message", warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, status = fn(*args, **kwargs), "ok"
        except Exception as e:  # noqa: BLE001 -- the exception itself is compared
            result, status = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", \
                "err"
    resized = [str(w.message).split(" (Triggered internally")[0] for w in caught
               if "resized" in str(w.message)]
    return status, result, resized


def _out_like(T, result, shape=None, dtype=None, index=None, requires_grad=False):
    if isinstance(result, tuple):
        return tuple(_out_like(T, r, shape, dtype if index in (None, i) else None,
                               requires_grad=requires_grad and i == 0)
                     for i, r in enumerate(result))
    dt = getattr(T, dtype) if dtype else getattr(T, str(result.dtype).split(".")[-1])
    out = T.zeros(result.shape if shape is None else shape, dtype=dt)
    if requires_grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_()
    return out


def _array(t):
    return np.asarray(t.detach().tolist())


def _close(a, b, exact=False) -> bool:
    if isinstance(a, tuple):
        return all(_close(x, y, exact) for x, y in zip(a, b))
    if tuple(a.shape) != tuple(b.shape) or str(a.dtype) != str(b.dtype):
        return False
    x, y = _array(a), _array(b)
    if exact or x.dtype.kind not in "fc":
        return np.array_equal(x, y, equal_nan=True)
    return np.allclose(x, y, rtol=2e-3, atol=1e-4, equal_nan=True)


def _run_both(key, **opts):
    """Both libraries called with an out made by `_out_like(**opts)`: their outcomes, outs,
    and fusegrad's result without out."""
    outcomes = []
    for T in LIBS:
        fn, args, kwargs = _call(T, key)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = fn(*args, **kwargs)
        out = _out_like(T, plain, **opts)
        outcomes.append((_quiet(fn, *args, **kwargs, out=out), out, plain))
    return outcomes


def _same_outcome(theirs, ours, key, check_values=True):
    (t_status, t_res, t_warn), t_out, _ = theirs
    (o_status, o_res, o_warn), o_out, o_plain = ours
    assert o_status == t_status, (o_res, t_res)
    if t_status == "err":
        assert o_res == t_res
        return
    if isinstance(t_out, tuple):
        assert type(o_res).__name__ == type(t_res).__name__  # max_out, sort_out, ...
        assert all(a is b for a, b in zip(o_res, o_out))  # built from the outs themselves
        assert sorted(o_warn) == sorted(t_warn)  # PyTorch's order is its kernel's
    else:
        assert o_res is o_out
        assert o_warn == t_warn
    if not check_values:
        return
    if key in RANDOM:
        assert tuple(o_out.shape) == tuple(t_out.shape) and str(o_out.dtype) == str(t_out.dtype)
    elif key in OWN_VALUES:
        with fusegrad.no_grad():
            assert _close(o_out, tuple(p.to(o.dtype) for p, o in zip(o_plain, o_out)),
                          exact=True)
    else:
        assert _close(t_out, o_out)


def test_every_function_with_out_is_covered():
    """Each public function that takes `out` is compared here, or refused as PyTorch does,
    or (bernoulli, multinomial) draws into it and is tested below, or (the copying splits)
    writes a list of outs, compared in test_eager_leftovers6.py."""
    called = {id(inspect.unwrap(fn)) for fn, _, _ in _all_calls("fusegrad").values()}
    missing = []
    for prefix, space in (("", fusegrad), ("special.", fusegrad.special),
                          ("linalg.", fusegrad.linalg)):
        for name in dir(space):
            fn = getattr(space, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            try:
                takes_out = "out" in inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            # (the copying splits write a list of outs and return None: compared in
            # test_eager_leftovers6.py)
            if takes_out and id(inspect.unwrap(fn)) not in called and \
                    name not in REFUSED and name not in ("bernoulli", "multinomial",
                                                         "histogramdd", "split_copy",
                                                         "split_with_sizes_copy",
                                                         "unbind_copy"):
                missing.append(prefix + name)
    assert not missing
    assert len(ALL) > 250


def _table_names() -> set:
    """The names `_out`'s tables know the wrapped functions by."""
    names = set()
    for space in (fusegrad, fusegrad.special, fusegrad.linalg):
        for attr in dir(space):
            fn = getattr(space, attr)
            while fn is not None and "_plan_" not in getattr(fn, "__globals__", {}):
                fn = getattr(fn, "__wrapped__", None)
            if fn is not None:
                names.add(fn.__globals__["_plan_"].name)
    return names


def test_the_tables_name_live_functions():
    """A misspelt or stale entry would silently leave its function on the defaults."""
    names = _table_names()
    assert {"add", "special.sigmoid", "linalg.inv", "cat", "max"} <= names
    f = out_facts
    for table in (f.DTYPE_RULES, f.GRAD_NAMES, f.COPIES_THROUGH_AUTOGRAD, f.NOT_DIFFERENTIABLE,
                  f.REFUSED, f.DTYPE_FROM_OUT, f.SILENT_RESIZE, f.RESIZE_WARNINGS,
                  f.SINGLE_RESULT_RULES, f.SINGLE_RESULT_REFUSED, f.ALWAYS_RESIZED):
        assert set(table) <= names, set(table) - names
    listed = [n for _, group in f._RULE_GROUPS for n in group.split()]
    assert len(listed) == len(set(listed))  # one dtype rule per function


@pytest.mark.parametrize("key", ALL)
def test_same_shape_out(key):
    """An out of the result's shape and dtype: written in place and returned."""
    if key == "normal":
        pytest.skip("PyTorch's normal(Tensor, float, out=) fails on its own resize")
    theirs, ours = _run_both(key)
    _same_outcome(theirs, ours, key)


@pytest.mark.parametrize("key", ALL)
@pytest.mark.parametrize("shape", [(0,), (7,)], ids=["empty", "wrong_shape"])
def test_resized_out(key, shape):
    """An empty out is resized silently; one with elements and another shape is resized
    with PyTorch's deprecation warning (or silently, for the factories that do so)."""
    if key == "normal":
        pytest.skip("PyTorch's normal(Tensor, float, out=) fails on its own resize")
    theirs, ours = _run_both(key, shape=shape)
    if key in ("mode", "kthvalue") and shape == (7,):
        # PyTorch's kernels resize to the keepdim shape first, so its warning names [7, 1].
        assert len(ours[0][2]) == len(theirs[0][2])
        _same_outcome((theirs[0][:2] + ([],),) + theirs[1:],
                      ((*ours[0][:2], []),) + ours[1:], key)
        return
    _same_outcome(theirs, ours, key)
    # Row-major, or as PyTorch's LAPACK-backed kernels lay their outputs out, column-major.
    out, their_out = ours[1], theirs[1]
    pairs = zip(out, their_out) if isinstance(out, tuple) else ((out, their_out),)
    for o, t in pairs:
        assert (o.stride(), o.is_contiguous()) == (t.stride(), t.is_contiguous())


@pytest.mark.parametrize("key", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_out_dtype(key, dtype):
    """Another dtype: cast into where PyTorch casts (`can_cast`), PyTorch's message where it
    refuses (the default rule, or the function's own exact-dtype check)."""
    if (key, dtype) in DTYPE_DIFFERENCES or key == "normal":
        pytest.skip("the function itself differs for this dtype")
    fn, args, kwargs = _call(fusegrad, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        count = len(fn(*args, **kwargs)) if key in TUPLES else 1
    for index in range(count):
        theirs, ours = _run_both(key, dtype=dtype, index=index if count > 1 else None)
        _same_outcome(theirs, ours, key)


def _requires_grad_outcome(T, key):
    fn, args, kwargs = _call(T, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = fn(*args, **kwargs)
    first = args[0].clone().requires_grad_()
    return _quiet(fn, first, *args[1:], **kwargs, out=_out_like(T, plain))


@pytest.mark.parametrize("key", [k for k in ALL if k not in FACTORIES and k not in JOINS
                                 and k not in ("linalg.multi_dot", "polygamma", "where",
                                               "special.polygamma", "bitwise_not", "mode",
                                               "nonzero", "lu_solve", "lu_unpack",
                                               "normal")
                                 and k.split(".")[0] not in INT_BINARY])
def test_input_requiring_grad(key):
    """PyTorch's out= kernels are not differentiable: an input requiring grad is refused
    with the op's name, except by composites (which copy through autograd) and by ops
    PyTorch cannot differentiate."""
    theirs = _requires_grad_outcome(torch, key)
    ours = _requires_grad_outcome(fusegrad, key)
    assert ours[0] == theirs[0], ours[1]
    if theirs[0] == "err":
        assert ours[1] == theirs[1]


@pytest.mark.parametrize("key", [k for k in ALL if k not in ("normal", "linalg.lu",
                                                             "lu_unpack")])
def test_out_requiring_grad(key):
    """An out requiring grad is refused in grad mode, as PyTorch refuses it."""
    theirs, ours = _run_both(key, requires_grad=True)
    _same_outcome(theirs, ours, key, check_values=False)


# ----------------------------------------------------------------- semantics, one by one


def test_aliasing_an_input_matches_torch():
    for lib in LIBS:
        a, b = lib.arange(6.0).view(2, 3), lib.full((3,), 2.0)
        assert lib.add(a, b, out=a) is a
        assert lib.mul(b, a[0], out=b) is b
        lib.sub(a, a.flip(1), out=a)
        lib.cumsum(a, 1, out=a)
        if lib is torch:
            expected = (a.tolist(), b.tolist())
    assert (a.tolist(), b.tolist()) == expected


def test_out_is_written_in_place():
    """The same storage: views see the values, the version counter moves, a transposed out
    keeps its strides and gets the values written through them."""
    for lib in LIBS:
        base = lib.zeros(3, 2)
        out = base.t()
        view = base[:, 0]
        before = out._version
        x = lib.arange(6.0).view(2, 3)
        assert lib.exp(x, out=out) is out
        assert out.stride() == (1, 2) and not out.is_contiguous()
        np.testing.assert_allclose(_array(out), np.exp(np.arange(6.0)).reshape(2, 3),
                                   rtol=1e-6)
        np.testing.assert_allclose(_array(view), np.exp([0.0, 1.0, 2.0]), rtol=1e-6)
        assert out._version > before and base._version == out._version


def test_shrinking_resize_keeps_the_storage():
    for lib in LIBS:
        buf = lib.zeros(10)
        head = buf[:6]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.add(lib.ones(2, 3), 1, out=buf)
        assert buf.shape == (2, 3) and buf.is_contiguous()
        assert head.tolist() == [2.0] * 6


def test_resize_warning_names_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fusegrad.add(fusegrad.ones(2, 3), 1, out=fusegrad.zeros(4))
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert caught[0].filename == __file__
    assert str(caught[0].message) == out_facts.RESIZE_WARNING.format(old=[4], new=[2, 3])


def test_castable_dtype_casts_values():
    for lib in LIBS:
        out = lib.zeros(3, dtype=lib.float64)
        lib.add(lib.tensor([1, 2, 3]), 1, out=out)
        ints = lib.zeros(2, dtype=lib.int64)
        lib.eq(lib.tensor([1.0, 2.0]), 1.0, out=ints)
        assert out.tolist() == [2.0, 3.0, 4.0] and ints.tolist() == [1, 0]
    for lib in LIBS:  # sums accumulate in out's dtype, as PyTorch's do
        out = lib.zeros(2, dtype=lib.int64)
        lib.sum(lib.tensor([[0.6, 0.6], [1.5, 1.5]]), 1, out=out)
        assert out.tolist() == [0, 2]


@pytest.mark.parametrize("call", [
    lambda T: T.add(T.ones(2), 1, out=T.zeros(2, dtype=T.int64)),
    lambda T: T.sqrt(T.ones(2, dtype=T.complex64), out=T.zeros(2)),
    lambda T: T.mul(T.ones(2), 2, out=T.zeros(2, dtype=T.bool)),
    lambda T: T.matmul(T.ones(2, 2), T.ones(2, 2), out=T.zeros(2, 2, dtype=T.float64)),
    lambda T: T.mm(T.ones(2, 2), T.ones(2, 2), out=T.zeros(2, 2, dtype=T.int64)),
    lambda T: T.cat([T.ones(2), T.ones(2)], out=T.zeros(4, dtype=T.int32)),
    lambda T: T.sum(T.ones(2, 2), 1, dtype=T.float64, out=T.zeros(2)),
    lambda T: T.amax(T.ones(2, 2), 1, out=T.zeros(2, dtype=T.float64)),
    lambda T: T.index_select(T.ones(2, 2), 0, T.tensor([0]), out=T.zeros(1, 2, dtype=T.int64)),
    lambda T: T.arange(5, dtype=T.int64, out=T.zeros(5)),
    lambda T: T.zeros(2, dtype=T.float64, out=T.zeros(2)),
    lambda T: T.max(T.ones(2, 2), 1, out=(T.zeros(2), T.zeros(2))),
    lambda T: T.sort(T.ones(3), out=(T.zeros(3, dtype=T.float64), T.zeros(3, dtype=T.int64))),
    lambda T: T.linalg.inv(T.eye(2), out=T.zeros(2, 2, dtype=T.float64)),
    lambda T: T.special.expit(T.ones(2), out=T.zeros(2, dtype=T.int64)),
    lambda T: T.abs(T.ones(2), out=T.zeros(2, dtype=T.float64)),
    lambda T: T.max(T.ones(2, 2), 1, out=(T.zeros(2),)),
    lambda T: T.add(T.ones(2), 1, out=(T.zeros(2),)),
    lambda T: T.isnan(T.ones(2), out=T.zeros(2, dtype=T.bool)),
    lambda T: T.median(T.ones(3), out=T.zeros(())),
    lambda T: T.add(T.ones(2, requires_grad=True), 1, out=T.zeros(2)),
    lambda T: T.add(T.ones(2), 1, out=T.zeros(2, requires_grad=True)),
    lambda T: T.sort(T.ones(3, requires_grad=True), out=(T.zeros(3), T.zeros(3, dtype=T.int64))),
    lambda T: T.sin(T.ones(2), out=T.zeros(1).expand(2)),
])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(fusegrad)
    assert str(ours.value) == str(theirs.value)


def test_a_tensor_for_a_tuple_out_is_a_type_error():
    for lib in LIBS:
        with pytest.raises(TypeError):
            lib.max(lib.ones(2, 2), 1, out=lib.zeros(2))


def test_tuple_outs():
    for lib in LIBS:
        x = lib.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, 1.5]])
        values, indices = lib.empty(0), lib.empty(0, dtype=lib.int64)
        result = lib.sort(x, 1, out=[values, indices])  # a list is taken as the tuple
        assert type(result).__name__ == "sort_out" and result.values is values
        assert result.indices is indices and indices.tolist() == [[1, 2, 0], [0, 2, 1]]
        mantissa, exponent = lib.empty(0), lib.empty(0, dtype=lib.int32)
        got = lib.frexp(lib.tensor([8.0, 0.75]), out=(mantissa, exponent))
        assert type(got).__name__ == "frexp_out" and exponent.tolist() == [4, 0]
        assert repr(got).startswith("torch.return_types.frexp_out(")


def test_grad_mode_off_writes_and_composites_record_the_copy():
    for lib in LIBS:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.no_grad():
            out = lib.zeros(2)
            assert lib.mul(x, 2, out=out) is out and not out.requires_grad
        assert out.tolist() == [2.0, 4.0]
        q = lib.zeros(())
        lib.quantile(x, 0.5, out=q)  # written in Python by PyTorch: copies through autograd
        assert q.requires_grad and type(q.grad_fn).__name__ == "CopyBackwards"
        q.backward()
        assert x.grad.tolist() == [0.5, 0.5]


def test_positional_out_and_none():
    a = fusegrad.ones(3)
    assert fusegrad.add(a, a, out=None).tolist() == [2.0, 2.0, 2.0]
    assert fusegrad.tensordot(a, a, 1, None).item() == 3.0
    out = fusegrad.empty(0)
    assert fusegrad.tensordot(a, a, 1, out) is out and out.item() == 3.0
    out = fusegrad.empty(0)
    assert fusegrad.norm(fusegrad.tensor([3.0, 4.0]), 2, None, False, out) is out
    assert out.item() == 5.0
    assert fusegrad.multiply is fusegrad.mul and fusegrad.divide is fusegrad.div
    assert str(inspect.signature(fusegrad.add)) == "(input, other, *, alpha=1, out=None)"
    assert fusegrad.zeros(1, 2, 3, 4, 5, 6, 7).shape == (1, 2, 3, 4, 5, 6, 7)


def test_factories_take_outs_dtype():
    for lib in LIBS:
        out = lib.empty(0)
        assert lib.arange(5, out=out) is out and str(out.dtype).endswith("float32")
        assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        ints = lib.empty(0, dtype=lib.int64)
        lib.full((2,), 1.5, out=ints)
        lib.linspace(0, 4, 3, out=out)
        assert ints.tolist() == [1, 1] and out.tolist() == [0.0, 2.0, 4.0]
        noise = lib.empty(0, dtype=lib.float64)
        assert lib.randn(2, 3, out=noise) is noise and noise.shape == (2, 3)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_functions_torch_gives_no_out_raise_its_type_error(name):
    for lib in LIBS:
        with pytest.raises(TypeError):
            getattr(lib, name)(*(make(lib) for make in REFUSED[name]), out=lib.empty(0))


# ----------------------------------------------------------------- compile, fx, jit.trace


def _writes_into_input(a, c):
    fusegrad.add(a, a, out=c)
    return c * 2


def _writes_into_new(a):
    c = fusegrad.empty(0)
    r = fusegrad.sum(a, 0, out=c)
    return r + 1, c


def _writes_a_tuple(a, c):
    values, indices = fusegrad.max(a, 1, out=(c, fusegrad.empty(0, dtype=fusegrad.int64)))
    return values * 1, indices


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("fn,make", [
    (_writes_into_input, lambda: (fusegrad.ones(3), fusegrad.zeros(3))),
    (_writes_into_new, lambda: (fusegrad.arange(6.0).view(2, 3),)),
    (_writes_a_tuple, lambda: (fusegrad.arange(6.0).view(2, 3), fusegrad.zeros(5))),
])
def test_compiled_out_calls_match_eager(backend, fn, make):
    """A compiled function's out= call (recorded, or a graph break run eagerly): the write
    into `out` is seen by the rest of the function and by the caller."""
    fusegrad._dynamo.reset()
    expected_args = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fn(*expected_args)
        args = make()
        got = fusegrad.compile(fn, backend=backend)(*args)
    assert str(got) == str(expected)
    assert [a.tolist() for a in args] == [a.tolist() for a in expected_args]


def test_compiled_out_call_is_recorded_or_a_reported_graph_break():
    """An out= write into a tensor of the result's shape and dtype is recorded (a copy into
    it, as torch.compile records it); one eager would resize is a break."""
    fusegrad._dynamo.reset()
    explained = fusegrad._dynamo.explain(_writes_into_input)(fusegrad.ones(3),
                                                             fusegrad.zeros(3))
    assert (explained.graph_count, explained.break_reasons) == (1, [])
    fusegrad._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = fusegrad._dynamo.explain(_writes_into_new)(fusegrad.arange(6.0).view(2, 3))
    assert [str(r.reason) for r in explained.break_reasons] == [
        "sum(..., out=...) into a tensor of another shape or dtype"]
    with pytest.raises(Exception, match=r"sum\(\.\.\., out=\.\.\.\) into a tensor of another"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fusegrad.compile(_writes_into_new, fullgraph=True)(fusegrad.arange(6.0).view(2, 3))


def test_fx_and_jit_trace_record_out_into_an_input():
    from fusegrad import fx

    gm = fx.symbolic_trace(_writes_into_input)
    c = fusegrad.zeros(3)
    assert gm(fusegrad.ones(3) * 2, c).tolist() == [8.0] * 3 and c.tolist() == [4.0] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = fusegrad.jit.trace(_writes_into_input, (fusegrad.ones(3), fusegrad.zeros(3)))
        buffer = io.BytesIO()
        traced.save(buffer)
        buffer.seek(0)
        loaded = fusegrad.jit.load(buffer)
    c = fusegrad.zeros(3)
    assert loaded(fusegrad.ones(3), c).tolist() == [4.0] * 3 and c.tolist() == [2.0] * 3


def test_fx_and_jit_trace_refuse_an_untraced_out():
    """An out made while tracing is a constant the trace reads before the graph writes it:
    a clear error, never a graph that computes with its old values."""
    from fusegrad import fx

    with pytest.raises(fx.proxy.TraceError, match="out tensor is not a traced value"):
        fx.symbolic_trace(_writes_into_new)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="could not trace"):
            fusegrad.jit.trace(_writes_into_new, (fusegrad.ones(2, 3),))


# ----------------------------------------------------------------- bernoulli, multinomial

# The functions that draw into `out` themselves, with a call that draws the same numbers.
WRITES_OUT = {
    "bernoulli": (lambda lib: (lib.full((3, 2), 0.5),), "float32"),
    "multinomial": (lambda lib: (lib.ones(2, 5), 3), "int64"),
}


@pytest.mark.parametrize("name", sorted(WRITES_OUT))
@pytest.mark.parametrize("empty", [False, True])
def test_functions_that_draw_into_out_match_torch(name, empty):
    make_args, dtype = WRITES_OUT[name]
    ours_fn, theirs_fn = getattr(fusegrad, name), getattr(torch, name)
    expected = ours_fn(*make_args(fusegrad), generator=fusegrad.Generator().manual_seed(3))
    reference = theirs_fn(*make_args(torch))
    shape = (0,) if empty else tuple(reference.shape)
    ours_out = fusegrad.empty(shape, dtype=getattr(fusegrad, dtype))
    theirs_out = torch.empty(shape, dtype=getattr(torch, dtype))
    ours = ours_fn(*make_args(fusegrad), generator=fusegrad.Generator().manual_seed(3),
                   out=ours_out)
    theirs = theirs_fn(*make_args(torch), out=theirs_out)
    assert ours is ours_out and theirs is theirs_out  # the result is `out` itself
    assert tuple(ours_out.shape) == tuple(theirs_out.shape)  # resized as PyTorch resizes
    assert ours_out.dtype == expected.dtype and str(theirs_out.dtype) == f"torch.{dtype}"
    np.testing.assert_array_equal(ours_out.numpy(), expected.numpy())


@pytest.mark.parametrize("call", [
    lambda T: T.multinomial(T.ones(4), 2, out=T.zeros(2)),
    lambda T: T.multinomial(T.ones(4), 2, out=T.zeros(2, dtype=T.int32)),
    lambda T: T.bernoulli(T.full((3,), 0.5), 0.5, out=T.zeros(3)),
    lambda T: T.bernoulli(T.full((3,), 0.5, requires_grad=True), out=T.zeros(3)),
    lambda T: T.bernoulli(T.full((3,), 0.5), out=T.zeros(3, requires_grad=True)),
])
def test_bad_draw_outs_match_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(fusegrad)
    assert str(ours.value) == str(theirs.value)


def test_bernoulli_out_under_no_grad_and_other_dtypes():
    for lib in (fusegrad, torch):
        with lib.no_grad():
            out = lib.zeros(3)
            assert lib.bernoulli(lib.full((3,), 1.0, requires_grad=True), out=out) is out
            assert out.tolist() == [1.0, 1.0, 1.0] and not out.requires_grad
        ints = lib.zeros(3, dtype=lib.int64)
        assert lib.bernoulli(lib.full((3,), 1.0), out=ints) is ints
        assert ints.tolist() == [1, 1, 1] and str(ints.dtype).endswith("int64")
