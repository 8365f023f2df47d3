"""In-place ops refuse an input that partly overlaps the written-to tensor, and a
written-to tensor whose elements share memory, in PyTorch's words; a view without repeated
elements of a broadcast tensor is written."""

import pytest
import torch

import fusegrad

CASES = {
    "expanded row": lambda L: L.arange(6.0).expand(2, 6)[0].mul_(2),
    "expanded": lambda L: L.arange(6.0).expand(2, 6).mul_(2),
    "shifted add": lambda L: (lambda x: (x[1:].add_(x[:-1]), x)[1])(L.arange(4.0)),
    "element of itself": lambda L: (lambda b: b.add_(b[0]))(L.arange(3.0)),
    "itself": lambda L: (lambda b: b.add_(b))(L.arange(3.0)),
    "a view of all of it": lambda L: (lambda b: b.mul_(b.view(3)))(L.arange(3.0)),
    "its transpose": lambda L: (lambda b: b.t().add_(b))(L.ones(2, 2)),
    "shifted assignment": lambda L: (lambda x: (x.__setitem__(slice(1, None), x[:-1]), x)[1])(
        L.arange(4.0)),
    "shifted copy_": lambda L: (lambda x: x[1:].copy_(x[:-1]))(L.arange(4.0)),
    "interleaved halves": lambda L: (lambda x: (x[::2].add_(x[1::2]), x)[1])(L.arange(4.0)),
    "addcmul_": lambda L: (lambda x: x[:2].addcmul_(x[1:3], x[1:3]))(L.arange(4.0)),
    "an expanded element": lambda L: (lambda x: x.add_(x[0].expand(3)))(L.arange(3.0)),
}


def _outcome(fn):
    try:
        return fn().tolist()
    except RuntimeError as e:
        return str(e)


@pytest.mark.parametrize("name", sorted(CASES))
def test_overlap_rules_as_torch(name):
    assert _outcome(lambda: CASES[name](fusegrad)) == _outcome(lambda: CASES[name](torch))


def test_a_refused_write_changes_nothing():
    x = fusegrad.arange(4.0)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x[1:].add_(x[:-1])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and x._version == 0
