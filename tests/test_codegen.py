"""Code generation: compiled graphs of registry ops against eager execution and torch.

Graphs are built directly with `fusegrad.fx.Graph` (`codegen_support.Recorder`: targets are
small callable handles carrying an `op` attribute, which `resolve_op` follows to the registry
entry)."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from codegen_support import Recorder
from codegen_support import chain as _chain

import fusegrad
from fusegrad import fx
from fusegrad._dispatch import call
from fusegrad.compiler import logs
from fusegrad.compiler.codegen import build, compile_graph
from fusegrad.ops import REGISTRY

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]


SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40, -1e-42, 0.0, 3e38], np.float64)


def _with_specials(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind != "f" or a.size == 0:
        return a
    b = a.copy().reshape(-1)
    sp = SPECIALS.astype(a.dtype)
    b[: min(b.size, sp.size)] = sp[: b.size]
    return b.reshape(a.shape)


def _lowered_ops():
    # (a lowering that takes its op whole, flash attention's C kernels, is an extern call
    # compared with eager within the op's tolerance: tests/test_codegen_training6.py)
    return sorted(name for name, op in REGISTRY.items()
                  if callable(op.lowering) and not op.inplace and not op.random
                  and op.samples is not None and not getattr(op.lowering, "whole", False))


def _close(got: np.ndarray, want: np.ndarray, dtype) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind != "f":
        return np.array_equal(got, want)
    rtol = 2e-6 if want.dtype == np.float32 else 1e-12
    same_nan = np.isnan(got) == np.isnan(want)
    ok = np.isclose(got, want, rtol=rtol, atol=1e-37 if want.dtype == np.float32 else 1e-300,
                    equal_nan=True)
    zero_sign = (want != 0) | (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    return bool(same_nan.all() and ok.all() and zero_sign.all())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", _lowered_ops())
def test_every_lowering_matches_its_kernel(name, dtype):
    """Each op with a lowering gives its kernel's values on its samples, plus the same
    samples with NaN, +-Inf, -0.0 and denormals written in (empty and 0-d shapes included)."""
    op = REGISTRY[name]
    rng = np.random.default_rng(0)
    samples = op.samples(rng, np.dtype(dtype))
    cases = []
    for s in samples:
        for special in (False, True):
            args = tuple(_with_specials(a) if special and isinstance(a, np.ndarray) else a
                         for a in s.args)
            tensors = [fusegrad.from_numpy(np.array(a)) if isinstance(a, np.ndarray) else a
                       for a in args]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = call(op, *tensors)
            except Exception:
                continue  # eager refuses these arguments; so would the graph
            wants = tuple(want) if isinstance(want, (tuple, list)) else (want,)
            if s.kwargs or not all(isinstance(w, fusegrad.Tensor) for w in wants):
                continue
            cases.append((tensors, wants))
    if not cases:
        pytest.skip("no sample eager accepts in this dtype")
    r = Recorder()
    inputs, outs = [], []
    for tensors, _ in cases:
        nodes = []
        for t in tensors:
            if isinstance(t, fusegrad.Tensor):
                nodes.append(r.input())
                inputs.append(t)
            else:
                nodes.append(t)
        node = r.op(name, *nodes)
        outs.append(node)
    results = []  # one graph output per result of each case (getitem for several)
    for node, (_, wants) in zip(outs, cases):
        results += [node] if len(wants) == 1 else [
            r.graph.call_function(operator.getitem, (node, i)) for i in range(len(wants))]
    compiled = compile_graph(r.module(results), inputs)
    got = iter(compiled(*inputs))
    if dtype is not np.int64:  # the lowering ran (not only its extern fallback)
        assert "void cpp_fused_" in compiled.source, name
    for tensors, wants in cases:
        for want in wants:
            g = next(got)
            assert _close(g.numpy(), want.numpy(), dtype), (name, [
                t.numpy() if isinstance(t, fusegrad.Tensor) else t for t in tensors],
                g.numpy(), want.numpy())


def test_chain_is_one_kernel_with_torch_values_and_specials():
    r = Recorder()
    x = r.input()
    gm = r.module([_chain(r, x)])
    data = np.random.default_rng(1).standard_normal(5000).astype(np.float32) * 3
    data[:8] = SPECIALS.astype(np.float32)
    data[8:12] = [1e20, -3e30, 2.0**60, -(2.0**51)]  # sin's exact reduction path
    xt = fusegrad.from_numpy(data)
    compiled = compile_graph(gm, [xt])
    got = compiled(xt)[0].numpy()
    tx = torch.from_numpy(data)
    want = ((torch.sin(tx) * torch.exp(-tx * tx) + 0.5 * tx) / (1 + torch.abs(tx))).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30, equal_nan=True)
    assert compiled.source.count("void cpp_fused_") == 1
    assert "cpp_fused_sin_mul_neg_exp_add_abs_0" in compiled.source


def test_softmax_chain_kernels_and_values():
    """exp(x - amax) / sum(exp(x - amax)): the pointwise parts fuse into the reductions' input
    loops and the final division; values equal torch.softmax."""
    r = Recorder()
    x = r.input()
    m = r.op("amax", x, [1], True)
    e = r.op("exp", r.op("sub.Tensor", x, m))
    s = r.op("sum.dim_IntList", e, [1], True)
    gm = r.module([r.op("div.Tensor", e, s)])
    data = np.random.default_rng(2).standard_normal((37, 53)).astype(np.float32) * 4
    data[0, 3] = np.nan
    data[1, :] = -np.inf
    data[2, 5] = np.inf
    xt = fusegrad.from_numpy(data)
    compiled = compile_graph(gm, [xt])
    got = compiled(xt)[0].numpy()
    want = torch.softmax(torch.from_numpy(data), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-7, equal_nan=True)
    assert compiled.source.count("void cpp_fused_") == 1


def test_views_are_index_arithmetic_and_sizes_are_arguments():
    r = Recorder()
    x, y = r.input(), r.input()
    t = r.op("permute", x, [1, 0])
    v = r.op("view", r.op("add.Tensor", t, y), [-1])
    gm = r.module([r.op("mul.Tensor", v, 2.0)])
    a = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    b = np.random.default_rng(4).standard_normal((6, 1)).astype(np.float32)
    compiled = compile_graph(gm, [fusegrad.from_numpy(a), fusegrad.from_numpy(b)])
    got = compiled(fusegrad.from_numpy(a), fusegrad.from_numpy(b))[0].numpy()
    np.testing.assert_allclose(got, ((a.T + b) * 2).reshape(-1), rtol=1e-6)
    kernels = compiled.source[compiled.source.index("void cpp_fused"):]
    assert " 6" not in kernels and " 4;" not in kernels and "24" not in kernels
    # Another batch size runs the same kernel source (one .so from the cache).
    a2 = np.random.default_rng(5).standard_normal((9, 6)).astype(np.float32)
    got2 = compiled(fusegrad.from_numpy(a2), fusegrad.from_numpy(b))[0].numpy()
    np.testing.assert_allclose(got2, ((a2.T + b) * 2).reshape(-1), rtol=1e-6)
    assert len(compiled.variants) == 2
    assert len(build._loaded) >= 1


def test_fusion_log_says_why(caplog):
    r = Recorder()
    x = r.input()
    s = r.op("sum.dim_IntList", r.op("exp", x), [0], False)  # one value per column
    m = r.op("amax", x, [1], True)  # one per row: the division below joins its loop nest
    gm = r.module([r.op("add.Tensor", x, s), r.op("div.Tensor", x, m)])
    logs.set_logs(fusion=True)
    try:
        with caplog.at_level("INFO", logger="fusegrad.compiler"):
            logs.log.propagate = True
            compile_graph(gm, [fusegrad.randn(5, 3)])
    finally:
        logs.set_logs(fusion=False)
        logs.log.propagate = False
    text = caplog.text
    assert "not fusing sum_dim_int_list into add_tensor: it is a reduction" in text
    assert "fusing div_tensor into the loop nest of amax" in text


def _reference64(fn):
    """The float64 function the float32 kernels are measured against."""
    import math

    if fn == "sigmoid":
        return lambda a: 1 / (1 + np.exp(-a))
    if fn in ("erf", "erfc"):
        return np.vectorize(getattr(math, fn), otypes=[np.float64])
    return getattr(np, fn)


def _ulp_error(got: np.ndarray, x: np.ndarray, fn: str) -> np.ndarray:
    """|got - f(x)| in units of the last place of f(x) rounded to float (0 where equal)."""
    with np.errstate(all="ignore"):
        want64 = _reference64(fn)(x.astype(np.float64))
        want = want64.astype(np.float32)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        ulp = np.spacing(np.abs(want)).astype(np.float64)
        assert np.isnan(got).sum() == np.isnan(want).sum()
        return np.where(same, 0.0, np.abs(got.astype(np.float64) - want64) / ulp)


@pytest.mark.parametrize("fn", ["exp", "log", "sin", "cos", "tanh", "sigmoid", "erf", "erfc"])
def test_math_ulp_error_over_the_float_range(fn):
    """Our vectorised float32 math against float64 results (NumPy; math for erf, erfc),
    rounded: within 1 ulp over random bit patterns (every exponent) and the special values."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, SPECIALS.astype(np.float32),
                        rng.uniform(-20, 20, 100_000).astype(np.float32)])
    r = Recorder()
    p = r.input()
    gm = r.module([r.op(fn, p)])
    xt = fusegrad.from_numpy(x)
    compiled = compile_graph(gm, [xt])
    got = compiled(xt)[0].numpy()
    assert "void cpp_fused_" in compiled.source  # a kernel, not the NumPy fallback
    err = _ulp_error(got, x, fn)
    assert err.max() <= 1.0, (fn, x[np.argmax(err)], err.max())
    zeros = x == 0
    if fn in ("sin", "tanh", "erf"):
        assert (np.signbit(got[zeros]) == np.signbit(x[zeros])).all()


def test_erfc_tail_coefficients_are_the_fit():
    """The erfc tail's stored coefficients are what `fit_erfc_tail` computes (to rounding)."""
    from fusegrad.ops import _mathlib as mathlib

    fit = mathlib.fit_erfc_tail()
    t = np.linspace(-1, 1, 1001)
    stored, fresh = (np.polynomial.polynomial.polyval(t, c) for c in (mathlib.ERFC_TAIL, fit))
    assert np.max(np.abs(stored / fresh - 1)) < 1e-13


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_fast_sin_cos_below_512(fn):
    """sin/cos's float reduction (|x| < 512, where no argument sends the kernel to the
    exact rerun) within 1 ulp: all floats of [0.5, 1) and [256, 512), and the floats
    nearest each multiple of pi/2 with their neighbours (where the reduction cancels)."""
    def floats(lo, hi):
        return np.arange(lo, hi, 7, dtype=np.int64).astype(np.int32).view(np.float32)

    k = np.arange(1, 330)
    nearest = (k * (np.pi / 2)).astype(np.float32).view(np.int32)
    near = (nearest[:, None] + np.arange(-300, 300)[None, :]).astype(np.int32)
    x = np.concatenate([floats(0x3F000000, 0x3F800000), floats(0x43800000, 0x44000000),
                        near.ravel().view(np.float32)])
    x = np.concatenate([x, -x])
    x = x[np.abs(x) < 512]
    r = Recorder()
    p = r.input()
    compiled = compile_graph(r.module([r.op(fn, p)]), [fusegrad.from_numpy(x)])
    got = compiled(fusegrad.from_numpy(x))[0].numpy()
    err = _ulp_error(got, x, fn)
    assert err.max() <= 1.0, (fn, x[np.argmax(err)], err.max())


def test_no_compiler_warns_once_and_runs_eagerly(monkeypatch):
    from fusegrad.compiler import codegen

    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(codegen, "_warned_no_compiler", [False])
    r = Recorder()
    x = r.input()
    gm = r.module([_chain(r, x)])
    xt = fusegrad.randn(100)
    with pytest.warns(UserWarning, match="no C compiler"):
        got = compile_graph(gm, [xt])(xt)[0]
    d = xt.numpy()
    want = (np.sin(d) * np.exp(-d * d) + 0.5 * d) / (1 + np.abs(d))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_compiler_error_shows_source_and_falls_back(monkeypatch):
    monkeypatch.setenv("CC", "false")
    r = Recorder()
    x = r.input()
    gm = r.module([r.op("exp", x)])
    xt = fusegrad.randn(10)
    with pytest.warns(UserWarning, match="(?s)compiler failed.*cpp_fused_exp"):
        got = compile_graph(gm, [xt])(xt)[0]
    np.testing.assert_allclose(got.numpy(), np.exp(xt.numpy()), rtol=1e-6)


_CHILD = """
import sys, numpy as np, fusegrad
sys.path.insert(0, {tests!r})
from codegen_support import Recorder, chain
from fusegrad.compiler.codegen import compile_graph
r = Recorder(); x = r.input(); gm = r.module([chain(r, x)])
xt = fusegrad.from_numpy(np.linspace(-3, 3, 1000, dtype=np.float32))
out = compile_graph(gm, [xt])(xt)[0].numpy()
d = xt.numpy().astype(np.float64)
want = (np.sin(d) * np.exp(-d * d) + 0.5 * d) / (1 + np.abs(d))
assert np.allclose(out, want, rtol=1e-5, atol=1e-7), "wrong values"
print("ok")
"""


def test_cache_across_processes_and_corrupt_entry(tmp_path):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    code = _CHILD.format(tests=os.path.dirname(__file__))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err
    entries = [f for f in os.listdir(tmp_path) if f.endswith(".so")]
    assert len(entries) == 1
    path = tmp_path / entries[0]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a torn entry
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
    assert path.read_bytes() == data or len(path.read_bytes()) == len(data)


def test_extern_between_kernels_and_repeated_calls():
    """mm has no lowering: it runs its NumPy kernel on the buffers between two kernels (its
    input computed by one, its output read by the other); intermediates are reused across
    calls while outputs are fresh, so earlier results stay intact."""
    r = Recorder()
    a, w, b = r.input(), r.input(), r.input()
    h = r.op("mm", r.op("tanh", a), w)
    y = r.op("relu", r.op("add.Tensor", h, b))
    gm = r.module([y, r.op("sum.dim_IntList", y, [1], False)])
    rng = np.random.default_rng(9)
    data = [rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 3), (3,))]
    tensors = [fusegrad.from_numpy(d) for d in data]
    compiled = compile_graph(gm, tensors)
    assert "extern mm" in compiled.source  # tanh; mm; add+relu; sum: three kernels
    assert compiled.source.count("void cpp_fused_") == 3
    first = compiled(*tensors)
    ta, tw, tb = (torch.from_numpy(d) for d in data)
    want = torch.relu(torch.tanh(ta) @ tw + tb)
    np.testing.assert_allclose(first[0].numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(first[1].numpy(), want.sum(1).numpy(), rtol=1e-5, atol=1e-5)
    kept = first[0].numpy().copy()
    other = [fusegrad.from_numpy(d * 2) for d in data]
    second = compiled(*other)
    np.testing.assert_array_equal(first[0].numpy(), kept)
    want2 = torch.relu(torch.tanh(ta * 2) @ (tw * 2) + tb * 2)
    np.testing.assert_allclose(second[0].numpy(), want2.numpy(), rtol=1e-5, atol=1e-6)


def test_integer_and_bool_graph_with_zero_dim_input():
    r = Recorder()
    a, s = r.input(), r.input()
    m = r.op("gt.Tensor", r.op("mul.Tensor", a, s), 4)
    gm = r.module([r.op("where.self", m, a, r.op("neg", a)), r.op("sum", a)])
    a_np = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    ins = [fusegrad.from_numpy(a_np), fusegrad.from_numpy(np.array(3, np.int64))]
    got = compile_graph(gm, ins)(*ins)
    ta = torch.from_numpy(a_np)
    want = torch.where(ta * 3 > 4, ta, -ta)
    assert got[0].dtype == fusegrad.int64 and got[1].dtype == fusegrad.int64
    np.testing.assert_array_equal(got[0].numpy(), want.numpy())
    assert int(got[1].item()) == int(ta.sum())


def test_layer_norm_chain_is_one_kernel(caplog):
    """mean, variance and normalisation over rows share one loop nest; the output code log
    shows the wrapper and the kernel."""
    r = Recorder()
    x = r.input()
    mean = r.op("mean.dim", x, [1], True)
    d = r.op("sub.Tensor", x, mean)
    var = r.op("mean.dim", r.op("mul.Tensor", d, d), [1], True)
    gm = r.module([r.op("mul.Tensor", d, r.op("rsqrt", r.op("add.Tensor", var, 1e-5)))])
    data = np.random.default_rng(11).standard_normal((33, 70)).astype(np.float32) * 3 + 1
    xt = fusegrad.from_numpy(data)
    logs.set_logs(output_code=True)
    try:
        with caplog.at_level("INFO", logger="fusegrad.compiler"):
            logs.log.propagate = True
            compiled = compile_graph(gm, [xt])
    finally:
        logs.set_logs(output_code=False)
        logs.log.propagate = False
    got = compiled(xt)[0].numpy()
    want = torch.nn.functional.layer_norm(torch.from_numpy(data), (70,), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    assert compiled.source.count("void cpp_fused_") == 1
    assert "def call(args):" in caplog.text and "void cpp_fused_" in caplog.text


def test_graph_with_size_inputs():
    """A graph taking a size as an integer input (a symbolic size of a captured graph, `s0`)
    with arithmetic on it (`s0 * 4`) compiles: one variant per size, each equal to NumPy."""
    import operator

    g = fx.Graph()
    s0 = g.placeholder("s0")
    x = g.placeholder("l_x_")
    rows = g.call_function(operator.mul, (s0, 4))
    view = g.call_function(fusegrad.ops.aten.view.default, (x, [rows, -1]))
    out = g.call_function(fusegrad.ops.aten.mul.Tensor,
                          (g.call_function(fusegrad.ops.aten.exp.default, (view,)), 2.0))
    g.output((out,))
    compiled = compile_graph(fx.GraphModule({}, g), [2, fusegrad.randn(2, 4, 5)])
    for b in (2, 3, 5):
        x_np = np.random.default_rng(b).standard_normal((b, 4, 5)).astype(np.float32)
        got = compiled(b, fusegrad.tensor(x_np))[0].numpy()
        np.testing.assert_allclose(got, np.exp(x_np.reshape(b * 4, -1)) * 2, rtol=1e-6)
    assert len(compiled.variants) == 3


def test_multiply_add_rounds_twice_as_eager_and_torch_compile():
    # A fused kernel computing x * y + y rounds the product before the sum, as eager does
    # and as torch.compile's kernels do (an FMA rounds once: last-bit differences).
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(20000).astype(np.float32) for _ in range(2)]

    def fn(x, y):
        return x * y + y

    x, y = (fusegrad.tensor(a) for a in xs)
    got = fusegrad.compile(fn)(x, y).numpy()
    np.testing.assert_array_equal(got, fn(x, y).numpy())
    tx, ty = (torch.from_numpy(a) for a in xs)
    np.testing.assert_array_equal(got, torch.compile(fn)(tx, ty).numpy())


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8", "int8"])
def test_float_to_integer_casts_convert_as_eager(dtype):
    # `(float)(int64_t)x` must stay a conversion (GCC would fold it into truncf, keeping
    # -0.0, NaN and out-of-range values), so compiled values are eager's (the CPU's cast).
    x = fusegrad.tensor([float("nan"), 1e20, -1e20, float("inf"), -0.7, 3.9, -2.5, 0.0])
    dt = getattr(fusegrad, dtype)

    def f(x):
        return (x * 1.0).to(dt).to(fusegrad.float32) + 0

    fusegrad._dynamo.reset()
    got = fusegrad.compile(f, backend="inductor")(x).numpy()
    want = f(x).numpy()
    np.testing.assert_array_equal(got, want)
    assert list(np.signbit(got)) == list(np.signbit(want))
