/* e2e_backpressure.c: clients that ask for more than they take (issue 10).
 *
 *  1. A client that never reads: one connection sends sgemm requests whose
 *     replies are 256 MiB each (m = n = 8192, k = 1) and reads nothing.  With
 *     --memory-budget 1G, gkcd stops reading it once its unwritten replies
 *     plus the replies of its admitted jobs would pass --max-conn-reply-bytes
 *     (status `held` counts the request it keeps back), charges the unwritten
 *     bytes to memory.replies until the socket takes them, and its RSS stays
 *     under its idle RSS + --memory-budget + 64 MiB while another client is
 *     served throughout, every answer checked.  When the client finally
 *     reads, every reply arrives, right, and the books return to zero.
 *  1b. A client that writes all its requests (8 sgemm of 1.2 MB) before it
 *     reads any reply, under a 4 MiB budget with --budget-queue 2: every
 *     reply must arrive.
 *  2. A flood at the default queue settings: 64 connections, each keeping 64
 *     small reduces in flight (4,096 in all, four times --max-queue) for
 *     GKC_FLOOD_REQUESTS (default 2,000) requests each.  A full queue pauses
 *     reading instead of answering `busy`: every reply arrives exactly once
 *     and right, no error at all, and gkcd's RSS stays flat.
 *
 * Before issue 10, (1) grew the daemon by one 256 MiB result per request in
 * flight (up to --max-conn-requests, 64: 16 GiB) and (2) answered `busy`
 * whenever more than --max-queue requests waited.
 *
 * Bounded: each wait has a deadline; a reply that does not come within 60 s
 * fails the test.  GKC_TEST_SEED replays the data.
 */
#include <errno.h>
#include <math.h>
#include <msgpack.h>
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
#include "proto_frame.h"
#include "rawrpc.h"
#include "test.h"

#define MiB (1024L * 1024)

/* ------------------------------------------------------------------------ */
/* 1. a client that never reads                                              */

static void test_never_reads(void) {
  rr_ctx = "a client that never reads its 256 MiB replies";
  enum { NREQ = 6, DIM = 8192 };
  const long budget = 1024 * MiB, reply = (long)DIM * DIM * 4;
  const char *env[] = {pb_asan_env(), NULL};
  const char *const args[] = {"--memory-budget", "1G", NULL};
  fixture f;
  fixture_start(&f, args, env);

  rr_conn good;
  rr_open(&good, &f);
  uint32_t gid = 1;
  int good_ok = 0, good_n = 0;
  char why[300];
  for (int i = 0; i < 5; i++, good_n++) good_ok += pb_reduce_ok(&good, gid++, 1000, 5000, NULL, 0);
  long rss0 = fixture_rss_kib(&f);
  pb_rss_watch rw;
  pb_rss_start(&rw, &f, 10);

  float *a = rr_rand_floats((size_t)NREQ * DIM), *b = rr_rand_floats((size_t)NREQ * DIM);
  rr_frame fr;
  pb_pack_outer_sgemms(&fr, 0, NREQ, DIM, DIM, a, DIM, b, DIM);
  rr_conn slow;
  rr_open(&slow, &f);
  rr_sender s = {slow.fd, fr.sb.data, fr.sb.size, 0};
  pthread_t th;
  pthread_create(&th, NULL, rr_sender_main, &s);

  /* The other client works while the first reply is computed and stalls in
   * the slow client's socket; status is read from its connection. */
  const char *paths[] = {"held", "memory.replies", "methods.sgemm.requests", "memory.used"};
  double st[4] = {0}, worst = 0, t0 = rr_now_s();
  int settled = 0;
  while (rr_now_s() - t0 < 60) {
    double t1 = rr_now_s();
    int ok = pb_reduce_ok(&good, gid++, 1000, 20000, why, sizeof why);
    if (rr_now_s() - t1 > worst) worst = rr_now_s() - t1;
    if (!ok) fprintf(stderr, "other client, request %u: %s\n", gid - 1, why);
    good_ok += ok, good_n++;
    pb_status_on(&good, paths, 4, st);
    if (st[0] >= 1 && st[1] >= reply - 4 * MiB) settled++;
    if (settled >= 20) break; /* a while in the steady state */
    rr_sleep_ms(50);
  }
  fprintf(stderr, "never reads: after %.1f s: held %g, memory.replies %g, sgemm requests read %g,"
          " memory.used %g; other client's slowest reply %.3f s\n", rr_now_s() - t0, st[0], st[1], st[2],
          st[3], worst);
  CHECK(st[0] >= 1, "status held = %g: gkcd did not hold back a request of the client that reads nothing",
        st[0]);
  /* Unwritten bytes stay charged: all of the first reply but what the
   * socket buffers took (a few hundred KiB). */
  CHECK(st[1] >= reply - 4 * MiB && st[1] <= reply + 2 * MiB, "memory.replies = %g, want about %ld",
        st[1], reply);
  CHECK(st[3] <= budget, "memory.used = %g over the budget %ld", st[3], budget);
  /* Read: the one answered and the one held; nothing more is taken off
   * the socket while it stays unread. */
  double taken = st[2];
  CHECK(taken >= 2 && taken < NREQ, "gkcd read %g of the %d requests of a client that reads nothing", taken,
        NREQ);
  for (int i = 0; i < 10; i++, good_n++) good_ok += pb_reduce_ok(&good, gid++, 1000, 20000, NULL, 0);
  pb_status_on(&good, paths, 4, st);
  CHECK(st[2] == taken, "gkcd went on reading the client that reads nothing: %g sgemm requests, then %g",
        taken, st[2]);
  long rss_max = pb_rss_stop(&rw);
  long bound = (budget + 64 * MiB) / 1024;
  fprintf(stderr, "never reads: gkcd RSS %ld KiB idle, max %ld KiB while the client did not read"
          " (growth %ld KiB; bound --memory-budget + 64 MiB = %ld KiB)\n", rss0, rss_max, rss_max - rss0, bound);
  CHECK(rss_max - rss0 < bound, "gkcd RSS grew by %ld KiB, over --memory-budget + 64 MiB", rss_max - rss0);
  /* What it should hold is one reply (the held request is 64 KiB): the
   * issue's bound above is the budget's promise, this one the connection's. */
  CHECK(rss_max - rss0 < (reply + 64 * MiB) / 1024, "gkcd RSS grew by %ld KiB, more than one reply + 64 MiB",
        rss_max - rss0);
  CHECK(good_ok == good_n, "other client: %d of %d requests right", good_ok, good_n);

  /* Now it reads: every reply arrives, right, in order. */
  int right = 0;
  for (int i = 0; i < NREQ; i++) {
    rr_reply r;
    rr_get_reply(&slow, &r, 60000);
    const msgpack_object *cb = rr_result_bin(&r, "c", (size_t)reply);
    int ok = cb && r.msgid == (uint32_t)i &&
             rr_sgemm_entries_ok(cb->via.bin.ptr, a + (size_t)i * DIM, b + (size_t)i * DIM, DIM, DIM, 1, 1.0,
                                 256, why, sizeof why);
    if (!ok) fprintf(stderr, "slow client, reply %d: %s\n", i, cb ? why : rr_reply_desc(&r));
    right += ok;
    int stop = !r.got;
    rr_reply_free(&r);
    if (stop) break;
  }
  pthread_join(th, NULL);
  CHECK(s.err == 0, "sending the slow client's requests: %s", strerror(s.err));
  CHECK(right == NREQ, "slow client: %d of %d replies right once it read", right, NREQ);
  CHECK(rr_ping(&slow, 5000, NULL, 0), "the slow client's connection is unusable after it read");
  double replies = pb_wait_status(&f, "memory.replies", 0, 5000);
  CHECK(replies == 0, "memory.replies = %g with every reply read", replies);
  double used = pb_wait_status(&f, "memory.used", 0, 5000);
  CHECK(used == 0, "memory.used = %g with nothing in flight", used);
  rr_close(&slow);
  rr_close(&good);
  rr_frame_free(&fr);
  free(a);
  free(b);
  PB_STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 1b. a client that writes all its requests before it reads                 */

/* The plainest pipelining client: one blocking write of every request, then
 * the replies.  Its unread replies (4.5 MiB here) are far below
 * --max-conn-reply-bytes, so PROTOCOL.md's flow control never asks it to
 * read sooner; but they are charged to a 4 MiB --memory-budget, its later
 * requests wait for that memory, and with --budget-queue 2 full the daemon
 * takes no new frames.  It must still read the socket the client is blocked
 * writing to (without parsing): before that rule nothing moved until
 * --send-timeout (here 10 s, so a regression stays short) closed it.
 * Every reply must arrive, right. */
static void test_writes_then_reads(void) {
  rr_ctx = "a client that writes all its requests, then reads";
  enum { BD = 384, NREQ = 8 }; /* each 1.2 MB of request, 0.6 MB of result */
  const char *const args[] = {"--memory-budget", "4M", "--budget-queue", "2", "--threads", "1", "--queue-wait", "0",
                              "--send-timeout", "10", NULL};
  fixture f;
  fixture_start(&f, args, NULL);
  float *a = rr_rand_floats(BD * BD), *b = rr_rand_floats(BD * BD);
  rr_frame fr;
  rr_frame_init(&fr);
  for (int i = 0; i < NREQ; i++)
    rr_pack_request(&fr, (uint32_t)i, "sgemm",
                    ARGS(AI("m", BD), AI("n", BD), AI("k", BD), AB("a", a, BD * BD * 4), AB("b", b, BD * BD * 4),
                         AF("alpha", 1.0 + i)));
  rr_conn c;
  rr_open(&c, &f);
  double t0 = rr_now_s();
  int e = rr_send_some(c.fd, fr.sb.data, fr.sb.size);
  double t_sent = rr_now_s() - t0;
  CHECK(e == 0, "writing %zu bytes of requests: %s after %.1f s (the daemon closed the connection: %g by"
        " --send-timeout)", fr.sb.size, strerror(e), t_sent, pb_status(&f, "closed_send_timeout"));
  int right = 0;
  char why[200];
  for (int i = 0; i < NREQ && !e; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 20000);
    const msgpack_object *cb = rr_result_bin(&r, "c", BD * BD * 4);
    int ok = cb && r.msgid < NREQ &&
             rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, BD, BD, BD, 1.0 + r.msgid, 16, why, sizeof why);
    if (!ok) fprintf(stderr, "writes then reads, reply %d: %s %s\n", i, rr_reply_desc(&r), cb ? why : "");
    right += ok;
    int stop = !r.got;
    rr_reply_free(&r);
    if (stop) break;
  }
  fprintf(stderr, "writes then reads: requests written in %.2f s, %d of %d replies right after %.2f s\n", t_sent,
          right, NREQ, rr_now_s() - t0);
  CHECK(right == NREQ, "%d of %d replies right", right, NREQ);
  rr_close(&c);
  rr_frame_free(&fr);
  free(a), free(b);
  PB_STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 2. a flood at the default queue settings                                 */

#define FLOOD_CONNS 64
#define FLOOD_WINDOW 64
#define FLOOD_MAXLEN 256

typedef struct {
  const fixture *f;
  int id, nreq;
  uint64_t seed;
  double *ref, *mag;     /* per msgid */
  unsigned char *seen;   /* per msgid: replies received */
  long right, wrong, errors, dups, unknown;
  char first_bad[300];
  int failed;            /* the connection broke or stalled */
} flooder;

static int g_flood_done;

static void flood_bad(flooder *w, const char *fmt, const char *a, uint64_t id) {
  if (!w->first_bad[0]) snprintf(w->first_bad, sizeof w->first_bad, fmt, a, (unsigned long long)id);
}

static void flood_reply(flooder *w, const unsigned char *p, size_t len) {
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  size_t off = 0;
  if (msgpack_unpack_next(&up, (const char *)p, len, &off) != MSGPACK_UNPACK_SUCCESS ||
      up.data.type != MSGPACK_OBJECT_ARRAY || up.data.via.array.size != 4 ||
      up.data.via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
    w->unknown++;
    flood_bad(w, "%s%llu", "a frame that is not a reply with a msgid, #", (uint64_t)w->unknown);
    msgpack_unpacked_destroy(&up);
    return;
  }
  const msgpack_object *a = up.data.via.array.ptr;
  uint64_t id = a[1].via.u64;
  if (id >= (uint64_t)w->nreq) {
    w->unknown++;
    flood_bad(w, "%s%llu", "a reply to msgid never sent: ", id);
  } else if (w->seen[id]++) {
    w->dups++;
    flood_bad(w, "%s%llu", "a second reply to msgid ", id);
  } else if (a[2].type != MSGPACK_OBJECT_NIL) {
    w->errors++;
    const msgpack_object *code = a[2].type == MSGPACK_OBJECT_MAP ? proto_map_get(&a[2], "code") : NULL;
    char c[48] = "?";
    if (code && code->type == MSGPACK_OBJECT_STR)
      snprintf(c, sizeof c, "%.*s", (int)code->via.str.size, code->via.str.ptr);
    flood_bad(w, "error %s for msgid %llu", c, id);
  } else {
    double got = rr_num(proto_map_get(&a[3], "value"));
    if (fabs(got - w->ref[id]) <= 1e-5 * w->mag[id] + 1e-6)
      w->right++;
    else {
      w->wrong++;
      flood_bad(w, "%s%llu", "a wrong sum for msgid ", id);
    }
  }
  msgpack_unpacked_destroy(&up);
}

/* One connection: keeps FLOOD_WINDOW requests in flight until nreq are
 * answered, with a poll loop (never blocked in send while replies wait). */
static void *flood_main(void *vp) {
  flooder *w = vp;
  rr_rng = w->seed;
  int fd = fixture_connect(w->f);
  rr_frame out;
  rr_frame_init(&out);
  size_t out_off = 0, have = 0, cap = 1 << 20;
  unsigned char *in = malloc(cap);
  float x[FLOOD_MAXLEN];
  int next = 0, inflight = 0;
  long answered = 0;
  static const proto_limits lim = {(size_t)1 << 30, 1u << 20, 32};
  while (answered < w->nreq) {
    while (inflight < FLOOD_WINDOW && next < w->nreq) {
      size_t n = 1 + test_rand_u64(&rr_rng) % FLOOD_MAXLEN;
      double ref = 0, mag = 0;
      for (size_t i = 0; i < n; i++) {
        x[i] = test_rand_f32(&rr_rng);
        ref += x[i], mag += fabs(x[i]);
      }
      w->ref[next] = ref, w->mag[next] = mag;
      rr_pack_request(&out, (uint32_t)next, "reduce", ARGS(AB("x", x, n * 4)));
      next++, inflight++;
    }
    struct pollfd p = {fd, POLLIN | (out_off < out.sb.size ? POLLOUT : 0), 0};
    int pr = poll(&p, 1, 60000);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      snprintf(w->first_bad, sizeof w->first_bad, "no progress for 60 s with %d in flight", inflight);
      w->failed = 1;
      break;
    }
    if (p.revents & POLLOUT) {
      ssize_t s = send(fd, out.sb.data + out_off, out.sb.size - out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (s < 0 && errno != EAGAIN && errno != EINTR) {
        snprintf(w->first_bad, sizeof w->first_bad, "send: %s", strerror(errno));
        w->failed = 1;
        break;
      }
      if (s > 0) out_off += (size_t)s;
      if (out_off == out.sb.size) out_off = out.sb.size = 0;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      if (cap - have < 65536) in = realloc(in, cap *= 2);
      ssize_t r = recv(fd, in + have, cap - have, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) {
        snprintf(w->first_bad, sizeof w->first_bad, "the daemon closed the connection (%s) with %d in flight",
                 r < 0 ? strerror(errno) : "EOF", inflight);
        w->failed = 1;
        break;
      }
      have += (size_t)r;
      size_t pos = 0;
      for (;;) {
        proto_frame_info info;
        ssize_t len = proto_frame_scan(in + pos, have - pos, &lim, &info);
        if (len == PROTO_PARTIAL) break;
        if (len < 0) {
          snprintf(w->first_bad, sizeof w->first_bad, "a malformed frame from the daemon (%zd)", len);
          w->failed = 1;
          goto done;
        }
        flood_reply(w, in + pos, (size_t)len);
        pos += (size_t)len;
        answered++, inflight--;
      }
      memmove(in, in + pos, have - pos);
      have -= pos;
    }
  }
done:
  close(fd);
  free(in);
  rr_frame_free(&out);
  __atomic_add_fetch(&g_flood_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Runs the flood; returns the number of requests answered right.  Samples
 * the daemon's `queued` from its own connection (the most seen). */
static long run_flood(const fixture *f, int per_conn, uint64_t seed, double *queued_max, long *problems) {
  static flooder w[FLOOD_CONNS];
  pthread_t th[FLOOD_CONNS];
  g_flood_done = 0;
  for (int i = 0; i < FLOOD_CONNS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].f = f;
    w[i].id = i;
    w[i].nreq = per_conn;
    w[i].seed = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
    w[i].ref = malloc(sizeof(double) * (size_t)per_conn);
    w[i].mag = malloc(sizeof(double) * (size_t)per_conn);
    w[i].seen = calloc((size_t)per_conn, 1);
    if (!w[i].ref || !w[i].mag || !w[i].seen) TEST_FAIL("out of memory");
  }
  rr_conn watch;
  rr_open(&watch, f);
  for (int i = 0; i < FLOOD_CONNS; i++) pthread_create(&th[i], NULL, flood_main, &w[i]);
  *queued_max = 0;
  const char *path = "queued";
  while (__atomic_load_n(&g_flood_done, __ATOMIC_ACQUIRE) < FLOOD_CONNS) {
    double q;
    pb_status_on(&watch, &path, 1, &q);
    if (q > *queued_max) *queued_max = q;
    rr_sleep_ms(20);
  }
  rr_close(&watch);
  long right = 0;
  *problems = 0;
  for (int i = 0; i < FLOOD_CONNS; i++) {
    pthread_join(th[i], NULL);
    long lost = 0;
    for (int j = 0; j < per_conn; j++) lost += !w[i].seen[j];
    long bad = w[i].wrong + w[i].errors + w[i].dups + w[i].unknown + lost + w[i].failed;
    if (bad)
      fprintf(stderr, "flood connection %d: %ld right, %ld wrong, %ld errors, %ld duplicated, %ld unknown,"
              " %ld lost; first: %s\n", i, w[i].right, w[i].wrong, w[i].errors, w[i].dups, w[i].unknown, lost,
              w[i].first_bad);
    *problems += bad;
    right += w[i].right;
    free(w[i].ref), free(w[i].mag), free(w[i].seen);
  }
  return right;
}

static void test_flood(uint64_t seed) {
  rr_ctx = "64 connections x 64 in flight at the default queue settings";
  int per_conn = (int)pb_env_num("GKC_FLOOD_REQUESTS", 2000);
  if (per_conn < 1 || per_conn > 10000000) TEST_FAIL("GKC_FLOOD_REQUESTS out of range");
  const char *env[] = {pb_asan_env(), NULL};
  fixture f;
  fixture_start(&f, NULL, env);
  double qmax;
  long problems;
  /* A warm-up of the same load settles the allocator; RSS is measured from
   * after it. */
  long right = run_flood(&f, 200, seed ^ 0x5bd1e995, &qmax, &problems);
  CHECK(right == FLOOD_CONNS * 200L && problems == 0, "warm-up: %ld right, %ld problems", right, problems);
  long rss0 = fixture_rss_kib(&f);
  pb_rss_watch rw;
  pb_rss_start(&rw, &f, 20);
  double t0 = rr_now_s();
  right = run_flood(&f, per_conn, seed, &qmax, &problems);
  double dt = rr_now_s() - t0;
  long rss_max = pb_rss_stop(&rw);
  long total = (long)FLOOD_CONNS * per_conn;
  fprintf(stderr, "flood: %ld requests (%d connections x %d, %d in flight each) in %.2f s (%.0f/s); %ld right,"
          " %ld problems; most queued seen %g (--max-queue 1024); gkcd RSS %ld KiB after warm-up, max %ld KiB\n",
          total, FLOOD_CONNS, per_conn, FLOOD_WINDOW, dt, total / dt, right, problems, qmax, rss0, rss_max);
  CHECK(right == total && problems == 0, "%ld of %ld replies right, %ld errors, lost, duplicated or wrong",
        right, total, problems);
  /* Flat: what the daemon holds for 4,096 small requests in flight is a
   * few MiB; 64 MiB allows for the allocator and ASan. */
  CHECK(rss_max - rss0 < 64 * 1024, "gkcd RSS grew by %ld KiB during the flood", rss_max - rss0);
  const char *paths[] = {"expired_wait", "methods.reduce.errors", "methods.reduce.requests", "in_flight",
                         "queued", "memory.used", "memory.input", "memory.replies"};
  double st[8];
  rr_conn c;
  rr_open(&c, &f);
  for (int i = 0; i < 100; i++) { /* closing connections give their input back */
    pb_status_on(&c, paths, 8, st);
    if (st[3] == 0 && st[5] == 0 && st[6] == 0 && st[7] == 0) break;
    rr_sleep_ms(20);
  }
  rr_close(&c);
  CHECK(st[0] == 0, "status expired_wait = %g: requests were answered busy", st[0]);
  CHECK(st[1] == 0, "status methods.reduce.errors = %g", st[1]);
  CHECK(st[2] == total + FLOOD_CONNS * 200.0, "status methods.reduce.requests = %g, sent %ld", st[2],
        total + FLOOD_CONNS * 200L);
  CHECK(st[3] == 0 && st[4] == 0, "in_flight %g, queued %g after the flood", st[3], st[4]);
  CHECK(st[5] == 0 && st[6] == 0 && st[7] == 0, "memory used %g, input %g, replies %g after the flood", st[5],
        st[6], st[7]);
  PB_STOP_DAEMON(&f);
}

int main(void) {
  double t0 = rr_now_s();
  uint64_t seed = test_seed();
  rr_rng = seed;
  signal(SIGPIPE, SIG_IGN);
  SECTION(test_never_reads());
  SECTION(test_writes_then_reads());
  SECTION(test_flood(seed));
  rr_print_totals("e2e_backpressure", t0);
  return rr_failed ? 1 : 0;
}
