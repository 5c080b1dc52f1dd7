/* e2e_errors_args.c: invalid_argument (PROTOCOL.md) for every method's
 * arguments, against a real gkcd with hand-built msgpack frames.
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
/* invalid_argument                                                          */

static void test_invalid_argument(const fixture *d, const char *backend) {
  rr_conn c;
  rr_reply r;
  rr_open(&c, d);
  float a4[4] = {1, 2, 3, 4}, b4[4] = {5, 6, 7, 8}, b5[5] = {5, 6, 7, 8, 9}, x3[3] = {1, 2, 3};
  uint32_t id = 1000;
  int cpu = strcmp(backend, "cpu") == 0;
  const char *sg_algo = cpu ? "openblas" : "cublas";
  const char *rd_algo = cpu ? "cpu_omp" : "shfl";
  const char *sp_algo = cpu ? "cpu_merge" : "cusparse";

#define SG_AB AB("a", a4, 16), AB("b", b4, 16)
#define SG_MNK AI("m", 2), AI("n", 2), AI("k", 2)
#define ARG_CASE(label, method, needle, needle2, ...)                  \
  do {                                                                 \
    rr_ctx = "invalid_argument: " label;                                \
    call(&c, ++id, method, ARGS(__VA_ARGS__), &r);                     \
    CHECK_ERROR(&r, "invalid_argument", id, needle, needle2);          \
    rr_reply_free(&r);                                                    \
  } while (0)

  /* The base request is valid: prove it first. */
  rr_ctx = "invalid_argument: base sgemm is valid";
  call(&c, ++id, "sgemm", ARGS(SG_MNK, SG_AB), &r);
  {
    const msgpack_object *cb = rr_result_bin(&r, "c", 16);
    CHECK(cb && rr_ld_f32(cb->via.bin.ptr, 0) == 19.0f && rr_ld_f32(cb->via.bin.ptr, 3) == 50.0f,
          "2x2 sgemm wrong or failed (%s %s)", r.code, r.msg);
    const msgpack_object *al = r.valid && !r.is_error ? proto_map_get(r.result, "algo") : NULL;
    CHECK(al && al->type == MSGPACK_OBJECT_STR, "result has no algo");
  }
  rr_reply_free(&r);

  ARG_CASE("sgemm missing m", "sgemm", "'m'", "missing", AI("n", 2), AI("k", 2), SG_AB);
  ARG_CASE("sgemm missing a", "sgemm", "'a'", "missing", SG_MNK, AB("b", b4, 16));
  ARG_CASE("sgemm m as string", "sgemm", "'m'", NULL, AS("m", "2"), AI("n", 2), AI("k", 2), SG_AB);
  ARG_CASE("sgemm m as float", "sgemm", "'m'", NULL, AF("m", 2.0), AI("n", 2), AI("k", 2), SG_AB);
  ARG_CASE("sgemm m = 0", "sgemm", "'m'", NULL, AI("m", 0), AI("n", 2), AI("k", 2), SG_AB);
  ARG_CASE("sgemm m negative", "sgemm", "'m'", NULL, AI("m", -2), AI("n", 2), AI("k", 2), SG_AB);
  ARG_CASE("sgemm k = 2^31", "sgemm", "'k'", NULL, AI("m", 2), AI("n", 2), AI("k", 2147483648LL), SG_AB);
  ARG_CASE("sgemm n = -2^63", "sgemm", "'n'", NULL, AI("m", 2), AI("n", INT64_MIN), AI("k", 2), SG_AB);
  ARG_CASE("sgemm unknown key alhpa", "sgemm", "alhpa", NULL, SG_MNK, SG_AB, AF("alhpa", 1.0));
  ARG_CASE("sgemm repeated key m", "sgemm", "'m'", "twice", SG_MNK, SG_AB, AI("m", 2));
  ARG_CASE("sgemm repeated key a (same value)", "sgemm", "'a'", "twice", SG_MNK, SG_AB, AB("a", a4, 16));
  ARG_CASE("sgemm a of 12 bytes", "sgemm", "'a'", "12", SG_MNK, AB("a", a4, 12), AB("b", b4, 16));
  ARG_CASE("sgemm b of 20 bytes", "sgemm", "'b'", "20", SG_MNK, AB("a", a4, 16), AB("b", b5, 20));
  ARG_CASE("sgemm a as string", "sgemm", "'a'", NULL, SG_MNK, AS("a", "0123456789abcdef"), AB("b", b4, 16));
  ARG_CASE("sgemm c of wrong length", "sgemm", "'c'", NULL, SG_MNK, SG_AB, AF("beta", 1.0), AB("c", a4, 8));
  ARG_CASE("sgemm beta != 0 without c", "sgemm", "'c'", "beta", SG_MNK, SG_AB, AF("beta", 0.5));
  ARG_CASE("sgemm trans_a as int", "sgemm", "'trans_a'", NULL, SG_MNK, SG_AB, AI("trans_a", 1));
  ARG_CASE("sgemm alpha as string", "sgemm", "'alpha'", NULL, SG_MNK, SG_AB, AS("alpha", "1"));
  ARG_CASE("sgemm alpha NaN (float64)", "sgemm", "'alpha'", NULL, SG_MNK, SG_AB, AF("alpha", NAN));
  ARG_CASE("sgemm alpha +inf (float64)", "sgemm", "'alpha'", NULL, SG_MNK, SG_AB, AF("alpha", INFINITY));
  ARG_CASE("sgemm beta -inf (float32)", "sgemm", "'beta'", NULL, SG_MNK, SG_AB, AF32("beta", -INFINITY),
           AB("c", a4, 16));
  ARG_CASE("sgemm beta NaN (float32)", "sgemm", "'beta'", NULL, SG_MNK, SG_AB, AF32("beta", NAN),
           AB("c", a4, 16));
  ARG_CASE("sgemm alpha 1e39 (outside float32)", "sgemm", "'alpha'", NULL, SG_MNK, SG_AB, AF("alpha", 1e39));
  ARG_CASE("sgemm unknown algo", "sgemm", "'algo'", sg_algo, SG_MNK, SG_AB, AS("algo", "strassen"));
  ARG_CASE("sgemm algo as int", "sgemm", "'algo'", NULL, SG_MNK, SG_AB, AI("algo", 1));
  ARG_CASE("reduce unknown algo", "reduce", "'algo'", rd_algo, AB("x", x3, 12), AS("algo", "magic"));
  ARG_CASE("reduce bad op avg", "reduce", "'op'", "avg", AB("x", x3, 12), AS("op", "avg"));
  ARG_CASE("reduce x of 6 bytes", "reduce", "'x'", "6", AB("x", x3, 6));
  ARG_CASE("reduce x empty", "reduce", "'x'", NULL, AB("x", x3, 0));
  ARG_CASE("reduce x missing", "reduce", "'x'", "missing", AS("op", "sum"));
  ARG_CASE("reduce unknown key", "reduce", "'n'", "unknown", AB("x", x3, 12), AI("n", 3));
  ARG_CASE("ping with an argument", "ping", "ping", NULL, AI("verbose", 1));
  ARG_CASE("status with an argument", "status", "status", NULL, AI("verbose", 1));

  /* A non-string key. */
  rr_ctx = "invalid_argument: integer key";
  send_lit(&c, "\x94\x00\xcd\x04\x00\xa6reduce\x91\x81\x01\x02");
  rr_get_reply(&c, &r, 10000);
  CHECK_ERROR(&r, "invalid_argument", 1024, NULL, NULL);
  rr_reply_free(&r);

  /* spmv: 3x4 with 4 nonzeros:
   *   [1 0 2 0]
   *   [0 0 0 0]
   *   [0 3 0 4] */
  int32_t rp[4] = {0, 2, 2, 4}, ci[4] = {0, 2, 1, 3};
  float vals[4] = {1, 2, 3, 4}, x4[4] = {1, 10, 100, 1000};
  rr_ctx = "invalid_argument: base spmv is valid";
  id = 2000;
  call(&c, ++id, "spmv", ARGS(AI("rows", 3), AI("cols", 4), AB("row_ptr", rp, 16), AB("col_idx", ci, 16),
                              AB("values", vals, 16), AB("x", x4, 16)), &r);
  {
    const msgpack_object *yb = rr_result_bin(&r, "y", 12);
    CHECK(yb && rr_ld_f32(yb->via.bin.ptr, 0) == 201.0f && rr_ld_f32(yb->via.bin.ptr, 1) == 0.0f &&
              rr_ld_f32(yb->via.bin.ptr, 2) == 4030.0f,
          "spmv wrong or failed (%s %s)", r.code, r.msg);
  }
  rr_reply_free(&r);

#define SP_DIMS AI("rows", 3), AI("cols", 4)
#define SP_CASE(label, needle, needle2, rp_, ci_, nci, vals_, nv, x_, nx, ...)             \
  ARG_CASE(label, "spmv", needle, needle2, SP_DIMS, AB("row_ptr", rp_, 16),               \
           AB("col_idx", ci_, nci), AB("values", vals_, nv), AB("x", x_, nx), __VA_ARGS__)
  {
    int32_t rp_first[4] = {1, 2, 2, 4}, rp_dec[4] = {0, 2, 1, 4}, rp_end[4] = {0, 2, 2, 3};
    int32_t ci_neg[4] = {0, -1, 1, 3}, ci_big[4] = {0, 2, 4, 3};
    SP_CASE("spmv row_ptr[0] != 0", "row_ptr", NULL, rp_first, ci, 16, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv row_ptr decreasing", "row_ptr", "decreases", rp_dec, ci, 16, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv row_ptr[rows] != nnz", "row_ptr", NULL, rp_end, ci, 16, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv col_idx negative", "col_idx", "-1", rp, ci_neg, 16, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv col_idx == cols", "col_idx", "4", rp, ci_big, 16, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv values length != col_idx length", "'values'", NULL, rp, ci, 16, vals, 12, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv x length != cols", "'x'", NULL, rp, ci, 16, vals, 16, x4, 12, AS("algo", "auto"));
    SP_CASE("spmv col_idx not a multiple of 4", "'col_idx'", NULL, rp, ci, 14, vals, 16, x4, 16, AS("algo", "auto"));
    SP_CASE("spmv beta != 0 without y", "'y'", "beta", rp, ci, 16, vals, 16, x4, 16, AF("beta", 1.0));
    SP_CASE("spmv y of wrong length", "'y'", NULL, rp, ci, 16, vals, 16, x4, 16, AF("beta", 1.0),
            AB("y", x4, 16));
    SP_CASE("spmv unknown algo", "'algo'", sp_algo, rp, ci, 16, vals, 16, x4, 16, AS("algo", "dense"));
    SP_CASE("spmv alpha NaN", "'alpha'", NULL, rp, ci, 16, vals, 16, x4, 16, AF("alpha", NAN));
    ARG_CASE("spmv row_ptr of wrong length", "spmv", "'row_ptr'", NULL, SP_DIMS, AB("row_ptr", rp, 12),
             AB("col_idx", ci, 16), AB("values", vals, 16), AB("x", x4, 16));
    ARG_CASE("spmv rows = 0", "spmv", "'rows'", NULL, AI("rows", 0), AI("cols", 4), AB("row_ptr", rp, 4),
             AB("col_idx", ci, 0), AB("values", vals, 0), AB("x", x4, 16));
    ARG_CASE("spmv cols negative", "spmv", "'cols'", NULL, AI("rows", 3), AI("cols", -4),
             AB("row_ptr", rp, 16), AB("col_idx", ci, 16), AB("values", vals, 16), AB("x", x4, 16));
  }

  /* Dimensions at the int32 limit: m*n*k float32 does not overflow 64 bits
   * (the largest is 4*(2^31-1)^2 < 2^64), so methods.c reports the result
   * as too large rather than as an overflow (see the report). */
  rr_ctx = "sgemm m = n = k = 2^31-1";
  call(&c, ++id, "sgemm", ARGS(AI("m", INT32_MAX), AI("n", INT32_MAX), AI("k", INT32_MAX), SG_AB), &r);
  CHECK_ERROR(&r, "too_large", id, "--max-request-bytes", NULL);
  rr_reply_free(&r);

  /* All of the above left the connection usable. */
  rr_ctx = "invalid_argument: connection still serves";
  CHECK_OPEN(&c);
  CHECK_SMALL_SGEMM(&c, ++id);
  rr_close(&c);
#undef ARG_CASE
#undef SP_CASE
}

int main(void) {
  double t0 = rr_now_s();
  fixture d;
  errcheck_start(&d);
  char backend[16] = "cpu";
  {
    gkc_conn *gc;
    gkc_ping_info pi;
    if (gkc_connect(&gc, d.sock) == 0 && gkc_ping(gc, &pi) == 0) snprintf(backend, sizeof backend, "%s", pi.backend);
    gkc_close(gc);
  }
  SECTION(test_invalid_argument(&d, backend));
  errcheck_after_errors(&d, 0);
  rr_print_totals("e2e_errors_args", t0);
  return rr_failed ? 1 : 0;
}
