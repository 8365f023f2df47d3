"""Builtins applied in compiled code to objects whose class defines `__str__`, `__repr__`,
`__hash__`, `__index__`, `__float__` ... in the program's Python: such a method may read
state that changes between calls, so its result is not computed once while translating (a
graph break runs it for real). The standard library's (an Enum's, a named tuple's) are pure
and still evaluated. Compared with eager runs on each backend as the object's state changes
between calls."""

from __future__ import annotations

import collections
import enum

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


class Counter:
    """Its conversions read `n`, which the program changes between calls. (Its `__len__`
    keeps the capture from following it attribute by attribute: it is an opaque value.)"""

    def __init__(self):
        self.n = 1

    def __len__(self):
        return self.n

    def __repr__(self):
        return f"Counter({self.n})"

    def __str__(self):
        return f"n={self.n}"

    def __hash__(self):
        return self.n

    def __eq__(self, other):
        return isinstance(other, Counter) and other.n == self.n

    def __index__(self):
        return self.n

    def __float__(self):
        return float(self.n)


CASES = {
    "repr": lambda x, c: (x, repr(c)),
    "str": lambda x, c: (x, str(c)),
    "join": lambda x, c: (x, "-".join([str(c), "a"])),
    "hash": lambda x, c: x + hash(c),
    "float": lambda x, c: x + float(c),
    "range": lambda x, c: x + len(range(c)),
    "index_list": lambda x, c: x + [10, 20, 30, 40][c],
    "index_tuple": lambda x, c: x + (10, 20, 30, 40)[c],
    "dict_key": lambda x, c: x + {c: 1}.get(Counter(), 0),
}


# (a limit hit would run the rest eagerly: the compiled code would go untested)
@pytest.mark.filterwarnings("error:fusegrad.compile.*recompile_limit")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_methods_run_on_every_call(name, backend):
    # Each case compiles its lambda anew under another backend: the recompile limit counts
    # the graphs of a code object under every compile() of it, so a fresh start per case,
    # as a torch user must reset between such compiles.
    torch._dynamo.reset()
    prog = CASES[name]
    compiled = torch.compile(prog, backend=backend)
    c_eager, c_compiled = Counter(), Counter()
    for n in (1, 2, 3):
        c_eager.n = c_compiled.n = n
        want = prog(torch.ones(1), c_eager)
        got = compiled(torch.ones(1), c_compiled)
        assert repr(got) == repr(want), n


class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


Point = collections.namedtuple("Point", "x y")


def standard_library_methods(x, mode, p):
    return x * hash(mode) * len(str(mode)) + len(repr(p)) + p.x


def test_standard_library_methods_are_captured():
    x = torch.ones(2)
    out = explain(standard_library_methods)(x, Mode.EVAL, Point(1, 2))
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons
    compiled = torch.compile(standard_library_methods, backend="eager")
    for mode in (Mode.EVAL, Mode.TRAIN):
        assert torch.equal(compiled(x, mode, Point(1, 2)),
                           standard_library_methods(x, mode, Point(1, 2)))
