/* cpu_spmv.c: CSR sparse matrix times vector, split by merge path.
 *
 * The work is the merge of two sorted lists: the row ends row_ptr[1..rows]
 * and the nonzero indices 0..nnz-1, rows + nnz items in all.  Each thread
 * takes an equal stretch of that merged list, so a row of a million
 * nonzeros is shared out like any other work and a run of empty rows
 * costs one step each (Merrill & Garland, "Merge-based parallel sparse
 * matrix-vector multiplication", SC16).
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

typedef struct {
  int32_t rows;
  int64_t nnz;
  const int32_t *row_ptr, *col_idx;
  const float *values, *x;
  float alpha, beta;
  float *y;
} spmv_args;

/* How many row ends lie among the first d items of the merged list.  Row
 * end i goes before nonzero j when row_ptr[i+1] <= j: a row is finished as
 * soon as its last nonzero is, and empty rows go before the next nonzero. */
static int64_t rows_before(const spmv_args *a, int64_t d) {
  int64_t lo = d > a->nnz ? d - a->nnz : 0;
  int64_t hi = d < a->rows ? d : a->rows;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (a->row_ptr[mid + 1] <= d - mid - 1) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* One accumulator: rows are mostly short, where extra accumulators only
 * add a mispredicted remainder branch per row (measured: 1M rows of ~10
 * nonzeros ran 15-20% slower with two). */
static double dot(const spmv_args *a, int64_t lo, int64_t hi) {
  double s = 0;
  for (int64_t j = lo; j < hi; j++) s += (double)a->values[j] * a->x[a->col_idx[j]];
  return s;
}

static void write_row(const spmv_args *a, int64_t r, double sum) {
  double v = (double)a->alpha * sum;
  if (a->beta != 0) /* y may be uninitialised (or NaN) when beta == 0 */
    v += (double)a->beta * a->y[r];
  a->y[r] = (float)v;
}

/* Walks merged items [d0, d1): writes y for every row whose end it meets
 * and returns its share of the row it leaves unfinished. */
static carry_t walk(const spmv_args *a, int64_t d0, int64_t d1) {
  int64_t i = rows_before(a, d0), j = d0 - i;
  int64_t i_end = rows_before(a, d1), j_end = d1 - i_end;
  for (; i < i_end; i++) {
    int64_t row_end = a->row_ptr[i + 1];
    write_row(a, i, dot(a, j, row_end));
    j = row_end;
  }
  carry_t c = {i_end, 0.0};
  if (i_end < a->rows) c.sum = dot(a, j, j_end);
  return c;
}

static int spmv_threads(int64_t items, int nthreads) {
  int64_t t = nthreads > 0 ? nthreads : omp_get_max_threads();
  int64_t most = items / SPMV_MIN_PER_THREAD;
  if (t > most) t = most;
  if (t > SPMV_MAX_THREADS) t = SPMV_MAX_THREADS;
  return t < 1 ? 1 : (int)t;
}

/* Carries go in after every row has been written.  Consecutive threads
 * may carry parts of one long row: they are summed in double first, so the
 * row is rounded to float once more, not once per thread. */
static void add_carries(const spmv_args *a, const carry_t *carry, int count) {
  for (int t = 0; t < count;) {
    int64_t row = carry[t].row;
    double sum = 0;
    for (; t < count && carry[t].row == row; t++) sum += carry[t].sum;
    if (row < a->rows && sum != 0)
      a->y[row] = (float)((double)a->y[row] + (double)a->alpha * sum);
  }
}

void cpu_spmv(int32_t rows, int32_t cols, const int32_t *row_ptr,
              const int32_t *col_idx, const float *values, const float *x,
              float alpha, float beta, float *y, int nthreads) {
  (void)cols; /* x's length; col_idx is trusted to stay within it */
  spmv_args a = {rows, row_ptr[rows], row_ptr, col_idx, values, x, alpha, beta, y};
  int64_t items = (int64_t)rows + a.nnz;
  int t = spmv_threads(items, nthreads);
  if (t == 1) {
    walk(&a, 0, items); /* ends on the last row end: nothing carried */
    return;
  }
  carry_t carry[SPMV_MAX_THREADS];
  int used = 1;
#pragma omp parallel num_threads(t)
  {
    /* Split by the threads actually granted, which may be fewer. */
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t share = (items + nt - 1) / nt;
    int64_t d0 = id * share < items ? id * share : items;
    int64_t d1 = d0 + share < items ? d0 + share : items;
    carry[id] = walk(&a, d0, d1);
    if (id == 0) used = nt;
  }
  add_carries(&a, carry, used);
}
