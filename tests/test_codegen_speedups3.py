"""Faster compiled training steps with eager's results (3): common subexpressions of the
joint graph merged before partitioning (a backward reads the forward's `erf` and layer
norm's moments instead of recomputing them), small costly values read broadcast computed
once into a buffer, column sums kept out of other kernels' loops, an extern reading a
transposed computed value through a view of it computed in order, and producers computed
inside the one pointwise kernel that reads them.

Oracles: eager fusegrad and torch (values, gradients, dtypes, aliasing), the compiled
results of the same program with the merging turned off (the same bits), the same graph at
one and two threads (the same bits); the structural properties are read from the compiled
graphs and the generated C.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
from aot_models import compiler_logs
from codegen_support import Recorder

import fusegrad as fg
from fusegrad.compiler.aot import cse as cse_module
from fusegrad.compiler.codegen import CompiledGraph, build, compile_graph

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]


@pytest.fixture(autouse=True)
def _restore_threads():
    before = fg.get_num_threads()
    yield
    fg.set_num_threads(before)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _kernel_count(source: str) -> int:
    return len(re.findall(r"^void cpp_fused\w*\(", source, flags=re.M))


# ------------------------------------------------------------------ joint-graph CSE


class _Block(fg.nn.Module):
    """Linear -> GELU -> LayerNorm -> Linear, a transformer MLP's shape."""

    def __init__(self):
        super().__init__()
        self.fc = fg.nn.Linear(16, 48)
        self.act = fg.nn.GELU()
        self.ln = fg.nn.LayerNorm(48)
        self.out = fg.nn.Linear(48, 8)

    def forward(self, x):
        return self.out(self.ln(self.act(self.fc(x))))


def _train(model, x, compiled: bool, steps: int = 3):
    """Losses and final parameters of `steps` SGD steps (momentum) of `model` on `x`."""
    m = fg.compile(model, backend="inductor") if compiled else model
    opt = fg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach().numpy().copy())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_backward_recomputes_the_gelu_from_its_saved_input(monkeypatch):
    """The forward saves the GELU's input, not `erf(...) + 1` beside it: the backward
    recomputes it (PyTorch's min-cut partitioner makes the same choice on this graph),
    and reads layer norm's mean and variance from the forward instead of summing its input
    again (the merging). The trained parameters are the bits of the same compiled program
    without the merging, and eager's values."""
    fg.manual_seed(0)
    model = _Block()
    x = fg.randn(32, 16)
    eager = copy.deepcopy(model)
    unmerged = copy.deepcopy(model)
    with compiler_logs(aot_graphs=True) as messages:
        losses, params = _train(model, x, True)
    forward = next(m for m in messages if "Forward graph" in m)
    backward = next(m for m in messages if "Backward graph" in m)
    # (`name: "f32[...]" = ...`: the logs show the readable form)
    erf_plus_one = re.search(r'(\w+)(?:: "[^"]*")? = fusegrad\.ops\.aten\.add\.Tensor\(erf, 1\)',
                             forward)
    saved = re.search(r"return \((.*)\)", forward).group(1).split(", ")
    assert erf_plus_one and erf_plus_one.group(1) not in saved
    assert "aten.erf" in backward and "aten.exp" in backward
    # (six sums, none of them of the input's rows: the mean and variance are read)
    assert backward.count("sum.dim_IntList") == 6
    want_losses, want = _train(eager, x, False)
    for a, b in zip(params + losses, want + want_losses):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    monkeypatch.setattr(cse_module, "cse_joint", lambda gm: 0)
    plain_losses, plain = _train(unmerged, x, True)
    for a, b in zip(params + losses, plain + plain_losses):
        assert _same_bits(a, b)


def _joint(fn, *args):
    """The joint graph `fn` traces to (the inductor backend's decompositions)."""
    from fusegrad._decomp import core_aten_decompositions
    from fusegrad.compiler.aot.joint import trace_joint

    return trace_joint(fn, list(args), core_aten_decompositions(), ()).module


def _targets(gm) -> list:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_cse_keeps_signed_zeros_number_types_and_random_draws_apart():
    """`x * 0.0` and `x * -0.0`, `x + 1` and `x + 1.0`, and two random draws are never
    merged; two equal products are."""
    x = fg.randn(5, requires_grad=True)

    def fn(x):
        a, b = x * 0.0, x * -0.0
        c, d = x * 3.0, x * 3.0
        r1, r2 = fg.rand_like(x), fg.rand_like(x)
        return ((a + b) * (c + d) + r1 * r2 + (x + 1) * (x + 1.0)).sum()

    gm = _joint(fn, x)
    before = _targets(gm)
    removed = cse_module.cse_joint(gm)
    after = _targets(gm)
    assert removed >= 1
    assert after.count("aten.mul.Tensor") == before.count("aten.mul.Tensor") - removed
    text = gm.code
    assert "0.0)" in text and "-0.0)" in text
    assert ", 1)" in text and ", 1.0)" in text
    assert sum("rand" in t for t in after) == sum("rand" in t for t in before) == 2


def test_merged_outputs_stay_separate_tensors():
    """Two outputs computed alike are two tensors, as in eager: writing one leaves the
    other; with grad, each gets its own gradient path (the same values as eager)."""

    def fn(x):
        return x * 2, x * 2, (x * 0.0, x * -0.0)

    x = fg.tensor([1.5, -2.0, 0.0], requires_grad=True)
    a, b, (z, nz) = fg.compile(fn, backend="inductor")(x)
    assert a is not b and a.data_ptr() != b.data_ptr()
    with fg.no_grad():
        a.add_(1)
    np.testing.assert_array_equal(b.detach().numpy(), [3.0, -4.0, 0.0])
    want_z, want_nz = x.detach() * 0.0, x.detach() * -0.0
    assert _same_bits(z.detach().numpy(), want_z.numpy())
    assert _same_bits(nz.detach().numpy(), want_nz.numpy())
    (b.sum() + z.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_integer_and_float_additions_keep_their_dtypes():
    def fn(i, x):
        return (i + 1) * 2, (i + 1.0) * 2, (x * 2).sum()

    i = fg.tensor([1, 2, 3])
    x = fg.randn(3, requires_grad=True)
    a, b, s = fg.compile(fn, backend="inductor")(i, x)
    ta, tb = (torch.tensor([1, 2, 3]) + 1) * 2, (torch.tensor([1, 2, 3]) + 1.0) * 2
    assert str(a.dtype) == str(ta.dtype) and str(b.dtype) == str(tb.dtype)
    np.testing.assert_array_equal(a.numpy(), ta.numpy())
    np.testing.assert_array_equal(b.numpy(), tb.numpy())
    s.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_random_draws_are_not_merged_under_compile():
    """Two dropout masks of one input stay two draws, as eager's for one seed."""

    def fn(x):
        return fg.nn.functional.dropout(x, 0.5) * fg.nn.functional.dropout(x, 0.5)

    x = fg.randn(64, requires_grad=True)
    fg.manual_seed(3)
    want = fn(x)
    fg.manual_seed(3)
    got = fg.compile(fn, backend="inductor")(x)
    assert _same_bits(got.detach().numpy(), want.detach().numpy())


# ------------------------------------------------------------------ small costly values


def _ln_backward_like(n=64, c=96):
    """mean over columns of g * xhat with xhat = centred * (1 / sqrt(var)), var per row."""
    r = Recorder()
    g, centred, var = r.input(), r.input(), r.input()
    rstd = r.op("div.Tensor", 1, r.op("sqrt", var))
    xhat = r.op("mul.Tensor", centred, rstd)
    rows = r.op("sum.dim_IntList", r.op("mul.Tensor", g, xhat), [1], True)
    cols = r.op("sum.dim_IntList", r.op("mul.Tensor", g, xhat), [0], False)
    out = r.op("sub.Tensor", r.op("mul.Tensor", g, rstd), r.op("mul.Tensor", xhat, rows))
    return r.module([out, cols]), (n, c)


def test_row_scalar_with_a_square_root_is_computed_once_per_row():
    gm, (n, c) = _ln_backward_like()
    rng = np.random.default_rng(0)
    g = rng.standard_normal((n, c)).astype(np.float32)
    centred = rng.standard_normal((n, c)).astype(np.float32)
    var = (rng.random((n, 1)) + 0.1).astype(np.float32)
    var[0, 0], var[1, 0] = 0.0, np.inf
    args = [fg.from_numpy(a) for a in (g, centred, var)]
    compiled = compile_graph(gm, args)
    got = [t.numpy() for t in compiled(*args)]
    src = compiled.source[compiled.source.index("void cpp_fused"):]
    # One square root per row, in a kernel of its own; none in the loops over elements.
    assert src.count("sqrtf(") == 1
    tg, tc, tv = (torch.from_numpy(a) for a in (g, centred, var))
    rstd = 1 / torch.sqrt(tv)
    xhat = tc * rstd
    want = [tg * rstd - xhat * (tg * xhat).sum(1, keepdim=True), (tg * xhat).sum(0)]
    eager = [fg.from_numpy(a) for a in (g, centred, var)]
    e_rstd = 1 / fg.sqrt(eager[2])
    e_xhat = eager[1] * e_rstd
    e_out = eager[0] * e_rstd - e_xhat * (eager[0] * e_xhat).sum(1, keepdim=True)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], want[1].numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[0], e_out.numpy(), rtol=1e-5, atol=1e-5)
    assert np.isnan(got[0][0]).any() == np.isnan(want[0].numpy()[0]).any()


def test_layer_norm_weight_gradients_keep_their_column_loops():
    """Under compile, layer norm's weight gradient (a column sum of g * xhat, xhat read
    through the row's 1 / std) is computed 64 columns at a time over whole rows, and the
    step's results are eager's."""
    fg.manual_seed(1)
    model = fg.nn.Sequential(fg.nn.Linear(32, 128), fg.nn.LayerNorm(128))
    eager = copy.deepcopy(model)
    x = fg.randn(256, 32)
    c = fg.compile(model, backend="inductor")
    seen = []
    orig = CompiledGraph._compile

    def spy(self, args, signature):
        out = orig(self, args, signature)
        seen.append(self.source)
        return out

    CompiledGraph._compile = spy
    try:
        c(x).pow(2).mean().backward()
    finally:
        CompiledGraph._compile = orig
    eager(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-5, atol=2e-6)
    backward = seen[-1]
    assert "xb += 64" in backward  # the weight gradient's column nest
    assert backward.count("sqrtf(") <= 1  # 1 / std once per row, if at all


# ------------------------------------------------------------------ column sums apart


def _relu_backward_graph():
    """A ReLU's gradient: its column sum (the bias gradient) and its transpose (what the
    weight gradient's product reads)."""
    r = Recorder()
    g, act = r.input(), r.input()
    grad = r.op("where.self", r.op("le.Tensor", act, 0.0), 0.0, g)
    bias = r.op("sum.dim_IntList", grad, [0], False)
    wgrad = r.op("mm", r.op("t", grad), r.input())
    return r.module([bias, wgrad])


@pytest.mark.parametrize("threads", [1, 2])
def test_column_sum_is_not_fused_with_a_transposed_reader(threads):
    fg.set_num_threads(threads)
    gm = _relu_backward_graph()
    rng = np.random.default_rng(2)
    g = rng.standard_normal((256, 1024)).astype(np.float32)
    act = rng.standard_normal((256, 1024)).astype(np.float32)
    x = rng.standard_normal((256, 40)).astype(np.float32)
    args = [fg.from_numpy(a) for a in (g, act, x)]
    compiled = compile_graph(gm, args)
    bias, wgrad = (t.numpy() for t in compiled(*args))
    # Eager's ops give the same bits: the column sum's order and the product's operands
    # (the gradient in row-major order, read transposed) are eager's.
    eg = fg.where(fg.from_numpy(act) <= 0, 0.0, fg.from_numpy(g))
    assert _same_bits(wgrad, (eg.t() @ fg.from_numpy(x)).numpy())
    np.testing.assert_allclose(bias, eg.sum(0).numpy(), rtol=1e-5, atol=1e-4)
    tg = torch.where(torch.from_numpy(act) <= 0, 0.0, torch.from_numpy(g))
    np.testing.assert_allclose(wgrad, (tg.t() @ torch.from_numpy(x)).numpy(), rtol=1e-4,
                               atol=1e-3)
    src = compiled.source
    assert "xb += 64" in src  # the bias gradient's column nest
    assert ".transpose(" in src  # the product reads the gradient transposed, not a copy
    assert "x0t" not in src  # no transposing (tiled) copy of the gradient


def test_column_sums_and_transposed_reader_same_bits_at_both_thread_counts():
    gm = _relu_backward_graph()
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              ((300, 130), (300, 130), (300, 7))]
    arrays[0][0, :3] = [np.nan, np.inf, -0.0]
    args = [fg.from_numpy(a) for a in arrays]
    compiled = compile_graph(gm, args)
    fg.set_num_threads(1)
    one = [t.numpy().copy() for t in compiled(*args)]
    fg.set_num_threads(2)
    two = [t.numpy().copy() for t in compiled(*args)]
    for a, b in zip(one, two):
        assert _same_bits(a, b)


# ------------------------------------------------------------------ producers absorbed


def _gelu_forward_graph(shape=(8, 16, 64), flat=True):
    """GELU after a bias add, as the inductor backend's forward graph has it: the sum,
    `erf(h / sqrt 2) + 1` and the result are all outputs, the result viewed 2-D."""
    r = Recorder()
    mm, bias = r.input(), r.input()
    h = r.op("add.Tensor", mm, bias)
    a = r.op("add.Tensor", r.op("erf", r.op("mul.Tensor", h, 0.7071067811865476)), 1)
    y = r.op("mul.Tensor", r.op("mul.Tensor", h, 0.5), a)
    if flat:
        y = r.op("view", y, [shape[0] * shape[1], shape[2]])
    return r.module([y, a, h])


def _gelu_inputs(shape=(8, 16, 64)):
    rng = np.random.default_rng(4)
    mm = (rng.standard_normal(shape) * 3).astype(np.float32)
    mm.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 30.0]
    bias = rng.standard_normal(shape[-1]).astype(np.float32)
    return [fg.from_numpy(mm), fg.from_numpy(bias)]


def _gelu_eager(mm, bias):
    h = mm + bias
    a = fg.erf(h * 0.7071067811865476) + 1
    y = h * 0.5 * a
    return [y.reshape(-1, y.shape[-1]), a, h]


@pytest.mark.parametrize("flat", [True, False])
def test_gelu_forward_is_one_kernel_with_eagers_values(flat):
    gm = _gelu_forward_graph(flat=flat)
    args = _gelu_inputs()
    with compiler_logs(fusion=True) as messages:
        compiled = compile_graph(gm, args)
    assert _kernel_count(compiled.source) == 1
    assert any("inside the loop of" in m for m in messages)
    got = compiled(*args)
    want = _gelu_eager(*args)
    if not flat:
        want[0] = want[0].reshape(8, 16, 64)
    for a, b in zip(got, want):
        assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
    assert _same_bits(got[2].numpy(), want[2].numpy())
    # (generated float32 erf is within one ulp of eager's: 6e-8 below 1, times |h| / 2 in
    # the result)
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2.4e-7, atol=2e-7)
    fg.set_num_threads(2)
    again = compiled(*args)
    for a, b in zip(again, got):
        assert _same_bits(a.numpy(), b.numpy())


def test_producer_read_elsewhere_or_shifted_keeps_its_kernel():
    """A producer another kernel reads too, or one read at another element than the one
    written, is computed in its own kernel, with eager's values."""
    r = Recorder()
    x = r.input()
    h = r.op("exp", x)
    y = r.op("mul.Tensor", r.op("slice.Tensor", h, 0, 1, 9), 2.0)  # h's rows shifted
    s = r.op("sum.dim_IntList", h, [1], False)  # another reader
    z = r.op("add.Tensor", h, 1.0)
    gm = r.module([y, h, s, z])
    data = np.random.default_rng(6).standard_normal((9, 33)).astype(np.float32)
    args = [fg.from_numpy(data)]
    with compiler_logs(fusion=True) as messages:
        compiled = compile_graph(gm, args)
    assert not any("inside the loop of" in m for m in messages)
    got = [t.numpy() for t in compiled(*args)]
    e = fg.exp(args[0])
    want = [(e[1:9] * 2.0).numpy(), e.numpy(), e.sum(1).numpy(), (e + 1.0).numpy()]
    for a, b in zip(got, want):  # (eager's exp is NumPy's: within an ulp or two)
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_producer_not_absorbed_past_an_in_place_write_of_its_input():
    """A producer whose input an in-place extern writes before its reader runs keeps its
    place: the compiled values are eager's (the old value read)."""
    r = Recorder()
    x, idx, val = r.input(), r.input(), r.input()
    h = r.op("exp", r.op("clone", x))
    w = r.op("index_put_", x, [idx], val)
    y = r.op("add.Tensor", h, 1.0)
    gm = r.module([y, h, w])
    data = np.zeros((4, 8), np.float32)
    args = [fg.from_numpy(data.copy()), fg.tensor([1]), fg.ones(8)]
    with compiler_logs(fusion=True) as messages:
        compiled = compile_graph(gm, args)
    assert not any("inside the loop of" in m for m in messages)
    got = compiled(*args)
    np.testing.assert_array_equal(got[0].numpy(), np.full((4, 8), 2.0, np.float32))
    np.testing.assert_array_equal(got[1].numpy(), np.ones((4, 8), np.float32))


def test_a_chain_of_saved_producers_is_computed():
    """`(h + w.tanh()) * w` with `w` requiring grad: `tanh` and the sum are both saved for
    the backward, each read only by the next; the sum absorbs `tanh`, and a producer that
    absorbed one of its own keeps its kernel (merged into the product, `tanh` was computed
    by no kernel: the code generator failed on the graph)."""
    def f(h, w):
        return (h + w.tanh()) * w

    h, w0 = fg.randn(3, 5), fg.randn(3, 5)
    with compiler_logs(graph_breaks=True) as messages:
        w = w0.clone().requires_grad_()
        out = fg.compile(f, backend="inductor")(h, w)
        out.sum().backward()
    assert not any("cannot compile" in m for m in messages), messages
    we = w0.clone().requires_grad_()
    ref = f(h, we)
    ref.sum().backward()
    # (the generated tanh is the code generator's own float32 one: within a few ulps)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), we.grad.numpy(), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ a model's step


def _gpt(fg_lib):
    from model_zoo import GPTConfig, definitions

    cfg = GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=32,
                    dropout=0.0, bias=True)
    return definitions(fg_lib).GPT(cfg)


def test_gpt_steps_same_bits_at_one_and_two_threads_and_eagers_values():
    fg.manual_seed(0)
    base = _gpt(fg)
    idx = fg.from_numpy(np.random.default_rng(0).integers(0, 64, (4, 16)))
    tgt = fg.from_numpy(np.roll(idx.numpy(), -1, axis=1))

    def run(compiled: bool, threads: int):
        fg.set_num_threads(threads)
        model = copy.deepcopy(base)
        m = fg.compile(model, backend="inductor") if compiled else model
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = m(idx, tgt)[1]
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    l1, p1 = run(True, 1)
    l2, p2 = run(True, 2)
    le, pe = run(False, 1)
    assert l1 == l2
    for a, b in zip(p1, p2):
        assert _same_bits(a, b)
    np.testing.assert_allclose(l1, le, rtol=1e-5)
    for a, b in zip(p1, pe):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ split outputs


def _qkv_graph(b=2, s=8, h=2, d=4):
    """q, k, v of one projection plus bias, each (B, H, S, D) as attention reads them: eager
    makes them views of the sum, laid out with gaps."""
    r = Recorder()
    mm, bias = r.input(), r.input()
    qkv = r.op("add.Tensor", mm, bias)
    outs = []
    for i in range(3):
        part = r.op("slice.Tensor", qkv, 1, i * h * d, (i + 1) * h * d)
        outs.append(r.op("transpose.int", r.op("view", part, [b, s, h, d]), 1, 2))
    return r.module(outs + [r.op("sum.dim_IntList", qkv, [0], False)]), (b, s, h, d)


def test_split_outputs_share_one_uninitialised_storage():
    gm, (b, s, h, d) = _qkv_graph()
    rng = np.random.default_rng(7)
    mm = rng.standard_normal((b * s, 3 * h * d)).astype(np.float32)
    bias = rng.standard_normal(3 * h * d).astype(np.float32)
    args = [fg.from_numpy(mm), fg.from_numpy(bias)]
    compiled = compile_graph(gm, args)
    src = compiled.source
    assert src.count("_in_storage(") == 3 and "_empty_strided" not in src
    got = compiled(*args)
    e = args[0] + args[1]
    want = [e[:, i * h * d:(i + 1) * h * d].view(b, s, h, d).transpose(1, 2) for i in range(3)]
    for g_, w_ in zip(got[:3], want):
        assert g_.stride() == w_.stride() and g_.storage_offset() == w_.storage_offset()
        assert _same_bits(g_.numpy(), w_.numpy())
    # Each has elements of its own: writing one leaves the others.
    before = [t.numpy().copy() for t in got[1:3]]
    got[0].fill_(7.0)
    for t, old in zip(got[1:3], before):
        assert _same_bits(t.numpy(), old)
    # A second call gives new tensors (the first call's are never written).
    again = compiled(*args)
    assert again[0].data_ptr() != got[0].data_ptr()
    assert _same_bits(again[1].numpy(), want[1].numpy())
