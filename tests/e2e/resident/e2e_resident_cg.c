/* e2e_resident_cg.c: the conjugate-gradient example (examples/cg.c,
 * included below) on resident data, against a real gkcd: it must reach its
 * tolerance on a generated Laplacian and on bcsstk13 ($GKC_SHARED_MATRICES)
 * when it is there, one request per operation, a batch per iteration and
 * one solve; and `gkc spmv --repeat` ($GKC_BIN) must agree with the call by
 * value.
 *
 * Results are compared with double-precision references (tests/lib/resutil.c);
 * errors are checked for their code, for a message that names what is wrong,
 * and for the daemon serving on afterwards.  GKC_TEST_BACKEND picks the
 * daemon's backend (cpu by default).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "mtx.h"
#include "npy.h"
#include "proto_rpc.h"
#include "resutil.h"
#include "test.h"

#define GKC_CG_NO_MAIN
#include "examples/cg.c"  /* the source tree is on the include path */

/* --- gkc spmv --repeat ------------------------------------------------------------------------ */

/* Runs the gkc CLI with args; returns its exit status, its stdout in out. */
static int run_gkc(const char *args, char *out, size_t outlen) {
  const char *bin = getenv("GKC_BIN");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s --socket %s %s", bin, F.sock, args);
  FILE *p = popen(cmd, "r");
  ASSERT(p);
  size_t n = fread(out, 1, outlen - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_repeat(void) {
  fprintf(stderr, "gkc spmv --repeat\n");
  if (!getenv("GKC_BIN")) {
    fprintf(stderr, "  (GKC_BIN not set: skipped)\n");
    return;
  }
  char out[8192], args[1024], ypath[300];
  int rc = run_gkc("spmv --random 300x200 --density 0.05 --seed 7 --repeat 20 --check --json",
                   out, sizeof out);
  fprintf(stderr, "  %s", out);
  ASSERT_EQ(rc, 0);
  ASSERT_CONTAINS(out, "\"repeat\": 20");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_median\": ");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_p10\": ");
  ASSERT_CONTAINS(out, "\"resident_round_trip_us_p90\": ");
  ASSERT_CONTAINS(out, "\"resident_kernel_us_median\": ");
  ASSERT_CONTAINS(out, "\"csr_upload_us\": ");
  ASSERT_CONTAINS(out, "\"same_as_by_value\": true");
  ASSERT_CONTAINS(out, "\"check\": \"passed\"");
  /* With beta and an input y, which is uploaded once too. */
  snprintf(ypath, sizeof ypath, "%s/y.npy", F.dir);
  float y[300];
  for (int i = 0; i < 300; i++) y[i] = test_rand_f32(&rng);
  int64_t shape[1] = {300};
  char err[256];
  ASSERT_EQ(npy_write(ypath, 1, shape, y, err, sizeof err), 0);
  snprintf(args, sizeof args,
           "spmv --random 300x200 --seed 7 --alpha 2 --beta 0.5 --y %s --repeat 5 --check", ypath);
  rc = run_gkc(args, out, sizeof out);
  fprintf(stderr, "%s", out);
  ASSERT_EQ(rc, 0);
  ASSERT_CONTAINS(out, "resident rt:");
  ASSERT_CONTAINS(out, "same y:         yes");
  ASSERT_CONTAINS(out, "check:          passed");
  unlink(ypath);
  ASSERT_EQ(run_gkc("spmv --random 10 --repeat 0 2>/dev/null", out, sizeof out), 2);
}

/* --- the conjugate-gradient example ---------------------------------------------------------- */

/* Float32 CG with x stored in float32 cannot push ||b - A x|| / ||b|| much
 * below eps32 * ||A|| ||x|| / ||b|| (eps32 = 6e-8); with b = A x*, x* in
 * [-1, 1], that is ~1e-7 for these matrices, and the recurrence and the true
 * residual part near 1e-6.  1e-5 leaves a factor of ten. */
#define CG_TOL 1e-5

/* mode: CG_REQUESTS (one request per operation), CG_BATCH (one batch per
 * iteration) or CG_SOLVE (one solve); the residual is always the one
 * cg_solve recomputes here in double from the downloaded x. */
static void run_cg(gkc_conn *c, const char *what, mtx_csr *M, int scale, int mode) {
  gkc_csr A = {M->rows, M->cols, M->nnz, M->row_ptr, M->col_idx, M->values};
  float *xs = malloc((size_t)M->rows * 4), *b = malloc((size_t)M->rows * 4);
  float *x = malloc((size_t)M->rows * 4);
  double *dis = malloc((size_t)M->rows * sizeof *dis);
  ASSERT(xs && b && x && dis);
  cg_rhs(&A, 1, xs, b);
  if (scale) {
    char msg[256];
    if (cg_jacobi_scale(M, dis, msg, sizeof msg) != 0) TEST_FAIL("%s: %s", what, msg);
    for (int32_t i = 0; i < M->rows; i++) b[i] = (float)(b[i] * dis[i]);
  }
  static const char *const modes[] = {"requests", "batch", "solve"};
  cg_params p = {CG_TOL, 20000, mode};
  cg_stats st;
  int rc = cg_solve(c, &A, b, x, &p, &st);
  if (rc) TEST_FAIL("cg (%s) on %s: %s", modes[mode], what, st.msg);
  fprintf(stderr, "  cg (%s) %s: %d iterations, %d restarts, true residual %.3g, recurrence "
          "%.3g, %.0f it/s, %lld requests\n", modes[mode], what, st.iterations, st.replacements,
          st.true_residual, st.rec_residual, st.iters_per_s, (long long)st.requests);
  ASSERT(st.converged);
  ASSERT(st.true_residual < CG_TOL);
  ASSERT_NEAR(cg_residual(&A, b, x), st.true_residual, 0);
  if (mode == CG_SOLVE) ASSERT_EQ(st.requests, 1);
  if (mode == CG_BATCH) ASSERT(st.requests == st.iterations + st.checks + st.replacements);
  /* the iterations' own requests are part of the solve's time, without its
   * checks and the download of x */
  if (mode != CG_SOLVE) ASSERT(st.loop_s > 0 && st.loop_s < st.solve_s);
  free(xs), free(b), free(x), free(dis);
}

static void test_cg(gkc_conn *c) {
  fprintf(stderr, "conjugate gradients\n");
  mtx_csr M;
  ASSERT_EQ(cg_laplacian(64, &M), 0);
  for (int mode = CG_REQUESTS; mode <= CG_SOLVE; mode++) run_cg(c, "64x64 Laplacian", &M, 0, mode);
  mtx_free(&M);
  const char *dir = getenv("GKC_SHARED_MATRICES");
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/bcsstk13.mtx", dir ? dir : "");
  if (!dir || access(path, R_OK) != 0) {
    fprintf(stderr, "  (no %s: bcsstk13 not run)\n", path);
    return;
  }
  for (int mode = CG_REQUESTS; mode <= CG_SOLVE; mode++) {
    if (mtx_read_csr(path, &M, err, sizeof err) != 0) TEST_FAIL("%s", err); /* scaled in place */
    run_cg(c, "bcsstk13 (Jacobi-scaled)", &M, 1, mode);
    mtx_free(&M);
  }
}

int main(void) {
  rng = test_seed();
  fixture_start(&F, NULL, NULL);
  gkc_conn *c = conn_open();
  test_cg(c);
  test_cli_repeat();
  res_stop(c);
  fprintf(stderr, "e2e_resident_cg: all passed\n");
  return 0;
}
