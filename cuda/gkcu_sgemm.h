/* gkcu_sgemm.h: C = alpha * op(A) * op(B) + beta * C on the GPU, float32,
 * row-major, with cblas row-major semantics.
 *
 * op(A) is m x k: A is stored m x k (row length k), or k x m (row length m)
 * when trans_a is nonzero and op(A) = A^T.  op(B) is k x n: B is stored
 * k x n, or n x k when trans_b.  C is m x n.  Matrices are packed (the
 * leading dimension is the stored row length).  C is not read when
 * beta == 0, so NaNs in it do not propagate.  Every size >= 1 works; no
 * alignment is required (16-byte aligned rows take the vector path).
 *
 * Algorithms, slowest first (each a separate kernel, see NOTES.md):
 *   naive        one thread per element of C
 *   smem         32x32 shared-memory tiles, zero-padded at the edges
 *   regblock     128x256 block tiles with 8x16 outputs per thread in
 *                registers (smaller tiles, 8x8, and split-K when the output
 *                has too few tiles to fill the GPU), double-buffered
 *                shared memory, 128-bit loads where the layout allows
 *   cublas       cuBLAS, CUBLAS_COMPUTE_32F (true FP32, no TF32)
 *   cublas_tf32  cuBLAS with TF32 tensor cores: ~1e-3 relative error;
 *                only when a caller names it (auto never picks it)
 *   tf32x3       tensor cores at float32 accuracy: each operand split into
 *                two TF32 parts, three TF32 products accumulated in float32
 *                (gkcu_sgemm_tc.h); tile shape and K split per shape.
 *                Inputs must be finite (an infinity can give NaN where
 *                float32 gives inf).
 *   auto         gkcu_sgemm_pick()'s choice: tf32x3 or cublas
 */
#ifndef GKCU_SGEMM_H
#define GKCU_SGEMM_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GKCU_SGEMM_AUTO = 0,
  GKCU_SGEMM_NAIVE,
  GKCU_SGEMM_SMEM,
  GKCU_SGEMM_REGBLOCK,
  GKCU_SGEMM_CUBLAS,
  GKCU_SGEMM_CUBLAS_TF32,
  GKCU_SGEMM_TF32X3, /* after the others: the daemon's algo indices stay */
  GKCU_SGEMM_NALGO
} gkcu_sgemm_algo;

/* "naive", ..., "auto"; NULL when algo is out of range. */
const char *gkcu_sgemm_algo_name(int algo);
/* The algo named s (NULL means auto), or -1. */
int gkcu_sgemm_algo_parse(const char *s);
/* What auto runs for this shape: cublas or tf32x3, whichever was faster
 * there in the measured tables (never plain TF32). */
int gkcu_sgemm_pick(const gkcu_ctx *ctx, int32_t m, int32_t n, int32_t k);

int gkcu_sgemm(gkcu_ctx *ctx, int algo, int32_t m, int32_t n, int32_t k,
               float alpha, const float *a, int trans_a, const float *b,
               int trans_b, float beta, float *c);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_SGEMM_H */
