/* part_ref.h: float64 references for the partitioned-matrix primitives
 * (daemon/backend.h, gkcd_part_ops), shared by the CPU test
 * (test_cpu_part) and the GPU one (tests/gpu/test_gpu_part).
 *
 * Sums are compensated (Neumaier) and carry the sum of their terms'
 * magnitudes S, so a test can hold a primitive to the recursive-summation
 * bound: a float64 sum of m terms in any order is within (m - 1) u S of
 * the exact one (u = 2^-53, to first order), whatever tree the primitive
 * adds in.  A float32 accumulation, a dropped or doubled term, or a wrong
 * index is far outside it.
 */
#ifndef GKC_PART_REF_H
#define GKC_PART_REF_H

#include <stdint.h>

typedef struct {
  double sum, mag; /* the sum, and S = the sum of |term| */
  int64_t terms;
} ref_sum;

/* |got - want| <= (terms + 8) u S (8: slack for the last roundings). */
int ref_close(double got, ref_sum want);

/* A random block: rows rows over cols columns (cols >= rows: the first
 * rows are its own, as a partition's local CSR), 0 to maxrow entries per
 * row at random distinct columns, values in [-1, 1). */
typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  int32_t *rp, *ci;
  float *v;
} ref_csr;
ref_csr ref_random_csr(uint64_t *rng, int32_t rows, int32_t cols, int maxrow);
void ref_csr_free(ref_csr *m);

/* The run's seed: GKC_TEST_SEED when set (a replay), else fresh from
 * /dev/urandom (the clock where that cannot be read). */
uint64_t ref_seed(void);

/* splitmix64, and a double uniform in [lo, hi). */
uint64_t ref_rand_u64(uint64_t *rng);
double ref_rand(uint64_t *rng, double lo, double hi);
double *ref_rand_vec(uint64_t *rng, int64_t n, double lo, double hi);

/* Each row's sum over its entries of values[t] * x[col_idx[t]] into y[i];
 * and x . y over n entries (a test passes the primitive's own y, so that
 * the dot is checked apart from the spmv). */
void ref_spmv(const ref_csr *m, const double *x, ref_sum *y);
ref_sum ref_dot(const double *x, const double *y, int64_t n);

/* got = a t + s rounded, by an fma or not, against the same computed here
 * (rounded too): within 4 u (|a t| + |s|). */
int ref_axpy_close(double got, double a, double t, double s);

/* What cg_update (x += a p, r -= a q, out[0] = r . r; with dinv also z =
 * dinv .* r, out[1] = r . z, else out[1] = 0) must have left, from the
 * inputs x0, r0 (a = 0: x and r unchanged to the bit; z is one product of
 * the r written, so exact); fails the test (test.h) naming what is off. */
void ref_check_cg_update(int64_t n, double a, int jacobi, const double *p, const double *q, const double *x0,
                         const double *r0, const double *dinv, const double *x, const double *r, const double *z,
                         const double out[2]);

#endif
