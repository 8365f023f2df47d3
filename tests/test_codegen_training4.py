"""Generated code for in-place ops in graphs given to `compile_graph` directly, and for the
backward of normalisation layers.

In-place ops (`add_`, `copy_`, `index_put_` ...) in registry-level graphs (`make_fx`
traces, not functionalised) write their tensor's memory: reads before the write keep the
old elements, reads after it (views of the written tensor included) the new ones; ops
whose write cannot be compiled exactly are refused with a clear error. Oracles: eager
execution of the same programs on copies of the inputs (results, the inputs' new values
and version counters, the error and its message).
"""

from __future__ import annotations

import numpy as np
import pytest
from codegen_support import Recorder

import fusegrad
from fusegrad.compiler.codegen import build, compile_graph
from fusegrad.fx.experimental.proxy_tensor import make_fx

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


# ---------------------------------------------------------------- in-place writes


def _sum_write_sum(x, y):  # the second sum reads the written input
    s1 = (x * x).sum()
    x.add_(1)
    return s1, (x * x).sum()


def _lazy_read_before(x, y):  # `x * 2` is read after the write: it keeps the old x
    a = x * 2
    x.mul_(y)
    return a + x, a.sum(1)


def _views_see_the_write(x, y):  # views made before the write read the new elements
    row, col = x[0], x.t()[1]
    old = row.exp()
    x.sub_(y)
    return row * 3, col + 1, old


def _write_through_views(x, y):
    x[1].mul_(2)
    x.t()[2].add_(y[:3])
    x[:, 1:3].copy_(y[:2])
    return x.sum(1), x * 1


def _copy_into_input(x, y):
    before = x.amax(0)
    x.copy_(y)  # broadcast over the rows
    return before, x.exp()


def _write_intermediate(x, y):
    z = x * 2
    w = z.exp()
    z.add_(y)
    return w, z.sum(0), z * z


def _two_writes_then_view(x, y):
    v = x.t()
    x.add_(1)
    x.mul_(y)
    return v + 0, (v * 2).sum()


def _index_and_mask_writes(x, y):
    x.masked_fill_(x > 0.5, 0.0)
    x.index_put_((y[:3].argsort()[:2],), y[:1], accumulate=True)
    return x.sum(0), x.clone()


def _reshaped_write(x, y):
    rows = x.view(2, 6)
    rows[1].add_(rows[0])
    return x.sum(), rows * 1


def _returns_the_input(x, y):
    x.add_(y)
    return x, x * 2


PROGRAMS = [_sum_write_sum, _lazy_read_before, _views_see_the_write, _write_through_views,
            _copy_into_input, _write_intermediate, _two_writes_then_view,
            _index_and_mask_writes, _reshaped_write, _returns_the_input]


def _inputs(dtype=fusegrad.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((4,))
    if dtype is fusegrad.int64:
        x, y = (np.round(a * 4) for a in (x, y))
    return [fusegrad.from_numpy(a).to(dtype) for a in (x, y)]


def _copies(args):
    return [a.clone() for a in args]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__[1:])
def test_in_place_writes_match_eager(program):
    """Results, the inputs after the call and their version counters equal eager's; a second
    call (on fresh inputs) again."""
    args = _inputs()
    gm = make_fx(program)(*_copies(args))
    compiled = compile_graph(gm, _copies(args))
    for _ in range(2):
        mine, theirs = _copies(args), _copies(args)
        got, want = compiled(*mine), program(*theirs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
        for m, t in zip(mine, theirs):
            np.testing.assert_array_equal(m.numpy(), t.numpy())
            assert m._version == t._version
    if program is _returns_the_input:
        assert got[0] is mine[0]  # the written input itself, as eager returns it


def test_integer_writes_and_eager_errors():
    """int64 writes; a write eager refuses (a float result into an integer tensor, a copy
    between overlapping views) raises eager's error from the compiled graph."""
    args = _inputs(fusegrad.int64)
    gm = make_fx(_write_through_views)(*_copies(args))
    got = compile_graph(gm, _copies(args))(*_copies(args))
    want = _write_through_views(*_copies(args))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())

    def cast(x, y):
        x.add_(y)
        return x * 1

    # x[0, :3].copy_(x.view(-1)[1:4]), which eager refuses (so make_fx cannot trace it)
    r = Recorder()
    x, _ = r.input(), r.input()
    src = r.op("slice.Tensor", r.op("view", x, [-1]), 0, 1, 4)
    dst = r.op("slice.Tensor", r.op("select.int", x, 0, 0), 0, 0, 3)
    overlapping = r.module([r.op("mul.Tensor", r.op("copy_", dst, src), 1)])
    floats = _inputs()
    cases = ((overlapping, overlapping, floats), (cast, make_fx(cast)(*_copies(args)),
                                                   [args[0], floats[1]]))
    for fn, graph, inputs in cases:
        compiled = compile_graph(graph, _copies(inputs))
        with pytest.raises(RuntimeError) as want:
            fn(*_copies(inputs))
        with pytest.raises(RuntimeError) as got:
            compiled(*_copies(inputs))
        assert str(got.value) == str(want.value)


def test_write_through_a_reshape_op_writes_its_input():
    """`_unsafe_view` (a reshape autograd treats as a new tensor) is a view in eager's
    memory: writing it writes the input, which a later read sees."""
    r = Recorder()
    x = r.input()
    flat = r.op("_unsafe_view", x, [12])
    r.op("mul_.Tensor", flat, 3)
    gm = r.module([r.op("sum", x)])
    args = _inputs()[:1]
    mine, theirs = _copies(args), _copies(args)
    got, want = compile_graph(gm, _copies(args))(*mine), gm(*theirs)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(mine[0].numpy(), theirs[0].numpy())


def test_random_write_into_input_draws_as_eager():
    def fill(x, y):
        s = x.sum()
        x.uniform_(-1, 1)
        return s, x * y

    args = _inputs()
    gm = make_fx(fill)(*_copies(args))
    compiled = compile_graph(gm, _copies(args))
    mine, theirs = _copies(args), _copies(args)
    fusegrad.manual_seed(3)
    got = compiled(*mine)
    fusegrad.manual_seed(3)
    want = fill(*theirs)
    for g, w in zip(got + tuple(mine), want + tuple(theirs)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_writes_that_cannot_be_compiled_are_refused():
    """A write changing its input's geometry, a random draw into an intermediate tensor and
    a write through a view the graph holds as a copy raise NotImplementedError naming the
    op (the inductor backend then runs the graph as FX code)."""
    def transpose_in_place(x, y):
        x.t_()
        return x * 1

    def random_intermediate(x, y):
        z = x * 2
        row = z[0]
        z.normal_()
        return z + 0, row

    def split_write(x, y):  # split's results are copies (an extern): not written through
        a, b = x.split(2, 1)
        b.add_(a)
        return x.sum(), b * 1

    def split_read(x, y):  # a copy of a view made before the write, read after it
        a, b = x.split(2, 1)
        x.add_(1)
        return a * 1

    args = _inputs()
    for fn, name in ((transpose_in_place, "t_"), (random_intermediate, "normal_"),
                     (split_write, "add_.Tensor"), (split_read, "add_.Tensor")):
        gm = make_fx(fn)(*_copies(args))
        with pytest.raises(NotImplementedError, match=f"codegen: {name} cannot be compiled"):
            compile_graph(gm, _copies(args))


def test_compiled_functions_with_in_place_ops_unchanged():
    """`fusegrad.compile` (AOT functionalises first) still writes the input once, after
    the kernels, with eager's values and gradients."""
    def f(x, w):
        y = (x.exp() * w).sum(1)
        x.mul_(2)
        return y, x.sum()

    args = _inputs()
    w = [fusegrad.ones(4, requires_grad=True) for _ in range(2)]
    mine, theirs = _copies(args), _copies(args)
    got = fusegrad.compile(f)(mine[0], w[0])
    want = f(theirs[0], w[1])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-6)
    got[0].sum().backward()
    want[0].sum().backward()
    np.testing.assert_allclose(w[0].grad.numpy(), w[1].grad.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(mine[0].numpy(), theirs[0].numpy())


# ---------------------------------------------------------------- layer norm's backward


class _Residual(fusegrad.nn.Module):
    """x + fc(layer_norm(x)): a transformer's pre-norm residual branch."""

    def __init__(self, d=24):
        super().__init__()
        self.ln = fusegrad.nn.LayerNorm(d)
        self.fc = fusegrad.nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc(self.ln(x))


def _kernel_calls(compiled) -> list:
    import re

    return re.findall(r"^    (cpp_fused_\w+)\(P, K\)$", compiled.source, re.M)


def test_layer_norm_backward_is_two_kernels(monkeypatch):
    """Layer norm's backward (beside a residual gradient) is one row kernel (1 / std, the
    two row sums and the input gradient) and one of column sums (weight and bias), where
    it was four kernels: the same bits as the four, and eager's values and gradients."""
    import copy
    import sys

    from fusegrad.compiler import codegen

    schedule = sys.modules["fusegrad.compiler.codegen.schedule"]
    graphs = []
    original = codegen.compile_graph

    def recording(gm, inputs, options=None):
        graphs.append((gm, [a.clone() if hasattr(a, "clone") else a for a in inputs]))
        return original(gm, inputs, options)

    monkeypatch.setattr(codegen, "compile_graph", recording)
    fusegrad.manual_seed(0)
    model = _Residual()
    twin = copy.deepcopy(model)
    data = np.random.default_rng(4).standard_normal((2, 5, 24)).astype(np.float32)
    data[1, 2, :3] = [1e4, -1e4, 0.0]  # (a row of large spread)
    weights = fusegrad.from_numpy(np.random.default_rng(5).standard_normal((2, 5, 24))
                                  .astype(np.float32))
    xs = [fusegrad.from_numpy(data.copy()).requires_grad_(True) for _ in range(2)]
    (fusegrad.compile(model)(xs[0]) * weights).sum().backward()
    (twin(xs[1]) * weights).sum().backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    monkeypatch.setattr(codegen, "compile_graph", original)

    gm, inputs = graphs[-1]  # the backward graph
    fused = original(gm, inputs, {"fx_graph_cache": False})
    monkeypatch.setattr(schedule, "LOOKAHEAD", 0)
    monkeypatch.setattr(schedule, "_row_value_before", lambda g, items, first: None)
    apart = original(gm, inputs, {"fx_graph_cache": False})
    assert len(_kernel_calls(apart)) == len(_kernel_calls(fused)) + 2
    row = [k for k in _kernel_calls(fused) if "sqrt" in k]
    assert len(row) == 1 and "sum" in row[0] and "sub" in row[0], _kernel_calls(fused)
    for a, b in zip(fused(*inputs), apart(*inputs)):
        np.testing.assert_array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))


# ---------------------------------------------------------------- scatter kernels


def _pools(x, w):
    """Overlapping windows (3, stride 2, padding 1: gradients added) and disjoint ones."""
    F = fusegrad.nn.functional
    y = F.max_pool2d(x * w, 3, 2, 1)
    return (y * y).sum() + F.max_pool2d(x, 2).exp().sum()


def test_max_pool_backward_scatters_are_kernels(monkeypatch):
    """Max pooling's gradient (scatter of disjoint windows, scatter_add of overlapping ones
    with tied maxima) as generated kernels: the extern's bits, eager's values."""
    from fusegrad.compiler import codegen

    graphs = []
    original = codegen.compile_graph

    def recording(gm, inputs, options=None):
        graphs.append((gm, [a.clone() if hasattr(a, "clone") else a for a in inputs]))
        return original(gm, inputs, options)

    monkeypatch.setattr(codegen, "compile_graph", recording)
    data = np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32)
    data[0, 0, :3, :3] = 1.5  # (ties: each window's first maximum)
    xs = [fusegrad.from_numpy(data.copy()).requires_grad_(True) for _ in range(2)]
    ws = [fusegrad.ones(8, requires_grad=True) for _ in range(2)]
    fusegrad.compile(_pools, options={"fx_graph_cache": False})(xs[0], ws[0]).backward()
    _pools(xs[1], ws[1]).backward()
    for a, b in ((xs[0], xs[1]), (ws[0], ws[1])):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(codegen, "compile_graph", original)

    gm, inputs = graphs[-1]
    kernels = original(gm, inputs, {"fx_graph_cache": False})
    calls = _kernel_calls(kernels)
    assert any("_scatter_" in k for k in calls) and any("scatter_add" in k for k in calls)
    assert "_extern_scatter" not in kernels.source
    from fusegrad.ops import REGISTRY

    monkeypatch.setattr(REGISTRY["scatter.src"], "lowering", None)
    monkeypatch.setattr(REGISTRY["scatter_add"], "lowering", None)
    externs = original(gm, inputs, {"fx_graph_cache": False})
    assert "_extern_scatter" in externs.source
    for a, b in zip(kernels(*inputs), externs(*inputs)):
        np.testing.assert_array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))


@pytest.mark.parametrize("name", ["scatter.src", "scatter_add"])
def test_scatter_kernel_values_and_index_errors(monkeypatch, name):
    """Repeated positions (the last stored, or all added, in index order), int64 values,
    and an index out of range raising eager's error; a scatter along another dim stays an
    extern."""
    r = Recorder()
    a, index, src = r.input(), r.input(), r.input()
    last = r.op(name, r.op("mul.Tensor", a, 2), -1, index, r.op("add.Tensor", src, 1))
    rows = r.op("remainder.Scalar", r.op("slice.Tensor", index, 0, 0, 1), 3)
    first = r.op(name, a, 0, rows, src)
    gm = r.module([last, first])
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.int64):
        base = rng.integers(-5, 5, (3, 5)).astype(dtype)
        values = rng.integers(-5, 5, (3, 4)).astype(dtype)
        good = np.array([[0, 4, 0, 4], [1, 1, 1, 2], [3, 2, 1, 0]])
        args = [fusegrad.from_numpy(x) for x in (base, good, values)]
        compiled = compile_graph(gm, args, {"fx_graph_cache": False})
        assert "scatter" in _kernel_calls(compiled)[-1] and "_extern_scatter" in \
            compiled.source
        for got, want in zip(compiled(*args), gm(*args)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    for bad in (5, -1):
        index = fusegrad.from_numpy(np.where(good == 2, bad, good))
        with pytest.raises(RuntimeError) as want:
            gm(args[0], index, args[2])
        with pytest.raises(RuntimeError) as got:
            compiled(args[0], index, args[2])
        assert str(got.value) == str(want.value)
