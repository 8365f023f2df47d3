"""Findings of a differential fuzz of eager fusegrad against PyTorch 2.13 (values, errors,
speed): shrinks of NaN, prelu and flatten of a scalar, embedding_bag's derivative under AOT
autograd, the circular pad's backward, and `out=` sharing memory with an input. Each case
runs under torch and fusegrad in the test (or compares a compiled run with torch's)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import torch
from program_support import compiler_fallbacks

import fusegrad as fg


def _outcome(fn):
    """(result as an array, or None; the error's type name and text, or None)."""
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001  (compared against torch's)
        return None, (type(e).__name__, str(e))
    return np.asarray(r.detach().numpy()), None


def _same_outcome(fn):
    want, want_err = _outcome(lambda: fn(torch))
    got, got_err = _outcome(lambda: fn(fg))
    assert got_err == want_err
    if want is not None:
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------ softshrink / hardshrink of NaN

@pytest.mark.parametrize("name", ["softshrink", "hardshrink"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("compiled", [False, True])
def test_shrink_keeps_nan(name, dtype, compiled):
    """A NaN is outside [-lambd, lambd]: kept, not zeroed (eager, and compiled through the
    op's decomposition)."""
    x = [float("nan"), 0.2, -0.5, 0.5, -2.0, float("inf"), -float("inf"), 0.7]
    res = []
    for lib in (torch, fg):
        fn = getattr(lib.nn.functional, name)
        if compiled and lib is fg:
            fg._dynamo.reset()
            fn = fg.compile(fn)
        res.append(fn(lib.tensor(x, dtype=getattr(lib, dtype)), 0.5).float().numpy())
    np.testing.assert_array_equal(res[1], res[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shrink_gradient_of_nan(dtype):
    """The gradient at a NaN, as PyTorch's vectorized backward loop gives it (zero) for a
    tensor it covers whole (64 elements: no scalar tail at any vector width)."""
    x = np.where(np.arange(64) % 3 == 0, np.nan, np.linspace(-2, 2, 64))
    res = []
    for lib in (torch, fg):
        t = lib.tensor(x, dtype=getattr(lib, dtype), requires_grad=True)
        res.append([lib.autograd.grad(f(t, 0.5).sum(), t)[0].numpy()
                    for f in (lib.nn.functional.softshrink, lib.nn.functional.hardshrink)])
    for a, b in zip(*res):
        np.testing.assert_array_equal(b, a)


# ------------------------------------------------------------ prelu of a scalar

@pytest.mark.parametrize("x_shape,w_shape", [
    ((), (3,)), ((), (0,)), ((), (1,)), ((), ()), ((), (1, 1)), ((2, 3), (4,)), ((3,), (2,)),
    ((2, 3), (3,))])
def test_prelu_refuses_zero_dim_input_with_several_weights(x_shape, w_shape):
    """A 0-dim input with a weight of other than one element: PyTorch's "Not allow zero-dim
    input tensor." before the channel-count check (after the weight's rank check)."""
    _same_outcome(lambda lib: lib.nn.functional.prelu(
        lib.ones(x_shape), lib.full(w_shape, 0.25)))


def test_prelu_module_on_a_scalar():
    _same_outcome(lambda lib: lib.nn.PReLU(3)(lib.tensor(-2.0)))


# ------------------------------------------------------------ flatten of a scalar

@pytest.mark.parametrize("dims", [(), (0,), (-1,), (1,), (2,), (-2,), (0, 1), (0, -1), (0, 0),
                                  (-1, -1), (1, 0), (0, -2)])
def test_flatten_of_a_scalar_wraps_its_dims(dims):
    """A scalar's dims range over [-1, 0]: anything else is PyTorch's IndexError."""
    _same_outcome(lambda lib: lib.flatten(lib.tensor(1.5), *dims))
    _same_outcome(lambda lib: lib.tensor(1.5).flatten(*dims))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_flatten_module(shape):
    _same_outcome(lambda lib: lib.nn.Flatten()(lib.ones(shape)))


# ------------------------------------------------------------ embedding_bag under AOT




_BAG_CASES = [dict(mode="sum"), dict(mode="mean"), dict(mode="max"),
              dict(mode="mean", padding_idx=2), dict(mode="sum", scale_grad_by_freq=True),
              dict(mode="mean", scale_grad_by_freq=True, padding_idx=1),
              dict(mode="sum", include_last_offset=True), dict(mode="sum", psw=True)]


@pytest.mark.parametrize("case", _BAG_CASES, ids=[str(c) for c in _BAG_CASES])
def test_embedding_bag_backward_compiles_under_aot(case):
    """AOT autograd traces embedding_bag's derivative (its bags and scales are made by ops
    from the indices and offsets), and the graph recomputes them for other indices of the
    same shape: values and the weight's gradient equal torch's eager ones."""
    case = dict(case)
    psw = case.pop("psw", False)
    table = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    weights = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    # (with include_last_offset the closing offset is the end: PyTorch's float32 kernel
    # bags the indices past it differently from its float64 one)
    last = [6] if case.get("include_last_offset") else []
    runs = [(np.array([1, 2, 3, 4, 1, 2]), np.array([0, 2, 2] + last)),
            (np.array([5, 5, 0, 9, 1, 7]), np.array([0, 1, 4] + last))]
    fg._dynamo.reset()

    def program(lib, weight):
        def fn(i, o, s):
            extra = dict(per_sample_weights=s) if psw else {}
            return lib.nn.functional.embedding_bag(i, weight, o, **case, **extra)
        return fn

    w_fg = fg.tensor(table, requires_grad=True)
    compiled = fg.compile(program(fg, w_fg), backend="aot_eager")
    with compiler_fallbacks() as fallbacks:
        for idx, off in runs:
            w_t = torch.tensor(table, requires_grad=True)
            want = program(torch, w_t)(torch.tensor(idx), torch.tensor(off),
                                       torch.tensor(weights))
            want.backward(torch.ones_like(want) * torch.arange(3.))
            w_fg.grad = None
            got = compiled(fg.tensor(idx), fg.tensor(off), fg.tensor(weights))
            got.backward(fg.ones_like(got) * fg.arange(3.))
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), 1e-6, 1e-6)
            np.testing.assert_allclose(w_fg.grad.numpy(), w_t.grad.numpy(), 1e-6, 1e-6)
    assert fallbacks == []


# ------------------------------------------------------------ strided transfer (pad backward)

def test_circular_pad_backward_writes_without_add_at(monkeypatch):
    """The circular pad's backward (CopySlices over as_strided geometries that do not overlap
    themselves) writes each gradient with a strided assignment, not np.add.at (about 25x
    slower); its gradient equals torch's."""
    from fusegrad.ops import views

    calls = []
    real = np.add.at

    class _Add:
        """np.add with `at` counted."""

        def __getattr__(self, name):
            return getattr(np.add, name)

        def at(self, *args):
            calls.append(args[0].shape)
            return real(*args)

    class _NP:
        def __getattr__(self, name):
            return _Add() if name == "add" else getattr(np, name)

    monkeypatch.setattr(views, "np", _NP())
    x0 = np.random.default_rng(0).standard_normal((2, 3, 5, 6)).astype(np.float32)
    cot = np.random.default_rng(1).standard_normal((2, 3, 8, 10)).astype(np.float32)
    grads = []
    for lib in (torch, fg):
        x = lib.tensor(x0, requires_grad=True)
        y = lib.nn.functional.pad(x, (2, 2, 1, 2), mode="circular")
        g, = lib.autograd.grad(y, x, lib.tensor(cot))
        grads.append(g.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-6)
    assert calls == []


@pytest.mark.parametrize("size,stride,offset", [((3, 3), (1, 1), 0), ((2, 4), (0, 1), 1),
                                                ((2, 2), (2, 1), 1), ((3, 2), (1, 3), 0)])
def test_as_strided_backward_overlapping_and_not(size, stride, offset):
    """as_strided's gradient over geometries that overlap themselves (added per location)
    and that do not (assigned), and its own gradient (the adjoint transfer), as torch's."""
    x0 = np.random.default_rng(0).standard_normal(12)
    res = []
    for lib in (torch, fg):
        x = lib.tensor(x0, requires_grad=True)
        y = x.as_strided(size, stride, offset)
        cot = lib.arange(float(np.prod(size)), dtype=lib.float64).reshape(size)
        cot.requires_grad_()
        g, = lib.autograd.grad(y, x, cot, create_graph=True)
        gg, = lib.autograd.grad((g * lib.arange(12.0, dtype=lib.float64)).sum(), cot)
        res.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------ out= sharing memory with an input

_OUT_CASES = {
    "add partial": lambda lib, a: lib.add(a[:2], 1, out=a[1:3]),
    "add full": lambda lib, a: lib.add(a, 1, out=a),
    "add disjoint": lambda lib, a: lib.add(a[:3], a[3:], out=a[:3]),
    "add same range other strides": lambda lib, a: lib.add(a.view(2, 3).t(), 1,
                                                          out=a.view(3, 2)),
    "add interleaved": lambda lib, a: lib.add(a[::2], 1, out=a[1::2]),
    "add out resized": lambda lib, a: lib.add(a[:2], 1, out=a[:]),
    "mul second input": lambda lib, a: lib.mul(lib.ones(2), a[:2], out=a[1:3]),
    "sin partial": lambda lib, a: lib.sin(a[:2], out=a[1:3]),
    "clamp partial": lambda lib, a: lib.clamp(a[:2], 0, 1, out=a[1:3]),
    "pow partial": lambda lib, a: lib.pow(a[:2], 2, out=a[1:3]),
    "lerp partial": lambda lib, a: lib.lerp(a[:2], lib.ones(2), 0.5, out=a[1:3]),
    "addcmul partial": lambda lib, a: lib.addcmul(lib.ones(2), a[:2], lib.ones(2), out=a[1:3]),
    "maximum partial": lambda lib, a: lib.maximum(a[:2], a[2:4], out=a[1:3]),
    # (allowed: the values read and written through the shared memory are the kernels'
    # order of work, not compared)
    "sum partial (allowed)": lambda lib, a: lib.sum(a[:4].view(2, 2), 0, out=a[1:3]),
    "mm partial (allowed)": lambda lib, a: lib.mm(a[:4].view(2, 2), lib.ones(2, 2),
                                                  out=a[1:5].view(2, 2)),
    "cat overlapping": lambda lib, a: lib.cat([a[:1], a[1:]], out=a),
    "cat partial": lambda lib, a: lib.cat([a[:1], lib.ones(2)], out=a[:3]),
    "cat full": lambda lib, a: lib.cat([a[:3]], out=a[:3]),
    "cat interleaved": lambda lib, a: lib.cat([a[::2]], out=a[1::2]),
    "cat disjoint": lambda lib, a: lib.cat([a[:2], a[2:3]], out=a[3:]),
    "stack overlapping": lambda lib, a: lib.stack([a[:1], a[1:2]], out=a[:2].view(2, 1)),
}


@pytest.mark.parametrize("name", list(_OUT_CASES))
def test_out_sharing_memory_with_an_input(name):
    """Pointwise functions refuse an `out` partially overlapping an input (the same elements
    are fine), cat and stack any overlap, with PyTorch's message; the values written where
    it is allowed, and the tensor's contents after, are torch's."""
    res = []
    for lib in (torch, fg):
        a = lib.arange(6.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the resize warning: not what is tested)
            out, err = _outcome(functools.partial(_OUT_CASES[name], lib, a))
        res.append((out, err, a.numpy().copy()))
    (want, want_err, want_a), (got, got_err, got_a) = res
    assert got_err == want_err
    if "allowed" not in name:
        if want is not None:
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_a, want_a)
