"""Generated kernels shared between threads: a large kernel's outer loop is cut into one range
per thread and run by the C workers; the cut never changes what an element computes.

Oracles: the same compiled graph at one thread (bitwise: every thread count and every cut
gives those bits), eager fusegrad's values, and torch for the GPT block's gradients. The
kernels checked are the cut ones (read from the generated C), and the C workers must have
run pieces of them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from model_zoo import GPTConfig, definitions

import fusegrad as fg
from fusegrad.compiler.codegen import build
from fusegrad.ops import _native

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]


@pytest.fixture(autouse=True)
def _restore_threads():
    before = fg.get_num_threads()
    yield
    fg.set_num_threads(before)


def _at_threads(fn, args, threads: int) -> list:
    """`fn(*args)`'s outputs (as arrays) with `threads` intra-op threads."""
    fg.set_num_threads(threads)
    out = fn(*args)
    return [t.detach().numpy().copy() for t in (out if isinstance(out, tuple) else (out,))]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _compiled_source(fn) -> str:
    """The generated source of every graph `fn` (a `fusegrad.compile`d function) ran."""
    from fusegrad.compiler.codegen import CompiledGraph

    seen = []
    orig = CompiledGraph._compile

    def spy(self, args, signature):
        out = orig(self, args, signature)
        seen.append(self.source)
        return out

    CompiledGraph._compile = spy
    try:
        fn()
    finally:
        CompiledGraph._compile = orig
    return "\n".join(seen)


def _check_every_nest_cut(source: str) -> int:
    """Every top-level loop of each piece function in `source` runs over the piece's range
    (`fg_lo`) or inside `if (fg_start == 0)` (run by one piece): no element is computed by
    two pieces. Returns the number of piece functions."""
    count = 0
    for body in source.split("static void fg_piece_")[1:]:
        if not body.split("\n", 1)[0].endswith("{"):
            continue  # the declaration
        count += 1
        stack: list = []
        for line in body.split("\n")[1:]:
            t = line.strip()
            if t == "}" and not stack:
                break  # the function's end
            if t.startswith("}"):
                stack.pop()
            if t.startswith("for (") and not any(k in ("for", "first") for k in stack):
                assert "fg_lo(" in t, t
            if t.endswith("{"):
                stack.append("for" if t.startswith("for (") else
                             "first" if t.startswith("if (fg_start == 0)") else "other")
    return count


def _rng_arrays(*shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def chain(x, y):
    return ((x.sin() * (-x * x).exp() + 0.5 * y) / (1 + x.abs())).tanh()


def row_reductions(x, y):
    return (x * y).sum(-1), x.amax(-1), x.var(-1), x.argmax(-1), fg_softmax(x)


def column_reductions(x, y):
    return (x * y).sum(0), x.sum(0), y.amin(0)


def transposed(x, y):
    return (x.t() * 2).contiguous(), fg_cat(x, y)


def uneven_cat(x, y):
    lib = fg if isinstance(x, fg.Tensor) else torch
    # (a large piece and two of one column each: one kernel; and a 0-d sum)
    return lib.cat([x.exp(), y[:, :1] * 2, y[:, 1:2]], 1), (x * y).sum()


def fg_softmax(x):
    return x.softmax(-1) if isinstance(x, fg.Tensor) else torch.softmax(x, -1)


def fg_cat(x, y):
    lib = fg if isinstance(x, fg.Tensor) else torch
    return lib.cat([x * 3, y + 1], 1)


# (function, input shapes): each with kernels of at least `c.PARALLEL_WORK` elements, and
# extents that do not divide evenly among 2, 3 or 5 pieces (nor into 64-column blocks).
CASES = {
    "elementwise chain": (chain, [(301, 517), (301, 517)]),
    "row reductions": (row_reductions, [(257, 333), (257, 333)]),
    "column reductions": (column_reductions, [(211, 1031), (211, 1031)]),
    "transpose and cat": (transposed, [(263, 149), (263, 149)]),
    "cat of uneven pieces": (uneven_cat, [(263, 149), (263, 149)]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_give_one_threads_bits_and_eager_values(name, dtype):
    """Compiled at 1, 2, 3 and 5 threads: the same bits (each cut of the outer loops into
    that many pieces), and eager's values."""
    fn, shapes = CASES[name]
    arrays = _rng_arrays(*shapes, dtype=dtype)
    arrays[0][7, 11] = np.nan  # a NaN in one piece's rows (max/min/argmax keep it)
    ins = [fg.from_numpy(a) for a in arrays]
    compiled = fg.compile(fn)
    fg.set_num_threads(1)
    source = _compiled_source(lambda: compiled(*ins))
    assert "fg_pieces(" in source and "fg_lo(" in source  # the kernels are cut
    assert _check_every_nest_cut(source) >= 1
    one = _at_threads(compiled, ins, 1)
    started = _native.workers_started()
    for threads in (2, 3, 5):
        got = _at_threads(compiled, ins, threads)
        for g, o in zip(got, one):
            assert _same_bits(g, o), (name, threads)
    if _native.enabled():
        assert _native.workers_started() >= max(started, 1)  # the pieces ran on workers
    fg.set_num_threads(1)
    eager = _at_threads(fn, ins, 1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for e, o in zip(eager, one):
        np.testing.assert_allclose(o, e, rtol=tol, atol=tol, equal_nan=True)
        assert o.dtype == e.dtype and o.shape == e.shape


def test_large_trig_argument_in_one_piece_recomputes_the_whole_call():
    """A sine argument the fast reduction cannot take, in the second piece only: the whole
    call is computed again exactly, so every thread count gives the one-thread bits."""
    x = _rng_arrays((400, 300))[0]
    x[390, 5] = 3.0e7
    xt = fg.from_numpy(x)
    compiled = fg.compile(lambda t: (t.sin() * 1.5).cos())
    one = _at_threads(compiled, (xt,), 1)
    for threads in (2, 3):
        assert _same_bits(_at_threads(compiled, (xt,), threads)[0], one[0])
    np.testing.assert_allclose(one[0], np.cos(np.sin(x.astype(np.float64)) * 1.5),
                               rtol=1e-6, atol=1e-6)
    eager = _at_threads(lambda t: (t.sin() * 1.5).cos(), (xt,), 1)[0]
    np.testing.assert_allclose(one[0], eager, rtol=1e-6, atol=1e-6)


def test_small_kernels_stay_whole():
    """Work under `PARALLEL_WORK`: one plain loop nest, no pieces."""
    xt = fg.from_numpy(_rng_arrays((8, 16))[0])
    compiled = fg.compile(lambda t: (t * 2).exp().sum(-1))
    source = _compiled_source(lambda: compiled(xt))
    assert "void cpp_fused" in source and "fg_pieces(" not in source


def test_serial_build_variant_runs_whole():
    """The build variant "serial" (autotuning's other choice) runs each kernel as one piece
    and gives the same bits."""
    fn, shapes = CASES["row reductions"]
    ins = [fg.from_numpy(a) for a in _rng_arrays(*shapes)]
    compiled = fg.compile(fn, mode="max-autotune")
    for threads in (2, 1):
        a = _at_threads(compiled, ins, threads)
        b = _at_threads(fg.compile(fn), ins, threads)
        for x, y in zip(a, b):
            assert _same_bits(x, y)


def _block(lib, cfg, seed=0):
    """The first block of the zoo's GPT."""
    lib.manual_seed(seed)
    return definitions(lib).GPT(cfg).transformer.h[0]


def test_gpt_block_forward_backward_same_bits_at_every_thread_count():
    """A GPT block (layer norms, causal attention, GELU MLP) forward and backward,
    compiled: its output and every gradient the same bits at 1, 2 and 3 threads, equal to
    eager fusegrad's and torch's."""
    cfg = GPTConfig(block_size=64, n_embd=128, n_head=4, vocab_size=64, n_layer=1)
    th_block = _block(torch, cfg)
    fg_block = _block(fg, cfg)
    fg_block.load_state_dict({k: fg.tensor(v.detach().numpy().copy())
                              for k, v in th_block.state_dict().items()})
    x = _rng_arrays((4, 64, 128), seed=1)[0]
    compiled = fg.compile(fg_block)

    def run(model, threads):
        fg.set_num_threads(threads)
        model.zero_grad()
        xt = fg.from_numpy(x.copy()).requires_grad_()
        out = model(xt)
        (out * out).sum().backward()
        return [out.detach().numpy().copy(), xt.grad.numpy().copy()] + \
            [p.grad.numpy().copy() for p in model.parameters()]

    source = _compiled_source(lambda: run(compiled, 1))
    assert source.count("fg_pieces(") >= 4
    assert _check_every_nest_cut(source) >= 4
    one = run(compiled, 1)
    for threads in (2, 3):
        for a, b in zip(run(compiled, threads), one):
            assert _same_bits(a, b), threads
    eager = run(fg_block, 1)
    for a, b in zip(one, eager):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    out = th_block(xt)
    (out * out).sum().backward()
    want = [out.detach().numpy(), xt.grad.numpy()] + [p.grad.numpy()
                                                       for p in th_block.parameters()]
    for a, b in zip(one, want):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
