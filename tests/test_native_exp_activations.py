"""elu (selu), celu, softplus and mish in C on float32 (`ops/native/math.c`): against
PyTorch, against the exact values (computed in double and rounded once), against the NumPy
paths (`native_kernels(False)`, float64 and small tensors) and the recorded derivatives; the
NaN and infinity corners as PyTorch's vectorised kernels give them; at two threads."""

import math

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native, activation

# (The other tests hold on the NumPy paths too, which run where no C compiler is.)
needs_c = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

RNG = np.random.default_rng(11)

# name -> (the call in either framework, its backward node, its floor's key).
FUNCTIONS = {
    "elu": (lambda lib, x: lib.nn.functional.elu(x), "EluBackward0", "elu"),
    "elu_0.5": (lambda lib, x: lib.nn.functional.elu(x, 0.5), "EluBackward0", "elu"),
    "selu": (lambda lib, x: lib.nn.functional.selu(x), "EluBackward0", "elu"),
    "celu_2": (lambda lib, x: lib.nn.functional.celu(x, 2.0), "CeluBackward0", "celu"),
    "softplus": (lambda lib, x: lib.nn.functional.softplus(x), "SoftplusBackward0",
                 "softplus"),
    "softplus_2_5": (lambda lib, x: lib.nn.functional.softplus(x, 2.0, 5.0),
                     "SoftplusBackward0", "softplus"),
    "mish": (lambda lib, x: lib.nn.functional.mish(x), "MishBackward0", "mish"),
}
CORNERS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, -1e-45, 2.5, 2.5000002,
           20.0, 20.000002, 19.999998, -0.0625, 0.0625, -87.0, -88.0, -104.0, -150.0, -250.0,
           88.0, 100.0, 250.0]


def _values(n=3000):
    x = np.concatenate([RNG.standard_normal(n) * 4, RNG.uniform(-40, 40, n),
                        RNG.standard_normal(n) * 1e-3])
    return x.astype(np.float32)


def _near(got, want, scale, dtype, units=8):
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    assert np.all(err <= units * np.finfo(dtype).eps * scale), err.max()


def _ulps(got, exact):
    """Largest distance of float32 `got` from float64 `exact`, in float32 units of the last
    place of the exact value (denormal spacing below float's normal range)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - exact) / spacing))


def _run(fn, lib, x, g):
    t = lib.from_numpy(x.copy()).requires_grad_()
    out = fn(lib, t)
    out.backward(lib.from_numpy(g.copy()))
    return out.detach().numpy(), t.grad.numpy(), type(out.grad_fn).__name__


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_values_gradients_and_nodes_as_torch(name, dtype):
    fn, node, _ = FUNCTIONS[name]
    x = _values().astype(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    (out, grad, got_node), (want, want_grad, want_node) = (
        _run(fn, lib, x, g) for lib in (fusegrad, torch))
    size = 1 + np.abs(x.astype(np.float64))
    _near(out, want, size, dtype)
    # (mish's gradient crosses zero near x = -1.19, where PyTorch's float formula cancels)
    _near(grad, want_grad, np.abs(g) * size, dtype, units=8 if name != "mish" else 64)
    assert got_node == want_node == node


EXACT = {  # in double, from the float32 input; rounded once, the C kernels' result
    "elu": lambda v: math.expm1(v) if v <= 0 else v,
    "softplus": lambda v: v if v > 20 else (max(v, 0.0) + math.log1p(math.exp(-abs(v)))),
    "mish": lambda v: v * math.tanh(max(v, 0.0) + math.log1p(math.exp(-abs(v)))),
}


@needs_c
@pytest.mark.parametrize("name", list(EXACT))
def test_float32_rounded_once_from_the_exact_value(name):
    fn, _, _ = FUNCTIONS[name]
    x = _values()
    got = fn(fusegrad, fusegrad.from_numpy(x)).numpy()
    exact = np.array([EXACT[name](float(v)) for v in x])
    assert _ulps(got, exact) <= 0.5 + 1e-3
    with _native.native_kernels(False):  # NumPy's several float passes round more often
        numpy = fn(fusegrad, fusegrad.from_numpy(x)).numpy()
    assert _ulps(numpy, exact) <= 4


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_c_and_numpy_paths_agree(name):
    fn, _, _ = FUNCTIONS[name]
    x = _values()
    g = RNG.standard_normal(x.shape).astype(np.float32)
    c = _run(fn, fusegrad, x, g)
    with _native.native_kernels(False):
        numpy = _run(fn, fusegrad, x, g)
    size = 1 + np.abs(x.astype(np.float64))
    _near(c[0], numpy[0], size, np.float32, units=4)
    _near(c[1], numpy[1], np.abs(g) * size, np.float32, units=4)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_c_gradient_equals_the_recorded_formula(name):
    """The C gradient against the one recorded in fusegrad ops (create_graph keeps them),
    which double backward differentiates."""
    fn, _, _ = FUNCTIONS[name]
    x = _values(400)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    grads = []
    for create_graph in (False, True):
        t = fusegrad.from_numpy(x.copy()).requires_grad_()
        (grad,) = fusegrad.autograd.grad(fn(fusegrad, t), t, fusegrad.from_numpy(g),
                                         create_graph=create_graph)
        grads.append(grad.detach().numpy())
    _near(grads[0], grads[1], np.abs(g) * (1 + np.abs(x)), np.float32, units=4)
    v = fusegrad.randn(6, dtype=fusegrad.float64, requires_grad=True)
    assert fusegrad.autograd.gradgradcheck(lambda a: fn(fusegrad, a), (v,))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_corners_as_torch(name):
    """NaN, infinities, signed zeros, denormals and the softplus threshold, in a tensor large
    enough for the C kernel and for PyTorch's vectorised one (its scalar loop differs on NaN
    gradients)."""
    fn, _, _ = FUNCTIONS[name]
    x = np.resize(np.array(CORNERS, np.float32), 4096)
    g = np.resize(np.array([1.5, -2.0, 0.25], np.float32), 4096)
    (out, grad, _), (want, want_grad, _) = (_run(fn, lib, x, g) for lib in (fusegrad, torch))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isnan(grad), np.isnan(want_grad))
    ok = ~np.isnan(want)
    # (Below float's normal range ours is the exact value rounded once: mish(-104) is
    # -7.1e-44, where PyTorch's float exp(-104) has already underflowed to 0.)
    np.testing.assert_allclose(out[ok], want[ok], rtol=2e-6, atol=1e-38)
    assert np.array_equal(np.signbit(out[ok & (want == 0)]), np.signbit(want[ok & (want == 0)]))
    ok = ~np.isnan(want_grad)
    np.testing.assert_allclose(grad[ok], want_grad[ok], rtol=1e-5, atol=1e-38)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_floor_layouts_and_threads(name):
    """Below `EXP_C_MIN` the NumPy path runs (its bits); a strided input gives the values of
    its contiguous copy, laid out as PyTorch lays it out; two threads give one thread's bits."""
    fn, _, key = FUNCTIONS[name]
    floor = activation.EXP_C_MIN[key]
    small = RNG.standard_normal(floor - 1).astype(np.float32)
    got = fn(fusegrad, fusegrad.from_numpy(small)).numpy()
    with _native.native_kernels(False):
        np.testing.assert_array_equal(got, fn(fusegrad, fusegrad.from_numpy(small)).numpy())
    base = RNG.standard_normal((64, 70)).astype(np.float32) * 5
    strided = fn(fusegrad, fusegrad.from_numpy(base).t())
    assert strided.stride() == fn(torch, torch.from_numpy(base).t()).stride()
    flat = fn(fusegrad, fusegrad.from_numpy(base.T.copy())).numpy()
    np.testing.assert_array_equal(strided.numpy(), flat)
    big = RNG.standard_normal((300, 257)).astype(np.float32) * 5
    g = RNG.standard_normal(big.shape).astype(np.float32)
    before = fusegrad.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            fusegrad.set_num_threads(n)
            runs.append(_run(fn, fusegrad, big, g)[:2])
    finally:
        fusegrad.set_num_threads(before)
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@needs_c
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_compiled_code_agrees(name):
    fn, _, _ = FUNCTIONS[name]
    x = fusegrad.from_numpy(_values(1000))
    compiled = fusegrad.compile(lambda v: fn(fusegrad, v) * 1.0, backend="inductor")(x)
    eager = fn(fusegrad, x).numpy()
    _near(compiled.numpy(), eager, 1 + np.abs(x.numpy().astype(np.float64)), np.float32)
