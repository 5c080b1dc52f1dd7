/* e2e_partition: partitioned matrices (PROTOCOL.md, "Partitioned
 * matrices") through libgkc, on --cpu-devices 3: gkc_csr_upload_partitioned,
 * cg and pcg on the 2-D Laplacian matching the single-device solve (the
 * same iteration count within 2%, the residual histories within 1e-6 of
 * each other while above 1e-5: the iterates differ only by the order of
 * the dots' additions; each x's residual recomputed here in float64
 * within rtol), and, in builds with fault injection, a device lost
 * under a partitioned solve (device_lost naming it, the matrix lost
 * afterwards, the others serving on).  It runs under TSan (tests/run.sh);
 * the fuller checks (balance, halos, spmv bounds, scipy) are
 * tests/python/test_partition.py's. */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gkc.h"
#include "rawrpc.h"

/* --cpu-devices 3, or what GKC_DEVICES_ARGS says instead (e.g. "--backend
 * cuda --split-device 2" on a GPU machine: e2e_partition_gpu in this
 * folder's CMakeLists.txt). */
static const char *g_args[17] = {"--cpu-devices", "3", NULL};
static char g_args_buf[512];
static int g_ndev = 3; /* what the daemon serves (main sets it) */

static void args_from_env(void) {
  const char *e = getenv("GKC_DEVICES_ARGS");
  if (!e || !*e) return;
  snprintf(g_args_buf, sizeof g_args_buf, "%s", e);
  int n = 0;
  for (char *save = NULL, *t = strtok_r(g_args_buf, " ", &save); t && n < 16; t = strtok_r(NULL, " ", &save))
    g_args[n++] = t;
  g_args[n] = NULL;
}

/* The number of devices the daemon those arguments start serves from; -1
 * when it does not start (e.g. --backend cuda without a GPU). */
static int daemon_devices(void) {
  fixture fx;
  if (fixture_try_start(&fx, g_args, NULL) >= 0) {
    fixture_stop(&fx, SIGTERM);
    return -1;
  }
  gkc_conn *g;
  int n = -1;
  gkc_status_info s;
  if (gkc_connect(&g, fx.sock) == 0) {
    if (gkc_status(g, &s) == 0) n = s.n_devices;
    gkc_close(g);
  }
  fixture_stop(&fx, SIGTERM);
  return n;
}

typedef struct {
  int32_t n, *rp, *ci;
  float *v;
  int64_t nnz;
} lap;

/* The 5-point Laplacian on a g x g grid, its diagonal raised by 0 to 0.5
 * from row to row (still SPD: diagonally dominant) so that pcg's Jacobi
 * step is no mere scaling of cg. */
static lap laplacian(int32_t g) {
  lap a = {g * g, NULL, NULL, NULL, 0};
  a.rp = malloc(sizeof(int32_t) * ((size_t)a.n + 1));
  a.ci = malloc(sizeof(int32_t) * 5 * (size_t)a.n);
  a.v = malloc(sizeof(float) * 5 * (size_t)a.n);
  a.rp[0] = 0;
  for (int32_t r = 0; r < a.n; r++) {
    int32_t i = r / g, j = r % g;
    int32_t nb[5] = {i > 0 ? r - g : -1, j > 0 ? r - 1 : -1, r, j < g - 1 ? r + 1 : -1,
                     i < g - 1 ? r + g : -1};
    for (int t = 0; t < 5; t++)
      if (nb[t] >= 0) a.ci[a.nnz] = nb[t], a.v[a.nnz++] = nb[t] == r ? 4.0f + (float)(r * 7919 % 13) / 24 : -1.0f;
    a.rp[r + 1] = (int32_t)a.nnz;
  }
  return a;
}

/* ||b - A x|| / ||b|| in float64. */
static double residual(const lap *a, const float *x, const float *b) {
  double rr = 0, bb = 0;
  for (int32_t i = 0; i < a->n; i++) {
    double s = b[i];
    for (int32_t t = a->rp[i]; t < a->rp[i + 1]; t++) s -= (double)a->v[t] * x[a->ci[t]];
    rr += s * s, bb += (double)b[i] * b[i];
  }
  return sqrt(rr / bb);
}

/* What a converged x may have: rtol, plus the rounding of x to float32
 * (each entry within 2^-24 of the float64 iterate): 2^-24 || |A| |x| || / ||b||. */
static double allowed(const lap *a, const float *x, const float *b, double rtol) {
  double mm = 0, bb = 0;
  for (int32_t i = 0; i < a->n; i++) {
    double s = 0;
    for (int32_t t = a->rp[i]; t < a->rp[i + 1]; t++) s += fabs((double)a->v[t] * x[a->ci[t]]);
    mm += s * s, bb += (double)b[i] * b[i];
  }
  return rtol * 1.01 + 2 * 0x1p-24 * sqrt(mm / bb);
}

enum { HIST_CAP = 10000 };

static int solve_h(gkc_conn *g, uint32_t m, const float *b, int32_t n, gkc_solve_method method,
                   float *x, gkc_solve_result *res, gkc_info *info, double *hist) {
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.matrix = m;
  s.b = gkc_ref_mem(b, (size_t)n * 4);
  s.method = method, s.rtol = 1e-6;
  s.history = hist, s.history_cap = hist ? HIST_CAP : 0;
  gkc_out out = gkc_out_mem(x, (size_t)n * 4);
  return gkc_solve(g, &s, &out, res, info);
}

static int solve(gkc_conn *g, uint32_t m, const float *b, int32_t n, gkc_solve_method method,
                 float *x, gkc_solve_result *res, gkc_info *info) {
  return solve_h(g, m, b, n, method, x, res, info, NULL);
}

static void matches_single_device(void) {
  rr_ctx = "cg/pcg partitioned vs one device";
  fixture fx;
  fixture_start(&fx, g_args, NULL);
  gkc_conn *g;
  CHECK(gkc_connect(&g, fx.sock) == 0, "connect");
  lap a = laplacian(45);
  gkc_csr A = {a.n, a.n, a.nnz, a.rp, a.ci, a.v};
  float *b = rr_rand_floats((size_t)a.n), *xp = malloc(4 * (size_t)a.n), *xs = malloc(4 * (size_t)a.n);
  double *hp = malloc(8 * HIST_CAP), *hs = malloc(8 * HIST_CAP);
  uint32_t mp = 0, ms = 0;
  int rc = gkc_csr_upload_partitioned(g, &A, GKC_DEVICES_ALL, 0, &mp);
  CHECK(rc == 0, "partitioned upload: %s", gkc_errmsg(g));
  rc = gkc_csr_upload(g, &A, 0, &ms, NULL);
  CHECK(rc == 0, "upload: %s", gkc_errmsg(g));
  for (int method = GKC_SOLVE_CG; method <= GKC_SOLVE_PCG; method++) {
    gkc_solve_result rp, rs;
    gkc_info ip, is;
    rc = solve_h(g, mp, b, a.n, (gkc_solve_method)method, xp, &rp, &ip, hp);
    CHECK(rc == 0 && rp.converged, "partitioned %s: %d %s", gkc_solve_method_name(method), rc,
          gkc_errmsg(g));
    CHECK(ip.device == -1 && ip.ndevices == g_ndev, "ran on %d device(s) (device %d)", ip.ndevices,
          ip.device);
    rc = solve_h(g, ms, b, a.n, (gkc_solve_method)method, xs, &rs, &is, hs);
    CHECK(rc == 0 && rs.converged, "single %s: %d %s", gkc_solve_method_name(method), rc,
          gkc_errmsg(g));
    int64_t d = rp.iterations - rs.iterations, tol = rs.iterations / 50 > 1 ? rs.iterations / 50 : 1;
    CHECK(llabs(d) <= tol, "%s: %" PRId64 " iterations partitioned, %" PRId64 " on one device",
          gkc_solve_method_name(method), rp.iterations, rs.iterations);
    CHECK(rp.history_len == (size_t)rp.iterations && rs.history_len == (size_t)rs.iterations,
          "history lengths %zu and %zu", rp.history_len, rs.history_len);
    int64_t k = 0, kmax = rp.iterations < rs.iterations ? rp.iterations : rs.iterations;
    while (k < kmax && hs[k] > 1e-5 && fabs(hp[k] - hs[k]) <= 1e-6 * hs[k]) k++;
    CHECK(k == kmax || hs[k] <= 1e-5, "%s: residual history at iteration %" PRId64
          ": %.12g partitioned, %.12g on one device", gkc_solve_method_name(method), k + 1, hp[k], hs[k]);
    fprintf(stderr, "  %s: %" PRId64 " iterations partitioned, %" PRId64 " on one device; histories"
            " within 1e-6 for the first %" PRId64 "\n", gkc_solve_method_name(method), rp.iterations,
            rs.iterations, k);
    double r1 = residual(&a, xp, b), r2 = residual(&a, xs, b);
    double w1 = allowed(&a, xp, b, 1e-6), w2 = allowed(&a, xs, b, 1e-6);
    CHECK(r1 <= w1 && r2 <= w2, "residuals %.3e and %.3e (rtol 1e-6; allowed %.3e, %.3e)", r1, r2,
          w1, w2);
    CHECK(fabs(rp.residual - r1) <= 1e-3 * r1, "gkcd says %.6e, here %.6e", rp.residual, r1);
  }
  /* The partitioned matrix's ids are released like any other. */
  CHECK(gkc_release(g, mp) == 0 && gkc_release(g, ms) == 0, "release: %s", gkc_errmsg(g));
  gkc_close(g);
  int st = fixture_stop(&fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
  free(a.rp), free(a.ci), free(a.v), free(b), free(xp), free(xs), free(hp), free(hs);
}

/* Device 1's first job is its block of the upload; its second, the solve,
 * loses it. */
static void lost(void) {
  rr_ctx = "a device lost under a partitioned solve";
  fixture fx;
  const char *const env[] = {"GKCD_FAULT=device_lost:dev=1:after=1", NULL};
  fixture_start(&fx, g_args, env);
  gkc_conn *g;
  CHECK(gkc_connect(&g, fx.sock) == 0, "connect");
  lap a = laplacian(30);
  gkc_csr A = {a.n, a.n, a.nnz, a.rp, a.ci, a.v};
  float *b = rr_rand_floats((size_t)a.n), *x = malloc(4 * (size_t)a.n);
  uint32_t m = 0;
  CHECK(gkc_csr_upload_partitioned(g, &A, GKC_DEVICES_ALL, 0, &m) == 0, "upload: %s",
        gkc_errmsg(g));
  gkc_solve_result res;
  int rc = solve(g, m, b, a.n, GKC_SOLVE_CG, x, &res, NULL);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), "device 1 (") &&
        strstr(gkc_errmsg(g), "was lost: injected fault"), "the solve: %d %s", rc, gkc_errmsg(g));
  rc = solve(g, m, b, a.n, GKC_SOLVE_PCG, x, &res, NULL);
  char want[96];
  snprintf(want, sizeof want, "matrix %u was partitioned over devices including device 1", m);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), want), "the matrix afterwards: %d %s", rc,
        gkc_errmsg(g));
  /* A partition over devices 0 and 1 is refused; over "all", it is 0 and 2. */
  uint32_t m2 = 0;
  rc = gkc_csr_upload_partitioned(g, &A, 3, 0, &m2);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), "'devices': device 1"), "devices 0,1: %d %s",
        rc, gkc_errmsg(g));
  CHECK(gkc_csr_upload_partitioned(g, &A, GKC_DEVICES_ALL, 0, &m2) == 0, "upload: %s",
        gkc_errmsg(g));
  gkc_info info;
  rc = solve(g, m2, b, a.n, GKC_SOLVE_PCG, x, &res, &info);
  CHECK(rc == 0 && res.converged && info.ndevices == g_ndev - 1 &&
            residual(&a, x, b) <= allowed(&a, x, b, 1e-6),
        "on the live devices: %d %s, %d devices", rc, gkc_errmsg(g), info.ndevices);
  CHECK(gkc_release(g, m) == 0, "a lost matrix can still be released: %s", gkc_errmsg(g));
  gkc_close(g);
  int st = fixture_stop(&fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
  free(a.rp), free(a.ci), free(a.v), free(b), free(x);
}

int main(void) {
  double t0 = rr_now_s();
  rr_rng = test_seed();
  args_from_env();
  int ndev = daemon_devices();
  if (ndev < 2 && getenv("GKC_DEVICES_ARGS")) { /* e.g. no GPU here: skipped, never passed */
    fprintf(stderr, "SKIP: gkcd %s serves %d device(s)\n", getenv("GKC_DEVICES_ARGS"), ndev);
    return 77;
  }
  if (ndev < 2) {
    fprintf(stderr, "FAIL: gkcd --cpu-devices 3 serves %d device(s)\n", ndev);
    return 1;
  }
  g_ndev = ndev;
  fprintf(stderr, "%d devices (%s)\n", ndev, getenv("GKC_DEVICES_ARGS") ? getenv("GKC_DEVICES_ARGS") : "--cpu-devices 3");
  SECTION(matches_single_device());
  if (rr_env_flag("GKC_FAULT_INJECTION"))
    SECTION(lost());
  else
    fprintf(stderr, "device-lost checks skipped: gkcd built without GKC_FAULT_INJECTION\n");
  rr_print_totals("e2e_partition", t0);
  return rr_failed ? 1 : 0;
}
