"""Errors and warnings of common calls, as PyTorch gives them (type and text), and
`torch.return_types` rebuilt from one sequence: differences found by running user programs
under both libraries."""

import pickle
import warnings

import pytest
import torch

import fusegrad

ERRORS = {
    "nll 3-d target size": lambda L: L.nn.functional.nll_loss(
        L.ones(2, 5, 4), L.zeros(2, 5, dtype=L.long)),
    "nll 4-d target size": lambda L: L.nn.functional.nll_loss(
        L.ones(2, 5, 4, 3), L.zeros(2, 5, 3, dtype=L.long)),
    "cross_entropy 3-d target size": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 5, 4), L.zeros(2, 5, dtype=L.long)),
    "probabilities with ignore_index": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.ones(2, 3) / 3, ignore_index=1),
    "batch sizes": lambda L: L.nn.functional.cross_entropy(
        L.ones(3, 5), L.zeros(2, dtype=L.long)),
    "repeat_interleave sizes": lambda L: L.repeat_interleave(L.tensor([1, 2]),
                                                             L.tensor([1, 1, 1])),
    "masked_fill sizes": lambda L: L.ones(2, 5, 7).masked_fill(
        L.zeros(2, 5, dtype=L.bool), 0.0),
    "affine_grid theta": lambda L: L.nn.functional.affine_grid(
        L.zeros(2, 3, 3), (2, 3, 5, 5), align_corners=False),
    "affine_grid size": lambda L: L.nn.functional.affine_grid(
        L.zeros(2, 2, 3), (2, 3, 0, 5), align_corners=False),
    "return type sequence length": lambda L: type(L.ones(3, 4).topk(2))([1, 2, 3]),
    "return type not a sequence": lambda L: type(L.ones(3, 4).topk(2))(5),
    **{f"embedding of {dt} indices": (lambda L, dt=dt: L.nn.functional.embedding(
        L.tensor([1, 0]).to(getattr(L, dt)), L.ones(3, 2))) for dt in ("uint8", "int16", "bool")},
    "embedding_bag of 2-d uint8 indices": lambda L: L.nn.functional.embedding_bag(
        L.tensor([[1, 0]], dtype=L.uint8), L.ones(3, 2)),
    "2-d embedding_bag with offsets": lambda L: L.nn.functional.embedding_bag(
        L.tensor([[0, 1], [2, 3]]), L.ones(4, 2), L.tensor([0])),
}


def _error(lib, fn):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_as_torch(name):
    assert _error(fusegrad, ERRORS[name]) == _error(torch, ERRORS[name])


VALUES = {
    "negative ignore_index with probabilities": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.ones(2, 3) / 3, ignore_index=-5),
    "one repeat count": lambda L: L.repeat_interleave(L.tensor([1, 2]), L.tensor([2])),
    "mask widening the input": lambda L: L.ones(3).masked_fill(
        L.tensor([[True, False, False], [False, False, True]]), 0.0),
    # one bag per row of a 2-D input, include_last_offset or not
    **{f"2-d embedding_bag {mode} include_last_offset": (
        lambda L, mode=mode: L.nn.functional.embedding_bag(
            L.tensor([[0, 1, 2], [3, 4, 5]]), L.arange(12.0).view(6, 2), mode=mode,
            include_last_offset=True)) for mode in ("sum", "mean", "max")},
}


@pytest.mark.parametrize("name", list(VALUES))
def test_value_as_torch(name):
    assert VALUES[name](fusegrad).tolist() == VALUES[name](torch).tolist()


SOFTMAX_CALLS = [
    lambda L: L.nn.functional.softmax(L.ones(2, 3)),
    lambda L: L.nn.functional.log_softmax(L.ones(2, 3, 4)),
    lambda L: L.nn.functional.softmin(L.ones(3)),
    lambda L: L.nn.Softmax()(L.ones(2, 3)),
    lambda L: L.nn.Softmax2d()(L.ones(2, 3, 4)),
    lambda L: L.nn.functional.softmax(L.ones(2, 3), 1),
]


@pytest.mark.parametrize("index", range(len(SOFTMAX_CALLS)))
def test_implicit_softmax_dim_warns_as_torch(index):
    got = []
    for lib in (fusegrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = SOFTMAX_CALLS[index](lib)
        got.append(([str(w.message) for w in caught], out.tolist()))
    assert got[0] == got[1]


def test_implicit_softmax_dim_warning_names_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fusegrad.nn.functional.softmax(fusegrad.ones(2, 3))
    assert [w.filename for w in caught] == [__file__]


def test_return_types_rebuilt_from_one_sequence_as_torch():
    for lib in (fusegrad, torch):
        r = lib.ones(3, 4).topk(2)
        again = type(r)(list(r))
        assert type(again) is type(r) and again.indices.tolist() == r.indices.tolist()
        assert type(r)([1, 2], {}).values == 1
        assert lib.return_types.max((lib.ones(2), lib.zeros(2))).indices.tolist() == [0, 0]
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is type(r) and back.values.tolist() == r.values.tolist()


def test_a_composites_warning_names_the_callers_line():
    # kl_div is autocast as a whole: its wrapper's frame is not the caller's.
    x = fusegrad.randn(3, 4).log_softmax(1)
    y = fusegrad.randn(3, 4).softmax(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fusegrad.nn.functional.kl_div(x, y, reduction="mean")
    assert [w.filename for w in caught] == [__file__]
