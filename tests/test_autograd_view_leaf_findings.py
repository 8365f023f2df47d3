"""Views that require grad on their own (a view of a detached tensor, made to require grad)
and views made under no_grad of such views, against torch: what they require, and which
in-place writes torch refuses (found by differential fuzzing of autograd programs)."""

import pytest
import torch

import fusegrad as fg


def _view_made_leaf(T):
    """A view of a tensor that does not require grad, then set to require grad itself."""
    x = T.ones(3, 4, requires_grad=True) * 1
    view = x.detach()[0]
    view.requires_grad_(True)
    return view


def _outcome(fn, T):
    try:
        return ("ok", fn(T))
    except RuntimeError as e:
        return ("error", str(e))


CASES = {
    # PyTorch asks the view whether it requires grad: a view of a leaf base, refused.
    "in_place_on_view_made_leaf": lambda T: _view_made_leaf(T).mul_(1.5).shape,
    # A view made under no_grad requires grad as its root base does (here: not), so writing
    # into it with grad mode on records nothing and is allowed.
    "no_grad_view_of_view_made_leaf": lambda T: _no_grad_view(T, _view_made_leaf(T)),
    "no_grad_view_flags": lambda T: _no_grad_flags(T),
}


def _no_grad_view(T, view):
    with T.no_grad():
        inner = view[0]
    inner.add_(1)
    return (inner.requires_grad, inner.is_leaf, inner.grad_fn is None, inner.tolist())


def _no_grad_flags(T):
    a = T.ones(3, requires_grad=True)
    with T.no_grad():
        of_leaf = a[0:2]
    b = a * 1
    with T.no_grad():
        of_result = b[0:2]
    made = _view_made_leaf(T)
    with T.no_grad():
        of_made = made[0:1]
    return [t.requires_grad for t in (of_leaf, of_result, made, of_made)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_view_requiring_grad_on_its_own_matches_torch(name):
    assert _outcome(CASES[name], fg) == _outcome(CASES[name], torch)
