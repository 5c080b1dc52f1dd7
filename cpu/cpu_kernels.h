/* cpu_kernels.h: the CPU backend's kernels, usable on their own.
 *
 * Inputs are validated by the caller (dimensions >= 1, CSR structure sound,
 * sizes consistent): these functions trust their arguments.  Every pointer
 * is aligned to its element type (4 bytes, 8 for double).  Matrices are row-major.  nthreads <= 0 means "as many
 * as the machine has"; small inputs use fewer threads on their own.
 *
 * Implemented in: cpu_blas1.c, cpu_reduce.c, cpu_sgemm.c, cpu_spmv.c
 */
#ifndef CPU_KERNELS_H
#define CPU_KERNELS_H

#include <stdint.h>

enum { CPU_SUM = 0, CPU_MIN = 1, CPU_MAX = 2 }; /* same values as gkc_reduce_op */

/* C = alpha * op(A) * op(B) + beta * C through OpenBLAS's cblas_sgemm.
 * A is m x k (k x m when trans_a), B is k x n (n x k when trans_b), C m x n.
 * C is not read when beta == 0 (NaNs in it do not propagate). */
void cpu_sgemm(int32_t m, int32_t n, int32_t k, float alpha, const float *a,
               int trans_a, const float *b, int trans_b, float beta, float *c);

/* Sum (accumulated in double), min or max of x[0..n), n >= 1.  min and max
 * ignore NaNs unless every element is NaN, like fmin/fmax. */
double cpu_reduce(const float *x, int64_t n, int op, int nthreads);

/* y = alpha * A * x + beta * y for A in CSR (rows x cols, nnz = row_ptr[rows]).
 * y is not read when beta == 0.  Work is split between threads by
 * nonzeros and rows together (merge path), so one row holding most of the
 * nonzeros is shared by all threads and empty rows cost little. */
void cpu_spmv(int32_t rows, int32_t cols, const int32_t *row_ptr,
              const int32_t *col_idx, const float *values, const float *x,
              float alpha, float beta, float *y, int nthreads);

/* The same for float32 or float64 values (values_f64) and float32 or
 * float64 x and y (vec_f64), alpha and beta in double; row sums in double,
 * y rounded to its type.  The float32 pair runs cpu_spmv's own loops. */
void cpu_spmv_typed(int32_t rows, int32_t cols, const int32_t *row_ptr, const int32_t *col_idx,
                    const void *values, int values_f64, const void *x, int vec_f64, double alpha,
                    double beta, void *y, int nthreads);

/* x . y accumulated in double (each product exact in double). */
double cpu_dot(const float *x, const float *y, int64_t n);
/* x . y of float64 vectors, accumulated in double. */
double cpu_dot_f64(const double *x, const double *y, int64_t n);
/* ||x||_2 of a float64 vector: the squares summed in double, then the
 * square root; rescaled by max |x_i| when that sum over- or underflows, so
 * that it is finite and accurate for any finite x. */
double cpu_nrm2_f64(const double *x, int64_t n);

/* out = alpha * x + beta * y (OpenBLAS).  out may be y itself (in place) or
 * other memory; y is not read when beta == 0. */
void cpu_axpby(int64_t n, float alpha, const float *x, float beta, const float *y, float *out);
/* The same on float64 vectors (OpenBLAS's daxpby). */
void cpu_axpby_f64(int64_t n, double alpha, const double *x, double beta, const double *y,
                   double *out);

#endif
