/* Direct 2-D convolution on batch-last arrays: a convolution, its weight gradient and its
   input gradient computed in place of im2col + GEMM, with the samples as the vector lanes.

   Layouts: an image array (n, c, h, w) is packed as (c, h + 2 ph, w + 2 pw, np), the batch
   last and padded to np lanes (a multiple of LANES, the extra lanes zero), with a zero
   border of the convolution's padding; an output gradient likewise (o, oh, ow, np) without
   a border. Each output pixel's np values are then a run of whole vectors, and every
   multiply-add of the convolution is a vector one, with no copy of the input per kernel
   offset (im2col's columns are kh * kw times the input). Blocks of 4 output (or input)
   channels share each loaded vector; the accumulators stay in registers. Pairs of output
   or input columns share each loaded weight too, and, with AVX-512's 32 registers, pairs of
   kernel rows each loaded output gradient (the weight gradient): the same sums, two at a
   time (`PAIR_MAXV`). The forward and the weight gradient leave out the products with the
   padding (zeros, which leave a sum as it is) where a whole kernel row or column meets it.

   Vectors are GCC's generic vector extension (vector_size), which the compiler lowers to the
   machine's own (AVX-512, AVX2, NEON). Multiply-adds contract to FMAs here: a sum over
   kernel offsets and channels has no fixed order to reproduce elsewhere, and each function
   below adds its terms in one order whatever range of work it is given, so results are the
   same at every thread count.

   Work is cut into units; each function does units [start, stop) (the C workers,
   `workers.c`, run the pieces of a call on several threads):
   - conv_forward: (output channel block, output row) pairs;
   - conv_input_grad: (input channel block, input row) pairs;
   - conv_weight_grad: (output channel block, input channel, kernel row) triples. */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#elif defined(__clang__)
#pragma clang fp contract(fast)
#endif

#if defined(__AVX512F__)
#define VBYTES 64
#define MAXV 4
#elif defined(__AVX__)
#define VBYTES 32
#define MAXV 3
#else
#define VBYTES 16
#define MAXV 3
#endif
/* The most vectors per chunk that the pair kernels' accumulators (2 CB NV of them) and
   loaded vectors (2 NV) leave registers for: 32 vector registers with AVX-512, 16 else. */
#if defined(__AVX512F__)
#define PAIR_MAXV 2
#else
#define PAIR_MAXV 1
#endif
#define CB 4 /* channels per block */
#define QB 4 /* kernel columns per block (weight gradient) */
/* The batch is padded to a multiple of this many values (of any dtype): every vector width
   above divides it. */
#define LANES 16

/* Registers, and the same vectors at any address of their element type (for loads). */
typedef float vf32 __attribute__((vector_size(VBYTES)));
typedef double vf64 __attribute__((vector_size(VBYTES)));
typedef float uvf32 __attribute__((vector_size(VBYTES), aligned(4)));
typedef double uvf64 __attribute__((vector_size(VBYTES), aligned(8)));
/* A loaded vector kept in a register: without it GCC folds each use into a multiply-add
   that reads memory again, and the loads, not the multiply-adds, then bound the loop. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define KEEP(v) __asm__("" : "+v"(v))
#else
#define KEEP(v) ((void)0)
#endif
#define LOAD(V, p) (*(const u##V *)(p))
#define STORE(V, p, v) (*(u##V *)(p) = (v))

int64_t conv_direct_lanes(void) { return LANES; }

/* x (n, c, h, w) -> xt (c, h + 2 ph, w + 2 pw, np) for channels [start, stop): the zero
   border and the lanes past n zeroed. */
#define PACK(T, S)                                                                         \
void conv_pack_##S(const T *x, T *xt, int64_t n, int64_t c, int64_t h, int64_t w,          \
                   int64_t ph, int64_t pw, int64_t np, int64_t start, int64_t stop) {      \
    const int64_t hp = h + 2 * ph, wp = w + 2 * pw, hw = h * w;                            \
    for (int64_t ci = start; ci < stop; ci++) {                                            \
        T *base = xt + ci * hp * wp * np;                                                  \
        memset(base, 0, sizeof(T) * ph * wp * np);                                         \
        memset(base + (ph + h) * wp * np, 0, sizeof(T) * ph * wp * np);                    \
        for (int64_t y = 0; y < h; y++) {                                                  \
            T *row = base + (y + ph) * wp * np;                                            \
            memset(row, 0, sizeof(T) * pw * np);                                           \
            memset(row + (pw + w) * np, 0, sizeof(T) * pw * np);                           \
            row += pw * np;                                                                \
            for (int64_t b = 0; b < n; b++) {                                              \
                const T *src = x + (b * c + ci) * hw + y * w;                              \
                for (int64_t xx = 0; xx < w; xx++) row[xx * np + b] = src[xx];             \
            }                                                                              \
            if (np > n)                                                                    \
                for (int64_t xx = 0; xx < w; xx++)                                         \
                    memset(row + xx * np + n, 0, sizeof(T) * (np - n));                    \
        }                                                                                  \
    }                                                                                      \
}
PACK(float, f32)
PACK(double, f64)

/* t (c, pixels, np) -> out (n, c, pixels), plus bias[ci] when bias is not NULL, for
   channels [start, stop); 16 pixels at a time, so that the lines read stay in cache. */
#define UNPACK(T, S)                                                                       \
void conv_unpack_##S(const T *t, T *out, const T *bias, int64_t n, int64_t c,              \
                     int64_t pixels, int64_t np, int64_t start, int64_t stop) {            \
    for (int64_t ci = start; ci < stop; ci++) {                                            \
        const T add = bias ? bias[ci] : (T)0;                                              \
        const T *src = t + ci * pixels * np;                                               \
        for (int64_t p0 = 0; p0 < pixels; p0 += 16) {                                      \
            const int64_t p1 = p0 + 16 < pixels ? p0 + 16 : pixels;                        \
            for (int64_t b = 0; b < n; b++) {                                              \
                T *dst = out + (b * c + ci) * pixels;                                      \
                if (bias)                                                                  \
                    for (int64_t p = p0; p < p1; p++) dst[p] = src[p * np + b] + add;      \
                else                                                                       \
                    for (int64_t p = p0; p < p1; p++) dst[p] = src[p * np + b];            \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
}
UNPACK(float, f32)
UNPACK(double, f64)

/* Output row y, columns [xa, xb), of the output channels of block `blk` (ob <= CB of
   them), lanes [nb, nb + NV vectors): out[o, y, x] = sum over ci, kernel rows [r0, r1),
   columns [q0, q1) of w[o, ci, r, q] * xt[ci, y sh + r dh, x sw + q dw], leaving out the
   columns that read the left or right padding (pw wide, beside an image w wide): their
   products are zeros, which leave a sum as it is (one that starts at +0 is never -0), so
   the values are those of the whole sum, but for an infinite or NaN weight, whose product
   with the padding PyTorch leaves out too. `wb` is the weight in blocks, (blocks, c, kh,
   kw, CB), the last block's missing channels zero. */
#define FORWARD_ROW(T, S, V, NV)                                                           \
static void forward_row_##S##_##NV(const T *xt, const T *wb, T *out, int64_t c,            \
    int64_t hp, int64_t wp, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw,    \
    int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0,    \
    int64_t q1, int64_t blk, int64_t ob, int64_t y, int64_t nb, int64_t xa, int64_t xb,    \
    int64_t pw, int64_t w) {                                                               \
    const T *wblk = wb + blk * c * kh * kw * CB;                                           \
    const int64_t lanes = sizeof(V) / sizeof(T);                                           \
    for (int64_t x = xa; x < xb; x++) {                                                    \
        V acc[CB][NV];                                                                     \
        for (int b = 0; b < CB; b++)                                                       \
            for (int j = 0; j < NV; j++) acc[b][j] = (V){0};                               \
        int64_t qa = q0, qb = q1;  /* the offsets that read the image, not its padding */  \
        while (qa < qb && x * sw + qa * dw < pw) qa++;                                     \
        while (qb > qa && x * sw + (qb - 1) * dw >= pw + w) qb--;                          \
        for (int64_t ci = 0; ci < c; ci++)                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                \
            const T *row = xt + ((ci * hp + y * sh + r * dh) * wp + x * sw) * np + nb;     \
            const T *wr = wblk + ((ci * kh + r) * kw) * CB;                                \
            for (int64_t q = qa; q < qb; q++) {                                            \
                V v[NV];                                                                   \
                for (int j = 0; j < NV; j++) {                                             \
                    v[j] = LOAD(V, row + q * dw * np + j * lanes);                         \
                    KEEP(v[j]);                                                            \
                }                                                                          \
                for (int b = 0; b < CB; b++) {                                             \
                    const T wv = wr[q * CB + b];                                           \
                    for (int j = 0; j < NV; j++) acc[b][j] += wv * v[j];                   \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        for (int b = 0; b < ob; b++) {                                                     \
            T *dst = out + (((blk * CB + b) * oh + y) * ow + x) * np + nb;                 \
            for (int j = 0; j < NV; j++)                                                   \
                STORE(V, dst + j * lanes, acc[b][j]);                                      \
        }                                                                                  \
    }                                                                                      \
}

/* Output columns x and x + 1 of row y, as forward_row computes them (each output's terms
   added in the same order, so the same values), for stride and dilation 1 along the width:
   the input vector at x + q + 1 is column x's offset q + 1 and column x + 1's offset q, so
   a kernel row loads kw + 1 vectors (not 2 kw) for both columns, and each weight is loaded
   once for both. (forward_row's loads bound it: ResNet-18's 64-channel 3x3 convolution over
   8x8 images, batch 32, on one Zen 4 core: 2.19 -> 1.91 ms, 1.56 with the padding left
   out, where OpenBLAS's GEMM of the same products takes 2.0.) */
#define FORWARD_PAIR(T, S, V, NV)                                                          \
static void forward_pair_##S##_##NV(const T *xt, const T *wb, T *out, int64_t c,           \
    int64_t hp, int64_t wp, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t dh,    \
    int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1, int64_t blk,   \
    int64_t ob, int64_t y, int64_t nb, int64_t x) {                                        \
    const T *wblk = wb + blk * c * kh * kw * CB;                                           \
    const int64_t lanes = sizeof(V) / sizeof(T);                                           \
    V acc[2][CB][NV];                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < CB; b++)                                                       \
            for (int j = 0; j < NV; j++) acc[e][b][j] = (V){0};                            \
    for (int64_t ci = 0; ci < c; ci++)                                                     \
    for (int64_t r = r0; r < r1; r++) {                                                    \
        const T *row = xt + ((ci * hp + y * sh + r * dh) * wp + x) * np + nb;              \
        const T *wr = wblk + ((ci * kh + r) * kw) * CB;                                    \
        V v0[NV];                                                                          \
        for (int j = 0; j < NV; j++) {                                                     \
            v0[j] = LOAD(V, row + q0 * np + j * lanes);                                    \
            KEEP(v0[j]);                                                                   \
        }                                                                                  \
        for (int64_t q = q0; q < q1; q++) {                                                \
            V v1[NV];                                                                      \
            for (int j = 0; j < NV; j++) {                                                 \
                v1[j] = LOAD(V, row + (q + 1) * np + j * lanes);                           \
                KEEP(v1[j]);                                                               \
            }                                                                              \
            for (int b = 0; b < CB; b++) {                                                 \
                const T wv = wr[q * CB + b];                                               \
                for (int j = 0; j < NV; j++) {                                             \
                    acc[0][b][j] += wv * v0[j];                                            \
                    acc[1][b][j] += wv * v1[j];                                            \
                }                                                                          \
            }                                                                              \
            for (int j = 0; j < NV; j++) v0[j] = v1[j];                                    \
        }                                                                                  \
    }                                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < ob; b++) {                                                     \
            T *dst = out + (((blk * CB + b) * oh + y) * ow + x + e) * np + nb;             \
            for (int j = 0; j < NV; j++)                                                   \
                STORE(V, dst + j * lanes, acc[e][b][j]);                                   \
        }                                                                                  \
}

/* Input row Y (unpadded), columns [xa, xb), of the input channels of block `blk`
   (cb <= CB), lanes [nb, ...): din[ci, Y, X] = sum over kernel rows, columns and output
   channels of w[o, ci, r, q] * gt[o, y, x] where y sh + r dh == Y + ph and x sw + q dw == X + pw.
   `wb` is the weight as (blocks of CB input channels, kh, kw, o, CB). */
#define INPUT_ROW(T, S, V, NV)                                                             \
static void input_row_##S##_##NV(const T *gt, const T *wb, T *din, int64_t o, int64_t h,   \
    int64_t w, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,     \
    int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t blk, int64_t cb,   \
    int64_t Y, int64_t nb, int64_t xa, int64_t xb) {                                       \
    const int64_t plane = oh * ow * np, lanes = sizeof(V) / sizeof(T);                     \
    const T *wblk = wb + blk * kh * kw * o * CB;                                           \
    for (int64_t X = xa; X < xb; X++) {                                                    \
        V acc[CB][NV];                                                                     \
        for (int b = 0; b < CB; b++)                                                       \
            for (int j = 0; j < NV; j++) acc[b][j] = (V){0};                               \
        for (int64_t r = 0; r < kh; r++) {                                                 \
            const int64_t yr = Y + ph - r * dh;                                            \
            if (yr < 0 || yr % sh) continue;                                               \
            const int64_t y = yr / sh;                                                     \
            if (y >= oh) continue;                                                         \
            for (int64_t q = 0; q < kw; q++) {                                             \
                const int64_t xq = X + pw - q * dw;                                        \
                if (xq < 0 || xq % sw) continue;                                           \
                const int64_t x = xq / sw;                                                 \
                if (x >= ow) continue;                                                     \
                const T *gp = gt + (y * ow + x) * np + nb;                                 \
                const T *wq = wblk + (r * kw + q) * o * CB;                                \
                for (int64_t oi = 0; oi < o; oi++) {                                       \
                    V v[NV];                                                               \
                    for (int j = 0; j < NV; j++) {                                         \
                        v[j] = LOAD(V, gp + oi * plane + j * lanes);                       \
                        KEEP(v[j]);                                                        \
                    }                                                                      \
                    for (int b = 0; b < CB; b++) {                                         \
                        const T wv = wq[oi * CB + b];                                      \
                        for (int j = 0; j < NV; j++) acc[b][j] += wv * v[j];               \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        for (int b = 0; b < cb; b++) {                                                     \
            T *dst = din + (((blk * CB + b) * h + Y) * w + X) * np + nb;                   \
            for (int j = 0; j < NV; j++) STORE(V, dst + j * lanes, acc[b][j]);             \
        }                                                                                  \
    }                                                                                      \
}

/* Input columns X and X + 1 of row Y, as input_row computes them (each value's terms added
   in the same order), for stride and dilation 1 along the width: kernel column q reads
   output column x = X + pw - q for X and x + 1 for X + 1, so where both are outputs each
   weight loaded serves both columns; where only one is, that column's terms alone. */
#define INPUT_ONE(T, V, NV, E, OFF)                                                        \
    for (int64_t oi = 0; oi < o; oi++) {                                                   \
        V v[NV];                                                                           \
        for (int j = 0; j < NV; j++) {                                                     \
            v[j] = LOAD(V, gp + (OFF) + oi * plane + j * lanes);                           \
            KEEP(v[j]);                                                                    \
        }                                                                                  \
        for (int b = 0; b < CB; b++) {                                                     \
            const T wv = wq[oi * CB + b];                                                  \
            for (int j = 0; j < NV; j++) acc[E][b][j] += wv * v[j];                        \
        }                                                                                  \
    }
#define INPUT_PAIR(T, S, V, NV)                                                            \
static void input_pair_##S##_##NV(const T *gt, const T *wb, T *din, int64_t o, int64_t h,  \
    int64_t w, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw,     \
    int64_t dh, int64_t oh, int64_t ow, int64_t blk, int64_t cb, int64_t Y, int64_t nb,    \
    int64_t X) {                                                                           \
    const int64_t plane = oh * ow * np, lanes = sizeof(V) / sizeof(T);                     \
    const T *wblk = wb + blk * kh * kw * o * CB;                                           \
    V acc[2][CB][NV];                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < CB; b++)                                                       \
            for (int j = 0; j < NV; j++) acc[e][b][j] = (V){0};                            \
    for (int64_t r = 0; r < kh; r++) {                                                     \
        const int64_t yr = Y + ph - r * dh;                                                \
        if (yr < 0 || yr % sh) continue;                                                   \
        const int64_t y = yr / sh;                                                         \
        if (y >= oh) continue;                                                             \
        for (int64_t q = 0; q < kw; q++) {                                                 \
            const int64_t x = X + pw - q;                                                  \
            const int lo = x >= 0 && x < ow, hi = x + 1 >= 0 && x + 1 < ow;                \
            const T *gp = gt + y * ow * np + nb;                                           \
            const T *wq = wblk + (r * kw + q) * o * CB;                                    \
            if (lo && hi) {                                                                \
                for (int64_t oi = 0; oi < o; oi++) {                                       \
                    V v0[NV], v1[NV];                                                      \
                    for (int j = 0; j < NV; j++) {                                         \
                        v0[j] = LOAD(V, gp + x * np + oi * plane + j * lanes);             \
                        KEEP(v0[j]);                                                       \
                        v1[j] = LOAD(V, gp + (x + 1) * np + oi * plane + j * lanes);       \
                        KEEP(v1[j]);                                                       \
                    }                                                                      \
                    for (int b = 0; b < CB; b++) {                                         \
                        const T wv = wq[oi * CB + b];                                      \
                        for (int j = 0; j < NV; j++) {                                     \
                            acc[0][b][j] += wv * v0[j];                                    \
                            acc[1][b][j] += wv * v1[j];                                    \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
            } else if (lo) {                                                               \
                INPUT_ONE(T, V, NV, 0, x * np)                                             \
            } else if (hi) {                                                               \
                INPUT_ONE(T, V, NV, 1, (x + 1) * np)                                       \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < cb; b++) {                                                     \
            T *dst = din + (((blk * CB + b) * h + Y) * w + X + e) * np + nb;               \
            for (int j = 0; j < NV; j++) STORE(V, dst + j * lanes, acc[e][b][j]);          \
        }                                                                                  \
}

/* The gradient of the weights of output channel block `blk` (ob <= CB) x input channel ci x
   kernel row r, kernel columns [qa, qa + NQ): sum over output pixels and lanes of
   gt[o, y, x] * xt[ci, y sh + r dh, x sw + q dw]; each lane summed in pixel order, then the
   lanes in order. With stride 1 along the width, a row's (x, lane) values run contiguous in
   both arrays and are walked as one run. Only output rows [ya, yb) are read: the others
   meet the top or bottom padding in row r, whose zero products leave the sums as they are
   (see forward_row). */
#define WEIGHT_TILE(T, S, V, NQ)                                                           \
static void weight_tile_##S##_##NQ(const T *gt, const T *xt, T *gw, int64_t c,             \
    int64_t hp, int64_t wp, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw,    \
    int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t blk, int64_t ob, int64_t ci,   \
    int64_t r, int64_t qa, int64_t ya, int64_t yb) {                                       \
    const int64_t plane = oh * ow * np, lanes = sizeof(V) / sizeof(T);                     \
    V acc[CB][NQ];                                                                         \
    for (int b = 0; b < CB; b++)                                                           \
        for (int k = 0; k < NQ; k++) acc[b][k] = (V){0};                                   \
    const T *gb[CB];                                                                       \
    for (int b = 0; b < CB; b++) gb[b] = gt + (blk * CB + (b < ob ? b : 0)) * plane;       \
    const int64_t run = sw == 1 ? ow * np : np, runs = sw == 1 ? 1 : ow;                   \
    for (int64_t y = ya; y < yb; y++)                                                      \
    for (int64_t x = 0; x < runs; x++) {                                                   \
        const T *xp = xt + ((ci * hp + y * sh + r * dh) * wp + x * sw + qa * dw) * np;     \
        const int64_t at = (y * ow + x) * np;                                              \
        for (int64_t m = 0; m < run; m += lanes) {                                         \
            V g[CB], v[NQ];                                                                \
            for (int b = 0; b < CB; b++) { g[b] = LOAD(V, gb[b] + at + m); KEEP(g[b]); }   \
            for (int k = 0; k < NQ; k++) { v[k] = LOAD(V, xp + k * dw * np + m); KEEP(v[k]); } \
            for (int b = 0; b < CB; b++)                                                   \
                for (int k = 0; k < NQ; k++) acc[b][k] += g[b] * v[k];                     \
        }                                                                                  \
    }                                                                                      \
    for (int b = 0; b < ob; b++)                                                           \
        for (int k = 0; k < NQ; k++) {                                                     \
            T s = 0;                                                                       \
            for (int l = 0; l < lanes; l++) s += acc[b][k][l];                             \
            gw[(((blk * CB + b) * c + ci) * kh + r) * kw + qa + k] = s;                    \
        }                                                                                  \
}

/* weight_tile for kernel rows r and r + 1 at once, each value summed as weight_tile sums
   it: the output gradient's vectors, loaded once, serve both rows (weight_tile loads four
   of them for every twelve multiply-adds). NQ <= 3: 2 CB NQ accumulators and CB loaded
   vectors take 28 of AVX-512's 32 registers. */
#define WEIGHT_TILE2(T, S, V, NQ)                                                          \
static void weight_tile2_##S##_##NQ(const T *gt, const T *xt, T *gw, int64_t c,            \
    int64_t hp, int64_t wp, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw,    \
    int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t blk, int64_t ob, int64_t ci,   \
    int64_t r, int64_t qa, int64_t ya0, int64_t yb0, int64_t ya1, int64_t yb1) {           \
    const int64_t plane = oh * ow * np, lanes = sizeof(V) / sizeof(T);                     \
    V acc[2][CB][NQ];                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < CB; b++)                                                       \
            for (int k = 0; k < NQ; k++) acc[e][b][k] = (V){0};                            \
    const T *gb[CB];                                                                       \
    for (int b = 0; b < CB; b++) gb[b] = gt + (blk * CB + (b < ob ? b : 0)) * plane;       \
    const int64_t run = sw == 1 ? ow * np : np, runs = sw == 1 ? 1 : ow;                   \
    const int64_t y0 = ya0 < ya1 ? ya0 : ya1, y1 = yb0 > yb1 ? yb0 : yb1;                  \
    for (int64_t y = y0; y < y1; y++) {                                                    \
    /* Each row's output rows only (as weight_tile's ya, yb): both rows, or one. */        \
    const int in0 = y >= ya0 && y < yb0, in1 = y >= ya1 && y < yb1;                        \
    for (int64_t x = 0; x < runs; x++) {                                                   \
        const T *xp = xt + ((ci * hp + y * sh + r * dh) * wp + x * sw + qa * dw) * np;     \
        const T *xq = xp + dh * wp * np;                                                   \
        const int64_t at = (y * ow + x) * np;                                              \
        for (int64_t m = 0; m < run; m += lanes) {                                         \
            V g[CB];                                                                       \
            for (int b = 0; b < CB; b++) { g[b] = LOAD(V, gb[b] + at + m); KEEP(g[b]); }   \
            if (in0)                                                                       \
                for (int k = 0; k < NQ; k++) {                                             \
                    V v = LOAD(V, xp + k * dw * np + m);                                   \
                    KEEP(v);                                                               \
                    for (int b = 0; b < CB; b++) acc[0][b][k] += g[b] * v;                 \
                }                                                                          \
            if (in1)                                                                       \
                for (int k = 0; k < NQ; k++) {                                             \
                    V v = LOAD(V, xq + k * dw * np + m);                                   \
                    KEEP(v);                                                               \
                    for (int b = 0; b < CB; b++) acc[1][b][k] += g[b] * v;                 \
                }                                                                          \
        }                                                                                  \
    }                                                                                      \
    }                                                                                      \
    for (int e = 0; e < 2; e++)                                                            \
        for (int b = 0; b < ob; b++)                                                       \
            for (int k = 0; k < NQ; k++) {                                                 \
                T s = 0;                                                                   \
                for (int l = 0; l < lanes; l++) s += acc[e][b][k][l];                      \
                gw[(((blk * CB + b) * c + ci) * kh + r + e) * kw + qa + k] = s;            \
            }                                                                              \
}

#define ROW_VARIANTS(M, T, S, V) M(T, S, V, 1) M(T, S, V, 2) M(T, S, V, 3) M(T, S, V, 4)
#define VARIANTS(name, S) {name##_##S##_1, name##_##S##_2, name##_##S##_3, name##_##S##_4}

/* How many vectors of lanes the next chunk of the batch at `nb` takes (at most MAXV). */
static inline int64_t chunk_vectors(int64_t np, int64_t nb, int64_t lanes) {
    const int64_t nv = (np - nb) / lanes;
    return nv > MAXV ? MAXV : nv;
}

#define DIRECT(T, S, V)                                                                    \
ROW_VARIANTS(FORWARD_ROW, T, S, V)                                                         \
FORWARD_PAIR(T, S, V, 1) FORWARD_PAIR(T, S, V, 2)                                          \
INPUT_PAIR(T, S, V, 1) INPUT_PAIR(T, S, V, 2)                                              \
WEIGHT_TILE2(T, S, V, 1) WEIGHT_TILE2(T, S, V, 2) WEIGHT_TILE2(T, S, V, 3)                 \
ROW_VARIANTS(INPUT_ROW, T, S, V)                                                           \
ROW_VARIANTS(WEIGHT_TILE, T, S, V)                                                         \
/* Each row kernel's variants by vectors (or kernel columns) per chunk, 1 to 4. */         \
static __typeof__(&forward_row_##S##_1) const forward_rows_##S[] =                         \
    VARIANTS(forward_row, S);                                                              \
static __typeof__(&input_row_##S##_1) const input_rows_##S[] = VARIANTS(input_row, S);     \
static __typeof__(&forward_pair_##S##_1) const forward_pairs_##S[] =                       \
    {forward_pair_##S##_1, forward_pair_##S##_2};                                          \
static __typeof__(&input_pair_##S##_1) const input_pairs_##S[] =                           \
    {input_pair_##S##_1, input_pair_##S##_2};                                              \
static __typeof__(&weight_tile2_##S##_1) const weight_tiles2_##S[] =                       \
    {weight_tile2_##S##_1, weight_tile2_##S##_2, weight_tile2_##S##_3};                    \
static __typeof__(&weight_tile_##S##_1) const weight_tiles_##S[] =                         \
    VARIANTS(weight_tile, S);                                                              \
                                                                                           \
/* out (o, oh, ow, np) = the convolution of xt (c, hp, wp, np) with w (o, c, kh, kw),      \
   kernel offsets [r0, r1) x [q0, q1) only (the others read only padding), each output     \
   leaving out those of its own that read the padding (ph, pw); units are (block of CB     \
   output channels, output row). */                                                        \
void conv_forward_##S(const T *xt, const T *w, T *out, int64_t c, int64_t hp, int64_t wp,  \
    int64_t np, int64_t o, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,     \
    int64_t dw, int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1,    \
    int64_t ph, int64_t pw, int64_t start, int64_t stop) {                                 \
    const int64_t lanes = sizeof(V) / sizeof(T), h = hp - 2 * ph, wd = wp - 2 * pw;        \
    /* Columns in pairs where the width has stride and dilation 1 (and the chunk of the    \
       batch leaves registers for them), between the columns that read padding. */        \
    const int pairs = sw == 1 && dw == 1;                                                  \
    int64_t xi0 = 0, xi1 = ow;                                                             \
    while (xi0 < ow && xi0 * sw + q0 * dw < pw) xi0++;                                     \
    while (xi1 > xi0 && (xi1 - 1) * sw + (q1 - 1) * dw >= pw + wd) xi1--;                  \
    for (int64_t u = start; u < stop; u++) {                                               \
        const int64_t blk = u / oh, y = u % oh;                                            \
        const int64_t ob = o - blk * CB < CB ? o - blk * CB : CB;                          \
        /* The kernel rows that read the image, not the top or bottom padding (as the     \
           columns in forward_row). */                                                     \
        int64_t ra = r0, rb = r1;                                                          \
        while (ra < rb && y * sh + ra * dh < ph) ra++;                                     \
        while (rb > ra && y * sh + (rb - 1) * dh >= ph + h) rb--;                          \
        for (int64_t nb = 0, nv; nb < np; nb += nv * lanes) {                              \
            nv = chunk_vectors(np, nb, lanes);                                             \
            int64_t x = 0;                                                                 \
            if (pairs && nv <= PAIR_MAXV && xi1 - xi0 >= 2) {                              \
                forward_rows_##S[nv - 1](xt, w, out, c, hp, wp, np, kh, kw, sh, sw, dh,    \
                                         dw, oh, ow, ra, rb, q0, q1, blk, ob, y, nb, 0,    \
                                         xi0, pw, wd);                                     \
                for (x = xi0; x + 1 < xi1; x += 2)                                         \
                    forward_pairs_##S[nv - 1](xt, w, out, c, hp, wp, np, kh, kw, sh, dh,   \
                                              oh, ow, ra, rb, q0, q1, blk, ob, y, nb, x);  \
            }                                                                              \
            forward_rows_##S[nv - 1](xt, w, out, c, hp, wp, np, kh, kw, sh, sw, dh, dw,    \
                                     oh, ow, ra, rb, q0, q1, blk, ob, y, nb, x, ow, pw,    \
                                     wd);                                                  \
        }                                                                                  \
    }                                                                                      \
}                                                                                          \
                                                                                           \
/* din (c, h, w, np) = the gradient of the convolution's input (unpadded) from gt          \
   (o, oh, ow, np) and wt, the weight as (c, kh, kw, o); units are (block of CB input      \
   channels, input row). */                                                                \
void conv_input_grad_##S(const T *gt, const T *wt, T *din, int64_t o, int64_t c, int64_t h, \
    int64_t w, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,     \
    int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t start,             \
    int64_t stop) {                                                                        \
    const int64_t lanes = sizeof(V) / sizeof(T);                                           \
    const int pairs = sw == 1 && dw == 1;  /* (as in conv_forward) */                      \
    for (int64_t u = start; u < stop; u++) {                                               \
        const int64_t blk = u / h, Y = u % h;                                              \
        const int64_t cb = c - blk * CB < CB ? c - blk * CB : CB;                          \
        for (int64_t nb = 0, nv; nb < np; nb += nv * lanes) {                              \
            nv = chunk_vectors(np, nb, lanes);                                             \
            int64_t X = 0;                                                                 \
            if (pairs && nv <= PAIR_MAXV)                                                  \
                for (; X + 1 < w; X += 2)                                                  \
                    input_pairs_##S[nv - 1](gt, wt, din, o, h, w, np, kh, kw, sh, ph, pw,  \
                                            dh, oh, ow, blk, cb, Y, nb, X);                \
            input_rows_##S[nv - 1](gt, wt, din, o, h, w, np, kh, kw, sh, sw, ph, pw, dh,   \
                                   dw, oh, ow, blk, cb, Y, nb, X, w);                      \
        }                                                                                  \
    }                                                                                      \
}                                                                                          \
                                                                                           \
/* gw (o, c, kh, kw) = the gradient of the weight from gt (o, oh, ow, np) and xt           \
   (c, hp, wp, np), kernel offsets [r0, r1) x [q0, q1) only (the others are left as they   \
   are); units are (block of CB output channels, input channel, kernel row in [r0, r1)). */ \
void conv_weight_grad_##S(const T *gt, const T *xt, T *gw, int64_t o, int64_t c,           \
    int64_t hp, int64_t wp, int64_t np, int64_t kh, int64_t kw, int64_t sh, int64_t sw,    \
    int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0,    \
    int64_t q1, int64_t ph, int64_t start, int64_t stop) {                                 \
    const int64_t nr = r1 - r0, h = hp - 2 * ph;                                           \
    for (int64_t u = start, rows; u < stop; u += rows) {                                   \
        const int64_t blk = u / (c * nr), ci = u / nr % c, r = r0 + u % nr;                \
        const int64_t ob = o - blk * CB < CB ? o - blk * CB : CB;                          \
        /* Two kernel rows at a time where the range holds both (unit u + 1 is row r + 1  \
           of the same channels) and their tiles fit the registers. */                     \
        rows = PAIR_MAXV > 1 && r + 1 < r1 && u + 1 < stop ? 2 : 1;                       \
        /* Each row's output rows that read the image (ya, yb), not the padding. */        \
        int64_t ya[2], yb[2];                                                              \
        for (int64_t e = 0; e < rows; e++) {                                               \
            ya[e] = 0, yb[e] = oh;                                                         \
            while (ya[e] < yb[e] && ya[e] * sh + (r + e) * dh < ph) ya[e]++;               \
            while (yb[e] > ya[e] && (yb[e] - 1) * sh + (r + e) * dh >= ph + h) yb[e]--;    \
        }                                                                                  \
        for (int64_t qa = q0, nq; qa < q1; qa += nq) {                                     \
            nq = q1 - qa < QB ? q1 - qa : QB;                                              \
            if (rows == 2 && nq <= 3) {                                                    \
                weight_tiles2_##S[nq - 1](gt, xt, gw, c, hp, wp, np, kh, kw, sh, sw, dh,   \
                                          dw, oh, ow, blk, ob, ci, r, qa, ya[0], yb[0],    \
                                          ya[1], yb[1]);                                   \
                continue;                                                                  \
            }                                                                              \
            for (int64_t e = 0; e < rows; e++)                                             \
                weight_tiles_##S[nq - 1](gt, xt, gw, c, hp, wp, np, kh, kw, sh, sw, dh,    \
                                         dw, oh, ow, blk, ob, ci, r + e, qa, ya[e], yb[e]); \
        }                                                                                  \
    }                                                                                      \
}

DIRECT(float, f32, vf32)
DIRECT(double, f64, vf64)
