"""Capture of what broke fusegrad's graphs where torch.compile keeps one (or breaks less):

- a `collections.deque` from outside the compiled function edited in it (`append`,
  `appendleft`, `pop`, `popleft`, `extend`, `rotate`, `clear`; the oldest entries dropped
  past `maxlen`): the deque's items read and guarded, its new items set on it after the graph;
- an `OrderedDict` from outside edited in it (item assignment, `move_to_end`,
  `popitem(last=...)`, `pop`), in eager's order (torch 2.13's compiled code may leave another);
- an f-string of a list, tuple or dict of numbers (`f"{[x.shape[0], 2]}"`): a constant;
- an `Enum` member looked up by value (`Act("relu")`);
- a `@contextmanager` whose generator breaks before its `yield`: its block still captured,
  no break counted (torch gives the frame up there, counting none);
- a graph break inside a list comprehension: counted once, the comprehension's function
  rebuilt after the graph (one graph after it, as torch);
- `counters["graph_break"]` counts no break where the frame's rest runs eagerly as Dynamo
  gives it up (a break in the frame's own loop, in an exception handler), as torch counts
  none there.

Programs take the library and whether to compile and return what they recorded; each is run
eagerly and compiled under fusegrad (values, printed text and the state left behind must
agree), and compiled under torch for the counts of graphs and breaks fusegrad must match."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import collections  # noqa: E402
import contextlib  # noqa: E402
import enum  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import (  # noqa: E402
    compare,
    maybe_compile,
    observe_compiled,
)

import fusegrad as fg  # noqa: E402

_observe = observe_compiled


# ---------------------------------------------------------------- deques


def deque_window(T, compiled):
    """A streaming window of the latest inputs, full to its maxlen: each call drops the
    oldest; the window is cleared from outside between calls once."""
    window = collections.deque([T.zeros(2) + i for i in range(3)], maxlen=3)

    def step(x):
        window.append(x * 2)
        return T.stack(list(window)).sum(0) * len(window)

    run = maybe_compile(T, compiled)(step)
    outs = [run(T.arange(2.0) + i) for i in range(3)]
    window.clear()
    outs += [run(T.arange(2.0) + i) for i in range(2)]
    return outs, list(window)


def deque_edits(T, compiled):
    """Every edit of a deque of tensors and numbers, with and without maxlen."""
    bounded = collections.deque([T.ones(2), T.zeros(2)], maxlen=3)
    counts = collections.deque([1, 2])

    def step(x):
        bounded.appendleft(x)
        bounded.extend([x * 2, x * 3])  # (two oldest dropped from the right end's other side)
        last = bounded.pop()
        first = bounded.popleft()
        bounded.rotate(1)
        counts.extendleft([3, 4])
        counts.rotate(-1)
        n = counts.popleft() + counts.count(2) + counts.index(4)
        counts.append(x.shape[0])
        if len(counts) > 5:
            counts.clear()
        return last + first * n + bounded[0] - bounded[-1]

    run = maybe_compile(T, compiled)(step)
    outs = [run(T.arange(2.0) + i) for i in range(3)]
    return outs, list(bounded), list(counts)


def test_deque_edits_replayed_after_the_graph():
    """Compiled, the values and the deques left behind are eager's, with no break; torch
    breaks none in the window (its values aside: it keeps an entry maxlen drops) and breaks
    at `deque.rotate`."""
    for prog in (deque_window, deque_edits):
        want = _observe(fg, prog, False)
        got = _observe(fg, prog, True)
        compare(want[0], got[0], prog.__name__, 1e-6, 1e-6)
        compare(_observe(torch, prog, False)[0], want[0], prog.__name__, 1e-6, 1e-6)
        assert got[2][1] == 0
    assert _observe(torch, deque_window, True)[2][1] == 0


def test_deque_append_one_graph_as_torch():
    """The minimal program: one graph, no break, under both libraries."""
    window = collections.deque([1, 2], maxlen=2)

    def make(T):
        def f(x):
            window.append(x.shape[0])
            return x * len(window)
        return f

    def counts(T):
        return _observe(T, lambda T, c: T.compile(make(T), backend="eager")(T.ones(2)),
                        True)[2]

    assert counts(fg) == counts(torch) == (1, 0)


def test_deque_iterated_then_edited_breaks():
    """An edit of a deque an iterator was made over (the real edit raises in eager when the
    loop goes on) is a graph break run for real: eager's values."""
    def prog(T, compiled):
        d = collections.deque([T.ones(2), T.zeros(2)])

        def f(x):
            total = x
            for v in d:
                total = total + v
            d.append(x)
            return total
        run = maybe_compile(T, compiled)(f)
        return [run(T.ones(2) * i) for i in range(2)], list(d)

    got, want = _observe(fg, prog, True), _observe(fg, prog, False)
    compare(want[0], got[0], "iterated", 0, 0)
    assert got[2][1] >= 1


def test_deque_slice_raises_as_eager():
    """Slicing a deque raises TypeError in eager: compiled too (no list of its items)."""
    d = collections.deque([1, 2, 3])

    def f(x):
        return x * sum(d[0:2])

    fg._dynamo.reset()
    with pytest.raises(TypeError, match="sequence index must be integer, not 'slice'"):
        fg.compile(f, backend="eager")(fg.ones(1))


# ---------------------------------------------------------------- OrderedDict


def ordered_lru(T, compiled):
    """A cache of masks by shape, the least recently used dropped past two entries."""
    cache = collections.OrderedDict()

    def get(x):
        key = f"{[x.shape[0], x.shape[0]]}"
        if key in cache:
            cache.move_to_end(key)
        else:
            cache[key] = T.ones(x.shape[0], x.shape[0]).tril()
            if len(cache) > 2:
                cache.popitem(last=False)
        return (x @ cache[key]).sum() + len(cache)

    run = maybe_compile(T, compiled)(get)
    outs = [run(T.arange(float(n))) for n in (3, 2, 3, 4, 2, 4)]
    return outs, list(cache), list(cache.values())


def ordered_edits(T, compiled):
    """Item assignment, move_to_end to either end, popitem from either end, pop with and
    without a default, and a key added from outside between calls."""
    table = collections.OrderedDict(a=T.ones(2), b=T.zeros(2))

    def f(x):
        table["c"] = x
        table.move_to_end("a")
        table.move_to_end("c", last=False)
        k1, v1 = table.popitem()
        table[k1] = v1 * 2
        k2, v2 = table.popitem(last=False)
        gone = table.pop("zz", None)
        table[k2 + "x"] = v2 + 1
        return v1 + v2 + (0 if gone is None else 1), k1, k2, list(table)

    run = maybe_compile(T, compiled)(f)
    outs = [run(T.arange(2.0))]
    table["d"] = T.full((2,), 5.0)
    outs.append(run(T.arange(2.0) + 1))
    return outs, list(table), list(table.values())


def test_ordered_dict_edits_in_eagers_order():
    """Compiled, the values and the dict's keys, in order, are eager's (one graph a call's
    keys, no break), and torch captures the programs without a break too."""
    for prog in (ordered_lru, ordered_edits):
        want = _observe(fg, prog, False)
        got = _observe(fg, prog, True)
        compare(want[0], got[0], prog.__name__, 1e-6, 1e-6)
        compare(_observe(torch, prog, False)[0], want[0], prog.__name__, 1e-6, 1e-6)
        assert got[2][1] == 0 == _observe(torch, prog, True)[2][1]


def test_ordered_dict_missing_key_raises_as_eager():
    """`pop` of a missing key, `move_to_end` of one and `popitem` of an empty dict raise
    KeyError with eager's message, and the dict is left as eager leaves it."""
    def run(compiled, op):
        table = collections.OrderedDict(a=1)

        def f(x):
            table["b"] = 2
            if op == "pop":
                table.pop("zz")
            elif op == "move":
                table.move_to_end("zz")
            else:
                table.clear()
                table.popitem()
            return x

        fg._dynamo.reset()
        g = fg.compile(f, backend="eager") if compiled else f
        with pytest.raises(KeyError) as caught:
            g(fg.ones(1))
        return str(caught.value), list(table)

    for op in ("pop", "move", "popitem"):
        assert run(True, op) == run(False, op)


def test_in_place_operators_and_setdefault_run_for_real():
    """`window += [...]`, `table |= {...}` and `table.setdefault` change the real containers
    in place: graph breaks run for real, with eager's values and containers."""
    def run(compiled):
        window = collections.deque([1], maxlen=3)
        table = collections.OrderedDict(a=1)

        def f(x):
            nonlocal window, table
            window += [x.shape[0]]
            table |= {"b": 2}
            table.setdefault("c", 3)
            return x * len(window) * len(table)

        fg._dynamo.reset()
        g = fg.compile(f, backend="eager") if compiled else f
        outs = [g(fg.ones(n)).tolist() for n in (2, 3)]
        return outs, list(window), list(table.items())

    assert run(True) == run(False)


# ---------------------------------------------------------------- f-strings and Enums


def fstring_containers(T, compiled):
    """Texts of lists, tuples and dicts of numbers and strings, with conversions and a
    format spec; the shape in the text changes between calls."""
    def f(x):
        a = f"{[x.shape[0], 2]}"
        b = f"{(x.dim(), 'k')!r}|{ {'n': [x.shape[-1], None]} }|{[1.5]!s:>8}"
        return x * len(a + b), a, b

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(n)) for n in (2, 3, 2)] + [run(T.ones(1, 12))]


class _Act(enum.Enum):
    GELU = "gelu"
    RELU = "relu"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class _Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


def enum_by_value(T, compiled):
    """Members looked up by value: a string's, an int's, a combination of flags."""
    def f(x, name, level):
        y = x.relu() if _Act(name) is _Act.RELU else x.sigmoid()
        return y * _Level(level).value + _Perm(6).value, str(_Level(level)), _Perm(3).name

    run = maybe_compile(T, compiled)(f)
    x = T.arange(-2.0, 2.0)
    return [run(x, "relu", 2), run(x, "gelu", 1), run(x, "relu", 1)]


@pytest.mark.parametrize("prog", [fstring_containers, enum_by_value],
                         ids=["fstring_containers", "enum_by_value"])
def test_constant_texts_and_members(prog):
    """Values as eager's; graphs and breaks as torch's (none)."""
    want, got = _observe(fg, prog, False), _observe(fg, prog, True)
    compare(want[0], got[0], prog.__name__, 1e-6, 1e-6)
    compare(_observe(torch, prog, False)[0], want[0], prog.__name__, 1e-6, 1e-6)
    assert got[2] == _observe(torch, prog, True)[2]
    assert got[2][1] == 0


def test_enum_missing_value_raises_as_eager():
    """A value no member has raises ValueError with eager's message, caught in the frame
    without a break (torch 2.13 fails there with an internal error)."""
    def f(x, name):
        try:
            return x * len(_Act(name).value), ""
        except ValueError as e:
            return x, str(e)

    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    run = fg.compile(f, backend="eager")
    for name in ("tanh", "gelu"):
        got, want = run(fg.ones(2), name), f(fg.ones(2), name)
        assert got[1] == want[1] and got[0].tolist() == want[0].tolist()
    assert want[1] == "" and f(fg.ones(2), "tanh")[1] == "'tanh' is not a valid _Act"
    assert sum(counters["graph_break"].values()) == 0


# ---------------------------------------------------------------- counting breaks


def comprehension_break(T, compiled):
    """A break inside a list comprehension's body."""
    def f(x):
        y = x * 2
        ys = [print(i) or y * i for i in range(3)]
        y = y + 100
        return ys, y

    return maybe_compile(T, compiled)(f)(T.ones(2))


def nested_def_live_at_break(T, compiled):
    """A function made in the frame, live at a break, reading a cell the frame changes
    after it."""
    def f(x):
        y = x * 2

        def g(k=3, *, m=1):
            return y * k * m

        print("break")
        y = y + 1
        return g(), g(2, m=5)

    return maybe_compile(T, compiled)(f)(T.ones(2))


def loop_print(T, compiled):
    def f(x):
        for i in range(2):
            x = x * 2
            print(i)
        return x
    return maybe_compile(T, compiled)(f)(T.ones(2))


def while_print(T, compiled):
    def f(x):
        i = 0
        while i < 2:
            x = x * 2
            print(i)
            i += 1
        return x
    return maybe_compile(T, compiled)(f)(T.ones(2))


def handler_break(T, compiled):
    def f(x):
        try:
            raise ValueError("caught")
        except ValueError:
            print("handled")
            x = x + 1
        return x * 2
    return maybe_compile(T, compiled)(f)(T.ones(2))


@contextlib.contextmanager
def _printing_scope(tag):
    print(f"enter {tag}")
    yield tag
    print(f"exit {tag}")


def generator_entry_break(T, compiled):
    """A `@contextmanager` whose generator breaks before its `yield`: entered for real,
    the block captured."""
    def f(x):
        y = x * 2
        with _printing_scope("p") as tag:
            y = y.cos()
        return y, tag
    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 3)]


def test_generator_entry_break_counted_as_torch():
    """torch gives the frame up at the entry (no graph, no break counted); fusegrad still
    captures the code before and inside the block (two graphs) and counts no break either,
    with eager's values and printed text."""
    want, got = _observe(fg, generator_entry_break, False), \
        _observe(fg, generator_entry_break, True)
    compare(want[0], got[0], "generator_entry_break", 1e-6, 1e-6)
    assert got[1] == want[1] == "enter p\nexit p\n" * 2
    assert got[2] == (2, 0)
    assert _observe(torch, generator_entry_break, True)[2] == (0, 0)


_COUNTED = [comprehension_break, nested_def_live_at_break, loop_print, while_print,
            handler_break]


@pytest.mark.parametrize("prog", _COUNTED, ids=[p.__name__ for p in _COUNTED])
def test_breaks_counted_as_torch(prog):
    """`counters["graph_break"]` and the graphs made are torch's; values and printed text
    are eager's."""
    want, got = _observe(fg, prog, False), _observe(fg, prog, True)
    compare(want[0], got[0], prog.__name__, 1e-6, 1e-6)
    assert got[1] == want[1]
    assert got[2] == _observe(torch, prog, True)[2]


def catch_warnings_block(T, compiled):
    def f(x):
        y = x * 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn("hidden", stacklevel=1)
            y = y + 1
        return y * 3
    return maybe_compile(T, compiled)(f)(T.ones(2))


def test_catch_warnings_block_after_ops_counted_once():
    """A catch_warnings block after ops: one break counted, as torch counts the block's call
    into the warnings module; the frame runs eagerly, the ops before the block included
    (torch keeps no graph)."""
    want, got = _observe(fg, catch_warnings_block, False), \
        _observe(fg, catch_warnings_block, True)
    compare(want[0], got[0], "catch_warnings_block", 1e-6, 1e-6)
    assert got[2] == (0, 1)
    assert _observe(torch, catch_warnings_block, True)[2] == (0, 1)
