/* gkcu_blas1_f64.cu: dot, nrm2 and axpby on float64 device vectors (see
 * gkcu_blas1.h).  The float32 kernels' layout (gkcu_blas1.cu) with two
 * doubles per 128-bit load; the float32 code is not touched, so its speed
 * is what it was. */
#include <stdint.h>

#include "gkcu_blas1.h"
#include "gkcu_blas1_sum.cuh"
#include "gkcu_internal.h"

namespace {

using gkblas1::block_sum;
using gkblas1::grid_last;
using gkblas1::grid_sum;
using gkblas1::NT;

/* Their own ticket counters (the float32 dot and nrm2 have 1 and 2,
 * gkcu_reduce 0), for the reason gkcu_blas1.cu gives. */
constexpr int kDotTicket = 3, kNrm2Ticket = 4;
static_assert(kNrm2Ticket < GKCU__NTICKETS, "ticket index");

constexpr int UNROLL = 2;             /* 128-bit loads in flight per vector per thread */
constexpr int NRM2_UNROLL = 2 * UNROLL; /* one vector: as many loads as dot has over two */
constexpr int BLOCKS_PER_SM = 8;      /* axpby */
constexpr int DOT_BLOCKS_PER_SM = 6;  /* dot, nrm2: the float32 kernels' figure */

/* Offset, in doubles (0 or 1), of p from the 16-byte boundary at or after
 * it: the scalars before a double2-aligned body. */
__host__ inline int head_of(const double *p) { return (int)(((16u - ((uintptr_t)p & 15u)) & 15u) / 8u); }

/* Blocks for `units` of work (one thread's share of one pass), at most one
 * full wave of bps blocks per multiprocessor; the kernels stride over the
 * rest. */
unsigned int grid_for(const gkcu_ctx *ctx, long long units, int bps) {
  long long want = (units + NT - 1) / NT;
  long long cap = (long long)ctx->sm_count * bps;
  return (unsigned int)(want < 1 ? 1 : (want > cap ? cap : want));
}

/* --- dot --------------------------------------------------------------------- */

/* Each product fused into the running sum: one rounding per element. */
__device__ __forceinline__ double dot2(double2 a, double2 b, double acc) {
  return fma(a.y, b.y, fma(a.x, b.x, acc));
}

/* VEC: x + head and y + head are 16-byte aligned: the body as double2s,
 * x[0..head) and the last odd element as scalars.  !VEC: all scalars, 4 of
 * each in flight.  Then grid_sum. */
template <bool VEC>
__global__ void __launch_bounds__(NT, DOT_BLOCKS_PER_SM)
    dot_kernel(const double *__restrict__ x, const double *__restrict__ y, long long n, int head,
               double *__restrict__ partials, unsigned int *ticket, double *out) {
  const long long gid = (long long)blockIdx.x * NT + threadIdx.x;
  const long long stride = (long long)gridDim.x * NT;
  double acc = 0.0;
  if (VEC) {
    const double2 *bx = reinterpret_cast<const double2 *>(x + head);
    const double2 *by = reinterpret_cast<const double2 *>(y + head);
    const long long nvec = (n - head) >> 1;
    const long long tail0 = head + nvec * 2;
    long long i = gid;
    for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
      double2 a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        a[u] = bx[i + u * stride];
        b[u] = by[i + u * stride];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) acc = dot2(a[u], b[u], acc);
    }
    for (; i < nvec; i += stride) acc = dot2(bx[i], by[i], acc);
    if (gid < head) acc = fma(x[gid], y[gid], acc);
    if (gid < n - tail0) acc = fma(x[tail0 + gid], y[tail0 + gid], acc);
  } else {
    long long i = gid;
    for (; i + 3 * stride < n; i += 4 * stride) {
      double a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        a[u] = x[i + u * stride];
        b[u] = y[i + u * stride];
      }
#pragma unroll
      for (int u = 0; u < 4; u++) acc = fma(a[u], b[u], acc);
    }
    for (; i < n; i += stride) acc = fma(x[i], y[i], acc);
  }
  grid_sum<false>(acc, partials, ticket, out);
}

/* --- nrm2 -------------------------------------------------------------------- */

/* Blue's thresholds and scales for double (LAPACK's dnrm2), except the
 * small scale: 2^600 rather than 2^537, so that even the square of the
 * smallest subnormal, scaled, is a normal double (2^-948) and keeps its
 * digits; (2^-511 * 2^600)^2 = 2^178 leaves room for any n. */
constexpr double T_SML = 0x1p-511, T_BIG = 0x1p486; /* squares in [T_SML, T_BIG] are normal */
constexpr double S_SML = 0x1p600, S_BIG = 0x1p-538;

struct blue {
  double med, sml, big;
};

/* x[i]^2 into one of the three sums.  NaN fails both comparisons and
 * lands in med, which it makes NaN. */
__device__ __forceinline__ void blue_add(blue &s, double v) {
  const double a = fabs(v);
  if (a > T_BIG) {
    const double t = a * S_BIG;
    s.big = fma(t, t, s.big);
  } else if (a < T_SML) {
    const double t = a * S_SML;
    s.sml = fma(t, t, s.sml);
  } else {
    s.med = fma(a, a, s.med);
  }
}

/* The root of the three sums together (LAPACK dnrm2's combination): with
 * only med, its plain root; with big, med's share scaled to big's (sml's
 * is below its rounding); with sml and med, the two roots combined. */
__device__ double blue_root(double med, double sml, double big) {
  const bool med_some = med > 0.0 || isnan(med);
  if (big > 0.0) {
    if (med_some) big += (med * S_BIG) * S_BIG;
    return sqrt(big) / S_BIG;
  }
  if (sml > 0.0) {
    if (!med_some) return sqrt(sml) / S_SML;
    const double ym = sqrt(med), ys = sqrt(sml) / S_SML;
    double lo = ys, hi = ym; /* hi stays NaN when med is */
    if (ys > ym) lo = ym, hi = ys;
    const double q = lo / hi;
    return hi * sqrt(fma(q, q, 1.0));
  }
  return sqrt(med);
}

/* dot_kernel's VEC layout on one vector, always read as double2s from x's
 * first 16-byte boundary; the three sums go through grid_last together. */
__global__ void __launch_bounds__(NT, DOT_BLOCKS_PER_SM)
    nrm2_kernel(const double *__restrict__ x, long long n, int head, double *__restrict__ partials,
                unsigned int *ticket, double *out) {
  const long long gid = (long long)blockIdx.x * NT + threadIdx.x;
  const long long stride = (long long)gridDim.x * NT;
  const double2 *bx = reinterpret_cast<const double2 *>(x + head);
  const long long nvec = (n - head) >> 1;
  const long long tail0 = head + nvec * 2;
  blue s = {0.0, 0.0, 0.0};
  long long i = gid;
  for (; i + (NRM2_UNROLL - 1) * stride < nvec; i += NRM2_UNROLL * stride) {
    double2 a[NRM2_UNROLL];
#pragma unroll
    for (int u = 0; u < NRM2_UNROLL; u++) a[u] = bx[i + u * stride];
#pragma unroll
    for (int u = 0; u < NRM2_UNROLL; u++) blue_add(s, a[u].x), blue_add(s, a[u].y);
  }
  for (; i < nvec; i += stride) {
    const double2 a = bx[i];
    blue_add(s, a.x), blue_add(s, a.y);
  }
  if (gid < head) blue_add(s, x[gid]);
  if (gid < n - tail0) blue_add(s, x[tail0 + gid]);
  double acc[3] = {block_sum(s.med), block_sum(s.sml), block_sum(s.big)};
  if (grid_last<3>(acc, partials, ticket)) *out = blue_root(acc[0], acc[1], acc[2]);
}

/* --- axpby ------------------------------------------------------------------- */

/* Which vectors are read: both, x only (beta == 0), y only (alpha == 0). */
enum { AXPBY_XY = 0, AXPBY_X = 1, AXPBY_Y = 2 };

template <int MODE>
__device__ __forceinline__ double axpby1(double alpha, double a, double beta, double b) {
  if (MODE == AXPBY_X) return alpha * a;
  if (MODE == AXPBY_Y) return beta * b;
  return fma(alpha, a, beta * b);
}

template <int MODE>
__device__ __forceinline__ double2 axpby2(double alpha, double2 a, double beta, double2 b) {
  return make_double2(axpby1<MODE>(alpha, a.x, beta, b.x), axpby1<MODE>(alpha, a.y, beta, b.y));
}

/* dot_kernel's layout.  No __restrict__: x may be y (each element is read,
 * then written, by the same thread). */
template <int MODE, bool VEC>
__global__ void __launch_bounds__(NT) axpby_kernel(long long n, int head, double alpha, const double *x,
                                                   double beta, double *y) {
  const long long gid = (long long)blockIdx.x * NT + threadIdx.x;
  const long long stride = (long long)gridDim.x * NT;
  if (VEC) {
    const double2 *bx = reinterpret_cast<const double2 *>(x + head);
    double2 *by = reinterpret_cast<double2 *>(y + head);
    const long long nvec = (n - head) >> 1;
    const long long tail0 = head + nvec * 2;
    const double2 z2 = make_double2(0.0, 0.0);
    long long i = gid;
    for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
      double2 a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        a[u] = MODE != AXPBY_Y ? bx[i + u * stride] : z2;
        b[u] = MODE != AXPBY_X ? by[i + u * stride] : z2;
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) by[i + u * stride] = axpby2<MODE>(alpha, a[u], beta, b[u]);
    }
    for (; i < nvec; i += stride) {
      double2 a = MODE != AXPBY_Y ? bx[i] : z2;
      double2 b = MODE != AXPBY_X ? by[i] : z2;
      by[i] = axpby2<MODE>(alpha, a, beta, b);
    }
    if (gid < head) {
      double a = MODE != AXPBY_Y ? x[gid] : 0.0, b = MODE != AXPBY_X ? y[gid] : 0.0;
      y[gid] = axpby1<MODE>(alpha, a, beta, b);
    }
    if (gid < n - tail0) {
      long long k = tail0 + gid;
      double a = MODE != AXPBY_Y ? x[k] : 0.0, b = MODE != AXPBY_X ? y[k] : 0.0;
      y[k] = axpby1<MODE>(alpha, a, beta, b);
    }
  } else {
    for (long long i = gid; i < n; i += stride) {
      double a = MODE != AXPBY_Y ? x[i] : 0.0, b = MODE != AXPBY_X ? y[i] : 0.0;
      y[i] = axpby1<MODE>(alpha, a, beta, b);
    }
  }
}

template <bool VEC>
int launch_axpby_mode(gkcu_ctx *ctx, int mode, unsigned int blocks, long long n, int head, double alpha,
                      const double *x, double beta, double *y) {
  switch (mode) {
    case AXPBY_X: axpby_kernel<AXPBY_X, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
    case AXPBY_Y: axpby_kernel<AXPBY_Y, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
    default: axpby_kernel<AXPBY_XY, VEC><<<blocks, NT, 0, ctx->stream>>>(n, head, alpha, x, beta, y); break;
  }
  GKCU__LAUNCHED(ctx, "axpby_f64_kernel");
  return 0;
}

int check_dot(gkcu_ctx *ctx, int64_t n, const double *x, const double *y, const void *d_result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1);
  GKCU__CHECK_ARG(ctx, x != NULL && y != NULL && d_result != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)x & 7u) == 0 && ((uintptr_t)y & 7u) == 0);
  return 0;
}

int check_axpby(gkcu_ctx *ctx, int64_t n, const double *x, double *y) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1);
  GKCU__CHECK_ARG(ctx, x != NULL && y != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)x & 7u) == 0 && ((uintptr_t)y & 7u) == 0);
  /* n * 8 bytes must not wrap the address space */
  GKCU__CHECK_ARG(ctx, (uint64_t)n <= (UINTPTR_MAX - (uintptr_t)x) / 8 && (uint64_t)n <= (UINTPTR_MAX - (uintptr_t)y) / 8);
  const uintptr_t xa = (uintptr_t)x, ya = (uintptr_t)y, bytes = (uintptr_t)n * 8u;
  /* x == y, or disjoint */
  GKCU__CHECK_ARG(ctx, x == y || xa + bytes <= ya || ya + bytes <= xa);
  return 0;
}

/* *result (host) from the context's device slot, after waiting. */
int wait_result(gkcu_ctx *ctx, double *result) {
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  *result = *ctx->host_result;
  return 0;
}

}  // namespace

extern "C" int gkcu_dot_f64_async(gkcu_ctx *ctx, int64_t n, const double *x, const double *y,
                                  double *d_result) {
  int rc = check_dot(ctx, n, x, y, d_result);
  if (rc != 0) return rc;
  const int hx = head_of(x), hy = head_of(y);
  const bool vec = hx == hy;
  const int head = vec ? (hx > n ? (int)n : hx) : 0;
  /* work in units of UNROLL double2s (or 4 scalars) per thread per pass */
  const long long units = vec ? ((n - head) >> 1) / UNROLL : n / 4;
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
  GKCU__LAUNCHED(ctx, "dot_f64_kernel");
  return 0;
}

extern "C" int gkcu_dot_f64(gkcu_ctx *ctx, int64_t n, const double *x, const double *y, double *result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  if (!result) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "invalid argument: result != NULL");
  int rc = gkcu_dot_f64_async(ctx, n, x, y, ctx->dev_result);
  return rc != 0 ? rc : wait_result(ctx, result);
}

extern "C" int gkcu_nrm2_f64_async(gkcu_ctx *ctx, int64_t n, const double *x, double *d_result) {
  int rc = check_dot(ctx, n, x, x, d_result);
  if (rc != 0) return rc;
  const int hx = head_of(x);
  const int head = hx > n ? (int)n : hx;
  const unsigned int blocks = grid_for(ctx, ((n - head) >> 1) / NRM2_UNROLL, DOT_BLOCKS_PER_SM);
  double *partials = NULL;
  if (blocks > 1) { /* the three sums' partials, one row of blocks each */
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, 3 * (size_t)blocks * sizeof(double), (void **)&partials);
    rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  nrm2_kernel<<<blocks, NT, 0, ctx->stream>>>(x, n, head, partials, ctx->tickets + kNrm2Ticket, d_result);
  GKCU__LAUNCHED(ctx, "nrm2_f64_kernel");
  return 0;
}

extern "C" int gkcu_nrm2_f64(gkcu_ctx *ctx, int64_t n, const double *x, double *result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  if (!result) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "invalid argument: result != NULL");
  int rc = gkcu_nrm2_f64_async(ctx, n, x, ctx->dev_result);
  return rc != 0 ? rc : wait_result(ctx, result);
}

extern "C" int gkcu_axpby_f64(gkcu_ctx *ctx, int64_t n, double alpha, const double *x, double beta,
                              double *y) {
  int rc = check_axpby(ctx, n, x, y);
  if (rc != 0) return rc;
  if (alpha == 0.0 && beta == 0.0) {
    /* +0.0 is all zero bits */
    GKCU__TRY_CUDA(ctx, cudaMemsetAsync(y, 0, (size_t)n * sizeof(double), ctx->stream));
    return 0;
  }
  const int mode = beta == 0.0 ? AXPBY_X : alpha == 0.0 ? AXPBY_Y : AXPBY_XY;
  /* x's alignment does not matter when x is not read */
  const int hx = head_of(x), hy = head_of(y);
  const bool vec = mode == AXPBY_Y || hx == hy;
  if (vec) {
    int head = hy > n ? (int)n : hy;
    unsigned int blocks = grid_for(ctx, ((n - head) >> 1) / UNROLL, BLOCKS_PER_SM);
    return launch_axpby_mode<true>(ctx, mode, blocks, n, head, alpha, x, beta, y);
  }
  unsigned int blocks = grid_for(ctx, n, BLOCKS_PER_SM);
  return launch_axpby_mode<false>(ctx, mode, blocks, n, 0, alpha, x, beta, y);
}
