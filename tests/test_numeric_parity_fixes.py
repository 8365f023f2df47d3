"""Numeric parity with PyTorch for fixes found by probing: complex gradients (conjugate
Wirtinger rule) of products, scans, lerp, addcmul/addcdiv, powers and logaddexp; complex
logsumexp; max/min/maximum/minimum/fmax/fmin/clamp gradients at NaN, ties and with infinite
incoming gradients; float32 scans accumulated in double; half-type products rounded per step;
Hurwitz zeta and polygamma at extreme arguments (which used to loop for ever).

Every case runs the same program under fusegrad and torch and compares values, dtypes and
the inputs' gradients.
"""

from __future__ import annotations

import os
import signal

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

INF, NAN = float("inf"), float("nan")


def _run(lib, fn, inputs, dtype, grad):
    """`fn(lib, *tensors)` and the gradients of Re(sum) + Im(sum) / 2 of its result."""
    xs = [lib.tensor(v, dtype=getattr(lib, dtype)) for v in inputs]
    if grad:
        for x in xs:
            x.requires_grad_(True)
    out = fn(lib, *xs)
    grads = None
    if grad:
        loss = out.real.sum() + out.imag.sum() / 2 if out.is_complex() else out.sum()
        grads = [g.detach().numpy() for g in lib.autograd.grad(loss, xs)]
    return out.detach(), grads


def check(fn, *inputs, dtype="float32", grad=True, rtol=1e-5, exact=False):
    """The same program under both libraries: equal dtype, values and gradients."""
    t_out, t_grads = _run(torch, fn, inputs, dtype, grad)
    f_out, f_grads = _run(fusegrad, fn, inputs, dtype, grad)
    assert str(f_out.dtype) == str(t_out.dtype)
    pairs = [(f_out.float().numpy() if f_out.dtype is fusegrad.bfloat16 else f_out.numpy(),
              t_out.float().numpy() if t_out.dtype is torch.bfloat16 else t_out.numpy())]
    pairs += list(zip(f_grads or [], t_grads or []))
    for got, want in pairs:
        assert got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


X = [1 + 2j, 3 - 1j]
Y = [0.5 - 1j, 2 + 0.3j]


# ---------------------------------------------------------------- complex


def test_logsumexp_complex_value_dtype_and_grad():
    check(lambda L, a: L.logsumexp(a, 0), X, dtype="complex64")
    check(lambda L, a: L.logsumexp(a, 1), [X, Y], dtype="complex128", rtol=1e-10)
    check(lambda L, a: L.logsumexp(a, 1, keepdim=True), [[1 + 9j, 1 - 9j]], dtype="complex128",
          rtol=1e-10)


@pytest.mark.parametrize("case", [
    ("prod", lambda L, a: a.prod(), X),
    ("prod zero", lambda L, a: a.prod(), [0j, 1 + 1j, 2 - 1j]),
    ("prod dim", lambda L, a: a.prod(1), [[0j, 1 + 1j, 2 - 1j], [1j, 2, 3]]),
    ("cumprod", lambda L, a: L.cumprod(a, 0), X),
    ("cumprod zero", lambda L, a: L.cumprod(a, 0), [1 + 1j, 0j, 2 - 1j]),
    ("sinc", lambda L, a: L.sinc(a), X),
    ("pow scalar base", lambda L, a: 2.0 ** a, X),
    ("pow complex scalar base", lambda L, a: (1 + 1j) ** a, X),
    ("logaddexp scalar", lambda L, a: L.logaddexp(a, L.tensor(2.0 + 0j)), X),
], ids=lambda c: c[0])
def test_unary_complex_gradients(case):
    _, fn, x = case
    check(fn, x, dtype="complex64")


@pytest.mark.parametrize("case", [
    ("addcmul", lambda L, a, b, c: L.addcmul(a, b, c, value=0.5)),
    ("addcdiv", lambda L, a, b, c: L.addcdiv(a, b, c, value=0.5)),
    ("lerp tensor", lambda L, a, b, c: L.lerp(a, b, c)),
    ("lerp scalar", lambda L, a, b, c: L.lerp(a, b, 0.3) + c),
    ("lerp complex scalar", lambda L, a, b, c: L.lerp(a, b, 0.6 + 0.1j) + c),
    ("lerp_", lambda L, a, b, c: (a * 1).lerp_(b, c)),
    ("pow", lambda L, a, b, c: a ** b + c),
    ("rsub", lambda L, a, b, c: L.rsub(a, b, alpha=2) + c),
    ("logaddexp", lambda L, a, b, c: L.logaddexp(a, b) * c),
], ids=lambda c: c[0])
def test_ternary_complex_gradients(case):
    _, fn = case
    check(fn, [0.2j, 1.5], X, [0.3 + 0.1j, 2j], dtype="complex64")


def test_logaddexp_complex_branch_and_infinities():
    pairs = [(complex(-INF, 1), complex(-INF, 2)), (complex(INF, 1), complex(INF, 2)),
             (complex(-INF, 1), 2 + 2j), (1 + 5j, 1 - 5j), (1 - 5j, 1 + 5j),
             (complex(-INF, 0), complex(INF, 3)), (3 + 1j, complex(NAN, 0)), (1 + 10j, 0.5 - 7j)]
    check(lambda L, a, b: L.logaddexp(a, b), [p[0] for p in pairs], [p[1] for p in pairs],
          dtype="complex128", grad=False, rtol=1e-12)


def test_complex_errors_match():
    for lib in (torch, fusegrad):
        x = lib.tensor(X)
        with pytest.raises(NotImplementedError, match="logaddexp2_cpu"):
            lib.logaddexp2(x, x)
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match=r"c10::complex<float> for `end`"):
            lib.lerp(lib.tensor(X), lib.tensor(X, dtype=lib.complex128), 0.5)


# ---------------------------------------------------------------- NaN, ties, infinities


@pytest.mark.parametrize("values", [[NAN, 1.0, 2.0], [NAN, NAN, 1.0], [1.0, 2.0, 2.0],
                                    [INF, 1.0, INF]])
@pytest.mark.parametrize("name", ["max", "min", "median"])
def test_full_reduction_gradients_with_nan(name, values):
    check(lambda L, a: getattr(a, name)() * L.tensor(INF), values)
    check(lambda L, a: getattr(a.reshape(1, 3), name)(), values)


A = [NAN, 1.0, NAN, 2.0, 1.0, -INF, 3.0]
B = [0.0, NAN, NAN, 2.0, 3.0, -INF, 1.0]
C = [5.0, 5.0, NAN, NAN, 0.5, 1.0, -1.0]


@pytest.mark.parametrize("scale", [2.0, INF])
@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin", "max", "min"])
def test_binary_extremum_gradients(name, scale):
    check(lambda L, a, b: getattr(L, name)(a, b) * L.tensor(scale), A, B)


@pytest.mark.parametrize("scale", [1.0, INF])
def test_clamp_gradients_at_nan_and_bounds(scale):
    check(lambda L, a, b, c: L.clamp(a, b, c) * L.tensor(scale), A, B, C)
    check(lambda L, a: L.clamp(a, 0.0, 2.0) * L.tensor(scale), A)
    check(lambda L, a: L.clamp(a, NAN, 2.0) * L.tensor(scale), A)


# ---------------------------------------------------------------- precision


def test_float32_cumsum_accumulates_in_double():
    for lib in (torch, fusegrad):
        assert lib.full((10 ** 6,), 0.1).cumsum(0)[-1].item() == 100000.0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64", "float64",
                                   "int32"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scans_bit_exact(name, dtype):
    rng = np.random.default_rng(0)
    data = rng.random((300, 7)) + 0.5
    if dtype.startswith("complex"):
        data = data + 0.3j * rng.random((300, 7))
    data = torch.tensor(data).to(getattr(torch, dtype))  # rounded by torch, then shared
    shared = data.float().numpy() if dtype == "bfloat16" else data.numpy()
    for d in (0, 1):
        want = getattr(data, name)(d)
        got = getattr(fusegrad.tensor(shared).to(getattr(fusegrad, dtype)), name)(d)
        assert str(got.dtype) == str(want.dtype)
        g = got.float().numpy() if dtype == "bfloat16" else got.numpy()
        w = want.float().numpy() if dtype == "bfloat16" else want.numpy()
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_prod_rounds_each_step(dtype):
    check(lambda L, a: a.prod(), [1.1] * 10, dtype=dtype, grad=False, exact=True)
    rng = np.random.default_rng(1)
    data = (rng.random((40, 6)) * 0.2 + 0.9).tolist()
    for d in (0, 1):
        check(lambda L, a, d=d: a.prod(d), data, dtype=dtype, grad=False, exact=True)


# ---------------------------------------------------------------- zeta, polygamma


@pytest.fixture
def deadline():
    """Fail (instead of hanging) when a call takes more than a few seconds."""
    def expired(signum, frame):
        raise TimeoutError("took too long")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


Q = [-INF, -1e10, -3.0, -2.5, -1e-300, 0.0, -0.0, 1e-300, 0.5, 1.0, 2.5, 1e8, 1e10, 1e300, INF,
     NAN, -999.5, -20.25]


@pytest.mark.parametrize("x", [2.0, 3.0, 2.5, 1.0, 0.5, -2.0, INF, NAN, 4.0])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_zeta_special_values(deadline, x, dtype):
    check(lambda L, a, q: L.special.zeta(a, q), [x] * len(Q), Q, dtype=dtype, grad=False,
          rtol=1e-6 if dtype == "float32" else 1e-12)


def test_zeta_far_left_is_fast(deadline):
    # PyTorch sums one term per unit up to q = 9 here: compare where that is still quick.
    check(lambda L, a, q: L.special.zeta(a, q), [3.0, 4.0, 5.0], [-2e5 - 0.25, -5000.75, -1001.3],
          dtype="float64", grad=False, rtol=1e-12)
    out = fusegrad.special.zeta(fusegrad.tensor([2.0], dtype=fusegrad.float64),
                                fusegrad.tensor([-1e10 + 0.5], dtype=fusegrad.float64))
    assert abs(out.item() - np.pi ** 2) < 1e-6  # 1/(k + 1/2)^2 over all integers k


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_polygamma_special_values(deadline, n, dtype):
    xs = [-INF, -1e10, -1.0, -2.5, -0.0, 0.0, 1e-30, 1e10, INF, NAN, 0.3, 1.0, 7.0, -7.7]
    check(lambda L, a: L.polygamma(n, a), xs, dtype=dtype, grad=False,
          rtol=1e-6 if dtype == "float32" else 1e-12)


def _outcome(fn):
    try:
        return "ok", fn()
    except (RuntimeError, NotImplementedError) as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_logcumsumexp_accumulates_as_torch(dtype):
    """PyTorch's CPU kernel accumulates float32 in float64 (half types in float32): equal
    bits over a long row."""
    x = np.random.default_rng(0).standard_normal(20000).astype(np.float32)
    got = fusegrad.logcumsumexp(fusegrad.tensor(x).to(getattr(fusegrad, dtype)), 0)
    want = torch.logcumsumexp(torch.tensor(x).to(getattr(torch, dtype)), 0)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_rounding_integer_and_bool_tensors_as_torch(dtype):
    def cases(lib):
        x = lib.tensor([15, 25]).to(getattr(lib, dtype))
        return [_outcome(lambda d=d: lib.round(x, decimals=d).tolist()) for d in (1, -1)] + [
            _outcome(lambda f=f: getattr(lib, f)(x).tolist())
            for f in ("round", "floor", "ceil", "trunc")]

    assert cases(fusegrad) == cases(torch)


def test_prelu_refuses_mixed_dtypes_as_torch():
    def cases(lib):
        return [_outcome(lambda a=a, b=b: lib.prelu(lib.ones(2, 3, dtype=getattr(lib, a)),
                                                    lib.ones(1, dtype=getattr(lib, b))).shape)
                for a, b in (("float64", "float32"), ("float32", "float16"),
                             ("float32", "float32"))]

    assert cases(fusegrad) == cases(torch)


def test_broadcast_tensors_returns_full_shape_tensors_themselves():
    for lib in (fusegrad, torch):
        x = lib.ones(2, 3, requires_grad=True) * 2
        y = lib.ones(3)
        a, b = lib.broadcast_tensors(x, y)
        assert a is x and type(a.grad_fn).__name__ == "MulBackward0"
        assert tuple(b.shape) == (2, 3) and b._base is y


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float64_values_reach_half_types_through_float32(dtype):
    """PyTorch makes its half types from float: a float64 value is rounded to float32 first,
    which can differ from one direct rounding in the last bit (1.3579101682459611)."""
    values = np.random.default_rng(1).uniform(-4, 4, 2000)
    values[0] = 1.3579101682459611

    def spellings(lib):
        dt = getattr(lib, dtype)
        v = float(values[0])
        return [lib.tensor(values, dtype=lib.float64).to(dt).float().numpy(),
                lib.tensor(values.tolist(), dtype=dt).float().numpy(),
                lib.tensor([[v]], dtype=dt).float().numpy(),
                lib.full((2,), v, dtype=dt).float().numpy(),
                lib.zeros(2, dtype=dt).fill_(v).float().numpy()]

    for got, want in zip(spellings(fusegrad), spellings(torch)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("scales", [{}, {"beta": 0.5, "alpha": 2.0}, {"beta": 0}])
def test_baddbmm_of_half_types_rounds_once(dtype, scales):
    """The product and the sum in float32, rounded once to the half type, as PyTorch's."""
    rng = np.random.default_rng(0)
    arrays = rng.standard_normal((2, 8, 16)), rng.standard_normal((2, 8, 16)), \
        rng.standard_normal((2, 16, 16))

    def run(lib):
        args = [lib.tensor(a).to(getattr(lib, dtype)) for a in arrays]
        return lib.baddbmm(*args, **scales).float().numpy()

    if dtype == "float32":
        # (the float32 sums' order is each BLAS's choice for the CPU's instruction set)
        np.testing.assert_allclose(run(fusegrad), run(torch), rtol=2e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(run(fusegrad), run(torch))


_SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.5, -0.5, 0.0, 1.0, -1.0, 6.0, 7.0]
_AT_SPECIALS = {
    "threshold": lambda L, x: L.nn.functional.threshold(x, 0.0, 5.0),
    "x * sign": lambda L, x: x * x.sign(),
    "relu": lambda L, x: L.relu(x) * 2,
    "clamp": lambda L, x: x.clamp(-1, 1),
}


@pytest.mark.parametrize("n", [4, 50])
@pytest.mark.parametrize("name", sorted(_AT_SPECIALS))
def test_values_and_gradients_at_nan_and_inf_as_torch(name, n):
    """threshold keeps a NaN (PyTorch selects the value where x <= threshold), relu's
    gradient passes at a NaN result (eager and compiled), sign's gradient is zeros (an
    infinite incoming gradient gives 0, not NaN)."""
    fn = _AT_SPECIALS[name]
    values = np.array(_SPECIALS * 5, np.float32)[:n]

    def run(L, f):
        x = L.tensor(values).requires_grad_()
        y = f(x)
        y.backward(L.full_like(y, float("inf")) if name == "relu" else L.ones_like(y))
        return y.detach().numpy(), x.grad.numpy()

    want = run(torch, lambda x: fn(torch, x))
    for backend in (None, "aot_eager"):
        f = (lambda x: fn(fusegrad, x)) if backend is None else \
            fusegrad.compile(lambda x: fn(fusegrad, x), backend=backend)
        for got, ref in zip(run(fusegrad, f), want):
            np.testing.assert_array_equal(got, ref)


_MESSAGE_CASES = {
    "bincount float": lambda L: L.bincount(L.ones(2, 2)),
    "bincount bool": lambda L: L.bincount(L.tensor([True])),
    "bincount negative": lambda L: L.bincount(L.tensor([-1])),
    "histc int": lambda L: L.histc(L.tensor([1, 2], dtype=L.int32), bins=3),
    "histc inf range": lambda L: L.histc(L.tensor([1.0, 2.0]), bins=3, min=0, max=float("inf")),
    "histc nan range": lambda L: L.histc(L.tensor([1.0]), bins=3, min=float("nan"),
                                         max=float("nan")),
    "tensordot int dims": lambda L: L.tensordot(L.ones(3, 4), L.ones(3, 4), dims=1),
    "tensordot given dims": lambda L: L.tensordot(L.ones(3, 4), L.ones(3, 4),
                                                  dims=([-1], [-2])),
}


@pytest.mark.parametrize("name", sorted(_MESSAGE_CASES))
def test_errors_as_torch(name):
    def outcome(L):
        try:
            return "ok", tuple(_MESSAGE_CASES[name](L).shape)
        except (RuntimeError, NotImplementedError) as e:
            return type(e).__name__, str(e)

    assert outcome(fusegrad) == outcome(torch)
