/* cuda_slice.c: see cuda_slice.h. */
#include "cuda_slice.h"

#include "gkcu_rows.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"

int32_t slice_sgemm_rows(const slice_budget *sb, int32_t m, int32_t n, int32_t k) {
  double per_row = 2.0 * (double)n * (double)k;
  if (!(sb->flops > 0) || per_row * m <= sb->flops) return m;
  double r = sb->flops / per_row;
  /* Whole multiples of the minimum: slices of equal shape reuse one kernel
   * configuration (and cuBLAS's heuristics' choice). */
  int32_t rows = r < SLICE_MIN_ROWS ? SLICE_MIN_ROWS : (int32_t)(r / SLICE_MIN_ROWS) * SLICE_MIN_ROWS;
  return rows < m ? rows : m;
}

int32_t slice_spmv_rows(const slice_budget *sb, int32_t rows, int32_t cols, int64_t nnz) {
  (void)cols;
  /* values, col_idx and a gathered x per entry; row_ptr and y per row */
  double total = 12.0 * (double)nnz + 12.0 * (double)rows;
  if (!(sb->bytes > 0) || total <= sb->bytes) return rows;
  double r = (double)rows * sb->bytes / total;
  int32_t per = r < 256 ? 256 : (int32_t)r; /* below a few warps' worth, launches cost more */
  return per < rows ? per : rows;
}

int slice_sgemm(gkcu_ctx *ctx, const slice_budget *sb, int *algo, int auto_picked, int32_t m,
                int32_t n, int32_t k, float alpha, const float *a, int trans_a, const float *b,
                int trans_b, float beta, float *c, int *nslices) {
  int32_t per = slice_sgemm_rows(sb, m, n, k);
  int cublas = *algo == GKCU_SGEMM_CUBLAS || *algo == GKCU_SGEMM_CUBLAS_TF32;
  if (per < m && trans_a && !cublas) {
    if (auto_picked)
      *algo = GKCU_SGEMM_CUBLAS;
    else
      per = m; /* the caller's algo over its one best: run whole */
  }
  *nslices = 1;
  if (per >= m) return gkcu_sgemm(ctx, *algo, m, n, k, alpha, a, trans_a, b, trans_b, beta, c);
  int count = 0;
  for (int32_t r0 = 0; r0 < m; r0 += per) {
    int32_t r1 = m - r0 > per ? r0 + per : m;
    int rc = gkcu_sgemm_rows(ctx, *algo, m, n, k, r0, r1, alpha, a, trans_a, b, trans_b, beta, c);
    if (rc) return rc;
    count++;
  }
  *nslices = count;
  return 0;
}

int slice_spmv(gkcu_ctx *ctx, const slice_budget *sb, int algo, int32_t rows, int32_t cols,
               int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx, const float *values,
               float alpha, const float *x, float beta, float *y, const void *plan, int *nslices) {
  int32_t per = slice_spmv_rows(sb, rows, cols, nnz);
  *nslices = 1;
  if (per >= rows || (algo != GKCU_SPMV_SCALAR && algo != GKCU_SPMV_VECTOR))
    return gkcu_spmv_planned(ctx, algo, rows, cols, nnz, row_ptr, col_idx, values, alpha, x, beta,
                             y, plan);
  int count = 0;
  for (int32_t r0 = 0; r0 < rows; r0 += per) {
    int32_t n_r = rows - r0 > per ? per : rows - r0;
    /* The slice's nonzeros are not known on the host (row_ptr may be
     * resident); the mean only tunes the vector width, and any value >= 1
     * (when the matrix has entries) is a valid argument. */
    int64_t est = nnz ? nnz / rows * n_r + 1 : 0;
    if (est > nnz) est = nnz;
    int rc = gkcu_spmv(ctx, algo, n_r, cols, est, row_ptr + r0, col_idx, values, alpha, x, beta,
                       y + r0);
    if (rc) return rc;
    count++;
  }
  *nslices = count;
  return 0;
}

int slice_spmv_typed(gkcu_ctx *ctx, const slice_budget *sb, int algo, int32_t rows, int32_t cols,
                     int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx,
                     const void *values, int values_f64, double alpha, const void *x, int xy_f64,
                     double beta, void *y, int32_t max_row, int *nslices) {
  int32_t per = slice_spmv_rows(sb, rows, cols, nnz);
  *nslices = 1;
  if (per >= rows || (max_row > 1024 && max_row > 32.0 * (double)nnz / rows))
    return gkcu_spmv_typed(ctx, algo, rows, cols, nnz, row_ptr, col_idx, values, values_f64, alpha,
                           x, xy_f64, beta, y, max_row);
  size_t es = xy_f64 ? 8 : 4;
  int count = 0;
  for (int32_t r0 = 0; r0 < rows; r0 += per) {
    int32_t n_r = rows - r0 > per ? per : rows - r0;
    /* as slice_spmv: the mean only tunes the width */
    int64_t est = nnz ? nnz / rows * n_r + 1 : 0;
    if (est > nnz) est = nnz;
    int rc = gkcu_spmv_typed(ctx, algo, n_r, cols, est, row_ptr + r0, col_idx, values, values_f64,
                             alpha, x, xy_f64, beta, (char *)y + (size_t)r0 * es, max_row);
    if (rc) return rc;
    count++;
  }
  *nslices = count;
  return 0;
}
