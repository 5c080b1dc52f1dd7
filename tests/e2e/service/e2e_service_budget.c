/* e2e_service_budget.c: the memory budget and the idle timeout, against real
 * gkcd processes:
 *
 *  6. the memory budget: too_large, waiting, busy, and the books balance;
 *  7. the idle timeout.
 *
 * Checks do not stop the test at the first failure: each is counted, a
 * failure is printed with its line, and the exit status is 0 only when all
 * passed.  Every daemon is stopped with SIGTERM and must exit 0 within 10 s
 * (a daemon that does not is killed, so the test stays bounded).  Set
 * GKC_TEST_SEED to replay the random data.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <msgpack.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


#include "fixture.h"
#include "gkc.h"
#include "probe.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "svcutil.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* 6. the memory budget                                                      */

enum { BD = 384 }; /* sgemm BD^3: 1.18 MB of request + 0.59 MB of result */

typedef struct {
  const fixture *f;
  int id, nreq;
  const float *a, *b;
  uint64_t seed;
  int ok, busy, bad;
} budget_client;

static void *budget_client_main(void *vp) {
  budget_client *w = vp;
  rr_rng = w->seed;
  rr_conn c;
  rr_open(&c, w->f);
  rr_frame fr;
  rr_frame_init(&fr);
  uint32_t base = (uint32_t)w->id * 100;
  for (int i = 0; i < w->nreq; i++)
    rr_pack_request(&fr, base + (uint32_t)i, "sgemm",
                    ARGS(AI("m", BD), AI("n", BD), AI("k", BD), AB("a", w->a, BD * BD * 4),
                         AB("b", w->b, BD * BD * 4), AF("alpha", 1.0 + w->id * 10 + i)));
  int e = rr_send_some(c.fd, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  if (e) w->bad++;
  for (int i = 0; i < w->nreq && !e; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 20000);
    char why[200] = "";
    const msgpack_object *cb = rr_result_bin(&r, "c", BD * BD * 4);
    if (r.valid && !r.msgid_nil && r.msgid >= base && r.msgid < base + (uint32_t)w->nreq && cb &&
        rr_sgemm_entries_ok(cb->via.bin.ptr, w->a, w->b, BD, BD, BD, 1.0 + w->id * 10 + (r.msgid - base), 8,
                            why, sizeof why)) {
      w->ok++;
    } else if (r.valid && r.is_error && !strcmp(r.code, "busy") && strstr(r.msg, "--queue-wait")) {
      w->busy++;
    } else {
      w->bad++;
      fprintf(stderr, "budget client %d, msgid %u: %s %s\n", w->id, r.msgid, rr_reply_desc(&r), why);
      if (!r.got) i = w->nreq;
    }
    rr_reply_free(&r);
  }
  rr_close(&c);
  return NULL;
}

static void test_memory_budget(void) {
  fixture f;
  /* --queue-wait 0: requests that wait for memory wait as long as it takes. */
  const char *const args[] = {"--memory-budget", "4M", "--budget-queue", "2", "--threads", "1",
                              "--queue-wait", "0", NULL};
  fixture_start(&f, args, NULL);
  rr_conn c;
  rr_open(&c, &f);

  rr_ctx = "memory budget: limits";
  CHECK(status_on(&c, "limits.memory_budget") == 4194304, "limits.memory_budget = %g",
        status_on(&c, "limits.memory_budget"));
  CHECK(status_on(&c, "limits.budget_queue") == 2, "limits.budget_queue = %g", status_on(&c, "limits.budget_queue"));

  rr_ctx = "memory budget: a request that can never fit";
  {
    /* 1024 x 1024 result: 4 MiB, plus the 8 KB request: over 4 MiB. */
    float *v = rr_rand_floats(1024);
    rr_reply r;
    double t0 = rr_now_s();
    rr_call(&c, 7, "sgemm", ARGS(AI("m", 1024), AI("n", 1024), AI("k", 1), AB("a", v, 4096), AB("b", v, 4096)), &r,
            10000);
    double dt = rr_now_s() - t0;
    CHECK(rr_reply_err(&r, 7, "too_large") && strstr(r.msg, "--memory-budget"),
          "sgemm needing 4 MiB + 8 KB: %s", rr_reply_desc(&r));
    CHECK(dt < 1.0, "too_large took %.3f s", dt);
    rr_reply_free(&r);
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection closed after too_large");
    /* Just under: 1000 x 1000 (3.8 MiB) fits and is computed. */
    float *a = rr_rand_floats(1000), *b = rr_rand_floats(1000);
    rr_call(&c, 8, "sgemm", ARGS(AI("m", 1000), AI("n", 1000), AI("k", 1), AB("a", a, 4000), AB("b", b, 4000)), &r,
            10000);
    const msgpack_object *cb = rr_result_bin(&r, "c", 4000000);
    char why[200] = "";
    CHECK(cb && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, 1000, 1000, 1, 1.0, 16, why, sizeof why),
          "sgemm needing 3.8 MiB under a 4 MiB budget: %s %s", rr_reply_desc(&r), why);
    rr_reply_free(&r);
    free(a), free(b), free(v);
  }

  rr_ctx = "memory budget: concurrent requests wait, and a full wait queue pauses reading";
  {
    enum { NCLIENT = 3, PER = 4 };
    float *a = rr_rand_floats(BD * BD), *b = rr_rand_floats(BD * BD);
    budget_client w[NCLIENT];
    pthread_t th[NCLIENT];
    for (int i = 0; i < NCLIENT; i++) {
      w[i] = (budget_client){&f, i + 1, PER, a, b, test_rand_u64(&rr_rng), 0, 0, 0};
      pthread_create(&th[i], NULL, budget_client_main, &w[i]);
    }
    /* Watch the budget from the side while they run. */
    double max_wait = 0, max_used = 0, t0 = rr_now_s();
    int samples = 0;
    for (;;) {
      double in_flight = status_on(&c, "in_flight");
      double used = status_on(&c, "budget_used"), waiting = status_on(&c, "budget_waiting");
      samples++;
      if (waiting > max_wait) max_wait = waiting;
      if (used > max_used) max_used = used;
      double served = status_on(&c, "methods.sgemm.requests");
      if ((served >= 2 + NCLIENT * PER && in_flight == 0) || rr_now_s() - t0 > 30 || isnan(in_flight)) break;
    }
    int ok = 0, busy = 0, bad = 0;
    for (int i = 0; i < NCLIENT; i++) {
      pthread_join(th[i], NULL);
      ok += w[i].ok, busy += w[i].busy, bad += w[i].bad;
    }
    /* The samples above can miss a queue that fills and drains between two
     * status calls; the peaks and totals cannot. */
    double peak_wait = status_on(&c, "budget_waiting_peak"), peak_used = status_on(&c, "budget_used_peak");
    double waited = status_on(&c, "budget_waited"), refused = status_on(&c, "budget_refused");
    fprintf(stderr, "memory budget: %d correct, %d busy, %d bad; sampled max budget_waiting %g, budget_used %g"
            " (%d samples); peaks %g waiting, %g used; %g waited, %g refused\n", ok, busy, bad, max_wait, max_used,
            samples, peak_wait, peak_used, waited, refused);
    CHECK(bad == 0 && busy == 0 && ok == NCLIENT * PER, "%d correct, %d busy, %d otherwise", ok, busy, bad);
    /* Two requests fit in the budget at once and a client pipelines four, so
     * some must have waited. */
    CHECK(waited > 0 && peak_wait > 0, "no request waited for budget (budget_waited %g, budget_waiting_peak %g)",
          waited, peak_wait);
    CHECK(max_wait <= 2 && peak_wait <= 2, "budget_waiting reached %g (peak %g) with --budget-queue 2", max_wait,
          peak_wait);
    CHECK(refused == 0, "budget_refused %g with --queue-wait 0", refused);
    CHECK(max_used <= 4194304 && peak_used <= 4194304 && peak_used >= 2 * BD * BD * 4,
          "budget_used reached %g (peak %g), want in [%d, 4 MiB]", max_used, peak_used, 2 * BD * BD * 4);
    double used = status_on(&c, "budget_used"), waiting = status_on(&c, "budget_waiting");
    double in_flight = status_on(&c, "in_flight");
    CHECK(used == 0 && waiting == 0 && in_flight == 0, "afterwards budget_used %g, budget_waiting %g, in_flight %g",
          used, waiting, in_flight);
    free(a), free(b);
  }
  CHECK(rr_ping(&c, 5000, NULL, 0), "side connection unusable");
  rr_close(&c);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 7. idle timeout                                                           */

static void test_idle_timeout(void) {
  rr_ctx = "idle timeout 0.4 s";
  fixture f;
  const char *const args[] = {"--idle-timeout", "0.4", NULL};
  fixture_start(&f, args, NULL);
  rr_conn idle, busy;
  double t0 = rr_now_s();
  rr_open(&idle, &f);
  rr_open(&busy, &f);
  double closed_at = -1;
  int pings = 0, pings_ok = 0, told = 0;
  double next_ping = rr_now_s();
  /* Ping for 1.6 s, and on (up to 2.5 s) until the idle one is closed, so
   * that the pinging connection is never idle itself. */
  while (rr_now_s() - t0 < 1.6 || (closed_at < 0 && rr_now_s() - t0 < 2.5)) {
    if (rr_now_s() >= next_ping) {
      pings++;
      pings_ok += rr_ping(&busy, 2000, NULL, 0);
      next_ping += 0.1;
    }
    if (closed_at < 0) {
      /* First the reason, as a notification, then the close. */
      ssize_t r = rr_recv_frame(&idle, 5);
      if (r == RF_CLOSED) {
        closed_at = rr_now_s() - t0;
      } else if (r > 0 && !told) {
        rr_reply n;
        rr_get_reply(&idle, &n, 0);
        told = n.notification && !strcmp(n.code, "timeout") && strstr(n.msg, "--idle-timeout");
        if (!told) closed_at = 1000;
        rr_reply_free(&n);
      } else if (r != RF_TIMEOUT) {
        closed_at = 1000; /* another frame, or an error: wrong either way */
      }
    } else {
      rr_sleep_ms(5);
    }
  }
  CHECK(closed_at >= 0.35 && closed_at <= 2.0, "idle connection closed after %.3f s (-1: not at all)", closed_at);
  CHECK(told, "the idle connection was not told why (a 'timeout' notification naming --idle-timeout)");
  CHECK(pings_ok == pings && pings >= 14, "pinging connection: %d of %d pings answered", pings_ok, pings);
  CHECK(rr_ping(&busy, 2000, NULL, 0), "the pinging connection was closed within %.1f s", rr_now_s() - t0);
  CHECK(strstr(rr_slurp(f.log), "idle for") != NULL, "log does not mention the idle close");
  fprintf(stderr, "idle timeout: idle connection closed after %.3f s; %d pings answered over %.1f s\n",
          closed_at, pings_ok, rr_now_s() - t0);
  rr_close(&idle);
  rr_close(&busy);
  STOP_DAEMON(&f);
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_memory_budget());
  SECTION(test_idle_timeout());
  return svc_finish("e2e_service_budget", t0);
}
