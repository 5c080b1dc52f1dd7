/* e2e_gpu.c: gkcd's CUDA backend, end to end through libgkc.
 *
 * Every algo of every method against a double-precision reference on fresh
 * random inputs: odd and prime sizes, transposes, alpha/beta, empty rows, a
 * row holding most nonzeros, and the shared SuiteSparse matrices.  Outputs
 * are poisoned with NaN before each call, so an element the GPU never wrote
 * fails.  Without a usable GPU, gkcd --backend cuda refuses to start and
 * this test reports skipped. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fixture.h"
#include "gkc.h"
#include "mtx.h"
#include "test.h"

static uint64_t rng;
static int checks;

static float *rand_vec(size_t n) {
  float *v = malloc(n * sizeof *v + 4);
  ASSERT(v);
  for (size_t i = 0; i < n; i++) v[i] = test_rand_f32(&rng);
  return v;
}

static void poison(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = NAN;
}

static void sgemm_case(gkc_conn *c, const char *algo, int m, int n, int k, int ta, int tb,
                       float alpha, float beta, double rel) {
  float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)k * n);
  float *cin = rand_vec((size_t)m * n), *out = malloc((size_t)m * n * 4);
  if (beta != 0)
    memcpy(out, cin, (size_t)m * n * 4);
  else
    poison(out, (size_t)m * n);
  gkc_info info;
  int rc = gkc_sgemm(c, m, n, k, alpha, a, ta, b, tb, beta, out, algo, &info);
  if (rc) TEST_FAIL("sgemm %s %dx%dx%d: %s", algo, m, n, k, gkc_errmsg(c));
  if (strcmp(algo, "auto") && strcmp(info.algo, algo))
    TEST_FAIL("asked for %s, ran %s", algo, info.algo);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = (double)(ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p]) *
                   (tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j]);
        acc += t, mag += fabs(t);
      }
      double ci = cin[(size_t)i * n + j];
      double want = alpha * acc + beta * ci, got = out[(size_t)i * n + j];
      double tol = rel * (fabs(alpha) * mag + fabs(beta * ci)) + 1e-30;
      if (!(fabs(got - want) <= tol))
        TEST_FAIL("sgemm %s %dx%dx%d ta=%d tb=%d C[%d,%d] = %.9g, want %.9g", algo, m, n, k, ta,
                  tb, i, j, got, want);
    }
  checks++;
  free(a), free(b), free(cin), free(out);
}

static void test_sgemm(gkc_conn *c) {
  static const char *const algos[] = {"naive", "smem", "regblock", "cublas", "tf32x3", "auto"};
  static const int shapes[][3] = {{1, 1, 1},     {17, 31, 13},  {127, 1, 61}, {1, 257, 3},
                                  {129, 131, 67}, {256, 256, 256}, {333, 97, 511}};
  for (size_t a = 0; a < sizeof algos / sizeof *algos; a++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int t = 0; t < 4; t++)
        sgemm_case(c, algos[a], shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                   t == 1 ? -1.5f : 1.0f, t == 2 ? 0.5f : 0.0f, 1e-5);
  /* TF32 only on request: refused without precision "tf32". */
  float x[4] = {1, 2, 3, 4}, y[4];
  ASSERT_EQ(gkc_sgemm(c, 2, 2, 1, 1, x, 0, x, 0, 0, y, "cublas_tf32", NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "tf32");
  checks++;
}

static void reduce_case(gkc_conn *c, const char *algo, size_t n, int offset) {
  float *base = rand_vec(n + 1), *x = base + offset; /* offset 1: an unaligned start */
  double sum = 0, mag = 0, mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    sum += x[i], mag += fabs(x[i]);
    mn = x[i] < mn ? x[i] : mn, mx = x[i] > mx ? x[i] : mx;
  }
  double v;
  gkc_info info;
  for (int op = 0; op < 3; op++) {
    int rc = gkc_reduce(c, x, n, (gkc_reduce_op)op, &v, algo, &info);
    if (rc) TEST_FAIL("reduce %s n=%zu: %s", algo, n, gkc_errmsg(c));
    double want = op == 0 ? sum : op == 1 ? mn : mx;
    if (!(fabs(v - want) <= (op == 0 ? 1e-5 * mag : 0)))
      TEST_FAIL("reduce %s op %d n=%zu: %.17g, want %.17g", algo, op, n, v, want);
    checks++;
  }
  free(base);
}

static void test_reduce(gkc_conn *c) {
  static const char *const algos[] = {"smem", "shfl", "cub", "auto"};
  static const size_t sizes[] = {1, 2, 7, 1000, 65537, (1u << 20) + 3, (1u << 24) + 1};
  for (size_t a = 0; a < 4; a++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) reduce_case(c, algos[a], sizes[s], (int)(s & 1));
}

static void spmv_case(gkc_conn *c, const char *algo, const gkc_csr *A, float alpha, float beta) {
  float *x = rand_vec((size_t)A->cols), *yin = rand_vec((size_t)A->rows);
  float *y = malloc((size_t)A->rows * 4);
  if (beta != 0)
    memcpy(y, yin, (size_t)A->rows * 4);
  else
    poison(y, (size_t)A->rows);
  gkc_info info;
  if (gkc_spmv(c, A, alpha, x, beta, y, algo, &info))
    TEST_FAIL("spmv %s %dx%d: %s", algo, A->rows, A->cols, gkc_errmsg(c));
  for (int32_t r = 0; r < A->rows; r++) {
    double acc = 0, mag = 0;
    for (int32_t j = A->row_ptr[r]; j < A->row_ptr[r + 1]; j++) {
      double t = (double)A->values[j] * x[A->col_idx[j]];
      acc += t, mag += fabs(t);
    }
    double want = alpha * acc + beta * yin[r];
    if (!(fabs(y[r] - want) <= 1e-5 * (fabs(alpha) * mag + fabs(beta * yin[r])) + 1e-30))
      TEST_FAIL("spmv %s row %d of %dx%d: %.9g, want %.9g", algo, r, A->rows, A->cols,
                (double)y[r], want);
  }
  checks++;
  free(x), free(yin), free(y);
}

static void random_csr(int32_t rows, int32_t cols, int64_t nnz, int heavy, gkc_csr *A) {
  int32_t *rp = calloc((size_t)rows + 1, 4), *ci = malloc((size_t)nnz * 4 + 4);
  for (int64_t j = 0; j < nnz; j++) {
    int32_t r = heavy && (j % 10) ? rows / 3 : (int32_t)(test_rand_u64(&rng) % (uint64_t)rows);
    if (r % 5 == 2 && r != rows / 3) r = (r + 1) % rows; /* empty rows */
    rp[r + 1]++;
  }
  for (int32_t r = 0; r < rows; r++) rp[r + 1] += rp[r];
  for (int64_t j = 0; j < nnz; j++) ci[j] = (int32_t)(test_rand_u64(&rng) % (uint64_t)cols);
  *A = (gkc_csr){rows, cols, nnz, rp, ci, rand_vec((size_t)nnz)};
}

static void test_spmv(gkc_conn *c) {
  static const char *const algos[] = {"scalar", "vector", "balanced", "cusparse", "auto"};
  gkc_csr mats[5];
  random_csr(1, 1, 1, 0, &mats[0]);
  random_csr(3001, 2999, 0, 0, &mats[1]);          /* no entries */
  random_csr(10007, 5003, 120000, 0, &mats[2]);
  random_csr(40009, 3001, 900000, 1, &mats[3]);    /* one row with 90% */
  random_csr(200003, 200003, 2000000, 0, &mats[4]);
  for (size_t a = 0; a < 5; a++)
    for (int m = 0; m < 5; m++) {
      spmv_case(c, algos[a], &mats[m], 1, 0);
      spmv_case(c, algos[a], &mats[m], -0.5f, 2);
    }
  for (int m = 0; m < 5; m++)
    free((void *)mats[m].row_ptr), free((void *)mats[m].col_idx), free((void *)mats[m].values);

  const char *dir = getenv("GKC_SHARED_MATRICES");
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) dir = getenv("GKC_TEST_DATA"), d = dir ? opendir(dir) : NULL;
  struct dirent *e;
  int files = 0;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".mtx")) continue;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    mtx_csr m;
    if (mtx_read_csr(path, &m, err, sizeof err)) TEST_FAIL("%s", err);
    gkc_csr A = {m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx, m.values};
    for (size_t a = 0; a < 5; a++) spmv_case(c, algos[a], &A, 1, 0);
    mtx_free(&m);
    files++;
  }
  if (d) closedir(d);
  printf("spmv: every algo on %d matrix files from %s\n", files, dir ? dir : "(none)");
}

static void test_status(gkc_conn *c) {
  gkc_status_info st;
  ASSERT_EQ(gkc_status(c, &st), 0);
  ASSERT_STR_EQ(st.backend, "cuda");
  ASSERT(st.n_devices >= 1 && st.devices[0].name[0] && st.devices[0].memory_total > 0);
  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  ASSERT_CONTAINS(json, "\"streams\": ");
  ASSERT_CONTAINS(json, "\"cached_bytes\": ");
  ASSERT_CONTAINS(json, "\"kernel_ms\": ");
  printf("status: %s\n", json);
  free(json);
  checks++;
}

int main(void) {
  rng = test_seed();
  fixture f;
  const char *const args[] = {"--backend", "cuda", NULL};
  int st = fixture_try_start(&f, args, NULL);
  if (st != -1) {
    fixture_stop(&f, SIGTERM);
    TEST_SKIP("gkcd --backend cuda did not start (no usable GPU here)");
  }
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  gkc_ping_info p;
  ASSERT_EQ(gkc_ping(c, &p), 0);
  ASSERT_STR_EQ(p.backend, "cuda");
  test_sgemm(c);
  test_reduce(c);
  test_spmv(c);
  test_status(c);
  gkc_close(c);
  st = fixture_stop(&f, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("e2e_gpu: %d checks passed\n", checks);
  return 0;
}
