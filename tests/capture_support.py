"""What the capture-gap test files share: fusegrad, torch where it is installed (None on the
Pythons without it, where fusegrad is checked against its own eager runs and the counts
recorded from torch), both libraries' `_dynamo.testing`, and the checks of a program's graph
and break counts.

A gap file's programs take the library and whether to compile (False, or the backend) and
return what they recorded; each is run eagerly and compiled under fusegrad (values and
printed text must agree), and fusegrad's counts of graphs and breaks must be torch's. The
file records torch.compile's counts (backend="eager", 3.11) in a table `{program name:
(unique graphs, graph breaks)}`, checked against torch where it is installed, and takes its
test of them from `counts_test(programs, table)`."""

import importlib
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from program_support import check_counts_as_torch, check_values_as_eager  # noqa: E402

import fusegrad as fg  # noqa: E402
import fusegrad._dynamo.testing  # noqa: E402, F401

try:
    import torch
except ImportError:  # (3.12, 3.13: fusegrad against its own eager runs and torch's counts)
    torch = None
else:
    importlib.import_module("torch._dynamo.testing")


def counted_as_torch(counts: dict):
    """`check(prog, torch_values=True)`: compiled fusegrad gives eager fusegrad's values and
    the counts `counts` records for `prog`; where torch is installed, torch gives those counts
    and, with `torch_values`, eager fusegrad gives torch's values."""
    def check(prog, torch_values: bool = True) -> None:
        check_counts_as_torch(prog, fg, torch, counts, torch_values)

    return check


def counts_test(programs: list, counts: dict, own_values: tuple = ()):
    """A test, one case per program of `programs` (named after it), of `counted_as_torch
    (counts)`; the programs in `own_values` are not compared with torch's values (where the
    file says why)."""
    check = counted_as_torch(counts)

    @pytest.mark.parametrize("prog", programs, ids=[p.__name__ for p in programs])
    def test_counts_as_torch(prog):
        check(prog, torch_values=prog not in own_values)

    return test_counts_as_torch


def values_as_eager(prog, backend: str = "eager") -> None:
    """`prog` compiled by fusegrad with `backend` gives eager fusegrad's values and text."""
    check_values_as_eager(prog, fg, backend)


def compile_counted(T, prog) -> tuple:
    """(frames, ops) a `CompileCounter` of library `T` counts over one compiled run of `prog`,
    from a reset."""
    T._dynamo.reset()
    counter = T._dynamo.testing.CompileCounter()
    prog(T, counter)
    return counter.frame_count, counter.op_count


def op_counts_test(programs: dict, counts: dict):
    """A test, one case per name of `counts`, that the program of that name in `programs`
    (a test module's globals) gives its (frames, ops) under a `CompileCounter`, fusegrad's
    and, under Python 3.11, torch's."""
    @pytest.mark.parametrize("name", sorted(counts))
    def test_op_counts_as_torch(name):
        prog = programs[name]
        assert compile_counted(fg, prog) == counts[name]
        if torch is not None:
            assert compile_counted(torch, prog) == counts[name]

    return test_op_counts_as_torch


def outcome(run, *args):
    """What `run(*args)` returns, or its error as (type name, message)."""
    try:
        return run(*args)
    except Exception as e:  # (the program's deliberate error is part of its outcome)
        return type(e).__name__, str(e)
