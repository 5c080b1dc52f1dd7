/* cpu_spmv.c: CSR sparse matrix times vector, split by merge path.
 *
 * The work is the merge of two sorted lists: the row ends row_ptr[1..rows]
 * and the nonzero indices 0..nnz-1, rows + nnz items in all.  Each thread
 * takes an equal stretch of that merged list, so a row of a million
 * nonzeros is shared out like any other work and a run of empty rows
 * costs one step each (Merrill & Garland, "Merge-based parallel sparse
 * matrix-vector multiplication", SC16).  The walk itself is in
 * cpu_spmv_walk.inc, once per pair of element types (float32 or float64
 * values, float32 or float64 vectors).
 */
#include "cpu_kernels.h"

#include <omp.h>

enum {
  /* rows + nnz per thread below which waking a thread costs more than it
   * saves: rows + nnz < 32K runs on one thread. */
  SPMV_MIN_PER_THREAD = 16384,
  /* Bounds the per-thread carries kept on the stack. */
  SPMV_MAX_THREADS = 256
};

/* A row a thread began but whose end another thread consumed. */
typedef struct {
  int64_t row; /* rows when there is none */
  double sum;  /* the thread's share of the row's dot product */
} carry_t;

/* How many row ends lie among the first d items of the merged list.  Row
 * end i goes before nonzero j when row_ptr[i+1] <= j: a row is finished as
 * soon as its last nonzero is, and empty rows go before the next nonzero. */
static int64_t rows_before(const int32_t *row_ptr, int32_t rows, int64_t nnz, int64_t d) {
  int64_t lo = d > nnz ? d - nnz : 0;
  int64_t hi = d < rows ? d : rows;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (row_ptr[mid + 1] <= d - mid - 1) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int spmv_threads(int64_t items, int nthreads) {
  int64_t t = nthreads > 0 ? nthreads : omp_get_max_threads();
  int64_t most = items / SPMV_MIN_PER_THREAD;
  if (t > most) t = most;
  if (t > SPMV_MAX_THREADS) t = SPMV_MAX_THREADS;
  return t < 1 ? 1 : (int)t;
}

#define SPMV_VT float
#define SPMV_XT float
#define SPMV_SUF ff
#include "cpu_spmv_walk.inc"
#undef SPMV_VT
#undef SPMV_XT
#undef SPMV_SUF

#define SPMV_VT float
#define SPMV_XT double
#define SPMV_SUF fd
#include "cpu_spmv_walk.inc"
#undef SPMV_VT
#undef SPMV_XT
#undef SPMV_SUF

#define SPMV_VT double
#define SPMV_XT float
#define SPMV_SUF df
#include "cpu_spmv_walk.inc"
#undef SPMV_VT
#undef SPMV_XT
#undef SPMV_SUF

#define SPMV_VT double
#define SPMV_XT double
#define SPMV_SUF dd
#include "cpu_spmv_walk.inc"
#undef SPMV_VT
#undef SPMV_XT
#undef SPMV_SUF

void cpu_spmv(int32_t rows, int32_t cols, const int32_t *row_ptr,
              const int32_t *col_idx, const float *values, const float *x,
              float alpha, float beta, float *y, int nthreads) {
  (void)cols; /* x's length; col_idx is trusted to stay within it */
  args_ff a = {rows, row_ptr[rows], row_ptr, col_idx, values, x, alpha, beta, y};
  run_ff(&a, nthreads);
}

void cpu_spmv_typed(int32_t rows, int32_t cols, const int32_t *row_ptr, const int32_t *col_idx,
                    const void *values, int values_f64, const void *x, int vec_f64, double alpha,
                    double beta, void *y, int nthreads) {
  (void)cols;
  int64_t nnz = row_ptr[rows];
  if (!values_f64 && !vec_f64) {
    args_ff a = {rows, nnz, row_ptr, col_idx, values, x, alpha, beta, y};
    run_ff(&a, nthreads);
  } else if (!values_f64) {
    args_fd a = {rows, nnz, row_ptr, col_idx, values, x, alpha, beta, y};
    run_fd(&a, nthreads);
  } else if (!vec_f64) {
    args_df a = {rows, nnz, row_ptr, col_idx, values, x, alpha, beta, y};
    run_df(&a, nthreads);
  } else {
    args_dd a = {rows, nnz, row_ptr, col_idx, values, x, alpha, beta, y};
    run_dd(&a, nthreads);
  }
}
