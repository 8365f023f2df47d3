"""Attention kernels in C for compiled graphs: the CPU flash attention's forward and backward.

`_scaled_dot_product_flash_attention_for_cpu` (and its backward) stay whole in compiled
graphs (their decomposition would materialise every score row); their registry entries'
`lowering` hands float32 calls here (`lower_forward`, `lower_backward`), which make them
extern calls of the C kernels below instead of the NumPy kernels. Other dtypes, attention
masks, dropout and empty shapes stay with the NumPy kernels (`NotLowered`).

Forward: one unit of work per (batch, head, block of `FG_BR` query rows). Keys and values are
read in blocks of `FG_BC` rows, each copied once per unit into local arrays laid out for the
inner loops (the keys transposed, so a query row's scores over the block are one loop over
contiguous keys); each row keeps its running maximum and sum of exponentials, its output
accumulated and rescaled when the maximum grows, and divided by the sum at the end, with
the log-sum-exp saved for the backward. A causal mask reads no key block past the unit's
last row.

Backward: one unit per (batch, key/value head): the unit recomputes each query row's
probabilities from the saved log-sum-exp, and accumulates the key and value gradients of
its head (of every query head sharing it, in grouped-query attention) in local arrays, so
no two units write one element.

Units are shared among the threads as the generated kernels share their pieces (the C
workers, `c.PRELUDE`): each unit is computed the same way whatever piece runs it, so the
results are the same bits at every thread count.
"""

from __future__ import annotations

import ctypes
import math
import struct

import numpy as np

from ... import _dtype
from ...ops import _mathlib as mathlib
from ...ops import attention as eager
from .ir import PythonCall, ScalarInput
from .lower_pointwise import NotLowered, is_tensor

# The kernels' tables, as the generated kernels': P holds the arrays' addresses and then a
# flag word; K the C workers' entry and the threads (as `c.Slots`), then the sizes (batch,
# heads, key/value heads, queries, keys, head size), whether the mask is causal, the scale
# (a double's bits), then four strides (in elements) per array in P's order.
SOURCE = r"""
#pragma GCC push_options
/* Products and sums as fused multiply-adds: the kernels are compared with eager's within
   float32 tolerance (their sums run in another order than BLAS's anyway). */
#pragma GCC optimize("fp-contract=fast")
#define FG_BR 64
#define FG_BC 64
#define FG_VL 16
#define K_B K[2]
#define K_H K[3]
#define K_HKV K[4]
#define K_L K[5]
#define K_S K[6]
#define K_E K[7]
#define K_CAUSAL K[8]
#define ST(a, d) K[10 + 4 * (a) + (d)]

/* 1 for an infinite or NaN value (x - x is then NaN) */
#define FG_BAD(x) ((int64_t)!((x) - (x) == 0.0f))

typedef float fg_vf __attribute__((vector_size(64)));
typedef void (*fg_attn_run)(void *, const int64_t *, int64_t, int64_t, int64_t, int64_t);

static inline fg_vf fg_vload(const float *p) {
  fg_vf v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void fg_vstore(float *p, fg_vf v) { memcpy(p, &v, sizeof v); }

static float fg_attn_scale(const int64_t *K) {
  double s;
  memcpy(&s, &K[9], sizeof s);
  return (float)s;
}

static inline int64_t fg_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* The units [0, units) of `piece`, on the C workers when K[1] threads share them. */
static void fg_attn_units(void (*piece)(int64_t, int64_t, int64_t, int64_t), void **P,
                          const int64_t *K, int64_t units) {
  if (K[1] > 1 && K[0] && units > 1) {
    const int64_t args[4] = {(int64_t)P, (int64_t)K, 0, 0};
    ((fg_attn_run)K[0])((void *)piece, args, 4, 2, units, K[1]);
    return;
  }
  piece((int64_t)P, (int64_t)K, 0, units);
}

/* Forward. P: q, k, v, out, lse; strides in that order (lse: three). One unit per
   (batch, head, block of FG_BR rows); rows four at a time. */
static void fg_attn_forward_piece(int64_t Pi, int64_t Ki, int64_t start, int64_t stop) {
  void **P = (void **)Pi;
  const int64_t *K = (const int64_t *)Ki;
  const float *q = (const float *)P[0], *k = (const float *)P[1], *v = (const float *)P[2];
  float *o = (float *)P[3], *lse = (float *)P[4];
  int64_t *flag = (int64_t *)P[5], bad = 0;
  const int64_t H = K_H, L = K_L, S = K_S, E = K_E, group = K_H / K_HKV;
  const int64_t Ep = (E + FG_VL - 1) / FG_VL * FG_VL;
  const int causal = (int)K_CAUSAL;
  const float scale = fg_attn_scale(K);
  int64_t st[5][4];  /* (locals: stores through float pointers cannot change them) */
  memcpy(st, &K[10], sizeof st);
  const int64_t blocks = (L + FG_BR - 1) / FG_BR;
  float *kt = (float *)malloc(sizeof(float) * (size_t)(E * FG_BC));
  float *vb = (float *)malloc(sizeof(float) * (size_t)(Ep * FG_BC));
  float *acc = (float *)malloc(sizeof(float) * (size_t)(Ep * (FG_BR + 4)));
  /* per row: its running maximum and its sum of exponentials in 16 lanes (added up once,
     at the end) */
  float sc[4][FG_BC], m[FG_BR + 4], l[FG_BR + 4][FG_VL];
  for (int64_t u = start; u < stop; u++) {
    const int64_t blk = u % blocks, bh = u / blocks, h = bh % H, b = bh / H;
    const int64_t hk = h / group;
    const int64_t i0 = blk * FG_BR, rows = fg_min(i0 + FG_BR, L) - i0;
    const float *qh = q + b * st[0][0] + h * st[0][1];
    const float *kh = k + b * st[1][0] + hk * st[1][1];
    const float *vh = v + b * st[2][0] + hk * st[2][1];
    for (int64_t r = 0; r < FG_BR + 4; r++) {
      for (int64_t d = 0; d < Ep; d++) acc[r * Ep + d] = 0.0f;
      m[r] = -INFINITY;
      for (int t = 0; t < FG_VL; t++) l[r][t] = 0.0f;
    }
    for (int64_t r = 0; r < rows; r++)
      for (int64_t d = 0; d < E; d++) bad |= FG_BAD(qh[(i0 + r) * st[0][2] + d * st[0][3]]);
    /* the keys any row of the block sees (a causal row i sees keys j <= i) */
    const int64_t jend = causal ? fg_min(i0 + rows, S) : S;
    if (i0 + rows == L)  /* values no row sees: eager's product reads them (0 * inf) */
      for (int64_t c = jend; c < S; c++)
        for (int64_t d = 0; d < E; d++) bad |= FG_BAD(vh[c * st[2][2] + d * st[2][3]]);
    for (int64_t j0 = 0; j0 < jend; j0 += FG_BC) {
      const int64_t nc = fg_min(FG_BC, jend - j0);
      for (int64_t c = 0; c < FG_BC; c++)
        for (int64_t d = 0; d < E; d++) {
          const float x = c < nc ? kh[(j0 + c) * st[1][2] + d * st[1][3]] : 0.0f;
          kt[d * FG_BC + c] = x;
          bad |= FG_BAD(x);
        }
      for (int64_t c = 0; c < nc; c++)
        for (int64_t d = 0; d < Ep; d++) {
          const float x = d < E ? vh[(j0 + c) * st[2][2] + d * st[2][3]] : 0.0f;
          vb[c * Ep + d] = x;
          bad |= FG_BAD(x);
        }
      for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        /* four rows (the last repeated past the block's end; its results are not kept) */
        const int64_t nr = fg_min(4, rows - r0);
        const float *qr[4];
        int64_t lim[4], most = 0;
        for (int r = 0; r < 4; r++) {
          const int64_t i = i0 + r0 + fg_min(r, nr - 1);
          qr[r] = qh + i * st[0][2];
          lim[r] = causal ? fg_min(nc, i + 1 - j0) : nc;
          if (lim[r] < 0) lim[r] = 0;
          most = lim[r] > most ? lim[r] : most;
        }
        if (most == 0) continue;
        const int64_t width = (most + FG_VL - 1) / FG_VL * FG_VL;
        for (int64_t c0 = 0; c0 < width; c0 += FG_VL) {
          fg_vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
          for (int64_t d = 0; d < E; d++) {
            const fg_vf kv = fg_vload(kt + d * FG_BC + c0);
            const int64_t at = d * st[0][3];
            s0 += qr[0][at] * kv;
            s1 += qr[1][at] * kv;
            s2 += qr[2][at] * kv;
            s3 += qr[3][at] * kv;
          }
          fg_vstore(sc[0] + c0, s0 * scale);
          fg_vstore(sc[1] + c0, s1 * scale);
          fg_vstore(sc[2] + c0, s2 * scale);
          fg_vstore(sc[3] + c0, s3 * scale);
        }
        float alpha[4], lanes[4][FG_VL], top[4];
        for (int r = 0; r < 4; r++) {
          float *x = sc[r];
          for (int64_t c = lim[r]; c < width; c++) x[c] = -INFINITY;
          for (int t = 0; t < FG_VL; t++) lanes[r][t] = m[r0 + r];
          for (int64_t c = 0; c < width; c += FG_VL)
            for (int t = 0; t < FG_VL; t++)
              lanes[r][t] = x[c + t] > lanes[r][t] ? x[c + t] : lanes[r][t];
        }
        /* the four rows' maxima together (four chains of 16 steps side by side) */
        for (int r = 0; r < 4; r++) top[r] = m[r0 + r];
        for (int t = 0; t < FG_VL; t++)
          for (int r = 0; r < 4; r++) top[r] = lanes[r][t] > top[r] ? lanes[r][t] : top[r];
        for (int r = 0; r < 4; r++) {
          float *x = sc[r], *lr = l[r0 + r];
          const int64_t n = lim[r];
          const float old = m[r0 + r];
          const float sub = top[r] == -INFINITY ? 0.0f : top[r];  /* (no key seen yet) */
          for (int64_t c = 0; c < width; c++) x[c] = c < n ? fg_expf(x[c] - sub) : 0.0f;
          alpha[r] = old == -INFINITY ? 0.0f : fg_expf(old - top[r]);
          for (int t = 0; t < FG_VL; t++) lr[t] *= alpha[r];
          for (int64_t c = 0; c < width; c += FG_VL)
            for (int t = 0; t < FG_VL; t++) lr[t] += x[c + t];
          m[r0 + r] = top[r];
        }
        for (int64_t e = 0; e < Ep; e += FG_VL) {
          float *a = acc + r0 * Ep + e;
          fg_vf a0 = fg_vload(a) * alpha[0], a1 = fg_vload(a + Ep) * alpha[1];
          fg_vf a2 = fg_vload(a + 2 * Ep) * alpha[2], a3 = fg_vload(a + 3 * Ep) * alpha[3];
          for (int64_t c = 0; c < most; c++) {
            const fg_vf vv = fg_vload(vb + c * Ep + e);
            a0 += sc[0][c] * vv;
            a1 += sc[1][c] * vv;
            a2 += sc[2][c] * vv;
            a3 += sc[3][c] * vv;
          }
          fg_vstore(a, a0);
          fg_vstore(a + Ep, a1);
          fg_vstore(a + 2 * Ep, a2);
          fg_vstore(a + 3 * Ep, a3);
        }
      }
    }
    float *oh = o + b * st[3][0] + h * st[3][1];
    for (int64_t r = 0; r < rows; r++) {
      const int64_t i = i0 + r;
      float sum = 0.0f;
      for (int t = 0; t < FG_VL; t++) sum += l[r][t];
      const float total = sum == 0.0f ? 1.0f : sum;
      for (int64_t d = 0; d < E; d++) {
        const float x = acc[r * Ep + d] / total;
        oh[i * st[3][2] + d * st[3][3]] = x;
        bad |= FG_BAD(x);
      }
      const float x = sum == 0.0f ? 0.0f : m[r] + fg_logf(sum);
      lse[b * st[4][0] + h * st[4][1] + i * st[4][2]] = x;
      bad |= FG_BAD(x);
    }
  }
  if (bad) __atomic_fetch_or(flag, 1, __ATOMIC_RELAXED);
  free(kt);
  free(vb);
  free(acc);
}

void fg_attention_forward(void **P, const int64_t *K) {
  fg_attn_units(fg_attn_forward_piece, P, K, K_B * K_H * ((K_L + FG_BR - 1) / FG_BR));
}

/* Backward. P: grad_out, q, k, v, out, lse, grad_q, grad_k, grad_v; strides in that order
   (lse: three). One unit per (batch, key/value head); query rows four at a time. */
static void fg_attn_backward_piece(int64_t Pi, int64_t Ki, int64_t start, int64_t stop) {
  void **P = (void **)Pi;
  const int64_t *K = (const int64_t *)Ki;
  const float *g = (const float *)P[0], *q = (const float *)P[1], *k = (const float *)P[2];
  const float *v = (const float *)P[3], *o = (const float *)P[4], *lse = (const float *)P[5];
  float *gq = (float *)P[6], *gk = (float *)P[7], *gv = (float *)P[8];
  int64_t *flag = (int64_t *)P[9], bad = 0;
  const int64_t HKV = K_HKV, L = K_L, S = K_S, E = K_E, group = K_H / K_HKV;
  const int64_t Ep = (E + FG_VL - 1) / FG_VL * FG_VL, Sp = (S + FG_VL - 1) / FG_VL * FG_VL;
  const int causal = (int)K_CAUSAL;
  const float scale = fg_attn_scale(K);
  int64_t st[9][4];
  memcpy(st, &K[10], sizeof st);
  const size_t se = sizeof(float) * (size_t)(Sp * Ep);
  float *kt = (float *)malloc(se), *vt = (float *)malloc(se), *kr = (float *)malloc(se);
  float *dk = (float *)malloc(se), *dv = (float *)malloc(se);
  float *pr = (float *)malloc(sizeof(float) * (size_t)(8 * Sp));
  float *dsr = pr + 4 * Sp;
  float *rowq = (float *)malloc(sizeof(float) * (size_t)(8 * Ep));
  float *rowg = rowq + 4 * Ep;
  for (int64_t u = start; u < stop; u++) {
    const int64_t b = u / HKV, hk = u % HKV;
    const float *kh = k + b * st[2][0] + hk * st[2][1];
    const float *vh = v + b * st[3][0] + hk * st[3][1];
    for (int64_t j = 0; j < Sp; j++)
      for (int64_t d = 0; d < E; d++) {
        const float x = j < S ? kh[j * st[2][2] + d * st[2][3]] : 0.0f;
        const float y = j < S ? vh[j * st[3][2] + d * st[3][3]] : 0.0f;
        kt[d * Sp + j] = x;
        vt[d * Sp + j] = y;
        bad |= FG_BAD(x) | FG_BAD(y);
      }
    for (int64_t j = 0; j < Sp; j++)
      for (int64_t d = 0; d < Ep; d++) {
        kr[j * Ep + d] = j < S && d < E ? kh[j * st[2][2] + d * st[2][3]] : 0.0f;
        dk[j * Ep + d] = 0.0f;
        dv[j * Ep + d] = 0.0f;
      }
    for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
      const float *gh = g + b * st[0][0] + h * st[0][1];
      const float *qh = q + b * st[1][0] + h * st[1][1];
      const float *oh = o + b * st[4][0] + h * st[4][1];
      const float *lh = lse + b * st[5][0] + h * st[5][1];
      float *gqh = gq + b * st[6][0] + h * st[6][1];
      for (int64_t i0 = 0; i0 < L; i0 += 4) {
        /* four rows (past the end: rows that see no key, whose results are not kept) */
        const int64_t nr = fg_min(4, L - i0);
        int64_t lim[4], most = 0;
        float delta[4], top[4];
        for (int r = 0; r < 4; r++) {
          const int64_t i = i0 + fg_min(r, nr - 1);
          lim[r] = r >= nr ? 0 : causal ? fg_min(i + 1, S) : S;
          most = lim[r] > most ? lim[r] : most;
          float dl = 0.0f;
          for (int64_t d = 0; d < Ep; d++) {
            /* (rows past the end read as zeros: they add nothing to the sums) */
            const int in = d < E && r < nr;
            const float x = in ? qh[i * st[1][2] + d * st[1][3]] : 0.0f;
            const float y = in ? gh[i * st[0][2] + d * st[0][3]] : 0.0f;
            const float z = in ? oh[i * st[4][2] + d * st[4][3]] : 0.0f;
            rowq[r * Ep + d] = x;
            rowg[r * Ep + d] = y;
            dl += y * z;
            bad |= FG_BAD(x) | FG_BAD(y) | FG_BAD(z);
          }
          delta[r] = dl;
          top[r] = lh[i * st[5][2]];
          bad |= FG_BAD(top[r]);
        }
        const int64_t width = (most + FG_VL - 1) / FG_VL * FG_VL;
        for (int64_t c0 = 0; c0 < width; c0 += FG_VL) {
          fg_vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
          fg_vf t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
          for (int64_t d = 0; d < E; d++) {
            const fg_vf kv = fg_vload(kt + d * Sp + c0), vv = fg_vload(vt + d * Sp + c0);
            s0 += rowq[d] * kv;
            s1 += rowq[Ep + d] * kv;
            s2 += rowq[2 * Ep + d] * kv;
            s3 += rowq[3 * Ep + d] * kv;
            t0 += rowg[d] * vv;
            t1 += rowg[Ep + d] * vv;
            t2 += rowg[2 * Ep + d] * vv;
            t3 += rowg[3 * Ep + d] * vv;
          }
          fg_vstore(pr + c0, s0 * scale - top[0]);
          fg_vstore(pr + Sp + c0, s1 * scale - top[1]);
          fg_vstore(pr + 2 * Sp + c0, s2 * scale - top[2]);
          fg_vstore(pr + 3 * Sp + c0, s3 * scale - top[3]);
          fg_vstore(dsr + c0, t0 - delta[0]);
          fg_vstore(dsr + Sp + c0, t1 - delta[1]);
          fg_vstore(dsr + 2 * Sp + c0, t2 - delta[2]);
          fg_vstore(dsr + 3 * Sp + c0, t3 - delta[3]);
        }
        for (int r = 0; r < 4; r++) {
          float *x = pr + r * Sp, *y = dsr + r * Sp;
          const int64_t n = lim[r];
          for (int64_t c = 0; c < width; c++) {
            const float pv = c < n ? fg_expf(x[c]) : 0.0f;
            x[c] = pv;
            y[c] = pv * y[c];
          }
        }
        for (int64_t e = 0; e < Ep; e += FG_VL) {
          fg_vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
          for (int64_t c = 0; c < most; c++) {
            const fg_vf kv = fg_vload(kr + c * Ep + e);
            a0 += dsr[c] * kv;
            a1 += dsr[Sp + c] * kv;
            a2 += dsr[2 * Sp + c] * kv;
            a3 += dsr[3 * Sp + c] * kv;
          }
          float out[4][FG_VL];
          fg_vstore(out[0], a0 * scale);
          fg_vstore(out[1], a1 * scale);
          fg_vstore(out[2], a2 * scale);
          fg_vstore(out[3], a3 * scale);
          for (int r = 0; r < nr; r++)
            for (int64_t d = e; d < fg_min(e + FG_VL, E); d++) {
              gqh[(i0 + r) * st[6][2] + d * st[6][3]] = out[r][d - e];
              bad |= FG_BAD(out[r][d - e]);
            }
        }
        for (int64_t c = 0; c < most; c++) {
          const float d0 = dsr[c], d1 = dsr[Sp + c], d2 = dsr[2 * Sp + c];
          const float d3 = dsr[3 * Sp + c];
          const float p0 = pr[c], p1 = pr[Sp + c], p2 = pr[2 * Sp + c], p3 = pr[3 * Sp + c];
          for (int64_t e = 0; e < Ep; e += FG_VL) {
            fg_vf a = fg_vload(dk + c * Ep + e), w = fg_vload(dv + c * Ep + e);
            a += d0 * fg_vload(rowq + e) + d1 * fg_vload(rowq + Ep + e) +
                 d2 * fg_vload(rowq + 2 * Ep + e) + d3 * fg_vload(rowq + 3 * Ep + e);
            w += p0 * fg_vload(rowg + e) + p1 * fg_vload(rowg + Ep + e) +
                 p2 * fg_vload(rowg + 2 * Ep + e) + p3 * fg_vload(rowg + 3 * Ep + e);
            fg_vstore(dk + c * Ep + e, a);
            fg_vstore(dv + c * Ep + e, w);
          }
        }
      }
    }
    float *gkh = gk + b * st[7][0] + hk * st[7][1];
    float *gvh = gv + b * st[8][0] + hk * st[8][1];
    for (int64_t j = 0; j < S; j++)
      for (int64_t d = 0; d < E; d++) {
        const float x = dk[j * Ep + d] * scale, y = dv[j * Ep + d];
        gkh[j * st[7][2] + d * st[7][3]] = x;
        gvh[j * st[8][2] + d * st[8][3]] = y;
        bad |= FG_BAD(x) | FG_BAD(y);
      }
  }
  if (bad) __atomic_fetch_or(flag, 1, __ATOMIC_RELAXED);
  free(kt);
  free(vt);
  free(kr);
  free(dk);
  free(dv);
  free(pr);
  free(rowq);
}

void fg_attention_backward(void **P, const int64_t *K) {
  fg_attn_units(fg_attn_backward_piece, P, K, K_B * K_HKV);
}
#pragma GCC pop_options
"""

_lib: list = []  # [forward, backward] of the loaded shared object
_workers = [0]  # the C workers' entry, once asked for


def _kernels() -> list:
    """[forward, backward]: the C kernels (built once, then from the kernel cache)."""
    if not _lib:
        from . import build

        lib = build.build(mathlib.source() + "\n#include <stdlib.h>\n" + SOURCE)
        for name in ("fg_attention_forward", "fg_attention_backward"):
            fn = getattr(lib, name)
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            fn.restype = None
            _lib.append(fn)
    return _lib


def _run(which: int, arrays: list, sizes: list, work: int) -> bool:
    """Call kernel `which` (0: forward, 1: backward) on `arrays` (the P table) with `sizes`
    (after the two thread slots) and the arrays' strides in elements; its units shared
    among the threads as a generated kernel's pieces for large `work`. False where the
    kernel met an infinite or NaN value (read or computed)."""
    from ...ops import _native, _parallel

    threads = _parallel.sharing_threads(work)
    if threads > 1 and not _workers[0]:
        _workers[0] = _native.workers_call_address()
    ints = [_workers[0] if threads > 1 else 0, threads] + sizes
    for a in arrays:
        item = a.itemsize
        ints += [s // item for s in a.strides] + [0] * (4 - a.ndim)
    address = _native.address
    flag = np.zeros(1, np.int64)
    # (tables as NumPy arrays: 1-2 us where ctypes arrays of as many values take 10)
    p_table = np.array([address(a) for a in arrays] + [address(flag)], np.uint64)
    k_table = np.array(ints, np.int64)
    _kernels()[which](address(p_table), address(k_table))
    return not flag[0]


def _scale_bits(q_shape: tuple, scale) -> int:
    """The scale the kernels multiply scores by (1/sqrt(E) by default), as a double's
    bits."""
    factor = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    return struct.unpack("<q", struct.pack("<d", factor))[0]


def _like_query(shape: tuple, q: np.ndarray) -> np.ndarray:
    """An uninitialised float32 array of `shape` laid out as eager's kernel lays out its
    output: dense, its dims in the order of the query's strides."""
    strides = q.strides
    order = sorted(range(len(shape)), key=lambda d: -strides[d])
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return np.empty([shape[d] for d in order], np.float32).transpose(inverse)


def forward(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """The flash attention's (out, logsumexp) of float32 arrays, by the C kernel, laid out
    as eager's kernel lays them out."""
    b, h, length, e = q.shape
    out = _like_query((b, h, length, v.shape[3]), q)
    lse = np.empty((b, length, h), np.float32).transpose(0, 2, 1)
    sizes = [b, h, k.shape[1], length, k.shape[2], e, int(bool(is_causal)),
             _scale_bits(q.shape, scale)]
    if not _run(0, [q, k, v, out, lse], sizes, b * h * length * k.shape[2] * e):
        # Infinities and NaN: eager's kernel, whose matrix products spread them as BLAS
        # does (a zero probability times an infinite value is NaN there).
        return eager.flash_attention.kernel(q, k, v, dropout_p, is_causal, attn_mask, scale)
    return out, lse


def backward(g, q, k, v, out, lse, dropout_p=0.0, is_causal=False, attn_mask=None,
             scale=None):
    """The flash attention's (grad_q, grad_k, grad_v) of float32 arrays by the C kernel,
    the probabilities rebuilt from the saved log-sum-exp."""
    b, h, length, e = q.shape
    gq = np.empty(q.shape, np.float32)
    gk = np.empty(k.shape, np.float32)
    gv = np.empty(v.shape, np.float32)
    sizes = [b, h, k.shape[1], length, k.shape[2], e, int(bool(is_causal)),
             _scale_bits(q.shape, scale)]
    if not _run(1, [g, q, k, v, out, lse, gq, gk, gv], sizes,
                b * h * length * k.shape[2] * e):
        return eager.flash_attention_backward.kernel(g, q, k, v, out, lse, dropout_p,
                                                     is_causal, attn_mask, scale)
    return gq, gk, gv


def _supported(q, k, v, tensors: list, dropout_p, attn_mask) -> None:
    """Raise NotLowered unless the C kernels compute this call: float32 tensors of four
    dims with elements, one head size, whole groups of query heads per key/value head, no
    mask, no dropout."""
    if attn_mask is not None:
        raise NotLowered("attention with a mask")
    if not isinstance(dropout_p, (int, float)) or dropout_p != 0.0:
        raise NotLowered("attention with dropout")
    for t in tensors:
        if not is_tensor(t) or isinstance(t, ScalarInput) or t.dtype is not _dtype.float32 \
                or len(t.shape) != 4 or not all(int(n) > 0 for n in t.shape):
            raise NotLowered("attention of other dtypes or shapes")
    if not int(q.shape[3]) == int(k.shape[3]) == int(v.shape[3]) or \
            int(q.shape[1]) % int(k.shape[1]) or k.shape != v.shape or \
            q.shape[0] != k.shape[0]:
        raise NotLowered("attention of these shapes")


def _extern(g, name: str, kernel, args: tuple, kwargs: dict):
    """`kernel` as an extern call of the node being lowered, its results laid out as the
    node's (eager's) results."""
    from .lower import _meta, resolve_op

    node = g._current
    op = resolve_op(node.target) if node is not None else None
    if op is None:
        raise NotLowered("attention outside a graph node")
    call = PythonCall(name, kernel, layout=True)
    return g.extern(call, args, kwargs, _meta(op, args, kwargs))


def lower_forward(g, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """The C forward kernel as the lowering of the flash attention op (graph lowering
    `g`); NotLowered for what it does not compute."""
    _supported(q, k, v, [q, k, v], dropout_p, attn_mask)
    if not isinstance(is_causal, bool) or not (scale is None or type(scale) in (int, float)):
        raise NotLowered("attention with these arguments")
    return _extern(g, "attention_forward", forward, (q, k, v, dropout_p, is_causal,
                                                     attn_mask, scale), {})


def lower_backward(g, grad, q, k, v, out, lse, dropout_p=0.0, is_causal=False, attn_mask=None,
                   scale=None):
    """The C backward kernel as the lowering of the flash attention's backward op."""
    _supported(q, k, v, [grad, q, k, v, out], dropout_p, attn_mask)
    if not is_tensor(lse) or isinstance(lse, ScalarInput) or lse.dtype is not _dtype.float32 \
            or tuple(lse.shape) != tuple(q.shape[:3]):
        raise NotLowered("attention backward with this log-sum-exp")
    if not isinstance(is_causal, bool) or not (scale is None or type(scale) in (int, float)) \
            or tuple(grad.shape) != tuple(q.shape) or tuple(out.shape) != tuple(q.shape):
        raise NotLowered("attention backward with these arguments")
    return _extern(g, "attention_backward", backward, (grad, q, k, v, out, lse, dropout_p,
                                                       is_causal, attn_mask, scale), {})
