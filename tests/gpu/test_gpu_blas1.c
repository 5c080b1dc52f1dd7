/* test_gpu_blas1: gkcu_dot_async / gkcu_dot / gkcu_nrm2_async / gkcu_nrm2 /
 * gkcu_axpby and the cuBLAS twins against a CPU reference, fresh random
 * inputs for every case.
 *
 * Sizes 1, 2, 3, 5, 1000, 2^20+3, 2^24+1 (GKC_GPU_TEST_SHORT=1, for
 * compute-sanitizer, stops at 1000 and adds 70001); x and y at offsets 0
 * or 1 float from a 256-byte aligned allocation (both aligned, both off by
 * one: the float4 path with a scalar head; one off: the scalar path), and
 * 3 floats off for the small sizes.  Result slots and outputs are poisoned
 * with NaN first; guard elements on both sides of y must stay untouched.
 *
 * Tolerances (u = 2^-53, uf = 2^-24):
 *
 * dot reference: the products x[i]*y[i] are exact in double; they are
 *   summed with Neumaier's compensated summation, whose error is at most
 *   2u|s| + O(n u^2) sum|x*y| -- below 1e-15 of S = sum|x*y| for every n here.
 * gkcu_dot: each product is exact in double; each element reaches the
 *   result through at most D roundings, and the recursive-summation bound
 *   gives |error| <= D u S (to first order).  With T threads in the grid:
 *   ceil(n / 4T) accumulator adds per thread (one per float4, or per group
 *   of 4 scalars), 2 inside a group (two fma's and their sum), 3 for the
 *   head/tail/remainder scalars, 5 warp-shuffle and 3 block levels,
 *   ceil(blocks / 256) partial adds in the last block and 8 more levels.
 *   The launcher never uses fewer than 1536 threads (6 blocks of 256, one
 *   SM's worth) for n >= 2^14, so at n = 2^24+1 on any GPU
 *   D <= 2731 + 2 + 3 + 5 + 3 + 1 + 8 < 2800: |error| <= 3.2e-13 S.
 *   Tolerance: 1e-12 * S (float accumulation would be ~1e-7 S: caught).
 * cublasSdot: float products, float accumulation, float result: a worst case
 *   of (depth) uf S that is meaningless at 2^24, so the bound used is the
 *   one the reduce test uses for CUB's float sum: 2e-5 * S (observed errors
 *   are printed).
 * nrm2 reference: the squares x[i]^2 are exact in double, summed as dot's
 *   (Neumaier), then sqrt: relative error below 1e-15.
 * gkcu_nrm2: the sum of squares is dot's kernel's sum with y = x (the same
 *   depth D, S = sum x^2 = the result squared): |error| <= D u S, and the
 *   root halves the relative error and adds one rounding:
 *   |got - want| <= (D u / 2 + u) want < 1.7e-13 want at 2^24+1.
 *   Tolerance: 1e-12 * want (float accumulation would be ~1e-7: caught).
 *   n = 1 is exact: |x[0]|.  Inputs of magnitude 2^60 (whose sum of
 *   squares overflows float32) and 2^-70 (whose squares are float32
 *   subnormals) show the accumulation is float64; the same vector twice
 *   gives the same bits (the combine order is fixed).
 * axpby: y' = fmaf(alpha, x, fl(beta*y)): fl(beta*y) has error <= uf|beta y|,
 *   the fma rounds once more: |error| <= uf|result| + uf|beta y|
 *   <= 2 uf (|alpha x| + |beta y|) (1 + uf).  The cuBLAS twin (scal then
 *   axpy, or scal by fl(alpha+beta) when x == y) has the same bound.
 *   Tolerance: 2.5e-7 * (|alpha x| + |beta y|) (2 uf = 1.19e-7; 1e-6
 *   would be 8x looser than the bound).  Zero coefficients: exact.
 *
 * Keeps going after a failure; exit 1 if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_blas1.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

enum { GUARD = 8 }; /* floats before and after each vector */

static int failures, runs;
static double worst_dot_ours, worst_dot_cublas, worst_nrm2, worst_axpby_ours, worst_axpby_cublas;
static gkcu_ctx *ctx;
static gpu_rng g;

static const float kGuard = 1234.5f;

/* A device vector with guards: base[0..GUARD) and base[GUARD+off+n..) hold
 * kGuard; the vector starts at base + GUARD + off (off in floats). */
typedef struct {
  float *base, *v;
  long long n;
  int off;
} dvec;

static float *dev_buf; /* two vectors' worth, allocated once */
static float *hx, *hy, *hout, *hguard;
static long long cap_n;

static dvec place(int which, long long n, int off) {
  /* each slot: GUARD + 4 + n + GUARD floats, rounded to 64 floats (256 B) */
  long long slot = ((GUARD + 4 + cap_n + GUARD) + 63) / 64 * 64;
  dvec d;
  d.base = dev_buf + which * slot;
  d.v = d.base + GUARD + off;
  d.n = n;
  d.off = off;
  return d;
}

static void upload_guarded(dvec d, const float *h) {
  for (int i = 0; i < GUARD + 4; i++) hguard[i] = kGuard;
  CUDA_OK(cudaMemcpy(d.base, hguard, (size_t)(GUARD + d.off) * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.v, h, (size_t)d.n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.v + d.n, hguard, GUARD * sizeof(float), cudaMemcpyHostToDevice));
}

static int guards_intact(dvec d) {
  float a[GUARD + 4], b[GUARD];
  CUDA_OK(cudaMemcpy(a, d.base, (size_t)(GUARD + d.off) * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(b, d.v + d.n, GUARD * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < GUARD + d.off; i++)
    if (a[i] != kGuard) return 0;
  for (int i = 0; i < GUARD; i++)
    if (b[i] != kGuard) return 0;
  return 1;
}

static void fill(float *h, long long n) {
  for (long long i = 0; i < n; i++) h[i] = gpu_rng_float(&g, -1.0f, 1.0f);
}

/* Neumaier-compensated sum of the exact double products; S = sum|x*y|. */
static double dot_ref(const float *x, const float *y, long long n, double *S) {
  double s = 0.0, c = 0.0, a = 0.0;
  for (long long i = 0; i < n; i++) {
    double p = (double)x[i] * (double)y[i];
    double t = s + p;
    if (fabs(s) >= fabs(p)) c += (s - t) + p;
    else c += (p - t) + s;
    s = t;
    a += fabs(p);
  }
  *S = a;
  return s + c;
}

/* --- dot -------------------------------------------------------------------------- */

static void check_dot(long long n, int offx, int offy, int same) {
  dvec dx = place(0, n, offx), dy = same ? dx : place(1, n, offy);
  fill(hx, n);
  if (same) memcpy(hy, hx, (size_t)n * sizeof(float));
  else fill(hy, n);
  upload_guarded(dx, hx);
  if (!same) upload_guarded(dy, hy);
  double S;
  double want = dot_ref(hx, hy, n, &S);
  char what[96];
  snprintf(what, sizeof what, "n=%lld offx=%d offy=%d%s", n, offx, offy, same ? " x==y" : "");

  double *dres;
  float *fres;
  CUDA_OK(cudaMalloc((void **)&dres, sizeof(double)));
  CUDA_OK(cudaMalloc((void **)&fres, sizeof(float)));
  double nan = NAN;
  float nanf_ = NAN;

  /* ours, async */
  CUDA_OK(cudaMemcpy(dres, &nan, sizeof nan, cudaMemcpyHostToDevice));
  int rc = gkcu_dot_async(ctx, n, dx.v, dy.v, dres);
  double got = NAN;
  if (rc == 0) {
    CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(&got, dres, sizeof got, cudaMemcpyDeviceToHost));
  }
  runs++;
  double err = fabs(got - want), tol = 1e-12 * S;
  if (S > 0 && err / S > worst_dot_ours) worst_dot_ours = err / S;
  if (rc != 0 || !(err <= tol)) {
    failures++;
    printf("FAIL gkcu_dot_async %s: rc %d got %.17g want %.17g err %.3g tol %.3g %s\n", what, rc, got, want, err,
           tol, rc ? gkcu_ctx_errmsg(ctx) : "");
  }

  /* ours, blocking: the same kernel, so the same value */
  double got2 = NAN;
  rc = gkcu_dot(ctx, n, dx.v, dy.v, &got2);
  runs++;
  if (rc != 0 || !(got2 == got)) {
    failures++;
    printf("FAIL gkcu_dot (blocking) %s: rc %d got %.17g, async gave %.17g\n", what, rc, got2, got);
  }

  /* cuBLAS twin */
  if (!getenv("GKC_GPU_TEST_NO_VENDOR")) {
    CUDA_OK(cudaMemcpy(fres, &nanf_, sizeof nanf_, cudaMemcpyHostToDevice));
    rc = gkcu_dot_cublas_async(ctx, n, dx.v, dy.v, fres);
    float gf = NAN;
    if (rc == 0) {
      CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
      CUDA_OK(cudaMemcpy(&gf, fres, sizeof gf, cudaMemcpyDeviceToHost));
    }
    runs++;
    double e = fabs((double)gf - want), t = 2e-5 * S + 1e-30;
    if (S > 0 && e / S > worst_dot_cublas) worst_dot_cublas = e / S;
    if (rc != 0 || !(e <= t)) {
      failures++;
      printf("FAIL gkcu_dot_cublas_async %s: rc %d got %.9g want %.17g err %.3g tol %.3g %s\n", what, rc, gf,
             want, e, t, rc ? gkcu_ctx_errmsg(ctx) : "");
    }
  }
  if (!guards_intact(dx) || (!same && !guards_intact(dy))) {
    failures++;
    printf("FAIL dot %s: guards around x or y changed\n", what);
  }
  cudaFree(dres);
  cudaFree(fres);
}

/* --- nrm2 ------------------------------------------------------------------------- */

/* Neumaier-compensated sum of the exact double squares, then its root. */
static double nrm2_ref(const float *x, long long n) {
  double s = 0.0, c = 0.0;
  for (long long i = 0; i < n; i++) {
    double p = (double)x[i] * (double)x[i];
    double t = s + p;
    if (fabs(s) >= fabs(p)) c += (s - t) + p;
    else c += (p - t) + s;
    s = t;
  }
  return sqrt(s + c);
}

/* scale: the inputs are U(-1, 1) times scale (a power of two: exact). */
static void check_nrm2(long long n, int off, double scale) {
  dvec dx = place(0, n, off);
  fill(hx, n);
  for (long long i = 0; i < n; i++) hx[i] = (float)(hx[i] * scale);
  upload_guarded(dx, hx);
  double want = nrm2_ref(hx, n);
  char what[96];
  snprintf(what, sizeof what, "n=%lld off=%d scale=%g", n, off, scale);

  double *dres;
  CUDA_OK(cudaMalloc((void **)&dres, sizeof(double)));
  double nan = NAN;
  CUDA_OK(cudaMemcpy(dres, &nan, sizeof nan, cudaMemcpyHostToDevice));
  int rc = gkcu_nrm2_async(ctx, n, dx.v, dres);
  double got = NAN;
  if (rc == 0) {
    CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(&got, dres, sizeof got, cudaMemcpyDeviceToHost));
  }
  runs++;
  double err = fabs(got - want), tol = n == 1 ? 0.0 : 1e-12 * want;
  if (want > 0 && err / want > worst_nrm2) worst_nrm2 = err / want;
  if (rc != 0 || !(err <= tol)) {
    failures++;
    printf("FAIL gkcu_nrm2_async %s: rc %d got %.17g want %.17g err %.3g tol %.3g %s\n", what, rc, got, want, err,
           tol, rc ? gkcu_ctx_errmsg(ctx) : "");
  }

  /* blocking, and again: the same kernel and combine order, so the same bits */
  double got2 = NAN;
  rc = gkcu_nrm2(ctx, n, dx.v, &got2);
  runs++;
  if (rc != 0 || memcmp(&got2, &got, sizeof got) != 0) {
    failures++;
    printf("FAIL gkcu_nrm2 (blocking) %s: rc %d got %.17g, async gave %.17g\n", what, rc, got2, got);
  }
  if (!guards_intact(dx)) {
    failures++;
    printf("FAIL nrm2 %s: guards around x changed\n", what);
  }
  cudaFree(dres);
}

/* --- axpby ------------------------------------------------------------------------ */

/* poison: 0 none, 1 y is NaN/Inf (beta must be 0), 2 x is NaN (alpha must be 0) */
static void check_axpby(long long n, int offx, int offy, float alpha, float beta, int same, int poison,
                        int cublas) {
  dvec dx = place(0, n, offx), dy = same ? dx : place(1, n, offy);
  fill(hx, n);
  fill(hy, n);
  if (same) memcpy(hy, hx, (size_t)n * sizeof(float));
  if (poison == 1)
    for (long long i = 0; i < n; i++) hy[i] = (i % 3 == 2) ? INFINITY : NAN;
  if (poison == 2)
    for (long long i = 0; i < n; i++) hx[i] = (i % 3 == 2) ? -INFINITY : NAN;
  if (!same) upload_guarded(dx, hx);
  upload_guarded(dy, hy);
  char what[128];
  snprintf(what, sizeof what, "%s n=%lld offx=%d offy=%d alpha=%g beta=%g%s%s", cublas ? "cublas" : "gkcu", n,
           offx, offy, alpha, beta, same ? " x==y" : "", poison == 1 ? " y=NaN" : poison == 2 ? " x=NaN" : "");

  int rc = cublas ? gkcu_axpby_cublas(ctx, n, alpha, dx.v, beta, dy.v) : gkcu_axpby(ctx, n, alpha, dx.v, beta, dy.v);
  runs++;
  if (rc != 0) {
    failures++;
    printf("FAIL axpby %s: rc %d %s\n", what, rc, gkcu_ctx_errmsg(ctx));
    return;
  }
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(hout, dy.v, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  long long bad = 0, first_bad = -1;
  double worst = 0.0;
  for (long long i = 0; i < n; i++) {
    double xa = (double)hx[i], yb = (double)hy[i];
    double want, scale;
    if (alpha == 0.0f && beta == 0.0f) {
      want = 0.0;
      scale = 0.0;
    } else if (beta == 0.0f) {
      want = (double)alpha * xa;
      scale = fabs(want);
    } else if (alpha == 0.0f) {
      want = (double)beta * yb;
      scale = fabs(want);
    } else {
      want = (double)alpha * xa + (double)beta * yb;
      scale = fabs((double)alpha * xa) + fabs((double)beta * yb);
    }
    double e = fabs((double)hout[i] - want);
    int ok = e <= 2.5e-7 * scale + 1e-38;
    if (scale > 0 && e / scale > worst) worst = e / scale;
    if (!ok) {
      if (first_bad < 0) first_bad = i;
      bad++;
    }
  }
  double *w = cublas ? &worst_axpby_cublas : &worst_axpby_ours;
  if (worst > *w) *w = worst;
  if (bad) {
    failures++;
    printf("FAIL axpby %s: %lld bad elements, first y[%lld] = %.9g (x %.9g, y %.9g)\n", what, bad, first_bad,
           hout[first_bad], hx[first_bad], hy[first_bad]);
  }
  if (!guards_intact(dy) || (!same && !guards_intact(dx))) {
    failures++;
    printf("FAIL axpby %s: guards around x or y changed\n", what);
  }
}

static void axpby_cases(long long n, int offx, int offy) {
  float a = gpu_rng_float(&g, -2.0f, 2.0f), b = gpu_rng_float(&g, -2.0f, 2.0f);
  for (int cb = 0; cb < 2; cb++) {
    if (cb && getenv("GKC_GPU_TEST_NO_VENDOR")) continue;
    check_axpby(n, offx, offy, a, b, 0, 0, cb);
    check_axpby(n, offx, offy, a, 1.0f, 0, 0, cb);      /* CG: x += alpha p */
    check_axpby(n, offx, offy, 1.0f, b, 0, 0, cb);      /* CG: p = r + beta p */
    check_axpby(n, offx, offy, a, 0.0f, 0, 1, cb);      /* beta == 0: y (NaN/Inf) not read */
    check_axpby(n, offx, offy, 0.0f, b, 0, 2, cb);      /* alpha == 0: x (NaN) not read */
    check_axpby(n, offx, offy, 0.0f, 0.0f, 0, 1, cb);   /* both zero over NaN: zeros */
    check_axpby(n, offx, offx, a, b, 1, 0, cb);         /* x == y */
    check_axpby(n, offx, offx, a, 0.0f, 1, 0, cb);      /* x == y, beta == 0 */
  }
}

static void argument_checks(void) {
  float *d;
  double *r;
  CUDA_OK(cudaMalloc((void **)&d, 1024));
  CUDA_OK(cudaMalloc((void **)&r, 8));
  ASSERT_EQ(gkcu_dot_async(NULL, 4, d, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, 0, d, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, -1, d, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, 4, NULL, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, 4, d, NULL, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, 4, d, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_async(ctx, 4, (const float *)((char *)d + 2), d, r), GKC_EINVALID_ARGUMENT);
  ASSERT(strlen(gkcu_ctx_errmsg(ctx)) > 0);
  ASSERT_EQ(gkcu_dot(ctx, 4, d, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_cublas_async(ctx, 0, d, d, (float *)r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(NULL, 4, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(ctx, 0, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(ctx, -1, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(ctx, 4, NULL, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(ctx, 4, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_async(ctx, 4, (const float *)((char *)d + 2), r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2(ctx, 4, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(NULL, 4, 1.0f, d, 1.0f, d + 8), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(ctx, 0, 1.0f, d, 1.0f, d + 8), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, NULL, 1.0f, d + 8), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d, 1.0f, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d, 1.0f, (float *)((char *)d + 34)), GKC_EINVALID_ARGUMENT);
  /* partial overlap either way is refused; touching ranges are fine */
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d, 1.0f, d + 3), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d + 3, 1.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby_cublas(ctx, 4, 1.0f, d, 1.0f, d + 1), GKC_EINVALID_ARGUMENT);
  CUDA_OK(cudaMemset(d, 0, 1024));
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d, 1.0f, d + 4), 0);
  ASSERT_EQ(gkcu_axpby(ctx, 4, 1.0f, d + 4, 1.0f, d), 0);
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  cudaFree(d);
  cudaFree(r);
}

int main(void) {
  gpu_require_device();
  g.s = gpu_seed("test_gpu_blas1");
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int rc = gkcu_ctx_create(&ctx, st);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks();

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  static const long long full[] = {1, 2, 3, 5, 1000, (1LL << 20) + 3, (1LL << 24) + 1};
  static const long long shrt[] = {1, 2, 3, 5, 1000, 70001};
  const long long *sizes = short_run ? shrt : full;
  int nsizes = short_run ? (int)(sizeof shrt / sizeof shrt[0]) : (int)(sizeof full / sizeof full[0]);
  cap_n = sizes[nsizes - 1];

  long long slot = ((GUARD + 4 + cap_n + GUARD) + 63) / 64 * 64;
  CUDA_OK(cudaMalloc((void **)&dev_buf, (size_t)(2 * slot) * sizeof(float)));
  hx = malloc((size_t)cap_n * sizeof(float));
  hy = malloc((size_t)cap_n * sizeof(float));
  hout = malloc((size_t)cap_n * sizeof(float));
  hguard = malloc((GUARD + 4) * sizeof(float));
  if (!hx || !hy || !hout || !hguard) TEST_FAIL("out of memory");

  /* (offx, offy) in floats: aligned, both off by one (float4 + head), one
   * off (scalar path), both off by three (head of one) */
  static const int offs[][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 1}, {3, 3}, {2, 3}};
  for (int s = 0; s < nsizes; s++) {
    long long n = sizes[s];
    int big = n > 100000;
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
      if (big && o > 2) continue;
      check_dot(n, offs[o][0], offs[o][1], 0);
      axpby_cases(n, offs[o][0], offs[o][1]);
      check_nrm2(n, offs[o][0], 1.0);
    }
    check_dot(n, 1, 1, 1); /* x . x */
  }
  /* one large all-positive dot: the sum grows with n, so relative error shows */
  {
    long long n = short_run ? 70001 : (1LL << 22) + 5;
    dvec dx = place(0, n, 1), dy = place(1, n, 1);
    for (long long i = 0; i < n; i++) {
      hx[i] = gpu_rng_float(&g, 0.5f, 1.5f);
      hy[i] = gpu_rng_float(&g, 0.5f, 1.5f);
    }
    upload_guarded(dx, hx);
    upload_guarded(dy, hy);
    double S, want = dot_ref(hx, hy, n, &S), got = NAN;
    rc = gkcu_dot(ctx, n, dx.v, dy.v, &got);
    runs++;
    if (rc != 0 || !(fabs(got - want) <= 1e-12 * S)) {
      failures++;
      printf("FAIL positive dot n=%lld: rc %d got %.17g want %.17g\n", n, rc, got, want);
    }
  }

  /* nrm2 at every offset at one odd size, and where float32 accumulation
   * would overflow (squares ~2^120, 2^16 or 2^24 of them) or lose the
   * squares to subnormals (~2^-140) */
  for (int o = 0; o < 4; o++) check_nrm2(1001, o, 1.0);
  check_nrm2(short_run ? 70001 : (1LL << 24) + 1, 1, 0x1p60);
  check_nrm2(70001, 0, 0x1p-70);
  check_nrm2(1, 0, 0x1p60);

  printf("worst |err|/sum|x*y|: gkcu_dot %.3g, cublasSdot %.3g\n", worst_dot_ours, worst_dot_cublas);
  printf("worst |err|/||x||: gkcu_nrm2 %.3g\n", worst_nrm2);
  printf("worst |err|/(|ax|+|by|): gkcu_axpby %.3g, cuBLAS scal+axpy %.3g\n", worst_axpby_ours, worst_axpby_cublas);
  cudaFree(dev_buf);
  free(hx);
  free(hy);
  free(hout);
  free(hguard);
  gkcu_ctx_destroy(ctx);
  cudaStreamDestroy(st);
  printf("test_gpu_blas1: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
