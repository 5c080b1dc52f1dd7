/* cpu_blas1.c: dot (our own loop) and axpby (OpenBLAS). */
#include <cblas.h>
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
