"""Eager fidelity against torch 2.13: random sampling's arguments (ints that are no ints:
`multinomial(1.5)`, `random_(1.5)`, `randint(True, ...)`; randint's and randperm's dtype
bounds; multinomial of no rows), numbers of subclasses of int and float (an IntEnum member)
promoted as Python numbers, PyTorch's parser's messages for the shape arguments of factories,
`linspace`'s steps and `eye`'s sizes, and for methods given floats or bools
(`x.transpose(0.5, 1)`, `x.sum(1.5)`, `x.squeeze(1.5)`, `x.flip(True)`),
`unsafe_split`'s pieces in the input's memory, the sparse legacy classes
(`torch.sparse.FloatTensor`), `narrow`'s overloads for bool and float arguments, and `norm`'s
dims read as PyTorch's parser reads them."""

from __future__ import annotations

import enum
import warnings

import numpy as np
import pytest
import torch
from oracle import outcome

import fusegrad

LIBS = (torch, fusegrad)


class Level(enum.IntEnum):
    """An IntEnum whose members stand for ints."""

    TWO = 2


class Weight(float):
    """A float subclass."""


class Count(int):
    """An int subclass."""


def _outcome(lib, f, values: bool):
    """What `f(lib)` gives, in comparable form: a tensor's dtype, shape, strides (strided
    tensors only) and, with `values`, its values; a tuple's items; another value's repr with
    the library's name replaced; or the error's type and message."""
    return outcome(lambda: f(lib), lambda r: _described(r, values))


def _described(r, values: bool):
    if isinstance(r, (tuple, list)):
        return tuple(_described(x, values) for x in r)
    if isinstance(r, (torch.Tensor, fusegrad.Tensor)):
        strided = not r.is_sparse
        data = r.to_dense() if r.is_sparse else r
        wide = torch.float64 if isinstance(r, torch.Tensor) else fusegrad.float64
        return ("tensor", str(r.dtype).replace("fusegrad", "torch"), tuple(r.shape),
                tuple(r.stride()) if strided else None,
                np.asarray(data.detach().to(wide).numpy()) if values else None)
    return ("value", repr(r).replace("fusegrad", "torch"))


def _equal(a, b) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not (isinstance(b, tuple) and b[:4] == a[:4]):
            return False
        return a[4] is None or np.allclose(a[4], b[4], rtol=1e-6, atol=1e-6, equal_nan=True)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and a and \
            a[0] not in ("error", "value"):
        return all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def _same(f, values: bool = True) -> None:
    got = [_outcome(lib, f, values) for lib in LIBS]
    assert _equal(got[0], got[1]), got


def _cases(text: str) -> list:
    return [line.strip() for line in text.strip().splitlines()]


_NAMES = {"np": np, "Level": Level, "Weight": Weight, "Count": Count}


def _run(expression: str):
    return lambda L: eval(expression, {"L": L, **_NAMES})  # noqa: S307


# ---------------------------------------------------------------- random sampling's arguments

# Drawn values are not compared (only dtypes, shapes, strides and errors): the refusals are
# what these check.
RANDOM_ARGUMENTS = _cases("""
L.tensor([0.2, 0.3, 0.5]).multinomial(1.5)
L.tensor([0.2, 0.3, 0.5]).multinomial(True)
L.tensor([0.2, 0.3, 0.5]).multinomial(2, replacement=1.5)
L.tensor([0.2, 0.3, 0.5]).multinomial(2, replacement=1)
L.tensor([0.2, 0.3, 0.5]).multinomial(2, L.tensor(True))
L.tensor([0.2, 0.3, 0.5]).multinomial(np.int64(2))
L.tensor([0.2, 0.3, 0.5]).multinomial(L.tensor(2))
L.tensor([0.2, 0.3, 0.5]).multinomial(num_samples=2, replacement=True)
L.multinomial(L.tensor([0.2, 0.3, 0.5]), 1.5)
L.multinomial(L.tensor([0.2, 0.3, 0.5]), num_samples=1.5)
L.multinomial(L.tensor([0.2, 0.3, 0.5]), 2, 1.5)
L.multinomial(L.ones(0, 2), 1)
L.multinomial(L.ones(0, 2), 3, True)
L.rand(3, 4).random_(1.5)
L.rand(3, 4).random_(True)
L.rand(3, 4).random_(1, 1.5)
L.rand(3, 4).random_(1.5, 3)
L.rand(3, 4).random_(1, True)
L.rand(3, 4).random_(1, to=1.5)
L.rand(3, 4).random_(1.5, to=3)
L.rand(3, 4).random_(to=1.5)
L.rand(3, 4).random_(from_=1)
L.rand(3, 4).random_(None)
L.rand(3, 4).random_(1, None)
L.rand(3, 4).random_(L.tensor(3))
L.rand(3, 4).random_(L.tensor(3.0))
L.rand(3, 4).random_(np.int64(3))
L.rand(3, 4).random_(2 ** 63)
L.zeros(3, dtype=L.uint8).random_(0, 300)
L.zeros(3, dtype=L.bool).random_(3)
L.randint(1.5, (2,))
L.randint(True, (2,))
L.randint(0, 1.5, (2,))
L.randint(1.5, 3, (2,))
L.randint(high=1.5, size=(2,))
L.randint(3, size=(2,))
L.randint(high=3, size=(2,))
L.randint(3)
L.randint(3, 2.5)
L.randint(3, (2.5,))
L.randint(3, (2, 2.5))
L.randint(0, 3, (2.5,))
L.randint(L.tensor(3), (2,))
L.randint(L.tensor(3.0), (2,))
L.randint(2 ** 63, (2,))
L.randint(3, (2,), dtype=L.bool)
L.randint(0, 2, (2,), dtype=L.bool)
L.randint(-5, 0, (3,), dtype=L.uint8)
L.randint(0, 300, (3,), dtype=L.uint8)
L.randint(-200, 0, (3,), dtype=L.int8)
L.randint(0, 2 ** 40, (3,), dtype=L.int32)
L.randint(0, 3, (3,), dtype=L.complex64)
L.randint(5, 2, (2,), dtype=L.uint8)
L.randint(3, (2,), dtype=L.bool, device="meta")
L.randint_like(L.rand(3, 4), 1.5)
L.randint_like(L.rand(3, 4), True)
L.randint_like(L.rand(3, 4), 1, 1.5)
L.randint_like(L.rand(3, 4), high=1.5)
L.randint_like(L.rand(3, 4), L.tensor(3.0))
L.randint_like(L.rand(3, 4), L.tensor([3, 4, 5, 6]))
L.randint_like(L.zeros(2, dtype=L.bool), 3)
L.randint_like(L.zeros(2, dtype=L.uint8), 300)
L.randperm(True)
L.randperm(1.5)
L.randperm(L.tensor(3))
L.randperm(L.tensor(3.0))
L.randperm(3, dtype=L.bool)
L.randperm(0, dtype=L.bool)
L.randperm(3, dtype=L.complex64)
L.randperm(128, dtype=L.int8)
L.randperm(129, dtype=L.int8)
L.randperm(2049, dtype=L.float16)
L.randperm(2050, dtype=L.float16)
L.randperm(2 ** 24 + 2, dtype=L.float32)
L.randperm(3, dtype=L.bool, device="meta")
L.normal(0.0, -1.0, (2,))
L.normal(0.0, 1.0, (2.5,))
L.normal(0.0, 1.0, 2)
L.normal(L.tensor(0.0), L.tensor(1.0), (2,))
L.normal(L.zeros(2), L.tensor(1.0), (2,))
L.rand(3, 4).geometric_()
L.rand(3, 4).uniform_(from_=0)
L.rand(3, 4).uniform_(1, to=2)
L.rand(3, 4).uniform_(**{"from": 1, "to": 2})
L.rand(3, 4).uniform_(1, **{"from": 1})
L.rand(3, 4).bernoulli_(L.ones(2) * 0.5)
L.rand(3, 4).bernoulli_(L.ones(4) * 0.5)
""")


@pytest.mark.parametrize("expression", RANDOM_ARGUMENTS)
def test_random_arguments(expression):
    _same(_run(expression), values=False)


# ---------------------------------------------------------------- numbers of subclasses

SUBCLASS_NUMBERS = _cases("""
L.ones(2) * Level.TWO
Level.TWO * L.ones(2)
L.ones(2) + Level.TWO
L.ones(2) / Level.TWO
L.ones(2) ** Level.TWO
L.ones(2, dtype=L.int32) * Level.TWO
L.ones(2, dtype=L.int32) / Level.TWO
L.ones(2).add(Level.TWO)
L.add(L.ones(2), Level.TWO)
L.ones(2).clamp(Level.TWO)
L.ones(2) * Count(3)
L.ones(2, dtype=L.int32) * Count(3)
L.ones(2) * Weight(2.5)
L.ones(2, dtype=L.int32) * Weight(2.5)
L.ones(2, dtype=L.float16) * Weight(2.5)
L.ones(2) * np.int64(2)
L.ones(2) * np.float64(2)
L.ones(2, dtype=L.int32) * np.float32(2)
L.where(L.ones(2) > 0, L.ones(2), Level.TWO)
""")


@pytest.mark.parametrize("expression", SUBCLASS_NUMBERS)
def test_subclass_numbers(expression):
    _same(_run(expression))


# ---------------------------------------------------------------- the parser's messages

PARSER_MESSAGES = _cases("""
L.zeros(2.5)
L.zeros((2.5,))
L.zeros(2, 2.5)
L.zeros((2, 2.5))
L.zeros([2, True])
L.zeros(True)
L.zeros((True, 2))
L.zeros(size=(2.5,))
L.zeros(L.tensor(2.0))
L.zeros((L.tensor(2.0),))
L.zeros(2, L.tensor(2.0))
L.zeros(np.float64(2))
L.ones(2.5)
L.empty(2.5)
L.rand(2.5)
L.rand((2.5,))
L.rand(2, 2.5)
L.randn(2.5)
L.full((2.5,), 1.0)
L.ones(2, 2).new_full((2.5,), 1)
L.ones(2, 2).new_zeros(2.5)
L.ones(3, 4).unsafe_split(1.5)
L.unsafe_split(L.ones(3, 4), 1.5)
L.ones(3, 4).unsafe_split(1, 0.5)
L.ones(3, 4).unsafe_chunk(2.5)
L.unsafe_chunk(L.ones(3, 4), 2.5)
L.ones(3, 4).unsafe_chunk(2, 1.5)
L.ones(3, 4).chunk(2.5)
L.ones(3, 4).chunk(2, 1.5)
L.chunk(L.ones(3, 4), 2, 1.5)
L.ones(3, 4).tile((2.5,))
L.tile(L.ones(3, 4), (2.5,))
L.ones(3, 4).tile(2.5)
L.ones(3, 4).diagonal(1.5)
L.diagonal(L.ones(3, 4), 1.5)
L.ones(3, 4).diagonal(0, 0.5)
L.ones(3, 4).transpose(0.5, 1)
L.transpose(L.ones(3, 4), 0.5, 1)
L.ones(3, 4).transpose(0, True)
L.ones(3, 4).transpose(0, L.tensor(1))
L.ones(3, 4).sum(1.5)
L.sum(L.ones(3, 4), 1.5)
L.ones(3, 4).sum((0, 1.5))
L.ones(3, 4).sum(0, True)
L.ones(3, 4).mean(1.5)
L.mean(L.ones(3, 4), 1.5)
L.ones(3, 4).squeeze(1.5)
L.squeeze(L.ones(3, 4), 1.5)
L.ones(3, 4).flip(True)
L.ones(3, 4).flip(0.5)
L.flip(L.ones(3, 4), (0.5,))
L.ones(3, 4).unsqueeze(True)
L.ones(3, 4).unsqueeze(0.5)
L.ones(3, 4).select(True, 0)
L.ones(3, 4).select(0, 0.5)
L.select(L.ones(3, 4), 0, 0.5)
L.ones(3, 4).squeeze(True)
L.ones(3, 4).roll(1, True)
L.ones(3, 4).roll(1.5)
L.roll(L.ones(3, 4), 1, 0.5)
L.ones(3, 4).flatten(True)
L.flatten(L.ones(3, 4), 0.5)
L.ones(3, 4).split(np.int64(2))
L.arange(12.0).reshape(3, 4).split(L.tensor(2))
L.arange(12.0).reshape(3, 4).view(L.tensor(12))
L.arange(12.0).reshape(3, 4).reshape(L.tensor(12))
L.linspace(0, 1, 2.5)
L.linspace(0.0, 1, True)
L.linspace(0, 1, L.tensor(3.0))
L.linspace(0, 1, L.tensor(3))
L.logspace(0, 1, 2.5)
L.eye(True)
L.eye(2.5)
L.eye(2, True)
L.eye(2, 2.5)
L.eye(np.int64(2), L.tensor(3))
L.tril_indices(3, 3, True)
L.triu_indices(True, 3)
L.ones(3, 4).size(L.tensor(1.0))
L.ones(3, 4).size(L.tensor([1]))
L.ones(3, 4).stride(L.tensor(True))
""")


@pytest.mark.parametrize("expression", PARSER_MESSAGES)
def test_parser_messages(expression):
    _same(_run(expression))


# ---------------------------------------------------------------- unsafe_split's pieces

UNSAFE_PIECES = _cases("""
L.arange(12.0).reshape(3, 4).unsafe_chunk(2, 1)
L.arange(12.0).reshape(3, 4).unsafe_split(3, 1)
L.arange(12.0).reshape(3, 4).t().unsafe_split(2, 0)
L.arange(12.0).reshape(3, 4).unsafe_split_with_sizes([1, 3], 1)
[p.storage_offset() for p in L.arange(12.0).reshape(3, 4).unsafe_chunk(2, 1)]
[p.is_contiguous() for p in L.arange(12.0).reshape(3, 4).unsafe_chunk(2, 1)]
[p._base is None for p in L.arange(12.0).reshape(3, 4).unsafe_chunk(2, 1)]
""")


@pytest.mark.parametrize("expression", UNSAFE_PIECES)
def test_unsafe_split_pieces(expression):
    _same(_run(expression))


def test_unsafe_split_pieces_share_memory_and_differentiate():
    """The pieces are in the input's memory (a write shows through, as in PyTorch) and
    their gradients join as split's do."""
    for L in LIBS:
        x = L.arange(12.0).reshape(3, 4)
        a, b = x.unsafe_chunk(2, 1)
        a[0, 0] = 100.0
        assert float(x[0, 0]) == 100.0
    got = []
    for L in LIBS:
        x = L.arange(12.0).reshape(3, 4).requires_grad_()
        a, b = x.unsafe_chunk(2, 1)
        (a * 2 + b * 3).sum().backward()
        got.append((type(a.grad_fn).__name__, x.grad.numpy().tolist()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- sparse legacy classes

SPARSE_TYPES = _cases("""
L.sparse.FloatTensor
L.sparse.FloatTensor.dtype
L.sparse.FloatTensor.is_sparse
L.sparse.FloatTensor.is_cuda
L.sparse.FloatTensor.layout
sorted(n for n in dir(L.sparse) if n.endswith("Tensor") and "Sparse" not in n)
L.sparse.FloatTensor()
L.sparse.FloatTensor(2, 3)
L.sparse.FloatTensor(L.Size([2, 3]))
L.sparse.FloatTensor(2, 3).is_sparse
L.sparse.FloatTensor(2, 3)._nnz()
L.sparse.FloatTensor(L.tensor([[0, 1]]), L.tensor([1.0, 2.0]), L.Size([3]))
L.sparse.FloatTensor(L.tensor([[0, 1]]), L.tensor([1.0, 2.0]))
L.sparse.FloatTensor(L.tensor([[0, 1]]), L.tensor([1, 2]), L.Size([3]))
L.sparse.FloatTensor([1.0, 2.0])
L.sparse.FloatTensor(L.ones(2))
L.sparse.LongTensor(2).dtype
L.sparse.BFloat16Tensor(2).dtype
isinstance(L.sparse.FloatTensor(2), L.sparse.FloatTensor)
isinstance(L.sparse.FloatTensor(2), L.FloatTensor)
isinstance(L.sparse.FloatTensor(2), L.sparse.DoubleTensor)
isinstance(L.ones(2), L.sparse.FloatTensor)
L.sparse.FloatTensor(2).type()
L.sparse.DoubleTensor(2).type()
""")


@pytest.mark.parametrize("expression", SPARSE_TYPES)
def test_sparse_legacy_classes(expression):
    _same(_run(expression))


def test_sparse_legacy_constructor_warns_at_the_caller():
    """Each form warns (once per process, unless warnings are always given), naming
    `sparse_coo_tensor` and the caller's line."""
    for L in LIBS:
        L.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                L.sparse.FloatTensor(2, 3)
        finally:
            L.set_warn_always(False)
        assert len(caught) == 1
        assert caught[0].filename == __file__
        assert str(caught[0].message).startswith(
            "torch.sparse.SparseTensor(shape, *, device=) is deprecated.  Please use "
            "torch.sparse_coo_tensor(shape, dtype=, device=).")


NARROW_CASES = {
    "method bool dim": lambda T: T.ones(3, 4).narrow(True, 0, 1),
    "function bool dim": lambda T: T.narrow(T.ones(3, 4), True, 0, 1),
    "bool start": lambda T: T.ones(3, 4).narrow(1, True, 1),
    "method float dim": lambda T: T.ones(3, 4).narrow(1.0, 0, 1),
    "function float dim": lambda T: T.narrow(T.ones(3, 4), 1.0, 0, 1),
    "float length": lambda T: T.ones(3, 4).narrow(1, 0, 1.5),
    "float start": lambda T: T.ones(3, 4).narrow(1, 0.5, 1),
    "tensor start": lambda T: T.ones(3, 4).narrow(1, T.tensor(1), 2),
    "float tensor start": lambda T: T.ones(3, 4).narrow(1, T.tensor(1.0), 2),
    "bool length": lambda T: T.narrow(T.ones(3, 4), 1, 0, True),
}


@pytest.mark.parametrize("name", list(NARROW_CASES))
def test_narrow_refuses_bools_and_floats_with_torchs_overloads(name):
    # (a bool dim, start or length ran as 1 before: torch lists its two overloads)
    _same(NARROW_CASES[name])


NORM_CASES = {
    "bool dim": lambda T: T.arange(12.).reshape(3, 4).norm(2, True),
    "function bool dim": lambda T: T.norm(T.arange(12.).reshape(3, 4), 2, True),
    "bool in a tuple": lambda T: T.arange(12.).reshape(3, 4).norm(2, (True,)),
    "bool after an int": lambda T: T.arange(12.).reshape(3, 4).norm(2, (0, True)),
    "float dim": lambda T: T.arange(12.).reshape(3, 4).norm(2, 1.5),
    "float after an int": lambda T: T.arange(12.).reshape(3, 4).norm(2, (1, 1.5)),
    "fro with a bool dim": lambda T: T.arange(12.).reshape(3, 4).norm("fro", True),
    "keyword bool dim": lambda T: T.arange(12.).reshape(3, 4).norm(dim=True),
    "tensor dim": lambda T: T.arange(12.).reshape(3, 4).norm(2, T.tensor(1)),
    "list dim": lambda T: T.arange(12.).reshape(3, 4).norm(2, [1]),
}


@pytest.mark.parametrize("name", list(NORM_CASES))
def test_norm_reads_its_dims_as_torchs_parser(name):
    # (a bool dim ran as 1 and a bool after an int raised: torch refuses the first and
    # reads the second as an int)
    _same(NORM_CASES[name])
