"""`make_fx` graphs written as torch's, text for text: comparisons with a number record their
`.Scalar` overloads, slices their start and end as PyTorch's indexing passes them (0 and
INT64_MAX), the activations' scalars are left out at their defaults (and `approximate` is a
keyword), and reductions over dims write their default `correction = 1`."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pickle  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_make_fx_as_torch  # noqa: E402

import fusegrad as fg  # noqa: E402

# Functions of a 3x3 input whose make_fx graph is torch's.
_CALLS = {
    "gt": lambda T, x: x > 0,
    "ge_float": lambda T, x: x >= 0.5,
    "lt_reflected": lambda T, x: 0 < x,
    "le": lambda T, x: T.le(x, 1),
    "eq": lambda T, x: x.eq(1),
    "ne_bool_and": lambda T, x: (x != 1) & True,
    "gt_tensor": lambda T, x: x > x.t(),
    "floor_divide": lambda T, x: x // 2,
    "slice_end": lambda T, x: x[:2],
    "slice_start": lambda T, x: x[1:],
    "slice_step": lambda T, x: x[::2],
    "slice_inner": lambda T, x: x[:, 1:2],
    "slice_negative": lambda T, x: x[-2:],
    "narrow": lambda T, x: x.narrow(0, 1, 2),
    "gelu": lambda T, x: T.nn.functional.gelu(x),
    "gelu_tanh": lambda T, x: T.nn.functional.gelu(x, approximate="tanh"),
    "softplus": lambda T, x: T.nn.functional.softplus(x),
    "softplus_beta": lambda T, x: T.nn.functional.softplus(x, beta=2),
    "leaky_relu": lambda T, x: T.nn.functional.leaky_relu(x),
    "leaky_relu_slope": lambda T, x: T.nn.functional.leaky_relu(x, 0.2),
    "elu": lambda T, x: T.nn.functional.elu(x),
    "selu": lambda T, x: T.nn.functional.selu(x),
    "hardtanh": lambda T, x: T.nn.functional.hardtanh(x),
    "std_dim": lambda T, x: x.std(0),
    "std_keepdim": lambda T, x: x.std(1, keepdim=True),
    "std_mean": lambda T, x: T.std_mean(x, 0)[0],
    "var_mean": lambda T, x: T.var_mean(x, 1)[1],
    "var_unbiased_false": lambda T, x: T.var(x, 0, unbiased=False),
    "var_all": lambda T, x: x.var(),
}


@pytest.mark.parametrize("name", list(_CALLS))
def test_make_fx_graph_text_as_torch(name):
    # the GraphModule runs the arguments as written: eager's values
    check_make_fx_as_torch(_CALLS[name], torch, fg, seed=1)


def test_scalar_overloads_and_keywords_run_as_torch():
    x = np.array([[1.0, -2.0, 0.5]], np.float32)
    outs = {}
    for T in (torch, fg):
        a, aten = T.tensor(x), T.ops.aten
        outs[T] = [aten.gt.Scalar(a, 0), aten.le.Scalar(a, 0.5), aten.ne.Scalar(a, 1),
                   aten.gelu.default(a, approximate="tanh"),
                   aten.softplus.default(a, threshold=1), aten.leaky_relu.default(a, 0.5),
                   aten.slice.Tensor(a, 1, 1, 9223372036854775807)]
    for got, want in zip(outs[fg], outs[torch]):
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    handle = fg.ops.aten.gt.Scalar
    assert str(handle) == str(torch.ops.aten.gt.Scalar) == "aten.gt.Scalar"
    assert handle.name() == torch.ops.aten.gt.Scalar.name()
    assert pickle.loads(pickle.dumps(handle)) is handle
