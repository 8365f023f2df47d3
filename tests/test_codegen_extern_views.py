"""Extern inputs and graph outputs that are strided views: the compiled code passes NumPy
views (a weight's transpose, a permute, a slice, an expand) to its externs and returns
views of intermediate buffers, instead of copy kernels.

Oracles: torch run in the test (values, gradients, output strides, mutated inputs), eager
fusegrad (the same program uncompiled), and NumPy (the elements a geometry names).
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

import fusegrad as fg
from fusegrad.compiler import logs
from fusegrad.compiler.codegen import build, compile_graph
from fusegrad.compiler.codegen.ir import Buffer, IInt, IVar, strided_geometry

pytestmark = [pytest.mark.skipif(build.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("fresh_codegen_cache")]

# An IR line of a kernel that only copies: `bufN = pointwise[...] dtype: name[index]`.
_PURE_COPY = re.compile(r"^# \w+ = pointwise\[[^\]]*\] \S+: \w+\[[^\]]*\]$", re.M)


@pytest.fixture
def output_code(caplog):
    """The text of every graph compiled while the test runs (IR, wrapper, kernels)."""
    logs.set_logs(output_code=True)
    caplog.set_level(logging.INFO, logger="fusegrad.compiler")
    logs.log.propagate = True
    yield caplog
    logs.set_logs(output_code=False)
    logs.log.propagate = False


def _strides(t) -> tuple:
    """The strides of `t`'s dims longer than 1 (the others' strides mean nothing)."""
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1)


def _run(fn, arrays, grad=True, strides=True, compiled=None):
    """`fn(T, *inputs)` compiled (inductor) against torch and eager fusegrad: outputs (and
    their strides), the inputs' gradients of the sum of the outputs, the inputs after."""
    compiled = compiled or fg.compile(lambda *xs: fn(fg, *xs), backend="inductor")
    results = {}
    for name, T, f in (("torch", torch, lambda *xs: fn(torch, *xs)),
                       ("eager", fg, lambda *xs: fn(fg, *xs)), ("compiled", fg, compiled)):
        xs = [T.tensor(a.copy(), requires_grad=grad and a.dtype.kind == "f")
              for a in arrays]
        outs = f(*xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        if grad:
            sum(o.float().sum() * (i + 1) for i, o in enumerate(outs)
                if o.requires_grad).backward()
        results[name] = (outs, xs)
    ref_outs, ref_xs = results["torch"]
    for name in ("eager", "compiled"):
        outs, xs = results[name]
        for i, (r, o) in enumerate(zip(ref_outs, outs)):
            np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-5,
                                       atol=1e-5, err_msg=f"{name} output {i}")
            if strides:
                assert _strides(o) == _strides(r), (name, i, o.stride(), r.stride())
        for i, (r, x) in enumerate(zip(ref_xs, xs)):
            np.testing.assert_allclose(x.detach().numpy(), r.detach().numpy(), rtol=1e-6,
                                       err_msg=f"{name} input {i} after the call")
            if r.grad is not None:
                np.testing.assert_allclose(x.grad.numpy(), r.grad.numpy(), rtol=1e-4,
                                           atol=1e-5, err_msg=f"{name} grad {i}")
    return results["compiled"][0]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def test_linear_forward_backward_copies_no_transpose(output_code):
    """A Linear's forward and backward: the weight's transpose (and the gradient's) reach
    `mm` as views; no kernel only copies (the weight gradient is returned as the product
    itself, the bias gradient as the sum's buffer)."""
    def fn(T, x, w, b):
        return T.nn.functional.linear(x, w, b).tanh()

    _run(fn, [_rand(6, 8), _rand(5, 8, seed=1), _rand(5, seed=2)])
    text = output_code.text
    assert text.count("def call(args):") >= 2  # the forward and backward graphs
    assert "extern mm" in text
    assert not _PURE_COPY.findall(text), _PURE_COPY.findall(text)
    assert ".transpose((1, 0))" in text  # the transposed operands are NumPy views


@pytest.mark.parametrize("case", ["transpose", "permute", "slice", "step", "expand",
                                  "select", "chunk"])
def test_extern_inputs_as_views(case, output_code):
    """Transposed, permuted, sliced, strided, expanded and selected operands of `mm` /
    `bmm` (of graph inputs and of computed values) give torch's values, gradients and
    output strides, with no copy kernel of the operand."""
    fns = {
        "transpose": lambda T, a, b: (a.t() @ b, (a * 2).t() @ b),
        "permute": lambda T, a, b: ((a.reshape(2, 3, 4) + 1).permute(0, 2, 1) @ b[:3],
                                    a.reshape(2, 3, 4).permute(2, 0, 1).sum(0)),
        "slice": lambda T, a, b: (a[1:4, 2:] @ b[:2, 1:3], (a * 3)[:, 1:3].t() @ b[:, :2]),
        "step": lambda T, a, b: (a[::2] @ b[:4], a[:, ::2].t() @ a[:, 1::2]),
        "expand": lambda T, a, b: (T.bmm(a[:1, :4].expand(3, 1, 4).exp(),
                                         b[:4].unsqueeze(0).expand(3, 4, 5)),),
        "select": lambda T, a, b: (a.reshape(2, 3, 4)[1] @ b[:4],
                                   a.reshape(2, 3, 4)[:, 2].t() @ b[:2]),
        "chunk": lambda T, a, b: tuple(c.t() @ b[:, :2] for c in (a @ b[:4, :2]).chunk(2, 1)),
    }
    arrays = [_rand(6, 4), _rand(6, 5, seed=1)]
    _run(fns[case], arrays)
    # Without gradients (no view of an input is saved for the backward, which takes a
    # copy of it, stable under later writes of the input): no input is copied at all.
    output_code.clear()
    _run(fns[case], arrays, grad=False)
    assert "_extern_" in output_code.text
    copies = [line for line in _PURE_COPY.findall(output_code.text)
              if "in_ptr" in line.split(":")[-1]]
    assert not copies, copies


def test_view_input_then_mutation_of_the_input():
    """A view of an input passed to an extern, then the input written in place (the
    write-back runs after the graph): the product is the old value's, the input's new value
    is torch's, and later calls see the new values."""
    def fn(T, x, w):
        y = x.t() @ w
        x.mul_(2)
        z = x[:, :2].t() @ w
        return y, z

    compiled = fg.compile(lambda *xs: fn(fg, *xs), backend="inductor")
    for _ in range(2):
        _run(fn, [_rand(4, 3), _rand(4, 5, seed=1)], grad=False, compiled=compiled)


def test_view_of_buffer_written_in_place_later():
    """A value viewed by an extern and then written in place inside the program: the
    extern reads it before the write, as eager."""
    def fn(T, x, w):
        h = x * 2
        y = h.t() @ w
        h.add_(1)
        return y, h.t() @ w, h

    _run(fn, [_rand(4, 3), _rand(4, 5, seed=1)], grad=False)


def test_outputs_never_share_memory_unless_eager_does():
    """An output returned as a view of an intermediate (a reshape of a product) is in
    memory of its own: writing it in place changes no other output."""
    def fn(T, a, b):
        p = a @ b
        return p.reshape(-1), p.sum(1), (a.t() @ a).t()

    a, b = _rand(3, 4), _rand(4, 5, seed=1)
    outs = _run(fn, [a, b], grad=False)
    with fg.no_grad():
        outs[0].mul_(0)
    np.testing.assert_allclose(outs[1].numpy(), (a @ b).sum(1), rtol=1e-5)
    np.testing.assert_allclose(outs[2].numpy(), (a.T @ a).T, rtol=1e-5)


def test_dynamic_shapes_views():
    """A graph with symbolic sizes: each batch size gets views of its own geometry."""
    def fn(T, x, w):
        return (x.t() @ x[:, :3]).relu(), x[:, 1:] @ w.t()

    compiled = fg.compile(lambda *xs: fn(fg, *xs), backend="inductor", dynamic=True)
    for n in (4, 7, 9):
        _run(fn, [_rand(n, 6, seed=n), _rand(2, 5, seed=1)], compiled=compiled)


def test_gpt_attention_block_values_and_grads():
    """Attention's head split and merge (views around the flash-attention externs and the
    projections' `mm`): torch's values and gradients."""
    def fn(T, x, w):
        B, S, C = x.shape
        q, k, v = (x @ w.t()).split(C, dim=2)
        q, k, v = (t.view(B, S, 2, C // 2).transpose(1, 2) for t in (q, k, v))
        y = T.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, S, C) @ w[:C].t()

    _run(fn, [_rand(2, 5, 8), _rand(24, 8, seed=1) * 0.3])


def test_strided_geometry_against_numpy():
    """The geometry of an index map (affine, and through a reshape's division and
    remainder) names the elements NumPy's view of the same strides does; a map that is no
    single geometry (a non-contiguous merge) has none."""
    base = Buffer("b", (4, 6), None, (6, 1))
    x0, x1 = IVar("x0"), IVar("x1")
    arr = np.arange(24).reshape(4, 6)
    # transpose + slice: b[x1 + 1, 2 * x0]
    geo = strided_geometry(base, (3, 3), (x1 + IInt(1), x0 * IInt(2)))
    strides, offset = geo
    view = np.lib.stride_tricks.as_strided(arr.reshape(-1)[offset:], (3, 3),
                                           tuple(s * 8 for s in strides))
    np.testing.assert_array_equal(view, arr[1:4, ::2].T)
    # a reshape merging both dims: b[x0 // 6, x0 % 6] over (24,) is b's memory in order
    assert strided_geometry(base, (24,), (x0 // IInt(6), x0 % IInt(6))) == ((1,), 0)
    # the same merge of a transposed base (strides (1, 4)) is not one geometry
    tbase = Buffer("t", (4, 6), None, (1, 4))
    assert strided_geometry(tbase, (24,), (x0 // IInt(6), x0 % IInt(6))) is None


def test_direct_graph_with_view_extern_input():
    """`compile_graph` of a registry-level graph whose `mm` reads a permuted input: a
    NumPy view in the wrapper, eager's result."""
    from fusegrad import fx
    from fusegrad.ops.overloads import aten

    g = fx.Graph()
    a = g.placeholder("a")
    b = g.placeholder("b")
    t = g.call_function(aten.permute.default, (a, [1, 0]))
    g.output((g.call_function(aten.mm.default, (t, b)),))
    gm = fx.GraphModule(fg.nn.Module(), g)
    x, y = fg.tensor(_rand(3, 4)), fg.tensor(_rand(3, 5, seed=1))
    compiled = compile_graph(gm, [x, y])
    assert "transpose((1, 0))" in compiled.source
    assert "void cpp_fused_" not in compiled.source
    np.testing.assert_allclose(compiled(x, y)[0].numpy(), x.numpy().T @ y.numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("case", range(5))
def test_column_reductions_match_row_kernel_bits(case, monkeypatch, tmp_path, output_code):
    """Reductions across rows of memory (bias gradients: a sum over the batch) computed
    64 outputs at a time give the row-by-row kernel's bits (the same order of additions),
    and torch's values; NaN propagates as in max."""
    from fusegrad.compiler.codegen import c as cmod

    fns = [lambda T, x: x.sum(0), lambda T, x: (x * 2).amax(0),
           lambda T, x: x.reshape(10, 50, 70).sum((0, 1)),
           lambda T, x: x.reshape(20, 25, 70).sum(1), lambda T, x: x.t().sum(1)]
    a = _rand(500, 70, seed=case)
    a[3, 5] = np.nan if case == 1 else a[3, 5]
    got = {}
    for mode in ("column", "row"):
        if mode == "row":
            monkeypatch.setattr(cmod, "_is_column", lambda node: False)
        monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path / mode))  # no cached graph
        output_code.clear()
        compiled = fg.compile(lambda x: fns[case](fg, x), backend="inductor")
        got[mode] = compiled(fg.tensor(a)).numpy()
        assert ("acc[l][j]" in output_code.text) == (mode == "column")
    np.testing.assert_array_equal(got["column"], got["row"])
    np.testing.assert_allclose(got["column"], fns[case](torch, torch.tensor(a)).numpy(),
                               rtol=1e-5, atol=1e-4)


def test_view_of_output_whose_layout_changes_after_lowering():
    """An extern's input viewing a buffer that is also a graph output: the output takes
    eager's (transposed) layout after lowering, leaving the view (a row-major merge) no
    strided geometry; the wrapper gathers its elements and the product is NumPy's."""
    from fusegrad import fx
    from fusegrad.ops.overloads import aten

    g = fx.Graph()
    x = g.placeholder("x")
    m = g.placeholder("m")
    y = g.call_function(aten.mul.Tensor,
                        (g.call_function(aten.permute.default, (x, [1, 0])), 2))
    z = g.call_function(aten.view.default, (y, [1, 24]))
    g.output((y, g.call_function(aten.mm.default, (z, m))))
    gm = fx.GraphModule(fg.nn.Module(), g)
    a, b = _rand(4, 6), _rand(24, 3, seed=1)
    compiled = compile_graph(gm, [fg.tensor(a), fg.tensor(b)])
    assert "_gathered(" in compiled.source
    y_out, p = compiled(fg.tensor(a), fg.tensor(b))
    assert y_out.stride() == torch.tensor(a).t().mul(2).stride()
    np.testing.assert_allclose(p.numpy(), (a.T * 2).reshape(1, 24) @ b, rtol=1e-5)
