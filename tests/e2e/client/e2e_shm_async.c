/* e2e_shm_async.c: libgkc's transparent shared memory on the async context,
 * against a real gkcd (gkc_async.h, gkc_async_set_shm).
 *
 * - Setting up never blocks: the first big call goes inline while the
 *   arena asks gkcd for its limits and registers a region, requests the
 *   caller does not see in gkc_async_pending; later calls use the arena.
 * - Hundreds of mixed requests in flight share one arena (and grow it),
 *   each result the same bytes as on a context that sends them inline.
 * - An arena too small for what is in flight: the rest goes inline, and
 *   every slice comes back once the replies are in.
 * - Sizes just under, at and over the threshold.
 * - gkcd refusing the arena's shm_register (64 regions held already).
 * - gkc_async_shm_reserve: the region there before the first big call.
 * - Closing with requests, and the arena's own requests, in flight.
 * Leaks are ASan's to find (the sanitizer build runs this test).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "gkc_async.h"
#include "test.h"

#define THR 4096

static uint64_t rng;

static void *need(void *p) {
  if (!p) TEST_FAIL("out of memory");
  return p;
}

static float *rand_vec(size_t n) {
  float *v = need(malloc(n * sizeof *v + 4));
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static gkc_async *ctx(const fixture *f, size_t threshold, size_t max_bytes) {
  gkc_async *ac;
  if (gkc_async_connect(&ac, f->sock) != 0) TEST_FAIL("connect: %s", gkc_async_errmsg(ac));
  ASSERT_EQ(gkc_async_set_shm(ac, threshold, max_bytes), 0);
  gkc_async_set_limits(ac, 100000, (uint64_t)4 << 30);
  return ac;
}

static gkc_shm_info state(const gkc_async *ac) {
  gkc_shm_info i;
  gkc_async_shm_state(ac, &i);
  return i;
}

static void drain(gkc_async *ac) {
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  if (rc < 0) TEST_FAIL("poll: %s", gkc_errname(rc));
}

/* Polls (nothing of the caller's pending) until the arena has a region. */
static void wait_ready(gkc_async *ac) {
  for (int i = 0; i < 500 && state(ac).regions == 0; i++) gkc_async_poll(ac, 10);
  if (state(ac).regions == 0) TEST_FAIL("the arena never got a region (%s)", state(ac).why);
}

/* --- jobs: one call, made on two contexts ------------------------------------------------- */

enum { K_REDUCE, K_DOT, K_AXPBY, K_SGEMM, K_DOWNLOAD, K_COUNT };

typedef struct {
  int calls, status;
  double value;
  float *out;
  gkc_out o;
} side;

typedef struct {
  int kind;
  size_t n; /* floats of x and y (sgemm: m = n = k = dim) */
  int dim;
  float *x, *y;
  uint32_t handle; /* download: a shared resident copy of x */
  side s[2];       /* 0: inline, 1: through the arena */
} job;

static void on_done(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  side *s = ud;
  s->calls++;
  s->status = res->status;
  s->value = res->value;
  if (res->status && res->status != GKC_ECANCELLED)
    fprintf(stderr, "  %s failed: %s\n", res->method, res->errmsg);
}

static void submit(gkc_async *ac, job *j, int k) {
  side *s = &j->s[k];
  size_t bytes = j->n * 4;
  int rc;
  switch (j->kind) {
    case K_REDUCE: {
      gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
      a.x = gkc_ref_mem(j->x, bytes), a.op = GKC_SUM;
      rc = gkc_async_reduce(ac, &a, on_done, s);
      break;
    }
    case K_DOT: {
      gkc_dot_args a = {gkc_ref_mem(j->x, bytes), gkc_ref_mem(j->y, bytes)};
      rc = gkc_async_dot(ac, &a, on_done, s);
      break;
    }
    case K_AXPBY: {
      gkc_axpby_args a = {2.0f, -0.5f, gkc_ref_mem(j->x, bytes), gkc_ref_mem(j->y, bytes)};
      s->o = gkc_out_mem(s->out, bytes);
      rc = gkc_async_axpby(ac, &a, &s->o, on_done, s);
      break;
    }
    case K_SGEMM: {
      gkc_sgemm_args a = GKC_SGEMM_ARGS_INIT;
      a.m = a.n = a.k = j->dim;
      a.a = gkc_ref_mem(j->x, bytes), a.b = gkc_ref_mem(j->y, bytes);
      s->o = gkc_out_mem(s->out, bytes);
      rc = gkc_async_sgemm(ac, &a, &s->o, on_done, s);
      break;
    }
    default: {
      gkc_download_args a = {j->handle};
      s->o = gkc_out_mem(s->out, bytes);
      rc = gkc_async_download(ac, &a, &s->o, on_done, s);
    }
  }
  if (rc) TEST_FAIL("submit: %s: %s", gkc_errname(rc), gkc_async_errmsg(ac));
}

static void job_make(job *j, int kind, size_t n) {
  memset(j, 0, sizeof *j);
  j->kind = kind;
  if (kind == K_SGEMM) {
    j->dim = (int)n;
    n = n * n;
  }
  j->n = n;
  j->x = rand_vec(n), j->y = rand_vec(n);
  for (int k = 0; k < 2; k++) j->s[k].out = need(malloc(n * 4 + 4));
}

/* Both sides ran once, succeeded, and agree to the byte. */
static void job_check(const job *j) {
  for (int k = 0; k < 2; k++)
    if (j->s[k].calls != 1 || j->s[k].status != 0)
      TEST_FAIL("kind %d, %zu floats, %s side: %d callbacks, status %d", j->kind, j->n,
                k ? "arena" : "inline", j->s[k].calls, j->s[k].status);
  if (j->kind == K_REDUCE || j->kind == K_DOT) {
    if (memcmp(&j->s[0].value, &j->s[1].value, sizeof(double)) != 0)
      TEST_FAIL("kind %d, %zu floats: %.17g inline, %.17g through the arena", j->kind, j->n,
                j->s[0].value, j->s[1].value);
  } else if (memcmp(j->s[0].out, j->s[1].out, j->n * 4) != 0) {
    TEST_FAIL("kind %d, %zu floats: the arena's result differs from the inline one", j->kind, j->n);
  }
  if (j->kind == K_DOWNLOAD && memcmp(j->x, j->s[1].out, j->n * 4) != 0)
    TEST_FAIL("download of %zu floats: not what was uploaded", j->n);
}

static void job_free(job *j) {
  free(j->x), free(j->y), free(j->s[0].out), free(j->s[1].out);
}

/* --- the tests ---------------------------------------------------------------------------------- */

/* The first big call: inline, while the arena is set up behind it. */
static void test_setup(const fixture *f) {
  gkc_async *ac = ctx(f, THR, 0);
  size_t n = 65536;
  float *x = rand_vec(n);
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, n * 4), a.op = GKC_MAX;
  side s0 = {0}, s1 = {0};
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s0), 0);
  ASSERT_EQ(gkc_async_pending(ac), 1); /* the arena's status request is not the caller's */
  gkc_shm_info i = state(ac);
  ASSERT_EQ(i.on, 1);
  ASSERT_EQ(i.fallbacks, 1);
  ASSERT_EQ(i.staged, 0);
  drain(ac);
  ASSERT_EQ(s0.calls, 1);
  ASSERT_EQ(s0.status, 0);
  wait_ready(ac);
  ASSERT_EQ(gkc_async_pending(ac), 0);
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s1), 0);
  ASSERT_EQ(state(ac).staged, 1);
  drain(ac);
  ASSERT_EQ(s1.status, 0);
  ASSERT(s0.value == s1.value);
  /* Just under, at and over the threshold. */
  static const size_t sizes[] = {THR / 4 - 1, THR / 4, THR / 4 + 1};
  for (int k = 0; k < 3; k++) {
    uint64_t st = state(ac).staged;
    side s = {0};
    a.x = gkc_ref_mem(x, sizes[k] * 4);
    ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s), 0);
    drain(ac);
    ASSERT_EQ(s.status, 0);
    ASSERT_EQ(state(ac).staged - st, k > 0);
  }
  ASSERT_EQ(state(ac).fallbacks, 1);
  free(x);
  gkc_async_close(ac);
}

/* gkc_async_shm_reserve starts the set-up and returns; once the replies
 * are read the arena has its region, and the first big call uses it. */
static void test_reserve(const fixture *f) {
  gkc_async *ac = ctx(f, THR, 0);
  size_t bytes = (size_t)20 << 20;
  ASSERT_EQ(gkc_async_shm_reserve(ac, bytes), 0);
  ASSERT_EQ(gkc_async_pending(ac), 0); /* the library's own requests */
  wait_ready(ac);
  gkc_shm_info i = state(ac);
  ASSERT_EQ(i.regions, 1);
  ASSERT(i.arena_bytes >= bytes);
  size_t n = bytes / 4;
  float *x = rand_vec(n);
  double want = x[0];
  for (size_t k = 1; k < n; k++) want = x[k] > want ? x[k] : want;
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, bytes), a.op = GKC_MAX;
  side s = {0};
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s), 0);
  ASSERT_EQ(state(ac).staged, 1);
  drain(ac);
  ASSERT_EQ(s.status, 0);
  ASSERT(s.value == want);
  ASSERT_EQ(state(ac).fallbacks, 0);
  ASSERT_EQ(state(ac).regions, 1);
  free(x);
  gkc_async_close(ac);
}

static void on_upload(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  side *s = ud;
  s->calls++;
  s->status = res->status;
  s->value = res->id;
}

/* Hundreds in flight on one arena, twice (the second time it has grown). */
static void test_many(const fixture *f) {
  enum { N = 300 };
  gkc_async *ai = ctx(f, GKC_SHM_OFF, 0), *as = ctx(f, THR, 0);
  /* Set up first (a small region): then the arena is shared, and grown,
   * while the requests are in flight. */
  float w[THR / 4] = {0};
  gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
  r.x = gkc_ref_mem(w, sizeof w);
  side warm = {0};
  ASSERT_EQ(gkc_async_reduce(as, &r, on_done, &warm), 0);
  drain(as);
  wait_ready(as);
  static const size_t sizes[] = {500, THR / 4, 5000, 65536, 200000};
  static const int dims[] = {16, 40, 100};
  job *jobs = need(calloc(N, sizeof *jobs));
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      int kind = (int)(test_rand_u64(&rng) % K_COUNT);
      size_t n = kind == K_SGEMM ? (size_t)dims[test_rand_u64(&rng) % 3]
                                 : sizes[test_rand_u64(&rng) % 5];
      job_make(&jobs[i], kind, n);
      if (kind == K_DOWNLOAD) { /* x, resident and shared: both contexts download it */
        gkc_upload_args a = {gkc_ref_mem(jobs[i].x, n * 4), GKC_F32, 1};
        side up = {0};
        ASSERT_EQ(gkc_async_upload(ai, &a, on_upload, &up), 0);
        drain(ai);
        ASSERT_EQ(up.status, 0);
        jobs[i].handle = (uint32_t)up.value;
      }
    }
    for (int i = 0; i < N; i++) submit(ai, &jobs[i], 0), submit(as, &jobs[i], 1);
    ASSERT_EQ(gkc_async_pending(ai), N);
    ASSERT(gkc_async_pending(as) == N);
    drain(ai);
    drain(as);
    for (int i = 0; i < N; i++) job_check(&jobs[i]);
    gkc_shm_info st = state(as);
    fprintf(stderr, "  round %d: %llu arrays through the arena, %llu calls inline for want of"
            " room, %zu bytes in %d regions\n", round, (unsigned long long)st.staged,
            (unsigned long long)st.fallbacks, st.arena_bytes, st.regions);
    ASSERT(st.on);
    ASSERT(st.staged > 0);
    for (int i = 0; i < N; i++) {
      if (jobs[i].kind == K_DOWNLOAD) {
        gkc_release_args a = {jobs[i].handle, 0};
        side rel = {0};
        ASSERT_EQ(gkc_async_release(ai, &a, on_done, &rel), 0);
        drain(ai);
        ASSERT_EQ(rel.status, 0);
      }
      job_free(&jobs[i]);
    }
  }
  free(jobs);
  ASSERT_EQ(state(ai).staged, 0);
  gkc_async_close(ai);
  gkc_async_close(as);
}

/* 4 MiB of arena, 16 axpbys of 3 MiB each at once: one fits. */
static void test_full(const fixture *f) {
  enum { N = 16 };
  gkc_async *ai = ctx(f, GKC_SHM_OFF, 0), *as = ctx(f, THR, (size_t)4 << 20);
  side warm = {0};
  float w[THR / 4] = {0};
  gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
  r.x = gkc_ref_mem(w, sizeof w);
  ASSERT_EQ(gkc_async_reduce(as, &r, on_done, &warm), 0);
  drain(as);
  wait_ready(as);
  gkc_shm_info i = state(as);
  ASSERT_EQ(i.arena_bytes, (size_t)4 << 20);
  uint64_t st0 = i.staged, fb0 = i.fallbacks;
  job jobs[N];
  for (int k = 0; k < N; k++) job_make(&jobs[k], K_AXPBY, (size_t)1 << 18);
  for (int k = 0; k < N; k++) submit(ai, &jobs[k], 0), submit(as, &jobs[k], 1);
  i = state(as);
  ASSERT_EQ(i.staged - st0, 3);        /* the first: x, y and its result */
  ASSERT_EQ(i.fallbacks - fb0, N - 1); /* the rest: inline */
  ASSERT_EQ(i.regions, 1);             /* no room to grow within 4 MiB */
  drain(ai);
  drain(as);
  for (int k = 0; k < N; k++) job_check(&jobs[k]);
  /* Every slice is back: the next one goes through the arena again. */
  jobs[0].s[1].calls = 0;
  submit(as, &jobs[0], 1);
  ASSERT_EQ(state(as).staged - st0, 6);
  drain(as);
  ASSERT_EQ(jobs[0].s[1].status, 0);
  for (int k = 0; k < N; k++) job_free(&jobs[k]);
  gkc_async_close(ai);
  gkc_async_close(as);
}

static void on_region(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  gkc_region **slot = ud;
  if (res->status) TEST_FAIL("region: %s", res->errmsg);
  *slot = res->region;
}

/* The connection holds 64 regions: gkcd refuses the arena's; it says so
 * and everything goes inline. */
static void test_refused(const fixture *f) {
  gkc_async *ac = ctx(f, THR, 0);
  gkc_region *own[64] = {0};
  for (int k = 0; k < 64; k++) ASSERT_EQ(gkc_async_region_create(ac, 4096, on_region, &own[k]), 0);
  drain(ac);
  size_t n = 65536;
  float *x = rand_vec(n);
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, n * 4), a.op = GKC_MIN;
  side s[3] = {{0}};
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[0]), 0);
  drain(ac);
  for (int k = 0; k < 500 && gkc_async_shm_state(ac, NULL); k++) gkc_async_poll(ac, 10);
  gkc_shm_info i = state(ac);
  ASSERT_EQ(i.on, 0);
  ASSERT_CONTAINS(i.why, "gkcd refused shm_register");
  ASSERT_CONTAINS(i.why, "64 regions");
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[1]), 0);
  drain(ac);
  ASSERT_EQ(s[0].status, 0);
  ASSERT_EQ(s[1].status, 0);
  ASSERT(s[0].value == s[1].value);
  ASSERT_EQ(state(ac).staged, 0);
  free(x);
  gkc_async_close(ac); /* gkcd frees the regions with the connection */
  for (int k = 0; k < 64; k++) gkc_region_release(NULL, own[k]);
}

/* Closing with staged requests in flight, and with the arena's own. */
static void test_close(const fixture *f) {
  enum { N = 20 };
  gkc_async *ac = ctx(f, THR, 0);
  size_t n = 50000; /* 20 of them fit the first region, 4 MiB */
  float *x = rand_vec(n);
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, n * 4);
  side s[N + 1];
  memset(s, 0, sizeof s);
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[N]), 0); /* starts the set-up */
  gkc_async_close(ac);                                    /* with it in flight */
  ASSERT_EQ(s[N].calls, 1);
  ASSERT_EQ(s[N].status, GKC_ECANCELLED);
  ac = ctx(f, THR, 0);
  memset(s, 0, sizeof s);
  ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[N]), 0);
  drain(ac);
  wait_ready(ac);
  for (int k = 0; k < N; k++) ASSERT_EQ(gkc_async_reduce(ac, &a, on_done, &s[k]), 0);
  ASSERT_EQ(state(ac).staged, N);
  gkc_async_close(ac);
  for (int k = 0; k < N; k++) {
    ASSERT_EQ(s[k].calls, 1);
    ASSERT_EQ(s[k].status, GKC_ECANCELLED);
  }
  free(x);
}

int main(void) {
  rng = test_seed();
  unsetenv("GKC_NO_SHM");
  unsetenv("GKC_SHM_THRESHOLD");
  unsetenv("GKC_SHM_MAX_BYTES");
  fixture f;
  fixture_start(&f, NULL, NULL);
  test_setup(&f);
  test_reserve(&f);
  test_many(&f);
  test_full(&f);
  test_refused(&f);
  test_close(&f);
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
  printf("e2e_shm_async: all passed\n");
  return 0;
}
