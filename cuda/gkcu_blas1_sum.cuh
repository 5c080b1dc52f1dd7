/* gkcu_blas1_sum.cuh: the end of the dot and nrm2 kernels, float32
 * (gkcu_blas1.cu) and float64 (gkcu_blas1_f64.cu) alike: a thread's double
 * summed over its block, then over the grid in one launch, the last block
 * to finish (a ticket counter of the context) adding the block partials in
 * block order, so that a device gives the same bits every run.  C++,
 * cuda/ only, never installed.
 */
#ifndef GKCU_BLAS1_SUM_CUH
#define GKCU_BLAS1_SUM_CUH

#include "gkcu_internal.h"

namespace gkblas1 {

constexpr int NT = 256; /* threads per block of every blas1 kernel */

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

/* Whole-block sum, valid in thread 0; ends with a barrier so that the
 * shared slots can be reused. */
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_vals[NT / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < NT / 32 ? warp_vals[lane] : 0.0;
    v = warp_sum(v);
  }
  __syncthreads();
  return v;
}

/* Every thread of the block calls it with its block's K sums (valid in
 * thread 0, as block_sum leaves them).  Returns 1 in thread 0 of the one
 * block that is to finish the grid's sum, with acc[] the grid's sums (the
 * partials added in block order), and resets the ticket; 0 elsewhere.
 * With one block that is the block itself, and partials is not touched
 * (it may be NULL). */
template <int K>
__device__ __forceinline__ int grid_last(double (&acc)[K], double *__restrict__ partials,
                                         unsigned int *ticket) {
  const int tid = threadIdx.x;
  if (gridDim.x == 1) return tid == 0;
  __shared__ bool is_last;
  if (tid == 0) {
#pragma unroll
    for (int k = 0; k < K; k++) partials[(size_t)k * gridDim.x + blockIdx.x] = acc[k];
    __threadfence(); /* partials visible before the ticket is drawn */
    unsigned int t = atomicAdd(ticket, 1u);
    is_last = (t == gridDim.x - 1);
  }
  __syncthreads();
  if (!is_last) return 0;
  __threadfence();
#pragma unroll
  for (int k = 0; k < K; k++) {
    double s = 0.0;
    for (int j = tid; j < (int)gridDim.x; j += NT) s += __ldcg(&partials[(size_t)k * gridDim.x + j]);
    acc[k] = block_sum(s);
  }
  if (tid == 0) *ticket = 0u;
  return tid == 0;
}

/* The end of dot_kernel and nrm2_kernel: each thread's acc summed over the
 * grid into *out (its square root with ROOT).  partials: gridDim.x doubles
 * (unused with one block). */
template <bool ROOT>
__device__ __forceinline__ void grid_sum(double acc, double *__restrict__ partials,
                                         unsigned int *ticket, double *out) {
  double a[1] = {block_sum(acc)};
  if (grid_last<1>(a, partials, ticket)) *out = ROOT ? sqrt(a[0]) : a[0];
}

}  // namespace gkblas1

#endif /* GKCU_BLAS1_SUM_CUH */
