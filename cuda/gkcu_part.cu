/* gkcu_part.cu: kernels of the partitioned-matrix primitives (gkcu_part.h).
 *
 * Plain grid-stride kernels: a partitioned solve calls them once per
 * iteration and device, so their cost is the bytes they move, not their
 * cleverness.  spmv gives each row a group of 1 to 32 lanes by the mean row
 * length (the vector-per-row rung of the ladder) so a 27-point stencil's
 * rows are read by coalesced groups; dot is two launches (block partials,
 * then one block in a fixed order) so a solve gives the same bits every
 * run, as the single-device solver does. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "gkc_errors.h"
#include "gkcu_internal.h"
#include "gkcu_part.h"

namespace {

constexpr int NT = 256;
constexpr unsigned int MAX_BLOCKS = 1024; /* dot partials */

unsigned int blocks_for(const gkcu_ctx *ctx, int64_t items) {
  int64_t b = (items + NT - 1) / NT, cap = (int64_t)ctx->sm_count * 8;
  if (b > cap) b = cap;
  return b < 1 ? 1u : (unsigned int)b;
}

/* Each group of W lanes takes a row; the loop runs the same number of
 * times for every lane of a warp (its rows are consecutive), so the
 * shuffles always see the whole warp. */
template <int W>
__global__ void spmv_kernel(int32_t rows, const int32_t *__restrict__ rp,
                            const int32_t *__restrict__ ci, const float *__restrict__ v,
                            const double *__restrict__ x, double *__restrict__ y) {
  const int lane = threadIdx.x % W;
  const int64_t groups = (int64_t)gridDim.x * (blockDim.x / W);
  const int64_t warp_first = ((int64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) / W;
  for (int64_t wr = warp_first; wr < rows; wr += groups) {
    const int64_t r = wr + (threadIdx.x % 32) / W;
    double s = 0;
    if (r < rows)
      for (int32_t t = rp[r] + lane; t < rp[r + 1]; t += W) s += (double)v[t] * x[ci[t]];
#pragma unroll
    for (int o = W / 2; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o, W);
    if (lane == 0 && r < rows) y[r] = s;
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

__global__ void mul_kernel(const double *__restrict__ d, const double *__restrict__ r,
                           double *__restrict__ z, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    z[i] = d[i] * r[i];
}

/* Sums v over the block in a fixed tree; the result is valid in thread 0. */
__device__ double block_sum(double v) {
  __shared__ double warp_sums[NT / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < NT / 32 ? warp_sums[threadIdx.x] : 0;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
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

__global__ void dot_final(const double *__restrict__ partials, unsigned int nparts, double *out) {
  double s = 0;
  for (unsigned int i = threadIdx.x; i < nparts; i += blockDim.x) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
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
                              double *y) {
  int rc = check(ctx, rows, row_ptr, y);
  if (rc || rows == 0) return rc;
  GKCU__CHECK_ARG(ctx, nnz == 0 || (col_idx && values && x));
  /* lanes per row: the power of two nearest the mean row length, 1 to 32 */
  int64_t mean = nnz / rows;
  int w = 1;
  while (w < 32 && w * 2 <= mean) w *= 2;
  unsigned int blocks = blocks_for(ctx, (int64_t)rows * w);
  switch (w) {
    case 1: spmv_kernel<1><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
    case 2: spmv_kernel<2><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
    case 4: spmv_kernel<4><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
    case 8: spmv_kernel<8><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
    case 16: spmv_kernel<16><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
    default: spmv_kernel<32><<<blocks, NT, 0, ctx->stream>>>(rows, row_ptr, col_idx, values, x, y); break;
  }
  GKCU__LAUNCHED(ctx, "part spmv_kernel");
  return 0;
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

extern "C" int gkcu_part_mul(gkcu_ctx *ctx, const double *d, const double *r, double *z, int64_t n) {
  int rc = check(ctx, n, d, r);
  if (rc || n == 0) return rc;
  GKCU__CHECK_ARG(ctx, z != NULL);
  mul_kernel<<<blocks_for(ctx, n), NT, 0, ctx->stream>>>(d, r, z, n);
  GKCU__LAUNCHED(ctx, "part mul_kernel");
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
  gkcu__carve cv = {};
  gkcu__carve_add(&cv, blocks * sizeof(double), (void **)&partials);
  if ((rc = gkcu__carve_commit(ctx, &cv)) != 0) return rc;
  dot_partials<<<blocks, NT, 0, ctx->stream>>>(x, y, n, partials);
  GKCU__LAUNCHED(ctx, "part dot_partials");
  dot_final<<<1, NT, 0, ctx->stream>>>(partials, blocks, ctx->dev_result);
  GKCU__LAUNCHED(ctx, "part dot_final");
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  *out = *ctx->host_result;
  return 0;
}
