/* erf, erfc and the exact gelu with its gradient, elementwise over [start, stop) of flat,
   contiguous arrays. The build puts `_mathlib.py`'s functions before this file: float32 uses
   its fg_erff / fg_erfcf / fg_expf (computed in double or with carried errors, rounded once,
   and vectorised by gcc), the very functions generated kernels call, so eager and compiled
   results are the same bits; float64 uses the C library's erf, erfc and exp.

   gelu and its gradient follow the order of operations of the formulas they replace
   (activation.py): gelu(x) = (x * 0.5) * (1 + erf(x * sqrt(1/2))), the gradient
   g * (0.5 * (1 + erf(x * sqrt(1/2))) + x * (exp((x * -0.5) * x) * 1/sqrt(2 pi))); with
   contraction off each operation is rounded as NumPy rounds it. */

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
