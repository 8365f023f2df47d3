"""Large matrix products cut into pieces (`ops/_gemm.py`): the pieces run on the C workers
(`native/gemm.c`, OpenBLAS's CBLAS GEMM called from C) where they can, on the intra-op pool
where they cannot; either way the bits do not depend on the thread count, and both ways give
the same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _blas, _gemm, _native, _sgemm

pytestmark = pytest.mark.skipif(
    _gemm.MAX_GEMM_PIECES < 2 or not _blas.available(),
    reason="one CPU or no settable OpenBLAS: no product is cut")

# (m, k, n) of products cut along rows, columns and the shared dimension (`_gemm.cut`).
SHAPES = {"rows": (512, 256, 128), "columns": (128, 256, 512), "deep": (16, 8192, 64)}


def _operand(rng, rows: int, cols: int, dtype, transposed: bool) -> np.ndarray:
    """A `rows` x `cols` matrix, stored row-major or as the transpose of a row-major one."""
    if transposed:
        return rng.standard_normal((cols, rows)).astype(dtype).T
    return rng.standard_normal((rows, cols)).astype(dtype)


@pytest.fixture(autouse=True)
def openblas_products():
    """Every product through OpenBLAS: these tests are of its pieces (fusegrad's own kernel,
    `_sgemm`, takes float32 products of these sizes on Intel's AVX-512 cores; its own tests
    are in test_sgemm.py)."""
    with _sgemm.own_kernel(False):
        yield


@pytest.fixture
def in_c(monkeypatch):
    """A list of the results of each `_gemm._in_c` call (whether the C workers ran it)."""
    seen: list[bool] = []
    real = _gemm._in_c

    def spy(*args, **kwargs):
        done = real(*args, **kwargs)
        seen.append(done)
        return done

    monkeypatch.setattr(_gemm, "_in_c", spy)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("cut", list(SHAPES))
def test_pieces_give_one_threads_bits_at_two_and_the_pools_bits(threads, in_c, cut, tb, ta,
                                                                 dtype):
    m, k, n = SHAPES[cut]
    assert _gemm.cut(1, m, n, k)[0] == {"rows": 1, "columns": 2, "deep": 3}[cut]
    rng = np.random.default_rng(0)
    a = _operand(rng, m, k, dtype, ta)
    b = _operand(rng, k, n, dtype, tb)
    got = []
    for n_threads in (1, 2):
        fusegrad.set_num_threads(n_threads)
        got.append(_gemm.matmul(a, b))
    with _native.native_kernels(False):  # the intra-op pool's way
        pool = _gemm.matmul(a, b)
    if _cbuild.compiler() is not None:  # one thread: NumPy's calls; two: the C workers
        assert in_c[:1] == [True]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], pool)
    ref = torch.from_numpy(a.astype(np.float64)) @ torch.from_numpy(b.astype(np.float64))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[0], ref.numpy(), rtol=tol, atol=tol * np.sqrt(k))


def test_operands_blas_cannot_read_take_the_pool(threads, in_c):
    """A strided operand (every other column) or a result that is not C-contiguous: the
    pool's way, with the same result."""
    fusegrad.set_num_threads(2)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 512)).astype(np.float32)[:, ::2]
    b = rng.standard_normal((256, 128)).astype(np.float32)
    got = _gemm.matmul(a, b)
    out = np.empty((128, 512), np.float32).T
    _gemm.matmul(np.ascontiguousarray(a), b, out=out)
    assert in_c == [False, False]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-4)


def test_blas_layout():
    """How CBLAS reads a row-major operand in place: (stored transposed, leading
    dimension), None where it cannot."""
    x = np.zeros((6, 10), np.float32)
    assert _gemm._blas_layout(x) == (0, 10)
    assert _gemm._blas_layout(x.T) == (1, 10)
    assert _gemm._blas_layout(x[:, 2:7]) == (0, 10)
    assert _gemm._blas_layout(x[:, ::2]) is None
    assert _gemm._blas_layout(x[::-1]) is None
    assert _gemm._blas_layout(np.broadcast_to(x[:1], (6, 10))) is None


def test_a_linear_layer_at_two_threads_matches_torch_and_one_thread(threads):
    """The products of a training step's linear layer (forward, both gradients) through the
    public API: one thread's bits at two, and PyTorch's values."""
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((256, 784)).astype(np.float32)
    w0 = rng.standard_normal((1024, 784)).astype(np.float32) * 0.03
    got = []
    for n_threads in (1, 2):
        fusegrad.set_num_threads(n_threads)
        x = fusegrad.tensor(x0, requires_grad=True)
        w = fusegrad.tensor(w0, requires_grad=True)
        y = fusegrad.nn.functional.linear(x, w)
        (y * y).sum().backward()
        got.append([y.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
    for one, two in zip(*got, strict=True):
        np.testing.assert_array_equal(one, two)
    x = torch.tensor(x0, requires_grad=True)
    w = torch.tensor(w0, requires_grad=True)
    y = torch.nn.functional.linear(x, w)
    (y * y).sum().backward()
    for ours, theirs in zip(got[0], (y, x.grad, w.grad), strict=True):
        theirs = theirs.detach().numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())


def test_a_single_group_stack_takes_the_c_workers(threads, in_c):
    """A convolution's GEMM of one group, (1, m, k) @ (1, k, n): one matrix product, cut and
    run as the 2-D one (the same bits), with the stack axis kept in the result."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 256, 512)).astype(np.float32)
    b = rng.standard_normal((1, 512, 128)).astype(np.float32)
    fusegrad.set_num_threads(2)
    got = _gemm.matmul(a, b)
    flat = _gemm.matmul(a[0], b[0])
    assert got.shape == (1, 256, 128)
    if _cbuild.compiler() is not None:
        assert in_c == [True, True]
    np.testing.assert_array_equal(got[0], flat)
    np.testing.assert_allclose(got[0], a[0].astype(np.float64) @ b[0], rtol=2e-5, atol=2e-4)


def test_a_result_written_over_an_operand_is_computed_from_the_operands(threads, in_c):
    """`out` the same memory as an operand, in a product cut by rows or by columns: each
    piece reads the operands as they were (the product goes to a new array first)."""
    fusegrad.set_num_threads(2)
    rng = np.random.default_rng(4)
    for rows, cols in ((512, 256), (256, 512)):
        a = rng.standard_normal((rows, 256)).astype(np.float32)
        b = rng.standard_normal((256, cols)).astype(np.float32)
        want = a.astype(np.float64) @ b
        out = np.zeros((rows + cols) * 256, np.float32)[:rows * cols].reshape(rows, cols)
        a_over = out.reshape(-1)[:a.size].reshape(a.shape)  # `a` lives in `out`'s memory
        a_over[...] = a
        got = _gemm.matmul(a_over, b, out=out)
        assert got is out
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cut", list(SHAPES))
def test_a_row_of_biases_is_added_as_after_the_product(threads, in_c, cut, dtype):
    """`bias=` (a linear layer's row of biases, added by each piece in C) gives the bits of
    the product plus the bias added afterwards, at one and two threads and on NumPy's way; a
    bias of another shape is added whole."""
    m, k, n = SHAPES[cut]
    rng = np.random.default_rng(1)
    a = _operand(rng, m, k, dtype, False)
    b = _operand(rng, k, n, dtype, True)
    row = rng.standard_normal(n).astype(dtype)
    full = rng.standard_normal((m, n)).astype(dtype)
    fusegrad.set_num_threads(2)
    for bias in (row, full):
        want = _gemm.matmul(a, b) + bias
        for n_threads in (1, 2):
            fusegrad.set_num_threads(n_threads)
            np.testing.assert_array_equal(_gemm.matmul(a, b, bias=bias), want)
        with _native.native_kernels(False):
            np.testing.assert_array_equal(_gemm.matmul(a, b, bias=bias), want)
    if _cbuild.compiler() is not None:
        # the product at two threads, with the bias at two (at one, NumPy's calls: `_in_c`
        # is not asked), then with the C kernels off
        assert in_c[:3] == [True, True, False]
    lin_x = fusegrad.from_numpy(a)
    out = fusegrad.nn.functional.linear(lin_x, fusegrad.from_numpy(b.T.copy()),
                                        fusegrad.from_numpy(row))
    np.testing.assert_array_equal(out.numpy(), _gemm.matmul(a, b) + row)


# (m, k, n) of a linear layer's forward `x @ W.T` small enough for OpenBLAS's direct kernel:
# cut along rows, along the shared dimension, and not cut; and a batch not a multiple of 4.
DIRECT_SHAPES = {"mlp": (64, 784, 128), "deep": (40, 999, 100), "rows": (64, 100, 600),
                 "whole": (32, 300, 64), "odd_batch": (63, 784, 128),
                 "classifier": (256, 1024, 10)}


@pytest.mark.parametrize("shape", list(DIRECT_SHAPES))
def test_transposed_weight_products_keep_one_threads_bits(threads, shape):
    """`x @ W.T` (+ bias) of a row-major batch and weight, computed as `(W @ x.T).T` where
    OpenBLAS has the direct kernel (`_gemm._untransposed`): the same bits at one thread and
    two, PyTorch's values, a row-major result."""
    m, k, n = DIRECT_SHAPES[shape]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = []
    for n_threads in (1, 2):
        fusegrad.set_num_threads(n_threads)
        got.append(_gemm.matmul(x, w.T, bias=bias))
    np.testing.assert_array_equal(got[0], got[1])
    assert got[0].flags.c_contiguous
    if shape in ("odd_batch", "classifier"):
        # the direct kernel wants the result's width a multiple of 4, and a batch larger
        # than half the weight's rows costs more to transpose than the packing it saves
        assert not _gemm._takes_direct_untransposed(x, w.T)
    ref = torch.nn.functional.linear(*(torch.from_numpy(v.astype(np.float64))
                                       for v in (x, w, bias)))
    np.testing.assert_allclose(got[0], ref.numpy(), rtol=2e-5, atol=2e-5 * np.sqrt(k))
