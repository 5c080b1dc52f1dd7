/* e2e_coloc: co-location of a connection's objects (issue 26 item 2;
 * PROTOCOL.md, "Devices", placement), on the CPU backend's virtual devices
 * (--cpu-devices 2 and 3), through libgkc and raw frames.
 *
 * What it shows, each on a gkcd of its own (the rule counts the homes of
 * open connections, so one section's connections must not steer another's):
 * a csr_upload then an upload, neither naming `device`, land on one device
 * and spmv and solve on them move nothing (0 bytes, no peer_bytes), also
 * when pipelined; the objects of different connections spread over every
 * device; `device` is obeyed and the connection's later objects follow it;
 * a connection using another's shared matrix gets its vectors beside it;
 * when the home device has no room, the object goes to another device and
 * a request on both still succeeds by moving, with the bytes reported;
 * status's per-device memory shows where the objects went.  Numeric results
 * are checked against float64.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gkc.h"
#include "rawrpc.h"

#define MAXDEV 3

static int g_ndev;
static char g_ndev_str[12];

static void start(fixture *fx, const char *memory) {
  const char *args[] = {"--cpu-devices", g_ndev_str, memory ? "--cpu-device-memory" : NULL, memory,
                        NULL};
  fixture_start(fx, args, NULL);
}

static void stop(fixture *fx) {
  int st = fixture_stop(fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
}

static gkc_conn *conn(const fixture *fx) {
  gkc_conn *g = NULL;
  CHECK(gkc_connect(&g, fx->sock) == 0, "connect: %s", g ? gkc_errmsg(g) : "no memory");
  return g;
}

/* A tridiagonal 4, -1 matrix of n rows (SPD, well conditioned), malloc'd
 * arrays in *A. */
static void tridiag(int32_t n, gkc_csr *A) {
  int32_t *rp = malloc(((size_t)n + 1) * 4), *ci = malloc((size_t)n * 3 * 4);
  float *va = malloc((size_t)n * 3 * 4);
  int32_t nz = 0;
  for (int32_t i = 0; i < n; i++) {
    rp[i] = nz;
    for (int32_t j = i - 1; j <= i + 1; j++)
      if (j >= 0 && j < n) ci[nz] = j, va[nz++] = j == i ? 4.0f : -1.0f;
  }
  rp[n] = nz;
  *A = (gkc_csr){n, n, nz, rp, ci, va};
}

static void tridiag_free(gkc_csr *A) {
  free((void *)A->row_ptr), free((void *)A->col_idx), free((void *)A->values);
}

static uint32_t up(gkc_conn *g, const float *x, size_t n, int device, int shared, int *dev) {
  gkc_placement w = {device < 0 ? GKC_DEVICE_AUTO : device, 0, shared};
  uint32_t h = 0;
  *dev = -9;
  CHECK(gkc_upload_placed(g, gkc_ref_mem(x, n * 4), GKC_F32, &w, &h, dev) == 0, "upload: %s",
        gkc_errmsg(g));
  return h;
}

static uint32_t up_csr(gkc_conn *g, const gkc_csr *A, int device, int shared, int *dev) {
  gkc_placement w = {device < 0 ? GKC_DEVICE_AUTO : device, 0, shared};
  uint32_t m = 0;
  *dev = -9;
  CHECK(gkc_csr_upload_placed(g, A, &w, &m, dev) == 0, "csr_upload: %s", gkc_errmsg(g));
  return m;
}

static void mem_used(gkc_conn *g, uint64_t *used) {
  gkc_status_info *s = calloc(1, sizeof *s);
  CHECK(s && gkc_status(g, s) == 0 && s->n_devices == g_ndev, "status");
  for (int d = 0; d < g_ndev; d++) used[d] = s ? s->devices[d].memory_used : 0;
  free(s);
}

/* ‖b − A·x‖/‖b‖ in float64. */
static double rel_residual(const gkc_csr *A, const float *b, const float *x) {
  double rn = 0, bn = 0;
  for (int32_t i = 0; i < A->rows; i++) {
    double ax = 0;
    for (int32_t t = A->row_ptr[i]; t < A->row_ptr[i + 1]; t++) ax += (double)A->values[t] * x[A->col_idx[t]];
    rn += (b[i] - ax) * (b[i] - ax), bn += (double)b[i] * b[i];
  }
  return sqrt(rn / bn);
}

/* spmv of matrix m on handle hx, checked against float64; fills info. */
static void spmv_check(gkc_conn *g, const gkc_csr *A, uint32_t m, uint32_t hx, const float *x,
                       gkc_info *info) {
  float *y = malloc((size_t)A->rows * 4);
  gkc_spmv_args sa = GKC_SPMV_ARGS_INIT;
  sa.use_matrix = 1, sa.matrix = m, sa.x = gkc_ref_handle(hx, (size_t)A->cols * 4);
  gkc_out out = gkc_out_mem(y, (size_t)A->rows * 4);
  int rc = gkc_spmv_ref(g, &sa, &out, info);
  CHECK(rc == 0, "spmv: %s", gkc_errmsg(g));
  int bad = -1;
  for (int32_t i = 0; i < A->rows && bad < 0 && rc == 0; i++) {
    double w = 0, mag = 0;
    for (int32_t t = A->row_ptr[i]; t < A->row_ptr[i + 1]; t++)
      w += (double)A->values[t] * x[A->col_idx[t]], mag += fabs((double)A->values[t] * x[A->col_idx[t]]);
    if (fabs(y[i] - w) > 4 * 6e-8 * mag + 1e-30) bad = i;
  }
  CHECK(bad < 0, "spmv row %d wrong", bad);
  free(y);
}

/* The issue's scenario: csr_upload, then upload, neither naming a device,
 * then spmv and solve on them: one device, nothing moved. */
static void issue(void) {
  rr_ctx = "issue 26 scenario";
  fixture fx;
  start(&fx, NULL);
  gkc_conn *g = conn(&fx);
  enum { N = 500 };
  gkc_csr A;
  tridiag(N, &A);
  float b[N];
  for (int i = 0; i < N; i++) b[i] = (float)sin(0.1 * i) + 1.0f;
  uint64_t before[MAXDEV], after[MAXDEV];
  mem_used(g, before);
  int dm, db;
  uint32_t m = up_csr(g, &A, -1, 0, &dm), hb = up(g, b, N, -1, 0, &db);
  CHECK(dm >= 0 && dm < g_ndev && db == dm, "matrix on device %d, b on device %d", dm, db);
  /* status shows them there, and nowhere else. */
  mem_used(g, after);
  for (int d = 0; d < g_ndev; d++)
    CHECK(d == dm ? after[d] >= before[d] + (N + 1) * 4 + 8 * (uint64_t)A.nnz + N * 4
                  : after[d] == before[d],
          "device %d memory_used %" PRIu64 " -> %" PRIu64 " (objects on %d)", d, before[d],
          after[d], dm);
  gkc_info info;
  spmv_check(g, &A, m, hb, b, &info);
  CHECK(info.device == dm && info.peer_bytes == 0, "spmv ran on %d (objects on %d), %g bytes moved",
        info.device, dm, info.peer_bytes);
  gkc_solve_args sa = GKC_SOLVE_ARGS_INIT;
  float xs[N];
  sa.matrix = m, sa.b = gkc_ref_handle(hb, sizeof b), sa.rtol = 1e-6, sa.max_iter = 5 * N;
  gkc_out xo = gkc_out_mem(xs, sizeof xs);
  gkc_solve_result sr;
  int rc = gkc_solve(g, &sa, &xo, &sr, &info);
  CHECK(rc == 0 && sr.converged, "solve: %s (%s)", rc ? gkc_errmsg(g) : "ran", sr.reason);
  CHECK(info.device == dm && info.peer_bytes == 0, "solve ran on %d (objects on %d), %g bytes moved",
        info.device, dm, info.peer_bytes);
  CHECK(rel_residual(&A, b, xs) < 1e-4, "solve: true relative residual %.3g", rel_residual(&A, b, xs));
  /* Later vectors of the connection follow too. */
  for (int k = 0; k < 4; k++) {
    int dx;
    uint32_t hx = up(g, b, N, -1, 0, &dx);
    CHECK(dx == dm, "vector %d of the connection on %d, its matrix on %d", k, dx, dm);
    gkc_release(g, hx);
  }
  gkc_close(g);
  tridiag_free(&A);
  stop(&fx);
}

/* The same, pipelined on one connection: every object is sent before the
 * first reply comes back. */
static void pipelined(void) {
  rr_ctx = "pipelined";
  fixture fx;
  start(&fx, NULL);
  rr_conn c;
  rr_open(&c, &fx);
  enum { N = 3000, K = 6 };
  gkc_csr A;
  tridiag(N, &A);
  float *x = rr_rand_floats(N);
  rr_frame f;
  rr_frame_init(&f);
  rr_pack_request(&f, 1, "csr_upload",
                  ARGS(AI("rows", N), AI("cols", N), AB("row_ptr", A.row_ptr, (N + 1) * 4),
                       AB("col_idx", A.col_idx, (size_t)A.nnz * 4),
                       AB("values", A.values, (size_t)A.nnz * 4)));
  for (uint32_t k = 0; k < K; k++)
    rr_pack_request(&f, 2 + k, "upload", ARGS(AB("data", x, N * 4), AS("dtype", "f32")));
  CHECK(rr_send_some(c.fd, f.sb.data, f.sb.size) == 0, "sending");
  rr_frame_free(&f);
  int64_t dev[K + 1];
  for (int i = 0; i < K + 1; i++) dev[i] = -9;
  for (int i = 0; i < K + 1; i++) {
    rr_reply r;
    rr_get_reply(&c, &r, 30000);
    const msgpack_object *d = r.result ? proto_map_get(r.result, "device") : NULL;
    CHECK(r.got && !r.is_error && d && d->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
              r.msgid >= 1 && r.msgid <= K + 1,
          "reply %d: %s", i, rr_reply_desc(&r));
    if (d && d->type == MSGPACK_OBJECT_POSITIVE_INTEGER && r.msgid >= 1 && r.msgid <= K + 1)
      dev[r.msgid - 1] = (int64_t)d->via.u64;
    rr_reply_free(&r);
  }
  for (int i = 1; i < K + 1; i++)
    CHECK(dev[i] == dev[0], "pipelined upload %d on device %" PRId64 ", the matrix on %" PRId64, i,
          dev[i], dev[0]);
  rr_close(&c);
  free(x);
  tridiag_free(&A);
  stop(&fx);
}

/* Connections each with a matrix and vectors of their own spread over the
 * devices, one home each, and keep their own objects together; a
 * connection's requests then run on its device and move nothing. */
static void spread(void) {
  rr_ctx = "spread";
  fixture fx;
  start(&fx, NULL);
  enum { N = 400, C = 2 * MAXDEV };
  int nc = 2 * g_ndev;
  gkc_conn *g[C];
  uint32_t m[C], hx[C];
  int dm[C], dx[C], count[MAXDEV] = {0};
  gkc_csr A;
  tridiag(N, &A);
  float *x = rr_rand_floats(N);
  for (int i = 0; i < nc; i++) {
    g[i] = conn(&fx);
    m[i] = up_csr(g[i], &A, -1, 0, &dm[i]);
    hx[i] = up(g[i], x, N, -1, 0, &dx[i]);
    CHECK(dx[i] == dm[i], "connection %d: matrix on %d, its vector on %d", i, dm[i], dx[i]);
    if (dm[i] >= 0 && dm[i] < g_ndev) count[dm[i]]++;
  }
  /* One home per device before any has two. */
  for (int d = 0; d < g_ndev; d++)
    CHECK(count[d] == 2, "device %d is home to %d of %d connections", d, count[d], nc);
  for (int i = 0; i < nc; i++) {
    gkc_info info;
    spmv_check(g[i], &A, m[i], hx[i], x, &info);
    CHECK(info.device == dm[i] && info.peer_bytes == 0, "connection %d's spmv on %d, %g bytes moved",
          i, info.device, info.peer_bytes);
  }
  /* A connection that closes is no longer a home: the next one takes its place. */
  int freed = dm[0];
  gkc_close(g[0]);
  gkc_conn *h = conn(&fx);
  gkc_status_info *s = calloc(1, sizeof *s); /* a round trip on another connection, */
  if (s) gkc_status(g[1], s);                /* after which gkcd has seen the close */
  free(s);
  int d0;
  uint32_t mh = up_csr(h, &A, -1, 0, &d0);
  CHECK(d0 == freed, "a new connection's matrix on %d, the closed one's home was %d", d0, freed);
  (void)mh;
  gkc_close(h);
  for (int i = 1; i < nc; i++) gkc_close(g[i]);
  free(x);
  tridiag_free(&A);
  stop(&fx);
}

/* `device` is obeyed, for objects and requests; the connection's later
 * unnamed objects go where it last named. */
static void named(void) {
  rr_ctx = "named device";
  fixture fx;
  start(&fx, NULL);
  gkc_conn *g = conn(&fx);
  enum { LEN = 4000 };
  float *x = rr_rand_floats(LEN), *y = rr_rand_floats(LEN);
  int last = g_ndev - 1, d0, d1, d2, d3;
  uint32_t h0 = up(g, x, LEN, -1, 0, &d0);
  CHECK(d0 == 0, "the first connection's first object on %d", d0);
  uint32_t h1 = up(g, y, LEN, last, 0, &d1);
  CHECK(d1 == last, "upload named device %d went to %d", last, d1);
  uint32_t h2 = up(g, y, LEN, -1, 0, &d2);
  CHECK(d2 == last, "the next unnamed upload on %d, the last named %d", d2, last);
  uint32_t h3 = up(g, x, LEN, 0, 0, &d3);
  CHECK(d3 == 0, "upload named device 0 went to %d", d3);
  /* A request on both runs where one lives and moves the other there. */
  double v = NAN, mag = 0, want = 0;
  for (int i = 0; i < LEN; i++) want += (double)x[i] * y[i], mag += fabs((double)x[i] * y[i]);
  gkc_info info;
  int rc = gkc_dot(g, gkc_ref_handle(h0, LEN * 4), gkc_ref_handle(h2, LEN * 4), &v, &info);
  CHECK(rc == 0 && (info.device == 0 || info.device == last), "dot across devices: %s, on %d",
        rc ? gkc_errmsg(g) : "ran", info.device);
  CHECK(info.peer_bytes == LEN * 4, "dot across devices moved %g bytes, expected %d",
        info.peer_bytes, LEN * 4);
  CHECK(fabs(v - want) <= LEN * 6e-8 * mag, "dot %.9g, float64 %.9g", v, want);
  gkc_release(g, h0), gkc_release(g, h1), gkc_release(g, h2), gkc_release(g, h3);
  gkc_close(g);
  free(x), free(y);
  stop(&fx);
}

/* Several connections of one client: one uploads a shared matrix, another
 * reads it and then uploads its vectors, which land beside it, so its
 * solve moves nothing.  A third connection of its own still goes to
 * another device. */
static void shared(void) {
  rr_ctx = "shared matrix";
  fixture fx;
  start(&fx, NULL);
  enum { N = 600 };
  gkc_csr A;
  tridiag(N, &A);
  float b[N];
  for (int i = 0; i < N; i++) b[i] = (float)cos(0.05 * i);
  gkc_conn *ga = conn(&fx), *gb = conn(&fx), *gc = conn(&fx);
  int dm, dv, dc;
  uint32_t m = up_csr(ga, &A, -1, 1, &dm);
  /* The other connection reads it first (b sent with the request). */
  float y[N];
  gkc_spmv_args sa = GKC_SPMV_ARGS_INIT;
  sa.use_matrix = 1, sa.matrix = m, sa.x = gkc_ref_mem(b, sizeof b);
  gkc_out yo = gkc_out_mem(y, sizeof y);
  gkc_info info;
  CHECK(gkc_spmv_ref(gb, &sa, &yo, &info) == 0 && info.device == dm,
        "spmv on the shared matrix from another connection: %s, on %d", gkc_errmsg(gb), info.device);
  uint32_t hb = up(gb, b, N, -1, 0, &dv);
  CHECK(dv == dm, "the reading connection's vector on %d, the shared matrix on %d", dv, dm);
  gkc_solve_args so = GKC_SOLVE_ARGS_INIT;
  float xs[N];
  so.matrix = m, so.b = gkc_ref_handle(hb, sizeof b), so.rtol = 1e-6, so.max_iter = 5 * N;
  gkc_out xo = gkc_out_mem(xs, sizeof xs);
  gkc_solve_result sr;
  int rc = gkc_solve(gb, &so, &xo, &sr, &info);
  CHECK(rc == 0 && sr.converged && info.device == dm && info.peer_bytes == 0,
        "solve on the shared matrix: %s, on %d, %g bytes moved", rc ? gkc_errmsg(gb) : sr.reason,
        info.device, info.peer_bytes);
  CHECK(rel_residual(&A, b, xs) < 1e-4, "solve: true relative residual %.3g", rel_residual(&A, b, xs));
  /* Both connections are homed on dm: an unrelated one goes elsewhere. */
  uint32_t hc = up(gc, b, N, -1, 0, &dc);
  CHECK(dc != dm && dc >= 0, "a third connection's vector on %d, beside the two homed on %d", dc, dm);
  gkc_release(gb, hb), gkc_release(gc, hc), gkc_release_matrix(ga, m);
  gkc_close(ga), gkc_close(gb), gkc_close(gc);
  tridiag_free(&A);
  stop(&fx);
}

/* No room at home: the object goes to another device, and a request on
 * both moves what it must, reporting the bytes. */
static void no_room(void) {
  rr_ctx = "no room at home";
  fixture fx;
  start(&fx, "1M");
  gkc_conn *g = conn(&fx);
  const uint64_t DEV = 1 << 20;
  gkc_csr A;
  enum { LX = 18000 }; /* x: 72 KB */
  tridiag(LX, &A);     /* about 500 KB */
  float *x = rr_rand_floats(LX);
  int dm, dx, dy;
  uint32_t m = up_csr(g, &A, -1, 0, &dm), hx = up(g, x, LX, -1, 0, &dx);
  CHECK(dx == dm, "matrix on %d, x on %d", dm, dx);
  uint64_t used[MAXDEV];
  mem_used(g, used);
  /* y just too big for what is left at home, small enough beside x anywhere else. */
  uint64_t left = dm >= 0 && dm < g_ndev && used[dm] < DEV ? DEV - used[dm] : 0;
  size_t ly = (size_t)(left / 4 + 1024);
  CHECK(left > 0 && ly * 4 + LX * 4 < DEV, "home has %" PRIu64 " bytes left", left);
  float *y = rr_rand_floats(ly);
  uint32_t hy = up(g, y, ly, -1, 0, &dy);
  CHECK(dy != dm && dy >= 0 && dy < g_ndev, "y (%zu bytes) on %d, home %d with %" PRIu64 " left",
        ly * 4, dy, dm, left);
  /* A request on x and a vector on y's device runs where one of them is
   * and moves the other. */
  gkc_info info;
  double v = NAN, want = 0, mag = 0;
  for (int i = 0; i < LX; i++) want += (double)x[i] * y[i], mag += fabs((double)x[i] * y[i]);
  uint32_t hy2 = 0;
  int dy2;
  hy2 = up(g, y, LX, -1, 0, &dy2); /* a vector of x's length: follows y's device, the home now */
  CHECK(dy2 == dy, "after y, the home is %d: the next vector on %d", dy, dy2);
  int rc = gkc_dot(g, gkc_ref_handle(hx, LX * 4), gkc_ref_handle(hy2, LX * 4), &v, &info);
  CHECK(rc == 0, "dot across devices: %s", gkc_errmsg(g));
  CHECK((info.device == dy || info.device == dm) && info.peer_bytes == LX * 4,
        "dot ran on %d (x on %d, y on %d), moved %g bytes, expected %d", info.device, dx, dy2,
        info.peer_bytes, LX * 4);
  CHECK(fabs(v - want) <= LX * 6e-8 * mag, "dot %.9g, float64 %.9g", v, want);
  /* The matrix's own vector stays with it. */
  spmv_check(g, &A, m, hx, x, &info);
  CHECK(info.device == dm && info.peer_bytes == 0, "spmv on %d, %g bytes moved", info.device,
        info.peer_bytes);
  gkc_release(g, hy2), gkc_release(g, hy), gkc_release(g, hx), gkc_release_matrix(g, m);
  gkc_close(g);
  free(x), free(y);
  tridiag_free(&A);
  stop(&fx);
}

int main(void) {
  double t0 = rr_now_s();
  rr_rng = test_seed();
  for (g_ndev = 2; g_ndev <= MAXDEV; g_ndev++) {
    snprintf(g_ndev_str, sizeof g_ndev_str, "%d", g_ndev);
    fprintf(stderr, "--cpu-devices %d\n", g_ndev);
    SECTION(issue());
    SECTION(pipelined());
    SECTION(spread());
    SECTION(named());
    SECTION(shared());
    SECTION(no_room());
  }
  rr_print_totals("e2e_coloc", t0);
  return rr_failed ? 1 : 0;
}
