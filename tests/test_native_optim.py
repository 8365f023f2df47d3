"""Optimizer updates in one C pass (ops/native/optim.c): PyTorch's values (its bits where
the C kernel runs, on parameters of `NATIVE_MIN` elements or more: each `add` with an alpha
is one fused multiply-add, as in PyTorch's CPU kernels), the NumPy path without the kernels,
and the same bits at one and two threads."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native
from fusegrad.optim import sgd

HAVE_CC = _cbuild.compiler() is not None
SGD_OPTIONS = [
    dict(lr=0.01),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.037, momentum=0.8, dampening=0.3),
    dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-3),
    dict(lr=0.05, momentum=0.5, dampening=0.1, weight_decay=0.02, maximize=True),
    dict(lr=0.02, weight_decay=0.01, maximize=True),
]


def _run_sgd(lib, w0, grads, options):
    p = lib.nn.Parameter(lib.tensor(w0.copy()))
    opt = lib.optim.SGD([p], **options)
    bufs = []
    for g in grads:
        p.grad = lib.tensor(g.copy())
        opt.step()
        buf = opt.state[p].get("momentum_buffer")
        bufs.append(None if buf is None else np.array(buf.detach().numpy()))
    return np.array(p.detach().numpy()), bufs


def _data(shape, dtype, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(shape).astype(dtype)
    return w0, [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (64, 3, 3, 3), (130, 150), (20001,)])
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: "-".join(o))
def test_sgd_matches_torch(native, dtype, shape, options):
    w0, grads = _data(shape, dtype)
    want, want_bufs = _run_sgd(torch, w0, grads, options)
    with _native.native_kernels(native):
        got, got_bufs = _run_sgd(fusegrad, w0, grads, options)
    assert got.dtype == want.dtype
    if native and HAVE_CC and w0.size >= sgd.NATIVE_MIN:  # PyTorch's operations: its bits
        np.testing.assert_array_equal(got, want)
        for a, b in zip(got_bufs, want_bufs):
            np.testing.assert_array_equal(a, b)
    else:
        tol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        for a, b in zip(got_bufs, want_bufs):
            if b is None:
                assert a is None
            else:
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("options", SGD_OPTIONS[1:5], ids=lambda o: "-".join(o))
def test_sgd_of_a_large_parameter_is_bit_identical_at_one_and_two_threads(shared, options):
    w0, grads = _data((300, 1000), np.float32, seed=2)
    results = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        results.append(_run_sgd(fusegrad, w0, grads, options))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)
    if HAVE_CC:
        np.testing.assert_array_equal(results[0][0], _run_sgd(torch, w0, grads, options)[0])


def test_sgd_with_a_strided_gradient_or_state_of_another_layout_keeps_torch_values():
    """Arrays the kernel does not take (a transposed gradient, a loaded momentum buffer in
    another layout) go through the NumPy update, with PyTorch's values."""
    w0, grads = _data((40, 30), np.float32, seed=3)
    results = []
    for lib in (fusegrad, torch):
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.2)
        for g in grads:
            p.grad = lib.tensor(np.ascontiguousarray(g.T)).t()  # same values, strided
            opt.step()
        results.append(np.array(p.detach().numpy()))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)


def test_sgd_with_a_tensor_learning_rate_in_the_group_matches_torch():
    w0, grads = _data((16, 8), np.float32, seed=4)
    results = []
    for lib in (fusegrad, torch):
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        opt.param_groups[0]["lr"] = lib.tensor(0.05)
        for g in grads:
            p.grad = lib.tensor(g.copy())
            opt.step()
        results.append(np.array(p.detach().numpy()))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)


ADAM_OPTIONS = [
    dict(lr=0.01),
    dict(lr=0.003, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01),
    dict(lr=0.01, amsgrad=True, maximize=True),
    dict(lr=0.02, betas=(0.3, 0.9), weight_decay=0.05, amsgrad=True),  # lerp's other end
]


def _run_adam(lib, cls, w0, grads, options):
    p = lib.nn.Parameter(lib.tensor(w0.copy()))
    opt = getattr(lib.optim, cls)([p], **options)
    for g in grads:
        p.grad = lib.tensor(g.copy())
        opt.step()
    st = opt.state[p]
    return [np.array(t.detach().numpy()) for t in
            (p, st["exp_avg"], st["exp_avg_sq"], st.get("max_exp_avg_sq", st["exp_avg_sq"]))]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(33, 5), (130, 150)])
@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=lambda o: "-".join(o))
def test_adam_matches_torch(native, dtype, shape, cls, options):
    """PyTorch's values; the moments bit for bit where the C kernel runs (PyTorch's
    vectorised square root is not always correctly rounded, so the parameter within
    rounding)."""
    w0, grads = _data(shape, dtype, steps=4, seed=8)
    want = _run_adam(torch, cls, w0, grads, options)
    with _native.native_kernels(native):
        got = _run_adam(fusegrad, cls, w0, grads, options)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # The moments do not depend on the parameter (unless Adam's L2 decay feeds it back).
    l2 = cls == "Adam" and options.get("weight_decay")
    if native and HAVE_CC and not l2:
        np.testing.assert_array_equal(got[1], want[1])  # exp_avg: lerp as PyTorch's
        np.testing.assert_array_equal(got[2], want[2])  # exp_avg_sq: mul, then addcmul


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_of_a_large_parameter_is_bit_identical_at_one_and_two_threads(shared, cls):
    w0, grads = _data((300, 1000), np.float32, seed=9)
    results = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        results.append(_run_adam(fusegrad, cls, w0, grads, ADAM_OPTIONS[1]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
