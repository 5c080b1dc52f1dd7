/* gpu_util.h: what the GPU tests and the GPU benchmark share.
 *
 * - gpu_require_device(): exit 77 (ctest: skipped) when no CUDA device is
 *   usable, so a machine without a GPU never reports these tests passed.
 * - a seeded generator (splitmix64) and the seed the run uses, printed.
 * - CSR helpers: a private Matrix Market reader (the shared gkcio reader,
 *   client/mtx.c, did not exist yet when this was written; the struct has
 *   the same fields as mtx_csr so switching is a rename), synthetic
 *   matrices, and a double-precision reference spmv.
 */
#ifndef GPU_UTIL_H
#define GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Exits 77 with a message when cudaGetDeviceCount finds no device. */
void gpu_require_device(void);

/* --- random numbers ---------------------------------------------------------- */

typedef struct {
  uint64_t s;
} gpu_rng;

/* The run's seed: $GKC_TEST_SEED if set, else from the clock; printed. */
uint64_t gpu_seed(const char *who);
uint64_t gpu_rng_next(gpu_rng *r);
double gpu_rng_unit(gpu_rng *r);                 /* [0, 1) */
float gpu_rng_float(gpu_rng *r, float lo, float hi);
uint32_t gpu_rng_below(gpu_rng *r, uint32_t n);  /* [0, n) */

/* --- CSR ------------------------------------------------------------------------ */

typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  int32_t *row_ptr; /* rows + 1, malloc'd */
  int32_t *col_idx; /* nnz, malloc'd (NULL when nnz == 0) */
  float *values;    /* nnz, malloc'd (NULL when nnz == 0) */
} gpu_csr;

void gpu_csr_free(gpu_csr *m);
/* Allocates the arrays for rows and nnz; 0 or -1. */
int gpu_csr_alloc(gpu_csr *m, int32_t rows, int32_t cols, int64_t nnz);
/* Sorts each row's entries by column (values follow). */
void gpu_csr_sort(gpu_csr *m);

/* Reads a coordinate Matrix Market file (real, integer or pattern; general,
 * symmetric or skew-symmetric) into CSR with sorted columns.  Pattern
 * entries get value 1.  Returns 0, or -1 with a message in err. */
/* ref = alpha op(A) op(B) + beta C0 in double (row-major, cblas semantics;
 * C0 not read when beta is 0); mag = the sum of |terms| of each entry, the
 * scale its rounding error is measured against. */
void gpu_sgemm_reference(int m, int n, int k, int ta, int tb, float alpha, float beta, const float *a,
                         const float *b, const float *c0, double *ref, double *mag);

/* n floats uniform in [lo, hi); NULL only when out of memory. */
float *gpu_host_random(gpu_rng *g, size_t n, float lo, float hi);

/* How far a float32 sgemm result is from its float64 reference.  worst:
 * max |out - ref| / mag per element (where it is: worst_at; NaN counts as
 * infinite).  frob: the normwise error relative to the norm of the
 * epilogue's two terms, |alpha A B| + |beta C0| per element (c0 not read
 * when beta is 0): where they cancel (a 1x1x1 product, say), float32
 * rounding of the two is the floor, and a plain ||ref|| would ask more
 * than float32 can give.  frob_ref: the normwise error relative to ||ref||
 * itself (the stricter measure test_gpu_sgemm holds its FP32 algos to). */
typedef struct {
  double worst, frob;
  size_t worst_at;
  double frob_ref;
} gpu_sgemm_err;
gpu_sgemm_err gpu_sgemm_errors(const float *out, const double *ref, const double *mag, size_t nc, float beta,
                               const float *c0);
/* Prints the first few elements over tol (scaled as above) and how many. */
void gpu_sgemm_show_bad(const float *out, const double *ref, const double *mag, int m, int n, double tol);

/* The sgemm accuracy inputs, fresh from g: "uniform" U(-1,1), "positive"
 * U(0,1) (no cancellation: biases show), "cancellation" (the second half
 * of each dot product undoes the first to 2^-10).  *a is m x k, *b k x n,
 * row-major; 0, or -1 when out of memory. */
int gpu_sgemm_accuracy_inputs(gpu_rng *g, const char *what, int m, int n, int k, float **a, float **b);

int gpu_mtx_read(const char *path, gpu_csr *out, char *err, size_t errlen);

/* 2-D 5-point Laplacian on an n x n grid (n*n rows). */
int gpu_csr_stencil2d(gpu_csr *m, int32_t n);
/* 3-D 27-point stencil on an n x n x n grid, random values. */
int gpu_csr_stencil3d(gpu_csr *m, int32_t n, uint64_t seed);
/* Power-law rows: lengths from a truncated Pareto law in [1, max_row]
 * (one row of exactly max_row), columns drawn R-MAT style (skewed towards
 * a few hot columns, then scattered by a fixed permutation), sorted within
 * each row; about target_nnz entries, random values in [-1, 1). */
int gpu_csr_powerlaw(gpu_csr *m, int64_t target_nnz, int32_t max_row, uint64_t seed);

/* ||b - A x|| / ||b|| in long double (0 when b is 0), A's values taken from
 * vals64 when it is given, else A's own; *mag, when mag is given,
 * || |A| |x| || / ||b||, the scale of what rounding x costs. */
double gpu_csr_residual(const gpu_csr *A, const double *vals64, const double *b, const double *x,
                        double *mag);

/* A's values in float64, off float32 by a relative 1e-6 that is the same
 * for a_ij and a_ji (symmetric stays symmetric), malloc'd: a solve that
 * read them as float32 would solve another system, ~1e-8 away. */
double *gpu_csr_values64_near(const gpu_csr *A);

/* y = alpha*A*x + beta*y in double; mag[r] = |alpha|*sum|a*x| + |beta*y|
 * (the error scale of row r).  y_in may be NULL when beta == 0. */
void gpu_spmv_ref(const gpu_csr *m, double alpha, const float *x, double beta, const float *y_in,
                  double *y, double *mag);

#endif
