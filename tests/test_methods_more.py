"""Older Tensor-method spellings and the in-place forms PyTorch keeps (`arccos_`, `greater_`,
`addmm_`, `fill_diagonal_`, `sum_to_size`, `apply_`, ...): values, gradients, node names and
errors against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

DATA = [[0.25, -0.5, 0.75], [0.125, 0.5, -0.625], [0.3, -0.2, 0.1]]
M1, M2 = [[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]], [[0.5, 1.0, -2.0], [1.5, 0.25, 1.0]]


def _run(lib, fn, grad=True):
    """fn(lib, leaf) on a non-leaf copy of DATA; (value, node name, leaf gradient)."""
    leaf = lib.tensor(DATA, dtype=lib.float64, requires_grad=grad)
    out = fn(lib, leaf * 1.0)
    node = type(out.grad_fn).__name__ if out.grad_fn is not None else None
    grad = None
    if out.requires_grad:
        out.backward(lib.ones_like(out))
        grad = leaf.grad.numpy()
    return out.detach().numpy(), node, grad


CASES = {
    **{f"arc{n}_": (lambda lib, x, n=n: getattr(x, f"arc{n}_")())
       for n in ("cos", "sin", "tan", "sinh", "tanh")},
    "arctanh_": lambda lib, x: x.arctanh_(),
    "arccosh_": lambda lib, x: (x + 2).arccosh_(),
    "absolute_": lambda lib, x: x.absolute_(),
    "negative_": lambda lib, x: x.negative_(),
    "torch.negative_": lambda lib, x: lib.negative_(x),
    "torch.arcsin_": lambda lib, x: lib.arcsin_(x),
    "greater_": lambda lib, x: x.greater_(0.2),
    "greater_equal_": lambda lib, x: x.greater_equal_(lib.zeros(3, dtype=lib.float64)),
    "less_": lambda lib, x: x.less_(0.2),
    "less_equal_": lambda lib, x: x.less_equal_(0.5),
    "not_equal_": lambda lib, x: x.not_equal_(0.5),
    "multiply_": lambda lib, x: x.multiply_(lib.tensor([2.0, 3.0, 4.0], dtype=lib.float64)),
    "divide_": lambda lib, x: x.divide_(3.0),
    "true_divide_": lambda lib, x: x.true_divide_(4.0),
    "subtract_": lambda lib, x: x.subtract_(1.0, alpha=2),
    "ger": lambda lib, x: x[0].ger(x[1]),
    "hardshrink": lambda lib, x: x.hardshrink(0.3),
    "prelu": lambda lib, x: x.prelu(lib.tensor([0.25], dtype=lib.float64)),
    "addmm_": lambda lib, x: x.addmm_(lib.tensor(M1, dtype=lib.float64),
                                      lib.tensor(M2, dtype=lib.float64), beta=0.5, alpha=2),
    "baddbmm_": lambda lib, x: x.unsqueeze(0).baddbmm_(
        lib.tensor([M1], dtype=lib.float64), lib.tensor([M2], dtype=lib.float64), alpha=-1),
    "addmv_": lambda lib, x: x[0].addmv_(lib.tensor(M1, dtype=lib.float64),
                                         lib.tensor([1.0, -2.0], dtype=lib.float64)),
    "cumprod_": lambda lib, x: x.cumprod_(1),
    "sum_to_size": lambda lib, x: x.sum_to_size(1, 3),
    "sum_to_size_lead": lambda lib, x: x.sum_to_size(3),
}
# in-place ops whose node PyTorch names differently from fusegrad's composite
NODE_DIFFERS = {"addmv_"}
# PyTorch has no derivative for these in-place forms: values only
NO_GRAD = {"arccosh_", "arcsinh_", "arctanh_"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_gradients_nodes(name):
    want = _run(torch, CASES[name], name not in NO_GRAD)
    got = _run(fusegrad, CASES[name], name not in NO_GRAD)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    if name not in NODE_DIFFERS:
        assert got[1] == want[1]
    if want[2] is None:
        assert got[2] is None
    else:
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                         ((4, 3), True), ((3, 5), True), ((2, 2, 2), False)])
def test_fill_diagonal_(shape, wrap):
    results = []
    for lib in (torch, fusegrad):
        x = lib.zeros(shape)
        assert x.fill_diagonal_(5.0, wrap=wrap) is x
        results.append(x.numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_fill_diagonal_gradient_and_errors():
    grads = []
    for lib in (torch, fusegrad):
        leaf = lib.ones(3, 3, requires_grad=True)
        y = leaf * 2
        y.fill_diagonal_(0.0)
        y.sum().backward()
        grads.append(leaf.grad.numpy())
        for bad in (lib.ones(3), lib.ones(3, 3, 2)):
            with pytest.raises(RuntimeError) as err:
                bad.fill_diagonal_(1)
            grads.append(str(err.value))
    np.testing.assert_array_equal(grads[3], grads[0])
    assert grads[4:] == grads[1:3]


@pytest.mark.parametrize("size", [(2, 2), (4, 2, 3)])
def test_sum_to_size_errors(size):
    msgs = []
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError) as err:
            lib.ones(2, 3).sum_to_size(*size)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]
    x = fusegrad.ones(2, 3)
    assert x.sum_to_size(2, 3) is x


def test_python_callbacks():
    outs = []
    for lib in (torch, fusegrad):
        x = lib.arange(6.0).reshape(2, 3)
        version = x._version
        assert x.apply_(lambda v: v * 2) is x
        x.map_(lib.tensor([1.0, 2.0, 3.0]), lambda a, b: a + b)
        x.map2_(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([[1.0], [2.0]]), lambda a, b, c: a - b * c)
        outs.append((x.numpy().copy(), x._version - version))
        leaf = lib.ones(3, requires_grad=True)
        for call in (lambda t: t.apply_(abs), lambda t: t.map_(t, max)):
            with pytest.raises(RuntimeError) as err:
                call(leaf)
            outs.append(str(err.value))
    np.testing.assert_array_equal(outs[3][0], outs[0][0])
    assert outs[3][1] == outs[0][1]
    assert outs[4:] == outs[1:3]


def test_resize_dim_order_and_friends():
    for lib in (torch, fusegrad):
        x = lib.arange(6.0).reshape(2, 3)
        with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
            r = x.resize(3, 2)
        with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
            r2 = x.resize_as(lib.ones(6))
        assert r.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]] and r2.tolist() == list(
            range(6)) and x.shape == (2, 3)
        assert lib.ones(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)
        assert x.const_data_ptr() == x.data_ptr()
        e = x.new_empty_strided((2, 2), (1, 2))
        assert e.shape == (2, 2) and e.stride() == (1, 2) and e.dtype == lib.float32
        p = lib.nn.Parameter(lib.ones(2))
        got = p.module_load(lib.zeros(2, dtype=lib.float64), assign=True)
        assert got.dtype == lib.float64 and not got.requires_grad
        q = lib.ones(2)
        got = q.module_load(lib.full((2,), 3.0, dtype=lib.float64))
        assert got.dtype == lib.float32 and q.tolist() == [3.0, 3.0]
