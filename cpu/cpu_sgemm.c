/* cpu_sgemm.c: single-precision GEMM, handed to OpenBLAS. */
#include "cpu_kernels.h"

#include <cblas.h>

void cpu_sgemm(int32_t m, int32_t n, int32_t k, float alpha, const float *a,
               int trans_a, const float *b, int trans_b, float beta, float *c) {
  /* Row-major: the leading dimension is the row length of the matrix as
   * stored.  A is stored k x m when transposed, so its rows hold m floats;
   * B is stored n x k when transposed, so its rows hold k. */
  blasint lda = trans_a ? m : k;
  blasint ldb = trans_b ? k : n;
  /* C is not zeroed for beta == 0: BLAS defines that C is then not read,
   * and OpenBLAS 0.3.21 honours it (checked with NaN-filled C, all four
   * trans combinations, shapes 1..200, its x86 kernels from Prescott to
   * Cooperlake via OPENBLAS_CORETYPE).  OpenBLAS picks its kernel for the
   * CPU at run time, so test_cpu_kernels checks this again wherever it runs. */
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, n);
}
