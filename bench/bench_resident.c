/* bench_resident.c: what keeping data out of the socket buys, from the client.
 *
 * Three measurements, each against the same gkcd:
 *
 *  1. sgemm N x N x N (default 8192; 2048 on the CPU backend unless --n):
 *     the socket path (A and B sent as bins, C returned as a bin) against
 *     the region path (A, B and C in shared-memory regions; nothing but the
 *     request's few bytes crosses the socket).  Per path: round trip, the
 *     reply's server_us, kernel_us, h2d_us and d2h_us (medians), and the
 *     effective input bandwidth, defined two ways:
 *       in_gbps_h2d = bytes(A) + bytes(B) over h2d_us: the copies to the
 *                     GPU alone (CUDA backend; from pageable staging on
 *                     the socket path, from the registered region pages on
 *                     the region path);
 *       in_gbps_e2e = bytes(A) + bytes(B) over (round trip - kernel_us -
 *                     d2h_us): everything the call spends other than
 *                     computing and copying C back is charged to getting
 *                     the inputs in, so it includes the socket transfer,
 *                     gkcd's decode and, on the socket path, the reply's C
 *                     coming back over the socket too: a lower bound on
 *                     the input bandwidth.
 *  2. spmv on a fixed matrix (default the 5-point Laplacian of a 2048 x 2048
 *     grid: 4.2 M rows, 21 M nonzeros), --spmv-calls calls (default 100)
 *     sending the whole matrix each time, against the same count on the
 *     resident matrix (csr_upload once, x uploaded once), with y returned as
 *     a bin and with y written into a resident array.  Median per call.
 *  3. Conjugate gradients (examples/cg.c's solver) on the Laplacian of a
 *     --cg-grid grid: iterations/s with everything resident.
 *
 * Each section stops early (after at least 3 timed calls) when it has used
 * its share of --time-limit.  --json prints one JSON object, --csv one row
 * per measured mode; else the text goes to stdout.  Progress goes to stderr.  It starts its own gkcd with --gkcd PATH
 * (or $GKCD_BIN), or measures the one at --socket PATH.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_csv.h"
#include "gkc.h"
#include "mtx.h"

#define GKC_CG_NO_MAIN
#include "../examples/cg.c"

/* --- options and helpers --------------------------------------------------------------- */

typedef struct {
  const char *socket, *gkcd, *backend;
  int64_t n;          /* sgemm size; 0: by backend */
  int64_t grid;       /* spmv Laplacian grid */
  int64_t cg_grid;    /* CG Laplacian grid */
  int spmv_calls, reps, cg_iters;
  double time_limit;  /* seconds, all sections together */
  int json, csv, quick, no_sgemm, no_spmv, no_cg;
} options;

static options O = {.backend = "cpu", .grid = 2048, .cg_grid = 512, .spmv_calls = 100,
                    .reps = 5, .cg_iters = 500, .time_limit = 300};

static double now_us(void) { return (double)bench_clock_ns() / 1e3; }

/* Median of n values (NaNs, e.g. h2d on the CPU backend, make it NaN). */
static double median(const double *v, int n) {
  if (n <= 0) return NAN;
  double *t = malloc((size_t)n * sizeof *t);
  if (!t) bench_die("out of memory");
  for (int i = 0; i < n; i++)
    if (isnan(v[i])) {
      free(t);
      return NAN;
    }
  memcpy(t, v, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
  double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  free(t);
  return m;
}

static void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) bench_die("cannot allocate %zu bytes", n);
  return p;
}

static void fill(float *p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (float)((double)(s >> 40) / 16777216.0 * 2.0 - 1.0);
  }
}

/* --csv: one row per measured mode of each section, the values of
 * CSV_VALUES in that order (NaN: empty, the column does not apply). */
static bench_csv g_csv;
static char g_backend[32]; /* gkcd's backend, from ping: the last column */
#define CSV_VALUES                                                                                 \
  "round_trip_us,server_us,queue_us,worker_us,kernel_us,h2d_us,d2h_us,in_gbps_h2d,in_gbps_e2e,"   \
  "iterations,converged,iterations_per_s,us_per_iteration,true_residual"
enum { CSV_NVALUES = 14 };

static void csv_row(const char *section, const char *mode, long long size, int calls,
                    const double v[CSV_NVALUES], int same) {
  bench_csv_str(&g_csv, section);
  bench_csv_str(&g_csv, mode);
  bench_csv_num(&g_csv, "%lld", size);
  bench_csv_num(&g_csv, "%d", calls);
  for (int i = 0; i < CSV_NVALUES; i++)
    if (isfinite(v[i])) bench_csv_num(&g_csv, "%.6g", v[i]);
    else bench_csv_str(&g_csv, "");
  if (same >= 0) bench_csv_num(&g_csv, "%d", same);
  else bench_csv_str(&g_csv, "");
  bench_csv_str(&g_csv, g_backend);
  bench_csv_end(&g_csv);
}

/* Text tables only without --json or --csv. */
#define TEXT (!O.json && !O.csv)

/* JSON output is assembled as text pieces, printed at the end. */
static char g_json[16384];
static size_t g_jlen;

static void jput(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(g_json + g_jlen, sizeof g_json - g_jlen, fmt, ap);
  va_end(ap);
  if (n > 0) g_jlen += (size_t)n < sizeof g_json - g_jlen ? (size_t)n : 0;
}

/* A number for JSON: null when not finite. */
static const char *jnum(double v, char *buf) {
  if (isfinite(v))
    snprintf(buf, 32, "%.6g", v);
  else
    snprintf(buf, 32, "null");
  return buf;
}

/* --- gkcd --------------------------------------------------------------------------------- */

static volatile pid_t g_pid;
static char g_dir[256], g_sock[300], g_log[300];

static void stop_gkcd(void) {
  if (g_pid <= 0) return;
  bench_stop_child(&g_pid, 30);
  unlink(g_sock);
  unlink(g_log);
  rmdir(g_dir);
}

static void start_gkcd(void) {
  const char *bin = O.gkcd ? O.gkcd : getenv("GKCD_BIN");
  if (!bin) bench_die("no gkcd: pass --gkcd PATH, set GKCD_BIN, or use --socket PATH");
  snprintf(g_dir, sizeof g_dir, "%s/gkc-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(g_dir)) bench_die("mkdtemp: %s", strerror(errno));
  snprintf(g_sock, sizeof g_sock, "%s/gkcd.sock", g_dir);
  snprintf(g_log, sizeof g_log, "%s/gkcd.log", g_dir);
  /* Big sgemm requests and regions: let requests be as large as 4 GiB. */
  const char *argv[] = {bin, "--socket", g_sock, "--backend", O.backend,
                        "--max-request-bytes", "4095M", NULL};
  char why[128];
  if (bench_gkcd_start(argv, g_sock, g_log, NULL, &g_pid, why, sizeof why) != 0) {
    bench_stop_child(&g_pid, 2); /* when it did not answer: no gkcd may outlive the bench */
    bench_die("%s; see %s", why, g_log);
  }
  O.socket = g_sock;
}

static gkc_conn *conn_open(void) {
  gkc_conn *c;
  if (gkc_connect(&c, O.socket) != 0) bench_die("%s", gkc_errmsg(c));
  /* The by-value paths measured here are the socket's: libgkc's arena
   * would send their arrays through shared memory (bench_shm measures that). */
  gkc_set_shm(c, GKC_SHM_OFF, 0);
  return c;
}

#define CALL(c, what, expr)                                                          \
  do {                                                                               \
    int rc_ = (expr);                                                                \
    if (rc_) bench_die("%s: %s: %s", what, gkc_errname(rc_), gkc_errmsg(c));                \
  } while (0)

/* --- 1. sgemm: socket path against region path ------------------------------------------- */

typedef struct {
  double rtt, server, kernel, h2d, d2h;
} timing;

static void sgemm_section(gkc_conn *c, double budget_s, const char *backend) {
  int64_t n = O.n ? O.n : O.quick ? 256 : !strcmp(backend, "cuda") ? 8192 : 2048;
  if (!O.n && !O.quick && strcmp(backend, "cuda"))
    progress("sgemm: backend %s: n = %lld (8192 on cuda; --n to choose)\n", backend,
             (long long)n);
  size_t bytes = (size_t)n * (size_t)n * 4;
  progress("sgemm %lld^3: preparing %.1f MiB of inputs...\n", (long long)n, 2.0 * bytes / 1048576);
  float *a = xmalloc(bytes), *b = xmalloc(bytes), *cm = xmalloc(bytes);
  fill(a, bytes / 4, 1), fill(b, bytes / 4, 2);
  gkc_region *ra, *rb, *rc;
  CALL(c, "region A", gkc_region_create(c, bytes, &ra));
  CALL(c, "region B", gkc_region_create(c, bytes, &rb));
  CALL(c, "region C", gkc_region_create(c, bytes, &rc));
  memcpy(gkc_region_data(ra), a, bytes);
  memcpy(gkc_region_data(rb), b, bytes);
  memset(gkc_region_data(rc), 0, bytes); /* touch C's pages before timing */

  gkc_sgemm_args sock = GKC_SGEMM_ARGS_INIT, reg = GKC_SGEMM_ARGS_INIT;
  sock.m = sock.n = sock.k = reg.m = reg.n = reg.k = (int32_t)n;
  sock.a = gkc_ref_mem(a, bytes), sock.b = gkc_ref_mem(b, bytes);
  reg.a = gkc_ref_region(ra, 0, bytes), reg.b = gkc_ref_region(rb, 0, bytes);

  enum { MAXR = 64 };
  timing t[2][MAXR];
  int done[2] = {0, 0};
  double t_start = now_us();
  /* One warm-up of each, then alternate, so drift hits both alike. */
  for (int rep = -1; rep < (O.reps < MAXR ? O.reps : MAXR); rep++) {
    for (int path = 0; path < 2; path++) {
      gkc_out out = path ? gkc_out_region(rc, 0) : gkc_out_mem(cm, bytes);
      gkc_info info;
      double t0 = now_us();
      CALL(c, path ? "sgemm (regions)" : "sgemm (socket)",
           gkc_sgemm_ref(c, path ? &reg : &sock, &out, &info));
      double rtt = now_us() - t0;
      progress("  sgemm %s%s: %.1f ms (kernel %.1f ms)\n", path ? "regions" : "socket ",
               rep < 0 ? " (warm-up)" : "", rtt / 1e3, info.kernel_us / 1e3);
      if (rep >= 0) t[path][done[path]++] = (timing){rtt, info.server_us, info.kernel_us,
                                                     info.h2d_us, info.d2h_us};
    }
    if (rep >= 2 && (now_us() - t_start) / 1e6 > budget_s) break;
  }
  /* The two paths computed the same product. */
  int same = memcmp(cm, gkc_region_data(rc), bytes) == 0;

  double in_bytes = 2.0 * (double)bytes, flops = 2.0 * (double)n * n * n;
  const char *names[2] = {"socket", "regions"};
  char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32];
  if (TEXT) {
    printf("## sgemm %lld x %lld x %lld (%s backend, %d timed calls per path)\n\n",
           (long long)n, (long long)n, (long long)n, backend, done[0]);
    printf("| path | round trip ms | server ms | kernel ms | h2d ms | d2h ms | in GB/s (h2d) "
           "| in GB/s (e2e) | TFLOP/s (rt) |\n|---|---|---|---|---|---|---|---|---|\n");
  } else {
    jput("\"sgemm\": {\"n\": %lld, \"backend\": \"%s\", \"input_bytes\": %.0f, "
         "\"same_result\": %s, \"paths\": {", (long long)n, backend, in_bytes,
         same ? "true" : "false");
  }
  for (int p = 0; p < 2; p++) {
    double v[5][MAXR];
    for (int i = 0; i < done[p]; i++) {
      v[0][i] = t[p][i].rtt, v[1][i] = t[p][i].server, v[2][i] = t[p][i].kernel;
      v[3][i] = t[p][i].h2d, v[4][i] = t[p][i].d2h;
    }
    double rtt = median(v[0], done[p]), srv = median(v[1], done[p]);
    double ker = median(v[2], done[p]), h2d = median(v[3], done[p]), d2h = median(v[4], done[p]);
    double in_h2d = h2d > 0 ? in_bytes / h2d / 1e3 : NAN;
    double e2e_us = rtt - ker - (isfinite(d2h) ? d2h : 0);
    double in_e2e = e2e_us > 0 ? in_bytes / e2e_us / 1e3 : NAN;
    csv_row("sgemm", names[p], (long long)n, done[p],
            (const double[CSV_NVALUES]){rtt, srv, NAN, NAN, ker, h2d, d2h, in_h2d, in_e2e, NAN, NAN,
                                        NAN, NAN, NAN},
            same);
    if (TEXT) {
      printf("| %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %.2f |\n", names[p], rtt / 1e3,
             srv / 1e3, ker / 1e3, isfinite(h2d) ? jnum(h2d / 1e3, b1) : "-",
             isfinite(d2h) ? jnum(d2h / 1e3, b2) : "-", isfinite(in_h2d) ? jnum(in_h2d, b3) : "-",
             jnum(in_e2e, b4), flops / rtt / 1e6);
    } else {
      jput("%s\"%s\": {\"round_trip_us\": %s, \"server_us\": %s, \"kernel_us\": %s, "
           "\"h2d_us\": %s, \"d2h_us\": %s, \"in_gbps_h2d\": %s, \"in_gbps_e2e\": %s, "
           "\"calls\": %d}", p ? ", " : "", names[p], jnum(rtt, b1), jnum(srv, b2),
           jnum(ker, b3), jnum(h2d, b4), jnum(d2h, b5), jnum(in_h2d, b6), jnum(in_e2e, b7),
           done[p]);
      (void)b8;
    }
  }
  if (TEXT)
    printf("\nin GB/s (h2d): bytes of A and B / h2d_us.  in GB/s (e2e): bytes of A and B /\n"
           "(round trip - kernel_us - d2h_us).  Results identical across paths: %s.\n\n",
           same ? "yes" : "NO");
  else
    jput("}}");
  CALL(c, "release", gkc_region_release(c, ra));
  CALL(c, "release", gkc_region_release(c, rb));
  CALL(c, "release", gkc_region_release(c, rc));
  free(a), free(b), free(cm);
}

/* --- 2. spmv: by value against resident ---------------------------------------------- */

static void spmv_section(gkc_conn *c, double budget_s) {
  int64_t g = O.quick ? 128 : O.grid;
  mtx_csr M;
  progress("spmv: building the %lld x %lld grid's Laplacian...\n", (long long)g, (long long)g);
  if (cg_laplacian((int32_t)g, &M) != 0) bench_die("cannot build a %lld-grid Laplacian", (long long)g);
  gkc_csr A = {M.rows, M.cols, M.nnz, M.row_ptr, M.col_idx, M.values};
  size_t xb = (size_t)M.cols * 4, yb = (size_t)M.rows * 4;
  float *x = xmalloc(xb), *y = xmalloc(yb), *yv = xmalloc(yb);
  fill(x, (size_t)M.cols, 3);
  int calls = O.quick ? 10 : O.spmv_calls;
  double *rt[3], *ker[3], *srv[3], *que[3], *wrk[3];
  int done[3] = {0, 0, 0};
  for (int m = 0; m < 3; m++) rt[m] = xmalloc((size_t)calls * 8), ker[m] = xmalloc((size_t)calls * 8),
                                srv[m] = xmalloc((size_t)calls * 8), que[m] = xmalloc((size_t)calls * 8),
                                wrk[m] = xmalloc((size_t)calls * 8);

  /* Warm-up by value (also the reference y). */
  CALL(c, "spmv", gkc_spmv(c, &A, 1.0f, x, 0.0f, yv, NULL, NULL));
  double t0 = now_us();
  uint32_t mat, hx, hy;
  char algo[32];
  CALL(c, "csr_upload", gkc_csr_upload(c, &A, 0, &mat, algo));
  double upload_us = now_us() - t0;
  CALL(c, "upload x", gkc_upload(c, gkc_ref_mem(x, xb), GKC_F32, 0, &hx));
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.use_matrix = 1, s.matrix = mat, s.x = gkc_ref_handle(hx, xb);
  gkc_out first = gkc_out_new_handle();
  CALL(c, "spmv (resident)", gkc_spmv_ref(c, &s, &first, NULL));
  hy = first.handle;

  static const char *const names[3] = {"by value (matrix sent)", "resident, y returned",
                                       "resident, y resident"};
  static const char *const keys[3] = {"by_value", "resident_y_bin", "resident_y_handle"};
  double share = budget_s / 3;
  for (int m = 0; m < 3; m++) {
    double start = now_us();
    for (int i = 0; i < calls; i++) {
      gkc_info info;
      gkc_out out = m == 2 ? gkc_out_handle(hy) : gkc_out_mem(y, yb);
      double t1 = now_us();
      if (m == 0)
        CALL(c, "spmv", gkc_spmv(c, &A, 1.0f, x, 0.0f, y, NULL, &info));
      else
        CALL(c, "spmv (resident)", gkc_spmv_ref(c, &s, &out, &info));
      rt[m][i] = now_us() - t1, ker[m][i] = info.kernel_us, srv[m][i] = info.server_us,
      que[m][i] = info.queue_us, wrk[m][i] = info.worker_us;
      done[m]++;
      if (i >= 2 && (now_us() - start) / 1e6 > share) break;
    }
    progress("  spmv %s: %d calls, median %.3f ms\n", names[m], done[m],
             median(rt[m], done[m]) / 1e3);
  }
  int same = memcmp(y, yv, yb) == 0;
  CALL(c, "download", gkc_download(c, hy, y, yb));
  same = same && memcmp(y, yv, yb) == 0;
  double matrix_bytes = 4.0 * ((double)M.rows + 1 + 2.0 * (double)M.nnz);
  char b1[32], b2[32];
  if (TEXT) {
    printf("## spmv, 5-point Laplacian of a %lld x %lld grid (%d rows, %lld nonzeros, matrix "
           "%.0f MB)\n\n", (long long)g, (long long)g, M.rows, (long long)M.nnz, matrix_bytes / 1e6);
    printf("csr_upload: %.2f ms (algo %s).  Results identical: %s.\n\n", upload_us / 1e3, algo,
           same ? "yes" : "NO");
    printf("Medians; \"in gkcd\" holds \"waiting\" (for a worker) and \"in a worker\" (copies, launch,\n"
           "kernel, synchronisation), the rest of it is the hand-back to the event loop.\n\n");
    printf("| mode | calls | round trip ms | in gkcd ms | waiting ms | in a worker ms | kernel ms |"
           " speed-up (rt) |\n|---|---|---|---|---|---|---|---|\n");
  } else {
    jput(", \"spmv\": {\"grid\": %lld, \"rows\": %d, \"nnz\": %lld, \"matrix_bytes\": %.0f, "
         "\"csr_upload_us\": %.3f, \"algo\": \"%s\", \"same_result\": %s, \"modes\": {",
         (long long)g, M.rows, (long long)M.nnz, matrix_bytes, upload_us, algo,
         same ? "true" : "false");
  }
  double base = median(rt[0], done[0]);
  for (int m = 0; m < 3; m++) {
    double r = median(rt[m], done[m]), k = median(ker[m], done[m]), sv = median(srv[m], done[m]);
    double q = median(que[m], done[m]), w = median(wrk[m], done[m]);
    char b3[32], b4[32], b5[32];
    csv_row("spmv", keys[m], (long long)g, done[m],
            (const double[CSV_NVALUES]){r, sv, q, w, k, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN},
            same);
    if (TEXT)
      printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.2fx |\n", names[m], done[m], r / 1e3,
             sv / 1e3, q / 1e3, w / 1e3, k / 1e3, base / r);
    else
      jput("%s\"%s\": {\"calls\": %d, \"round_trip_us\": %s, \"server_us\": %s, \"queue_us\": %s,"
           " \"worker_us\": %s, \"kernel_us\": %s}", m ? ", " : "", keys[m], done[m], jnum(r, b1),
           jnum(sv, b3), jnum(q, b4), jnum(w, b5), jnum(k, b2));
  }
  if (TEXT) printf("\n");
  else jput("}}");
  CALL(c, "release", gkc_release(c, hy));
  CALL(c, "release", gkc_release(c, hx));
  CALL(c, "release", gkc_release_matrix(c, mat));
  for (int m = 0; m < 3; m++) free(rt[m]), free(ker[m]), free(srv[m]), free(que[m]), free(wrk[m]);
  free(x), free(y), free(yv);
  mtx_free(&M);
}

/* --- 3. CG ----------------------------------------------------------------------------------- */

static void cg_section(gkc_conn *c) {
  int64_t g = O.quick ? 64 : O.cg_grid;
  mtx_csr M;
  if (cg_laplacian((int32_t)g, &M) != 0) bench_die("cannot build a %lld-grid Laplacian", (long long)g);
  gkc_csr A = {M.rows, M.cols, M.nnz, M.row_ptr, M.col_idx, M.values};
  float *xs = xmalloc((size_t)M.rows * 4), *b = xmalloc((size_t)M.rows * 4);
  float *x = xmalloc((size_t)M.rows * 4);
  cg_rhs(&A, 1, xs, b);
  cg_params p = {1e-5, O.quick ? 200 : O.cg_iters, CG_REQUESTS};
  cg_stats st;
  progress("cg on the %lld x %lld Laplacian, at most %d iterations...\n", (long long)g,
           (long long)g, p.max_iter);
  if (cg_solve(c, &A, b, x, &p, &st) != 0) bench_die("cg: %s", st.msg);
  double per_it_us = st.iterations ? st.solve_s * 1e6 / st.iterations : NAN;
  char b1[32];
  csv_row("cg", "resident", (long long)g, (int)st.requests,
          (const double[CSV_NVALUES]){NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, st.iterations,
                                      st.converged, st.iters_per_s, per_it_us, st.true_residual},
          -1);
  if (TEXT) {
    printf("## conjugate gradients, 5-point Laplacian of a %lld x %lld grid (%d rows)\n\n",
           (long long)g, (long long)g, M.rows);
    printf("%d iterations (%s), %.1f iterations/s, %.1f us per iteration (1 spmv, 2 dot, "
           "3 axpby: %.1f us per request), true residual %.3g, setup %.1f ms\n",
           st.iterations, st.converged ? "converged" : "stopped at --cg-iters", st.iters_per_s,
           per_it_us, per_it_us / 6, st.true_residual, st.setup_s * 1e3);
  } else {
    jput(", \"cg\": {\"grid\": %lld, \"rows\": %d, \"iterations\": %d, \"converged\": %s, "
         "\"iterations_per_s\": %.3f, \"us_per_iteration\": %s, \"true_residual\": %.6g, "
         "\"requests\": %lld, \"setup_s\": %.6f, \"solve_s\": %.6f}",
         (long long)g, M.rows, st.iterations, st.converged ? "true" : "false", st.iters_per_s,
         jnum(per_it_us, b1), st.true_residual, (long long)st.requests, st.setup_s, st.solve_s);
  }
  free(xs), free(b), free(x);
  mtx_free(&M);
}

/* --- main ------------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
"Usage: bench_resident [OPTIONS]\n"
"Measures sgemm through the socket against shared-memory regions, spmv sending\n"
"the matrix against a resident matrix, and CG with everything resident.\n\n"
"  --gkcd PATH        start this gkcd (default $GKCD_BIN) on a temporary socket\n"
"  --backend B        its --backend (default cpu)\n"
"  --socket PATH      measure the gkcd already listening there instead\n"
"  --n N              sgemm size N x N x N (default 8192 on cuda, 2048 on cpu)\n"
"  --reps R           timed sgemm calls per path, after one warm-up (default 5)\n"
"  --grid G           spmv on the Laplacian of a G x G grid (default 2048)\n"
"  --spmv-calls N     spmv calls per mode (default 100)\n"
"  --cg-grid G        CG on the Laplacian of a G x G grid (default 512)\n"
"  --cg-iters N       at most N CG iterations (default 500)\n"
"  --time-limit S     seconds for all sections together, roughly (default 300);\n"
"                     each section stops after at least 3 timed calls when its\n"
"                     share is spent\n"
"  --no-sgemm, --no-spmv, --no-cg   skip a section\n"
"  --quick            tiny sizes: a smoke test of a few seconds\n"
"  --json             one JSON object on stdout\n"
"  --csv              CSV on stdout: a header row, then one row per measured mode\n"
"                     (sgemm socket/regions, spmv's three modes, cg); size is N\n"
"                     or the grid, calls the timed calls (cg: its requests),\n"
"                     same_result 1 when the modes computed the same bytes\n"
"  -h, --help\n");
}

int main(int argc, char **argv) {
  bench_prog = "bench_resident";
  enum { O_GKCD = 256, O_BACKEND, O_SOCKET, O_N, O_REPS, O_GRID, O_CALLS, O_CGGRID, O_CGITERS,
         O_TIME, O_NOSGEMM, O_NOSPMV, O_NOCG, O_QUICK, O_JSON, O_CSV };
  static const struct option opts[] = {
      {"gkcd", required_argument, 0, O_GKCD},       {"backend", required_argument, 0, O_BACKEND},
      {"socket", required_argument, 0, O_SOCKET},   {"n", required_argument, 0, O_N},
      {"reps", required_argument, 0, O_REPS},       {"grid", required_argument, 0, O_GRID},
      {"spmv-calls", required_argument, 0, O_CALLS}, {"cg-grid", required_argument, 0, O_CGGRID},
      {"cg-iters", required_argument, 0, O_CGITERS}, {"time-limit", required_argument, 0, O_TIME},
      {"no-sgemm", no_argument, 0, O_NOSGEMM},      {"no-spmv", no_argument, 0, O_NOSPMV},
      {"no-cg", no_argument, 0, O_NOCG},            {"quick", no_argument, 0, O_QUICK},
      {"json", no_argument, 0, O_JSON},             {"csv", no_argument, 0, O_CSV},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (o) {
      case O_GKCD: O.gkcd = optarg; break;
      case O_BACKEND: O.backend = optarg; break;
      case O_SOCKET: O.socket = optarg; break;
      case O_N: O.n = bench_parse_long("--n", optarg, 1, 46340); break;
      case O_REPS: O.reps = (int)bench_parse_long("--reps", optarg, 1, 64); break;
      case O_GRID: O.grid = bench_parse_long("--grid", optarg, 1, 20000); break;
      case O_CALLS: O.spmv_calls = (int)bench_parse_long("--spmv-calls", optarg, 1, 1000000); break;
      case O_CGGRID: O.cg_grid = bench_parse_long("--cg-grid", optarg, 1, 20000); break;
      case O_CGITERS: O.cg_iters = (int)bench_parse_long("--cg-iters", optarg, 1, 10000000); break;
      case O_TIME: O.time_limit = (double)bench_parse_long("--time-limit", optarg, 1, 86400); break;
      case O_NOSGEMM: O.no_sgemm = 1; break;
      case O_NOSPMV: O.no_spmv = 1; break;
      case O_NOCG: O.no_cg = 1; break;
      case O_QUICK: O.quick = 1; break;
      case O_JSON: O.json = 1; break;
      case O_CSV: O.csv = 1; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) bench_die("unexpected argument '%s'", argv[optind]);
  if (O.json && O.csv) bench_die("--json and --csv: give one of them");
  if (O.csv && bench_csv_open(&g_csv, "-", "section,mode,size,calls," CSV_VALUES ",same_result,backend") != 0)
    return 1;
  if (!O.socket) {
    start_gkcd();
    atexit(stop_gkcd);
  }
  gkc_conn *c = conn_open();
  gkc_ping_info pi;
  CALL(c, "ping", gkc_ping(c, &pi));
  progress("gkcd %s, backend %s, at %s\n", pi.version, pi.backend, O.socket);
  snprintf(g_backend, sizeof g_backend, "%s", pi.backend);
  if (O.json) jput("{\"gkcd_version\": \"%s\", \"backend\": \"%s\"", pi.version, pi.backend);
  if (O.json) jput(", ");
  int sections = !O.no_sgemm + !O.no_spmv;
  double share = sections ? O.time_limit * 0.9 / sections : 0;
  if (!O.no_sgemm) sgemm_section(c, share, pi.backend);
  else if (O.json) jput("\"sgemm\": null");
  if (!O.no_spmv) spmv_section(c, share);
  else if (O.json) jput(", \"spmv\": null");
  if (!O.no_cg) cg_section(c);
  else if (O.json) jput(", \"cg\": null");
  if (O.json) printf("%s}\n", g_json);
  if (bench_csv_close(&g_csv) != 0) return 1;
  gkc_close(c);
  return 0;
}
