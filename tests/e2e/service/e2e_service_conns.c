/* e2e_service_conns.c: per-connection limits, against real gkcd processes:
 *
 *  5. back-pressure: --max-conn-requests, and a client that never reads its
 *     replies (--max-conn-reply-bytes) neither blocks others nor makes the
 *     daemon buffer them all;
 *  9. --max-connections, and running out of descriptors (EMFILE) below it:
 *     gkcd pauses accepting, serves the connections it has, and accepts
 *     again once some close.
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
/* 5. back-pressure                                                          */

static void test_max_conn_requests(void) {
  fixture f;
  const char *const args[] = {"--max-conn-requests", "2", "--threads", "2", NULL};
  fixture_start(&f, args, NULL);

  rr_ctx = "back-pressure: 100 pipelined requests, --max-conn-requests 2";
  {
    enum { NREQ = 100, NX = 256 };
    float *x = rr_rand_floats((size_t)NREQ * NX);
    double ref[NREQ], mag[NREQ];
    rr_frame fr;
    rr_frame_init(&fr);
    for (int i = 0; i < NREQ; i++) {
      ref[i] = mag[i] = 0;
      for (int j = 0; j < NX; j++) ref[i] += x[i * NX + j], mag[i] += fabs(x[i * NX + j]);
      rr_pack_request(&fr, 1000 + (uint32_t)i, "reduce", ARGS(AB("x", x + (size_t)i * NX, NX * 4)));
    }
    rr_conn c;
    rr_open(&c, &f);
    /* About 27 KB: the socket buffers take it all, then the replies come. */
    test_send_all(c.fd, fr.sb.data, fr.sb.size);
    int seen[NREQ] = {0}, good = 0, bad = 0;
    for (int i = 0; i < NREQ; i++) {
      rr_reply r;
      rr_get_reply(&c, &r, 10000);
      if (!r.valid || r.is_error || r.msgid < 1000 || r.msgid >= 1000 + NREQ) {
        if (bad++ < 3) fprintf(stderr, "reply %d: %s (msgid %u)\n", i, rr_reply_desc(&r), r.msgid);
        int stop = !r.got;
        rr_reply_free(&r);
        if (stop) break;
        continue;
      }
      int j = (int)(r.msgid - 1000);
      double v = rr_num(proto_map_get(r.result, "value"));
      if (!seen[j]++ && fabs(v - ref[j]) <= 1e-5 * mag[j]) good++;
      rr_reply_free(&r);
    }
    CHECK(good == NREQ && bad == 0, "%d of %d pipelined requests answered correctly, %d bad", good, NREQ, bad);
    CHECK(rr_ping(&c, 5000, NULL, 0), "connection unusable afterwards");
    rr_close(&c);
    rr_frame_free(&fr);
    free(x);
  }

  /* Compute-heavy requests, so that a connection's work in flight can be
   * watched: with the limit, no more than 2 are ever in flight. */
  rr_ctx = "back-pressure: in_flight never exceeds --max-conn-requests 2";
  {
    enum { NREQ = 12, D = 320 };
    float *a = rr_rand_floats(D * D), *b = rr_rand_floats(D * D);
    rr_frame fr;
    rr_frame_init(&fr);
    for (int i = 0; i < NREQ; i++)
      rr_pack_request(&fr, 2000 + (uint32_t)i, "sgemm",
                      ARGS(AI("m", D), AI("n", D), AI("k", D), AB("a", a, D * D * 4), AB("b", b, D * D * 4),
                           AF("alpha", 1.0 + i)));
    rr_conn c, side;
    rr_open(&c, &f);
    rr_open(&side, &f);
    rr_sender s = {c.fd, fr.sb.data, fr.sb.size, 0};
    pthread_t th;
    pthread_create(&th, NULL, rr_sender_main, &s);
    int got = 0, good = 0, samples = 0;
    double max_in_flight = 0;
    double t0 = rr_now_s();
    while (got < NREQ && rr_now_s() - t0 < 30) {
      rr_reply r;
      rr_get_reply(&c, &r, 2);
      if (r.got) {
        got++;
        const msgpack_object *cb = rr_result_bin(&r, "c", D * D * 4);
        char why[200] = "";
        if (cb && r.msgid >= 2000 && r.msgid < 2000 + NREQ &&
            rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, D, D, D, 1.0 + (r.msgid - 2000), 4, why, sizeof why))
          good++;
        else
          fprintf(stderr, "sgemm reply: %s %s\n", rr_reply_desc(&r), why);
      } else if (r.rf != RF_TIMEOUT) {
        fprintf(stderr, "sgemm replies: %s\n", rr_rf_name(r.rf));
        rr_reply_free(&r);
        break;
      }
      rr_reply_free(&r);
      double v = status_on(&side, "in_flight");
      samples++;
      if (v > max_in_flight) max_in_flight = v;
    }
    pthread_join(th, NULL);
    CHECK(good == NREQ, "%d of %d sgemm answered correctly", good, NREQ);
    CHECK(max_in_flight <= 2 && max_in_flight >= 1, "max in_flight seen %g (in %d samples)", max_in_flight,
          samples);
    fprintf(stderr, "max-conn-requests 2: max in_flight %g over %d samples\n", max_in_flight, samples);
    rr_close(&side);
    rr_close(&c);
    rr_frame_free(&fr);
    free(a), free(b);
  }
  STOP_DAEMON(&f);
}

static void test_slow_reader(void) {
  rr_ctx = "back-pressure: a client that never reads";
  fixture f;
  /* --max-conn-requests 8 keeps what the daemon legitimately holds small
   * next to what it must not hold; on its own it would not stop the
   * reading (these requests finish at once), only the reply limit does. */
  const char *const args[] = {"--max-conn-reply-bytes", "1M", "--max-conn-requests", "8", NULL};
  fixture_start(&f, args, NULL);
  enum { NREQ = 200, M = 256, N = 256 }; /* k = 1: each result 256 KiB, each request 2 KiB */
  rr_conn good;
  rr_open(&good, &f);
  uint32_t gid = 1;
  int good_ok = 0, good_n = 0;
  char why[200];
  for (int i = 0; i < 5; i++, good_n++) good_ok += pb_reduce_with(&good, gid++, 1000, NULL, 5000, NULL, 0);
  long rss0 = fixture_rss_kib(&f);

  float *a = rr_rand_floats((size_t)NREQ * M), *b = rr_rand_floats((size_t)NREQ * N);
  rr_frame fr;
  pb_pack_outer_sgemms(&fr, 0, NREQ, M, N, a, M, b, N);
  rr_conn slow;
  rr_open(&slow, &f);
  /* About 420 KB: more than the socket buffers hold once gkcd stops
   * reading, so a thread sends it. */
  rr_sender s = {slow.fd, fr.sb.data, fr.sb.size, 0};
  pthread_t th;
  pthread_create(&th, NULL, rr_sender_main, &s);

  /* For 1.5 s the other client keeps working, and gkcd's memory is watched. */
  long rss_max = rss0;
  double worst = 0, t0 = rr_now_s();
  while (rr_now_s() - t0 < 1.5) {
    double t1 = rr_now_s();
    int ok = pb_reduce_with(&good, gid++, 1000, NULL, 5000, why, sizeof why);
    double dt = rr_now_s() - t1;
    if (dt > worst) worst = dt;
    if (!ok) fprintf(stderr, "good client, request %u: %s\n", gid - 1, why);
    good_ok += ok && dt < 2.0;
    good_n++;
    long rss = fixture_rss_kib(&f);
    if (rss > rss_max) rss_max = rss;
    rr_sleep_ms(10);
  }
  CHECK(good_ok == good_n, "other client: %d of %d requests answered correctly within 2 s (slowest %.3f s)",
        good_ok, good_n, worst);
  double taken = status_on(&good, "methods.sgemm.requests");
  CHECK(taken < NREQ, "gkcd read %g of the %d requests of a client that reads nothing", taken, NREQ);
  /* Bound: gkcd stops reading from the slow client once more than 1 MiB of
   * replies waits for it, but requests it has already taken still finish:
   * at most max-conn-requests (8) of them, 2 MiB, plus the 1 MiB, plus
   * buffered requests (~400 KB): about 4 MiB.  Holding every reply would
   * take 200 x 256 KiB = 50 MiB.  Measured: 3.1-3.6 MiB of growth (8 MiB
   * under ASan); the same run without --max-conn-reply-bytes grows by
   * 52 MiB (68 under ASan) and reads all 200.  16 MiB leaves room for
   * allocator overhead and ASan's quarantine and is still a third of 50. */
  long growth = rss_max - rss0, bound = 16 * 1024;
  fprintf(stderr, "slow reader: gkcd RSS %ld KiB before, max %ld KiB (growth %ld KiB, bound %ld KiB);"
          " %g of %d requests read; other client's slowest reply %.3f s\n",
          rss0, rss_max, growth, bound, taken, NREQ, worst);
  CHECK(growth < bound, "RSS grew by %ld KiB while a client did not read", growth);

  /* Now it reads: every reply arrives, right. */
  int seen[NREQ] = {0}, right = 0, in_order = 1, next = 0;
  for (int i = 0; i < NREQ; i++) {
    rr_reply r;
    rr_get_reply(&slow, &r, 20000);
    const msgpack_object *cb = rr_result_bin(&r, "c", (size_t)M * N * 4);
    if (!cb || r.msgid_nil || r.msgid >= NREQ) {
      fprintf(stderr, "slow reader, reply %d: %s\n", i, rr_reply_desc(&r));
      int stop = !r.got;
      rr_reply_free(&r);
      if (stop) break;
      continue;
    }
    uint32_t j = r.msgid;
    if ((int)j != next) in_order = 0;
    next = (int)j + 1;
    const float *aj = a + (size_t)j * M, *bj = b + (size_t)j * N;
    /* The checksum of C against the double reference (sum a)(sum b), and
     * every entry against a[i] * b[j]. */
    double sa = 0, sb = 0, ma = 0, mb = 0, sum = 0;
    for (int p = 0; p < M; p++) sa += aj[p], ma += fabs(aj[p]);
    for (int q = 0; q < N; q++) sb += bj[q], mb += fabs(bj[q]);
    int entries_ok = 1;
    for (int p = 0; p < M; p++)
      for (int q = 0; q < N; q++) {
        double v = rr_ld_f32(cb->via.bin.ptr, (size_t)p * N + q), want = (double)aj[p] * bj[q];
        sum += v;
        if (fabs(v - want) > 1e-6 * fabs(want) + 1e-30) entries_ok = 0;
      }
    if (!seen[j]++ && entries_ok && fabs(sum - sa * sb) <= 1e-5 * ma * mb)
      right++;
    else
      fprintf(stderr, "slow reader: msgid %u wrong (checksum %.9g, reference %.9g, entries %s, seen %d)\n",
              j, sum, sa * sb, entries_ok ? "ok" : "WRONG", seen[j]);
    rr_reply_free(&r);
  }
  pthread_join(th, NULL);
  CHECK(s.err == 0, "sending the slow client's requests: %s", strerror(s.err));
  CHECK(right == NREQ, "slow client: %d of %d replies right", right, NREQ);
  fprintf(stderr, "slow reader: %d replies, %s\n", right, in_order ? "in order" : "not in msgid order");
  CHECK(rr_ping(&slow, 5000, NULL, 0), "slow client's connection unusable afterwards");
  CHECK(rr_ping(&good, 5000, NULL, 0), "other client's connection unusable afterwards");
  rr_close(&slow);
  rr_close(&good);
  rr_frame_free(&fr);
  free(a), free(b);
  STOP_DAEMON(&f);
}

/* ------------------------------------------------------------------------ */
/* 9. max-connections                                                        */

static void test_max_connections(void) {
  rr_ctx = "max-connections 3";
  fixture f;
  const char *const args[] = {"--max-connections", "3", "--max-conn-per-user", "3", NULL};
  fixture_start(&f, args, NULL);
  /* fixture_start's own connection may still be closing: wait until none. */
  rr_conn c[5];
  rr_open(&c[0], &f);
  for (int i = 0; i < 200 && status_on(&c[0], "connections") > 1; i++) rr_sleep_ms(10);
  rr_open(&c[1], &f);
  rr_open(&c[2], &f);
  int pings = 0;
  for (int i = 0; i < 3; i++) pings += rr_ping(&c[i], 5000, NULL, 0);
  CHECK(pings == 3, "%d of 3 connections answered a ping", pings);
  double refused0 = status_on(&c[0], "refused_connections");

  rr_open(&c[3], &f);
  {
    rr_frame fr;
    rr_frame_init(&fr);
    rr_pack_request(&fr, 99, "ping", NULL, 0);
    rr_send_some(c[3].fd, fr.sb.data, fr.sb.size);
    rr_frame_free(&fr);
    rr_reply r;
    rr_get_reply(&c[3], &r, 5000);
    CHECK(r.notification && !strcmp(r.code, "too_many_connections") && strstr(r.msg, "--max-connections 3"),
          "4th connection: %s (want the too_many_connections notification naming the limit)", rr_reply_desc(&r));
    rr_reply_free(&r);
    rr_get_reply(&c[3], &r, 5000);
    CHECK(!r.got && r.rf == RF_CLOSED, "4th connection after the notification: %s (want closed)", rr_reply_desc(&r));
    rr_reply_free(&r);
  }
  double refused1 = status_on(&c[0], "refused_connections");
  CHECK(refused0 == 0 && refused1 >= 1, "refused_connections %g before, %g after", refused0, refused1);
  CHECK(strstr(rr_slurp(f.log), "max-connections") != NULL, "log does not name max-connections");
  for (int i = 0; i < 3; i++) pings += rr_ping(&c[i], 5000, NULL, 0);
  CHECK(pings == 6, "the 3 connections stopped working after the 4th was refused");

  /* Close one; once gkcd has seen that, a new connection works. */
  rr_close(&c[2]);
  double conns = -1;
  for (int i = 0; i < 200; i++) {
    conns = status_on(&c[0], "connections");
    if (conns <= 2) break;
    rr_sleep_ms(10);
  }
  CHECK(conns == 2, "connections = %g after closing one of 3", conns);
  rr_open(&c[4], &f);
  CHECK(rr_ping(&c[4], 5000, NULL, 0), "a new connection after one closed is not served");
  rr_close(&c[3]);
  rr_close(&c[4]);
  rr_close(&c[1]);
  rr_close(&c[0]);
  STOP_DAEMON(&f);
}

/* Below --max-connections, the process runs out of descriptors: accept4
 * fails with EMFILE, the pending connection stays queued, and gkcd pauses
 * polling the listening socket (listen.c) rather than spin on it.  The
 * connections it has go on being served; once some close, the queued ones
 * are accepted. */
static void test_out_of_descriptors(void) {
  rr_ctx = "out of descriptors";
  enum { LIMIT = 64, OPEN = 90 };
  fixture f;
  const char *const args[] = {"--max-connections", "1000", "--max-conn-per-user", "1000", NULL};
  fixture_nofile_limit = LIMIT;
  fixture_start(&f, args, NULL);
  fixture_nofile_limit = 0;
  static rr_conn c[OPEN];
  for (int i = 0; i < OPEN; i++) rr_open(&c[i], &f); /* connect() succeeds: the backlog holds them */
  int paused = 0;
  for (int i = 0; i < 500 && !paused; i++) {
    paused = strstr(rr_slurp(f.log), "pausing for") != NULL;
    if (!paused) rr_sleep_ms(10);
  }
  CHECK(paused, "gkcd with %d descriptors and %d connections did not say it paused accepting;"
        " log:\n%s", LIMIT, OPEN, rr_slurp(f.log));
  CHECK(rr_ping(&c[0], 5000, NULL, 0), "an accepted connection is not served while accepting is paused");
  double accepted = status_on(&c[0], "connections");
  CHECK(accepted > 1 && accepted < OPEN, "connections = %g with %d descriptors (want some, not all %d)",
        accepted, LIMIT, OPEN);
  /* Close all but the first and the last: the last was queued, and must now
   * be accepted and served. */
  for (int i = 1; i < OPEN - 1; i++) rr_close(&c[i]);
  char why[200] = "";
  CHECK(rr_ping(&c[OPEN - 1], 10000, why, sizeof why),
        "the connection queued while out of descriptors was not served once others closed: %s", why);
  CHECK(rr_ping(&c[0], 5000, NULL, 0), "the first connection stopped being served");
  rr_close(&c[OPEN - 1]);
  rr_close(&c[0]);
  STOP_DAEMON(&f);
}

int main(void) {
  svc_init();
  double t0 = rr_now_s();
  SECTION(test_max_conn_requests());
  SECTION(test_slow_reader());
  SECTION(test_max_connections());
  SECTION(test_out_of_descriptors());
  return svc_finish("e2e_service_conns", t0);
}
