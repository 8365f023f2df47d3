/* The layout work of a 2-D convolution around its GEMMs: batch-last im2col and col2im
   (columns ordered kernel offset, output pixel, sample) and the moves of the batch axis
   between first and last. Each function works on a range [start, stop) of channels; every
   value is computed the same way whatever the range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The scratch of the thread running a piece, for a call made without one (`t` or `acc`
   NULL): the C workers share a call's channels (`ops/native/workers.c`), and each needs a
   padded image of its own. Kept for this thread's next call, grown as needed; NULL when it
   cannot be had: the piece then computes nothing and sets its call's `failed` cell, which
   the caller reads (each call its own cell, so that calls made at once by other threads
   cannot take or hide each other's failure). A thread's first call gets a buffer even for
   no bytes (an empty batch): NULL means failure. */
static void *thread_scratch(size_t bytes) {
    static _Thread_local void *buf;
    static _Thread_local size_t cap;
    if (!buf || bytes > cap) {
        size_t want = bytes ? (bytes + 63) / 64 * 64 : 64;
        free(buf);
        buf = aligned_alloc(64, want);
        cap = buf ? want : 0;
    }
    return buf;
}

#define NO_SCRATCH(failed)                                                                 \
    do {                                                                                   \
        __atomic_store_n(failed, 1, __ATOMIC_RELAXED);                                     \
        return;                                                                            \
    } while (0)

/* im2col, batch last: x (n, c, h, w) -> cols (c, r1 - r0, q1 - q0, oh, ow, n) for kernel
   rows [r0, r1) and columns [q0, q1), channels [start, stop), the zero padding included.
   Each channel is first moved batch last into `t`, a (h + 2 ph, w + 2 pw, n) scratch with a
   zero border (zeroed here, once per call): every window row is then one run of ow * n
   values (stride 1), or ow runs of n. */
#define IM2COL_BL(T, NAME)                                                                 \
void NAME(const T *x, T *cols, T *t, int64_t n, int64_t c, int64_t h, int64_t w,           \
          int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,          \
          int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1,          \
          int64_t start, int64_t stop, int64_t *failed) {                                  \
    const int64_t hw = h * w, chw = c * hw, wp = w + 2 * pw, hp = h + 2 * ph;              \
    const int64_t run = ow * n, per = (r1 - r0) * (q1 - q0) * oh * run;                    \
    if (!t && !(t = thread_scratch(sizeof(T) * hp * wp * n))) NO_SCRATCH(failed);         \
    memset(t, 0, sizeof(T) * hp * wp * n);                                                 \
    for (int64_t ci = start; ci < stop; ci++) {                                            \
        const T *xc = x + ci * hw;                                                         \
        for (int64_t y = 0; y < h; y++) {                                                  \
            T *row = t + ((y + ph) * wp + pw) * n;                                         \
            for (int64_t b = 0; b < n; b++) {                                              \
                const T *src = xc + b * chw + y * w;                                       \
                for (int64_t xx = 0; xx < w; xx++) row[xx * n + b] = src[xx];              \
            }                                                                              \
        }                                                                                  \
        T *out = cols + ci * per;                                                          \
        for (int64_t i = r0; i < r1; i++)                                                  \
        for (int64_t j = q0; j < q1; j++)                                                  \
        for (int64_t oy = 0; oy < oh; oy++) {                                              \
            const T *src = t + ((oy * sh + i * dh) * wp + j * dw) * n;                     \
            if (sw == 1) {                                                                 \
                memcpy(out, src, sizeof(T) * run);                                         \
            } else {                                                                       \
                for (int64_t ox = 0; ox < ow; ox++)                                        \
                    memcpy(out + ox * n, src + ox * sw * n, sizeof(T) * n);                \
            }                                                                              \
            out += run;                                                                    \
        }                                                                                  \
    }                                                                                      \
}
IM2COL_BL(float, im2col_bl_f32)
IM2COL_BL(double, im2col_bl_f64)

/* im2col, pixels last: x (n, c, h, w) -> for each channel ci, sample b and kernel offset
   (i, j) in [r0, r1) x [q0, q1), one (oh, ow) block of columns at
   cols + ci * cs + b * bs + tap * ts (tap counted from (r0, q0), row-major), padding as
   zeros; channels [start, stop). (cs, bs, ts) give the layout: (c, taps, n, oh, ow) or
   (n, c, taps, oh, ow). Each image is first laid out padded in `t`, its columns split by
   their remainder modulo the stride (sw phases of pw2 = ceil((w + 2 pw) / sw) values per
   row, hp = h + 2 ph rows, zeroed here): every window row is then one run of ow values. */
#define IM2COL_PL(T, NAME)                                                                 \
void NAME(const T *x, T *cols, T *t, int64_t n, int64_t c, int64_t h, int64_t w,           \
          int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,          \
          int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1,          \
          int64_t cs, int64_t bs, int64_t ts, int64_t start, int64_t stop,                 \
          int64_t *failed) {                                                               \
    const int64_t hw = h * w, nq = q1 - q0, hp = h + 2 * ph;                               \
    const int64_t pw2 = (w + 2 * pw + sw - 1) / sw, rowlen = sw * pw2;                     \
    if (!t && !(t = thread_scratch(sizeof(T) * hp * rowlen))) NO_SCRATCH(failed);          \
    memset(t, 0, sizeof(T) * hp * rowlen);                                                 \
    for (int64_t ci = start; ci < stop; ci++)                                              \
    for (int64_t b = 0; b < n; b++) {                                                      \
        const T *xc = x + (b * c + ci) * hw;                                               \
        for (int64_t y = 0; y < h; y++) {                                                  \
            T *__restrict row = t + (y + ph) * rowlen;                                     \
            const T *__restrict src = xc + y * w;                                          \
            if (sw == 1) {                                                                 \
                memcpy(row + pw, src, sizeof(T) * w);                                      \
                continue;                                                                  \
            }                                                                              \
            for (int64_t q = 0; q < sw; q++) {  /* the padded columns X = q (mod sw) */    \
                const int64_t x0 = pw + ((q - pw) % sw + sw) % sw;                         \
                T *__restrict d = row + q * pw2 + x0 / sw;                                 \
                const T *__restrict s = src + x0 - pw;                                     \
                const int64_t count = x0 < pw + w ? (pw + w - 1 - x0) / sw + 1 : 0;        \
                for (int64_t k = 0; k < count; k++) d[k] = s[k * sw];                      \
            }                                                                              \
        }                                                                                  \
        for (int64_t i = r0; i < r1; i++)                                                  \
        for (int64_t j = q0; j < q1; j++) {                                                \
            T *__restrict out = cols + ci * cs + b * bs + ((i - r0) * nq + (j - q0)) * ts; \
            const int64_t X = j * dw, col = (X % sw) * pw2 + X / sw;                       \
            for (int64_t oy = 0; oy < oh; oy++, out += ow) {                               \
                const T *__restrict src = t + (oy * sh + i * dh) * rowlen + col;           \
                for (int64_t ox = 0; ox < ow; ox++) out[ox] = src[ox];                     \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
}
IM2COL_PL(float, im2col_pl_f32)
IM2COL_PL(double, im2col_pl_f64)

/* col2im, batch last: the adjoint of im2col_bl. cols (c, r1 - r0, q1 - q0, oh, ow, n)
   summed into gi (n, c, h, w), channels [start, stop). Per channel the offsets are added in
   order (kernel row, then column) into `acc`, an (fh, fw, n) scratch zeroed first (fh, fw:
   the padded canvas the windows cover), whose inner (h, w) is then moved batch first. */
#define COL2IM_BL(T, NAME)                                                                 \
void NAME(const T *cols, T *gi, T *acc, int64_t n, int64_t c, int64_t h, int64_t w,        \
          int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,          \
          int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1,          \
          int64_t fh, int64_t fw, int64_t start, int64_t stop, int64_t *failed) {          \
    const int64_t hw = h * w, chw = c * hw, run = ow * n;                                  \
    const int64_t per = (r1 - r0) * (q1 - q0) * oh * run;                                  \
    if (!acc && !(acc = thread_scratch(sizeof(T) * fh * fw * n))) NO_SCRATCH(failed);      \
    for (int64_t ci = start; ci < stop; ci++) {                                            \
        memset(acc, 0, sizeof(T) * fh * fw * n);                                           \
        const T *src = cols + ci * per;                                                    \
        for (int64_t i = r0; i < r1; i++)                                                  \
        for (int64_t j = q0; j < q1; j++)                                                  \
        for (int64_t oy = 0; oy < oh; oy++) {                                              \
            T *dst = acc + ((oy * sh + i * dh) * fw + j * dw) * n;                         \
            if (sw == 1) {                                                                 \
                for (int64_t e = 0; e < run; e++) dst[e] += src[e];                        \
            } else {                                                                       \
                for (int64_t ox = 0; ox < ow; ox++) {                                      \
                    T *d = dst + ox * sw * n;                                              \
                    const T *s = src + ox * n;                                             \
                    for (int64_t b = 0; b < n; b++) d[b] += s[b];                          \
                }                                                                          \
            }                                                                              \
            src += run;                                                                    \
        }                                                                                  \
        T *gc = gi + ci * hw;                                                              \
        for (int64_t y = 0; y < h; y++) {                                                  \
            const T *row = acc + ((y + ph) * fw + pw) * n;                                 \
            for (int64_t b = 0; b < n; b++) {                                              \
                T *dst = gc + b * chw + y * w;                                             \
                for (int64_t xx = 0; xx < w; xx++) dst[xx] = row[xx * n + b];              \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
}
COL2IM_BL(float, col2im_bl_f32)
COL2IM_BL(double, col2im_bl_f64)

/* col2im, pixels last: the adjoint of im2col_pl's (c, taps, n, oh, ow) layout. cols summed
   into gi (n, c, h, w), channels [start, stop). Per channel and sample the offsets are added
   in order (kernel row, then column) into `acc`, an (fh, fw) scratch zeroed first (the
   padded canvas the windows cover), whose inner (h, w) is then copied out. */
#define COL2IM_PL(T, NAME)                                                                 \
void NAME(const T *cols, T *gi, T *acc, int64_t n, int64_t c, int64_t h, int64_t w,        \
          int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,          \
          int64_t oh, int64_t ow, int64_t r0, int64_t r1, int64_t q0, int64_t q1,          \
          int64_t fh, int64_t fw, int64_t start, int64_t stop, int64_t *failed) {          \
    const int64_t pix = oh * ow, taps = (r1 - r0) * (q1 - q0);                             \
    if (!acc && !(acc = thread_scratch(sizeof(T) * fh * fw))) NO_SCRATCH(failed);          \
    for (int64_t ci = start; ci < stop; ci++)                                              \
    for (int64_t b = 0; b < n; b++) {                                                      \
        memset(acc, 0, sizeof(T) * fh * fw);                                               \
        const T *src = cols + (ci * taps * n + b) * pix;                                   \
        for (int64_t i = r0; i < r1; i++)                                                  \
        for (int64_t j = q0; j < q1; j++, src += n * pix) {                                \
            const T *__restrict s = src;                                                   \
            for (int64_t oy = 0; oy < oh; oy++, s += ow) {                                 \
                T *__restrict d = acc + (oy * sh + i * dh) * fw + j * dw;                  \
                if (sw == 1) for (int64_t ox = 0; ox < ow; ox++) d[ox] += s[ox];           \
                else for (int64_t ox = 0; ox < ow; ox++) d[ox * sw] += s[ox];              \
            }                                                                              \
        }                                                                                  \
        T *out = gi + (b * c + ci) * h * w;                                                \
        for (int64_t y = 0; y < h; y++)                                                    \
            memcpy(out + y * w, acc + (y + ph) * fw + pw, sizeof(T) * w);                  \
    }                                                                                      \
}
COL2IM_PL(float, col2im_pl_f32)
COL2IM_PL(double, col2im_pl_f64)

/* A transpose: src (rows, cols) -> dst (cols, rows), over source rows [r0, r1) and columns
   [q0, q1); with `bias` (not NULL), bias[r / per] is added to row r's values (no add
   otherwise, so a -0 stays -0). In 8 x 8 tiles, the outer loop over the shorter side, so
   that the long side is read or written as 8 streams at once (not a few values from each
   of many rows a power of two apart, which evict each other from the cache). */
#define TRANSPOSE_TILE(T, src, dst, bias, rows, cols, per, ra, qa, rb, qb)                 \
    if ((rb) - (ra) == 8 && (qb) - (qa) == 8) {  /* a whole tile: fixed bounds */          \
        const T *__restrict s_ = (src) + (ra) * (cols) + (qa);                             \
        T *__restrict d_ = (dst) + (qa) * (rows) + (ra);                                   \
        T tile[8][8];                                                                      \
        for (int r = 0; r < 8; r++)                                                        \
            for (int q = 0; q < 8; q++) tile[q][r] = s_[r * (cols) + q];                   \
        if (bias) {                                                                        \
            T bv[8];                                                                       \
            for (int r = 0; r < 8; r++) bv[r] = (bias)[((ra) + r) / (per)];                \
            for (int q = 0; q < 8; q++)                                                    \
                for (int r = 0; r < 8; r++) d_[q * (rows) + r] = tile[q][r] + bv[r];       \
        } else {                                                                           \
            for (int q = 0; q < 8; q++)                                                    \
                for (int r = 0; r < 8; r++) d_[q * (rows) + r] = tile[q][r];               \
        }                                                                                  \
    } else if (bias) {                                                                     \
        for (int64_t r = (ra); r < (rb); r++) {                                            \
            const T bv = (bias)[r / (per)];                                                \
            for (int64_t q = (qa); q < (qb); q++)                                          \
                (dst)[q * (rows) + r] = (src)[r * (cols) + q] + bv;                        \
        }                                                                                  \
    } else {                                                                               \
        for (int64_t q = (qa); q < (qb); q++)                                              \
            for (int64_t r = (ra); r < (rb); r++)                                          \
                (dst)[q * (rows) + r] = (src)[r * (cols) + q];                             \
    }
#define TRANSPOSE(T, NAME)                                                                 \
void NAME(const T *src, T *dst, const T *bias, int64_t rows, int64_t cols, int64_t per,    \
          int64_t r0, int64_t r1, int64_t q0, int64_t q1) {                                \
    const int64_t nr = (r1 - r0 + 7) / 8, nq = (q1 - q0 + 7) / 8;                          \
    const int rows_outer = r1 - r0 <= q1 - q0;                                             \
    for (int64_t u = 0; u < (rows_outer ? nr : nq); u++)                                   \
    for (int64_t v = 0; v < (rows_outer ? nq : nr); v++) {                                 \
        const int64_t ra = r0 + 8 * (rows_outer ? u : v), qa = q0 + 8 * (rows_outer ? v : u); \
        const int64_t rb = ra + 8 < r1 ? ra + 8 : r1, qb = qa + 8 < q1 ? qa + 8 : q1;      \
        TRANSPOSE_TILE(T, src, dst, bias, rows, cols, per, ra, qa, rb, qb)                 \
    }                                                                                      \
}
TRANSPOSE(float, transpose_f32)
TRANSPOSE(double, transpose_f64)
