"""Guards that cannot go stale: signed zeros, NaN, strides and aliasing of tensor inputs.

Each program runs compiled (after a first call that captures a graph under other values) and
eagerly; the results must be equal. No torch here: the 3.12/3.13 runs use this file too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from compile_support import Counter

import fusegrad


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # An infinity's sign is what a stale zero guard gets wrong: compare it bit for bit.
    np.testing.assert_array_equal(np.signbit(a.detach().numpy()), np.signbit(b.detach().numpy()))


def test_signed_zero_divisor_recompiles():
    def f(x, s):
        return x / s

    counter = Counter()
    fn = fusegrad.compile(f, backend=counter)
    x = fusegrad.ones(2)
    _same(fn(x, 0.0), f(x, 0.0))
    _same(fn(x, -0.0), f(x, -0.0))  # +inf from a stale `s == 0.0` guard; eager gives -inf
    _same(fn(x, 0.0), f(x, 0.0))
    assert counter.graphs == 2


def test_signed_zero_through_python_arithmetic():
    def f(x, s):
        return x * (1.0 / s if s != 0 else math.copysign(1.0, s))

    fn = fusegrad.compile(f, backend=Counter())
    x = fusegrad.ones(3)
    for s in (0.0, -0.0, 2.0, -0.0):
        _same(fn(x, s), f(x, s))


def test_signed_zero_numpy_scalar_and_tuple():
    def f(x, s, t):
        return x / s + x / t[1]

    fn = fusegrad.compile(f, backend=Counter())
    x = fusegrad.ones(2)
    for s, t in ((np.float64(0.0), (1, 0.0)), (np.float64(-0.0), (1, -0.0)),
                 (np.float64(-0.0), (1, 0.0))):
        _same(fn(x, s, t), f(x, s, t))


def test_nan_constant_matches_nan_and_only_nan():
    def f(x, s):
        if s != s:  # a NaN
            return x * 0 + 7
        return x + s

    counter = Counter()
    # Static floats (with automatic dynamic the second value would make `s` an input).
    fn = fusegrad.compile(f, backend=counter, dynamic=False)
    x = fusegrad.ones(2)
    for s in (float("nan"), float("nan"), 1.0, float("nan"), -0.0, float("inf")):
        _same(fn(x, s), f(x, s))
    assert counter.graphs == 4  # nan (reused), 1.0, -0.0, inf


def test_nan_inside_frozenset_guard():
    def f(x, s):
        return x + len(s) + (1 if float("nan") in s else 0)

    fn = fusegrad.compile(f, backend=Counter())
    x = fusegrad.ones(2)
    nan = float("nan")
    for s in (frozenset([nan]), frozenset([1.0]), frozenset([nan])):
        _same(fn(x, s), f(x, s))


# ------------------------------------------------------------------ strides


def test_is_contiguous_read_in_python_is_guarded():
    def f(x):
        if x.is_contiguous():
            return x * 2
        return x * 3

    fn = fusegrad.compile(f, backend=Counter())
    y = fusegrad.arange(9.0).reshape(3, 3)
    _same(fn(y), f(y))
    _same(fn(y.t()), f(y.t()))
    _same(fn(y), f(y))


def test_stride_value_read_in_python_is_guarded():
    def f(x):
        return x * x.stride(0) + x.stride(1)

    fn = fusegrad.compile(f, backend=Counter())
    y = fusegrad.arange(6.0).reshape(2, 3)
    _same(fn(y), f(y))
    _same(fn(y.t()), f(y.t()))
    _same(fn(y[:, ::2]), f(y[:, ::2]))


def test_view_that_needs_a_contiguous_input():
    def f(x):
        return x.view(-1) * 2

    fn = fusegrad.compile(f, backend=Counter())
    y = fusegrad.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError) as want:
        f(y.t())
    with pytest.raises(RuntimeError) as got:  # first call: non-contiguous
        fn(y.t())
    assert str(got.value) == str(want.value)
    _same(fn(y), f(y))  # then a contiguous input of the same shape runs the view
    with pytest.raises(RuntimeError):
        fn(y.t().contiguous().t())


def test_stride_guard_failure_is_named():
    fn = fusegrad.compile(lambda x: x + 1, backend=Counter())
    y = fusegrad.ones(3, 3)
    fn(y)
    runner = fn._runner
    guards = runner.segments[0][0].guards
    reason = guards.failure({"x": y.t()}, [], {})
    assert reason == "tensor 'L['x']' stride mismatch at index 0. expected 3, actual 1"


# ------------------------------------------------------------------ aliasing


def _aliasing_program(a, b, w):
    a.mul_(w)
    if b.requires_grad:
        return b * 2
    return b * 3


def _inputs(alias: bool):
    base = fusegrad.ones(3)
    w = fusegrad.full((3,), 2.0, requires_grad=True)
    a = base.clone()
    b = a[:] if alias else fusegrad.ones(3)
    return a, b, w


@pytest.mark.parametrize("order", ["distinct_first", "aliased_first"])
def test_inplace_write_seen_through_an_aliasing_input(order):
    fn = fusegrad.compile(_aliasing_program, backend=Counter())
    calls = [False, True] if order == "distinct_first" else [True, False, True]
    for alias in calls:
        got = fn(*_inputs(alias))
        want = _aliasing_program(*_inputs(alias))
        _same(got, want)
        assert (got.grad_fn is None) == (want.grad_fn is None)


def test_same_tensor_passed_twice_with_inplace_write():
    def f(a, b):
        a.add_(1)
        return a + b

    counter = Counter()
    fn = fusegrad.compile(f, backend=counter)
    for same in (False, True, False):
        x, y = fusegrad.zeros(2), fusegrad.zeros(2)
        x2, y2 = fusegrad.zeros(2), fusegrad.zeros(2)
        _same(fn(x, x if same else y), f(x2, x2 if same else y2))


def test_views_of_one_buffer_read_after_write():
    def f(a, b):
        a[0] = 5.0
        return b.sum() * 1

    fn = fusegrad.compile(f, backend=Counter())
    for alias in (False, True):
        base, base2 = fusegrad.zeros(4), fusegrad.zeros(4)
        args = (base[:2], base[:3]) if alias else (base[:2], fusegrad.zeros(3))
        args2 = (base2[:2], base2[:3]) if alias else (base2[:2], fusegrad.zeros(3))
        _same(fn(*args), f(*args2))


def test_no_alias_guard_without_inplace_ops():
    fn = fusegrad.compile(lambda a, b: a * b, backend=Counter())
    fn(fusegrad.ones(2), fusegrad.ones(2))
    lines = fn._runner.segments[0][0].guards.lines()
    assert not any("distinct_storage" in g for g in lines)


def test_inplace_keyword_counts_as_a_write():
    """A write with history (aliases' autograd state changes with it) guards the inputs'
    memory apart; values as eager's through an alias."""
    def f(a, b):
        fusegrad.nn.functional.relu(a, inplace=True)
        return a + b

    def grad_input(values):
        return fusegrad.tensor(values, requires_grad=True) * 1

    fn = fusegrad.compile(f, backend=Counter())
    fn(grad_input([1.0, 1.0]), fusegrad.ones(2))
    lines = fn._runner.segments[0][0].guards.lines()
    assert "___distinct_storage(L['a'], L['b'])" in lines
    base, base2 = grad_input([-1.0, 2.0]), grad_input([-1.0, 2.0])
    _same(fn(base, base[:]), f(base2, base2[:]))


def test_disjoint_parts_of_one_array_are_not_aliases():
    """Arrays cut from one buffer (as a file loader makes them) share an owner, not memory."""
    def f(a, b):
        a.add_(1)
        return a * b

    counter = Counter()
    fn = fusegrad.compile(f, backend=counter)
    buf, buf2 = np.arange(8.0, dtype=np.float32), np.arange(8.0, dtype=np.float32)
    got = fn(fusegrad.from_numpy(buf[:4]), fusegrad.from_numpy(buf[4:]))
    want = f(fusegrad.from_numpy(buf2[:4]), fusegrad.from_numpy(buf2[4:]))
    _same(got, want)
    assert counter.graphs == 1  # one graph, no break at the write
    fn(fusegrad.from_numpy(buf[:4]), fusegrad.from_numpy(buf[4:]))
    assert counter.graphs == 1  # and its guard passes again


def test_inplace_keyword_op_with_unused_result_is_kept():
    def f(a):
        fusegrad.nn.functional.relu(a, inplace=True)
        return a * 1

    fn = fusegrad.compile(f, backend=Counter())
    _same(fn(fusegrad.tensor([-1.0, 2.0])), f(fusegrad.tensor([-1.0, 2.0])))
