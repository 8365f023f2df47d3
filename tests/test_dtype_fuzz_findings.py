"""Findings of a differential fuzz of eager fusegrad against PyTorch over dtypes: pointwise
ops over every pair of dtypes with 0-d tensors and Python numbers (wrapped-number promotion,
overflow, division by zero, in-place result types), reductions and scans with NaN, -0.0,
ties and empty inputs, and tensor creation and conversion. Each case runs under torch and
fusegrad in the test: the same values (bits, for the exact ops), dtype and shape, or the
same error type and message."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

NAN, INF = float("nan"), float("inf")


def _outcome(lib, fn):
    """What `fn(lib)` gives: its tensors as (dtype name, NumPy values), or its error."""
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return ("error", type(e).__name__, str(e).split("\n")[0])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    res = []
    for t in outs:
        if isinstance(t, lib.Tensor):
            t = t.detach().resolve_conj() if lib is torch else t.detach()
            name = str(t.dtype).split(".")[-1]
            if name == "bfloat16":
                t = t.float()
            res.append((name, t.numpy()))
        else:
            res.append(("value", t))
    return res


def _same(fn, tol=0.0):
    """Run `fn` under both libraries; the same error, or the same dtypes and values (NaN
    where NaN, the sign of each zero, within `tol` relative)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _outcome(torch, fn), _outcome(fg, fn)
    if want[0] == "error" or got[0] == "error":
        assert got == want
        return
    assert len(got) == len(want)
    for (wd, w), (gd, g) in zip(want, got):
        assert gd == wd
        if wd == "value":
            assert g == w
            continue
        assert g.shape == w.shape
        if tol:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, w)
        if w.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


# ------------------------------------------------------------ sort of the smallest integer

@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_descending_sort_and_topk_of_the_smallest_integer(dtype):
    """Descending order negated the values: -(-128) wrapped in int8, so the smallest value
    sorted first."""
    info = np.iinfo(dtype)
    vals = [1, int(info.min), 0, int(info.max), 5, 0]

    def make(L):
        return L.tensor(vals, dtype=getattr(L, dtype))

    _same(lambda L: L.sort(make(L), descending=True))
    _same(lambda L: L.sort(make(L), descending=True, stable=True))
    _same(lambda L: L.argsort(make(L), descending=True))
    _same(lambda L: L.topk(make(L), 4))


# ------------------------------------------------------------ cummax / cummin

@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_running_extreme_values_are_the_indexed_elements(op):
    """On a tie the index moves to the later element; the value must be that element (its
    zero's sign), not the earlier one."""
    vals = [0.0, -0.0, 1.0, 1.0, -0.0, 0.0, -1.0]
    for dt in ("float16", "float32", "float64"):
        _same(lambda L, dt=dt: getattr(L, op)(L.tensor(vals, dtype=getattr(L, dt)), 0))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_running_extremes_of_complex_and_scalar_inputs(op):
    _same(lambda L: getattr(L, op)(L.tensor([1j, 2]), 0))  # no complex kernel
    _same(lambda L: getattr(L, op)(L.tensor(1j), 0))  # a 0-d input is copied
    _same(lambda L: getattr(L, op)(L.zeros(0, 3, dtype=L.complex64), 1))
    _same(lambda L: getattr(L, op)(L.tensor(2.0), 1))  # its own message for a scalar


# ------------------------------------------------------------ complex order statistics

@pytest.mark.parametrize("call", [
    lambda L, t: L.nanmedian(t), lambda L, t: L.nanmedian(t, 1), lambda L, t: L.median(t, 1),
    lambda L, t: L.kthvalue(t, 1), lambda L, t: L.mode(t), lambda L, t: L.aminmax(t),
    lambda L, t: L.unique(t), lambda L, t: L.unique(t, dim=1),
    lambda L, t: L.unique_consecutive(t)])
def test_order_statistics_refuse_complex_inputs(call):
    """NumPy orders complex numbers lexicographically; PyTorch has no kernel for them."""
    _same(lambda L: call(L, L.tensor([[1 + 1j, 2, 0.5j]])))


def test_logcumsumexp_of_complex_values():
    """PyTorch has a complex kernel (fusegrad's refused them), and its gradient follows the
    conjugate Wirtinger rule."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)) + 3j * rng.standard_normal((3, 5))
    cot = rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))
    res = []
    for L in (torch, fg):
        t = L.tensor(x, requires_grad=True)
        y = L.logcumsumexp(t, 1)
        (y * L.tensor(cot)).real.sum().backward()
        res.append((y.detach().resolve_conj().numpy() if L is torch else y.detach().numpy(),
                    t.grad.resolve_conj().numpy() if L is torch else t.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    _same(lambda L: L.logcumsumexp(L.tensor(x).to(L.complex64), 0), tol=1e-6)


# ------------------------------------------------------------ var / std

@pytest.mark.parametrize("op", ["var", "std"])
def test_complex_variance_without_degrees_of_freedom_is_nan(op):
    """PyTorch adds the real part's variance to the imaginary part's: a part without spread
    is 0 / 0 when no degrees of freedom are left, so the sum is NaN, not inf."""
    for v in ([1 + 0j, 2 + 0j], [1 + 1j, 1 + 2j], [1 + 1j, 2 + 0j]):
        _same(lambda L, v=v: getattr(L, op)(L.tensor(v), correction=2))
    _same(lambda L: getattr(L, op)(L.tensor([1 + 1j, 2 + 0j]).to(L.complex64), correction=0))


def test_variance_of_an_empty_input_warns():
    """An empty input's reduction factor is 0 whatever the reduced dims' sizes."""
    for L in (torch, fg):
        with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
            L.var(L.zeros(0, 3), 1, correction=0)


# ------------------------------------------------------------ ldexp

def test_ldexp_of_a_floating_input_scales_exactly():
    """C's ldexp: -0.0 stays -0.0 where -0.0 * 2 ** 200 is NaN; a half type overflows and
    underflows in its own range; an int64 exponent is converted to C's int."""
    x = [-0.0, 1.5, 1.5, 2.5, 1.0]
    for e, edt in (([128, 200, 20, 3, 30], "uint8"), ([128, 200, 20, -3, -30], "int32"),
                   ([128, 2 ** 40, -2 ** 40, -3, -30], "int64")):
        for dt in ("float16", "bfloat16", "float32", "float64"):
            _same(lambda L, e=e, edt=edt, dt=dt: L.ldexp(L.tensor(x, dtype=getattr(L, dt)),
                                                         L.tensor(e, dtype=getattr(L, edt))))
    # integer inputs keep PyTorch's composite, input * 2 ** other (0 * inf is NaN)
    _same(lambda L: L.ldexp(L.tensor([0, 1]), L.tensor([200, 3], dtype=L.int16)))


def test_ldexp_in_place():
    """ldexp_ is LdexpBackward0 (fusegrad recorded a mul_), computes the power in the
    exponent's dtype, and refuses a self that cannot hold a floating result by name."""
    names = []
    for L in (torch, fg):
        y = L.tensor([1.5, 2.5], requires_grad=True).clone()
        y.ldexp_(L.tensor([1, 2]))
        names.append(type(y.grad_fn).__name__)
    assert names[0] == names[1] == "LdexpBackward0"
    _same(lambda L: L.tensor([1.5, -2.5]).ldexp_(L.tensor([1.5, -3.5], dtype=L.float16)))
    _same(lambda L: L.tensor([1], dtype=L.int8).ldexp_(L.tensor([1])))
    _same(lambda L: L.tensor([True]).ldexp_(L.tensor([1.5])))


# ------------------------------------------------------------ nextafter

def test_nextafter_of_equal_half_operands_is_other():
    for dt in ("float16", "bfloat16", "float32"):
        _same(lambda L, dt=dt: L.nextafter(L.tensor([0.0, -0.0, 1.0], dtype=getattr(L, dt)),
                                           L.tensor([-0.0, 0.0, 1.0], dtype=getattr(L, dt))))


# ------------------------------------------------------------ numbers in integer ops

@pytest.mark.parametrize("dtype,e", [
    ("int8", 300), ("uint8", 300), ("int8", 255), ("int8", 128), ("int8", 2 ** 31),
    ("uint8", 2 ** 31), ("int32", 2 ** 31), ("float16", 2 ** 31), ("int8", 2 ** 40),
    ("uint8", 2 ** 40), ("int32", 2 ** 40), ("float16", 2 ** 40), ("float16", 1e5)])
def test_pow_exponent_converted_to_the_base_dtype(dtype, e):
    """int8 ** 255 is an overflow error (fusegrad wrapped 255 to -1, then NumPy's ValueError
    about negative powers); float16 ** 1e5 too."""
    _same(lambda L: L.tensor([1, 2], dtype=getattr(L, dtype)) ** e)


@pytest.mark.parametrize("call", [
    lambda L, a: a.clone().bitwise_and_(300), lambda L, a: a.clone().__ior__(-129),
    lambda L, a: a.clone().__ilshift__(300), lambda L, a: a.clone().bitwise_xor_(2 ** 40 + 3),
    lambda L, a: L.bitwise_left_shift(300, a),
    lambda L, a: L.bitwise_left_shift(2, a > 0), lambda L, a: L.bitwise_right_shift(-3, a > 0),
    lambda L, a: L.bitwise_left_shift(2.5, a),
    lambda L, a: (a > 0).bitwise_left_shift_(L.tensor([1.0, 2.0, 3.0], dtype=L.float16))])
def test_numbers_in_bitwise_ops_wrap_as_wrapped_scalars(call):
    """A number joining an integer op takes the result dtype's low bits (int8: 300 is 44),
    in place too (fusegrad refused it), and a number shifted by a tensor promotes with it
    (`2 << bool tensor` is int64)."""
    _same(lambda L: call(L, L.tensor([1, -2, 3], dtype=L.int8)))


@pytest.mark.parametrize("call", [
    lambda L, a: a // 256, lambda L, a: a % 2 ** 40, lambda L, a: L.fmod(a, 512),
    lambda L, a: L.div(a, 256, rounding_mode="trunc"),
    lambda L, a: L.div(a, 256, rounding_mode="floor"),
    lambda L, a: a.clone().floor_divide_(256)])
def test_integer_division_by_a_number_that_wraps_to_zero(call):
    _same(lambda L: call(L, L.tensor([100, 7, 50], dtype=L.uint8)))


def test_xlogy_of_a_half_type_takes_its_number_in_the_half_type():
    """PyTorch's iterator casts the number (or 0-d tensor) to float16 first: 1e5 is inf."""
    for dt, big in (("float16", 1e5), ("bfloat16", 1e39)):
        def make(L, dt=dt):
            return L.tensor([1.5, 0.0, -2.0, 0.75], dtype=getattr(L, dt))

        _same(lambda L, make=make, big=big: L.xlogy(make(L), big))
        _same(lambda L, make=make: L.xlogy(make(L), L.tensor(1e5)))
        _same(lambda L, make=make: L.xlogy(make(L), 2.7))
        _same(lambda L, make=make, big=big: make(L).xlogy_(big))


# ------------------------------------------------------------ unary in-place forms

def test_round_in_place_takes_decimals():
    _same(lambda L: L.tensor([1.26, -2.55, 0.05]).round_(decimals=1))
    _same(lambda L: L.tensor([1.26], dtype=L.float16).round_(decimals=1))
    _same(lambda L: L.tensor([1, 2]).round_(decimals=1))
    node = [type(L.tensor([1.5], requires_grad=True).clone().round_(decimals=0).grad_fn).__name__
            for L in (torch, fg)]
    assert node[0] == node[1] == "RoundBackward1"


def test_in_place_abs_neg_and_positive_errors():
    _same(lambda L: L.tensor([1j, 2]).abs_())
    _same(lambda L: L.tensor([True, False]).neg_())  # (NumPy's own message leaked)
    _same(lambda L: L.tensor([True]).positive())
    _same(lambda L: L.tensor([-1.5]).abs_())


# ------------------------------------------------------------ clamp

def test_clamp_checks_its_bounds_before_the_dtype():
    _same(lambda L: L.clamp(L.tensor([1j])))
    _same(lambda L: L.tensor([1j]).clamp_())
    _same(lambda L: L.clamp(L.tensor([1j]), 1, 2))


@pytest.mark.parametrize("bounds", [(None, 2 ** 40), (-2 ** 20, 3), (100000, None)])
def test_clamp_of_float16_refuses_an_integer_bound_past_its_range(bounds):
    _same(lambda L: L.clamp(L.tensor([1.0], dtype=L.float16), *bounds))


# ------------------------------------------------------------ in-place scans

@pytest.mark.parametrize("op", ["cumsum_", "cumprod_"])
def test_in_place_scans_run_in_the_dtype_of_self(op):
    """A bool self has no kernel (fusegrad said its int64 result could not be cast); an
    empty or 0-d one is left as it is."""
    _same(lambda L: getattr(L.tensor([True, False]), op)(0))
    _same(lambda L: getattr(L.zeros(0, 2, dtype=L.bool), op)(0))
    _same(lambda L: getattr(L.tensor(True), op)(0))
    _same(lambda L: getattr(L.tensor([100, 100, 3], dtype=L.int8), op)(0))


# ------------------------------------------------------------ arange

@pytest.mark.parametrize("args,dtype", [
    *[(args, dt) for args in ((1, 4, 0.5), (0.5, 3.7, 1.5), (-0.5, 3, 0.5))
      for dt in ("int8", "uint8", "int32", "int64")], ((0, 1, 0.1), "int64")])
def test_arange_of_an_integer_dtype_steps_by_integer_parts(args, dtype):
    """PyTorch casts start and step to integers before stepping (the size is reckoned in
    doubles): arange(1, 4, 0.5, dtype=int8) is six 1s; int64 refuses a step that truncates
    to 0."""
    _same(lambda L: L.arange(*args, dtype=getattr(L, dtype)))


@pytest.mark.parametrize("args", [(NAN,), (0, INF), (-INF, 0), (0.5, INF), (0, 5, NAN),
                                  (1.25, 1e20)])
def test_arange_errors(args):
    _same(lambda L: L.arange(*args))


@pytest.mark.parametrize("dtype", ["bool", "complex64"])
def test_arange_has_no_bool_or_complex_kernel(dtype):
    _same(lambda L: L.arange(5, dtype=getattr(L, dtype)))
    _same(lambda L: L.arange(5, 1, dtype=getattr(L, dtype)))
    _same(lambda L: L.arange(NAN, dtype=getattr(L, dtype)))


# ------------------------------------------------------------ conversions

def test_bfloat16_converts_to_integers_through_float32():
    """ml_dtypes' own bfloat16 -> integer cast sent infinities and negative values bound for
    an unsigned type to 0; PyTorch converts through float, as fusegrad's float32 does (what
    C leaves undefined, compared with fusegrad's own float32 conversion, not PyTorch's)."""
    vals = [-2.5, -INF, INF, 1e10, 3.7, -0.0]
    x = fg.tensor(vals).to(fg.bfloat16)
    for dt in (fg.uint8, fg.int8, fg.int32, fg.int64):
        want = x.float().to(dt)
        assert x.to(dt).tolist() == want.tolist()
        assert fg.zeros(6, dtype=dt).copy_(x).tolist() == want.tolist()
    _same(lambda L: L.tensor([-2.5, 3.7, 100.5]).to(L.bfloat16).to(L.int32))


@pytest.mark.parametrize("data,dtype", [
    ([[1, 2], 3], None), ([1, [2, 3]], None), ([[1], 2.5], None), ([1.5, [2]], None),
    ([1, 1j], "int8"), ([1j], "int64"), (1j, "int16"), ([NAN, 1], "int8"), (NAN, "int32")])
def test_tensor_from_data_errors(data, dtype):
    """PyTorch's element-by-element reading names the problem (NumPy's errors leaked)."""
    _same(lambda L: L.tensor(data, dtype=getattr(L, dtype) if dtype else None))


@pytest.mark.parametrize("value,dtype", [(1j, None), (2 ** 40, "int8"), (NAN, "int8"),
                                         (1e39, "float32")])
def test_scalar_tensor_converts_as_pytorch(value, dtype):
    """Past the dtype's range (a NaN into an integer dtype, a complex number into a real
    one) an overflow error; fusegrad wrapped, or took the real part."""
    _same(lambda L: L.scalar_tensor(value, dtype=getattr(L, dtype) if dtype else None))


@pytest.mark.parametrize("order", [">i4", ">f8"])
def test_arrays_in_another_byte_order(order):
    _same(lambda L: L.from_numpy(np.array([1, 2], order)))
    _same(lambda L: L.tensor(np.array([1, 2], order)))


# ------------------------------------------------------------ rounding of the kernels

def test_float64_lerp_fuses_its_multiply_add():
    """PyTorch's float64 kernel computes a + w * (end - a) with a fused multiply-add, as its
    float32 one (lerp(1.5, -3.5, 0.3) is 5.55e-17, not 0)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(400) * np.exp(rng.uniform(-10, 10, 400))
    b = rng.standard_normal(400) * np.exp(rng.uniform(-10, 10, 400))
    w = rng.uniform(-1, 2, 400)
    _same(lambda L: L.lerp(L.tensor([0.1, 1.5], dtype=L.float64),
                           L.tensor([0.7, -3.5], dtype=L.float64), 0.3))
    for weight in (0.3, 0.7):
        _same(lambda L, weight=weight: L.lerp(L.tensor(a), L.tensor(b), weight))
    _same(lambda L: L.lerp(L.tensor(a), L.tensor(b), L.tensor(w)))
    _same(lambda L: L.tensor(a).lerp_(L.tensor(b), 0.3))


@pytest.mark.parametrize("e", [3, -2, 3.0])
def test_bfloat16_cube_and_inverse_square_round_the_square(e):
    """bfloat16's kernel rounds x * x to bfloat16 before the next product or division."""
    v = (np.random.default_rng(0).standard_normal(256) * 10).tolist()
    _same(lambda L: L.tensor(v).to(L.bfloat16) ** e)
    _same(lambda L: L.tensor(v).to(L.bfloat16).pow_(e))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("eps", [None, 1e-3, 0.2])
def test_half_type_logit_rounds_its_steps(dtype, eps):
    """The half types' logit clamps to eps rounded to the half type and rounds 1 - x and
    the quotient before the logarithm (fusegrad's differed in about a third of the values
    of (0, 1))."""
    v = np.random.default_rng(0).uniform(0.001, 0.999, 500).tolist() + [0.0, 1.0, 1e-5]
    _same(lambda L: L.logit(L.tensor(v).to(getattr(L, dtype)), eps))


# ------------------------------------------------------------ fill values

@pytest.mark.parametrize("dtype,value", [("int8", 300), ("int8", 255), ("uint8", 256),
                                         ("int32", 2 ** 31), ("float32", 1e39)])
def test_where_converts_a_number_with_the_overflow_check(dtype, value):
    """A number operand of where is converted to the result dtype as a fill value is (fusegrad
    wrapped it)."""
    _same(lambda L: L.where(L.tensor([True, False]), L.zeros(2, dtype=getattr(L, dtype)), value))
    _same(lambda L: L.where(L.tensor([True, False]), value, L.zeros(2, dtype=getattr(L, dtype))))


@pytest.mark.parametrize("value", [1j, 1 + 0j])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_index_fill_refuses_a_complex_value_for_a_real_tensor(value, dtype):
    _same(lambda L: L.zeros(2, dtype=getattr(L, dtype)).index_fill(0, L.tensor([1]), value))
    _same(lambda L: L.zeros(2, dtype=getattr(L, dtype)).index_fill(0, L.tensor([1]),
                                                                   L.tensor(value)))


@pytest.mark.parametrize("call", [
    lambda L: L.full((2,), 1e39, dtype=L.complex64),
    lambda L: L.full((2,), 1e39j, dtype=L.complex64),
    lambda L: L.zeros(2, dtype=L.complex64).fill_(-1e39),
    lambda L: L.zeros(2, dtype=L.complex64).masked_fill(L.tensor([True, False]), 3.5e38),
    lambda L: L.add(L.ones(2, dtype=L.complex64), L.ones(2, dtype=L.complex64), alpha=1e39)])
def test_complex64_fill_values_past_float32_range_overflow(call):
    _same(call)


def test_bool_tensor_is_an_index_as_torch():
    for make in (lambda lib: lib.tensor(True), lambda lib: lib.tensor([[False]]),
                 lambda lib: lib.tensor(1.0)):
        outcomes = []
        for lib in (fg, torch):
            try:
                outcomes.append([10, 20][make(lib)])
            except TypeError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("dtype", ["int64", "float32", "bool"])
def test_sort_along_a_leading_dim_is_laid_out_as_torch(dtype):
    data = [[3, 1, 2], [1, 1, 0]]
    got, want = [], []
    for lib, out in ((fg, got), (torch, want)):
        x = lib.tensor(data).to(getattr(lib, dtype))
        for t in (x, x.t()):
            values, idx = t.sort(0, descending=dtype == "float32")
            out += [values.stride(), idx.stride(), t.argsort(0).stride(), t.msort().stride()]
    assert got == want


@pytest.mark.parametrize("method", ["cumsum_", "cumprod_"])
@pytest.mark.parametrize("dtype, asked", [("float32", "float64"), ("int32", "int64"),
                                          ("float32", "float16"), ("float32", "float32")])
def test_in_place_scan_with_a_dtype_as_torch(method, dtype, asked):
    outcomes = []
    for lib in (fg, torch):
        x = lib.ones(3, dtype=getattr(lib, dtype))
        try:
            outcomes.append(getattr(x, method)(0, dtype=getattr(lib, asked)).tolist())
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("value, dtype", [
    (-0.5, "uint8"), (255.5, "uint8"), (-128.9, "int8"), (127.9, "int8"), (-0.5, "int64"),
    ([-0.5, 1.0], "uint8"), ([127.9], "int8"), ([True, 2.5], "int16"), (100.5, "uint8"),
    ([-128.0, 127.0], "int8"), ([2 ** 63 - 1], "int64")])
def test_tensor_of_floats_into_an_integer_dtype_checks_the_range_as_torch(value, dtype):
    outcomes = []
    for lib in (fg, torch):
        try:
            outcomes.append(lib.tensor(value, dtype=getattr(lib, dtype)).tolist())
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("value", [[-1, 2.5], [[-1, 2], [3.5, -0.0]], [-3]])
def test_tensor_of_ints_and_floats_into_uint8_as_torch(value):
    outcomes = []
    for lib in (fg, torch):
        try:
            outcomes.append(lib.tensor(value, dtype=lib.uint8).tolist())
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
