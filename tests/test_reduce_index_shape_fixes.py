"""Parity with PyTorch for fixes to reductions, selection, indexing and shape ops found by a
differential fuzzer: `isreal` and `float_power` of complex tensors; `scatter_reduce`'s
identities for bool; NaN in bfloat16 median/mode/kthvalue/cummax; `resize_` (storage order,
version counter); `nonzero(as_tuple)` of a 0-d tensor, `chunk` of an empty dim; storage
offsets of empty views; fills of expanded tensors; `x[mask] = value` converting a one-element
value; median of an empty integer tensor, `topk(0)` of a 0-d tensor, the emptiness, bool and
k checks of kthvalue/topk/argmax/median, gather/scatter size checks; the Welford mean of
`var_mean` with infinities, `dtype=` casting before `sum`/`prod`, cumsum of -0.0; and
PyTorch's messages for these.

Each case is a small program run under both libraries (`torch` names either module); the
result (values, dtype, shape, nested tuples) or the exception (type and message) must agree.
"""

from __future__ import annotations

import math
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

TORCH_TYPES = (torch.Tensor, fusegrad.Tensor)


def _norm(value):
    """A comparable summary of a result: tensors as (dtype, shape, values)."""
    if isinstance(value, TORCH_TYPES):
        return ("tensor", str(value.dtype), tuple(value.shape), value.tolist())
    if isinstance(value, (tuple, list)):
        return tuple(_norm(v) for v in value)
    return value


def _close(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, complex) or isinstance(b, complex):
        return _close(complex(a).real, complex(b).real) and _close(complex(a).imag,
                                                                   complex(b).imag)
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        # Signed zeros are part of the result (cumsum of -0.0 is +0.0 in PyTorch).
        if a == 0 and b == 0:
            return math.copysign(1, a) == math.copysign(1, b)
        return a == b or abs(a - b) <= 1e-6 * max(1.0, abs(b))
    return type(a) is type(b) and a == b


def _run(lib, program: str):
    scope = {"torch": lib, "inf": math.inf, "nan": math.nan}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if "\n" in program or "=" in program.split("(")[0]:
                exec(program, scope)
                return ("ok", _norm(scope["out"]))
            return ("ok", _norm(eval(program, scope)))
        except Exception as e:  # noqa: BLE001 - the exception is the result to compare
            return ("raised", type(e).__name__, str(e).split("\n")[0])


def check(program: str) -> None:
    got, want = _run(fusegrad, program), _run(torch, program)
    assert _close(got, want), f"{program}\n fusegrad: {got}\n torch:    {want}"


def cases(*programs):
    return pytest.mark.parametrize("program", programs)


# ---------------------------------------------------------------- isreal, float_power


@cases(
    "torch.isreal(torch.tensor([1+2j, 3+0j]))",
    "torch.tensor([1+0j, 2j], dtype=torch.complex128).isreal()",
    "torch.isreal(torch.tensor(complex(nan, 0)))",
    "torch.isreal(torch.tensor([1, 2]))",
    "torch.float_power(torch.tensor([1+2j]), 2)",
    "torch.float_power(torch.tensor([1, 2]), 2j)",
    "torch.float_power(torch.tensor([1, 2]), torch.tensor([1j]))",
    "torch.float_power(2, torch.tensor([1j, 2]))",
    "torch.float_power(torch.tensor([1+1j], dtype=torch.complex64), torch.tensor([2.]))",
    "torch.float_power(torch.tensor([2]), 0.5)",
    "torch.float_power(torch.tensor([True]), 2)",
    "torch.float_power(2.5, torch.tensor([1]))",
    "torch.tensor([1+2j]).float_power_(2)",
    "torch.tensor([1+2j], dtype=torch.complex128).float_power_(2)",
    "torch.tensor([1.], dtype=torch.float64).float_power_(2j)",
    "torch.tensor([1.], dtype=torch.float64).float_power_(torch.tensor([2j]))",
)
def test_isreal_and_float_power_of_complex(program):
    check(program)


# ---------------------------------------------------------------- scatter_reduce


_SCATTER_DATA = {
    "bool": ("[False, True, True, False]", "[True, False, False, True, False]"),
    "uint8": ("[3, 0, 200, 7]", "[5, 250, 2, 9, 1]"),
    "int32": ("[3, -1, 5, 0]", "[-5, 7, 2, 9, -3]"),
    "float32": ("[3, -1, 5, 0]", "[-5, 7, 2, 9, -3]"),
    "bfloat16": ("[3, -1, 5, 0]", "[-5, 7, 2, 9, -3]"),
}


@pytest.mark.parametrize("dtype", sorted(_SCATTER_DATA))
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_modes_and_dtypes(dtype, reduce, include_self):
    a, s = _SCATTER_DATA[dtype]
    check(f"torch.tensor({a}, dtype=torch.{dtype}).scatter_reduce(0, "
          f"torch.tensor([1, 1, 2, 0, 2]), torch.tensor({s}, dtype=torch.{dtype}), "
          f"reduce='{reduce}', include_self={include_self})")


@cases(
    "torch.tensor([False, True]).scatter_reduce(0, torch.tensor([1]), torch.tensor([False]), "
    "reduce='amax', include_self=False)",
    "torch.tensor([False, True]).scatter_reduce(0, torch.tensor([1]), torch.tensor([True]), "
    "reduce='amin', include_self=False)",
    "torch.tensor([True]).scatter_reduce_(0, torch.tensor([0]), torch.tensor([True]), "
    "reduce='mean', include_self=False)",
    "torch.zeros(2, 3).scatter_reduce(0, torch.zeros(1, 5, dtype=torch.long), "
    "torch.ones(1, 1), 'bad')",
    "torch.zeros(2, 3).scatter_reduce(0, torch.zeros(1, dtype=torch.long), "
    "torch.ones(1, 1), 'sum')",
)
def test_scatter_reduce_bool_identities_and_errors(program):
    check(program)


# ---------------------------------------------------------------- NaN in half types


_NAN_ROWS = ("[5.6, -0.27, nan, -0.74]", "[nan, 1.0, 2.0]", "[1.0, nan, nan, 3.0, -2.0]",
             "[nan, nan]", "[2., 1., 2., nan, 1.]")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("row", _NAN_ROWS)
@pytest.mark.parametrize("op", ["median()", "median(0)", "nanmedian()", "nanmedian(0)",
                                "mode(0)", "kthvalue(2)", "sort()", "sort(descending=True)",
                                "topk(2)", "cummax(0)", "cummin(0)", "argmax()", "max(0)"])
def test_nan_selection_in_half_types(dtype, row, op):
    check(f"torch.tensor({row}, dtype=torch.{dtype}).{op}")


@cases(
    "torch.tensor([1., nan, 2.], dtype=torch.bfloat16).quantile(0.5)",
    "torch.tensor([1., nan, 2.], dtype=torch.float16).nanquantile(0.5)",
    "torch.tensor([1, 2]).nanquantile(0.5)",
    "torch.tensor([1, 2]).quantile(2.5)",
    "torch.tensor([], dtype=torch.int64).quantile(0.5)",
    "torch.tensor([1.]).nanquantile(torch.tensor([[0.5]]))",
    "torch.tensor([1.], dtype=torch.float64).quantile(torch.tensor([0.5]))",
    "torch.tensor([1.]).quantile(0.5, interpolation='bad')",
)
def test_quantile_checks(program):
    check(program)


# ---------------------------------------------------------------- resize_


_RESIZE = "b = torch.arange(12).reshape(3, 4)\n"


@cases(
    _RESIZE + "x = b.t(); x.resize_(2); out = (x, x.storage_offset(), x._version, b._version)",
    _RESIZE + "b.resize_(2, 2); out = (b, b._version, b.stride())",
    _RESIZE + "b.resize_(3, 4); out = (b, b._version)",
    _RESIZE + "x = b.t(); x.resize_(4, 3); out = (x, x._version, x.stride())",
    _RESIZE + "x = b[1:, 1:]; x.resize_(5); x.fill_(-1); out = (x, b, x.storage_offset())",
    # (Past the old storage's end PyTorch's elements are uninitialised: not compared.)
    _RESIZE + "x = b[1:, 1:]; x.resize_(3, 3); out = (x.reshape(-1)[:7], x.stride(), "
    "x.storage_offset())",
    _RESIZE + "b.resize_(20); out = (b[:12], b._version, b.shape)",
    _RESIZE + "x = b.view(-1)[2:]; x.resize_(0); out = (x, x._version, x.storage_offset())",
    _RESIZE + "x = b.view(-1)[12:]; x.resize_(2); out = (x.shape, x.storage_offset())",
    _RESIZE + "x = b.t(); out = (x.resize_as_(torch.zeros(2, 3)), x._version, x.stride())",
    _RESIZE + "out = b.resize_(-1, 2)",
    _RESIZE + "x = b.float().requires_grad_(); out = x.resize_(3, 4)",
)
def test_resize(program):
    check(program)


# ---------------------------------------------------------------- nonzero, where, chunk


@cases(
    "torch.nonzero(torch.tensor(5), as_tuple=True)",
    "torch.nonzero(torch.tensor(0), as_tuple=True)",
    "torch.where(torch.tensor(3.))",
    "torch.tensor(True).nonzero(as_tuple=True)",
    "torch.nonzero(torch.zeros(2, 0), as_tuple=True)",
    "torch.chunk(torch.arange(0), 3)",
    "torch.chunk(torch.zeros(3, 0), 4, 1)",
    "torch.zeros(2, 0, 4).chunk(2, -2)",
    "torch.unsafe_chunk(torch.arange(0), 3)",
    "torch.split(torch.zeros(0, 3), [0, 0], -1)",
    "torch.split(torch.zeros(2, 3), [1, -1], -1)",
    "torch.tensor_split(torch.arange(0), 3)",
    "torch.arange(5).chunk(3)",
)
def test_nonzero_where_and_empty_splits(program):
    check(program)


# ---------------------------------------------------------------- storage offsets


@pytest.mark.parametrize("view", [
    "torch.arange(4.)[4:]", "torch.arange(4.)[2:2]", "torch.arange(4.)[3:1]",
    "torch.arange(4.)[10:]", "torch.arange(4.)[::2][2:]", "torch.arange(4.)[1:][3:]",
    "torch.arange(12.).reshape(3, 4)[:, 4:]", "torch.arange(12.).reshape(3, 4)[3:]",
    "torch.arange(12.).reshape(3, 4)[1:, 1:][2:][:, 3:]",
    "torch.arange(4.).reshape(4, 1).diagonal(1)", "torch.arange(4.).reshape(4, 1).diagonal(-3)",
    "torch.arange(12.).reshape(3, 4).narrow(1, 4, 0)",
    "torch.arange(12.).reshape(3, 4).split([1, 2, 0])[2]",
    "torch.arange(12.).reshape(3, 4).tensor_split(5)[4]",
    "torch.arange(12.).reshape(3, 4).as_strided((0,), (1,), 12)",
    "torch.arange(12.).reshape(3, 4)[3:].view(-1)",
    "torch.arange(12.).reshape(3, 4).unbind(1)[2][3:]",
])
def test_storage_offset_of_empty_views(view):
    check(f"({view}).storage_offset()")


# ---------------------------------------------------------------- writes into expanded tensors


_EXPANDED = "x = torch.arange(2.).reshape(1, 2).expand(2, 1, 2)\n"


@cases(
    _EXPANDED + "x.zero_(); out = x",
    _EXPANDED + "x.fill_(3); out = x",
    _EXPANDED + "x.fill_(torch.tensor(3.)); out = x",
    _EXPANDED + "x.masked_fill_(torch.tensor([True, False]), 5); out = x",
    _EXPANDED + "x.masked_fill_(torch.tensor([True, False]), torch.tensor(5.)); out = x",
    _EXPANDED + "x.index_fill_(2, torch.tensor([0]), 4.); out = x",
    _EXPANDED + "x[torch.tensor([0])] = 7.; out = x",
    _EXPANDED + "x.index_put_((torch.tensor([0]),), torch.tensor(4.), accumulate=True); out = x",
    _EXPANDED + "x[...] = 7; out = x",
    _EXPANDED + "x[:, 0] = 7; out = x",
    _EXPANDED + "x[0] = 7; out = x",
    _EXPANDED + "x.add_(1); out = x",
    _EXPANDED + "x.copy_(torch.ones(2, 1, 2)); out = x",
    "x = torch.tensor([1, 2]).expand(3, 2)\n"
    "x.masked_fill_(torch.tensor([[False, False], [False, True], [False, False]]), 9); out = x",
)
def test_writes_into_expanded_tensors(program):
    check(program)


def test_masked_fill_of_expanded_tensor_warns_as_pytorch():
    x = fusegrad.arange(2.).reshape(1, 2).expand(2, 1, 2)
    with pytest.warns(UserWarning, match="Use of masked_fill_ on expanded tensors is deprecated"):
        x.masked_fill_(fusegrad.tensor([True, False]), 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.zero_()  # fills are allowed silently


# ---------------------------------------------------------------- setitem conversions


@pytest.mark.parametrize("index", [
    "torch.tensor([False])", "torch.tensor([True])", "None, torch.tensor([False])",
    "None, torch.tensor([True])", "torch.tensor([0])", "torch.tensor(True)",
    "None, torch.tensor(True)", "torch.tensor([True]), None", "[True]",
])
@pytest.mark.parametrize("value", [
    "torch.tensor(0.5)", "torch.tensor([0.5])", "torch.tensor(7)", "torch.tensor([7, 8])",
    "torch.tensor([[0.5]])", "torch.tensor(300.)", "0.5",
])
def test_setitem_value_conversion(index, value):
    check(f"x = torch.tensor([84], dtype=torch.uint8)\nx[{index}] = {value}\nout = x")


@cases(
    "x = torch.tensor([1., 2.])\nx[True] = torch.tensor(5)\nout = x",
    "x = torch.tensor([1., 2.])\nx[False] = torch.zeros(7)\nout = x",
    "x = torch.tensor([1, 2])\nx[torch.tensor([True, False])] = torch.tensor(3+1j)\nout = x",
    "x = torch.tensor([[1., 2.], [3, 4]])\n"
    "x[torch.tensor([[1, 0], [0, 1]], dtype=torch.uint8)] = torch.tensor(9, dtype=torch.int32)"
    "\nout = x",
    "x = torch.tensor([84], dtype=torch.uint8)\n"
    "out = x.index_put_((torch.tensor([True]),), torch.tensor(0.5))",
    "x = torch.tensor([84], dtype=torch.uint8)\n"
    "out = x.index_put_((torch.tensor([True]),), torch.tensor(0.5), accumulate=True)",
    "v = torch.tensor([[5.]], requires_grad=True)\n"
    "x = torch.tensor([1., 2.], requires_grad=True).clone()\n"
    "x[torch.tensor([True, True])] = v\n(x * torch.tensor([1., 3.])).sum().backward()\n"
    "out = (x, v.grad)",
    "v = torch.tensor(5., dtype=torch.float64, requires_grad=True)\n"
    "x = torch.tensor([1., 2.], requires_grad=True).clone()\n"
    "x[torch.tensor([True, False])] = v\nx.sum().backward()\nout = (x, v.grad)",
)
def test_setitem_and_index_put_edges(program):
    check(program)


# ---------------------------------------------------------------- selection and reductions


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "bool", "float16"])
def test_median_of_no_elements(dtype):
    check(f"torch.tensor([], dtype=torch.{dtype}).median()")
    check(f"torch.zeros(2, 0, dtype=torch.{dtype}).nanmedian()")


@cases(
    "torch.tensor(3).topk(0)", "torch.tensor(3.).topk(0, 0)", "torch.tensor(3.).topk(2)",
    "torch.tensor([True]).topk(1)", "torch.tensor([True]).topk(5)", "torch.tensor(True).topk(0)",
    "torch.tensor([]).kthvalue(1)", "torch.zeros(2, 0).kthvalue(1, 1)",
    "torch.zeros(2, 0).kthvalue(5, 0)", "torch.tensor(1.).kthvalue(2)",
    "torch.tensor([True, False]).kthvalue(1)", "torch.tensor(True).kthvalue(1)",
    "torch.tensor([True]).kthvalue(2)",
    "torch.tensor([True, False]).argmax()", "torch.tensor(True).argmin(5)",
    "torch.tensor([]).argmax()", "torch.zeros(3, 0).argmin(-1)",
    "torch.tensor([True, False]).median()", "torch.tensor(True).median(0)",
    "torch.zeros(2, 0, dtype=torch.bool).median(0)",
    "torch.zeros(2, 0, dtype=torch.bool).median(1)",
    "torch.tensor([True]).nanmedian(0)", "torch.zeros(3, 0).nanmedian(-1)",
    "torch.zeros(3, 0).aminmax(dim=-1)", "torch.zeros(0, 3, 0).amin((-1, 0))",
    "torch.zeros(0, 3, 0).amin((2, 0))", "torch.zeros(3, 0).amax((0, -1))",
    "torch.tensor([1, 2]).logcumsumexp(0)", "torch.tensor([True]).logcumsumexp(0)",
    "torch.tensor([1]).logcumsumexp(3)",
    "torch.tensor([True, False]).mode(0)",
)
def test_selection_checks_and_messages(program):
    check(program)


@cases(
    "torch.gather(torch.arange(6.).reshape(2, 3), 0, torch.tensor([[0, 1, 2, 0]]))",
    "torch.gather(torch.arange(6.).reshape(2, 3), 1, torch.tensor([[0], [1], [0]]))",
    "torch.gather(torch.arange(6.).reshape(2, 3), 0, torch.zeros(0, 5, dtype=torch.long))",
    "torch.arange(6.).reshape(2, 3).scatter(1, torch.tensor([[0], [1], [0]]), 1.)",
    "torch.arange(6.).reshape(2, 3).scatter_add(1, torch.tensor([[0, 1, 2, 0]]), "
    "torch.ones(1, 1))",
    "torch.arange(6.).reshape(2, 3).scatter(0, torch.tensor([0]), 1.)",
    "torch.arange(6.).reshape(2, 3).scatter(0, torch.zeros(0, dtype=torch.long), 1.)",
)
def test_gather_scatter_size_checks(program):
    check(program)


@cases(
    "torch.var_mean(torch.tensor([1., inf, 2.]))",
    "torch.var_mean(torch.tensor([1., 2., inf]))",
    "torch.std_mean(torch.tensor([inf, -inf]), 0)",
    "torch.var_mean(torch.tensor([-inf, -inf, 5.], dtype=torch.float64), 0, keepdim=True)",
    "torch.var_mean(torch.tensor([[1., inf, 2.], [3., 4., 5.]]), 1)",
    "torch.var_mean(torch.tensor([[1., inf, 2.], [3., 4., 5.]]), 0)",
    "torch.var_mean(torch.tensor([1e38, 3e38, -2e38]))",
    "torch.var_mean(torch.tensor([inf], dtype=torch.bfloat16))",
    "torch.var_mean(torch.tensor([]))",
    "torch.var_mean(torch.tensor([1, 2]))",
    "torch.std_mean(torch.tensor([True]), 0)",
    "torch.tensor([1, 2]).var()",
)
def test_var_mean_welford_means_and_messages(program):
    check(program)


_ROUNDING = "[2.751893114372708, 0.11877862999260858, 1.585767789780065, 1.3780076486562112, " \
            "0.1870487374496268, 1.9239845074181248, 2.55789851544197]"


@cases(
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).sum(dtype=torch.float16)",
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).sum(0, dtype=torch.bfloat16)",
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).nansum(dtype=torch.float16)",
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).mean(dtype=torch.float16)",
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).prod(dtype=torch.float16)",
    f"torch.tensor({_ROUNDING}, dtype=torch.float64).cumsum(0, dtype=torch.float16)",
    "torch.tensor([2**40 + 1, 3], dtype=torch.int64).sum(dtype=torch.float16)",
    "torch.tensor([1.5, 2.5]).cumsum(0, dtype=torch.bool)",
    "torch.tensor([1.5, 2.5]).mean(dtype=torch.int32)",
    "torch.tensor([1, 2]).mean()",
    "torch.tensor([1.5, 2.5]).nanmean(0, dtype=torch.int64)",
    "torch.tensor([-0.0, 1.0]).cumsum(0)",
    "torch.tensor([[-0.0, -0.0], [1.0, -0.0]]).cumsum(1)",
    "torch.tensor([-0.0, 2.0]).logcumsumexp(0)",
)
def test_dtype_casting_signed_zeros_and_messages(program):
    check(program)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 2.0])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_a_zero_dim_tensor_as_torch(name, value):
    """A 0-d tensor is a one-element row: an infinite or NaN value gives NaN (it gave 1 / 0)."""
    want = getattr(torch, name)(torch.tensor(value), 0)
    fn = getattr(fusegrad, name)
    for got in (fn(fusegrad.tensor(value), 0),
                fusegrad.compile(lambda x: fn(x, -1))(fusegrad.tensor(value))):
        assert got.shape == () and got.dtype == fusegrad.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
