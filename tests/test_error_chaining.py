"""Errors an op reports for bad input read as PyTorch's: the meta's message alone, with no
NumPy error shown before it ("During handling of the above exception ...")."""

from __future__ import annotations

import traceback

import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _channels_last_view(lib):
    lib.randn(2, 3, 4, 5).to(memory_format=lib.channels_last).view(2, -1)


def _broadcast(lib):
    lib.ones(2, 3) + lib.ones(4)


def _matmul(lib):
    lib.ones(2, 3) @ lib.ones(4, 5)


def _inplace(lib):
    lib.ones(3).add_(lib.ones(2, 3))


def _cat(lib):
    lib.cat([lib.ones(2, 3), lib.ones(2, 4)])


def _gather(lib):
    lib.ones(2, 3).gather(1, lib.ones(2, 3, dtype=lib.long).unsqueeze(0))


@pytest.mark.parametrize("case", [_channels_last_view, _broadcast, _matmul, _inplace, _cat,
                                  _gather])
def test_error_without_chained_numpy_error(case):
    """The same exception type and message as PyTorch's, and no earlier exception shown."""
    with pytest.raises(Exception) as theirs:
        case(torch)
    with pytest.raises(Exception) as ours:
        case(fusegrad)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)
    shown = "".join(traceback.format_exception(ours.value))
    assert "During handling of the above exception" not in shown
    assert "The above exception was the direct cause" not in shown
