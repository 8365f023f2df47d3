/* erf, erfc, sigmoid, and the activations made of them (silu, both gelus, leaky_relu
   beside them) with their gradients, and the exp-based ones (elu, celu, softplus, mish) at
   the end, elementwise over [start, stop) of flat, contiguous arrays; a scalar parameter
   comes last, as the bits of a double. The build puts
   `_mathlib.py`'s functions before this file: float32 uses its fg_erff, fg_erfcf, fg_expf,
   fg_tanhf and fg_sigmoidf (computed in double or with carried errors, rounded once, and
   vectorised by gcc), the very functions generated kernels call, so eager and compiled
   results are the same bits; float64 uses the C library's erf, erfc, exp and tanh.

   Each formula keeps the order of operations of the one it replaces (the NumPy kernel or the
   recorded derivative in activation.py / unary.py, which the code generator's lowering
   follows too); with contraction off each operation is rounded as NumPy rounds it. */

/* As activation.py computes them in Python: sqrt(0.5) and 1 / sqrt(2 pi), each operation
   rounded to double (gcc folds them with the same roundings). */
#define SQRT_HALF sqrt(0.5)
#define INV_SQRT_2PI (1.0 / sqrt(2.0 * 3.14159265358979323846))

#define UNARY(T, NAME, EXPR)                                                             \
void NAME(const T *a, T *out, int64_t start, int64_t stop) {                             \
    for (int64_t i = start; i < stop; i++) {                                             \
        T x = a[i];                                                                      \
        out[i] = EXPR;                                                                   \
    }                                                                                    \
}
UNARY(float, erf_f32, fg_erff(x))
UNARY(double, erf_f64, erf(x))
UNARY(float, erfc_f32, fg_erfcf(x))
UNARY(double, erfc_f64, erfc(x))
UNARY(float, gelu_f32, (x * 0.5f) * (1.0f + fg_erff(x * (float)SQRT_HALF)))
UNARY(double, gelu_f64, (x * 0.5) * (1.0 + erf(x * SQRT_HALF)))

#define GELU_GRAD(T, NAME, ERF, EXP)                                                     \
void NAME(const T *g, const T *a, T *out, int64_t start, int64_t stop) {                 \
    for (int64_t i = start; i < stop; i++) {                                             \
        T x = a[i];                                                                      \
        T cdf = (T)0.5 * ((T)1 + ERF(x * (T)SQRT_HALF));                                 \
        T pdf = EXP((x * (T)-0.5) * x) * (T)INV_SQRT_2PI;                                \
        out[i] = g[i] * (cdf + x * pdf);                                                 \
    }                                                                                    \
}
GELU_GRAD(float, gelu_grad_f32, fg_erff, fg_expf)
GELU_GRAD(double, gelu_grad_f64, erf, exp)

/* sigmoid: float32 the generated code's; float64 NumPy's two branches (exp never overflows). */
static inline double fg_sigmoid_d(double x) {
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
UNARY(float, sigmoid_f32, fg_sigmoidf(x))
UNARY(double, sigmoid_f64, fg_sigmoid_d(x))
UNARY(float, silu_f32, x * fg_sigmoidf(x))
UNARY(double, silu_f64, x * fg_sigmoid_d(x))

/* gelu's tanh form: (x * 0.5) * (tanh((x + (x * x * x) * 0.044715) * sqrt(2 / pi)) + 1). */
#define SQRT_2_OVER_PI sqrt(2.0 / 3.14159265358979323846)
#define GELU_TANH(T, TANH) \
    (x * (T)0.5) * (TANH((x + ((x * x) * x) * (T)0.044715) * (T)SQRT_2_OVER_PI) + (T)1)
UNARY(float, gelu_tanh_f32, GELU_TANH(float, fg_tanhf))
UNARY(double, gelu_tanh_f64, GELU_TANH(double, tanh))

/* Gradients from the incoming gradient g and one saved array (the input x, or the result y
   where the derivative reads it). */
#define GRAD(T, NAME, V, EXPR)                                                           \
void NAME(const T *g, const T *saved, T *out, int64_t start, int64_t stop) {             \
    for (int64_t i = start; i < stop; i++) {                                             \
        T V = saved[i];                                                                  \
        out[i] = EXPR;                                                                   \
    }                                                                                    \
}
GRAD(float, sigmoid_grad_f32, y, g[i] * (y * (1.0f - y)))
GRAD(double, sigmoid_grad_f64, y, g[i] * (y * (1.0 - y)))

static inline float fg_silu_grad_f(float g, float x) {
    float s = fg_sigmoidf(x);
    return (g * s) * (1.0f + x * (1.0f - s));
}
static inline double fg_silu_grad_d(double g, double x) {
    double s = fg_sigmoid_d(x);
    return (g * s) * (1.0 + x * (1.0 - s));
}
GRAD(float, silu_grad_f32, x, fg_silu_grad_f(g[i], x))
GRAD(double, silu_grad_f64, x, fg_silu_grad_d(g[i], x))

/* PyTorch's contiguous (vectorised) gelu_backward with approximate='tanh', order found by
   experiment against torch 2.13 (float32 and the half types, which it computes in float32
   and rounds once: every element equal; float64 6% an ulp off, from its tanh): with
   x2 = x * x, t = tanh(sqrt(2/pi) * fma(0.044715, x2 * x, x)), the slope of the inner
   sqrt(2/pi) * fma(3 * 0.044715, x2, 1), and
   g * ((1 + t) * 0.5 + ((x * 0.5) * fma(-t, t, 1)) * slope). Its tanh is 1 (with x's sign)
   past SAT where the correctly rounded one is still an ulp below 1 (|x| > 8.66 in float32:
   forgetting it left 0.3% of bfloat16 gradients an ulp off). The fused multiply-adds are
   written out (contraction is off), so NumPy's twin (`activation.py`) can follow them. */
#define GELU_TANH_GRAD(T, NAME, TANH, FMA, SAT)                                           \
static inline T NAME(T g, T x) {                                                         \
    T x2 = x * x;                                                                        \
    T inner = (T)SQRT_2_OVER_PI * FMA((T)0.044715, x2 * x, x);                           \
    T t = inner > (T)(SAT) ? (T)1 : (inner < -(T)(SAT) ? (T)-1 : TANH(inner));           \
    T slope = (T)SQRT_2_OVER_PI * FMA((T)3 * (T)0.044715, x2, (T)1);                     \
    return g * (((T)1 + t) * (T)0.5 + ((x * (T)0.5) * FMA(-t, t, (T)1)) * slope);        \
}
GELU_TANH_GRAD(float, fg_gelu_tanh_grad_f, fg_tanhf, fmaf, 8.664339742f)
GELU_TANH_GRAD(double, fg_gelu_tanh_grad_d, tanh, fma, 18.714973875)
GRAD(float, gelu_tanh_grad_f32, x, fg_gelu_tanh_grad_f(g[i], x))
GRAD(double, gelu_tanh_grad_f64, x, fg_gelu_tanh_grad_d(g[i], x))

/* leaky_relu: x where x > 0, else x * slope (NaN gives NaN); its gradient g where x > 0, else
   g * slope. */
#define LEAKY(T, NAME, NAME_GRAD)                                                        \
void NAME(const T *a, T *out, int64_t start, int64_t stop, int64_t slope_bits) {         \
    T slope = (T)fg_as_double((uint64_t)slope_bits);                                     \
    for (int64_t i = start; i < stop; i++) {                                             \
        T x = a[i];                                                                      \
        out[i] = x > 0 ? x : x * slope;                                                  \
    }                                                                                    \
}                                                                                        \
void NAME_GRAD(const T *g, const T *a, T *out, int64_t start, int64_t stop,              \
               int64_t slope_bits) {                                                     \
    T slope = (T)fg_as_double((uint64_t)slope_bits);                                     \
    for (int64_t i = start; i < stop; i++)                                               \
        out[i] = a[i] > 0 ? g[i] : g[i] * slope;                                         \
}
LEAKY(float, leaky_relu_f32, leaky_relu_grad_f32)
LEAKY(double, leaky_relu_f64, leaky_relu_grad_f64)

/* The gradients of softmax and log_softmax over rows of n values (the last dimension), from
   the result y: y * (g - sum(g * y)) and g - exp(y) * sum(g), each sum in double over LANES
   running sums added in order, then rounded to the type (as NumPy's float sum is) before
   it is used. */
#define LANES 16
#define ROW_SUM(T, EXPR)                                                                 \
    ({                                                                                   \
        double total = 0;                                                                \
        if (n < LANES) { /* one value per running sum: their sum in order, the same */   \
            for (int64_t i = 0; i < n; i++) total += (double)(EXPR);                     \
        } else {                                                                         \
            double acc[LANES] = {0};                                                     \
            int64_t j = 0;                                                               \
            for (; j + LANES <= n; j += LANES)                                           \
                for (int k = 0; k < LANES; k++) {                                        \
                    int64_t i = j + k;                                                   \
                    acc[k] += (double)(EXPR);                                            \
                }                                                                        \
            for (int k = 0; j < n; j++, k++) {                                           \
                int64_t i = j;                                                           \
                acc[k] += (double)(EXPR);                                                \
            }                                                                            \
            for (int k = 0; k < LANES; k++) total += acc[k];                             \
        }                                                                                \
        (T)total;                                                                        \
    })

/* Rows are taken in blocks of about BLOCK_VALUES values: a step that calls exp runs over the
   whole block's values in one loop, which gcc vectorises, where a row shorter than a vector
   (ten classes) ran mostly in scalar code. The values and the order of each row's operations
   are the same either way. */
#define BLOCK_VALUES 2048
#define BLOCK_END(r0, stop, n) \
    ((stop) - (r0) > BLOCK_VALUES / (n) + 1 ? (r0) + BLOCK_VALUES / (n) + 1 : (stop))

#define SOFTMAX_GRADS(T, S, EXP)                                                         \
void softmax_grad_##S(const T *g, const T *y, T *out, int64_t start, int64_t stop,       \
                      int64_t n) {                                                       \
    for (int64_t r = start; r < stop; r++) {                                             \
        const T *gr = g + r * n, *yr = y + r * n;                                        \
        T *o = out + r * n;                                                              \
        T s = ROW_SUM(T, gr[i] * yr[i]);                                                 \
        for (int64_t i = 0; i < n; i++) o[i] = yr[i] * (gr[i] - s);                      \
    }                                                                                    \
}                                                                                        \
void log_softmax_grad_##S(const T *g, const T *y, T *out, int64_t start, int64_t stop,   \
                          int64_t n) {                                                   \
    for (int64_t r0 = start; r0 < stop; r0 += BLOCK_VALUES / n + 1) {                    \
        int64_t r1 = BLOCK_END(r0, stop, n);                                             \
        for (int64_t j = r0 * n; j < r1 * n; j++) out[j] = EXP(y[j]);                    \
        for (int64_t r = r0; r < r1; r++) {                                              \
            const T *gr = g + r * n;                                                     \
            T *o = out + r * n;                                                          \
            T s = ROW_SUM(T, gr[i]);                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = gr[i] - o[i] * s;                     \
        }                                                                                \
    }                                                                                    \
}
SOFTMAX_GRADS(float, f32, fg_expf)
SOFTMAX_GRADS(double, f64, exp)

/* softmax and log_softmax themselves over rows of n values: the row's maximum m (NaN if the
   row holds one, as NumPy's maximum gives), e = exp(x - m) written to the output, their sum
   s as ROW_SUM takes it, then e / s or (x - m) - log(s). Each step is one loop over a row
   that stays in the cache, where NumPy's reductions over short rows cost microseconds each;
   float32 takes the generated code's exp and log (fg_expf, fg_logf). */
#define ROW_MAX(T, xr)                                                                   \
    ({                                                                                   \
        T m = xr[0];                                                                     \
        int nan = 0;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                \
            m = xr[i] > m ? xr[i] : m;                                                   \
            nan |= xr[i] != xr[i];                                                       \
        }                                                                                \
        nan ? (T)NAN : m;                                                                \
    })
#define SOFTMAX_ROWS(T, S, EXP, LOG)                                                     \
/* Rows r0..r1 of the output hold e = exp(x - m) after this, and `max` each row's m. */     \
static inline void exp_rows_##S(const T *x, T *out, int64_t r0, int64_t r1, int64_t n,   \
                                T *max) {                                                \
    for (int64_t r = r0; r < r1; r++) {                                                  \
        const T *xr = x + r * n;                                                         \
        T *o = out + r * n;                                                              \
        T m = max[r - r0] = ROW_MAX(T, xr);                                              \
        for (int64_t i = 0; i < n; i++) o[i] = xr[i] - m;                                \
    }                                                                                    \
    for (int64_t j = r0 * n; j < r1 * n; j++) out[j] = EXP(out[j]);                      \
}                                                                                        \
void softmax_##S(const T *x, T *out, int64_t start, int64_t stop, int64_t n) {           \
    T max[BLOCK_VALUES + 1];                                                             \
    for (int64_t r0 = start; r0 < stop; r0 += BLOCK_VALUES / n + 1) {                    \
        int64_t r1 = BLOCK_END(r0, stop, n);                                             \
        exp_rows_##S(x, out, r0, r1, n, max);                                            \
        for (int64_t r = r0; r < r1; r++) {                                              \
            T *o = out + r * n;                                                          \
            T s = ROW_SUM(T, o[i]);                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = o[i] / s;                             \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
void log_softmax_##S(const T *x, T *out, int64_t start, int64_t stop, int64_t n) {       \
    T max[BLOCK_VALUES + 1];                                                             \
    for (int64_t r0 = start; r0 < stop; r0 += BLOCK_VALUES / n + 1) {                    \
        int64_t r1 = BLOCK_END(r0, stop, n);                                             \
        exp_rows_##S(x, out, r0, r1, n, max);                                            \
        for (int64_t r = r0; r < r1; r++) {                                              \
            const T *xr = x + r * n;                                                     \
            T *o = out + r * n, m = max[r - r0];                                         \
            T l = LOG(ROW_SUM(T, o[i]));                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = (xr[i] - m) - l;                      \
        }                                                                                \
    }                                                                                    \
}
SOFTMAX_ROWS(float, f32, fg_expf, fg_logf)
SOFTMAX_ROWS(double, f64, exp, log)

/* The hard functions, as PyTorch's CPU kernels compute them: hardswish (x * clip(x + 3, 0,
   6)) / 6 and its gradient (0 where x <= -3, g * (x / 3 + 0.5) where x < 3, else g: a NaN
   input passes g); hardsigmoid clip(x + 3, 0, 6) / 6 and its gradient (g * (-3 < x < 3)) *
   float32(1/6); hardtanh's gradient g * (lo < x < hi) (a float mask: g * 0 keeps g's sign,
   as NumPy's product). A NaN input clips to NaN. */
static inline float fg_clip_f(float v, float lo, float hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}
static inline double fg_clip_d(double v, double lo, double hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}
UNARY(float, hardswish_f32, (x * fg_clip_f(x + 3.0f, 0.0f, 6.0f)) / 6.0f)
UNARY(double, hardswish_f64, (x * fg_clip_d(x + 3.0, 0.0, 6.0)) / 6.0)
UNARY(float, hardsigmoid_f32, fg_clip_f(x + 3.0f, 0.0f, 6.0f) / 6.0f)
UNARY(double, hardsigmoid_f64, fg_clip_d(x + 3.0, 0.0, 6.0) / 6.0)
GRAD(float, hardswish_grad_f32, x,
     x <= -3.0f ? 0.0f : (x < 3.0f ? g[i] * (x / 3.0f + 0.5f) : g[i]))
GRAD(double, hardswish_grad_f64, x,
     x <= -3.0 ? 0.0 : (x < 3.0 ? g[i] * (x / 3.0 + 0.5) : g[i]))
GRAD(float, hardsigmoid_grad_f32, x,
     (g[i] * (float)(x > -3.0f && x < 3.0f)) * (float)(1.0 / 6.0))
GRAD(double, hardsigmoid_grad_f64, x,
     (g[i] * (double)(x > -3.0 && x < 3.0)) * (double)(float)(1.0 / 6.0))

#define HARDTANH_GRAD(T, NAME)                                                           \
void NAME(const T *g, const T *a, T *out, int64_t start, int64_t stop, int64_t lo_bits,   \
          int64_t hi_bits) {                                                             \
    T lo = (T)fg_as_double((uint64_t)lo_bits), hi = (T)fg_as_double((uint64_t)hi_bits);  \
    for (int64_t i = start; i < stop; i++)                                               \
        out[i] = g[i] * (T)(a[i] > lo && a[i] < hi);                                     \
}
HARDTANH_GRAD(float, hardtanh_grad_f32)
HARDTANH_GRAD(double, hardtanh_grad_f64)

/* The exp-based activations, float32 only: elu (selu's form), celu, softplus and mish, with
   their gradients from the input. Each is computed in double from the generated code's
   fg_exp_d and the two helpers below and rounded once, where NumPy's path (several float
   passes) rounds at each step. (Float64 stays NumPy's: its vectorised exp and log1p cost less
   than the C library's scalar ones.) The scalar parameters are converted to float as NumPy
   converts a Python float beside a float32 array, once, after any product of parameters
   in double, as activation.py writes them. */

/* e^x - 1: its Taylor series to x^8 below 1/16 (where e^x - 1 would cancel), else
   fg_exp_d's e^x less one. NaN stays NaN, -0.0 stays -0.0, -inf gives -1. */
static inline double fg_expm1_d(double x) {
    double p = 1.0 / 40320.0;
    p = fma(p, x, 1.0 / 5040.0);
    p = fma(p, x, 1.0 / 720.0);
    p = fma(p, x, 1.0 / 120.0);
    p = fma(p, x, 1.0 / 24.0);
    p = fma(p, x, 1.0 / 6.0);
    p = fma(p, x, 0.5);
    double small = fma(x * x, p, x);
    small = x == 0.0 ? x : small;  /* keeps -0.0 */
    return fabs(x) < 0.0625 ? small : fg_exp_d(x) - 1.0;
}

/* log(1 + t) for t in [0, 1]: 2 atanh(f) with f = t / (2 + t), or, above 1 + t = sqrt 2,
   ln 2 + 2 atanh(f) with f = (t - 1) / (t + 3) (the log of (1 + t) / 2); |f| <= 0.1716, so
   the odd series to f^13 is exact to ~2e-12 of the result, and f keeps t's relative
   precision however small t is. */
static inline double fg_log1p_unit(double t) {
    int big = t > 0x1.a827999fcef34p-2;  /* sqrt 2 - 1 */
    double f = big ? (t - 1.0) / (t + 3.0) : t / (2.0 + t);
    double f2 = f * f;
    double p = 1.0 / 13.0;
    p = fma(p, f2, 1.0 / 11.0);
    p = fma(p, f2, 1.0 / 9.0);
    p = fma(p, f2, 1.0 / 7.0);
    p = fma(p, f2, 1.0 / 5.0);
    p = fma(p, f2, 1.0 / 3.0);
    double r = fma(2.0 * f, f2 * p, 2.0 * f);
    return big ? r + 0x1.62e42fefa39efp-1 : r;
}

#define PARAM(BITS) fg_as_double((uint64_t)(BITS))

/* elu: x * scale where x > 0, else expm1(x * input_scale) * (alpha * scale); its gradient g *
   scale where x > 0, else g * (exp(x * input_scale) * (alpha * scale * input_scale)) (NaN
   for a NaN input, as PyTorch's vectorised kernel). */
void elu_f32(const float *a, float *out, int64_t start, int64_t stop, int64_t alpha_bits,
             int64_t scale_bits, int64_t input_scale_bits) {
    double alpha = PARAM(alpha_bits), scale = PARAM(scale_bits);
    float pos = (float)scale, neg = (float)(scale * alpha);
    float in = (float)PARAM(input_scale_bits);
    for (int64_t i = start; i < stop; i++) {
        float x = a[i];
        out[i] = x > 0 ? x * pos : (float)fg_expm1_d(x * in) * neg;
    }
}
void elu_grad_f32(const float *g, const float *a, float *out, int64_t start, int64_t stop,
                  int64_t alpha_bits, int64_t scale_bits, int64_t input_scale_bits) {
    double alpha = PARAM(alpha_bits), scale = PARAM(scale_bits);
    double input_scale = PARAM(input_scale_bits);
    float pos = (float)scale, neg = (float)(scale * alpha * input_scale);
    float in = (float)input_scale;
    for (int64_t i = start; i < stop; i++) {
        float x = a[i];
        out[i] = x > 0 ? g[i] * pos : g[i] * (fg_expf(x * in) * neg);
    }
}

/* celu: x where x > 0, else alpha * expm1(x / alpha); its gradient g where x > 0, else
   g * exp(x / alpha). */
void celu_f32(const float *a, float *out, int64_t start, int64_t stop, int64_t alpha_bits) {
    float alpha = (float)PARAM(alpha_bits);
    for (int64_t i = start; i < stop; i++) {
        float x = a[i];
        out[i] = x > 0 ? x : alpha * (float)fg_expm1_d(x / alpha);
    }
}
void celu_grad_f32(const float *g, const float *a, float *out, int64_t start, int64_t stop,
                   int64_t alpha_bits) {
    float alpha = (float)PARAM(alpha_bits);
    for (int64_t i = start; i < stop; i++) {
        float x = a[i];
        out[i] = x > 0 ? g[i] * 1.0f : g[i] * fg_expf(x / alpha);
    }
}

/* softplus: x where x * beta > threshold, else log(1 + e^(x * beta)) / beta, the log taken as
   max(b, 0) + log(1 + e^-|b|) (no overflow at any b); its gradient g where x * beta >
   threshold, else g * sigmoid(x * beta) (NaN for a NaN input, as PyTorch's). */
void softplus_f32(const float *a, float *out, int64_t start, int64_t stop, int64_t beta_bits,
                  int64_t threshold_bits) {
    float beta = (float)PARAM(beta_bits), threshold = (float)PARAM(threshold_bits);
    for (int64_t i = start; i < stop; i++) {
        float x = a[i], b = x * beta;
        double bd = b;
        double soft = (bd > 0.0 ? bd : 0.0) + fg_log1p_unit(fg_exp_d(-fabs(bd)));
        float res = (float)soft / beta;
        out[i] = b > threshold ? x : (b != b ? b : res);
    }
}
void softplus_grad_f32(const float *g, const float *a, float *out, int64_t start,
                       int64_t stop, int64_t beta_bits, int64_t threshold_bits) {
    float beta = (float)PARAM(beta_bits), threshold = (float)PARAM(threshold_bits);
    for (int64_t i = start; i < stop; i++) {
        float b = a[i] * beta;
        out[i] = b > threshold ? g[i] * 1.0f : g[i] * fg_sigmoidf(b);
    }
}

/* mish: x * tanh(softplus(x)). With u = e^x, e^softplus(x) = 1 + u, so tanh(softplus(x)) =
   n / (n + 2) with n = u (u + 2), computed in double (u = 0 below -200, so that -inf gives
   -inf * 0 = NaN as the composite does). Its gradient g * (t + x * sigmoid(x) * (1 - t * t))
   with t = tanh(softplus(x)) and sigmoid(x) = u / (1 + u). */
static inline float fg_mish_f(float xf) {
    double x = xf;
    double u = x < -200.0 ? 0.0 : fg_exp_d(x);
    double n = u * (u + 2.0);
    return (float)(x * (n / (n + 2.0)));
}
static inline float fg_mish_grad_f(float g, float xf) {
    double x = xf;
    double u = x < -200.0 ? 0.0 : fg_exp_d(x);
    double n = u * (u + 2.0);
    double t = n / (n + 2.0);
    return g * (float)(t + x * (u / (1.0 + u)) * (1.0 - t * t));
}
UNARY(float, mish_f32, fg_mish_f(x))
GRAD(float, mish_grad_f32, x, fg_mish_grad_f(g[i], x))
