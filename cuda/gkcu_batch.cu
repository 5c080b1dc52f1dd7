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

/* batch_scalar (daemon/method_batch.c) on the device: 0 with *out set, or
 * -1 when the value is not a finite float32 (*v: the double). */
__device__ int resolve(const gkcu_bscalar s, const double *vals, float *out, double *v) {
  double d = s.scale;
  if (s.num >= 0) d *= vals[s.num];
  if (s.den >= 0) d /= vals[s.den];
  *v = d;
  if (!isfinite(d) || fabs(d) > 3.4028234663852886e38) return -1;
  *out = (float)d;
  return 0;
}

__global__ void __launch_bounds__(NT)
    k_axpby_ref(long long n, int step, gkcu_bscalar sa, const float *x, gkcu_bscalar sb,
                const float *y, float *out, int swap, gkcu_batch_state *st) {
  if (st->fail_step >= 0) return; /* an earlier step failed: nothing more is written */
  float a, b;
  double va, vb;
  const int bad_a = resolve(sa, st->vals, &a, &va);
  const int bad_b = bad_a ? 0 : resolve(sb, st->vals, &b, &vb);
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
    float r;
    if (a == 0.0f && b == 0.0f) r = 0.0f;
    else if (b == 0.0f) r = a * x[i];
    else if (a == 0.0f) r = b * y[i];
    else r = swap ? fmaf(b, y[i], a * x[i]) : fmaf(a, x[i], b * y[i]);
    out[i] = r;
  }
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
  if (!ctx) return GKC_EINVALID_ARGUMENT;
  ctx->msg[0] = '\0';
  GKCU__CHECK_ARG(ctx, n >= 1 && x && y && out && d_state);
  GKCU__CHECK_ARG(ctx, step >= 0 && step < GKCU_BATCH_MAX_STEPS);
  GKCU__CHECK_ARG(ctx, alpha.num < step && alpha.den < step && beta.num < step && beta.den < step);
  int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  long long need = (n + NT - 1) / NT, most = (long long)sms * 8;
  unsigned int blocks = (unsigned int)(need < most ? need : most);
  const int swap = out == x && x != y;
  k_axpby_ref<<<blocks, NT, 0, ctx->stream>>>(n, step, alpha, x, beta, y, out, swap, d_state);
  GKCU__LAUNCHED(ctx, "k_axpby_ref");
  return 0;
}
