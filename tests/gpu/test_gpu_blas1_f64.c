/* test_gpu_blas1_f64: gkcu_dot_f64(_async), gkcu_nrm2_f64(_async),
 * gkcu_axpby_f64 and the batch's gkcu_axpby_ref_f64 against host
 * references on fresh random float64 inputs (53 random bits each).
 *
 * Sizes 1, 2, 3, 5, 1000, 2^20+3, 2^24+1 (GKC_GPU_TEST_SHORT=1: up to 1000,
 * and 70001); x and y at offsets of 0 to 3 doubles from a 256-byte aligned
 * allocation (both 16-byte aligned, both off by one: the double2 path with
 * a scalar head; one off: the scalar path).  Result slots are poisoned
 * with NaN first; guard elements on both sides of each vector must stay.
 *
 * Tolerances (u = 2^-53):
 *
 * dot reference: Ogita-Rump-Oishi's Dot2 (TwoProduct by fma, TwoSum), as
 *   accurate as a dot in twice the working precision: |error| <=
 *   u |dot| + (n u)^2 S, S = sum |x*y|: below 1e-16 S at every n here.
 * gkcu_dot_f64: every product is fused into a running sum, so each
 *   element reaches the result through at most D roundings and |error| <=
 *   D u S (recursive summation, first order).  A thread takes at most
 *   max(8, n / T) elements, T the grid's threads, and the launcher never
 *   runs fewer than 1536 threads once n >= 2^14 (6 blocks of 256, one
 *   SM's worth); then 2 head/tail fmas, 5 warp and 3 block levels,
 *   ceil(blocks / 256) partial adds and 8 more levels: D <= n / 1536 + 32.
 *   Tolerance: (n / 1536 + 32) u S, 1.2e-12 S at 2^24 + 1 (one element
 *   dropped or summed in float would be ~1e-8 S or worse: caught).
 * nrm2 reference: Dot2 of x with itself, then sqrt; for scaled inputs
 *   (x = 2^k v) the reference is 2^k nrm2(v), exact scaling.
 * gkcu_nrm2_f64: the sum of squares has dot's bound (with S = the sum),
 *   each square's scaling by a power of two is exact, the root halves the
 *   relative error and the combination adds a few roundings:
 *   |got - want| <= ((n / 1536 + 32) u / 2 + 4 u) want.  Inputs scaled by
 *   2^600 (their plain sum of squares overflows) and 2^-600 (it
 *   underflows to 0), mixtures that take both sums into account, NaN and
 *   Inf, and the same vector twice giving the same bits.
 * axpby: fma(alpha, x, fl(beta*y)): |error| <= u |beta y| + u |result|
 *   <= 2u (|alpha x| + |beta y|) (1 + u); the reference is computed in long
 *   double (|its error| <= 2^-63 (|alpha x| + |beta y|)).  Tolerance:
 *   2.5u (|alpha x| + |beta y|).  Zero coefficients: the other vector is
 *   not read (NaN there must not show).
 * axpby_ref_f64: alpha and beta from an earlier dot on the device, scaled
 *   and divided in double; one beyond float32's range is used as it is (a
 *   float32 step would fail), one that divides by zero fails the step and
 *   writes nothing.
 *
 * Keeps going after a failure; exit 1 if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_batch.h"
#include "gkcu_blas1.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "test.h"

enum { GUARD = 8 }; /* doubles before and after each vector */
static const double U = 0x1p-53;
static const double kGuard = 1234.5;

static int failures, runs;
static double worst_dot, worst_nrm2, worst_axpby;
static gkcu_ctx *ctx;
static gpu_rng g;

typedef struct {
  double *base, *v;
  long long n;
  int off;
} dvec;

static double *dev_buf; /* two vectors' worth */
static double *hx, *hy, *hout;
static long long cap_n;

static dvec place(int which, long long n, int off) {
  long long slot = ((GUARD + 4 + cap_n + GUARD) + 31) / 32 * 32; /* 256-byte multiples */
  dvec d = {dev_buf + which * slot, NULL, n, off};
  d.v = d.base + GUARD + off;
  return d;
}

static void upload_guarded(dvec d, const double *h) {
  double gd[GUARD + 4];
  for (int i = 0; i < GUARD + 4; i++) gd[i] = kGuard;
  CUDA_OK(cudaMemcpy(d.base, gd, (size_t)(GUARD + d.off) * sizeof(double), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.v, h, (size_t)d.n * sizeof(double), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.v + d.n, gd, GUARD * sizeof(double), cudaMemcpyHostToDevice));
}

static int guards_intact(dvec d) {
  double a[GUARD + 4], b[GUARD];
  CUDA_OK(cudaMemcpy(a, d.base, (size_t)(GUARD + d.off) * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(b, d.v + d.n, GUARD * sizeof(double), cudaMemcpyDeviceToHost));
  for (int i = 0; i < GUARD + d.off; i++)
    if (a[i] != kGuard) return 0;
  for (int i = 0; i < GUARD; i++)
    if (b[i] != kGuard) return 0;
  return 1;
}

/* U(-1, 1) with all 53 bits random. */
static double rnd(void) { return 2.0 * gpu_rng_unit(&g) - 1.0; }

static void fill(double *h, long long n, double scale) {
  for (long long i = 0; i < n; i++) h[i] = rnd() * scale;
}

/* Dot2 (Ogita, Rump, Oishi 2005): the products' and the sums' rounding
 * errors carried exactly and added at the end.  *S = sum |x*y|. */
static double dot2_ref(const double *x, const double *y, long long n, double *S) {
  double s = 0.0, c = 0.0, a = 0.0;
  for (long long i = 0; i < n; i++) {
    double p = x[i] * y[i];
    double pe = fma(x[i], y[i], -p); /* p + pe = x*y exactly */
    double t = s + p;
    double z = t - s;
    double se = (s - (t - z)) + (p - z); /* t + se = s + p exactly */
    s = t;
    c += pe + se;
    a += fabs(p);
  }
  *S = a;
  return s + c;
}

static double dot_tol_units(long long n) { return (double)n / 1536.0 + 32.0; }

/* A device double, poisoned, then what the async call wrote there. */
static double *dres;
static void poison_result(void) {
  double nan = NAN;
  CUDA_OK(cudaMemcpy(dres, &nan, sizeof nan, cudaMemcpyHostToDevice));
}
static double read_result(int rc) {
  double got = NAN;
  if (rc == 0) {
    CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(&got, dres, sizeof got, cudaMemcpyDeviceToHost));
  }
  return got;
}

/* --- dot ---------------------------------------------------------------------- */

static void check_dot(long long n, int offx, int offy, int same) {
  dvec dx = place(0, n, offx), dy = same ? dx : place(1, n, offy);
  fill(hx, n, 1.0);
  if (same) memcpy(hy, hx, (size_t)n * sizeof(double));
  else fill(hy, n, 1.0);
  upload_guarded(dx, hx);
  if (!same) upload_guarded(dy, hy);
  double S, want = dot2_ref(hx, hy, n, &S);
  char what[96];
  snprintf(what, sizeof what, "n=%lld offx=%d offy=%d%s", n, offx, offy, same ? " x==y" : "");

  poison_result();
  int rc = gkcu_dot_f64_async(ctx, n, dx.v, dy.v, dres);
  double got = read_result(rc);
  double err = fabs(got - want), tol = dot_tol_units(n) * U * S;
  runs++;
  if (S > 0 && err / S > worst_dot) worst_dot = err / S;
  if (rc != 0 || !(err <= tol)) {
    failures++;
    printf("FAIL gkcu_dot_f64_async %s: rc %d got %.17g want %.17g err %.3g tol %.3g %s\n", what, rc,
           got, want, err, tol, rc ? gkcu_ctx_errmsg(ctx) : "");
  }
  double got2 = NAN;
  rc = gkcu_dot_f64(ctx, n, dx.v, dy.v, &got2);
  runs++;
  if (rc != 0 || memcmp(&got, &got2, sizeof got) != 0) {
    failures++;
    printf("FAIL gkcu_dot_f64 (blocking) %s: rc %d got %.17g, async gave %.17g\n", what, rc, got2, got);
  }
  if (!guards_intact(dx) || (!same && !guards_intact(dy))) {
    failures++;
    printf("FAIL dot_f64 %s: guards around x or y changed\n", what);
  }
}

/* --- nrm2 --------------------------------------------------------------------- */

/* hx[i] = v[i] * 2^k_i where hv holds v; the reference is computed on
 * hx * 2^-kref (exact), then scaled back. */
static double nrm2_ref_scaled(const double *x, long long n, int kref) {
  double S;
  for (long long i = 0; i < n; i++) hout[i] = ldexp(x[i], -kref);
  return ldexp(sqrt(dot2_ref(hout, hout, n, &S)), kref);
}

static void run_nrm2(dvec dx, long long n, double want, const char *what, int exact_special) {
  poison_result();
  int rc = gkcu_nrm2_f64_async(ctx, n, dx.v, dres);
  double got = read_result(rc);
  runs++;
  int ok;
  double err = fabs(got - want), tol = (dot_tol_units(n) * U / 2 + 4 * U) * want;
  if (exact_special) { /* NaN or Inf wanted */
    ok = isnan(want) ? isnan(got) : got == want;
  } else {
    ok = err <= tol;
    if (want > 0 && err / want > worst_nrm2) worst_nrm2 = err / want;
  }
  if (rc != 0 || !ok) {
    failures++;
    printf("FAIL gkcu_nrm2_f64_async %s: rc %d got %.17g want %.17g err %.3g tol %.3g %s\n", what, rc,
           got, want, err, tol, rc ? gkcu_ctx_errmsg(ctx) : "");
  }
  double got2 = NAN;
  rc = gkcu_nrm2_f64(ctx, n, dx.v, &got2);
  runs++;
  if (rc != 0 || memcmp(&got2, &got, sizeof got) != 0) {
    failures++;
    printf("FAIL gkcu_nrm2_f64 (blocking, again) %s: rc %d got %.17g, async gave %.17g\n", what, rc,
           got2, got);
  }
  if (!guards_intact(dx)) {
    failures++;
    printf("FAIL nrm2_f64 %s: guards around x changed\n", what);
  }
}

/* Every entry U(-1, 1) * 2^k. */
static void check_nrm2(long long n, int off, int k) {
  dvec dx = place(0, n, off);
  fill(hx, n, ldexp(1.0, k));
  upload_guarded(dx, hx);
  char what[96];
  snprintf(what, sizeof what, "n=%lld off=%d scale=2^%d", n, off, k);
  run_nrm2(dx, n, nrm2_ref_scaled(hx, n, k), what, 0);
}

/* Entries alternately U(-1,1) * 2^k0 and U(-1,1) * 2^k1 (two of the
 * three sums, or one sum and entries just inside the plain range). */
static void check_nrm2_mixed(long long n, int k0, int k1, int kref) {
  dvec dx = place(0, n, 1);
  for (long long i = 0; i < n; i++) hx[i] = rnd() * ldexp(1.0, i & 1 ? k1 : k0);
  upload_guarded(dx, hx);
  char what[96];
  snprintf(what, sizeof what, "n=%lld mixed 2^%d and 2^%d", n, k0, k1);
  run_nrm2(dx, n, nrm2_ref_scaled(hx, n, kref), what, 0);
}

/* NaN or Inf at position at among U(-1,1) entries (and a huge one). */
static void check_nrm2_special(long long n, long long at, double v, long long at2, double v2,
                               double want) {
  dvec dx = place(0, n, 0);
  fill(hx, n, 1.0);
  hx[n / 2] = 0x1p700;
  hx[at] = v;
  if (at2 >= 0) hx[at2] = v2;
  upload_guarded(dx, hx);
  char what[96];
  snprintf(what, sizeof what, "n=%lld x[%lld]=%g x[%lld]=%g", n, at, v, at2, v2);
  run_nrm2(dx, n, want, what, 1);
}

/* --- axpby -------------------------------------------------------------------- */

/* poison: 0 none, 1 y is NaN/Inf (beta must be 0), 2 x is NaN (alpha must be 0) */
static void check_axpby(long long n, int offx, int offy, double alpha, double beta, int same, int poison) {
  dvec dx = place(0, n, offx), dy = same ? dx : place(1, n, offy);
  fill(hx, n, 1.0);
  fill(hy, n, 1.0);
  if (same) memcpy(hy, hx, (size_t)n * sizeof(double));
  if (poison == 1)
    for (long long i = 0; i < n; i++) hy[i] = (i % 3 == 2) ? INFINITY : NAN;
  if (poison == 2)
    for (long long i = 0; i < n; i++) hx[i] = (i % 3 == 2) ? -INFINITY : NAN;
  if (!same) upload_guarded(dx, hx);
  upload_guarded(dy, hy);
  char what[128];
  snprintf(what, sizeof what, "n=%lld offx=%d offy=%d alpha=%.17g beta=%.17g%s%s", n, offx, offy, alpha,
           beta, same ? " x==y" : "", poison == 1 ? " y=NaN" : poison == 2 ? " x=NaN" : "");
  int rc = gkcu_axpby_f64(ctx, n, alpha, dx.v, beta, dy.v);
  runs++;
  if (rc != 0) {
    failures++;
    printf("FAIL gkcu_axpby_f64 %s: rc %d %s\n", what, rc, gkcu_ctx_errmsg(ctx));
    return;
  }
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(hout, dy.v, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
  long long bad = 0, first = -1;
  double worst = 0;
  for (long long i = 0; i < n; i++) {
    long double ax = (long double)alpha * hx[i], by = (long double)beta * hy[i];
    long double want;
    double scale;
    if (alpha == 0 && beta == 0) want = 0, scale = 0;
    else if (beta == 0) want = ax, scale = fabs((double)ax);
    else if (alpha == 0) want = by, scale = fabs((double)by);
    else want = ax + by, scale = fabs((double)ax) + fabs((double)by);
    double e = fabs((double)((long double)hout[i] - want));
    if (scale > 0 && e / scale > worst) worst = e / scale;
    if (!(e <= 2.5 * U * scale)) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (worst > worst_axpby) worst_axpby = worst;
  if (bad) {
    failures++;
    printf("FAIL gkcu_axpby_f64 %s: %lld bad elements, first y[%lld] = %.17g (x %.17g, y %.17g)\n",
           what, bad, first, hout[first], hx[first], hy[first]);
  }
  if (!guards_intact(dy) || (!same && !guards_intact(dx))) {
    failures++;
    printf("FAIL axpby_f64 %s: guards around x or y changed\n", what);
  }
}

static void axpby_cases(long long n, int offx, int offy) {
  double a = 4 * rnd(), b = 4 * rnd();
  check_axpby(n, offx, offy, a, b, 0, 0);
  check_axpby(n, offx, offy, a, 1.0, 0, 0);
  check_axpby(n, offx, offy, 1.0, b, 0, 0);
  check_axpby(n, offx, offy, a * 1e200, b * 1e-200, 0, 0); /* beyond float32's range */
  check_axpby(n, offx, offy, a, 0.0, 0, 1);                /* y (NaN/Inf) not read */
  check_axpby(n, offx, offy, 0.0, b, 0, 2);                /* x (NaN) not read */
  check_axpby(n, offx, offy, 0.0, 0.0, 0, 1);              /* zeros over NaN */
  check_axpby(n, offx, offx, a, b, 1, 0);                  /* x == y */
  check_axpby(n, offx, offx, a, 0.0, 1, 0);
}

/* --- the batch's axpby with device scalars ----------------------------------------- */

static void check_axpby_ref(long long n) {
  gkcu_batch_state *st;
  CUDA_OK(cudaMalloc((void **)&st, sizeof *st));
  dvec dx = place(0, n, 1), dy = place(1, n, 1);
  fill(hx, n, 1.0);
  fill(hy, n, 1.0);
  upload_guarded(dx, hx);
  upload_guarded(dy, hy);
  ASSERT_EQ(gkcu_batch_state_init(ctx, st), 0);
  /* vals[0] = x.y, vals[1] = 0 (x . zeros) */
  ASSERT_EQ(gkcu_dot_f64_async(ctx, n, dx.v, dy.v, &st->vals[0]), 0);
  double *zeros;
  CUDA_OK(cudaMalloc((void **)&zeros, (size_t)n * sizeof(double)));
  CUDA_OK(cudaMemset(zeros, 0, (size_t)n * sizeof(double)));
  ASSERT_EQ(gkcu_dot_f64_async(ctx, n, dx.v, zeros, &st->vals[1]), 0);
  /* step 2: y = (1e300 * vals[0]) x + 0.5 y: alpha far beyond float32 */
  gkcu_bscalar a = {1e300, 0, -1}, b = {0.5, -1, -1};
  ASSERT_EQ(gkcu_axpby_ref_f64(ctx, 2, n, a, dx.v, b, dy.v, dy.v, st), 0);
  /* step 3: beta = 1 / vals[1] = Inf: fails, writes nothing */
  gkcu_bscalar one = {1.0, -1, -1}, inv = {1.0, -1, 1};
  ASSERT_EQ(gkcu_axpby_ref_f64(ctx, 3, n, one, dx.v, inv, dy.v, dy.v, st), 0);
  gkcu_batch_state hs;
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(&hs, st, sizeof hs, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hout, dy.v, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
  runs++;
  double dot = hs.vals[0], S, want_dot = dot2_ref(hx, hy, n, &S);
  int ok = fabs(dot - want_dot) <= dot_tol_units(n) * U * S && hs.vals[1] == 0.0 &&
           hs.fail_step == 3 && hs.fail_which == 'b' && isinf(hs.fail_value);
  long long bad = 0;
  double alpha = 1e300 * dot;
  for (long long i = 0; i < n; i++) {
    long double ax = (long double)alpha * hx[i], by = 0.5L * hy[i];
    double scale = fabs((double)ax) + fabs((double)by);
    if (!(fabs((double)((long double)hout[i] - (ax + by))) <= 2.5 * U * scale)) bad++;
  }
  if (!ok || bad || !guards_intact(dy)) {
    failures++;
    printf("FAIL gkcu_axpby_ref_f64 n=%lld: dot %.17g (want %.17g), vals[1] %g, fail step %d '%c' %g,"
           " %lld bad elements\n", n, dot, want_dot, hs.vals[1], hs.fail_step, hs.fail_which,
           hs.fail_value, bad);
  }
  cudaFree(zeros);
  cudaFree(st);
}

static void argument_checks(void) {
  double *d, *r;
  CUDA_OK(cudaMalloc((void **)&d, 1024));
  CUDA_OK(cudaMalloc((void **)&r, 8));
  ASSERT_EQ(gkcu_dot_f64_async(NULL, 4, d, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_f64_async(ctx, 0, d, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_f64_async(ctx, 4, NULL, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_dot_f64_async(ctx, 4, d, d, NULL), GKC_EINVALID_ARGUMENT);
  /* 4-byte aligned is not enough for doubles */
  ASSERT_EQ(gkcu_dot_f64_async(ctx, 4, (const double *)((char *)d + 4), d, r), GKC_EINVALID_ARGUMENT);
  ASSERT(strlen(gkcu_ctx_errmsg(ctx)) > 0);
  ASSERT_EQ(gkcu_dot_f64(ctx, 4, d, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_f64_async(ctx, -1, d, r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_f64_async(ctx, 4, (const double *)((char *)d + 4), r), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_nrm2_f64(ctx, 4, d, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby_f64(ctx, 0, 1.0, d, 1.0, d + 8), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby_f64(ctx, 4, 1.0, d, 1.0, (double *)((char *)d + 36)), GKC_EINVALID_ARGUMENT);
  /* partial overlap either way is refused; touching ranges are fine */
  ASSERT_EQ(gkcu_axpby_f64(ctx, 4, 1.0, d, 1.0, d + 3), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_axpby_f64(ctx, 4, 1.0, d + 3, 1.0, d), GKC_EINVALID_ARGUMENT);
  CUDA_OK(cudaMemset(d, 0, 1024));
  ASSERT_EQ(gkcu_axpby_f64(ctx, 4, 1.0, d, 1.0, d + 4), 0);
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  cudaFree(d);
  cudaFree(r);
}

int main(void) {
  gpu_require_device();
  g.s = gpu_seed("test_gpu_blas1_f64");
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int rc = gkcu_ctx_create(&ctx, stream);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks();

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  static const long long full[] = {1, 2, 3, 5, 1000, (1LL << 20) + 3, (1LL << 24) + 1};
  static const long long shrt[] = {1, 2, 3, 5, 1000, 70001};
  const long long *sizes = short_run ? shrt : full;
  int nsizes = short_run ? (int)(sizeof shrt / sizeof shrt[0]) : (int)(sizeof full / sizeof full[0]);
  cap_n = sizes[nsizes - 1];
  long long slot = ((GUARD + 4 + cap_n + GUARD) + 31) / 32 * 32;
  CUDA_OK(cudaMalloc((void **)&dev_buf, (size_t)(2 * slot) * sizeof(double)));
  CUDA_OK(cudaMalloc((void **)&dres, sizeof(double)));
  hx = malloc((size_t)cap_n * sizeof(double));
  hy = malloc((size_t)cap_n * sizeof(double));
  hout = malloc((size_t)cap_n * sizeof(double));
  if (!hx || !hy || !hout) TEST_FAIL("out of memory");

  /* (offx, offy) in doubles: both 16-byte aligned, both off (double2 path
   * with a head), one off either way (scalar path), odd offsets */
  static const int offs[][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 1}, {3, 3}, {2, 3}};
  for (int s = 0; s < nsizes; s++) {
    long long n = sizes[s];
    int big = n > 100000;
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
      if (big && o > 2) continue;
      check_dot(n, offs[o][0], offs[o][1], 0);
      axpby_cases(n, offs[o][0], offs[o][1]);
      check_nrm2(n, offs[o][0], 0);
    }
    check_dot(n, 1, 1, 1); /* x . x */
  }
  /* nrm2 where a plain sum of squares overflows (2^600: squares 2^1200),
   * underflows to zero (2^-600), or needs two sums combined: entries above
   * and in the plain range, below and in it, and just either side of the
   * small threshold 2^-511 (comparable sums: the combination shows) */
  long long nl = short_run ? 70001 : (1LL << 20) + 3;
  for (int o = 0; o < 2; o++) {
    check_nrm2(nl, o, 600);
    check_nrm2(nl, o, -600);
    check_nrm2(1, o, 600);
    check_nrm2(1, o, -1060); /* a subnormal */
  }
  check_nrm2(1001, 1, 486); /* 2^486 U(-1,1): all in the plain range, squares near 2^972 */
  check_nrm2_mixed(nl, 500, 0, 500);
  check_nrm2_mixed(nl, -520, 0, 0);
  check_nrm2_mixed(nl, -506, -516, -510);
  check_nrm2_mixed(1001, 480, 490, 485); /* either side of 2^486 */
  check_nrm2_mixed(1001, -1000, -1060, -1030); /* deep in the subnormals' neighbourhood */
  /* NaN wins over everything, Inf over finite */
  check_nrm2_special(1001, 7, NAN, -1, 0, NAN);
  check_nrm2_special(1001, 7, INFINITY, -1, 0, INFINITY);
  check_nrm2_special(1001, 7, -INFINITY, 900, NAN, NAN);
  check_nrm2_special(nl, nl - 1, NAN, 3, 0x1p-600, NAN);

  check_axpby_ref(1000);
  check_axpby_ref(short_run ? 70001 : (1LL << 20) + 3);

  printf("worst |err|/sum|x*y|: gkcu_dot_f64 %.3g (u = %.3g)\n", worst_dot, U);
  printf("worst |err|/||x||: gkcu_nrm2_f64 %.3g\n", worst_nrm2);
  printf("worst |err|/(|ax|+|by|): gkcu_axpby_f64 %.3g\n", worst_axpby);
  cudaFree(dev_buf);
  cudaFree(dres);
  free(hx);
  free(hy);
  free(hout);
  gkcu_ctx_destroy(ctx);
  cudaStreamDestroy(stream);
  printf("test_gpu_blas1_f64: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
