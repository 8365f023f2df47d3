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


def _linear(lib, which):
    """A linear layer whose input requires grad or not (`which`: "input", "weight")."""
    x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=which == "input")
    w = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=which == "weight")
    b = lib.tensor([0.1, 0.2], requires_grad=True)
    return lib.nn.functional.linear(x, w, b), {"x": x, "w": w, "b": b}


@pytest.mark.parametrize("which", ["input", "weight"])
@pytest.mark.parametrize("changed", ["x", "w"])
def test_linear_saves_a_matrix_only_for_the_other_gradient(which, changed):
    """A network's first layer (its input without grad) saves the input, not the weight:
    the weight may be stepped in place before backward, as in PyTorch."""
    def outcome(lib):
        y, inputs = _linear(lib, which)
        with lib.no_grad():
            inputs[changed].mul_(2)
        try:
            y.sum().backward()
        except RuntimeError as e:
            return "error", str(e).split(":")[0]
        return "ok", [t.grad.tolist() if t.grad is not None else None
                      for t in inputs.values()]

    assert outcome(fusegrad) == outcome(torch)


def test_linear_weight_gradient_layout():
    """The weight's gradient stays laid out as the weight (C-contiguous after the transpose)
    whatever was saved."""
    for which in ("input", "weight"):
        y, inputs = _linear(fusegrad, which)
        y.sum().backward()
    assert inputs["w"].grad.is_contiguous() and inputs["w"].grad.stride() == (3, 1)


@pytest.mark.parametrize("case", ["kron first", "kron second", "take_along_dim index"])
def test_composites_save_no_view_of_their_inputs(case):
    """kron reshapes its inputs with `_unsafe_view`, take_along_dim wraps its index into a
    new tensor, as PyTorch's: their inputs may change in place before backward."""
    def outcome(lib):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = lib.tensor([[0.0, 1.0], [1.0, 0.5]])
        idx = lib.tensor([[1, 0], [0, 0]])
        if case.startswith("kron"):
            y, changed = lib.kron(a, b), a if case == "kron first" else b
        else:
            y, changed = lib.take_along_dim(a, idx, 1), idx
        with lib.no_grad():
            changed.mul_(2) if changed.is_floating_point() else changed.zero_()
        try:
            y.sum().backward()
        except RuntimeError as e:
            return "error", str(e).split(":")[0]
        return "ok", a.grad.tolist()

    assert outcome(fusegrad) == outcome(torch)
