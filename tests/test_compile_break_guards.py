"""The instruction a graph break runs for real leaves no guards behind: what a call inlined
up to its break read (an attribute that changes on every call) does not recompile the
graph before it, as Dynamo installs no guards for the breaking instruction. Values as
eager; graphs no more than torch captures."""

from __future__ import annotations

import pytest

import fusegrad


def _program(lib):
    class Cfg:
        step = 0

    cfg = Cfg()
    seen = []

    def helper(x, c):
        n = c.step  # read by the inlined call, which then breaks
        seen.append(n)
        lib._dynamo.graph_break()
        return x * n

    def f(x):
        y = x + 1
        z = helper(y, cfg)
        return z - 1

    return f, cfg, seen


def _run(lib, backend="eager"):
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    f, cfg, seen = _program(lib)
    compiled = lib.compile(f, backend=backend)
    outs = []
    for i in range(5):
        cfg.step = i
        outs.append(compiled(lib.ones(2)).tolist())
    return outs, seen, lib._dynamo.utils.counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_values_as_eager(backend):
    f, cfg, seen = _program(fusegrad)
    want = []
    for i in range(5):
        cfg.step = i
        want.append(f(fusegrad.ones(2)).tolist())
    got, got_seen, _ = _run(fusegrad, backend)
    assert got == want and got_seen == seen


def test_outer_graph_not_recompiled():
    """The graph of `f` before the call is captured once (torch's four graphs for these
    five calls hold one of `f`'s); the guard on `c.step` the inlined call added would fail
    on every call."""
    import logging

    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Collect(logging.INFO)
    logger = logging.getLogger("fusegrad.compiler")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    fusegrad._logging.set_logs(recompiles=True)
    try:
        _run(fusegrad)
    finally:
        fusegrad._logging.set_logs(recompiles=False)
        logger.setLevel(level)
        logger.removeHandler(handler)
    assert any("Recompiling function helper" in m for m in messages)  # (the log is read)
    assert not any("Recompiling function f " in m for m in messages)
