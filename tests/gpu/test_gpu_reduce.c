/* test_gpu_reduce: sum, min and max with every reduce algo (and the shfl
 * kernel at several grid sizes) against a double-precision CPU reference:
 * sizes around every power of two the kernels care about, odd and prime
 * sizes, pointers 4, 8 and 12 bytes off 16-byte alignment, NaNs mixed in
 * for min/max and all-NaN input.  The device result slot is poisoned before
 * every run.  Keeps going after a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_lab.h"
#include "gkcu_reduce.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

static int failures, runs;

static const char *op_name(int op) { return op == GKCU_SUM ? "sum" : op == GKCU_MIN ? "min" : "max"; }

/* fmin/fmax semantics on floats, sum in double. */
static double reference(const float *x, long long n, int op, double *abs_sum) {
  double s = 0.0, a = 0.0;
  float mm = NAN;
  for (long long i = 0; i < n; i++) {
    s += x[i];
    a += fabs((double)x[i]);
    mm = op == GKCU_MIN ? fminf(mm, x[i]) : fmaxf(mm, x[i]);
  }
  *abs_sum = a;
  return op == GKCU_SUM ? s : (double)mm;
}

typedef struct {
  const char *name;
  int algo; /* -1: lab shfl with bps; -2: lab shfl variant number bps */
  int bps;
} variant;

/* The public algos, the default shfl kernel at forced grid sizes, and every
 * lab variant of the shfl kernel (filled in by main from gkcu_lab.h). */
static variant kVariants[4 + 2 + GKCU_LAB_REDUCE_VARIANTS] = {
    {"auto", GKCU_REDUCE_AUTO, 0}, {"smem", GKCU_REDUCE_SMEM, 0}, {"shfl", GKCU_REDUCE_SHFL, 0},
    {"cub", GKCU_REDUCE_CUB, 0},   {"shfl/bps1", -1, 1},          {"shfl/bps3", -1, 3},
};

static void lab_variants(void) {
  for (int v = 0; v < GKCU_LAB_REDUCE_VARIANTS; v++) {
    variant *vr = &kVariants[6 + v];
    vr->name = gkcu_lab_reduce_shfl_name(v);
    vr->algo = -2;
    vr->bps = v;
    if (!vr->name) TEST_FAIL("gkcu_lab_reduce_shfl_name(%d) is NULL", v);
  }
}

static void check(gkcu_ctx *ctx, const float *h, const float *dx, long long n, int op, const char *what) {
  double abs_sum;
  double want = reference(h, n, op, &abs_sum);
  double *dres;
  CUDA_OK(cudaMalloc((void **)&dres, sizeof(double)));
  for (size_t v = 0; v < sizeof kVariants / sizeof kVariants[0]; v++) {
    const variant *vr = &kVariants[v];
    if (vr->algo == GKCU_REDUCE_CUB && getenv("GKC_GPU_TEST_NO_VENDOR")) continue;
    /* poison: NaN, or a number when NaN is the right answer */
    double poison = isnan(want) ? 12345.0 : NAN;
    CUDA_OK(cudaMemcpy(dres, &poison, sizeof poison, cudaMemcpyHostToDevice));
    int rc = vr->algo >= 0   ? gkcu_reduce_async(ctx, vr->algo, op, dx, n, dres)
             : vr->algo == -1 ? gkcu_lab_reduce_shfl(ctx, vr->bps, op, dx, n, dres)
                              : gkcu_lab_reduce_shfl_variant(ctx, vr->bps, 0, op, dx, n, dres);
    runs++;
    double got = NAN;
    if (rc == 0) {
      CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
      CUDA_OK(cudaMemcpy(&got, dres, sizeof got, cudaMemcpyDeviceToHost));
    }
    int ok;
    if (rc != 0) ok = 0;
    else if (isnan(want)) ok = isnan(got);
    else if (op != GKCU_SUM) ok = got == want; /* min/max are exact */
    else {
      /* float accumulation (cub) vs double (ours) */
      double tol = (vr->algo == GKCU_REDUCE_CUB ? 2e-5 : 1e-6) * abs_sum + 1e-30;
      ok = fabs(got - want) <= tol;
    }
    if (!ok) {
      failures++;
      printf("FAIL %-10s %s n=%lld %s: rc %d got %.17g want %.17g (sum|x| %.6g) %s\n", vr->name, op_name(op), n,
             what, rc, got, want, abs_sum, rc ? gkcu_ctx_errmsg(ctx) : "");
    }
  }
  /* the blocking form agrees with the async one */
  double got2 = NAN;
  int rc = gkcu_reduce(ctx, GKCU_REDUCE_SHFL, op, dx, n, &got2);
  runs++;
  int ok2 = rc == 0 && (isnan(want) ? isnan(got2)
                        : op != GKCU_SUM ? got2 == want
                                         : fabs(got2 - want) <= 1e-6 * abs_sum + 1e-30);
  if (!ok2) {
    failures++;
    printf("FAIL gkcu_reduce (blocking) %s n=%lld %s: rc %d got %.17g want %.17g\n", op_name(op), n, what, rc,
           got2, want);
  }
  cudaFree(dres);
}

static void argument_checks(gkcu_ctx *ctx) {
  float *d;
  double *r;
  CUDA_OK(cudaMalloc((void **)&d, 64));
  CUDA_OK(cudaMalloc((void **)&r, 8));
  ASSERT_EQ(gkcu_reduce_async(ctx, GKCU_REDUCE_SHFL, GKCU_SUM, d, 0, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce_async(ctx, GKCU_REDUCE_SHFL, 7, d, 4, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce_async(ctx, 42, GKCU_SUM, d, 4, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce_async(ctx, GKCU_REDUCE_CUB, GKCU_SUM, NULL, 4, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce_async(ctx, GKCU_REDUCE_SMEM, GKCU_SUM, (const float *)((char *)d + 2), 4, r),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce(ctx, GKCU_REDUCE_SHFL, GKCU_SUM, d, 4, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_reduce_algo_parse("shfl"), GKCU_REDUCE_SHFL);
  ASSERT_EQ(gkcu_reduce_algo_parse("warp"), -1);
  cudaFree(d);
  cudaFree(r);
}

int main(void) {
  gpu_require_device();
  lab_variants();
  gpu_rng g = {gpu_seed("test_gpu_reduce")};
  gkcu_ctx *ctx;
  int rc = gkcu_ctx_create(&ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(ctx);

  static const long long sizes[] = {1,    2,    3,     4,     5,      7,      31,      32,          33,
                                    255,  256,  257,   511,   512,    513,    1000,    1021,        4093,
                                    4096, 4099, 65537, 262147, 1 << 20, (1 << 22) + 3, 10000019, (1LL << 24) + 1};
  const long long maxn = (1LL << 24) + 1 + 4;
  float *h = malloc((size_t)maxn * sizeof *h);
  float *d0;
  if (!h) TEST_FAIL("out of memory");
  CUDA_OK(cudaMalloc((void **)&d0, (size_t)maxn * sizeof(float)));

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL; /* for compute-sanitizer */
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    long long n = sizes[s];
    if (short_run && n > 70000) continue;
    for (int off = 0; off < 4; off++) {
      if (n > 4096 && off != 0 && off != 3) continue; /* big sizes: aligned and 12 bytes off */
      /* signed data, or all positive (a large sum that shows relative error) */
      int positive = (s + off) % 2;
      for (long long i = 0; i < n; i++) h[i] = positive ? gpu_rng_float(&g, 0.5f, 1.5f) : gpu_rng_float(&g, -1.0f, 1.0f);
      CUDA_OK(cudaMemcpy(d0 + off, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
      char what[64];
      snprintf(what, sizeof what, "offset %d %s", off * 4, positive ? "positive" : "signed");
      for (int op = 0; op < 3; op++) check(ctx, h, d0 + off, n, op, what);

      /* NaNs scattered (min/max skip them), including at the head and tail */
      if (n >= 3) {
        h[0] = NAN;
        h[n - 1] = NAN;
        for (int j = 0; j < 5; j++) h[gpu_rng_below(&g, (uint32_t)n)] = NAN;
        CUDA_OK(cudaMemcpy(d0 + off, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
        snprintf(what, sizeof what, "offset %d with NaNs", off * 4);
        check(ctx, h, d0 + off, n, GKCU_MIN, what);
        check(ctx, h, d0 + off, n, GKCU_MAX, what);
      }
    }
  }
  /* all NaN: min and max are NaN */
  for (long long n = 1; n <= 5000; n = n * 7 + 1) {
    for (long long i = 0; i < n; i++) h[i] = NAN;
    CUDA_OK(cudaMemcpy(d0 + 1, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    check(ctx, h, d0 + 1, n, GKCU_MIN, "all NaN");
    check(ctx, h, d0 + 1, n, GKCU_MAX, "all NaN");
  }
  /* -inf/+inf and a single extreme value deep inside */
  {
    long long n = 100003;
    for (long long i = 0; i < n; i++) h[i] = gpu_rng_float(&g, -1.0f, 1.0f);
    h[77777] = -INFINITY;
    h[5] = 3.4e38f;
    CUDA_OK(cudaMemcpy(d0, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    check(ctx, h, d0, n, GKCU_MIN, "extremes");
    check(ctx, h, d0, n, GKCU_MAX, "extremes");
  }

  cudaFree(d0);
  free(h);
  gkcu_ctx_destroy(ctx);
  printf("test_gpu_reduce: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
