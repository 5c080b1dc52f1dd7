/* cuda_slice.h: long bulk kernels cut into short launches.
 *
 * Where the two lanes share every SM (no green contexts, lanes.h), a
 * latency-lane kernel can start only when an SM frees up, and a block that
 * runs is never preempted: one 20 ms sgemm holds the tiny requests for up
 * to 20 ms whatever their stream's priority.  So the bulk lane launches its
 * long sgemm and spmv as slices of about --slice-us each, by the backend's
 * napkin rates (cost_rates: flops and bytes per microsecond), and the
 * latency lane's blocks, at the higher priority, get the SMs between two
 * slices.
 *
 *   sgemm: row blocks of C, at least SLICE_MIN_ROWS rows (smaller blocks
 *          waste most of a tile); a transposed A goes through cuBLAS, the
 *          one algo that takes its strided rows (an explicitly named other
 *          algo is then run whole).
 *   spmv:  row ranges of about equal bytes, with the scalar or vector
 *          kernel; a matrix with a long row (auto picks balanced or
 *          cuSPARSE, or the caller named them) is run whole, since a row
 *          range cannot bound the time of one huge row.
 *
 * The slices run on one stream in order, so the result is the same as one
 * launch's up to the float rounding of the kernel chosen.
 */
#ifndef CUDA_SLICE_H
#define CUDA_SLICE_H

#include <stdint.h>

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLICE_MIN_ROWS 32

typedef struct {
  double flops; /* one slice's work: --slice-us times the rates */
  double bytes;
} slice_budget;

/* Rows of C per slice for an m x n x k sgemm (m when one launch fits). */
int32_t slice_sgemm_rows(const slice_budget *sb, int32_t m, int32_t n, int32_t k);
/* Rows per slice for an spmv of rows x cols with nnz entries. */
int32_t slice_spmv_rows(const slice_budget *sb, int32_t rows, int32_t cols, int64_t nnz);

/* sgemm with *algo (resolved, never AUTO) in slices; *algo becomes what ran
 * (cublas for a transposed A whose algo was auto-picked: auto_picked).
 * *nslices: launches made (1: run whole).  0 or a gkc error, message in ctx. */
int slice_sgemm(gkcu_ctx *ctx, const slice_budget *sb, int *algo, int auto_picked, int32_t m,
                int32_t n, int32_t k, float alpha, const float *a, int trans_a, const float *b,
                int trans_b, float beta, float *c, int *nslices);

/* spmv with algo (resolved) in slices when it is scalar or vector; plan as
 * for gkcu_spmv_planned (used only when run whole). */
int slice_spmv(gkcu_ctx *ctx, const slice_budget *sb, int algo, int32_t rows, int32_t cols,
               int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx, const float *values,
               float alpha, const float *x, float beta, float *y, const void *plan, int *nslices);

/* The same for gkcu_spmv_typed (float64 operands), in row slices
 * whatever the algo (it runs scalar or vector), unless a row is long
 * (max_row > 1024 and > 32x the mean: run whole, as above). */
int slice_spmv_typed(gkcu_ctx *ctx, const slice_budget *sb, int algo, int32_t rows, int32_t cols,
                     int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx,
                     const void *values, int values_f64, double alpha, const void *x, int xy_f64,
                     double beta, void *y, int32_t max_row, int *nslices);

#ifdef __cplusplus
}
#endif

#endif
