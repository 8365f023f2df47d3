"""Graphs holding Python calls made for their effect get kernels, not FX code: a grad-mode
switch (`_set_grad_enabled`, a no-op in generated code) and a tensor assert
(`_assert_async`, a check between kernels raising eager's AssertionError).

Oracles: eager execution of the same programs (values, gradients, the error and message).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import fusegrad
from fusegrad import fx
from fusegrad.compiler import logs
from fusegrad.compiler.aot.tracing import _set_grad_enabled
from fusegrad.compiler.capture.exceptions import assert_async
from fusegrad.compiler.codegen import build, compile_graph

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


@pytest.fixture
def output_code(caplog):
    logs.set_logs(output_code=True, graph_breaks=True)
    caplog.set_level(logging.INFO, logger="fusegrad.compiler")
    logs.log.propagate = True
    yield caplog
    logs.set_logs(output_code=False, graph_breaks=False)
    logs.log.propagate = False


def _assert_graph(message):
    """out = exp(x) * 2 after `assert (x > 0).all(), message` as graph nodes."""
    from fusegrad.ops.overloads import aten

    g = fx.Graph()
    x = g.placeholder("x")
    switch_off = g.call_function(_set_grad_enabled, (False,))
    positive = g.call_function(aten.gt.Tensor, (x, 0))
    every = g.call_function(aten.all.default, (positive,))
    check = g.call_function(assert_async, (every, message))
    switch_on = g.call_function(_set_grad_enabled, (True,))
    out = g.call_function(aten.mul.Tensor, (g.call_function(aten.exp.default, (x,)), 2))
    g.output((out,))
    for n in (switch_off, check, switch_on):
        assert not n.users  # kept for their effect only
    return fx.GraphModule(fusegrad.nn.Module(), g)


@pytest.mark.parametrize("message", ["x must be positive", None])
def test_assert_and_grad_switch_lower_to_kernels(message):
    gm = _assert_graph(message)
    x = fusegrad.tensor([0.5, 1.0, 2.0])
    compiled = compile_graph(gm, [x])
    assert "void cpp_fused_" in compiled.source
    np.testing.assert_allclose(compiled(x)[0].numpy(), (x.exp() * 2).numpy(), rtol=1e-6)
    bad = fusegrad.tensor([0.5, -1.0, 2.0])
    with pytest.raises(AssertionError) as got:
        compiled(bad)
    assert fusegrad.is_grad_enabled()  # the switches are no-ops in generated code
    try:
        with pytest.raises(AssertionError) as want:
            gm(bad)  # the graph's FX code: eager
    finally:
        fusegrad.set_grad_enabled(True)  # FX code raised between its two switches
    assert got.value.args == want.value.args


# Compiled from text: pytest rewrites the `assert` statements of test modules.
_PROGRAM = """
def f(x, w):
    assert (x > 0).all(), "inputs must be positive"
    with fusegrad.no_grad():
        w.mul_(0.5)
    return (x.log() * w).sum()
"""


def test_compiled_program_with_assert_and_no_grad_gets_kernels(output_code):
    scope = {"fusegrad": fusegrad}
    exec(compile(_PROGRAM, "<program>", "exec"), scope)
    f = scope["f"]

    data = np.array([0.5, 1.5, 3.0], np.float32)
    xs = [fusegrad.tensor(data, requires_grad=True) for _ in range(2)]
    ws = [fusegrad.ones(3, requires_grad=True) for _ in range(2)]
    compiled = fusegrad.compile(f)
    got = compiled(xs[0], ws[0])
    want = f(xs[1], ws[1])
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    got.backward()
    want.backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ws[0].detach().numpy(), ws[1].detach().numpy())
    with pytest.raises(AssertionError, match="^inputs must be positive$"):
        compiled(fusegrad.tensor([1.0, -1.0, 2.0]), fusegrad.ones(3))
    text = output_code.text
    assert "cpp_fused_" in text
    assert "runs as FX code" not in text


def test_without_a_compiler_the_python_calls_run_as_eager(monkeypatch):
    """The NumPy fallback (no C compiler) calls the graph's Python functions itself."""
    from fusegrad.compiler import codegen

    monkeypatch.setattr(codegen, "_warned_no_compiler", [True])  # warned already
    monkeypatch.setattr(build, "compiler", lambda: None)
    gm = _assert_graph("x must be positive")
    x = fusegrad.tensor([0.5, 1.0, 2.0])
    compiled = compile_graph(gm, [x])
    np.testing.assert_allclose(compiled(x)[0].numpy(), (x.exp() * 2).numpy(), rtol=1e-6)
    with pytest.raises(AssertionError, match="^x must be positive$"):
        compiled(fusegrad.tensor([0.5, -1.0, 2.0]))
    assert fusegrad.is_grad_enabled()
