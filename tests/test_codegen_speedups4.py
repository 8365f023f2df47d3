"""Faster compiled code with eager's results (4): float32 erf computed in float in generated
kernels (`codegen/erf_float.py`), producers computed inside their reader's loop found
without touching the producers' buffers (`ir.inline_producers`), the wrapper's array
addresses read from the array object and its extern views built on the base's buffer, and
the inductor backend's choice of saved values (the min-cut's).

Oracles: float64 erf (torch) for the float erf's error in ulps over a dense sweep of the
float range, eager fusegrad's erf (within one ulp of it), torch's GELU (values and
gradients of a compiled block), the same graph at one and two threads (the same bits), the
fit that produced the stored coefficients, the expression built by hand (each load's own
index), eager fusegrad (the same program run without compiling), NumPy's
`__array_interface__` (addresses) and `as_strided` (views), and what torch's min-cut
partitioner saves on the same program.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from codegen_support import Recorder

import fusegrad as fg
from fusegrad import _dtype
from fusegrad.compiler.codegen import build, compile_graph, erf_float, wrapper
from fusegrad.compiler.codegen.ir import (
    Buffer,
    IInt,
    Load,
    Op,
    Pointwise,
    inline_producers,
    walk,
)

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]


def _erf_graph():
    r = Recorder()
    x = r.input()
    return r.module([r.op("erf", x)])


def _sweep() -> np.ndarray:
    """Every 997th float of [0, 4.5] (where erf is not yet 1) with both signs, random bit
    patterns of every exponent, and the special values."""
    top = np.float32(4.5).view(np.uint32)
    pos = np.arange(0, int(top), 997, dtype=np.uint32).view(np.float32)
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38,
                        0.625, np.nextafter(np.float32(0.625), 0), 1.5, 3.92, 4.0, 1e30],
                       np.float32)
    return np.concatenate([pos, -pos, bits, special])


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - erf(x)| in units of the last place of erf(x) rounded to float."""
    exact = torch.special.erf(torch.from_numpy(x.astype(np.float64))).numpy()
    want = exact.astype(np.float32)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(got.astype(np.float64) - exact) / ulp)


def test_float32_erf_is_computed_in_float_within_one_ulp():
    x = _sweep()
    xt = fg.from_numpy(x)
    compiled = compile_graph(_erf_graph(), [xt])
    assert "= fg_erff_float(" in compiled.source  # the float form, not the double one
    got = compiled(xt)[0].numpy()
    err = _ulps(got, x)
    assert err.max() <= 1.0, (x[np.argmax(err)], err.max())
    assert (np.isnan(got) == np.isnan(x)).all()
    zeros = x == 0
    assert (np.signbit(got[zeros]) == np.signbit(x[zeros])).all()
    # Eager's erf (double, rounded once) and the float form differ by one ulp at most.
    eager = fg.erf(xt).numpy()
    finite = ~np.isnan(x)
    gap = np.abs(got[finite].astype(np.float64) - eager[finite]) / \
        np.spacing(np.abs(eager[finite])).astype(np.float64)
    assert gap.max() <= 1.0
    assert (got[finite] != eager[finite]).mean() < 0.01


def test_erf_coefficients_are_the_fit():
    fresh = erf_float.fit()
    assert len(fresh) == len(erf_float.COEFFICIENTS)
    for (lo, _, _), (h, low, c), (h2, low2, c2) in zip(erf_float.RANGES, fresh,
                                                       erf_float.COEFFICIENTS):
        t = np.linspace(-0.5, 0.5, 101) if lo else np.linspace(0, 0.4, 101)
        assert (h, low) == (h2, low2)
        a, b = (np.polynomial.polynomial.polyval(t, k) for k in (c, c2))
        assert np.max(np.abs(a - b)) < 1e-9


def _gelu_block(lib, x, w, b):
    return lib.nn.functional.gelu(lib.nn.functional.linear(x, w, b))


def test_compiled_gelu_matches_torch_and_is_the_same_at_two_threads():
    rng = np.random.default_rng(5)
    arrays = [(rng.standard_normal((32, 64)) * 2).astype(np.float32),
              (rng.standard_normal((96, 64)) * 0.3).astype(np.float32),
              rng.standard_normal(96).astype(np.float32)]
    fgs = [fg.tensor(a, requires_grad=True) for a in arrays]
    ths = [torch.tensor(a, requires_grad=True) for a in arrays]
    compiled = fg.compile(lambda x, w, b: _gelu_block(fg, x, w, b), backend="inductor")
    results = []
    before = fg.get_num_threads()
    try:
        for threads in (1, 2):
            fg.set_num_threads(threads)
            for t in fgs:
                t.grad = None
            out = compiled(*fgs)
            out.square().sum().backward()
            results.append([out.detach().numpy().copy()] +
                           [t.grad.numpy().copy() for t in fgs])
    finally:
        fg.set_num_threads(before)
    want = _gelu_block(torch, *ths)
    want.square().sum().backward()
    # float32 tolerances: the float erf is within one ulp, the matmuls and sums round
    # as eager's float32 kernels (torch's GELU block itself rounds at ~1e-6 here)
    for got, ref in zip(results[0], [want.detach()] + [t.grad for t in ths]):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()


class _WatchedPointwise(Pointwise):
    """A Pointwise that records every write of its buffer after it was first given one."""

    made: list = []

    def __setattr__(self, name, value):
        if name == "shape":
            _WatchedPointwise.made.append(self)
        if name == "buffer" and getattr(self, "buffer", None) is not None:
            self.__dict__.setdefault("rewrites", []).append(value)
        super().__setattr__(name, value)


def test_absorbing_producers_leaves_their_buffers_alone(monkeypatch):
    """The walk that finds what a kernel reads with its producers inline takes them as an
    argument: no producer's buffer is set aside while it walks (it used to be set to None
    and restored), and the kernel still computes GELU's saved values in its loop."""
    from fusegrad.compiler.codegen import lower, lower_pointwise, lower_reduce, lower_views

    for module in (lower, lower_pointwise, lower_views, lower_reduce):
        monkeypatch.setattr(module, "Pointwise", _WatchedPointwise)
    monkeypatch.setattr(_WatchedPointwise, "made", [])
    r = Recorder()
    mm, bias = r.input(), r.input()
    h = r.op("add.Tensor", mm, bias)
    a = r.op("add.Tensor", r.op("erf", r.op("mul.Tensor", h, 0.7071067811865476)), 1)
    y = r.op("mul.Tensor", r.op("mul.Tensor", h, 0.5), a)
    gm = r.module([y, a, h])
    rng = np.random.default_rng(2)
    args = [fg.from_numpy(rng.standard_normal((8, 64)).astype(np.float32)),
            fg.from_numpy(rng.standard_normal(64).astype(np.float32))]
    compiled = compile_graph(gm, args, {"fx_graph_cache": False})
    made = _WatchedPointwise.made
    assert made and not any(getattr(p, "rewrites", None) for p in made)
    assert compiled.source.count("void cpp_fused") == 1
    got = compiled(*args)
    hh = args[0] + args[1]
    want_a = fg.erf(hh * 0.7071067811865476) + 1
    np.testing.assert_array_equal(got[2].numpy(), hh.numpy())
    # (erf within one ulp of eager's: 6e-8 absolute below 1, 1.2e-7 relative above)
    np.testing.assert_allclose(got[1].numpy(), want_a.numpy(), rtol=1.2e-7, atol=6e-8)
    np.testing.assert_allclose(got[0].numpy(), (hh * 0.5 * want_a).numpy(), rtol=2.4e-7,
                               atol=1e-7)


def test_inlined_producers_keep_each_loads_own_index():
    """A producer read through another inlined producer, at 64 indices: every index keeps
    its own value. (A memo keyed by the address of a value the walk had already dropped
    gave a later index an earlier one's value: all 64 read element 0.)"""
    f32 = _dtype.float32
    x, b_buf, a_buf = (Buffer(name, (64,), f32, (1,)) for name in "xba")
    b = Pointwise((64,), f32, lambda i: Op("sin", (x.load(i),), f32), buffer=b_buf)
    a = Pointwise((64,), f32, lambda i: Op("cos", (b_buf.load(i),), f32), buffer=a_buf)
    reader = Op("add", tuple(a_buf.load((IInt(k),)) for k in range(64)), f32)
    got = inline_producers(reader, {a_buf: a, b_buf: b})
    assert [str(term) for term in got.args] == [f"cos(sin(x[{k}]))" for k in range(64)]
    assert all(e.buffer is x for e in walk(got) if isinstance(e, Load))


def test_a_where_of_a_sine_of_a_where_is_eagers():
    """A chain of fused where/relu/sin/division over one input: the compiled program's
    values and gradients are eager's."""

    def fn(a):
        t0 = fg.where(a > 0, a, a)
        t2 = a.relu()
        t3 = (t0 * 0.5).sin()
        t5 = fg.where(t3 > 0, t3, t0)
        return t2 / 4 + t5 + (t2 - t0)

    data = np.random.default_rng(44).standard_normal((4, 4))
    results = []
    for run in (fn, fg.compile(fn, backend="inductor")):
        a = fg.tensor(data, requires_grad=True)
        out = run(a)
        out.sum().backward()
        results.append((out.detach().numpy(), a.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ the wrapper's arrays


class _Marked(np.ndarray):
    """An ndarray subclass (its address is read through `__array_interface__`)."""


def _arrays() -> list:
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    return [base, base[1:, ::2, 1:], base.T, base[..., 2], base[2, 3, 4:], np.array(5.0),
            np.empty(0, np.int64), np.zeros((2, 3), ml_dtypes.bfloat16),
            np.ones((4, 4), bool)[::-1], base.view(_Marked)[1]]


def test_array_addresses_are_the_interfaces():
    """The address the wrapper writes for an array is its first element's, as
    `__array_interface__` gives it: views, transposes, 0-d, empty, bfloat16, a subclass."""
    for a in _arrays():
        assert wrapper._array_address(a) == a.__array_interface__["data"][0], a


def _as_strided_of(base: np.ndarray, start: tuple, shape: tuple, strides: tuple):
    return np.lib.stride_tricks.as_strided(base[tuple(slice(i, None) for i in start)],
                                           shape, strides)


# Each view's steps: per dim of the view, how many rows and columns of the base one step
# moves (its byte strides follow from the base's own).
@pytest.mark.parametrize(("start", "shape", "steps"), [
    ((0, 0), (4, 6), ((1, 0), (0, 1))),  # the whole base
    ((1, 2), (3, 2), ((1, 0), (0, 2))),  # a strided block inside it
    ((0, 1), (5, 4), ((0, 1), (1, 0))),  # a transpose starting at a column
    ((2, 0), (3, 2, 2), ((0, 0), (1, 0), (0, 1))),  # a broadcast (stride 0)
    ((3, 5), (4,), ((-1, 0),)),  # walking backwards
])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("contiguous", [True, False])
def test_strided_views_are_as_strideds(start, shape, steps, dtype, contiguous):
    """An extern's input view: NumPy's `as_strided` of the base from the element `start`
    (its values, its strides, and the base's memory: a write through it reaches the base)."""
    base = np.arange(24).astype(dtype).reshape(4, 6)
    if not contiguous:  # (the same elements, three times as far apart in memory)
        base = np.repeat(base, 3, axis=1)[:, ::3]
    strides = tuple(r * base.strides[0] + c * base.strides[1] for r, c in steps)
    want = _as_strided_of(base, start, shape, strides)
    got = wrapper._strided(base, start, shape, strides)
    assert got.shape == want.shape and got.strides == want.strides and got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, base) and got.flags.writeable == want.flags.writeable


def test_a_strided_view_reaching_before_its_base_is_as_strideds():
    """A base that is a row block of a larger array, read one row back from its start (the
    memory is there, outside the base's own buffer): as NumPy's `as_strided`."""
    whole = np.arange(24, dtype=np.float32).reshape(4, 6)
    base = whole[1:3]
    got = wrapper._strided(base, (0, 2), (2,), (-24,))
    np.testing.assert_array_equal(got, [whole[1, 2], whole[0, 2]])
    np.testing.assert_array_equal(got, _as_strided_of(base, (0, 2), (2,), (-24,)))


# ------------------------------------------------------------------ what the forward saves


def _gelu_mlp(lib, x, w1, b1, w2):
    return (lib.nn.functional.gelu(lib.nn.functional.linear(x, w1, b1)) @ w2).sum()


def _torch_saved_activations(arrays) -> list:
    """Shapes of the values torch's min-cut partitioner saves for the backward of
    `_gelu_mlp` other than inputs and views of inputs."""
    from functorch.compile import aot_function, min_cut_rematerialization_partition
    from torch._decomp import core_aten_decompositions

    shapes = []

    def forward_compiler(gm, example):
        out = gm.graph.output_node().args[0]
        for node in out[1:]:
            base = node
            while base.op == "call_function" and "permute" in str(base.target):
                base = base.args[0]
            if base.op != "placeholder":
                shapes.append(tuple(node.meta["val"].shape))
        return gm

    fn = aot_function(lambda *a: _gelu_mlp(torch, *a), fw_compiler=forward_compiler,
                      bw_compiler=lambda gm, example: gm,
                      partition_fn=min_cut_rematerialization_partition,
                      decompositions=core_aten_decompositions())
    fn(*[torch.tensor(a, requires_grad=True) for a in arrays])
    return shapes


def test_a_gelu_mlp_saves_what_torchs_min_cut_saves(monkeypatch):
    """After merging common subexpressions, the partition saves the GELU's input and its
    output (the next matmul's operand) but not `erf(x / sqrt 2) + 1`: as many activations,
    of the same shapes, as torch's min-cut saves on the same program; the gradients are
    torch's."""
    import importlib

    compile_fx = importlib.import_module("fusegrad._inductor.compile_fx")
    partition = compile_fx._cse_then_partition
    saved: list = []

    def recording(joint, inputs=None, **kwargs):
        fwd, bwd = partition(joint, inputs, **kwargs)
        out = list(fwd.graph.output_node().args[0])[kwargs["num_fwd_outputs"]:]
        saved.extend(n for n in out if n.op != "placeholder")
        return fwd, bwd

    monkeypatch.setattr(compile_fx, "_cse_then_partition", recording)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (32, 16), (32,),
                                                                   (32, 4))]
    tensors = [fg.tensor(a, requires_grad=True) for a in arrays]
    fg.compile(lambda *a: _gelu_mlp(fg, *a), backend="inductor")(*tensors).backward()
    mine = sorted(sorted(tuple(n.meta["val"].shape)) for n in saved)
    theirs = sorted(sorted(s) for s in _torch_saved_activations(arrays))
    assert mine == theirs == [[8, 32], [8, 32]]
    want = [torch.tensor(a, requires_grad=True) for a in arrays]
    _gelu_mlp(torch, *want).backward()
    for t, w in zip(tensors, want):
        np.testing.assert_allclose(t.grad.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-5)
