"""float32 matrix products of moderate size by fusegrad's own AVX-512 kernel
(`native/sgemm.c`), where it is faster than OpenBLAS's.

A small network's products (a 64-sample batch through a 784x128 layer: 6.4 million
multiply-adds) spend much of their time in OpenBLAS packing operands and in the cuts that keep
results independent of the thread count (`_gemm.cut`). The kernel here reads the right
operand where it lies: it broadcasts the left operand's elements one at a time into vectors of
the right operand's rows, the left operand (any strides) first copied into blocks of 12 rows
step by step where more than one column panel reuses it (a linear layer's weight gradient
`g.T @ x`: 15-20% faster than broadcasting from where its elements lie), and a
forward `x @ W.T` is computed transposed, `(W @ x.T).T`: each panel of 32 batch rows is
transposed by the piece that multiplies it and written back as its rows of the result with
the row of biases (`fg_sgemm_nt_f32`: the cores sharing the panels each keep their own
data). Each element is one sum over the shared dimension in order, so any cut of the columns
or rows, and so any thread count, gives the same bits: the C workers share the column panels
(`_native.run_pieces`), or, with `MIN_CUT_ROWS` rows or more, the rows of C (of W for
`x @ W.T`): a weight's rows, their gradient and the optimizer's update of them then stay on one
core, where a write to lines the other core has read costs several times the write
(docs/architecture.md, "data stays on its core").

On Intel's AVX-512 cores (one Sapphire Rapids core, 2026-12-06): `x @ W.T` for a 64x784 batch
and a 128x784 weight 131-139 us through `_gemm` before (OpenBLAS, transposed as above) against
86-95 us for this kernel's product; `g.T @ x` 110-116 us (cut in two) against 93-98. AMD's
Zen 4 runs AVX-512 at half width, and the kernel still wins there (one EPYC Zen 4 core,
2026-12-06, in one process, alternating, other work stopped): `F.linear` 64x784 by 128x784
0.73x OpenBLAS's time through `_gemm` at one thread, 32x4096 by 4096x4096 0.43-0.50x,
16x2048 by 8192x2048 0.61-0.62x, 64x4096 by 8192x4096 0.62-0.66x at one and two threads; the
MNIST MLP's training step 0.91x at one thread (two runs) and 0.70x at two, LeNet-5,
ResNet-18 and the 1024-wide MLP unchanged within the noise (+-5% at one thread, more at two).
Without AVX-512 the products keep OpenBLAS.

Beyond `MAX_MNK` multiply-adds (or a shared dimension past `MAX_K`) the operands no longer
stay in the caches as the tiles read them, and a cache-blocked kernel takes the product
(`fg_sgemm_blocked_f32`, BLOCKED): blocks of 128 steps by 1008 columns of the right operand
packed in 48-column panels, an 8 x 48 register tile over them (96-108 of the core's 113
GMAC/s on operands in cache, where the 12 x 32 tile reached 84-86), the left operand read
where its rows lie. Each block of steps is summed from zero and added to the element's
total (the tiles' bits where k <= 128): a sum over thousands of steps in one register, as
the tiles make it, was 2.4 times less accurate than OpenBLAS's; in blocks it is 0.6 times
(relative RMS error against float64 at k = 2304). On one Sapphire Rapids core (2026-12-07,
other work stopped) it took 0.72-0.90x OpenBLAS's time through `_gemm` on products of 2^25
to 2^33 multiply-adds at one thread (0.73-1.00x at two); the MLP-1024's five products 12.5
ms against OpenBLAS's 14.4 and MKL's (PyTorch's) 13.5.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from . import _native

# The products taken: more than MIN_MNK multiply-adds (OpenBLAS's serial size,
# `_blas.SERIAL_MNK`: below, NumPy's call costs less than a kernel call and a transposition,
# and `_gemm.matmul` makes it first), at most MAX_MNK (above, OpenBLAS's packed cache blocks
# win), a shared dimension of at most MAX_K (the right operand's column panel, MAX_K rows of
# 32 values, stays in the core's cache).
MIN_MNK = 1 << 18
MAX_MNK = 1 << 25
MAX_K = 4096
PANEL = 32  # columns of C per panel (`NR` in sgemm.c)
_F32 = np.dtype(np.float32)
_ITEM = 4
_SIGNATURE = "pppp" + "i" * 9
_TRANSPOSE = "ppp" + "i" * 5
_NT_SIGNATURE = "ppppp" + "i" * 8
_COLS_SIGNATURE = "pppp" + "i" * 8
_BLOCKED_SIGNATURE = "pppp" + "i" * 11
# The cache-blocked kernel's units (`BMR` rows and `BNR` columns in sgemm.c) and the steps
# of a block, summed from zero before they join an element's total (`BKC`).
BLOCKED_ROWS = 8
BLOCKED_PANEL = 48
BLOCKED_STEPS = 128
# Products with at least this many rows of C (of W, for `x @ W.T`) are cut between threads
# by rows of C (of W): two or more register tiles (`MR` = 12 rows) per thread at two threads.
MIN_CUT_ROWS = 48
# A batch of at most MAX_NT_ROWS rows times a weight's transpose (`x @ W.T`) takes this
# kernel beyond MAX_MNK too, while the batch transposed (MAX_NT_BATCH values) stays in half
# of a core's L2 cache: its pieces read the weight where it lies, each its own rows of it,
# where OpenBLAS packs the whole weight for a few rows of output. F.linear with bias against
# OpenBLAS (2026-12-06, Sapphire Rapids, one and two threads, three runs): 32x4096 by
# 4096x4096 0.3-0.6x, 64x4096 by 8192x4096 0.45-0.6x, 16x2048 by 8192x2048 0.5-0.65x;
# batches of 100-128 rows 0.8-1.2x, 128x4096 (a 2 MB batch) by 4096x4096 0.8-1.1x, 256 rows
# 0.9-1.0x at one thread and up to 1.3x at two.
MAX_NT_ROWS = 64
MAX_NT_BATCH = 1 << 18


class _State:
    # None until decided on first use (`_available`); False turns the kernel off.
    on: bool | None = None


_state = _State()


def _available() -> bool:
    if not _native.enabled():  # (C kernels off for now: decided when they are on)
        return False
    if _state.on is None:
        probe = _native.function("sgemm", "fg_sgemm_available", "", "i")
        _state.on = probe is not None and probe() == 1
    return _state.on


@contextlib.contextmanager
def own_kernel(on: bool) -> Iterator[None]:
    """Run the block with this kernel allowed or not (not: OpenBLAS takes every product),
    for tests of the other paths and for timing them."""
    before = _state.on
    _state.on = None if on else False  # (None: decided again on first use)
    try:
        yield
    finally:
        _state.on = before


def _steps(x: np.ndarray) -> tuple[int, int] | None:
    """`x`'s strides in elements, or None where one is not a whole number of them."""
    s0, s1 = x.strides
    if s0 % _ITEM or s1 % _ITEM:
        return None
    return s0 // _ITEM, s1 // _ITEM


def product(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
            out: np.ndarray | None = None) -> np.ndarray | None:
    """`a @ b` (+ `bias`, a C-contiguous row of the result's width) for float32 matrices in
    this kernel's range, as a new C-contiguous array, or written into `out` (an m x n
    float32 array) and `out` returned; None where the kernel does not take it (another
    dtype or size, a right operand with neither rows nor columns of unit stride, no AVX-512
    build), `out` then untouched."""
    own = _product(a, b, bias, out)
    if own is None or out is None or own is out:
        return own
    out[...] = own  # (the same bits as without `out`, as PyTorch's out= variants)
    return out


def _product(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
             out: np.ndarray | None) -> np.ndarray | None:
    """`product`, `out` written in place only by the blocked kernel (where it is a
    C-contiguous array apart from the operands)."""
    (m, k), n = a.shape, b.shape[1]
    mnk = m * n * k
    if mnk <= MIN_MNK or not _available():
        return None
    if bias is not None and (bias.dtype is not _F32 or bias.shape != (n,) or
                             not bias.flags.c_contiguous):
        return None
    sa, sb = _steps(a), _steps(b)
    if sa is None or sb is None:
        return None
    if (mnk > MAX_MNK or k > MAX_K) and not (
            m <= MAX_NT_ROWS and m * k <= MAX_NT_BATCH and k <= MAX_K and sa[1] == 1 and
            sb[0] == 1):
        return _blocked(a, b, bias, sa, sb, m, k, n, out)
    fn = _native.function("sgemm", "fg_sgemm_f32", _SIGNATURE)
    address = _native.address
    if sb[1] == 1:  # B's rows are runs: C = A @ B directly
        out = np.empty((m, n), _F32)
        args = (address(a), address(b), address(out), None if bias is None else address(bias),
                sa[0], sa[1], sb[0], n, m, k, n)
        if m >= MIN_CUT_ROWS:  # each thread its run of C's rows (module docstring)
            _native.run_pieces(_native.function("sgemm", "fg_sgemm_rows_f32", _SIGNATURE),
                               args, (), m, mnk)
        else:
            _native.run_pieces(fn, args, (), -(-n // PANEL), mnk)
        return out
    if sb[0] != 1:
        return None
    if sa[1] == 1:
        # A batch times a weight's transpose (`x @ W.T`): each row panel transposes its own
        # rows of A and writes its own rows of C (`fg_sgemm_nt_f32`), so the cores sharing
        # the panels each keep their data (a transposition of all of A by this thread, half
        # of it then read by the other core, cost the second core's gain).
        panels = -(-m // PANEL)
        out = np.empty((m, n), _F32)
        if n >= MIN_CUT_ROWS:  # each thread its rows of W (module docstring)
            cols = _native.function("sgemm", "fg_sgemm_nt_cols_f32", _COLS_SIGNATURE)
            _native.run_pieces(cols,
                               (address(a), address(b), address(out),
                                None if bias is None else address(bias), sa[0], sb[1], n, m, k,
                                n), (), n, mnk)
            return out
        work = np.empty(panels * k * PANEL, _F32)
        _native.run_pieces(_native.function("sgemm", "fg_sgemm_nt_f32", _NT_SIGNATURE),
                           (address(a), address(b), address(out),
                            None if bias is None else address(bias), address(work), sa[0],
                            sb[1], n, m, k, n), (), panels, mnk)
        return out
    # B's columns are runs (a weight's transpose): C^T = B^T @ A^T, A^T's rows runs.
    transpose = _native.function("sgemm", "fg_transpose_f32", _TRANSPOSE)
    if sa[0] == 1:
        at, lda = a, sa[1]  # (A^T's row p starts at A's column p)
    else:
        at, lda = np.empty((k, m), _F32), m
        transpose(address(a), address(at), None, sa[0], sa[1], m, m, k)
    ct = np.empty((n, m), _F32)
    _native.run_pieces(fn, (address(b), address(at), address(ct), None, sb[1], sb[0], lda, m,
                            n, k, m), (), -(-m // PANEL), mnk)
    out = np.empty((m, n), _F32)
    transpose(address(ct), address(out), None if bias is None else address(bias), m, 1, n,
              n, m)
    return out


def _blocked(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, sa: tuple[int, int],
             sb: tuple[int, int], m: int, k: int, n: int,
             out: np.ndarray | None = None) -> np.ndarray | None:
    """A large product (`BLOCKED` in the module docstring) by the cache-blocked kernel
    (`fg_sgemm_blocked_f32`), into `out` where it is a C-contiguous float32 array apart from
    the operands, else into a new array; None where neither of an operand's strides is a
    unit (the OpenBLAS path copies it)."""
    if 1 not in sa or 1 not in sb:
        return None
    if out is None or out.dtype is not _F32 or out.shape != (m, n) or \
            not out.flags.c_contiguous or np.may_share_memory(out, a) or \
            np.may_share_memory(out, b):
        out = np.empty((m, n), _F32)
    address = _native.address
    # A weight's gradient (rows of C at least its columns) is cut by rows, a batch's product
    # by column panels (a weight's rows for `x @ W.T`): each core writes the rows of a
    # weight's gradient that it later updates, or reads only its rows of the weight.
    by_rows = m >= n
    _native.run_pieces(_native.function("sgemm", "fg_sgemm_blocked_f32", _BLOCKED_SIGNATURE),
                       (address(a), address(b), address(out),
                        None if bias is None else address(bias), sa[0], sa[1], sb[0], sb[1],
                        n, m, k, n), (int(by_rows),),
                       -(-m // BLOCKED_ROWS) if by_rows else -(-n // BLOCKED_PANEL), m * n * k)
    return out
