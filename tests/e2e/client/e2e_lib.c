/* e2e_lib.c: a real gkcd driven through libgkc.
 *
 * Every result is compared with a double-precision reference computed here
 * on fresh random inputs; errors are checked for their code and for a
 * message that names the argument. */
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>

#include "fixture.h"
#include "proto_methods.h"
#include "gkc.h"
#include "mtx.h"
#include "test.h"

static uint64_t rng;

/* The backend gkcd should report: $GKC_TEST_BACKEND, or cpu. */
static const char *want_backend(void) {
  const char *b = getenv("GKC_TEST_BACKEND");
  return b ? b : "cpu";
}

static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 1);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static void check_sgemm(gkc_conn *c, int m, int n, int k, int ta, int tb, float alpha,
                        float beta) {
  float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)k * n);
  float *cin = rand_vec((size_t)m * n), *cout = malloc((size_t)m * n * sizeof(float));
  memcpy(cout, cin, (size_t)m * n * sizeof(float));
  gkc_info info;
  int rc = gkc_sgemm(c, m, n, k, alpha, a, ta, b, tb, beta, cout, NULL, &info);
  if (rc) TEST_FAIL("sgemm %dx%dx%d: %s", m, n, k, gkc_errmsg(c));
  ASSERT(info.algo[0] != 0);
  ASSERT(info.kernel_us >= 0);
  /* The timing fields nest: the kernel runs in the worker, and waiting plus
   * the worker's time are parts of the time in gkcd (PROTOCOL.md). */
  if (!(info.queue_us >= 0 && info.worker_us >= 0 && info.kernel_us <= info.worker_us + 1 &&
        info.queue_us + info.worker_us <= info.server_us + 0.01))
    TEST_FAIL("sgemm %dx%dx%d: timings do not nest: kernel %g, queue %g, worker %g, server %g us", m,
              n, k, info.kernel_us, info.queue_us, info.worker_us, info.server_us);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double av = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
        double bv = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
        acc += av * bv;
        mag += fabs(av * bv);
      }
      double want = alpha * acc + beta * cin[(size_t)i * n + j];
      double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta * cin[(size_t)i * n + j])) + 1e-30;
      double got = cout[(size_t)i * n + j];
      if (!(fabs(got - want) <= tol))
        TEST_FAIL("sgemm %dx%dx%d ta=%d tb=%d C[%d,%d] = %.9g, want %.9g", m, n, k, ta, tb, i, j,
                  got, want);
    }
  free(a), free(b), free(cin), free(cout);
}

static void test_sgemm(gkc_conn *c) {
  static const int shapes[][3] = {{1, 1, 1}, {17, 31, 13}, {127, 1, 61}, {1, 97, 5},
                                  {64, 64, 64}, {33, 65, 129}, {3, 200, 7}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++)
      check_sgemm(c, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                  t == 3 ? -0.5f : 1.0f, t == 2 ? 0.75f : 0.0f);
  /* beta == 0 must not read C: NaN in C may not leak into the result. */
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, out[4] = {NAN, NAN, NAN, NAN};
  ASSERT_EQ(gkc_sgemm(c, 2, 2, 2, 1.0f, a, 0, b, 0, 0.0f, out, NULL, NULL), 0);
  for (int i = 0; i < 4; i++) ASSERT_NEAR(out[i], a[i], 0);
}

static void test_reduce(gkc_conn *c) {
  static const size_t sizes[] = {1, 2, 3, 1000, 65537, (1u << 20) + 7};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = rand_vec(n);
    double sum = 0, mag = 0, mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
      sum += x[i], mag += fabs(x[i]);
      mn = x[i] < mn ? x[i] : mn;
      mx = x[i] > mx ? x[i] : mx;
    }
    double v;
    gkc_info info;
    ASSERT_EQ(gkc_reduce(c, x, n, GKC_SUM, &v, NULL, &info), 0);
    ASSERT_NEAR(v, sum, 1e-6 * mag);
    if (!getenv("GKC_TEST_BACKEND")) ASSERT_STR_EQ(info.algo, "cpu_omp");
    ASSERT_EQ(gkc_reduce(c, x, n, GKC_MIN, &v, NULL, NULL), 0);
    ASSERT_NEAR(v, mn, 0);
    ASSERT_EQ(gkc_reduce(c, x, n, GKC_MAX, &v, NULL, NULL), 0);
    ASSERT_NEAR(v, mx, 0);
    free(x);
  }
}

/* ||x||_2 in float64: each square of a float32 is exact in double. */
static double nrm2_ref(const float *x, size_t n) {
  double sq = 0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
  return sqrt(sq);
}

/* The squares are summed in double on both sides, in different orders: a
 * sum of n positive terms is off by at most (n - 1) * 2^-53 relative on
 * each side, and the square root halves that. */
#define NRM2_TOL(n, ref) (((double)(n) + 1) * 0x1p-53 * (ref))

static void test_nrm2(gkc_conn *c) {
  /* 1, odd, over a page (the arena's threshold), over 10^6. */
  static const size_t sizes[] = {1, 7, 1001, 65537, 1000003};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = rand_vec(n);
    double want = nrm2_ref(x, n), v = NAN;
    gkc_info info;
    int rc = gkc_nrm2(c, gkc_ref_mem(x, n * 4), &v, &info);
    if (rc) TEST_FAIL("nrm2 of %zu: %s", n, gkc_errmsg(c));
    ASSERT_NEAR(v, want, NRM2_TOL(n, want));
    ASSERT(info.algo[0] != 0);
    ASSERT(info.kernel_us >= 0);
    if (!getenv("GKC_TEST_BACKEND")) ASSERT_STR_EQ(info.algo, "openblas");
    free(x);
  }
  /* Huge and tiny values: squared in double, neither overflows nor vanishes. */
  float ext[3] = {0x1p100f, -0x1p100f, 0x1p-100f};
  double v;
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(ext, 8), &v, NULL), 0);
  ASSERT_NEAR(v, 0x1p100 * sqrt(2.0), 1e-15 * 0x1p100);
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(ext + 2, 4), &v, NULL), 0);
  ASSERT_NEAR(v, 0x1p-100, 0);

  /* On a resident handle, then in a region. */
  size_t n = 4099;
  float *x = rand_vec(n);
  double want = nrm2_ref(x, n);
  uint32_t h;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, n * 4), GKC_F32, 0, &h), 0);
  v = NAN;
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_handle(h, n * 4), &v, NULL), 0);
  ASSERT_NEAR(v, want, NRM2_TOL(n, want));
  ASSERT_EQ(gkc_release(c, h), 0);
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_handle(h, n * 4), &v, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "x");
  gkc_region *reg;
  ASSERT_EQ(gkc_region_create(c, 8 + n * 4, &reg), 0);
  memcpy(gkc_region_floats(reg) + 2, x, n * 4);
  v = NAN;
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_region(reg, 8, n * 4), &v, NULL), 0);
  ASSERT_NEAR(v, want, NRM2_TOL(n, want));
  ASSERT_EQ(gkc_region_release(c, reg), 0);

  /* Bad arguments: refused with a message that names the culprit. */
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(x, n * 4), NULL, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "value");
  gkc_ref none = {0};
  ASSERT_EQ(gkc_nrm2(c, none, &v, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "x: an array is required");
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(NULL, 16), &v, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "x: data is NULL");
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(x, 0), &v, NULL), GKC_EINVALID_ARGUMENT); /* n = 0 */
  ASSERT_CONTAINS(gkc_errmsg(c), "'x'");
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(x, 6), &v, NULL), GKC_EINVALID_ARGUMENT); /* not float32s */
  ASSERT_CONTAINS(gkc_errmsg(c), "'x'");
  /* gkc_set_device pins it: a device gkcd lacks is refused by name. */
  ASSERT_EQ(gkc_set_device(c, 7), 0);
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(x, n * 4), &v, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "device");
  ASSERT_EQ(gkc_set_device(c, 0), 0);
  v = NAN;
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_mem(x, n * 4), &v, NULL), 0);
  ASSERT_NEAR(v, want, NRM2_TOL(n, want));
  ASSERT_EQ(gkc_set_device(c, GKC_DEVICE_AUTO), 0);
  free(x);
}

/* y = alpha A x + beta y, checked row by row against a double reference. */
static void check_spmv(gkc_conn *c, const gkc_csr *A, float alpha, float beta) {
  float *x = rand_vec((size_t)A->cols), *yin = rand_vec((size_t)A->rows);
  float *y = malloc((size_t)A->rows * sizeof(float));
  memcpy(y, yin, (size_t)A->rows * sizeof(float));
  gkc_info info;
  int rc = gkc_spmv(c, A, alpha, x, beta, y, NULL, &info);
  if (rc) TEST_FAIL("spmv %dx%d nnz %lld: %s", A->rows, A->cols, (long long)A->nnz, gkc_errmsg(c));
  for (int32_t r = 0; r < A->rows; r++) {
    double acc = 0, mag = 0;
    for (int32_t j = A->row_ptr[r]; j < A->row_ptr[r + 1]; j++) {
      double t = (double)A->values[j] * x[A->col_idx[j]];
      acc += t, mag += fabs(t);
    }
    double want = alpha * acc + beta * yin[r];
    double tol = 1e-6 * (fabs(alpha) * mag + fabs(beta * yin[r])) + 1e-30;
    if (!(fabs(y[r] - want) <= tol))
      TEST_FAIL("spmv row %d: %.9g, want %.9g", r, (double)y[r], want);
  }
  free(x), free(yin), free(y);
}

/* A random CSR with empty rows, and optionally one row holding most entries. */
static void random_csr(int32_t rows, int32_t cols, int64_t nnz, int heavy, gkc_csr *A) {
  int32_t *rp = calloc((size_t)rows + 1, sizeof *rp);
  int32_t *ci = malloc((size_t)nnz * sizeof *ci + 4);
  float *v = rand_vec((size_t)nnz);
  int32_t hr = rows / 2;
  for (int64_t j = 0; j < nnz; j++) {
    int32_t r = heavy && (j % 10) ? hr : (int32_t)(test_rand_u64(&rng) % (uint64_t)rows);
    if (r % 7 == 3 && r != hr) r = (r + 1) % rows; /* every 7th row stays empty */
    rp[r + 1]++;
  }
  for (int32_t r = 0; r < rows; r++) rp[r + 1] += rp[r];
  for (int64_t j = 0; j < nnz; j++) ci[j] = (int32_t)(test_rand_u64(&rng) % (uint64_t)cols);
  *A = (gkc_csr){rows, cols, nnz, rp, ci, v};
}

static void free_csr(gkc_csr *A) {
  free((void *)A->row_ptr), free((void *)A->col_idx), free((void *)A->values);
}

static void test_spmv(gkc_conn *c) {
  gkc_csr A;
  random_csr(1, 1, 1, 0, &A);
  check_spmv(c, &A, 1, 0);
  free_csr(&A);
  random_csr(1000, 700, 0, 0, &A); /* no entries at all */
  check_spmv(c, &A, 2, 0.5f);
  free_csr(&A);
  random_csr(5003, 4001, 60000, 0, &A);
  check_spmv(c, &A, 1, 0);
  check_spmv(c, &A, -1.5f, 2);
  free_csr(&A);
  random_csr(20011, 300, 200000, 1, &A); /* one row holds 90% */
  check_spmv(c, &A, 1, 0);
  free_csr(&A);

  const char *data = getenv("GKC_TEST_DATA");
  static const char *const files[] = {"west0067.mtx", "lp_ship04l.mtx"};
  for (int f = 0; data && f < 2; f++) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s", data, files[f]);
    mtx_csr m;
    if (mtx_read_csr(path, &m, err, sizeof err) != 0) TEST_FAIL("%s", err);
    gkc_csr M = {m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx, m.values};
    check_spmv(c, &M, 1, 0);
    check_spmv(c, &M, 0.5f, -1);
    mtx_free(&m);
  }
}

static void test_errors(gkc_conn *c) {
  float a[4] = {1, 2, 3, 4}, out[4];
  double v;
  ASSERT_EQ(gkc_sgemm(c, 2, 2, 2, 1, a, 0, a, 0, 0, out, "strassen", NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "algo");
  ASSERT_CONTAINS(gkc_errmsg(c), "one of: auto");
  ASSERT_EQ(gkc_reduce(c, a, 4, (gkc_reduce_op)7, &v, NULL, NULL), GKC_EINVALID_ARGUMENT);
  /* Bad CSR structures, each caught by the daemon with a precise message. */
  int32_t rp[3] = {0, 2, 3}, ci[3] = {0, 1, 1};
  float val[3] = {1, 1, 1}, x[2] = {1, 1}, y[2];
  gkc_csr A = {2, 2, 3, rp, ci, val};
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), 0);
  rp[0] = 1;
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "row_ptr[0]");
  rp[0] = 0, rp[1] = 4;
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "decreases");
  rp[1] = 2, rp[2] = 2;
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "row_ptr[rows]");
  rp[2] = 3, ci[2] = 2;
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "col_idx[2]");
  ci[2] = -1;
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), GKC_EINVALID_ARGUMENT);
  ci[2] = 1;
  /* Too large a result is refused before anything is allocated. */
  float *big = rand_vec(65536);
  ASSERT_EQ(gkc_sgemm(c, 65536, 65536, 1, 1, big, 0, big, 0, 0, big, NULL, NULL), GKC_ETOO_LARGE);
  ASSERT_CONTAINS(gkc_errmsg(c), "max-request-bytes");
  free(big);
  /* After all of that the connection still works. */
  ASSERT_EQ(gkc_spmv(c, &A, 1, x, 0, y, NULL, NULL), 0);
  ASSERT_NEAR(y[0], 2, 0);
}

static void test_status(gkc_conn *c) {
  gkc_status_info st;
  ASSERT_EQ(gkc_status(c, &st), 0);
  ASSERT_STR_EQ(st.backend, want_backend());
  ASSERT(st.n_devices >= 1);
  ASSERT(st.devices[0].memory_total > 0);
  ASSERT(st.connections >= 1);
  uint64_t sgemm_req = 0, spmv_err = 0;
  int seen = 0;
  for (int i = 0; i < st.n_methods; i++) {
    if (!strcmp(st.methods[i].name, "sgemm")) sgemm_req = st.methods[i].requests;
    if (!strcmp(st.methods[i].name, "spmv")) spmv_err = st.methods[i].errors;
    seen += !strcmp(st.methods[i].name, "nrm2") || !strcmp(st.methods[i].name, "metrics");
  }
  /* Every method of the protocol's table is listed: none cut off by the
   * struct's room (GKC_MAX_METHODS). */
  ASSERT_EQ(st.n_methods, PROTO_M_COUNT);
  ASSERT_EQ(seen, 2);
  ASSERT(sgemm_req >= 29);
  ASSERT(spmv_err >= 5);
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  ASSERT_CONTAINS(json, "\"uptime_s\": ");
  ASSERT_CONTAINS(json, "\"in_flight\": ");
  free(json);
}

static void test_connect_failure(const fixture *f) {
  char path[400];
  snprintf(path, sizeof path, "%s/nobody-here.sock", f->dir);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, path), GKC_ECONNECT);
  ASSERT_CONTAINS(gkc_errmsg(c), "nobody-here.sock");
  gkc_close(c);
}

int main(void) {
  rng = test_seed();
  fixture f;
  fixture_start(&f, NULL, NULL);
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  gkc_ping_info p;
  ASSERT_EQ(gkc_ping(c, &p), 0);
  ASSERT_EQ(p.protocol, GKC_PROTOCOL);
  ASSERT_STR_EQ(p.version, GKC_VERSION);
  ASSERT_STR_EQ(p.backend, want_backend());
  test_sgemm(c);
  test_reduce(c);
  test_spmv(c);
  test_nrm2(c);
  test_errors(c);
  test_status(c);
  test_connect_failure(&f);
  gkc_close(c);
  int st = fixture_stop(&f, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("e2e_lib: all passed\n");
  return 0;
}
