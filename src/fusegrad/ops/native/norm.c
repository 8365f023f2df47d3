/* Batch norm over an input seen as (n, c, len): channel ch's values are the n rows
   x[(i * c + ch) * len + j], j < len. Every function works on channels [start, stop).

   Per-channel sums run in double (float32 inputs too) over W running sums per channel
   (W = len for rows of at most SHORT values, else LANES): value j of each row goes to sum
   j % W, the rows in order, and the W sums are added in order at the end. The order
   depends on the shape alone, so which channels a call covers never changes a channel's
   result, and the loops vectorize without reordering any sum.

   Channels are taken in blocks (see `block`), each pass over a block reading it row by
   row: long runs of memory, which the prefetcher follows. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LANES 16
/* Rows of at most this many values take one running sum per value of a row (W = len):
   a block's columns are summed in one flat loop (16 values: 20 -> 13 us per 32x128x4x4
   batch), rather than the LANES sums per channel of longer rows. */
#define SHORT 64
/* Running sums kept at once (a block's channels times W): 16 KiB of doubles. */
#define SUMS 2048
/* A block's values at most, so that the passes after the first read them from the L2
   cache; unless that makes blocks of fewer than MIN_BLOCK channels, whose short runs of
   memory (a 32x64x32x32 batch: 4 KiB) the prefetcher follows poorly: then blocks as large
   as SUMS allows, every pass streaming from memory (measured 1.6 -> 0.85 ms there). */
#define BLOCK_BYTES (256 * 1024)
#define MIN_BLOCK 8

/* The number of channels of the block starting at ch: its values (`streams` arrays of
   `size`-byte elements) within BLOCK_BYTES where that allows MIN_BLOCK channels, its
   running sums within SUMS. (How channels are blocked never changes their sums.) */
static int64_t block(int64_t n, int64_t len, int64_t size, int64_t streams, int64_t ch,
                     int64_t stop) {
    int64_t w = len <= SHORT ? len : LANES;
    int64_t k = BLOCK_BYTES / (n * len * size * streams);
    if (k < MIN_BLOCK || k > SUMS / w) k = SUMS / w;
    return ch + k <= stop ? k : stop - ch;
}

/* mq[h * len + j] = mean[h]: a block's per-channel values spread along short rows. */
static void spread(const double *mean, int64_t k, int64_t len, double *mq) {
    for (int64_t h = 0; h < k; h++)
        for (int64_t j = 0; j < len; j++) mq[h * len + j] = mean[h];
}

/* Each of channels [0, k)'s W running sums added in order. */
static void totals(const double *acc, int64_t k, int64_t len, double *out) {
    int64_t w = len <= SHORT ? len : LANES;
    for (int64_t h = 0; h < k; h++) {
        double s = 0.0;
        for (int64_t q = 0; q < w; q++) s += acc[h * w + q];
        out[h] = s;
    }
}

/* Eight doubles: the running sums of long rows are two of these per channel, the loops
   written with vectors because compilers leave a reduction with two sums in scalars. */
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

static inline v8d load_f32(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, v8d);
}

static inline v8d load_f64(const double *p) {
    v8d v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline v8d get(const double *p) { return load_f64(p); }

static inline void put(double *p, v8d v) { memcpy(p, &v, sizeof v); }

/* A double passed as its bits in a 64-bit integer: the C workers (`_native.run_pieces`),
   which share the channels, pass integers and addresses only. */
static inline double as_double(int64_t bits) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

#define BN_FAMILY(T, SFX)                                                                 \
/* Running sums of x over a block of k channels starting at x (row stride `row`). */      \
static void sum_##SFX(const T *x, int64_t n, int64_t row, int64_t len, int64_t k,         \
                      double *acc) {                                                      \
    if (len <= SHORT) {                                                                   \
        int64_t width = k * len;                                                          \
        for (int64_t q = 0; q < width; q++) acc[q] = 0.0;                                 \
        for (int64_t i = 0; i < n; i++)                                                   \
            for (int64_t q = 0; q < width; q++) acc[q] += (double)x[i * row + q];         \
        return;                                                                           \
    }                                                                                     \
    for (int64_t q = 0; q < k * LANES; q++) acc[q] = 0.0;                                 \
    for (int64_t i = 0; i < n; i++)                                                       \
        for (int64_t h = 0; h < k; h++) {                                                 \
            const T *p = x + i * row + h * len;                                           \
            double *a = acc + h * LANES;                                                  \
            v8d a0 = get(a), a1 = get(a + 8);                                             \
            int64_t j = 0;                                                                \
            for (; j + LANES <= len; j += LANES) {                                        \
                a0 += load_##SFX(p + j);                                                  \
                a1 += load_##SFX(p + j + 8);                                              \
            }                                                                             \
            put(a, a0);                                                                   \
            put(a + 8, a1);                                                               \
            for (int l = 0; l < len - j; l++) a[l] += (double)p[j + l];                   \
        }                                                                                 \
}                                                                                         \
/* Running sums of (x - mean)^2, mean per channel (mq: per running sum, short rows). */   \
static void sumsq_##SFX(const T *x, const double *mean, const double *mq, int64_t n,      \
                        int64_t row, int64_t len, int64_t k, double *acc) {               \
    if (len <= SHORT) {                                                                   \
        int64_t width = k * len;                                                          \
        for (int64_t q = 0; q < width; q++) acc[q] = 0.0;                                 \
        for (int64_t i = 0; i < n; i++)                                                   \
            for (int64_t q = 0; q < width; q++) {                                         \
                double d = (double)x[i * row + q] - mq[q];                                \
                acc[q] += d * d;                                                          \
            }                                                                             \
        return;                                                                           \
    }                                                                                     \
    for (int64_t q = 0; q < k * LANES; q++) acc[q] = 0.0;                                 \
    for (int64_t i = 0; i < n; i++)                                                       \
        for (int64_t h = 0; h < k; h++) {                                                 \
            const T *p = x + i * row + h * len;                                           \
            double *a = acc + h * LANES, mu = mean[h];                                    \
            v8d a0 = get(a), a1 = get(a + 8);                                             \
            int64_t j = 0;                                                                \
            for (; j + LANES <= len; j += LANES) {                                        \
                v8d d0 = load_##SFX(p + j) - mu, d1 = load_##SFX(p + j + 8) - mu;         \
                a0 += d0 * d0;                                                            \
                a1 += d1 * d1;                                                            \
            }                                                                             \
            put(a, a0);                                                                   \
            put(a + 8, a1);                                                               \
            for (int l = 0; l < len - j; l++) {                                           \
                double d = (double)p[j + l] - mu;                                         \
                a[l] += d * d;                                                            \
            }                                                                             \
        }                                                                                 \
}                                                                                         \
/* Running sums of g (acc) and of g * (x - mean) (accx). */                               \
static void dot_##SFX(const T *g, const T *x, const double *mean, const double *mq,       \
                      int64_t n, int64_t row, int64_t len, int64_t k, double *acc,        \
                      double *accx) {                                                     \
    if (len <= SHORT) {                                                                   \
        int64_t width = k * len;                                                          \
        for (int64_t q = 0; q < width; q++) acc[q] = accx[q] = 0.0;                       \
        for (int64_t i = 0; i < n; i++)                                                   \
            for (int64_t q = 0; q < width; q++) {                                         \
                double v = (double)g[i * row + q];                                        \
                acc[q] += v;                                                              \
                accx[q] += v * ((double)x[i * row + q] - mq[q]);                          \
            }                                                                             \
        return;                                                                           \
    }                                                                                     \
    for (int64_t q = 0; q < k * LANES; q++) acc[q] = accx[q] = 0.0;                       \
    for (int64_t i = 0; i < n; i++)                                                       \
        for (int64_t h = 0; h < k; h++) {                                                 \
            const T *p = g + i * row + h * len, *r = x + i * row + h * len;               \
            double *a = acc + h * LANES, *b = accx + h * LANES, mu = mean[h];             \
            v8d a0 = get(a), a1 = get(a + 8), b0 = get(b), b1 = get(b + 8);               \
            int64_t j = 0;                                                                \
            for (; j + LANES <= len; j += LANES) {                                        \
                v8d v0 = load_##SFX(p + j), v1 = load_##SFX(p + j + 8);                   \
                a0 += v0;                                                                 \
                a1 += v1;                                                                 \
                b0 += v0 * (load_##SFX(r + j) - mu);                                      \
                b1 += v1 * (load_##SFX(r + j + 8) - mu);                                  \
            }                                                                             \
            put(a, a0);                                                                   \
            put(a + 8, a1);                                                               \
            put(b, b0);                                                                   \
            put(b + 8, b1);                                                               \
            for (int l = 0; l < len - j; l++) {                                           \
                double v = (double)p[j + l];                                              \
                a[l] += v;                                                                \
                b[l] += v * ((double)r[j + l] - mu);                                      \
            }                                                                             \
        }                                                                                 \
}                                                                                         \
/* out = (x - mu) * sc + sh over a block: factors per channel (long rows) or per value    \
   of a row (short rows). */                                                              \
static void affine_##SFX(const T *x, T *out, const T *mu, const T *sc, const T *sh,       \
                         int64_t n, int64_t row, int64_t len, int64_t k) {                \
    for (int64_t i = 0; i < n; i++) {                                                     \
        const T *p = x + i * row;                                                         \
        T *o = out + i * row;                                                             \
        if (len <= SHORT)                                                                 \
            for (int64_t q = 0; q < k * len; q++) o[q] = (p[q] - mu[q]) * sc[q] + sh[q];  \
        else                                                                              \
            for (int64_t h = 0; h < k; h++) {                                             \
                T m = mu[h], s = sc[h], b = sh[h];                                        \
                for (int64_t j = 0; j < len; j++)                                         \
                    o[h * len + j] = (p[h * len + j] - m) * s + b;                        \
            }                                                                             \
    }                                                                                     \
}                                                                                         \
/* The factors of channel h of a block as `affine` reads them. */                         \
static void put_##SFX(T *mu, T *sc, T *sh, int64_t len, int64_t h, T m, T s, T b) {       \
    if (len > SHORT) {                                                                    \
        mu[h] = m, sc[h] = s, sh[h] = b;                                                  \
        return;                                                                           \
    }                                                                                     \
    for (int64_t j = 0; j < len; j++)                                                     \
        mu[h * len + j] = m, sc[h * len + j] = s, sh[h * len + j] = b;                    \
}                                                                                         \
                                                                                          \
/* Training forward: per channel its mean and 1 / sqrt(biased variance + eps) (computed in \
   double, saved in save_mean and save_invstd), out = (x - mean) * invstd * w + b (w, b:  \
   NULL for none), and the running statistics rm, rv (NULL for none) moved `momentum` of  \
   the way to the mean (in T, from the saved mean: PyTorch's rounding) and the unbiased   \
   variance. eps and momentum come as the bits of doubles (`as_double`). */               \
void bn_forward_##SFX(const T *x, const T *w, const T *b, T *out, T *save_mean,           \
                      T *save_invstd, T *rm, T *rv, int64_t eps_bits,                     \
                      int64_t momentum_bits, int64_t n, int64_t c, int64_t len,           \
                      int64_t start, int64_t stop) {                                      \
    const double eps = as_double(eps_bits), momentum = as_double(momentum_bits);          \
    int64_t row = c * len;                                                                \
    double m = (double)(n * len), unbiased = m / (m > 1 ? m - 1 : 1);                     \
    double acc[SUMS], mq[SUMS], tot[SUMS], mean[SUMS];                                    \
    T mu[SUMS], sc[SUMS], sh[SUMS];                                                       \
    for (int64_t ch0 = start; ch0 < stop;) {                                              \
        int64_t k = block(n, len, sizeof(T), 2, ch0, stop);                               \
        const T *xb = x + ch0 * len;                                                      \
        sum_##SFX(xb, n, row, len, k, acc);                                               \
        totals(acc, k, len, tot);                                                         \
        for (int64_t h = 0; h < k; h++) mean[h] = tot[h] / m;                             \
        if (len <= SHORT) spread(mean, k, len, mq);                                       \
        sumsq_##SFX(xb, mean, mq, n, row, len, k, acc);                                   \
        totals(acc, k, len, tot);                                                         \
        for (int64_t h = 0; h < k; h++) mq[h] = 1.0 / sqrt(tot[h] / m + eps); /* SIMD */  \
        for (int64_t h = 0; h < k; h++) {                                                 \
            int64_t ch = ch0 + h;                                                         \
            double var = tot[h] / m, inv = mq[h];                                         \
            save_mean[ch] = (T)mean[h];                                                   \
            save_invstd[ch] = (T)inv;                                                     \
            if (rm) {                                                                     \
                rm[ch] = (T)momentum * (T)mean[h] + (T)(1 - momentum) * rm[ch];           \
                rv[ch] = (T)((double)rv[ch] * (1 - momentum) + momentum * var * unbiased); \
            }                                                                             \
            put_##SFX(mu, sc, sh, len, h, (T)mean[h], (T)(w ? inv * (double)w[ch] : inv), \
                      b ? b[ch] : (T)0);                                                  \
        }                                                                                 \
        affine_##SFX(xb, out + ch0 * len, mu, sc, sh, n, row, len, k);                    \
        ch0 += k;                                                                         \
    }                                                                                     \
}                                                                                         \
                                                                                          \
/* Evaluation forward: out = (x - rm) / sqrt(rv + eps) * w + b, the factors per channel in \
   double (eps as the bits of a double). */                                               \
void bn_affine_##SFX(const T *x, const T *rm, const T *rv, const T *w, const T *b, T *out, \
                     int64_t eps_bits, int64_t n, int64_t c, int64_t len, int64_t start,  \
                     int64_t stop) {                                                      \
    const double eps = as_double(eps_bits);                                               \
    double inv[SUMS];                                                                     \
    T mu[SUMS], sc[SUMS], sh[SUMS];                                                       \
    for (int64_t ch0 = start; ch0 < stop;) {                                              \
        int64_t k = block(n, len, sizeof(T), 2, ch0, stop);                               \
        for (int64_t h = 0; h < k; h++) inv[h] = 1.0 / sqrt((double)rv[ch0 + h] + eps);   \
        for (int64_t h = 0; h < k; h++) {                                                 \
            int64_t ch = ch0 + h;                                                         \
            put_##SFX(mu, sc, sh, len, h, rm[ch], (T)(w ? inv[h] * (double)w[ch] : inv[h]), \
                      b ? b[ch] : (T)0);                                                  \
        }                                                                                 \
        affine_##SFX(x + ch0 * len, out + ch0 * len, mu, sc, sh, n, c * len, len, k);     \
        ch0 += k;                                                                         \
    }                                                                                     \
}                                                                                         \
                                                                                          \
/* Backward over the statistics the forward used: training, the saved mean and invstd;    \
   evaluation, the running mean (as `mean`) and 1 / sqrt(rv + eps). Per channel, in       \
   double, sum(g) and sum(g * (x - mean)): gb = sum(g) and gw = invstd * sum(g * (x -     \
   mean)) where not NULL; with gi not NULL, the input's gradient: training, (g - sum(g) / \
   m - (x - mean) * invstd^2 * sum(g * (x - mean)) / m) * invstd * w, evaluation,         \
   g * invstd * w (w NULL: 1), as ((g - gm) - (x - mu) * kc) * sc (eps as double bits). */ \
void bn_backward_##SFX(const T *g, const T *x, const T *mean, const T *invstd,            \
                       const T *rv, const T *w, T *gi, T *gw, T *gb, int64_t train,       \
                       int64_t eps_bits, int64_t n, int64_t c, int64_t len,               \
                       int64_t start, int64_t stop) {                                     \
    const double eps = as_double(eps_bits);                                               \
    int64_t row = c * len;                                                                \
    double m = (double)(n * len);                                                         \
    double acc[SUMS], accx[SUMS], mq[SUMS], md[SUMS], sg[SUMS], sgc[SUMS];                \
    T mu[SUMS], sc[SUMS], kc[SUMS], gm[SUMS];                                             \
    for (int64_t ch0 = start; ch0 < stop;) {                                              \
        int64_t k = block(n, len, sizeof(T), 3, ch0, stop);                               \
        const T *gb_ = g + ch0 * len, *xb = x + ch0 * len;                                \
        for (int64_t h = 0; h < k; h++) md[h] = (double)mean[ch0 + h];                    \
        if (len <= SHORT) spread(md, k, len, mq);                                         \
        dot_##SFX(gb_, xb, md, mq, n, row, len, k, acc, accx);                            \
        totals(acc, k, len, sg);                                                          \
        totals(accx, k, len, sgc);                                                        \
        if (train)                                                                        \
            for (int64_t h = 0; h < k; h++) mq[h] = (double)invstd[ch0 + h];              \
        else                                                                              \
            for (int64_t h = 0; h < k; h++) mq[h] = 1.0 / sqrt((double)rv[ch0 + h] + eps); \
        for (int64_t h = 0; h < k; h++) {                                                 \
            int64_t ch = ch0 + h;                                                         \
            double is = mq[h];                                                            \
            if (gb) gb[ch] = (T)sg[h];                                                    \
            if (gw) gw[ch] = (T)(sgc[h] * is);                                            \
            T f_sc = (T)(w ? is * (double)w[ch] : is);                                    \
            T f_kc = train ? (T)(is * is * sgc[h] / m) : (T)0;                            \
            T f_gm = train ? (T)(sg[h] / m) : (T)0;                                       \
            put_##SFX(mu, sc, kc, len, h, mean[ch], f_sc, f_kc);                          \
            put_##SFX(gm, gm, gm, len, h, f_gm, f_gm, f_gm);                              \
        }                                                                                 \
        if (gi)                                                                           \
            for (int64_t i = 0; i < n; i++) {                                             \
                const T *p = gb_ + i * row, *r = xb + i * row;                            \
                T *o = gi + ch0 * len + i * row;                                          \
                if (len <= SHORT && train)                                                \
                    for (int64_t q = 0; q < k * len; q++)                                 \
                        o[q] = ((p[q] - gm[q]) - (r[q] - mu[q]) * kc[q]) * sc[q];         \
                else if (len <= SHORT)                                                    \
                    for (int64_t q = 0; q < k * len; q++) o[q] = p[q] * sc[q];            \
                else                                                                      \
                    for (int64_t h = 0; h < k; h++) {                                     \
                        const T *ph = p + h * len, *rh = r + h * len;                     \
                        T *oh = o + h * len;                                              \
                        T a = gm[h], u = mu[h], s = sc[h], f = kc[h];                     \
                        if (train)                                                        \
                            for (int64_t j = 0; j < len; j++)                             \
                                oh[j] = ((ph[j] - a) - (rh[j] - u) * f) * s;              \
                        else                                                              \
                            for (int64_t j = 0; j < len; j++) oh[j] = ph[j] * s;          \
                    }                                                                     \
            }                                                                             \
        ch0 += k;                                                                         \
    }                                                                                     \
}

BN_FAMILY(float, f32)
BN_FAMILY(double, f64)
