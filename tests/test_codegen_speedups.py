"""Faster generated loops with eager's results: float max/min row reductions vectorised over
their 16 lanes (the NaN kept apart from the compare chain), pointwise loops in the output's
memory order, transposing pointwise loops tiled, reduction kernels named by their kind.

Oracles: torch and eager fusegrad (values, NaN positions, output strides), and a NumPy
model of the documented 16-lane accumulation (lane `l` takes elements `l, l + 16, ...`, the
tail goes to lane 0, lanes merge in order; a NaN replaces the lane's value): the bits of
signed zeros and NaN payloads the kernel gave before these changes.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from codegen_support import Handle, Recorder

import fusegrad as fg
from fusegrad.compiler.codegen import build, compile_graph
from fusegrad.ops import REGISTRY

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]

LANES = 16


def _tricky(shape, dtype, seed=0) -> np.ndarray:
    """Many ties, both zeros, infinities and NaNs of several payloads and signs."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=shape).astype(dtype)
    f = a.reshape(-1)
    m = rng.random(f.size)
    f[m < 0.15] = 0.0
    f[(m >= 0.15) & (m < 0.3)] = -0.0
    f[rng.random(f.size) < 0.02] = np.inf
    bits = ([0x7FC00001, 0xFFC00002, 0x7FC00003] if dtype == np.float32 else
            [0x7FF8000000000001, 0xFFF8000000000002, 0x7FF8000000000003])
    nans = np.array(bits, np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    sel = rng.random(f.size) < 0.01
    f[sel] = rng.choice(nans, int(sel.sum()))
    return a


def _lane_model(row: np.ndarray, kind: str):
    """The row's max/min as the kernel's 16 lanes compute it (its exact bits)."""
    better = (lambda v, a: v > a) if kind == "max" else (lambda v, a: v < a)
    init = row.dtype.type(-np.inf if kind == "max" else np.inf)
    acc = [init] * LANES
    n = row.size
    full = n - n % LANES
    for i in range(n):
        lane = i % LANES if i < full else 0
        v = row[i]
        if better(v, acc[lane]) or v != v:
            acc[lane] = v
    res = acc[0]
    for lane in range(1, LANES):
        v = acc[lane]
        if better(v, res) or v != v:
            res = v
    return res


def _reduce_graph(name: str, dims, fused: bool):
    r = Recorder()
    x = r.input()
    src = r.op("mul.Tensor", r.op("abs", x), 2) if fused else x
    return r.module([r.op(name, src, dims)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["amin", "amax"])
@pytest.mark.parametrize("cols", [1, 15, 16, 37, 300])
def test_row_max_min_keep_their_bits(name, dtype, cols):
    data = _tricky((23, cols), dtype, seed=cols)
    xt = fg.from_numpy(data)
    compiled = compile_graph(_reduce_graph(name, [1], False), [xt])
    got = compiled(xt)[0].numpy()
    want_torch = getattr(torch.from_numpy(data), name)(1).numpy()
    eager = getattr(xt, name)(1).numpy()
    # Values and NaN positions: torch's and eager's (-0.0 == 0.0 here).
    np.testing.assert_array_equal(got, want_torch)
    np.testing.assert_array_equal(got, eager)
    # Bits (zero signs, NaN payloads): the 16-lane accumulation's.
    model = np.array([_lane_model(row, name[1:]) for row in data], dtype)
    assert got.tobytes() == model.tobytes()
    if cols >= LANES:  # the vectorisable form: the lane loop kept, the NaN apart
        assert '_Pragma("GCC unroll 1")' in compiled.source
        assert "nv[l] = (" in compiled.source


@pytest.mark.parametrize("name", ["amin", "amax"])
def test_fused_and_multi_dim_max_min(name):
    data = _tricky((5, 7, 40), np.float32, seed=3)
    xt = fg.from_numpy(data)
    for dims, fused in (([1, 2], False), ([2], True), ([0, 2], True)):
        compiled = compile_graph(_reduce_graph(name, dims, fused), [xt])
        got = compiled(xt)[0].numpy()
        tx = torch.from_numpy(data)
        want = getattr(tx.abs() * 2 if fused else tx, name)(dims).numpy()
        np.testing.assert_array_equal(got, want)
        ex = xt.abs() * 2 if fused else xt
        np.testing.assert_array_equal(got, getattr(ex, name)(dims).numpy())


def test_integer_max_min():
    data = np.random.default_rng(1).integers(-50, 50, (9, 70))
    xt = fg.from_numpy(data)
    for name in ("amin", "amax"):
        got = compile_graph(_reduce_graph(name, [1], False), [xt])(xt)[0].numpy()
        np.testing.assert_array_equal(got, getattr(torch.from_numpy(data), name)(1).numpy())


def _kernels(source: str) -> str:
    return source[source.index("void cpp_fused"):]


def test_transposed_clone_loops_in_output_order():
    """`clone(x.t()) + 1` keeps eager's transposed layout; its loops follow that layout
    (the innermost one writes and reads contiguously) rather than the logical order."""
    data = np.random.default_rng(2).standard_normal((70, 45)).astype(np.float32)
    x = fg.from_numpy(data)
    f = fg.compile(lambda t: fg.clone(t.t()) + 1)
    got = f(x)
    want = torch.clone(torch.from_numpy(data).t()) + 1
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.stride() == want.stride() == (1, 45)
    eager = fg.clone(x.t()) + 1
    assert got.stride() == eager.stride()
    np.testing.assert_array_equal(got.numpy(), eager.numpy())

    r = Recorder()
    xi = r.input()
    out = r.op("add.Tensor", r.op("clone", r.op("t", xi)), 1)
    compiled = compile_graph(r.module([out]), [x])
    res = compiled(x)[0]
    assert res.stride() == (1, 45)
    np.testing.assert_array_equal(res.numpy(), want.numpy())
    loops = re.findall(r"for \(int64_t (x\d)", _kernels(compiled.source))
    assert loops == ["x1", "x0"]  # x0 (stride 1 in the output) innermost


@pytest.mark.parametrize("shape", [(70, 45), (16, 32), (3, 200), (1, 40)])
def test_transposing_copy_is_tiled(shape):
    data = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    x = fg.from_numpy(data)
    r = Recorder()
    xi = r.input()
    # A transposed read, a row-major write (`x.t().contiguous() * 2`).
    copy = r.graph.call_function(Handle(REGISTRY["clone"]), (r.op("t", xi),),
                                 {"memory_format": fg.contiguous_format})
    out = r.op("mul.Tensor", copy, 2)
    compiled = compile_graph(r.module([out]), [x])
    got = compiled(x)[0]
    want = torch.from_numpy(data).t().contiguous() * 2
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    eager = x.t().contiguous() * 2
    assert got.stride() == eager.stride()
    if min(shape) > 1:  # (eager's strides of a size-1 dim are not torch's: (1, 1))
        assert got.stride() == want.stride()
    if min(shape) > 1:
        assert "+= 16)" in _kernels(compiled.source)  # the tile loops


def test_tiled_permute_of_three_dims_under_compile():
    data = np.random.default_rng(5).standard_normal((3, 37, 50)).astype(np.float32)
    x = fg.from_numpy(data)
    f = fg.compile(lambda t: t.permute(0, 2, 1).contiguous().exp() + t.sum())
    got = f(x)
    eager = x.permute(0, 2, 1).contiguous().exp() + x.sum()
    want = torch.from_numpy(data).permute(0, 2, 1).contiguous().exp() + \
        torch.from_numpy(data).sum()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-6)
    assert got.stride() == eager.stride() == want.stride()


def test_reduction_kernels_are_named_by_their_kind():
    """A column sum (a bias gradient) is `cpp_fused_sum_*`, not a `copy` kernel."""
    data = np.random.default_rng(6).standard_normal((64, 48)).astype(np.float32)
    x = fg.from_numpy(data)
    r = Recorder()
    xi = r.input()
    outs = [r.op("sum.dim_IntList", xi, [0]), r.op("amax", r.op("exp", xi), [1])]
    compiled = compile_graph(r.module(outs), [x])
    got = compiled(x)
    tx = torch.from_numpy(data)
    np.testing.assert_allclose(got[0].numpy(), tx.sum(0).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), tx.exp().amax(1).numpy(), rtol=1e-6)
    names = re.findall(r"void (cpp_fused_\w+)\(", compiled.source)
    assert any(n.startswith("cpp_fused_sum_") for n in names), names
    assert any(n.startswith("cpp_fused_exp_max_") for n in names), names
    assert not any(n.startswith("cpp_fused_copy_") for n in names), names
