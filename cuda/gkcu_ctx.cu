/* gkcu_ctx.cu: the per-stream context, error text, scratch, test data. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkcu_internal.h"

int gkcu__fail(gkcu_ctx *ctx, int code, const char *fmt, ...) {
  if (ctx) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

int gkcu__cuda_fail(gkcu_ctx *ctx, cudaError_t e, const char *what) {
  /* Clears a non-sticky error so that the next launch check does not trip
   * over it; a sticky one (a fault in a kernel) stays and keeps failing. */
  (void)cudaGetLastError();
  int code = (e == cudaErrorMemoryAllocation) ? GKC_EOUT_OF_MEMORY : GKC_EDEVICE_ERROR;
  return gkcu__fail(ctx, code, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int gkcu__cublas_fail(gkcu_ctx *ctx, cublasStatus_t s, const char *what) {
  int code = (s == CUBLAS_STATUS_ALLOC_FAILED) ? GKC_EOUT_OF_MEMORY : GKC_EDEVICE_ERROR;
  return gkcu__fail(ctx, code, "%s: %s", what, cublasGetStatusString(s));
}

int gkcu__cusparse_fail(gkcu_ctx *ctx, cusparseStatus_t s, const char *what) {
  int code = (s == CUSPARSE_STATUS_ALLOC_FAILED) ? GKC_EOUT_OF_MEMORY : GKC_EDEVICE_ERROR;
  return gkcu__fail(ctx, code, "%s: %s", what, cusparseGetErrorString(s));
}

/* --- create / destroy ----------------------------------------------------- */

static void ctx_release(gkcu_ctx *ctx) {
  /* Best effort: errors here have nowhere to go. */
  if (ctx->cusparse) cusparseDestroy(ctx->cusparse);
  if (ctx->cublas) cublasDestroy(ctx->cublas);
  if (ctx->scratch) cudaFree(ctx->scratch);
  if (ctx->tickets) cudaFree(ctx->tickets);
  if (ctx->spmv_flags) cudaFree(ctx->spmv_flags);
  if (ctx->dev_result) cudaFree(ctx->dev_result);
  if (ctx->host_result) cudaFreeHost(ctx->host_result);
  if (ctx->solve_host) cudaFreeHost(ctx->solve_host);
  (void)cudaGetLastError();
  free(ctx);
}

static int ctx_init(gkcu_ctx *ctx, cudaStream_t stream) {
  ctx->stream = stream;
  GKCU__TRY_CUDA(ctx, cudaGetDevice(&ctx->device));
  int l2 = 0;
  GKCU__TRY_CUDA(ctx, cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, ctx->device));
  GKCU__TRY_CUDA(ctx, cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx->device));
  ctx->l2_bytes = (size_t)l2;

  GKCU__TRY_CUDA(ctx, cudaMalloc((void **)&ctx->tickets, GKCU__NTICKETS * sizeof(unsigned int)));
  GKCU__TRY_CUDA(ctx, cudaMemsetAsync(ctx->tickets, 0, GKCU__NTICKETS * sizeof(unsigned int), stream));
  GKCU__TRY_CUDA(ctx, cudaMalloc((void **)&ctx->spmv_flags, GKCU__SPMV_FLAGS * sizeof(unsigned long long)));
  GKCU__TRY_CUDA(ctx, cudaMemsetAsync(ctx->spmv_flags, 0, GKCU__SPMV_FLAGS * sizeof(unsigned long long), stream));
  GKCU__TRY_CUDA(ctx, cudaMalloc((void **)&ctx->dev_result, 2 * sizeof(double)));
  GKCU__TRY_CUDA(ctx, cudaMallocHost((void **)&ctx->host_result, 2 * sizeof(double)));

  GKCU__TRY_CUBLAS(ctx, cublasCreate(&ctx->cublas));
  GKCU__TRY_CUBLAS(ctx, cublasSetStream(ctx->cublas, stream));
  GKCU__TRY_CUBLAS(ctx, cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_HOST));
  /* FP32 stays FP32: TF32 only where a caller names cublas_tf32, which asks
   * for it per call through its compute type. */
  GKCU__TRY_CUBLAS(ctx, cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH));

  GKCU__TRY_CUSPARSE(ctx, cusparseCreate(&ctx->cusparse));
  GKCU__TRY_CUSPARSE(ctx, cusparseSetStream(ctx->cusparse, stream));
  GKCU__TRY_CUSPARSE(ctx, cusparseSetPointerMode(ctx->cusparse, CUSPARSE_POINTER_MODE_HOST));

  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(stream));
  return 0;
}

extern "C" int gkcu_ctx_create(gkcu_ctx **out, cudaStream_t stream) {
  if (!out) return GKC_EINVALID_ARGUMENT;
  *out = NULL;
  gkcu_ctx *ctx = (gkcu_ctx *)calloc(1, sizeof *ctx);
  if (!ctx) return GKC_EOUT_OF_MEMORY;
  int rc = ctx_init(ctx, stream);
  if (rc != 0) {
    ctx_release(ctx);
    return rc;
  }
  *out = ctx;
  return 0;
}

extern "C" void gkcu_ctx_destroy(gkcu_ctx *ctx) {
  if (!ctx) return;
  (void)cudaStreamSynchronize(ctx->stream);
  ctx_release(ctx);
}

extern "C" int gkcu_ctx_set_sms(gkcu_ctx *ctx, int sms) {
  if (!ctx || sms < 0) return GKC_EINVALID_ARGUMENT;
  int all = 0;
  GKCU__TRY_CUDA(ctx, cudaDeviceGetAttribute(&all, cudaDevAttrMultiProcessorCount, ctx->device));
  if (sms == 0 || sms > all) sms = all;
  /* 0 tells cuBLAS to use the device's own count again. */
  GKCU__TRY_CUBLAS(ctx, cublasSetSmCountTarget(ctx->cublas, sms == all ? 0 : sms));
  ctx->sm_count = sms;
  return 0;
}

extern "C" cudaStream_t gkcu_ctx_stream(const gkcu_ctx *ctx) { return ctx ? ctx->stream : 0; }
extern "C" int gkcu_ctx_sm_count(const gkcu_ctx *ctx) { return ctx ? ctx->sm_count : 0; }
extern "C" size_t gkcu_ctx_l2_bytes(const gkcu_ctx *ctx) { return ctx ? ctx->l2_bytes : 0; }
extern "C" size_t gkcu_ctx_scratch_bytes(const gkcu_ctx *ctx) { return ctx ? ctx->scratch_cap : 0; }
extern "C" const char *gkcu_ctx_errmsg(const gkcu_ctx *ctx) { return ctx ? ctx->msg : "no context"; }

extern "C" int gkcu_ctx_trim(gkcu_ctx *ctx) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  if (ctx->scratch) {
    void *p = ctx->scratch;
    ctx->scratch = NULL;
    ctx->scratch_cap = 0;
    GKCU__TRY_CUDA(ctx, cudaFree(p));
  }
  return 0;
}

/* --- scratch -------------------------------------------------------------- */

void gkcu__carve_add(gkcu__carve *c, size_t bytes, void **dst) {
  /* Callers add at most 8 pieces; an overflow is a programming error that
   * carve_commit reports rather than a crash. */
  if (c->n < 8) {
    c->need[c->n] = bytes;
    c->dst[c->n] = dst;
  }
  c->n++;
}

int gkcu__carve_commit(gkcu_ctx *ctx, gkcu__carve *c) {
  if (c->n > 8) return gkcu__fail(ctx, GKC_EINTERNAL, "scratch: too many pieces");
  size_t total = 0;
  for (int i = 0; i < c->n; i++) {
    size_t b = (c->need[i] + 255) & ~(size_t)255;
    if (b < c->need[i]) return gkcu__fail(ctx, GKC_EOUT_OF_MEMORY, "scratch: size overflow");
    total += b;
  }
  if (total > ctx->scratch_cap) {
    /* Work already queued may still use the old buffer. */
    GKCU__TRY_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
    if (ctx->scratch) {
      void *old = ctx->scratch;
      ctx->scratch = NULL;
      ctx->scratch_cap = 0;
      GKCU__TRY_CUDA(ctx, cudaFree(old));
    }
    /* Grow by at least half again, in whole MiB, so that a slowly growing
     * workload does not reallocate on every call. */
    size_t want = total + total / 2;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      want = total; /* the generous size may be what did not fit */
      e = cudaMalloc(&p, want);
    }
    if (e != cudaSuccess) return gkcu__cuda_fail(ctx, e, "cudaMalloc(scratch)");
    ctx->scratch = p;
    ctx->scratch_cap = want;
  }
  char *base = (char *)ctx->scratch;
  size_t off = 0;
  for (int i = 0; i < c->n; i++) {
    *c->dst[i] = base + off;
    off += (c->need[i] + 255) & ~(size_t)255;
  }
  return 0;
}

/* --- deterministic test data ---------------------------------------------- */

__host__ __device__ static inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* fmaf on both sides: the host's libm and the device's __fmaf_rn both round
 * once, so host and device agree bit for bit. */
__host__ __device__ static inline float uniform_at(uint64_t seed, uint64_t i, float lo, float hi) {
  uint64_t h = splitmix64(seed ^ splitmix64(i));
  float u = (float)(h >> 40) * (1.0f / 16777216.0f); /* [0, 1), exact */
#ifdef __CUDA_ARCH__
  return __fmaf_rn(u, hi - lo, lo);
#else
  return fmaf(u, hi - lo, lo);
#endif
}

__global__ void fill_uniform_kernel(float *p, size_t n, uint64_t seed, float lo, float hi) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = uniform_at(seed, i, lo, hi);
}

extern "C" int gkcu_fill_uniform(gkcu_ctx *ctx, float *p, size_t n, uint64_t seed,
                                 float lo, float hi) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  GKCU__CHECK_ARG(ctx, p != NULL);
  GKCU__CHECK_ARG(ctx, n >= 1);
  unsigned int blocks = gkcu__div_up(n, 256);
  unsigned int cap = (unsigned int)ctx->sm_count * 16;
  if (blocks > cap) blocks = cap;
  fill_uniform_kernel<<<blocks, 256, 0, ctx->stream>>>(p, n, seed, lo, hi);
  GKCU__LAUNCHED(ctx, "fill_uniform_kernel");
  return 0;
}

extern "C" float gkcu_uniform_at(uint64_t seed, uint64_t i, float lo, float hi) {
  return uniform_at(seed, i, lo, hi);
}
