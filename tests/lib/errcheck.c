/* errcheck.c: the checks shared by the e2e_errors_* tests (errcheck.h). */
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "errcheck.h"
#include "proto_rpc.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* checks of this test (rawrpc.h has the connection, replies and requests)   */

/* msgid -1: expect nil.  needle/needle2 may be NULL. */
void check_error_(const char *file, int line, const rr_reply *r, const char *code, int64_t msgid,
                  const char *needle, const char *needle2) {
  char why[900] = "";
  if (!r->got)
    snprintf(why, sizeof why, "no reply (%s)", rr_rf_name(r->rf));
  else if (!r->valid)
    snprintf(why, sizeof why, "reply is not a well-formed msgpack-rpc response");
  else if (!r->is_error)
    snprintf(why, sizeof why, "request succeeded, expected %s", code);
  else if (strcmp(r->code, code) != 0)
    snprintf(why, sizeof why, "code %s, expected %s (message: %s)", r->code, code, r->msg);
  else if (msgid < 0 && !r->msgid_nil)
    snprintf(why, sizeof why, "msgid %u, expected nil", r->msgid);
  else if (msgid >= 0 && (r->msgid_nil || r->msgid != (uint32_t)msgid))
    snprintf(why, sizeof why, "msgid %s%u, expected %lld", r->msgid_nil ? "nil " : "",
             r->msgid, (long long)msgid);
  else if (needle && !strstr(r->msg, needle))
    snprintf(why, sizeof why, "message \"%s\" does not contain \"%s\"", r->msg, needle);
  else if (needle2 && !strstr(r->msg, needle2))
    snprintf(why, sizeof why, "message \"%s\" does not contain \"%s\"", r->msg, needle2);
  rr_check_at(file, line, !why[0], "%s", why);
}

/* Sends one request and reads one reply (30 s); a failed send fails the test. */
void call(rr_conn *c, uint32_t msgid, const char *method, const rr_arg *args, size_t n,
          rr_reply *r) {
  int e = rr_call(c, msgid, method, args, n, r, 30000);
  if (e) TEST_FAIL("send: %s", strerror(e));
}

void send_raw(rr_conn *c, const void *p, size_t n) { test_send_all(c->fd, p, n); }

/* The connection still serves: a ping on it is answered. */
void check_open_(const char *file, int line, rr_conn *c) {
  char why[100];
  int ok = rr_ping(c, 20000, why, sizeof why);
  rr_check_at(file, line, ok, "connection should stay open, but a ping on it %s", ok ? "" : why);
}

/* The daemon closes the connection: nothing more arrives, then end-of-stream. */
void check_closed_(const char *file, int line, rr_conn *c) {
  ssize_t r = rr_recv_frame(c, 10000);
  rr_check_at(file, line, r == RF_CLOSED, "connection should be closed after the error, got %s",
              r > 0 ? "another frame" : rr_rf_name((int)r));
}

/* A small sgemm on c that must succeed with the right numbers. */
void check_small_sgemm_(const char *file, int line, rr_conn *c, uint32_t id) {
  const int m = 7, n = 5, k = 3;
  float *a = rr_rand_floats(m * k), *b = rr_rand_floats(k * n);
  rr_reply r;
  call(c, id, "sgemm", ARGS(AI("m", m), AI("n", n), AI("k", k), AB("a", a, m * k * 4),
                            AB("b", b, k * n * 4), AF("alpha", 0.5)), &r);
  const msgpack_object *cb = rr_result_bin(&r, "c", m * n * 4);
  char why[200] = "";
  int ok = cb && r.msgid == id && !r.msgid_nil &&
           rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, m, n, k, 0.5, 8, why, sizeof why);
  rr_check_at(file, line, ok, "small sgemm %s %s",
              !r.got ? rr_rf_name(r.rf) : r.is_error ? r.code : "gave a wrong result",
              r.is_error ? r.msg : why);
  rr_reply_free(&r);
  free(a);
  free(b);
}

/* status[key] from a fresh connection, or -1. */
long status_u64(const fixture *d, const char *key) {
  rr_conn c;
  rr_reply r;
  rr_open(&c, d);
  call(&c, 1, "status", NULL, 0, &r);
  long v = -1;
  if (r.valid && !r.is_error) {
    const msgpack_object *o = proto_map_get(r.result, key);
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) v = (long)o->via.u64;
  }
  rr_reply_free(&r);
  rr_close(&c);
  return v;
}

int status_client_jobs(const fixture *d, long *queued, long *running, long *served) {
  rr_conn c;
  rr_reply r;
  rr_open(&c, d);
  call(&c, 1, "status", NULL, 0, &r);
  int rc = -1;
  *queued = *running = *served = 0;
  const msgpack_object *cl = r.valid && !r.is_error ? proto_map_get(r.result, "clients") : NULL;
  if (cl && cl->type == MSGPACK_OBJECT_ARRAY) {
    rc = 0;
    for (uint32_t i = 0; i < cl->via.array.size; i++) {
      const msgpack_object *m = &cl->via.array.ptr[i];
      const char *keys[3] = {"queued", "running", "served"};
      long *sums[3] = {queued, running, served};
      for (int k = 0; k < 3; k++) {
        const msgpack_object *o = m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, keys[k]) : NULL;
        if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) *sums[k] += (long)o->via.u64;
        else rc = -1;
      }
    }
  }
  rr_reply_free(&r);
  rr_close(&c);
  return rc;
}

void errcheck_init(void) {
  signal(SIGPIPE, SIG_IGN);
  rr_rng = test_seed();
}

void errcheck_start(fixture *d) {
  errcheck_init();
  const char *args[] = {"--threads", "2", NULL};
  fixture_start(d, args, NULL);
}

void errcheck_after_errors(fixture *d, long min_bad) {
  rr_ctx = "main daemon after all errors";
  if (min_bad > 0) {
    long bad = status_u64(d, "bad_requests");
    CHECK(bad >= min_bad, "status bad_requests = %ld, expected at least %ld", bad, min_bad);
  }
  rr_conn c;
  rr_open(&c, d);
  CHECK_OPEN(&c);
  CHECK_SMALL_SGEMM(&c, 9999);
  rr_close(&c);
  int st = fixture_stop(d, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x", st);
}
