/* gkcu_rows.h: sgemm on a range of rows of C, so that one long product can
 * be launched as several short ones (the CUDA backend's slices, used where
 * lanes share the SMs: see lanes.h).  Same conventions as gkcu_sgemm.h.
 *
 * gkcu_sgemm_rows computes rows [r0, r1) of C = alpha * op(A) * op(B) +
 * beta * C, C being m x n, and touches no other row.  With A untransposed
 * those rows of op(A) are packed, and every algo of gkcu_sgemm.h runs on
 * them; with trans_a they are a strided slice, which only cuBLAS takes:
 * algo must then be GKCU_SGEMM_CUBLAS or GKCU_SGEMM_CUBLAS_TF32 (else
 * GKC_EINVALID_ARGUMENT).  algo AUTO is not accepted: the caller picks for
 * the whole product, so that every slice runs the same kernel.
 *
 * spmv needs no launcher of its own: a CSR row range [r0, r1) is row_ptr +
 * r0 with the same col_idx and values (scalar and vector read row_ptr as
 * absolute offsets), and y + r0.
 */
#ifndef GKCU_ROWS_H
#define GKCU_ROWS_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

int gkcu_sgemm_rows(gkcu_ctx *ctx, int algo, int32_t m, int32_t n, int32_t k, int32_t r0,
                    int32_t r1, float alpha, const float *a, int trans_a, const float *b,
                    int trans_b, float beta, float *c);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_ROWS_H */
