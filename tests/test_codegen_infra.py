"""Code generation's infrastructure: the graph-level cache across processes, buffer reuse,
the modes (reduce-overhead, max-autotune), FUSEGRAD_DEBUG_DIR, output_code on the seed's
toy example, the fallbacks without a working C compiler. Values are checked against torch
or NumPy."""

from __future__ import annotations

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
from fusegrad.compiler import logs
from fusegrad.compiler.codegen import build, compile_graph, graph_cache

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")



@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


_GRAPH = """
import numpy as np
import fusegrad
from fusegrad import fx
from fusegrad.ops import aten


def mlp_graph():
    # relu(tanh(a) @ w + b), its row sums and the chain of a: kernels, an extern between
    # them and a constant list argument.
    g = fx.Graph()
    a, w, b = g.placeholder("a"), g.placeholder("w"), g.placeholder("b")
    f = g.call_function
    y = f(aten.relu.default, (f(aten.add.Tensor, (f(aten.mm.default, (
        f(aten.tanh.default, (a,)), w)), b)),))
    num = f(aten.add.Tensor, (f(aten.mul.Tensor, (f(aten.sin.default, (a,)), f(
        aten.exp.default, (f(aten.neg.default, (f(aten.mul.Tensor, (a, a)),)),)))),
        f(aten.mul.Tensor, (a, 0.5))))
    chain = f(aten.div.Tensor, (num, f(aten.add.Tensor, (f(aten.abs.default, (a,)), 1))))
    g.output((y, f(aten.sum.dim_IntList, (y, [1], False)), chain))
    return fx.GraphModule(fusegrad.nn.Module(), g)


def mlp_want(a, w, b):
    a, w, b = (x.astype(np.float64) for x in (a, w, b))
    y = np.maximum(np.tanh(a) @ w + b, 0)
    return [y, y.sum(1), (np.sin(a) * np.exp(-a * a) + 0.5 * a) / (1 + np.abs(a))]
"""
exec(_GRAPH)
_mlp_graph, _mlp_want = mlp_graph, mlp_want  # noqa: F821  (defined by the exec above)

_CHILD = _GRAPH + """
import os, sys
from fusegrad.compiler import codegen
if os.environ.get("EXPECT_WARM"):
    def no_lowering(*a, **k):
        raise AssertionError("lowered although the graph-level cache holds the graph")
    codegen.GraphLowering = no_lowering
rng = np.random.default_rng(int(sys.argv[1]))
data = [rng.standard_normal(s).astype(np.float32) for s in ((6, 9), (9, 5), (5,))]
ins = [fusegrad.from_numpy(d) for d in data]
compiled = codegen.compile_graph(mlp_graph(), ins)
for got, want in zip(compiled(*ins), mlp_want(*data)):
    assert np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-6), "wrong values"
print("warm" if compiled.from_cache else "cold")
"""


def _run_children(cache_dir, n: int, warm: bool = False) -> list:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1")
    if warm:
        env["EXPECT_WARM"] = "1"
    code = _CHILD
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_graph_cache_across_processes_and_corrupt_entries(cache):
    """Four processes compile one graph at once into an empty cache: each result is right
    and one graph entry and one kernel entry remain. A process started later finds the
    graph there and does not lower it. Corrupt entries are detected, rebuilt and right."""
    _run_children(cache, 4)
    graphs = sorted(cache.glob("graph_*.pkl"))
    libs = sorted(cache.glob("fg_*.so"))
    assert len(graphs) == 1 and len(libs) == 1
    good_graph, good_lib = graphs[0].read_bytes(), libs[0].read_bytes()
    graphs[0].write_bytes(good_graph[: len(good_graph) // 2])  # a torn write
    flipped = bytearray(good_lib)
    flipped[len(flipped) // 2] ^= 0xFF
    libs[0].write_bytes(bytes(flipped))  # a damaged shared object
    assert _run_children(cache, 1) == ["cold"]
    assert build.read_entry(str(graphs[0])) is not None
    assert libs[0].read_bytes() == good_lib  # rebuilt: the build is deterministic
    assert _run_children(cache, 1, warm=True) == ["warm"]


def test_graph_key_follows_graph_signature_and_options(cache):
    gm = _mlp_graph()
    data = [np.ones(s, np.float32) for s in ((6, 9), (9, 5), (5,))]
    sig = compile_graph(gm, [fusegrad.from_numpy(d) for d in data])._signature(
        [fusegrad.from_numpy(d) for d in data])
    key = graph_cache.graph_key(gm, sig, (True, False, False))
    assert key == graph_cache.graph_key(_mlp_graph(), sig, (True, False, False))
    assert key != graph_cache.graph_key(gm, sig, (True, True, False))
    wider = [fusegrad.from_numpy(np.ones(s, np.float32)) for s in ((7, 9), (9, 5), (5,))]
    assert key != graph_cache.graph_key(gm, compile_graph(gm, wider)._signature(wider),
                                        (True, False, False))
    r = Recorder()
    a, w, b = r.input(), r.input(), r.input()
    y = r.op("relu", r.op("add.Tensor", r.op("mm", r.op("tanh", a), w), b))
    other = r.module([y, r.op("sum.dim_IntList", y, [0], False), _chain(r, a)])
    assert key != graph_cache.graph_key(other, sig, (True, False, False))


def _reuse_graph():
    """exp, mm, tanh, mm, sin, mm on 8x8: the buffer of exp(a) is dead once the first mm's
    result (a possible view of it) has been read, so sin's buffer can take its memory."""
    r = Recorder()
    a, w = r.input(), r.input()
    h = r.op("mm", r.op("exp", a), w)
    h = r.op("mm", r.op("tanh", h), w)
    return r.module([r.op("mm", r.op("sin", h), w)])


def _reuse_want(a, w):
    ta, tw = torch.from_numpy(a).double(), torch.from_numpy(w).double()
    return ((torch.sin(torch.tanh(torch.exp(ta) @ tw) @ tw)) @ tw).numpy()


def test_dead_buffers_are_reused(cache):
    rng = np.random.default_rng(3)
    a, w = (rng.standard_normal((8, 8)).astype(np.float32) * 0.5 for _ in range(2))
    ins = [fusegrad.from_numpy(a), fusegrad.from_numpy(w)]
    compiled = compile_graph(_reuse_graph(), ins)
    assert compiled.source.count("_empty(") == 2 and "reuses buf" in compiled.source
    np.testing.assert_allclose(compiled(*ins)[0].numpy(), _reuse_want(a, w), rtol=1e-5,
                               atol=1e-6)
    plain = compile_graph(_reuse_graph(), ins, {"allow_buffer_reuse": False})
    assert plain.source.count("_empty(") == 3 and "reuses" not in plain.source


def _alias_graph():
    r = Recorder()
    x = r.input()
    return r.module([r.op("alias", r.op("exp", x)), r.op("sin", x)])


def test_reduce_overhead_keeps_intermediates_never_outputs(cache):
    """Intermediates are allocated once; a returned tensor, even a view an extern made of
    an intermediate, is not overwritten by the next call."""
    rng = np.random.default_rng(4)
    a, w = (rng.standard_normal((8, 8)).astype(np.float32) * 0.5 for _ in range(2))
    ins = [fusegrad.from_numpy(a), fusegrad.from_numpy(w)]
    compiled = compile_graph(_reuse_graph(), ins, {"triton.cudagraphs": True})
    assert "_empty(" not in compiled.source  # no allocation in the call: all preallocated
    first = compiled(*ins)[0]
    kept = first.numpy().copy()
    second = compiled(fusegrad.from_numpy(a * 2), ins[1])[0]
    np.testing.assert_array_equal(first.numpy(), kept)
    np.testing.assert_allclose(kept, _reuse_want(a, w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(second.numpy(), _reuse_want(a * 2, w), rtol=1e-5, atol=1e-6)
    x = fusegrad.from_numpy(a)
    aliased = compile_graph(_alias_graph(), [x], {"triton.cudagraphs": True})
    out = aliased(x)
    again = aliased(fusegrad.from_numpy(a + 1))
    np.testing.assert_allclose(out[0].numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(again[0].numpy(), np.exp(a + 1), rtol=1e-6)


def test_reduce_overhead_mode_trains_like_eager(cache):
    """fusegrad.compile(mode="reduce-overhead") of a small model: losses and gradients as
    eager's over steps with new batches (the compiled graphs' buffers live across calls)."""
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(6, 16), fusegrad.nn.Tanh(),
                                   fusegrad.nn.Linear(16, 3))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for p, q in zip(model.parameters(), twin.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    step = fusegrad.compile(model, mode="reduce-overhead")
    rng = np.random.default_rng(5)
    outs = []
    for _ in range(3):
        x = rng.standard_normal((4, 6)).astype(np.float32)
        y = step(fusegrad.from_numpy(x))
        y.sum().backward()
        want = twin(torch.from_numpy(x))
        want.sum().backward()
        outs.append((y, want))
    for y, want in outs:  # earlier outputs intact
        np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_max_autotune_times_variants_and_keeps_identical_results(cache, caplog):
    """Each kernel is timed with and without OpenMP; the choice never changes a bit of the
    result, and a second compile of the graph takes the choice from the cache."""
    data = np.random.default_rng(6).standard_normal(300_000).astype(np.float32)
    data[:4] = [np.nan, np.inf, -np.inf, -0.0]
    x = fusegrad.from_numpy(data)
    r = Recorder()
    xi = r.input()
    gm = r.module([_chain(r, xi)])
    want = compile_graph(gm, [x])(x)[0].numpy()
    logs.set_logs(output_code=True)
    try:
        with caplog.at_level("INFO", logger="fusegrad.compiler"):
            logs.log.propagate = True
            tuned = compile_graph(gm, [x], {"max_autotune": True})
            first_log = caplog.text
            caplog.clear()
            again = compile_graph(gm, [x], {"max_autotune": True})
    finally:
        logs.set_logs(output_code=False)
        logs.log.propagate = False
    assert "autotune cpp_fused_" in first_log and " serial " in first_log
    assert again.from_cache and "autotune" not in caplog.text
    np.testing.assert_array_equal(tuned(x)[0].numpy(), want)
    np.testing.assert_array_equal(again(x)[0].numpy(), want)


def test_debug_dir_holds_wrapper_and_kernels(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DEBUG_DIR", str(tmp_path / "debug"))
    rng = np.random.default_rng(7)
    data = [rng.standard_normal(s).astype(np.float32) for s in ((6, 9), (9, 5), (5,))]
    ins = [fusegrad.from_numpy(d) for d in data]
    compiled = compile_graph(_mlp_graph(), ins)
    folders = list((tmp_path / "debug").iterdir())
    assert len(folders) == 1
    files = {p.name: p.read_text() for p in folders[0].iterdir()}
    assert "def call(args):" in files["wrapper.py"] and "extern mm" in files["wrapper.py"]
    kernels = [n for n in files if n.startswith("cpp_fused_")]
    assert len(kernels) == compiled.source.count("void cpp_fused_") >= 2
    for name in kernels:
        assert f"void {name[:-2]}(" in files[name] and files[name] in files["kernels.c"]


TOY = """
import fusegrad as torch

def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b

fn = torch.compile(toy_example)
for _ in range(3):
    fn(torch.randn(10), torch.randn(10))
print("done")
"""


def test_output_code_log_of_the_toy_example(cache):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache), FUSEGRAD_LOGS="output_code",
               OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", TOY], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr
    assert "def call(args):" in p.stderr and "void cpp_fused_abs_add_" in p.stderr
    assert "void cpp_fused_mul_" in p.stderr  # the graph after the break


def test_no_compiler_through_the_backend_warns_once(cache, monkeypatch):
    """With no compiler, fusegrad.compile's graphs (forward and backward) run through the
    registry's kernels after a single warning; gradients as torch's."""
    from fusegrad.compiler import codegen

    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(codegen, "_warned_no_compiler", [False])
    data = np.linspace(-2, 2, 12, dtype=np.float32)
    x = fusegrad.from_numpy(data).requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fusegrad.compile(lambda t: (fusegrad.sin(t) * t).sum())(x)
        y.backward()
    assert [str(w.message) for w in caught if "C compiler" in str(w.message)] == [
        "fusegrad codegen: no C compiler found (cc or $CC); compiled graphs run through "
        "the registry's NumPy kernels"]
    t = torch.from_numpy(data).requires_grad_()
    (torch.sin(t) * t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)
