/* gkcu_amg.h: an algebraic multigrid hierarchy on the GPU, for gkcu_solve's
 * precond GKCU_PRECOND_AMG (issue #27).  The hierarchy is built on the host
 * (cpu_amg.h: smoothed aggregation) and described here as plain arrays;
 * gkcu_amg_upload copies it to device memory the caller provides, and
 * gkcu_solve runs one V(1,1) cycle of it per preconditioner application,
 * with the same smoother and schedule as cpu_amg_apply (so that both
 * backends take the same iterations, within rounding).
 *
 * Level 0's operator is the solve's own matrix (already on the device,
 * float32 values): it is not uploaded again.  Everything else is stored in
 * float32: A_l (l >= 1), P_l, R_l = P_l^T (given explicitly, so that
 * restriction is a plain row-wise product without atomics), the inverse
 * diagonals, the coarsest level's dense inverse and the cycle's vectors.
 * Why float32: a V-cycle is bandwidth-bound (about four products with A
 * and one each with R and P per level), float32 halves its traffic, and a
 * preconditioner only needs to approximate A^-1: its rounding (~6e-8
 * relative) is far below the two-grid error factor it carries (~0.2), so
 * the outer Krylov iteration, which stays float64, takes the same
 * iterations (the mixed-precision choice of AmgX and hypre's GPU path).
 * Each row's sum and every scalar stay double; each value is rounded once,
 * when stored.
 *
 * The coarsest level is solved by a dense matrix-vector product with its
 * inverse, precomputed on the host (<= ~500 rows: a 1 MB read per cycle,
 * one launch), instead of a one-block LU solve, whose triangular sweeps
 * are a chain of n dependent steps.
 *
 * Implemented in: gkcu_amg.cu (upload); the cycle's kernels are in
 * gkcu_amg_cycle.cuh, run from gkcu_solve.cu.
 */
#ifndef GKCU_AMG_H
#define GKCU_AMG_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKCU_AMG_MAX_LEVELS 10

enum { GKCU_AMG_L1_JACOBI = 0, GKCU_AMG_CHEBYSHEV = 1 }; /* cpu_amg.h's CPU_AMG_SMOOTHER_* */

/* A host CSR matrix, its values already rounded to float32 (the device's
 * storage: the caller rounds, on as many threads as it likes). */
typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  const int32_t *row_ptr, *col_idx;
  const float *values;
} gkcu_amg_csr;

typedef struct {
  gkcu_amg_csr A;        /* A_l (level 0: rows, and the rest only when values is set:
                          * a float64 matrix's values rounded, for the cycle) */
  gkcu_amg_csr P, R;     /* P_l and R_l = P_l^T; empty on the last level */
  const float *dinv;     /* rows values: 1 / a_ii, 0 for a row left out of smoothing */
  const float *dl1inv;   /* rows values: 1 / sum_j |a_ij| */
  double rho;            /* rho(D^-1 A) estimated; 0: smoothed by l1-Jacobi */
} gkcu_amg_level_desc;

typedef struct {
  int nlev;                  /* 1..GKCU_AMG_MAX_LEVELS */
  gkcu_amg_level_desc lev[GKCU_AMG_MAX_LEVELS];
  int smoother;              /* GKCU_AMG_* */
  int cheb_degree;           /* >= 1 */
  double cheb_ratio;         /* Chebyshev on [1.1 rho / ratio, 1.1 rho] */
  int32_t nc;                /* the coarsest level's rows when solved by coarse_inv, else 0 */
  const float *coarse_inv;   /* nc x nc row-major, or NULL: the last level is smoothed */
} gkcu_amg_desc;

typedef struct gkcu_amg gkcu_amg;

/* Device bytes the hierarchy desc describes will take (0: it is malformed
 * or the size overflows). */
size_t gkcu_amg_device_bytes(const gkcu_amg_desc *desc);

/* How gkcu_amg_upload moves n host bytes at src to device dst: enqueues
 * the copy on ctx's stream and returns (a cudaError_t, as int) once src
 * may be reused.  The CUDA backend passes its slot's pinned ring (chunks
 * copied on several threads, overlapped with their DMA); NULL:
 * cudaMemcpyAsync from pageable memory (one thread, the driver's staging). */
typedef int (*gkcu_amg_h2d_fn)(void *arg, void *dst, const void *src, size_t n);

/* Copies desc to dev (device memory of at least gkcu_amg_device_bytes,
 * 256-byte aligned, owned by the caller and kept until gkcu_amg_free) on
 * ctx's stream through h2d, and waits.  0 with *out set, or a negative gkc
 * error (message in ctx). */
int gkcu_amg_upload(gkcu_ctx *ctx, const gkcu_amg_desc *desc, gkcu_amg_h2d_fn h2d, void *h2d_arg,
                    void *dev, size_t dev_bytes, gkcu_amg **out);

/* Device bytes gkcu_amg_rho needs for n rows (0: n < 1 or overflow). */
size_t gkcu_amg_rho_work_bytes(int32_t n);

/* rho(D^-1 A) of the n x n matrix on the device (CSR, float32 values), by
 * cpu_amg.c's power iterations (the same start, iters of them, the same
 * normalisation; only the sums' order differs): what cpu_amg_opts.rho0
 * takes, so that the setup's largest pass over the finest matrix runs
 * where the matrix is.  A zero or non-finite diagonal entry counts as 0
 * (the setup then names its row).  work: gkcu_amg_rho_work_bytes(n)
 * bytes of device memory, 256-byte aligned.  0 with *rho set, or a
 * negative gkc error (message in ctx). */
int gkcu_amg_rho(gkcu_ctx *ctx, int32_t n, const int32_t *row_ptr, const int32_t *col_idx,
                 const float *values, int iters, void *work, size_t work_bytes, double *rho);

/* Levels, and the rows of level 0 (the matrix it was built for). */
int gkcu_amg_levels(const gkcu_amg *h);
int32_t gkcu_amg_rows(const gkcu_amg *h);
/* Level 0's values as the hierarchy keeps them (float32, device), when its
 * description gave them (a float64 matrix, whose cycle cannot read the
 * solve's own values); NULL when level 0 reads the solve's float32 matrix. */
const float *gkcu_amg_level0_values(const gkcu_amg *h);

/* Frees the host side (the device memory stays the caller's); NULL is fine. */
void gkcu_amg_free(gkcu_amg *h);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_AMG_H */
