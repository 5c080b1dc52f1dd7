/* gkcu_reduce.cu: the reduce ladder (smem, shfl) and CUB. */
#include <stdio.h>
#include <string.h>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include "gkcu_internal.h"
#include "gkcu_lab.h"
#include "gkcu_reduce.h"

namespace {

/* What each op accumulates in, its identity, and how it folds values in.
 * min/max start from NaN: fminf(NaN, v) = v, so NaN is their identity and
 * an all-NaN input stays NaN. */
template <int OP>
struct Op;

template <>
struct Op<GKCU_SUM> {
  using Acc = double;
  static __device__ __forceinline__ Acc identity() { return 0.0; }
  static __device__ __forceinline__ Acc combine(Acc a, Acc b) { return a + b; }
  static __device__ __forceinline__ Acc from4(float4 v) { return (double)((v.x + v.y) + (v.z + v.w)); }
};

template <>
struct Op<GKCU_MIN> {
  using Acc = float;
  static __device__ __forceinline__ Acc identity() { return __int_as_float(0x7fffffff); }
  static __device__ __forceinline__ Acc combine(Acc a, Acc b) { return fminf(a, b); }
  static __device__ __forceinline__ Acc from4(float4 v) { return fminf(fminf(v.x, v.y), fminf(v.z, v.w)); }
};

template <>
struct Op<GKCU_MAX> {
  using Acc = float;
  static __device__ __forceinline__ Acc identity() { return __int_as_float(0x7fffffff); }
  static __device__ __forceinline__ Acc combine(Acc a, Acc b) { return fmaxf(a, b); }
  static __device__ __forceinline__ Acc from4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }
};

template <int OP>
__device__ __forceinline__ typename Op<OP>::Acc warp_reduce(typename Op<OP>::Acc v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = Op<OP>::combine(v, __shfl_down_sync(0xffffffffu, v, off));
  return v;
}

/* Whole-block reduction; the result is valid in thread 0.  Ends with a
 * barrier so that the shared slots can be reused by a second call. */
template <int OP, int NT>
__device__ __forceinline__ typename Op<OP>::Acc block_reduce(typename Op<OP>::Acc v) {
  using Acc = typename Op<OP>::Acc;
  __shared__ Acc warp_vals[NT / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce<OP>(v);
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < NT / 32 ? warp_vals[lane] : Op<OP>::identity();
    v = warp_reduce<OP>(v);
  }
  __syncthreads();
  return v;
}

/* --- rung 0: shared-memory tree ------------------------------------------- */

/* Each thread folds two elements (a block's reach is 512) into shared
 * memory, then the active half shrinks each step (sequential addressing, no
 * divergence within a warp until the last five steps).  One partial per
 * block; the launcher repeats the kernel over the partials. */
template <int OP, typename Tin, typename Tout>
__global__ void __launch_bounds__(256) reduce_smem_kernel(const Tin *__restrict__ in, long long n,
                                                          Tout *__restrict__ out) {
  using Acc = typename Op<OP>::Acc;
  __shared__ Acc s[256];
  const int tid = threadIdx.x;
  long long i = (long long)blockIdx.x * 512 + tid;
  Acc v = Op<OP>::identity();
  if (i < n) v = Op<OP>::combine(v, (Acc)in[i]);
  if (i + 256 < n) v = Op<OP>::combine(v, (Acc)in[i + 256]);
  s[tid] = v;
  __syncthreads();
  for (int st = 128; st > 0; st >>= 1) {
    if (tid < st) s[tid] = Op<OP>::combine(s[tid], s[tid + st]);
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = (Tout)s[0];
}

/* --- rung 1: float4 loads, warp shuffles, one pass ---------------------------- */

constexpr int SHFL_NT = 256;

/* A 16-byte load.  STREAM 1: ld.global.cs (evict first: each byte is read
 * once); 0: plain __ldg.  (Lost in the lab, see cuda/NOTES.md: no L1
 * allocation with or without a 256-byte L2 prefetch hint.) */
template <int STREAM>
__device__ __forceinline__ float4 load4(const float4 *p) {
  if (STREAM == 1) return __ldcs(p);
  return __ldg(p);
}

/* x[0..head) and the tail x[tail0..n) (fewer than 4 each) are read as
 * scalars, the aligned body as float4s, UNROLL independent loads in flight
 * per thread.  Each block leaves a partial; the block that draws the last
 * ticket combines them, writes *out and puts the ticket counter back to
 * zero. */
/* (SHFL_NT, MINB): registers budgeted so that all MINB blocks the launcher
 * puts on a multiprocessor are resident at once (v1 left min/max at 40
 * registers with 6 of 8 resident, and a second, partial wave cost 7% at
 * 2^28). */
template <int OP, int UNROLL, int STREAM, int MINB>
__global__ void __launch_bounds__(SHFL_NT, MINB) reduce_shfl_kernel(const float *__restrict__ x, long long n,
                                                                 int head,
                                                                 typename Op<OP>::Acc *__restrict__ partials,
                                                                 unsigned int *ticket, double *out) {
  using Acc = typename Op<OP>::Acc;
  const int tid = threadIdx.x;
  const float4 *body = reinterpret_cast<const float4 *>(x + head);
  const long long nvec = (n - head) >> 2;
  const long long tail0 = head + nvec * 4;
  const long long gid = (long long)blockIdx.x * SHFL_NT + tid;
  const long long stride = (long long)gridDim.x * SHFL_NT;

  Acc acc = Op<OP>::identity();
  long long i = gid;
  for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) v[u] = load4<STREAM>(body + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc = Op<OP>::combine(acc, Op<OP>::from4(v[u]));
  }
  for (; i < nvec; i += stride) acc = Op<OP>::combine(acc, Op<OP>::from4(load4<STREAM>(body + i)));
  if (gid < head) acc = Op<OP>::combine(acc, (Acc)x[gid]);
  if (gid < n - tail0) acc = Op<OP>::combine(acc, (Acc)x[tail0 + gid]);

  acc = block_reduce<OP, SHFL_NT>(acc);
  if (gridDim.x == 1) {
    if (tid == 0) *out = (double)acc;
    return;
  }

  __shared__ bool is_last;
  if (tid == 0) {
    partials[blockIdx.x] = acc;
    __threadfence(); /* partial visible before the ticket is drawn */
    unsigned int t = atomicAdd(ticket, 1u);
    is_last = (t == gridDim.x - 1);
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  acc = Op<OP>::identity();
  /* up to 32 partials per thread (an oversubscribed grid): loads unrolled so
   * that several are in flight on this last, serial step */
#pragma unroll 4
  for (int j = tid; j < (int)gridDim.x; j += SHFL_NT) acc = Op<OP>::combine(acc, __ldcg(&partials[j]));
  acc = block_reduce<OP, SHFL_NT>(acc);
  if (tid == 0) {
    *out = (double)acc;
    *ticket = 0u;
  }
}

/* The shfl variants the lab compares: loads in flight per thread, cache
 * hint, blocks per multiprocessor (the default, and the register budget),
 * and `over`: the grid is `over` times what fits on the GPU at once, so
 * blocks retire and others take their place (CUB's reduction
 * oversubscribes its grid; ours is one wave).
 * kShflDefault is what gkcu_lab_reduce_shfl runs. */
struct ShflVariant {
  int unroll, stream, bps, over;
};
constexpr ShflVariant kShflVariants[] = {{4, 0, 8, 1}, {4, 1, 8, 1}, {8, 0, 4, 1}, {16, 0, 2, 1},
                                         {8, 0, 4, 4}, {4, 0, 8, 4},  {16, 0, 2, 4}};
constexpr int kShflVariantCount = (int)(sizeof kShflVariants / sizeof kShflVariants[0]);
static_assert(kShflVariantCount == GKCU_LAB_REDUCE_VARIANTS, "gkcu_lab.h's variant count");
constexpr int kShflDefault = 0;

/* What the shfl algo runs (H100 lab, bench/RESULTS.md, 2026-11-25):
 * evict-first loads while the input is within three L2 sizes (2^22..2^25
 * floats: 1.07-1.19x CUB, against 1.01-1.07x with plain loads; why the
 * hint helps at all, with L2 flushed before each call, is not established;
 * beyond, it loses 3-5%); beyond, plain loads, 4 in flight per thread at 8
 * blocks per SM on a grid four times what is resident at once (blocks
 * retire and others take their place, as in CUB's reduction): over three
 * runs at 2^26..2^28 its worst ratio to CUB was 0.992, against 0.983-0.988
 * for the one-wave grids with 4, 8 or 16 loads in flight.  All
 * of them are within about 1% of CUB there, which reads at the card's copy
 * rate (~3.0 TB/s); the run-to-run spread of our kernels is as large. */
constexpr int kShflStream = 1, kShflLarge = 5;
int shfl_variant(const gkcu_ctx *ctx, long long n) {
  return (double)n * 4.0 <= 3.0 * (double)ctx->l2_bytes ? kShflStream : kShflLarge;
}

/* --- launchers ---------------------------------------------------------------- */

template <int OP>
int run_smem(gkcu_ctx *ctx, const float *x, long long n, double *d_result) {
  using Acc = typename Op<OP>::Acc;
  long long nb = (n + 511) / 512;
  Acc *buf[2] = {NULL, NULL};
  gkcu__carve cv = {};
  gkcu__carve_add(&cv, (size_t)nb * sizeof(Acc), (void **)&buf[0]);
  gkcu__carve_add(&cv, (size_t)((nb + 511) / 512) * sizeof(Acc), (void **)&buf[1]);
  int rc = gkcu__carve_commit(ctx, &cv);
  if (rc != 0) return rc;
  if (nb > 0x7fffffffLL) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "reduce smem: n too large");

  if (nb == 1) {
    reduce_smem_kernel<OP, float, double><<<1, 256, 0, ctx->stream>>>(x, n, d_result);
    GKCU__LAUNCHED(ctx, "reduce_smem_kernel");
    return 0;
  }
  reduce_smem_kernel<OP, float, Acc><<<(unsigned int)nb, 256, 0, ctx->stream>>>(x, n, buf[0]);
  GKCU__LAUNCHED(ctx, "reduce_smem_kernel");
  int cur = 0;
  for (long long len = nb; len > 1;) {
    long long next = (len + 511) / 512;
    if (next == 1) {
      reduce_smem_kernel<OP, Acc, double><<<1, 256, 0, ctx->stream>>>(buf[cur], len, d_result);
    } else {
      reduce_smem_kernel<OP, Acc, Acc><<<(unsigned int)next, 256, 0, ctx->stream>>>(buf[cur], len, buf[cur ^ 1]);
    }
    GKCU__LAUNCHED(ctx, "reduce_smem_kernel");
    cur ^= 1;
    len = next;
  }
  return 0;
}

template <int OP, int UNROLL, int STREAM, int MINB>
int launch_shfl(gkcu_ctx *ctx, int blocks_per_sm, int over, const float *x, long long n, double *d_result) {
  using Acc = typename Op<OP>::Acc;
  int head = (int)(((16u - ((uintptr_t)x & 15u)) & 15u) / 4u);
  if (head > n) head = (int)n;
  long long nvec = (n - head) / 4;
  long long want = (nvec + (long long)SHFL_NT * UNROLL - 1) / ((long long)SHFL_NT * UNROLL);
  long long cap = (long long)ctx->sm_count * blocks_per_sm * over;
  unsigned int blocks = (unsigned int)(want < 1 ? 1 : (want > cap ? cap : want));
  Acc *partials = NULL;
  if (blocks > 1) {
    gkcu__carve cv = {};
    gkcu__carve_add(&cv, blocks * sizeof(Acc), (void **)&partials);
    int rc = gkcu__carve_commit(ctx, &cv);
    if (rc != 0) return rc;
  }
  reduce_shfl_kernel<OP, UNROLL, STREAM, MINB>
      <<<blocks, SHFL_NT, 0, ctx->stream>>>(x, n, head, partials, ctx->tickets, d_result);
  GKCU__LAUNCHED(ctx, "reduce_shfl_kernel");
  return 0;
}

/* blocks_per_sm 0: the variant's own. */
template <int OP>
int run_shfl(gkcu_ctx *ctx, int variant, int blocks_per_sm, const float *x, long long n, double *d_result) {
  const int bps = blocks_per_sm ? blocks_per_sm : kShflVariants[variant].bps;
  const int ov = kShflVariants[variant].over;
  switch (variant) {
    case 0: return launch_shfl<OP, 4, 0, 8>(ctx, bps, ov, x, n, d_result);
    case 1: return launch_shfl<OP, 4, 1, 8>(ctx, bps, ov, x, n, d_result);
    case 2: return launch_shfl<OP, 8, 0, 4>(ctx, bps, ov, x, n, d_result);
    case 3: return launch_shfl<OP, 16, 0, 2>(ctx, bps, ov, x, n, d_result);
    case 4: return launch_shfl<OP, 8, 0, 4>(ctx, bps, ov, x, n, d_result);
    case 5: return launch_shfl<OP, 4, 0, 8>(ctx, bps, ov, x, n, d_result);
    default: return launch_shfl<OP, 16, 0, 2>(ctx, bps, ov, x, n, d_result);
  }
}

int run_shfl_op(gkcu_ctx *ctx, int variant, int blocks_per_sm, int op, const float *x, long long n,
                double *d_result) {
  return op == GKCU_SUM   ? run_shfl<GKCU_SUM>(ctx, variant, blocks_per_sm, x, n, d_result)
         : op == GKCU_MIN ? run_shfl<GKCU_MIN>(ctx, variant, blocks_per_sm, x, n, d_result)
                          : run_shfl<GKCU_MAX>(ctx, variant, blocks_per_sm, x, n, d_result);
}

struct FMin {
  __device__ __forceinline__ float operator()(float a, float b) const { return fminf(a, b); }
};
struct FMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* Accumulates in float (the init's type), writes the double out. */
template <typename F>
int run_cub_op(gkcu_ctx *ctx, const float *x, long long n, double *d_result, F f, float init) {
  size_t bytes = 0;
  GKCU__TRY_CUDA(ctx, cub::DeviceReduce::Reduce(NULL, bytes, x, d_result, n, f, init, ctx->stream));
  void *tmp = NULL;
  gkcu__carve cv = {};
  gkcu__carve_add(&cv, bytes ? bytes : 1, &tmp);
  int rc = gkcu__carve_commit(ctx, &cv);
  if (rc != 0) return rc;
  GKCU__TRY_CUDA(ctx, cub::DeviceReduce::Reduce(tmp, bytes, x, d_result, n, f, init, ctx->stream));
  GKCU__LAUNCHED(ctx, "cub::DeviceReduce::Reduce");
  return 0;
}

int run_cub(gkcu_ctx *ctx, int op, const float *x, long long n, double *d_result) {
  const float nan = __builtin_nanf("");
  switch (op) {
    case GKCU_SUM: return run_cub_op(ctx, x, n, d_result, ::cuda::std::plus<float>(), 0.0f);
    case GKCU_MIN: return run_cub_op(ctx, x, n, d_result, FMin(), nan);
    default: return run_cub_op(ctx, x, n, d_result, FMax(), nan);
  }
}

const char *const kNames[GKCU_REDUCE_NALGO] = {"auto", "smem", "shfl", "cub"};

int check_args(gkcu_ctx *ctx, int algo, int op, const float *x, int64_t n, const double *out) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, algo >= 0 && algo < GKCU_REDUCE_NALGO);
  GKCU__CHECK_ARG(ctx, op == GKCU_SUM || op == GKCU_MIN || op == GKCU_MAX);
  GKCU__CHECK_ARG(ctx, n >= 1);
  GKCU__CHECK_ARG(ctx, x != NULL && out != NULL);
  GKCU__CHECK_ARG(ctx, ((uintptr_t)x & 3u) == 0);
  return 0;
}

}  // namespace

extern "C" const char *gkcu_reduce_algo_name(int algo) {
  return (algo >= 0 && algo < GKCU_REDUCE_NALGO) ? kNames[algo] : NULL;
}

extern "C" int gkcu_reduce_algo_parse(const char *s) {
  if (!s) return GKCU_REDUCE_AUTO;
  for (int i = 0; i < GKCU_REDUCE_NALGO; i++)
    if (strcmp(s, kNames[i]) == 0) return i;
  return -1;
}

/* The auto rule: shfl at every size (one launch, so it leads where launch
 * overhead dominates, and it streams at least as fast as CUB at 2^28: see
 * bench/RESULTS.md). */
extern "C" int gkcu_reduce_pick(const gkcu_ctx *ctx, int64_t n) {
  (void)ctx;
  (void)n;
  return GKCU_REDUCE_SHFL;
}

extern "C" int gkcu_reduce_async(gkcu_ctx *ctx, int algo, int op, const float *x, int64_t n,
                                 double *d_result) {
  int rc = check_args(ctx, algo, op, x, n, d_result);
  if (rc != 0) return rc;
  if (algo == GKCU_REDUCE_AUTO) algo = gkcu_reduce_pick(ctx, n);
  switch (algo) {
    case GKCU_REDUCE_SMEM:
      return op == GKCU_SUM ? run_smem<GKCU_SUM>(ctx, x, n, d_result)
             : op == GKCU_MIN ? run_smem<GKCU_MIN>(ctx, x, n, d_result)
                              : run_smem<GKCU_MAX>(ctx, x, n, d_result);
    case GKCU_REDUCE_SHFL: return run_shfl_op(ctx, shfl_variant(ctx, n), 0, op, x, n, d_result);
    case GKCU_REDUCE_CUB: return run_cub(ctx, op, x, n, d_result);
  }
  return gkcu__fail(ctx, GKC_EINTERNAL, "reduce: unhandled algo %d", algo);
}

extern "C" int gkcu_reduce(gkcu_ctx *ctx, int algo, int op, const float *x, int64_t n, double *result) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  if (!result) return gkcu__fail(ctx, GKC_EINVALID_ARGUMENT, "invalid argument: result != NULL");
  int rc = gkcu_reduce_async(ctx, algo, op, x, n, ctx->dev_result);
  if (rc != 0) return rc;
  GKCU__TRY_CUDA(ctx, cudaMemcpyAsync(ctx->host_result, ctx->dev_result, sizeof(double),
                                      cudaMemcpyDeviceToHost, ctx->stream));
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  *result = *ctx->host_result;
  return 0;
}

extern "C" int gkcu_lab_reduce_shfl(gkcu_ctx *ctx, int blocks_per_sm, int op, const float *x, int64_t n,
                                    double *d_result) {
  return gkcu_lab_reduce_shfl_variant(ctx, kShflDefault, blocks_per_sm, op, x, n, d_result);
}

extern "C" int gkcu_lab_reduce_shfl_variant(gkcu_ctx *ctx, int variant, int blocks_per_sm, int op, const float *x,
                                            int64_t n, double *d_result) {
  int rc = check_args(ctx, GKCU_REDUCE_SHFL, op, x, n, d_result);
  if (rc != 0) return rc;
  GKCU__CHECK_ARG(ctx, variant >= 0 && variant < kShflVariantCount);
  GKCU__CHECK_ARG(ctx, blocks_per_sm >= 0 && blocks_per_sm <= 8);
  return run_shfl_op(ctx, variant, blocks_per_sm, op, x, n, d_result);
}

extern "C" const char *gkcu_lab_reduce_shfl_name(int variant) {
  static char names[kShflVariantCount][32];
  if (variant < 0 || variant >= kShflVariantCount) return NULL;
  const ShflVariant &sv = kShflVariants[variant];
  snprintf(names[variant], sizeof names[variant], "shfl/u%d%s/bps%d%s", sv.unroll, sv.stream == 1 ? "cs" : "", sv.bps,
           sv.over == 4 ? "/x4" : "");
  return names[variant];
}
