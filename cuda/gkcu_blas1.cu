/* gkcu_blas1.cu: dot, nrm2 and axpby on float32 device vectors, and their cuBLAS
 * twins (see gkcu_blas1.h; float64: gkcu_blas1_f64.cu). */
#include <stdint.h>

#include "gkcu_blas1.h"
#include "gkcu_blas1_sum.cuh"
#include "gkcu_internal.h"

namespace {

/* Which of the context's ticket counters the dot kernel draws from.
 * gkcu_reduce's shfl kernel uses counter 0; launches on one stream never
 * overlap, so sharing would be safe too, but a counter of its own keeps a
 * future concurrent launch (a second stream on the same context is not
 * allowed, but PDL or graphs might be) from ever mixing the two. */
constexpr int kDotTicket = 1;
static_assert(kDotTicket < GKCU__NTICKETS, "ticket index");

using gkblas1::grid_sum;
using gkblas1::NT; /* threads per block, both kernels */
constexpr int UNROLL = 2;       /* 128-bit loads in flight per vector per thread */
constexpr int BLOCKS_PER_SM = 8; /* axpby: 2048 threads per multiprocessor, <= 32 registers */
/* dot: at 32 registers (8 blocks) the float4 kernel spilled 8 bytes; at 40
 * there are no spills and 6 blocks fit.  1536 threads with 2 float4s of x
 * and of y each in flight is ~96 KB of loads per SM, several times what
 * covers the memory latency, and the grid is capped to what is resident. */
constexpr int DOT_BLOCKS_PER_SM = 6;

/* Offset, in floats, of p from the 16-byte boundary at or after it:
 * the number of scalars before a float4-aligned body. */
__host__ inline int head_of(const float *p) { return (int)(((16u - ((uintptr_t)p & 15u)) & 15u) / 4u); }

/* --- dot ----------------------------------------------------------------------- */

/* Two products of floats are exact in double; their sum is rounded once. */
__device__ __forceinline__ double dot4(float4 a, float4 b) {
  double p = fma((double)a.x, (double)b.x, (double)a.y * (double)b.y);
  double q = fma((double)a.z, (double)b.z, (double)a.w * (double)b.w);
  return p + q;
}

/* VEC: x + head and y + head are both 16-byte aligned; the body is read as
 * float4s (UNROLL of each in flight), x[0..head) and x[tail0..n) (fewer
 * than 4 each) as scalars.  !VEC (x and y at different offsets from 16-byte
 * alignment): all of it as scalars, 4 of each in flight.  Then a block sum;
 * with one block the result is written directly, else the block that draws
 * the last ticket adds the partials, writes *out and resets the ticket. */
template <bool VEC>
__global__ void __launch_bounds__(NT, DOT_BLOCKS_PER_SM)
    dot_kernel(const float *__restrict__ x, const float *__restrict__ y, long long n, int head,
               double *__restrict__ partials, unsigned int *ticket, double *out) {
  const int tid = threadIdx.x;
  const long long gid = (long long)blockIdx.x * NT + tid;
  const long long stride = (long long)gridDim.x * NT;
  double acc = 0.0;
  if (VEC) {
    const float4 *bx = reinterpret_cast<const float4 *>(x + head);
    const float4 *by = reinterpret_cast<const float4 *>(y + head);
    const long long nvec = (n - head) >> 2;
    const long long tail0 = head + nvec * 4;
    long long i = gid;
    for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
      float4 a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        a[u] = bx[i + u * stride];
        b[u] = by[i + u * stride];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) acc += dot4(a[u], b[u]);
    }
    for (; i < nvec; i += stride) acc += dot4(bx[i], by[i]);
    if (gid < head) acc = fma((double)x[gid], (double)y[gid], acc);
    if (gid < n - tail0) acc = fma((double)x[tail0 + gid], (double)y[tail0 + gid], acc);
  } else {
    long long i = gid;
    for (; i + 3 * stride < n; i += 4 * stride) {
      float a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        a[u] = x[i + u * stride];
        b[u] = y[i + u * stride];
      }
      double p = fma((double)a[0], (double)b[0], (double)a[1] * (double)b[1]);
      double q = fma((double)a[2], (double)b[2], (double)a[3] * (double)b[3]);
      acc += p + q;
    }
    for (; i < n; i += stride) acc = fma((double)x[i], (double)y[i], acc);
  }

  grid_sum<false>(acc, partials, ticket, out);
}

/* --- nrm2 ---------------------------------------------------------------------- */

/* nrm2's ticket counter: its own, for the reason dot has one. */
constexpr int kNrm2Ticket = 2;
static_assert(kNrm2Ticket < GKCU__NTICKETS && kNrm2Ticket != kDotTicket, "ticket index");
/* One vector: as many 128-bit loads in flight per thread as dot has over two. */
constexpr int NRM2_UNROLL = 2 * UNROLL;

/* The square of a float is exact in double; two squares' sum is rounded once. */
__device__ __forceinline__ double sq4(float4 a) {
  double p = fma((double)a.x, (double)a.x, (double)a.y * (double)a.y);
  double q = fma((double)a.z, (double)a.z, (double)a.w * (double)a.w);
  return p + q;
}

/* dot_kernel's layout on one vector, which is always read as float4s:
 * x + head is 16-byte aligned, x[0..head) and x[tail0..n) (fewer than 4
 * each) are scalars.  The squares are summed in double per thread, then per
 * block; with one block the square root is written directly, else the block
 * that draws the last ticket adds the partials in block order (the same
 * order every run), writes the square root and resets the ticket. */
__global__ void __launch_bounds__(NT, DOT_BLOCKS_PER_SM)
    nrm2_kernel(const float *__restrict__ x, long long n, int head, double *__restrict__ partials,
                unsigned int *ticket, double *out) {
  const int tid = threadIdx.x;
  const long long gid = (long long)blockIdx.x * NT + tid;
  const long long stride = (long long)gridDim.x * NT;
  const float4 *bx = reinterpret_cast<const float4 *>(x + head);
  const long long nvec = (n - head) >> 2;
  const long long tail0 = head + nvec * 4;
  double acc = 0.0;
  long long i = gid;
  for (; i + (NRM2_UNROLL - 1) * stride < nvec; i += NRM2_UNROLL * stride) {
    float4 a[NRM2_UNROLL];
#pragma unroll
    for (int u = 0; u < NRM2_UNROLL; u++) a[u] = bx[i + u * stride];
#pragma unroll
    for (int u = 0; u < NRM2_UNROLL; u++) acc += sq4(a[u]);
  }
  for (; i < nvec; i += stride) acc += sq4(bx[i]);
  if (gid < head) acc = fma((double)x[gid], (double)x[gid], acc);
  if (gid < n - tail0) acc = fma((double)x[tail0 + gid], (double)x[tail0 + gid], acc);

  grid_sum<true>(acc, partials, ticket, out);
}

/* --- axpby ------------------------------------------------------------------------ */

/* Which vectors are read: both, x only (beta == 0), y only (alpha == 0). */
enum { AXPBY_XY = 0, AXPBY_X = 1, AXPBY_Y = 2 };

template <int MODE>
__device__ __forceinline__ float axpby1(float alpha, float a, float beta, float b) {
  if (MODE == AXPBY_X) return alpha * a;
  if (MODE == AXPBY_Y) return beta * b;
  return fmaf(alpha, a, beta * b);
}

template <int MODE>
__device__ __forceinline__ float4 axpby4(float alpha, float4 a, float beta, float4 b) {
  return make_float4(axpby1<MODE>(alpha, a.x, beta, b.x), axpby1<MODE>(alpha, a.y, beta, b.y),
                     axpby1<MODE>(alpha, a.z, beta, b.z), axpby1<MODE>(alpha, a.w, beta, b.w));
}

/* Same layout as dot_kernel.  No __restrict__: x may be y (each element is
 * read, then written, by the same thread, so that is race-free). */
template <int MODE, bool VEC>
__global__ void __launch_bounds__(NT) axpby_kernel(long long n, int head, float alpha, const float *x,
                                                   float beta, float *y) {
  const long long gid = (long long)blockIdx.x * NT + threadIdx.x;
  const long long stride = (long long)gridDim.x * NT;
  if (VEC) {
    const float4 *bx = reinterpret_cast<const float4 *>(x + head);
    float4 *by = reinterpret_cast<float4 *>(y + head);
    const long long nvec = (n - head) >> 2;
    const long long tail0 = head + nvec * 4;
    const float4 z4 = make_float4(0.f, 0.f, 0.f, 0.f);
    long long i = gid;
    for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
      float4 a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        a[u] = MODE != AXPBY_Y ? bx[i + u * stride] : z4;
        b[u] = MODE != AXPBY_X ? by[i + u * stride] : z4;
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) by[i + u * stride] = axpby4<MODE>(alpha, a[u], beta, b[u]);
    }
    for (; i < nvec; i += stride) {
      float4 a = MODE != AXPBY_Y ? bx[i] : z4;
      float4 b = MODE != AXPBY_X ? by[i] : z4;
      by[i] = axpby4<MODE>(alpha, a, beta, b);
    }
    if (gid < head) {
      float a = MODE != AXPBY_Y ? x[gid] : 0.f, b = MODE != AXPBY_X ? y[gid] : 0.f;
      y[gid] = axpby1<MODE>(alpha, a, beta, b);
    }
    if (gid < n - tail0) {
      long long k = tail0 + gid;
      float a = MODE != AXPBY_Y ? x[k] : 0.f, b = MODE != AXPBY_X ? y[k] : 0.f;
      y[k] = axpby1<MODE>(alpha, a, beta, b);
    }
  } else {
    for (long long i = gid; i < n; i += stride) {
      float a = MODE != AXPBY_Y ? x[i] : 0.f, b = MODE != AXPBY_X ? y[i] : 0.f;
      y[i] = axpby1<MODE>(alpha, a, beta, b);
    }
  }
}

/* Blocks for `units` of work (one thread's share of one pass: UNROLL
 * float4s, or a group of scalars), at most one full wave (bps blocks per
 * multiprocessor); the kernels stride over the rest. */
unsigned int grid_for(const gkcu_ctx *ctx, long long units, int bps) {
  long long want = (units + NT - 1) / NT;
  long long cap = (long long)ctx->sm_count * bps;
  return (unsigned int)(want < 1 ? 1 : (want > cap ? cap : want));
}

template <bool VEC>
int launch_axpby_mode(gkcu_ctx *ctx, int mode, unsigned int blocks, long long n, int head, float alpha,
                      const float *x, float beta, float *y) {
  switch (mode) {
    case AXPBY_X: axpby_kernel<AXPBY_X, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
    case AXPBY_Y: axpby_kernel<AXPBY_Y, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
    default: axpby_kernel<AXPBY_XY, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
  }
  GKCU__LAUNCHED(ctx, "axpby_kernel");
  return 0;
}

int check_dot(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, const void *d_result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1);
  GKCU__CHECK_ARG(ctx, x != NULL && y != NULL && d_result != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)x & 3u) == 0 && ((uintptr_t)y & 3u) == 0);
  return 0;
}

int check_axpby(gkcu_ctx *ctx, int64_t n, const float *x, float *y) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1);
  GKCU__CHECK_ARG(ctx, x != NULL && y != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)x & 3u) == 0 && ((uintptr_t)y & 3u) == 0);
  /* n * 4 bytes must not wrap the address space */
  GKCU__CHECK_ARG(ctx, (uint64_t)n <= (UINTPTR_MAX - (uintptr_t)x) / 4 && (uint64_t)n <= (UINTPTR_MAX - (uintptr_t)y) / 4);
  const uintptr_t xa = (uintptr_t)x, ya = (uintptr_t)y, bytes = (uintptr_t)n * 4u;
  /* x == y, or disjoint */
  GKCU__CHECK_ARG(ctx, x == y || xa + bytes <= ya || ya + bytes <= xa);
  return 0;
}

}  // namespace

extern "C" int gkcu_dot_async(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, double *d_result) {
  int rc = check_dot(ctx, n, x, y, d_result);
  if (rc != 0) return rc;
  const int hx = head_of(x), hy = head_of(y);
  const bool vec = hx == hy;
  int head = vec ? (hx > n ? (int)n : hx) : 0;
  /* work in units of one float4 (or 4 scalars) per thread per pass */
  const long long units = vec ? ((n - head) >> 2) / UNROLL : n / 4;
  const unsigned int blocks = grid_for(ctx, units, DOT_BLOCKS_PER_SM);
  double *partials = NULL;
  if (blocks > 1) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, blocks * sizeof(double), (void **)&partials);
    rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  unsigned int *ticket = ctx->tickets + kDotTicket;
  if (vec)
    dot_kernel<true><<<blocks, NT, 0, ctx->stream>>>(x, y, n, head, partials, ticket, d_result);
  else
    dot_kernel<false><<<blocks, NT, 0, ctx->stream>>>(x, y, n, 0, partials, ticket, d_result);
  GKCU__LAUNCHED(ctx, "dot_kernel");
  return 0;
}

extern "C" int gkcu_dot(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, double *result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  if (!result) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "invalid argument: result != NULL");
  int rc = gkcu_dot_async(ctx, n, x, y, ctx->dev_result);
  if (rc != 0) return rc;
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  *result = *ctx->host_result;
  return 0;
}

extern "C" int gkcu_nrm2_async(gkcu_ctx *ctx, int64_t n, const float *x, double *d_result) {
  int rc = check_dot(ctx, n, x, x, d_result);
  if (rc != 0) return rc;
  const int hx = head_of(x);
  const int head = hx > n ? (int)n : hx;
  /* work in units of NRM2_UNROLL float4s per thread per pass */
  const unsigned int blocks = grid_for(ctx, ((n - head) >> 2) / NRM2_UNROLL, DOT_BLOCKS_PER_SM);
  double *partials = NULL;
  if (blocks > 1) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, blocks * sizeof(double), (void **)&partials);
    rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  nrm2_kernel<<<blocks, NT, 0, ctx->stream>>>(x, n, head, partials, ctx->tickets + kNrm2Ticket, d_result);
  GKCU__LAUNCHED(ctx, "nrm2_kernel");
  return 0;
}

extern "C" int gkcu_nrm2(gkcu_ctx *ctx, int64_t n, const float *x, double *result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  if (!result) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "invalid argument: result != NULL");
  int rc = gkcu_nrm2_async(ctx, n, x, ctx->dev_result);
  if (rc != 0) return rc;
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  *result = *ctx->host_result;
  return 0;
}

extern "C" int gkcu_axpby(gkcu_ctx *ctx, int64_t n, float alpha, const float *x, float beta, float *y) {
  int rc = check_axpby(ctx, n, x, y);
  if (rc != 0) return rc;
  if (alpha == 0.0f && beta == 0.0f) {
    /* +0.0f is all zero bits */
    GKCU__TRY_CUDA(ctx, cudaMemsetAsync(y, 0, (size_t)n * sizeof(float), ctx->stream));
    return 0;
  }
  const int mode = beta == 0.0f ? AXPBY_X : alpha == 0.0f ? AXPBY_Y : AXPBY_XY;
  /* x's alignment does not matter when x is not read */
  const int hx = head_of(x), hy = head_of(y);
  const bool vec = mode == AXPBY_Y || hx == hy;
  if (vec) {
    int head = hy > n ? (int)n : hy;
    unsigned int blocks = grid_for(ctx, ((n - head) >> 2) / UNROLL, BLOCKS_PER_SM);
    return launch_axpby_mode<true>(ctx, mode, blocks, n, head, alpha, x, beta, y);
  }
  unsigned int blocks = grid_for(ctx, n, BLOCKS_PER_SM);
  return launch_axpby_mode<false>(ctx, mode, blocks, n, 0, alpha, x, beta, y);
}

/* --- cuBLAS twins ------------------------------------------------------------------- */

extern "C" int gkcu_dot_cublas_async(gkcu_ctx *ctx, int64_t n, const float *x, const float *y, float *d_result) {
  int rc = check_dot(ctx, n, x, y, d_result);
  if (rc != 0) return rc;
  GKCU__TRY_CUBLAS(ctx, cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_DEVICE));
  cublasStatus_t s = cublasSdot_64(ctx->cublas, n, x, 1, y, 1, d_result);
  /* back to the mode every other launcher expects, whatever happened */
  cublasStatus_t s2 = cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_HOST);
  if (s != CUBLAS_STATUS_SUCCESS) return gkcu__cublas_fail(ctx, s, "cublasSdot_64");
  if (s2 != CUBLAS_STATUS_SUCCESS) return gkcu__cublas_fail(ctx, s2, "cublasSetPointerMode");
  GKCU__LAUNCHED(ctx, "cublasSdot_64");
  return 0;
}

extern "C" int gkcu_axpby_cublas(gkcu_ctx *ctx, int64_t n, float alpha, const float *x, float beta, float *y) {
  int rc = check_axpby(ctx, n, x, y);
  if (rc != 0) return rc;
  if (alpha == 0.0f && beta == 0.0f) {
    GKCU__TRY_CUDA(ctx, cudaMemsetAsync(y, 0, (size_t)n * sizeof(float), ctx->stream));
    return 0;
  }
  if (x == y) {
    float s = alpha + beta;
    GKCU__TRY_CUBLAS(ctx, cublasSscal_64(ctx->cublas, n, &s, y, 1));
  } else {
    if (beta == 0.0f)
      GKCU__TRY_CUDA(ctx, cudaMemsetAsync(y, 0, (size_t)n * sizeof(float), ctx->stream));
    else if (beta != 1.0f)
      GKCU__TRY_CUBLAS(ctx, cublasSscal_64(ctx->cublas, n, &beta, y, 1));
    if (alpha != 0.0f) GKCU__TRY_CUBLAS(ctx, cublasSaxpy_64(ctx->cublas, n, &alpha, x, 1, y, 1));
  }
  GKCU__LAUNCHED(ctx, "cublasSscal/cublasSaxpy");
  return 0;
}
