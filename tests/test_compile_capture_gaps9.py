"""Capture counted as torch.compile (2.13, backend="eager") counts, and constants it keeps:

- a graph break inside a function a loop of the compiled frame calls: counted once, in the
  callee's own frame (the frame's loop counts none), for a plain function and a module's
  forward alike; a compiled `nn.Sequential` (a layer of fusegrad's own) still counts the
  break at its wrapper's call into its forward, as torch does;
- a `with` block whose entry breaks (a lock from outside, a class whose `__enter__`
  prints): no break counted where the frame gives up there; a `contextlib` manager refused
  by name (`redirect_stdout`) counted once, as torch counts it;
- a branch on a tensor in the compiled frame itself counts no break (torch ends the graph
  there and resumes in either branch); one inside an inlined call counts one;
- `enum.Flag` operators (`A | B`, `A & B`, `~A`, `A in B`) and `IntEnum` / `IntFlag` members
  as operands of tensor ops: constants while translating (a member in graph code failed as
  a syntax error), with the dtype torch gives;
- a dict from outside (a memo table) given an item keyed by a size that turned dynamic: the
  size specialised, where the assignment broke;
- a user's generator function (from outside, made in the frame, a module's method) called
  in captured code: run into the graph as its items are taken (each call broke, and the
  generator's own frame counted a break torch does not); one left suspended inside its
  `try/finally` keeps eager's `finally` (its segment runs eagerly).

Programs take the library and whether to compile and return what they recorded; each is run
eagerly and compiled under fusegrad (values and printed text must agree); fusegrad's counts
of graphs and breaks must be torch's, recorded in _TORCH_COUNTS and checked against torch
where it is installed (the other Pythons run the fusegrad side alone)."""

import contextlib
import enum
import io
import threading

import pytest
from capture_support import counted_as_torch, fg, torch
from program_support import (
    compare,
    maybe_compile,
    observe_compiled,
    plain,
)

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program.
_TORCH_COUNTS = {
    "print_in_loop_function": (1, 1), "print_in_loop_module": (1, 1),
    "item_in_loop_function": (3, 1), "item_in_loop_module": (3, 1),
    "method_in_loop": (1, 1), "sequential_in_loop": (3, 1),
    "sequential_scale-scale": (3, 2), "sequential_linear-scale": (3, 2),
    "with_lock": (0, 0), "with_new_lock": (1, 1), "with_loud": (0, 0), "with_redirect": (1, 2),
    "branch_in_frame": (3, 0), "branch_in_callee": (5, 1), "while_on_tensor": (3, 0),
    "branch_then_item": (5, 2), "flag_operators": (4, 0), "int_members_as_operands": (1, 0),
    "memo_by_size": (4, 0),
}


_observe = observe_compiled


_check_as_torch = counted_as_torch(_TORCH_COUNTS)


# ---------------------------------------------------------------- breaks inside loops


def _loop_program(kind: str, module: bool):
    """A loop calling a helper that prints or reads `item()`, in a function or in a module's
    forward."""
    def prog(T, compiled):
        def helper(x):
            if kind == "print":
                print("helper")
                return x * 2
            return x * x.sum().item()

        if module:
            class Looped(T.nn.Module):
                def forward(self, x):
                    x = x + 1
                    for _ in range(2):
                        x = helper(x)
                    return x
            run = Looped()
            if compiled:
                run = T.compile(run, backend=compiled)
        else:
            def f(x):
                x = x + 1
                for _ in range(2):
                    x = helper(x)
                return x
            run = maybe_compile(T, compiled)(f)
        return run(T.ones(2))

    prog.__name__ = f"{kind}_in_loop_{'module' if module else 'function'}"
    return prog


def method_in_loop(T, compiled):
    """A loop calling a method of a plain object that prints."""
    class Stepper:
        def step(self, x):
            print("step")
            return x + 1

    stepper = Stepper()

    def f(x):
        y = x * 2
        for _ in range(3):
            y = stepper.step(y)
        return y

    return maybe_compile(T, compiled)(f)(T.ones(2))


def sequential_in_loop(T, compiled):
    """A loop calling an `nn.Sequential` whose first layer reads `item()`."""
    class Scale(T.nn.Module):
        def forward(self, x):
            return x * x.sum().item()

    model = T.nn.Sequential(Scale(), T.nn.ReLU())

    def f(x):
        for _ in range(2):
            x = model(x)
        return x

    return maybe_compile(T, compiled)(f)(T.ones(2))


def _sequential_program(layers: str):
    """A compiled two-layer `nn.Sequential` with a layer reading `item()`, called twice."""
    def prog(T, compiled):
        class Scale(T.nn.Module):
            def forward(self, x):
                return x * x.sum().item()

        T.manual_seed(0)
        made = {"scale": Scale, "linear": lambda: T.nn.Linear(3, 3)}
        model = T.nn.Sequential(*(made[name]() for name in layers.split("-")))
        run = T.compile(model, backend=compiled) if compiled else model
        return [run(T.ones(2, 3)), run(-T.ones(2, 3))]

    prog.__name__ = f"sequential_{layers}"
    return prog


_LOOPS = [_loop_program(kind, module) for kind in ("print", "item") for module in (False, True)]
_LOOPS += [method_in_loop, sequential_in_loop, _sequential_program("scale-scale"),
           _sequential_program("linear-scale")]


@pytest.mark.parametrize("prog", _LOOPS, ids=[p.__name__ for p in _LOOPS])
def test_break_in_a_loops_call_counted_as_torch(prog):
    """One break counted a callee's break (torch's), where two were counted (the frame's
    loop and the callee); values and printed text eager's."""
    _check_as_torch(prog)


# ---------------------------------------------------------------- a with block's entry


_LOCK = threading.Lock()


class _LoudContext:
    """Prints on entry (a break inside the inlined `__enter__`)."""

    def __enter__(self):
        print(f"enter {type(self).__name__}")

    def __exit__(self, *exc):
        return None


def _with_program(kind: str):
    def prog(T, compiled):
        def f(x):
            x = x + 1
            if kind == "lock":
                manager = _LOCK
            elif kind == "new_lock":
                manager = threading.Lock()
            elif kind == "loud":
                manager = _LoudContext()
            else:
                manager = contextlib.redirect_stdout(io.StringIO())
            with manager:
                print("inside")
                y = x * 2
            return y - 1

        run = maybe_compile(T, compiled)(f)
        return [run(T.ones(3)), run(T.arange(3.0))]

    prog.__name__ = f"with_{kind}"
    return prog


_WITHS = [_with_program(kind) for kind in ("lock", "new_lock", "loud", "redirect")]


@pytest.mark.parametrize("prog", _WITHS, ids=[p.__name__ for p in _WITHS])
def test_with_entry_break_counted_as_torch(prog):
    """torch counts no break where it gives the frame up at a block's entry (a lock, an
    `__enter__` that prints), one at `threading.Lock()` and `io.StringIO()` calls and one
    at `redirect_stdout`; so does fusegrad."""
    _check_as_torch(prog)


# ---------------------------------------------------------------- branches on tensors


def branch_in_frame(T, compiled):
    def f(x):
        y = x + 1
        if y.sum() > 0:
            return y * 2
        return y - 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(-T.ones(2) * 3)]


def branch_in_callee(T, compiled):
    def g(y):
        if y.sum() > 0:
            return y * 2
        return y - 1

    def f(x):
        y = x + 1
        return g(y) + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(-T.ones(2) * 3)]


def while_on_tensor(T, compiled):
    def helper(x):
        if x.sum() > 100:
            return x
        return x * 2

    def f(x):
        while x.sum() < 50:
            x = helper(x)
        return x

    return maybe_compile(T, compiled)(f)(T.ones(2))


def branch_then_item(T, compiled):
    def f(x):
        y = x * 2 if x.mean() > 0 else x - 1
        n = int(y.abs().sum()) % 3
        for _ in range(n):
            y = y + 1
        return y

    run = maybe_compile(T, compiled)(f)
    return [run(T.linspace(-1, 2, 5)), run(T.linspace(-3, 1, 5)), run(T.linspace(0, 4, 5))]


_BRANCHES = [branch_in_frame, branch_in_callee, while_on_tensor, branch_then_item]


@pytest.mark.parametrize("prog", _BRANCHES, ids=[p.__name__ for p in _BRANCHES])
def test_tensor_branches_counted_as_torch(prog):
    """A branch in the compiled frame counts none, one inside an inlined call counts one."""
    _check_as_torch(prog)


# ---------------------------------------------------------------- Enum members


class _Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class _Mode(enum.IntFlag):
    A = 1
    B = 2


def flag_operators(T, compiled):
    """`|`, `&`, `~` and `in` on flags passed in and made in the frame, their value, text and
    name returned."""
    def f(x, p):
        q = p | _Perm.X
        if _Perm.W in q:
            x = x * 2
        if q & _Perm.R:
            x = x + 1
        return x * (~q).value + q.value, str(q), (q & ~_Perm.X).name

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2), p) for p in (_Perm.R, _Perm.W, _Perm.R | _Perm.W, _Perm(0))]


def test_flag_operators_one_graph_per_member_as_torch():
    """No break (a break each operator before), one graph per member passed, as torch."""
    _check_as_torch(flag_operators)
    assert _observe(fg, flag_operators, True)[2][1] == 0


def int_members_as_operands(T, compiled):
    def f(x):
        return x * _Level.HIGH + (_Mode.A | _Mode.B), x.pow(_Level.LOW), x[_Level.LOW]

    return maybe_compile(T, compiled)(f)(T.arange(4.0))


def test_int_enum_operands_read_as_torch_reads_them():
    """A member passed to a tensor op is the number it stands for, with torch's dtype (the
    graph's code held the member's repr and failed to compile: the frame ran eagerly)."""
    got = _observe(fg, int_members_as_operands, True)
    assert got[2] == _TORCH_COUNTS["int_members_as_operands"]
    x = fg.arange(4.0)
    plain_numbers = [x * 3 + 3, x.pow(1), x[1]]  # (the members' numbers, written out)
    compare(plain(plain_numbers, fg), got[0], "members", 0, 0)
    if torch is not None:
        compare(_observe(torch, int_members_as_operands, False)[0], got[0], "members", 0, 0)
        assert _observe(torch, int_members_as_operands, True)[2] == got[2]


# ---------------------------------------------------------------- a dict keyed by a size


def memo_by_size(T, compiled):
    """A memo table from outside (a default argument's dict) keyed by the input's size,
    which turns dynamic at the second size."""
    def f(x, cache={}):  # noqa: B006 (the shared table is the point)
        key = x.shape[0]
        if key not in cache:
            cache[key] = T.ones(key) * key
        return x + cache[key], len(cache)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(n)) for n in (2, 3, 2, 4)]


def test_dict_item_keyed_by_a_dynamic_size_as_torch():
    """The dynamic size used as a key is specialised to its value (guarded), as torch does,
    where the item assignment broke the graph."""
    _check_as_torch(memo_by_size)


# ---------------------------------------------------------------- generator functions


def generator_chunks(T, compiled):
    """A generator function from outside the frame, consumed by a comprehension, a `sum`
    over a generator expression of it, with a keyword argument."""
    def chunks(x, n):
        for i in range(0, x.shape[0], n):
            yield x[i:i + n]

    def f(x):
        return [c.sum() for c in chunks(x, 2)], sum(c.max() for c in chunks(x, n=3))

    run = maybe_compile(T, compiled)(f)
    return [run(T.arange(7.0)), run(T.arange(5.0))]


def generator_made_in_frame(T, compiled):
    """A generator function made in the frame, with a default read from the frame; `list`
    of it and `next` of a second call."""
    def f(x, k=2):
        def pairs(xs, scale=k):
            for a, b in zip(xs, xs[1:]):
                yield (a - b) * scale
        return T.stack(list(pairs([x, x * 2, x * 3]))), next(pairs([x, x + 1], scale=5))

    return maybe_compile(T, compiled)(f)(T.ones(2))


def generator_method(T, compiled):
    """A module's forward looping over a generator method of its own."""
    T.manual_seed(0)

    class Net(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = T.nn.ModuleList([T.nn.Linear(3, 3) for _ in range(3)])

        def _live(self):
            for i, block in enumerate(self.blocks):
                if i % 2 == 0:
                    yield block

        def forward(self, x):
            for block in self._live():
                x = block(x).relu()
            return x

    model = Net()
    run = T.compile(model, backend=compiled) if compiled else model
    return run(T.ones(2, 3))


def generator_printing(T, compiled):
    """A generator that prints between its items: its frame is called for real, and torch
    counts no break for a generator's frame."""
    def g(x):
        yield x + 1
        print("between")
        yield x * 2

    def f(x):
        out = []
        for v in g(x):
            out.append(v.sum())
        return out

    return maybe_compile(T, compiled)(f)(T.ones(2))


def generator_return_value(T, compiled):
    def g(x):
        yield x
        return 5

    def f(x):
        return list(g(x)), [v * 2 for v in g(x + 1)]

    return maybe_compile(T, compiled)(f)(T.ones(2))


_GENERATORS = [generator_chunks, generator_made_in_frame, generator_method,
               generator_printing, generator_return_value]
_TORCH_COUNTS.update({"generator_chunks": (2, 0), "generator_made_in_frame": (1, 0),
                      "generator_method": (1, 0), "generator_printing": (0, 0),
                      "generator_return_value": (1, 0)})


@pytest.mark.parametrize("prog", _GENERATORS, ids=[p.__name__ for p in _GENERATORS])
def test_generator_functions_inlined_as_torch(prog):
    """A user's generator function runs into the graph as its items are taken (a break at
    the call each, and the whole frame eager, before)."""
    _check_as_torch(prog)


def test_generator_suspended_in_finally_runs_eagerly():
    """A generator left suspended inside `try/finally` runs its `finally` when dropped,
    eagerly: the segment that started it runs eagerly, so the log is eager's."""
    def run(compiled):
        log = []

        def g(x):
            try:
                for i in range(3):
                    yield x * i
            finally:
                log.append("closed")

        def f(x):
            it = g(x)
            return next(it) + next(it)

        fg._dynamo.reset()
        out = (fg.compile(f, backend="eager") if compiled else f)(fg.ones(2))
        import gc

        gc.collect()
        return out.tolist(), log

    assert run(True) == run(False) == ([1.0, 1.0], ["closed"])


def test_generator_call_with_bad_arguments_raises_as_eager():
    def g(x):
        yield x

    def f(x):
        try:
            g(x, 1)
        except TypeError as e:
            return x * len(str(e))
        return x

    fg._dynamo.reset()
    assert fg.compile(f, backend="eager")(fg.ones(2)).tolist() == f(fg.ones(2)).tolist()
