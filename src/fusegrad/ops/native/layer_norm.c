/* Layer norm over rows: an input seen as (rows, n), each row normalised by its own mean and
   variance, then scaled and shifted per column (weight and bias of n values, either absent
   as a null pointer).

   A row's sums run in double (float32 inputs too) over LANES running sums (value j goes to
   sum j % LANES) added in order at the end: the order depends on n alone, so which rows a
   call covers never changes a row's result, and the loops vectorise without reordering any
   sum. Mean and variance are two passes (the variance of the centred values, as NumPy's
   and the recorded formula's). The normalised value is then computed in the input's type,
   as the NumPy kernel does: (x - mean) * rstd, times the weight, plus the bias. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LANES 16

static inline double fg_bits_double(int64_t bits) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

#define ROW_SUMS(T)                                                                      \
static inline void row_moments_##T(const T *x, int64_t n, double eps, double *mean,     \
                                   double *rstd) {                                       \
    double s[LANES] = {0};                                                               \
    int64_t j = 0;                                                                       \
    for (; j + LANES <= n; j += LANES)                                                   \
        for (int k = 0; k < LANES; k++) s[k] += (double)x[j + k];                        \
    for (int k = 0; j < n; j++, k++) s[k] += (double)x[j];                               \
    double total = 0;                                                                    \
    for (int k = 0; k < LANES; k++) total += s[k];                                       \
    double m = total / (double)n;                                                        \
    double q[LANES] = {0};                                                               \
    for (j = 0; j + LANES <= n; j += LANES)                                              \
        for (int k = 0; k < LANES; k++) {                                                \
            double c = (double)x[j + k] - m;                                             \
            q[k] += c * c;                                                               \
        }                                                                                \
    for (int k = 0; j < n; j++, k++) {                                                   \
        double c = (double)x[j] - m;                                                     \
        q[k] += c * c;                                                                   \
    }                                                                                    \
    double var = 0;                                                                      \
    for (int k = 0; k < LANES; k++) var += q[k];                                         \
    *mean = m;                                                                           \
    *rstd = 1.0 / sqrt(var / (double)n + eps);                                           \
}
ROW_SUMS(float)
ROW_SUMS(double)

/* out = (x - mean) * rstd [* w] [+ b] per row of [start, stop); each row's mean and rstd
   stored in the input's type. */
#define FORWARD(T, NAME)                                                                 \
void NAME(const T *x, const T *w, const T *b, T *out, T *mean_out, T *rstd_out,          \
          int64_t start, int64_t stop, int64_t n, int64_t eps_bits) {                    \
    double eps = fg_bits_double(eps_bits);                                               \
    for (int64_t r = start; r < stop; r++) {                                             \
        const T *xr = x + r * n;                                                         \
        T *o = out + r * n;                                                              \
        double m, rs;                                                                    \
        row_moments_##T(xr, n, eps, &m, &rs);                                            \
        T mt = (T)m, rt = (T)rs;                                                         \
        mean_out[r] = mt;                                                                \
        rstd_out[r] = rt;                                                                \
        for (int64_t j = 0; j < n; j++) o[j] = (xr[j] - mt) * rt;                        \
        if (w)                                                                           \
            for (int64_t j = 0; j < n; j++) o[j] = o[j] * w[j];                          \
        if (b)                                                                           \
            for (int64_t j = 0; j < n; j++) o[j] = o[j] + b[j];                          \
    }                                                                                    \
}
FORWARD(float, ln_forward_f32)
FORWARD(double, ln_forward_f64)

/* The input's gradient per row: with gx = g * w (or g) and xhat = (x - mean) * rstd,
   rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), in double; each row's mean and rstd
   kept (as doubles) for the parameters' gradients. GX is gx's expression at index i. */
#define ROW_GRAD(T, GX)                                                                  \
    {                                                                                    \
        double s1[LANES] = {0}, s2[LANES] = {0};                                         \
        int64_t j = 0;                                                                   \
        for (; j + LANES <= n; j += LANES)                                               \
            for (int k = 0; k < LANES; k++) {                                            \
                int64_t i = j + k;                                                       \
                double gx = GX, xh = ((double)xr[i] - m) * rs;                           \
                s1[k] += gx;                                                             \
                s2[k] += gx * xh;                                                        \
            }                                                                            \
        for (int k = 0; j < n; j++, k++) {                                               \
            int64_t i = j;                                                               \
            double gx = GX, xh = ((double)xr[i] - m) * rs;                               \
            s1[k] += gx;                                                                 \
            s2[k] += gx * xh;                                                            \
        }                                                                                \
        double a = 0, c = 0;                                                             \
        for (int k = 0; k < LANES; k++) {                                                \
            a += s1[k];                                                                  \
            c += s2[k];                                                                  \
        }                                                                                \
        a /= (double)n;                                                                  \
        c /= (double)n;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                \
            double gx = GX, xh = ((double)xr[i] - m) * rs;                               \
            o[i] = (T)(rs * (gx - a - xh * c));                                          \
        }                                                                                \
    }
#define BACKWARD(T, NAME)                                                                \
void NAME(const T *g, const T *x, const T *w, T *gi, double *mean_out, double *rstd_out, \
          int64_t start, int64_t stop, int64_t n, int64_t eps_bits) {                    \
    double eps = fg_bits_double(eps_bits);                                               \
    for (int64_t r = start; r < stop; r++) {                                             \
        const T *xr = x + r * n, *gr = g + r * n;                                        \
        T *o = gi + r * n;                                                               \
        double m, rs;                                                                    \
        row_moments_##T(xr, n, eps, &m, &rs);                                            \
        mean_out[r] = m;                                                                 \
        rstd_out[r] = rs;                                                                \
        if (w)                                                                           \
            ROW_GRAD(T, (double)gr[i] * (double)w[i])                                    \
        else                                                                             \
            ROW_GRAD(T, (double)gr[i])                                                   \
    }                                                                                    \
}
BACKWARD(float, ln_backward_f32)
BACKWARD(double, ln_backward_f64)

/* The weight's and the bias's gradients for columns [start, stop): sums over the rows, in
   row order, of g * xhat and of g, in double (gw or gb null: not wanted). */
#define PARAMS(T, NAME)                                                                  \
void NAME(const T *g, const T *x, const double *mean, const double *rstd, double *gw,    \
          double *gb, int64_t start, int64_t stop, int64_t rows, int64_t n) {            \
    for (int64_t j = start; j < stop; j++) {                                             \
        if (gw) gw[j] = 0;                                                               \
        if (gb) gb[j] = 0;                                                               \
    }                                                                                    \
    for (int64_t r = 0; r < rows; r++) {                                                 \
        const T *xr = x + r * n, *gr = g + r * n;                                        \
        double m = mean[r], rs = rstd[r];                                                \
        if (gw)                                                                          \
            for (int64_t j = start; j < stop; j++)                                       \
                gw[j] += (double)gr[j] * (((double)xr[j] - m) * rs);                     \
        if (gb)                                                                          \
            for (int64_t j = start; j < stop; j++) gb[j] += (double)gr[j];               \
    }                                                                                    \
}
PARAMS(float, ln_params_f32)
PARAMS(double, ln_params_f64)
