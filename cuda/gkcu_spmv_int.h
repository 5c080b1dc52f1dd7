/* gkcu_spmv_int.h: what the spmv files share (C++, cuda/ only, never
 * installed): gkcu_spmv.cu has the ladder's first rungs, cuSPARSE, the
 * argument checks and the public entry points; gkcu_spmv_balanced.cu the
 * merge-path rung (kernels, shapes, plans and its lab entry points).
 *
 * Implemented in: gkcu_spmv_balanced.cu (gkcu_spmv_typed.cu, float64
 * operands, uses vector_width and nothing else)
 */
#ifndef GKCU_SPMV_INT_H
#define GKCU_SPMV_INT_H

#include <limits.h>

#include "gkcu_internal.h"
#include "gkcu_width.h"

namespace gkspmv {

/* y[r] = alpha*s (+ beta*y[r] only when beta != 0: y is not read otherwise). */
__device__ __forceinline__ void put_y(float *y, int r, float alpha, float s, float beta) {
  y[r] = beta == 0.0f ? alpha * s : fmaf(beta, y[r], alpha * s);
}

/* 0, or the context's error for an spmv argument the launchers refuse.
 * Inline here, so that neither file calls into the other for it (the
 * balanced file sits below gkcu_spmv.cu, which calls its rung). */
inline int check_args(gkcu_ctx *ctx, int rows, int cols, long long nnz, const int *rp, const int *ci,
                      const float *v, const float *x, const float *y) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, rows >= 1 && cols >= 1);
  GKCU__CHECK_ARG(ctx, nnz >= 0 && nnz <= INT_MAX);
  GKCU__CHECK_ARG(ctx, rp != NULL && x != NULL && y != NULL);
  GKCU__CHECK_ARG(ctx, nnz == 0 || (ci != NULL && v != NULL));
  return 0;
}

/* The vector rung's group width (also the float64 kernels'): gkcu_width.h. */
inline int vector_width(int sm_count, int rows, long long nnz) {
  return gkcu__vector_width(sm_count, rows, nnz);
}

/* The balanced shape the public entry points use for rows x nnz (a plan
 * made with it is only good for it). */
int balanced_shape(int rows, long long nnz);

/* y = alpha A x + beta y with the given shape; plan: coords made by
 * gkcu_spmv_plan for this shape (NULL: partition now). */
int run_balanced(gkcu_ctx *ctx, int shape, int rows, long long nnz, const int *rp, const int *ci, const float *v,
                 float alpha, const float *x, float beta, float *y, const int4 *plan = NULL);

}  // namespace gkspmv

#endif /* GKCU_SPMV_INT_H */
