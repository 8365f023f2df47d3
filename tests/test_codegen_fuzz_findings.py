"""Regressions found by fuzzing the inductor backend (random small programs, compiled against
eager): one case per bug, each checked against torch (values, dtypes, shapes, mutated inputs)
and against the uncompiled program. A graph the code generator cannot compile runs as FX
code, which is slower but right: `_fallbacks` counts those where a case says it compiles."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import fusegrad as fg
from fusegrad.compiler.codegen import build

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]

compile_fx = importlib.import_module("fusegrad._inductor.compile_fx")


@pytest.fixture
def fallbacks(monkeypatch):
    """The reasons of the graphs the code generator gave up on (run as FX code instead)."""
    seen: list = []
    monkeypatch.setattr(compile_fx, "_log_fallback", lambda e: seen.append(repr(e)))
    return seen


def _inputs(T, specs):
    """Fresh inputs for module `T` (torch or fusegrad): (NumPy array, dtype name, expression
    of `b` making the input's layout)."""
    out = []
    for arr, dtype, expr in specs:
        b = T.tensor(arr)
        if dtype is not None:
            b = b.to(getattr(T, dtype))
        out.append(eval(expr, {"b": b, "T": T}))
    return out


def _same(ref, got, what):
    ref_np = ref.detach().float().numpy() if ref.dtype in (torch.float16, torch.bfloat16) \
        else ref.detach().numpy()
    assert str(got.dtype) == str(ref.dtype), f"{what}: dtype {got.dtype}, torch {ref.dtype}"
    assert tuple(got.shape) == tuple(ref.shape), what
    got_np = got.detach().float().numpy() if got.dtype in (fg.float16, fg.bfloat16) \
        else got.detach().numpy()
    if ref_np.dtype.kind == "f":
        tol = 1e-12 if ref.dtype == torch.float64 else 1e-5  # (float64: no float32 step)
        np.testing.assert_allclose(got_np, ref_np, rtol=tol, atol=tol, err_msg=what)
    else:
        np.testing.assert_array_equal(got_np, ref_np, err_msg=what)


def _strides(t) -> tuple:
    """The strides of `t`'s dims longer than 1 (the others' strides mean nothing)."""
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1)


def check(fn, specs, calls=1, strides=False):
    """`fn(T, *inputs)` compiled with the inductor backend gives torch's outputs (with their
    strides where `strides`) and leaves the inputs as torch leaves them, as the uncompiled
    program does (`calls` times)."""
    compiled = fg.compile(lambda *xs: fn(fg, *xs), backend="inductor")
    for _ in range(calls):
        tin = _inputs(torch, specs)
        ref = fn(torch, *tin)
        for run in (lambda *xs: fn(fg, *xs), compiled):
            fin = _inputs(fg, specs)
            got = run(*fin)
            for i, (r, g) in enumerate(zip(ref, got)):
                _same(r, g, f"output {i}")
                if strides:
                    assert _strides(g) == _strides(r), f"output {i}: strides {g.stride()}"
            for i, (r, g) in enumerate(zip(tin, fin)):
                _same(r, g, f"input {i} after the call")


def test_decomposition_that_promotes_integers_is_not_used(fallbacks):
    """hardtanh of an integer tensor (decomposed as a clamp to float bounds) and masked_fill
    of one with a float value (decomposed as a `where`) computed floats: the decomposition's
    dtype disagreed with the op's, so the op stays whole."""
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, (3, 4))

    def fn(T, x, v):
        return (T.nn.functional.hardtanh(x), x.masked_fill(x > 0, 0.5),
                x.masked_fill(x.bool(), v), (x.masked_fill(x > 1, 2.7) * 3).sum())

    check(fn, [(a, None, "b"), (np.array(-0.7), "float64", "b")])
    assert not fallbacks


def test_decomposition_of_integer_to_float_op_computes_after_converting(fallbacks):
    """`1.5 - uint8` (rsub, decomposed as `-a + 1.5`, negating the uint8) and logsumexp of
    uint8 (`a - max(a)` wrapping) gave wrapped values: for integer inputs whose result is
    floating, the op's own lowering runs."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (4, 5)).astype(np.uint8)

    def fn(T, x):
        return ((1.5 - x).clamp(0.5, None), T.logsumexp(x, -1, keepdim=True), 2 - x)

    check(fn, [(a, None, "b")])
    check(lambda T, x: (T.logsumexp(x.bool(), 0),), [(a, None, "b")])
    assert not fallbacks


def test_decomposition_computing_in_a_narrower_float():
    """addcmul of a float64 tensor with float32 factors, decomposed as `a + t1 * t2 * v`,
    rounded the product to float32 where eager computes it in float64."""
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal((3, 4)) * 100 for _ in range(3))

    def fn(T, x, y, z):
        return (T.addcmul(x, y, z, value=0.5), T.addcdiv(x, y, z.abs() + 1, value=2))

    check(fn, [(a, "float64", "b"), (b, "float32", "b"), (c, "float32", "b")])


def test_decomposed_multi_result_op_gives_contiguous_results():
    """native_layer_norm makes contiguous results from a transposed input; its decomposition
    (pointwise steps following the input's layout) gave transposed ones."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 5)).astype(np.float32)

    def fn(T, x):
        return (T.nn.functional.layer_norm(x, x.shape[-1:]), x.permute(1, 0).exp())

    check(fn, [(a, None, "b.t()")], strides=True)
    check(lambda T, x: (T.nn.functional.layer_norm(x, x.shape[-1:]),),
          [(rng.standard_normal((2, 3, 4, 5)), None, "b.permute(0, 2, 3, 1)")], strides=True)


def test_views_and_copies_of_half_tensors_compile(fallbacks):
    """A clone or view of a float16/bfloat16 tensor (no arithmetic, so no dtype check), or
    arithmetic in float32 reading one, reached the C renderer, which has no half type: every
    such graph fell back to FX code."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 6)).astype(np.float32)

    def fn(T, x, y):
        return (x.t().contiguous(), x[::2].clone(), (y * 2).reshape(-1), x.float().sum(0),
                x.view(-1) * y.view(-1), (x.t() + y.t()).sum(0))

    for dtype in ("float16", "bfloat16"):
        check(fn, [(a, dtype, "b"), (a, "float32", "b")])
    assert not fallbacks


def test_in_place_write_into_expanded_input():
    """Writes into an input whose elements share memory (an expanded tensor): `zero_` and
    `fill_` are allowed and must not raise at the write-back, a write through a view
    (`x[0].add_(1)`) changes every alias (which a functional graph cannot express), and an
    op eager refuses on it still raises eager's error."""
    base = np.array([[-2.0, 3.0, 1.0]])

    def zero_then_fill(T, x, y):
        x.zero_()
        z = x + y
        x.fill_(float("nan"))
        return (z, x * 1)

    def through_view(T, x, y):
        x[0].add_(1)
        return (x.float().amin(0), y.exp())

    for fn in (zero_then_fill, through_view):
        check(fn, [(base, None, "b.expand(4, 3)"), (base, None, "b.expand(4, 3)")], calls=2)

    def refused(T, x):
        x.mul_(3)
        return (x,)

    for T, run in ((torch, refused), (fg, fg.compile(refused, backend="inductor"))):
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            run(T, _inputs(T, [(base, None, "b.expand(4, 3)")])[0])


def test_expanded_outputs_keep_eager_strides():
    """An output that is an expanded view of a computed value has stride 0 in eager (and in
    PyTorch's inductor); the compiled graph returned a contiguous copy. Its elements share
    memory as eager's do: a write into all of it raises, a write into one row changes all."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 5)).astype(np.float32)

    def fn(T, x):
        c = T.cumsum(x, 0)
        return (c.unsqueeze(0).expand(3, 4, 5), c.sum(0, keepdim=True).expand(4, 5),
                T.mm(x, x.t())[:, :1].expand(4, 3), x.sin())

    check(fn, [(a, None, "b")], strides=True)
    compiled = fg.compile(lambda x: fn(fg, x), backend="inductor")
    out = compiled(fg.tensor(a))[0]
    with pytest.raises(RuntimeError, match="more than one element of the written-to"):
        out.add_(1)
    out[0, 1].mul_(0)
    assert (out[:, 1] == 0).all()


def test_write_into_empty_expanded_input():
    """A program writing into an empty input with a zero stride (`expand(2, 0, 4)`): the
    write-back of the new value (a `copy_`) took the zero stride for shared elements and
    raised, where eager writes nothing."""

    def fn(T, x):
        x.fill_(0.5)
        return (x.double(), x.sum())

    check(fn, [(np.zeros((1, 0, 4), np.float32), None, "b.expand(2, 0, 4)")])


def test_float_to_narrow_integer_cast():
    """`hardtanh(x).to(uint8)`: C leaves converting -1.0 to uint8_t undefined (GCC gave 0);
    eager (and torch) give the low bits of the CPU's int32 conversion (255)."""
    vals = np.array([-1.0, -0.5, 200.0, 300.0, -129.0, 40000.0, np.nan, np.inf, -np.inf,
                     255.9, -3e9, 1e10], np.float32)

    def fn(T, x):
        return (T.nn.functional.hardtanh(x).to(T.uint8), x.to(T.uint8), x.to(T.int8),
                x.to(T.int16), x.to(T.int32), x.double().to(T.uint8), (x * 2).to(T.int64))

    check(fn, [(vals, None, "b")])


def test_lowering_computes_in_the_result_dtype():
    """`x.sub(y, alpha=2)` with int32 x and uint8 y: the lowering `a - b * alpha` doubled the
    uint8 in uint8 (wrapping) where eager converts to int32 first; likewise a float32 factor
    of a float64 result."""
    rng = np.random.default_rng(6)
    x = rng.integers(-50, 50, (3, 4)).astype(np.int32)
    y = rng.integers(0, 256, (3, 4)).astype(np.uint8)
    z = rng.standard_normal((3, 4)) * 1e3

    def fn(T, a, b, c, d):
        return (a.sub(b, alpha=2), a.add(b, alpha=3), T.rsub(a, b, alpha=2),
                c.add(d, alpha=0.1), (b * 2).to(T.int32) + a)

    check(fn, [(x, None, "b"), (y, None, "b.t().t()"), (z, "float64", "b"),
               (z.astype(np.float32), None, "b")])


def test_copy_of_an_input_into_itself():
    """`x.copy_(x)` of a one-element input: the written-back value is the input's own memory
    (with another stride for its one-element dim), and `copy_` took it for a partial overlap
    and raised, where eager copies nothing."""

    def fn(T, m, x):
        x.copy_(x)
        return (T.where(m.bool(), x, -3), x * 2)

    check(fn, [(np.ones((5, 3, 2), np.float32), None, "b"), (np.array([1.5], np.float32),
                                                             None, "b")], calls=2)
