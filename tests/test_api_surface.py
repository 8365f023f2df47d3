"""The wider PyTorch API surface against torch: utilities (finfo, thread and flag settings,
predicates, factories, Tensor attributes), special math, shape/indexing/scatter functions,
statistics, and the top-level forms of nn functions.

Each function check runs the same call on fusegrad and torch with the same data and compares
values, dtypes, grad_fn names and the gradients of every float input for a random cotangent.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(0)


def _conv(lib, x, grad):
    if isinstance(x, np.ndarray):
        t = lib.from_numpy(x.copy())
        if grad and x.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(x, (list, tuple)) and any(isinstance(v, np.ndarray) for v in x):
        return type(x)(_conv(lib, v, grad) for v in x)
    return x


def _flat(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res += _flat(o)
        return res
    return [out]


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += _leaves(a)
        elif hasattr(a, "requires_grad") and a.requires_grad:
            out.append(a)
    return out


def _np(t):
    return t.detach().numpy() if isinstance(t, fusegrad.Tensor) else t.detach().numpy()


def check(fn, *args, tol=1e-5, grad=True, names=True, **kwargs):
    """Run `fn(lib, *args, **kwargs)` on both libraries and compare everything."""
    fa = tuple(_conv(fusegrad, a, grad) for a in args)
    ta = tuple(_conv(torch, a, grad) for a in args)
    f_out, t_out = _flat(fn(fusegrad, *fa, **kwargs)), _flat(fn(torch, *ta, **kwargs))
    assert len(f_out) == len(t_out)
    for f, t in zip(f_out, t_out):
        if not isinstance(t, torch.Tensor):
            assert f == t
            continue
        assert f.dtype.name == str(t.dtype).split(".")[1], (f.dtype, t.dtype)
        assert tuple(f.shape) == tuple(t.shape), (f.shape, t.shape)
        np.testing.assert_allclose(_np(f).astype(np.float64), _np(t).astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)
        if names:
            fn_name = type(f.grad_fn).__name__ if f.grad_fn is not None else None
            tn_name = type(t.grad_fn).__name__ if t.grad_fn is not None else None
            assert fn_name == tn_name
    pairs = [(f, t) for f, t in zip(f_out, t_out)
             if isinstance(t, torch.Tensor) and t.grad_fn is not None and t.is_floating_point()]
    if not grad or not pairs:
        return
    rng = np.random.default_rng(1)
    fl = tl = 0
    for f, t in pairs:
        cot = rng.standard_normal(tuple(t.shape)).astype(_np(t).dtype)
        tl = tl + (t * torch.from_numpy(cot)).sum()
        fl = fl + (f * fusegrad.from_numpy(cot)).sum()
    tl.backward()
    fl.backward()
    for f, t in zip(_leaves(fa), _leaves(ta)):
        if t.grad is None:
            assert f.grad is None or not f.grad.numpy().any()
            continue
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=tol * 10,
                                   atol=tol * 10, equal_nan=True)


def rand(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def errors_match(fn, *args, **kwargs):
    """Both libraries raise the same exception type and message."""
    with pytest.raises(Exception) as t_err:
        fn(torch, *[_conv(torch, a, False) for a in args], **kwargs)
    with pytest.raises(type(t_err.value)) as f_err:
        fn(fusegrad, *[_conv(fusegrad, a, False) for a in args], **kwargs)
    assert str(f_err.value) == str(t_err.value)


# ---------------------------------------------------------------- utilities


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo(name):
    f, t = fusegrad.finfo(getattr(fusegrad, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(f, attr) == getattr(t, attr), attr
    assert repr(f) == repr(t)


def test_finfo_default_and_errors():
    assert fusegrad.finfo().dtype == torch.finfo().dtype
    errors_match(lambda m: m.finfo(m.int32))
    errors_match(lambda m: m.iinfo(m.float32))
    errors_match(lambda m: m.iinfo(m.bool))


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(name):
    f, t = fusegrad.iinfo(getattr(fusegrad, name)), torch.iinfo(getattr(torch, name))
    assert (f.bits, f.min, f.max, f.dtype) == (t.bits, t.min, t.max, t.dtype)
    assert repr(f) == repr(t)


def test_threads_and_flags():
    n = fusegrad.get_num_threads()
    assert n >= 1 and fusegrad.get_num_interop_threads() >= 1
    fusegrad.set_num_threads(1)
    assert fusegrad.get_num_threads() == 1
    fusegrad.set_num_threads(n)
    errors_match(lambda m: m.set_num_threads(0))
    fusegrad.set_num_interop_threads(2)
    assert fusegrad.get_num_interop_threads() == 2
    assert not fusegrad.are_deterministic_algorithms_enabled()
    fusegrad.use_deterministic_algorithms(True, warn_only=True)
    assert fusegrad.are_deterministic_algorithms_enabled()
    assert fusegrad.is_deterministic_algorithms_warn_only_enabled()
    fusegrad.use_deterministic_algorithms(False)
    assert fusegrad.get_float32_matmul_precision() == "highest"
    fusegrad.set_float32_matmul_precision("high")
    assert fusegrad.get_float32_matmul_precision() == "high"
    fusegrad.set_float32_matmul_precision("highest")
    with pytest.warns(UserWarning):
        fusegrad.set_float32_matmul_precision("fastest")
    assert str(fusegrad.get_default_device()) == "cpu"
    fusegrad.set_default_device("cpu")
    fusegrad.set_default_device(None)
    with pytest.raises(AssertionError):  # as fusegrad refuses any non-CPU device
        fusegrad.set_default_device("cuda")


def test_predicates():
    for name in ("float32", "int64", "uint8", "bool"):
        f = fusegrad.zeros(2, dtype=getattr(fusegrad, name))
        t = torch.zeros(2, dtype=getattr(torch, name))
        for fn in ("is_floating_point", "is_complex", "is_signed"):
            assert getattr(fusegrad, fn)(f) == getattr(torch, fn)(t), (fn, name)
            assert getattr(f, fn)() == getattr(t, fn)(), (fn, name)
    assert fusegrad.is_nonzero(fusegrad.tensor([1.5])) and not fusegrad.tensor(0).is_nonzero()
    errors_match(lambda m: m.is_nonzero(m.tensor([1, 2])))
    errors_match(lambda m: m.is_nonzero(m.tensor([])))
    errors_match(lambda m: m.is_signed(3))
    a, b = fusegrad.zeros(2, 3), fusegrad.ones(2, 3)
    assert fusegrad.is_same_size(a, b) and a.is_same_size(b)
    assert not fusegrad.is_same_size(a, fusegrad.zeros(3, 2))


@pytest.mark.parametrize("shapes", [((2, 1), (3,)), (3, (2, 1)), ((), (4, 1)), ((0, 1), (1, 5)),
                                    ((1,), ())])
def test_broadcast_shapes(shapes):
    assert tuple(fusegrad.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))


def test_broadcast_shapes_error():
    errors_match(lambda m: m.broadcast_shapes((2, 3), (4,)))


def test_factories():
    for v, kw in ((3, {}), (True, {}), (2.5, {"dtype": "float64"}), (7, {"dtype": "int64"})):
        fk = {k: getattr(fusegrad, d) for k, d in kw.items()}
        tk = {k: getattr(torch, d) for k, d in kw.items()}
        f, t = fusegrad.scalar_tensor(v, **fk), torch.scalar_tensor(v, **tk)
        assert f.dtype.name == str(t.dtype).split(".")[1] and f.item() == t.item()
    assert fusegrad.scalar_tensor(2.0, requires_grad=True).requires_grad
    f, t = fusegrad.empty_strided((2, 3), (1, 2)), torch.empty_strided((2, 3), (1, 2))
    assert f.stride() == t.stride() and tuple(f.shape) == tuple(t.shape)
    assert f.dtype.name == "float32"
    arr = np.arange(3.0)
    shared = fusegrad.asarray(arr)
    arr[0] = 9
    assert shared[0].item() == 9
    copied = fusegrad.asarray(arr, copy=True)
    arr[0] = 7
    assert copied[0].item() == 9
    for obj in ([1, 2], 2.5, [[True]], np.float32(3)):
        f, t = fusegrad.asarray(obj), torch.asarray(obj)
        assert f.dtype.name == str(t.dtype).split(".")[1]
        np.testing.assert_array_equal(f.numpy(), t.numpy())
    x = fusegrad.tensor([1.0, 2.0])
    assert fusegrad.asarray(x) is x
    assert fusegrad.asarray(x, dtype=fusegrad.float64).dtype is fusegrad.float64


def test_tensor_attributes():
    f, t = fusegrad.zeros(2, 3), torch.zeros(2, 3)
    for fx, tx in ((f, t), (f[1], t[1]), (f.t(), t.t())):
        assert fx.nbytes == tx.nbytes and fx.itemsize == tx.itemsize
        assert fx.untyped_storage().nbytes() == tx.untyped_storage().nbytes()
        assert (fx.data_ptr() - fx.untyped_storage().data_ptr()
                == tx.data_ptr() - tx.untyped_storage().data_ptr())
    assert f.is_cpu and not f.is_meta and f.get_device() == -1 and not f.is_inference()
    for args in ((2, 3), ([1, 2],), (), (fusegrad.Size([2]),)):
        targs = tuple(torch.Size(a) if isinstance(a, fusegrad.Size) else a for a in args)
        fn, tn = f.new(*args), t.new(*targs)
        assert tuple(fn.shape) == tuple(tn.shape) and fn.dtype.name == str(tn.dtype)[6:]


def test_ravel():
    check(lambda m, x: x.ravel(), rand(3, 4))
    check(lambda m, x: m.ravel(x.t()), rand(3, 4))
    check(lambda m, x: x.ravel(), rand())


def test_resize():
    f, t = fusegrad.arange(6.0), torch.arange(6.0)
    f.resize_(2, 2)
    t.resize_(2, 2)
    np.testing.assert_array_equal(f.numpy(), t.numpy())
    f.resize_(1, 3)
    t.resize_(1, 3)
    np.testing.assert_array_equal(f.numpy(), t.numpy())
    g = fusegrad.arange(4.0)
    g.resize_(6)
    assert tuple(g.shape) == (6,) and g[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    g.resize_as_(fusegrad.zeros(2, 2))
    assert tuple(g.shape) == (2, 2)
    errors_match(lambda m: m.zeros(2, requires_grad=True).resize_(3))


@pytest.mark.parametrize("fn", [
    lambda x: x.squeeze_(), lambda x: x.squeeze_(1), lambda x: x.squeeze_((1, 0)),
    lambda x: x.unsqueeze_(0), lambda x: x.unsqueeze_(-1), lambda x: x.squeeze_(1).t_(),
    lambda x: x.swapaxes_(0, 2), lambda x: x.swapdims_(2, 1),
])
def test_inplace_metadata(fn):
    def run(m, x):
        y = x.clone()
        out = fn(y)
        assert out is y
        return y
    check(run, rand(3, 1, 4))


def test_unfold():
    check(lambda m, x: x.unfold(1, 2, 1), rand(3, 5))
    check(lambda m, x: x.unfold(0, 3, 2), rand(7))
    check(lambda m, x: x.unfold(-1, 2, 2).sum(-1), rand(2, 3, 6))
    f, t = fusegrad.zeros(3, 5).unfold(1, 2, 1), torch.zeros(3, 5).unfold(1, 2, 1)
    assert f.stride() == t.stride()
    errors_match(lambda m: m.zeros(3).unfold(0, 4, 1))


# ---------------------------------------------------------------- special math


UNARY = ["lgamma", "digamma", "erfinv", "i0", "sinc", "rad2deg", "deg2rad", "logit"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_math(name):
    lo, hi = {"lgamma": (0.2, 4), "digamma": (0.2, 4), "erfinv": (-0.9, 0.9),
              "logit": (0.05, 0.95)}.get(name, (-2, 2))
    check(lambda m, x: getattr(m, name)(x), rand(3, 4, lo=lo, hi=hi), tol=1e-7)
    check(lambda m, x: getattr(x, name)(), rand(5, lo=lo, hi=hi), tol=1e-7)
    check(lambda m, x: getattr(m, name)(x), np.arange(1, 4))  # integers: default float

    def inplace(m, x):
        y = x.clone()
        getattr(y, name + "_")()
        return y
    check(inplace, rand(3, lo=lo, hi=hi), tol=1e-7)


def test_polygamma_logit_eps():
    for n in (0, 1, 2):
        check(lambda m, x, n=n: m.polygamma(n, x), rand(4, lo=0.3, hi=3), tol=1e-7)
        check(lambda m, x, n=n: x.polygamma(n), rand(4, lo=0.3, hi=3), tol=1e-7)
    check(lambda m, x: x.clone().polygamma_(1), rand(4, lo=0.3, hi=3), tol=1e-7)
    check(lambda m, x: m.logit(x, 0.2), rand(3, 4, lo=0, hi=1))
    check(lambda m, x: fusegrad._functions.math_extra.special_i1(x) if m is fusegrad
          else torch.special.i1(x), rand(5))


BINARY = ["hypot", "logaddexp", "logaddexp2", "copysign", "nextafter", "fmin", "fmax", "xlogy"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_math(name):
    lo = 0.2 if name == "xlogy" else -2
    check(lambda m, a, b: getattr(m, name)(a, b), rand(3, 4), rand(4, lo=lo))
    check(lambda m, a, b: getattr(a, name)(b), rand(2, 1), rand(3, lo=lo))


def test_binary_nan_and_numbers():
    a = np.array([1.0, np.nan, 3.0, np.nan])
    b = np.array([np.nan, 2.0, 1.0, np.nan])
    check(lambda m, x, y: m.fmin(x, y), a, b)
    check(lambda m, x, y: m.fmax(x, y), a, b)
    check(lambda m, x: m.xlogy(x, 2.5), rand(3))
    check(lambda m, x: m.xlogy(3.0, x), rand(3, lo=0.2))
    check(lambda m, x: m.copysign(x, -1.0), rand(3))
    check(lambda m, x, y: x.clone().xlogy_(y), rand(3), rand(3, lo=0.2))
    check(lambda m, x: x.clone().xlogy_(2.0), rand(3))
    check(lambda m, x, y: x.clone().copysign_(y), rand(3), rand(3))
    check(lambda m, x, y: x.clone().hypot_(y), rand(3), rand(3))


def test_heaviside_ldexp_frexp():
    check(lambda m, x, y: m.heaviside(x, y), np.array([-1.0, 0.0, 2.0]),
          np.array([0.5, 0.5, 0.5]), grad=False)
    errors_match(lambda m: m.heaviside(m.ones(2), m.ones(2, dtype=m.float64)))
    x = rand(3)
    f = fusegrad.heaviside(fusegrad.tensor(x, requires_grad=True),
                           fusegrad.ones(3, dtype=fusegrad.float64))
    t = torch.heaviside(torch.tensor(x, requires_grad=True), torch.ones(3, dtype=torch.float64))
    assert type(f.grad_fn).__name__ == type(t.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError) as t_err:
        t.sum().backward()
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not"):
        f.sum().backward()
    assert "heaviside" in str(t_err.value)
    check(lambda m, x, e: m.ldexp(x, e), rand(3, 4), RNG.integers(-3, 4, size=(3, 4)))
    check(lambda m, x: m.frexp(x), rand(3, 4, lo=-50, hi=50))
    check(lambda m, x: x.frexp(), rand(5))
    errors_match(lambda m: m.frexp(m.tensor([1, 2])))


def test_int_and_bool_math():
    a, b = RNG.integers(-20, 20, size=(3, 4)), RNG.integers(-20, 20, size=(4,))
    for name in ("gcd", "lcm"):
        check(lambda m, x, y, name=name: getattr(m, name)(x, y), a, b)
    errors_match(lambda m: m.gcd(m.tensor([1.0]), m.tensor([2.0])))
    x = np.array([-1.0, -0.0, 0.0, np.inf, -np.inf, np.nan])
    for name in ("signbit", "isneginf", "isposinf", "isreal"):
        check(lambda m, v, name=name: getattr(m, name)(v), x)


def test_float_power():
    check(lambda m, x, y: m.float_power(x, y), rand(3, lo=0.5, dtype=np.float32),
          rand(3, dtype=np.float32))
    check(lambda m, x: m.float_power(x, 2), rand(3, dtype=np.float32))
    check(lambda m, x: x.float_power(0.5), rand(3, lo=0.5))
    check(lambda m, x: m.float_power(2.0, x), rand(3))
    check(lambda m, x: m.float_power(x, 3), np.arange(4))


def test_clamp_min_max():
    check(lambda m, x: m.clamp_min(x, 0.5), rand(3, 4))
    check(lambda m, x: m.clamp_max(x, 0.5), rand(3, 4))
    check(lambda m, x, lo: m.clamp_min(x, lo), rand(3, 4), rand(4))
    check(lambda m, x, hi: x.clamp_max(hi), rand(3, 4), rand(4))
    check(lambda m, x: x.clone().clamp_min_(0.0), rand(3))
    check(lambda m, x, hi: x.clone().clamp_max_(hi), rand(3), rand(3))


@pytest.mark.parametrize("name", ["relu_", "sigmoid_", "exp_", "tanh_", "sqrt_", "neg_",
                                  "floor_", "erf_", "log1p_", "square_"])
def test_torch_inplace_functions(name):
    def run(m, x):
        y = x.clone()
        out = getattr(m, name)(y)
        assert out is y
        return y
    check(run, rand(3, 4, lo=0.1))


# ---------------------------------------------------------------- shape and indexing


def test_atleast_and_stacks():
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in ((), (3,), (2, 3), (2, 1, 3)):
            check(lambda m, x, fn=fn: getattr(m, fn)(x), rand(*shape))
        check(lambda m, x, y, fn=fn: getattr(m, fn)(x, y), rand(), rand(2, 2))
        check(lambda m, x, y, fn=fn: getattr(m, fn)([x, y]), rand(3), rand(2))
    check(lambda m, x, y: m.column_stack([x, y]), rand(3), rand(3, 2))
    check(lambda m, x, y: m.column_stack((x, y)), rand(3), rand(3))
    check(lambda m, x, y: m.row_stack([x, y]), rand(3), rand(2, 3))
    check(lambda m, x, y: m.dstack([x, y]), rand(2, 3), rand(2, 3, 2))
    check(lambda m, x, y: m.dstack([x, y]), rand(3), rand(3))


def test_splits():
    for fn, shape in (("hsplit", (3, 4)), ("hsplit", (6,)), ("vsplit", (4, 3)),
                      ("dsplit", (2, 2, 4))):
        check(lambda m, x, fn=fn: getattr(m, fn)(x, 2), rand(*shape))
        check(lambda m, x, fn=fn: getattr(x, fn)([1, 3]), rand(*shape))
    errors_match(lambda m: m.hsplit(m.zeros(3, 4), 3))
    errors_match(lambda m: m.vsplit(m.zeros(3), 1))
    check(lambda m, x: m.split_with_sizes(x, [1, 3], 1), rand(3, 4))
    check(lambda m, x: x.split_with_sizes([2, 1]), rand(3, 4))


def test_diff():
    check(lambda m, x: m.diff(x), rand(3, 5))
    check(lambda m, x: m.diff(x, n=2, dim=0), rand(4, 3))
    check(lambda m, x, p, a: m.diff(x, 1, -1, p, a), rand(3, 4), rand(3, 1), rand(3, 2))
    check(lambda m, x: x.diff(n=3), rand(6))
    check(lambda m, x: m.diff(x), np.array([True, False, False, True]))
    check(lambda m, x: m.diff(x), RNG.integers(0, 9, size=5))


def test_rot90_block_diag_diagflat():
    for k, dims in ((1, (0, 1)), (2, (1, 0)), (-1, (0, 2)), (0, (0, 1)), (5, (1, 2))):
        check(lambda m, x, dims=dims, k=k: m.rot90(x, k, dims), rand(2, 3, 4))
    check(lambda m, x: x.rot90(), rand(3, 4))
    errors_match(lambda m: m.rot90(m.zeros(3)))
    errors_match(lambda m: m.rot90(m.zeros(3, 3), 1, [0, 0]))
    check(lambda m, a, b, c: m.block_diag(a, b, c), rand(2, 3), rand(4), rand())
    check(lambda m, a, b: m.block_diag(a, b), rand(1, 2, dtype=np.float32), rand(2, 2))
    for shape, off in (((3,), 0), ((2, 2), 1), ((3,), -2)):
        check(lambda m, x, off=off: m.diagflat(x, off), rand(*shape))
    check(lambda m, x: x.diagflat(), rand(2, 3))


def test_cartesian_combinations():
    check(lambda m, a, b: m.cartesian_prod(a, b), rand(3), rand(2))
    check(lambda m, a, b, c: m.cartesian_prod(a, b, c), rand(2), rand(2), rand(3))
    check(lambda m, a: m.cartesian_prod(a), rand(3))
    for r, rep in ((2, False), (3, False), (2, True), (1, False)):
        check(lambda m, a, r=r, rep=rep: m.combinations(a, r, rep), rand(4))


def test_repeat_interleave():
    check(lambda m, x: m.repeat_interleave(x, 2), rand(3, 2))
    check(lambda m, x: x.repeat_interleave(3, dim=1), rand(2, 3))
    check(lambda m, x, r: x.repeat_interleave(r, dim=0), rand(3, 2), np.array([1, 0, 2]))
    check(lambda m, x: m.repeat_interleave(x, m.tensor(2), dim=0), rand(2, 2))
    check(lambda m, r: m.repeat_interleave(r), np.array([2, 0, 3]))


def test_take_put():
    idx = np.array([[0, 5], [-1, 3]])
    check(lambda m, x, i: m.take(x, i), rand(3, 4), idx)
    check(lambda m, x, i: x.take(i), rand(6), np.array([1, 1, 2]))
    for acc in (False, True):
        check(lambda m, x, i, s, acc=acc: m.put(x, i, s, acc), rand(3, 4), np.array([0, 5, -1]),
              rand(3))
        check(lambda m, x, i, s, acc=acc: x.clone().put_(i, s, accumulate=acc), rand(3, 4),
              np.array([1, 1, 2]), rand(3))
    check(lambda m, x, i, s: x.put(i, s, True), rand(6), np.array([[0, 0], [1, 5]]),
          rand(2, 2))
    errors_match(lambda m: m.take(m.zeros(3), m.tensor([3])))


def test_index_fill_copy():
    i = np.array([0, 2])
    check(lambda m, x, idx: m.index_fill(x, 1, idx, -1.5), rand(3, 4), i)
    check(lambda m, x, idx, v: x.index_fill(0, idx, v), rand(3, 4), i, rand())
    check(lambda m, x, idx: x.clone().index_fill_(1, idx, 2.0), rand(3, 4), i)
    check(lambda m, x, idx, v: x.clone().index_fill_(0, idx, v), rand(3, 4), i, rand())
    check(lambda m, x, idx, s: m.index_copy(x, 1, idx, s), rand(3, 4), i, rand(3, 2))
    check(lambda m, x, idx, s: x.clone().index_copy_(0, idx, s), rand(3, 4), i, rand(2, 4))
    check(lambda m, x, idx: x.index_fill(0, idx, 1), RNG.integers(0, 5, size=(3, 2)), i)


def test_masked_scatter():
    mask = RNG.random((3, 4)) > 0.5
    check(lambda m, x, k, s: m.masked_scatter(x, k, s), rand(3, 4), mask, rand(15))
    check(lambda m, x, k, s: x.masked_scatter(k, s), rand(3, 4), RNG.random(4) > 0.5,
          rand(3, 4))
    check(lambda m, x, k, s: x.clone().masked_scatter_(k, s), rand(3, 4), mask, rand(12))
    errors_match(lambda m: m.zeros(2).masked_scatter(m.ones(2), m.ones(2)))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    lo = 0.5 if reduce == "prod" else -2
    idx = RNG.integers(0, 4, size=(3, 5))
    check(lambda m, x, i, s: m.scatter_reduce(x, 1, i, s, reduce, include_self=include_self),
          rand(3, 4, lo=lo), idx, rand(3, 5, lo=lo))
    check(lambda m, x, i, s: x.clone().scatter_reduce_(0, i, s, reduce,
                                                       include_self=include_self),
          rand(4, 3, lo=lo), RNG.integers(0, 4, size=(5, 3)), rand(5, 3, lo=lo))
    # Integer inputs follow PyTorch (integer mean divides with floor).
    check(lambda m, x, i, s: m.scatter_reduce(x, 1, i, s, reduce, include_self=include_self),
          RNG.integers(-5, 6, size=(3, 4)), idx, RNG.integers(-5, 6, size=(3, 5)))


def test_scatter_reduce_prod_zeros():
    x, src = rand(3, 4, lo=0.5), rand(3, 6, lo=0.5)
    x[0, 1] = x[2, 0] = 0
    src[1, 0] = src[1, 3] = src[2, 5] = 0
    idx = np.array([[1, 1, 0, 2, 3, 1], [0, 2, 2, 0, 1, 3], [0, 0, 1, 2, 3, 3]])
    for inc in (True, False):
        check(lambda m, a, i, s, inc=inc: m.scatter_reduce(a, 1, i, s, "prod",
                                                           include_self=inc), x, idx, src)


def test_scatter_variants():
    check(lambda m, x, s: m.diagonal_scatter(x, s), rand(3, 4), rand(3))
    check(lambda m, x, s: x.diagonal_scatter(s, 1), rand(3, 4), rand(3))
    check(lambda m, x, s: m.diagonal_scatter(x, s, -1, 1, 2), rand(2, 3, 3), rand(2, 2))
    check(lambda m, x, s: m.select_scatter(x, s, 0, 1), rand(3, 4), rand(4))
    check(lambda m, x, s: x.select_scatter(s, -1, -1), rand(3, 4), rand(3))
    check(lambda m, x, s: m.slice_scatter(x, s, 1, 0, 2), rand(3, 4), rand(3, 2))
    check(lambda m, x, s: x.slice_scatter(s, 0, 0, None, 2), rand(6, 2), rand(3, 2))
    check(lambda m, x, s: m.slice_scatter(x, s), rand(2, 2), rand(2, 2))
    errors_match(lambda m: m.diagonal_scatter(m.zeros(3, 4), m.zeros(2)))


def test_narrow_with_a_tensor_start_reads_it_as_an_int():
    """A 0-dim integer tensor start is a number: the view's node has one edge, as PyTorch's
    (the start and end are no inputs of the graph); any other tensor is refused."""
    check(lambda m, x: m.narrow(x, 0, m.tensor(1), 2), rand(5, 3))
    check(lambda m, x: x.narrow(1, m.tensor(-2), 2), rand(5, 3))
    for lib in (torch, fusegrad):
        x = lib.ones(5, 3, requires_grad=True)
        assert len(x.narrow(0, lib.tensor(1), 2).grad_fn.next_functions) == 1
    for start in ("m.tensor([1])", "m.tensor(1.0)", "m.tensor(True)"):
        errors_match(lambda m, start=start: m.ones(5, 3).narrow(0, eval(start), 2))


def test_narrow_copy_unique_consecutive_unravel_isin():
    check(lambda m, x: m.narrow_copy(x, 1, 1, 2), rand(3, 4))
    # PyTorch's backward of a negative start fails (it narrows at the raw start): values only.
    check(lambda m, x: x.narrow_copy(0, -2, 2), rand(3, 4), grad=False)
    x = np.array([1, 1, 2, 2, 3, 1, 1])
    for inv in (False, True):
        for cnt in (False, True):
            check(lambda m, v, cnt=cnt, inv=inv: m.unique_consecutive(v, return_inverse=inv,
                                                    return_counts=cnt), x)
    check(lambda m, v: v.unique_consecutive(), np.array([[1.0, 1.0], [2.0, 1.0]]), grad=False)
    check(lambda m, i: m.unravel_index(i, (2, 3, 4)), np.array([0, 5, 23, -1]))
    check(lambda m, i: m.unravel_index(i, (4,)), np.array(3))
    check(lambda m, a, b: m.isin(a, b), np.array([1, 2, 3, 4]), np.array([2, 4, 9]))
    check(lambda m, a, b: m.isin(a, b, invert=True), rand(5), rand(2))
    check(lambda m, a: m.isin(a, 2), np.array([1, 2, 3]))
    check(lambda m, b: m.isin(2, b), np.array([1, 2, 3]))


# ---------------------------------------------------------------- statistics


def _nans(*shape, rng=None):
    rng = RNG if rng is None else rng
    a = rng.uniform(-2.0, 2.0, size=shape)
    a.flat[rng.choice(a.size, size=max(1, a.size // 4), replace=False)] = np.nan
    return a


def test_nan_reductions():
    # A generator of its own: the inputs do not depend on which tests ran before in this
    # process (xdist hands tests out in varying orders).
    rng = np.random.default_rng(25)
    x = _nans(3, 5, rng=rng)
    check(lambda m, v: m.nansum(v), x)
    check(lambda m, v: m.nansum(v, 1), x)
    check(lambda m, v: v.nansum((0, 1), keepdim=True), x)
    check(lambda m, v: m.nansum(v, dtype=m.float64), x.astype(np.float32))
    check(lambda m, v: m.nansum(v), rng.integers(0, 5, size=4))
    check(lambda m, v: m.nanmean(v), x)
    check(lambda m, v: m.nanmean(v, 0, True), x)
    check(lambda m, v: v.nanmean(dim=1), x)
    errors_match(lambda m: m.nanmean(m.tensor([1, 2])))
    check(lambda m, v: m.nanmedian(v), x)
    check(lambda m, v: m.nanmedian(v, 1), x)
    check(lambda m, v: v.nanmedian(0, keepdim=True), x)
    check(lambda m, v: m.nanmedian(v), np.full(3, np.nan))
    # An all-NaN slice (row 1, column 2): nanmean's value and gradient there are NaN.
    y = rng.uniform(-2.0, 2.0, size=(3, 4))
    y[1] = np.nan
    y[:, 2] = np.nan
    for dim in (0, 1):
        check(lambda m, v, dim=dim: m.nansum(v, dim), y)
        check(lambda m, v, dim=dim: m.nanmean(v, dim), y)
        # (values only: which NaN of an all-NaN slice nanmedian's index names differs)
        check(lambda m, v, dim=dim: m.nanmedian(v, dim).values, y, grad=False)


@pytest.mark.parametrize("mode", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(mode):
    x = rand(4, 5)
    check(lambda m, v: m.quantile(v, 0.3, interpolation=mode), x)
    check(lambda m, v, q: m.quantile(v, q, dim=1, interpolation=mode), x,
          np.array([0.0, 0.25, 0.5, 1.0]))
    check(lambda m, v: v.quantile(0.75, 0, True, interpolation=mode), x)
    check(lambda m, v, q: m.quantile(v, q, None, True, interpolation=mode), x,
          np.array([0.1, 0.9]))
    y = _nans(3, 6)
    check(lambda m, v: m.nanquantile(v, 0.4, dim=1, interpolation=mode), y)
    check(lambda m, v: m.quantile(v, 0.4, dim=1, interpolation=mode), y)
    check(lambda m, v: m.nanquantile(v, 0.5, interpolation=mode), y)


def test_quantile_errors():
    errors_match(lambda m: m.quantile(m.zeros(3), 1.5))
    errors_match(lambda m: m.quantile(m.zeros(3, dtype=m.int64), 0.5))
    errors_match(lambda m: m.quantile(m.zeros(3), m.tensor([0.5], dtype=m.float64)))


def test_cov_corrcoef():
    check(lambda m, v: m.cov(v), rand(3, 6))
    check(lambda m, v: v.cov(correction=0), rand(2, 5))
    check(lambda m, v: m.cov(v), rand(5))
    check(lambda m, v, f: m.cov(v, fweights=f), rand(3, 4), np.array([1, 2, 1, 3]))
    check(lambda m, v, a: m.cov(v, aweights=a), rand(3, 4), rand(4, lo=0.1, hi=1))
    check(lambda m, v, f, a: m.cov(v, fweights=f, aweights=a), rand(2, 4),
          np.array([2, 1, 1, 1]), rand(4, lo=0.1, hi=1))
    check(lambda m, v: m.corrcoef(v), rand(3, 6))
    check(lambda m, v: v.corrcoef(), rand(6))


def test_histc_histogram():
    x = rand(30)
    check(lambda m, v: m.histc(v, 5, -1, 1), x)
    check(lambda m, v: v.histc(bins=7), x)
    check(lambda m, v: m.histc(v, 4), np.array([1.0, 1.0, 1.0]))
    # histogram records a node whose backward is not implemented (NotImplemented).
    check(lambda m, v: m.histogram(v, 5), x, grad=False)
    check(lambda m, v: m.histogram(v, 4, range=(-1.0, 1.0), density=True), x, grad=False)
    check(lambda m, v, w: m.histogram(v, 3, weight=w), x, rand(30, lo=0, hi=1), grad=False)
    # Explicit edges (histogram.bin_Tensor): values only.
    check(lambda m, v, b: m.histogram(v, b), x, np.array([-2.0, -0.5, 0.0, 2.0]), grad=False,
          names=False)


def test_aminmax_logcumsumexp():
    x = rand(3, 4)
    check(lambda m, v: m.aminmax(v), x)
    check(lambda m, v: m.aminmax(v, dim=1), x)
    check(lambda m, v: v.aminmax(dim=0, keepdim=True), x)
    check(lambda m, v: m.aminmax(v)[1], np.array([1.0, 3.0, 3.0, 0.0]))
    check(lambda m, v: m.aminmax(v), RNG.integers(0, 9, size=5))
    check(lambda m, v: m.logcumsumexp(v, 1), x)
    check(lambda m, v: v.logcumsumexp(0), x)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf])
def test_distances(p):
    # PyTorch's cdist backward fails for p = 0 (an undefined tensor): values only.
    check(lambda m, a, b: m.cdist(a, b, p), rand(3, 4), rand(5, 4), grad=p > 0)
    check(lambda m, a, b: m.cdist(a, b, p), rand(2, 3, 2), rand(2, 4, 2), grad=p > 0)
    if p > 0:
        check(lambda m, a: m.pdist(a, p), rand(4, 3))
    check(lambda m, a, b: m.dist(a, b, p), rand(3, 4), rand(4), grad=p > 0)
    check(lambda m, a, b: a.dist(b, p), rand(5), rand(5), grad=p > 0)


def test_cdist_matmul_path():
    # More than 25 rows (or asked for): PyTorch's matmul formulation, EuclideanDistBackward0.
    check(lambda m, a, b: m.cdist(a, b), rand(30, 4), rand(20, 4))
    check(lambda m, a, b: m.cdist(a, b), rand(2, 30, 3), rand(2, 26, 3))
    check(lambda m, a, b: m.cdist(a, b), rand(2, 3, 30, 3), rand(3, 5, 3))
    check(lambda m, a, b: m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), rand(3, 4),
          rand(2, 4))
    check(lambda m, a, b: m.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
          rand(30, 4), rand(2, 4))
    check(lambda m, a, b: m.cdist(a, b), rand(30, 4, dtype=np.float32),
          rand(20, 4, dtype=np.float32), tol=1e-4)


def test_distance_errors():
    errors_match(lambda m: m.cdist(m.zeros(3), m.zeros(3, 1)))
    errors_match(lambda m: m.cdist(m.zeros(3, 2), m.zeros(3, 1)))


def test_renorm():
    check(lambda m, v: m.renorm(v, 2, 0, 1.0), rand(3, 4))
    check(lambda m, v: v.renorm(1, 1, 2.0), rand(3, 4))
    check(lambda m, v: m.renorm(v, 3, -1, 1.5), rand(2, 3, 4))
    check(lambda m, v: v.clone().renorm_(2, 0, 1.0), rand(3, 4))


def test_trapezoid():
    y = rand(3, 5)
    check(lambda m, v: m.trapezoid(v), y)
    check(lambda m, v: m.trapezoid(v, dx=0.5, dim=0), y)
    check(lambda m, v, x: m.trapezoid(v, x), y, np.sort(rand(5)))
    check(lambda m, v, x: m.trapezoid(v, x, dim=0), y, np.sort(rand(3, 5), axis=0))
    check(lambda m, v: m.trapz(v, dx=2.0), y)
    check(lambda m, v: m.cumulative_trapezoid(v), y)
    check(lambda m, v: m.cumulative_trapezoid(v, dx=0.25, dim=0), y)
    check(lambda m, v, x: m.cumulative_trapezoid(v, x), y, np.sort(rand(5)))


# ---------------------------------------------------------------- nn functions at the top


def test_nn_aliases():
    x = rand(2, 3, 8)
    w = rand(4, 3, 3)
    check(lambda m, a, b, c: m.conv1d(a, b, c, 1, 1), x, w, rand(4))
    check(lambda m, a, b: m.conv2d(a, b, None, 2), rand(1, 2, 6, 6), rand(3, 2, 3, 3))
    check(lambda m, a, b: m.conv_transpose1d(a, b, None, 2), x, rand(3, 2, 3))
    check(lambda m, a, b: m.conv_transpose2d(a, b), rand(1, 2, 4, 4), rand(2, 3, 3, 3))
    check(lambda m, a: m.dropout(a, 0.5, False), x)
    check(lambda m, a, g, b: m.layer_norm(a, [8], g, b), x, rand(8), rand(8))
    check(lambda m, a, g, b: m.batch_norm(a, g, b, None, None, True, 0.1, 1e-5, False), x,
          rand(3), rand(3))
    check(lambda m, a, g, b: m.group_norm(a, 3, g, b), rand(2, 6, 4), rand(6), rand(6))
    check(lambda m, a: m.instance_norm(a, None, None, None, None, True, 0.1, 1e-5, False), x)
    check(lambda m, a, g: m.rms_norm(a, [8], g), x, rand(8))
    check(lambda m, wt, i: m.embedding(wt, i), rand(5, 3), np.array([[0, 4], [2, 2]]))
    for mode in (0, 1, 2):
        check(lambda m, wt, i, o, mode=mode: m.embedding_bag(wt, i, o, False, mode), rand(5, 3),
              np.array([0, 2, 4, 1, 1]), np.array([0, 2]))
    check(lambda m, a: m.max_pool1d(a, 2), x)
    check(lambda m, a: m.max_pool2d(a, 2, 1), rand(1, 2, 5, 5))
    check(lambda m, a: m.avg_pool1d(a, 3, 2), x)
    check(lambda m, a: m.adaptive_avg_pool1d(a, 3), x)
    check(lambda m, a: m.pixel_shuffle(a, 2), rand(1, 8, 2, 2))
    check(lambda m, a: m.channel_shuffle(a, 2), rand(1, 4, 2, 2))
    check(lambda m, a, b: m.prelu(a, b), x, rand(1))
    check(lambda m, a: m.celu(a, 0.5), x)
    check(lambda m, a: m.threshold(a, 0.1, -1.0), x)
    check(lambda m, a: m.hardshrink(a, 0.7), x)
    check(lambda m, a, b: m.cosine_similarity(a, b), x, rand(2, 3, 8))
    check(lambda m, a, b: m.pairwise_distance(a, b), rand(4, 5), rand(4, 5))
    check(lambda m, a, b: m.kl_div(a, b), rand(3, 4), rand(3, 4, lo=0.1, hi=1))
    check(lambda m, a, b: m.kl_div(a, b, 2, log_target=True), rand(3, 4), rand(3, 4))
    check(lambda m, a, b, wt, bias: m.bilinear(a, b, wt, bias), rand(2, 3), rand(2, 4),
          rand(5, 3, 4), rand(5))
    for name in ("selu_", "celu_"):
        check(lambda m, a, name=name: getattr(m, name)(a.clone()), x)
    check(lambda m, a: m.threshold_(a.clone(), 0.0, 2.0), x)


def test_nn_aliases_more():
    x = rand(2, 3, 8)
    check(lambda m, a: m.pixel_unshuffle(a, 2), rand(1, 2, 4, 4))
    check(lambda m, a: m.adaptive_max_pool1d(a, 3), x)
    check(lambda m, a: m.rrelu(a), x)
    check(lambda m, a: m.dropout_(a.clone(), 0.3, False), x)
    check(lambda m, a: m.feature_dropout(a, 0.3, False), x)
    y = np.sign(rand(4, 5)) + (rand(4, 5) == 0)
    for red in (0, 1, 2):
        check(lambda m, a, t, red=red: m.hinge_embedding_loss(a, t, 1.0, red), rand(4, 5), y)
        check(lambda m, a, b, t, red=red: m.margin_ranking_loss(a, b, t, 0.1, red), rand(5),
              rand(5), y[0])
        check(lambda m, a, b, t, red=red: m.cosine_embedding_loss(a, b, t, 0.0, red),
              rand(4, 5), rand(4, 5), y[:, 0])
        check(lambda m, a, p, n, red=red: m.triplet_margin_loss(a, p, n, 1.0, 2, 1e-6, False,
                                                                red),
              rand(4, 5), rand(4, 5), rand(4, 5))
        check(lambda m, a, t, red=red: m.poisson_nll_loss(a, t, True, False, 1e-8, red),
              rand(4, 5), rand(4, 5, lo=0, hi=3))


def test_quantile_edges():
    x = rand(3, 5)
    check(lambda m, v, q: m.quantile(v, q), x, np.array(0.3))
    check(lambda m, v, q: m.quantile(v, q, dim=0, keepdim=True), x, np.array([0.2, 0.7]))
    y = _nans(2, 4)
    y[0] = np.nan
    check(lambda m, v, q: m.nanquantile(v, q, dim=1), y, np.array([0.25, 0.5]))
    check(lambda m, v: m.nanquantile(v, 0.5, dim=1, interpolation="nearest"), y)
    check(lambda m, v: m.quantile(v, 0.5), rand(1))
    check(lambda m, v: m.quantile(v, 0.5, dim=0), rand())


def test_top_level_names_are_torchs():
    """Every public top-level name is one PyTorch has, and `__all__` (what `from torch
    import *` binds) holds every name of PyTorch's `__all__` that fusegrad defines."""
    import types

    public = [n for n in dir(fusegrad) if not n.startswith("_")]
    extra = [n for n in public
             if not isinstance(getattr(fusegrad, n), types.ModuleType) and not hasattr(torch, n)]
    assert extra == []
    ours = set(fusegrad.__all__)
    assert all(not n.startswith("_") for n in ours)
    ours_missing = [n for n in torch.__all__ if n != "export" and hasattr(fusegrad, n)
                    and n not in ours]
    assert ours_missing == []
    names: dict = {}
    exec("from fusegrad import *", names)
    assert names["compile"] is fusegrad.compile and names["tensor"] is fusegrad.tensor
    assert "ops" not in names and "nn" not in names


def test_functional_has_torchs_functions():
    """Every function of `torch.nn.functional` exists in fusegrad's (the float8 scaled
    products need CUDA), with `F.grad` the convolution-gradient module, and
    `max_pool3d_with_indices` gives PyTorch's values and positions."""
    import types

    import torch.nn.functional as TF

    import fusegrad.nn.functional as F

    cuda_only = {"scaled_mm", "scaled_grouped_mm"}
    missing = [n for n, v in vars(TF).items() if not n.startswith("_")
               and isinstance(v, types.FunctionType) and v.__module__.startswith("torch.nn")
               and n not in cuda_only and not hasattr(F, n)]
    assert missing == []
    assert F.grad is fusegrad.nn.grad
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    got = F.max_pool3d_with_indices(fusegrad.tensor(x), 2, stride=(1, 2, 2), padding=1)
    want = TF.max_pool3d_with_indices(torch.tensor(x), 2, stride=(1, 2, 2), padding=1)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "bool", "bfloat16", "int64"])
def test_storage_type_and_to_sparse_coo(dtype):
    """`storage_type()` is the dtype's legacy storage class; `to_sparse_coo()` is
    `to_sparse()` (a COO tensor returns itself)."""
    got = fusegrad.ones(2, dtype=getattr(fusegrad, dtype)).storage_type()
    want = torch.ones(2, dtype=getattr(torch, dtype)).storage_type()
    assert got.__name__ == want.__name__
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], np.float32)
    s = fusegrad.tensor(x).to_sparse_coo()
    t = torch.tensor(x).to_sparse_coo()
    np.testing.assert_array_equal(s.indices().numpy(), t.indices().numpy())
    np.testing.assert_array_equal(s.values().numpy(), t.values().numpy())
    assert s.to_sparse_coo() is s
