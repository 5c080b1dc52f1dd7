/* e2e_batch_regions_lib.c: gkc_batch_regions and gkc_async_batch_regions
 * (gkc.h): spmv steps reading x from a region slice and writing into one,
 * against a float64 product computed here.
 *
 * A chain as a distributed product uses it: y = A x with x in the region
 * and y into it, then z = A y read back from the region, then a handle
 * step; float64 slices (gkc_ref_as); the refusals libgkc makes itself (a
 * region operand on a step other than spmv, kinds it does not take) and
 * one gkcd makes (a slice past the region's end), each naming the step;
 * the same chain through the async context.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "test.h"

static uint64_t rng;

enum { N = 300, NNZ_ROW = 5 };

typedef struct {
  int32_t rp[N + 1], ci[N * NNZ_ROW];
  float v[N * NNZ_ROW];
  double vd[N * NNZ_ROW];
} mat;

static void random_mat(mat *m) {
  m->rp[0] = 0;
  for (int32_t i = 0, k = 0; i < N; i++) {
    for (int j = 0; j < NNZ_ROW; j++, k++) {
      m->ci[k] = (int32_t)(test_rand_u64(&rng) % N);
      m->v[k] = test_rand_f32(&rng);
      m->vd[k] = m->v[k];
    }
    m->rp[i + 1] = (i + 1) * NNZ_ROW;
  }
}

/* y = A x in float64, and the magnitudes |A| |x| for the bound. */
static void matvec(const mat *m, const double *x, double *y, double *mag) {
  for (int32_t i = 0; i < N; i++) {
    y[i] = mag[i] = 0;
    for (int32_t k = m->rp[i]; k < m->rp[i + 1]; k++)
      y[i] += m->vd[k] * x[m->ci[k]], mag[i] += fabs(m->vd[k] * x[m->ci[k]]);
  }
}

static void expect_close(const float *got, const double *ref, const double *mag, const char *what) {
  for (int32_t i = 0; i < N; i++)
    if (!(fabs(got[i] - ref[i]) <= 1e-5 * mag[i] + 1e-30))
      TEST_FAIL("%s: element %d is %.8g, want %.8g", what, i, got[i], ref[i]);
}

static void expect_err(gkc_conn *c, int rc, int want, const char *needle, const char *what) {
  if (rc != want)
    TEST_FAIL("%s: rc %s (%s), want %s", what, gkc_errname(rc), gkc_errmsg(c), gkc_errname(want));
  if (!strstr(gkc_errmsg(c), needle))
    TEST_FAIL("%s: message \"%s\" lacks \"%s\"", what, gkc_errmsg(c), needle);
}

/* Steps 0-2 of the chain in region r (x at 0, y at 4N, z at 8N), hq the
 * handle step 2 writes. */
static void chain(uint32_t A, const gkc_region *r, uint32_t hq, gkc_step st[3],
                  gkc_step_region g[3]) {
  size_t nb = (size_t)N * 4;
  memset(g, 0, 3 * sizeof *g);
  st[0] = gkc_step_spmv(A, gkc_scalar_num(1), 0, gkc_scalar_num(0), 0, 0);
  g[0].x = gkc_ref_region(r, 0, nb), g[0].out = gkc_out_region(r, nb);
  st[1] = gkc_step_spmv(A, gkc_scalar_num(1), 0, gkc_scalar_num(0), 0, 0);
  g[1].x = gkc_ref_region(r, nb, nb), g[1].out = gkc_out_region(r, 2 * nb);
  st[2] = gkc_step_spmv(A, gkc_scalar_num(2), 0, gkc_scalar_num(0), 0, hq);
  g[2].x = gkc_ref_region(r, 2 * nb, nb); /* out: the handle */
}

/* What the chain should leave: y, z in the region, q = 2 A z in hq. */
static void check_chain(gkc_conn *c, const mat *m, const float *f, uint32_t hq,
                        const gkc_batch_result *br) {
  double x[N], y[N], z[N], q[N], mag[N];
  float got[N];
  for (int i = 0; i < N; i++) x[i] = f[i];
  matvec(m, x, y, mag);
  expect_close(f + N, y, mag, "y = A x into the region");
  for (int i = 0; i < N; i++) y[i] = f[N + i]; /* from the float32 y gkcd wrote */
  matvec(m, y, z, mag);
  expect_close(f + 2 * N, z, mag, "z = A y, y read from the region");
  for (int i = 0; i < N; i++) z[i] = f[2 * N + i];
  matvec(m, z, q, mag);
  for (int i = 0; i < N; i++) q[i] *= 2, mag[i] *= 2;
  ASSERT_EQ(gkc_download(c, hq, got, sizeof got), 0);
  expect_close(got, q, mag, "q = 2 A z into a handle");
  ASSERT(br->nsteps == 3 && br->handle[0] == 0 && br->handle[1] == 0 && br->handle[2] == hq);
}

static void test_blocking(gkc_conn *c, const mat *m, uint32_t A) {
  gkc_region *r;
  ASSERT_EQ(gkc_region_create(c, (size_t)N * 4 * 3, &r), 0);
  float *f = gkc_region_data(r);
  for (int i = 0; i < N; i++) f[i] = test_rand_f32(&rng), f[N + i] = f[2 * N + i] = 7;
  float zeros[N] = {0};
  uint32_t hq;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(zeros, sizeof zeros), GKC_F32, 0, &hq), 0);
  gkc_step st[3];
  gkc_step_region g[3];
  chain(A, r, hq, st, g);
  gkc_batch_result br;
  if (gkc_batch_regions(c, st, g, 3, &br, NULL)) TEST_FAIL("batch_regions: %s", gkc_errmsg(c));
  check_chain(c, m, f, hq, &br);

  /* Refused here, naming the step: a region operand on a dot, a memory out. */
  gkc_step bad[2] = {gkc_step_dot(hq, hq), st[0]};
  gkc_step_region gb[2] = {{gkc_ref_region(r, 0, (size_t)N * 4), {0}}, g[0]};
  expect_err(c, gkc_batch_regions(c, bad, gb, 2, &br, NULL), GKC_EINVALID_ARGUMENT,
             "regions[0] (dot): only spmv", "a region x on a dot");
  memset(&gb[0], 0, sizeof gb[0]);
  gb[1].out = gkc_out_mem(zeros, sizeof zeros);
  expect_err(c, gkc_batch_regions(c, bad, gb, 2, &br, NULL), GKC_EINVALID_ARGUMENT,
             "regions[1] (spmv)", "an out into this process's memory");
  gb[1] = g[0];
  gb[1].x.bytes += 4; /* by gkcd: the length is not the matrix's columns */
  expect_err(c, gkc_batch_regions(c, bad, gb, 2, &br, NULL), GKC_EINVALID_ARGUMENT,
             "steps[1] (spmv): argument 'x'", "a slice of the wrong length");
  gb[1] = g[0];
  gb[1].out = gkc_out_region(r, (size_t)N * 8 + 4); /* past the end */
  expect_err(c, gkc_batch_regions(c, bad, gb, 2, &br, NULL), GKC_EINVALID_ARGUMENT,
             "steps[1] (spmv): argument 'out'", "an out past the region's end");
  /* A zeroed regions array is gkc_batch. */
  memset(gb, 0, sizeof gb);
  bad[1] = gkc_step_spmv(A, gkc_scalar_num(1), hq, gkc_scalar_num(0), 0, 0);
  expect_err(c, gkc_batch_regions(c, bad, gb, 2, &br, NULL), GKC_EINVALID_ARGUMENT,
             "argument 'out' is 0", "no out at all");

  /* float64 slices */
  gkc_region *r64;
  ASSERT_EQ(gkc_region_create(c, (size_t)N * 16, &r64), 0);
  double *d = gkc_region_data(r64), y[N], mag[N];
  for (int i = 0; i < N; i++) d[i] = test_rand_f32(&rng) / 3.0;
  gkc_step s64 = gkc_step_spmv(A, gkc_scalar_num(1), 0, gkc_scalar_num(0), 0, 0);
  gkc_step_region g64 = {gkc_ref_as(gkc_ref_region(r64, 0, (size_t)N * 8), GKC_F64),
                         gkc_out_region(r64, (size_t)N * 8)};
  if (gkc_batch_regions(c, &s64, &g64, 1, &br, NULL)) TEST_FAIL("f64: %s", gkc_errmsg(c));
  matvec(m, d, y, mag);
  for (int i = 0; i < N; i++)
    if (!(fabs(d[N + i] - y[i]) <= 1e-6 * mag[i] + 1e-30))
      TEST_FAIL("float64 slice: element %d is %.17g, want %.17g", i, d[N + i], y[i]);
  ASSERT_EQ(gkc_release(c, hq), 0);
  ASSERT_EQ(gkc_region_release(c, r64), 0);
  ASSERT_EQ(gkc_region_release(c, r), 0);
}

typedef struct {
  int done, status;
  uint32_t id;
  gkc_region *region;
  gkc_batch_result batch;
} cb_state;

static void on_done(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  cb_state *s = ud;
  s->done++, s->status = res->status, s->id = res->id, s->region = res->region;
  s->batch = res->batch;
  if (res->status) fprintf(stderr, "  async %s: %s\n", res->method, res->errmsg);
}

static cb_state wait_for(gkc_async *ac, cb_state *s) {
  while (!s->done) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(s->status, 0);
  return *s;
}

/* The same chain on an async connection: its own region, matrix and handle. */
static void test_async(const fixture *f, const mat *m) {
  gkc_async *ac;
  if (gkc_async_connect(&ac, f->sock)) TEST_FAIL("async connect: %s", gkc_async_errmsg(ac));
  cb_state s = {0};
  ASSERT_EQ(gkc_async_region_create(ac, (size_t)N * 4 * 3, on_done, &s), 0);
  gkc_region *r = wait_for(ac, &s).region;
  float *fl = gkc_region_data(r);
  for (int i = 0; i < N; i++) fl[i] = test_rand_f32(&rng), fl[N + i] = fl[2 * N + i] = 7;
  gkc_csr_upload_args ua = {{N, N, (int64_t)N * NNZ_ROW, m->rp, m->ci, m->v}, 0};
  s = (cb_state){0};
  ASSERT_EQ(gkc_async_csr_upload(ac, &ua, on_done, &s), 0);
  uint32_t A = wait_for(ac, &s).id;
  static const float zeros[N];
  gkc_upload_args up = {gkc_ref_mem(zeros, sizeof zeros), GKC_F32, 0};
  s = (cb_state){0};
  ASSERT_EQ(gkc_async_upload(ac, &up, on_done, &s), 0);
  uint32_t hq = wait_for(ac, &s).id;
  gkc_step st[3];
  gkc_step_region gr[3];
  chain(A, r, hq, st, gr);
  gkc_batch_regions_args ba = {st, gr, 3};
  s = (cb_state){0};
  ASSERT_EQ(gkc_async_batch_regions(ac, &ba, on_done, &s), 0);
  gkc_batch_result br = wait_for(ac, &s).batch;
  ASSERT(br.nsteps == 3 && br.handle[0] == 0 && br.handle[2] == hq);
  /* y = A x landed in the region */
  double x[N], y[N], mag[N];
  for (int i = 0; i < N; i++) x[i] = fl[i];
  matvec(m, x, y, mag);
  expect_close(fl + N, y, mag, "async: y = A x into the region");
  /* libgkc's own refusal is the call's */
  ba.nsteps = 0;
  ASSERT_EQ(gkc_async_batch_regions(ac, &ba, on_done, &s), GKC_EINVALID_ARGUMENT);
  gkc_async_close(ac);
  gkc_region_release(NULL, r);
}

int main(void) {
  rng = test_seed();
  fixture f;
  fixture_start(&f, NULL, NULL);
  gkc_conn *c;
  if (gkc_connect(&c, f.sock)) TEST_FAIL("connect: %s", gkc_errmsg(c));
  static mat m;
  random_mat(&m);
  gkc_csr g = {N, N, (int64_t)N * NNZ_ROW, m.rp, m.ci, m.v};
  uint32_t A;
  ASSERT_EQ(gkc_csr_upload(c, &g, 0, &A, NULL), 0);
  test_blocking(c, &m, A);
  gkc_close(c);
  test_async(&f, &m);
  int st = fixture_stop(&f, SIGTERM);
  if (st != 0) TEST_FAIL("gkcd exited with status %d", st);
  fprintf(stderr, "e2e_batch_regions_lib: all passed\n");
  return 0;
}
