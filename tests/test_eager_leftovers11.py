"""Eager fidelity against torch 2.13: float64 `uniform_` and `normal_` over ranges near
float64's largest value (no NaN), Python ints beyond int64 and uint64 as arguments, movedim's
`source` (dims, not the tensor other functions give that name), PyTorch's argument messages
(`dtype=` on std/var/any/all/count_nonzero, `topk(1.5)`, `softmax(x, None)`, `torch.ger`,
`t @ [list]`, `F.linear` missing an argument), `reversed(t)`, and a sweep of common functions
and methods (boolean masks, scatter and gather, mixed dtypes in where/clamp/cat/stack, arange
and linspace edges, conversions, NaN comparisons, integer division signs, bitwise ops)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import outcome

import fusegrad

LIBS = (torch, fusegrad)


def _outcome(lib, f):
    """What `f(lib)` gives, in comparable form: a tensor's values (as float64, NaN and inf
    kept), dtype, shape, strides, requires_grad and grad_fn name; a tuple's items; a number;
    or the error's type and message."""
    return outcome(lambda: f(lib), _described)


def _described(r):
    if isinstance(r, (tuple, list)):
        return tuple(_described(x) for x in r)
    if isinstance(r, (torch.Tensor, fusegrad.Tensor)):
        fn = r.grad_fn
        values = r.detach()
        if values.is_complex():
            values = (
                torch.view_as_real(values)
                if isinstance(r, torch.Tensor)
                else fusegrad.view_as_real(values)
            )
        values = np.asarray(
            values.to(torch.float64 if isinstance(r, torch.Tensor) else fusegrad.float64).numpy()
        )
        return (
            "tensor",
            str(r.dtype).replace("fusegrad", "torch"),
            tuple(r.shape),
            tuple(r.stride()),
            r.requires_grad,
            None if fn is None else type(fn).__name__,
            values,
        )
    if type(r).__name__ == "Size":
        return ("value", tuple(r))
    return ("value", r)


def _equal(a, b, rtol: float = 1e-6) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not isinstance(b, tuple) or not b or b[0] != "tensor" or a[:6] != b[:6]:
            return False
        return np.allclose(a[6], b[6], rtol=rtol, atol=0, equal_nan=True)
    if (
        isinstance(a, tuple)
        and isinstance(b, tuple)
        and len(a) == len(b)
        and a
        and a[0] not in ("error", "value")
    ):
        return all(_equal(x, y, rtol) for x, y in zip(a, b))
    return a == b


def _same(f, rtol: float = 1e-6) -> None:
    got = [_outcome(lib, f) for lib in LIBS]
    assert _equal(got[0], got[1], rtol), got


# ---------------------------------------------------------------- uniform_ and normal_ bits

# Ranges whose width passes 2**996, where the exact product of the fused multiply-add
# cannot be split as usual (each value came out NaN).
UNIFORM_RANGES = [
    (0.0, 1e301),
    (-1e300, 1e300),
    (1e307, 1.7976931348623157e308),
    (-8.98e307, 8.98e307),
    (-1e-320, 1.7e308),
    (5e-324, 1.79e308),
    (-1.0, 1e305),
    (2.0, 3.0),
]


@pytest.mark.parametrize("n", [5, 40])
@pytest.mark.parametrize("low,high", UNIFORM_RANGES)
def test_uniform_float64_wide_range_bits(low, high, n):
    """float64 `uniform_(low, high)`: torch's values to the bit, finite, within the range."""
    got = []
    for lib in LIBS:
        lib.manual_seed(7)
        got.append(lib.empty(n, dtype=lib.float64).uniform_(low, high).numpy().copy())
    assert np.isfinite(got[1]).all()
    assert ((got[1] >= low) & (got[1] <= high)).all()
    np.testing.assert_array_equal(got[1].view(np.int64), got[0].view(np.int64))


@pytest.mark.parametrize("n", [5, 40])
@pytest.mark.parametrize(
    "mean,std", [(0.0, 1e300), (1e308, 1e300), (0.0, 1e308), (-1e308, 1.7e308), (3.0, 2.0)]
)
def test_normal_float64_huge_std_bits(mean, std, n):
    """float64 `normal_(mean, std)` with a std past 2**996: torch's bits (inf where the value
    overflows), never NaN."""
    got = []
    for lib in LIBS:
        lib.manual_seed(11)
        got.append(lib.empty(n, dtype=lib.float64).normal_(mean, std).numpy().copy())
    assert not np.isnan(got[1]).any()
    np.testing.assert_array_equal(got[1].view(np.int64), got[0].view(np.int64))


def test_uniform_too_wide_still_refused():
    """A range wider than float64's largest value stays PyTorch's error."""
    _same(lambda lib: lib.empty(3, dtype=lib.float64).uniform_(-1e308, 1e308))


# ---------------------------------------------------------------- Python ints beyond 64 bits

BIG_INTS = [2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, -(2**63), -(2**63) - 1, -(2**64), -(2**70)]


def _x(lib):
    return lib.arange(3)


INT_ARGUMENT_CASES = {
    "int64 add": lambda lib, v: _x(lib) + v,
    "int32 add": lambda lib, v: _x(lib).int() + v,
    "float16 add": lambda lib, v: lib.ones(3, dtype=lib.float16) + v,
    "int fill_": lambda lib, v: _x(lib).fill_(v),
    "float fill_": lambda lib, v: lib.ones(3).fill_(v),
    "full": lambda lib, v: lib.full((2,), v),
    "full float": lambda lib, v: lib.full((2,), v, dtype=lib.float32),
    "clamp": lambda lib, v: _x(lib).clamp(max=v),
    "float clamp": lambda lib, v: lib.ones(3).clamp(max=v),
    "eq": lambda lib, v: _x(lib) == v,
    "lt": lambda lib, v: _x(lib) < v,
    "torch.add": lambda lib, v: lib.add(_x(lib), v),
    "int true divide": lambda lib, v: _x(lib) / v,
    "where": lambda lib, v: lib.where(_x(lib) > 0, _x(lib), v),
    "masked_fill": lambda lib, v: _x(lib).masked_fill(_x(lib) > 0, v),
    "mul": lambda lib, v: _x(lib).mul(v),
    "mul_": lambda lib, v: _x(lib).mul_(v),
    "pow": lambda lib, v: _x(lib).pow(v),
    "rsub": lambda lib, v: v - _x(lib),
    "floor_divide": lambda lib, v: _x(lib) // v,
    "remainder": lambda lib, v: _x(lib) % v,
    "bitwise and": lambda lib, v: _x(lib) & v,
    "setitem int": lambda lib, v: _x(lib).__setitem__(0, v),
    "setitem float": lambda lib, v: lib.ones(3).__setitem__(0, v),
    "setitem uint8": lambda lib, v: lib.ones(3, dtype=lib.uint8).__setitem__(0, v),
    "setitem index": lambda lib, v: lib.ones(3).__setitem__([0], v),
    "tensor": lambda lib, v: lib.tensor(v),
    "tensor list": lambda lib, v: lib.tensor([1, v]),
    "arange end": lambda lib, v: lib.arange(v, v + 2) if v < 0 else lib.arange(v - 2, v),
    "arange float dtype": lambda lib, v: lib.arange(v, v + 2**62, 2**61, dtype=lib.float64),
}


@pytest.mark.parametrize("value", BIG_INTS, ids=str)
@pytest.mark.parametrize("case", sorted(INT_ARGUMENT_CASES))
def test_python_int_beyond_int64(case, value):
    """A Python int PyTorch's parser cannot take (beyond int64 and uint64: OverflowError "int
    too big to convert" / "can't convert negative int to unsigned"), or one past the dtype's
    range: the same values or error as torch."""
    fn = INT_ARGUMENT_CASES[case]
    _same(lambda lib: fn(lib, value))


@pytest.mark.xfail(
    strict=True,
    reason="float32 and float64 tensors with a Python number take "
    "dispatch's NumPy fast path, which converts any int",
)
@pytest.mark.parametrize("value", [2**64, -(2**63) - 1], ids=str)
def test_python_int_beyond_int64_float_fast_path(value):
    """`float_tensor + 2**70`: PyTorch's OverflowError."""
    _same(lambda lib: lib.ones(3) + value)


# ---------------------------------------------------------------- movedim's source

MOVEDIM_CASES = {
    "ints": lambda L: L.movedim(L.zeros(2, 3, 4), 0, 2),
    "lists": lambda L: L.movedim(L.zeros(2, 3, 4, requires_grad=True), [0, 1], [1, 0]),
    "tuples": lambda L: L.movedim(L.zeros(2, 3, 4), (0, 1), (1, 0)),
    "method": lambda L: L.zeros(2, 3, 4).movedim(0, 2),
    "method lists": lambda L: L.zeros(2, 3, 4).moveaxis([0], [2]),
    "keywords": lambda L: L.movedim(L.zeros(2, 3, 4), source=0, destination=1),
    "all keywords": lambda L: L.movedim(input=L.zeros(2, 3, 4), source=[0], destination=[2]),
    "destination keyword": lambda L: L.movedim(L.zeros(2, 3, 4), 0, destination=1),
    "missing": lambda L: L.movedim(L.zeros(2, 3, 4), 0),
    "int and list": lambda L: L.movedim(L.zeros(2, 3, 4), 0, [1]),
    "float": lambda L: L.movedim(L.zeros(2, 3, 4), 0.5, 1),
    "too many": lambda L: L.movedim(L.zeros(2, 3, 4), 0, 1, 2),
    "method missing": lambda L: L.zeros(2, 3, 4).movedim(0),
    "method too many": lambda L: L.zeros(2, 3, 4).movedim(0, 1, 2),
    "unknown keyword": lambda L: L.movedim(L.zeros(2, 3, 4), 0, dest=1),
    "list input": lambda L: L.movedim([1, 2], 0, 0),
    "0-d tensor dim": lambda L: L.movedim(L.zeros(2, 3, 4), L.tensor(0), 1),
    "repeated source": lambda L: L.movedim(L.zeros(2, 3, 4), [0, 0], [1, 2]),
    "repeated destination": lambda L: L.movedim(L.zeros(2, 3, 4), [0, 1], [2, 2]),
    "out of range": lambda L: L.movedim(L.zeros(2, 3, 4), 5, 0),
    "lengths": lambda L: L.movedim(L.zeros(2, 3, 4), [0, 1], [1]),
    "moveaxis": lambda L: L.moveaxis(L.zeros(2, 3, 4), -1, 0),
    "0-d ints": lambda L: L.movedim(L.tensor(1.0, requires_grad=True), 0, -1),
    "0-d lists": lambda L: L.movedim(L.tensor(1.0, requires_grad=True), [0], [0]),
    "0-d empty lists": lambda L: L.tensor(1.0, requires_grad=True).movedim([], []),
    "0-d out of range": lambda L: L.movedim(L.tensor(1.0), 1, 0),
    "1-d same": lambda L: L.movedim(L.ones(3, requires_grad=True), 0, -1),
    "identity": lambda L: L.movedim(L.ones(2, 3, requires_grad=True), -1, -1),
    "destination out of range": lambda L: L.movedim(L.zeros(2, 3), 0, 2),
    "negative both": lambda L: L.movedim(L.zeros(2, 3, 4, requires_grad=True), -1, -3),
    # (other functions' `source` is a tensor: a list there stays refused)
    "index_copy list source": lambda L: L.index_copy(L.zeros(3), 0, L.tensor([0]), [1.0]),
    "method index_copy list": lambda L: L.zeros(3).index_copy(0, L.tensor([0]), [1.0]),
    "masked_scatter list": lambda L: L.zeros(3).masked_scatter(L.zeros(3) > 0, [1.0]),
    "index_add list": lambda L: L.index_add(L.zeros(3), 0, L.tensor([0]), [1.0]),
    # (an `int` annotated `index` is refused as an int)
    "select_copy list index": lambda L: L.select_copy(L.zeros(2, 3), 0, [1]),
    "select_scatter None index": lambda L: L.zeros(2, 3).select_scatter(L.ones(3), 0, None),
}


@pytest.mark.parametrize("case", sorted(MOVEDIM_CASES))
def test_movedim_arguments(case):
    """movedim's dims as PyTorch's parser reads them, and its messages."""
    _same(MOVEDIM_CASES[case])


def test_movedim_takes_its_dims_by_name():
    """No `*args` workaround: the parameters are named, so the protocol's handlers see them."""
    import inspect

    params = inspect.signature(fusegrad.movedim).parameters
    assert list(params)[:3] == ["input", "source", "destination"]


# ---------------------------------------------------------------- argument messages

MESSAGE_CASES = {
    "std dtype": lambda L: L.ones(2, 3).std(dtype=L.float64),
    "var dtype": lambda L: L.ones(2, 3).var(dtype=L.float64),
    "torch.std dtype": lambda L: L.std(L.ones(2, 3), dtype=L.float64),
    "std dim dtype": lambda L: L.ones(2, 3).std(0, dtype=L.float64),
    "var positional dtype": lambda L: L.var(L.ones(2, 3), 0, True, dtype=L.float64),
    "std correction dtype": lambda L: L.ones(2, 3).std(correction=1, dtype=L.float64),
    "var unbiased dtype": lambda L: L.ones(2, 3).var(unbiased=False, dtype=L.float64),
    "var dtype None": lambda L: L.var(L.ones(2, 3), dtype=None),
    "std_mean dtype": lambda L: L.std_mean(L.ones(2, 3), dtype=L.float64),
    "any dtype": lambda L: L.ones(2).bool().any(dtype=L.bool),
    "all dtype": lambda L: L.ones(2).bool().all(dtype=L.bool),
    "torch.any dtype": lambda L: L.any(L.ones(2).bool(), dtype=L.bool),
    "all dim dtype": lambda L: L.ones(2).bool().all(0, dtype=L.bool),
    "torch.all dims dtype": lambda L: L.all(L.ones(2).bool(), 0, True, dtype=L.bool),
    "all dtype None": lambda L: L.ones(2).bool().all(dtype=None),
    "count_nonzero dtype": lambda L: L.ones(2, 3).count_nonzero(dtype=L.int64),
    "torch.count_nonzero dtype": lambda L: L.count_nonzero(L.ones(2, 3), dtype=L.int64),
    "count_nonzero dim dtype": lambda L: L.ones(2, 3).count_nonzero(0, dtype=L.int64),
    "std still works": lambda L: L.tensor([1.0, 2.0, 4.0], requires_grad=True).std(0),
    "any still works": lambda L: L.tensor([[0, 1]]).any(1, keepdim=True),
    "count_nonzero still works": lambda L: L.tensor([[0, 1]]).count_nonzero(1),
    "topk float": lambda L: L.ones(2, 3).topk(1.5),
    "torch.topk float": lambda L: L.topk(L.ones(2, 3), 1.5),
    "topk float dim": lambda L: L.ones(2, 3).topk(1.5, 0),
    "topk bool": lambda L: L.ones(2, 3).topk(True),
    "topk None": lambda L: L.ones(2, 3).topk(None),
    "topk float-valued": lambda L: L.ones(2, 3).topk(2.0),
    "topk dim float": lambda L: L.ones(2, 3).topk(1, 0.5),
    "topk 0-d tensor k": lambda L: L.tensor([3.0, 1.0, 2.0]).topk(L.tensor(2)),
    "topk axis": lambda L: L.ones(2, 3).topk(1, axis=0),
    "softmax None": lambda L: L.softmax(L.ones(2, 3), None),
    "method softmax None": lambda L: L.ones(2, 3).softmax(None),
    "log_softmax None": lambda L: L.log_softmax(L.ones(2, 3), None),
    "method log_softmax None": lambda L: L.ones(2, 3).log_softmax(None),
    "softmax None dtype": lambda L: L.softmax(L.ones(2, 3), None, L.float64),
    "softmax missing": lambda L: L.softmax(L.ones(2, 3)),
    "method softmax missing": lambda L: L.ones(2, 3).softmax(),
    "softmax axis None": lambda L: L.softmax(L.ones(2, 3), axis=None),
    "softmax axis": lambda L: L.softmax(L.tensor([[1.0, 2.0]], requires_grad=True), axis=1),
    "softmax dim and axis": lambda L: L.softmax(L.ones(2, 3), 1, axis=0),
    "functional softmax None": lambda L: L.nn.functional.softmax(L.ones(2, 3), None),
    "ger int": lambda L: L.ger(L.ones(3), 1),
    "ger int first": lambda L: L.ger(1, L.ones(3)),
    "method ger int": lambda L: L.ones(3).ger(1),
    "ger 2-d": lambda L: L.ger(L.ones(2, 3), L.ones(3)),
    "ger grad": lambda L: L.ger(L.ones(3, requires_grad=True), L.arange(2.0)),
    "matmul list": lambda L: L.ones(2, 3) @ [1.0, 2.0, 3.0],
    "rmatmul list": lambda L: [1.0, 2.0] @ L.ones(2, 3),
    "matmul int": lambda L: L.ones(2, 3) @ 1,
    "matmul None": lambda L: L.ones(2, 3) @ None,
    "matmul dunder list": lambda L: L.ones(2, 3).__matmul__([1.0, 2.0, 3.0]),
    "rmatmul dunder list": lambda L: L.ones(2, 3).__rmatmul__([1.0, 2.0]),
    "method matmul list": lambda L: L.ones(2, 3).matmul([1.0, 2.0, 3.0]),
    "torch.matmul list": lambda L: L.matmul(L.ones(2, 3), [1.0, 2.0, 3.0]),
    "matmul vector": lambda L: L.ones(2, 3, requires_grad=True) @ L.ones(3),
    "matmul matrices": lambda L: L.ones(2, 3, requires_grad=True) @ L.ones(3, 2),
    "linear missing weight": lambda L: L.nn.functional.linear(L.ones(2, 3)),
    "linear None weight": lambda L: L.nn.functional.linear(L.ones(2, 3), None),
    "linear missing both": lambda L: L.nn.functional.linear(),
    "linear weight only": lambda L: L.nn.functional.linear(weight=L.ones(4, 3)),
    "linear int bias": lambda L: L.nn.functional.linear(L.ones(2, 3), L.ones(4, 3), 1),
    "linear int weight": lambda L: L.nn.functional.linear(L.ones(2, 3), 1),
    "linear list bias": lambda L: L.nn.functional.linear(L.ones(2, 3), L.ones(4, 3), [1.0]),
    "linear list input": lambda L: L.nn.functional.linear([[1.0, 2.0, 3.0]], L.ones(4, 3)),
    "linear None input": lambda L: L.nn.functional.linear(None, L.ones(4, 3)),
    "linear keywords": lambda L: L.nn.functional.linear(
        input=L.ones(2, 3, requires_grad=True), weight=L.ones(4, 3)
    ),
    "linear bias": lambda L: L.nn.functional.linear(
        L.ones(2, 3), L.ones(4, 3, requires_grad=True), L.ones(4)
    ),
    "linear bias shape": lambda L: L.nn.functional.linear(
        L.ones(2, 3), L.ones(4, 3), bias=L.ones(5)
    ),
    "linear 0-d": lambda L: L.nn.functional.linear(L.tensor(1.0), L.ones(4, 3)),
}


@pytest.mark.parametrize("case", sorted(MESSAGE_CASES))
def test_argument_messages(case):
    """PyTorch's parser's messages (and the results where the call is valid)."""
    _same(MESSAGE_CASES[case])


# `input` given by keyword is listed among the keywords, as PyTorch's message lists it.
KEYWORD_SPELLED = {
    "prod input= dim=None": lambda L: L.prod(input=L.ones(2, 3), dim=None),
}


@pytest.mark.parametrize("case", sorted(KEYWORD_SPELLED))
def test_argument_messages_for_keywords(case):
    _same(KEYWORD_SPELLED[case])


# ---------------------------------------------------------------- reversed

REVERSED_CASES = {
    "1-d": lambda L: reversed(L.arange(4.0, requires_grad=True)),
    "2-d": lambda L: reversed(L.arange(6).reshape(2, 3)),
    "2-d grad": lambda L: reversed(L.arange(6.0).reshape(2, 3).requires_grad_()),
    "0-d": lambda L: reversed(L.tensor(2.5, requires_grad=True)),
    "empty": lambda L: reversed(L.zeros(0, 2)),
    "list of rows": lambda L: list(reversed(L.arange(6).reshape(3, 2))),
    "transposed": lambda L: reversed(L.arange(6.0).reshape(2, 3).t()),
}


@pytest.mark.parametrize("case", sorted(REVERSED_CASES))
def test_reversed_is_flip(case):
    """`reversed(t)` is `t.flip(0)` (FlipBackward0), a tensor; a 0-d tensor itself."""
    _same(REVERSED_CASES[case])


def test_reversed_0d_is_the_tensor_itself():
    for lib in LIBS:
        t = lib.tensor(2.0)
        assert reversed(t) is t


def test_reversed_reaches_torch_function():
    """`reversed` goes through the `__torch_function__` protocol, as PyTorch's does."""
    seen = {}
    for lib in LIBS:

        class Sub(lib.Tensor):
            names: list = []

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                cls.names.append(getattr(func, "__name__", ""))
                return super().__torch_function__(func, types, args, kwargs or {})

        out = reversed(lib.arange(3.0).as_subclass(Sub))
        assert type(out) is Sub
        assert out.tolist() == [2.0, 1.0, 0.0]
        seen[lib.__name__] = Sub.names
    assert seen["torch"][0] == seen["fusegrad"][0] == "__reversed__"


# ---------------------------------------------------------------- sweep


def _m(lib, grad=False):
    return lib.tensor([[1.5, -2.0, 3.0], [0.0, 4.0, -1.0]], requires_grad=grad)


def _i(lib):
    return lib.tensor([[7, -7, 3], [-3, 0, 5]])


SWEEP = {
    # indexing with bool masks and negative steps
    "bool mask 2-d": lambda L: _m(L, True)[_m(L) > 0],
    "bool mask row": lambda L: _m(L, True)[L.tensor([True, False])],
    "bool mask list": lambda L: _m(L, True)[[True, False]],
    "bool mask wrong shape": lambda L: _m(L)[L.tensor([True, False, True])],
    "bool scalar index": lambda L: _m(L, True)[L.tensor(True)],
    "negative step": lambda L: _m(L)[:, ::-1],
    "mask and slice": lambda L: _m(L, True)[_m(L)[:, 0] > 0, 1:],
    "masked_select": lambda L: L.masked_select(_m(L, True), _m(L) < 2),
    "masked_fill int mask": lambda L: _m(L).masked_fill(L.tensor([[1, 0, 1], [0, 1, 0]]), 0.0),
    "setitem bool mask": lambda L: (lambda t: (t.__setitem__(t > 1, -1.0), t)[1])(_m(L)),
    "index tensor negative": lambda L: _m(L, True)[:, L.tensor([-1, 0])],
    # scatter / gather variants
    "scatter value": lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0], [2]]), 5.0),
    "scatter reduce add": lambda L: L.ones(2, 3).scatter(
        1, L.tensor([[0, 0], [2, 1]]), L.full((2, 2), 2.0), reduce="add"
    ),
    "scatter_reduce amax": lambda L: L.zeros(3).scatter_reduce(
        0, L.tensor([0, 1, 0, 2]), L.tensor([1.0, -2.0, 3.0, 4.0]), "amax", include_self=False
    ),
    "scatter_reduce mean": lambda L: L.ones(3).scatter_reduce(
        0, L.tensor([0, 1, 0, 2]), L.tensor([1.0, -2.0, 3.0, 4.0]), "mean"
    ),
    "scatter_add grad": lambda L: L.zeros(2, 3).scatter_add(
        0, L.tensor([[1, 0, 1]]), _m(L, True)[:1]
    ),
    "gather negative dim": lambda L: L.gather(_m(L, True), -1, L.tensor([[2, 0], [1, 1]])),
    "gather out of range": lambda L: L.gather(_m(L), 1, L.tensor([[3]])),
    "scatter int index dtype": lambda L: L.zeros(3).scatter(0, L.tensor([0], dtype=L.int32), 1.0),
    "index_add alpha": lambda L: L.zeros(3).index_add(
        0, L.tensor([0, 2]), L.tensor([1.0, 2.0]), alpha=3
    ),
    # where / clamp with mixed dtypes
    "where int float": lambda L: L.where(_i(L) > 0, _i(L), _m(L)),
    "where int scalar float": lambda L: L.where(_i(L) > 0, _i(L), 0.5),
    "where bool scalars": lambda L: L.where(_i(L) > 0, True, False),
    "where uint8 int8": lambda L: L.where(_i(L) > 0, _i(L).to(L.uint8), _i(L).to(L.int8)),
    "clamp int float bound": lambda L: _i(L).clamp(min=0.5),
    "clamp int tensor bounds": lambda L: _i(L).clamp(L.tensor(0.5), L.tensor(4)),
    "clamp float int tensor": lambda L: _m(L).clamp(max=L.tensor([1, 2, 3])),
    "clamp min > max": lambda L: _m(L, True).clamp(2.0, 1.0),
    "clamp no bounds": lambda L: _m(L).clamp(),
    # cat / stack dtype promotion
    "cat int float": lambda L: L.cat([_i(L), _m(L)]),
    "cat bool int": lambda L: L.cat([_i(L) > 0, _i(L)], dim=1),
    "cat empty 1-d": lambda L: L.cat([L.tensor([]), _i(L)]),
    "stack int8 uint8": lambda L: L.stack([_i(L).to(L.int8), _i(L).to(L.uint8)]),
    "stack grad": lambda L: L.stack([_m(L, True), _m(L)], dim=-1),
    "cat shape mismatch": lambda L: L.cat([_m(L), L.ones(2, 2)]),
    "hstack mixed": lambda L: L.hstack([L.tensor([1, 2]), L.tensor([0.5])]),
    # arange / linspace edge cases
    "arange float step": lambda L: L.arange(0, 1, 0.1),
    "arange negative": lambda L: L.arange(5, 0, -2),
    "arange int64 dtype float": lambda L: L.arange(3, dtype=L.float16),
    "arange empty": lambda L: L.arange(2, 2),
    "arange wrong sign": lambda L: L.arange(0, 5, -1),
    "linspace 1": lambda L: L.linspace(2, 5, 1),
    "linspace 0": lambda L: L.linspace(2, 5, 0),
    "linspace int dtype": lambda L: L.linspace(0, 10, 4, dtype=L.int64),
    "linspace negative steps": lambda L: L.linspace(0, 1, -1),
    "logspace base 2": lambda L: L.logspace(0, 3, 4, base=2),
    # to() / type() conversions
    "to int truncates": lambda L: L.tensor([-1.7, 2.9]).to(L.int32),
    "to uint8 wraps": lambda L: L.tensor([-1, 256]).to(L.uint8),
    "to bool": lambda L: L.tensor([0.0, -0.0, 0.1, float("nan")]).to(L.bool),
    "to same dtype is self": lambda L: (lambda t: t.to(L.float32) is t)(_m(L)),
    "to copy": lambda L: (lambda t: t.to(L.float32, copy=True) is t)(_m(L)),
    "type string": lambda L: _m(L, True).type("torch.DoubleTensor"),
    "type none": lambda L: _m(L).type(),
    "type dtype": lambda L: _m(L, True).type(L.int16),
    "double grad": lambda L: _m(L, True).double(),
    "to other tensor": lambda L: _m(L).to(_i(L)),
    "half round": lambda L: L.tensor([65519.0, 65520.0, 1e-8]).half(),
    # comparison of NaNs
    "eq nan": lambda L: L.tensor([float("nan"), 1.0]) == L.tensor([float("nan"), 1.0]),
    "ne nan": lambda L: L.tensor([float("nan")]) != float("nan"),
    "lt nan": lambda L: L.tensor([float("nan"), 1.0]) < 2,
    "maximum nan": lambda L: L.maximum(L.tensor([float("nan"), 1.0]), L.tensor([0.0, 2.0])),
    "fmax nan": lambda L: L.fmax(L.tensor([float("nan"), 1.0]), L.tensor([0.0, float("nan")])),
    "max nan": lambda L: L.tensor([1.0, float("nan"), 3.0]).max(),
    "argmax nan": lambda L: L.tensor([1.0, float("nan"), 3.0]).argmax(),
    "sort nan": lambda L: L.sort(L.tensor([3.0, float("nan"), -1.0, float("nan")])),
    "equal nan": lambda L: L.equal(L.tensor([float("nan")]), L.tensor([float("nan")])),
    "isclose nan": lambda L: L.isclose(
        L.tensor([float("nan")]), L.tensor([float("nan")]), equal_nan=True
    ),
    "unique nan": lambda L: L.unique(L.tensor([float("nan"), 1.0, float("nan")])),
    # integer division and remainder signs
    "floor_divide ints": lambda L: _i(L) // L.tensor([2, -2, 2]),
    "floor_divide int scalar": lambda L: _i(L) // -2,
    "div trunc": lambda L: L.div(_i(L), -2, rounding_mode="trunc"),
    "div floor": lambda L: L.div(_i(L), L.tensor([2, -2, 4]), rounding_mode="floor"),
    "div int true": lambda L: _i(L) / 2,
    "remainder ints": lambda L: _i(L) % L.tensor([2, -2, 4]),
    "remainder scalar negative": lambda L: _i(L) % -3,
    "fmod ints": lambda L: L.fmod(_i(L), -3),
    "remainder float": lambda L: L.remainder(_m(L, True), -1.5),
    "fmod float": lambda L: L.fmod(_m(L, True), 1.5),
    "rfloordiv": lambda L: 7 // _i(L)[:, :1],
    "int div by zero": lambda L: _i(L) // 0,
    "int remainder zero": lambda L: _i(L) % 0,
    "remainder int float scalar": lambda L: _i(L) % 2.5,
    # bitwise ops
    "bitwise and": lambda L: _i(L) & 6,
    "bitwise or bool": lambda L: (_i(L) > 0) | (_i(L) < -5),
    "bitwise xor int8": lambda L: _i(L).to(L.int8) ^ L.tensor([1, 2, 3], dtype=L.int8),
    "bitwise not": lambda L: ~_i(L),
    "bitwise not bool": lambda L: ~(_i(L) > 0),
    "bitwise float": lambda L: _m(L) & 1,
    "left shift": lambda L: _i(L) << 2,
    "right shift negative": lambda L: _i(L) >> 1,
    "shift uint8 overflow": lambda L: L.tensor([200], dtype=L.uint8) << 1,
    "bitwise and mixed": lambda L: _i(L).to(L.int16) & _i(L).to(L.uint8),
    "bitwise_left_shift big": lambda L: L.bitwise_left_shift(L.tensor([1]), 70),
    "index_put accumulate": lambda L: L.zeros(3).index_put(
        (L.tensor([0, 0, 2]),), L.tensor(1.5), accumulate=True
    ),
    "put_ negative": lambda L: L.zeros(2, 2).put_(L.tensor([-1, 0]), L.tensor([3.0, 4.0])),
    "take": lambda L: L.take(
        L.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True), L.tensor([3, -4])
    ),
    "nonzero as_tuple": lambda L: L.nonzero(L.tensor([[0, 1], [2, 0]]), as_tuple=True),
    "argwhere": lambda L: L.argwhere(L.tensor([[0, 1], [2, 0]])),
    "scatter out of range": lambda L: L.zeros(3).scatter(0, L.tensor([5]), 1.0),
    "gather dim count": lambda L: L.gather(L.zeros(2, 3), 1, L.tensor([0, 1])),
    "where 0-d condition": lambda L: L.where(L.tensor(True), L.ones(2), L.zeros(2, 1)),
    "where cond float": lambda L: L.where(L.tensor([1.0, 0.0]), L.ones(2), L.zeros(2)),
    "maximum int float": lambda L: L.maximum(L.tensor([1, 5]), L.tensor([2.5, 0.5])),
    "minimum bool int": lambda L: L.minimum(L.tensor([True, False]), L.tensor([3, -1])),
    "float floor_divide zero": lambda L: L.tensor([1.0, -1.0, 0.0]) // 0,
    "float remainder zero": lambda L: L.tensor([1.0, -1.0]) % 0.0,
    "int pow negative": lambda L: L.tensor([2, 1, -1]) ** -1,
    "int pow tensor negative": lambda L: L.tensor([2, 1]) ** L.tensor([-1, 2]),
    "bool and int": lambda L: L.tensor([True, False]) & L.tensor([3, 3]),
    "logical_and float": lambda L: L.logical_and(L.tensor([0.5, 0.0]), L.tensor([2, 3])),
    "sign -0": lambda L: L.sign(L.tensor([-0.0, 0.0, -2.0])),
    "round half even": lambda L: L.round(L.tensor([0.5, 1.5, 2.5, -0.5])),
    "round decimals": lambda L: L.round(L.tensor([1.2345, -2.5551]), decimals=2),
    "cumsum int": lambda L: L.cumsum(L.tensor([1, 2], dtype=L.int8), 0),
    "sum bool": lambda L: L.tensor([True, True]).sum(),
    "mean int": lambda L: L.tensor([1, 2]).mean(),
    "prod int8": lambda L: L.tensor([100, 100], dtype=L.int8).prod(),
    "item multi": lambda L: L.ones(2).item(),
    "int of tensor": lambda L: int(L.tensor([2.7])),
    "bool of two": lambda L: bool(L.ones(2)),
    "float of int": lambda L: float(L.tensor(3)),
    "to str device dtype": lambda L: L.ones(2).to("cpu", L.int16),
    "to keyword dtype copy": lambda L: L.ones(2, requires_grad=True).to(dtype=L.float64, copy=True),
    "type int tensor": lambda L: L.ones(2).type(L.IntTensor),
    "type bad string": lambda L: L.ones(2).type("torch.FooTensor"),
    "eq broadcast error": lambda L: L.ones(2) == L.ones(3),
    "int eq float scalar": lambda L: L.tensor([1, 2]) == 1.0,
    "int lt float scalar": lambda L: L.tensor([1, 2]) < 1.5,
    "uint8 compare negative": lambda L: L.tensor([1, 200], dtype=L.uint8) > -1,
    "cat dim out of range": lambda L: L.cat([L.ones(2), L.ones(2)], dim=1),
    "cat 0-d": lambda L: L.cat([L.tensor(1.0), L.tensor(2.0)]),
    "stack shape mismatch": lambda L: L.stack([L.ones(2), L.ones(3)]),
    "cat grad names": lambda L: L.cat([L.ones(2, requires_grad=True), L.zeros(1, dtype=L.float64)]),
    "arange float32 precision": lambda L: L.arange(-1, 1, 0.3, dtype=L.float32),
    "arange int float step": lambda L: L.arange(0, 5, 1.5, dtype=L.int32),
    "linspace reversed": lambda L: L.linspace(5, -5, 6),
    "linspace float16": lambda L: L.linspace(0, 1, 5, dtype=L.float16),
    "linspace tensor ends": lambda L: L.linspace(L.tensor(0.0), L.tensor(1.0), 3),
    "clamp_ int float": lambda L: L.tensor([1, 5]).clamp_(max=2.5),
    "clamp bool": lambda L: L.tensor([True, False]).clamp(0, 1),
    "clip uint8 negative": lambda L: L.tensor([1, 200], dtype=L.uint8).clip(-1, 100),
    "masked_fill float into int": lambda L: L.tensor([1, 2]).masked_fill(
        L.tensor([True, False]), 2.5
    ),
    "masked_fill tensor value": lambda L: L.ones(2, requires_grad=True).masked_fill(
        L.tensor([True, False]), L.tensor(3.0)
    ),
    "index bool all false": lambda L: L.ones(2, 3)[L.tensor([False, False])],
    "index bool numpy": lambda L: L.arange(4)[L.tensor([True, False, True, False]).numpy()],
    "index list of lists": lambda L: L.arange(6).reshape(2, 3)[[[0, 1], [1, 0]]],
    "index ellipsis none": lambda L: L.arange(6).reshape(2, 3)[..., None, 1].stride(),
    "index negative out": lambda L: L.arange(3)[-4],
    "narrow negative": lambda L: L.arange(6).narrow(0, -3, 2),
    "flip strides": lambda L: L.arange(6).reshape(2, 3).flip(1),
    "bitwise shift negative amount": lambda L: L.tensor([8]) >> -1,
    "bitwise not uint8": lambda L: ~L.tensor([0, 255], dtype=L.uint8),
    "bitwise_and scalar bool": lambda L: L.tensor([True, False]) & True,
    "bitwise xor float tensor": lambda L: L.ones(2) ^ L.ones(2),
    "div int by int tensor zero": lambda L: L.tensor([1, 0, -1]) / L.tensor([0, 0, 0]),
    "trunc div negative scalar float": lambda L: L.div(
        L.tensor([-7.5, 7.5]), 2, rounding_mode="trunc"
    ),
    "div bad rounding": lambda L: L.div(L.ones(2), 2, rounding_mode="round"),
    "scatter src dtype mismatch": lambda L: L.zeros(3).scatter(
        0, L.tensor([0]), L.tensor([1.0], dtype=L.float64)
    ),
    "index_add dtype mismatch": lambda L: L.zeros(3).index_add(
        0, L.tensor([0]), L.tensor([1], dtype=L.int64)
    ),
    "gather index float": lambda L: L.gather(L.zeros(3), 0, L.tensor([0.0])),
    "scatter_ index int32": lambda L: L.zeros(3).scatter_(
        0, L.tensor([1], dtype=L.int32), L.ones(1)
    ),
    "stack empty": lambda L: L.stack([]),
    "cat empty list": lambda L: L.cat([]),
    "cat tuple of one": lambda L: L.cat((L.ones(2, requires_grad=True),)),
    "tensor mixed list": lambda L: L.tensor([1, 2.5, True]),
    "tensor bool int": lambda L: L.tensor([True, 2]),
    "tensor nested ragged": lambda L: L.tensor([[1, 2], [3]]),
    "complex lt": lambda L: L.tensor([1 + 1j]) < L.tensor([2 + 0j]),
    "complex bitwise": lambda L: L.tensor([1 + 1j]) & 1,
    "complex floor_divide": lambda L: L.tensor([1 + 1j]) // 2,
    "complex remainder": lambda L: L.tensor([1 + 1j]) % 2,
    "complex clamp": lambda L: L.tensor([1 + 1j]).clamp(0, 1),
    "complex max": lambda L: L.tensor([1 + 1j]).max(),
    "where complex float": lambda L: L.where(L.tensor([True, False]), L.tensor([1j, 2j]), 1.5),
    "int tensor float add_": lambda L: L.tensor([1, 2]).add_(1.5),
    "int tensor div_": lambda L: L.tensor([1, 2]).div_(2),
    "bool tensor add bool": lambda L: L.tensor([True]) + L.tensor([True]),
    "bool sub": lambda L: L.tensor([True]) - L.tensor([True]),
    "neg bool": lambda L: -L.tensor([True]),
    "uint8 neg": lambda L: -L.tensor([1], dtype=L.uint8),
    "int abs min": lambda L: L.tensor([-128], dtype=L.int8).abs(),
    "mul bool scalar": lambda L: L.tensor([True, False]) * 2,
    "int8 + 200": lambda L: L.tensor([1], dtype=L.int8) + 200,
    "int8 + 200 tensor": lambda L: L.tensor([1], dtype=L.int8) + L.tensor(200),
    "float16 + float32 0-d": lambda L: L.ones(2, dtype=L.float16) + L.tensor(1e5),
    "int + 0-d float64": lambda L: L.tensor([1, 2]) + L.tensor(0.5, dtype=L.float64),
    "float32 + 0-d float64 grad": lambda L: (
        L.ones(2, requires_grad=True) + L.tensor(0.5, dtype=L.float64)
    ),
    "uint8 - int8": lambda L: L.tensor([1], dtype=L.uint8) - L.tensor([2], dtype=L.int8),
    "any float": lambda L: L.tensor([0.0, 0.5]).any(),
    "all uint8": lambda L: L.tensor([1, 2], dtype=L.uint8).all(),
    "all dim tuple": lambda L: L.tensor([[True, False]]).all(dim=(0, 1)),
    "std int": lambda L: L.tensor([1, 2]).std(),
    "var correction 2": lambda L: L.tensor([1.0, 2.0, 4.0], requires_grad=True).var(correction=2),
    "std single": lambda L: L.tensor([1.0]).std(),
    "norm int": lambda L: L.tensor([3, 4]).norm(),
    "norm p inf dims": lambda L: L.ones(2, 3).norm(p=float("inf"), dim=(0, 1)),
    "topk too big": lambda L: L.ones(3).topk(4),
    "topk largest false": lambda L: L.tensor([3.0, 1.0, 2.0], requires_grad=True).topk(
        2, largest=False
    ),
    "softmax int": lambda L: L.tensor([1, 2]).softmax(0),
    "softmax dtype": lambda L: L.tensor([1.0, 2.0]).softmax(0, dtype=L.float64),
    "log_softmax half": lambda L: L.tensor([1.0, 2.0], dtype=L.float16).log_softmax(0),
    "movedim negative": lambda L: L.zeros(2, 3, 4).movedim(-1, 0).stride(),
    "movedim repeated dst": lambda L: L.movedim(L.zeros(2, 3, 4), [0, 1], [2, 2]),
    "moveaxis lists grad": lambda L: L.moveaxis(
        L.zeros(2, 3, 4, requires_grad=True), [0, 2], [2, 0]
    ),
    "reversed 1-d": lambda L: reversed(L.arange(4.0, requires_grad=True)),
    "reversed 2-d": lambda L: reversed(L.arange(6).reshape(2, 3)),
    "reversed 0-d": lambda L: reversed(L.tensor(2.5)),
}


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_matches_torch(name):
    """Values, dtype, shape, strides, requires_grad and grad_fn, or the error, as torch's."""
    _same(SWEEP[name], rtol=1e-5)
