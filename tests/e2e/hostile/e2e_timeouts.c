/* e2e_timeouts.c: deadlines and slots against slow and greedy clients (issue 10).
 *
 *  1. --send-timeout: a connection whose unread replies make no progress for
 *     that long is closed, and everything it held goes with it: its
 *     unwritten replies (memory.replies back to 0), its resident array and
 *     its shared-memory region (status resident.*, and the region's mapping
 *     in /proc/PID/maps), its held request (status `cancelled`).  A client
 *     that reads slowly but steadily is not closed.
 *  2. --request-timeout (slowloris): a client sending one byte a second is
 *     told `timeout` in a notification naming --request-timeout, then
 *     closed, within the deadline plus the sweep's period.
 *  2b. A client pipelining a long request and large ones behind it waits for
 *     the daemon, not the other way round: never closed by --request-timeout
 *    .
 *  3. 20 slowloris clients holding all of --max-connections 20: a newcomer
 *     is refused with `too_many_connections` naming the limit, and is served
 *     once the slow ones time out, within about --request-timeout.
 *  4. --max-conn-per-user: the connection over it gets `too_many_connections`
 *     naming --max-conn-per-user, and is closed.
 *  5. A truncated request followed by shutdown(SHUT_WR): the requests before
 *     it are answered, then a parse_error "connection closed in the middle of
 *     a request" with its msgid when the bytes reached it (nil otherwise),
 *     then the connection closes.
 *
 * The deadlines here are short (2 s) so the test stays quick; the upper
 * bounds on when a connection goes allow 3 s for a loaded machine (the
 * sweep runs every quarter of the shortest deadline).
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "probe.h"
#include "rawrpc.h"
#include "test.h"

#define DEADLINE_S 2.0
#define SLACK_S 3.0

/* Reads and drops what c receives until the peer closes: 1 when it did
 * within ms. */
static int drains_to_close(rr_conn *c, int ms) {
  static char junk[1 << 16];
  double t0 = rr_now_s();
  while ((rr_now_s() - t0) * 1000 < ms) {
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
  }
  return 0;
}

/* Mappings of the test's memfds in the daemon. */
static int region_maps(const fixture *f) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)f->pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return -1;
  int n = 0;
  while (fgets(line, sizeof line, fp)) n += strstr(line, "memfd:test-region") != NULL;
  fclose(fp);
  return n;
}

/* The connection count settles at `want` (fixture_start's own connection
 * may still be closing); the value reached. */
static double settle_connections(const fixture *f, double want) {
  return pb_wait_status(f, "connections", want, 5000);
}

/* ------------------------------------------------------------------------ */
/* 1. --send-timeout                                                         */

static void test_send_timeout(void) {
  rr_ctx = "--send-timeout: a client that stops reading";
  enum { DIM = 4096, NREQ = 3 }; /* 64 MiB replies */
  const char *env[] = {pb_asan_env(), NULL};
  const char *const args[] = {"--send-timeout", "2", "--max-conn-reply-bytes", "64M", "--memory-budget", "1G",
                              NULL};
  fixture f;
  fixture_start(&f, args, env);
  rr_conn c;
  rr_open(&c, &f);
  /* It holds a resident array and a region before it stops reading. */
  float data[1024];
  for (int i = 0; i < 1024; i++) data[i] = (float)i;
  rr_reply r;
  rr_call(&c, 1, "upload", ARGS(AB("data", data, sizeof data), AS("dtype", "f32")), &r, 5000);
  CHECK(rr_reply_ok(&r, 1) && !isnan(rr_num(proto_map_get(r.result, "handle"))), "upload: %s",
        rr_reply_desc(&r));
  rr_reply_free(&r);
  int mfd = pb_memfd(1 << 20);
  CHECK(mfd >= 0, "memfd: %s", strerror(errno));
  {
    rr_frame fr;
    rr_frame_init(&fr);
    rr_pack_request(&fr, 2, "shm_register", ARGS(AI("bytes", 1 << 20)));
    CHECK(pb_send_with_fd(c.fd, fr.sb.data, fr.sb.size, mfd) == 0, "sending shm_register");
    rr_frame_free(&fr);
    rr_get_reply(&c, &r, 5000);
    CHECK(rr_reply_ok(&r, 2), "shm_register: %s", rr_reply_desc(&r));
    rr_reply_free(&r);
  }
  close(mfd);
  const char *paths[] = {"resident.arrays", "resident.regions", "memory.resident", "closed_send_timeout",
                         "memory.replies", "memory.used", "cancelled", "in_flight", "memory.input"};
  double st[9];
  rr_conn side;
  rr_open(&side, &f);
  pb_status_on(&side, paths, 9, st);
  CHECK(st[0] == 1 && st[1] == 1 && st[2] >= sizeof data, "before: resident arrays %g, regions %g, bytes %g",
        st[0], st[1], st[2]);
  CHECK(region_maps(&f) == 1, "the daemon maps the region %d times", region_maps(&f));
  double cancelled0 = st[6];

  float *a = rr_rand_floats(DIM), *b = rr_rand_floats(DIM);
  rr_frame fr;
  pb_pack_outer_sgemms(&fr, 10, NREQ, DIM, DIM, a, 0, b, 0);
  double t0 = rr_now_s();
  CHECK(rr_send_some(c.fd, fr.sb.data, fr.sb.size) == 0, "sending the sgemms");
  rr_frame_free(&fr);
  /* While it is stuck: a reply charged, a request held. */
  double closed = 0, replies_seen = 0, took = -1;
  while (rr_now_s() - t0 < DEADLINE_S + 10 + SLACK_S) {
    pb_status_on(&side, paths, 9, st);
    if (st[4] > replies_seen) replies_seen = st[4];
    if ((closed = st[3]) >= 1) {
      took = rr_now_s() - t0;
      break;
    }
    rr_sleep_ms(50);
  }
  fprintf(stderr, "send timeout: closed after %.2f s (--send-timeout %g); memory.replies peaked at %g\n", took,
          DEADLINE_S, replies_seen);
  CHECK(replies_seen > 32 << 20, "memory.replies never showed the stuck reply (max %g)", replies_seen);
  CHECK(closed == 1, "closed_send_timeout = %g after %.0f s", closed, DEADLINE_S + 10 + SLACK_S);
  /* Not before the deadline; within it, plus the first reply's computing
   * (under a second) and the slack. */
  CHECK(took >= DEADLINE_S && took <= DEADLINE_S + 1 + SLACK_S, "closed %.2f s after the requests", took);
  CHECK(drains_to_close(&c, 5000), "the client's socket is not closed");
  /* What it held is gone. */
  for (int i = 0; i < 100; i++) {
    pb_status_on(&side, paths, 9, st);
    if (st[0] == 0 && st[1] == 0 && st[4] == 0 && st[5] == 0 && st[7] == 0) break;
    rr_sleep_ms(20);
  }
  CHECK(st[0] == 0 && st[1] == 0 && st[2] == 0, "after: resident arrays %g, regions %g, bytes %g", st[0],
        st[1], st[2]);
  CHECK(region_maps(&f) == 0, "the daemon still maps the region (%d)", region_maps(&f));
  CHECK(st[4] == 0 && st[5] == 0 && st[8] == 0, "after: memory.replies %g, memory.used %g, memory.input %g",
        st[4], st[5], st[8]);
  CHECK(st[7] == 0, "after: in_flight %g", st[7]);
  CHECK(st[6] - cancelled0 >= 1, "cancelled went from %g to %g: its held request was not cancelled",
        cancelled0, st[6]);
  CHECK(strstr(rr_slurp(f.log), "--send-timeout") != NULL, "the log does not say why it closed");
  CHECK(rr_ping(&side, 5000, NULL, 0), "another connection is not served afterwards");
  rr_close(&c);

  /* A client that reads slowly but steadily makes progress: never closed.
   * A 4 MiB reply read 256 KiB every 250 ms takes 4 s, twice the deadline. */
  rr_ctx = "--send-timeout: a slow but steady reader";
  {
    enum { M = 256, N = 4096, STEP = 256 << 10 };
    float *sa = rr_rand_floats(M), *sb = rr_rand_floats(N);
    rr_conn s;
    rr_open(&s, &f);
    rr_frame_init(&fr);
    rr_pack_request(&fr, 7, "sgemm", ARGS(AI("m", M), AI("n", N), AI("k", 1), AB("a", sa, M * 4), AB("b", sb, N * 4)));
    CHECK(rr_send_some(s.fd, fr.sb.data, fr.sb.size) == 0, "sending");
    rr_frame_free(&fr);
    size_t cap = (size_t)M * N * 4 + STEP, have = 0;
    unsigned char *buf = malloc(cap);
    double t1 = rr_now_s();
    int eof = 0;
    while (!eof && have < (size_t)M * N * 4 && rr_now_s() - t1 < 30) {
      rr_sleep_ms(250);
      for (size_t got = 0; got < STEP && have < cap;) { /* one step, waiting for it */
        struct pollfd p = {s.fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) break;
        ssize_t n = recv(s.fd, buf + have, STEP - got < cap - have ? STEP - got : cap - have, 0);
        if (n <= 0) {
          eof = 1;
          break;
        }
        have += (size_t)n, got += (size_t)n;
      }
    }
    double dt = rr_now_s() - t1;
    /* The frame is whole in buf (with the header's few bytes to come):
     * decode it as a reply. */
    s.buf = buf, s.cap = cap, s.have = have;
    rr_reply r2;
    rr_get_reply(&s, &r2, 5000);
    const msgpack_object *cb = rr_result_bin(&r2, "c", (size_t)M * N * 4);
    char why[200] = "";
    CHECK(!eof && cb && rr_sgemm_entries_ok(cb->via.bin.ptr, sa, sb, M, N, 1, 1.0, 256, why, sizeof why),
          "slow reader's reply after %.1f s (%zu bytes%s): %s %s", dt, have, eof ? ", then closed" : "",
          rr_reply_desc(&r2), why);
    rr_reply_free(&r2);
    fprintf(stderr, "send timeout: a steady reader took %.1f s over its 4 MiB reply\n", dt);
    CHECK(dt > DEADLINE_S, "the reply was read in %.1f s, not slowly", dt);
    CHECK(rr_ping(&s, 5000, NULL, 0), "the slow but steady reader was closed");
    double n = pb_status(&f, "closed_send_timeout");
    CHECK(n == 1, "closed_send_timeout = %g", n);
    rr_close(&s);
    free(sa), free(sb);
  }
  rr_close(&side);
  free(a), free(b);
  PB_STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 2-3. --request-timeout, slowloris                                          */

static const unsigned char PING[] = {0x94, 0x00, 0x05, 0xa4, 'p', 'i', 'n', 'g', 0x91, 0x80};

/* Sends the first byte of a ping, then one byte a second on c until the
 * daemon says something or closes; the seconds from the first byte. */
static double slowloris_one(rr_conn *c, rr_reply *r) {
  double t0 = rr_now_s();
  for (size_t i = 0; i < sizeof PING - 1; i++) {
    if (rr_send_some(c->fd, PING + i, 1) != 0) break;
    rr_get_reply(c, r, 1000);
    if (r->got || r->rf != RF_TIMEOUT) return rr_now_s() - t0;
    rr_reply_free(r);
  }
  memset(r, 0, sizeof *r);
  return rr_now_s() - t0;
}

static void test_slowloris(void) {
  rr_ctx = "--request-timeout: one byte a second";
  const char *const args[] = {"--request-timeout", "2", NULL};
  fixture f;
  fixture_start(&f, args, NULL);
  rr_conn c;
  rr_open(&c, &f);
  rr_reply r;
  double took = slowloris_one(&c, &r);
  fprintf(stderr, "slowloris: %s after %.2f s (--request-timeout %g)\n", rr_reply_desc(&r), took, DEADLINE_S);
  CHECK(r.notification && !strcmp(r.code, "timeout") && strstr(r.msg, "--request-timeout"),
        "a request trickling in: %s (want the timeout notification naming --request-timeout)", rr_reply_desc(&r));
  CHECK(took >= DEADLINE_S - 0.1 && took <= DEADLINE_S + SLACK_S, "told after %.2f s", took);
  rr_reply_free(&r);
  rr_get_reply(&c, &r, 5000);
  CHECK(!r.got && r.rf == RF_CLOSED, "after the notification: %s (want closed)", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&c);
  CHECK(pb_status(&f, "closed_request_timeout") == 1, "closed_request_timeout = %g",
        pb_status(&f, "closed_request_timeout"));
  /* The same request, sent whole, is answered: the deadline is on slowness. */
  rr_open(&c, &f);
  CHECK(rr_ping(&c, 5000, NULL, 0), "a ping sent at once is not answered");
  rr_close(&c);
  PB_STOP_DAEMON(&f);
}

/* The request clock is for the client's slowness, not the daemon's.  A
 * client pipelines a long sgemm (3072^3, 72 MiB of request) and two 18 MiB
 * ones behind it (1536^3).  It sends them at socket speed; gkcd has the
 * second one whole long before the first is done: every sgemm waits 3.5 s
 * on the worker before it runs (GKCD_FAULT=sgemm:delay, in the builds that
 * have fault injection; elsewhere the first one's work on one BLAS thread
 * is the wait).  Every reply must come, and gkcd's own waiting must not
 * count against --request-timeout (3 s: a request arrives well within it
 * even on a loaded machine under ASan, where 128 MiB once took 0.5 s).
 *
 * The input buffer, grown to 72 MiB by the first request, was over the
 * input allowance of then (a fixed 32 MiB; now a quarter of the budget),
 * so copying the second request out did not fit and it waited for the
 * connection's own job; that wait once counted as request time (and could
 * last for ever), so the client was told `timeout` and closed although its
 * request had arrived whole (ROBUSTNESS.md, Finding 3). */
static void test_request_clock(void) {
  rr_ctx = "--request-timeout: a daemon busy with earlier requests is not a slow client";
  enum { NREQ = 3, BIG = 3072, N = 1536 };
  /* --queue-wait 0: the third request waits for the first to finish
   * (3.5 s delay and a 3072^3 sgemm on one thread), which came within a
   * few tenths of --queue-wait's default 5 s and past it on a loaded
   * machine under ASan (answered busy, a failure that is not this test's
   * subject); the sooner the requests arrive, the longer it waits. */
  const char *const args[] = {"--request-timeout", "3", "--threads", "1", "--queue-wait", "0", NULL};
  const char *env[] = {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1",
                       "GKCD_FAULT=sgemm:delay=3500", NULL};
  fixture f;
  fixture_start(&f, args, env);
  float *a = rr_rand_floats((size_t)BIG * BIG), *b = rr_rand_floats((size_t)BIG * BIG);
  rr_frame fr;
  rr_frame_init(&fr);
  for (int i = 0; i < NREQ; i++) {
    int d = i == 0 ? BIG : N;
    rr_pack_request(&fr, 100 + (uint32_t)i, "sgemm",
                    ARGS(AI("m", d), AI("n", d), AI("k", d), AB("a", a, (size_t)d * d * 4),
                         AB("b", b, (size_t)d * d * 4), AF("alpha", 1.0 + i)));
  }
  rr_conn c;
  rr_open(&c, &f);
  rr_sender s = {c.fd, fr.sb.data, fr.sb.size, 0};
  pthread_t th;
  pthread_create(&th, NULL, rr_sender_main, &s);
  int right = 0;
  double t0 = rr_now_s();
  for (int i = 0; i < NREQ; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 60000);
    int j = r.valid && !r.msgid_nil ? (int)r.msgid - 100 : -1, d = j == 0 ? BIG : N;
    const msgpack_object *cb = j >= 0 && j < NREQ ? rr_result_bin(&r, "c", (size_t)d * d * 4) : NULL;
    char why[200] = "";
    int ok = cb && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, d, d, d, 1.0 + j, 16, why, sizeof why);
    if (!ok) fprintf(stderr, "request clock, reply %d after %.2f s: %s %s\n", i, rr_now_s() - t0, rr_reply_desc(&r), why);
    right += ok;
    int stop = !r.valid;
    rr_reply_free(&r);
    if (stop) break;
  }
  shutdown(c.fd, SHUT_RDWR); /* a sender still blocked stops */
  pthread_join(th, NULL);
  fprintf(stderr, "request clock: %d of %d replies right in %.2f s\n", right, NREQ, rr_now_s() - t0);
  CHECK(right == NREQ, "%d of %d pipelined requests answered right (closed_request_timeout %g)", right, NREQ,
        pb_status(&f, "closed_request_timeout"));
  CHECK(right < NREQ || s.err == 0, "sending: %s", strerror(s.err));
  rr_close(&c);
  rr_frame_free(&fr);
  free(a), free(b);
  PB_STOP_DAEMON(&f);
}

typedef struct {
  rr_conn *c;
  int n;
  double closed_after[32]; /* from the first byte; -1: not closed */
  int told[32];
} loris_set;

/* Trickles a ping into each of n connections, one byte a second each,
 * until every one is closed (bounded). */
static void *loris_main(void *vp) {
  loris_set *s = vp;
  double t0 = rr_now_s();
  int open = s->n;
  for (int i = 0; i < s->n; i++) s->closed_after[i] = -1;
  for (size_t byte = 0; open > 0 && rr_now_s() - t0 < 20; byte++) {
    for (int i = 0; i < s->n; i++)
      if (s->closed_after[i] < 0 && byte < sizeof PING - 1) rr_send_some(s->c[i].fd, PING + byte, 1);
    double tick = rr_now_s();
    while (rr_now_s() - tick < 1.0 && open > 0)
      for (int i = 0; i < s->n; i++) {
        if (s->closed_after[i] >= 0) continue;
        rr_reply r;
        rr_get_reply(&s->c[i], &r, 0);
        if (r.got && r.notification && !strcmp(r.code, "timeout")) s->told[i] = 1;
        if (!r.got && r.rf == RF_CLOSED) {
          s->closed_after[i] = rr_now_s() - t0;
          open--;
        }
        rr_reply_free(&r);
        if (open > 0) rr_sleep_ms(5);
      }
  }
  return NULL;
}

static void test_slowloris_slots(void) {
  rr_ctx = "20 slowloris clients, --max-connections 20";
  enum { NL = 20 };
  const char *const args[] = {"--request-timeout", "2", "--max-connections", "20", "--max-conn-per-user", "20",
                              NULL};
  fixture f;
  fixture_start(&f, args, NULL);
  CHECK(settle_connections(&f, 1) == 1, "the daemon holds connections before the test");
  rr_sleep_ms(200); /* the asking connection's own close reaches it */
  static rr_conn lc[NL];
  for (int i = 0; i < NL; i++) rr_open(&lc[i], &f);
  loris_set s = {lc, NL, {0}, {0}};
  pthread_t th;
  pthread_create(&th, NULL, loris_main, &s);
  rr_sleep_ms(300); /* all of them accepted and started */
  /* A newcomer is refused while they hold every slot... */
  rr_conn c;
  rr_open(&c, &f);
  rr_reply r;
  rr_get_reply(&c, &r, 5000);
  CHECK(r.notification && !strcmp(r.code, "too_many_connections") && strstr(r.msg, "--max-connections 20"),
        "a newcomer while 20 slow clients hold the slots: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&c);
  /* ...and served once they time out: it retries every 100 ms. */
  double t0 = rr_now_s(), served = -1;
  while (rr_now_s() - t0 < DEADLINE_S + 10) {
    rr_open(&c, &f);
    int ok = rr_ping(&c, 2000, NULL, 0);
    rr_close(&c);
    if (ok) {
      served = rr_now_s() - t0;
      break;
    }
    rr_sleep_ms(100);
  }
  pthread_join(th, NULL);
  fprintf(stderr, "slowloris x%d: a newcomer was served after %.2f s of retrying (--request-timeout %g)\n", NL,
          served, DEADLINE_S);
  CHECK(served >= 0 && served <= DEADLINE_S + SLACK_S, "the newcomer was served after %.2f s", served);
  int told = 0, in_time = 0;
  double worst = 0;
  for (int i = 0; i < NL; i++) {
    told += s.told[i];
    in_time += s.closed_after[i] >= 0 && s.closed_after[i] <= DEADLINE_S + SLACK_S;
    if (s.closed_after[i] > worst) worst = s.closed_after[i];
  }
  CHECK(told == NL, "%d of %d slow clients got the timeout notification", told, NL);
  CHECK(in_time == NL, "%d of %d slow clients closed within %.0f s (slowest %.2f s)", in_time, NL,
        DEADLINE_S + SLACK_S, worst);
  CHECK(pb_status(&f, "closed_request_timeout") == NL, "closed_request_timeout = %g",
        pb_status(&f, "closed_request_timeout"));
  for (int i = 0; i < NL; i++) rr_close(&lc[i]);
  PB_STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 4. --max-conn-per-user                                                    */

static void test_per_user(void) {
  rr_ctx = "--max-conn-per-user 2";
  const char *const args[] = {"--max-conn-per-user", "2", "--max-connections", "10", NULL};
  fixture f;
  fixture_start(&f, args, NULL);
  rr_conn c[3];
  rr_open(&c[0], &f);
  /* fixture_start's connection counts for this user until it is gone. */
  const char *path = "connections";
  double n = 2;
  for (int i = 0; i < 250 && n > 1; i++) {
    pb_status_on(&c[0], &path, 1, &n);
    if (n > 1) rr_sleep_ms(20);
  }
  rr_open(&c[1], &f);
  CHECK(rr_ping(&c[0], 5000, NULL, 0) && rr_ping(&c[1], 5000, NULL, 0), "2 connections of one user not served");
  rr_open(&c[2], &f);
  rr_reply r;
  rr_get_reply(&c[2], &r, 5000);
  CHECK(r.notification && !strcmp(r.code, "too_many_connections") && strstr(r.msg, "--max-conn-per-user 2"),
        "a third connection of one user: %s (want too_many_connections naming --max-conn-per-user 2)",
        rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_get_reply(&c[2], &r, 5000);
  CHECK(!r.got && r.rf == RF_CLOSED, "after the notification: %s (want closed)", rr_reply_desc(&r));
  rr_reply_free(&r);
  const char *paths[] = {"refused_no_slot", "connections"};
  double st[2];
  pb_status_on(&c[0], paths, 2, st);
  CHECK(st[0] == 1 && st[1] == 2, "refused_no_slot %g, connections %g", st[0], st[1]);
  CHECK(rr_ping(&c[1], 5000, NULL, 0), "the user's other connections stopped working");
  for (int i = 0; i < 3; i++) rr_close(&c[i]);
  PB_STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 5. a truncated request, then shutdown(SHUT_WR)                            */

static void truncated_case(const fixture *f, const char *what, const void *p, size_t n, int msgid_known,
                           uint32_t msgid) {
  rr_ctx = what;
  rr_conn c;
  rr_open(&c, f);
  /* A whole ping first: it is answered before the complaint. */
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 77, "ping", NULL, 0);
  test_send_all(c.fd, fr.sb.data, fr.sb.size);
  rr_frame_free(&fr);
  test_send_all(c.fd, p, n);
  rr_sleep_ms(50); /* the daemon has the partial frame before the EOF */
  shutdown(c.fd, SHUT_WR);
  rr_reply r;
  rr_get_reply(&c, &r, 5000);
  CHECK(rr_reply_ok(&r, 77), "the ping before the truncated request: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_get_reply(&c, &r, 5000);
  CHECK(r.valid && r.is_error && !strcmp(r.code, "parse_error") &&
            strstr(r.msg, "connection closed in the middle of a request") &&
            (msgid_known ? !r.msgid_nil && r.msgid == msgid : r.msgid_nil),
        "%s: want parse_error \"connection closed in the middle of a request\" with msgid %s",
        rr_reply_desc(&r), msgid_known ? "known" : "nil");
  rr_reply_free(&r);
  rr_get_reply(&c, &r, 5000);
  CHECK(!r.got && r.rf == RF_CLOSED, "after the parse_error: %s (want closed)", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&c);
}

static void test_truncated(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  static const unsigned char cut_in_bin[] = "\x94\x00\x09\xa6reduce\x91\x81\xa1x\xc4\x10\x00\x00";
  static const unsigned char cut_after_id[] = "\x94\x00\xcd\x12\x34\xa6red";
  static const unsigned char cut_in_id[] = "\x94\x00\xce\x00\x00";
  static const unsigned char cut_at_type[] = "\x94";
  truncated_case(&f, "truncated inside a bin, msgid 9", cut_in_bin, sizeof cut_in_bin - 1, 1, 9);
  truncated_case(&f, "truncated in the method, msgid 0x1234", cut_after_id, sizeof cut_after_id - 1, 1, 0x1234);
  truncated_case(&f, "truncated inside the msgid", cut_in_id, sizeof cut_in_id - 1, 0, 0);
  truncated_case(&f, "truncated after the array header", cut_at_type, sizeof cut_at_type - 1, 0, 0);
  PB_STOP_DAEMON(&f);
}

/* GKC_ONLY=name runs one part (a substring of its function's name). */
static int want(const char *name) {
  const char *o = getenv("GKC_ONLY");
  return !o || !*o || strstr(name, o);
}

int main(void) {
  double t0 = rr_now_s();
  rr_rng = test_seed();
  signal(SIGPIPE, SIG_IGN);
  if (want("test_truncated")) SECTION(test_truncated());
  if (want("test_per_user")) SECTION(test_per_user());
  if (want("test_slowloris")) SECTION(test_slowloris());
  if (want("test_request_clock")) SECTION(test_request_clock());
  if (want("test_send_timeout")) SECTION(test_send_timeout());
  if (want("test_slowloris_slots")) SECTION(test_slowloris_slots());
  rr_print_totals("e2e_timeouts", t0);
  return rr_failed ? 1 : 0;
}
