/* e2e_solve_lib.c: gkc_solve and gkc_batch, blocking and async, against a
 * float64 reference computed here.
 *
 * Matrices are fresh and random each run (GKC_TEST_SEED replays one): a
 * diagonally dominant symmetric one (SPD) for cg, the same with rows and
 * columns scaled by factors up to 100 (still SPD, badly scaled: what the
 * Jacobi preconditioner fixes) for pcg, and a diagonally dominant
 * nonsymmetric one for bicgstab.  The reference is CG/PCG in float64 on
 * the same float32 numbers, written here as PROTOCOL.md describes it
 * (SciPy's rule); gkcd iterates in float64 too, so iteration counts agree
 * within max(1, 2%) and the residual histories to 1e-6 relative while the
 * residual is above 1e-6.  Every returned x is checked by its residual
 * recomputed here in float64, which must equal gkcd's `residual` and be
 * within rtol plus what rounding x to float32 costs.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "test.h"

static uint64_t rng;

typedef struct {
  int32_t n;
  int32_t *rp, *ci;
  float *v;
  int64_t nnz;
} csr;

static void csr_free(csr *m) { free(m->rp), free(m->ci), free(m->v); }

static gkc_csr as_gkc(const csr *m) {
  gkc_csr g = {m->n, m->n, m->nnz, m->rp, m->ci, m->v};
  return g;
}

/* Dense n x n (row-major, double) to CSR float32, dropping zeros. */
static csr from_dense(int32_t n, const double *d) {
  csr m = {n, malloc(((size_t)n + 1) * 4), NULL, NULL, 0};
  int64_t nnz = 0;
  for (size_t i = 0; i < (size_t)n * n; i++) nnz += d[i] != 0;
  m.ci = malloc((size_t)nnz * 4 + 4), m.v = malloc((size_t)nnz * 4 + 4);
  ASSERT(m.rp && m.ci && m.v);
  m.rp[0] = 0;
  for (int32_t i = 0; i < n; i++) {
    for (int32_t j = 0; j < n; j++)
      if (d[(size_t)i * n + j] != 0) m.ci[m.nnz] = j, m.v[m.nnz++] = (float)d[(size_t)i * n + j];
    m.rp[i + 1] = (int32_t)m.nnz;
  }
  return m;
}

/* kind 0: SPD, 1: SPD with rows and columns scaled by 10^[0, 2), 2: nonsymmetric. */
static csr random_matrix(int32_t n, int kind) {
  double *d = calloc((size_t)n * n, sizeof *d);
  ASSERT(d);
  for (int32_t i = 0; i < n; i++)
    for (int t = 0; t < 3; t++) {
      int32_t j = (int32_t)(test_rand_u64(&rng) % (uint64_t)n);
      if (j == i) continue;
      double v = test_rand_f32(&rng);
      d[(size_t)i * n + j] = v;
      d[(size_t)j * n + i] = kind == 2 ? test_rand_f32(&rng) : v;
    }
  for (int32_t i = 0; i < n; i++) {
    double s = 0;
    for (int32_t j = 0; j < n; j++) s += fabs(d[(size_t)i * n + j]) + fabs(d[(size_t)j * n + i]);
    d[(size_t)i * n + i] = s / 2 + 0.5 + (test_rand_f32(&rng) + 1);
  }
  if (kind == 1) {
    double *s = malloc((size_t)n * sizeof *s);
    for (int32_t i = 0; i < n; i++) s[i] = pow(10.0, test_rand_f32(&rng) + 1.0);
    for (int32_t i = 0; i < n; i++)
      for (int32_t j = 0; j < n; j++) d[(size_t)i * n + j] *= s[i] * s[j];
    free(s);
  }
  csr m = from_dense(n, d);
  free(d);
  return m;
}

static void matvec(const csr *A, const double *x, double *y) {
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) s += (double)A->v[j] * x[A->ci[j]];
    y[i] = s;
  }
}

static double dotd(const double *a, const double *b, int32_t n) {
  double s = 0;
  for (int32_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* ||b - A x|| / ||b|| in float64, and (floor) what rounding x to float32 may
 * cost of it: || |A| |x| || * 2^-24 / ||b||. */
static double residual(const csr *A, const float *b, const float *x, double *floor) {
  double rr = 0, bb = 0, aa = 0;
  for (int32_t i = 0; i < A->n; i++) {
    double ax = 0, mag = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) {
      ax += (double)A->v[j] * x[A->ci[j]];
      mag += fabs((double)A->v[j] * x[A->ci[j]]);
    }
    rr += ((double)b[i] - ax) * ((double)b[i] - ax);
    bb += (double)b[i] * b[i];
    aa += mag * mag;
  }
  if (floor) *floor = sqrt(aa) * 0x1p-24 / sqrt(bb);
  return sqrt(rr / bb);
}

/* CG (jacobi: PCG) in float64 from x0 = 0, stopping as gkcd does; returns
 * the iterations, hist[k] = ||r_k|| / ||b||. */
static int64_t ref_cg(const csr *A, const float *b, double rtol, int jacobi, int64_t max_iter,
                      double *hist) {
  int32_t n = A->n;
  double *x = calloc((size_t)n, 8), *r = malloc((size_t)n * 8), *p = malloc((size_t)n * 8);
  double *q = malloc((size_t)n * 8), *z = malloc((size_t)n * 8), *dinv = malloc((size_t)n * 8);
  for (int32_t i = 0; i < n; i++) {
    r[i] = b[i];
    dinv[i] = 1;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++)
      if (jacobi && A->ci[j] == i) dinv[i] = 1.0 / A->v[j];
    z[i] = dinv[i] * r[i];
  }
  double bn = sqrt(dotd(r, r, n)), rz = dotd(r, z, n);
  memcpy(p, z, (size_t)n * 8);
  int64_t it = 0;
  while (it < max_iter) {
    matvec(A, p, q);
    double alpha = rz / dotd(p, q, n);
    for (int32_t i = 0; i < n; i++) x[i] += alpha * p[i], r[i] -= alpha * q[i];
    double rn = sqrt(dotd(r, r, n));
    hist[it++] = rn / bn;
    if (rn <= rtol * bn) break;
    for (int32_t i = 0; i < n; i++) z[i] = dinv[i] * r[i];
    double rz_new = dotd(r, z, n);
    for (int32_t i = 0; i < n; i++) p[i] = z[i] + rz_new / rz * p[i];
    rz = rz_new;
  }
  free(x), free(r), free(p), free(q), free(z), free(dinv);
  return it;
}

static float *rand_vec(int32_t n) {
  float *v = malloc((size_t)n * 4 + 4);
  ASSERT(v);
  for (int32_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

/* Checks a converged solve's x: gkcd's residual is the float64 one here,
 * and within rtol plus the float32 floor. */
static void check_x(const char *tag, const csr *A, const float *b, const float *x,
                    const gkc_solve_result *res, double rtol) {
  double floor, rel = residual(A, b, x, &floor);
  if (!(fabs(res->residual - rel) <= 1e-9 * rel + 1e-300))
    TEST_FAIL("%s: gkcd says residual %.9g, recomputed here %.9g", tag, res->residual, rel);
  if (!(rel <= rtol + 4 * floor))
    TEST_FAIL("%s: residual %.3g over rtol %g + float32 floor %.3g", tag, rel, rtol, floor);
  if (!res->converged || strcmp(res->reason, "converged") != 0)
    TEST_FAIL("%s: not converged (%s) after %lld iterations", tag, res->reason,
              (long long)res->iterations);
}

/* --- blocking solve ---------------------------------------------------------------------- */

static void test_methods(gkc_conn *c) {
  const int32_t n = 300;
  static const struct { gkc_solve_method m; int kind; const char *name; } cases[] = {
      {GKC_SOLVE_CG, 0, "cg"}, {GKC_SOLVE_PCG, 1, "pcg"}, {GKC_SOLVE_BICGSTAB, 2, "bicgstab"}};
  for (size_t t = 0; t < 3; t++) {
    csr A = random_matrix(n, cases[t].kind);
    gkc_csr g = as_gkc(&A);
    uint32_t mat;
    if (gkc_csr_upload(c, &g, 0, &mat, NULL)) TEST_FAIL("csr_upload: %s", gkc_errmsg(c));
    float *b = rand_vec(n), *x = calloc((size_t)n, 4);
    double *hist = malloc(10000 * 8), *ref_hist = malloc(10000 * 8);
    gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
    s.matrix = mat, s.b = gkc_ref_mem(b, (size_t)n * 4), s.method = cases[t].m, s.rtol = 1e-8;
    s.history = hist, s.history_cap = 10000;
    gkc_out out = gkc_out_mem(x, (size_t)n * 4);
    gkc_solve_result res;
    gkc_info info;
    if (gkc_solve(c, &s, &out, &res, &info)) TEST_FAIL("%s: %s", cases[t].name, gkc_errmsg(c));
    ASSERT_STR_EQ(res.method, cases[t].name);
    ASSERT(info.algo[0] != 0);
    check_x(cases[t].name, &A, b, x, &res, 1e-8);
    ASSERT_EQ(res.history_len, res.iterations);
    ASSERT(hist[res.iterations - 1] <= 1e-8);
    if (cases[t].m != GKC_SOLVE_BICGSTAB) {
      int64_t want = ref_cg(&A, b, 1e-8, cases[t].m == GKC_SOLVE_PCG, 10000, ref_hist);
      int64_t slack = want / 50 > 1 ? want / 50 : 1;
      if (llabs(res.iterations - want) > slack)
        TEST_FAIL("%s: %lld iterations, the float64 reference %lld", cases[t].name,
                  (long long)res.iterations, (long long)want);
      for (int64_t k = 0; k < res.iterations && k < want; k++)
        if (ref_hist[k] > 1e-6 && !(fabs(hist[k] - ref_hist[k]) <= 1e-6 * ref_hist[k]))
          TEST_FAIL("%s: history[%lld] = %.12g, reference %.12g", cases[t].name, (long long)k,
                    hist[k], ref_hist[k]);
    }
    fprintf(stderr, "  %s: %lld iterations, residual %.3g\n", cases[t].name,
            (long long)res.iterations, res.residual);
    ASSERT_EQ(gkc_release_matrix(c, mat), 0);
    free(b), free(x), free(hist), free(ref_hist);
    csr_free(&A);
  }
}

/* precision fp32 (gkc_solve_args.fp32): converges to a residual that holds
 * when recomputed here, and its residual history departs from float64 CG's
 * by more than float64 rounding could (the vectors really were float32). */
static void test_precision(gkc_conn *c) {
  const int32_t n = 300;
  const double rtol = 1e-5;
  csr A = random_matrix(n, 0);
  gkc_csr g = as_gkc(&A);
  uint32_t mat;
  if (gkc_csr_upload(c, &g, 0, &mat, NULL)) TEST_FAIL("csr_upload: %s", gkc_errmsg(c));
  float *b = rand_vec(n), *x = calloc((size_t)n, 4);
  double *hist = malloc(10000 * 8), *ref_hist = malloc(10000 * 8);
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.matrix = mat, s.b = gkc_ref_mem(b, (size_t)n * 4), s.rtol = rtol, s.fp32 = 1;
  s.history = hist, s.history_cap = 10000;
  gkc_out out = gkc_out_mem(x, (size_t)n * 4);
  gkc_solve_result res;
  gkc_info info;
  if (gkc_solve(c, &s, &out, &res, &info)) TEST_FAIL("cg fp32: %s", gkc_errmsg(c));
  check_x("cg fp32", &A, b, x, &res, rtol);
  int64_t want = ref_cg(&A, b, rtol, 0, 10000, ref_hist);
  double dev = 0;
  for (int64_t k = 0; k < res.iterations && k < want; k++)
    dev = fmax(dev, fabs(hist[k] - ref_hist[k]) / ref_hist[k]);
  if (!(dev > 1e-9))
    TEST_FAIL("cg fp32: its history stays within %.3g of float64 CG's: not float32 vectors", dev);
  fprintf(stderr, "  cg fp32: %lld iterations (float64: %lld), residual %.3g, history apart by %.3g\n",
          (long long)res.iterations, (long long)want, res.residual, dev);
  ASSERT_EQ(gkc_release_matrix(c, mat), 0);
  free(b), free(x), free(hist), free(ref_hist);
  csr_free(&A);
}

/* b from a region, x0 and x as one resident handle (in place), x to a new
 * handle, a short history buffer, max_iter. */
static void test_refs_and_outs(gkc_conn *c) {
  const int32_t n = 200;
  size_t nb = (size_t)n * 4;
  csr A = random_matrix(n, 0);
  gkc_csr g = as_gkc(&A);
  uint32_t mat;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &mat, NULL), 0);
  gkc_region *reg;
  if (gkc_region_create(c, nb, &reg)) TEST_FAIL("region: %s", gkc_errmsg(c));
  float *b = gkc_region_floats(reg);
  for (int32_t i = 0; i < n; i++) b[i] = test_rand_f32(&rng);

  /* b from the region, x to a new handle. */
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.matrix = mat, s.b = gkc_ref_region(reg, 0, nb), s.rtol = 1e-7;
  gkc_out out = gkc_out_new_handle();
  gkc_solve_result res;
  if (gkc_solve(c, &s, &out, &res, NULL)) TEST_FAIL("solve to a handle: %s", gkc_errmsg(c));
  ASSERT_EQ(out.bytes, nb);
  ASSERT_EQ(res.history_len, 0);
  float *x = malloc(nb);
  ASSERT_EQ(gkc_download(c, out.handle, x, nb), 0);
  check_x("b in a region, x to a handle", &A, b, x, &res, 1e-7);
  int64_t full = res.iterations;

  /* x0 = that handle, updated in place: it starts at the answer. */
  uint32_t hx = out.handle;
  s.x0 = gkc_ref_handle(hx, nb);
  s.rtol = 1e-6;
  out = gkc_out_handle(hx);
  if (gkc_solve(c, &s, &out, &res, NULL)) TEST_FAIL("solve in place: %s", gkc_errmsg(c));
  ASSERT_EQ(out.handle, hx);
  if (res.iterations > full / 4)
    TEST_FAIL("x0 = the solution still took %lld of %lld iterations", (long long)res.iterations,
              (long long)full);
  ASSERT_EQ(gkc_download(c, hx, x, nb), 0);
  check_x("x0 in place", &A, b, x, &res, 1e-6);

  /* precond amg: the first solve builds the matrix's hierarchy, the next
   * reuses it (no setup), with the same iterations. */
  gkc_solve_args sa = GKC_SOLVE_ARGS_INIT;
  sa.matrix = mat, sa.b = gkc_ref_region(reg, 0, nb), sa.rtol = 1e-7, sa.precond = GKC_PRECOND_AMG;
  gkc_solve_result ra, rb;
  out = gkc_out_mem(x, nb);
  if (gkc_solve(c, &sa, &out, &ra, NULL)) TEST_FAIL("amg: %s", gkc_errmsg(c));
  check_x("amg, built", &A, b, x, &ra, 1e-7);
  out = gkc_out_mem(x, nb);
  if (gkc_solve(c, &sa, &out, &rb, NULL)) TEST_FAIL("amg again: %s", gkc_errmsg(c));
  check_x("amg, reused", &A, b, x, &rb, 1e-7);
  ASSERT_STR_EQ(ra.precond, "amg");
  ASSERT(ra.levels >= 1 && !ra.amg_reused && ra.amg_setup_us > 0);
  ASSERT(rb.amg_reused && rb.amg_setup_us == 0 && rb.iterations == ra.iterations && rb.levels == ra.levels);

  /* x0 from a poor guess in memory, into memory, history cut short, max_iter. */
  float *x0 = rand_vec(n), *xm = malloc(nb);
  double hist[4] = {-1, -1, -1, -1};
  s.x0 = gkc_ref_mem(x0, nb), s.rtol = 1e-12, s.max_iter = 5;
  s.history = hist, s.history_cap = 3;
  out = gkc_out_mem(xm, nb);
  if (gkc_solve(c, &s, &out, &res, NULL)) TEST_FAIL("max_iter 5: %s", gkc_errmsg(c));
  ASSERT_EQ(res.iterations, 5);
  ASSERT(!res.converged);
  ASSERT_STR_EQ(res.reason, "max_iter");
  ASSERT_EQ(res.history_len, 5);
  ASSERT(hist[0] > 0 && hist[2] > 0 && hist[3] == -1); /* the cap held */
  double rel = residual(&A, b, xm, NULL);
  ASSERT_NEAR(res.residual, rel, 1e-9 * rel);

  ASSERT_EQ(gkc_release(c, hx), 0);
  ASSERT_EQ(gkc_release_matrix(c, mat), 0);
  gkc_region_release(c, reg);
  free(x), free(x0), free(xm);
  csr_free(&A);
}

static void expect_err(gkc_conn *c, int rc, int want, const char *needle, const char *what) {
  if (rc != want)
    TEST_FAIL("%s: rc %s (%s), want %s", what, gkc_errname(rc), gkc_errmsg(c), gkc_errname(want));
  if (!strstr(gkc_errmsg(c), needle))
    TEST_FAIL("%s: message \"%s\" lacks \"%s\"", what, gkc_errmsg(c), needle);
}

static void test_solve_errors(gkc_conn *c) {
  const int32_t n = 50;
  size_t nb = (size_t)n * 4;
  csr A = random_matrix(n, 0);
  gkc_csr g = as_gkc(&A);
  uint32_t mat, rect;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &mat, NULL), 0);
  gkc_csr r = g;
  r.rows = n - 1; /* the first n - 1 rows: n - 1 x n */
  r.nnz = A.rp[n - 1];
  ASSERT_EQ(gkc_csr_upload(c, &r, 0, &rect, NULL), 0);
  float *b = rand_vec(n), *x = malloc(nb);
  gkc_solve_result res;
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.matrix = rect, s.b = gkc_ref_mem(b, nb);
  gkc_out out = gkc_out_mem(x, nb);
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "square",
             "non-square matrix");
  s.matrix = mat, s.b = gkc_ref_mem(b, nb - 4);
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'b'", "short b");
  s.b = gkc_ref_mem(b, nb), s.x0 = gkc_ref_mem(b, nb + 4);
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'x0'", "long x0");
  s.x0.kind = GKC_REF_NONE, s.rtol = -1e-3;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'rtol'",
             "negative rtol");
  s.rtol = 1e-6, s.atol = NAN;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'atol'", "NaN atol");
  s.atol = 0, s.max_iter = 200000000;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'max_iter'",
             "max_iter over 1e8");
  s.max_iter = 0, s.method = (gkc_solve_method)7;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "method",
             "unknown method (client side)");
  s.method = GKC_SOLVE_CG, s.matrix = 999999;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'matrix'",
             "no such matrix");
  s.matrix = mat, out = gkc_out_mem(x, nb - 4);
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "'x'",
             "out too small for x");
  out = gkc_out_mem(x, nb);
  /* pcg on a zero diagonal entry: the message names the row. */
  double *d = calloc((size_t)n * n, 8);
  for (int32_t i = 0; i < n; i++) d[(size_t)i * n + i] = i == 7 ? 0 : 2;
  d[7 * (size_t)n + 8] = d[8 * (size_t)n + 7] = 1;
  csr Z = from_dense(n, d);
  gkc_csr zg = as_gkc(&Z);
  uint32_t zm;
  ASSERT_EQ(gkc_csr_upload(c, &zg, 0, &zm, NULL), 0);
  s.matrix = zm, s.method = GKC_SOLVE_PCG;
  expect_err(c, gkc_solve(c, &s, &out, &res, NULL), GKC_EINVALID_ARGUMENT, "7", "pcg zero diag");
  /* cg on it (indefinite): not an error but a breakdown. */
  s.method = GKC_SOLVE_CG;
  for (int32_t i = 0; i < n; i++) b[i] = i == 7 ? 1.0f : 0.0f; /* p.Ap = 0 at once */
  ASSERT_EQ(gkc_solve(c, &s, &out, &res, NULL), 0);
  ASSERT(!res.converged);
  ASSERT_STR_EQ(res.reason, "breakdown");
  /* The connection still works. */
  ASSERT_EQ(gkc_ping(c, NULL), 0);
  free(b), free(x), free(d);
  csr_free(&A), csr_free(&Z);
}

/* --- batch ----------------------------------------------------------------------------------- */

static uint32_t upload(gkc_conn *c, const float *v, int32_t n) {
  uint32_t h;
  if (gkc_upload(c, gkc_ref_mem(v, (size_t)n * 4), GKC_F32, 0, &h))
    TEST_FAIL("upload: %s", gkc_errmsg(c));
  return h;
}

static void test_batch(gkc_conn *c) {
  const int32_t n = 257;
  csr A = random_matrix(n, 2);
  gkc_csr g = as_gkc(&A);
  uint32_t mat;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &mat, NULL), 0);
  float *x = rand_vec(n), *y = rand_vec(n), *got = malloc((size_t)n * 4);
  uint32_t hx = upload(c, x, n), hy = upload(c, y, n), hq = upload(c, y, n), hz = upload(c, y, n);
  /* q = A x; d = x.q; z = (2 / d) * x + 0.5 y; y = 0.25 x + y (in place); max of q. */
  gkc_step st[] = {
      gkc_step_spmv(mat, gkc_scalar_num(1), hx, gkc_scalar_num(0), 0, hq),
      gkc_step_dot(hx, hq),
      gkc_step_axpby(gkc_scalar_ref(-1, 1, 2.0f), hx, gkc_scalar_num(0.5f), hy, hz),
      gkc_step_axpby(gkc_scalar_num(0.25f), hx, gkc_scalar_num(1), hy, 0),
      gkc_step_reduce(hq, GKC_MAX),
      gkc_step_dot(hz, hz)};
  gkc_batch_result br;
  gkc_info info;
  if (gkc_batch(c, st, 6, &br, &info)) TEST_FAIL("batch: %s", gkc_errmsg(c));
  ASSERT_EQ(br.nsteps, 6);
  ASSERT(info.algo[0] != 0);
  double *xd = malloc((size_t)n * 8), *q = malloc((size_t)n * 8);
  for (int32_t i = 0; i < n; i++) xd[i] = x[i];
  matvec(&A, xd, q);
  double d = dotd(xd, q, n), mx = -INFINITY, mag = 0;
  for (int32_t i = 0; i < n; i++) mx = fmax(mx, q[i]), mag += fabs(xd[i] * q[i]);
  ASSERT_NEAR(br.value[1], d, 1e-5 * mag);
  ASSERT(isnan(br.value[0]) && br.handle[0] == hq && br.handle[2] == hz && br.handle[3] == hy);
  ASSERT_NEAR(br.value[4], mx, 1e-5 * fabs(mx));
  ASSERT_EQ(gkc_download(c, hq, got, (size_t)n * 4), 0);
  for (int32_t i = 0; i < n; i++) ASSERT_NEAR(got[i], q[i], 1e-5 * (fabs(q[i]) + 1));
  ASSERT_EQ(gkc_download(c, hz, got, (size_t)n * 4), 0);
  double zz = 0;
  for (int32_t i = 0; i < n; i++) {
    double want = 2.0 / br.value[1] * x[i] + 0.5 * y[i];
    ASSERT_NEAR(got[i], want, 1e-5 * (fabs(want) + 1e-3));
    zz += (double)got[i] * got[i];
  }
  ASSERT_NEAR(br.value[5], zz, 1e-5 * zz);
  ASSERT_EQ(gkc_download(c, hy, got, (size_t)n * 4), 0);
  for (int32_t i = 0; i < n; i++) ASSERT_NEAR(got[i], 0.25 * x[i] + y[i], 1e-6);

  /* A small sgemm step: [2 x 3] . [3 x 2]. */
  float a6[6], b6[6], c4[4];
  for (int i = 0; i < 6; i++) a6[i] = test_rand_f32(&rng), b6[i] = test_rand_f32(&rng);
  uint32_t ha = upload(c, a6, 6), hb = upload(c, b6, 6), hc = upload(c, a6, 4);
  gkc_step mm = gkc_step_sgemm(2, 2, 3, gkc_scalar_num(1), ha, 0, hb, 0, gkc_scalar_num(0), 0, hc);
  ASSERT_EQ(gkc_batch(c, &mm, 1, &br, NULL), 0);
  ASSERT_EQ(gkc_download(c, hc, c4, 16), 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      double want = 0;
      for (int p = 0; p < 3; p++) want += (double)a6[i * 3 + p] * b6[p * 2 + j];
      ASSERT_NEAR(c4[i * 2 + j], want, 1e-5);
    }

  /* Checked before any runs: steps[i] names the step and the argument. */
  gkc_step bad[] = {gkc_step_dot(hx, hy), gkc_step_axpby(gkc_scalar_num(1), hx,
                                                        gkc_scalar_num(1), 999999, 0)};
  expect_err(c, gkc_batch(c, bad, 2, &br, NULL), GKC_EINVALID_ARGUMENT, "steps[1] (axpby)",
             "batch: unknown handle");
  bad[1] = gkc_step_axpby(gkc_scalar_ref(1, -1, 1), hx, gkc_scalar_num(1), hy, 0);
  expect_err(c, gkc_batch(c, bad, 2, &br, NULL), GKC_EINVALID_ARGUMENT, "steps[1] (axpby)",
             "batch: a scalar from a later step");
  bad[1] = gkc_step_dot(hx, 0);
  expect_err(c, gkc_batch(c, bad, 2, &br, NULL), GKC_EINVALID_ARGUMENT, "argument 'y' is 0",
             "batch: handle 0 (client side)");
  expect_err(c, gkc_batch(c, bad, 0, &br, NULL), GKC_EINVALID_ARGUMENT, "1 to 64", "no steps");
  /* Fails while running: 1 / (0 . 0) is infinite; step 0 stays written, step 2 writes nothing. */
  float *zeros = calloc((size_t)n, 4);
  uint32_t h0 = upload(c, zeros, n);
  ASSERT_EQ(gkc_download(c, hz, got, (size_t)n * 4), 0);
  float before = got[0];
  gkc_step run[] = {gkc_step_axpby(gkc_scalar_num(1), hx, gkc_scalar_num(0), hy, hq), /* q = x */
                    gkc_step_dot(h0, h0),
                    gkc_step_axpby(gkc_scalar_ref(-1, 1, 1), hx, gkc_scalar_num(0), hy, hz)};
  expect_err(c, gkc_batch(c, run, 3, &br, NULL), GKC_EINVALID_ARGUMENT, "step 2 (axpby)",
             "batch: division by a zero dot");
  ASSERT_EQ(gkc_download(c, hq, got, (size_t)n * 4), 0);
  for (int32_t i = 0; i < n; i++) ASSERT(got[i] == x[i]);
  ASSERT_EQ(gkc_download(c, hz, got, (size_t)n * 4), 0);
  ASSERT(got[0] == before);
  free(x), free(y), free(got), free(xd), free(q), free(zeros);
  csr_free(&A);
}

/* CG with one gkc_batch per iteration (as examples/cg.c --batch), to a
 * residual checked here in float64. */
static void test_batch_cg(gkc_conn *c) {
  const int32_t n = 400;
  size_t nb = (size_t)n * 4;
  csr A = random_matrix(n, 0);
  gkc_csr g = as_gkc(&A);
  uint32_t mat;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &mat, NULL), 0);
  float *b = rand_vec(n), *zeros = calloc((size_t)n, 4), *x = malloc(nb);
  uint32_t hx = upload(c, zeros, n), hr = upload(c, b, n), hp = upload(c, b, n),
           hq = upload(c, zeros, n);
  double rho = 0, bn = 0;
  for (int32_t i = 0; i < n; i++) rho += (double)b[i] * b[i];
  bn = sqrt(rho);
  int it = 0;
  for (; it < 1000 && sqrt(rho) > 1e-5 * bn; it++) {
    gkc_step st[] = {
        gkc_step_spmv(mat, gkc_scalar_num(1), hp, gkc_scalar_num(0), 0, hq),
        gkc_step_dot(hp, hq),
        gkc_step_axpby(gkc_scalar_ref(-1, 1, (float)rho), hp, gkc_scalar_num(1), hx, hx),
        gkc_step_axpby(gkc_scalar_ref(-1, 1, (float)-rho), hq, gkc_scalar_num(1), hr, hr),
        gkc_step_dot(hr, hr),
        gkc_step_axpby(gkc_scalar_num(1), hr, gkc_scalar_ref(4, -1, (float)(1 / rho)), hp, hp)};
    gkc_batch_result br;
    if (gkc_batch(c, st, 6, &br, NULL)) TEST_FAIL("CG iteration %d: %s", it, gkc_errmsg(c));
    rho = br.value[4];
  }
  ASSERT_EQ(gkc_download(c, hx, x, nb), 0);
  double rel = residual(&A, b, x, NULL);
  fprintf(stderr, "  batch CG: %d iterations, residual %.3g (float64, here)\n", it, rel);
  if (!(rel < 1e-4)) TEST_FAIL("batch CG: residual %.3g after %d iterations", rel, it);
  free(b), free(zeros), free(x);
  csr_free(&A);
}

/* --- async ----------------------------------------------------------------------------------- */

typedef struct {
  int done, status;
  uint32_t id;
  gkc_solve_result solve;
  gkc_batch_result batch;
  char method[16];
} cb_state;

static void on_done(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  cb_state *s = ud;
  s->done++;
  s->status = res->status;
  if (res->status) fprintf(stderr, "  async %s: %s\n", res->method, res->errmsg);
  s->id = res->id;
  s->solve = res->solve;
  s->batch = res->batch;
  snprintf(s->method, sizeof s->method, "%s", res->method);
}

static void test_async(const fixture *f) {
  const int32_t n = 300;
  size_t nb = (size_t)n * 4;
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  gkc_async *ac;
  if (gkc_async_connect(&ac, f->sock)) TEST_FAIL("async connect: %s", gkc_async_errmsg(ac));
  csr A = random_matrix(n, 1);
  gkc_csr g = as_gkc(&A);
  /* The matrix made on the async connection itself; the blocking one has its own. */
  cb_state up = {0};
  gkc_csr_upload_args ua = {g, 0};
  ASSERT_EQ(gkc_async_csr_upload(ac, &ua, on_done, &up), 0);
  while (!up.done) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(up.status, 0);
  uint32_t mat = up.id, bmat;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &bmat, NULL), 0);

  float *b1 = rand_vec(n), *b2 = rand_vec(n), *x1 = malloc(nb), *x2 = malloc(nb);
  double *h1 = malloc(10000 * 8), *ref = malloc(10000 * 8);
  gkc_solve_args s1 = GKC_SOLVE_ARGS_INIT, s2 = GKC_SOLVE_ARGS_INIT;
  s1.matrix = s2.matrix = mat;
  s1.b = gkc_ref_mem(b1, nb), s1.method = GKC_SOLVE_PCG, s1.rtol = 1e-8;
  s1.history = h1, s1.history_cap = 10000;
  s2.b = gkc_ref_mem(b2, nb), s2.method = GKC_SOLVE_BICGSTAB, s2.rtol = 1e-7;
  gkc_out o1 = gkc_out_mem(x1, nb), o2 = gkc_out_mem(x2, nb);
  /* Two solves and a batch in flight at once. */
  float *v = rand_vec(n);
  uint32_t hv;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(v, nb), GKC_F32, 1, &hv), 0); /* shared: ac may use it */
  gkc_step st[] = {gkc_step_dot(hv, hv), gkc_step_reduce(hv, GKC_SUM)};
  gkc_batch_args ba = {st, 2};
  cb_state r1 = {0}, r2 = {0}, r3 = {0};
  ASSERT_EQ(gkc_async_solve(ac, &s1, &o1, on_done, &r1), 0);
  ASSERT_EQ(gkc_async_solve(ac, &s2, &o2, on_done, &r2), 0);
  ASSERT_EQ(gkc_async_batch(ac, &ba, on_done, &r3), 0);
  ASSERT_EQ(gkc_async_pending(ac), 3);
  while (gkc_async_pending(ac) > 0) ASSERT(gkc_async_poll(ac, 30000) >= 0);
  ASSERT(r1.done == 1 && r2.done == 1 && r3.done == 1);
  ASSERT(r1.status == 0 && r2.status == 0 && r3.status == 0);
  ASSERT_STR_EQ(r1.method, "solve");
  ASSERT_STR_EQ(r3.method, "batch");
  check_x("async pcg", &A, b1, x1, &r1.solve, 1e-8);
  check_x("async bicgstab", &A, b2, x2, &r2.solve, 1e-7);
  ASSERT_EQ(r1.solve.history_len, r1.solve.iterations);
  int64_t want = ref_cg(&A, b1, 1e-8, 1, 10000, ref);
  ASSERT(llabs(r1.solve.iterations - want) <= (want / 50 > 1 ? want / 50 : 1));
  for (int64_t k = 0; k < r1.solve.iterations && k < want; k++)
    if (ref[k] > 1e-6) ASSERT_NEAR(h1[k], ref[k], 1e-6 * ref[k]);
  double vv = 0, sum = 0, mag = 0;
  for (int32_t i = 0; i < n; i++) vv += (double)v[i] * v[i], sum += v[i], mag += fabs(v[i]);
  ASSERT_EQ(r3.batch.nsteps, 2);
  ASSERT_NEAR(r3.batch.value[0], vv, 1e-5 * vv);
  ASSERT_NEAR(r3.batch.value[1], sum, 1e-5 * mag);
  /* The same pcg solve blocking: the same iterations. */
  gkc_solve_result rb;
  s1.history = NULL;
  s1.matrix = bmat;
  o1 = gkc_out_mem(x1, nb);
  ASSERT_EQ(gkc_solve(c, &s1, &o1, &rb, NULL), 0);
  ASSERT_EQ(rb.iterations, r1.solve.iterations);
  /* An argument error is the callback's, with gkcd's message; a library one the call's. */
  s2.rtol = -1;
  cb_state r4 = {0};
  ASSERT_EQ(gkc_async_solve(ac, &s2, &o2, on_done, &r4), 0);
  while (!r4.done) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(r4.status, GKC_EINVALID_ARGUMENT);
  ba.nsteps = 65;
  ASSERT_EQ(gkc_async_batch(ac, &ba, on_done, &r4), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "1 to 64");
  gkc_async_close(ac);
  ASSERT_EQ(gkc_release(c, hv), 0);
  ASSERT_EQ(gkc_release_matrix(c, bmat), 0);
  gkc_close(c);
  free(b1), free(b2), free(x1), free(x2), free(h1), free(ref), free(v);
  csr_free(&A);
}

int main(void) {
  rng = test_seed();
  fixture f;
  fixture_start(&f, NULL, NULL);
  gkc_conn *c;
  if (gkc_connect(&c, f.sock)) TEST_FAIL("connect: %s", gkc_errmsg(c));
  test_methods(c);
  test_precision(c);
  test_refs_and_outs(c);
  test_solve_errors(c);
  test_batch(c);
  test_batch_cg(c);
  gkc_close(c);
  test_async(&f);
  int st = fixture_stop(&f, SIGTERM);
  if (st != 0) TEST_FAIL("gkcd exited with status %d", st);
  fprintf(stderr, "e2e_solve_lib: all passed\n");
  return 0;
}
