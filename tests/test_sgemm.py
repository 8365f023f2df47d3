"""fusegrad's own float32 product kernel (`ops/_sgemm.py`, `native/sgemm.c`), which takes
products of moderate size on Intel's AVX-512 cores: values against float64 products for
every operand layout (tails of its register tile, negative and broadcast strides, NaN and
infinity), the same bits for any cut of its column panels, of C's rows and of a weight's
rows, and at one and two threads, and a small network's training step against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad
from fusegrad.ops import _gemm, _native, _sgemm

pytestmark = pytest.mark.skipif(not _sgemm._available(),
                                reason="no AVX-512 build of the kernel")

# (m, k, n): the MNIST MLP's layer, its weight gradient, tails of the 12 x 32 register tile
# and of the 16-value vectors, a long shared dimension, a single row or column.
SHAPES = [(64, 784, 128), (128, 64, 784), (13, 300, 77), (100, 100, 100), (37, 1000, 33),
          (1, 4096, 65), (200, 5, 300), (9, 4000, 9), (65, 64, 1), (23, 3, 4000)]


def _matrix(rng, rows: int, cols: int, transposed: bool) -> np.ndarray:
    """A float32 `rows` x `cols` matrix, stored row-major or as a row-major one's transpose."""
    if transposed:
        return rng.standard_normal((cols, rows)).astype(np.float32).T
    return rng.standard_normal((rows, cols)).astype(np.float32)


def _reference(a, b, bias):
    out = a.astype(np.float64) @ b.astype(np.float64)
    return out if bias is None else out + bias


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_products_match_float64(shape, layout, with_bias):
    m, k, n = shape
    rng = np.random.default_rng(m * 7 + k + n)
    a = _matrix(rng, m, k, layout[0] == "t")
    b = _matrix(rng, k, n, layout[1] == "t")
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    if m * n * k <= _sgemm.MIN_MNK:
        assert _sgemm.product(a, b, bias) is None
        return
    got = _sgemm.product(a, b, bias)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (m, n)
    np.testing.assert_allclose(got, _reference(a, b, bias), rtol=1e-5, atol=1e-5 * k ** 0.5)
    # `_gemm.matmul` takes it (the same bits), OpenBLAS agrees within rounding.
    np.testing.assert_array_equal(_gemm.matmul(a, b, bias=bias), got)
    with _sgemm.own_kernel(False):
        blas = _gemm.matmul(a, b, bias=bias)
    np.testing.assert_allclose(got, blas, rtol=1e-5, atol=1e-5 * k ** 0.5)


def test_strided_and_broadcast_operands():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((80, 600)).astype(np.float32)[::-1, ::2]  # negative, step 2
    b = rng.standard_normal((300, 200)).astype(np.float32)
    np.testing.assert_allclose(_sgemm.product(a, b, None), _reference(a, b, None),
                               rtol=1e-5, atol=1e-4)
    row = np.broadcast_to(rng.standard_normal((1, 300)).astype(np.float32), (90, 300))
    got = _sgemm.product(row, b, None)
    np.testing.assert_allclose(got, _reference(row, b, None), rtol=1e-5, atol=1e-4)
    assert (got == got[0]).all()
    # Neither of B's strides a unit: not taken (OpenBLAS's path copies it).
    b2 = rng.standard_normal((200, 600)).astype(np.float32)[:, ::2].T
    assert _sgemm.product(a, b2, None) is None
    # Another dtype or a bias of another shape: not taken.
    assert _sgemm.product(a.astype(np.float64), b.astype(np.float64), None) is None
    assert _sgemm.product(a, b, np.zeros(7, np.float32)) is None


def test_nan_and_infinity_propagate_as_in_blas():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    w = rng.standard_normal((128, 784)).astype(np.float32)
    x[3, 10] = np.nan
    x[5, 0] = np.inf
    w[7] = 0.0  # inf * 0 is NaN
    got = _sgemm.product(x, w.T, None)
    with _sgemm.own_kernel(False):
        blas = _gemm.matmul(x, w.T)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(blas))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(blas))
    assert np.isnan(got[3]).all() and np.isnan(got[5, 7])


@pytest.mark.parametrize("a_columns", [False, True], ids=["a-rows", "a-columns"])
def test_any_cut_of_the_panels_gives_the_same_bits(a_columns):
    """Each element is one sum in order: panels computed in any ranges, in any order, give
    the whole call's bits (a call of one panel reads A where it lies, one of more packs it
    first; A's rows or its columns runs of unit stride)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((333, 50) if a_columns else (50, 333)).astype(np.float32)
    a = a.T if a_columns else a
    sai, sak = (s // 4 for s in a.strides)
    b = rng.standard_normal((333, 170)).astype(np.float32)
    fn = _native.function("sgemm", "fg_sgemm_f32", _sgemm._SIGNATURE)
    panels = -(-170 // _sgemm.PANEL)
    whole = np.empty((50, 170), np.float32)
    fn(a.ctypes.data, b.ctypes.data, whole.ctypes.data, None, sai, sak, 170, 170, 50, 333, 170,
       0, panels)
    parts = np.full((50, 170), np.nan, np.float32)
    for first, last in ((3, panels), (1, 3), (0, 1)):
        fn(a.ctypes.data, b.ctypes.data, parts.ctypes.data, None, sai, sak, 170, 170, 50, 333,
           170, first, last)
    np.testing.assert_array_equal(parts, whole)
    np.testing.assert_allclose(whole, _reference(a, b, None), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("a_columns", [False, True], ids=["a-rows", "a-columns"])
def test_any_cut_of_the_rows_gives_the_panels_bits(a_columns):
    """The cut by rows of C (`fg_sgemm_rows_f32`, each thread a run of C) gives the bits of
    the cut by column panels, for any ranges of rows, tails of the register tile included."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((300, 61) if a_columns else (61, 300)).astype(np.float32)
    a = a.T if a_columns else a
    sai, sak = (s // 4 for s in a.strides)
    b = rng.standard_normal((300, 150)).astype(np.float32)
    bias = rng.standard_normal(150).astype(np.float32)
    panels = _native.function("sgemm", "fg_sgemm_f32", _sgemm._SIGNATURE)
    rows = _native.function("sgemm", "fg_sgemm_rows_f32", _sgemm._SIGNATURE)
    whole = np.empty((61, 150), np.float32)
    panels(a.ctypes.data, b.ctypes.data, whole.ctypes.data, bias.ctypes.data, sai, sak, 150,
           150, 61, 300, 150, 0, -(-150 // _sgemm.PANEL))
    parts = np.full((61, 150), np.nan, np.float32)
    for first, last in ((30, 61), (13, 30), (0, 1), (1, 13)):
        rows(a.ctypes.data, b.ctypes.data, parts.ctypes.data, bias.ctypes.data, sai, sak, 150,
             150, 61, 300, 150, first, last)
    np.testing.assert_array_equal(parts, whole)
    np.testing.assert_allclose(whole, _reference(a, b, bias), rtol=1e-5, atol=1e-4)


def test_any_cut_of_the_weights_rows_gives_the_batch_cuts_bits():
    """`x @ W.T` cut by W's rows (`fg_sgemm_nt_cols_f32`, each thread reading its rows of W
    alone) gives the bits of the cut by panels of x's rows (`fg_sgemm_nt_f32`), for any
    ranges of W's rows and a batch that is not a whole number of panels."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((70, 136)).astype(np.float32)
    w = rng.standard_normal((53, 136)).astype(np.float32)
    bias = rng.standard_normal(53).astype(np.float32)
    batch = _native.function("sgemm", "fg_sgemm_nt_f32", _sgemm._NT_SIGNATURE)
    cols = _native.function("sgemm", "fg_sgemm_nt_cols_f32", _sgemm._COLS_SIGNATURE)
    panels = -(-70 // _sgemm.PANEL)
    work = np.empty(panels * 136 * _sgemm.PANEL, np.float32)
    whole = np.empty((70, 53), np.float32)
    batch(x.ctypes.data, w.ctypes.data, whole.ctypes.data, bias.ctypes.data, work.ctypes.data,
          136, 136, 53, 70, 136, 53, 0, panels)
    parts = np.full((70, 53), np.nan, np.float32)
    for first, last in ((40, 53), (0, 25), (25, 40)):
        cols(x.ctypes.data, w.ctypes.data, parts.ctypes.data, bias.ctypes.data, 136, 136, 53,
             70, 136, 53, first, last)
    np.testing.assert_array_equal(parts, whole)
    np.testing.assert_allclose(whole, _reference(x, w.T, bias), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_two_threads_give_one_threads_bits(shared, layout):
    rng = np.random.default_rng(8)
    a = _matrix(rng, 96, 500, layout[0] == "t")
    b = _matrix(rng, 500, 200, layout[1] == "t")
    bias = rng.standard_normal(200).astype(np.float32)
    got = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        got.append(_gemm.matmul(a, b, bias=bias))
    np.testing.assert_array_equal(got[0], got[1])


def test_a_small_networks_training_step_matches_torch(threads):
    """The MNIST MLP's step (its two larger products and their gradients through the
    kernel) against PyTorch's, at one and two threads."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    x0 = rng.standard_normal((64, 784)).astype(np.float32)
    w0 = (rng.standard_normal((128, 784)) * 0.03).astype(np.float32)
    b0 = rng.standard_normal(128).astype(np.float32)
    v0 = (rng.standard_normal((10, 128)) * 0.1).astype(np.float32)
    y0 = rng.integers(0, 10, 64)

    def step(lib):
        w, b, v = (lib.tensor(t, requires_grad=True) for t in (w0, b0, v0))
        h = lib.nn.functional.relu(lib.nn.functional.linear(lib.tensor(x0), w, b))
        loss = lib.nn.functional.cross_entropy(h @ v.t(), lib.tensor(y0))
        loss.backward()
        return [loss.detach().numpy(), w.grad.numpy(), b.grad.numpy(), v.grad.numpy()]

    want = step(torch)
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        for got, ref in zip(step(fusegrad), want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


def test_a_product_into_out_has_the_bits_of_one_without():
    """`mm(a, b, out=o)` gives the bits of `mm(a, b)`, as PyTorch's out= variants do (the
    kernel's product, then written into `o`), also where `o` overlaps an operand."""
    rng = np.random.default_rng(10)
    a = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal((300, 64)).astype(np.float32)
    want = fusegrad.mm(fusegrad.tensor(a), fusegrad.tensor(b)).numpy()
    out = fusegrad.empty(64, 64)
    fusegrad.mm(fusegrad.tensor(a), fusegrad.tensor(b), out=out)
    np.testing.assert_array_equal(out.numpy(), want)
    square = rng.standard_normal((128, 128)).astype(np.float32)
    x = fusegrad.tensor(square)
    want = fusegrad.mm(x, x).numpy()
    fusegrad.mm(x, x, out=x)
    np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("shape,kernel", [((16, 2048, 8192), "tiles"),
                                          ((64, 4096, 1040), "tiles"),
                                          ((65, 4096, 1040), "blocked"),
                                          ((64, 4097, 1024), "blocked")],
                         ids=["16x2048x8192", "64x4096x1040", "65-rows", "batch-past-L2"])
def test_a_small_batch_times_a_large_weights_transpose(shape, kernel):
    """Beyond MAX_MNK a batch of at most MAX_NT_ROWS rows times a weight's transpose takes
    the transposed tiles (the tile kernel's bits); a batch of more rows, or one whose
    transposition would pass MAX_NT_BATCH values, the cache-blocked kernel (its blocks'
    bits), at one and two threads."""
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    assert m * n * k > _sgemm.MAX_MNK
    got = _sgemm.product(x, w.T, bias)
    np.testing.assert_allclose(got, _reference(x, w.T, bias), rtol=1e-5, atol=1e-5 * k ** 0.5)
    expected = (_tiles if kernel == "tiles" else _blocks)(x, np.ascontiguousarray(w.T), bias)
    np.testing.assert_array_equal(got, expected)
    before = fusegrad.get_num_threads()
    try:
        for threads in (1, 2):
            fusegrad.set_num_threads(threads)
            np.testing.assert_array_equal(_gemm.matmul(x, w.T, bias=bias), got)
    finally:
        fusegrad.set_num_threads(before)


def _tiles(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """`a @ b` (+ bias) by one whole call of the 12 x 32 tile kernel (`fg_sgemm_f32`; b's
    rows runs of unit stride), whatever the product's size."""
    (m, k), n = a.shape, b.shape[1]
    out = np.empty((m, n), np.float32)
    fn = _native.function("sgemm", "fg_sgemm_f32", _sgemm._SIGNATURE)
    fn(a.ctypes.data, b.ctypes.data, out.ctypes.data, None if bias is None else bias.ctypes.data,
       a.strides[0] // 4, a.strides[1] // 4, b.strides[0] // 4, n, m, k, n, 0,
       -(-n // _sgemm.PANEL))
    return out


def _blocks(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """`a @ b` (+ bias) summed as the blocked kernel sums it: each block of
    `BLOCKED_STEPS` steps by the tile kernel (one sum in order from zero), the blocks' sums
    added in order, then the bias."""
    step = _sgemm.BLOCKED_STEPS
    total = None
    for p in range(0, a.shape[1], step):
        part = _tiles(a[:, p:p + step], np.ascontiguousarray(b[p:p + step]), None)
        total = part if total is None else total + part
    return total if bias is None else total + bias


# (m, k, n) past MAX_MNK or MAX_K: the MLP-1024's layer and weight gradient, tails of the
# 8-row tile, of a 48-column panel and of a 16-value vector, a block of steps (128) and of
# columns (1008) cut short, a single row and a shared dimension past MAX_K.
BLOCKED_SHAPES = [(256, 784, 1024), (1024, 256, 784), (203, 300, 1100), (90, 4100, 33),
                  (1, 9000, 400), (300, 129, 1009)]


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", BLOCKED_SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in
                                                       BLOCKED_SHAPES])
def test_large_products_take_the_blocked_kernel(shape, layout):
    """A product past MAX_MNK (or with a shared dimension past MAX_K) runs in the
    cache-blocked kernel: values against float64, its blocks' sums (`_blocks`), for any
    operand layout
    and at one and two threads."""
    m, k, n = shape
    rng = np.random.default_rng(m + 3 * k + n)
    a = _matrix(rng, m, k, layout[0] == "t")
    b = _matrix(rng, k, n, layout[1] == "t")
    bias = rng.standard_normal(n).astype(np.float32)
    assert m * n * k > _sgemm.MAX_MNK or k > _sgemm.MAX_K
    got = _sgemm.product(a, b, bias)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (m, n)
    np.testing.assert_allclose(got, _reference(a, b, bias), rtol=1e-5, atol=1e-5 * k ** 0.5)
    np.testing.assert_array_equal(got, _blocks(a, b, bias))
    before = fusegrad.get_num_threads()
    try:
        for threads in (1, 2):
            fusegrad.set_num_threads(threads)
            np.testing.assert_array_equal(_gemm.matmul(a, b, bias=bias), got)
    finally:
        fusegrad.set_num_threads(before)


@pytest.mark.parametrize("by_rows", [False, True], ids=["panels", "rows"])
def test_any_cut_of_the_blocked_kernel_gives_the_same_bits(by_rows):
    """The blocked kernel's units (48-column panels, or 8-row blocks) computed in any ranges
    and order give the whole call's bits, with the bias and a NaN and an infinity in A."""
    rng = np.random.default_rng(13)
    m, k, n = 77, 300, 500
    a = rng.standard_normal((k, m)).astype(np.float32).T
    a[5, 7], a[60, 0] = np.nan, np.inf
    b = rng.standard_normal((n, k)).astype(np.float32).T
    bias = rng.standard_normal(n).astype(np.float32)
    fn = _native.function("sgemm", "fg_sgemm_blocked_f32", _sgemm._BLOCKED_SIGNATURE)
    units = -(-m // _sgemm.BLOCKED_ROWS) if by_rows else -(-n // _sgemm.BLOCKED_PANEL)

    def run(out, first, last):
        fn(a.ctypes.data, b.ctypes.data, out.ctypes.data, bias.ctypes.data, 1, m, 1, k, n, m, k,
           n, first, last, int(by_rows))

    whole = np.empty((m, n), np.float32)
    run(whole, 0, units)
    parts = np.full((m, n), -1.0, np.float32)
    for first, last in ((4, units), (1, 4), (0, 1)):
        run(parts, first, last)
    np.testing.assert_array_equal(parts, whole)
    np.testing.assert_array_equal(whole, _blocks(a, b, bias))
    assert np.isnan(whole[5]).all() and not np.isnan(whole[4]).any()


def test_the_blocked_kernel_writes_out_in_place_only_where_it_may():
    """`out` of the product's shape, C-contiguous and apart from the operands is written in
    place; one that overlaps an operand, is strided or has another shape is not (the first
    two get the product's bits through a copy, the last NumPy's broadcast error)."""
    rng = np.random.default_rng(17)
    a = rng.standard_normal((256, 300)).astype(np.float32)
    b = rng.standard_normal((300, 512)).astype(np.float32)
    want = _sgemm.product(a, b, None)
    out = np.empty((256, 512), np.float32)
    assert _sgemm.product(a, b, None, out) is out
    np.testing.assert_array_equal(out, want)
    wide = np.zeros((256, 1024), np.float32)
    assert _sgemm.product(a, b, None, wide[:, ::2]) is not None
    np.testing.assert_array_equal(wide[:, ::2], want)
    assert not wide[:, 1::2].any()
    square = rng.standard_normal((512, 512)).astype(np.float32)
    expected = _sgemm.product(square, square, None)
    assert _sgemm.product(square, square, None, square) is square
    np.testing.assert_array_equal(square, expected)
    with pytest.raises(ValueError):
        _sgemm.product(a, b, None, np.empty((128, 512), np.float32))


def test_the_blocked_kernel_is_as_accurate_as_openblas():
    """A long shared dimension (a 3 x 3 convolution of 256 channels: 2304 steps) summed in
    blocks: its RMS error against float64 at most OpenBLAS's (a sum over every step in one
    register was 2.4 times OpenBLAS's)."""
    rng = np.random.default_rng(23)
    a = rng.standard_normal((256, 2304)).astype(np.float32)
    b = rng.standard_normal((2304, 512)).astype(np.float32)
    want = _reference(a, b, None)
    got = _sgemm.product(a, b, None)
    with _sgemm.own_kernel(False):
        blas = _gemm.matmul(a, b)

    def error(x):
        return np.sqrt(np.mean((x - want) ** 2))

    assert error(got) <= error(blas)
