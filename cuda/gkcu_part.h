/* gkcu_part.h: the kernels behind a partitioned matrix's primitives on the
 * GPU (backend.h, gkcd_part_ops; cuda/cuda_part.c drives them).  Vectors are
 * float64 in device memory, the matrix block float32 CSR, as the CPU's
 * cpu_part.c.  Every launcher enqueues on ctx's stream and returns 0, or a
 * negative gkc_error with ctx's message; those that return sums wait for
 * them.  n and rows may be 0 (nothing is launched). */
#ifndef GKCU_PART_H
#define GKCU_PART_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = sum over row i of values[t] * x[col_idx[t]], in float64; with xy
 * not NULL also *xy = sum over i < rows of x[i] * y[i] (waiting for it). */
int gkcu_part_spmv(gkcu_ctx *ctx, int32_t rows, int64_t nnz, const int32_t *row_ptr,
                   const int32_t *col_idx, const float *values, const double *x, double *y,
                   double *xy);
/* dst[i] = src[idx[i]] */
int gkcu_part_gather(gkcu_ctx *ctx, double *dst, const double *src, const int32_t *idx, int64_t n);
/* y = a x + b y; with b == 0, y is only written. */
int gkcu_part_axpby(gkcu_ctx *ctx, double a, const double *x, double b, double *y, int64_t n);
/* *out = x . y, summed in a fixed order (the same bits every run). */
int gkcu_part_dot(gkcu_ctx *ctx, const double *x, const double *y, int64_t n, double *out);
/* CG's update in one pass (backend.h, gkcd_part_ops.cg_update): x += a p,
 * r -= a q (a == 0: neither, p and q unread); out[0] = r . r; with dinv not
 * NULL, z = dinv .* r and out[1] = r . z, else out[1] = 0.  Waits for the
 * sums, which are in a fixed order as gkcu_part_dot's. */
int gkcu_part_cg_update(gkcu_ctx *ctx, double a, const double *p, const double *q, double *x,
                        double *r, const double *dinv, double *z, int64_t n, double out[2]);

#ifdef __cplusplus
}
#endif

#endif
