"""Generated kernels of training steps at full vector width.

On CPUs with AVX-512 the kernels are built with `-mprefer-vector-width=512`
(`build.vector_width_flags`). Oracles: the same graphs built without it (the lanes change
how many elements one instruction computes, never an operation's order, so the bits must
be equal), and eager execution (values and gradients, NaN/Inf edges included).
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from codegen_support import Recorder

import fusegrad
from fusegrad.compiler.codegen import build, compile_graph

nn = fusegrad.nn
F = fusegrad.nn.functional

needs_cc = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")
x86 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                         reason="the vector-width option is an x86 compiler option")

_WIDE = "-mprefer-vector-width=512"


def test_vector_width_follows_the_cpu():
    """The option is given exactly when the CPU's features (what `-march=native` reads)
    name AVX-512, and the build flags hold it then."""
    assert build.vector_width_flags("fpu sse2 avx2 fma") == ()
    assert build.vector_width_flags("fpu avx2 avx512f avx512bw") == (_WIDE,)
    assert build.vector_width_flags("fpu avx512_vnni avx2") == ()  # a feature, not avx512f
    wide = "avx512f" in build.cpu_features().split()
    assert (_WIDE in build.FLAGS) is wide


# Graphs of a transformer step's generated kernels, in registry ops.
def _gelu_forward(r, x):
    erf = r.op("erf", r.op("mul.Tensor", x, 0.7071067811865476))
    return [r.op("mul.Tensor", r.op("mul.Tensor", x, 0.5), r.op("add.Tensor", erf, 1))]


def _gelu_backward(r, x, g):
    cdf = r.op("mul.Tensor", r.op("add.Tensor", r.op(
        "erf", r.op("mul.Tensor", x, 0.7071067811865476)), 1), 0.5)
    pdf = r.op("mul.Tensor", r.op("exp", r.op("mul.Tensor", r.op("mul.Tensor", x, -0.5), x)),
               0.3989422804014327)
    return [r.op("mul.Tensor", g, r.op("add.Tensor", cdf, r.op("mul.Tensor", x, pdf)))]


def _log_softmax_and_sums(r, x, g):
    top = r.op("amax", x, [1], True)
    shifted = r.op("sub.Tensor", x, top)
    lse = r.op("log", r.op("sum.dim_IntList", r.op("exp", shifted), [1], True))
    out = r.op("sub.Tensor", shifted, lse)
    return [out, r.op("sum.dim_IntList", r.op("mul.Tensor", g, out), [0])]


def _layer_norm_backward(r, x, g):
    mean = r.op("mean.dim", x, [1], True)
    d = r.op("sub.Tensor", x, mean)
    rstd = r.op("rsqrt", r.op("add.Tensor", r.op("mean.dim", r.op("mul.Tensor", d, d), [1],
                                                 True), 1e-5))
    xhat = r.op("mul.Tensor", d, rstd)
    s1 = r.op("mean.dim", g, [1], True)
    s2 = r.op("mean.dim", r.op("mul.Tensor", g, xhat), [1], True)
    dx = r.op("mul.Tensor", rstd, r.op("sub.Tensor", r.op("sub.Tensor", g, s1),
                                       r.op("mul.Tensor", xhat, s2)))
    return [dx, r.op("sum.dim_IntList", r.op("mul.Tensor", g, xhat), [0])]


def _special(shape, seed):
    """Normal values with NaN, +-Inf, -0.0, a denormal, huge and erf's range ends written in
    (rows of 37: whole vectors and a remainder at either width)."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    flat = a.reshape(-1)
    flat[:12] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 3e38, -3e38, 3.92, -4.0, 0.625,
                 1.5, 88.7]
    return a


def _run(build_fn, n_inputs, args, wide: bool, monkeypatch):
    flags = tuple(f for f in build.FLAGS if f != _WIDE)
    if wide:
        flags = flags[:2] + (_WIDE,) + flags[2:]
    with monkeypatch.context() as m:
        m.setattr(build, "FLAGS", flags)
        m.setitem(build.VARIANTS, "default", flags)
        m.setitem(build.VARIANTS, "serial", flags + ("-DFG_SERIAL",))
        r = Recorder()
        xs = [r.input() for _ in range(n_inputs)]
        gm = r.module(build_fn(r, *xs))
        compiled = compile_graph(gm, list(args), {"fx_graph_cache": False})
        outs = [o.numpy().copy() for o in compiled(*args)]
    r = Recorder()
    xs = [r.input() for _ in range(n_inputs)]
    eager = [o.numpy() for o in r.module(build_fn(r, *xs))(*args)]
    return outs, eager


def _transformer_kernels(r, x, g):
    """All four, in one graph (one build per width)."""
    return (_gelu_forward(r, x) + _gelu_backward(r, x, g) + _log_softmax_and_sums(r, x, g)
            + _layer_norm_backward(r, x, g))


@needs_cc
@x86
def test_full_width_kernels_give_the_same_bits(monkeypatch):
    """Each kernel built at full width returns the 256-bit build's bits (NaN, Inf, -0.0 and
    denormals included) and eager's values (generated erf within one ulp of eager's)."""
    args = [fusegrad.from_numpy(_special((6, 37), seed)) for seed in range(2)]
    wide, eager = _run(_transformer_kernels, 2, args, True, monkeypatch)
    narrow, _ = _run(_transformer_kernels, 2, args, False, monkeypatch)
    names = ["gelu", "gelu backward", "log_softmax", "its column sum", "layer norm dx",
             "layer norm dweight"]
    assert len(wide) == len(names)
    for name, w, s, e in zip(names, wide, narrow, eager):
        np.testing.assert_array_equal(w.view(np.int32), s.view(np.int32), err_msg=name)
        np.testing.assert_allclose(w, e, rtol=3e-6, atol=1e-6, equal_nan=True, err_msg=name)


class _Block(nn.Module):
    """A pre-norm transformer block with a GELU MLP and causal attention, and a head."""

    def __init__(self, d=16, heads=2, vocab=11):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x, y):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).contiguous().view(b, t, d))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def _grads(model, run, x, y):
    x = x.clone().requires_grad_(True)
    loss = run(x, y)
    loss.backward()
    grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    grads["input"] = x.grad.numpy().copy()
    return loss.detach().numpy().copy(), grads


@needs_cc
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("edge", ["finite", "inf input"])
def test_compiled_block_step_matches_eager(edge):
    """A compiled transformer block's loss and gradients (LayerNorm, GELU, attention and
    cross-entropy kernels, forward and backward) equal eager's; an Inf in the input gives
    NaN where eager's does."""
    fusegrad.manual_seed(0)
    model = _Block()
    twin = _Block()
    twin.load_state_dict(model.state_dict())
    data = np.random.default_rng(1).standard_normal((3, 8, 16)).astype(np.float32)
    if edge == "inf input":
        data[1, 5, 3] = np.inf
    x = fusegrad.from_numpy(data)
    y = fusegrad.from_numpy(np.random.default_rng(2).integers(0, 11, (3, 8)))
    loss, grads = _grads(model, fusegrad.compile(model), x, y)
    want_loss, want = _grads(twin, twin, x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5, equal_nan=True)
    assert np.isnan(loss) == (edge == "inf input")
    for k, g in want.items():
        assert np.array_equal(np.isnan(grads[k]), np.isnan(g)), k
        np.testing.assert_allclose(grads[k], g, rtol=1e-4, atol=1e-6, equal_nan=True,
                                   err_msg=k)


# ---------------------------------------------------------------- equal reductions shared


def _schedule_module():
    import sys

    import fusegrad.compiler.codegen.schedule  # noqa: F401  (the module, not the function)

    return sys.modules["fusegrad.compiler.codegen.schedule"]


def _two_variances(r, x, w):
    """Batch norm's statistics as its decomposition writes them: the sum of squared
    deviations twice (the biased variance and the running one), and a third sum that
    differs only in its constant."""
    mean = r.op("mean.dim", x, [0, 2], True)
    d = r.op("sub.Tensor", x, mean)
    s1 = r.op("sum.dim_IntList", r.op("mul.Tensor", d, d), [0, 2])
    s2 = r.op("sum.dim_IntList", r.op("mul.Tensor", d, d), [0, 2])
    s3 = r.op("sum.dim_IntList", r.op("mul.Tensor", r.op("mul.Tensor", d, d), 1.0000001),
              [0, 2])
    return [r.op("mul.Tensor", s1, w), r.op("div.Tensor", s2, 7), s3]


@needs_cc
@pytest.mark.parametrize("edge", ["finite", "nan and inf"])
def test_equal_reductions_computed_once(edge, monkeypatch):
    """A reduction equal to an earlier one is not computed again: the kernels hold one
    sum of squared deviations fewer, and every output has the bits of the graph compiled
    without the sharing, and eager's values (NaN and Inf included)."""
    x = _special((5, 4, 6), 3) if edge != "finite" else \
        np.random.default_rng(3).standard_normal((5, 4, 6)).astype(np.float32)
    if edge != "finite":
        x[2, 1, 3] = np.inf  # channel 1: Inf - Inf is NaN, as eager's
    args = [fusegrad.from_numpy(x), fusegrad.from_numpy(np.arange(4, dtype=np.float32))]

    def compiled_outputs(share: bool):
        r = Recorder()
        ins = [r.input(), r.input()]
        gm = r.module(_two_variances(r, *ins))
        with monkeypatch.context() as m:
            if not share:
                m.setattr(_schedule_module(), "_share_equal_reductions", lambda g: None)
            c = compile_graph(gm, args, {"fx_graph_cache": False})
        return [o.numpy().copy() for o in c(*args)], c.source

    shared, source = compiled_outputs(True)
    alone, source_alone = compiled_outputs(False)
    assert source.count("acc[l] +=") == source_alone.count("acc[l] +=") - 1
    r = Recorder()
    ins = [r.input(), r.input()]
    eager = [o.numpy() for o in r.module(_two_variances(r, *ins))(*args)]
    for s, a, e in zip(shared, alone, eager):
        np.testing.assert_array_equal(s.view(np.int32), a.view(np.int32))
        np.testing.assert_allclose(s, e, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.isnan(shared[0][1]) == (edge != "finite")


def _bn_net():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4), nn.Flatten(),
                         nn.Linear(4 * 16, 3))


@needs_cc
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("edge", ["finite", "inf input"])
def test_compiled_batch_norm_steps_match_eager(edge):
    """Two SGD steps of a compiled convolution + batch norm network: losses, gradients,
    weights and running statistics as eager's (NaN where eager's are, for an Inf pixel)."""
    fusegrad.manual_seed(0)
    model, twin = _bn_net(), _bn_net()
    twin.load_state_dict(model.state_dict())
    data = np.random.default_rng(5).standard_normal((3, 2, 6, 6)).astype(np.float32)
    if edge == "inf input":
        data[1, 0, 2, 2] = np.inf
    x, y = fusegrad.from_numpy(data), fusegrad.tensor([0, 2, 1])
    results = []
    for net, run in ((model, fusegrad.compile(model)), (twin, twin)):
        opt = fusegrad.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(run(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        state = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
        state.update({"grad " + k: p.grad.numpy().copy() for k, p in net.named_parameters()})
        results.append((losses, state))
    (losses, state), (want_losses, want) = results
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5, equal_nan=True)
    for k, v in want.items():
        assert np.array_equal(np.isnan(state[k]), np.isnan(v)), k
        np.testing.assert_allclose(state[k], v, rtol=1e-4, atol=1e-6, equal_nan=True,
                                   err_msg=k)
