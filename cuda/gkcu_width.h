/* gkcu_width.h: how many threads sum one row of a CSR product.
 *
 * Every row-parallel product of cuda/ (the vector spmv rung, the float64
 * spmv, the solver's fused product, the AMG cycle's operators, the
 * partitioned products) takes its width from here, so that a rule measured
 * once holds everywhere.  They had three rules of their own: the solver and
 * the AMG cycle took the smallest power of two >= the mean row (32 lanes on
 * the 27-point stencil, 5 of them idle and a 5-step shuffle per row), the
 * partitioned product the largest <= it (16), where the vector rung's lab
 * runs (bench/RESULTS.md, spmv) had measured 4 as the fastest: 3.15 TB/s
 * on the 27-point stencil, 1.19x cuSPARSE.
 */
#ifndef GKCU_WIDTH_H
#define GKCU_WIDTH_H

/* The vector width: the power of two nearest (in log scale) to the larger of
 *   - mean row length / 6: on big matrices a thread should take several
 *     nonzeros of its row (5-point stencil: 2; 27-point: 4), and
 *   - device threads / rows: small matrices need wide groups to fill the
 *     chip at all (bcsstk13, 2003 rows: 32),
 * clamped to 2..32. */
static inline int gkcu__vector_width(int sm_count, long long rows, long long nnz) {
  if (rows < 1) return 2;
  double by_len = (double)nnz / (double)rows / 6.0;
  double by_fill = (double)(sm_count > 0 ? sm_count : 1) * 2048.0 / (double)rows;
  double want = by_len > by_fill ? by_len : by_fill;
  int w = 2;
  while (w < 32 && want > w * 1.41421356) w *= 2;
  return w;
}

/* Threads per row for a product whose longest row is max_row (< 0: not
 * known): one thread per row where every row is short and there are many
 * (max_row <= 8, 2^18 rows or more: a warp then reads 32 consecutive
 * rows' entries, the scalar rung's rule), else the vector width. */
static inline int gkcu__row_width(int sm_count, long long rows, long long nnz, long long max_row) {
  if (max_row >= 0 && max_row <= 8 && rows >= (1 << 18)) return 1;
  return gkcu__vector_width(sm_count, rows, nnz);
}

#endif
