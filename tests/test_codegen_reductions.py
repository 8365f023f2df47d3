"""Reductions in generated code: var/std/var_mean (two passes in one loop nest per row),
argmax/argmin, and reductions of the same rows sharing one kernel.

Oracles: PyTorch (values, NaN/Inf rows, first index of ties), eager execution.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
from codegen_support import Recorder

import fusegrad
from fusegrad.compiler.codegen import build, compile_graph

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


def _rows() -> np.ndarray:
    data = np.random.default_rng(5).standard_normal((37, 53)) * 3 + 1e4  # a large mean
    data[0, 3] = np.nan
    data[1, :] = np.inf
    data[2, 5] = -np.inf
    data[3, :] = 7.25  # zero variance
    return data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["var_mean.correction", "std_mean.correction"])
def test_var_mean_is_one_kernel_with_torch_values(name, dtype):
    data = _rows().astype(dtype)
    r = Recorder()
    x = r.input()
    n = r.op(name, x, [1], 0, True)
    gm = r.module([r.graph.call_function(operator.getitem, (n, i)) for i in range(2)])
    xt = fusegrad.from_numpy(data)
    compiled = compile_graph(gm, [xt])
    got = [t.numpy() for t in compiled(xt)]
    fn = torch.var_mean if name.startswith("var") else torch.std_mean
    want = fn(torch.from_numpy(data), 1, correction=0, keepdim=True)[0].numpy()
    eager_fn = fusegrad.var_mean if name.startswith("var") else fusegrad.std_mean
    eager = [t.numpy() for t in eager_fn(xt, [1], correction=0, keepdim=True)]
    # Two passes: no cancellation against the mean of 1e4 (float32's E[x^2] - E[x]^2 would
    # lose every digit of a variance of 9).
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got[0], want, rtol=rtol, equal_nan=True)
    for g, w in zip(got, eager):
        np.testing.assert_allclose(g, w, rtol=rtol, equal_nan=True)
    assert got[0][3, 0] == 0
    assert compiled.source.count("void cpp_fused_") == 1


def test_reductions_of_the_same_rows_share_a_kernel():
    """Independent reductions over the same rows (sum, amax, argmax) are one loop nest."""
    data = _rows().astype(np.float32)
    r = Recorder()
    x = r.input()
    outs = [r.op("sum.dim_IntList", x, [1], True), r.op("amax", x, [1], True),
            r.op("argmax", x, 1, True)]
    xt = fusegrad.from_numpy(data)
    compiled = compile_graph(r.module(outs), [xt])
    got = [t.numpy() for t in compiled(xt)]
    tx = torch.from_numpy(data)
    want = [tx.sum(1, keepdim=True).numpy(), tx.amax(1, keepdim=True).numpy(),
            tx.argmax(1, keepdim=True).numpy()]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    assert compiled.source.count("void cpp_fused_") == 1
