/* gkcu_blas1.h: the vector operations an iterative solver needs between
 * spmv calls (protocol methods `dot`, `nrm2` and `axpby`), on float32 or
 * float64 vectors that stay on the GPU.
 *
 * dot     sum x[i]*y[i] as a double.  Each product of two floats is exact in
 *         double and is accumulated in double per thread (128-bit loads
 *         where x and y share their offset from 16-byte alignment, a scalar
 *         head and tail, warp shuffles), in one launch: the last block to
 *         finish (a ticket counter of the context) adds the block partials.
 *         The error is a few hundred units of double rounding of
 *         sum |x[i]*y[i]| at most (test_gpu_blas1.c derives the bound),
 *         against ~1e-7 relative for float accumulation.
 * nrm2    sqrt(sum x[i]^2) as a double, dot's kernel on one vector: each
 *         square is exact in double and the sum is accumulated in double
 *         (float4 loads from x's first 16-byte boundary, whatever x's
 *         alignment), the block partials added by the last block in block
 *         order, so the same bits every run on a device; then one sqrt.  The
 *         sum's error is dot's bound with S = sum x[i]^2, halved by the
 *         root: below 2e-13 relative at 2^24 elements.  Nothing overflows
 *         or underflows for finite float inputs (a square is < 1.2e77).
 * axpby   y = alpha*x + beta*y, one memory-bound kernel (128-bit loads and
 *         stores where x and y share their alignment offset, else 32-bit).
 *         Computed as fmaf(alpha, x, beta*y): at most two roundings, so
 *         |error| <= 2^-23 * (|alpha*x| + |beta*y|) per element.
 *         A zero coefficient means its vector is not read: beta == 0 gives
 *         y = alpha*x even when y holds NaN or Inf; alpha == 0 gives
 *         y = beta*y without reading x; both zero stores zeros.  x == y (the
 *         same pointer) is allowed; x and y overlapping otherwise is
 *         GKC_EINVALID_ARGUMENT.
 *
 * The *_f64 functions do the same on float64 vectors (gkcu_blas1_f64.cu):
 *
 * dot_f64   sum x[i]*y[i] in double, each product fused into the running
 *           sum (one rounding per element), 128-bit loads (two doubles)
 *           where x and y share their offset from 16-byte alignment; the
 *           grid's partials added as dot's.  |error| <= D u sum|x[i]*y[i]|,
 *           u = 2^-53, D the depth of the summation (test_gpu_blas1_f64.c
 *           derives it).  Nothing is rescaled: like the CPU's, a sum that
 *           overflows is Inf.
 * nrm2_f64  sqrt(sum x[i]^2) in one pass without overflow or underflow:
 *           the squares of the entries in [2^-511, 2^486] (every square a
 *           normal double) are summed as they are, the entries above
 *           scaled by 2^-538 and those below by 2^600 first (exact, powers
 *           of two) into two other sums, which are combined at the end
 *           (Blue's algorithm, as LAPACK's dnrm2).  When every entry is
 *           in range (the common case) the result is the plain sum's root,
 *           as cpu_nrm2_f64 computes it; otherwise what the CPU gets by
 *           rescaling by the largest entry, up to rounding, without a
 *           second pass.  NaN anywhere gives NaN, else an infinite entry
 *           gives Inf.
 * axpby_f64 y = alpha*x + beta*y as fma(alpha, x, beta*y) in double, with
 *           axpby's zero-coefficient and x == y rules: |error| <=
 *           2u (|alpha*x| + |beta*y|) per element.
 *
 * All take any n >= 1 and any 4-byte aligned device pointers (8-byte for
 * float64), enqueue on the context's stream and return without waiting
 * (except gkcu_dot, gkcu_nrm2 and their _f64 twins, which wait for their
 * result like gkcu_reduce).  Errors as in gkcu.h.
 *
 * The *_cublas twins do the same through cuBLAS, for the benchmarks:
 * cublasSdot (float accumulation; its result is a float) and
 * cublasSscal + cublasSaxpy (with the same zero-coefficient and x == y
 * semantics as gkcu_axpby, arranged around the two calls).
 */
/* Implemented in: gkcu_blas1.cu (float32, cuBLAS), gkcu_blas1_f64.cu */
#ifndef GKCU_BLAS1_H
#define GKCU_BLAS1_H

#include "gkcu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *d_result (device) = sum_{i<n} x[i]*y[i]. */
int gkcu_dot_async(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, double *d_result);

/* The same, then waits for the stream and stores the result in the host
 * double *result (through the context's pinned slot). */
int gkcu_dot(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, double *result);

/* *d_result (device) = sqrt(sum_{i<n} x[i]^2). */
int gkcu_nrm2_async(gkcu_ctx *ctx, int64_t n, const float *x, double *d_result);

/* The same, then waits and stores it in the host double *result. */
int gkcu_nrm2(gkcu_ctx *ctx, int64_t n, const float *x, double *result);

/* y[i] = alpha*x[i] + beta*y[i], i < n. */
int gkcu_axpby(gkcu_ctx *ctx, int64_t n, float alpha, const float *x, float beta, float *y);

/* float64 x and y (8-byte aligned): as the float32 functions above. */
int gkcu_dot_f64_async(gkcu_ctx *ctx, int64_t n, const double *x, const double *y, double *d_result);
int gkcu_dot_f64(gkcu_ctx *ctx, int64_t n, const double *x, const double *y, double *result);
int gkcu_nrm2_f64_async(gkcu_ctx *ctx, int64_t n, const double *x, double *d_result);
int gkcu_nrm2_f64(gkcu_ctx *ctx, int64_t n, const double *x, double *result);
int gkcu_axpby_f64(gkcu_ctx *ctx, int64_t n, double alpha, const double *x, double beta, double *y);

/* cublasSdot into the device float *d_result (device pointer mode for the
 * call; the context's handle is put back to host mode afterwards). */
int gkcu_dot_cublas_async(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, float *d_result);

/* cublasSscal(beta, y) then cublasSaxpy(alpha, x, y); beta == 0 is a
 * cudaMemsetAsync of y instead of the scal (cuBLAS would compute 0*NaN),
 * x == y is one cublasSscal(alpha + beta). */
int gkcu_axpby_cublas(gkcu_ctx *ctx, int64_t n, float alpha, const float *x, float beta, float *y);

#ifdef __cplusplus
}
#endif

#endif /* GKCU_BLAS1_H */
