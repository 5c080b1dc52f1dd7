/* e2e_errors_faults.c: out_of_memory, device_error and internal: injected
 * (GKC_FAULT_INJECTION builds) and a real out_of_memory under RLIMIT_AS.
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
/* out_of_memory, device_error, internal by fault injection                  */

static void test_faults(void) {
  static const struct {
    const char *env, *code;
    int err;
  } faults[] = {{"GKCD_FAULT=sgemm:out_of_memory", "out_of_memory", GKC_EOUT_OF_MEMORY},
                {"GKCD_FAULT=sgemm:device_error", "device_error", GKC_EDEVICE_ERROR},
                {"GKCD_FAULT=sgemm:internal", "internal", GKC_EINTERNAL}};
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    char ctx[128];
    snprintf(ctx, sizeof ctx, "fault injection %s", faults[i].code);
    rr_ctx = ctx;
    fixture d;
    const char *env[] = {faults[i].env, NULL};
    const char *args[] = {"--threads", "2", NULL};
    fixture_start(&d, args, env);
    rr_conn c;
    rr_reply r;
    float a4[4] = {1, 2, 3, 4}, x3[3] = {1, 2, 3};

    /* raw frames */
    rr_open(&c, &d);
    call(&c, 500, "sgemm", ARGS(AI("m", 2), AI("n", 2), AI("k", 2), AB("a", a4, 16), AB("b", a4, 16)), &r);
    CHECK_ERROR(&r, faults[i].code, 500, "injected", NULL);
    rr_reply_free(&r);
    CHECK_OPEN(&c);
    call(&c, 501, "reduce", ARGS(AB("x", x3, 12), AS("op", "max")), &r);
    CHECK(r.valid && !r.is_error && rr_num(proto_map_get(r.result, "value")) == 3.0,
          "reduce on the same daemon failed: %s %s", r.code, r.msg);
    rr_reply_free(&r);
    /* Pipelined: a failing and a working request, both answered. */
    {
      rr_frame f;
      rr_frame_init(&f);
      rr_pack_request(&f, 502, "sgemm", ARGS(AI("m", 2), AI("n", 2), AI("k", 2), AB("a", a4, 16), AB("b", a4, 16)));
      rr_pack_request(&f, 503, "reduce", ARGS(AB("x", x3, 12)));
      test_send_all(c.fd, f.sb.data, f.sb.size);
      rr_frame_free(&f);
      int got502 = 0, got503 = 0;
      for (int j = 0; j < 2; j++) {
        rr_get_reply(&c, &r, 10000);
        if (r.valid && r.msgid == 502 && r.is_error && !strcmp(r.code, faults[i].code)) got502++;
        if (r.valid && r.msgid == 503 && !r.is_error && rr_num(proto_map_get(r.result, "value")) == 6.0)
          got503++;
        rr_reply_free(&r);
      }
      CHECK(got502 == 1 && got503 == 1, "pipelined: sgemm error %d, reduce ok %d", got502, got503);
    }
    rr_close(&c);

    /* through libgkc */
    gkc_conn *gc;
    int rc = gkc_connect(&gc, d.sock);
    CHECK(rc == 0, "gkc_connect: %s", gkc_errmsg(gc));
    if (rc == 0) {
      float out[4] = {0};
      rc = gkc_sgemm(gc, 2, 2, 2, 1.0f, a4, 0, a4, 0, 0.0f, out, NULL, NULL);
      CHECK(rc == faults[i].err, "gkc_sgemm returned %d (%s), expected %d", rc, gkc_errname(rc),
            faults[i].err);
      CHECK(strstr(gkc_errmsg(gc), "injected") != NULL, "gkc_errmsg: \"%s\"", gkc_errmsg(gc));
      CHECK(strcmp(gkc_errname(rc), faults[i].code) == 0, "gkc_errname: %s", gkc_errname(rc));
      double v = 0;
      rc = gkc_reduce(gc, x3, 3, GKC_SUM, &v, NULL, NULL);
      CHECK(rc == 0 && v == 6.0, "gkc_reduce after the failure: %d %s (%g)", rc, gkc_errmsg(gc), v);
      int32_t rp[3] = {0, 1, 2}, ci[2] = {1, 0};
      float vals[2] = {2, 3}, x[2] = {10, 100}, y[2] = {0};
      gkc_csr A = {2, 2, 2, rp, ci, vals};
      rc = gkc_spmv(gc, &A, 1.0f, x, 0.0f, y, NULL, NULL);
      CHECK(rc == 0 && y[0] == 200.0f && y[1] == 30.0f, "gkc_spmv: %d %s", rc, gkc_errmsg(gc));
      rc = gkc_ping(gc, NULL);
      CHECK(rc == 0, "gkc_ping: %s", gkc_errmsg(gc));
    }
    gkc_close(gc);
    long errs = -1;
    {
      rr_conn s;
      rr_open(&s, &d);
      call(&s, 1, "status", NULL, 0, &r);
      const msgpack_object *ms = r.valid && !r.is_error ? proto_map_get(r.result, "methods") : NULL;
      const msgpack_object *sg = ms ? proto_map_get(ms, "sgemm") : NULL;
      errs = sg ? (long)rr_num(proto_map_get(sg, "errors")) : -1;
      rr_reply_free(&r);
      rr_close(&s);
    }
    CHECK(errs == 3, "status methods.sgemm.errors = %ld, expected 3", errs);
    int st = fixture_stop(&d, SIGTERM);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x", st);
  }
}

/* ------------------------------------------------------------------------ */
/* a real out_of_memory: gkcd under RLIMIT_AS                                */

/* fixture_try_start, with the child's address space limited before exec. */
static int start_limited(fixture *f, const char *const *args, rlim_t as_bytes) {
  fixture_as_limit = (size_t)as_bytes;
  int st = fixture_try_start(f, args, NULL);
  fixture_as_limit = 0;
  return st == -1 ? 0 : -1;
}

static void test_real_oom(void) {
  rr_ctx = "real out_of_memory under RLIMIT_AS";
  const char *args[] = {"--threads", "1", "--max-request-bytes", "2G", NULL};
  /* Measure the daemon's address space once it has run an sgemm (OpenBLAS
   * maps its buffers on first use), then allow 512 MiB more than that: a
   * 1 GiB result cannot fit, everything small still does. */
  fixture probe;
  fixture_start(&probe, args, NULL);
  rr_conn c;
  rr_open(&c, &probe);
  CHECK_SMALL_SGEMM(&c, 1);
  {
    float *a = rr_rand_floats(256 * 256);
    rr_reply r;
    call(&c, 2, "sgemm", ARGS(AI("m", 256), AI("n", 256), AI("k", 256), AB("a", a, 256 * 256 * 4),
                              AB("b", a, 256 * 256 * 4)), &r);
    rr_reply_free(&r);
    free(a);
  }
  rr_close(&c);
  long vm = fixture_vm_kib(&probe);
  fixture_stop(&probe, SIGTERM);
  CHECK(vm > 0, "cannot read VmSize");
  if (vm <= 0) return;
  rlim_t limit = (rlim_t)vm * 1024 + ((rlim_t)512 << 20);
  fprintf(stderr, "real oom: gkcd VmSize after warm-up %ld MiB, RLIMIT_AS %lu MiB\n", vm / 1024,
          (unsigned long)(limit >> 20));

  fixture d;
  if (start_limited(&d, args, limit) != 0) {
    CHECK(0, "gkcd did not start under RLIMIT_AS = %lu MiB", (unsigned long)(limit >> 20));
    rr_dump_log(&d, 0);
    return;
  }
  rr_open(&c, &d);
  CHECK_SMALL_SGEMM(&c, 10);
  {
    enum { N = 16384 };
    float *a = rr_rand_floats(N), *b = rr_rand_floats(N);
    rr_reply r;
    call(&c, 11, "sgemm", ARGS(AI("m", N), AI("n", N), AI("k", 1), AB("a", a, N * 4), AB("b", b, N * 4)), &r);
    CHECK_ERROR(&r, "out_of_memory", 11, NULL, NULL);
    if (r.valid) fprintf(stderr, "real oom: reply %s: %s\n", r.is_error ? r.code : "success", r.msg);
    rr_reply_free(&r);
    free(a);
    free(b);
  }
  int status;
  pid_t w = waitpid(d.pid, &status, WNOHANG);
  CHECK(w == 0, "gkcd died: status %#x (%s %d)", status,
        WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  if (w == d.pid) {
    rr_dump_log(&d, 0);
    d.pid = 0;
    fixture_stop(&d, SIGTERM);
    rr_close(&c);
    return;
  }
  CHECK_OPEN(&c);
  CHECK_SMALL_SGEMM(&c, 12);
  rr_close(&c);
  rr_open(&c, &d);
  CHECK_OPEN(&c);
  rr_close(&c);
  int st = fixture_stop(&d, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x", st);
}

int main(void) {
  errcheck_init();
  double t0 = rr_now_s();
  int fault = rr_env_flag("GKC_FAULT_INJECTION"), sanitize = rr_env_flag("GKC_SANITIZE");
  if (fault)
    SECTION(test_faults());
  else
    fprintf(stderr, "note: gkcd built without GKC_FAULT_INJECTION: skipping the injected "
            "out_of_memory/device_error/internal checks\n");
  if (!sanitize)
    SECTION(test_real_oom());
  else
    fprintf(stderr, "note: sanitizer build: skipping the RLIMIT_AS out_of_memory check "
            "(ASan reserves terabytes of address space)\n");
  rr_print_totals("e2e_errors_faults", t0);
  if (rr_checks == 0) TEST_SKIP("neither fault injection nor an RLIMIT_AS run on this build");
  return rr_failed ? 1 : 0;
}
