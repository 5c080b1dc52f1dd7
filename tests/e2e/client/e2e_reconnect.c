/* e2e_reconnect.c: libgkc across gkcd restarts on the same socket (issue 30).
 *
 *  1. blocking: a loop of reduce calls while another thread kills gkcd
 *     (SIGKILL) and starts a new one: the loop goes on after at most one
 *     reported error (GKC_EIO, naming the request lost in flight), and
 *     every result is right;
 *  2. blocking, in flight (fault injection builds: a reduce held in gkcd):
 *     the lost request fails once and is not sent again; with
 *     GKC_RECONNECT_IDEMPOTENT it is sent again and succeeds;
 *  3. blocking: handles, a matrix and a region made before the restart are
 *     refused with GKC_ESTALE_HANDLE naming the object and both instances,
 *     and nothing reaches the new gkcd (its `served` does not move);
 *     reconnecting off: the call after the restart fails as it always did;
 *  4. async: the same loop on a context (every pending callback exactly
 *     once), and its stale handle refused at the call;
 *  5. async, in flight (fault injection builds: reduces held in a gkcd of
 *     one worker, an upload queued behind them): with
 *     GKC_RECONNECT_IDEMPOTENT the reduces by value are sent again on the
 *     new connection, in their order, each callback once with its own
 *     right sum; a reduce naming a handle of the dead gkcd ends with
 *     GKC_ESTALE_HANDLE; the upload ends with GKC_EIO saying it was not
 *     sent again.  Without the opt-in the reduce ends like the upload;
 *     with no gkcd to come back, the held reduce ends saying it could not
 *     be sent again; a callback of the lost upload that sends a request
 *     connects again, the held reduce going first; driven by the libuv
 *     adapter, which follows the new descriptor.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "gkc_uv.h"
#include "test.h"

static char sock[300];
static char dir[256];
static const char *args[] = {"--socket", sock, "--threads", "1", NULL};

static void start(fixture *f, const char *const *env) { fixture_start(f, args, env); }

static uint64_t served(gkc_conn *c) {
  char *json = NULL;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  const char *p = strstr(json, "\"served\":");
  ASSERT(p);
  uint64_t v = strtoull(p + 9, NULL, 10);
  free(json);
  return v;
}

/* --- 1. a loop, and a restart under it ----------------------------------------------- */

typedef struct {
  fixture *f;
  int delay_ms;
  volatile int done; /* set by the test once it stopped the new gkcd */
  volatile int restarted;
} killer;

/* The fixture asks for SIGKILL when the thread that started gkcd ends
 * (PR_SET_PDEATHSIG): this thread stays until the test is done with the
 * gkcd it started. */
static void *kill_and_restart(void *arg) {
  killer *k = arg;
  usleep((useconds_t)k->delay_ms * 1000);
  fixture_stop(k->f, SIGKILL);
  start(k->f, NULL);
  k->restarted = 1;
  while (!k->done) usleep(10000);
  return NULL;
}

static void finish(killer *k, pthread_t t) {
  while (!k->restarted) usleep(10000);
  fixture_stop(k->f, SIGTERM);
  k->done = 1;
  pthread_join(t, NULL);
}

/* n floats 1..n (their sum is exact in float64). */
static float *ramp(int n) {
  float *x = malloc((size_t)n * 4);
  for (int i = 0; i < n; i++) x[i] = (float)(i + 1);
  return x;
}

static void test_loop_blocking(void) {
  fixture f;
  start(&f, NULL);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_set_reconnect(c, 20, 50, 0), 0);
  enum { N = 4096 };
  float *x = ramp(N);
  killer k = {&f, 150, 0, 0};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, kill_and_restart, &k), 0);
  int errors = 0, ok = 0;
  int t0 = 0;
  for (int i = 0; i < 100000 && (gkc_reconnects(c) == 0 || ok < 50 + t0); i++) {
    double s;
    int rc = gkc_reduce(c, x, N, GKC_SUM, &s, NULL, NULL);
    if (rc) {
      errors++;
      if (rc != GKC_EIO) fprintf(stderr, "  unexpected: %s\n", gkc_errmsg(c));
      ASSERT_EQ(rc, GKC_EIO);
      ASSERT_CONTAINS(gkc_errmsg(c), "not sent again");
      continue;
    }
    ASSERT_EQ(s, (double)N * (N + 1) / 2);
    ok++;
    if (gkc_reconnects(c) && !t0) t0 = ok;
  }
  fprintf(stderr, "  blocking loop: %d right, %d error(s), %u reconnect(s)\n", ok, errors,
          gkc_reconnects(c));
  ASSERT_EQ(gkc_reconnects(c), 1);
  ASSERT(errors <= 1);
  free(x);
  gkc_close(c);
  finish(&k, t);
}

/* --- 2. a request in flight when gkcd dies ------------------------------------------- */

static void test_in_flight(int idempotent) {
  fixture f;
  const char *env[] = {"GKCD_FAULT=reduce:delay=3000", NULL};
  start(&f, env);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_set_reconnect(c, 40, 50, idempotent ? GKC_RECONNECT_IDEMPOTENT : 0), 0);
  float *x = ramp(16);
  killer k = {&f, 300, 0, 0}; /* while the reduce is held in gkcd */
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, kill_and_restart, &k), 0);
  double s = 0;
  int rc = gkc_reduce(c, x, 16, GKC_SUM, &s, NULL, NULL);
  if (idempotent) {
    /* Sent again to the new gkcd (no delay fault there): answered. */
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(s, 136.0);
  } else {
    ASSERT_EQ(rc, GKC_EIO);
    ASSERT_CONTAINS(gkc_errmsg(c), "reduce was in flight");
    ASSERT_CONTAINS(gkc_errmsg(c), "not sent again");
    ASSERT_EQ(gkc_reduce(c, x, 16, GKC_SUM, &s, NULL, NULL), 0); /* the next call reconnects */
    ASSERT_EQ(s, 136.0);
  }
  ASSERT_EQ(gkc_reconnects(c), 1);
  free(x);
  gkc_close(c);
  finish(&k, t);
}

/* --- 3. stale handles ---------------------------------------------------------------- */

static void test_stale_blocking(void) {
  fixture f;
  start(&f, NULL);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  float *x = ramp(64);
  uint32_t h, hs, m;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, 256), GKC_F32, 0, &h), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, 256), GKC_F32, 1, &hs), 0);
  int32_t rp[] = {0, 1, 2};
  int32_t ci[] = {0, 1};
  float v[] = {2, 3};
  gkc_csr A = {2, 2, 2, rp, ci, v};
  ASSERT_EQ(gkc_csr_upload(c, &A, 0, &m, NULL), 0);
  gkc_region *reg;
  ASSERT_EQ(gkc_region_create(c, 4096, &reg), 0);
  char old[17], now[17];
  gkc_instance(c, old, NULL);
  ASSERT_EQ(strlen(old), 16);

  fixture_stop(&f, SIGKILL);
  start(&f, NULL);
  gkc_ping_info pi;
  ASSERT_EQ(gkc_ping(c, &pi), 0); /* stateless: reconnects on its own */
  ASSERT_EQ(gkc_reconnects(c), 1);
  gkc_instance(c, now, NULL);
  ASSERT(strcmp(old, now) != 0);
  uint64_t before = served(c);

  double s;
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(h, 256), GKC_SUM, &s, NULL, NULL, NULL),
            GKC_ESTALE_HANDLE);
  char want[64];
  snprintf(want, sizeof want, "array handle %u is stale", h);
  ASSERT_CONTAINS(gkc_errmsg(c), want);
  ASSERT_CONTAINS(gkc_errmsg(c), old);
  ASSERT_CONTAINS(gkc_errmsg(c), now);
  ASSERT_STR_EQ(gkc_errname(GKC_ESTALE_HANDLE), "stale_handle");
  /* Shared, but this gkcd did not restore it (no fd store): stale too. */
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(hs, 256), GKC_SUM, &s, NULL, NULL, NULL),
            GKC_ESTALE_HANDLE);
  snprintf(want, sizeof want, "shared array handle %u is stale", hs);
  ASSERT_CONTAINS(gkc_errmsg(c), want);
  /* A matrix in spmv, a region as an argument. */
  float y[2];
  gkc_spmv_args sa = GKC_SPMV_ARGS_INIT;
  sa.use_matrix = 1, sa.matrix = m;
  sa.x = gkc_ref_mem(x, 8);
  gkc_out out = gkc_out_mem(y, 8);
  ASSERT_EQ(gkc_spmv_ref(c, &sa, &out, NULL), GKC_ESTALE_HANDLE);
  snprintf(want, sizeof want, "matrix %u is stale", m);
  ASSERT_CONTAINS(gkc_errmsg(c), want);
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_region(reg, 0, 256), GKC_SUM, &s, NULL, NULL, NULL),
            GKC_ESTALE_HANDLE);
  ASSERT_CONTAINS(gkc_errmsg(c), "region");
  /* Nothing of those reached the new gkcd. */
  ASSERT_EQ(served(c), before);
  /* New objects work, and an old number given to a new object is its own. */
  uint32_t h2;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, 256), GKC_F32, 0, &h2), 0);
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(h2, 256), GKC_SUM, &s, NULL, NULL, NULL), 0);
  ASSERT_EQ(s, 64.0 * 65 / 2);
  ASSERT_EQ(gkc_release(c, h), GKC_ESTALE_HANDLE);
  gkc_region_release(c, reg);
  free(x);
  gkc_close(c);

  /* Reconnecting off: the call after a restart fails, as before. */
  ASSERT_EQ(gkc_connect(&c, sock), 0);
  ASSERT_EQ(gkc_set_reconnect(c, 0, 0, 0), 0);
  ASSERT_EQ(gkc_ping(c, &pi), 0);
  fixture_stop(&f, SIGKILL);
  start(&f, NULL);
  int rc = gkc_ping(c, &pi);
  ASSERT(rc == GKC_EIO);
  ASSERT_EQ(gkc_reconnects(c), 0);
  gkc_close(c);
  fixture_stop(&f, SIGTERM);
}

/* --- 4. async -------------------------------------------------------------------------- */

typedef struct {
  int calls, status;
  double value;
  uint32_t id;
} slot;

static void on_done(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  slot *s = ud;
  s->calls++;
  s->status = res->status;
  s->value = res->value;
  s->id = res->id;
}

static void test_async(void) {
  fixture f;
  start(&f, NULL);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 40, 50, 0), 0);
  enum { N = 1024, WINDOW = 8, ROUNDS = 200000 };
  float *x = ramp(N);
  slot w[WINDOW];
  killer k = {&f, 100, 0, 0};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, kill_and_restart, &k), 0);
  int failed = 0, ok = 0, refused = 0;
  int after = 0;
  for (int round = 0; round < ROUNDS && after < 50; round++) {
    memset(w, 0, sizeof w);
    int sent = 0;
    for (int i = 0; i < WINDOW; i++) {
      gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
      r.x = gkc_ref_mem(x, N * 4);
      int rc = gkc_async_reduce(ac, &r, on_done, &w[i]);
      if (rc) {
        refused++; /* could not connect yet: refused at the call, no callback */
        w[i].calls = 1, w[i].status = rc;
        continue;
      }
      sent++;
    }
    while (gkc_async_pending(ac) > 0) {
      int rc = gkc_async_poll(ac, 10000);
      if (rc < 0) break; /* the connection broke: every callback has run */
    }
    for (int i = 0; i < WINDOW; i++) {
      ASSERT_EQ(w[i].calls, 1);
      if (w[i].status == 0) {
        ASSERT_EQ(w[i].value, (double)N * (N + 1) / 2);
        ok++;
      } else if (w[i].status == GKC_EIO) {
        failed++;
      }
    }
    if (gkc_async_reconnects(ac)) after++;
  }
  fprintf(stderr, "  async loop: %d right, %d lost in flight, %d refused, %u reconnect(s)\n", ok,
          failed, refused, gkc_async_reconnects(ac));
  ASSERT_EQ(gkc_async_reconnects(ac), 1);
  /* One window at most was in flight when gkcd died. */
  ASSERT(failed <= WINDOW);
  ASSERT_EQ(refused, 0);
  free(x);
  gkc_async_close(ac);
  finish(&k, t);
}

static void test_async_stale(void) {
  fixture f;
  start(&f, NULL);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  float *x = ramp(32);
  slot u = {0};
  gkc_upload_args ua = {gkc_ref_mem(x, 128), GKC_F32, 0};
  ASSERT_EQ(gkc_async_upload(ac, &ua, on_done, &u), 0);
  while (u.calls == 0) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(u.status, 0);
  /* Requests in flight when gkcd dies: each callback once, with GKC_EIO. */
  slot held[4] = {{0}};
  for (int i = 0; i < 4; i++) {
    gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
    r.x = gkc_ref_handle(u.id, 128);
    ASSERT_EQ(gkc_async_reduce(ac, &r, on_done, &held[i]), 0);
  }
  fixture_stop(&f, SIGKILL);
  while (gkc_async_fd(ac) >= 0) gkc_async_poll(ac, 1000);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(held[i].calls, 1);
    ASSERT(held[i].status == 0 || held[i].status == GKC_EIO);
  }
  start(&f, NULL);
  /* The call connects again, then refuses the old handle before sending. */
  slot late = {0};
  gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
  r.x = gkc_ref_handle(u.id, 128);
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_done, &late), GKC_ESTALE_HANDLE);
  char want[64];
  snprintf(want, sizeof want, "array handle %u is stale", u.id);
  ASSERT_CONTAINS(gkc_async_errmsg(ac), want);
  ASSERT_EQ(late.calls, 0);
  ASSERT_EQ(gkc_async_reconnects(ac), 1);
  /* By value it runs. */
  r.x = gkc_ref_mem(x, 128);
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_done, &late), 0);
  while (late.calls == 0) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(late.status, 0);
  ASSERT_EQ(late.value, 32.0 * 33 / 2);
  for (int i = 0; i < 4; i++) ASSERT_EQ(held[i].calls, 1); /* none called twice */
  free(x);
  gkc_async_close(ac);
  fixture_stop(&f, SIGTERM);
}

/* --- 5. async: requests in flight when gkcd dies --------------------------------------- */

/* One worker and one lane: a reduce held by the fault (60 s, far past the
 * test) keeps everything queued after it unanswered until gkcd is killed. */
static const char *one_worker[] = {"--socket", sock, "--threads", "1", "--latency-sms", "0", NULL};
static const char *hold_reduce[] = {"GKCD_FAULT=reduce:delay=60000", NULL};

typedef struct {
  int calls, status;
  double value;
  uint32_t msgid, id;
  char msg[512];
} seen;

static void on_seen(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  seen *s = ud;
  s->calls++;
  s->status = res->status;
  s->value = res->value;
  s->msgid = res->msgid;
  s->id = res->id;
  snprintf(s->msg, sizeof s->msg, "%s", res->errmsg);
}

static unsigned rng_state;
/* n small random integers as floats: their sum is exact, and differs
 * between arrays, so a reply handed to the wrong request shows. */
static float *fresh(int n, double *sum) {
  float *x = malloc((size_t)n * 4);
  ASSERT(x);
  *sum = 0;
  for (int i = 0; i < n; i++) {
    rng_state = rng_state * 1103515245u + 12345u;
    x[i] = (float)((rng_state >> 16) % 1000);
    *sum += x[i];
  }
  return x;
}

static void reduce_of(gkc_async *ac, gkc_ref x, seen *s) {
  gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
  r.x = x;
  ASSERT_EQ(gkc_async_reduce(ac, &r, on_seen, s), 0);
}

/* Polls until every one of n has had its callback; each poll's result must
 * be >= 0 unless broken_ok (the connection broke and nothing was held). */
static void wait_all(gkc_async *ac, seen *const *w, int n, int broken_ok) {
  for (int rounds = 0;; rounds++) {
    int left = 0;
    for (int i = 0; i < n; i++) left += w[i]->calls == 0;
    if (!left) return;
    ASSERT(rounds < 1000);
    int rc = gkc_async_poll(ac, 10000);
    if (rc < 0 && !broken_ok) fprintf(stderr, "  poll: %s\n", gkc_errname(rc));
    ASSERT(rc >= 0 || broken_ok);
  }
}

/* A ping answered: gkcd has read everything sent before it (it reads a
 * connection's requests in order and answers ping on its loop). */
static void ping_through(gkc_async *ac) {
  seen p = {0};
  ASSERT_EQ(gkc_async_ping(ac, on_seen, &p), 0);
  seen *w[] = {&p};
  wait_all(ac, w, 1, 0);
  ASSERT_EQ(p.status, 0);
}

static void test_async_in_flight_resent(void) {
  fixture f;
  start(&f, NULL);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 40, 50, GKC_RECONNECT_IDEMPOTENT), 0);
  double sa, sb, sh, su;
  float *xa = fresh(16, &sa), *xb = fresh(24, &sb), *xh = fresh(32, &sh), *xu = fresh(8, &su);
  ASSERT(sa != sb);
  /* A handle on the first gkcd, then that gkcd swapped for one that holds reduces. */
  seen up0 = {0};
  gkc_upload_args ua = {gkc_ref_mem(xh, 32 * 4), GKC_F32, 0};
  ASSERT_EQ(gkc_async_upload(ac, &ua, on_seen, &up0), 0);
  seen *w0[] = {&up0};
  wait_all(ac, w0, 1, 0);
  ASSERT_EQ(up0.status, 0);
  fixture_stop(&f, SIGKILL);
  fixture_start(&f, one_worker, hold_reduce);
  /* The next call connects again (nothing was in flight): the handle is
   * stale from now on, so the reduce naming it is refused at the call. */
  ping_through(ac);
  ASSERT_EQ(gkc_async_reconnects(ac), 1);
  gkc_reduce_args stale = GKC_REDUCE_ARGS_INIT;
  stale.x = gkc_ref_handle(up0.id, 32 * 4);
  seen never = {0};
  ASSERT_EQ(gkc_async_reduce(ac, &stale, on_seen, &never), GKC_ESTALE_HANDLE);
  /* A fresh handle on this gkcd, to go stale while in flight. */
  seen up1 = {0};
  ASSERT_EQ(gkc_async_upload(ac, &ua, on_seen, &up1), 0);
  seen *w1[] = {&up1};
  wait_all(ac, w1, 1, 0);
  ASSERT_EQ(up1.status, 0);

  seen rh = {0}, ra = {0}, rb = {0}, u = {0};
  reduce_of(ac, gkc_ref_handle(up1.id, 32 * 4), &rh); /* held by the fault on the worker */
  reduce_of(ac, gkc_ref_mem(xa, 16 * 4), &ra);        /* queued behind it */
  gkc_upload_args uu = {gkc_ref_mem(xu, 8 * 4), GKC_F32, 0};
  ASSERT_EQ(gkc_async_upload(ac, &uu, on_seen, &u), 0);
  reduce_of(ac, gkc_ref_mem(xb, 24 * 4), &rb);
  ping_through(ac);
  ASSERT_EQ(rh.calls + ra.calls + u.calls + rb.calls, 0); /* all four in gkcd, unanswered */
  ASSERT_EQ(gkc_async_pending(ac), 4);
  uint32_t first = ra.msgid; /* 0: not answered yet */
  ASSERT_EQ(first, 0);

  fixture_stop(&f, SIGKILL);
  start(&f, NULL); /* the same socket, no fault */
  seen *w[] = {&rh, &ra, &u, &rb};
  wait_all(ac, w, 4, 0);
  ASSERT_EQ(gkc_async_reconnects(ac), 2);
  /* Sent again, in order, each answered with its own sum. */
  ASSERT_EQ(ra.status, 0);
  ASSERT_EQ(ra.value, sa);
  ASSERT_EQ(rb.status, 0);
  ASSERT_EQ(rb.value, sb);
  ASSERT(ra.msgid < rb.msgid);
  /* Its handle died with the gkcd it was made on: refused, not sent. */
  ASSERT_EQ(rh.status, GKC_ESTALE_HANDLE);
  char want[64];
  snprintf(want, sizeof want, "array handle %u is stale", up1.id);
  ASSERT_CONTAINS(rh.msg, want);
  /* Not idempotent: reported, not sent again. */
  ASSERT_EQ(u.status, GKC_EIO);
  ASSERT_CONTAINS(u.msg, "upload was in flight");
  ASSERT_CONTAINS(u.msg, "not sent again");
  ASSERT_EQ(gkc_async_pending(ac), 0);
  /* A later round trip brings nothing more for them. */
  ping_through(ac);
  ASSERT_EQ(rh.calls + ra.calls + u.calls + rb.calls, 4);
  ASSERT_EQ(never.calls, 0);
  free(xa), free(xb), free(xh), free(xu);
  gkc_async_close(ac);
  fixture_stop(&f, SIGTERM);
}

static void test_async_in_flight_not_resent(void) {
  fixture f;
  fixture_start(&f, one_worker, hold_reduce);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 40, 50, 0), 0); /* no opt-in */
  double sr, su;
  float *xr = fresh(16, &sr), *xu = fresh(8, &su);
  seen r = {0}, u = {0};
  reduce_of(ac, gkc_ref_mem(xr, 16 * 4), &r);
  gkc_upload_args uu = {gkc_ref_mem(xu, 8 * 4), GKC_F32, 0};
  ASSERT_EQ(gkc_async_upload(ac, &uu, on_seen, &u), 0);
  ping_through(ac);
  ASSERT_EQ(r.calls + u.calls, 0);
  fixture_stop(&f, SIGKILL);
  start(&f, NULL);
  seen *w[] = {&r, &u};
  wait_all(ac, w, 2, 1);
  ASSERT_EQ(r.status, GKC_EIO);
  ASSERT_CONTAINS(r.msg, "reduce was in flight");
  ASSERT_CONTAINS(r.msg, "not sent again");
  ASSERT_EQ(u.status, GKC_EIO);
  ASSERT_CONTAINS(u.msg, "upload was in flight");
  ASSERT_EQ(gkc_async_pending(ac), 0);
  /* The next call connects again; the lost ones stay ended. */
  seen again = {0};
  reduce_of(ac, gkc_ref_mem(xr, 16 * 4), &again);
  seen *w2[] = {&again};
  wait_all(ac, w2, 1, 0);
  ASSERT_EQ(again.status, 0);
  ASSERT_EQ(again.value, sr);
  ASSERT_EQ(r.calls + u.calls, 2);
  ASSERT_EQ(gkc_async_reconnects(ac), 1);
  free(xr), free(xu);
  gkc_async_close(ac);
  fixture_stop(&f, SIGTERM);
}

static void test_async_in_flight_no_gkcd(void) {
  fixture f;
  fixture_start(&f, one_worker, hold_reduce);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 2, 10, GKC_RECONNECT_IDEMPOTENT), 0);
  double sr;
  float *xr = fresh(16, &sr);
  seen r = {0};
  reduce_of(ac, gkc_ref_mem(xr, 16 * 4), &r);
  ping_through(ac);
  ASSERT_EQ(r.calls, 0);
  fixture_stop(&f, SIGKILL); /* and none comes back */
  seen *w[] = {&r};
  wait_all(ac, w, 1, 1);
  ASSERT_EQ(r.status, GKC_EIO);
  ASSERT_CONTAINS(r.msg, "reduce was in flight and could not be sent again");
  ASSERT_CONTAINS(r.msg, "2 attempts");
  ASSERT_EQ(gkc_async_pending(ac), 0);
  ASSERT_EQ(gkc_async_reconnects(ac), 0);
  free(xr);
  gkc_async_close(ac);
  ASSERT_EQ(r.calls, 1);
}

/* The upload's callback, lost in flight: a request from there connects
 * again (the context has not yet), the held reduce going out first. */
typedef struct {
  seen up, next;
  int next_rc;
  float *x;
} from_cb;

static void on_lost_upload(gkc_async *ac, const gkc_result *res, void *ud) {
  from_cb *f = ud;
  on_seen(ac, res, &f->up);
  gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
  r.x = gkc_ref_mem(f->x, 20 * 4);
  f->next_rc = gkc_async_reduce(ac, &r, on_seen, &f->next);
}

static void test_async_in_flight_callback_first(void) {
  fixture f;
  fixture_start(&f, one_worker, hold_reduce);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 40, 50, GKC_RECONNECT_IDEMPOTENT), 0);
  double s1, s2, s3, su;
  float *x1 = fresh(16, &s1), *x2 = fresh(24, &s2), *xu = fresh(8, &su);
  from_cb cb = {.next_rc = 1};
  cb.x = fresh(20, &s3);
  seen r1 = {0}, r2 = {0};
  reduce_of(ac, gkc_ref_mem(x1, 16 * 4), &r1);
  gkc_upload_args uu = {gkc_ref_mem(xu, 8 * 4), GKC_F32, 0};
  ASSERT_EQ(gkc_async_upload(ac, &uu, on_lost_upload, &cb), 0);
  reduce_of(ac, gkc_ref_mem(x2, 24 * 4), &r2);
  ping_through(ac);
  ASSERT_EQ(r1.calls + cb.up.calls + r2.calls, 0);
  fixture_stop(&f, SIGKILL);
  start(&f, NULL);
  seen *w[] = {&r1, &cb.up, &r2, &cb.next};
  wait_all(ac, w, 4, 0);
  ASSERT_EQ(cb.up.status, GKC_EIO);
  ASSERT_CONTAINS(cb.up.msg, "upload was in flight");
  ASSERT_EQ(cb.next_rc, 0);
  ASSERT_EQ(cb.next.status, 0);
  ASSERT_EQ(cb.next.value, s3);
  ASSERT_EQ(r1.status, 0);
  ASSERT_EQ(r1.value, s1);
  ASSERT_EQ(r2.status, 0);
  ASSERT_EQ(r2.value, s2);
  ASSERT(r1.msgid < cb.next.msgid); /* held first, then the callback's */
  ASSERT(r1.msgid < r2.msgid);
  ASSERT_EQ(gkc_async_reconnects(ac), 1); /* one new connection for all */
  ping_through(ac);
  ASSERT_EQ(r1.calls + cb.up.calls + r2.calls + cb.next.calls, 4);
  free(x1), free(x2), free(xu), free(cb.x);
  gkc_async_close(ac);
  fixture_stop(&f, SIGTERM);
}

/* A hang (the adapter watching a dead descriptor) fails instead. */
static void on_watchdog(uv_timer_t *t) {
  (void)t;
  TEST_FAIL("the libuv loop got no reply for 60 s after gkcd was restarted");
}

static void test_async_in_flight_uv(void) {
  fixture f;
  fixture_start(&f, one_worker, hold_reduce);
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  uv_timer_t dog;
  ASSERT_EQ(uv_timer_init(&loop, &dog), 0);
  ASSERT_EQ(uv_timer_start(&dog, on_watchdog, 60000, 0), 0);
  uv_unref((uv_handle_t *)&dog);
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock), 0);
  ASSERT_EQ(gkc_async_set_reconnect(ac, 40, 50, GKC_RECONNECT_IDEMPOTENT), 0);
  ASSERT_EQ(gkc_async_attach_uv(ac, &loop), 0);
  double sr;
  float *xr = fresh(16, &sr);
  seen r = {0}, p = {0};
  reduce_of(ac, gkc_ref_mem(xr, 16 * 4), &r);
  ASSERT_EQ(gkc_async_ping(ac, on_seen, &p), 0);
  while (p.calls == 0) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(r.calls, 0);
  fixture_stop(&f, SIGKILL);
  start(&f, NULL);
  while (r.calls == 0) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.value, sr);
  ASSERT_EQ(gkc_async_reconnects(ac), 1);
  ASSERT(gkc_async_fd(ac) >= 0);
  gkc_async_close(ac);
  uv_close((uv_handle_t *)&dog, NULL);
  /* Every handle, the old descriptor's watcher among them, is gone. */
  ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_EQ(uv_loop_close(&loop), 0);
  ASSERT_EQ(r.calls, 1);
  free(xr);
  fixture_stop(&f, SIGTERM);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/gkc-reconnect-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) TEST_FAIL("mkdtemp");
  snprintf(sock, sizeof sock, "%s/gkcd.sock", dir);
  test_loop_blocking();
  const char *fi = getenv("GKC_FAULT_INJECTION");
  if (fi && !strcmp(fi, "1")) {
    test_in_flight(0);
    test_in_flight(1);
  } else {
    fprintf(stderr, "  in flight: skipped (a build without GKC_FAULT_INJECTION)\n");
  }
  test_stale_blocking();
  test_async();
  test_async_stale();
  if (fi && !strcmp(fi, "1")) {
    rng_state = (unsigned)getpid() ^ (unsigned)time(NULL);
    fprintf(stderr, "  async in flight: inputs from seed %u\n", rng_state);
    test_async_in_flight_resent();
    test_async_in_flight_not_resent();
    test_async_in_flight_no_gkcd();
    test_async_in_flight_callback_first();
    test_async_in_flight_uv();
  } else {
    fprintf(stderr, "  async in flight: skipped (a build without GKC_FAULT_INJECTION)\n");
  }
  unlink(sock);
  rmdir(dir);
  fprintf(stderr, "e2e_reconnect: passed\n");
  return 0;
}
