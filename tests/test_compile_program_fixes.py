"""Compiled programs against eager fusegrad, for what programs written for PyTorch found:

1. `y.backward(gradient)` inside a compiled function (with or without `retain_graph`): the
   call runs eagerly at a break, never Tensor's Python on fake values (which left a fake
   tensor in `.grad`, or freed the graph before the real call).
2. A module class's `forward` replaced after `compile(module)` (as adapters patch it): the
   new forward runs, compiled.
3. Dropout of a tensor eager lays out in another order (a transpose): the compiled draw
   keeps eager's mask for the same seed under every backend.
4. A compiled module checkpointed (`checkpoint(compiled_ff, h, use_reentrant=False)`): the
   compiler's tracing does not go through the checkpoint's saved-tensor hooks (their fake
   tensors failed the recomputation's check, or reached `.grad`).
5. `with autocast("cpu"):` without a dtype casts to the thread's default for the device,
   read when the function compiled: `set_autocast_dtype` afterwards compiles it again (it
   kept casting to the old dtype).
"""

import numpy as np
import pytest
from compile_support import Counter

import fusegrad
import fusegrad.nn.functional as F

BACKENDS = [None, "aot_eager", "inductor"]  # None: the run's backend through Counter


def compiled(fn, backend, **kwargs):
    fusegrad._dynamo.reset()
    return fusegrad.compile(fn, backend=Counter() if backend is None else backend, **kwargs)


def _backward_with_gradient(x, w):
    y = x @ w
    y.backward(fusegrad.ones_like(y) * 2)
    return w.grad.clone()


def _backward_retained(x, w):
    y = x @ w
    y.backward(fusegrad.ones_like(y), retain_graph=True)
    y.backward(fusegrad.ones_like(y))
    return w.grad * 1


def _backward_number_gradient(x, w):
    loss = (x @ w).sum()
    loss.backward(fusegrad.tensor(3.0))
    return w.grad + 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_backward_with_gradient, _backward_retained,
                                _backward_number_gradient])
def test_backward_with_a_gradient_inside(fn, backend):
    x = fusegrad.arange(12.0).reshape(3, 4)

    def run(f):
        w = fusegrad.ones(4, 2, requires_grad=True)
        out = f(x, w)
        assert type(out) is fusegrad.Tensor and type(w.grad) is fusegrad.Tensor
        return out.numpy(), w.grad.numpy()

    expected = run(fn)
    for _ in range(2):
        got = run(compiled(fn, backend))
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


class _Scale(fusegrad.nn.Module):
    def forward(self, x):
        return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_forward_patched_after_compile(backend):
    original = _Scale.forward
    m = _Scale()
    cm = compiled(m, backend)
    x = fusegrad.ones(3)
    try:
        assert cm(x).tolist() == [2.0] * 3
        _Scale.forward = lambda self, x: x - 100
        assert cm(x).tolist() == m(x).tolist() == [-99.0] * 3
        _Scale.forward = lambda self, x: x + 6
        assert cm(x).tolist() == [7.0] * 3
    finally:
        _Scale.forward = original
    assert cm(x).tolist() == [2.0] * 3


def _dropout_of_transposed(x):
    return F.dropout(x.transpose(0, 1) * 1.0, 0.5)


def _dropout_of_input(x):
    return F.dropout(x, 0.5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, transposed", [(_dropout_of_transposed, False),
                                            (_dropout_of_input, True)])
def test_dropout_mask_follows_eager_layout(fn, transposed, backend):
    x = fusegrad.randn(5, 7, generator=fusegrad.Generator().manual_seed(0))
    arg = x.t() if transposed else x
    fusegrad.manual_seed(1)
    expected = fn(arg)
    c = compiled(fn, backend)
    for seed in (1, 2):
        fusegrad.manual_seed(seed)
        want = expected if seed == 1 else fn(arg)
        fusegrad.manual_seed(seed)
        got = c(arg)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got.stride() == want.stride()


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_of_a_compiled_module(backend):
    from fusegrad.utils.checkpoint import checkpoint

    def run(compile_ff):
        fusegrad.manual_seed(0)
        ff = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 8), fusegrad.nn.GELU(),
                                    fusegrad.nn.Linear(8, 4))
        lin = fusegrad.nn.Linear(4, 4)
        x = fusegrad.randn(2, 4, requires_grad=True)
        fn = compiled(ff, backend) if compile_ff else ff
        for _ in range(2):  # (the second call: the compiled code, no tracing)
            h = lin(x)
            (h + checkpoint(fn, h, use_reentrant=False)).sum().backward()
        return [t.grad for t in (x, lin.weight, ff[0].weight, ff[2].bias)]

    for got, want in zip(run(True), run(False)):
        assert type(got) is fusegrad.Tensor
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def _matmul_in_autocast(x, w):
    with fusegrad.autocast("cpu"):
        return x @ w


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_default_dtype_set_after_compiling(backend):
    f = compiled(_matmul_in_autocast, backend)
    x, w = fusegrad.randn(4, 4), fusegrad.randn(4, 4)
    try:
        for dt in (fusegrad.bfloat16, fusegrad.float16, fusegrad.bfloat16):
            fusegrad.set_autocast_dtype("cpu", dt)
            got, want = f(x, w), _matmul_in_autocast(x, w)
            assert got.dtype is want.dtype is dt
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    finally:
        fusegrad.set_autocast_dtype("cpu", fusegrad.bfloat16)
