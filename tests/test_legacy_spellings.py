"""Older spellings real code still uses, against PyTorch: the typed constructors
(`FloatTensor`, `LongTensor`, ...), `size=` as a keyword of the factories, and a `range` as
an index."""

import numpy as np
import pytest
import torch

import fusegrad

TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
         "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


UNINITIALISED = ("(5)", "(2, 3)", "(T.Size([2, 3]))", "(T.Size([]))", "(3, device='cpu')")


def _outcome(lib, expr: str):
    """The result of `expr` run against `lib` as (shape, dtype, values) or (error, message)."""
    try:
        r = eval(expr, {"T": lib, "np": np})
    except Exception as e:  # noqa: BLE001 (the error is what is compared)
        return type(e).__name__, str(e).replace("torch.", "fusegrad.")
    if isinstance(r, (bool, str)):
        return r
    if expr.endswith(UNINITIALISED):
        return tuple(r.shape), str(r.dtype).split(".")[-1]  # PyTorch leaves the memory as is
    return tuple(r.shape), str(r.dtype).split(".")[-1], r.float().tolist()


CASES = [f"T.{name}{args}" for name in TYPES for args in (
    "()", "(5)", "(2, 3)", "(T.Size([2, 3]))", "(T.Size([]))", "(())", "([1, 0, 2])",
    "([[1, 2], [3, 4]])", "((1, 2))", "([])", "(np.array([1, 0]))", "(np.array([1.5, 2.0]))",
    "(2.5)", "(True)", "(-1)", "(3, 'a')", "(2, dtype=T.float64)", "([1], requires_grad=True)",
    "(3, device='cpu')", "(T.zeros(2), 3)", "([1], 3)", "(3, [1])", "(None)",
    "(T.zeros(2), device='cpu')")] + [
    "T.FloatTensor(T.tensor([1, 2]))", "T.LongTensor(T.zeros(2))",
    "T.DoubleTensor(T.zeros(2, dtype=T.float16))", "T.FloatTensor(T.tensor([1.0, 2.0]))",
    "T.Tensor(2, 3)", "T.Tensor([1, 2])", "T.Tensor(T.tensor([1, 2]))",
    "isinstance(T.zeros(2), T.FloatTensor)", "isinstance(T.zeros(2), T.DoubleTensor)",
    "isinstance(T.zeros(2, dtype=T.int64), T.LongTensor)", "isinstance([1.0], T.FloatTensor)",
    "isinstance(T.nn.Parameter(T.zeros(2)), T.FloatTensor)",
    "issubclass(T.FloatTensor, T.Tensor)", "T.zeros(2).type(T.DoubleTensor)",
    "T.zeros(2).type(T.LongTensor)", "T.ones(2, dtype=T.int32).type()",
    "T.FloatTensor.dtype == T.float32", "T.LongTensor.is_cuda", "T.FloatTensor.__name__",
]


@pytest.mark.parametrize("expr", CASES)
def test_typed_constructors_as_pytorch(expr):
    assert _outcome(fusegrad, expr) == _outcome(torch, expr)


def test_typed_constructor_from_a_tensor_is_an_alias_with_history():
    for lib in (torch, fusegrad):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.FloatTensor(x)
        assert y._base is x and type(y.grad_fn).__name__ == "AliasBackward0"
        (y * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]


FACTORY_CASES = [
    "T.zeros()", "T.ones()", "T.empty()", "T.rand()", "T.randn()", "T.zeros(())",
    "T.rand(2, size=(2,))", "T.zeros(2, size=(2,))", "T.zeros(size=3)", "T.rand(size=[2])",
    "T.ones(size=(2,), dtype=T.int64)", "T.empty(size=(0,))", "T.zeros(size=T.Size([2, 1]))",
    "T.randn(size=(2, 3), generator=None)", "T.randint(0, 5, size=(4,))",
    "T.full(size=(2,), fill_value=1.5)", "T.ones(size=(2,), requires_grad=True)",
]


@pytest.mark.parametrize("expr", FACTORY_CASES)
def test_size_keyword_as_pytorch(expr):
    got, want = _outcome(fusegrad, expr), _outcome(torch, expr)
    if expr.startswith("T.rand") and isinstance(want[0], tuple):
        got, want = got[:2], want[:2]  # random values: shape and dtype
    assert got == want


def test_range_as_index_reads_writes_and_differentiates():
    for_both = {}
    for lib in (torch, fusegrad):
        x = lib.zeros(4, 3)
        x[range(3), lib.tensor([0, 1, 2])] = 1.0
        x[range(0)] = 5.0
        x[[]] = 7.0
        y = lib.arange(12.0).reshape(4, 3).requires_grad_()
        out = y[range(1, 3)] * 2 + y[:, range(2)].sum() + y[range(-1, -3, -1)].sum()
        out.sum().backward()
        for_both[lib] = (x.tolist(), tuple(x[range(0)].shape), out.tolist(), y.grad.tolist())
    assert for_both[fusegrad] == for_both[torch]
