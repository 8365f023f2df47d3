/* Elementwise kernels over [start, stop) of flat, contiguous arrays. */
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
