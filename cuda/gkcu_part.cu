/* gkcu_part.cu: kernels of the partitioned-matrix primitives (gkcu_part.h).
 *
 * Plain grid-stride kernels: a partitioned solve calls them once per
 * iteration and device, so their cost is the bytes they move, not their
 * cleverness.  spmv gives each row a group of 1 to 32 lanes by the mean row
 * length (the vector-per-row rung of the ladder) so a 27-point stencil's
 * rows are read by coalesced groups.  Every sum (dot, spmv's p . A p, the
 * CG update's r . r and r . z) is two launches: block partials over a grid
 * whose size depends only on n and the SMs, then one block per sum adding
 * them in a fixed order, so a solve gives the same bits every run, as the
 * single-device solver does.  The fused steps exist because each call is a
 * round trip from the coordinator (daemon/part_solve.c). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "gkc_errors.h"
#include "gkcu_internal.h"
#include "gkcu_width.h"
#include "gkcu_part.h"

namespace {

constexpr int NT = 256;
constexpr unsigned int MAX_BLOCKS = 1024; /* dot partials */
/* Blocks per SM that blocks_for's grid (8 per SM) needs resident at once:
 * a grid-stride kernel whose grid does not fit in one wave runs a second,
 * short wave of whole shares (40 registers instead of 32 cost the fused
 * spmv 25% so).  __launch_bounds__ holds the kernels to it. */
constexpr int FULL = 8;

unsigned int blocks_for(const gkcu_ctx *ctx, int64_t items) {
  int64_t b = (items + NT - 1) / NT, cap = (int64_t)ctx->sm_count * 8;
  if (b > cap) b = cap;
  return b < 1 ? 1u : (unsigned int)b;
}

/* Sums v over the block in a fixed tree; the result is valid in thread 0.
 * Every thread of the block calls it (it waits on them). */
__device__ double block_sum(double v) {
  __shared__ double warp_sums[NT / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads(); /* a previous call's readers are done with warp_sums */
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < NT / 32 ? warp_sums[threadIdx.x] : 0;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

/* Each group of W lanes takes a row; the loop runs the same number of
 * times for every lane of a warp (its rows are consecutive), so the
 * shuffles always see the whole warp.  With DOT, each group's first lane
 * also adds x[r] * y[r] up, and the block's sum goes to partials. */
template <int W, bool DOT>
__global__ void __launch_bounds__(NT, FULL) spmv_kernel(int32_t rows, const int32_t *__restrict__ rp,
                            const int32_t *__restrict__ ci, const float *__restrict__ v,
                            const double *__restrict__ x, double *__restrict__ y,
                            double *__restrict__ partials) {
  const int lane = threadIdx.x % W;
  const int64_t groups = (int64_t)gridDim.x * (blockDim.x / W);
  const int64_t warp_first = ((int64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) / W;
  double acc = 0;
  for (int64_t wr = warp_first; wr < rows; wr += groups) {
    const int64_t r = wr + (threadIdx.x % 32) / W;
    double s = 0;
    if (r < rows)
      for (int32_t t = rp[r] + lane; t < rp[r + 1]; t += W) s += (double)v[t] * x[ci[t]];
#pragma unroll
    for (int o = W / 2; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o, W);
    if (lane == 0 && r < rows) {
      y[r] = s;
      if (DOT) acc += x[r] * s;
    }
  }
  if (DOT) {
    acc = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
  }
}

__global__ void gather_kernel(double *__restrict__ dst, const double *__restrict__ src,
                              const int32_t *__restrict__ idx, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = src[idx[i]];
}

__global__ void axpby_kernel(double a, const double *__restrict__ x, double b, double *y, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = b == 0 ? a * x[i] : a * x[i] + b * y[i];
}

__global__ void dot_partials(const double *__restrict__ x, const double *__restrict__ y, int64_t n,
                             double *__restrict__ partials) {
  double s = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    s += x[i] * y[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

/* x += a p, r -= a q (UPD), r . r and (PC) z = dinv .* r, r . z: block
 * partials at partials[0..gridDim) and partials[gridDim..2 gridDim). */
template <bool UPD, bool PC>
__global__ void __launch_bounds__(NT, FULL) cg_update_kernel(double a, const double *__restrict__ p,
                                 const double *__restrict__ q, double *__restrict__ x,
                                 double *__restrict__ r, const double *__restrict__ dinv,
                                 double *__restrict__ z, int64_t n, double *__restrict__ partials) {
  double rr = 0, rz = 0;
  /* not unrolled: unrolled, the pcg variant spills at 32 registers (the
   * 2048 threads an SM keeps in flight hide the loads' latency anyway) */
#pragma unroll 1
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    double ri = r[i];
    if (UPD) {
      x[i] = a * p[i] + x[i];
      ri = ri - a * q[i];
      r[i] = ri;
    }
    rr += ri * ri;
    if (PC) {
      double zi = dinv[i] * ri;
      z[i] = zi;
      rz += ri * zi;
    }
  }
  rr = block_sum(rr);
  rz = block_sum(rz);
  if (threadIdx.x == 0) partials[blockIdx.x] = rr, partials[gridDim.x + blockIdx.x] = rz;
}

/* spmv_kernel<W>, with the dot where partials is not NULL. */
template <int W>
void launch_spmv(gkcu_ctx *ctx, unsigned int blocks, int32_t rows, const int32_t *rp,
                 const int32_t *ci, const float *v, const double *x, double *y, double *partials) {
  if (partials)
    spmv_kernel<W, true><<<blocks, NT, 0, ctx->stream>>>(rows, rp, ci, v, x, y, partials);
  else
    spmv_kernel<W, false><<<blocks, NT, 0, ctx->stream>>>(rows, rp, ci, v, x, y, NULL);
}

/* Block b adds partials[b nparts .. (b + 1) nparts) into out[b]. */
__global__ void sums_final(const double *__restrict__ partials, unsigned int nparts, double *out) {
  const double *part = partials + (size_t)blockIdx.x * nparts;
  double s = 0;
  for (unsigned int i = threadIdx.x; i < nparts; i += blockDim.x) s += part[i];
  s = block_sum(s);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

/* nsums sums' partials (blocks each) in scratch. */
int carve_partials(gkcu_ctx *ctx, unsigned int blocks, int nsums, double **partials) {
  gkcu__carve cv = {};
  gkcu__carve_add(&cv, (size_t)nsums * blocks * sizeof(double), (void **)partials);
  return gkcu__carve_commit(ctx, &cv);
}

/* Adds each of the nsums rows of blocks partials in a fixed order, into
 * out[0..nsums) on the host, and waits for them. */
int finish_sums(gkcu_ctx *ctx, const double *partials, unsigned int blocks, int nsums, double *out) {
  sums_final<<<nsums, NT, 0, ctx->stream>>>(partials, blocks, ctx->dev_result);
  GKCU__LAUNCHED(ctx, "part sums_final");
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, (size_t)nsums * sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  for (int i = 0; i < nsums; i++) out[i] = ctx->host_result[i];
  return 0;
}

int check(gkcu_ctx *ctx, int64_t n, const void *a, const void *b) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 0);
  GKCU__CHECK_ARG(ctx, n == 0 || (a != NULL && b != NULL));
  return 0;
}

}  // namespace

extern "C" int gkcu_part_spmv(gkcu_ctx *ctx, int32_t rows, int64_t nnz, const int32_t *row_ptr,
                              const int32_t *col_idx, const float *values, const double *x,
                              double *y, double *xy) {
  int rc = check(ctx, rows, row_ptr, y);
  if (rc) return rc;
  if (rows == 0) {
    if (xy) *xy = 0;
    return 0;
  }
  GKCU__CHECK_ARG(ctx, nnz == 0 || (col_idx && values && x));
  GKCU__CHECK_ARG(ctx, xy == NULL || x != NULL);
  /* lanes per row: the vector rung's rule (the longest row is not known here) */
  int w = gkcu__row_width(ctx->sm_count, rows, nnz, -1);
  unsigned int blocks = blocks_for(ctx, (int64_t)rows * w);
  double *partials = NULL;
  if (xy) {
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    if ((rc = carve_partials(ctx, blocks, 1, &partials)) != 0) return rc;
  }
  switch (w) {
    case 1: launch_spmv<1>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
    case 2: launch_spmv<2>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
    case 4: launch_spmv<4>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
    case 8: launch_spmv<8>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
    case 16: launch_spmv<16>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
    default: launch_spmv<32>(ctx, blocks, rows, row_ptr, col_idx, values, x, y, partials); break;
  }
  GKCU__LAUNCHED(ctx, "part spmv_kernel");
  return xy ? finish_sums(ctx, partials, blocks, 1, xy) : 0;
}

extern "C" int gkcu_part_gather(gkcu_ctx *ctx, double *dst, const double *src, const int32_t *idx,
                                int64_t n) {
  int rc = check(ctx, n, dst, src);
  if (rc || n == 0) return rc;
  GKCU__CHECK_ARG(ctx, idx != NULL);
  gather_kernel<<<blocks_for(ctx, n), NT, 0, ctx->stream>>>(dst, src, idx, n);
  GKCU__LAUNCHED(ctx, "part gather_kernel");
  return 0;
}

extern "C" int gkcu_part_axpby(gkcu_ctx *ctx, double a, const double *x, double b, double *y,
                               int64_t n) {
  int rc = check(ctx, n, x, y);
  if (rc || n == 0) return rc;
  axpby_kernel<<<blocks_for(ctx, n), NT, 0, ctx->stream>>>(a, x, b, y, n);
  GKCU__LAUNCHED(ctx, "part axpby_kernel");
  return 0;
}

extern "C" int gkcu_part_dot(gkcu_ctx *ctx, const double *x, const double *y, int64_t n,
                             double *out) {
  int rc = check(ctx, n, x, y);
  if (rc) return rc;
  GKCU__CHECK_ARG(ctx, out != NULL);
  if (n == 0) {
    *out = 0;
    return 0;
  }
  unsigned int blocks = blocks_for(ctx, n);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  double *partials = NULL;
  if ((rc = carve_partials(ctx, blocks, 1, &partials)) != 0) return rc;
  dot_partials<<<blocks, NT, 0, ctx->stream>>>(x, y, n, partials);
  GKCU__LAUNCHED(ctx, "part dot_partials");
  return finish_sums(ctx, partials, blocks, 1, out);
}

extern "C" int gkcu_part_cg_update(gkcu_ctx *ctx, double a, const double *p, const double *q,
                                   double *x, double *r, const double *dinv, double *z, int64_t n,
                                   double out[2]) {
  int rc = check(ctx, n, r, out);
  if (rc) return rc;
  GKCU__CHECK_ARG(ctx, out != NULL);
  GKCU__CHECK_ARG(ctx, n == 0 || a == 0 || (p && q && x));
  GKCU__CHECK_ARG(ctx, n == 0 || dinv == NULL || z != NULL);
  if (n == 0) {
    out[0] = out[1] = 0;
    return 0;
  }
  unsigned int blocks = blocks_for(ctx, n);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  double *partials = NULL;
  if ((rc = carve_partials(ctx, blocks, 2, &partials)) != 0) return rc;
  if (a != 0 && dinv)
    cg_update_kernel<true, true><<<blocks, NT, 0, ctx->stream>>>(a, p, q, x, r, dinv, z, n, partials);
  else if (a != 0)
    cg_update_kernel<true, false><<<blocks, NT, 0, ctx->stream>>>(a, p, q, x, r, dinv, z, n, partials);
  else if (dinv)
    cg_update_kernel<false, true><<<blocks, NT, 0, ctx->stream>>>(a, p, q, x, r, dinv, z, n, partials);
  else
    cg_update_kernel<false, false><<<blocks, NT, 0, ctx->stream>>>(a, p, q, x, r, dinv, z, n, partials);
  GKCU__LAUNCHED(ctx, "part cg_update_kernel");
  return finish_sums(ctx, partials, blocks, 2, out);
}
