"""Matrix products on the intra-op threads: a large GEMM cut into pieces by its shapes
(`cut`), each piece one call of NumPy's OpenBLAS held to one thread, the pieces shared
between threads.

Where the C kernels are built and threads share the pieces, the pieces of a product of two
matrices run on the C workers (`native/gemm.c` calls OpenBLAS's CBLAS GEMM through its
address): workers that watch for the next job between the products of a step start a piece
at once, where a sleeping Python pool thread on a virtual machine started its piece 1-8 ms
late under load (the thread counted as runnable, waiting for its halted CPU, all that
while). Stacks of matrices, operands that BLAS cannot read in place, machines without a C
compiler and one thread take NumPy's calls (`_parallel.share_by_cost`, the pieces in turn at
one thread). Both ways run the same pieces with the same GEMM calls and add a deep cut's
parts in the same order, so results do not depend on the thread count or on the way.
"""

from __future__ import annotations

import os

import numpy as np

from . import _blas, _native, _parallel, _sgemm

# A large GEMM is cut into pieces of at least this many multiply-adds (tens of microseconds
# each, which pays for handing a piece to a thread), at most one per CPU and four: each
# piece packs one operand again, a cost the one-thread path pays too (the cut must not
# depend on the thread count). The CPU count is the machine's, fixed for the process.
# (At 1 << 22 a small MLP's weight gradient, 128x64x784, ran whole on one of two threads:
# halved, its step took 70-80 us less at two threads, the same at one.)
GEMM_PIECE = 1 << 21
MAX_GEMM_PIECES = max(1, min(4, os.cpu_count() or 1))
# A product whose shared dimension is at least this many times its larger other dimension
# (a convolution's weight gradient: few outputs, a batch of pixels deep) is cut along it.
# (At 4, a Linear(784, 128) at batch 64, 6x deeper than wide, was cut along its 784: at two
# threads its parts, each written by its own core, were added on one afterwards, 117-122 us
# against 111 for its columns cut; 177-179 us at one thread either way.)
DEEP_GEMM = 8


def cut(stack: int, m: int, n: int, k: int) -> tuple[int, int]:
    """(axis, pieces) a product is cut into: axis 0 the stack, 1 the rows, 2 the columns, 3
    the shared dimension. The cut depends on the shapes only, never on the thread count, so
    every thread count sums each element in the same order. A deep product (the shared
    dimension `DEEP_GEMM` times the larger other one or more) is cut along it, its parts'
    products summed in order: each piece packs only its own slices of both operands. Else
    rows are cut when the right operand is the smaller one (each piece packs the whole of
    the other operand again), else columns."""
    work = stack * m * n * k
    if work < GEMM_PIECE:  # most products: one piece, decided at once
        return 0, 1
    pieces = min(MAX_GEMM_PIECES, work // GEMM_PIECE)
    if stack > 1 and stack >= pieces:
        return 0, max(pieces, 1)
    deep = k >= DEEP_GEMM * max(m, n)
    if deep:  # skinny products run far below the GEMM rate: a piece of half the work pays
        pieces = min(MAX_GEMM_PIECES, 2 * work // GEMM_PIECE, k)
    if pieces <= 1:
        return 0, 1
    if deep:
        return 3, pieces
    if m >= n:
        return 1, min(pieces, m)
    return 2, min(pieces, n)


def _plus(out: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    if bias is not None:
        out += bias
    return out


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None,
           bias: np.ndarray | None = None) -> np.ndarray:
    """`np.matmul(a, b, out=out)`, then `+= bias` if given (an array of the result's dtype
    that broadcasts to it), on the intra-op threads, with OpenBLAS held to one thread:
    a large product is cut into pieces by `cut` (a GEMM of each piece, the pieces shared
    between threads: on the C workers where `_in_c` can, else on the intra-op pool), so
    results do not depend on the thread count. The matrices of a stack are separate GEMMs:
    at two threads or more they are shared by measured cost, however small each is.
    Without a settable OpenBLAS, a plain call (the BLAS threads it itself)."""
    if a.ndim == 2 == b.ndim and a.shape[0] * a.shape[1] * b.shape[1] <= _blas.SERIAL_MNK:
        # The common small product, first: one piece (under `GEMM_PIECE`), run serially.
        return _plus(np.matmul(a, b) if out is None else np.matmul(a, b, out=out), bias)
    if b.dtype is _F32 is a.dtype:
        if b.ndim == 2 == a.ndim:
            if (own := _sgemm.product(a, b, bias, out)) is not None:
                return own
        elif b.ndim == 3 == a.ndim and a.shape[0] == 1 == b.shape[0] and \
                (out is None or out.ndim == 3 and out.shape[0] == 1) and \
                (own := _sgemm.product(a[0], b[0], bias, None if out is None else out[0])) \
                is not None:
            # A stack of one product (a convolution of one group, as `conv` calls it).
            return own[None] if out is None else out
    if a.ndim < 2 or b.ndim < 2 or not _blas.available():
        return _plus(np.matmul(a, b, out=out), bias)
    if out is None and b.ndim == 2 == a.ndim and b.dtype is _F32 is a.dtype and \
            _takes_direct_untransposed(a, b):
        return _untransposed(a, b, bias)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    # The result's first leading size (its stack), read off the shapes without building
    # the broadcast shape: this runs before every GEMM, most of them small.
    ra, rb = a.ndim, b.ndim
    if ra == rb:
        stack = 1 if ra == 2 else (b.shape[0] if a.shape[0] == 1 else a.shape[0])
    else:
        stack = a.shape[0] if ra > rb else b.shape[0]
    axis, pieces = cut(stack, m, n, k)
    work = stack * m * n * k
    threads = _parallel.sharing_threads(work)
    # (The common small product leaves at the first two tests.)
    by_stack = stack > 1 and axis == 0 and threads > 1
    if pieces == 1 and m * n * k <= _blas.SERIAL_MNK and not by_stack:
        return _plus(np.matmul(a, b, out=out), bias)  # OpenBLAS runs it on this thread
    if out is not None and (np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        # A piece must not read what another wrote: the product goes to a new array first.
        out[...] = matmul(a, b, bias=bias)
        return out
    if out is None:
        lead = a.shape[:-2]
        if lead != b.shape[:-2]:  # (NumPy's broadcast_shapes costs microseconds)
            lead = np.broadcast_shapes(lead, b.shape[:-2])
        dt = a.dtype
        out = np.empty(lead + (m, n), dtype=dt if b.dtype is dt else np.result_type(a, b))
    # (A result of one matrix: its operands' leading axes, if any, are all of size 1.) The
    # C workers serve when threads share the pieces; at one thread NumPy's calls run them
    # in turn, the same GEMMs without the ~13 us of a ctypes call of nineteen arguments.
    if axis and out.size == m * n and threads > 1 and _in_c(
            _matrix(a), _matrix(b), _matrix(out), axis, pieces, work, bias):
        return out
    # A deep product's pieces after the first go to their own arrays, summed in at the end.
    parts = [out] + [np.empty_like(out) for _ in range(pieces - 1)] if axis == 3 else None
    size = (stack, m, n, k)[axis]
    with _parallel.OneBlasThread():
        if pieces == 1 and not by_stack:
            np.matmul(a, b, out=out)
        elif not by_stack and threads <= 1:
            # One thread (or a side-by-side task): the pieces in turn, with nothing around
            # them (the pool's way below cost ~4 us more a product).
            _products(a, b, out, parts, axis, size, pieces, 0, pieces)
        elif by_stack:  # matrices i..j of the stack at a time
            _parallel.share_by_cost(lambda i, j: _stack_part(a, b, out, i, j), stack, work,
                                    ("matmul", a.shape, b.shape, a.strides, b.strides))
        else:
            _parallel.share_by_cost(
                lambda first, last: _products(a, b, out, parts, axis, size, pieces, first,
                                              last),
                pieces, work, ("matmul", a.shape, b.shape, a.strides, b.strides),
                trial=False)
    if parts is not None:
        for p in parts[1:]:
            out += p
    return _plus(out, bias)


# OpenBLAS's AVX-512 kernels (`SkylakeX`, which it also picks for AMD's Zen 4, and its
# successors) run a small float32 product of two untransposed row-major matrices with no
# packing (its `sgemm_direct`: under `_DIRECT_MNK` multiply-adds, the second operand's rows
# a multiple of 4 long, one BLAS thread); a linear layer's `x @ W.T` reads W transposed and
# is packed first. For a 64x784 batch and a 128x784 weight on one Zen 4 core: 171 us as
# `x @ W.T`, 134 us as `W @ x.T` with x transposed into a buffer first (16 us), so such a
# product is computed that way (`_untransposed`). Each element is summed over the shared
# dimension in order by that kernel whatever the product's cut, so the result does not depend
# on the thread count.
_DIRECT_MNK = 28 * 512 * 512
_DIRECT_CORES = frozenset({"SkylakeX", "Cooperlake", "SapphireRapids"})
_F32 = np.dtype(np.float32)
_direct: list = []  # [whether this OpenBLAS has the direct kernel], decided on first use


def _takes_direct_untransposed(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether float32 matrices `a` (C-contiguous) @ `b` (a C-contiguous matrix transposed)
    run faster as `(b.T @ a.T).T` on OpenBLAS's direct kernel (see `_DIRECT_MNK`)."""
    m, k = a.shape
    n = b.shape[1]
    # (Only for a batch at most half the weight's rows: transposing the batch must cost less
    # than packing the weight saves. On one Zen 4 core, x @ W.T against the way round: 64x784
    # by 128x784 183 -> 164 us, 64x200 by 512x200 186 -> 163, 32x784 by 64x784 61 -> 50;
    # 128x784 by 64x784 184 -> 188, 128x256 by 128x256 119 -> 130, and 256x1024 by
    # 10x1024, a classifier's last layer, 121 -> 846 us.)
    if m & 3 or 2 * m > n or m * n * k >= _DIRECT_MNK or not b.flags.f_contiguous or \
            not a.flags.c_contiguous or b.flags.c_contiguous:
        return False
    if not _direct:
        _direct.append(_blas.core_name() in _DIRECT_CORES)
    return _direct[0]


def _untransposed(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """`a @ b` (+ `bias`) for `_takes_direct_untransposed` operands: `b.T @ a.T` with `a.T`
    copied into a buffer, both untransposed (cut and shared between threads as any product;
    on one thread a cut of rows or columns is one call, the kernel packing nothing such a cut
    would save and summing each element alike), then written transposed into the row-major
    result, the bias added in the same pass."""
    (m, k), n = a.shape, b.shape[1]
    at = np.empty((k, m), a.dtype)
    np.copyto(at, a.T)
    wt = b.T
    if cut(1, n, m, k)[0] == 3 or _parallel.sharing_threads(m * n * k) > 1:
        ct = matmul(wt, at)
    else:
        with _parallel.OneBlasThread():
            ct = np.matmul(wt, at)
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    if bias is None:
        np.copyto(out, ct.T)
    else:
        np.add(ct.T, bias, out=out)
    return out


def _stack_part(a: np.ndarray, b: np.ndarray, out: np.ndarray, i: int, j: int) -> None:
    """Matrices i..j of a stack's product into `out[i:j]` (an operand broadcast along the
    stack is taken whole)."""
    pa = a[i:j] if a.ndim == out.ndim and a.shape[0] == out.shape[0] else a
    pb = b[i:j] if b.ndim == out.ndim and b.shape[0] == out.shape[0] else b
    np.matmul(pa, pb, out=out[i:j])


def _products(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: list | None, axis: int,
              size: int, pieces: int, first: int, last: int) -> None:
    """Pieces `first`..`last` - 1 of the product of `a` and `b` cut as `cut` said (`axis`,
    `pieces`; `size`: the cut axis's length), one NumPy call each, into `out` (a deep
    product's piece p into `parts[p]`, `parts[0]` being `out`)."""
    for piece in range(first, last):
        i, j = size * piece // pieces, size * (piece + 1) // pieces
        if axis == 0:
            _stack_part(a, b, out, i, j)
        elif axis == 1:
            np.matmul(a[..., i:j, :], b, out=out[..., i:j, :])
        elif axis == 2:
            np.matmul(a, b[..., i:j], out=out[..., i:j])
        else:
            np.matmul(a[..., i:j], b[..., i:j, :], out=parts[piece])


# `fg_gemm_pieces_*`'s argument codes (`native/gemm.c`).
_SIGNATURE = "pippppp" + "i" * 12
# The largest size a 32-bit BLAS integer holds.
_NARROW = (1 << 31) - 1


def _matrix(x: np.ndarray) -> np.ndarray:
    """`x` without its leading axes, all of size 1 (a convolution's single group): a view."""
    return x if x.ndim == 2 else x[(0,) * (x.ndim - 2)]


def _blas_layout(x: np.ndarray) -> tuple[int, int] | None:
    """(stored transposed?, leading dimension) of matrix `x` as CBLAS reads a row-major
    operand, or None when BLAS cannot read it in place (no unit stride, a negative or
    overlapping one)."""
    (r, c), (s0, s1), size = x.shape, x.strides, x.itemsize
    if s1 == size and s0 % size == 0 and s0 // size >= max(c, 1):
        return 0, s0 // size
    if s0 == size and s1 % size == 0 and s1 // size >= max(r, 1):
        return 1, s1 // size
    return None


def _in_c(a: np.ndarray, b: np.ndarray, out: np.ndarray, axis: int, pieces: int,
          work: int, bias: np.ndarray | None = None) -> bool:
    """Run the product of matrices `a` and `b` into C-contiguous `out`, cut as `cut` said
    (`axis` 1-3, `pieces`), on the C workers (`native/gemm.c`), plus `bias` if given (a row
    of `out`'s width is added by each piece, another shape afterwards); False, having done
    nothing, when the C kernels, OpenBLAS's CBLAS GEMM or the operands' layout do not allow
    it."""
    dt = out.dtype
    if a.dtype != dt or b.dtype != dt or not out.flags.c_contiguous:
        return False
    gemm = _blas.gemm(dt.char)
    fn = _native.typed("gemm", "fg_gemm_pieces", dt, _SIGNATURE)
    la, lb = _blas_layout(a), _blas_layout(b)
    if gemm is None or fn is None or la is None or lb is None:
        return False
    address, wide = gemm
    (m, k), n = a.shape, b.shape[1]
    if not wide and max(m, n, k, la[1], lb[1]) > _NARROW:
        return False
    rest = np.empty((pieces - 1, m, n), dt) if axis == 3 else None
    row = bias is not None and bias.shape == (n,) and bias.dtype == dt and \
        bias.flags.c_contiguous and axis != 3
    args = (address, int(wide), _native.address(a), _native.address(b), _native.address(out),
            None if rest is None else _native.address(rest),
            _native.address(bias) if row else None, m, n, k, la[1], lb[1], n, la[0], lb[0],
            axis, pieces)
    with _parallel.OneBlasThread():
        _native.run_pieces(fn, args, (), pieces, work)
    if rest is not None:
        for part in rest:  # in order, as the pool's way sums them
            out += part
    if bias is not None and not row:
        out += bias
    return True
