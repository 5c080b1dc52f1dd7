/* e2e_errors_sizes.c: too_large (the default limits, and a daemon with
 * --max-request-bytes 64K) and the complexity limits, against a real gkcd.
 *
 * For each error it checks the code, the msgid (nil when the daemon cannot
 * know it), that the message names the offending argument where there is
 * one, and what happens to the connection: "stays open" is proved by a ping
 * answered afterwards on the same socket, "closed" by end-of-stream right
 * after the error reply (tests/lib/errcheck.h).  Checks do not stop the test at
 * the first failure: each one is counted, a failure is printed with its line,
 * and the exit status is 0 only when all passed (77, skipped, when none
 * ran).  Set GKC_TEST_SEED to replay the random data.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <msgpack.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errcheck.h"
#include "fixture.h"
#include "gkc.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* too_large                                                                 */

static void test_too_large(const fixture *d) {
  rr_conn c;
  rr_reply r;

  /* (a) a result too large: stays open. */
  rr_ctx = "too_large: sgemm result 16 GiB";
  rr_open(&c, d);
  {
    float *a = rr_rand_floats(65536), *b = rr_rand_floats(65536);
    call(&c, 77, "sgemm", ARGS(AI("m", 65536), AI("n", 65536), AI("k", 1), AB("a", a, 65536 * 4),
                               AB("b", b, 65536 * 4)), &r);
    CHECK_ERROR(&r, "too_large", 77, "--max-request-bytes", NULL);
    rr_reply_free(&r);
    free(a);
    free(b);
  }
  CHECK_OPEN(&c);
  CHECK_SMALL_SGEMM(&c, 78);
  rr_close(&c);

  /* (b) a request whose argument declares a 4 GiB bin and never sends it. */
  rr_ctx = "too_large: [0, 9, \"sgemm\", [{\"a\": bin32(0xFFFFFFFF)";
  rr_open(&c, d);
  {
    static const unsigned char hostile[] = {0x94, 0x00, 0x09, 0xa5, 's', 'g', 'e', 'm', 'm', 0x91,
                                            0x81, 0xa1, 'a', 0xc6, 0xff, 0xff, 0xff, 0xff};
    double t0 = rr_now_s();
    send_raw(&c, hostile, sizeof hostile);
    rr_get_reply(&c, &r, 10000);
    double dt = rr_now_s() - t0;
    CHECK_ERROR(&r, "too_large", 9, "--max-request-bytes", NULL);
    CHECK(dt < 2.0, "reply took %.2f s: the daemon should answer at once", dt);
    rr_reply_free(&r);
    CHECK_CLOSED(&c);
  }
  rr_close(&c);

  /* (c) a top-level bin32 declaring 4 GiB: nil msgid. */
  rr_ctx = "too_large: top-level bin32(0xFFFFFFFF)";
  rr_open(&c, d);
  send_lit(&c, "\xc6\xff\xff\xff\xff");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "too_large", -1, NULL, NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);

  /* A str32 method name declaring 1 GiB + 1: same rule for every length. */
  rr_ctx = "too_large: method str32(2^30)";
  rr_open(&c, d);
  send_lit(&c, "\x94\x00\x11\xdb\x40\x00\x00\x00");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "too_large", 17, NULL, NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);
}

/* (d) a daemon with --max-request-bytes 64K. */
static void test_too_large_limit(void) {
  fixture d;
  const char *args[] = {"--max-request-bytes", "64K", "--threads", "2", NULL};
  fixture_start(&d, args, NULL);
  rr_conn c;
  rr_reply r;
  float *x = rr_rand_floats(25000);

  rr_ctx = "64K limit: a 60 KB reduce is fine";
  rr_open(&c, &d);
  call(&c, 1, "reduce", ARGS(AB("x", x, 15000 * 4)), &r);
  {
    double ref = 0, mag = 0;
    for (int i = 0; i < 15000; i++) ref += x[i], mag += fabs(x[i]);
    double got = r.valid && !r.is_error ? rr_num(proto_map_get(r.result, "value")) : NAN;
    CHECK(fabs(got - ref) <= 1e-5 * mag, "sum %.9g vs %.9g (%s)", got, ref, r.msg);
  }
  rr_reply_free(&r);

  rr_ctx = "64K limit: sgemm result of 160 KB is too_large, connection stays open";
  {
    float *a = rr_rand_floats(200), *b = rr_rand_floats(200);
    call(&c, 2, "sgemm", ARGS(AI("m", 200), AI("n", 200), AI("k", 1), AB("a", a, 800), AB("b", b, 800)), &r);
    CHECK_ERROR(&r, "too_large", 2, "--max-request-bytes", NULL);
    rr_reply_free(&r);
    free(a);
    free(b);
  }
  CHECK_OPEN(&c);

  rr_ctx = "64K limit: a real 100 KB reduce request";
  {
    rr_frame f;
    rr_frame_init(&f);
    rr_pack_request(&f, 3, "reduce", ARGS(AB("x", x, 25000 * 4)));
    CHECK(f.sb.size > 100000, "frame is %zu bytes", f.sb.size);
    rr_send_some(c.fd, f.sb.data, f.sb.size); /* the daemon may close before taking it all */
    rr_frame_free(&f);
    rr_get_reply(&c, &r, 10000);
    CHECK_ERROR(&r, "too_large", 3, "65536", NULL);
    rr_reply_free(&r);
    CHECK_CLOSED(&c);
  }
  rr_close(&c);

  rr_ctx = "64K limit: other connections unaffected";
  rr_open(&c, &d);
  CHECK_OPEN(&c);
  rr_close(&c);
  int st = fixture_stop(&d, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x", st);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* complexity limits                                                         */

static void test_complexity(const fixture *d) {
  rr_conn c;
  rr_reply r;

  rr_ctx = "complexity: array32 declaring 2^32-1 elements";
  rr_open(&c, d);
  send_lit(&c, "\xdd\xff\xff\xff\xff");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "invalid_request", -1, NULL, NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);

  rr_ctx = "complexity: map32 declaring 2^31 pairs inside a request";
  rr_open(&c, d);
  send_lit(&c, "\x94\x00\x15\xa6reduce\x91\xdf\x80\x00\x00\x00");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "invalid_request", 21, NULL, NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);

  rr_ctx = "complexity: arrays nested 100 deep";
  rr_open(&c, d);
  {
    unsigned char deep[101];
    memset(deep, 0x91, 100);
    deep[100] = 0xc0;
    send_raw(&c, deep, sizeof deep);
    rr_get_reply(&c, &r, 10000);
    CHECK_ERROR(&r, "invalid_request", -1, NULL, NULL);
    rr_reply_free(&r);
    CHECK_CLOSED(&c);
  }
  rr_close(&c);

  /* [0, 30, "ping", [{"x": [[...[nil]...]]}]]: the envelope is 3 deep
   * (array, params array, map), so `extra` more arrays make 3 + extra. */
  for (int extra = 13; extra <= 14; extra++) {
    rr_ctx = extra == 13 ? "complexity: nesting exactly 16 is accepted"
                         : "complexity: nesting 17 is refused";
    rr_open(&c, d);
    unsigned char buf[64];
    size_t n = 0;
    memcpy(buf, "\x94\x00\x1e\xa4ping\x91\x81\xa1x", 12);
    n = 12;
    for (int i = 0; i < extra; i++) buf[n++] = 0x91;
    buf[n++] = 0xc0;
    send_raw(&c, buf, n);
    rr_get_reply(&c, &r, 10000);
    if (extra == 13) {
      CHECK_ERROR(&r, "invalid_argument", 30, "ping", NULL); /* ping takes no arguments */
      rr_reply_free(&r);
      CHECK_OPEN(&c);
    } else {
      CHECK_ERROR(&r, "invalid_request", 30, "16", NULL);
      rr_reply_free(&r);
      CHECK_CLOSED(&c);
    }
    rr_close(&c);
  }

  /* [0, 35, "ping", [{"x": [nil * N]}]] holds 8 + N objects. */
  for (int total = 4096; total <= 4097; total++) {
    rr_ctx = total == 4096 ? "complexity: exactly 4096 objects are accepted"
                           : "complexity: 4097 objects are refused";
    rr_open(&c, d);
    rr_frame f;
    rr_frame_init(&f);
    proto_pack_request_head(&f.pk, 35, "ping");
    msgpack_pack_map(&f.pk, 1);
    proto_pack_cstr(&f.pk, "x");
    msgpack_pack_array(&f.pk, (size_t)total - 8);
    for (int i = 0; i < total - 8; i++) msgpack_pack_nil(&f.pk);
    rr_send_some(c.fd, f.sb.data, f.sb.size);
    rr_frame_free(&f);
    rr_get_reply(&c, &r, 10000);
    if (total == 4096) {
      CHECK_ERROR(&r, "invalid_argument", 35, "ping", NULL); /* accepted; ping takes no arguments */
      rr_reply_free(&r);
      CHECK_OPEN(&c);
    } else {
      CHECK_ERROR(&r, "invalid_request", 35, "4096", NULL);
      rr_reply_free(&r);
      CHECK_CLOSED(&c);
    }
    rr_close(&c);
  }

  rr_ctx = "complexity: 5000 elements in one array";
  rr_open(&c, d);
  {
    rr_frame f;
    rr_frame_init(&f);
    proto_pack_request_head(&f.pk, 31, "reduce");
    msgpack_pack_map(&f.pk, 1);
    proto_pack_cstr(&f.pk, "x");
    msgpack_pack_array(&f.pk, 5000);
    for (int i = 0; i < 5000; i++) msgpack_pack_int(&f.pk, i & 127);
    rr_send_some(c.fd, f.sb.data, f.sb.size);
    rr_frame_free(&f);
    rr_get_reply(&c, &r, 10000);
    CHECK_ERROR(&r, "invalid_request", 31, "4096", NULL);
    rr_reply_free(&r);
    CHECK_CLOSED(&c);
  }
  rr_close(&c);

  rr_ctx = "complexity: 4100 objects spread over small arrays";
  rr_open(&c, d);
  {
    rr_frame f;
    rr_frame_init(&f);
    proto_pack_request_head(&f.pk, 32, "reduce");
    msgpack_pack_map(&f.pk, 1);
    proto_pack_cstr(&f.pk, "x");
    msgpack_pack_array(&f.pk, 410);
    for (int i = 0; i < 410; i++) {
      msgpack_pack_array(&f.pk, 9);
      for (int j = 0; j < 9; j++) msgpack_pack_nil(&f.pk);
    }
    rr_send_some(c.fd, f.sb.data, f.sb.size);
    rr_frame_free(&f);
    rr_get_reply(&c, &r, 10000);
    CHECK_ERROR(&r, "invalid_request", 32, "4096", NULL);
    rr_reply_free(&r);
    CHECK_CLOSED(&c);
  }
  rr_close(&c);
}

int main(void) {
  double t0 = rr_now_s();
  fixture d;
  errcheck_start(&d);
  SECTION(test_too_large(&d));
  SECTION(test_complexity(&d));
  errcheck_after_errors(&d, 10);
  SECTION(test_too_large_limit());
  rr_print_totals("e2e_errors_sizes", t0);
  return rr_failed ? 1 : 0;
}
