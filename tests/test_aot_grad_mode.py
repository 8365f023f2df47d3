"""Grad-mode switches inside AOT-traced programs: the traced graphs record them, values
computed under no_grad get no gradient, and values, gradients and the grad mode the program
leaves behind equal eager execution and PyTorch's."""

from __future__ import annotations

import numpy as np
import torch

import fusegrad
from fusegrad._functorch.aot_autograd import aot_function
from fusegrad.compiler.aot.api import aot_eager, nop

A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
B = np.array([[1.0, 2.0, -3.0], [0.5, -0.5, 4.0]], np.float32)


def _scaled(T, a, b):
    with T.no_grad():
        scale = (a * 2).sum()
    return b * scale + a


def _nested(T, a, b):
    with T.no_grad():
        x = a * 3
        with T.enable_grad():
            y = b * 2
    return x + y


def _enables(T, a, b):
    x = a * 3  # the caller's mode: no_grad
    with T.enable_grad():
        y = b * 2 + x
    return y


def _inputs(lib):
    return [lib.tensor(v.copy(), requires_grad=True) for v in (A, B)]


def _grads(lib, fn, call=None):
    a, b = _inputs(lib)
    out = (call or fn)(a, b)
    out.sum().backward()
    return out.detach().numpy(), [None if t.grad is None else t.grad.numpy() for t in (a, b)]


def _compiled(prog, graphs: list):
    def keep(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    return aot_function(lambda a, b: prog(fusegrad, a, b), fw_compiler=keep, bw_compiler=nop)


def _same(got, want) -> None:
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    for g, w in zip(got[1], want[1]):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_forward_graph_records_no_grad_block_and_gradients_equal_eager():
    graphs: list = []
    compiled = _compiled(_scaled, graphs)
    got = _grads(fusegrad, None, compiled)
    assert compiled.fallback_reason is None
    forward = graphs[0]
    assert "_set_grad_enabled(False)" in forward and "_set_grad_enabled(True)" in forward
    assert forward.index("_set_grad_enabled(False)") < forward.index("_set_grad_enabled(True)")
    _same(got, _grads(fusegrad, lambda a, b: _scaled(fusegrad, a, b)))
    _same(got, _grads(torch, lambda a, b: _scaled(torch, a, b)))
    assert fusegrad.is_grad_enabled()


def test_enable_grad_nested_in_no_grad_gives_torch_gradients():
    graphs: list = []
    compiled = _compiled(_nested, graphs)
    got = _grads(fusegrad, None, compiled)
    assert compiled.fallback_reason is None
    _same(got, _grads(torch, lambda a, b: _nested(torch, a, b)))


def test_program_called_under_no_grad_that_enables_grad_records_history():
    graphs: list = []
    compiled = _compiled(_enables, graphs)
    results = []
    for lib, fn in ((fusegrad, compiled), (torch, lambda a, b: _enables(torch, a, b))):
        a, b = _inputs(lib)
        with lib.no_grad():
            out = fn(a, b)
            assert out.requires_grad and not lib.is_grad_enabled()
        out.sum().backward()
        results.append((out.detach().numpy(), [a.grad, b.grad]))
    assert compiled.fallback_reason is None
    assert results[0][1][0] is None and results[1][1][0] is None  # `a` only under no_grad
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1][1].numpy(), results[1][1][1].numpy())


def test_graphs_breaking_inside_no_grad_trace_and_match_eager():
    def f(x):
        x = x * 2
        print(end="")  # a graph break: the second graph starts inside the block
        with fusegrad.no_grad():
            y = x + 1
            print(end="")
            z = y * 2
        return z * x

    def g(x):
        with fusegrad.no_grad():
            s = x + 1
            print(end="")
        return s * x

    for fn in (f, g):
        runners = []

        def backend(gm, example_inputs, runners=runners):
            runners.append(aot_eager(gm, example_inputs))
            return runners[-1]

        x = fusegrad.tensor(A.copy(), requires_grad=True)
        got = fusegrad.compile(fn, backend=backend)(x)
        assert fusegrad.is_grad_enabled()
        assert len(runners) >= 2 and [r.fallback_reason for r in runners] == [None] * len(runners)
        x2 = fusegrad.tensor(A.copy(), requires_grad=True)
        want = fn(x2)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
        assert got.requires_grad == want.requires_grad
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())
