"""Common user mistakes, word for word as PyTorch reports them: mismatched dtypes in matrix
products, bad convolution padding, wrong assignments on a module, unsupported NumPy arrays,
`masked_select` with a mask of another size, `multi_margin_loss` targets out of range; and
the everyday printing (tensors, modules, optimizers) these programs show."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import contextlib  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad  # noqa: E402

torch = pytest.importorskip("torch")

LIBS = (fusegrad, torch)


def _outcome(src: str, lib) -> tuple:
    """(stdout, (error type, message) or None, [(warning class, message)]) of running `src`
    with `torch`, `nn` and `F` bound to `lib`'s."""
    out = io.StringIO()
    err = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(src, "<program>", "exec"),
                     {"torch": lib, "nn": lib.nn, "F": lib.nn.functional, "np": np})
        except Exception as e:  # noqa: BLE001 - whatever is raised is compared
            err = (type(e).__name__, str(e))
    text = re.sub(r"0x[0-9a-fA-F]+", "0xADDR", out.getvalue())
    return text, err, [(w.category.__name__, str(w.message)) for w in caught]


def _same(src: str, expect_error: bool | None = True) -> None:
    theirs = _outcome(src, torch)
    if expect_error is not None:
        assert (theirs[1] is not None) == expect_error, f"oracle outcome unexpected: {theirs}"
    assert _outcome(src, fusegrad) == theirs


# ---------------------------------------------------------------- matrix products' dtypes

F32, F64, I32, I64 = "torch.float32", "torch.float64", "torch.int32", "torch.int64"


@pytest.mark.parametrize("a, b", [(F32, F64), (F64, F32), (I64, F32), (I32, I64)])
def test_bmm_dtype_mismatch(a, b):
    # bmm itself, `@` of two batches, and einsum (which ends in bmm)
    _same(f"torch.bmm(torch.ones(2, 2, 3, dtype={a}), torch.ones(2, 3, 2, dtype={b}))")
    _same(f"torch.ones(2, 2, 3, dtype={a}) @ torch.ones(2, 3, 2, dtype={b})")
    _same(f"torch.baddbmm(torch.ones(2, 2, 2, dtype={a}), torch.ones(2, 2, 3, dtype={a}), "
          f"torch.ones(2, 3, 2, dtype={b}))")
    _same(f"torch.einsum('bij,bjk->bik', torch.ones(2, 2, 3, dtype={a}), "
          f"torch.ones(2, 3, 2, dtype={b}))")


@pytest.mark.parametrize("a, b", [(F32, F64), (F64, F32), (I64, F32), (I32, I64)])
def test_mv_dtype_mismatch_names_addmv(a, b):
    # PyTorch's mv is addmv into a result of the vector's dtype, and says so
    _same(f"torch.mv(torch.ones(2, 3, dtype={a}), torch.ones(3, dtype={b}))")
    _same(f"torch.ones(2, 3, dtype={a}) @ torch.ones(3, dtype={b})")
    _same(f"torch.ones(4, 2, 3, dtype={a}) @ torch.ones(3, dtype={b})")


@pytest.mark.parametrize("bias, m1, m2", [(F32, F32, F64), (F64, F32, F64), (F64, F32, F32),
                                          (F32, F64, F64), (I64, F32, F32)])
def test_addmm_dtype_mismatch_checks_the_bias_first(bias, m1, m2):
    _same(f"torch.addmm(torch.ones(2, 2, dtype={bias}), torch.ones(2, 3, dtype={m1}), "
          f"torch.ones(3, 2, dtype={m2}))")


@pytest.mark.parametrize("src", [
    "nn.Linear(3, 4)(torch.ones(2, 3, dtype=torch.float64))",
    "nn.Linear(3, 4)(torch.ones(5, 2, 3, dtype=torch.float64))",
    "torch.mm(torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float64))",
    "torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.float64)",
    "torch.ones(2, 3) @ torch.ones(4, 5)",
    "torch.bmm(torch.ones(2, 2, 3), torch.ones(2, 4, 5))",
])
def test_matrix_product_mistakes(src):
    _same(src)


# ---------------------------------------------------------------- convolution padding


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "Conv3d"])
def test_conv_module_bad_padding_string_shows_the_set(cls):
    # PyTorch formats a set, whose order follows this process's string hashes
    _same(f"nn.{cls}(4, 16, 3, padding='foo')")
    _same(f"nn.{cls}(4, 16, 3, padding='same', stride=2)")


@pytest.mark.parametrize("fn, shape", [("conv1d", (1, 1, 5)), ("conv2d", (1, 1, 5, 5)),
                                       ("conv3d", (1, 1, 5, 5, 5))])
def test_functional_conv_bad_padding_string(fn, shape):
    k = (1, 1) + (3,) * (len(shape) - 2)
    _same(f"F.{fn}(torch.ones{shape}, torch.ones{k}, padding='foo')")
    _same(f"F.{fn}(torch.ones{shape}, torch.ones{k}, padding='same', stride=2)")
    _same(f"print(F.{fn}(torch.ones{shape}, torch.ones{k}, padding='same').shape)",
          expect_error=False)


# ---------------------------------------------------------------- module assignments


@pytest.mark.parametrize("value", ["3", "'a'", "[1]", "nn.ReLU()", "Foo()", "type(None)",
                                   "torch.ones(2)"])
def test_wrong_assignments_name_the_type_as_torch_typename(value):
    setup = "class Foo:\n    pass\nm = nn.Linear(2, 2)\nm.register_buffer('b', torch.ones(1))\n"
    _same(setup + f"m.weight = {value}")
    _same(setup + f"m.register_parameter('c', {value})")
    if value != "torch.ones(2)":
        # (a module may replace a buffer: then both accept it)
        _same(setup + f"m.b = {value}", expect_error=None)
        _same(setup + f"m.register_buffer('d', {value})")
        _same(setup + f"s = nn.Sequential(nn.ReLU())\nsetattr(s, '0', {value})",
              expect_error=None)


# ---------------------------------------------------------------- NumPy arrays


@pytest.mark.parametrize("array", [
    "np.array(['a'])", "np.array([b'a'])", "np.array([object()])",
    "np.array(['2020'], dtype='datetime64[D]')", "np.array([1], dtype=np.longdouble)",
    "np.array([(1, 2)], dtype=[('a', 'i4'), ('b', 'i4')])"])
@pytest.mark.parametrize("fn", ["from_numpy", "tensor", "as_tensor"])
def test_unsupported_numpy_arrays(array, fn):
    if "longdouble" in array and np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("long double is double here")
    _same(f"torch.{fn}({array})")


# ---------------------------------------------------------------- indexing and losses


@pytest.mark.parametrize("x, mask", [((4,), (3,)), ((2, 4), (2, 3)), ((4, 1), (2, 3))])
def test_masked_select_mask_of_another_size(x, mask):
    _same(f"torch.zeros{x}.masked_select(torch.ones{mask}.bool())")
    _same(f"torch.masked_select(torch.zeros{x}, torch.ones{mask}.bool())")


@pytest.mark.parametrize("target", ["[0, 1, 2, 3]", "[0, 1, 2, -1]"])
def test_multi_margin_loss_target_out_of_range(target):
    _same(f"F.multi_margin_loss(torch.zeros(4, 3), torch.tensor({target}))")
    _same(f"nn.MultiMarginLoss()(torch.zeros(4, 3), torch.tensor({target}))")


@pytest.mark.parametrize("src", [
    "torch.ones(3, 4).t().view(12)",
    "torch.ones(3, 4).reshape(5, -1)",
    "torch.ones(3).expand(4)",
    "torch.ones(2, 3).expand(3)",
    "torch.cat([torch.ones(2, 3), torch.ones(2, 4)])",
    "torch.stack([torch.ones(3), torch.ones(3), torch.ones(4)])",
    "torch.ones(2, 3).squeeze(2)",
    "torch.ones(3)[3]",
    "torch.ones(3).item()",
    "x = torch.ones(3, requires_grad=True); x += 1",
    "x = torch.ones(3, requires_grad=True); x.numpy()",
    "x = torch.ones(3, requires_grad=True); y = x.exp().sum(); y.backward(); y.backward()",
    "x = torch.ones(3, requires_grad=True); (x * 2).backward()",
    "torch.tensor([1, 2, 3]).mean()",
    "torch.ones(2, device='cuda')",
    "torch.ones(2).cuda()",
    "nn.Conv2d(3, 16, 3)(torch.ones(1, 1, 28, 28))",
    "nn.Conv2d(3, 16, 3)(torch.ones(28, 28))",
    "nn.Linear(10, 5)(torch.ones(3, 20))",
    "nn.BatchNorm1d(3)(torch.ones(1, 3))",
    "F.cross_entropy(torch.zeros(3, 5), torch.tensor([1., 2., 3.]))",
    "F.cross_entropy(torch.zeros(3, 5), torch.tensor([1, 2, 5]))",
    "F.nll_loss(torch.zeros(3, 5), torch.tensor([1, 2]))",
    "m = nn.Linear(2, 3); m.load_state_dict(nn.Linear(2, 4).state_dict())",
    "m = nn.Linear(2, 2); sd = m.state_dict(); sd['foo'] = torch.ones(1); "
    "del sd['bias']; m.load_state_dict(sd)",
    "torch.optim.SGD([], lr=0.1)",
    "m = nn.Linear(2, 2); p = m.parameters(); torch.optim.SGD(p, lr=0.1); torch.optim.SGD(p)",
    "class M(nn.Module):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\nM()",
])
def test_everyday_mistakes(src):
    _same(src)


def test_mse_loss_size_warning():
    _same("print(F.mse_loss(torch.ones(3, 1), torch.ones(3)))", expect_error=False)


# ---------------------------------------------------------------- printing


@pytest.mark.parametrize("expr", [
    "torch.tensor([1e-10, 1.0, float('nan'), float('inf')])",
    "torch.tensor([1+2j, 3-4e-5j])",
    "torch.arange(2000.).reshape(40, 50)",
    "torch.tensor([[True, False]])",
    "torch.tensor([1.0, 2.0], requires_grad=True) * 2",
    "nn.Parameter(torch.arange(6.).reshape(2, 3))",
    "torch.ones(2, 3).shape",
    "(torch.float16, torch.device('cpu'))",
    "nn.Sequential(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)), "
    "nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)]), nn.ModuleDict({'a': nn.ReLU()}))",
    "torch.optim.Adam(nn.Linear(2, 2).parameters(), lr=1e-3, amsgrad=True)",
    "list(nn.Linear(2, 1).named_parameters())",
])
def test_printing(expr):
    _same(f"torch.manual_seed(0)\nprint({expr})\nprint(repr({expr}))", expect_error=False)


def test_printoptions():
    _same("torch.set_printoptions(precision=2, sci_mode=False)\n"
          "try:\n    print(torch.tensor([1e-5, 123.456789]))\n"
          "finally:\n    torch.set_printoptions(profile='default')", expect_error=False)


# ---------------------------------------------------------------- bernoulli's probabilities


@pytest.mark.parametrize("src", [
    "torch.bernoulli(torch.tensor([1.5]))",
    "torch.bernoulli(torch.tensor([-0.5, 0.5]))",
    "torch.bernoulli(torch.tensor([float('nan')]))",
    "torch.empty(2).bernoulli_(torch.tensor([1.5, 0.]))",
    "torch.empty(2).bernoulli_(1.5)",
    "torch.bernoulli(torch.tensor([1]))",
    "torch.tensor([1]).bernoulli()",
    "torch.bernoulli(torch.tensor([True]))",
])
def test_bernoulli_bad_probabilities(src):
    _same(src)
