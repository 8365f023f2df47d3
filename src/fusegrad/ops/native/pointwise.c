/* Elementwise kernels over [start, stop) of flat, contiguous arrays, and two small loops of
   the common backward: a sum over leading rows (a bias's gradient) and nll_loss's gather
   and scatter. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* relu: out = +0 where a < 0, else a: zeros keep their sign and NaNs pass unchanged
   (torch's relu; out may be a itself). */
#define RELU(T, NAME)                                                                    \
void NAME(const T *a, T *out, int64_t start, int64_t stop) {                             \
    for (int64_t i = start; i < stop; i++) {                                             \
        T v = a[i];                                                                      \
        out[i] = (v < 0) ? (T)0 : v;                                                     \
    }                                                                                    \
}
RELU(float, relu_f32)
RELU(double, relu_f64)

/* threshold_backward at 0 from relu's output: the gradient where out != 0 (NaN passes),
   +0 elsewhere; a select of bits, so -0, inf and NaN gradients pass unchanged. */
#define RELU_GRAD(T, U, NAME)                                                            \
void NAME(const T *g, const T *out, T *res, int64_t start, int64_t stop) {               \
    const U *gb = (const U *)g;                                                          \
    U *rb = (U *)res;                                                                    \
    for (int64_t i = start; i < stop; i++) {                                             \
        U keep = (U)0 - (U)(out[i] != 0);                                                \
        rb[i] = gb[i] & keep;                                                            \
    }                                                                                    \
}
RELU_GRAD(float, uint32_t, relu_grad_f32)
RELU_GRAD(double, uint64_t, relu_grad_f64)

/* nll_loss without class weights over n rows of c log-probabilities and their class indices
   t (int64). Each kernel first finds the row of the first target that is not a class in
   [0, c) other than `ignore` (nll_first_bad: -1 when there is none), returns it and writes
   nothing if there is one: the caller then takes its general path, which masks an ignored
   row or reports the target out of bounds. nll_rows gathers losses[i] = -x[i, t[i]]. */
static int64_t nll_first_bad(const int64_t *t, int64_t n, int64_t c, int64_t ignore) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = t[i];
        if (k < 0 || k >= c || k == ignore)
            return i;
    }
    return -1;
}
#define NLL_ROWS(T, S)                                                                   \
int64_t nll_rows_##S(const T *x, const int64_t *t, T *losses, int64_t n, int64_t c,      \
                     int64_t ignore) {                                                   \
    const int64_t bad = nll_first_bad(t, n, c, ignore);                                  \
    if (bad >= 0)                                                                        \
        return bad;                                                                      \
    for (int64_t i = 0; i < n; i++) losses[i] = -x[i * c + t[i]];                        \
    return -1;                                                                           \
}
NLL_ROWS(float, f32)
NLL_ROWS(double, f64)

/* nll_loss reduced ("mean": `mean` 1, "sum": 0) without class weights: *loss and *total
   (the total weight, n), answered as nll_rows. The losses -x[i, t[i]] are summed as
   PyTorch's CPU kernel sums them (found by experiment against torch 2.13; `_cascade_sum` in
   nn.py is the same for the general case): in levels of partial sums held in T, level j's
   moving up to level j + 1 after each term i that is a multiple of 16^(j + 1) (so the first
   term goes alone to the top), the levels added lowest first to a zero at the end. */
#define NLL_CASCADE_LEVELS 8
#define NLL_CASCADE(T, S)                                                                \
static T nll_cascade_##S(const T *x, const int64_t *t, int64_t n, int64_t c) {           \
    T level[NLL_CASCADE_LEVELS] = {0};                                                   \
    for (int64_t i = 0; i < n; i++) {                                                    \
        level[0] -= x[i * c + t[i]];                                                     \
        for (int j = 0; j + 1 < NLL_CASCADE_LEVELS &&                                    \
                        (i & ((int64_t)15 << (4 * j))) == 0; j++) {                      \
            level[j + 1] += level[j];                                                    \
            level[j] = 0;                                                                \
        }                                                                                \
    }                                                                                    \
    T sum = 0;                                                                           \
    for (int j = 0; j < NLL_CASCADE_LEVELS; j++) sum += level[j];                        \
    return sum;                                                                          \
}                                                                                        \
int64_t nll_reduced_rows_##S(const T *x, const int64_t *t, T *loss, T *total, int64_t n, \
                             int64_t c, int64_t ignore, int64_t mean) {                  \
    const int64_t bad = nll_first_bad(t, n, c, ignore);                                  \
    if (bad >= 0)                                                                        \
        return bad;                                                                      \
    const T count = (T)n, sum = nll_cascade_##S(x, t, n, c);                             \
    *loss = mean ? sum / count : sum;                                                    \
    *total = count;                                                                      \
    return -1;                                                                           \
}
NLL_CASCADE(float, f32)
NLL_CASCADE(double, f64)

/* Its gradient from the loss's gradient g and the saved total weight (values of T, given
   as doubles, which hold them exactly): rows of zeros with -(g / total) at out[i, t[i]] for
   the mean (a total of 0, every target ignored, divides by 1) and -g for the sum; each step
   in T, as NumPy's scalars of the type compute it (PyTorch divides the gradient itself). */
#define NLL_REDUCED_GRAD(T, S)                                                           \
int64_t nll_reduced_grad_rows_##S(T *out, const int64_t *t, double g, double total,      \
                                  int64_t n, int64_t c, int64_t ignore, int64_t mean) {  \
    const int64_t bad = nll_first_bad(t, n, c, ignore);                                  \
    if (bad >= 0)                                                                        \
        return bad;                                                                      \
    const T unit = 1, tot = (T)total;                                                    \
    const T value = -(mean ? (T)g / (tot != 0 ? tot : unit) : (T)g);                     \
    memset(out, 0, (size_t)(n * c) * sizeof(T));                                         \
    for (int64_t i = 0; i < n; i++) out[i * c + t[i]] = value;                           \
    return -1;                                                                           \
}
NLL_REDUCED_GRAD(float, f32)
NLL_REDUCED_GRAD(double, f64)

/* The sum over the `rows` leading rows of a C-contiguous (rows, cols) array, columns
   [start, stop): each column's values added in row order to a zero, as NumPy's reduction
   over a leading axis adds them (a pairwise sum runs only along a contiguous axis). One
   pass of vector adds over memory in order, where NumPy's reduction machinery, run right
   after a GEMM has flushed the caches, took 15-20 us for a (64, 128) gradient. */
#define SUM_ROWS(T, S)                                                                   \
void sum_rows_##S(const T *a, T *out, int64_t start, int64_t stop, int64_t rows,          \
                  int64_t cols) {                                                        \
    for (int64_t j = start; j < stop; j++) out[j] = 0;                                   \
    for (int64_t i = 0; i < rows; i++) {                                                 \
        const T *ar = a + i * cols;                                                      \
        for (int64_t j = start; j < stop; j++) out[j] += ar[j];                          \
    }                                                                                    \
}
SUM_ROWS(float, f32)
SUM_ROWS(double, f64)

/* out[index[i], j] += rows[i, j] for i in [0, k), j in [start, stop): the rows added in index
   order, one element at a time, as PyTorch's CPU index_add / embedding backward add them (and
   as NumPy's `np.add.at`, which makes one call per element). Pieces split the columns, so
   every element sums in the same order at any thread count. */
#define ADD_ROWS(T, S)                                                                    \
void add_rows_##S(T *out, const int64_t *index, const T *rows, int64_t start, int64_t stop,\
                  int64_t k, int64_t cols) {                                              \
    for (int64_t i = 0; i < k; i++) {                                                     \
        T *o = out + index[i] * cols;                                                     \
        const T *r = rows + i * cols;                                                     \
        for (int64_t j = start; j < stop; j++) o[j] += r[j];                              \
    }                                                                                     \
}
ADD_ROWS(float, f32)
ADD_ROWS(double, f64)

/* The same with row i scaled by scale[i], each element one fused multiply-add rounded once:
   PyTorch's embedding backward with `scale_grad_by_freq` adds `grad[i]` with alpha
   1/count, which its CPU kernels fuse. */
#define ADD_ROWS_SCALED(T, FMA, S)                                                        \
void add_rows_scaled_##S(T *out, const int64_t *index, const T *rows, const T *scale,     \
                         int64_t start, int64_t stop, int64_t k, int64_t cols) {          \
    for (int64_t i = 0; i < k; i++) {                                                     \
        T *o = out + index[i] * cols;                                                     \
        const T *r = rows + i * cols;                                                     \
        const T a = scale[i];                                                             \
        for (int64_t j = start; j < stop; j++) o[j] = FMA(a, r[j], o[j]);                 \
    }                                                                                     \
}
ADD_ROWS_SCALED(float, fmaf, f32)
ADD_ROWS_SCALED(double, fma, f64)

/* linspace's values as PyTorch's CPU kernel computes them: start + step * i for the first
   half, end - step * (steps - 1 - i) for the rest, each multiply-add rounded once (its
   x86-64 builds fuse them; `fma` does here, in hardware or exactly in the C library). The
   bounds and step arrive as doubles holding values of T. The second half negates the index,
   not the step: the products are the same, and a NaN step keeps its sign, as in PyTorch's
   fused negative multiply-add (negating the step made every such NaN negative). */
#define LINSPACE(T, FMA, S)                                                               \
void linspace_##S(T *out, int64_t steps, double start, double end, double step) {        \
    const T a = (T)start, b = (T)end, h = (T)step;                                        \
    const int64_t half = steps / 2;                                                       \
    for (int64_t i = 0; i < half; i++) out[i] = FMA(h, (T)i, a);                           \
    for (int64_t i = half; i < steps; i++) out[i] = FMA(h, -(T)(steps - 1 - i), b);       \
}
LINSPACE(float, fmaf, f32)
LINSPACE(double, fma, f64)

/* out[i] = exp(re[i] + i im[i]) by the C library's cexp, in T's precision (logspace's
   complex powers, as PyTorch's kernel takes them: cexp of the exponent times log(base)). */
#define CEXP_PAIRS(T, CT, MAKE, CEXP, S)                                                   \
void cexp_pairs_##S(const T *re, const T *im, T *out, int64_t n) {                         \
    for (int64_t i = 0; i < n; i++) {                                                     \
        CT z = CEXP(MAKE(re[i], im[i])); /* (made exactly: inf and NaN parts as given) */  \
        out[2 * i] = creal(z);                                                            \
        out[2 * i + 1] = cimag(z);                                                        \
    }                                                                                     \
}
CEXP_PAIRS(float, float complex, CMPLXF, cexpf, f32)
CEXP_PAIRS(double, double complex, CMPLX, cexp, f64)

/* base ** e[i] by the C library's pow: logspace's powers, as PyTorch's kernel takes them. */
void pow_of_base_f64(const double *e, double *out, int64_t n, double base) {
    for (int64_t i = 0; i < n; i++) out[i] = pow(base, e[i]);
}

/* out = a + alpha[0] * b over [start, stop), each element one fused multiply-add rounded
   once (add and sub with a float32 alpha, as PyTorch's vectorized kernel computes them; out
   may be a: `p.add_(grad, alpha=-lr)`). alpha is read through an address so that the C
   workers can run pieces of it. */
void axpy_f32(const float *a, const float *b, float *out, const float *alpha, int64_t start,
              int64_t stop) {
    const float s = alpha[0];
    for (int64_t i = start; i < stop; i++)
        out[i] = fmaf(s, b[i], a[i]);
}

/* clamp of a between bounds[0] (where which & 1) and bounds[1] (where which & 2) into out
   over [start, stop), as PyTorch's: NaN passes, an element equal to a bound is kept (its
   zero's sign), and bounds that cross give the upper one. out may be a (clamp_). */
#define CLAMP(T, S)                                                                       \
void clamp_##S(const T *a, T *out, const T *bounds, int64_t start, int64_t stop,          \
               int64_t which) {                                                           \
    const T lo = bounds[0], hi = bounds[1];                                               \
    const int use_lo = (int)(which & 1), use_hi = (int)(which & 2);                        \
    for (int64_t i = start; i < stop; i++) {                                              \
        T v = a[i];                                                                       \
        if (use_lo && v < lo)                                                             \
            v = lo;                                                                       \
        if (use_hi && v > hi)                                                             \
            v = hi;                                                                       \
        out[i] = v;                                                                       \
    }                                                                                     \
}
CLAMP(float, f32)
CLAMP(double, f64)

/* out = a OP b where b holds one value per run of `inner` consecutive values, run u taking
   b[u % mid]: a bias per channel broadcast over (N, C, H, W) (`x.add_(b)`, b of shape
   (C, 1, 1)), over runs [start, stop). One IEEE operation per value, a's value first, as
   NumPy's loop computes it; out may be a. */
#define RUNS(T, S, NAME, OP)                                                              \
void NAME##_runs_##S(const T *a, const T *b, T *out, int64_t start, int64_t stop,         \
                     int64_t mid, int64_t inner) {                                        \
    int64_t j = start % mid;                                                              \
    for (int64_t u = start; u < stop; u++) {                                              \
        const T v = b[j];                                                                 \
        const T *x = a + u * inner;                                                       \
        T *y = out + u * inner;                                                           \
        for (int64_t k = 0; k < inner; k++)                                               \
            y[k] = x[k] OP v;                                                             \
        if (++j == mid)                                                                   \
            j = 0;                                                                        \
    }                                                                                     \
}
RUNS(float, f32, add, +)
RUNS(double, f64, add, +)
RUNS(float, f32, sub, -)
RUNS(double, f64, sub, -)
RUNS(float, f32, mul, *)
RUNS(double, f64, mul, *)
RUNS(float, f32, div, /)
RUNS(double, f64, div, /)
