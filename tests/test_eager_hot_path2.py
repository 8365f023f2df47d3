"""relu's float path that the recorders call themselves (`ops/unary.py`, `_relu_float`:
relu's `ufunc`) and the view calls generated from the recorders' template
(`_recorded_calls.make_view_calls`): values, signs, dtypes, layouts, gradients and Nodes as
PyTorch's, for every dtype and size class the kernel tells apart.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.ops import unary as U  # noqa: E402

# The values whose relu tells orders and signs apart: -0.0 (PyTorch keeps its sign), NaN
# (passed on), both infinities.
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, -3.0, 0.5]


def _data(dtype, n: int) -> np.ndarray:
    """`n` values of `dtype`, the special ones first, then a random mix of signs."""
    rng = np.random.default_rng(n)
    if np.dtype(dtype).kind == "f":
        extra = rng.standard_normal(max(n - len(SPECIAL), 0))
        return np.concatenate([SPECIAL, extra])[:n].astype(dtype)
    return rng.integers(-100, 100, n).astype(dtype)


def _same(got, want) -> None:
    """Equal values, NaNs and zero signs, dtype, shape and strides."""
    assert str(got.dtype) == str(want.dtype)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    g, w = got.detach().numpy(), want.detach().numpy()
    np.testing.assert_array_equal(g, w)  # (NaN equal to NaN)
    if g.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


# Sizes on each side of the kernel's bounds: the small path, the block of zeros, the C kernel.
SIZES = [1, 10, U.RELU_SIMD_MIN, U.RELU_ZERO_BLOCK + 8, U.RELU_NATIVE_MIN + 40]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_relu_float_values_and_gradient(dtype, n, layout):
    data = _data(dtype, 2 * n)
    outs = []
    for lib in (fusegrad, torch):
        x = lib.from_numpy(data.copy()).requires_grad_()
        v = x[::2] if layout == "strided" else x[:n]
        y = v.relu()
        g = lib.from_numpy(np.linspace(-1, 1, n).astype(dtype))
        y.backward(g)
        outs.append((y, x.grad, type(y.grad_fn).__name__))
    _same(outs[0][0], outs[1][0])
    _same(outs[0][1], outs[1][1])
    assert outs[0][2] == outs[1][2] == "ReluBackward0"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_of_a_0d_tensor(dtype):
    # NumPy's maximum of two 0-d arrays is a NumPy scalar: the result is still a 0-d tensor.
    for value in (-2.0, -0.0, 3.0, np.nan):
        got, want = (lib.tensor(value, dtype=getattr(lib, np.dtype(dtype).name),
                                requires_grad=True).relu() for lib in (fusegrad, torch))
        _same(got, want)
        assert got.grad_fn.name() == want.grad_fn.name()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.float16])
def test_relu_other_dtypes_take_the_kernel(dtype):
    data = _data(dtype, 12).reshape(3, 4)
    for x in (data, data.T, data[1]):
        got = fusegrad.from_numpy(np.ascontiguousarray(x)).relu()
        want = torch.from_numpy(np.ascontiguousarray(x)).relu()
        _same(got, want)


@pytest.mark.parametrize("make", [lambda lib: lib.tensor([True, False]),
                                  lambda lib: lib.tensor([1 + 1j, -1j])])
def test_relu_errors(make):
    with pytest.raises((RuntimeError, NotImplementedError)) as want:
        torch.relu(make(torch))
    with pytest.raises(want.type, match=str(want.value)):
        fusegrad.relu(make(fusegrad))


@pytest.mark.parametrize("n", [10, U.RELU_NATIVE_MIN + 40])
def test_relu_in_place_and_functional_spellings(n):
    data = _data(np.float32, n)
    got = {}
    for lib in (fusegrad, torch):
        x = lib.from_numpy(data.copy())
        y = lib.from_numpy(data.copy())
        r = y.relu_()
        assert r is y
        z = lib.from_numpy(data.copy())
        lib.nn.functional.relu(z, inplace=True)
        got[lib] = (lib.relu(x), lib.nn.functional.relu(x), y, z, y._version)
    for a, b in zip(got[fusegrad][:4], got[torch][:4]):
        _same(a, b)
    assert got[fusegrad][4] == got[torch][4]
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        torch.relu(torch.ones(2), out=torch.ones(2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        fusegrad.relu(fusegrad.ones(2), out=fusegrad.ones(2))


def test_relu_under_no_grad_and_of_a_view_of_a_leaf():
    data = _data(np.float32, 12).reshape(3, 4)
    res = {}
    for lib in (fusegrad, torch):
        x = lib.from_numpy(data.copy()).requires_grad_()
        with lib.no_grad():
            plain = x.relu()
        y = x[1].relu()
        y.sum().backward()
        res[lib] = (plain, plain.requires_grad, y, x.grad)
    _same(res[fusegrad][0], res[torch][0])
    assert res[fusegrad][1] is res[torch][1] is False
    _same(res[fusegrad][2], res[torch][2])
    _same(res[fusegrad][3], res[torch][3])


# ------------------------------------------------------------ the generated view calls


def _view_graph(lib, expr: str):
    """`expr` of a leaf (its accumulator made, then met again) and the leaf's gradient."""
    x = lib.arange(12.0).reshape(3, 4).requires_grad_()
    y = eval(expr, {"x": x})
    again = eval(expr, {"x": x})  # the leaf's accumulator met again in this graph
    (y * 2 + again).sum().backward()
    fn = y.grad_fn
    return (y, x.grad, fn.name(), fn.next_functions[0][0].name(),
            fn.next_functions[0][0] is again.grad_fn.next_functions[0][0], y._version,
            y._base is x)


@pytest.mark.parametrize("expr", ["x.view(12)", "x.view(-1)", "x[1]", "x[-1]",
                                  "x.view(12)[3]", "x[2].view(2, 2)"])
def test_view_calls_record_as_torch(expr):
    got, want = _view_graph(fusegrad, expr), _view_graph(torch, expr)
    _same(got[0], want[0])
    _same(got[1], want[1])
    assert got[2:] == want[2:]


def test_view_of_a_no_grad_view_of_a_leaf():
    # A view made under no_grad of a leaf that requires grad has no accumulator: the view
    # of it records an edge to nothing, and backward gives the leaf no gradient.
    res = {}
    for lib in (fusegrad, torch):
        x = lib.arange(6.0).requires_grad_()
        with lib.no_grad():
            v = x.view(2, 3)
        y = v.view(6)
        z = v[1]
        res[lib] = (y.requires_grad, z.requires_grad, y.grad_fn.name(),
                    y.grad_fn.next_functions, z.grad_fn.next_functions)
        (y.sum() + z.sum()).backward()
        res[lib] += (x.grad,)
    assert res[fusegrad][:3] == res[torch][:3]
    assert res[fusegrad][3] == res[torch][3] == ((None, 0),)
    assert res[fusegrad][4] == res[torch][4] == ((None, 0),)
    assert res[fusegrad][5] is None and res[torch][5] is None


def test_view_errors_are_torchs():
    for expr in ("x.view(5)", "x.t().view(12)", "x.view(-2)"):
        msgs = []
        for lib in (fusegrad, torch):
            x = lib.arange(12.0).reshape(3, 4).requires_grad_()
            with pytest.raises(RuntimeError) as info:
                eval(expr, {"x": x})
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1], expr
