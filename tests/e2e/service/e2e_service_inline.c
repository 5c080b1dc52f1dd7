/* e2e_service_inline.c: big arrays sent inline (no shared memory) against
 * real gkcd processes, and the pool that recycles their buffers
 * (daemon/bufpool.h, issue #25):
 *
 *  1. one connection: big reduce, axpby, upload and download inline, one
 *     after another at changing sizes, each result byte for byte what the
 *     same call gives through the shared-memory arena;
 *  2. four connections at once, interleaved, the same comparison;
 *  3. the books: the pool's bytes in status (memory.pool) beside work stay
 *     under --memory-budget at every sample, budget_used is 0 after every
 *     reply, and an idle gkcd gives the pool back;
 *  4. a small budget: big requests from three connections all succeed (the
 *     pool never makes work wait), used + pool never over the limit;
 *  5. clients that die in the middle of a big frame: their input is given
 *     back, and the next big request is served;
 *  6. big results received straight into the caller's memory (libgkc,
 *     gkc_wire.c): several in flight on one async connection, replies back
 *     to back, each in its own buffer, and one too big for its buffer
 *     refused as before.
 *
 * Checks do not stop the test; the exit status is 0 only when all passed.
 * No check reads a time.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "probe.h"
#include "rawrpc.h"
#include "svcutil.h"
#include "test.h"

#define MiB ((size_t)1 << 20)

/* Checks from the client threads and the sampling main thread at once:
 * the counters CHECK keeps are shared. */
static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
#define TCHECK(...)                      \
  do {                                   \
    pthread_mutex_lock(&g_check_mu);     \
    CHECK(__VA_ARGS__);                  \
    pthread_mutex_unlock(&g_check_mu);   \
  } while (0)

static gkc_conn *open_conn(const fixture *f, int arena) {
  gkc_conn *c = NULL;
  if (gkc_connect(&c, f->sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  gkc_set_shm(c, arena ? 1 : GKC_SHM_OFF, 0); /* arena: every array through it */
  return c;
}

static float *ramp(size_t n, uint64_t seed) {
  float *v = malloc(n * 4);
  if (!v) TEST_FAIL("out of memory");
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&s);
  return v;
}

/* The same calls inline (ci) and through the arena (cs) on n floats; the
 * number of calls that agreed. */
static int same_both_ways(gkc_conn *ci, gkc_conn *cs, size_t n, uint64_t seed, const char *who) {
  int agreed = 0;
  float *x = ramp(n, seed), *y = ramp(n, seed + 1);
  float *oi = calloc(n, 4), *os = calloc(n, 4);
  if (!oi || !os) TEST_FAIL("out of memory");
  for (int op = GKC_SUM; op <= GKC_MAX; op++) {
    double vi = NAN, vs = NAN;
    int ri = gkc_reduce(ci, x, n, (gkc_reduce_op)op, &vi, NULL, NULL);
    int rs = gkc_reduce(cs, x, n, (gkc_reduce_op)op, &vs, NULL, NULL);
    TCHECK(ri == 0 && rs == 0 && vi == vs, "%s: reduce %d of %zu floats: inline %d %.9g (%s), arena %d %.9g",
          who, op, n, ri, vi, ri ? gkc_errmsg(ci) : "", rs, vs);
    agreed += ri == 0 && rs == 0 && vi == vs;
  }
  gkc_out out_i = gkc_out_mem(oi, n * 4), out_s = gkc_out_mem(os, n * 4);
  int ri = gkc_axpby(ci, 2.0f, gkc_ref_mem(x, n * 4), -1.0f, gkc_ref_mem(y, n * 4), &out_i, NULL);
  int rs = gkc_axpby(cs, 2.0f, gkc_ref_mem(x, n * 4), -1.0f, gkc_ref_mem(y, n * 4), &out_s, NULL);
  int eq = ri == 0 && rs == 0 && memcmp(oi, os, n * 4) == 0;
  TCHECK(eq, "%s: axpby of %zu floats: inline %d (%s), arena %d, bytes %s", who, n, ri,
        ri ? gkc_errmsg(ci) : "", rs, ri == 0 && rs == 0 ? "differ" : "-");
  agreed += eq;
  /* Upload inline, download inline and through the arena. */
  uint32_t h = 0;
  ri = gkc_upload(ci, gkc_ref_mem(y, n * 4), GKC_F32, 0, &h);
  TCHECK(ri == 0, "%s: upload of %zu floats inline: %s", who, n, gkc_errmsg(ci));
  if (ri == 0) {
    memset(oi, 0, n * 4);
    ri = gkc_download(ci, h, oi, n * 4);
    eq = ri == 0 && memcmp(oi, y, n * 4) == 0;
    TCHECK(eq, "%s: download of %zu floats inline: %d %s", who, n, ri, ri ? gkc_errmsg(ci) : "bytes differ");
    agreed += eq;
    gkc_release(ci, h);
  }
  free(x), free(y), free(oi), free(os);
  return agreed;
}

/* ------------------------------------------------------------------------ */
/* 1, 3. one connection, then the books                                      */

static void check_books(rr_conn *rc, const char *when) {
  double limit = status_on(rc, "memory.limit"), used = status_on(rc, "memory.used"),
         pool = status_on(rc, "memory.pool");
  TCHECK(!isnan(pool) && used + pool <= limit, "%s: used %g + pool %g over the limit %g", when, used, pool, limit);
}

static void test_sequence(void) {
  fixture f;
  const char *const args[] = {"--memory-budget", "1G", NULL};
  fixture_start(&f, args, NULL);
  gkc_conn *ci = open_conn(&f, 0), *cs = open_conn(&f, 1);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "one connection, changing sizes";
  /* Sizes up and down, repeated: the pool's fit, miss and reuse. */
  const size_t sizes[] = {MiB / 4 + 1, 3 * MiB / 4, 2 * MiB + 3, 5 * MiB, 5 * MiB, 3 * MiB, 12 * MiB,
                          12 * MiB, 5 * MiB, MiB / 4 + 1};
  int agreed = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    agreed += same_both_ways(ci, cs, sizes[i], 1000 + i, "sequence");
    check_books(&rc, "sequence");
  }
  CHECK(agreed == 5 * (int)(sizeof sizes / sizeof sizes[0]), "%d calls agreed", agreed);

  rr_ctx = "the books after the replies";
  CHECK(status_on(&rc, "budget_used") == 0, "budget_used = %g after every reply", status_on(&rc, "budget_used"));
  CHECK(status_on(&rc, "memory.input") == 0, "memory.input = %g", status_on(&rc, "memory.input"));
  double pool = status_on(&rc, "memory.pool");
  CHECK(pool >= 12 * MiB, "memory.pool = %g: the big buffers were not kept", pool);
  /* Idle: the pool is given back (BUFPOOL_IDLE_MS, then a sweep). */
  for (int i = 0; i < 200 && (pool = status_on(&rc, "memory.pool")) > 0; i++) rr_sleep_ms(100);
  CHECK(pool == 0, "memory.pool = %g after 20 s idle", pool);
  /* And reuse after that still agrees. */
  agreed = same_both_ways(ci, cs, 6 * MiB, 77, "after the trim");
  CHECK(agreed == 5, "%d calls agreed after the trim", agreed);
  rr_close(&rc);
  gkc_close(ci);
  gkc_close(cs);
  STOP_DAEMON(&f);
}

/* An input buffer grows by doubling (within twice what the peer sent), but
 * never past its frame and a read chunk once the frame's length is known:
 * a 16 MiB frame doubled to 32 MiB left a buffer the pool could not give
 * the next 16 MiB frame (more than a quarter too big), so each such
 * request faulted in fresh memory again. */
static void test_frame_sized(void) {
  fixture f;
  const char *const args[] = {"--memory-budget", "1G", NULL};
  fixture_start(&f, args, NULL);
  gkc_conn *ci = open_conn(&f, 0);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "an input buffer the size of its frame";
  const size_t n = 4 * MiB; /* floats: 16 MiB of them */
  float *x = ramp(n, 4242);
  double want = 0;
  for (size_t i = 0; i < n; i++) want += x[i];
  for (int k = 0; k < 3; k++) {
    double v = NAN;
    int r = gkc_reduce(ci, x, n, GKC_SUM, &v, NULL, NULL);
    CHECK(r == 0 && fabs(v - want) <= 1e-9 * (double)n, "reduce %d: %d %.17g, want %.17g (%s)", k, r, v, want,
          r ? gkc_errmsg(ci) : "");
  }
  /* The frame: the array's 16 MiB and a header of a few dozen bytes; one
   * read chunk (64 KiB) past it at most. */
  double peak = status_on(&rc, "memory.input_peak");
  CHECK(peak >= (double)(n * 4) && peak <= (double)(n * 4) + 64 * 1024 + 256,
        "memory.input_peak = %.0f for 16 MiB frames (doubled past the frame: 32 MiB)", peak);
  free(x);
  rr_close(&rc);
  gkc_close(ci);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 2, 4. several connections at once                                         */

typedef struct {
  const fixture *f;
  int id, rounds;
  int agreed;
} client_arg;

static void *client_main(void *vp) {
  client_arg *a = vp;
  gkc_conn *ci = open_conn(a->f, 0), *cs = open_conn(a->f, 1);
  for (int r = 0; r < a->rounds; r++) {
    size_t n = (size_t)(1 + (a->id + r) % 4) * (3 * MiB / 4) + (size_t)a->id; /* 3..12 MiB, mixed */
    a->agreed += same_both_ways(ci, cs, n, (uint64_t)(a->id * 100 + r), "interleaved");
  }
  gkc_close(ci);
  gkc_close(cs);
  return NULL;
}

/* Runs nclient clients of rounds rounds while sampling the books. */
static void run_clients(const fixture *f, int nclient, int rounds) {
  client_arg a[8];
  pthread_t th[8];
  for (int i = 0; i < nclient; i++) {
    a[i] = (client_arg){f, i, rounds, 0};
    pthread_create(&th[i], NULL, client_main, &a[i]);
  }
  rr_conn rc;
  rr_open(&rc, f);
  for (int i = 0; i < 20; i++) {
    check_books(&rc, rr_ctx);
    rr_sleep_ms(50);
  }
  for (int i = 0; i < nclient; i++) {
    pthread_join(th[i], NULL);
    TCHECK(a[i].agreed == 5 * rounds, "client %d: %d of %d calls agreed", i, a[i].agreed, 5 * rounds);
  }
  check_books(&rc, "afterwards");
  TCHECK(status_on(&rc, "budget_used") == 0, "budget_used = %g after every reply", status_on(&rc, "budget_used"));
  rr_close(&rc);
}

static void test_interleaved(void) {
  fixture f;
  const char *const args[] = {"--memory-budget", "1G", NULL};
  fixture_start(&f, args, NULL);
  rr_ctx = "four connections, interleaved";
  run_clients(&f, 4, 4);
  STOP_DAEMON(&f);
}

static void test_small_budget(void) {
  fixture f;
  /* Three clients' 12 MiB requests and results do not all fit at once:
   * requests wait for memory, never for the pool.  --queue-wait 0: they
   * wait as long as it takes. */
  const char *const args[] = {"--memory-budget", "48M", "--queue-wait", "0", NULL};
  fixture_start(&f, args, NULL);
  rr_ctx = "a small budget";
  run_clients(&f, 3, 3);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 5. clients that die mid-frame                                             */

static void test_dies_mid_frame(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  rr_conn rc;
  rr_open(&rc, &f);
  rr_ctx = "clients that die mid-frame";
  size_t n = 16 * MiB / 4;
  float *x = ramp(n, 5);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 1, "reduce", ARGS(AB("x", x, n * 4), AS("op", "sum")));
  /* Pool a buffer of this size first, so that the dying clients take it. */
  gkc_conn *ci = open_conn(&f, 0);
  double v = 0;
  CHECK(gkc_reduce(ci, x, n, GKC_SUM, &v, NULL, NULL) == 0, "reduce: %s", gkc_errmsg(ci));
  for (int k = 0; k < 3; k++) {
    rr_conn d;
    rr_open(&d, &f);
    size_t part = fr.sb.size / (size_t)(2 + k); /* a half, a third, a quarter */
    CHECK(rr_send_some(d.fd, fr.sb.data, part) == 0, "sending part of a frame");
    rr_sleep_ms(100);
    if (k == 2) shutdown(d.fd, SHUT_WR); /* the last one says so; the others just vanish */
    rr_close(&d);
  }
  double input = NAN;
  for (int i = 0; i < 100 && (input = status_on(&rc, "memory.input")) != 0; i++) rr_sleep_ms(50);
  CHECK(input == 0, "memory.input = %g after the clients went", input);
  check_books(&rc, "after the clients went");
  double v2 = 1;
  CHECK(gkc_reduce(ci, x, n, GKC_SUM, &v2, NULL, NULL) == 0 && v2 == v, "reduce after: %s, %g vs %g",
        gkc_errmsg(ci), v2, v);
  CHECK(status_on(&rc, "budget_used") == 0, "budget_used = %g", status_on(&rc, "budget_used"));
  gkc_close(ci);
  rr_frame_free(&fr);
  free(x);
  rr_close(&rc);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 6. results straight into the caller's memory, pipelined                   */

typedef struct {
  int done, status;
  uint32_t id;
  char msg[200];
} async_slot;

static void on_reply(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  async_slot *s = ud;
  s->done = 1;
  s->status = res->status;
  s->id = res->id;
  snprintf(s->msg, sizeof s->msg, "%s", res->errmsg);
}

static void test_direct_pipelined(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  rr_ctx = "big results pipelined into their buffers";
  enum { NH = 3, NREQ = 7 };
  const size_t n[NH] = {MiB / 4, 3 * MiB / 2 + 1, 5 * MiB / 2}; /* 1, 6, 10 MiB of floats */
  float *x[NH];
  uint32_t h[NH];
  gkc_conn *c = open_conn(&f, 0);
  for (int i = 0; i < NH; i++) {
    x[i] = ramp(n[i], 300 + (uint64_t)i);
    CHECK(gkc_upload(c, gkc_ref_mem(x[i], n[i] * 4), GKC_F32, 0, &h[i]) == 0, "upload: %s", gkc_errmsg(c));
  }
  /* The async context's own copies, uploaded through it. */
  gkc_async *ac = NULL;
  CHECK(gkc_async_connect(&ac, f.sock) == 0, "async connect");
  if (!ac) TEST_FAIL("no async context");
  gkc_async_set_shm(ac, GKC_SHM_OFF, 0);
  uint32_t ah[NH];
  for (int i = 0; i < NH; i++) {
    async_slot s = {0};
    gkc_upload_args ua = {gkc_ref_mem(x[i], n[i] * 4), GKC_F32, 0};
    CHECK(gkc_async_upload(ac, &ua, on_reply, &s) == 0, "async upload: %s", gkc_async_errmsg(ac));
    while (!s.done && gkc_async_poll(ac, 10000) >= 0) {
    }
    CHECK(s.status == 0, "async upload: %s", s.msg);
    ah[i] = s.id;
  }
  /* NREQ downloads in flight at once, the last into a buffer one float short. */
  float *out[NREQ];
  gkc_out outs[NREQ];
  async_slot slots[NREQ];
  memset(slots, 0, sizeof slots);
  for (int r = 0; r < NREQ; r++) {
    int i = r % NH;
    size_t bytes = n[i] * 4 - (r == NREQ - 1 ? 4 : 0);
    out[r] = malloc(bytes);
    if (!out[r]) TEST_FAIL("out of memory");
    memset(out[r], 0xff, bytes);
    outs[r] = gkc_out_mem(out[r], bytes);
    gkc_download_args da = {ah[i]};
    CHECK(gkc_async_download(ac, &da, &outs[r], on_reply, &slots[r]) == 0, "async download: %s",
          gkc_async_errmsg(ac));
  }
  for (int tries = 0; tries < 1000; tries++) {
    int left = 0;
    for (int r = 0; r < NREQ; r++) left += !slots[r].done;
    if (!left || gkc_async_poll(ac, 100) < 0) break;
  }
  for (int r = 0; r < NREQ; r++) {
    int i = r % NH;
    if (r == NREQ - 1) {
      CHECK(slots[r].done && slots[r].status == GKC_EINVALID_ARGUMENT && strstr(slots[r].msg, "holds"),
            "download into a buffer too small: %d %s", slots[r].status, slots[r].msg);
    } else {
      CHECK(slots[r].done && slots[r].status == 0 && memcmp(out[r], x[i], n[i] * 4) == 0,
            "download %d of %zu bytes: %d %s", r, n[i] * 4, slots[r].status,
            slots[r].status ? slots[r].msg : "bytes differ");
    }
    free(out[r]);
  }
  /* And the connection goes on. */
  async_slot s = {0};
  float *one = malloc(n[1] * 4);
  gkc_out o = gkc_out_mem(one, n[1] * 4);
  gkc_download_args da = {ah[1]};
  CHECK(gkc_async_download(ac, &da, &o, on_reply, &s) == 0, "async download");
  while (!s.done && gkc_async_poll(ac, 10000) >= 0) {
  }
  CHECK(s.status == 0 && memcmp(one, x[1], n[1] * 4) == 0, "download after: %d %s", s.status, s.msg);
  free(one);
  gkc_async_close(ac);
  for (int i = 0; i < NH; i++) {
    gkc_release(c, h[i]);
    free(x[i]);
  }
  gkc_close(c);
  STOP_DAEMON(&f);
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_sequence());
  SECTION(test_frame_sized());
  SECTION(test_interleaved());
  SECTION(test_small_budget());
  SECTION(test_dies_mid_frame());
  SECTION(test_direct_pipelined());
  return svc_finish("e2e_service_inline", t0);
}
