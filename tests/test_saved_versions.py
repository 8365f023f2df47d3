"""What a backward node saves, seen from outside: an input changed in place after the op
breaks backward ("modified by an inplace operation") exactly where PyTorch's node saved it,
and the node names what it saved as PyTorch's does (`_saved_<name>`)."""

from __future__ import annotations

import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _where(lib, which):
    w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lib.tensor([4.0, 5.0, 6.0])
    c = lib.tensor([True, False, True])
    y = lib.where(c, w, b) if which != "number" else lib.where(c, w, 0.0)
    return y, {"condition": c, "other": b, "self": w}


CASES = {
    "where": _where,
}


def _outcome(lib, case, which, changed):
    y, inputs = CASES[case](lib, which)
    t = inputs[changed]
    with lib.no_grad():
        t.add_(1) if t.dtype.is_floating_point else t.logical_not_()
    try:
        y.sum().backward()
    except RuntimeError as e:
        return "error", str(e).split(":")[0]
    return "ok", inputs["self"].grad.tolist()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("changed", ["condition", "other", "self"])
def test_change_in_place_after_the_op(case, changed):
    assert _outcome(fusegrad, case, "tensor", changed) == _outcome(torch, case, "tensor",
                                                                   changed)


@pytest.mark.parametrize("case", list(CASES))
def test_saved_names(case):
    def names(lib):
        y, _ = CASES[case](lib, "tensor")
        return sorted(n for n in dir(y.grad_fn) if n.startswith("_saved_"))

    assert names(fusegrad) == names(torch)


def test_where_with_a_number_branch():
    for lib in (fusegrad, torch):
        y, inputs = _where(lib, "number")
        y.sum().backward()
        assert inputs["self"].grad.tolist() == [1.0, 0.0, 1.0]
