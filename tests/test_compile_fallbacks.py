"""No silent eager: every fallback (an opcode the translator does not know, a translator
failure, the recompile limit) is a graph break with a reason and the user's file:line, shown
by `explain`, logged under `graph_breaks`, and an error under fullgraph=True.

No torch here: the 3.12/3.13 runs use this file too.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from compile_support import Counter

import fusegrad
from fusegrad._dynamo import exc
from fusegrad.compiler import logs
from fusegrad.compiler.capture import translator

FILE = __file__


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.fixture
def break_log(caplog):
    logs.set_logs(graph_breaks=True)
    logs.log.addHandler(caplog.handler)
    try:
        with caplog.at_level("INFO", logger="fusegrad.compiler"):
            yield caplog
    finally:
        logs.log.removeHandler(caplog.handler)
        logs.set_logs(graph_breaks=False)


def program(x):
    y = x * 2
    z = y + 1
    return z.sum()


# ------------------------------------------------------------------ unknown opcodes


@pytest.fixture
def without_binary_op(monkeypatch):
    """The translator as if it did not know BINARY_OP (the `+`/`*` opcode of 3.11+)."""
    monkeypatch.setattr(translator, "SUPPORTED_OPCODES",
                        translator.SUPPORTED_OPCODES - {"BINARY_OP"})


def test_unknown_opcode_is_a_reported_break(without_binary_op, break_log):
    x = fusegrad.arange(3.0)
    out = fusegrad._dynamo.explain(program)(x)
    assert out.graph_count == 0 and out.graph_break_count == 1
    reason = out.break_reasons[0]
    assert "BINARY_OP" in reason.reason and "runs eagerly" in reason.reason
    frame = reason.user_stack[-1]
    assert (frame.filename, frame.lineno) == (FILE, _line_of(program, "x * 2"))
    fn = fusegrad.compile(program, backend=Counter())
    assert fn(x).item() == program(x).item()
    assert f"Eager fallback in program at {FILE}:{_line_of(program, 'x * 2')}" in \
        break_log.text


def test_unknown_opcode_fullgraph_raises(without_binary_op):
    fn = fusegrad.compile(program, fullgraph=True, backend=Counter())
    with pytest.raises(exc.Unsupported, match=rf"BINARY_OP.*{FILE}:\d+") as info:
        fn(fusegrad.ones(2))
    assert isinstance(info.value, RuntimeError)  # as torch._dynamo.exc.Unsupported


# ------------------------------------------------------------------ translator failures


@pytest.fixture
def broken_binary_op(monkeypatch):
    """A translator whose BINARY_OP has a bug (raises something other than a graph break)."""
    def broken(self, inst):
        raise ZeroDivisionError("a bug in the opcode method")

    monkeypatch.setattr(translator.Translator, "BINARY_OP", broken)


def test_translator_bug_is_reported_as_a_bug(broken_binary_op, break_log):
    x = fusegrad.arange(3.0)
    out = fusegrad._dynamo.explain(program)(x)
    assert out.graph_break_count == 1
    reason = out.break_reasons[0]
    assert "translator failed (ZeroDivisionError: a bug in the opcode method)" in reason.reason
    assert "bug in fusegrad" in reason.reason
    assert reason.user_stack[-1].lineno == _line_of(program, "x * 2")
    counter = Counter()
    fn = fusegrad.compile(program, backend=counter)
    assert fn(x).item() == program(x).item()  # still eager's answer
    assert fn(x).item() == program(x).item()
    assert "translator failed" in break_log.text and FILE in break_log.text


def test_translator_bug_fullgraph_raises(broken_binary_op):
    fn = fusegrad.compile(program, fullgraph=True, backend=Counter())
    with pytest.raises(exc.InternalTorchDynamoError, match=rf"translator failed.*{FILE}:\d+"):
        fn(fusegrad.ones(2))


def test_translator_bug_fallback_is_guarded(monkeypatch):
    """The eager fallback holds only for inputs like those it failed on."""
    calls = []
    real = translator.Translator.BINARY_OP

    def flaky(self, inst):
        if not calls:
            calls.append(inst)
            raise KeyError("first time only")
        return real(self, inst)

    monkeypatch.setattr(translator.Translator, "BINARY_OP", flaky)
    counter = Counter()
    fn = fusegrad.compile(program, backend=counter)
    fn(fusegrad.ones(2))
    assert counter.graphs == 0
    assert fn(fusegrad.ones(3)).item() == program(fusegrad.ones(3)).item()
    assert counter.graphs == 1  # a new shape is translated afresh


# ------------------------------------------------------------------ recompile limit


def scaled(x, n):
    return x * n


def test_recompile_limit_is_logged_but_no_graph_break(monkeypatch, break_log):
    # torch 2.13: no graph, no break reason, graph_break_count -1, counters["graph_break"]
    # empty; the frame runs eagerly and the hit is logged.
    monkeypatch.setattr(fusegrad._dynamo.config, "recompile_limit", 0)
    fusegrad._dynamo.utils.counters.clear()
    with pytest.warns(UserWarning, match="recompile_limit"):
        out = fusegrad._dynamo.explain(scaled)(fusegrad.ones(2), 3)
    assert (out.graph_count, out.graph_break_count, out.break_reasons) == (0, -1, [])
    assert not fusegrad._dynamo.utils.counters["graph_break"]
    assert "hit config.recompile_limit (0)" in break_log.text
    assert f"{FILE}:{scaled.__code__.co_firstlineno}" in break_log.text


def test_recompile_limit_logged_once_and_eager(monkeypatch, break_log):
    monkeypatch.setattr(fusegrad._dynamo.config, "recompile_limit", 2)
    fusegrad._dynamo.reset()  # (`scaled`'s earlier graphs count toward its limit)
    fn = fusegrad.compile(scaled, backend=Counter())
    with pytest.warns(UserWarning, match="recompile_limit") as warned:
        for n in range(5):
            np.testing.assert_array_equal(fn(fusegrad.ones(2), n).numpy(), [n, n])
    assert [w.filename for w in warned] == [FILE]  # once, pointing at the caller's line
    assert break_log.text.count("hit config.recompile_limit (2)") == 1
    assert f"{FILE}:{scaled.__code__.co_firstlineno}" in break_log.text


def test_recompile_limit_fullgraph_raises(monkeypatch):
    monkeypatch.setattr(fusegrad._dynamo.config, "recompile_limit", 2)
    fusegrad._dynamo.reset()  # (`scaled`'s earlier graphs count toward its limit)
    fn = fusegrad.compile(scaled, fullgraph=True, backend=Counter())
    # (three dtypes: three graphs, as torch.compile's; an int that changes is an input of
    # the second graph, which serves the third value too)
    fn(fusegrad.ones(2), 1)
    fn(fusegrad.ones(2, dtype=fusegrad.float64), 1)
    with pytest.raises(exc.FailOnRecompileLimitHit, match="recompile_limit.*fullgraph=True"):
        fn(fusegrad.ones(2, dtype=fusegrad.int64), 1)


# ------------------------------------------------------------------ breaks inside loops


def loop_break(x):
    for i in range(2):
        x = x + i
        print("", end="")
    return x * 2


def test_break_in_loop_reports_that_the_rest_runs_eagerly(capsys):
    out = fusegrad._dynamo.explain(loop_break)(fusegrad.ones(2))
    assert out.graph_break_count == -1  # torch.compile's count for a break inside a loop
    assert "rest of the frame runs eagerly" in out.break_reasons[0].reason
    assert out.break_reasons[0].user_stack[-1].lineno == _line_of(loop_break, "print(")


def test_environment_variable_turns_on_break_logs(tmp_path):
    """`FUSEGRAD_LOGS=graph_breaks` prints fallbacks with their file:line on stderr."""
    import os
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text(
        "import fusegrad\n"
        "def f(x):\n"
        "    y = x * 1\n"
        "    return y + 1\n"
        "from fusegrad.compiler.capture import translator\n"
        "translator.SUPPORTED_OPCODES = translator.SUPPORTED_OPCODES - {'BINARY_OP'}\n"
        "print(fusegrad.compile(f)(fusegrad.ones(2)).tolist())\n")
    env = {**os.environ, "FUSEGRAD_LOGS": "graph_breaks",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.strip() == "[2.0, 2.0]"
    assert f"Eager fallback in f at {script}:3" in done.stderr


def test_relative_import_in_a_fresh_interpreter_is_captured(tmp_path):
    """A function-level relative import inside library code (`nn.Sequential.forward`) is a
    lookup during translation, also where nothing has loaded `importlib.util` yet."""
    import os
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text(
        "import sys\n"
        "import fusegrad\n"
        "fresh = 'importlib.util' not in sys.modules\n"
        "m = fusegrad.nn.Sequential(fusegrad.nn.Flatten(), fusegrad.nn.Linear(12, 3))\n"
        "x = fusegrad.ones(2, 3, 4)\n"
        "out = fusegrad._dynamo.explain(m)(x)\n"
        "same = fusegrad.compile(m, backend='eager')(x).tolist() == m(x).tolist()\n"
        "print(fresh, out.graph_count, len(out.break_reasons), same)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.split()[1:] == ["1", "0", "True"], done.stdout + done.stderr


def test_a_fill_value_beyond_a_half_types_range_raises_as_eagerly():
    # Eager refuses to convert 1e30 to float16; a compiled graph must not fill inf instead.
    def f(x):
        return x.half().masked_fill(x > 0, 1e30)

    x = fusegrad.randn(4)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    compiled = fusegrad.compile(f, backend=Counter())
    with pytest.raises(RuntimeError) as captured:
        compiled(x)
    assert str(captured.value) == str(eager.value)
