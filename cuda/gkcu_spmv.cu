/* gkcu_spmv.cu: the CSR spmv ladder's first rungs (scalar, vector), cuSPARSE,
 * the auto rules and the public entry points; the balanced rung is in
 * gkcu_spmv_balanced.cu (gkcu_spmv_int.h). */
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkcu_internal.h"
#include "gkcu_lab.h"
#include "gkcu_spmv.h"
#include "gkcu_spmv_int.h"

using namespace gkspmv;

namespace {

/* --- rung 0: one thread per row --------------------------------------------- */

__global__ void spmv_scalar_kernel(int rows, const int *__restrict__ rp, const int *__restrict__ ci,
                                   const float *__restrict__ v, float alpha, const float *__restrict__ x,
                                   float beta, float *__restrict__ y) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int j = rp[r], e = rp[r + 1]; j < e; j++) s = fmaf(v[j], __ldg(x + ci[j]), s);
    put_y(y, r, alpha, s, beta);
  }
}

/* --- rung 1: W threads per row ------------------------------------------------ */

/* A warp holds 32/W rows at a time; the row loop is uniform across the warp
 * (rows past the end just contribute nothing), so the full-mask shuffles are
 * always legal. */
template <int W>
__global__ void __launch_bounds__(256) spmv_vector_kernel(int rows, const int *__restrict__ rp,
                                                          const int *__restrict__ ci,
                                                          const float *__restrict__ v, float alpha,
                                                          const float *__restrict__ x, float beta,
                                                          float *__restrict__ y) {
  constexpr int RPW = 32 / W;
  const int lane = threadIdx.x & 31;
  const int g = lane / W, gl = lane % W;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long base = warp * RPW; base < rows; base += nwarps * RPW) {
    const long long r = base + g;
    float s = 0.0f;
    if (r < rows) {
      const int e = rp[r + 1];
      for (int j = rp[r] + gl; j < e; j += W) s = fmaf(v[j], __ldg(x + ci[j]), s);
    }
#pragma unroll
    for (int off = W / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (gl == 0 && r < rows) put_y(y, (int)r, alpha, s, beta);
  }
}

/* y = beta*y (0 when beta == 0) for a matrix without entries. */
__global__ void spmv_scale_kernel(int rows, float beta, float *__restrict__ y) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
    y[r] = beta == 0.0f ? 0.0f : beta * y[r];
}

/* --- launchers ---------------------------------------------------------------- */

unsigned int capped_blocks(const gkcu_ctx *ctx, size_t threads, unsigned int per_sm) {
  unsigned int b = gkcu__div_up(threads, 256);
  unsigned int cap = (unsigned int)ctx->sm_count * per_sm;
  if (b > cap) b = cap;
  return b < 1 ? 1 : b;
}

int run_scalar(gkcu_ctx *ctx, int rows, const int *rp, const int *ci, const float *v, float alpha,
               const float *x, float beta, float *y) {
  spmv_scalar_kernel<<<capped_blocks(ctx, (size_t)rows, 32), 256, 0, ctx->stream>>>(rows, rp, ci, v, alpha, x, beta, y);
  GKCU__LAUNCHED(ctx, "spmv_scalar_kernel");
  return 0;
}

int run_vector(gkcu_ctx *ctx, int w, int rows, const int *rp, const int *ci, const float *v,
               float alpha, const float *x, float beta, float *y) {
  unsigned int b = capped_blocks(ctx, (size_t)rows * w, 32);
  cudaStream_t st = ctx->stream;
  switch (w) {
    case 2: spmv_vector_kernel<2><<<b, 256, 0, st>>>(rows, rp, ci, v, alpha, x, beta, y); break;
    case 4: spmv_vector_kernel<4><<<b, 256, 0, st>>>(rows, rp, ci, v, alpha, x, beta, y); break;
    case 8: spmv_vector_kernel<8><<<b, 256, 0, st>>>(rows, rp, ci, v, alpha, x, beta, y); break;
    case 16: spmv_vector_kernel<16><<<b, 256, 0, st>>>(rows, rp, ci, v, alpha, x, beta, y); break;
    default: spmv_vector_kernel<32><<<b, 256, 0, st>>>(rows, rp, ci, v, alpha, x, beta, y); break;
  }
  GKCU__LAUNCHED(ctx, "spmv_vector_kernel");
  return 0;
}


int run_cusparse(gkcu_ctx *ctx, int rows, int cols, long long nnz, const int *rp, const int *ci,
                 const float *v, float alpha, const float *x, float beta, float *y) {
  if (nnz == 0) {
    /* cuSPARSE wants real arrays even for no entries; the answer is known. */
    spmv_scale_kernel<<<capped_blocks(ctx, (size_t)rows, 8), 256, 0, ctx->stream>>>(rows, beta, y);
    GKCU__LAUNCHED(ctx, "spmv_scale_kernel");
    return 0;
  }
  if (nnz > (long long)rows * cols)
    return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT,
                      "cusparse: nnz %lld > rows*cols (duplicate entries), which cuSPARSE rejects", nnz);
  cusparseConstSpMatDescr_t a = NULL;
  cusparseConstDnVecDescr_t vx = NULL;
  cusparseDnVecDescr_t vy = NULL;
  cusparseStatus_t s;
  const char *what = NULL;
  size_t bytes = 0;
  void *buf = NULL;
  int rc = 0;

  s = cusparseCreateConstCsr(&a, rows, cols, nnz, rp, ci, v, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                             CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F);
  if (s != CUSPARSE_STATUS_SUCCESS) { what = "cusparseCreateConstCsr"; goto fail; }
  s = cusparseCreateConstDnVec(&vx, cols, x, CUDA_R_32F);
  if (s != CUSPARSE_STATUS_SUCCESS) { what = "cusparseCreateConstDnVec"; goto fail; }
  s = cusparseCreateDnVec(&vy, rows, y, CUDA_R_32F);
  if (s != CUSPARSE_STATUS_SUCCESS) { what = "cusparseCreateDnVec"; goto fail; }
  s = cusparseSpMV_bufferSize(ctx->cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, vx, &beta, vy,
                              CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes);
  if (s != CUSPARSE_STATUS_SUCCESS) { what = "cusparseSpMV_bufferSize"; goto fail; }
  if (bytes > 0) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, bytes, &buf);
    rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) goto out;
  }
  s = cusparseSpMV(ctx->cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, vx, &beta, vy, CUDA_R_32F,
                   CUSPARSE_SPMV_ALG_DEFAULT, buf);
  if (s != CUSPARSE_STATUS_SUCCESS) { what = "cusparseSpMV"; goto fail; }
  {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) rc = gkcu__cuda_fail(ctx, e, "launch cusparseSpMV");
  }
  goto out;
fail:
  rc = gkcu__cusparse_fail(ctx, s, what);
out:
  if (vy) cusparseDestroyDnVec(vy);
  if (vx) cusparseDestroyDnVec(vx);
  if (a) cusparseDestroySpMat(a);
  return rc;
}

const char *const kNames[GKCU_SPMV_NALGO] = {"auto", "scalar", "vector", "balanced", "cusparse"};

}  // namespace

extern "C" const char *gkcu_spmv_algo_name(int algo) {
  return (algo >= 0 && algo < GKCU_SPMV_NALGO) ? kNames[algo] : NULL;
}

extern "C" int gkcu_spmv_algo_parse(const char *s) {
  if (!s) return GKCU_SPMV_AUTO;
  for (int i = 0; i < GKCU_SPMV_NALGO; i++)
    if (strcmp(s, kNames[i]) == 0) return i;
  return -1;
}

/* The auto rule (figures in bench/RESULTS.md).  Without row statistics
 * the only safe choice is balanced: its time follows rows + nnz whatever the
 * row lengths (it lands within 0.8-1.4x of cuSPARSE everywhere we measured),
 * while scalar and vector fall to 0.02-0.3x on one long row. */
extern "C" int gkcu_spmv_pick(const gkcu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz) {
  (void)ctx;
  (void)rows;
  (void)cols;
  (void)nnz;
  return GKCU_SPMV_BALANCED;
}

/* With the longest row known (the daemon has row_ptr on the host before it
 * uploads it), from the H200 measurements in bench/RESULTS.md:
 *   - a long row (> 1024 and > 32x the mean): balanced, except on large
 *     matrices, where cuSPARSE's fixed cost no longer matters and its
 *     kernel was faster (R-MAT, 42M nonzeros: cuSPARSE 0.33 ms, balanced
 *     0.35 ms; vsp_model1, 0.38M nonzeros: balanced 12 us, cuSPARSE 18 us;
 *     no skewed matrix measured in between, so the cut is the geometric
 *     middle, rounded to 2^22);
 *   - every row <= 8 long and enough rows to fill the GPU one thread per
 *     row: scalar (5-point stencil, 4M rows: 1.5x cuSPARSE, vector 1.2x,
 *     balanced 0.9x: a warp reads 32 consecutive short rows).  With fewer
 *     rows vector wins or ties, since it spreads the same work over more
 *     threads (west0067, 67 rows: 4.2 vs 4.7 us; luxembourg_osm, 115k rows:
 *     6.0 vs 6.1 us);
 *   - otherwise vector with the width rule above. */
extern "C" int gkcu_spmv_pick_hint(const gkcu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz,
                                   int32_t max_row) {
  (void)cols;
  if (!ctx || rows < 1 || nnz < 0 || max_row < 0) return GKCU_SPMV_BALANCED;
  double mean = (double)nnz / (double)rows;
  if (max_row > 1024 && max_row > 32.0 * mean)
    return nnz >= ((int64_t)1 << 22) ? GKCU_SPMV_CUSPARSE : GKCU_SPMV_BALANCED;
  if (max_row <= 8 && rows >= (1 << 18)) return GKCU_SPMV_SCALAR;
  return GKCU_SPMV_VECTOR;
}


extern "C" int gkcu_spmv(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
                         const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                         float alpha, const float *x, float beta, float *y) {
  return gkcu_spmv_planned(ctx, algo, rows, cols, nnz, row_ptr, col_idx, values, alpha, x, beta, y, NULL);
}

extern "C" int gkcu_spmv_planned(gkcu_ctx *ctx, int algo, int32_t rows, int32_t cols, int64_t nnz,
                                 const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                                 float alpha, const float *x, float beta, float *y, const void *plan) {
  int rc = check_args(ctx, rows, cols, nnz, row_ptr, col_idx, values, x, y);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, algo >= 0 && algo < GKCU_SPMV_NALGO);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)plan & 15) == 0);
  if (algo == GKCU_SPMV_AUTO) algo = gkcu_spmv_pick(ctx, rows, cols, nnz);
  switch (algo) {
    case GKCU_SPMV_SCALAR: return run_scalar(ctx, rows, row_ptr, col_idx, values, alpha, x, beta, y);
    case GKCU_SPMV_VECTOR:
      return run_vector(ctx, vector_width(ctx->sm_count, rows, nnz), rows, row_ptr, col_idx, values, alpha, x, beta, y);
    case GKCU_SPMV_BALANCED:
      return run_balanced(ctx, balanced_shape(rows, nnz), rows, nnz, row_ptr, col_idx, values, alpha, x, beta, y,
                          (const int4 *)plan);
    case GKCU_SPMV_CUSPARSE:
      return run_cusparse(ctx, rows, cols, nnz, row_ptr, col_idx, values, alpha, x, beta, y);
  }
  return gkcu__fail(ctx, GKC_EINTERNAL, "spmv: unhandled algo %d", algo);
}

extern "C" int gkcu_lab_spmv_vector_width(const gkcu_ctx *ctx, int32_t rows, int64_t nnz) {
  return ctx && rows >= 1 && nnz >= 0 ? vector_width(ctx->sm_count, rows, nnz) : 2;
}

extern "C" int gkcu_lab_spmv_vector(gkcu_ctx *ctx, int width, int32_t rows, int32_t cols, int64_t nnz,
                                    const int32_t *row_ptr, const int32_t *col_idx, const float *values,
                                    float alpha, const float *x, float beta, float *y) {
  int rc = check_args(ctx, rows, cols, nnz, row_ptr, col_idx, values, x, y);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, width == 2 || width == 4 || width == 8 || width == 16 || width == 32);
  return run_vector(ctx, width, rows, row_ptr, col_idx, values, alpha, x, beta, y);
}
