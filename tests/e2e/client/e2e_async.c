/* e2e_async.c: libgkc's async context against a real gkcd.
 *
 * - 10,000 mixed requests (reduce, dot, sgemm, spmv, axpby, nrm2, ping) in flight
 *   on one connection, driven by gkc_async_poll; every reply is matched to
 *   its request exactly once and checked against a float64 reference.
 * - regions and resident arrays from the async context; nrm2 on a handle,
 *   and its bad arguments.
 * - back-pressure: GKC_EBUSY at the request and byte bounds.
 * - gkc_async_close with 500 pending: 500 cancellations, each once.
 * - a callback that closes its own context.
 * - gkcd killed mid-stream: every pending callback fails once.
 * - the libuv adapter driving 8 connections from one loop, each callback
 *   issuing the connection's next request.
 * Leaks are ASan's to find (the sanitizer build runs this test).
 *
 * GKC_E2E_RINGS (on or off; ctest runs e2e_async with off and
 * e2e_async_ring with on) is gkcd's --rings: every test above then runs
 * over the socket or over the shared-memory ring, and each context checks
 * which one it got.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "fixture.h"
#include "gkc_async.h"
#include "gkc_uv.h"
#include "test.h"

static uint64_t rng;
static int quiet; /* failures are the point: do not print each */

/* --- one request with its inputs, its reference and what came back -------------- */

enum { K_REDUCE, K_DOT, K_SGEMM, K_SPMV, K_AXPBY, K_NRM2, K_PING, K_COUNT };

/* The kinds whose result is res->value. */
static int scalar_kind(int k) { return k == K_REDUCE || k == K_DOT || k == K_NRM2; }

/* ||x||_2 summed in double, as gkcd sums it: the two differ only in the
 * order of n positive terms, (n + 1) * 2^-53 relative at most. */
static double nrm2_ref(const float *x, size_t n) {
  double sq = 0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
  return sqrt(sq);
}
#define NRM2_TOL(n, ref) (((double)(n) + 1) * 0x1p-53 * (ref))

typedef struct job {
  int kind;
  int calls; /* callbacks seen: must end at exactly 1 */
  int status;
  float *x, *y, *out; /* inputs and the result buffer */
  int32_t *rp, *ci;   /* spmv's CSR */
  double *want, *mag; /* reference values and sum of |terms| per value */
  size_t nwant;
  gkc_reduce_op op;
  gkc_out o;
  double got; /* reduce, dot, nrm2 */
  void (*then)(struct job *j); /* called at the end of the callback, if set */
  void *owner;
} job;

/* p, or the test fails: an allocation here is never expected to fail. */
static void *need(void *p) {
  if (!p) TEST_FAIL("out of memory");
  return p;
}

static float *rand_vec(size_t n) {
  float *v = need(malloc((n ? n : 1) * sizeof *v));
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static size_t small(size_t max) { return 1 + (size_t)(test_rand_u64(&rng) % max); }

static void want_alloc(job *j, size_t n) {
  j->nwant = n;
  j->want = need(calloc(n, sizeof(double)));
  j->mag = need(calloc(n, sizeof(double)));
}

static void job_free(job *j) {
  free(j->x), free(j->y), free(j->out), free(j->rp), free(j->ci), free(j->want), free(j->mag);
}

/* Checks a finished job against its reference; fails the test otherwise. */
static void job_check(const job *j) {
  if (j->calls != 1) TEST_FAIL("job kind %d: %d callbacks", j->kind, j->calls);
  if (j->status != 0) TEST_FAIL("job kind %d failed: %s", j->kind, gkc_errname(j->status));
  if (j->kind == K_PING) return;
  if (j->kind == K_NRM2) {
    ASSERT_NEAR(j->got, j->want[0], NRM2_TOL(j->mag[0], j->want[0]));
    return;
  }
  if (j->kind == K_REDUCE || j->kind == K_DOT) {
    ASSERT_NEAR(j->got, j->want[0], 1e-5 * j->mag[0] + 1e-6);
    return;
  }
  for (size_t i = 0; i < j->nwant; i++) ASSERT_NEAR(j->out[i], j->want[i], 1e-5 * j->mag[i] + 1e-6);
}

static void on_job(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  job *j = ud;
  j->calls++;
  j->status = res->status;
  if (res->status && !quiet) fprintf(stderr, "  %s failed: %s\n", res->method, res->errmsg);
  if (res->status == 0) {
    if (scalar_kind(j->kind)) j->got = res->value;
    if (j->kind == K_NRM2) ASSERT_EQ(res->n, (int64_t)j->mag[0]);
    if (j->kind == K_PING) ASSERT_EQ(res->ping.protocol, GKC_PROTOCOL);
    if (j->kind != K_PING && !scalar_kind(j->kind)) {
      ASSERT(res->out == &j->o);
      ASSERT(res->info.algo[0] != 0);
    }
  }
  if (j->then) j->then(j);
}

/* Builds a random job of kind k and submits it; returns the call's result. */
static int job_submit(gkc_async *ac, job *j, int k) {
  void (*then)(job *) = j->then;
  void *owner = j->owner;
  memset(j, 0, sizeof *j);
  j->then = then, j->owner = owner;
  j->kind = k;
  switch (k) {
    case K_REDUCE: {
      /* Now and then an array big enough to be sent from the caller's memory. */
      size_t n = test_rand_u64(&rng) % 20 == 0 ? 1024 + small(3000) : small(64);
      j->x = rand_vec(n);
      j->op = (gkc_reduce_op)(test_rand_u64(&rng) % 3);
      want_alloc(j, 1);
      j->want[0] = j->op == GKC_SUM ? 0 : j->x[0];
      for (size_t i = 0; i < n; i++) {
        if (j->op == GKC_SUM) j->want[0] += j->x[i], j->mag[0] += fabs(j->x[i]);
        if (j->op == GKC_MIN && j->x[i] < j->want[0]) j->want[0] = j->x[i];
        if (j->op == GKC_MAX && j->x[i] > j->want[0]) j->want[0] = j->x[i];
      }
      gkc_reduce_args a = {gkc_ref_mem(j->x, n * 4), j->op, NULL};
      return gkc_async_reduce(ac, &a, on_job, j);
    }
    case K_DOT: {
      size_t n = small(64);
      j->x = rand_vec(n), j->y = rand_vec(n);
      want_alloc(j, 1);
      for (size_t i = 0; i < n; i++)
        j->want[0] += (double)j->x[i] * j->y[i], j->mag[0] += fabs((double)j->x[i] * j->y[i]);
      gkc_dot_args a = {gkc_ref_mem(j->x, n * 4), gkc_ref_mem(j->y, n * 4)};
      return gkc_async_dot(ac, &a, on_job, j);
    }
    case K_SGEMM: {
      int m = (int)small(8), n = (int)small(8), kk = (int)small(8);
      j->x = rand_vec((size_t)m * kk), j->y = rand_vec((size_t)kk * n);
      j->out = need(calloc((size_t)m * n, 4));
      want_alloc(j, (size_t)m * n);
      for (int i = 0; i < m; i++)
        for (int c = 0; c < n; c++)
          for (int p = 0; p < kk; p++) {
            double t = (double)j->x[i * kk + p] * j->y[p * n + c];
            j->want[i * n + c] += t, j->mag[i * n + c] += fabs(t);
          }
      gkc_sgemm_args a = GKC_SGEMM_ARGS_INIT;
      a.m = m, a.n = n, a.k = kk;
      a.a = gkc_ref_mem(j->x, (size_t)m * kk * 4);
      a.b = gkc_ref_mem(j->y, (size_t)kk * n * 4);
      j->o = gkc_out_mem(j->out, (size_t)m * n * 4);
      return gkc_async_sgemm(ac, &a, &j->o, on_job, j);
    }
    case K_SPMV: {
      int rows = (int)small(8), cols = (int)small(8);
      j->rp = need(malloc(((size_t)rows + 1) * 4));
      j->ci = need(malloc((size_t)rows * cols * 4));
      j->y = need(malloc((size_t)rows * cols * 4)); /* the values */
      j->x = rand_vec((size_t)cols);
      j->out = need(calloc((size_t)rows, 4));
      want_alloc(j, (size_t)rows);
      int nnz = 0;
      j->rp[0] = 0;
      for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++)
          if (test_rand_u64(&rng) % 2) {
            j->ci[nnz] = c;
            j->y[nnz] = test_rand_f32(&rng);
            double t = (double)j->y[nnz] * j->x[c];
            j->want[r] += t, j->mag[r] += fabs(t);
            nnz++;
          }
        j->rp[r + 1] = nnz;
      }
      gkc_spmv_args a = GKC_SPMV_ARGS_INIT;
      a.rows = rows, a.cols = cols;
      a.row_ptr = gkc_ref_mem(j->rp, ((size_t)rows + 1) * 4);
      a.col_idx = gkc_ref_mem(j->ci, (size_t)nnz * 4);
      a.values = gkc_ref_mem(j->y, (size_t)nnz * 4);
      a.x = gkc_ref_mem(j->x, (size_t)cols * 4);
      j->o = gkc_out_mem(j->out, (size_t)rows * 4);
      return gkc_async_spmv(ac, &a, &j->o, on_job, j);
    }
    case K_AXPBY: {
      size_t n = small(32);
      float al = test_rand_f32(&rng), be = test_rand_f32(&rng);
      j->x = rand_vec(n), j->y = rand_vec(n);
      j->out = need(calloc(n, 4));
      want_alloc(j, n);
      for (size_t i = 0; i < n; i++) {
        j->want[i] = (double)al * j->x[i] + (double)be * j->y[i];
        j->mag[i] = fabs((double)al * j->x[i]) + fabs((double)be * j->y[i]);
      }
      gkc_axpby_args a = {al, be, gkc_ref_mem(j->x, n * 4), gkc_ref_mem(j->y, n * 4)};
      j->o = gkc_out_mem(j->out, n * 4);
      return gkc_async_axpby(ac, &a, &j->o, on_job, j);
    }
    case K_NRM2: {
      /* Now and then one over the arena's threshold: staged by the call. */
      size_t n = test_rand_u64(&rng) % 50 == 0 ? 40000 + small(20000) : small(64);
      j->x = rand_vec(n);
      want_alloc(j, 1);
      j->want[0] = nrm2_ref(j->x, n);
      j->mag[0] = (double)n; /* nrm2: the length, for the tolerance and res->n */
      gkc_nrm2_args a = {gkc_ref_mem(j->x, n * 4), NULL};
      return gkc_async_nrm2(ac, &a, on_job, j);
    }
    default: return gkc_async_ping(ac, on_job, j);
  }
}

/* Polls until nothing is pending; fails the test on a broken connection. */
static void drain(gkc_async *ac) {
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  if (rc < 0) TEST_FAIL("poll: %s", gkc_errname(rc));
}

/* gkcd's --rings for this run (GKC_E2E_RINGS), and whether a context is
 * to get a ring. */
static const char *rings = "off";
static int ring_expected(void) {
  const char *no = getenv("GKC_NO_RING");
  return !strcmp(rings, "on") && !(no && *no && strcmp(no, "0"));
}

static gkc_async *connect_async(const fixture *f) {
  gkc_async *ac;
  if (gkc_async_connect(&ac, f->sock) != 0) TEST_FAIL("connect: %s", gkc_async_errmsg(ac));
  if (gkc_async_ring_active(ac) != ring_expected())
    TEST_FAIL("the context is on the %s with gkcd's --rings %s", gkc_async_ring_active(ac) ? "ring" : "socket",
              rings);
  return ac;
}

static void test_mixed(const fixture *f) {
  enum { N = 10000 };
  gkc_async *ac = connect_async(f);
  gkc_async_set_limits(ac, N, (uint64_t)1 << 30);
  job *jobs = need(calloc(N, sizeof *jobs));
  for (int i = 0; i < N; i++) {
    int rc = job_submit(ac, &jobs[i], (int)(test_rand_u64(&rng) % K_COUNT));
    if (rc) TEST_FAIL("request %d: %s: %s", i, gkc_errname(rc), gkc_async_errmsg(ac));
  }
  ASSERT_EQ(gkc_async_pending(ac), N);
  drain(ac);
  int per_kind[K_COUNT] = {0};
  for (int i = 0; i < N; i++) {
    job_check(&jobs[i]);
    per_kind[jobs[i].kind]++;
    job_free(&jobs[i]);
  }
  fprintf(stderr, "  mixed: %d requests checked (reduce %d, dot %d, sgemm %d, spmv %d, axpby %d, "
          "nrm2 %d, ping %d)\n", N, per_kind[K_REDUCE], per_kind[K_DOT], per_kind[K_SGEMM],
          per_kind[K_SPMV], per_kind[K_AXPBY], per_kind[K_NRM2], per_kind[K_PING]);
  free(jobs);
  gkc_async_close(ac);
}

/* --- regions and resident arrays ------------------------------------------------- */

typedef struct {
  int calls, status;
  gkc_result res; /* a copy; pointers in it are dead after the callback */
  gkc_region *region;
  char errmsg[256]; /* res.errmsg, copied */
} one;

static void on_one(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  one *o = ud;
  o->calls++;
  o->status = res->status;
  o->res = *res;
  o->region = res->region;
  snprintf(o->errmsg, sizeof o->errmsg, "%s", res->errmsg);
  if (res->status && !quiet) fprintf(stderr, "  %s: %s\n", res->method, res->errmsg);
}

#define WAIT_OK(ac, o)           \
  do {                           \
    drain(ac);                   \
    ASSERT_EQ((o).calls, 1);     \
    ASSERT_EQ((o).status, 0);    \
  } while (0)

static void test_resident(const fixture *f) {
  gkc_async *ac = connect_async(f);
  enum { M = 16, NN = 12, KK = 20 };
  size_t ab = (size_t)M * KK * 4, bb = (size_t)KK * NN * 4, cb = (size_t)M * NN * 4;
  one o = {0};
  ASSERT_EQ(gkc_async_region_create(ac, ab + bb + cb, on_one, &o), 0);
  WAIT_OK(ac, o);
  gkc_region *reg = o.region;
  ASSERT(reg != NULL);
  float *fl = gkc_region_floats(reg);
  for (size_t i = 0; i < (ab + bb) / 4; i++) fl[i] = test_rand_f32(&rng);
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = M, s.n = NN, s.k = KK;
  s.a = gkc_ref_region(reg, 0, ab);
  s.b = gkc_ref_region(reg, ab, bb);
  gkc_out out = gkc_out_region(reg, ab + bb);
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_sgemm(ac, &s, &out, on_one, &o), 0);
  WAIT_OK(ac, o);
  ASSERT_EQ(out.bytes, cb);
  const float *A = fl, *B = fl + M * KK, *C = fl + M * KK + KK * NN;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < NN; j++) {
      double w = 0, mag = 0;
      for (int p = 0; p < KK; p++) w += (double)A[i * KK + p] * B[p * NN + j], mag += fabs(w);
      ASSERT_NEAR(C[i * NN + j], w, 1e-5 * mag + 1e-6);
    }
  /* A resident array uploaded from the region, dotted with memory, then
   * downloaded and released, each step from the async context. */
  gkc_upload_args up = {gkc_ref_region(reg, 0, ab), GKC_F32, 0};
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_upload(ac, &up, on_one, &o), 0);
  WAIT_OK(ac, o);
  uint32_t h = o.res.id;
  float *v = rand_vec(M * KK);
  double want = 0, mag = 0;
  for (int i = 0; i < M * KK; i++) want += (double)v[i] * A[i], mag += fabs((double)v[i] * A[i]);
  gkc_dot_args d = {gkc_ref_handle(h, 0), gkc_ref_mem(v, ab)};
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_dot(ac, &d, on_one, &o), 0);
  WAIT_OK(ac, o);
  ASSERT_NEAR(o.res.value, want, 1e-5 * mag + 1e-6);
  /* nrm2 of the handle, and of the region's span it came from. */
  double norm = nrm2_ref(A, M * KK);
  gkc_nrm2_args nh = {gkc_ref_handle(h, 0), NULL}, nr = {gkc_ref_region(reg, 0, ab), "auto"};
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_nrm2(ac, &nh, on_one, &o), 0);
  WAIT_OK(ac, o);
  ASSERT_NEAR(o.res.value, norm, NRM2_TOL(M * KK, norm));
  ASSERT_EQ(o.res.n, M * KK);
  ASSERT(o.res.info.algo[0] != 0);
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_nrm2(ac, &nr, on_one, &o), 0);
  WAIT_OK(ac, o);
  ASSERT_NEAR(o.res.value, norm, NRM2_TOL(M * KK, norm));
  float *back = need(malloc(ab));
  gkc_download_args dl = {h};
  gkc_out bo = gkc_out_mem(back, ab);
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_download(ac, &dl, &bo, on_one, &o), 0);
  WAIT_OK(ac, o);
  ASSERT(memcmp(back, A, ab) == 0);
  gkc_release_args rel = {h, 0};
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_release(ac, &rel, on_one, &o), 0);
  WAIT_OK(ac, o);
  /* Released: a second dot on it names the handle. */
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_dot(ac, &d, on_one, &o), 0);
  drain(ac);
  ASSERT_EQ(o.calls, 1);
  ASSERT_EQ(o.status, GKC_EINVALID_ARGUMENT);
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_nrm2(ac, &nh, on_one, &o), 0);
  drain(ac);
  ASSERT_EQ(o.calls, 1);
  ASSERT_EQ(o.status, GKC_EINVALID_ARGUMENT);
  /* nrm2's bad arguments: refused by the call (no callback), or by gkcd
   * (one callback with its message naming the argument). */
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_nrm2(ac, NULL, on_one, &o), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "args");
  gkc_nrm2_args bad = {{0}, NULL};
  ASSERT_EQ(gkc_async_nrm2(ac, &bad, on_one, &o), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "x: an array is required");
  ASSERT_EQ(o.calls, 0);
  bad.x = gkc_ref_mem(v, 0);
  ASSERT_EQ(gkc_async_nrm2(ac, &bad, on_one, &o), 0);
  drain(ac);
  ASSERT_EQ(o.calls, 1);
  ASSERT_EQ(o.status, GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(o.errmsg, "'x'");
  memset(&o, 0, sizeof o);
  bad.x = gkc_ref_mem(v, ab), bad.algo = "nonexistent";
  ASSERT_EQ(gkc_async_nrm2(ac, &bad, on_one, &o), 0);
  drain(ac);
  ASSERT_EQ(o.calls, 1);
  ASSERT_EQ(o.status, GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(o.errmsg, "algo");
  gkc_shm_release_args sr = {gkc_region_id(reg)};
  memset(&o, 0, sizeof o);
  ASSERT_EQ(gkc_async_shm_release(ac, &sr, on_one, &o), 0);
  WAIT_OK(ac, o);
  gkc_region_release(NULL, reg);
  free(v), free(back);
  gkc_async_close(ac);
}

/* --- back-pressure ------------------------------------------------------------------ */

static void test_limits(const fixture *f) {
  gkc_async *ac = connect_async(f);
  one o[8] = {{0}};
  gkc_async_set_limits(ac, 4, 0);
  for (int i = 0; i < 4; i++) ASSERT_EQ(gkc_async_ping(ac, on_one, &o[i]), 0);
  ASSERT_EQ(gkc_async_ping(ac, on_one, &o[4]), GKC_EBUSY);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "4 requests are pending");
  drain(ac);
  for (int i = 0; i < 4; i++) ASSERT_EQ(o[i].calls, 1);
  ASSERT_EQ(o[4].calls, 0);
  /* The byte bound: one request over it goes alone, a second waits. */
  gkc_async_set_limits(ac, 100, 1000);
  float *x = rand_vec(1000);
  gkc_reduce_args r = {gkc_ref_mem(x, 4000), GKC_SUM, NULL};
  memset(o, 0, sizeof o);
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_one, &o[0]), 0);
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_one, &o[1]), GKC_EBUSY);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "bound of 1000");
  drain(ac);
  ASSERT_EQ(o[0].calls, 1);
  ASSERT_EQ(o[0].status, 0);
  ASSERT_EQ(o[1].calls, 0);
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_one, &o[1]), 0); /* room again */
  drain(ac);
  ASSERT_EQ(o[1].status, 0);
  ASSERT_NEAR(o[1].res.value, o[0].res.value, 0);
  free(x);
  gkc_async_close(ac);
}

/* --- lifetimes ------------------------------------------------------------------------ */

static void test_close_pending(const fixture *f) {
  enum { N = 500 };
  gkc_async *ac = connect_async(f);
  one *o = need(calloc(N, sizeof *o));
  for (int i = 0; i < N; i++) ASSERT_EQ(gkc_async_ping(ac, on_one, &o[i]), 0);
  gkc_async_close(ac); /* nothing was even written */
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(o[i].calls, 1);
    ASSERT_EQ(o[i].status, GKC_ECANCELLED);
  }
  free(o);
}

typedef struct {
  int calls, ok, cancelled, closed;
} closer;

static void on_close_self(gkc_async *ac, const gkc_result *res, void *ud) {
  closer *c = ud;
  c->calls++;
  if (res->status == 0) c->ok++;
  if (res->status == GKC_ECANCELLED) c->cancelled++;
  if (!c->closed) {
    c->closed = 1;
    gkc_async_close(ac);
    /* Closing: new requests are refused, with no callback. */
    ASSERT_EQ(gkc_async_ping(ac, on_close_self, ud), GKC_ECANCELLED);
  }
}

static void test_close_from_callback(const fixture *f) {
  enum { N = 100 };
  gkc_async *ac = connect_async(f);
  closer c = {0};
  for (int i = 0; i < N; i++) ASSERT_EQ(gkc_async_ping(ac, on_close_self, &c), 0);
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  ASSERT_EQ(rc, GKC_ECANCELLED); /* ac is gone */
  ASSERT_EQ(c.calls, N);
  ASSERT_EQ(c.ok, 1);
  ASSERT_EQ(c.cancelled, N - 1);
}

static void test_daemon_killed(void) {
  enum { N = 3000 };
  fixture f;
  const char *args[] = {"--threads", "1", "--rings", rings, NULL};
  fixture_start(&f, args, NULL);
  gkc_async *ac = connect_async(&f);
  gkc_async_set_limits(ac, N, (uint64_t)1 << 30);
  /* Reconnecting off: gkcd stays dead here, and a dead context must still
   * refuse at once (e2e_reconnect tests connecting again). */
  ASSERT_EQ(gkc_async_set_reconnect(ac, 0, 0, 0), 0);
  job *jobs = need(calloc(N, sizeof *jobs));
  for (int i = 0; i < N; i++) ASSERT_EQ(job_submit(ac, &jobs[i], K_SGEMM), 0);
  /* Let some replies arrive, then take gkcd away. */
  while (gkc_async_pending(ac) > N - 20) ASSERT(gkc_async_poll(ac, 10000) > 0);
  fixture_stop(&f, SIGKILL);
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  ASSERT_EQ(rc, GKC_EIO);
  ASSERT_EQ(gkc_async_fd(ac), -1);
  int ok = 0, failed = 0;
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(jobs[i].calls, 1);
    if (jobs[i].status == 0) {
      job_check(&jobs[i]);
      ok++;
    } else {
      ASSERT_EQ(jobs[i].status, GKC_EIO);
      failed++;
    }
    job_free(&jobs[i]);
  }
  fprintf(stderr, "  killed: %d answered, %d failed once each\n", ok, failed);
  ASSERT(ok >= 20 && failed > 0);
  /* A dead context refuses new requests and says why. */
  one o = {0};
  ASSERT_EQ(gkc_async_ping(ac, on_one, &o), GKC_EIO);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), "closed");
  free(jobs);
  gkc_async_close(ac);
}

/* --- libuv: 8 connections, one loop ------------------------------------------------ */

enum { UV_CONNS = 8, UV_PER_CONN = 400, UV_WINDOW = 16 };

typedef struct {
  gkc_async *ac;
  int submitted, done;
  job jobs[UV_PER_CONN];
} stream;

static void stream_next(stream *s);

/* Each reply, from inside its callback: the stream's next request, or,
 * after its last reply, closing the context (which ends its uv watcher). */
static void stream_then(job *j) {
  stream *s = j->owner;
  s->done++;
  if (s->submitted < UV_PER_CONN) stream_next(s);
  if (s->done == UV_PER_CONN) gkc_async_close(s->ac);
}

static void stream_next(stream *s) {
  job *j = &s->jobs[s->submitted++];
  j->then = stream_then, j->owner = s;
  int rc = job_submit(s->ac, j, (int)(test_rand_u64(&rng) % K_COUNT));
  if (rc) TEST_FAIL("submit: %s", gkc_async_errmsg(s->ac));
}

static void test_uv(const fixture *f) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  stream *streams = need(calloc(UV_CONNS, sizeof *streams));
  for (int i = 0; i < UV_CONNS; i++) {
    stream *s = &streams[i];
    s->ac = connect_async(f);
    ASSERT_EQ(gkc_async_attach_uv(s->ac, &loop), 0);
    for (int w = 0; w < UV_WINDOW; w++) stream_next(s);
  }
  /* Returns once every context closed itself and its watcher is gone. */
  ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_EQ(uv_loop_close(&loop), 0);
  for (int i = 0; i < UV_CONNS; i++) {
    ASSERT_EQ(streams[i].done, UV_PER_CONN);
    for (int k = 0; k < UV_PER_CONN; k++) {
      job_check(&streams[i].jobs[k]);
      job_free(&streams[i].jobs[k]);
    }
  }
  free(streams);
  fprintf(stderr, "  uv: %d connections x %d requests checked\n", UV_CONNS, UV_PER_CONN);
}

int main(void) {
  rng = test_seed();
  signal(SIGPIPE, SIG_IGN);
  const char *r = getenv("GKC_E2E_RINGS");
  if (r && *r) rings = r;
  fprintf(stderr, "gkcd --rings %s\n", rings);
  fixture f;
  const char *args[] = {"--rings", rings, NULL};
  fixture_start(&f, args, NULL);
  test_mixed(&f);
  test_resident(&f);
  test_limits(&f);
  quiet = 1;
  test_close_pending(&f);
  test_close_from_callback(&f);
  quiet = 0;
  test_uv(&f);
  fixture_stop(&f, SIGTERM);
  quiet = 1;
  test_daemon_killed();
  fprintf(stderr, "e2e_async: all passed\n");
  return 0;
}
