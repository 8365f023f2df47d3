"""`fusegrad.utils.benchmark` against torch.utils.benchmark: Measurement's statistics and
printed layout and Compare's tables for the same times (compared text for text), and what
Timer does (runs, blocks, callbacks, globals, setup, thread count); never how fast."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch.utils.benchmark as TB  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.utils.benchmark as FB  # noqa: E402

SPECS = [
    dict(stmt="x+1", setup="pass"),
    dict(stmt="x+1", setup="x=5", label="L", sub_label="S", description="D", num_threads=1),
    dict(stmt="x+1", setup="a=1\nb=2", num_threads=2, label="L", description="D", env="E"),
    dict(stmt="for i in range(3):\n    x+1", setup="pass", num_threads=4, sub_label="S"),
    dict(stmt="x", setup="pass", label="L"),
    dict(stmt="x", setup="pass", description="D"),
    dict(stmt="y*2", setup="pass", sub_label="s"),
]
TIMES = [(1000, [1.5e-3]), (1000, [1.5e-3, 1.6e-3, 1.7e-3, 1.55e-3]), (10, [1.5, 3.0]),
         (10, [1.5, 1.5, 1.5]), (1, [2e-10]), (1, [200.0]), (3, [1e-6, 1.2e-6, 5e-6, 1e-6, 1e-6]),
         (7, [4e-5, 4.1e-5, 3.9e-5, 4e-5, 4.05e-5, 3.95e-5]), (1, [1, 1.3]), (1, [1, 1.5]),
         (1, [1, 1, 1, 2]), (1, [1, 1.2, 1.1, 1.15])]


def _text(m) -> str:
    """The repr without its first line (which names the object's address)."""
    return repr(m).split("\n", 1)[1]


@pytest.mark.parametrize("spec", range(len(SPECS)))
@pytest.mark.parametrize("times", range(len(TIMES)))
def test_measurement_statistics_and_repr_are_torchs(spec, times):
    number, raw = TIMES[times]
    want = TB.Measurement(number, raw, TB.TaskSpec(**SPECS[spec]))
    got = FB.Measurement(number, raw, FB.TaskSpec(**SPECS[spec]))
    assert _text(got) == _text(want)
    assert str(got).split("\n", 1)[1] == str(want).split("\n", 1)[1]
    for attr in ("times", "mean", "median", "iqr", "title", "as_row_name", "has_warnings",
                 "number_per_run", "raw_times", "env", "label", "num_threads", "stmt"):
        assert getattr(got, attr) == getattr(want, attr), attr
    for threshold in (0.01, 0.1, 0.5):
        assert got.meets_confidence(threshold) == want.meets_confidence(threshold)
    assert repr(got).startswith("<fusegrad.utils.benchmark.utils.common.Measurement object")


def test_merge_as_torch():
    def merged(B):
        a, b = B.TaskSpec("s", "pass"), B.TaskSpec("t", "pass", label="L")
        out = B.Measurement.merge([B.Measurement(10, [1e-3], a), B.Measurement(20, [4e-3], a),
                                   B.Measurement(5, [1.0, 2.0], b)])
        return [(m.number_per_run, m.times, m.title, _text(m)) for m in out]

    assert merged(FB) == merged(TB)


@pytest.mark.parametrize("value", [1e-10, 2e-10, 1e-9, 1.5e-8, 1e-6, 5e-5, 1e-3, 0.5, 2.0, 1e4])
def test_select_unit_as_torch(value):
    assert FB.select_unit(value) == TB.select_unit(value)


def _tables(B):
    def M(stmt, times, n=1, **kw):
        return B.Measurement(n, times, B.TaskSpec(stmt=stmt, setup="pass", **kw))

    return [
        [M("a", [1.5e-6, 1.6e-6], label="add", sub_label="[1,2]", description="float"),
         M("b", [2.5e-5], label="add", sub_label="[1,2]", description="int"),
         M("c", [3.5e-6], label="add", sub_label="[3,4]", description="float"),
         M("d", [4.5e-3], label="add", sub_label="[3,4]", description="int", num_threads=2),
         M("e", [7e-6], label="mul", sub_label="x", description="float")],
        [M("a", [1.5e-6], label="add", sub_label="a-very-long-name", description="f"),
         M("a", [2e-6], label="add", sub_label="s", description="f")],
        [M("a", [1.5e-6], label="add", description="f"),
         M("b", [2e-3], label="add", description="g")],
        [M("a", [1.5e-9], label="L", sub_label="x", description="d"),
         M("a", [0.2], label="L", sub_label="y", description="d")],
        [M("a", [1.23456e-6], label="L", sub_label="x", description="d"),
         M("a", [0.0123], label="L", sub_label="y", description="d")],
        [M("a", [1.23456e-3], label="L", sub_label="x", description="d"),
         M("a", [0.0123], label="L", sub_label="y", description="e")],
        [M("a", [3.3e-5, 4.4e-5], label="L", sub_label="x", description="d"),
         M("a", [3.3e-5], label="K", sub_label="x", description="d")],
        [M("a", [2e-6], n=4, label="T", sub_label="x", description="d", num_threads=4),
         M("a", [1e-6], label="T", sub_label="x", description="d", num_threads=1),
         M("a", [3e-6], label="T", sub_label="y", description="longer heading",
           num_threads=2)],
    ]


@pytest.mark.parametrize("index", range(8))
def test_compare_tables_are_torchs(index, capsys):
    want = str(TB.Compare(_tables(TB)[index]))
    got = str(FB.Compare(_tables(FB)[index]))
    assert got == want
    FB.Compare(_tables(FB)[index]).print()
    assert capsys.readouterr().out == want + "\n"


def test_compare_rejects_what_is_no_measurement():
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        FB.Compare([1.0])


def test_timeit_runs_the_statement_number_times_after_setup():
    calls = []
    timer = FB.Timer("f()", setup="calls.append('setup')", globals={"f": lambda: calls.append(1),
                                                                     "calls": calls})
    m = timer.timeit(50)
    assert isinstance(m, FB.Measurement) and m.number_per_run == 50 and len(m.times) == 1
    assert m.times[0] > 0 and m.times[0] == m.raw_times[0] / 50
    # A warm-up of two runs, then the 50 measured; setup before each block.
    assert calls.count(1) == 52 and calls.count("setup") == 2
    assert m.title == "f()" and m.task_spec.num_threads == 1


def test_timer_errors_as_torch():
    with pytest.raises(NameError, match="name 'x' is not defined"):
        FB.Timer("x+1").timeit(10)
    with pytest.raises(ValueError, match="Currently only a `str` stmt is supported."):
        FB.Timer(lambda: 1)
    for call in (lambda t: t.repeat(), lambda t: t.autorange()):
        with pytest.raises(NotImplementedError, match="See `Timer.blocked_autorange.`"):
            call(FB.Timer("pass"))
        with pytest.raises(NotImplementedError, match="See `Timer.blocked_autorange.`"):
            call(TB.Timer("pass"))


def test_timer_sets_and_restores_the_thread_count():
    seen = []
    before = fusegrad.get_num_threads()
    FB.Timer("seen.append(fusegrad.get_num_threads())", num_threads=2,
             globals={"seen": seen, "fusegrad": fusegrad}).timeit(3)
    assert set(seen) == {2} and fusegrad.get_num_threads() == before


def test_blocked_autorange_measures_at_least_min_run_time():
    blocks = []
    m = FB.Timer("sum(range(50))", label="L", sub_label="S", description="D").blocked_autorange(
        callback=lambda number, elapsed: blocks.append((number, elapsed)), min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05
    assert [(m.number_per_run, t) for t in m.raw_times] == blocks
    assert m.number_per_run >= 1 and len(m.times) >= 1
    assert _text(m).startswith("L: S\nD\n")


def test_adaptive_autorange_stops_within_its_bounds():
    m = FB.Timer("x * 2", setup="x = 3").adaptive_autorange(threshold=0.5, min_run_time=0.01,
                                                              max_run_time=0.5)
    total = sum(m.raw_times)
    assert total >= 0.01
    # It stopped either on confidence (three blocks at least) or on the time bound.
    assert (len(m.times) >= 3 and m.meets_confidence(0.5)) or total >= 0.5
    assert "setup: x = 3" in _text(m)


def test_namespace_matches_torchs_main_names():
    for name in ("Timer", "Measurement", "Compare", "TaskSpec", "select_unit", "Language"):
        assert hasattr(FB, name) and hasattr(TB, name)
    assert FB.Timer.__module__ == "fusegrad.utils.benchmark.utils.timer"
