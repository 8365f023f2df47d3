"""The Python each captured segment runs on every call (segment_code.py), in place of Dynamo's
rewritten bytecode: a branch that breaks the graph is written out as Python (no translator
runs per call), a branch inside a `try` still reaches its handler, other breaking
instructions run for real, and the code is printed by `FUSEGRAD_LOGS=segment_code`. Compiled
results are compared with eager ones. No torch, so .ci/run runs this file on 3.12 and 3.13."""

from __future__ import annotations

import array
import logging
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_support import Counter  # noqa: E402

import fusegrad as T  # noqa: E402
from fusegrad.compiler import logs  # noqa: E402
from fusegrad.compiler.capture import segments  # noqa: E402
from fusegrad.compiler.capture.translator import SUPPORTED_VERSIONS  # noqa: E402

pytestmark = pytest.mark.skipif(sys.version_info[:2] not in SUPPORTED_VERSIONS,
                                reason="capture does not know this version's bytecode")


def toy_example(a, b):
    x = a / (T.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def _t(*values) -> T.Tensor:
    return T.tensor(np.array(values, dtype=np.float32))


def _same(got, want) -> None:
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.fixture
def concrete_steps(monkeypatch):
    """How many instructions run through the concrete translator."""
    count = [0]
    step = segments.FrameRunner._step

    def counted(self, *args):
        count[0] += 1
        return step(self, *args)

    monkeypatch.setattr(segments.FrameRunner, "_step", counted)
    return count


def test_toy_example_branches_without_the_translator(concrete_steps):
    counter = Counter()
    compiled = T.compile(toy_example, backend=counter)
    a = _t(1.0, -2.0, 3.0)
    pos, neg = _t(1.0, 2.0, 0.5), _t(-1.0, -2.0, 0.5)
    for _ in range(3):
        for b in (pos, neg):
            _same(compiled(a, b), toy_example(a, b))
    assert counter.graphs == 3
    # The branch on `b.sum() < 0` is Python in the first segment's code, not an instruction
    # the translator runs on each call.
    assert concrete_steps[0] == 0


def test_other_breaking_instructions_run_for_real(concrete_steps):
    seen = array.array("q")

    def f(x):
        y = x.sin()
        seen.append(y.shape[0])  # mutating an array from outside: runs for real, once a call
        return y.cos()

    compiled = T.compile(f, backend=Counter())
    x = _t(0.5, 1.0)
    for _ in range(2):
        _same(compiled(x), f(x))
    assert len(seen) == 4 and concrete_steps[0] == 2


def _branch_in_try(x):
    try:
        y = x * 2
        if y:  # one element: a branch; more: RuntimeError, which the handler catches
            return y + 1
    except RuntimeError:
        return x - 1
    return y - 2


@pytest.mark.parametrize("values", [(1.0,), (0.0,), (1.0, 2.0)], ids=["true", "false", "raises"])
def test_branch_inside_try_reaches_the_handler(values):
    compiled = T.compile(_branch_in_try, backend=Counter())
    x = _t(*values)
    for _ in range(2):
        _same(compiled(x), _branch_in_try(x))


def test_branch_error_is_eagers():
    def f(x):
        if x * 2:
            return x
        return -x

    compiled = T.compile(f, backend=Counter())
    x = _t(1.0, 2.0)
    with pytest.raises(RuntimeError) as want:
        f(x)
    with pytest.raises(RuntimeError) as got:
        compiled(x)
    assert str(got.value) == str(want.value)


def test_segment_code_is_logged():
    records: list = []
    handler = logging.Handler()
    handler.emit = records.append
    logs.set_logs(segment_code=True)  # sets the logger's level on first use
    logs.log.addHandler(handler)
    try:
        T.compile(toy_example, backend=Counter())(_t(1.0), _t(-1.0))
    finally:
        logs.set_logs(segment_code=False)
        logs.log.removeHandler(handler)
    texts = [r.getMessage() for r in records if r.getMessage().startswith("segment_code")]
    assert len(texts) == 2  # the branch's segment, then the one it took
    first = texts[0]
    assert "SEGMENT (toy_example from offset 0)" in first
    assert "outs = ___graph(L['a'], L['b'])" in first and "if ___v:" in first
    assert "return None, ___r" in texts[1]
