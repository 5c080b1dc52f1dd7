/* gkcu_spmv_typed.cu: spmv with float64 operands, the matrix's values and
 * the vectors each float32 or float64 (see gkcu_spmv.h).  The float32
 * pair keeps its own ladder (gkcu_spmv.cu, gkcu_spmv_balanced.cu); this is
 * the vector rung written once over the value and vector types, the row
 * sums in double whatever they are. */
#include <stdint.h>

#include "gkcu_internal.h"
#include "gkcu_spmv.h"
#include "gkcu_spmv_int.h"

namespace {

constexpr int NT = 256;

/* W lanes per row (W = 1: one thread per row); a warp holds 32/W rows at
 * a time and its row loop is uniform, so the full-mask shuffles are legal
 * (rows past the end contribute nothing).  y is not read when beta == 0. */
template <typename V, typename X, int W>
__global__ void __launch_bounds__(NT)
    spmv_typed_kernel(int rows, const int *__restrict__ rp, const int *__restrict__ ci,
                      const V *__restrict__ v, double alpha, const X *__restrict__ x, double beta,
                      X *__restrict__ y) {
  constexpr int RPW = 32 / W;
  const int lane = threadIdx.x & 31;
  const int g = lane / W, gl = lane % W;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long base = warp * RPW; base < rows; base += nwarps * RPW) {
    const long long r = base + g;
    double s = 0.0;
    if (r < rows) {
      const int e = rp[r + 1];
      for (int j = rp[r] + gl; j < e; j += W) s = fma((double)v[j], (double)__ldg(x + ci[j]), s);
    }
#pragma unroll
    for (int off = W / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (gl == 0 && r < rows) {
      const double t = alpha * s;
      y[r] = (X)(beta == 0.0 ? t : fma(beta, (double)y[r], t));
    }
  }
}

template <typename V, typename X>
int launch(gkcu_ctx *ctx, int w, int rows, const int *rp, const int *ci, const void *v, double alpha,
           const void *x, double beta, void *y) {
  const V *tv = static_cast<const V *>(v);
  const X *tx = static_cast<const X *>(x);
  X *ty = static_cast<X *>(y);
  unsigned int b = gkcu__div_up((size_t)rows * (size_t)w, NT);
  const unsigned int cap = (unsigned int)(ctx->sm_count > 0 ? ctx->sm_count : 1) * 32u;
  if (b > cap) b = cap;
  if (b < 1) b = 1;
  cudaStream_t st = ctx->stream;
  switch (w) {
    case 1: spmv_typed_kernel<V, X, 1><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
    case 2: spmv_typed_kernel<V, X, 2><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
    case 4: spmv_typed_kernel<V, X, 4><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
    case 8: spmv_typed_kernel<V, X, 8><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
    case 16: spmv_typed_kernel<V, X, 16><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
    default: spmv_typed_kernel<V, X, 32><<<b, NT, 0, st>>>(rows, rp, ci, tv, alpha, tx, beta, ty); break;
  }
  GKCU__LAUNCHED(ctx, "spmv_typed_kernel");
  return 0;
}

}  // namespace

extern "C" int gkcu_spmv_typed_algo(int algo) {
  return algo == GKCU_SPMV_SCALAR ? GKCU_SPMV_SCALAR : GKCU_SPMV_VECTOR;
}

extern "C" int gkcu_spmv_typed(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
                               const int32_t *row_ptr, const int32_t *col_idx, const void *values,
                               int values_f64, double alpha, const void *x, int xy_f64, double beta,
                               void *y, int32_t max_row) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, algo >= 0 && algo < GKCU_SPMV_NALGO);
  GKCU__CHECK_ARG(ctx, rows >= 1 && cols >= 1);
  GKCU__CHECK_ARG(ctx, nnz >= 0 && nnz <= INT_MAX);
  GKCU__CHECK_ARG(ctx, row_ptr != NULL && x != NULL && y != NULL);
  GKCU__CHECK_ARG(ctx, nnz == 0 || (col_idx != NULL && values != NULL));
  const uintptr_t vm = values_f64 ? 7u : 3u, xm = xy_f64 ? 7u : 3u;
  GKCU__CHECK_ARG(ctx, ((uintptr_t)values & vm) == 0 && ((uintptr_t)x & xm) == 0 && ((uintptr_t)y & xm) == 0);
  int w = 1;
  if (gkcu_spmv_typed_algo(algo) == GKCU_SPMV_VECTOR) {
    const double mean = (double)nnz / (double)rows;
    w = max_row > 1024 && max_row > 32.0 * mean ? 32 : gkspmv::vector_width(ctx->sm_count, rows, nnz);
  }
  const int *rp = row_ptr, *ci = col_idx;
  if (values_f64)
    return xy_f64 ? launch<double, double>(ctx, w, rows, rp, ci, values, alpha, x, beta, y)
                  : launch<double, float>(ctx, w, rows, rp, ci, values, alpha, x, beta, y);
  return xy_f64 ? launch<float, double>(ctx, w, rows, rp, ci, values, alpha, x, beta, y)
                : launch<float, float>(ctx, w, rows, rp, ci, values, alpha, x, beta, y);
}
