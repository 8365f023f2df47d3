"""Compiled attention: the CPU flash attention and its backward run as the code generator's C
kernels (`compiler/codegen/attention.py`) in compiled graphs, and give eager's values within
the ops' float32 tolerance (the registry's 1e-4; measured differences are near 1e-6, from
sums taken in another order). Oracle: eager execution of the same code on the same data
(eager attention is NumPy's matrix products and softmax); calls the kernels do not compute
(float64, masks) stay with the NumPy kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad
from fusegrad.compiler import codegen
from fusegrad.compiler.codegen import attention, build
from fusegrad.ops import attention as eager_attention

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")

F = fusegrad.nn.functional
TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def sources(monkeypatch):
    """The generated source of every graph compiled during the test."""
    out: list = []
    original = codegen.compile_graph

    def recording(gm, inputs, options=None):
        compiled = original(gm, inputs, options)
        out.append(compiled.source)
        return compiled

    monkeypatch.setattr(codegen, "compile_graph", recording)
    return out


def _attend(q, k, v, causal, scale, gqa, dtype=None, mask=None):
    """Attention on projections (so q, k, v are strided views, as a model's), then a
    nonlinear reduction (every output element gets its own gradient)."""
    q, k, v = q * 1.5, k - 0.25, v * 1.0
    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sin().sum()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                         enable_gqa=gqa)
    return out.transpose(1, 2).sin().sum()


def _compare(shapes, causal=False, scale=None, dtype=np.float32, mask=None):
    """Loss and q/k/v gradients of `_attend`, compiled against eager."""
    rng = np.random.default_rng(len(shapes[0]) + shapes[0][2])
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    gqa = shapes[0][1] != shapes[1][1]
    results = []
    for fn in (_attend, fusegrad.compile(_attend)):
        ts = [fusegrad.tensor(a, requires_grad=True) for a in arrays]
        m = None if mask is None else fusegrad.tensor(mask)
        loss = fn(*ts, causal, scale, gqa, mask=m)
        loss.backward()
        results.append([loss.detach().numpy()] + [t.grad.numpy() for t in ts])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, **TOL)


# (q shape, k/v shape, causal, scale): one row and key block; several row blocks (64 rows
# each) and key blocks (64 keys each) with a causal mask; more keys than queries and the
# reverse; grouped-query heads; a head size not a multiple of 16, an explicit scale.
CASES = [
    ((2, 3, 5, 8), (2, 3, 6, 8), False, None),
    ((1, 2, 70, 4), (1, 2, 70, 4), True, None),
    ((1, 2, 9, 16), (1, 2, 130, 16), False, None),
    ((1, 1, 131, 5), (1, 1, 20, 5), True, None),
    ((2, 4, 7, 3), (2, 2, 7, 3), True, -0.3),
]


@pytest.mark.parametrize("q_shape,kv_shape,causal,scale", CASES)
def test_compiled_attention_is_eager(sources, q_shape, kv_shape, causal, scale):
    """Forward and every input's gradient through the C kernels are eager's."""
    _compare([q_shape, kv_shape, kv_shape], causal, scale)
    text = "\n".join(sources)
    assert "_extern_attention_forward(" in text and "_extern_attention_backward(" in text


def test_other_calls_keep_the_numpy_kernels(sources):
    """float64 attention and attention with a mask run eager's kernels, with its values."""
    shapes = [(1, 2, 5, 4)] * 3
    _compare(shapes, dtype=np.float64)
    mask = np.random.default_rng(0).standard_normal((5, 5)).astype(np.float32)
    _compare(shapes, mask=mask)
    text = "\n".join(sources)
    assert "_extern_attention_forward(" not in text
    assert "_extern__scaled_dot_product_flash_attention_for_cpu(" in text


def test_kernels_keep_eager_layouts_and_bits_at_any_thread_count():
    """On a projection's strided views (GPT's q, k, v) the kernels' results have the eager
    kernels' values and strides, and the same bits with one thread and with two."""
    rng = np.random.default_rng(1)
    b, t, h, d = 4, 40, 4, 8
    qkv = rng.standard_normal((b, t, 3 * h * d)).astype(np.float32)
    q, k, v = (qkv[:, :, i * h * d:(i + 1) * h * d].reshape(b, t, h, d).transpose(0, 2, 1, 3)
               for i in range(3))
    want_out, want_lse = eager_attention._flash_kernel(q, k, v, 0.0, True)
    g = rng.standard_normal(want_out.shape).astype(np.float32)
    want_grads = eager_attention._backward_kernel(g, q, k, v, want_out, want_lse, 0.0, True)
    threads = fusegrad.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            fusegrad.set_num_threads(n)
            out, lse = attention.forward(q, k, v, 0.0, True)
            runs.append([out, lse, *attention.backward(g, q, k, v, out, lse, 0.0, True)])
    finally:
        fusegrad.set_num_threads(threads)
    out, lse = runs[0][:2]
    assert out.strides == want_out.strides and lse.strides == want_lse.strides
    for got, want in zip(runs[0], [want_out, want_lse, *want_grads]):
        np.testing.assert_allclose(got, want, **TOL)
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("which,value", [(0, np.nan), (1, -np.inf), (2, np.inf), (0, 3e37)])
def test_infinities_and_nan_give_eager_values(which, value):
    """An infinite or NaN input (or a score that overflows) gives eager's results: the
    kernels notice it and eager's kernels compute the call."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((1, 2, 6, 4)).astype(np.float32) for _ in range(3)]
    arrays[which][0, 1, 2, :2] = value
    want = eager_attention._flash_kernel(*arrays, 0.0, True)
    got = attention.forward(*arrays, 0.0, True)
    g = rng.standard_normal(want[0].shape).astype(np.float32)
    want += tuple(eager_attention._backward_kernel(g, *arrays, *want, 0.0, True))
    got += tuple(attention.backward(g, *arrays, *want[:2], 0.0, True))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, equal_nan=True, **TOL)
