"""Eager fidelity against torch 2.13: forward AD tangents of tensors saved under
`saved_tensors_hooks` (gradients computed from them keep their tangents), prod's `dim` and
`keepdim` given as None, the float32 overflow of the modified Bessel functions i0 and i1,
the largest values of the floating dtypes (fill values, uniform_'s bounds), the order of
add_/sub_'s errors for a refused alpha, and a sweep of common functions and methods
(values, dtype, shape, strides, requires_grad, grad_fn and errors)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from oracle import outcome

import fusegrad
from fusegrad._scalar_conversion import float_max

LIBS = (torch, fusegrad)


def _outcome(lib, f):
    """What `f(lib)` gives, in comparable form: a tensor's values (as float64, NaN and inf
    kept), dtype, shape, strides, requires_grad and grad_fn name; a tuple's items; a number;
    or the error's type and message."""
    return outcome(lambda: f(lib), _described)


def _described(r):
    if isinstance(r, (tuple, list)):
        return tuple(_described(x) for x in r)
    if isinstance(r, (torch.Tensor, fusegrad.Tensor)):
        fn = r.grad_fn
        values = r.detach()
        if values.is_complex():
            values = torch.view_as_real(values) if isinstance(r, torch.Tensor) else \
                fusegrad.view_as_real(values)
        values = np.asarray(values.to(torch.float64 if isinstance(r, torch.Tensor)
                                      else fusegrad.float64).numpy())
        return ("tensor", str(r.dtype).replace("fusegrad", "torch"), tuple(r.shape),
                tuple(r.stride()), r.requires_grad,
                None if fn is None else type(fn).__name__, values)
    return ("value", r)


def _equal(a, b, rtol: float = 1e-6) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not isinstance(b, tuple) or not b or b[0] != "tensor" or a[:6] != b[:6]:
            return False
        return np.allclose(a[6], b[6], rtol=rtol, atol=0, equal_nan=True)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            a and a[0] not in ("error", "value"):
        return all(_equal(x, y, rtol) for x, y in zip(a, b))
    return a == b


def _same(f, rtol: float = 1e-6) -> None:
    got = [_outcome(lib, f) for lib in LIBS]
    assert _equal(got[0], got[1], rtol), got


# ---------------------------------------------------------------- forward AD and saved hooks


def _hooks(lib, kind: str):
    if kind == "none":
        return contextlib.nullcontext()
    pack = {"identity": lambda t: t, "clone": lambda t: t.clone(),
            "detach": lambda t: t.detach()}[kind]
    return lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def _retained(lib, v, x):
    y = v * 1.0
    y.retain_grad()
    (y * x).sum().backward()
    return y.grad


def _accumulated(lib, v, x):
    u = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
    u.grad = lib.ones(3)
    (u * x).sum().backward()
    return u.grad


def _through_output(lib, v, x):
    y = v * 1.0
    y.retain_grad()
    (y + x).sigmoid().sum().backward()  # (sigmoid saves its output)
    return y.grad


def _grad_of_saved_input(lib, v, x):
    return lib.autograd.grad((v * x.sin()).sum(), v, create_graph=False)[0]


def _saved_other(lib, v, x):
    return (v * x).grad_fn._saved_other


def _saved_result(lib, v, x):
    return (v + x).sigmoid().grad_fn._saved_result


FORWARD_CASES = {"retained": _retained, "accumulated": _accumulated,
                 "through_output": _through_output, "grad": _grad_of_saved_input,
                 "saved_other": _saved_other, "saved_result": _saved_result}


@pytest.mark.parametrize("kind", ["none", "identity", "clone", "detach"])
@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_saved_tensor_hooks_keep_tangents(kind, case):
    """A tensor saved under hooks keeps its tangent beside what the pack hook keeps, so the
    gradients computed from it (a retained one, one added into an existing `.grad`) carry
    their tangents as in torch."""
    def run(lib):
        fw = lib.autograd.forward_ad
        p = lib.tensor([1.0, 2.0, 3.0])
        t = lib.tensor([0.5, -1.0, 2.0])
        v = lib.tensor([0.4, 0.5, 0.6], requires_grad=True)
        with fw.dual_level():
            x = fw.make_dual(p, t)
            with _hooks(lib, kind):
                g = FORWARD_CASES[case](lib, v, x)
            primal, tangent = fw.unpack_dual(g)
            return primal.detach().clone(), None if tangent is None else tangent.detach()

    got = [run(lib) for lib in LIBS]
    assert np.allclose(got[0][0].numpy(), got[1][0].numpy(), rtol=1e-6)
    assert (got[0][1] is None) == (got[1][1] is None), got
    if got[0][1] is not None:
        assert np.allclose(got[0][1].numpy(), got[1][1].numpy(), rtol=1e-6), got


@pytest.mark.parametrize("reopen", [False, True])
def test_hooked_saved_tangent_is_forgotten_with_its_level(reopen):
    """The tangent kept beside a hooked saved tensor goes when its level closes: unpacked
    afterwards (or at a new level) the saved tensor has none, as in torch."""
    def run(lib):
        fw = lib.autograd.forward_ad
        v = lib.tensor([0.4, 0.5], requires_grad=True)
        with fw.dual_level():
            x = fw.make_dual(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0]))
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
                m = v * x
        with fw.dual_level() if reopen else contextlib.nullcontext():
            return fw.unpack_dual(m.grad_fn._saved_other).tangent

    got = [run(lib) for lib in LIBS]
    assert got[0] is None and got[1] is None, got


# ---------------------------------------------------------------- prod's dim and keepdim


def _x(lib):
    return lib.tensor([[1.0, 2.0], [3.0, 4.0]])


PROD_CALLS = {
    "dim=None": lambda lib: lib.prod(_x(lib), dim=None),
    "None": lambda lib: lib.prod(_x(lib), None),
    "method dim=None": lambda lib: _x(lib).prod(dim=None),
    "method None": lambda lib: _x(lib).prod(None),
    "dim=None keepdim": lambda lib: lib.prod(_x(lib), dim=None, keepdim=True),
    "dim=None dtype": lambda lib: lib.prod(_x(lib), dim=None, dtype=lib.float64),
    "dim=None out": lambda lib: lib.prod(_x(lib), dim=None, out=lib.empty(())),
    "method dim=None keepdim": lambda lib: _x(lib).prod(dim=None, keepdim=False),
    "method dim=None keepdim=None": lambda lib: _x(lib).prod(dim=None, keepdim=None),
    "method dim=None dtype": lambda lib: _x(lib).prod(dim=None, dtype=lib.float64),
    "0 keepdim=None": lambda lib: lib.prod(_x(lib), 0, keepdim=None),
    "dim=0 keepdim=None": lambda lib: lib.prod(_x(lib), dim=0, keepdim=None),
    "1 None": lambda lib: lib.prod(_x(lib), 1, None),
    "None True": lambda lib: lib.prod(_x(lib), None, True),
    "dtype=None": lambda lib: lib.prod(_x(lib), dtype=None),
    "dtype": lambda lib: lib.prod(_x(lib), dtype=lib.float64),
    "keepdim alone": lambda lib: lib.prod(_x(lib), keepdim=True),
    "method keepdim alone": lambda lib: _x(lib).prod(keepdim=False),
    "dim tuple": lambda lib: lib.prod(_x(lib), dim=(0,)),
    "dim=1 keepdim": lambda lib: lib.prod(_x(lib), dim=1, keepdim=True, dtype=None),
    "dim=-1": lambda lib: lib.prod(_x(lib), dim=-1),
    "method 0 True": lambda lib: _x(lib).prod(0, True),
    "count_nonzero keepdim": lambda lib: lib.count_nonzero(_x(lib), 0, keepdim=True),
    "count_nonzero dim=None": lambda lib: lib.count_nonzero(_x(lib), dim=None),
}


@pytest.mark.parametrize("name", sorted(PROD_CALLS))
def test_prod_dim_none(name):
    """None given for prod's `dim` (or `keepdim`) is a value of the wrong type to PyTorch's
    parser, by keyword as by position: its error, not the product of every element."""
    _same(PROD_CALLS[name])


# ---------------------------------------------------------------- i0 and i1 in float32

_EDGE = 88.72283172607422  # the largest float32 whose float32 exp is finite
_BESSEL_X = [0.0, 1.5, -3.0, 88.0, 88.7, _EDGE, float(np.nextafter(np.float32(_EDGE),
                                                                   np.float32(100))),
             88.8, 90.0, 91.9, 92.0, 100.0, -88.8, -91.0, -100.0, float("inf"),
             float("-inf"), float("nan")]
BESSEL = {
    "modified_bessel_i0": lambda lib, x: lib.special.modified_bessel_i0(x),
    "modified_bessel_i1": lambda lib, x: lib.special.modified_bessel_i1(x),
    "i0": lambda lib, x: lib.i0(x),
    "special.i0": lambda lib, x: lib.special.i0(x),
    "special.i1": lambda lib, x: lib.special.i1(x),
    "i0_": lambda lib, x: x.clone().i0_(),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_i0_i1_float32_overflow(name, dtype):
    """float32 (and the half types, computed in float32) overflow to inf where exp(|x|) does
    in float32, past |x| of 88.72 (i1: with the sign of x), as torch's float32 kernel."""
    def run(lib):
        x = lib.tensor(_BESSEL_X, dtype=getattr(lib, dtype))
        return BESSEL[name](lib, x)

    _same(run, rtol=1e-5 if dtype in ("float32", "float64") else 1e-2)


@pytest.mark.parametrize("name", ["i0", "special.i1"])
def test_bessel_float32_overflow_gradient(name):
    """The gradients (i1, and i0 - i1/x) overflow where torch's float32 kernels do."""
    def run(lib):
        x = lib.tensor([1.0, 50.0, 88.0, 88.8, 91.0, -89.0], requires_grad=True)
        BESSEL[name](lib, x).sum().backward()
        return x.grad

    _same(run, rtol=1e-5)


# ---------------------------------------------------------------- the largest float values


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_max_is_finfo(dtype):
    """The largest finite value of each floating dtype is torch.finfo's."""
    np_dtype = fusegrad.empty(0, dtype=getattr(fusegrad, dtype)).numpy().dtype
    assert float_max(np_dtype) == torch.finfo(getattr(torch, dtype)).max


FILL_VALUES = [65504.0, 65520.0, 3.3895313892515355e38, 3.39e38, 3.4028234663852886e38,
               3.41e38, float("inf"), float("nan")]
FILLS = {
    "masked_fill": lambda lib, t, v: t.masked_fill(lib.ones(t.shape, dtype=lib.bool), v),
    "clamp": lambda lib, t, v: t.clamp(max=v),
    "index_fill": lambda lib, t, v: t.index_fill(0, lib.tensor([0]), v),
    "uniform_": lambda lib, t, v: (t.uniform_(-v, 0.0).isfinite(), t.uniform_(0.0, v).isfinite()),
    "complex64 fill": lambda lib, t, v: lib.zeros(1, dtype=lib.complex64).fill_(complex(v, 1)),
    # (fill_ and full of one element convert a half type's value through float, unchecked:
    # inf; of any other number of elements they check it)
    "fill_": lambda lib, t, v: t.fill_(v),
    "fill_ one": lambda lib, t, v: t[:1].fill_(v),
    "fill_ 0-d": lambda lib, t, v: t[0].fill_(v),
    "fill_ empty": lambda lib, t, v: t[:0].fill_(v),
    "fill_ complex": lambda lib, t, v: t.fill_(complex(v, 2)),
    "fill_ one complex": lambda lib, t, v: t[:1].fill_(complex(v, 2)),
    "fill_ one int": lambda lib, t, v: t[:1].fill_(70000 if v == v else -1),
    "full": lambda lib, t, v: lib.full((2,), v, dtype=t.dtype),
    "full one": lambda lib, t, v: lib.full((1, 1), v, dtype=t.dtype),
    "full_like": lambda lib, t, v: lib.full_like(t, v),
    "new_full one": lambda lib, t, v: t.new_full((1,), v),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32"])
@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_value_bounds(name, dtype):
    """A fill value beyond the dtype's largest is torch's overflow error (but fill_'s and
    full's for a half type, inf as in torch); uniform_'s bounds are checked against the
    same largest values."""
    for value in FILL_VALUES:
        _same(lambda lib, v=value: FILLS[name](lib, lib.zeros(2, dtype=getattr(lib, dtype)), v))


# ---------------------------------------------------------------- add_ and sub_'s alpha


def _b(lib, *s):
    return lib.zeros(*s, dtype=lib.bool)


def _i(lib, *s):
    return lib.zeros(*s, dtype=lib.int64)


ALPHA_CALLS = {
    "sub bool bool 2.0": lambda lib: _b(lib, 2).sub_(_b(lib, 2), alpha=2.0),
    "sub bool bool True": lambda lib: _b(lib, 2).sub_(_b(lib, 2), alpha=True),
    "sub bool bool shape 2.0": lambda lib: _b(lib, 2).sub_(_b(lib, 3, 2), alpha=2.0),
    "sub int bool 2.0": lambda lib: _i(lib, 2).sub_(_b(lib, 2), alpha=2.0),
    "add int shape 2.0": lambda lib: _i(lib, 2).add_(_i(lib, 3, 2), alpha=2.0),
    "add int float 2.0": lambda lib: _i(lib, 2).add_(lib.zeros(2), alpha=2.0),
    "add int float True": lambda lib: _i(lib, 2).add_(lib.zeros(2), alpha=True),
    "add int int True": lambda lib: _i(lib, 2).add_(_i(lib, 2), alpha=True),
    "add int int 1j": lambda lib: _i(lib, 2).add_(_i(lib, 2), alpha=1j),
    "add float float 1j": lambda lib: lib.zeros(2).add_(lib.zeros(2), alpha=1j),
    "add float shape 1j": lambda lib: lib.zeros(2).add_(lib.zeros(3, 2), alpha=1j),
    "add float number 1j": lambda lib: lib.zeros(2).add_(2, alpha=1j),
    "add int 2.5 2.0": lambda lib: _i(lib, 2).add_(2.5, alpha=2.0),
    "add int 2 2.0": lambda lib: _i(lib, 2).add_(2, alpha=2.0),
    "add bool bool 2": lambda lib: _b(lib, 2).add_(_b(lib, 2), alpha=2),
    "add bool bool 2.0": lambda lib: _b(lib, 2).add_(_b(lib, 2), alpha=2.0),
    "add int 0-d float 2.0": lambda lib: _i(lib, 2).add_(lib.tensor(1.5), alpha=2.0),
    "sub int shape True": lambda lib: _i(lib, 1).sub_(_i(lib, 3), alpha=True),
    "add float complex 2": lambda lib: lib.zeros(2).add_(lib.zeros(2, dtype=lib.complex64),
                                                         alpha=2),
    "add float complex shape True": lambda lib: lib.zeros(2).add_(
        lib.zeros(3, 2, dtype=lib.complex64), alpha=True),
    "add bool int 2.0": lambda lib: _b(lib, 2).add_(1, alpha=2.0),
    "add int no broadcast 2.0": lambda lib: _i(lib, 2).add_(_i(lib, 3), alpha=2.0),
    "sub float no broadcast 1j": lambda lib: lib.zeros(2).sub_(lib.zeros(3), alpha=1j),
    "add float float 0.5": lambda lib: lib.ones(2).add_(lib.ones(2), alpha=0.5),
}


@pytest.mark.parametrize("name", sorted(ALPHA_CALLS))
def test_inplace_alpha_error_order(name):
    """add_/sub_ with an alpha the result dtype refuses: sub_'s bool error first, then the
    result's shape and dtype against `self`, then the alpha's own error, as torch."""
    _same(ALPHA_CALLS[name])


# ---------------------------------------------------------------- a sweep of common calls


def _m(lib, rg: bool = False):
    t = lib.tensor([[1.5, -2.0, 3.0], [4.0, 0.5, -6.0]])
    return t.requires_grad_() if rg else t


def _mi(lib):
    return lib.tensor([[1, -2, 3], [4, 0, -6]])


SWEEP = {
    # sum and mean: `dim` given as None is the overload with dim; keepdim alone fits none
    "sum dim=None": lambda lib: lib.sum(_m(lib, True), dim=None),
    "sum None": lambda lib: _m(lib, True).sum(None),
    "sum None True": lambda lib: lib.sum(_m(lib, True), None, True),
    "sum keepdim": lambda lib: lib.sum(_m(lib), keepdim=True),
    "sum keepdim=False": lambda lib: lib.sum(_m(lib), keepdim=False),
    "method sum keepdim": lambda lib: _m(lib).sum(keepdim=True),
    "sum keepdim dtype": lambda lib: lib.sum(_m(lib), keepdim=True, dtype=lib.float64),
    "sum dim=None dtype": lambda lib: lib.sum(_m(lib, True), dim=None, dtype=lib.float64),
    "sum []": lambda lib: _m(lib, True).sum([]),
    "sum 0": lambda lib: _m(lib, True).sum(0),
    "sum axis": lambda lib: lib.sum(_m(lib), axis=1),
    "sum keepdims": lambda lib: lib.sum(_m(lib), 1, keepdims=True),
    "mean dim=None": lambda lib: _m(lib, True).mean(dim=None),
    "mean keepdim": lambda lib: lib.mean(_m(lib), keepdim=True),
    "method mean keepdim": lambda lib: _m(lib).mean(keepdim=True),
    "mean int keepdim": lambda lib: _mi(lib).mean(keepdim=True),
    "mean int": lambda lib: _mi(lib).mean(),
    "mean -1 True": lambda lib: _m(lib, True).mean(-1, True),
    # max and min: their three overloads
    "max": lambda lib: _m(lib, True).max(),
    "max 0": lambda lib: lib.max(_m(lib, True), 0),
    "max dim=1 keepdim": lambda lib: _m(lib, True).max(dim=1, keepdim=True),
    "max other": lambda lib: lib.max(_m(lib, True), _m(lib) * 0),
    "max other=": lambda lib: lib.max(_m(lib, True), other=_m(lib) * 0),
    "max None": lambda lib: lib.max(_m(lib), None),
    "max dim=None": lambda lib: lib.max(_m(lib), dim=None),
    "method max dim=None": lambda lib: _m(lib).max(dim=None),
    "method max None": lambda lib: _m(lib).max(None),
    "max keepdim": lambda lib: lib.max(_m(lib), keepdim=True),
    "method max keepdim": lambda lib: _m(lib).max(keepdim=True),
    "max 1.5": lambda lib: lib.max(_m(lib), 1.5),
    "max True": lambda lib: lib.max(_m(lib), True),
    "max 0 1": lambda lib: lib.max(_m(lib), 0, 1),
    "max dim=0.5": lambda lib: lib.max(_m(lib), dim=0.5),
    "max 0 keepdim=None": lambda lib: lib.max(_m(lib), 0, keepdim=None),
    "max other dim": lambda lib: lib.max(_m(lib), _m(lib), dim=0),
    "max other True": lambda lib: lib.max(_m(lib), _m(lib), True),
    "method max other keepdim": lambda lib: _m(lib).max(_m(lib), keepdim=True),
    "method max tuple": lambda lib: _m(lib).max((0,)),
    "max dim=None keepdim": lambda lib: lib.max(_m(lib), dim=None, keepdim=True),
    "max dtype": lambda lib: lib.max(_m(lib), dtype=lib.float64),
    "max numpy dim": lambda lib: lib.max(_m(lib), np.int64(1)),
    "max 0-d dim": lambda lib: _m(lib).max(lib.tensor(1)),
    "max empty None": lambda lib: lib.zeros(0, 3).max(None),
    "min None": lambda lib: lib.min(_m(lib), None),
    "min keepdim": lambda lib: _m(lib).min(keepdim=True),
    "min dim=1": lambda lib: _m(lib, True).min(dim=1),
    "min dim=None keepdim=False": lambda lib: _m(lib).min(dim=None, keepdim=False),
    # median, nanmedian, mode, kthvalue
    "median": lambda lib: _m(lib, True).median(),
    "median 0": lambda lib: lib.median(_m(lib, True), 0),
    "median None": lambda lib: lib.median(_m(lib), None),
    "median dim=None": lambda lib: _m(lib).median(dim=None),
    "median keepdim": lambda lib: lib.median(_m(lib), keepdim=True),
    "method median keepdim": lambda lib: _m(lib).median(keepdim=False),
    "median 0 1": lambda lib: _m(lib).median(0, 1),
    "median 0 numpy bool": lambda lib: _m(lib).median(0, np.bool_(True)),
    "median 0 None": lambda lib: _m(lib).median(0, None),
    "median tuple": lambda lib: _m(lib).median((0,)),
    "median 0-d float": lambda lib: _m(lib).median(lib.tensor(1.0)),
    "median dim=0 keepdim=True": lambda lib: lib.median(_m(lib, True), dim=0, keepdim=True),
    "nanmedian None": lambda lib: lib.nanmedian(_m(lib), None),
    "nanmedian keepdim": lambda lib: lib.nanmedian(_m(lib), keepdim=True),
    "nanmedian 1 True": lambda lib: lib.nanmedian(_m(lib, True), 1, True),
    "mode": lambda lib: _m(lib, True).mode(),
    "mode None": lambda lib: lib.mode(_m(lib), None),
    "mode dim=None": lambda lib: _m(lib).mode(dim=None),
    "mode 1.0": lambda lib: _m(lib).mode(1.0),
    "mode 0 None": lambda lib: lib.mode(_m(lib), 0, None),
    "mode 0-d dim": lambda lib: _m(lib).mode(lib.tensor(0)),
    "kthvalue 1": lambda lib: _m(lib, True).kthvalue(1),
    "kthvalue None": lambda lib: _m(lib).kthvalue(1, None),
    "kthvalue 1.5": lambda lib: lib.kthvalue(_m(lib), 1.5),
    "kthvalue 1 0 1": lambda lib: _m(lib).kthvalue(1, 0, 1),
    "kthvalue k= dim=": lambda lib: _m(lib, True).kthvalue(k=2, dim=0),
    # the cumulative ops
    "cumsum 0": lambda lib: _m(lib, True).cumsum(0),
    "cumsum None": lambda lib: _m(lib).cumsum(None),
    "cumsum dim=None": lambda lib: lib.cumsum(_m(lib), dim=None),
    "cumsum tuple": lambda lib: lib.cumsum(_m(lib), (0,)),
    "cumsum keepdim": lambda lib: _m(lib).cumsum(0, keepdim=True),
    "cumsum dtype": lambda lib: _mi(lib).cumsum(1, dtype=lib.float32),
    "cumprod keepdim": lambda lib: lib.cumprod(_m(lib), keepdim=True),
    "cummax None": lambda lib: _m(lib).cummax(None),
    "cummax tuple": lambda lib: _m(lib).cummax((0,)),
    "cummax 0-d tuple": lambda lib: lib.tensor(1.0).cummax((0,)),
    "cummax empty out of range": lambda lib: lib.zeros(0, 3).cummax(3),
    "cummin empty -3": lambda lib: lib.zeros(0, 3, requires_grad=True).cummin(-3),
    "cumsum empty out of range": lambda lib: lib.zeros(0, 3).cumsum(3),
    "logcumsumexp None": lambda lib: _m(lib).logcumsumexp(None),
    "logcumsumexp tuple": lambda lib: _m(lib).logcumsumexp((0,)),
    "logsumexp None": lambda lib: lib.logsumexp(_m(lib), None),
    "logsumexp 0.5": lambda lib: _m(lib).logsumexp(0.5),
    "logsumexp [0] 1": lambda lib: _m(lib).logsumexp([0], 1),
    "logsumexp missing": lambda lib: lib.logsumexp(_m(lib)),
    "logsumexp dims keepdim": lambda lib: _m(lib, True).logsumexp(dim=(0, 1), keepdim=True),
    "logsumexp axis": lambda lib: lib.logsumexp(_m(lib), axis=1),
    # operands that must be tensors
    "isclose number": lambda lib: lib.isclose(_m(lib), 2),
    "method isclose": lambda lib: _m(lib).isclose(2.0),
    "allclose number": lambda lib: lib.allclose(_m(lib), 2.0),
    "equal number": lambda lib: _m(lib).equal(2.0),
    "mm number": lambda lib: lib.mm(_m(lib), 2),
    "dot number": lambda lib: lib.tensor([1.0, 2.0]).dot(2.0),
    "vdot number": lambda lib: lib.vdot(lib.tensor([1.0, 2.0]), 2.0),
    "bmm number": lambda lib: _m(lib).bmm(2.0),
    "mv number": lambda lib: lib.mv(_m(lib), 2),
    "outer number": lambda lib: lib.outer(lib.tensor([1.0, 2.0]), 2.0),
    "kron number": lambda lib: _m(lib).kron(2.0),
    "cross number": lambda lib: lib.cross(_m(lib), 2.0),
    "inner number": lambda lib: lib.inner(_m(lib), 2.0),
    "matmul number": lambda lib: lib.matmul(_m(lib), 2.0),
    "dist number": lambda lib: lib.dist(_m(lib), 2.0),
    "method dist number": lambda lib: _m(lib).dist(1),
    "cdist number": lambda lib: lib.cdist(_m(lib), 2.0),
    "lerp number end": lambda lib: lib.lerp(_m(lib), 1.0, 0.5),
    "method lerp number end": lambda lib: _m(lib).lerp(1.0, 0.5),
    "lerp keyword end": lambda lib: lib.lerp(_m(lib), end=1.0, weight=0.5),
    "lerp str weight": lambda lib: lib.lerp(_m(lib), _m(lib), "a"),
    "lerp_ number end": lambda lib: _m(lib).lerp_(2.0, 0.5),
    "lerp int weight": lambda lib: _m(lib, True).lerp(_m(lib), 1),
    "lerp tensor weight": lambda lib: lib.lerp(_m(lib, True), _m(lib), lib.tensor(0.25)),
    "index_select int index": lambda lib: lib.index_select(_m(lib), 0, 1),
    "index_select keyword index": lambda lib: lib.index_select(_m(lib), 0, index=1),
    "method index_select int index": lambda lib: _m(lib).index_select(0, 1),
    "index_select float dim": lambda lib: _m(lib).index_select(0.5, lib.tensor([0])),
    "index_select": lambda lib: _m(lib, True).index_select(-1, lib.tensor([2, 0])),
    "gather int index": lambda lib: lib.gather(_m(lib), 0, 0),
    "method gather list index": lambda lib: _m(lib).gather(0, [0]),
    "gather None dim": lambda lib: _m(lib).gather(None, lib.tensor([[0]])),
    "gather": lambda lib: _m(lib, True).gather(1, lib.tensor([[0, 2], [1, 1]])),
    # movedim's dims
    "movedim tuples": lambda lib: lib.movedim(_m(lib, True)[None], (0, -1), (-1, 0)),
    "movedim lists": lambda lib: lib.movedim(_m(lib)[None], [0, 1], [1, 0]),
    "movedim keywords": lambda lib: lib.movedim(_m(lib)[None], source=(0,), destination=(2,)),
    "moveaxis tuples": lambda lib: lib.moveaxis(_m(lib)[None], (0, 1), (1, 0)),
    "method movedim tuples": lambda lib: _m(lib)[None].movedim((0, 1), (1, 0)),
    "movedim missing": lambda lib: lib.movedim(_m(lib), 0),
    "movedim None": lambda lib: lib.movedim(_m(lib), None, 0),
    "movedim int and tuple": lambda lib: lib.movedim(_m(lib), 0, (1,)),
    "method movedim None": lambda lib: _m(lib).movedim(None, 1),
    "movedim lengths": lambda lib: lib.movedim(_m(lib), (0, 1), (1,)),
    "movedim 0-d tensor": lambda lib: lib.movedim(_m(lib), lib.tensor(0), 1),
    # shape, indexing and promotion (fixed before: kept as they are)
    "transpose -1 -2": lambda lib: _m(lib, True)[None].transpose(-1, -2),
    "unsqueeze -1": lambda lib: _m(lib, True).unsqueeze(-1),
    "flatten -2": lambda lib: _m(lib, True)[None].flatten(-2),
    "narrow": lambda lib: _m(lib, True).narrow(-1, 1, 2),
    "select out of range": lambda lib: _m(lib).select(0, 5),
    "int * float": lambda lib: _mi(lib) * 1.5,
    "int / int": lambda lib: _mi(lib) / 2,
    "uint8 - 1": lambda lib: lib.tensor([0], dtype=lib.uint8) - 1,
    "0-d int + uint8": lambda lib: lib.tensor(300) + lib.ones(2, dtype=lib.uint8),
    "bool mask": lambda lib: _m(lib, True)[_m(lib) > 0],
    "where scalars": lambda lib: lib.where(_m(lib) > 0, 1.5, 0),
}


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_matches_torch(name):
    """Values, dtype, shape, strides, requires_grad and grad_fn, or the error, as torch's."""
    _same(SWEEP[name], rtol=1e-5)
