"""Tensor creation, dtypes and promotion, attributes, forward ops and their errors, compared
with torch."""

import itertools

import numpy as np
import pytest
import torch
from oracle import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    MODULES,
    assert_close,
    assert_same_error,
    assert_same_warnings,
    check,
    dtype_name,
    fg,
    pair,
    randn,
    sample,
    values,
)

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")


# ----------------------------------------------------------------------------------------------
# dtypes and the tensor() factory
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_DTYPES)
def test_dtype_objects(name):
    def prog(T):
        d = getattr(T, name)
        return d, d == getattr(T, name), d.is_floating_point
    check(prog)


@pytest.mark.parametrize("alias,name", [
    ("float", "float32"), ("double", "float64"), ("half", "float16"), ("long", "int64"),
    ("int", "int32"), ("short", "int16"),
])
def test_dtype_aliases(alias, name):
    check(lambda T: (getattr(T, alias), getattr(T, alias) == getattr(T, name)))


def test_dtype_repr_matches_torch():
    for name in ALL_DTYPES:
        assert repr(getattr(fg, name)) == repr(getattr(torch, name))
        assert str(getattr(fg, name)) == str(getattr(torch, name))


@pytest.mark.parametrize("data", [
    1.5, 3, True, [1.0, 2.0], [1, 2, 3], [True, False], [[1, 2], [3, 4]], [[1.5], [2.0]],
    [1, 2.5], [True, 2], [], [[]], -0.0, 2**40,
], ids=repr)
def test_tensor_from_python_data(data):
    check(lambda T: T.tensor(data))


@pytest.mark.parametrize("np_dtype", ["float64", "float32", "float16", "int32", "int64", "int8",
                                      "uint8", "int16", "bool"])
def test_tensor_from_numpy_keeps_dtype(np_dtype):
    arr = (np.arange(6).reshape(2, 3) % 3).astype(np_dtype)
    check(lambda T: T.tensor(arr))


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_tensor_with_dtype(name):
    check(lambda T: T.tensor([[0.0, 1.0, 2.0], [3.0, 1.0, 0.0]], dtype=getattr(T, name)))


def test_tensor_copies_numpy_input():
    arr = np.array([1.0, 2.0])

    def prog(T):
        t = T.tensor(arr)
        arr2 = arr.copy()
        t2 = T.tensor(arr2)
        arr2[0] = 100.0
        return t, t2
    check(prog)


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32"])
def test_from_numpy_shares_memory(dt):
    def prog(T):
        arr = np.arange(4).astype(dt)
        t = T.from_numpy(arr)
        arr[1] = 7
        t.add_(1)
        return t, arr, t.dtype
    check(prog)


def test_as_tensor():
    def prog(T):
        arr = np.array([1.0, 2.0, 3.0])
        shared = T.as_tensor(arr)
        converted = T.as_tensor(arr, dtype=T.float32)
        arr[0] = -1.0
        t = T.tensor([1, 2])
        return shared, converted, T.as_tensor([1, 2]), T.as_tensor(t) is t, T.as_tensor(2.5)
    check(prog)


# ----------------------------------------------------------------------------------------------
# type promotion
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "mul", "div", "sub", "maximum", "lt", "eq", "pow"])
@pytest.mark.parametrize("da,db", list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_binary_promotion(op, da, db):
    a = sample((2, 3), da, seed=1)
    b = sample((3,), db, seed=2)
    if op == "pow" and da == db == "bool":  # torch: kernel "pow" not implemented for 'Bool'
        b = b.astype(np.int64)
        db = "int64"
    if op == "div":
        b = np.ones_like(b) + b.astype(bool) if db != "bool" else np.ones_like(b)

    def prog(T, x, y):
        return getattr(T, op)(x, y)
    check(prog, a, b, dtype=(da, db))


@pytest.mark.parametrize("dim_dtype", ALL_DTYPES)
@pytest.mark.parametrize("zero_dtype", ALL_DTYPES)
def test_zero_dim_promotion(dim_dtype, zero_dtype):
    a = sample((3,), dim_dtype, seed=3)
    b = sample((), zero_dtype, seed=4)
    check(lambda T, x, y: (x * y, y * x, x + y), a, b, dtype=(dim_dtype, zero_dtype))


@pytest.mark.parametrize("dt", ALL_DTYPES)
@pytest.mark.parametrize("scalar", [2, 2.5, True, -1], ids=repr)
def test_python_scalar_does_not_widen(dt, scalar):
    a = sample((4,), dt, seed=5)

    def prog(T, x):
        return x * scalar, scalar * x, x + scalar, x > scalar
    check(prog, a, dtype=dt)


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_true_division_of_ints(dt):
    a = sample((4,), dt, seed=6)
    check(lambda T, x: (x / 2, T.div(x, 4)), a, dtype=dt)


def test_zero_dim_with_zero_dim_promotes_normally():
    def prog(T):
        return (T.tensor(2, dtype=T.int32) + T.tensor(1.5, dtype=T.float64),
                T.tensor(2, dtype=T.int8) * T.tensor(3, dtype=T.uint8))
    check(prog)


# ----------------------------------------------------------------------------------------------
# Size, device, conversions
# ----------------------------------------------------------------------------------------------

def test_size():
    def prog(T):
        x = T.zeros(2, 3, 4)
        s = x.shape
        return (s, x.size(), x.size(1), x.size(-1), s == (2, 3, 4), isinstance(s, tuple),
                T.Size([2, 3]), T.Size([2, 3]).numel(), s[1:], len(s), x.dim(), x.ndim,
                x.numel(), T.zeros(0, 3).numel(), T.tensor(1.0).shape)
    check(prog)


def test_size_repr():
    assert repr(fg.zeros(2, 3).shape) == repr(torch.zeros(2, 3).shape)
    assert repr(fg.Size([])) == repr(torch.Size([]))


def test_size_dim_out_of_range():
    assert_same_error(lambda: fg.zeros(2, 3).size(2), lambda: torch.zeros(2, 3).size(2),
                      full=True)


def test_device():
    def prog(T):
        x = T.ones(2)
        d = T.device("cpu")
        return (x.device, d, x.device == d, x.device.type, str(x.device),
                T.zeros(2, device="cpu").device, T.cuda.is_available())
    check(prog)


@pytest.mark.parametrize("make", [
    lambda T, x: x.to("cpu"),
    lambda T, x: x.to(T.device("cpu")),
    lambda T, x: x.to(T.float64),
    lambda T, x: x.to(T.int32),
    lambda T, x: x.to(T.float16),
    lambda T, x: x.to(T.bfloat16),
    lambda T, x: x.to("cpu", T.float64),
    lambda T, x: x.to(dtype=T.int64),
    lambda T, x: x.cpu(),
    lambda T, x: x.float(),
    lambda T, x: x.double(),
    lambda T, x: x.half(),
    lambda T, x: x.long(),
    lambda T, x: x.int(),
    lambda T, x: x.bool(),
    lambda T, x: x.clone(),
    lambda T, x: x.contiguous(),
])
def test_conversions(make):
    a = np.array([[-1.7, 0.0, 2.5], [3.9, -0.2, 1.0]], dtype=np.float32)
    check(lambda T, x: make(T, x), a)


@pytest.mark.parametrize("make,same", [
    (lambda T, x: x.to("cpu"), True),
    (lambda T, x: x.to(T.float32), True),
    (lambda T, x: x.cpu(), True),
    (lambda T, x: x.float(), True),
    (lambda T, x: x.contiguous(), True),
    (lambda T, x: x.to(T.float64), False),
    (lambda T, x: x.clone(), False),
])
def test_conversion_identity(make, same):
    def prog(T):
        x = T.ones(3)
        y = make(T, x)
        y.add_(1)
        return y is x, x
    res = check(prog)
    assert res[1][0] is same


def test_cuda_raises():
    assert_same_error(lambda: fg.ones(2).cuda(), lambda: torch.ones(2).cuda(), full=True)


# ----------------------------------------------------------------------------------------------
# creation functions
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda T: T.zeros(2, 3),
    lambda T: T.zeros((2, 3)),
    lambda T: T.zeros([4]),
    lambda T: T.zeros(2, 3, dtype=T.int64),
    lambda T: T.zeros(0),
    lambda T: T.zeros(2, 0),
    lambda T: T.zeros(()),
    lambda T: T.ones(3, dtype=T.bool),
    lambda T: T.ones(2, 2, dtype=T.float64),
    lambda T: T.ones(T.Size([2, 1])),
    lambda T: T.full((2, 2), 3.5),
    lambda T: T.full((2,), 7),
    lambda T: T.full((2,), True),
    lambda T: T.full((1, 3), 2, dtype=T.float16),
    lambda T: T.arange(5),
    lambda T: T.arange(1, 4),
    lambda T: T.arange(0, 1, 0.25),
    lambda T: T.arange(5.0),
    lambda T: T.arange(0, 10, 3),
    lambda T: T.arange(10, 0, -2),
    lambda T: T.arange(0, 5, dtype=T.float64),
    lambda T: T.arange(0),
    lambda T: T.linspace(0, 1, 5),
    lambda T: T.linspace(-1, 1, steps=1),
    lambda T: T.linspace(2, 3, 4, dtype=T.float64),
    lambda T: T.eye(3),
    lambda T: T.eye(2, 3),
    lambda T: T.eye(2, dtype=T.int64),
    lambda T: T.arange(0, 1, 0.1),
    lambda T: T.arange(0, 0.3, 0.1),
    lambda T: T.arange(-1, 1, 0.3),
    lambda T: T.arange(1, 2.5, 0.5, dtype=T.float64),
    lambda T: T.arange(0.5, 4),
    lambda T: T.linspace(0, 1, 0),
    lambda T: T.linspace(0, 10, 7, dtype=T.int64),
    lambda T: T.full((2,), 1.7, dtype=T.int64),
    lambda T: T.full((2,), -1.7, dtype=T.int32),
    lambda T: T.tensor([1.5, 2.7, -1.5, -0.2], dtype=T.int64),
    lambda T: T.tensor([0.0, 1.5, float("nan")], dtype=T.bool),
    lambda T: T.tensor([70000.0, -1e-8, 1e-4]).half(),
    lambda T: T.tensor([1.0, float("inf"), float("-inf"), float("nan")]),
    lambda T: T.zeros(2, 3, dtype=T.float16) + 1,
])
def test_creation(make):
    check(make)


@pytest.mark.parametrize("make", [
    lambda T: T.empty(2, 3),
    lambda T: T.empty((4,), dtype=T.int32),
    lambda T: T.empty(0, 2),
])
def test_empty(make):
    check(lambda T: (make(T).shape, make(T).dtype, make(T).requires_grad))


LIKE = {
    "zeros_like": lambda T, x: T.zeros_like(x),
    "ones_like": lambda T, x: T.ones_like(x),
    "full_like": lambda T, x: T.full_like(x, 2.5),
    "zeros_like_dtype": lambda T, x: T.zeros_like(x, dtype=T.int64),
    "ones_like_dtype": lambda T, x: T.ones_like(x, dtype=T.float64),
    "empty_like_shape": lambda T, x: T.empty_like(x).shape,
    "empty_like_dtype": lambda T, x: T.empty_like(x).dtype,
    "rand_like": lambda T, x: T.rand_like(x).shape,
    "randn_like": lambda T, x: T.randn_like(x).dtype,
}


@pytest.mark.parametrize("name", list(LIKE))
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_like(name, dt):
    if dt == "int64" and name.startswith("rand"):
        name = "full_like"
    check(LIKE[name], sample((2, 3), dt, 8), dtype=dt)


def test_like_does_not_copy_requires_grad():
    check(lambda T, x: (T.zeros_like(x), T.ones_like(x).requires_grad), randn(2),
          requires_grad=True)


@pytest.mark.parametrize("shape", [(2, 3), (5,), (0,), (1, 1, 4)])
def test_random_shapes_dtypes_ranges(shape):
    def prog(T):
        r = T.rand(*shape)
        n = T.randn(shape)
        i = T.randint(0, 10, shape)
        j = T.randint(3, shape)
        d = T.rand(*shape, dtype=T.float64)
        def count(mask):
            return int(mask.sum())
        return (r.shape, r.dtype, count((r >= 0) * (r < 1)) == r.numel(),
                n.shape, n.dtype, i.shape, i.dtype, count((i >= 0) * (i < 10)) == i.numel(),
                j.dtype, count(j < 3) == j.numel(), d.dtype, r.requires_grad)
    check(prog)


def test_random_value_ranges_numpy():
    t = fg.rand(1000)
    v = values(t)
    assert v.dtype == np.float32 and v.min() >= 0 and v.max() < 1 and v.std() > 0.2
    n = values(fg.randn(2000))
    assert abs(n.mean()) < 0.15 and 0.85 < n.std() < 1.15
    i = values(fg.randint(-3, 3, (500,)))
    assert i.dtype == np.int64 and set(i.tolist()) == {-3, -2, -1, 0, 1, 2}


def test_randperm():
    def prog(T):
        p = T.randperm(7)
        return p.dtype, p.shape, sorted(p.tolist()), T.randperm(0).shape
    check(prog)


def test_normal():
    def prog(T):
        a = T.normal(0.0, 1.0, size=(3, 2))
        b = T.normal(T.zeros(4), T.ones(4))
        c = T.normal(T.zeros(2, 2, dtype=T.float64), 1.0)
        return a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype
    check(prog)
    m = values(fg.normal(5.0, 0.5, size=(4000,)))
    assert abs(m.mean() - 5.0) < 0.1 and 0.4 < m.std() < 0.6


def test_manual_seed_reproducible():
    def prog(T):
        g = T.manual_seed(123)
        a = T.rand(5)
        b = T.randn(2, 2)
        c = T.randint(0, 100, (6,))
        T.manual_seed(123)
        a2, b2, c2 = T.rand(5), T.randn(2, 2), T.randint(0, 100, (6,))
        a3 = T.rand(5)
        return (type(g).__name__, a.tolist() == a2.tolist(), b.tolist() == b2.tolist(),
                c.tolist() == c2.tolist(), a.tolist() != a3.tolist())
    check(prog)


def test_generator():
    def prog(T):
        g = T.Generator()
        r = g.manual_seed(7)
        a = T.rand(4, generator=g)
        g.manual_seed(7)
        b = T.rand(4, generator=g)
        c = T.rand(4, generator=g)
        T.manual_seed(0)
        d = T.rand(4)
        g.manual_seed(0)
        e = T.randn(3, generator=g)
        return (r is g, a.tolist() == b.tolist(), a.tolist() != c.tolist(), d.shape,
                e.shape, T.randperm(5, generator=g).dtype)
    check(prog)


# ----------------------------------------------------------------------------------------------
# attributes and Python protocol
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_item_tolist_numpy(dt):
    a = sample((2, 3), dt, seed=7)

    def prog(T, x):
        out = [x.tolist(), x[0].tolist(), x[1, 2].item(), x[0, 0].tolist(), x.dim(), len(x)]
        if dt != "bfloat16":
            out += [x.numpy(), np.asarray(x), np.asarray(x[1])]
        return out
    check(prog, a, dtype=dt)


def test_numpy_shares_memory():
    def prog(T):
        x = T.zeros(3)
        n = x.numpy()
        n[0] = 5.0
        x.add_(1)
        return x, n
    check(prog)


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "bool"])
def test_item_types(dt):
    check(lambda T, x: (x.item(), x.reshape(1).item(), x.tolist()), sample((), dt, 2), dtype=dt)


@pytest.mark.parametrize("data", [[0.0], [2.0], [[0]], [True], 3.0, 0, [False]], ids=repr)
def test_bool_float_int_of_single_element(data):
    check(lambda T: (bool(T.tensor(data)), float(T.tensor(data)), int(T.tensor(data))))


def test_len_iter():
    def prog(T):
        x = T.arange(6).reshape(3, 2)
        return len(x), [r for r in x], list(iter(T.tensor([1.5, 2.5]))), len(T.zeros(0, 2))
    check(prog)


def test_t_and_mt():
    a = randn(2, 3)
    b = randn(4, 2, 3)
    check(lambda T, x, y: (x.T, x.mT, y.mT, x.t(), T.t(x)), a, b,
          dtype="float32")


def test_data_attribute():
    def prog(T, x):
        d = x.data
        return d, d.requires_grad, d.is_leaf, x.requires_grad, d.grad_fn is None
    check(prog, randn(3), requires_grad=True)


def test_leaf_attributes():
    def prog(T, x, y):
        z = x * 2
        w = y * 2
        return (x.is_leaf, y.is_leaf, z.is_leaf, w.is_leaf, x.grad, x.grad_fn, z.requires_grad,
                w.requires_grad, w.grad_fn)
    check(prog, randn(3), randn(3), requires_grad=(True, False))


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_requires_grad_factory_kwargs(dt):
    def prog(T):
        a = T.zeros(2, requires_grad=True, dtype=getattr(T, dt))
        b = T.ones(2, 2, requires_grad=True)
        c = T.tensor([1.0], requires_grad=True)
        d = T.full((2,), 2.0, requires_grad=True)
        e = T.arange(3.0, requires_grad=True)
        return [(t.requires_grad, t.is_leaf, t.dtype) for t in (a, b, c, d, e)]
    check(prog)


# ----------------------------------------------------------------------------------------------
# elementwise ops (forward values)
# ----------------------------------------------------------------------------------------------

UNARY = {
    "neg": lambda T, x: -x,
    "neg_fn": lambda T, x: T.neg(x),
    "exp": lambda T, x: T.exp(x),
    "exp_m": lambda T, x: x.exp(),
    "log": lambda T, x: T.log(T.abs(x) + 0.1),
    "log_m": lambda T, x: x.abs().log(),
    "sin": lambda T, x: T.sin(x),
    "cos": lambda T, x: x.cos(),
    "tanh": lambda T, x: T.tanh(x),
    "sigmoid": lambda T, x: T.sigmoid(x),
    "sigmoid_m": lambda T, x: x.sigmoid(),
    "relu": lambda T, x: T.relu(x),
    "relu_m": lambda T, x: x.relu(),
    "abs": lambda T, x: abs(x),
    "abs_m": lambda T, x: x.abs(),
    "sqrt": lambda T, x: T.sqrt(T.abs(x)),
    "pow2": lambda T, x: x ** 2,
    "pow_half": lambda T, x: x.abs() ** 0.5,
    "pow_neg": lambda T, x: T.pow(x.abs() + 0.5, -1.5),
    "pow_int3": lambda T, x: T.pow(x, 3),
    "rpow": lambda T, x: 2 ** x,
    "rpow_fn": lambda T, x: T.pow(2.5, x),
    "rsub": lambda T, x: 1 - x,
    "rdiv": lambda T, x: 1 / (x.abs() + 0.5),
    "clamp": lambda T, x: T.clamp(x, -0.5, 0.5),
    "clamp_min": lambda T, x: x.clamp(min=0.1),
    "clamp_max": lambda T, x: x.clamp(max=-0.1),
    "pos_ops": lambda T, x: (x + 1) * 3 - 2 / 4,
}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 3)], ids=str)
def test_unary(name, dt, shape):
    check(UNARY[name], randn(*shape, seed=11), dtype=dt)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["neg", "exp", "sin", "tanh", "sigmoid", "relu", "pow2", "abs"])
def test_unary_low_precision(name, dt):
    check(UNARY[name], randn(7, seed=12), dtype=dt)


@pytest.mark.parametrize("dt", INT_DTYPES + ("bool",))
@pytest.mark.parametrize("name", ["neg", "abs", "relu", "pow2", "exp", "sin", "sqrt", "sigmoid",
                                  "clamp", "rsub"])
def test_unary_integer_inputs(name, dt):
    if dt == "bool" and name in ("abs", "sqrt"):  # torch: "abs_cpu" not implemented for 'Bool'
        name = "exp"
    data = sample((5,), dt, seed=13)
    check(UNARY[name], data, dtype=dt)


BINARY = {
    "add": lambda T, x, y: x + y,
    "add_fn": lambda T, x, y: T.add(x, y),
    "add_m": lambda T, x, y: x.add(y),
    "sub": lambda T, x, y: x - y,
    "sub_m": lambda T, x, y: x.sub(y),
    "mul": lambda T, x, y: x * y,
    "mul_fn": lambda T, x, y: T.mul(x, y),
    "div": lambda T, x, y: x / y,
    "div_m": lambda T, x, y: x.div(y),
    "pow": lambda T, x, y: x.abs() ** y,
    "pow_fn": lambda T, x, y: T.pow(x.abs() + 0.1, y),
    "maximum": lambda T, x, y: T.maximum(x, y),
    "maximum_m": lambda T, x, y: x.maximum(y),
    "where": lambda T, x, y: T.where(x > y, x, y),
    "where_m": lambda T, x, y: x.where(x > 0, y),
    "where_scalar": lambda T, x, y: T.where(x > y, x, 0.0),
    "eq": lambda T, x, y: (x == y, T.eq(x, y), x.eq(y)),
    "ne": lambda T, x, y: (x != y, T.ne(x, y), x.ne(y)),
    "lt": lambda T, x, y: (x < y, T.lt(x, y), x.lt(y)),
    "le": lambda T, x, y: (x <= y, T.le(x, y), x.le(y)),
    "gt": lambda T, x, y: (x > y, T.gt(x, y), x.gt(y)),
    "ge": lambda T, x, y: (x >= y, T.ge(x, y), x.ge(y)),
}

BCAST_SHAPES = [
    ((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 1), (1, 3)), ((4, 1, 3), (2, 1)),
    ((), (2, 3)), ((2, 3), ()), ((), ()), ((0, 3), (3,)), ((2, 0), (1,)),
]


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", BCAST_SHAPES, ids=str)
def test_binary(name, dt, sa, sb):
    a = randn(*sa, seed=21)
    b = randn(*sb, seed=22)
    if name.startswith("div"):
        b = np.sign(b) * (np.abs(b) + 0.5)
    if name in ("eq", "ne", "le", "ge") and a.size and b.size:
        a = np.round(a)
        b = np.round(b)
    check(BINARY[name], a, b, dtype=dt)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"] + list(INT_DTYPES))
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "where", "lt", "eq"])
def test_binary_other_dtypes(name, dt):
    check(BINARY[name], sample((2, 3), dt, 31), sample((3,), dt, 32), dtype=dt)


def test_comparison_with_scalars():
    def prog(T, x):
        return x == 1.0, x != 0, x < 0.5, 0.5 <= x, x > 1, x >= 1.5, x.eq(2), T.gt(x, 0)
    check(prog, np.array([0.0, 0.5, 1.0, 1.5, 2.0]), dtype="float32")


def test_clamp_variants():
    def prog(T, x, lo, hi):
        return (x.clamp(lo, hi), T.clamp(x, min=lo), T.clamp(x, max=hi),
                x.clamp(-1, 1), T.clamp(x.long(), 0, 1), T.clamp(x.long(), 0.5))
    check(prog, randn(2, 4), np.array([-0.5, 0, -1, 0.2]), np.array(0.7), dtype="float32")


def test_where_variants():
    def prog(T, c, x, y):
        cond = c > 0
        return (T.where(cond, x, y), T.where(cond, 1.0, 0.0), T.where(cond, x, 2),
                T.where(cond, x.double(), y), T.where(cond, T.tensor(1), T.tensor(2.5)))
    check(prog, randn(2, 3, seed=1), randn(2, 3, seed=2), randn(3, seed=3), dtype="float32")


# ----------------------------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda T, x: x.sum(),
    "sum_fn": lambda T, x: T.sum(x),
    "sum0": lambda T, x: x.sum(0),
    "sum_neg": lambda T, x: x.sum(dim=-1),
    "sum_keep": lambda T, x: x.sum(1, keepdim=True),
    "sum_tuple": lambda T, x: x.sum((0, 2)),
    "sum_tuple_keep": lambda T, x: T.sum(x, dim=(0, -1), keepdim=True),
    "sum_dtype": lambda T, x: x.sum(dtype=T.float64),
    "mean": lambda T, x: x.mean(),
    "mean_fn": lambda T, x: T.mean(x, 1),
    "mean_keep": lambda T, x: x.mean(-1, keepdim=True),
    "mean_tuple": lambda T, x: x.mean((1, 2)),
    "amax0": lambda T, x: x.amax(0),
    "amax_fn": lambda T, x: T.amax(x, dim=-1, keepdim=True),
    "amax_tuple": lambda T, x: x.amax((0, 1)),
    "amax_all": lambda T, x: x.amax(),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_reductions(name, dt):
    check(REDUCTIONS[name], randn(2, 3, 4, seed=41), dtype=dt)


@pytest.mark.parametrize("name", ["sum", "sum0", "sum_keep", "mean", "mean_fn", "sum_dtype"])
@pytest.mark.parametrize("shape", [(0, 3, 2), (2, 0, 3)], ids=str)
def test_reductions_empty(name, shape):
    check(REDUCTIONS[name], randn(*shape), dtype="float32")


@pytest.mark.parametrize("dt", INT_DTYPES + ("bool", "float16", "bfloat16"))
@pytest.mark.parametrize("name", ["sum", "sum0", "sum_keep", "amax0", "sum_dtype", "mean"])
def test_reductions_other_dtypes(name, dt):
    check(REDUCTIONS[name], sample((2, 3, 4), dt, 42), dtype=dt)


def test_reductions_zero_dim():
    def prog(T, x):
        return x.sum(), x.sum(0), x.mean(), x.mean(-1), x.amax(), x.sum(0, keepdim=True)
    check(prog, np.array(2.5), dtype="float32")


# ----------------------------------------------------------------------------------------------
# matmul
# ----------------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)), ((1, 2, 3), (4, 3, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_matmul(sa, sb, dt):
    def prog(T, x, y):
        return x @ y, T.matmul(x, y), x.matmul(y)
    check(prog, randn(*sa, seed=51), randn(*sb, seed=52), dtype=dt, rtol=1e-5 if dt ==
          "float32" else 1e-9)


@pytest.mark.parametrize("dt", INT_DTYPES)
def test_matmul_int(dt):
    check(lambda T, x, y: x @ y, sample((2, 3), dt, 1), sample((3, 2), dt, 2), dtype=dt)


MATMUL_BAD = [
    ((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (4,)), ((5,), (3, 4)), ((5, 2, 3), (5, 4, 2)),
    ((5, 2, 3), (4,)), ((3,), (2, 4, 5)), ((2, 2, 3), (3, 3, 4)), ((), (3,)), ((3,), ()),
    ((2, 3), (2, 4, 5)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_BAD, ids=str)
def test_matmul_shape_errors(sa, sb):
    check(lambda T, x, y: x @ y, randn(*sa), randn(*sb), dtype="float32", expect_error=True,
          full_message=True)


def test_matmul_dtype_mismatch_error():
    check(lambda T, x, y: x @ y, randn(2, 3), randn(3, 2), dtype=("float32", "float64"),
          expect_error=True)


# ----------------------------------------------------------------------------------------------
# shape ops
# ----------------------------------------------------------------------------------------------

SHAPE_OPS = {
    "view": lambda T, x: x.view(6, 4),
    "view_neg": lambda T, x: x.view(-1),
    "view_tuple": lambda T, x: x.view((4, -1)),
    "view_size": lambda T, x: x.view(T.Size([2, 12])),
    "reshape": lambda T, x: x.reshape(3, 8),
    "reshape_fn": lambda T, x: T.reshape(x, (-1, 2)),
    "reshape_nc": lambda T, x: x.transpose(0, 2).reshape(-1),
    "permute": lambda T, x: x.permute(2, 0, 1),
    "permute_tuple": lambda T, x: x.permute((1, 2, 0)),
    "permute_fn": lambda T, x: T.permute(x, (0, 2, 1)),
    "permute_neg": lambda T, x: x.permute(-1, 0, -2),
    "transpose": lambda T, x: x.transpose(0, 2),
    "transpose_fn": lambda T, x: T.transpose(x, -1, 1),
    "expand": lambda T, x: x[:, :1].expand(2, 5, 4),
    "expand_new": lambda T, x: x[0, 0].expand(3, 4),
    "expand_neg": lambda T, x: x[:, :1].expand(-1, 3, -1),
    "expand_tuple": lambda T, x: x[:1].expand((2, 3, 4)),
    "unsqueeze0": lambda T, x: x.unsqueeze(0),
    "unsqueeze_neg": lambda T, x: T.unsqueeze(x, -1),
    "unsqueeze_mid": lambda T, x: x.unsqueeze(2),
    "squeeze": lambda T, x: x[:1, :, :1].squeeze(),
    "squeeze_dim": lambda T, x: x[:1].squeeze(0),
    "squeeze_noop": lambda T, x: x.squeeze(1),
    "squeeze_fn": lambda T, x: T.squeeze(x[:, :1], 1),
    "cat0": lambda T, x: T.cat([x, x * 2], 0),
    "cat1": lambda T, x: T.cat((x, x[:, :1]), dim=1),
    "cat_neg": lambda T, x: T.cat([x, x, x], -1),
    "cat_single": lambda T, x: T.cat([x]),
    "cat_empty": lambda T, x: T.cat([x, x[:0]]),
    "flat_view_chain": lambda T, x: x.view(4, 6).t().reshape(2, 12).view(-1, 4),
}


@pytest.mark.parametrize("name", list(SHAPE_OPS))
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_shape_ops(name, dt):
    check(SHAPE_OPS[name], sample((2, 3, 4), dt, 61), dtype=dt)


def test_shape_ops_zero_dim():
    def prog(T, x):
        return (x.view(1), x.reshape(1, 1), x.unsqueeze(0), x.view(()), x.expand(2, 3),
                x.squeeze(), x.reshape(-1), x.t(), x.view(-1))
    check(prog, np.array(3.5), dtype="float32")


def test_cat_promotes():
    def prog(T):
        return (T.cat([T.tensor([1, 2]), T.tensor([1.5])]),
                T.cat([T.tensor([1], dtype=T.int8), T.tensor([True])]),
                T.cat([T.zeros(2, 3), T.zeros(0)]))
    check(prog)


# ----------------------------------------------------------------------------------------------
# basic indexing
# ----------------------------------------------------------------------------------------------

INDICES = {
    "int": lambda x: x[1],
    "neg_int": lambda x: x[-1],
    "two_ints": lambda x: x[0, 2],
    "three_ints": lambda x: x[1, 2, 3],
    "slice": lambda x: x[1:],
    "slice_step": lambda x: x[:, ::2],
    "slice_step3": lambda x: x[..., 1::3],
    "slice_neg": lambda x: x[:, -2:],
    "slice_empty": lambda x: x[5:10],
    "slice_clamped": lambda x: x[:, 1:100],
    "slice_reversed_bounds": lambda x: x[:, 2:1],
    "col": lambda x: x[:, 1],
    "ellipsis": lambda x: x[..., 0],
    "ellipsis_mid": lambda x: x[0, ..., 1],
    "none": lambda x: x[None],
    "none_mid": lambda x: x[:, None, 1:3],
    "none_end": lambda x: x[..., None],
    "mixed": lambda x: x[1, None, ::2, -1],
    "full": lambda x: x[:],
    "empty_tuple": lambda x: x[()],
    "ellipsis_only": lambda x: x[...],
    "numpy_int": lambda x: x[np.int64(1), np.int32(-1)],
    "neg_slice": lambda x: x[-2:-1, -3:],
    "big_step": lambda x: x[::10, ::5],
    "slice_none_parts": lambda x: x[None:None:2, 1:None],
}


@pytest.mark.parametrize("name", list(INDICES))
@pytest.mark.parametrize("dt", ["float32", "int64"])
def test_getitem(name, dt):
    check(lambda T, x: INDICES[name](x), sample((2, 3, 4), dt, 71), dtype=dt)


def test_getitem_zero_dim():
    check(lambda T, x: (x[()], x[None], x[...], x[None, ..., None]), np.array(1.5),
          dtype="float32")


# ----------------------------------------------------------------------------------------------
# softmax / log_softmax
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_softmax(dim, dt):
    def prog(T, x):
        return (x.softmax(dim), T.softmax(x, dim), x.log_softmax(dim=dim),
                T.log_softmax(x, dim=dim), T.softmax(x * 100, dim))
    check(prog, randn(2, 3, 4, seed=81), dtype=dt)


def test_softmax_zero_dim_and_empty():
    check(lambda T, x, y: (x.softmax(0), x.log_softmax(-1), y.softmax(1), y.log_softmax(0)),
          np.array(0.3), randn(0, 3), dtype="float32")


def test_softmax_dtype_kwarg():
    check(lambda T, x: (T.softmax(x, 0, dtype=T.float64), x.log_softmax(0, dtype=T.float64)),
          randn(4), dtype="float32")


# ----------------------------------------------------------------------------------------------
# errors (type and message as torch; failed ops leave inputs unchanged)
# ----------------------------------------------------------------------------------------------

ERRORS = {
    "broadcast": (lambda T, x, y: x + y, (2, 3), (4,)),
    "broadcast_mul": (lambda T, x, y: x * y, (2, 3), (2, 4)),
    "broadcast_where": (lambda T, x, y: T.where(x > 0, x, y), (2, 3), (2,)),
    "broadcast_cmp": (lambda T, x, y: x < y, (3,), (4,)),
    "view_bad": (lambda T, x, y: x.view(5), (2, 3), ()),
    "view_two_neg": (lambda T, x, y: x.view(-1, -1), (2, 3), ()),
    "view_noncontig": (lambda T, x, y: x.t().view(6), (2, 3), ()),
    "reshape_bad": (lambda T, x, y: x.reshape(4, -1), (2, 3), ()),
    "expand_bad": (lambda T, x, y: x.expand(3, 4), (2, 3), ()),
    "expand_fewer": (lambda T, x, y: x.expand(3), (2, 3), ()),
    "permute_bad": (lambda T, x, y: x.permute(0, 0), (2, 3), ()),
    "permute_len": (lambda T, x, y: x.permute(0), (2, 3), ()),
    "cat_size": (lambda T, x, y: T.cat([x, y], 1), (2, 3), (3, 3)),
    "cat_dims": (lambda T, x, y: T.cat([x, y]), (2, 3), (3,)),
    "cat_empty_list": (lambda T, x, y: T.cat([]), (2, 3), ()),
    "dim_sum": (lambda T, x, y: x.sum(2), (2, 3), ()),
    "dim_sum_neg": (lambda T, x, y: x.sum(-3), (2, 3), ()),
    "dim_mean": (lambda T, x, y: x.mean((0, 5)), (2, 3), ()),
    "dim_softmax": (lambda T, x, y: x.softmax(2), (2, 3), ()),
    "dim_transpose": (lambda T, x, y: x.transpose(0, 3), (2, 3), ()),
    "dim_unsqueeze": (lambda T, x, y: x.unsqueeze(4), (2, 3), ()),
    "dim_squeeze": (lambda T, x, y: x.squeeze(2), (2, 3), ()),
    "dim_cat": (lambda T, x, y: T.cat([x, x], 2), (2, 3), ()),
    "dim_amax": (lambda T, x, y: x.amax(-4), (2, 3), ()),
    "dim_zero_d": (lambda T, x, y: y.sum(1), (2, 3), ()),
    "index_int": (lambda T, x, y: x[2], (2, 3), ()),
    "index_neg": (lambda T, x, y: x[:, -4], (2, 3), ()),
    "index_too_many": (lambda T, x, y: x[0, 0, 0], (2, 3), ()),
    "index_zero_d": (lambda T, x, y: y[0], (2, 3), ()),
    "index_neg_step": (lambda T, x, y: x[::-1], (2, 3), ()),
    "index_zero_step": (lambda T, x, y: x[::0], (2, 3), ()),
    "item_many": (lambda T, x, y: x.item(), (2, 3), ()),
    "item_empty": (lambda T, x, y: x[:0].item(), (2, 3), ()),
    "bool_many": (lambda T, x, y: bool(x), (2, 3), ()),
    "bool_empty": (lambda T, x, y: bool(x[:0]), (2, 3), ()),
    "if_many": (lambda T, x, y: 1 if x > 0 else 0, (2, 3), ()),
    "float_many": (lambda T, x, y: float(x), (2, 3), ()),
    "len_zero_d": (lambda T, x, y: len(y), (2, 3), ()),
    "iter_zero_d": (lambda T, x, y: list(y), (2, 3), ()),
    "mean_int": (lambda T, x, y: x.long().mean(), (2, 3), ()),
    "sub_bool": (lambda T, x, y: (x > 0) - (y > 0), (2, 3), ()),
    "neg_bool": (lambda T, x, y: -(x > 0), (2, 3), ()),
    "matmul_0d": (lambda T, x, y: T.matmul(y, y), (2, 3), ()),
    "add_int_float_inplace": (lambda T, x, y: x.long().add_(1.5), (2, 3), ()),
    "arange_bad": (lambda T, x, y: T.arange(0, 1, 0), (2, 3), ()),
    "arange_sign": (lambda T, x, y: T.arange(0, 5, -1), (2, 3), ()),
    "zeros_neg": (lambda T, x, y: T.zeros(-1), (2, 3), ()),
    "tensor_ragged": (lambda T, x, y: T.tensor([[1, 2], [3]]), (2, 3), ()),
    "linspace_neg": (lambda T, x, y: T.linspace(0, 1, -1), (2, 3), ()),
    "int_neg_pow": (lambda T, x, y: T.tensor([1, 2]) ** -1, (2, 3), ()),
    "amax_empty": (lambda T, x, y: x[:0].amax(0), (2, 3), ()),
    "cat_zero_d": (lambda T, x, y: T.cat([y, y]), (2, 3), ()),
    "view_zero_ambiguous": (lambda T, x, y: x[:0].view(0, -1), (2, 3), ()),
    "expand_leading_neg": (lambda T, x, y: x.expand(-1, 2, 3), (2, 3), ()),
    "view_bad_neg": (lambda T, x, y: x.view(-2, 3), (2, 3), ()),
    "tensor_uint8_overflow": (lambda T, x, y: T.tensor([300], dtype=T.uint8), (2, 3), ()),
    "where_cond_not_bool": (lambda T, x, y: T.where(x, x, y), (2, 3), ()),
    "squeeze_dims_range": (lambda T, x, y: x.squeeze((0, 2)), (2, 3), ()),
    "inplace_zero_d_bcast": (lambda T, x, y: y.add_(x), (2, 3), ()),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(name):
    prog, sa, sb = ERRORS[name]
    check(prog, randn(*sa, seed=91), randn(*sb, seed=92), dtype="float32", expect_error=True)


@pytest.mark.parametrize("name", [
    "broadcast", "broadcast_mul", "view_bad", "view_noncontig", "reshape_bad", "expand_bad",
    "cat_size", "cat_dims", "dim_sum", "dim_softmax", "dim_transpose", "index_int",
    "index_neg", "index_too_many", "item_many", "bool_many", "matmul_0d", "dim_zero_d",
    "index_zero_d", "add_int_float_inplace", "mean_int", "len_zero_d", "iter_zero_d",
])
def test_errors_full_message(name):
    prog, sa, sb = ERRORS[name]
    check(prog, randn(*sa, seed=91), randn(*sb, seed=92), dtype="float32", expect_error=True,
          full_message=True)


def test_numpy_helpers_roundtrip():
    # sanity checks of the oracle helpers themselves
    a, b = pair(np.array([1.0, 2.0]), dtype="float64")
    assert dtype_name(a.dtype) == dtype_name(b.dtype) == "float64"
    assert_close(a, b)
    with pytest.raises(AssertionError):
        assert_close(a * 2, b)
    with pytest.raises(AssertionError):
        assert_close(a.float(), b)
    calls = []

    def differs(T):
        calls.append(T)
        return T.ones(2) if len(calls) == 1 else T.zeros(2)
    with pytest.raises(AssertionError):
        check(differs)
    assert len(MODULES) == 2


# ----------------------------------------------------------------------------------------------
# a few more Python-protocol details
# ----------------------------------------------------------------------------------------------

def test_array_protocol_dtype_and_noncontiguous_numpy():
    def prog(T):
        t = T.arange(6.0).view(2, 3)
        n = t.t().numpy()
        n[0, 1] = 100.0
        return t, n, np.asarray(t, dtype=np.float64), np.asarray(t[0]).dtype.name
    check(prog)


def test_tensor_from_list_of_zero_d_tensors():
    def prog(T):
        return (T.tensor([T.tensor(1.0), T.tensor(2.5)]),
                T.tensor([T.tensor(1), T.tensor(2)]))
    check(prog)


def test_scalar_conversion_of_requires_grad_tensor():
    def prog(T):
        x = T.tensor([1.5, -2.0], requires_grad=True)
        return x[0].item(), float(x[1]), x.tolist(), bool(x[0])
    check(prog)
    assert_same_warnings(lambda: prog(fg), lambda: prog(torch))


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 88.0, -88.0, 1e30])


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_unary_special_values(name, dt):
    check(UNARY[name], SPECIAL, dtype=dt)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "where", "eq",
                                  "lt", "ge"])
def test_binary_special_values(name):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    check(BINARY[name], a, b, dtype="float32")


def test_special_values_in_reductions_and_softmax():
    def prog(T, x):
        rows = x.reshape(1, -1)
        return (x.sum(), x[:4].sum(), x.amax(), x[:4].amax(), x.mean(), rows.softmax(-1),
                T.tensor([-float("inf"), 0.0, 1.0]).softmax(0),
                T.tensor([-float("inf"), 0.0]).log_softmax(0),
                T.tensor([1000.0, 1000.0]).softmax(0), T.clamp(x, -1, 1))
    check(prog, SPECIAL, dtype="float32")


def test_integer_division_by_zero():
    check(lambda T: (T.tensor([1, 0, -1]) / 0, T.tensor([1, 0, -1]) / T.tensor([0, 0, 0]),
                     T.tensor([1.0, 0.0, -1.0]) / 0))


@pytest.mark.parametrize("dt", ["float32", "int64", "float64"])
def test_inplace_operators(dt):
    def prog(T, x, y):
        xid = x
        x += y
        x *= 2
        x -= y
        ident = x is xid
        z = x.clone()
        if dt != "int64":
            z /= 2
        return x, z, ident, x._version
    check(prog, sample((2, 3), dt, 11), sample((3,), dt, 12), dtype=dt)


def test_integer_pow_with_negative_tensor_exponent():
    check(lambda T: (T.pow(T.tensor([1, 2, 3]), T.tensor([-1, 2, -2])),
                     T.tensor([-1, 2]) ** T.tensor([-3, 0])))


def test_scalar_ops_on_zero_d_tensors():
    def prog(T):
        i = T.tensor(2)
        f = T.tensor(1.5)
        h = T.tensor(1.5, dtype=T.float16)
        return (i * 2.5, 2.5 * i, i + True, f * 2, h * 2.0, h + 1, i / 4, i ** 2, 2 ** i,
                f ** 2, i > 1.5, -i, abs(-f))
    check(prog)


def test_size_arithmetic_and_numpy_scalars():
    def prog(T):
        s = T.zeros(2, 3).shape
        return (s + (1,), s[::-1],
                T.tensor(np.float32(1.5)), T.tensor(np.int32(3)), T.tensor(np.float64(2)),
                T.tensor(np.bool_(True)), T.zeros(np.int64(2), 3).shape)
    check(prog)


def test_tensor_of_tensor_warns():
    def prog(T):
        return T.tensor(T.ones(2))
    check(prog)
    assert_same_warnings(lambda: prog(fg), lambda: prog(torch))


def _set_data(lib, new):
    """What assigning `.data` does to a parameter and its AccumulateGrad node."""
    w = lib.nn.Parameter(lib.ones(3))
    first = (w * 1).grad_fn.next_functions[0][0]
    try:
        w.data = new(lib)
    except (TypeError, RuntimeError) as e:
        return type(e).__name__, str(e), w.dtype == lib.float32
    again = (w * 1).grad_fn.next_functions[0][0]
    (w * 3).sum().backward()
    return first is again, str(w.dtype), w.grad.tolist()


@pytest.mark.parametrize("new", [
    lambda t: t.zeros(3), lambda t: t.zeros(3, dtype=t.float64), lambda t: [1, 2],
    lambda t: 5, lambda t: t.zeros(3, dtype=t.long),
], ids=["same_dtype", "float64", "list", "int", "long"])
def test_setting_data_matches_torch(new):
    assert _set_data(fg, new) == _set_data(torch, new)


def _setitem(lib, shape, index, value_shape):
    """`x[index] = value` with a value of leading size-1 dims: the result and the grads."""
    base = lib.zeros(shape, dtype=lib.float64, requires_grad=True)
    x = base * 1
    value = lib.arange(float(np.prod(value_shape)), dtype=lib.float64).reshape(value_shape)
    value.requires_grad_()
    x[index] = value
    (x * lib.arange(float(x.numel()), dtype=lib.float64).reshape(shape)).sum().backward()
    # The class name: PyTorch's CopyBackwards names itself `torch::autograd::CopyBackwards`.
    return x.tolist(), base.grad.tolist(), value.grad.tolist(), type(x.grad_fn).__name__


@pytest.mark.parametrize("shape,index,value_shape", [
    ((2, 3), 0, (1, 3)), ((2, 3), 0, (1, 1, 3)), ((2, 3), 0, (1, 1)), ((3,), slice(0, 2), (1, 2)),
    ((2, 3), (slice(None), 1), (1, 2)), ((2, 3), Ellipsis, (1, 2, 3)), ((), Ellipsis, (1, 1)),
])
def test_setitem_drops_the_values_leading_unit_dims(shape, index, value_shape):
    assert _setitem(fg, shape, index, value_shape) == _setitem(torch, shape, index, value_shape)


def test_copy_node_names_itself_as_torch():
    # CopyBackwards is written by hand in PyTorch: its name() is the C++ qualified name.
    def names(lib):
        x = lib.zeros(3, requires_grad=True).clone()
        y = x.copy_(lib.ones(3, requires_grad=True))
        return y.grad_fn.name(), type(y.grad_fn).__name__, (x * 2).grad_fn.name()

    assert names(fg) == names(torch)


def _tensor_split_parts(lib):
    t = lib.arange(10.)
    out = [[p.tolist() for p in t.tensor_split(arg)]
           for arg in ([3, 1, 7], [-3, 20], 3, 4, [0], [], [10, 2], (2, 5), 1)]
    m = lib.arange(12.).reshape(3, 4)
    out.append([p.tolist() for p in m.tensor_split(3, dim=1)])
    out.append([p.tolist() for p in lib.tensor_split(m, lib.tensor([1, 2]), dim=1)])
    out.append([p.tolist() for p in lib.tensor_split(m, lib.tensor(2))])
    x = lib.arange(4., requires_grad=True) * 1
    parts = x.tensor_split(2)
    out.append([p.grad_fn.name() for p in parts])
    parts[0].mul_(2)  # each part is a slice of its own: writable
    out.append(x.tolist())
    with pytest.raises(RuntimeError) as err:
        t.tensor_split(0)
    out.append(str(err.value))
    return out


def test_tensor_split_parts_are_slices_as_torch():
    # Indices out of order give an empty part and a part from the smaller index on.
    assert _tensor_split_parts(fg) == _tensor_split_parts(torch)


def _take_along_dim_cases(lib):
    out = []
    for idx, dim in [([[0], [1], [2]], 1), ([[0, 1]], 0), ([0, 2], None), ([[[0]]], 2),
                     ([[-1]], 1), ([[0, 3]], 1), ([[0], [2]], 0), ([[1, 0, 2, 3]], -1)]:
        x = lib.arange(12.).reshape(3, 4).requires_grad_()
        try:
            y = lib.take_along_dim(x, lib.tensor(idx), dim)
        except RuntimeError as e:
            out.append(str(e))
            continue
        fn, chain = y.grad_fn, []
        while fn is not None and fn.name() != "torch::autograd::AccumulateGrad":
            chain.append(fn.name())
            fn = fn.next_functions[0][0]
        y.sum().backward()
        out.append((y.tolist(), chain, x.grad.tolist()))
    return out


def test_take_along_dim_broadcasts_input_and_indices_as_torch():
    # Indices of one row serve every row (and the input's expand is in the graph).
    assert _take_along_dim_cases(fg) == _take_along_dim_cases(torch)
