"""Eager fidelity against torch 2.13: empty tensors' strides (factories, views, clones and
memory formats keep PyTorch's), keyword arguments named without a position in PyTorch's
parser messages (`x.tril(diagonal=1.5)`, `torch.prod(input=x, dim=1.5)`, the overload
lists of sum, squeeze, narrow and movedim), `torch.cuda.sparse`'s typed classes, sort's and
argsort's argument errors, tuples inside an index, index dtypes, clamp's mixed bounds,
scatter_reduce's "max"/"min", cat of a 0-d tensor, repeat_interleave's output_size and
float repeats, and a `dtype` that is no dtype."""

from __future__ import annotations

import pytest
import torch
from oracle import described, expression_cases, outcome, same_outcome

import fusegrad

LIBS = (torch, fusegrad)


# ---------------------------------------------------------------- empty tensors' strides

EMPTY_STRIDES = expression_cases("""
L.zeros(0, 3).t().contiguous().stride()
L.zeros(0, 3).t().is_contiguous()
L.zeros(2, 0, 3).permute(2, 0, 1).contiguous().stride()
L.zeros(0, 3).t().clone().stride()
L.empty_like(L.zeros(0, 3).t()).stride()
L.zeros(0, 3)[:, 1].stride()
L.zeros(3, 4)[:, :0].t().stride()
L.zeros(0, 3).expand(2, 0, 3).stride()
L.zeros(0, 3).t().unsqueeze(1).stride()
L.zeros(0, 3).t().to(L.float64).stride()
L.zeros(0, 3).mT.stride()
L.rot90(L.zeros(0, 3), 1).stride()
L.zeros(2, 0, 3, 4).contiguous(memory_format=L.channels_last).stride()
L.empty(2, 3, 0, 4, memory_format=L.channels_last).stride()
L.zeros(0, 3, 2, 4).clone(memory_format=L.channels_last).stride()
""")


@pytest.mark.parametrize("expression", EMPTY_STRIDES)
def test_empty_tensor_strides(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- keywords in messages

KEYWORD_MESSAGES = expression_cases("""
L.ones(3, 3).tril(diagonal=1.5)
L.ones(3, 3).triu_(diagonal=1.5)
L.ones(3, 3).diagonal(0, dim2=1.5)
L.ones(3, 3).transpose(0, dim1=1.5)
L.ones(3, 3).roll(1, dims=1.5)
L.ones(3, 3).unfold(0, size=1.5, step=1)
L.ones(3, 3).new_full(size=1.5, fill_value=1)
L.ones(3, 3).sum(dim=1.5, keepdim=True)
L.squeeze(dim=1.5, input=L.ones(3, 3))
L.narrow(input=L.ones(3, 3), dim=1.5, start=0, length=1)
L.ones(3, 3).movedim(1.5, destination=0)
L.prod(input=L.ones(3, 3), dim=1.5)
L.prod(dim=1.5, input=L.ones(3, 3))
L.prod(L.ones(3, 3), 1, dtype=1.5)
L.ones(3, 3).prod(dtype=1.5)
L.ones(3, 3).sum(dtype="a")
L.ones(3, 3).cumsum(0, dtype="a")
L.nansum(L.ones(3, 3), dtype=1)
""")


@pytest.mark.parametrize("expression", KEYWORD_MESSAGES)
def test_keywords_in_parser_messages(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- torch.cuda.sparse

CUDA_SPARSE = expression_cases("""
L.cuda.sparse.FloatTensor(2, 3)
(L.cuda.sparse.DoubleTensor.dtype, L.cuda.sparse.LongTensor.is_sparse)
L.cuda.sparse.IntTensor.is_cuda
(L.cuda.sparse.HalfTensor.layout, isinstance(L.ones(2).to_sparse(), L.cuda.sparse.FloatTensor))
L.cuda.sparse.BoolTensor
L.ones(2).type(L.cuda.sparse.FloatTensor)
""")


@pytest.mark.parametrize("expression", CUDA_SPARSE)
def test_cuda_sparse_classes(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- sort's arguments

SORT_ARGUMENTS = expression_cases("""
L.tensor([3., 1, 2]).sort(0, descending=True, stable=1)
L.tensor([3., 1, 2]).sort(stable=1, dim=0, descending=True)
L.tensor([3., 1, 2]).sort(dim=0, descending=True, foo=1)
L.sort(L.tensor([3., 1, 2]), 0, True, stable=True, out=None)
L.tensor([3., 1, 2]).sort(stable=True, descending=np.bool_(True))
L.tensor([3., 1, 2]).argsort(0, 1)
L.argsort(L.tensor([3., 1, 2]), descending=1, dim=0)
L.argsort(L.tensor([3., 1, 2]), stable=True, dim=0, descending=True, out=None)
L.argsort(L.tensor([3., 1, 2]), 0, True, foo=1)
""")


@pytest.mark.parametrize("expression", SORT_ARGUMENTS)
def test_sort_argument_errors(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- indexing and friends

HUNTED = expression_cases("""
L.arange(24.).reshape(3, 2, 4)[(0, 2), :, (1, 3)]
L.arange(24.).reshape(3, 2, 4)[((0, 1), (1, 0)),]
(lambda x: (x.__setitem__(((0, 2), 1), 7.0), x)[1])(L.zeros(3, 2))
L.arange(24.).reshape(3, 2, 4)[L.tensor([0, 1], dtype=L.int8)]
L.zeros(3, 4).index_put((None, L.tensor([0, 0])), L.tensor([1., 2.]), True)
L.tensor([1, 5]).clamp(min=L.tensor([2, 2]), max=3.5)
L.clamp(L.tensor([1, 5]), 0.5, L.tensor([3, 3]))
L.clamp(L.tensor([1, 5]), L.tensor(2.5), 4)
L.scatter_reduce(L.ones(3), 0, L.tensor([0, 0, 2]), L.tensor([1., 2., 3.]), "max")
L.ones(3).scatter_reduce_(0, L.tensor([0, 0, 2]), L.tensor([1., 2., 3.]), "min", include_self=False)
L.cat([L.ones(0), L.tensor(2.)])
L.repeat_interleave(L.tensor([1, 2]), 2, output_size=3)
L.repeat_interleave(L.tensor([1, 2]), L.tensor([1, 2]), output_size=4)
L.tensor([1, 2]).repeat_interleave(repeats=1.5)
L.repeat_interleave(L.tensor([1, 2]), True)
""")


@pytest.mark.parametrize("expression", HUNTED)
def test_indexing_and_friends(expression):
    same_outcome(expression)


def test_scatter_reduce_max_refuses_backward():
    """torch's forward reads "max" as amax; its backward refuses the name."""
    got = []
    for L in LIBS:
        x = L.ones(3, requires_grad=True)
        y = L.scatter_reduce(x, 0, L.tensor([0, 0, 2]), L.tensor([1., 2., 3.]), "max")
        got.append((y.grad_fn.name(), outcome(lambda y=y: y.sum().backward(), described)))
    assert got[0] == got[1], got
