"""Dispatch's slow path: modes and the `__fusegrad_function__` protocol, checked against eager."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad._dispatch import DispatchMode, call  # noqa: E402


class CountingMode(DispatchMode):
    """Records each op it sees and computes it with the modes below (eager here)."""

    def __init__(self):
        self.seen = []

    def __fusegrad_dispatch__(self, op, args):
        self.seen.append(op.name)
        return call(op, *args)


def test_mode_sees_every_op_and_autograd_still_records():
    x = fusegrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    eager = ((x * 2).exp().sum())
    eager.backward()
    expected_grad = x.grad.clone()
    x.grad = None
    with CountingMode() as mode:
        out = (x * 2).exp().sum()
    assert mode.seen == ["mul.Tensor", "exp", "sum"]
    assert type(out.grad_fn).__name__ == "SumBackward0"
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), expected_grad.numpy())
    np.testing.assert_allclose(out.item(), eager.item())


def test_mode_is_popped_while_it_runs_and_restored_after_errors():
    mode = CountingMode()
    with pytest.raises(RuntimeError):
        with mode:
            fusegrad.ones(2, 3) @ fusegrad.ones(4, 5)
    assert mode.seen == ["mm"]
    assert fusegrad._thread_state.local.modes == ()


class Wrapped:
    """A foreign type that handles fusegrad functions itself."""

    calls = []

    def __init__(self, value):
        self.value = value

    @classmethod
    def __fusegrad_function__(cls, func, types, args, kwargs):
        cls.calls.append(func.__name__)
        unwrapped = [a.value if isinstance(a, Wrapped) else a for a in args]
        return Wrapped(func(*unwrapped, **kwargs))


def test_protocol_type_reaches_its_handler():
    Wrapped.calls.clear()
    t = fusegrad.tensor([1.0, -2.0])
    w = Wrapped(fusegrad.tensor([3.0, 4.0]))
    r = fusegrad.add(t, w)
    assert isinstance(r, Wrapped) and r.value.tolist() == [4.0, 2.0]
    r = t * w
    assert isinstance(r, Wrapped) and r.value.tolist() == [3.0, -8.0]
    r = fusegrad.matmul(t, w)
    assert isinstance(r, Wrapped) and r.value.item() == -5.0
    assert Wrapped.calls == ["add", "mul", "matmul"]


def test_unsupported_argument_type_is_a_type_error():
    with pytest.raises(TypeError, match="matmul"):
        fusegrad.matmul(fusegrad.ones(2), object())
