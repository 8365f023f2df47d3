"""Faster generated loops with eager's results (2): a loop variable that loads divide and
take the remainder of (a reshape merging dims) split into two loops, `cat` computed one loop
nest per input (no select per element), argmax/argmin over 64 lanes merged pairwise.

Oracles: torch and eager fusegrad (values, first index of ties and NaNs, output strides);
the structural properties are read from the generated C.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from codegen_support import Recorder
from test_codegen_speedups import _tricky

import fusegrad as fg
from fusegrad.compiler.codegen import build, compile_graph

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]


def _kernels(source: str) -> str:
    return source[source.index("void cpp_fused"):]


def _inner_loop_bodies(source: str) -> list[list[str]]:
    """The lines of every innermost `for` loop of the kernels in `source`."""
    lines = _kernels(source).splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("for ("):
            continue
        depth, body = 0, []
        for rest in lines[i + 1:]:
            if rest.lstrip().startswith("for (") and depth == 0:
                body = None  # not innermost
                break
            depth += rest.count("{") - rest.count("}")
            if depth < 0:
                break
            body.append(rest)
        if body is not None:
            out.append(body)
    return out


# ------------------------------------------------------------------ cat and reshapes


def _attention_grads_cat(b=3, h=4, s=5, d=8):
    """cat of three (B, H, S, D) tensors permuted to (B, S, H, D), viewed (B, S, H*D), along
    the last dim, viewed (B*S, 3*H*D): the q/k/v gradient of attention's backward."""
    r = Recorder()
    xs = [r.input() for _ in range(3)]
    parts = [r.op("view", r.op("permute", x, [0, 2, 1, 3]), [b, s, h * d]) for x in xs]
    out = r.op("view", r.op("cat", parts, 2), [b * s, 3 * h * d])
    return r.module([out]), (b, h, s, d)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_cat_of_permuted_views_is_one_loop_per_input(dtype):
    gm, shape = _attention_grads_cat()
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal(shape) * 10).astype(dtype) for _ in range(3)]
    if dtype != np.int64:
        data[1].reshape(-1)[:4] = [np.nan, -0.0, np.inf, -np.inf]
    xs = [fg.from_numpy(a) for a in data]
    compiled = compile_graph(gm, xs)
    got = compiled(*xs)[0]
    tx = [torch.from_numpy(a).permute(0, 2, 1, 3).reshape(3, 5, 32) for a in data]
    want = torch.cat(tx, 2).view(15, 96)
    assert got.numpy().tobytes() == want.numpy().tobytes()  # the same bits
    assert got.stride() == want.stride()
    src = _kernels(compiled.source)
    assert " ? " not in src  # no select between the inputs
    # No division or remainder in any innermost loop: the reshape's merged dim (H*D) is
    # two loops, and the row's division is computed once before the innermost loop.
    for body in _inner_loop_bodies(compiled.source):
        assert not any("/" in x or "%" in x for x in body), body


@pytest.mark.parametrize("sizes,dim", [([3, 1, 4], 1), ([2, 5], 0), ([7, 9, 1], -1),
                                       ([0, 6], 1), ([16, 16], 1)])
def test_cat_values_and_strides_under_compile(sizes, dim):
    rng = np.random.default_rng(len(sizes) + dim)

    def shape(n):
        s = [4, 6]
        s[dim] = n
        return s

    arrays = [rng.standard_normal(shape(n)).astype(np.float32) for n in sizes]

    def fn(lib, xs):
        ys = [x * 2 + 1 for x in xs]
        return lib.cat(ys, dim).t().contiguous() + 0, lib.cat(xs, dim) * 3

    fg_xs = [fg.from_numpy(a) for a in arrays]
    got = fg.compile(lambda *xs: fn(fg, xs))(*fg_xs)
    eager = fn(fg, fg_xs)
    want = fn(torch, [torch.from_numpy(a) for a in arrays])
    for g, e, w in zip(got, eager, want):
        assert g.numpy().tobytes() == e.numpy().tobytes()
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert g.stride() == e.stride() == w.stride()


def test_cat_of_mixed_dtypes_and_a_broadcast_input():
    a = fg.from_numpy(np.arange(12, dtype=np.int64).reshape(3, 4))
    b = fg.from_numpy(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))

    def fn(lib, a, b):
        return (lib.cat([a, b, b.sum(0, keepdim=True)], 0) * 2,)

    got = fg.compile(lambda a, b: fn(fg, a, b))(a, b)[0]
    want = fn(torch, torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy()))[0]
    assert got.dtype == fg.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(got.numpy(), fn(fg, a, b)[0].numpy())


@pytest.mark.parametrize("shape,perm,view", [
    ((4, 3, 5, 8), (0, 2, 1, 3), (20, 24)),   # attention's output re-laid out
    ((6, 4, 16), (1, 0, 2), (4, 96)),
    ((2, 3, 4, 5), (0, 2, 1, 3), (2, 4, 15)),  # a merged dim of 3 * 5
    ((3, 2, 3), (0, 2, 1), (3, 6)),           # a divisor too small to split for
])
def test_reshape_of_a_permute_splits_the_merged_loop(shape, perm, view):
    r = Recorder()
    x = r.input()
    gm = r.module([r.op("clone", r.op("view", r.op("clone", r.op("permute", x, list(perm))),
                                      list(view)))])
    data = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    xt = fg.from_numpy(data)
    compiled = compile_graph(gm, [xt])
    got = compiled(xt)[0]
    want = torch.from_numpy(data).permute(perm).reshape(view)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.stride() == want.contiguous().stride()
    if shape[-1] >= 4:
        for body in _inner_loop_bodies(compiled.source):
            assert not any("/" in t or "%" in t for t in body), body
        assert re.search(r"for \(int64_t x\d+r = 0;", compiled.source)


def test_fused_consumer_of_a_split_loop_keeps_eager_values():
    def fn(lib, q):
        y = q.transpose(1, 2).reshape(4, 10, 96)
        return (lib.erf(y) * 2 - y.abs(),)

    data = np.random.default_rng(2).standard_normal((4, 3, 10, 32)).astype(np.float32)
    data.reshape(-1)[:3] = [np.nan, 600.0, -0.0]
    x = fg.from_numpy(data)
    got = fg.compile(lambda q: fn(fg, q))(x)[0]
    eager = fn(fg, x)[0]
    # (generated float32 erf is within one ulp of eager's: twice that after `* 2`)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=2.4e-7, atol=2.4e-7)
    np.testing.assert_allclose(got.numpy(), fn(torch, torch.from_numpy(data))[0].numpy(),
                               rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ argmax / argmin


def _arg_graph(name, dim, keepdim, fused):
    r = Recorder()
    x = r.input()
    src = r.op("mul.Tensor", r.op("abs", x), -2) if fused else x
    return r.module([r.op(name, src, dim, keepdim)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("cols", [1, 15, 16, 65, 130, 300])
def test_argmax_argmin_first_index_and_nan(dtype, cols):
    data = _tricky((19, cols), dtype if dtype != np.int64 else np.float64, seed=cols)
    if dtype == np.int64:
        data = np.nan_to_num(data, posinf=9, neginf=-9).astype(np.int64)
    data[0, :] = data[0, 0]  # one value everywhere: index 0
    data[1, :] = 3
    data[1, -1] = 4  # the last element
    xt, tx = fg.from_numpy(data), torch.from_numpy(data)
    for name in ("argmax", "argmin"):
        compiled = compile_graph(_arg_graph(name, 1, False, False), [xt])
        got = compiled(xt)[0].numpy()
        np.testing.assert_array_equal(got, getattr(tx, name)(1).numpy())
        np.testing.assert_array_equal(got, getattr(xt, name)(1).numpy())
        # lanes: 64 over long rows (four independent vectors), 1 below 16 (none to merge)
        lanes = 64 if cols >= 256 else 16 if cols >= 16 else 1
        assert f"acc[{lanes}];" in compiled.source


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_over_all_dims_fused_and_keepdim(name):
    data = _tricky((6, 9, 70), np.float32, seed=7)
    clean = np.where(np.isnan(data), 1.5, data).astype(np.float32)
    for arr in (data, clean):
        xt, tx = fg.from_numpy(arr), torch.from_numpy(arr)
        for dim, keepdim, fused in ((None, False, False), (2, True, True), (1, False, True),
                                    (0, True, False)):
            compiled = compile_graph(_arg_graph(name, dim, keepdim, fused), [xt])
            got = compiled(xt)[0].numpy()
            src = (tx.abs() * -2) if fused else tx
            want = getattr(src, name)(dim, keepdim) if dim is not None else \
                getattr(src, name)()
            np.testing.assert_array_equal(got, want.numpy())
            ex = (xt.abs() * -2) if fused else xt
            np.testing.assert_array_equal(
                got, (getattr(ex, name)(dim, keepdim) if dim is not None else
                      getattr(ex, name)()).numpy())


# ------------------------------------------------------------------ grouped column sums


def _lane_column_sums(x: np.ndarray) -> np.ndarray:
    """Sums over dims 0 and 1 of float32 `x` as the kernel accumulates them: in double, 16
    lanes over dim 1 (the tail into lane 0) for each index of dim 0, lanes added in order."""
    r0, r1, _ = x.shape
    acc = np.zeros((16, x.shape[2]))
    for i in range(r0):
        rb = 0
        while rb + 16 <= r1:
            acc += x[i, rb:rb + 16].astype(np.float64)
            rb += 16
        for j in range(rb, r1):
            acc[0] += x[i, j]
    res = acc[0].copy()
    for lane in range(1, 16):
        res += acc[lane]
    return res.astype(np.float32)


@pytest.mark.parametrize("shape", [(16, 64, 128), (3, 21, 40)])
def test_grouped_column_sums_read_whole_rows(shape):
    """A layer norm's weight and bias gradients: two sums over the same rows of (B, S, C),
    each computed over whole rows (no strided walk down each column), same bits."""
    r = Recorder()
    g, xhat = r.input(), r.input()
    gm = r.module([r.op("sum.dim_IntList", r.op("mul.Tensor", g, xhat), [0, 1]),
                   r.op("sum.dim_IntList", g, [0, 1])])
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    arrays[0][1, 2, 3] = np.nan
    xs = [fg.from_numpy(a) for a in arrays]
    compiled = compile_graph(gm, xs)
    got = [t.numpy() for t in compiled(*xs)]
    prod = (arrays[0] * arrays[1]).astype(np.float32)
    for out, src in zip(got, (prod, arrays[0])):
        assert out.tobytes() == _lane_column_sums(src).tobytes()
        want = torch.from_numpy(src).sum((0, 1)).numpy()
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    src = _kernels(compiled.source)
    assert src.count("void cpp_fused") == 1 and src.count("acc[16][64]") == 2
