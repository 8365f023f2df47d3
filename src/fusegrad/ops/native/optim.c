/* Optimizer updates over [start, stop) of a parameter's flat, contiguous elements: one pass
   reads the gradient, the state and the parameter and writes the state and the parameter.

   The arithmetic is PyTorch's, operation for operation: each `x.add(y, alpha=a)` of its
   update is one fused multiply-add, fma(y, a, x), as its vectorised CPU kernels compute it,
   with the scalars rounded to the tensor's type first. */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The exported updates take their scalars as the bits of doubles in 64-bit integers, and
   their element range last, so that the C workers (`workers.c`), which pass integers only,
   can run them in pieces. */
static inline double as_double(int64_t bits) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* Bits of `flags`. */
#define SGD_MAXIMIZE 1
#define SGD_NESTEROV 2
#define SGD_MOMENTUM 4 /* a momentum buffer `buf` is read and written */
#define SGD_FIRST 8    /* the buffer's first step: it becomes the (decayed) gradient */

/* SGD: d = (maximize ? -g : g); d = fma(p, wd, d) when wd != 0; with momentum
   buf = fma(d, 1 - dampening, buf * momentum) (d itself on the first step), then
   d = nesterov ? fma(buf, momentum, d) : buf; finally p = fma(d, -lr, p). */
#define SGD(T, FMA, NAME)                                                                \
static inline void NAME##_run(T *p, const T *g, T *buf,                                    \
                              int64_t start, int64_t stop, T lr, T mom, T damp1, T wd,    \
                              int wdecay, int flags) {                                    \
    const int maximize = flags & SGD_MAXIMIZE, nesterov = flags & SGD_NESTEROV;           \
    const int momentum = flags & SGD_MOMENTUM, first = flags & SGD_FIRST;                 \
    for (int64_t i = start; i < stop; i++) {                                              \
        T d = maximize ? -g[i] : g[i];                                                    \
        if (wdecay)                                                                       \
            d = FMA(p[i], wd, d);                                                         \
        if (momentum) {                                                                   \
            T b = first ? d : FMA(d, damp1, buf[i] * mom);                                \
            buf[i] = b;                                                                   \
            d = nesterov ? FMA(b, mom, d) : b;                                            \
        }                                                                                 \
        p[i] = FMA(d, lr, p[i]);                                                          \
    }                                                                                     \
}                                                                                         \
void NAME(T *p, const T *g, T *buf, int64_t neg_lr_bits, int64_t mom_bits,               \
          int64_t damp1_bits, int64_t wd_bits, int64_t flags, int64_t start, int64_t stop) {  \
    const double neg_lr = as_double(neg_lr_bits), mom = as_double(mom_bits);              \
    const double damp1 = as_double(damp1_bits), wd = as_double(wd_bits);                  \
    /* The common cases as their own loops, so each vectorises without tests inside. */   \
    const int wdecay = wd != 0;                                                           \
    if (flags == SGD_MOMENTUM && !wdecay)                                                 \
        NAME##_run(p, g, buf, start, stop, (T)neg_lr, (T)mom, (T)damp1, (T)wd, 0,         \
                   SGD_MOMENTUM);                                                         \
    else if (flags == SGD_MOMENTUM)                                                       \
        NAME##_run(p, g, buf, start, stop, (T)neg_lr, (T)mom, (T)damp1, (T)wd, 1,         \
                   SGD_MOMENTUM);                                                         \
    else if (flags == 0 && !wdecay)                                                       \
        NAME##_run(p, g, buf, start, stop, (T)neg_lr, (T)mom, (T)damp1, (T)wd, 0, 0);     \
    else                                                                                  \
        NAME##_run(p, g, buf, start, stop, (T)neg_lr, (T)mom, (T)damp1, (T)wd, wdecay,    \
                   (int)flags);                                                           \
}
SGD(float, fmaf, sgd_f32)
SGD(double, fma, sgd_f64)

/* Bits of Adam's `flags`. */
#define ADAM_MAXIMIZE 1
#define ADAM_DECOUPLED 2 /* AdamW's decay: p *= 1 - lr * wd first */
#define ADAM_L2 4        /* Adam's: the gradient gets wd * p */
#define ADAM_AMSGRAD 8   /* the largest second moment so far, `vmax`, is the denominator's */

/* Adam and AdamW, PyTorch's single-tensor update: m.lerp_(g, 1 - beta1) (fused multiply-add
   from the nearer end), v = fma((1 - beta2) * g, g, v * beta2), denominator
   sqrt(v) / bc2_sqrt + eps, then p += (-step_size * m) / denominator. */
#define ADAM(T, FMA, SQRT, NAME)                                                         \
static inline void NAME##_run(T *p, const T *g, T *m, T *v, T *vmax, int64_t start,      \
                              int64_t stop, T decay, T wd, T w1, T beta2, T c2, T neg_step, \
                              T bc2_sqrt, T eps, int flags) {                             \
    const int maximize = flags & ADAM_MAXIMIZE, decoupled = flags & ADAM_DECOUPLED;       \
    const int l2 = flags & ADAM_L2, amsgrad = flags & ADAM_AMSGRAD;                       \
    const int small = w1 < (T)0.5 && w1 > -(T)0.5;                                        \
    const T coeff = small ? w1 : w1 - (T)1;                                               \
    for (int64_t i = start; i < stop; i++) {                                              \
        T gi = maximize ? -g[i] : g[i];                                                   \
        T pi = p[i];                                                                      \
        if (decoupled)                                                                    \
            pi = pi * decay;                                                              \
        if (l2)                                                                           \
            gi = FMA(pi, wd, gi);                                                         \
        T mi = m[i];                                                                      \
        mi = FMA(coeff, gi - mi, small ? mi : gi);                                        \
        m[i] = mi;                                                                        \
        T vi = FMA(c2 * gi, gi, v[i] * beta2);                                            \
        v[i] = vi;                                                                        \
        if (amsgrad) {                                                                    \
            T a = vmax[i];                                                                \
            /* torch.maximum: NaN from either side */                                     \
            vi = (a != a || vi != vi) ? a + vi : (a > vi ? a : vi);                       \
            vmax[i] = vi;                                                                 \
        }                                                                                 \
        T denom = SQRT(vi) / bc2_sqrt + eps;                                              \
        p[i] = pi + (neg_step * mi) / denom;                                              \
    }                                                                                     \
}                                                                                         \
void NAME(T *p, const T *g, T *m, T *v, T *vmax, int64_t decay_bits, int64_t wd_bits,    \
          int64_t w1_bits, int64_t beta2_bits, int64_t c2_bits, int64_t neg_step_bits,     \
          int64_t bc2_sqrt_bits, int64_t eps_bits, int64_t flags, int64_t start,           \
          int64_t stop) {                                                                 \
    const double decay = as_double(decay_bits), wd = as_double(wd_bits);                  \
    const double w1 = as_double(w1_bits), beta2 = as_double(beta2_bits);                  \
    const double c2 = as_double(c2_bits), neg_step = as_double(neg_step_bits);            \
    const double bc2_sqrt = as_double(bc2_sqrt_bits), eps = as_double(eps_bits);          \
    if (flags == 0) /* plain Adam: its own loop, without tests inside */                  \
        NAME##_run(p, g, m, v, vmax, start, stop, (T)decay, (T)wd, (T)w1, (T)beta2,       \
                   (T)c2, (T)neg_step, (T)bc2_sqrt, (T)eps, 0);                           \
    else if (flags == ADAM_DECOUPLED)                                                     \
        NAME##_run(p, g, m, v, vmax, start, stop, (T)decay, (T)wd, (T)w1, (T)beta2,       \
                   (T)c2, (T)neg_step, (T)bc2_sqrt, (T)eps, ADAM_DECOUPLED);              \
    else                                                                                  \
        NAME##_run(p, g, m, v, vmax, start, stop, (T)decay, (T)wd, (T)w1, (T)beta2,       \
                   (T)c2, (T)neg_step, (T)bc2_sqrt, (T)eps, (int)flags);                  \
}
ADAM(float, fmaf, sqrtf, adam_f32)
ADAM(double, fma, sqrt, adam_f64)
