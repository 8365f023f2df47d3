/* 2-D max pooling over planes [start, stop) of contiguous (planes, H, W) inputs.

   PyTorch's kernel, element for element: each output scans the window's positions inside
   the input (padding is skipped, not read as -inf) row by row, and a value replaces the
   running maximum when it is greater or NaN (so the first of equal maxima wins, and the
   last NaN); the index starts at the window's first position inside the input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A window's first row (or column) inside the input, its position past the last one, for a
   window starting at `i0` (possibly negative) of `k` taps `d` apart over `n` values. */
static inline void taps(int64_t i0, int64_t k, int64_t d, int64_t n, int64_t *first,
                        int64_t *end) {
    int64_t e = i0 + (k - 1) * d + 1;
    if (e > n)
        e = n;
    while (i0 < 0)
        i0 += d;
    *first = i0;
    *end = e;
}

#define MAXPOOL(T, NAME)                                                                 \
/* One output, any window: PyTorch's scan. */                                             \
static void NAME##_one(const T *x, T *out, int64_t *ind, int64_t h0, int64_t h1,          \
                       int64_t w0, int64_t w1, int64_t W, int64_t dh, int64_t dw) {        \
    T best = -(T)INFINITY;                                                                \
    int64_t at = h0 * W + w0;                                                             \
    for (int64_t ih = h0; ih < h1; ih += dh)                                              \
        for (int64_t iw = w0; iw < w1; iw += dw) {                                        \
            int64_t i = ih * W + iw;                                                      \
            T v = x[i];                                                                   \
            int take = (v > best) | (v != v);                                             \
            best = take ? v : best;                                                       \
            at = take ? i : at;                                                           \
        }                                                                                 \
    *out = best;                                                                          \
    *ind = at;                                                                            \
}                                                                                         \
/* One window tap over all of a plane's outputs: `v` the tap's value for each output, `at`   \
   the tap's flat input index for each, `corner + delta`. */                              \
static inline void NAME##_tap(const T *restrict v, T *restrict best, int32_t *restrict idx, \
                              const int32_t *restrict corner, int32_t delta, int64_t n) {  \
    for (int64_t q = 0; q < n; q++) {                                                     \
        T a = v[q], b = best[q];                                                          \
        int take = (a > b) | (a != a);                                                    \
        best[q] = take ? a : b;                                                           \
        idx[q] = take ? corner[q] + delta : idx[q];                                       \
    }                                                                                     \
}                                                                                         \
/* The values of one tap for every output of a plane, from the padded plane. */          \
static inline void NAME##_gather(const T *restrict pad, T *restrict v, int64_t OH,         \
                                 int64_t OW, int64_t PW, int64_t sh, int64_t sw) {         \
    for (int64_t oh = 0; oh < OH; oh++) {                                                 \
        const T *r = pad + oh * sh * PW;                                                  \
        T *o = v + oh * OW;                                                               \
        for (int64_t ow = 0; ow < OW; ow++)                                               \
            o[ow] = r[ow * sw];                                                           \
    }                                                                                     \
}                                                                                         \
void NAME(const T *x, T *out, int64_t *ind, int64_t start, int64_t stop, int64_t H,      \
          int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw, int64_t sh,          \
          int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {                   \
    /* Each plane is copied into one widened by the padding (and what ceil mode reaches   \
       past it) with -inf, which never replaces a maximum; each tap's values for all the  \
       plane's outputs are gathered into one row, and one pass over it updates every      \
       running maximum. A window's index starts at its first position inside the input,   \
       which windows of only -inf keep, as in PyTorch. */                                 \
    int64_t PH = (OH - 1) * sh + (kh - 1) * dh + 1, PW = (OW - 1) * sw + (kw - 1) * dw + 1; \
    if (PH < H + ph)                                                                      \
        PH = H + ph;                                                                      \
    if (PW < W + pw)                                                                      \
        PW = W + pw;                                                                      \
    int64_t n = OH * OW;                                                                  \
    T *pad = malloc(sizeof(T) * (size_t)(PH * PW + 2 * n));                               \
    int32_t *ints = malloc(sizeof(int32_t) * (size_t)(3 * n));                            \
    if (!pad || !ints || PH * PW >= ((int64_t)1 << 31)) {                                 \
        for (int64_t p = start; p < stop; p++)                                            \
            for (int64_t oh = 0; oh < OH; oh++) {                                         \
                int64_t h0, h1;                                                           \
                taps(oh * sh - ph, kh, dh, H, &h0, &h1);                                  \
                for (int64_t ow = 0; ow < OW; ow++) {                                     \
                    int64_t w0, w1, o = (p * OH + oh) * OW + ow;                          \
                    taps(ow * sw - pw, kw, dw, W, &w0, &w1);                              \
                    NAME##_one(x + p * H * W, out + o, ind + o, h0, h1, w0, w1, W, dh, dw);\
                }                                                                         \
            }                                                                             \
        free(pad); free(ints);                                                            \
        return;                                                                           \
    }                                                                                     \
    T *v = pad + PH * PW, *best = v + n;                                                  \
    int32_t *idx = ints, *corner = ints + n, *first = ints + 2 * n;                       \
    for (int64_t oh = 0; oh < OH; oh++)                                                   \
        for (int64_t ow = 0; ow < OW; ow++) {                                             \
            int64_t h0, h1, w0, w1;                                                       \
            taps(oh * sh - ph, kh, dh, H, &h0, &h1);                                      \
            taps(ow * sw - pw, kw, dw, W, &w0, &w1);                                      \
            corner[oh * OW + ow] = (int32_t)((oh * sh - ph) * W + ow * sw - pw);          \
            first[oh * OW + ow] = (int32_t)(h0 * W + w0);                                 \
        }                                                                                 \
    for (int64_t i = 0; i < PH * PW; i++)                                                 \
        pad[i] = -(T)INFINITY;                                                            \
    for (int64_t p = start; p < stop; p++) {                                              \
        const T *xp = x + p * H * W;                                                      \
        for (int64_t ih = 0; ih < H; ih++)                                                \
            memcpy(pad + (ih + ph) * PW + pw, xp + ih * W, sizeof(T) * (size_t)W);        \
        for (int64_t q = 0; q < n; q++) {                                                 \
            best[q] = -(T)INFINITY;                                                       \
            idx[q] = first[q];                                                            \
        }                                                                                 \
        for (int64_t i = 0; i < kh; i++)                                                  \
            for (int64_t j = 0; j < kw; j++) {                                            \
                const T *tap = pad + i * dh * PW + j * dw;                                \
                /* Constant strides (the common ones) copy without gathers. */            \
                if (sw == 2)                                                              \
                    NAME##_gather(tap, v, OH, OW, PW, sh, 2);                             \
                else if (sw == 1)                                                         \
                    NAME##_gather(tap, v, OH, OW, PW, sh, 1);                             \
                else                                                                      \
                    NAME##_gather(tap, v, OH, OW, PW, sh, sw);                            \
                NAME##_tap(v, best, idx, corner, (int32_t)(i * dh * W + j * dw), n);      \
            }                                                                             \
        T *o = out + p * n;                                                               \
        int64_t *id = ind + p * n;                                                        \
        for (int64_t q = 0; q < n; q++) {                                                 \
            o[q] = best[q];                                                               \
            id[q] = idx[q];                                                               \
        }                                                                                 \
    }                                                                                     \
    free(pad); free(ints);                                                                \
}
MAXPOOL(float, maxpool2d_f32)
MAXPOOL(double, maxpool2d_f64)

/* The input gradient of planes [start, stop): zeroed, then each output's gradient added at
   the position its index names, in output order (PyTorch's sums where windows overlap). */
#define MAXPOOL_GRAD(T, NAME)                                                            \
void NAME(const T *g, const int64_t *ind, T *gi, int64_t start, int64_t stop, int64_t hw, \
          int64_t ohw) {                                                                  \
    for (int64_t p = start; p < stop; p++) {                                              \
        T *dst = gi + p * hw;                                                             \
        const T *src = g + p * ohw;                                                       \
        const int64_t *at = ind + p * ohw;                                                \
        memset(dst, 0, (size_t)hw * sizeof(T));                                           \
        for (int64_t j = 0; j < ohw; j++) {                                               \
            int64_t i = at[j];                                                            \
            if (i >= 0 && i < hw)                                                         \
                dst[i] += src[j];                                                         \
        }                                                                                 \
    }                                                                                     \
}
MAXPOOL_GRAD(float, maxpool2d_grad_f32)
MAXPOOL_GRAD(double, maxpool2d_grad_f64)
