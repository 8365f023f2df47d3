"""`compile(module)` of a module with forward (pre-)hooks or its own `forward` attribute
compiles the whole call, hooks included (as PyTorch compiles `_call_impl`); it ran eagerly,
silently, before. Compared with the same module run eagerly, as hooks come and go."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from compile_support import BACKENDS, CAPTURES

import fusegrad as fg
from fusegrad._dynamo.utils import counters


@pytest.fixture(autouse=True)
def _fresh_recompile_limits():
    """A reset before each test: the cases share functions (one code object each), whose
    recompile limit all their compiled wrappers share, as in torch."""
    fg._dynamo.reset()


def _scale(mod, inputs, output):
    return output * 2


def _shift(mod, inputs):
    return (inputs[0] + 1,)


def _hooks_come_and_go(m):
    if not hasattr(m, "_scale"):
        m._scale = m.register_forward_hook(_scale)
    elif not hasattr(m, "_shift"):
        m._shift = m.register_forward_pre_hook(_shift)
    else:
        m._scale.remove()
        del m._scale


def _own_forward(m):
    forward = type(m).forward
    m.forward = lambda x: forward(m, x) * 3


def _nothing(m):
    pass


def _compare(make, steps, backend):
    fg.manual_seed(0)
    eager = make()
    compiled_mod = copy.deepcopy(eager)
    compiled = fg.compile(compiled_mod, backend=backend)
    for step in steps:
        step(eager)
        step(compiled_mod)
        x = fg.randn(3, 4, requires_grad=True)
        outs, grads = [], []
        for fn in (eager, compiled):
            out = fn(x)
            out.sum().backward()
            outs.append(out.detach().numpy())
            grads.append(x.grad.numpy().copy())
            x.grad = None
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_hooks_added_and_removed(backend):
    _compare(lambda: fg.nn.Linear(4, 5), [_hooks_come_and_go, _nothing, _hooks_come_and_go,
                                          _hooks_come_and_go, _hooks_come_and_go], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_instance_forward(backend):
    _compare(lambda: fg.nn.Linear(4, 5), [_nothing, _own_forward, _nothing], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_reading_outside_state(backend):
    state = {"k": 1.0}

    def register(m):
        if not m._forward_hooks:
            m.register_forward_hook(lambda mod, i, out: out * state["k"])

    def set_k(value):
        return lambda m: state.__setitem__("k", value)

    _compare(lambda: fg.nn.Linear(4, 5), [register, set_k(2.0), set_k(3.0)], backend)


def test_hooked_module_is_captured():
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    m = fg.nn.Linear(4, 5)
    m.register_forward_hook(_scale)
    counters.clear()
    fg.compile(m, backend="eager")(fg.randn(3, 4))
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters.get("graph_break")
