/* gkcu_batch.cu: a batch's scalars on the device (see gkcu_batch.h). */
#include <math.h>

#include "gkcu_batch.h"
#include "gkcu_internal.h"

namespace {

constexpr int NT = 256;

__global__ void k_state_init(gkcu_batch_state *st) {
  st->fail_step = -1;
  st->fail_which = 0;
  st->fail_value = 0;
}

/* batch_scalar (daemon/batch_step.c) on the device: 0 with *out set, or
 * -1 when the value is not finite, or (float32 steps) beyond float32's
 * range (*v: the double). */
template <typename T>
__device__ int resolve(const gkcu_bscalar s, const double *vals, T *out, double *v) {
  double d = s.scale;
  if (s.num >= 0) d *= vals[s.num];
  if (s.den >= 0) d /= vals[s.den];
  *v = d;
  if (!isfinite(d) || (sizeof(T) == 4 && fabs(d) > 3.4028234663852886e38)) return -1;
  *out = (T)d;
  return 0;
}

/* fma in T: fmaf for float (one rounding in float32, as gkcu_axpby). */
__device__ __forceinline__ float fma_t(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fma_t(double a, double b, double c) { return fma(a, b, c); }

template <typename T>
__global__ void __launch_bounds__(NT)
    k_axpby_ref(long long n, int step, gkcu_bscalar sa, const T *x, gkcu_bscalar sb,
                const T *y, T *out, int swap, gkcu_batch_state *st) {
  if (st->fail_step >= 0) return; /* an earlier step failed: nothing more is written */
  T a, b;
  double va, vb;
  const int bad_a = resolve<T>(sa, st->vals, &a, &va);
  const int bad_b = bad_a ? 0 : resolve<T>(sb, st->vals, &b, &vb);
  if (bad_a || bad_b) { /* every thread sees it; one records it */
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      st->fail_step = step;
      st->fail_which = bad_a ? 'a' : 'b';
      st->fail_value = bad_a ? va : vb;
    }
    return;
  }
  for (long long i = (long long)blockIdx.x * NT + threadIdx.x; i < n;
       i += (long long)gridDim.x * NT) {
    T r;
    if (a == (T)0 && b == (T)0) r = (T)0;
    else if (b == (T)0) r = a * x[i];
    else if (a == (T)0) r = b * y[i];
    else r = swap ? fma_t(b, y[i], a * x[i]) : fma_t(a, x[i], b * y[i]);
    out[i] = r;
  }
}

/* The checks and the launch, float32 or float64. */
template <typename T>
int axpby_ref(gkcu_ctx *ctx, int step, int64_t n, gkcu_bscalar alpha, const T *x, gkcu_bscalar beta,
              const T *y, T *out, gkcu_batch_state *d_state) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1 && x && y && out && d_state);
  GKCU__CHECK_ARG(ctx, step >= 0 && step < GKCU_BATCH_MAX_STEPS);
  GKCU__CHECK_ARG(ctx, alpha.num < step && alpha.den < step && beta.num < step && beta.den < step);
  int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  long long need = (n + NT - 1) / NT, most = (long long)sms * 8;
  unsigned int blocks = (unsigned int)(need < most ? need : most);
  const int swap = out == x && x != y;
  k_axpby_ref<T><<<blocks, NT, 0, ctx->stream>>>(n, step, alpha, x, beta, y, out, swap, d_state);
  GKCU__LAUNCHED(ctx, "k_axpby_ref");
  return 0;
}

}  // namespace

extern "C" int gkcu_batch_state_init(gkcu_ctx *ctx, gkcu_batch_state *d_state) {
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, d_state != NULL);
  k_state_init<<<1, 1, 0, ctx->stream>>>(d_state);
  GKCU__LAUNCHED(ctx, "k_state_init");
  return 0;
}

extern "C" int gkcu_axpby_ref(gkcu_ctx *ctx, int step, int64_t n, gkcu_bscalar alpha,
                              const float *x, gkcu_bscalar beta, const float *y, float *out,
                              gkcu_batch_state *d_state) {
  return axpby_ref<float>(ctx, step, n, alpha, x, beta, y, out, d_state);
}

extern "C" int gkcu_axpby_ref_f64(gkcu_ctx *ctx, int step, int64_t n, gkcu_bscalar alpha,
                                  const double *x, gkcu_bscalar beta, const double *y, double *out,
                                  gkcu_batch_state *d_state) {
  return axpby_ref<double>(ctx, step, n, alpha, x, beta, y, out, d_state);
}
