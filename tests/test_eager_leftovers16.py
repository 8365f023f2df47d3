"""Eager fidelity against torch 2.13: `Tensor.to`'s three overloads as PyTorch's parser binds
them (a device index, a number standing for its tensor, Python types for dtypes, the
memory format's rank check, and the messages of calls that fit none), lists of sizes or
dims given one value otherwise than spread over a method's arguments, `keepdim` and `dim`
arguments that fit no overload of the reductions, `tensor_split`'s and `view`'s listings,
the `other` of `type_as` and the `*_as` methods, `new_*`'s sizes and fill value,
`unflatten`'s dim and sizes, and `Tensor.msort`'s messages."""

from __future__ import annotations

import pytest
from oracle import expression_cases, same_outcome

# ---------------------------------------------------------------- Tensor.to

TO = expression_cases("""
L.ones(2).to(L.float64, L.int32)
L.ones(2).to('cpu', dtype=L.int32, device='cpu')
L.ones(2).to(1.5)
L.ones(2).to(1j)
L.ones(2).to(True)
L.ones(2).to(np.bool_(True))
L.ones(2).to(np.complex64(1j))
L.ones(2).to(np.int64(0))
L.ones(2).to(0)
L.ones(2).to(-1)
L.ones(2).to(tensor=3)
L.ones(2).to(tensor=L.ones(1, dtype=L.int64), copy=True)
L.ones(2).to(1.5, False)
L.ones(2).to(dtype='a')
L.ones(2).to(dtype=1.5)
L.ones(2).to(dtype=float)
L.ones(2).to('cpu', float)
L.ones(2).to(float, True)
L.ones(2).to(device=1.5)
L.ones(2).to(L.int32, True, True, L.contiguous_format)
L.ones(2).to(L.int32, True, True, L.contiguous_format, 1)
L.ones(2).to(L.float64, True, True, L.preserve_format, foo=3)
L.ones(2).to('cpu', L.int32, False, False, foo=1)
L.ones(2).to(L.ones(1, dtype=L.int64), dtype=L.int32)
L.ones(2).to(other=L.ones(1, dtype=L.int64))
L.ones(2).to(dtype=L.int32, device='cpu', foo=2)
L.ones(2).to(L.int32, non_blocking=1.5)
L.ones(2).to(L.int32, dtype=L.int32)
L.ones(2).to(L.float16, np.bool_(False))
L.ones(2).to(memory_format=1)
L.ones(2).to(L.int32, True, True, memory_format=None)
L.ones(2).to(None, None, None)
L.ones(2).to(np)
L.ones(2).to(L.int32, memory_format=L.channels_last)
L.ones(2, 3, 4, 5).to('cpu', L.float64, memory_format=L.channels_last)
L.ones(2, 3, 4, 5).to(L.ones(1, dtype=L.float64), memory_format=L.channels_last)
(lambda x: (x.to('cpu', L.float32) is x, x.to(x) is x, x.to(x, copy=True) is x))(L.ones(2))
""")


@pytest.mark.parametrize("expression", TO)
def test_to(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- int[] and reductions' args

ARGUMENTS = expression_cases("""
L.ones(2, 3).expand(size=1.5)
L.ones(2, 3).permute(dims=1.5)
L.ones(2, 3).reshape(shape=1.5)
L.ones(2, 3).repeat(repeats=1.5)
L.ones(2, 3).amax(dim=1.5)
L.ones(2, 3).amin(1.5)
L.ones(2, 3).nansum(dim=1.5)
L.ones(2, 3).nanmean(dim=1.5)
L.ones(2, 3).std(dim=1.5)
L.ones(2, 3).var(1.5, keepdim=True)
L.ones(2, 3).var(dim='a', correction=0)
L.ones(2, 3).std(dim=L.tensor(1))
L.ones(3).sum(0, keepdim=np.bool_(True))
L.ones(3).sum(0, np.bool_(True))
L.ones(3).mean(0, keepdim=1)
L.sum(L.ones(3), 0, np.bool_(True))
L.ones(2, 3).all(dim=1.5)
L.ones(2, 3).any(1.5, keepdim=True)
L.ones(2, 3).any(dim=[0])
L.ones(2, 3).type_as(1)
L.ones(2, 3).type_as(other=None)
L.ones(1, 3).expand_as(1)
L.ones(2, 3).view_as(other=[1])
L.ones(2, 3).reshape_as(2)
L.arange(6).tensor_split(2.5)
L.arange(6).tensor_split(2.5, dim=0)
L.tensor_split(L.arange(6), None)
L.arange(6).tensor_split(sections=2.5)
L.ones(2, 3).unflatten(dim=0, sizes=1.5)
L.unflatten(L.ones(2, 3), 0, 1.5)
L.ones(2, 3).view(size=1.5)
L.ones(3).view(size=3)
L.ones(3).view(size=[3])
""")


# A list of sizes or dims takes one int alone only spread over a method's arguments.
SIZE_LISTS = expression_cases("""
L.ones(3).expand(size=3)
L.ones(3).expand(size=L.tensor(3))
L.ones(3).reshape(shape=3)
L.ones(3).permute(dims=0)
L.ones(3).repeat(repeats=2)
L.ones(3).sum_to_size(size=3)
L.ones(2, 3).sum_to_size(size=(1, 3))
L.ones(2, 3).sum_to_size(3, size=3)
L.ones(3).tile(dims=2)
L.tile(L.ones(3), 2)
L.ones(3).tile(2)
L.ones(2, 3).tile(1.5)
L.ones(3).flip(dims=0)
L.flip(L.ones(3), 0)
L.ones(2, 3).flip(0, 1)
L.ones(2, 3).broadcast_to(size=1.5)
L.broadcast_to(L.ones(2, 3), 3)
L.broadcast_to(L.ones(2, 3), size=3)
L.ones(3).broadcast_to(2, 3)
L.ones(3).broadcast_to(3)
""")


@pytest.mark.parametrize("expression", SIZE_LISTS)
def test_size_lists(expression):
    same_outcome(expression)


@pytest.mark.parametrize("expression", ARGUMENTS)
def test_arguments(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- new_*, unflatten, msort

METHODS = expression_cases("""
L.ones(2).new_zeros((2,), 3)
L.ones(2).new_zeros(1.5, 2)
L.ones(2).new_ones([2], [3])
L.ones(2).new_zeros(2, (3,))
L.ones(2).new_empty(2, 3).shape
L.ones(2).new_zeros(2, foo=1)
L.ones(2).new_full(2, 1.5)
L.ones(2).new_full(size=2, fill_value=1)
L.ones(2).new_full((2,), L.tensor([2.0]))
L.ones(2).new_full((2,), fill_value=L.tensor([2.0]))
L.ones(2).new_full((2,), L.tensor(2.0, requires_grad=True))
L.ones(2).new_full([2], L.tensor(3))
L.ones(2).new_full(L.Size([2]), 1)
L.ones(6).unflatten(0, [L.tensor(2), 3])
L.ones(6).unflatten(0, (2, L.tensor(3.0)))
L.ones(6).unflatten(L.tensor(0), (2, 3))
L.ones(6).unflatten(0.5, (2, 3))
L.ones(6).unflatten(dim=0.5, sizes=(2, 3))
L.unflatten(L.ones(6), 0.5, (2, 3))
L.ones(3).msort(0)
L.ones(3).msort(0, dim=1)
L.tensor([[3., 1], [0, 2]]).msort()
L.msort(L.ones(3), 0)
""")


@pytest.mark.parametrize("expression", METHODS)
def test_methods(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- einsum's strides

EINSUM = expression_cases("""
L.einsum('ij,jk->ki', L.arange(12.).reshape(3, 4), L.arange(8.).reshape(4, 2))
L.einsum('ij,jk->ik', L.ones(3, 4), L.ones(4, 2))
L.einsum('bij,bjk->kbi', L.arange(24.).reshape(2, 3, 4), L.arange(40.).reshape(2, 4, 5))
L.einsum('bij,bjk->bki', L.ones(2, 3, 4), L.ones(2, 4, 5))
L.einsum('bij,bjk->ikb', L.ones(2, 3, 4), L.ones(2, 4, 5))
L.einsum('ij,ik->kj', L.ones(3, 4), L.ones(3, 5))
L.einsum('ij,jk,kl->li', L.ones(2, 3), L.ones(3, 4), L.ones(4, 5))
""")


@pytest.mark.parametrize("expression", EINSUM)
def test_einsum_strides(expression):
    same_outcome(expression)
