"""The message for operands that do not broadcast names the dimension PyTorch names."""

from __future__ import annotations

import pytest
import torch

import fusegrad


@pytest.mark.parametrize("a, b", [
    ((2, 3), (4, 3)),
    ((2, 3, 4), (5, 6, 4)),
    ((2, 3, 4), (5, 6, 7)),
    ((7, 2, 3), (2, 5)),
    ((3,), (2, 4)),
])
@pytest.mark.parametrize("op", ["add", "mul", "where"])
def test_mismatch_message_matches_torch(a, b, op):
    def run(lib):
        x, y = lib.ones(*a), lib.ones(*b)
        if op == "where":
            return lib.where(x > 0, x, y)
        return getattr(lib, op)(x, y)

    with pytest.raises(RuntimeError) as theirs:
        run(torch)
    with pytest.raises(RuntimeError) as ours:
        run(fusegrad)
    assert str(ours.value) == str(theirs.value)
