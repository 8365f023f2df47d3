"""Capture leftovers, each program compiled against eager fusegrad (values, warnings, the
objects' attributes), with graph counts where capture runs (CPython 3.11-3.13):

1. A warning raised at a graph break (in fusegrad's own layers, run uncaptured, or in user
   code run for real) is reported at eager's location for its `stacklevel` (file, line,
   module and registry), so "once per location" filters act as in eager.
2. An object of a class with `__slots__` made before a graph break (or passed in) is
   followed by its type and the attributes read, not its identity: a new one on every call
   reuses the graphs.
3. A new object passed in, written in the graph and passed to a function that breaks,
   reuses the graphs too.

No torch is imported (this file runs on 3.12 and 3.13 too); graphs run through `Counter`
(the run's FUSEGRAD_TEST_BACKEND).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from compile_support import CAPTURES, compiled, tolerances

import fusegrad as fg
from fusegrad._dynamo import graph_break


def close(expected, got) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                               **tolerances(expected.dtype))


def recorded(fn, args_list, action: str) -> list:
    """(message, category, file, line) of each warning `fn` raises over the calls, under a
    fresh filter `action` (changing the filters voids the registries of earlier runs)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for args in args_list:
            fn(*args)
    return [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


# ------------------------------------------------------------------ 1. warning locations

def _encoder():
    fg.manual_seed(0)
    layer = fg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = fg.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return enc.eval()


@pytest.mark.parametrize("action", ["default", "always"])
def test_library_warning_location(action):
    """A float padding mask with a bool attention mask: the mask check's warning
    (stacklevel=3) names `Module.__call__`'s line, as in eager, once per location under
    the default filter."""
    enc = _encoder()
    attn = fg.zeros(5, 5, dtype=fg.bool)

    def f(x, pad):
        return enc(x, mask=attn, src_key_padding_mask=pad)

    fg.manual_seed(1)
    inputs = []
    for _ in range(3):
        pad = fg.zeros(2, 5)
        pad[0, 4] = float("-inf")
        inputs.append((fg.randn(2, 5, 8), pad))
    expected = recorded(f, inputs, action)
    g, _ = compiled(f)
    got = recorded(g, inputs, action)
    assert expected and got == expected
    assert expected[0][2].endswith("module.py")
    for x, pad in inputs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            close(f(x, pad), g(x, pad))


def _warns_here(x, level):
    warnings.warn("careful", UserWarning, stacklevel=level)
    return x * 2


def _caller(x, level):
    return _warns_here(x, level) + 1


@pytest.mark.parametrize("level", [1, 2, 3, 4, 50])
@pytest.mark.parametrize("action", ["default", "always"])
def test_user_warning_stacklevel(level, action):
    """A user function warning at a break: each stack level names eager's frame (the
    function, its caller, the compiled function, the test; past the outermost: `sys`)."""
    # (every case compiles `f`'s one code object and `_caller`, whose recompile limits all
    # their compiled wrappers share: each case starts from a reset)
    fg._dynamo.reset()

    def f(x):
        y = x.sin()
        graph_break()
        return _caller(y, level)

    xs = [(fg.randn(3),) for _ in range(3)]
    expected = recorded(f, xs, action)
    g, _ = compiled(f)
    got = recorded(g, xs, action)
    assert expected and got == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(f(*xs[0]), g(*xs[0]))


# ------------------------------------------------------------------ 2. __slots__ objects

class Slotted:
    __slots__ = ("w", "b")

    def __init__(self, w, b):
        self.w = w
        self.b = b


class SlottedChild(Slotted):
    """A subclass without `__slots__`: slots and a `__dict__`."""


def test_slots_object_made_before_break():
    def f(x, w):
        s = Slotted(w, 1.5)
        y = x * s.w
        graph_break()
        return y + s.w * s.b

    g, counter = compiled(f)
    for _ in range(4):
        x, w = fg.randn(3), fg.randn(3)
        close(f(x, w), g(x, w))
    if CAPTURES:
        assert counter.graphs == 2


@pytest.mark.parametrize("cls", [Slotted, SlottedChild])
def test_slots_object_passed_in_written_after_break(cls):
    """Slots written after the break land on the real object; an unset slot (missing:
    AttributeError caught) is guarded too."""
    def f(x, s):
        y = x.cos() * s.b
        graph_break()
        s.w = y + 1
        try:
            s.missing = 1
        except AttributeError:
            pass
        return s.w.sum()

    g, counter = compiled(f)
    for _ in range(4):
        x = fg.randn(3)
        a, b = cls(None, 2.5), cls(None, 2.5)
        close(f(x, a), g(x, b))
        close(a.w, b.w)
        assert hasattr(b, "missing") == hasattr(a, "missing") == (cls is SlottedChild)
    if CAPTURES:
        assert counter.graphs == 2


def test_slots_unset_slot_read_after_break():
    def f(x, s):
        y = x.exp()
        graph_break()
        if hasattr(s, "w"):
            return y * s.w
        return y - 1

    g, counter = compiled(f)
    for k in range(4):
        x = fg.randn(3)
        s = Slotted(fg.randn(3), 0.0)
        if k % 2:
            del s.w
        close(f(x, s), g(x, s))
    if CAPTURES:
        assert counter.graphs <= 3


def test_slots_only_object_made_in_graph_rejects_other_attributes():
    """An attribute that is neither a slot nor in a `__dict__` raises AttributeError, as
    in eager (the handler runs), on an object made in the graph."""
    def f(x):
        s = Slotted(x.sin(), 2.0)
        try:
            s.other = x
            caught = False
        except AttributeError:
            caught = True
        return s.w * s.b, caught

    g, _ = compiled(f)
    x = fg.randn(3)
    (ev, ec), (cv, cc) = f(x), g(x)
    close(ev, cv)
    assert ec is cc is True


# ------------------------------------------------------- 3. written, then passed to a break

class Plain:
    pass


@dataclasses.dataclass(slots=True)
class SlotsData:
    w: object = None


def _peek(o):
    graph_break()
    return o.w.sum()


@pytest.mark.parametrize("cls", [Plain, Slotted, SlotsData])
def test_new_object_written_then_passed_to_breaking_function(cls):
    def f(x, p):
        p.w = x * 2
        s = _peek(p)
        return p.w + s

    g, counter = compiled(f)
    for _ in range(4):
        x = fg.randn(3)
        a, b = cls.__new__(cls), cls.__new__(cls)
        close(f(x, a), g(x, b))
        close(a.w, b.w)
    if CAPTURES:
        # f before and f after, as torch: the rest of _peek after its break holds no tensor
        # (`p` is an object) and its code names no tensor module, so it runs uncaptured.
        assert counter.graphs == 2
