/* cpu_blas1.c: dot and axpby through OpenBLAS. */
#include <cblas.h>
#include <string.h>

#include "cpu_kernels.h"

/* BLAS takes int lengths: longer vectors go in pieces. */
#define PIECE ((int64_t)1 << 30)

double cpu_dot(const float *x, const float *y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; i += PIECE) {
    int64_t len = n - i < PIECE ? n - i : PIECE;
    sum += cblas_dsdot((blasint)len, x + i, 1, y + i, 1);
  }
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
