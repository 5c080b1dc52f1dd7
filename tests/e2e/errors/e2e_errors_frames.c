/* e2e_errors_frames.c: parse_error and invalid_request (PROTOCOL.md), provoked
 * against a real gkcd with hand-built msgpack frames.
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
/* parse_error                                                               */

static void test_parse_error(const fixture *d) {
  rr_conn c;
  rr_reply r;

  rr_ctx = "parse_error: lone 0xc1";
  rr_open(&c, d);
  send_lit(&c, "\xc1");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "parse_error", -1, "msgpack", NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);

  rr_ctx = "parse_error: [0, 7, 0xc1";
  rr_open(&c, d);
  send_lit(&c, "\x94\x00\x07\xc1");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "parse_error", 7, NULL, NULL);
  rr_reply_free(&r);
  CHECK_CLOSED(&c);
  rr_close(&c);

  /* A valid request and then garbage in the same write: the first is still
   * answered, then the garbage closes the connection. */
  rr_ctx = "parse_error: valid ping followed by 0xc1";
  rr_open(&c, d);
  {
    rr_frame f;
    rr_frame_init(&f);
    rr_pack_request(&f, 41, "ping", NULL, 0);
    msgpack_sbuffer_write(&f.sb, "\xc1", 1);
    test_send_all(c.fd, f.sb.data, f.sb.size);
    rr_frame_free(&f);
  }
  int got_ping = 0, got_err = 0;
  for (int i = 0; i < 2; i++) {
    rr_get_reply(&c, &r, 10000);
    if (r.valid && !r.is_error && r.msgid == 41) got_ping++;
    if (r.valid && r.is_error && strcmp(r.code, "parse_error") == 0 && r.msgid_nil) got_err++;
    rr_reply_free(&r);
  }
  CHECK(got_ping == 1 && got_err == 1, "ping answered %d, parse_error %d", got_ping, got_err);
  CHECK_CLOSED(&c);
  rr_close(&c);
}

/* ------------------------------------------------------------------------ */
/* invalid_request / unknown_method                                          */

static void test_invalid_request(const fixture *d) {
  rr_conn c;
  rr_reply r;
  rr_open(&c, d);
  struct {
    const char *name;
    const char *bytes;
    size_t n;
    int64_t msgid; /* -1: nil */
    const char *needle;
  } cases[] = {
      {"top level is an int", LIT("\x2a"), -1, "array"},
      {"top level is a string", LIT("\xa3" "abc"), -1, "array"},
      {"array of 3 [0, 5, \"ping\"]", LIT("\x93\x00\x05\xa4ping"), 5, "4 elements"},
      {"array of 5", LIT("\x95\x00\x06\xa4ping\x91\x80\xc0"), 6, "4 elements"},
      {"type 2 [2, 6, \"ping\", [{}]]", LIT("\x94\x02\x06\xa4ping\x91\x80"), 6, "element 0"},
      {"type 1 (a response) [1, 6, nil, nil]", LIT("\x94\x01\x06\xc0\xc0"), 6, "element 0"},
      {"msgid negative", LIT("\x94\x00\xff\xa4ping\x91\x80"), -1, "msgid"},
      {"msgid a string", LIT("\x94\x00\xa1x\xa4ping\x91\x80"), -1, "msgid"},
      {"msgid 2^32", LIT("\x94\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xa4ping\x91\x80"), -1, "msgid"},
      {"msgid a float", LIT("\x94\x00\xcb\x40\x1c\x00\x00\x00\x00\x00\x00\xa4ping\x91\x80"), -1, "msgid"},
      {"method not a string", LIT("\x94\x00\x08\x05\x91\x80"), 8, "method"},
      {"method a bin", LIT("\x94\x00\x08\xc4\x04ping\x91\x80"), 8, "method"},
      {"params a bare map", LIT("\x94\x00\x09\xa4ping\x80"), 9, "params"},
      {"params [1]", LIT("\x94\x00\x0a\xa4ping\x91\x01"), 10, "params"},
      {"params []", LIT("\x94\x00\x0b\xa4ping\x90"), 11, "params"},
      {"params [{}, {}]", LIT("\x94\x00\x0c\xa4ping\x92\x80\x80"), 12, "params"},
      {"params nil", LIT("\x94\x00\x0d\xa4ping\xc0"), 13, "params"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char ctx[128];
    snprintf(ctx, sizeof ctx, "invalid_request: %s", cases[i].name);
    rr_ctx = ctx;
    send_raw(&c, cases[i].bytes, cases[i].n);
    rr_get_reply(&c, &r, 10000);
    CHECK_ERROR(&r, "invalid_request", cases[i].msgid, cases[i].needle, NULL);
    rr_reply_free(&r);
    CHECK_OPEN(&c);
  }

  rr_ctx = "unknown_method frobnicate";
  send_lit(&c, "\x94\x00\x0e\xaa" "frobnicate\x91\x80");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "unknown_method", 14, "frobnicate", NULL);
  rr_reply_free(&r);
  CHECK_OPEN(&c);

  rr_ctx = "unknown_method with arguments";
  call(&c, 15, "sgemmm", ARGS(AI("m", 1)), &r);
  CHECK_ERROR(&r, "unknown_method", 15, "sgemmm", NULL);
  rr_reply_free(&r);
  CHECK_OPEN(&c);

  rr_ctx = "unknown_method: a request shape error wins over the method name";
  send_lit(&c, "\x94\x00\x10\xaa" "frobnicate\x80");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "invalid_request", 16, "params", NULL);
  rr_reply_free(&r);
  CHECK_OPEN(&c);
  rr_close(&c);
}

int main(void) {
  double t0 = rr_now_s();
  fixture d;
  errcheck_start(&d);
  SECTION(test_parse_error(&d));
  SECTION(test_invalid_request(&d));
  errcheck_after_errors(&d, 20);
  rr_print_totals("e2e_errors_frames", t0);
  return rr_failed ? 1 : 0;
}
