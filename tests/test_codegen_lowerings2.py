"""Lowerings of ops real models hit that ran as extern calls: clone, squeeze, cat,
select_scatter, slice_scatter, masked_fill, bitwise_not/and/or/xor, isinf/isnan/isfinite,
repeat, and batch norm's `copy_(clone(running_stat), new)`. (max.dim/min.dim stay externs:
a generated reduction with its index read back was four times slower than NumPy's kernel;
their eager bits are checked here beside the lowered ops.)

Oracle: eager fusegrad on the same inputs (bit for bit for copies, selects, integer and bool
results; the same strides), and the extern count of the compiled graphs (an op with a
lowering no longer runs its NumPy kernel between kernels). Runs without PyTorch.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.compiler.codegen as cg
from fusegrad.compiler.codegen import build

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


@pytest.fixture
def graphs(monkeypatch):
    """The compiled graphs (`CompiledGraph`) the test's compiled code builds; a graph the
    code generator cannot compile (it would run as FX code) fails the test."""
    got: list = []
    original = cg.compile_graph

    def record(gm, example_inputs, options=None):
        compiled = original(gm, example_inputs, options)
        got.append(compiled)
        return compiled

    def refuse(e):
        raise AssertionError(f"the code generator failed: {e!r}")

    monkeypatch.setattr(cg, "compile_graph", record)
    monkeypatch.setattr(importlib.import_module("fusegrad._inductor.compile_fx"),
                        "_log_fallback", refuse)
    return got


def externs(graphs) -> Counter:
    """Extern calls by op name over the compiled graphs."""
    assert graphs, "nothing was compiled"
    text = "\n".join(g.source for g in graphs)
    return Counter(re.findall(r"extern ([\w.]+)", text))


def same(got, want) -> None:
    """Same dtype, shape, strides (of dims longer than 1) and bits (NaNs included)."""
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    strides = [(a, b) for n, a, b in zip(got.shape, got.stride(), want.stride()) if n > 1]
    assert all(a == b for a, b in strides) or not got.numel(), (got.stride(), want.stride())
    a, b = got.numpy(), want.numpy()
    if a.dtype.kind == "f":
        a, b = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
    np.testing.assert_array_equal(a, b)


def compare(fn, *args) -> None:
    """`fn` compiled (inductor) gives eager's results bit for bit."""
    want = fn(*args)
    got = fg.compile(fn, backend="inductor")(*args)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)


def _floats(shape, dtype=fg.float32, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape)
    flat = x.reshape(-1)
    special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45]
    flat[: min(flat.size, len(special))] = special[: flat.size]
    return fg.tensor(x, dtype=dtype)


def _ints(shape, seed=1):
    return fg.tensor(np.random.default_rng(seed).integers(-9, 10, shape), dtype=fg.int64)


def _bools(shape, seed=2):
    return fg.tensor(np.random.default_rng(seed).random(shape) > 0.5)


def test_clone_squeeze_repeat_copy_eager_bits(graphs):
    x = _floats((3, 1, 4)).transpose(0, 2)  # non-contiguous: clone keeps its layout
    i = _ints((2, 1, 3))
    b = _bools((1, 3))
    d = _floats((2, 3), fg.float64)

    def fn(x, i, b, d):
        return (fg.clone(x), x.squeeze((1, -1)), i.squeeze(-2), b.squeeze(0),
                x.repeat(2, 1, 1, 2), i.repeat(1, 2, 1), b.repeat(2, 2), d.t().repeat(2, 1),
                fg.clone(i), d.new_zeros(0, 3).repeat(2, 1), d[0, 0].repeat(3))

    compare(fn, x, i, b, d)
    # (the repeats of an innermost dim run the NumPy kernel: x's and b's)
    found = externs(graphs)
    assert not {"clone", "squeeze.dims"} & set(found) and found["repeat"] == 2, found


def test_repeat_of_outer_dims_is_lowered(graphs):
    x, i, b = _floats((3, 1, 4)).transpose(0, 1), _ints((2, 3)), _bools((1, 3))

    def fn(x, i, b):
        return x.repeat(2, 1, 3, 1), i.repeat(4, 2, 1), b.repeat(2, 1), x[0, 0, 0].repeat(3)

    compare(fn, x, i, b)
    assert "repeat" not in externs(graphs)


def test_cat_eager_bits(graphs):
    a, b = _floats((2, 3)), _floats((3, 2), seed=3).t()  # (2, 3) non-contiguous
    c, e = _floats((4, 3)), _floats((2, 3), fg.float64)
    i, m = _ints((2, 3)), _bools((2, 1))

    def fn(a, b, c, e, i, m):
        return (fg.cat([a, b, c]), fg.cat([a, b], dim=-1), fg.cat([a, i]), fg.cat([a, e], 1),
                fg.cat([i, m, i], dim=1), fg.cat([m, m]), fg.cat([a, fg.zeros(0), b]),
                fg.cat([a[:, :0], b[:, :1]], 1), fg.cat([a[:0], b[:0]]), fg.cat([a]) + 0)

    compare(fn, a, b, c, e, i, m)
    assert "cat" not in externs(graphs)


def test_scatters_eager_bits(graphs):
    x, i, m, y = _floats((4, 6)), _ints((4, 6)), _bools((4, 6)), _floats((2, 5, 3), seed=8)

    def fn(x, i, m, y):
        return (fg.select_scatter(x, x[0] * 2, 0, 1), fg.select_scatter(x, x[:, 1], 1, -1),
                fg.select_scatter(i, i[:, 0], -1, 0), fg.select_scatter(m, ~m[2], 0, 3),
                fg.slice_scatter(x, x[:, :3] + 1, 1, 1, 6, 2),
                fg.slice_scatter(x, x[1:3], 0, 1, 3), fg.slice_scatter(i, i[:, -2:], 1, -2),
                fg.slice_scatter(x, x[:, :0], 1, 2, 2), fg.slice_scatter(m, m[::3], 0, 0, 4, 3),
                fg.slice_scatter(x.t(), x.t()[4:] * 3, 0, 4, 100),
                fg.slice_scatter(y, y[:, -3::2] * 2, 1, -3, None, 2),
                fg.slice_scatter(y, y[:, :0], -2, 7), fg.select_scatter(y, y[:, 4] + 1, 1, 4))

    compare(fn, x, i, m, y)
    # (slice_scatter along the innermost dim runs the NumPy kernel: the 1st, 3rd and 4th)
    found = externs(graphs)
    assert "select_scatter" not in found and found["slice_scatter"] == 3, found


def test_masked_fill_eager_bits(graphs):
    x, i, m = _floats((3, 4)), _ints((3, 4)), _bools((3, 4))
    b = _bools((4,), seed=5)
    v = fg.tensor(2.5, dtype=fg.float64)

    def fn(x, i, m, b, v):
        return (x.masked_fill(m, float("-inf")), x.t().masked_fill(m.t(), 1e30),
                x.masked_fill(b, 7), i.masked_fill(m, 2.7), i.masked_fill(b, -3.9),
                m.masked_fill(b, 0.5), i.masked_fill(m, v), x.masked_fill(b, v),
                x.to(fg.float64).masked_fill(m, 1e300), i.to(fg.uint8).masked_fill(m, 200))

    compare(fn, x, i, m, b, v)
    assert "masked_fill" not in " ".join(externs(graphs))


def test_masked_fill_overflow_raises_as_eager():
    """A value eager refuses (out of the dtype's range) stays with the kernel's error."""
    x, m = _floats((3,)), _bools((3,))
    for fn in (lambda x, m: x.masked_fill(m, 1e39),
               lambda x, m: x.to(fg.int8).masked_fill(m, 300)):
        with pytest.raises(RuntimeError) as want:
            fn(x, m)
        with pytest.raises(RuntimeError) as got:
            fg.compile(fn, backend="inductor")(x, m)
        assert str(got.value) == str(want.value)


def test_bitwise_and_float_classes_eager_bits(graphs):
    x, d = _floats((3, 5)), _floats((3, 5), fg.float64, seed=4)
    i, m, k = _ints((3, 5)), _bools((3, 5)), _bools((5,), seed=6)
    s = fg.tensor([[-128, 0, 127, 5, -1]], dtype=fg.int8)

    def fn(x, d, i, m, k, s):
        return (~m, ~i, ~s, ~m.t(), m | k, m & ~k, m ^ k, i | 6, i & s, i ^ i.t().t(), s | True,
                fg.isinf(x), fg.isinf(d.t()), fg.isnan(x), fg.isfinite(d), fg.isinf(i),
                fg.isnan(m), fg.isfinite(i), fg.where(~m | fg.isinf(x), 0.0, x))

    compare(fn, x, d, i, m, k, s)
    assert not {"bitwise_not", "bitwise_or.Tensor", "bitwise_and.Tensor", "bitwise_xor.Tensor",
                "isinf", "isnan", "isfinite"} & set(externs(graphs))


def test_min_max_dim_eager_bits(graphs):
    x = fg.tensor([[0.0, -0.0, 1.0, -0.0], [3.0, np.nan, -1.0, np.nan],
                   [-0.0, 0.0, 0.0, -0.0], [np.inf, -np.inf, np.inf, -np.inf]])
    w = _floats((3, 40), seed=7)  # a row longer than the kernels' 16 lanes
    w[1, 20] = w[1, 3] = -7.0  # ties: the first index
    w[2, 1], w[2, 17] = 0.0, -0.0
    w[0] = 5.0
    w[0, 1], w[0, 16] = -0.0, 0.0  # the first minimum is -0.0, in another lane than 0.0
    i, m = _ints((4, 5)), _bools((3, 4))

    def fn(x, w, i, m):
        out = []
        for t, dim, keep in ((x, 0, False), (x, -1, True), (w, -1, False), (w.t(), 0, True),
                             (i, -1, False), (m, 0, False)):
            out += list(t.min(dim, keep)) + list(t.max(dim, keepdim=keep))
        return (*out, *x[0, 0].max(0), *i[0].min(dim=0, keepdim=True))

    compare(fn, x, w, i, m)


def test_empty_inputs_eager_bits(graphs):
    x, i = fg.zeros(0, 3), fg.zeros(2, 0, dtype=fg.int64)

    def fn(x, i):
        return (fg.clone(x), fg.cat([x, x]), x.masked_fill(x > 0, 1.0), ~i, fg.isinf(x),
                x.repeat(2, 2), fg.slice_scatter(x, x[:, 1:], 1, 1), x.max(1)[0],
                fg.select_scatter(i, i[0], 0, 1))

    compare(fn, x, i)


def test_batch_norm_training_step_without_copy_externs(graphs):
    """Batch norm's running statistics (clone + copy_ after functionalization) are computed
    in kernels; the step's values, gradients and running statistics are eager's."""
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Conv2d(3, 4, 3, padding=1), fg.nn.BatchNorm2d(4),
                             fg.nn.ReLU())
    twin = fg.nn.Sequential(fg.nn.Conv2d(3, 4, 3, padding=1), fg.nn.BatchNorm2d(4),
                            fg.nn.ReLU())
    twin.load_state_dict(model.state_dict())
    x = fg.randn(2, 3, 5, 5)
    fg.compile(model, backend="inductor")(x).sum().backward()
    twin(x).sum().backward()
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
    for a, b in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    found = externs(graphs)
    assert not {"clone", "copy_", "squeeze.dims", "bitwise_not"} & set(found), found


def test_copy_into_a_tensor_read_elsewhere_stays_a_write(graphs):
    """copy_ into a tensor something else also reads is no plain value: it stays whole (its
    extern writes, later readers see the write), with eager's results."""

    def fn(x, y):
        c = x.clone()
        before = c * 2
        c.copy_(y)
        return before, c + 1

    x, y = _floats((3, 4)), _floats((4,), seed=9)
    compare(fn, x, y)
