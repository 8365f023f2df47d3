"""Eager fidelity against torch 2.13: the strides of empty elementwise results (PyTorch's
iterator orders the dims over operands that differ in shape, so `zeros(0, 3).t() + 1` keeps
(1, 3) where `x.exp()` and `x + x` are contiguous) and of reductions of empty tensors,
einsum's layouts (ellipsis and size-1 batch dims, products without a contraction, sums
before the product), the function spellings `torch.reshape` and `torch.permute` (one list,
never spread), a list of ints given by keyword whose first element is no int (`not list`),
`tensor_split`'s dim given by position, and `empty_strided`'s and `new_empty_strided`'s
sizes and strides."""

from __future__ import annotations

import pytest
from oracle import expression_cases, same_outcome

# ---------------------------------------------------------------- empty elementwise results

EMPTY_ELEMENTWISE = expression_cases("""
(L.zeros(0, 3).t() + 1).stride()
(L.zeros(0, 3).t() * 2.5).stride()
(1 - L.zeros(0, 3).t()).stride()
(L.zeros(0, 3).t() / 2).stride()
(L.zeros(0, 3).t() + L.zeros(0, 3).t()).stride()
(L.zeros(0, 3).t() * L.zeros(3, 1)).stride()
(L.zeros(3, 1) + L.zeros(0, 3).t()).stride()
(L.zeros(0, 3).t() + L.tensor(1.)).stride()
L.zeros(0, 3).t().exp().stride()
(-L.zeros(0, 3).t()).stride()
(L.zeros(0, 3).t() > 0).stride()
(L.zeros(0, 3).t() == L.zeros(0, 3).t()).stride()
L.zeros(0, 3).t().add(1, alpha=2).stride()
L.zeros(0, 3).t().sub(L.ones(1), alpha=2).stride()
L.zeros(0, 3).t().long().add(1, alpha=2).stride()
(L.zeros(0, 3).t().int() + 1).stride()
(L.zeros(0, 3).t().half() * 2).stride()
(L.zeros(0, 3).t().double() * L.zeros(3, 1).int()).stride()
(2 ** L.zeros(0, 3).t()).stride()
L.zeros(0, 3).t().pow(2).stride()
L.where(L.zeros(0, 3).t() > 0, 0., 1.).stride()
L.where(L.zeros(0, 3).t() > 0, L.zeros(0, 3).t(), L.zeros(0, 3).t()).stride()
L.nan_to_num(L.zeros(0, 3).t()).stride()
(L.zeros(0, 3).t().long() | 1).stride()
(L.zeros(0, 3).t().bool() & L.ones(3, 1).bool()).stride()
(L.zeros(0, 3).t().long() << 1).stride()
L.zeros(0, 3).t().logical_and(L.zeros(3, 1)).stride()
(L.zeros(3, 0, 2).permute(1, 2, 0) + 1).stride()
(L.zeros(3, 0, 2).permute(2, 0, 1) + 1).stride()
(L.zeros(0, 3).t()[None] + 1).stride()
(L.zeros(0, 3).t().unsqueeze(1) + 1).stride()
L.heaviside(L.zeros(0, 3).t(), L.zeros(1)).stride()
(L.zeros(0, 3).t().int() // 2).stride()
(L.zeros(0, 3).t().int() % L.ones(3, 1).int()).stride()
L.zeros(0, 3).t().sort(1)[1].stride()
L.zeros(2, 0, 3).permute(2, 0, 1).sort(1)[0].stride()
L.zeros(0, 3).t().argsort(0, stable=True).stride()
L.zeros(0, 3).t().flip(0).stride()
L.zeros(0, 3).t().roll(1, 0).stride()
L.zeros(0, 3).t().roll(1).stride()
L.ones(3, 4).t().roll(1, 0).stride()
""")


@pytest.mark.parametrize("expression", EMPTY_ELEMENTWISE)
def test_empty_elementwise_strides(expression):
    same_outcome(expression)


EMPTY_REDUCTIONS = expression_cases("""
L.zeros(0, 3).t().sum(1, keepdim=True)
L.zeros(0, 3).t().mean(1, keepdim=True)
L.zeros(0, 3).t().prod(1, keepdim=True)
L.zeros(0, 3).t().amax(0, keepdim=True)
L.zeros(0, 3, 2).permute(2, 0, 1).sum(1, keepdim=True)
L.zeros(0, 3, 2).permute(2, 0, 1).sum(0, keepdim=True)
L.zeros(0, 3, 2).permute(2, 0, 1).nansum(1, keepdim=True)
L.zeros(0, 3, 2).permute(2, 0, 1).any(1, keepdim=True)
L.zeros(0, 3, 2).permute(2, 0, 1).sum(2)
""")


@pytest.mark.parametrize("expression", EMPTY_REDUCTIONS)
def test_empty_reductions(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- einsum's layouts

EINSUM = expression_cases("""
L.einsum('...ij,...jk->...ik', L.arange(24.).reshape(2, 1, 3, 4), L.arange(40.).reshape(5, 4, 2))
L.einsum('...ij,...jk->...ik', L.ones(3, 4), L.ones(2, 4, 2))
L.einsum('...ij,...jk->...ik', L.ones(1, 2, 3, 4), L.ones(5, 1, 4, 2))
L.einsum('...ij,...jk->...ki', L.ones(2, 1, 3, 4), L.ones(5, 4, 2))
L.einsum('ij,kl->iljk', L.arange(6.).reshape(2, 3), L.arange(20.).reshape(4, 5))
L.einsum('ij,kl->ljki', L.ones(2, 3), L.ones(4, 5))
L.einsum('ij,k->jki', L.ones(2, 3), L.ones(4))
L.einsum('i,j->ji', L.ones(2), L.ones(3))
L.einsum('bij,bjk->bik', L.ones(1, 3, 4), L.ones(2, 4, 5))
L.einsum('bij,bjk->ibk', L.ones(2, 3, 4), L.ones(1, 4, 5))
L.einsum('ijk,kl->jil', L.ones(2, 3, 4), L.ones(4, 5))
L.einsum('kij,lk->jli', L.ones(4, 2, 3), L.ones(5, 4))
L.einsum('kij,il->ji', L.arange(24.).reshape(2, 3, 4), L.ones(3, 3))
L.einsum('ij,kli->jil', L.ones(3, 3), L.ones(3, 4, 3))
L.einsum('ij,jk,kl->li', L.ones(2, 3), L.ones(3, 4), L.ones(4, 5))
""")


@pytest.mark.parametrize("expression", EINSUM)
def test_einsum_layouts(expression):
    same_outcome(expression)


def test_einsum_gradients():
    """The rewritten pairwise product still differentiates as PyTorch's (values)."""
    import numpy as np
    import torch

    import fusegrad

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4, 2))
    grads = []
    for L in (torch, fusegrad):
        x = L.tensor(a, requires_grad=True)
        y = L.tensor(b, requires_grad=True)
        (L.einsum('...ij,...jk->...ki', x, y) * L.tensor(np.arange(60.).reshape(2, 5, 2, 3))
         ).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- argument messages

ARGUMENTS = expression_cases("""
L.reshape(L.ones(3), 3)
L.reshape(L.ones(3), -1)
L.reshape(L.ones(3), 3, 1)
L.reshape(L.ones(3), shape=3)
L.reshape(L.ones(3), (3,), shape=(3,))
L.reshape(L.ones(3))
L.reshape(L.ones(3), 1.5)
L.reshape(L.ones(3), np.int64(3))
L.reshape(L.ones(3), [3.5])
L.reshape(L.ones(3), shape=[3.5])
L.reshape(L.ones(6), (2, 3)).stride()
L.reshape(input=L.ones(6), shape=[3, 2]).stride()
L.ones(3).reshape(3).stride()
L.permute(L.ones(3), 0)
L.permute(L.ones(3), 0, 1)
L.permute(L.ones(3), dims=0)
L.permute(L.ones(3))
L.permute(L.ones(2, 3), (1, 0)).stride()
L.ones(3).permute(0).stride()
L.ones(3).reshape(shape=[3.5])
L.ones(3).reshape(shape=(3, 1.5))
L.ones(3).permute(dims=[0.5])
L.ones(3).expand(size=[1.5])
L.ones(3).repeat(repeats=[1.5])
L.ones(3).tile(dims=[1.5])
L.tile(L.ones(3), dims=[1.5])
L.ones(3).tile([1.5])
L.ones(3).flip(dims=[0.5])
L.ones(3).roll(1, dims=[0.5])
L.ones(3).amax(dim=[0.5])
L.tensor_split(L.ones(3), 2.5, 0)
L.ones(3).tensor_split(2.5, 0)
L.tensor_split(L.ones(3), 2, 0.5)
L.tensor_split(L.ones(3), 2, True)
L.tensor_split(L.ones(3), 2, L.tensor(0))
L.tensor_split(L.ones(3, 4), 2, 1)
L.ones(3).new_empty_strided((2, 3), 1)
L.ones(3).new_empty_strided(2, (1,))
L.ones(3).new_empty_strided((2, 3), [1.5, 1])
L.ones(3).new_empty_strided((2, 3), (1, 1.5))
L.ones(3).new_empty_strided((2, 3), stride=1)
L.ones(3).new_empty_strided((2, 3))
L.ones(3).new_empty_strided((2, 3), (1, 2)).stride()
L.empty_strided((2, 3), 1)
L.empty_strided(2, (1,))
L.empty_strided((2, 3), stride=[1.5, 1])
L.empty_strided(L.Size([2, 3]), (3, 1)).stride()
""")


@pytest.mark.parametrize("expression", ARGUMENTS)
def test_arguments(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- dtypes, histc, diff, nan_to_num

MORE = expression_cases("""
L.result_type(L.ones(2), L.float64)
L.result_type(2, None)
L.result_type(np.float64(1), 2)
L.result_type(L.ones(2, dtype=L.int32), 2.5)
L.can_cast(L.float32, 2)
L.can_cast(2, L.float32)
L.can_cast(L.ones(1), L.float32)
L.can_cast(from_=L.float32, to=L.int32)
L.can_cast(L.float32, to=None)
L.can_cast(float, int)
L.promote_types(type1=L.int32, type2=L.float32)
L.promote_types(L.int32, 2)
L.histc(L.tensor([1., float('nan')]), bins=4)
L.histc(L.tensor([float('nan')]), bins=4)
L.histc(L.tensor([-float('inf')]), bins=3)
L.histc(L.tensor([float('inf')], dtype=L.float64), bins=3)
L.histc(L.tensor([-float('inf'), -float('inf')], dtype=L.float16), bins=3)
L.histc(L.tensor([1., 2.]), bins=3, min=float('nan'), max=2)
L.diff(L.tensor([1., 3.]), prepend=1.)
L.diff(L.tensor([1., 3.]), 1, 0, 5.)
L.tensor([1., 3.]).diff(1, 0, None, 'a')
L.nan_to_num(L.tensor([1.]), posinf='a')
L.nan_to_num(L.tensor([1.]), None, None, 'a')
L.nan_to_num(L.tensor([1.]), nan=1j)
L.tensor([1.]).nan_to_num('a')
L.tensor([1.]).nan_to_num_(1., 2., [1])
L.nan_to_num(L.tensor([float('nan'), float('inf')]), True, 2, np.float32(3))
""")


@pytest.mark.parametrize("expression", MORE)
def test_more(expression):
    same_outcome(expression)
