"""erf, erfc, sigmoid and the activations made of them in C (`ops/native/math.c`): against
PyTorch, the C library (float64), compiled code (float32: the same functions), the NumPy
paths (`native_kernels(False)`) and the recorded derivatives; at one and at two threads."""

import math

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native

pytestmark = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

RNG = np.random.default_rng(7)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 0.5, -0.5, 0.9999, 1.0,
           -1.0, 3.0, 10.4, 10.6, -27.0, 30.0]


def _values(dtype, n=4000):
    x = np.concatenate([RNG.standard_normal(n) * 4, RNG.uniform(-12, 12, n), SPECIAL])
    return x.astype(dtype)


def _near(got, want, scale, dtype, units=8):
    """|got - want| within `units` machine epsilons of `scale` (the size of the terms that
    cancel: gelu's 1 + erf(x) near x = -3 keeps few of its bits in either framework)."""
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    assert np.all(err <= units * np.finfo(dtype).eps * scale), err.max()


def _ulps(a, b, dtype):
    """Largest distance between a and b in units of the last place of b (NaNs must agree)."""
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(b)
    spacing = np.spacing(np.abs(b[ok]).astype(dtype)).astype(np.float64)
    return float(np.max(np.abs(a[ok].astype(np.float64) - b[ok]) / spacing))


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_float64_is_the_c_librarys(name):
    x = _values(np.float64)
    got = getattr(fusegrad, name)(fusegrad.from_numpy(x)).numpy()
    want = np.array([getattr(math, name)(v) if not math.isnan(v) else v for v in x])
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist() or name == "erfc"


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_float32_equals_compiled_code_and_torch_within_an_ulp(name):
    x = _values(np.float32)
    t = fusegrad.from_numpy(x)
    got = getattr(fusegrad, name)(t).numpy()
    compiled = fusegrad.compile(lambda v: getattr(v, name)() * 1.0, backend="inductor")(t)
    if name == "erf":  # generated code's own float erf (codegen/erf_float.py): one ulp
        assert _ulps(compiled.numpy(), got.astype(np.float64), np.float32) <= 1
    else:  # one function, eager and compiled
        np.testing.assert_array_equal(got, compiled.numpy())
    exact = np.array([getattr(math, name)(float(v)) for v in x])  # rounded once to float
    assert _ulps(got, exact, np.float32) <= 0.5 + 1e-6
    want = getattr(torch, name)(torch.from_numpy(x)).numpy()
    assert _ulps(got, want.astype(np.float64), np.float32) <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_c_and_numpy_paths_agree(name, dtype):
    x = _values(dtype)
    t = fusegrad.from_numpy(x)
    c = getattr(t, name)().numpy()
    with _native.native_kernels(False):
        numpy = getattr(t, name)().numpy()
    assert _ulps(c, numpy.astype(np.float64), dtype) <= 4


# Each activation computed in C, as fusegrad and torch spell it, with its backward node.
ACTIVATIONS = {
    "gelu": (lambda lib, x: lib.nn.functional.gelu(x), "GeluBackward0"),
    "gelu_tanh": (lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh"),
                  "GeluBackward0"),
    "silu": (lambda lib, x: lib.nn.functional.silu(x), "SiluBackward0"),
    "sigmoid": (lambda lib, x: lib.sigmoid(x), "SigmoidBackward0"),
    "leaky_relu": (lambda lib, x: lib.nn.functional.leaky_relu(x), "LeakyReluBackward0"),
    "leaky_relu_0.2": (lambda lib, x: lib.nn.functional.leaky_relu(x, 0.2),
                       "LeakyReluBackward0"),
    "hardswish": (lambda lib, x: lib.nn.functional.hardswish(x), "HardswishBackward0"),
    "hardsigmoid": (lambda lib, x: lib.nn.functional.hardsigmoid(x), "HardsigmoidBackward0"),
    "hardtanh": (lambda lib, x: lib.nn.functional.hardtanh(x, -0.5, 2.0), "HardtanhBackward0"),
    "relu6": (lambda lib, x: lib.nn.functional.relu6(x), "HardtanhBackward0"),
}


def _finite(dtype, n=4000):
    x = _values(dtype, n)
    return x[np.isfinite(x)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_and_its_gradient_as_torch(name, dtype):
    fn, node = ACTIVATIONS[name]
    x = _finite(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    ours = fusegrad.from_numpy(x.copy()).requires_grad_()
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    out, want = fn(fusegrad, ours), fn(torch, theirs)
    out.backward(fusegrad.from_numpy(g))
    want.backward(torch.from_numpy(g))
    size = 1 + np.abs(x.astype(np.float64))
    _near(out.detach().numpy(), want.detach().numpy(), size, dtype)
    _near(ours.grad.numpy(), theirs.grad.numpy(), np.abs(g) * size, dtype)
    assert type(out.grad_fn).__name__ == node


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_float32_activation_equals_compiled_code(name):
    fn, _ = ACTIVATIONS[name]
    x = fusegrad.from_numpy(_values(np.float32))
    compiled = fusegrad.compile(lambda v: fn(fusegrad, v) * 1.0, backend="inductor")(x)
    eager = fn(fusegrad, x).numpy()
    if name == "gelu":  # generated code's erf is its own (one ulp): x/2 times one ulp of it
        got = compiled.numpy()
        finite = np.isfinite(eager)
        np.testing.assert_array_equal(got[~finite], eager[~finite])  # NaN and infinities
        _near(got[finite], eager[finite], 1 + np.abs(x.numpy()[finite].astype(np.float64)),
              np.float32, units=1)
    else:
        np.testing.assert_array_equal(eager, compiled.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_c_and_numpy_activations_agree(name, dtype):
    fn, _ = ACTIVATIONS[name]
    x = _finite(dtype)
    t = fusegrad.from_numpy(x)
    c = fn(fusegrad, t).numpy()
    with _native.native_kernels(False):
        numpy = fn(fusegrad, t).numpy()
    _near(c, numpy, 1 + np.abs(x.astype(np.float64)), dtype, units=4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_c_gradient_equals_the_recorded_formula(name, dtype):
    """The C gradient against the one recorded in fusegrad ops (taken under create_graph,
    which keeps the ops): the same order of operations, exp and tanh aside (NumPy's against
    ours)."""
    fn, _ = ACTIVATIONS[name]
    x = _finite(dtype, 1000)
    g = RNG.standard_normal(x.shape).astype(dtype)
    grads = []
    for create_graph in (False, True):
        t = fusegrad.from_numpy(x.copy()).requires_grad_()
        (grad,) = fusegrad.autograd.grad(fn(fusegrad, t), t, fusegrad.from_numpy(g),
                                         create_graph=create_graph)
        grads.append(grad.detach().numpy())
    _near(grads[0], grads[1], np.abs(g) * (1 + np.abs(x)), dtype, units=4)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_second_derivatives_still_recorded(name):
    fn, _ = ACTIVATIONS[name]
    x = fusegrad.randn(6, dtype=fusegrad.float64, requires_grad=True)
    with fusegrad.no_grad():
        x += 0.1 * (x.abs() < 0.05)  # away from leaky_relu's kink
    if name == "hardsigmoid":
        # ATen's hardsigmoid_backward has no derivative: the gradient taken with create_graph
        # has a NotImplemented node whose backward raises, in PyTorch as here
        errors = []
        for lib, v in ((torch, torch.tensor(x.detach().numpy(), requires_grad=True)),
                       (fusegrad, x)):
            (g,) = lib.autograd.grad(fn(lib, v).sum(), v, create_graph=True)
            assert type(g.grad_fn).__name__ == "NotImplemented"
            with pytest.raises(RuntimeError) as info:
                g.sum().backward()
            errors.append(str(info.value))
        assert errors[1] == errors[0]
        return
    assert fusegrad.autograd.gradgradcheck(lambda v: fn(fusegrad, v), (x,))


def test_layouts_shapes_and_threads_give_the_same_bits():
    x = RNG.standard_normal((300, 257)).astype(np.float32)
    base = fusegrad.nn.functional.gelu(fusegrad.from_numpy(x)).numpy()
    strided = fusegrad.from_numpy(x.T.copy()).t()  # not contiguous
    np.testing.assert_array_equal(fusegrad.nn.functional.gelu(strided).numpy(), base)
    for empty in (np.zeros((0, 3), np.float32), np.zeros((), np.float32)):
        got = fusegrad.erf(fusegrad.from_numpy(empty)).numpy()
        assert got.shape == empty.shape and np.array_equal(got, empty)
    before = fusegrad.get_num_threads()
    try:
        fusegrad.set_num_threads(2)
        two = fusegrad.nn.functional.gelu(fusegrad.from_numpy(x)).numpy()
        two_erf = fusegrad.erf(fusegrad.from_numpy(x)).numpy()
        fusegrad.set_num_threads(1)
        one_erf = fusegrad.erf(fusegrad.from_numpy(x)).numpy()
    finally:
        fusegrad.set_num_threads(before)
    np.testing.assert_array_equal(two, base)
    np.testing.assert_array_equal(two_erf, one_erf)


def test_kernels_refuse_what_they_do_not_cover():
    a = np.ones(4, np.float32)
    grad = ("math", "gelu_grad")
    assert _native.elementwise(*grad, (np.ones(4, np.float64), a)) is None  # dtypes differ
    assert _native.elementwise(*grad, (np.ones(5, np.float32), a)) is None  # shapes differ
    assert _native.elementwise("math", "gelu", (np.ones(4, np.float16),)) is None
    with _native.native_kernels(False):
        assert _native.elementwise("math", "gelu", (a,)) is None
    half = fusegrad.tensor([-1.0, 0.5, 2.0], dtype=fusegrad.float16)  # through float32
    np.testing.assert_allclose(fusegrad.nn.functional.silu(half).float().numpy(),
                               torch.nn.functional.silu(torch.tensor([-1.0, 0.5, 2.0],
                                                        dtype=torch.float16)).float().numpy(),
                               rtol=1e-3)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_layout_of_the_result_as_torch(name):
    """An elementwise result is laid out in its input's stride order, as PyTorch's (a
    linear layer then takes the same path: addmm for a contiguous 3-D input); values and
    gradients as on a contiguous copy."""
    fn, _ = ACTIVATIONS[name]
    base = RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
    views = (lambda t: t.transpose(1, 3), lambda t: t[:, :, 1:, :3],
             lambda t: t.permute(2, 0, 3, 1)[..., ::2], lambda t: t.flatten(2).transpose(1, 2))
    for view in views:
        ours, theirs = fusegrad.from_numpy(base.copy()), torch.from_numpy(base.copy())
        ours.requires_grad_()
        theirs.requires_grad_()
        out, want = fn(fusegrad, view(ours)), fn(torch, view(theirs))
        assert out.stride() == want.stride()
        flat = fn(fusegrad, view(fusegrad.from_numpy(base.copy())).contiguous()).numpy()
        np.testing.assert_array_equal(out.detach().numpy(), flat)
        g = RNG.standard_normal(tuple(want.shape)).astype(np.float32)
        out.backward(fusegrad.from_numpy(g))
        want.backward(torch.from_numpy(g))
        _near(ours.grad.numpy(), theirs.grad.numpy(), 1 + np.abs(base), np.float32)


# ---------------------------------------------------------------- softmax over rows


def _softmax_case(dtype, shape=(33, 257)):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    return x, RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((33, 257), -1), ((4, 5, 300), 2), ((6, 40), 0),
                                       ((1, 1), -1), ((3, 1000), 1)])
def test_softmax_rows_as_torch(name, shape, dim, dtype):
    x, g = _softmax_case(dtype, shape)
    results = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        y = getattr(lib.nn.functional, name)(t, dim)
        y.backward(lib.from_numpy(g.copy()))
        results.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__))
    (y, gx, node), (want_y, want_gx, want_node) = results
    assert node == want_node
    rows = np.abs(g).sum(axis=dim, keepdims=True)  # the size of the sum the gradient takes
    # (log_softmax is x - max - log(sum): the size of its terms)
    _near(y, want_y, 1 + np.abs(x) + np.abs(x).max(axis=dim, keepdims=True), dtype)
    _near(gx, want_gx, np.abs(g) + rows, dtype, units=16)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradient_in_c_equals_the_recorded_formula(name):
    """The C gradient against the one recorded in fusegrad ops (create_graph keeps them)."""
    x, g = _softmax_case(np.float32, (40, 300))
    fn = getattr(fusegrad.nn.functional, name)
    grads = []
    for create_graph in (False, True):
        t = fusegrad.from_numpy(x.copy()).requires_grad_()
        (grad,) = fusegrad.autograd.grad(fn(t, -1), t, fusegrad.from_numpy(g),
                                         create_graph=create_graph)
        grads.append(grad.detach().numpy())
    rows = np.abs(g).sum(axis=-1, keepdims=True)
    _near(grads[0], grads[1], np.abs(g) + rows, np.float32, units=16)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_rows_same_bits_at_two_threads_and_double_backward(name):
    x, g = _softmax_case(np.float32, (256, 512))
    fn = getattr(fusegrad.nn.functional, name)
    before = fusegrad.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            fusegrad.set_num_threads(n)
            t = fusegrad.from_numpy(x.copy()).requires_grad_()
            y = fn(t, -1)
            y.backward(fusegrad.from_numpy(g))
            runs.append((y.detach().numpy(), t.grad.numpy()))
    finally:
        fusegrad.set_num_threads(before)
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    v = fusegrad.randn(3, 7, dtype=fusegrad.float64, requires_grad=True)
    assert fusegrad.autograd.gradgradcheck(lambda a: fn(a, -1), (v,))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(64, 10), (5, 16), (7, 300), (2, 3, 33)])
def test_softmax_rows_forward_equals_compiled_code_and_numpy_path(name, shape):
    """The forward over rows in C: float32 the compiled code's bits (both take fg_expf and
    fg_logf); both dtypes within a few epsilons of the NumPy path (of the size of the terms
    summed or cancelled), NaN and infinities as it."""
    fn = getattr(fusegrad.nn.functional, name)
    for dtype in (np.float32, np.float64):
        x = (RNG.standard_normal(shape) * 5).astype(dtype)
        x.reshape(-1, shape[-1])[1, 2] = np.nan  # a row holding NaN
        x.reshape(-1, shape[-1])[2, :] = -np.inf  # a row of -inf
        x.reshape(-1, shape[-1])[3, 1] = np.inf
        t = fusegrad.from_numpy(x)
        got = fn(t, -1).numpy()
        with _native.native_kernels(False):
            want = fn(t, -1).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = np.isfinite(want)
        np.testing.assert_array_equal(got[~ok & ~np.isnan(want)], want[~ok & ~np.isnan(want)])
        rows = np.abs(np.where(np.isfinite(x), x, 0))
        scale = np.abs(want) if name == "softmax" else 1 + rows + rows.max(-1, keepdims=True)
        _near(got[ok], want[ok], scale[ok], dtype)
        if dtype is np.float32:
            compiled = fusegrad.compile(lambda a: fn(a, -1))(t).numpy()
            np.testing.assert_array_equal(got, compiled)


@pytest.mark.parametrize("native", [True, False])
def test_hard_functions_at_their_corners_as_torch(native):
    """hardswish's gradient is 0 up to -3 included and g from 3 on (and for NaN);
    hardsigmoid is clip(x + 3, 0, 6) / 6, PyTorch's order of operations."""
    values = [-3.0, 3.0, -3.0000002, 2.9999998, 0.0, np.nan, -5.0, 5.0, -0.0]
    g = [-1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -7.0, 8.0, 9.0]
    x = RNG.uniform(-5, 5, 1000).astype(np.float32)
    with _native.native_kernels(native):
        for name in ("hardswish", "hardsigmoid"):
            got = []
            for lib in (fusegrad, torch):
                t = lib.tensor(values, requires_grad=True)
                getattr(lib.nn.functional, name)(t).backward(lib.tensor(g))
                got.append(t.grad.numpy())
            np.testing.assert_allclose(got[0], got[1], rtol=1e-6)
            ours = getattr(fusegrad.nn.functional, name)(fusegrad.from_numpy(x)).numpy()
            want = getattr(torch.nn.functional, name)(torch.from_numpy(x)).numpy()
            np.testing.assert_array_equal(ours, want)


@pytest.mark.parametrize("size", [16, 4095, 4096, 50000])
def test_leaky_relu_bits_as_torch_either_side_of_the_c_floor(size):
    from fusegrad.ops import activation

    x = RNG.standard_normal(size).astype(np.float32)
    x[:3] = [np.nan, -0.0, 0.0]
    got = fusegrad.nn.functional.leaky_relu(fusegrad.from_numpy(x), 0.2).numpy()
    want = torch.nn.functional.leaky_relu(torch.from_numpy(x), 0.2).numpy()
    np.testing.assert_array_equal(got, want)
    assert (size >= activation.LEAKY_C_MIN) == (size >= 4096)
