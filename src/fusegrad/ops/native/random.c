/* PyTorch's float32 CPU draws from a generator's 32-bit words, one pass per call: the
   uniforms of `uniform_` and the Box-Muller blocks of `normal_` (PyTorch's AVX2 Cephes log
   and sincos). Every operation is the one `_random_draws.py`'s NumPy path performs, in its
   order and precision: a fused multiply-add there is the float64 product plus the addend,
   rounded once to float (contraction is off, so the compiler fuses nothing), and the values
   are the same bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fused(float a, float b, float c) {
    return (float)((double)a * (double)b + (double)c);
}

static inline float as_float(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline int32_t as_int(float f) {
    int32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static const float LOG_POLY[9] = {
    7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f,
    1.4249322787E-1f, -1.6668057665E-1f, 2.0000714765E-1f, -2.4999993993E-1f,
    3.3333331174E-1f};

/* The logarithm of u in (0, 1]. */
static inline float log_avx(float u) {
    const int32_t bits = as_int(u);
    float e = (float)((bits >> 23) - 0x7E);
    float m = as_float((bits & 0x007FFFFF) | 0x3F000000);
    const float low = m < 0.707106781186547524f ? 1.0f : 0.0f;
    m = m * (low + 1.0f) - 1.0f;
    e -= low;
    const float z = m * m;
    float y = fused(m, LOG_POLY[0], LOG_POLY[1]);
    for (int k = 2; k < 9; k++) y = fused(y, m, LOG_POLY[k]);
    y = fused(y * m, z, e * -2.12194440e-4f);
    y = y - z * 0.5f;
    return (m + y) + e * 0.693359375f;
}

/* The sine and cosine of x in [0, 2 pi). */
static inline void sincos_avx(float x, float *sin_out, float *cos_out) {
    const int32_t j = ((int32_t)(x * 1.27323954473516f) + 1) & ~1;
    const float y = (float)j;
    x = (x + y * -0.78515625f) + y * -2.4187564849853515625e-4f;
    x = fused(y, -3.77489497744594108e-8f, x);
    const float z = x * x;
    float c = fused(fused(z, 2.443315711809948E-005f, -1.388731625493765E-003f), z,
                    4.166664568298827E-002f);
    c = fused(c * z, z, -(z * 0.5f)) + 1.0f;
    float s = fused(fused(z, -1.9515295891E-4f, 8.3321608736E-3f), z, -1.6666654611E-1f);
    s = fused(s * z, x, x);
    const float first = (j & 2) == 0 ? 1.0f : 0.0f;
    const float other = 1.0f - first;
    const float sin_sign = 1.0f - (float)((j >> 1) & 2);
    const float cos_sign = (float)((j - 2) & 4) * 0.5f - 1.0f;
    *sin_out = (s * first + c * other) * sin_sign;
    *cos_out = (c * first + s * other) * cos_sign;
}

/* Uniforms in [0, 1) from words[0:n] (the low 24 bits of each, times 2**-24), then, with
   `affine`, fused x * range + low. */
void uniform_f32(const uint64_t *words, float *out, int64_t n, float range, float low,
                 int64_t affine) {
    for (int64_t i = 0; i < n; i++) {
        const float x = (float)(words[i] & 0xFFFFFF) * 0x1p-24f;
        out[i] = affine ? fused(x, range, low) : x;
    }
}

/* Box-Muller on `blocks` blocks of 16 float uniforms u: the radius from 1 - u[k], the angle
   from u[k + 8] (k < 8), cosines into the first half, sines into the second; with
   `affine`, each fused value * std + mean. */
void box_muller16_f32(const float *u, float *out, int64_t blocks, float mean, float std,
                      int64_t affine) {
    for (int64_t b = 0; b < blocks; b++) {
        const float *ub = u + 16 * b;
        float *ob = out + 16 * b;
        for (int k = 0; k < 8; k++) {
            const float radius = sqrtf(-2.0f * log_avx(1.0f - ub[k]));
            float sin_v, cos_v;
            sincos_avx(6.28318530717958647692f * ub[k + 8], &sin_v, &cos_v);
            cos_v *= radius;
            sin_v *= radius;
            if (affine) {
                cos_v = fused(cos_v, std, mean);
                sin_v = fused(sin_v, std, mean);
            }
            ob[k] = cos_v;
            ob[k + 8] = sin_v;
        }
    }
}
