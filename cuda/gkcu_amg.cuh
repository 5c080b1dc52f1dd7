/* gkcu_amg.cuh: the device hierarchy of gkcu_amg.h as gkcu_amg.cu lays it
 * out and gkcu_amg_cycle.cuh reads it (C++ only, never installed). */
#ifndef GKCU_AMG_CUH
#define GKCU_AMG_CUH

#include "gkcu_amg.h"

/* A CSR matrix on the device, float32 values; w: threads per row. */
struct gkcu_amg_mat {
  int32_t rows, cols;
  int64_t nnz;
  int *rp, *ci;
  float *va;
  int w;
};

struct gkcu_amg_lev {
  int32_t n;
  gkcu_amg_mat A, P, R; /* A: levels >= 1 (level 0 is the solve's matrix) */
  float *dinv, *dl1inv;
  double rho;
  float *b, *x;         /* the level's right-hand side and solution (levels >= 1) */
  float *r, *d, *dn, *q; /* scratch: Chebyshev's residual and two directions, l1-Jacobi's step */
};

struct gkcu_amg {
  int nlev;
  gkcu_amg_lev lev[GKCU_AMG_MAX_LEVELS];
  int smoother, cheb_degree;
  double cheb_ratio;
  int32_t nc;  /* rows of cinv, or 0 */
  float *cinv; /* the coarsest level's dense inverse, row-major, or NULL */
};

#endif /* GKCU_AMG_CUH */
