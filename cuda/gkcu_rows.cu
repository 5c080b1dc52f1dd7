/* gkcu_rows.cu: see gkcu_rows.h. */
#include "gkcu_internal.h"
#include "gkcu_rows.h"
#include "gkcu_sgemm.h"

extern "C" int gkcu_sgemm_rows(gkcu_ctx *ctx, int algo, int32_t m, int32_t n, int32_t k, int32_t r0,
                               int32_t r1, float alpha, const float *a, int trans_a, const float *b,
                               int trans_b, float beta, float *c) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, m >= 1 && n >= 1 && k >= 1);
  GKCU__CHECK_ARG(ctx, r0 >= 0 && r0 < r1 && r1 <= m);
  GKCU__CHECK_ARG(ctx, a != NULL && b != NULL && c != NULL);
  GKCU__CHECK_ARG(ctx, algo > GKCU_SGEMM_AUTO && algo < GKCU_SGEMM_NALGO);
  const int32_t rows = r1 - r0;
  float *crow = c + (size_t)r0 * n;
  if (!trans_a) /* rows r0.. of A are packed: any algo */
    return gkcu_sgemm(ctx, algo, rows, n, k, alpha, a + (size_t)r0 * k, 0, b, trans_b, beta, crow);
  if (algo != GKCU_SGEMM_CUBLAS && algo != GKCU_SGEMM_CUBLAS_TF32)
    return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT,
                      "sgemm rows of a transposed A: only cublas takes a strided A");
  /* Column-major view, as in gkcu_sgemm.cu: C^T (n x m, ld n) = op(B)^T op(A)^T.
   * A is stored k x m (row length m): op(A)^T is that matrix, and rows
   * r0..r1 of op(A) are its columns r0..r1, i.e. the column-major m x k
   * matrix (ld m) starting r0 elements in, transposed. */
  cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = trans_b ? k : n;
  cublasComputeType_t ct =
      algo == GKCU_SGEMM_CUBLAS_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  GKCU__TRY_CUBLAS(ctx, cublasGemmEx(ctx->cublas, opb, CUBLAS_OP_T, n, rows, k, &alpha, b, CUDA_R_32F,
                                     ldb, a + r0, CUDA_R_32F, m, &beta, crow, CUDA_R_32F, n, ct,
                                     CUBLAS_GEMM_DEFAULT));
  return 0;
}
