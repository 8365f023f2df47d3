"""A function decorated with fusegrad's grad-mode decorators (`@no_grad()`,
`@enable_grad()`), called at a graph break: the decorator's wrapper is fusegrad's code (it
takes the user function's `__module__`, so it is known by its file) and runs uncaptured, as
Dynamo never compiles a frame of torch's own code; the user function inside is captured on
its own frame. Breaks and graphs counted as torch counts them, values as eager."""

from __future__ import annotations

import pytest

import fusegrad


def _program(lib):
    state = {"n": 0}

    @lib.no_grad()
    def helper(x):
        y = x * 2
        state["n"] += int(y.sum().item() > 0)  # a data-dependent break
        return y + 1, lib.is_grad_enabled()

    @lib.enable_grad()
    def helper2(x):
        return x * 3, lib.is_grad_enabled()

    def f(x):
        a = x.sin()
        b, ge = helper(a)
        with lib.no_grad():
            c, ge2 = helper2(b)
        return b.cos() + c, ge, ge2, (a * 1).requires_grad

    return f, state


def _counts(lib, backend="eager"):
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    f, state = _program(lib)
    x = lib.ones(3, requires_grad=True)
    out = lib.compile(f, backend=backend)(x)
    found = lib._dynamo.utils.counters
    values = [(o.tolist(), o.requires_grad) if hasattr(o, "tolist") else o for o in out]
    return (sum(found["graph_break"].values()), found["stats"]["unique_graphs"], values,
            state["n"])


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_decorated_helper_values_as_eager(backend):
    f, state = _program(fusegrad)
    x = fusegrad.ones(3, requires_grad=True)
    want = f(x)
    want = [(o.tolist(), o.requires_grad) if hasattr(o, "tolist") else o for o in want]
    got = _counts(fusegrad, backend)
    assert got[2] == want and got[3] == 1 and state["n"] == 1


def test_decorated_helper_breaks_as_torch():
    torch = pytest.importorskip("torch")
    want_breaks, want_graphs, want_values, _ = _counts(torch)
    got_breaks, got_graphs, got_values, _ = _counts(fusegrad)
    assert (got_breaks, got_graphs) == (want_breaks, want_graphs)
    assert got_values == want_values
