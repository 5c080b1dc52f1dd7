/* e2e_shm_lib.c: libgkc's transparent shared memory, blocking calls, against
 * a real gkcd (gkc.h, "transparent shared memory").
 *
 * Every call on plain pointers is made twice, on a connection that sends
 * its arrays inline and on one whose arena takes them, and the results
 * must be the same bytes; gkc_shm_state's counters say which path each
 * call took.  Then: the switches (GKC_NO_SHM, GKC_SHM_THRESHOLD, the
 * setter), sizes around the threshold, errors that read as they did
 * inline, the arena's growth within gkcd's --max-request-bytes, the
 * fallback when gkcd refuses shm_register (the connection already holds
 * its 64 regions) or memfd_create fails here, gkc_shm_reserve, and the regions gone from
 * gkcd's status once the connection closes. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "test.h"

#define THR 4096 /* the threshold the tests set: every array of a page or more */

static uint64_t rng;

static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 4);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

/* A connection whose arena takes arrays of threshold bytes or more
 * (GKC_SHM_OFF: none). */
static gkc_conn *conn(const fixture *f, size_t threshold) {
  gkc_conn *c;
  if (gkc_connect(&c, f->sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  ASSERT_EQ(gkc_set_shm(c, threshold, 0), 0);
  return c;
}

static gkc_shm_info state(const gkc_conn *c) {
  gkc_shm_info i;
  gkc_shm_state(c, &i);
  return i;
}

/* resident.regions of gkcd's status: regions alive, all connections. */
static long live_regions(gkc_conn *probe) {
  char *json;
  ASSERT_EQ(gkc_status_json(probe, &json), 0);
  const char *r = strstr(json, "\"resident\"");
  ASSERT(r);
  r = strstr(r, "\"regions\": ");
  ASSERT(r);
  long n = strtol(r + strlen("\"regions\": "), NULL, 10);
  free(json);
  return n;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* --- the switches -------------------------------------------------------------------------- */

static void test_defaults(const fixture *f) {
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(gkc_shm_state(c, NULL), 1);
  ASSERT_EQ(i.on, 1);
  ASSERT_EQ(i.threshold, GKC_SHM_DEFAULT_THRESHOLD);
  ASSERT_EQ(i.max_bytes, GKC_SHM_DEFAULT_MAX);
  ASSERT_EQ(i.regions, 0); /* nothing registered before a call needs it */
  ASSERT_STR_EQ(i.why, "");
  /* An array at the default threshold goes through the arena. */
  size_t n = GKC_SHM_DEFAULT_THRESHOLD / 4;
  float *x = rand_vec(n);
  double v;
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MAX, &v, NULL, NULL), 0);
  i = state(c);
  ASSERT_EQ(i.staged, 1);
  ASSERT_EQ(i.regions, 1);
  ASSERT(i.arena_bytes >= GKC_SHM_DEFAULT_THRESHOLD);
  ASSERT_EQ(gkc_reduce(c, x, n - 1, GKC_MAX, &v, NULL, NULL), 0); /* just under it: inline */
  ASSERT_EQ(state(c).staged, 1);
  free(x);
  gkc_close(c);
  ASSERT_EQ(gkc_shm_state(NULL, NULL), 0);
}

static void test_env(const fixture *f) {
  size_t n = 65536;
  float *x = rand_vec(n);
  double v;
  setenv("GKC_NO_SHM", "1", 1);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(i.on, 0);
  ASSERT_CONTAINS(i.why, "GKC_NO_SHM");
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  i = state(c);
  ASSERT_EQ(i.staged, 0);
  ASSERT_EQ(i.regions, 0);
  /* The program's own choice wins over the environment. */
  ASSERT_EQ(gkc_set_shm(c, THR, 0), 0);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  i = state(c);
  ASSERT_EQ(i.on, 1);
  ASSERT_EQ(i.staged, 1);
  ASSERT_STR_EQ(i.why, "");
  gkc_close(c);

  setenv("GKC_NO_SHM", "0", 1); /* "0" is not set */
  setenv("GKC_SHM_THRESHOLD", "64K", 1);
  setenv("GKC_SHM_MAX_BYTES", "32M", 1);
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  i = state(c);
  ASSERT_EQ(i.on, 1);
  ASSERT_EQ(i.threshold, 65536);
  ASSERT_EQ(i.max_bytes, 32 << 20);
  ASSERT_EQ(gkc_reduce(c, x, 16383, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_EQ(state(c).staged, 0);
  ASSERT_EQ(gkc_reduce(c, x, 16384, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_EQ(state(c).staged, 1);
  /* The setter's 0 is the environment's value. */
  ASSERT_EQ(gkc_set_shm(c, 1 << 20, 1 << 30), 0);
  ASSERT_EQ(state(c).threshold, 1 << 20);
  ASSERT_EQ(gkc_set_shm(c, 0, 0), 0);
  ASSERT_EQ(state(c).threshold, 65536);
  ASSERT_EQ(state(c).max_bytes, 32 << 20);
  gkc_close(c);

  setenv("GKC_SHM_THRESHOLD", "lots", 1);
  ASSERT_EQ(gkc_connect(&c, f->sock), 0);
  i = state(c);
  ASSERT_EQ(i.on, 0);
  ASSERT_CONTAINS(i.why, "GKC_SHM_THRESHOLD='lots' is not a size");
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  gkc_close(c);
  unsetenv("GKC_NO_SHM");
  unsetenv("GKC_SHM_THRESHOLD");
  unsetenv("GKC_SHM_MAX_BYTES");
  free(x);
}

static void test_setter(const fixture *f) {
  gkc_conn *probe = conn(f, GKC_SHM_OFF), *c = conn(f, THR);
  size_t n = 100000;
  float *x = rand_vec(n);
  double v;
  /* The connections of the tests before are closed; gkcd may still be
   * letting go of their regions. */
  for (int waited = 0; live_regions(probe) != 0 && waited < 5000; waited += 10) sleep_ms(10);
  long before = live_regions(probe);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_EQ(state(c).staged, 1);
  ASSERT_EQ(live_regions(probe), before + 1);
  /* Off: the idle region goes at once, arrays go inline. */
  ASSERT_EQ(gkc_set_shm(c, GKC_SHM_OFF, 0), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(i.on, 0);
  ASSERT_EQ(i.regions, 0);
  ASSERT_CONTAINS(i.why, "turned off by gkc_set_shm");
  ASSERT_EQ(live_regions(probe), before);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_EQ(state(c).staged, 1);
  ASSERT_EQ(gkc_set_shm(c, THR, 0), 0);
  ASSERT_EQ(gkc_shm_state(c, NULL), 1);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  ASSERT_EQ(state(c).staged, 2);
  free(x);
  gkc_close(c);
  gkc_close(probe);
}

/* --- the same bytes either way ------------------------------------------------------------- */

/* Runs a call on the inline connection and on the arena's (which must
 * stage nstaged arrays for it); the caller then compares the outputs. */
#define BOTH(ci, cs, nstaged, call_i, call_s)                                     \
  do {                                                                           \
    uint64_t s0_ = state(cs).staged;                                             \
    int ri_ = (call_i), rs_ = (call_s);                                          \
    if (ri_ || rs_) TEST_FAIL("%s: inline %d (%s), arena %d (%s)", #call_i, ri_, \
                              gkc_errmsg(ci), rs_, gkc_errmsg(cs));              \
    ASSERT_EQ(state(cs).staged - s0_, nstaged);                                  \
  } while (0)

static void same(const void *a, const void *b, size_t n, const char *what) {
  if (memcmp(a, b, n) != 0) TEST_FAIL("%s: the arena's result differs from the inline one", what);
}

static void test_sgemm(gkc_conn *ci, gkc_conn *cs) {
  static const int shapes[][3] = {{100, 120, 90}, {257, 129, 65}, {33, 1000, 7}};
  for (int s = 0; s < 3; s++)
    for (int t = 0; t < 4; t++) {
      int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = t & 1, tb = t >> 1;
      float beta = t == 2 ? 0.5f : 0.0f;
      float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)k * n);
      float *c0 = rand_vec((size_t)m * n), *c1 = malloc((size_t)m * n * 4);
      memcpy(c1, c0, (size_t)m * n * 4);
      /* a, b, the result, and c when it is read: those of a page or more. */
      int staged = ((size_t)m * k * 4 >= THR) + ((size_t)k * n * 4 >= THR) +
                   ((size_t)m * n * 4 >= THR) * (1 + (beta != 0));
      BOTH(ci, cs, staged, gkc_sgemm(ci, m, n, k, 1.5f, a, ta, b, tb, beta, c0, NULL, NULL),
           gkc_sgemm(cs, m, n, k, 1.5f, a, ta, b, tb, beta, c1, NULL, NULL));
      same(c0, c1, (size_t)m * n * 4, "sgemm");
      free(a), free(b), free(c0), free(c1);
    }
}

static void test_reduce_dot_axpby(gkc_conn *ci, gkc_conn *cs) {
  /* The last is over 16 MiB: copied into and out of the arena in pieces on
   * threads (3 here, so that the pieces are uneven). */
  static const size_t sizes[] = {THR / 4 - 1, THR / 4, THR / 4 + 1, 300007, 1 << 20, 5000011};
  setenv("GKC_COPY_THREADS", "3", 1);
  for (int s = 0; s < 6; s++) {
    size_t n = sizes[s];
    int big = n * 4 >= THR;
    float *x = rand_vec(n), *y = rand_vec(n), *o0 = malloc(n * 4), *o1 = malloc(n * 4);
    for (int op = 0; op < 3; op++) {
      double v0, v1;
      BOTH(ci, cs, big, gkc_reduce(ci, x, n, (gkc_reduce_op)op, &v0, NULL, NULL),
           gkc_reduce(cs, x, n, (gkc_reduce_op)op, &v1, NULL, NULL));
      same(&v0, &v1, sizeof v0, "reduce");
    }
    double d0, d1;
    BOTH(ci, cs, 2 * big, gkc_dot(ci, gkc_ref_mem(x, n * 4), gkc_ref_mem(y, n * 4), &d0, NULL),
         gkc_dot(cs, gkc_ref_mem(x, n * 4), gkc_ref_mem(y, n * 4), &d1, NULL));
    same(&d0, &d1, sizeof d0, "dot");
    BOTH(ci, cs, big, gkc_nrm2(ci, gkc_ref_mem(x, n * 4), &d0, NULL),
         gkc_nrm2(cs, gkc_ref_mem(x, n * 4), &d1, NULL));
    same(&d0, &d1, sizeof d0, "nrm2");
    gkc_out a0 = gkc_out_mem(o0, n * 4), a1 = gkc_out_mem(o1, n * 4);
    BOTH(ci, cs, 3 * big,
         gkc_axpby(ci, 2.5f, gkc_ref_mem(x, n * 4), -1.0f, gkc_ref_mem(y, n * 4), &a0, NULL),
         gkc_axpby(cs, 2.5f, gkc_ref_mem(x, n * 4), -1.0f, gkc_ref_mem(y, n * 4), &a1, NULL));
    same(o0, o1, n * 4, "axpby");
    ASSERT_EQ(a1.bytes, n * 4);
    free(x), free(y), free(o0), free(o1);
  }
  unsetenv("GKC_COPY_THREADS");
}

/* A random CSR; rows and columns over a page each. */
static void random_csr(int32_t rows, int32_t cols, int64_t nnz, gkc_csr *A) {
  int32_t *rp = calloc((size_t)rows + 1, sizeof *rp), *ci = malloc((size_t)nnz * 4 + 4);
  for (int64_t j = 0; j < nnz; j++) rp[1 + test_rand_u64(&rng) % (uint64_t)rows]++;
  for (int32_t r = 0; r < rows; r++) rp[r + 1] += rp[r];
  for (int64_t j = 0; j < nnz; j++) ci[j] = (int32_t)(test_rand_u64(&rng) % (uint64_t)cols);
  *A = (gkc_csr){rows, cols, nnz, rp, ci, rand_vec((size_t)nnz)};
}

static void free_csr(gkc_csr *A) {
  free((void *)A->row_ptr), free((void *)A->col_idx), free((void *)A->values);
}

static void test_spmv(gkc_conn *ci, gkc_conn *cs) {
  gkc_csr A;
  random_csr(5003, 4001, 60000, &A);
  float *x = rand_vec(4001), *y0 = rand_vec(5003), *y1 = malloc(5003 * 4);
  memcpy(y1, y0, 5003 * 4);
  /* row_ptr, col_idx, values, x, y and the result */
  BOTH(ci, cs, 6, gkc_spmv(ci, &A, -1.5f, x, 2.0f, y0, NULL, NULL),
       gkc_spmv(cs, &A, -1.5f, x, 2.0f, y1, NULL, NULL));
  same(y0, y1, 5003 * 4, "spmv");
  BOTH(ci, cs, 5, gkc_spmv(ci, &A, 1.0f, x, 0.0f, y0, NULL, NULL),
       gkc_spmv(cs, &A, 1.0f, x, 0.0f, y1, NULL, NULL));
  same(y0, y1, 5003 * 4, "spmv, beta 0");

  /* A resident matrix: its arrays through the arena at csr_upload; then y,
   * whose size only gkcd knows here, at the end of a region. */
  uint32_t m0, m1;
  char algo0[32], algo1[32];
  BOTH(ci, cs, 3, gkc_csr_upload(ci, &A, 0, &m0, algo0), gkc_csr_upload(cs, &A, 0, &m1, algo1));
  ASSERT_STR_EQ(algo0, algo1);
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.use_matrix = 1, s.x = gkc_ref_mem(x, 4001 * 4);
  gkc_out o0 = gkc_out_mem(y0, 5003 * 4), o1 = gkc_out_mem(y1, 5003 * 4);
  s.matrix = m0;
  ASSERT_EQ(gkc_spmv_ref(ci, &s, &o0, NULL), 0);
  s.matrix = m1;
  uint64_t st = state(cs).staged;
  ASSERT_EQ(gkc_spmv_ref(cs, &s, &o1, NULL), 0);
  ASSERT_EQ(state(cs).staged - st, 2);
  same(y0, y1, 5003 * 4, "spmv on a resident matrix");
  ASSERT_EQ(o1.bytes, 5003 * 4);
  ASSERT_EQ(gkc_release_matrix(ci, m0), 0);
  ASSERT_EQ(gkc_release_matrix(cs, m1), 0);
  free_csr(&A);
  free(x), free(y0), free(y1);
}

static void test_upload_download(gkc_conn *ci, gkc_conn *cs) {
  size_t n = 250001;
  float *x = rand_vec(n), *d0 = malloc(n * 4), *d1 = malloc(n * 4);
  uint32_t h0, h1;
  /* Shared, so that each connection downloads the other's too. */
  BOTH(ci, cs, 1, gkc_upload(ci, gkc_ref_mem(x, n * 4), GKC_F32, 1, &h0),
       gkc_upload(cs, gkc_ref_mem(x, n * 4), GKC_F32, 1, &h1));
  BOTH(ci, cs, 1, gkc_download(ci, h1, d0, n * 4), gkc_download(cs, h0, d1, n * 4));
  same(x, d0, n * 4, "upload through the arena");
  same(x, d1, n * 4, "download through the arena");
  /* int32 too: upload does not care what the bytes are. */
  int32_t *iv = malloc(n * 4);
  for (size_t i = 0; i < n; i++) iv[i] = (int32_t)(i * 2654435761u);
  uint32_t hi;
  ASSERT_EQ(gkc_upload(cs, gkc_ref_mem(iv, n * 4), GKC_I32, 0, &hi), 0);
  ASSERT_EQ(gkc_download(ci, hi, d0, n * 4), GKC_EINVALID_ARGUMENT); /* not shared */
  ASSERT_EQ(gkc_download(cs, hi, d1, n * 4), 0);
  same(iv, d1, n * 4, "i32 upload and download");
  ASSERT_EQ(gkc_release(cs, hi), 0);
  ASSERT_EQ(gkc_release(ci, h0), 0);
  ASSERT_EQ(gkc_release(cs, h1), 0);
  free(x), free(d0), free(d1), free(iv);
}

static void test_solve(gkc_conn *ci, gkc_conn *cs) {
  /* The 1-D Laplacian (SPD), n rows: b and x each over a page. */
  int32_t n = 20000;
  int32_t *rp = malloc(((size_t)n + 1) * 4), *col = malloc((size_t)n * 3 * 4);
  float *val = malloc((size_t)n * 3 * 4);
  int64_t k = 0;
  for (int32_t r = 0; r < n; r++) {
    rp[r] = (int32_t)k;
    if (r > 0) col[k] = r - 1, val[k++] = -1;
    col[k] = r, val[k++] = 2.5f;
    if (r < n - 1) col[k] = r + 1, val[k++] = -1;
  }
  rp[n] = (int32_t)k;
  gkc_csr A = {n, n, k, rp, col, val};
  uint32_t m0, m1;
  ASSERT_EQ(gkc_csr_upload(ci, &A, 0, &m0, NULL), 0);
  ASSERT_EQ(gkc_csr_upload(cs, &A, 0, &m1, NULL), 0);
  float *b = rand_vec((size_t)n), *x0 = malloc((size_t)n * 4), *x1 = malloc((size_t)n * 4);
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.b = gkc_ref_mem(b, (size_t)n * 4), s.rtol = 1e-6;
  gkc_out o0 = gkc_out_mem(x0, (size_t)n * 4), o1 = gkc_out_mem(x1, (size_t)n * 4);
  gkc_solve_result r0, r1;
  s.matrix = m0;
  ASSERT_EQ(gkc_solve(ci, &s, &o0, &r0, NULL), 0);
  s.matrix = m1;
  uint64_t st = state(cs).staged;
  ASSERT_EQ(gkc_solve(cs, &s, &o1, &r1, NULL), 0);
  ASSERT_EQ(state(cs).staged - st, 2); /* b and x */
  ASSERT(r0.converged && r1.converged);
  ASSERT_EQ(r0.iterations, r1.iterations);
  same(&r0.residual, &r1.residual, sizeof r0.residual, "solve's residual");
  same(x0, x1, (size_t)n * 4, "solve's x");
  free(rp), free(col), free(val), free(b), free(x0), free(x1);
}

/* --- errors read as they did inline --------------------------------------------------------- */

static void same_error(gkc_conn *ci, gkc_conn *cs, int ri, int rs, const char *what) {
  if (ri == 0 || ri != rs) TEST_FAIL("%s: inline %d, arena %d", what, ri, rs);
  if (strcmp(gkc_errmsg(ci), gkc_errmsg(cs)) != 0)
    TEST_FAIL("%s: inline says \"%s\", the arena \"%s\"", what, gkc_errmsg(ci), gkc_errmsg(cs));
}

static void test_errors(gkc_conn *ci, gkc_conn *cs) {
  size_t n = 100000;
  float *x = rand_vec(n), *buf = malloc(2 * n * 4);
  uint32_t h;
  ASSERT_EQ(gkc_upload(cs, gkc_ref_mem(x, n * 4), GKC_F32, 1, &h), 0);
  uint64_t fb = state(cs).fallbacks;
  /* A download into less room than the handle holds: gkcd refuses to write
   * past the slice; into more: it writes less.  Both as inline. */
  for (int k = 0; k < 2; k++) {
    size_t want = k ? 2 * n * 4 : n * 2;
    int ri = gkc_download(ci, h, buf, want), rs = gkc_download(cs, h, buf, want);
    same_error(ci, cs, ri, rs, k ? "download into more room" : "download into less room");
    ASSERT_CONTAINS(gkc_errmsg(cs), "holds 400000 bytes");
  }
  /* axpby on handles, the result into memory of the wrong size. */
  gkc_out o = gkc_out_mem(buf, n * 2);
  int ri = gkc_axpby(ci, 1, gkc_ref_handle(h, 0), 1, gkc_ref_handle(h, 0), &o, NULL);
  int rs = gkc_axpby(cs, 1, gkc_ref_handle(h, 0), 1, gkc_ref_handle(h, 0), &o, NULL);
  same_error(ci, cs, ri, rs, "axpby into less room");
  ASSERT_CONTAINS(gkc_errmsg(cs), "'y'");
  /* A size the arguments fix, but not out's: inline, as before. */
  float *a = rand_vec(64 * 64);
  gkc_sgemm_args sg = GKC_SGEMM_ARGS_INIT;
  sg.m = sg.n = sg.k = 64;
  sg.a = sg.b = gkc_ref_mem(a, 64 * 64 * 4);
  gkc_out oc = gkc_out_mem(buf, 64 * 64 * 4 + 4);
  same_error(ci, cs, gkc_sgemm_ref(ci, &sg, &oc, NULL), gkc_sgemm_ref(cs, &sg, &oc, NULL),
             "sgemm into the wrong size");
  /* gkcd's own refusals, the arrays having gone through the arena. */
  float out[64 * 64];
  same_error(ci, cs, gkc_sgemm(ci, 64, 64, 64, 1, a, 0, a, 0, 0, out, "strassen", NULL),
             gkc_sgemm(cs, 64, 64, 64, 1, a, 0, a, 0, 0, out, "strassen", NULL), "bad algo");
  ASSERT_CONTAINS(gkc_errmsg(cs), "algo");
  ASSERT_EQ(state(cs).fallbacks, fb);
  /* Every slice came back: the next calls still go through the arena. */
  uint64_t st = state(cs).staged;
  ASSERT_EQ(gkc_download(cs, h, buf, n * 4), 0);
  same(x, buf, n * 4, "download after errors");
  ASSERT_EQ(state(cs).staged - st, 1);
  ASSERT_EQ(gkc_release(cs, h), 0);
  free(x), free(buf), free(a);
}

/* --- growth, limits, refusals ----------------------------------------------------------------- */

static void test_growth(const fixture *f) {
  gkc_conn *c = conn(f, THR);
  size_t last = 0;
  for (size_t bytes = 4096; bytes <= ((size_t)16 << 20); bytes *= 4) {
    size_t n = bytes / 4;
    float *x = rand_vec(n), *y = malloc(bytes);
    gkc_out o = gkc_out_mem(y, bytes);
    ASSERT_EQ(gkc_axpby(c, 1, gkc_ref_mem(x, bytes), 0, gkc_ref_mem(x, bytes), &o, NULL), 0);
    same(x, y, bytes, "axpby 1x + 0x");
    gkc_shm_info i = state(c);
    /* A blocking connection swaps its idle region for a bigger one. */
    ASSERT_EQ(i.regions, 1);
    ASSERT(i.arena_bytes >= 3 * bytes && i.arena_bytes >= last);
    ASSERT_EQ(i.fallbacks, 0);
    last = i.arena_bytes;
    free(x), free(y);
  }
  gkc_close(c);
}

/* gkc_shm_reserve: a region made, faulted in and registered before any
 * call; a call that fits then makes none and goes through it, bytes
 * intact; a size that fits already reserves nothing more; an arena that is
 * off names why. */
static void test_reserve(const fixture *f) {
  gkc_conn *c = conn(f, THR);
  size_t bytes = (size_t)24 << 20; /* over 16 MiB: faulted in by several threads */
  ASSERT_EQ(gkc_shm_reserve(c, bytes), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(i.regions, 1);
  ASSERT(i.arena_bytes >= bytes);
  ASSERT_EQ(i.staged, 0);
  size_t have = i.arena_bytes;
  ASSERT_EQ(gkc_shm_reserve(c, bytes / 2), 0);
  ASSERT_EQ(gkc_shm_reserve(c, 0), 0);
  i = state(c);
  ASSERT_EQ(i.regions, 1);
  ASSERT_EQ(i.arena_bytes, have);
  /* x, y and the result: 24 MiB, in the region reserved. */
  size_t n = ((size_t)8 << 20) / 4;
  float *x = rand_vec(n), *y = rand_vec(n), *r = malloc(n * 4), *want = malloc(n * 4);
  ASSERT(r && want);
  gkc_conn *ci = conn(f, GKC_SHM_OFF);
  gkc_out oi = gkc_out_mem(want, n * 4);
  ASSERT_EQ(gkc_axpby(ci, 2, gkc_ref_mem(x, n * 4), -0.5f, gkc_ref_mem(y, n * 4), &oi, NULL), 0);
  gkc_close(ci);
  gkc_out o = gkc_out_mem(r, n * 4);
  ASSERT_EQ(gkc_axpby(c, 2, gkc_ref_mem(x, n * 4), -0.5f, gkc_ref_mem(y, n * 4), &o, NULL), 0);
  same(want, r, n * 4, "axpby through the reserved region");
  i = state(c);
  ASSERT_EQ(i.regions, 1);
  ASSERT_EQ(i.arena_bytes, have);
  ASSERT_EQ(i.staged, 3);
  ASSERT_EQ(i.fallbacks, 0);
  ASSERT_EQ(gkc_set_shm(c, GKC_SHM_OFF, 0), 0);
  ASSERT_EQ(gkc_shm_reserve(c, 4096), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "the arena is off: turned off by gkc_set_shm");
  ASSERT_EQ(gkc_shm_reserve(NULL, 4096), GKC_EINVALID_ARGUMENT);
  free(x), free(y), free(r), free(want);
  gkc_close(c);
}

/* gkcd with --max-request-bytes 8M: no region over it; a call needing more
 * goes inline, as does one over the arena's own bound. */
static void test_limits(void) {
  fixture f;
  const char *args[] = {"--max-request-bytes", "8M", NULL};
  fixture_start(&f, args, NULL);
  gkc_conn *c = conn(&f, THR);
  size_t n = (6 << 20) / 4;
  float *x = rand_vec(n), *y = malloc(n * 4);
  double v, w;
  /* More than a region may hold: refused, naming the limit. */
  ASSERT_EQ(gkc_shm_reserve(c, (size_t)9 << 20), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "--max-request-bytes");
  ASSERT_EQ(state(c).regions, 0);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MAX, &v, NULL, NULL), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(i.staged, 1);
  ASSERT(i.arena_bytes >= n * 4 && i.arena_bytes <= (8 << 20));
  /* x, y and the result: 9 MiB, more than a region may hold. */
  size_t m = (3 << 20) / 4;
  gkc_out o = gkc_out_mem(y, m * 4);
  ASSERT_EQ(gkc_axpby(c, 1, gkc_ref_mem(x, m * 4), 0, gkc_ref_mem(x, m * 4), &o, NULL), 0);
  same(x, y, m * 4, "axpby sent inline");
  i = state(c);
  ASSERT_EQ(i.staged, 1);
  ASSERT_EQ(i.fallbacks, 1);
  /* The arena's own bound. */
  ASSERT_EQ(gkc_set_shm(c, THR, 1 << 20), 0);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MAX, &w, NULL, NULL), 0);
  ASSERT(v == w);
  i = state(c);
  ASSERT_EQ(i.regions, 0); /* the 8 MiB region went when the bound fell under it */
  ASSERT_EQ(i.fallbacks, 2);
  ASSERT_EQ(gkc_reduce(c, x, (1 << 20) / 4, GKC_MAX, &w, NULL, NULL), 0);
  i = state(c);
  ASSERT_EQ(i.staged, 2);
  ASSERT_EQ(i.arena_bytes, 1 << 20);
  free(x), free(y);
  gkc_close(c);
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
}

/* A connection that holds its 64 regions already: gkcd refuses the
 * arena's, and the connection says so and goes on inline. */
static void test_refused(const fixture *f) {
  gkc_conn *c = conn(f, THR);
  gkc_region *own[64];
  for (int i = 0; i < 64; i++) ASSERT_EQ(gkc_region_create(c, 4096, &own[i]), 0);
  size_t n = 1 << 18;
  float *x = rand_vec(n);
  double v, w;
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MIN, &v, NULL, NULL), 0);
  gkc_shm_info i = state(c);
  ASSERT_EQ(i.on, 0);
  ASSERT_EQ(gkc_shm_state(c, NULL), 0);
  ASSERT_CONTAINS(i.why, "gkcd refused shm_register");
  ASSERT_CONTAINS(i.why, "64 regions");
  ASSERT_EQ(i.staged, 0);
  ASSERT_EQ(i.regions, 0);
  ASSERT_STR_EQ(gkc_errmsg(c), ""); /* the call itself succeeded */
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MIN, &w, NULL, NULL), 0);
  ASSERT(v == w);
  /* Room again, and turned on again: the arena serves. */
  ASSERT_EQ(gkc_region_release(c, own[63]), 0);
  ASSERT_EQ(gkc_set_shm(c, THR, 0), 0);
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_MIN, &w, NULL, NULL), 0);
  ASSERT(v == w);
  i = state(c);
  ASSERT_EQ(i.on, 1);
  ASSERT_EQ(i.staged, 1);
  ASSERT_EQ(i.regions, 1);
  for (int k = 0; k < 63; k++) ASSERT_EQ(gkc_region_release(c, own[k]), 0);
  free(x);
  gkc_close(c);
}

/* memfd_create failing here (no descriptor left): off, with the reason. */
static void test_memfd_fails(const fixture *f) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    gkc_conn *c = conn(f, THR);
    int lowest = dup(0);
    ASSERT(lowest >= 0);
    close(lowest);
    struct rlimit rl = {(rlim_t)lowest, (rlim_t)lowest};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) TEST_FAIL("setrlimit: %s", strerror(errno));
    size_t n = 1 << 18;
    float *x = rand_vec(n);
    double v;
    ASSERT_EQ(gkc_reduce(c, x, n, GKC_MAX, &v, NULL, NULL), 0);
    double want = -INFINITY;
    for (size_t i = 0; i < n; i++) want = x[i] > want ? x[i] : want;
    ASSERT(v == want);
    gkc_shm_info i = state(c);
    ASSERT_EQ(i.on, 0);
    ASSERT_CONTAINS(i.why, "memfd_create");
    free(x);
    gkc_close(c);
    _exit(0);
  }
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) TEST_FAIL("the child failed (status %d)", st);
}

/* gkc_close: gkcd lets go of the connection's regions. */
static void test_close(void) {
  fixture f;
  fixture_start(&f, NULL, NULL);
  gkc_conn *probe = conn(&f, GKC_SHM_OFF), *c = conn(&f, THR);
  ASSERT_EQ(live_regions(probe), 0);
  size_t n = 1 << 18;
  float *x = rand_vec(n), *y = malloc(n * 4);
  double v;
  ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, NULL), 0);
  gkc_out o = gkc_out_mem(y, n * 4);
  ASSERT_EQ(gkc_axpby(c, 1, gkc_ref_mem(x, n * 4), 1, gkc_ref_mem(x, n * 4), &o, NULL), 0);
  ASSERT_EQ(live_regions(probe), state(c).regions);
  ASSERT(state(c).regions >= 1);
  gkc_close(c);
  int waited = 0;
  while (live_regions(probe) != 0 && waited < 5000) sleep_ms(10), waited += 10;
  ASSERT_EQ(live_regions(probe), 0);
  free(x), free(y);
  gkc_close(probe);
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
}

int main(void) {
  rng = test_seed();
  unsetenv("GKC_NO_SHM");
  unsetenv("GKC_SHM_THRESHOLD");
  unsetenv("GKC_SHM_MAX_BYTES");
  fixture f;
  fixture_start(&f, NULL, NULL);
  test_defaults(&f);
  test_env(&f);
  test_setter(&f);
  gkc_conn *ci = conn(&f, GKC_SHM_OFF), *cs = conn(&f, THR);
  test_sgemm(ci, cs);
  test_reduce_dot_axpby(ci, cs);
  test_spmv(ci, cs);
  test_upload_download(ci, cs);
  test_solve(ci, cs);
  test_errors(ci, cs);
  ASSERT_EQ(state(ci).staged, 0);
  ASSERT_EQ(state(cs).fallbacks, 0);
  gkc_close(ci);
  gkc_close(cs);
  test_growth(&f);
  test_reserve(&f);
  test_refused(&f);
  test_memfd_fails(&f);
  ASSERT_EQ(fixture_stop(&f, SIGTERM), 0);
  test_limits();
  test_close();
  printf("e2e_shm_lib: all passed\n");
  return 0;
}
