/* float32 matrix products of moderate size with AVX-512, for `ops/_gemm.py`.

   C = A @ B (+ a row of biases) where B's rows and C's rows are runs of unit stride and A is
   read one element at a time (any strides): the register tile is MR rows of C by NR = 16 * NV
   columns, each of its accumulators a vector of 16 columns, and each step over the shared
   dimension broadcasts one element of A per row and multiplies it into the vectors of B's
   row. B is read where it lies; A, reused by every column panel, is first copied into blocks
   of MR rows laid out step by step (`pack_rows`), so that a step's MR elements lie together
   and the tile broadcasts them from one pointer at fixed offsets (read where they lay, at a
   run-time stride, the MR row pointers did not fit the registers and the tile ran 15-20%
   slower).

   Every element of C is one accumulator summed over the shared dimension in order, from zero,
   then the bias added: its bits do not depend on the tile it falls in, on the range of panels
   a call is given, nor so on the thread count.

   Built only where the compiler targets AVX-512 (`-march=native` on such a CPU):
   `fg_sgemm_available` says whether the products are here. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef int64_t i64;

#ifdef __AVX512F__
#include <immintrin.h>

#define MR 12
#define NV 2
#define NR (16 * NV)

int64_t fg_sgemm_available(void) { return 1; }

/* An mr x NR tile of C (columns past the panel's end masked off by `mk`). */
static inline __attribute__((always_inline)) void tile(
    const int mr, const float *a, i64 sai, i64 sak, const float *b, i64 ldb, float *c,
    i64 ldc, const float *bias, i64 k, const __mmask16 *mk) {
    __m512 acc[MR][NV];
    /* A whole panel's rows are read by plain loads: masked ones, even with every lane set,
       made a 64 x 128 by 128 x 784 product 6% slower (the loop is compiled twice). */
    const int whole = mk[NV - 1] == 0xffff;
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (i64 p = 0; p < k; p++) {
        __m512 bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            bv[v] = whole ? _mm512_loadu_ps(b + p * ldb + 16 * v)
                          : _mm512_maskz_loadu_ps(mk[v], b + p * ldb + 16 * v);
        const float *ap = a + p * sak;
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            const __m512 av = _mm512_set1_ps(ap[r * sai]);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m512 o = acc[r][v];
            if (bias) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(mk[v], bias + 16 * v));
            _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mk[v], o);
        }
}

/* A's rows i..i + mr - 1 (element (i, p) at a[i * sai + p * sak]) as one block:
   out[p * MR + r] = A[i + r][p]. Runs of A's columns (sai 1) are copied whole. */
static void pack_rows(const float *a, i64 sai, i64 sak, i64 i, int mr, i64 k, float *out) {
    a += i * sai;
    if (sai == 1) {
        const __mmask16 m = (__mmask16)((1u << mr) - 1);
        for (i64 p = 0; p < k; p++)
            _mm512_mask_storeu_ps(out + p * MR, m, _mm512_maskz_loadu_ps(m, a + p * sak));
        return;
    }
    for (i64 p = 0; p < k; p++)
        for (int r = 0; r < mr; r++) out[p * MR + r] = a[r * sai + p * sak];
}

#define TAIL(R) \
    case R: tile(R, ai, ri, ki, bj, ldb, cj + i * ldc, ldc, bb, k, mk); break;

/* Panels first..last - 1 (NR columns each; the last may be narrower) of C = A @ B (+ bias):
   A element (i, p) at a[i * sai + p * sak] (m x k), B row p at b + p * ldb (k x n), C row i
   at c + i * ldc, `bias` (n values) or null. Where the call has two panels or more, A is
   packed first (`pack_rows`; each call packs its own copy, so pieces on other threads share
   nothing they write); the products are the same either way. */
void fg_sgemm_f32(const float *a, const float *b, float *c, const float *bias, i64 sai,
                  i64 sak, i64 ldb, i64 ldc, i64 m, i64 k, i64 n, i64 first, i64 last) {
    const i64 blocks = (m + MR - 1) / MR;
    float *packed = last - first >= 2 ? malloc((size_t)(blocks * MR * k) * sizeof(float)) : 0;
    if (packed)
        for (i64 i = 0; i < m; i += MR)
            pack_rows(a, sai, sak, i, m - i < MR ? (int)(m - i) : MR, k, packed + i * k);
    for (i64 panel = first; panel < last; panel++) {
        const i64 j = panel * NR, cols = n - j < NR ? n - j : NR;
        __mmask16 mk[NV];
        for (int v = 0; v < NV; v++) {
            const i64 left = cols - 16 * v;
            mk[v] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        }
        const float *bj = b + j, *bb = bias ? bias + j : 0;
        float *cj = c + j;
        i64 i = 0;
        if (packed)  /* (strides 1 and MR known here: broadcasts at fixed offsets) */
            for (; i + MR <= m; i += MR)
                tile(MR, packed + i * k, 1, MR, bj, ldb, cj + i * ldc, ldc, bb, k, mk);
        else
            for (; i + MR <= m; i += MR)
                tile(MR, a + i * sai, sai, sak, bj, ldb, cj + i * ldc, ldc, bb, k, mk);
        const float *ai = packed ? packed + i * k : a + i * sai;
        const i64 ri = packed ? 1 : sai, ki = packed ? MR : sak;
        switch (m - i) {
            TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7) TAIL(8) TAIL(9) TAIL(10)
            TAIL(11)
            default: break;
        }
    }
    free(packed);
}

/* Rows first..last - 1 of C = A @ B (+ bias), every column panel (arguments as
   `fg_sgemm_f32`'s): a cut of the rows instead of the columns, so that each piece writes
   one contiguous run of C. */
void fg_sgemm_rows_f32(const float *a, const float *b, float *c, const float *bias, i64 sai,
                       i64 sak, i64 ldb, i64 ldc, i64 m, i64 k, i64 n, i64 first, i64 last) {
    (void)m;
    fg_sgemm_f32(a + first * sai, b, c + first * ldc, bias, sai, sak, ldb, ldc, last - first, k,
                 n, 0, (n + NR - 1) / NR);
}

/* The 8 x 8 block of src at (i, j) (rows of unit stride, row stride rs), transposed into
   `o` (eight vectors: o[q] holds src's column j + q, rows i..i + 7). */
static inline void transpose8(const float *s, i64 rs, __m256 *o) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + rs),
           r2 = _mm256_loadu_ps(s + 2 * rs), r3 = _mm256_loadu_ps(s + 3 * rs),
           r4 = _mm256_loadu_ps(s + 4 * rs), r5 = _mm256_loadu_ps(s + 5 * rs),
           r6 = _mm256_loadu_ps(s + 6 * rs), r7 = _mm256_loadu_ps(s + 7 * rs);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    o[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    o[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    o[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    o[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* X's rows i0..i0 + rows - 1 transposed into `panel` (k x NR: panel[q * NR + r] = X[i0 +
   r][q], rows past `rows` zero). */
static void transpose_panel(const float *x, i64 ldx, i64 i0, i64 rows, i64 k, float *panel) {
    i64 r0 = 0;
    if ((k & 7) == 0)
        for (; r0 + 8 <= rows; r0 += 8)
            for (i64 q = 0; q < k; q += 8) {
                __m256 o[8];
                transpose8(x + (i0 + r0) * ldx + q, ldx, o);
                for (int t = 0; t < 8; t++) _mm256_storeu_ps(panel + (q + t) * NR + r0, o[t]);
            }
    for (i64 r = r0; r < NR; r++)
        for (i64 q = 0; q < k; q++) panel[q * NR + r] = r < rows ? x[(i0 + r) * ldx + q] : 0.0f;
}

#define NT_TILE(R) \
    case R: tile(R, w + j * ldw, ldw, 1, panel, NR, block, NR, 0, k, full); break;

/* Rows i0..i0 + rows - 1 of C = X @ W^T (+ bias), its columns j0..j1 - 1: `panel` holds
   those rows of X transposed (`transpose_panel`); each MR x NR tile of the product
   transposed (block[t * NR + col] = C[i0 + col][j + t]) is written back with the biases. */
static void nt_panel(const float *panel, const float *w, float *c, const float *bias, i64 ldw,
                     i64 ldc, i64 k, i64 i0, i64 rows, i64 j0, i64 j1) {
    const __mmask16 full[NV] = {0xffff, 0xffff};
    float block[MR * NR];
    for (i64 j = j0; j < j1; j += MR) {
        const int mr = j1 - j < MR ? (int)(j1 - j) : MR;
        switch (mr) {
            NT_TILE(1) NT_TILE(2) NT_TILE(3) NT_TILE(4) NT_TILE(5) NT_TILE(6) NT_TILE(7)
            NT_TILE(8) NT_TILE(9) NT_TILE(10) NT_TILE(11) NT_TILE(12)
            default: break;
        }
        for (i64 col = 0; col < rows; col++)
            for (int t = 0; t < mr; t++)
                c[(i0 + col) * ldc + j + t] = bias ? block[t * NR + col] + bias[j + t]
                                                   : block[t * NR + col];
    }
}

/* Row panels first..last - 1 (NR rows each) of C = X @ W^T (+ bias): X's rows (m x k) and
   W's rows (n x k) runs of unit stride (row strides ldx, ldw), C row-major (ldc). Each panel
   transposes its own rows of X into its part of `work` (k x NR values per panel) and writes
   its own rows of C, so a core reads and writes its panel's data alone: the products are
   the `fg_sgemm_f32` tile's, the same bits as `(W @ X^T)^T` computed whole. */
void fg_sgemm_nt_f32(const float *x, const float *w, float *c, const float *bias, float *work,
                     i64 ldx, i64 ldw, i64 ldc, i64 m, i64 k, i64 n, i64 first, i64 last) {
    for (i64 p = first; p < last; p++) {
        const i64 i0 = p * NR, rows = m - i0 < NR ? m - i0 : NR;
        float *panel = work + p * k * NR;
        transpose_panel(x, ldx, i0, rows, k, panel);
        nt_panel(panel, w, c, bias, ldw, ldc, k, i0, rows, 0, n);
    }
}

/* Columns first..last - 1 of C = X @ W^T (+ bias), every row (arguments as
   `fg_sgemm_nt_f32`'s, without `work`): a cut of W's rows instead of X's, so that each piece
   reads only its rows of W (a weight whose rows one core updates stays in that core's cache:
   a write to a line the other core has read costs several times the write). Each piece
   transposes every panel of X into a buffer of its own; the tiles are `fg_sgemm_nt_f32`'s,
   the same bits. */
void fg_sgemm_nt_cols_f32(const float *x, const float *w, float *c, const float *bias, i64 ldx,
                          i64 ldw, i64 ldc, i64 m, i64 k, i64 n, i64 first, i64 last) {
    (void)n;
    float *panel = malloc((size_t)(k * NR) * sizeof(float));
    if (!panel) {  /* each element as the tile sums it: in order from zero, then the bias */
        for (i64 i = 0; i < m; i++)
            for (i64 j = first; j < last; j++) {
                float acc = 0.0f;
                for (i64 q = 0; q < k; q++) acc = fmaf(x[i * ldx + q], w[j * ldw + q], acc);
                c[i * ldc + j] = bias ? acc + bias[j] : acc;
            }
        return;
    }
    for (i64 i0 = 0; i0 < m; i0 += NR) {
        const i64 rows = m - i0 < NR ? m - i0 : NR;
        transpose_panel(x, ldx, i0, rows, k, panel);
        nt_panel(panel, w, c, bias, ldw, ldc, k, i0, rows, first, last);
    }
    free(panel);
}

/* Large products: operands blocked for the caches, the right one packed.

   C = A @ B (+ bias) cut in blocks of BKC steps of the shared dimension and BNC columns:
   each block of B is copied into panels of BNR = 48 columns laid out step by step
   (`pack_panels`, 8 x 8 transpositions where B's columns are the runs: a weight's
   transpose), and an 8 x 48 register tile (`blocked_tile`: 24 accumulators, three vectors
   of B and eight broadcasts of A a step) runs over each panel for every 8 rows of A. A's 8
   rows are read where they lie when its rows are the runs, else first copied step by step
   (a transposed A's eight values of a step lie in one line, 4 KB from the next step's).
   Each block of steps is summed from zero in the tile's registers and then added to the
   totals C holds, the bias after the last block: an element is the in-order sum of its
   blocks' sums, each of BKC steps in order. Its bits do not depend on the cut (so the
   thread count), and for k <= BKC they are the tiles' above. (One sum over every step, as
   the tiles do, lets rounding grow with the length: at 2304 steps, a 3 x 3 convolution of
   256 channels, its error was 2.4 times OpenBLAS's, whose kernels also sum in blocks; in
   blocks it is 0.6 times. A ResNet-18's gradients after one step then differed from
   PyTorch's by 1.5%, where a ReLU's input near zero took the other side.) */

#define BMR 8
#define BNV 3
#define BNR (16 * BNV)
#define BKC 128
#define BSTRIP_PANELS 4 /* panels of a block from which a transposed A's strip is copied */
#define BNC 1008 /* 21 panels: a block of B (BKC x BNC) is half a MB, in the core's L2 */

/* An mr x (16 nv) tile of C (+)= A (mr x kc) @ panel (kc x BNR), summed from zero: A
   element (r, p) at a[r * lda + p] (`rows`: A's rows the runs) or a[p * lda + r]; `load`: C
   holds the sums of earlier blocks, to which this block's are added; `bias` (16 nv values)
   added as the tile is stored, or null. */
static inline __attribute__((always_inline)) void blocked_tile(
    const int mr, const int nv, const int rows, i64 kc, const float *restrict a, i64 lda,
    const float *restrict panel, float *restrict c, i64 ldc, int load, const float *bias) {
    __m512 acc[BMR][BNV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (i64 p = 0; p < kc; p++) {
        __m512 bv[BNV];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) bv[v] = _mm512_load_ps(panel + p * BNR + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 x = _mm512_set1_ps(rows ? a[r * lda + p] : a[p * lda + r]);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) {
            __m512 o = acc[r][v];
            if (load) o = _mm512_add_ps(_mm512_loadu_ps(c + r * ldc + 16 * v), o);
            if (bias) o = _mm512_add_ps(o, _mm512_loadu_ps(bias + 16 * v));
            _mm512_storeu_ps(c + r * ldc + 16 * v, o);
        }
}

#define BT(R, NV) case R: blocked_tile(R, NV, rows, kc, a, lda, panel, c, ldc, load, bias); break;
#define BT_ROWS(NV) switch (mr) { BT(1, NV) BT(2, NV) BT(3, NV) BT(4, NV) BT(5, NV) BT(6, NV) \
    BT(7, NV) default: break; }

/* `blocked_tile` with mr and nv known at compile time for each case. */
static void blocked_tile_any(int mr, int nv, int rows, i64 kc, const float *a, i64 lda,
                             const float *panel, float *c, i64 ldc, int load,
                             const float *bias) {
    if (mr == BMR && nv == BNV) {
        if (rows)
            blocked_tile(BMR, BNV, 1, kc, a, lda, panel, c, ldc, load, bias);
        else
            blocked_tile(BMR, BNV, 0, kc, a, lda, panel, c, ldc, load, bias);
        return;
    }
    if (mr == BMR) {
        if (nv == 1) blocked_tile(BMR, 1, rows, kc, a, lda, panel, c, ldc, load, bias);
        else blocked_tile(BMR, 2, rows, kc, a, lda, panel, c, ldc, load, bias);
        return;
    }
    switch (nv) {
        case 1: BT_ROWS(1) break;
        case 2: BT_ROWS(2) break;
        default: BT_ROWS(3) break;
    }
}

/* Columns of B [j0, j0 + nc) over steps [0, kc) (B element (p, j) at b[p * sbk + j * sbn])
   as panels of BNR columns: out[j * kc + p * BNR + q] for panel start j, zeros past the
   last column up to a whole vector. */
static void pack_panels(const float *b, i64 sbk, i64 sbn, i64 kc, i64 nc, float *out) {
    for (i64 j = 0; j < nc; j += BNR) {
        const i64 w = nc - j < BNR ? nc - j : BNR, w16 = (w + 15) & ~(i64)15;
        float *o = out + j * kc;
        if (sbn == 1) {
            for (i64 p = 0; p < kc; p++)
                for (i64 v = 0; v < w16; v += 16) {
                    const i64 left = w - v;
                    const __mmask16 mk = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
                    _mm512_store_ps(o + p * BNR + v,
                                    _mm512_maskz_loadu_ps(mk, b + p * sbk + j + v));
                }
            continue;
        }
        i64 q = 0;
        if (sbk == 1)
            for (; q + 8 <= w; q += 8) {
                const float *col = b + (j + q) * sbn;
                i64 p = 0;
                for (; p + 8 <= kc; p += 8) {
                    __m256 t[8];
                    transpose8(col + p, sbn, t);
                    for (int u = 0; u < 8; u++) _mm256_store_ps(o + (p + u) * BNR + q, t[u]);
                }
                for (; p < kc; p++)
                    for (int u = 0; u < 8; u++) o[p * BNR + q + u] = col[u * sbn + p];
            }
        for (; q < w16; q++)
            for (i64 p = 0; p < kc; p++)
                o[p * BNR + q] = q < w ? b[p * sbk + (j + q) * sbn] : 0.0f;
    }
}

/* Units first..last - 1 of C = A @ B (+ bias): A element (i, p) at a[i * sam + p * sak]
   with sam or sak 1 (m x k), B element (p, j) at b[p * sbk + j * sbn] with sbk or sbn 1
   (k x n), C row i at c + i * ldc. A unit is a panel of BNR columns, or with `by_rows` a
   block of BMR rows. Each call packs its own blocks of B; 0 where memory ran out (nothing
   written), else 1. */
static int blocked(const float *a, const float *b, float *c, const float *bias, i64 sam,
                   i64 sak, i64 sbk, i64 sbn, i64 ldc, i64 m, i64 k, i64 n, i64 first,
                   i64 last, i64 by_rows) {
    const i64 i0 = by_rows ? first * BMR : 0;
    const i64 i1 = by_rows ? (last * BMR < m ? last * BMR : m) : m;
    const i64 j0 = by_rows ? 0 : first * BNR;
    const i64 j1 = by_rows ? n : (last * BNR < n ? last * BNR : n);
    if (i0 >= i1 || j0 >= j1) return 1;
    const i64 block_cols = j1 - j0 < BNC ? j1 - j0 : BNC;
    float *packed = aligned_alloc(64, (size_t)(BKC * ((block_cols + BNR - 1) / BNR) * BNR) *
                                          sizeof(float));
    if (!packed) return 0;
    const int rows = sak == 1;
    const i64 lda = rows ? sam : sak;
    float strip[BMR * BKC] __attribute__((aligned(64)));
    float edge[BMR * BNR] __attribute__((aligned(64)));
    for (i64 jc = j0; jc < j1; jc += BNC) {
        const i64 nc = j1 - jc < BNC ? j1 - jc : BNC;
        for (i64 pc = 0; pc < k; pc += BKC) {
            const i64 kc = k - pc < BKC ? k - pc : BKC;
            const int load = pc > 0;
            const float *bias_here = pc + kc == k ? bias : 0;
            pack_panels(b + pc * sbk + jc * sbn, sbk, sbn, kc, nc, packed);
            for (i64 i = i0; i < i1; i += BMR) {
                const int mr = i1 - i < BMR ? (int)(i1 - i) : BMR;
                const float *ai = a + i * sam + pc * sak;
                i64 la = lda;
                int r = rows;
                if (!rows && nc >= BSTRIP_PANELS * BNR) {
                    /* the strip of A, step by step, in one run (for a few panels the copy
                       costs more than it saves) */
                    for (i64 p = 0; p < kc; p++)
                        for (int t = 0; t < mr; t++) strip[p * BMR + t] = ai[p * lda + t];
                    ai = strip;
                    la = BMR;
                }
                for (i64 j = 0; j < nc; j += BNR) {
                    const i64 w = nc - j < BNR ? nc - j : BNR;
                    float *ct = c + i * ldc + jc + j;
                    const float *panel = packed + j * kc;
                    if ((w & 15) == 0) {
                        blocked_tile_any(mr, (int)(w >> 4), r, kc, ai, la, panel, ct, ldc, load,
                                         bias_here ? bias_here + jc + j : 0);
                        continue;
                    }
                    /* A tail narrower than a vector: the tile in a buffer, then copied. */
                    if (load)
                        for (int t = 0; t < mr; t++)
                            for (i64 q = 0; q < w; q++) edge[t * BNR + q] = ct[t * ldc + q];
                    blocked_tile_any(mr, (int)((w + 15) >> 4), r, kc, ai, la, panel, edge, BNR,
                                     load, 0);
                    for (int t = 0; t < mr; t++)
                        for (i64 q = 0; q < w; q++)
                            ct[t * ldc + q] = bias_here ? edge[t * BNR + q] + bias_here[jc + j + q]
                                                        : edge[t * BNR + q];
                }
            }
        }
    }
    free(packed);
    return 1;
}

/* `blocked` for the C workers, each element summed as its blocks sum it where memory for a
   block ran out. */
void fg_sgemm_blocked_f32(const float *a, const float *b, float *c, const float *bias, i64 sam,
                          i64 sak, i64 sbk, i64 sbn, i64 ldc, i64 m, i64 k, i64 n, i64 first,
                          i64 last, i64 by_rows) {
    if (blocked(a, b, c, bias, sam, sak, sbk, sbn, ldc, m, k, n, first, last, by_rows)) return;
    const i64 i0 = by_rows ? first * BMR : 0, i1 = by_rows ? (last * BMR < m ? last * BMR : m) : m;
    const i64 j0 = by_rows ? 0 : first * BNR, j1 = by_rows ? n : (last * BNR < n ? last * BNR : n);
    for (i64 i = i0; i < i1; i++)
        for (i64 j = j0; j < j1; j++) {
            float total = 0.0f;
            for (i64 p0 = 0; p0 < k; p0 += BKC) {
                const i64 p1 = k - p0 < BKC ? k : p0 + BKC;
                float acc = 0.0f;
                for (i64 p = p0; p < p1; p++)
                    acc = fmaf(a[i * sam + p * sak], b[p * sbk + j * sbn], acc);
                total = p0 ? total + acc : acc;
            }
            c[i * ldc + j] = bias ? total + bias[j] : total;
        }
}

/* dst (cols x rows, row-major, row stride `ld`) = the transpose of src (rows x cols, element
   (i, j) at src[i * rs + j * cs]), plus bias[i] in dst's column i if `bias` is not null
   (a product computed transposed, its row of biases added as it is written back). 8 x 8
   blocks transposed in registers where src's rows are runs of unit stride. */
void fg_transpose_f32(const float *src, float *dst, const float *bias, i64 rs, i64 cs,
                      i64 ld, i64 rows, i64 cols) {
    i64 i = 0;
    if (cs == 1) {
        for (; i + 8 <= rows; i += 8) {
            i64 j = 0;
            for (; j + 8 <= cols; j += 8) {
                __m256 o[8];
                transpose8(src + i * rs + j, rs, o);
                const __m256 add = bias ? _mm256_loadu_ps(bias + i) : _mm256_setzero_ps();
                for (int q = 0; q < 8; q++)
                    _mm256_storeu_ps(dst + (j + q) * ld + i,
                                     bias ? _mm256_add_ps(o[q], add) : o[q]);
            }
            for (; j < cols; j++)
                for (i64 q = i; q < i + 8; q++)
                    dst[j * ld + q] = bias ? src[q * rs + j] + bias[q] : src[q * rs + j];
        }
    }
    for (; i < rows; i++)
        for (i64 j = 0; j < cols; j++)
            dst[j * ld + i] = bias ? src[i * rs + j * cs] + bias[i] : src[i * rs + j * cs];
}

#else

int64_t fg_sgemm_available(void) { return 0; }

#endif
