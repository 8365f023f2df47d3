/* A large matrix product cut into pieces, each piece one call of the BLAS's own GEMM
   (NumPy's OpenBLAS, reached through the address of its `cblas_sgemm` / `cblas_dgemm`),
   so that the C workers (`workers.c`) share a product between cores with no Python and no
   GIL between pieces.

   Why not the intra-op pool: its Python thread sleeps between pieces, and on a virtual
   machine a sleeping thread's CPU may be halted: waking it took 1-8 ms under load (the
   thread counted as runnable all that while), as long as the product's own piece. The C
   workers watch for the next job for a while after each one, so the pieces of the products
   of one training step start at once.

   The cut is the caller's (`_parallel._gemm_pieces`): it depends on the shapes only, never
   on the thread count, so each element is summed in the same order at any thread count.
   Rows (axis 1) or columns (axis 2) of the result are cut; a deep product (axis 3) is cut
   along the shared dimension, piece 0 writing its product to `c`, piece p > 0 its own to
   `rest + (p - 1) * m * ldc`, which the caller adds to `c` in order. Operands are
   row-major with leading dimensions `lda`, `ldb` (`ta`, `tb` nonzero: stored transposed),
   the result row-major with `ldc`. A row of `n` values `bias` (or null) is added to each row
   of a row or column piece's result once its product is written, while it is in the cache:
   the product rounded, then the sum, as a separate addition would give. */
#include <stdint.h>

#define ROW_MAJOR 101
#define NO_TRANS 111
#define TRANS 112

/* CBLAS's GEMM, with 64-bit integers (an OpenBLAS built for them) or 32-bit ones. */
#define GEMM_TYPES(T, S)                                                                    \
typedef void (*S##_wide)(int, int, int, int64_t, int64_t, int64_t, T, const T *, int64_t,   \
                         const T *, int64_t, T, T *, int64_t);                              \
typedef void (*S##_narrow)(int, int, int, int32_t, int32_t, int32_t, T, const T *, int32_t, \
                           const T *, int32_t, T, T *, int32_t);

#define GEMM_PIECES(T, S)                                                                   \
void fg_gemm_pieces_##S(void *gemm, int64_t wide, const T *a, const T *b, T *c, T *rest,   \
                        const T *bias,                                                      \
                        int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,          \
                        int64_t ldc,                                                        \
                        int64_t ta, int64_t tb, int64_t axis, int64_t pieces,               \
                        int64_t first, int64_t last) {                                      \
    const int64_t size = axis == 1 ? m : axis == 2 ? n : k;                                 \
    for (int64_t p = first; p < last; p++) {                                                \
        const int64_t i = size * p / pieces, j = size * (p + 1) / pieces;                   \
        const T *pa = a, *pb = b;                                                           \
        T *pc = c;                                                                          \
        int64_t pm = m, pn = n, pk = k;                                                     \
        if (axis == 1) {        /* rows i..j of A and of the result */                      \
            pa += ta ? i : i * lda;                                                         \
            pc += i * ldc;                                                                  \
            pm = j - i;                                                                     \
        } else if (axis == 2) { /* columns i..j of B and of the result */                   \
            pb += tb ? i * ldb : i;                                                         \
            pc += i;                                                                        \
            pn = j - i;                                                                     \
        } else {                /* columns i..j of A, rows i..j of B, a result of its own */ \
            pa += ta ? i * lda : i;                                                         \
            pb += tb ? i : i * ldb;                                                         \
            pc = p ? rest + (p - 1) * m * ldc : c;                                          \
            pk = j - i;                                                                     \
        }                                                                                   \
        const int opa = ta ? TRANS : NO_TRANS, opb = tb ? TRANS : NO_TRANS;                 \
        if (wide)                                                                           \
            ((S##_wide)gemm)(ROW_MAJOR, opa, opb, pm, pn, pk, (T)1, pa, lda, pb, ldb, (T)0, \
                             pc, ldc);                                                      \
        else                                                                                \
            ((S##_narrow)gemm)(ROW_MAJOR, opa, opb, (int32_t)pm, (int32_t)pn, (int32_t)pk,  \
                               (T)1, pa, (int32_t)lda, pb, (int32_t)ldb, (T)0, pc,          \
                               (int32_t)ldc);                                               \
        if (bias && axis != 3) {                                                            \
            const T *pbias = axis == 2 ? bias + i : bias;                                   \
            for (int64_t r = 0; r < pm; r++)                                                \
                for (int64_t col = 0; col < pn; col++) pc[r * ldc + col] += pbias[col];     \
        }                                                                                   \
    }                                                                                       \
}

GEMM_TYPES(float, f32)
GEMM_TYPES(double, f64)
GEMM_PIECES(float, f32)
GEMM_PIECES(double, f64)
