"""Batch norm's backward as the op `native_batch_norm_backward`, against PyTorch: gradients
and double-backward gradients of 1-d/2-d/3-d batch norm (training and eval, with and without
affine parameters, float32 and float64), the double-backward node, the op's errors, and the
one kernel eager and AOT-traced backward graphs share (so they compute the same values).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.compiler.aot.api import aot_module_simplified, nop  # noqa: E402

SHAPES = [(6, 3), (4, 3, 5), (3, 4, 5, 6), (2, 3, 2, 3, 4)]
TOL = {np.float32: 2e-4, np.float64: 1e-10}


def _arrays(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    w, b = rng.uniform(0.5, 1.5, c).astype(dtype), rng.standard_normal(c).astype(dtype)
    rm, rv = rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
    return x, w, b, rm, rv, rng


def _grads(lib, shape, dtype, train, affine, seed=0):
    """First and second derivatives of a batch-norm layer built from `lib`: its output, the
    gradients of (input, weight, bias) for a random cotangent, and the gradients of a random
    combination of those gradients with respect to (input, weight, cotangent)."""
    x, w, b, rm, rv, rng = _arrays(shape, dtype, seed)
    g0 = rng.standard_normal(shape).astype(dtype)
    cot = [rng.standard_normal(a.shape).astype(dtype) for a in (x, w, b)]
    t = {k: lib.tensor(v, requires_grad=True) for k, v in (("x", x), ("w", w), ("b", b),
                                                          ("g", g0))}
    params = (t["w"], t["b"]) if affine else (None, None)
    y = lib.nn.functional.batch_norm(t["x"], lib.tensor(rm), lib.tensor(rv), *params,
                                     training=train)
    wrt = [t["x"]] + ([t["w"], t["b"]] if affine else [])
    first = lib.autograd.grad(y, wrt, t["g"], create_graph=True)
    names = [type(f.grad_fn).__name__ if f.grad_fn is not None else None for f in first]
    total = sum((f * lib.tensor(c)).sum() for f, c in zip(first, cot))
    wrt2 = [t["x"], t["g"]] + ([t["w"]] if affine else [])
    second = lib.autograd.grad(total, wrt2, allow_unused=True)
    arrays = [y] + list(first) + list(second)
    return [None if a is None else a.detach().numpy().astype(np.float64) for a in arrays], names


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{len(s) - 2}d" if len(s) > 2 else "1d-flat"
                                               for s in SHAPES])
def test_gradients_and_double_backward_match_torch(shape, train, affine, dtype):
    got, got_names = _grads(fusegrad, shape, dtype, train, affine)
    want, want_names = _grads(torch, shape, dtype, train, affine)
    assert got_names == want_names
    if train:
        assert set(got_names) == {"NativeBatchNormBackwardBackward0"}
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        if b is None or not b.any():  # unused (None) or zero in PyTorch
            assert a is None or not np.abs(a).max() > TOL[dtype], k
            continue
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, rtol=TOL[dtype], atol=TOL[dtype] * scale,
                                   err_msg=f"output {k}")


@pytest.mark.parametrize("train", [True, False])
def test_gradgradcheck(train):
    x, w, b, rm, rv, _ = _arrays((4, 3, 2, 2), np.float64, seed=1)
    rm_t, rv_t = fusegrad.tensor(rm), fusegrad.tensor(rv)
    args = tuple(fusegrad.tensor(a, requires_grad=True) for a in (x, w, b))

    def fn(x, w, b):
        return fusegrad.nn.functional.batch_norm(x, rm_t.clone(), rv_t.clone(), w, b,
                                                 training=train)

    assert fusegrad.autograd.gradcheck(fn, args)
    assert fusegrad.autograd.gradgradcheck(fn, args)


def test_forward_node_saves_its_statistics_as_torch():
    x, w, b, rm, rv, _ = _arrays((4, 3, 5), np.float32)
    got = fusegrad.nn.functional.batch_norm(
        fusegrad.tensor(x, requires_grad=True), fusegrad.tensor(rm), fusegrad.tensor(rv),
        fusegrad.tensor(w), fusegrad.tensor(b), training=True)
    want = torch.nn.functional.batch_norm(
        torch.tensor(x, requires_grad=True), torch.tensor(rm), torch.tensor(rv),
        torch.tensor(w), torch.tensor(b), training=True)
    for name in ("_saved_result1", "_saved_result2"):
        np.testing.assert_allclose(getattr(got.grad_fn, name).numpy(),
                                   getattr(want.grad_fn, name).numpy(), rtol=1e-5)


def _op_args(lib, dtype, train, half=False):
    x, w, _, rm, rv, rng = _arrays((4, 3, 5), dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    mean, invstd = x.mean((0, 2)), 1 / np.sqrt(x.var((0, 2)) + 1e-5)
    xs = [lib.tensor(a) for a in (g, x)]
    if half:
        xs = [a.half() for a in xs]
    stats = [lib.tensor(a.astype(dtype)) for a in (mean, invstd)] if train else [None, None]
    return xs + [lib.tensor(w), lib.tensor(rm), lib.tensor(rv)] + stats + [train, 1e-5]


@pytest.mark.parametrize("mask", [[True, True, True], [True, False, False],
                                  [False, True, True], [False, False, True]])
@pytest.mark.parametrize("train", [True, False])
def test_op_output_mask(mask, train):
    """Outputs the mask asks for are PyTorch's; the others are zeros here (None there)."""
    got = fusegrad.ops.aten.native_batch_norm_backward(
        *_op_args(fusegrad, np.float64, train), mask)
    want = torch.ops.aten.native_batch_norm_backward(*_op_args(torch, np.float64, train), mask)
    for a, b, keep in zip(got, want, mask):
        if keep:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
        else:
            assert b is None and not a.numpy().any()


@pytest.mark.parametrize("train", [True, False])
def test_op_half_input_with_float_parameters(train):
    """Half input and float32 parameters: the input's gradient in half, the parameters' in
    float32 (computed in float32, as PyTorch's CPU kernel)."""
    mask = [True, True, True]
    got = fusegrad.ops.aten.native_batch_norm_backward(
        *_op_args(fusegrad, np.float32, train, half=True), mask)
    want = torch.ops.aten.native_batch_norm_backward(
        *_op_args(torch, np.float32, train, half=True), mask)
    for a, b in zip(got, want):
        assert a.dtype.name == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=2e-3, atol=2e-3)


def test_op_errors_as_torch():
    for lib in (fusegrad, torch):
        args = _op_args(lib, np.float32, False)
        args[0] = args[0].double()  # grad_out of another dtype than the input
        with pytest.raises(RuntimeError, match="^expected scalar type Float but found Double$"):
            lib.ops.aten.native_batch_norm_backward(*args, [True, True, True])
        args = _op_args(lib, np.float32, False)
        args[2] = args[2].double()  # a double weight for a float input
        with pytest.raises(RuntimeError, match="^mixed dtype \\(CPU\\): expect parameter to "
                                               "have scalar type of Float$"):
            lib.ops.aten.native_batch_norm_backward(*args, [True, True, True])


def test_saved_statistics_have_no_derivative_as_torch():
    for lib in (fusegrad, torch):
        args = _op_args(lib, np.float64, True)
        args[1].requires_grad_()
        args[5].requires_grad_()
        out = lib.ops.aten.native_batch_norm_backward(*args, [True, True, True])
        with pytest.raises(NotImplementedError, match="^the derivative for "
                           "'native_batch_norm_backward save_mean' is not implemented.$"):
            out[0].sum().backward()


class _Net(fusegrad.nn.Module):
    def __init__(self, nn):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.bn_plain = nn.BatchNorm1d(8, affine=False)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu()
        return self.bn_plain(y.mean((2, 3))).square().sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_eager_and_aot_backward_run_one_kernel(dtype):
    """The traced backward graph records `native_batch_norm_backward` and computes eager's
    gradients to the last bit."""
    fusegrad.manual_seed(0)
    model = _Net(fusegrad.nn).to(getattr(fusegrad, np.dtype(dtype).name))
    twin = _Net(fusegrad.nn).to(getattr(fusegrad, np.dtype(dtype).name))
    twin.load_state_dict(model.state_dict())
    graphs = []

    def backend(gm, example_inputs):
        def compiler(g, inputs):
            graphs.append(g)
            return g
        return aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=compiler)

    x = fusegrad.tensor(np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype(dtype))
    fusegrad.compile(model, backend=backend)(x).backward()
    twin(x).backward()
    assert any("native_batch_norm_backward" in g.code for g in graphs)
    for (k, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy(), err_msg=k)
