/* cpu_blas1.c: dot and nrm2 (our own loops) and axpby (OpenBLAS), on
 * float32 and float64 vectors. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

/* BLAS takes int lengths: longer vectors go in pieces. */
#define PIECE ((int64_t)1 << 30)

/* Not cblas_dsdot: the OpenBLAS of Debian 12 accumulates it in float on
 * this x86-64 (errors of ~3e-8 relative on 4000 terms, measured by
 * tests/e2e/protocol/e2e_batch.py), while the contract is double accumulation. */
double cpu_dot(const float *x, const float *y, int64_t n) {
  double sum = 0;
  int threads = n >= (1 << 16) ? omp_get_max_threads() : 1;
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; i++) sum += (double)x[i] * y[i];
  return sum;
}

void cpu_axpby(int64_t n, float alpha, const float *x, float beta, const float *y, float *out) {
  for (int64_t i = 0; i < n; i += PIECE) {
    blasint len = (blasint)(n - i < PIECE ? n - i : PIECE);
    float *o = out + i;
    if (beta == 0.0f) {
      /* y is not read: NaNs in it must not leak through 0 * NaN. */
      if (o != x + i) memmove(o, x + i, (size_t)len * sizeof *o);
      cblas_sscal(len, alpha, o, 1);
    } else {
      if (o != y + i) memmove(o, y + i, (size_t)len * sizeof *o);
      /* out = alpha x + beta out; x may be out itself when x, y and out alias. */
      cblas_saxpby(len, alpha, x + i, 1, beta, o, 1);
    }
  }
}

double cpu_dot_f64(const double *x, const double *y, int64_t n) {
  double sum = 0;
  int threads = n >= (1 << 16) ? omp_get_max_threads() : 1;
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
  return sum;
}

double cpu_nrm2_f64(const double *x, int64_t n) {
  double ss = cpu_dot_f64(x, x, n);
  /* Squares of float64 values can overflow (|x| > 1e154) or vanish into
   * subnormals (|x| < 1e-154): then scale by the largest |x_i|, a second
   * pass that costs nothing in the common case.  NaN stays NaN. */
  if (isnan(ss) || (ss >= DBL_MIN && ss <= DBL_MAX)) return sqrt(ss);
  double big = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = fabs(x[i]);
    if (a > big) big = a;
  }
  if (big == 0 || isinf(big)) return big;
  double s = 0;
  int threads = n >= (1 << 16) ? omp_get_max_threads() : 1;
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double t = x[i] / big;
    s += t * t;
  }
  return big * sqrt(s);
}

void cpu_axpby_f64(int64_t n, double alpha, const double *x, double beta, const double *y,
                   double *out) {
  for (int64_t i = 0; i < n; i += PIECE) {
    blasint len = (blasint)(n - i < PIECE ? n - i : PIECE);
    double *o = out + i;
    if (beta == 0.0) { /* y is not read, as in cpu_axpby */
      if (o != x + i) memmove(o, x + i, (size_t)len * sizeof *o);
      cblas_dscal(len, alpha, o, 1);
    } else {
      if (o != y + i) memmove(o, y + i, (size_t)len * sizeof *o);
      cblas_daxpby(len, alpha, x + i, 1, beta, o, 1);
    }
  }
}
