/* gkcu_spmv.h: y = alpha * A * x + beta * y on the GPU, A in CSR.
 *
 * A is rows x cols with nnz entries: row_ptr holds rows + 1 int32 offsets
 * (row_ptr[0] = 0, row_ptr[rows] = nnz, non-decreasing), col_idx and
 * values hold nnz entries each (col_idx in [0, cols)); they may be NULL when
 * nnz == 0.  x holds cols floats, y rows floats.  y is not read when
 * beta == 0.  The structure is trusted: validate it on the host first.
 * Empty rows, all-empty matrices and rows of any length work.
 *
 * Algorithms (each a separate kernel, see NOTES.md):
 *   scalar    one thread per row
 *   vector    a group of 2..32 threads per row, summed with warp shuffles
 *             (width from the mean row length and the row count)
 *   balanced  merge-path: rows + nonzeros split evenly over threads and
 *             blocks, so one huge row or many empty rows cost no more than
 *             their share; partial rows are carried across threads (block
 *             scan) and across blocks (atomicAdd onto rows a partition
 *             pass pre-scaled); on large matrices a tile whose rows are
 *             all short is summed row by row by groups of lanes, and only
 *             the other tiles are walked, by a second launch
 *   cusparse  cusparseSpMV (CSR, default algorithm), its buffer in scratch
 *   auto      gkcu_spmv_pick()'s choice
 *
 * Float64 operands (gkcu_spmv_typed): A's values float32 or float64, x and
 * y float32 or float64, in any of the four pairs.  Each row is summed in
 * double, every product fused into the sum, and y[r] is rounded to its
 * dtype once, from fma(beta, y[r], alpha*sum) in double.  One kernel,
 * templated on both dtypes: one thread per row (algo scalar) or a group
 * of lanes per row (every other algo: the vector rung's width rule, or 32
 * lanes when the longest row is long, > 1024 and > 32x the mean, where
 * the float32 auto rule would have picked balanced or cuSPARSE, which
 * have no float64 kernels here: a long row costs its length / 32 steps).
 *
 * Implemented in: gkcu_spmv.cu, gkcu_spmv_balanced.cu, gkcu_spmv_typed.cu
 */
#ifndef GKCU_SPMV_H
#define GKCU_SPMV_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GKCU_SPMV_AUTO = 0,
  GKCU_SPMV_SCALAR,
  GKCU_SPMV_VECTOR,
  GKCU_SPMV_BALANCED,
  GKCU_SPMV_CUSPARSE,
  GKCU_SPMV_NALGO
} gkcu_spmv_algo;

const char *gkcu_spmv_algo_name(int algo);
int gkcu_spmv_algo_parse(const char *s); /* NULL means auto; -1 if unknown */
/* What auto runs: balanced, the one algo whose time does not depend on
 * how the nonzeros are spread over rows. */
int gkcu_spmv_pick(const gkcu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz);
/* A better choice when the caller knows the longest row (e.g. from row_ptr
 * on the host before uploading it): scalar, vector, balanced, or cuSPARSE
 * for large skewed matrices; the rule and its figures are in gkcu_spmv.cu. */
int gkcu_spmv_pick_hint(const gkcu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz,
                        int32_t max_row);

int gkcu_spmv(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
              const int32_t *row_ptr, const int32_t *col_idx, const float *values,
              float alpha, const float *x, float beta, float *y);

/* Plans: what the balanced algo works out from row_ptr alone (the merge-path
 * tile coordinates), made once for a matrix that stays on the device.
 * gkcu_spmv_plan_bytes: the device bytes a plan for rows x nnz needs (0 when
 * the arguments are invalid or the matrix too large).
 * gkcu_spmv_plan: enqueues the partition kernel on ctx's stream, writing the
 * plan into plan (device memory of plan_bytes, 16-byte aligned); row_ptr must
 * already be on the device (or enqueued before it on the same stream).
 * gkcu_spmv_planned: gkcu_spmv, but balanced (also by auto) reads its tile
 * coordinates from plan instead of searching for them; the other algos ignore
 * it, and plan NULL is gkcu_spmv.  The plan must have been made from this
 * row_ptr with these rows and nnz; it is only read, so several calls may use
 * it at once.  Above 4M path items (rows + nnz) split rows (summed by
 * several tiles) still get beta*y in a short kernel per call, without the
 * search; below, balanced is one launch with or without a plan, and its
 * result the same bits every run (no atomics). */
size_t gkcu_spmv_plan_bytes(const gkcu_ctx *ctx, int32_t rows, int64_t nnz);
int gkcu_spmv_plan(gkcu_ctx *ctx, int32_t rows, int64_t nnz, const int32_t *row_ptr, void *plan);
int gkcu_spmv_planned(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
                      const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                      float alpha, const float *x, float beta, float *y, const void *plan);

/* Float64 operands (above): values float64 when values_f64, else float32;
 * x and y float64 when xy_f64, else float32; float64 arrays 8-byte
 * aligned.  max_row: the longest row, or -1 when not known.  The algo
 * that runs is gkcu_spmv_typed_algo(algo): GKCU_SPMV_SCALAR or
 * GKCU_SPMV_VECTOR.  Enqueues and returns; errors as gkcu_spmv's. */
int gkcu_spmv_typed_algo(int algo);
int gkcu_spmv_typed(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
                    const int32_t *row_ptr, const int32_t *col_idx, const void *values,
                    int values_f64, double alpha, const void *x, int xy_f64, double beta, void *y,
                    int32_t max_row);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_SPMV_H */
