/* Optimizer updates over [start, stop) of a parameter's flat, contiguous elements: one pass
   reads the gradient, the state and the parameter and writes the state and the parameter.

   The arithmetic is PyTorch's, operation for operation: each `x.add(y, alpha=a)` of its
   update is one fused multiply-add, fma(y, a, x), as its vectorised CPU kernels compute it,
   with the scalars rounded to the tensor's type first. */
#include <math.h>
#include <stdint.h>

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
void NAME(T *p, const T *g, T *buf, int64_t start, int64_t stop, double neg_lr,          \
          double mom, double damp1, double wd, int64_t flags) {                           \
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
