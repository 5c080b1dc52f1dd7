/* e2e_lanes.c: gkcd's CUDA backend with its lanes on, off, and on the
 * fallback, end to end through libgkc.
 *
 * Three daemons in turn, each given the same requests (small ones, which the
 * scheduler sends to the latency lane, and large ones for the bulk lane)
 * checked against a float64 reference on fresh random inputs:
 *   lanes     the default (--latency-sms 8): green contexts where the driver
 *             makes them (status shows each lane's SMs), else the fallback;
 *   off       --latency-sms 0: one lane;
 *   fallback  GKCD_CUDA_LANES=streams --slice-us 1: no green contexts,
 *             stream priorities, and every bulk sgemm and spmv cut into
 *             slices (odd sizes, all transposes); the daemon's debug log
 *             must show the slices, so the sliced path is what was checked.
 * status must list the lanes with their streams (--streams 3 for bulk, 2 for
 * latency) and SMs.  Without a usable GPU gkcd --backend cuda refuses to
 * start and this test reports skipped. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
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

static void sgemm_case(gkc_conn *c, int m, int n, int k, int ta, int tb, float alpha, float beta) {
  float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)k * n);
  float *cin = rand_vec((size_t)m * n), *out = malloc((size_t)m * n * 4);
  ASSERT(out);
  if (beta != 0)
    memcpy(out, cin, (size_t)m * n * 4);
  else
    for (size_t i = 0; i < (size_t)m * n; i++) out[i] = NAN;
  gkc_info info;
  if (gkc_sgemm(c, m, n, k, alpha, a, ta, b, tb, beta, out, "auto", &info))
    TEST_FAIL("sgemm %dx%dx%d: %s", m, n, k, gkc_errmsg(c));
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
      if (!(fabs(got - want) <= 1e-5 * (fabs(alpha) * mag + fabs(beta * ci)) + 1e-30))
        TEST_FAIL("sgemm (%s) %dx%dx%d ta=%d tb=%d C[%d,%d] = %.9g, want %.9g", info.algo, m, n,
                  k, ta, tb, i, j, got, want);
    }
  checks++;
  free(a), free(b), free(cin), free(out);
}

static void reduce_case(gkc_conn *c, size_t n) {
  float *x = rand_vec(n);
  double sum = 0, mag = 0, v;
  for (size_t i = 0; i < n; i++) sum += x[i], mag += fabs(x[i]);
  if (gkc_reduce(c, x, n, GKC_SUM, &v, "auto", NULL)) TEST_FAIL("reduce %zu: %s", n, gkc_errmsg(c));
  if (!(fabs(v - sum) <= 1e-5 * mag)) TEST_FAIL("reduce n=%zu: %.17g, want %.17g", n, v, sum);
  checks++;
  free(x);
}

/* y = alpha*A*x + beta*y, A sent with the request or resident (matrix != 0). */
static void spmv_case(gkc_conn *c, const gkc_csr *A, uint32_t matrix, float alpha, float beta) {
  float *x = rand_vec((size_t)A->cols), *yin = rand_vec((size_t)A->rows);
  float *y = malloc((size_t)A->rows * 4);
  ASSERT(y);
  gkc_spmv_args args = GKC_SPMV_ARGS_INIT;
  if (matrix) {
    args.use_matrix = 1, args.matrix = matrix;
  } else {
    args.rows = A->rows, args.cols = A->cols;
    args.row_ptr = gkc_ref_mem(A->row_ptr, ((size_t)A->rows + 1) * 4);
    args.col_idx = gkc_ref_mem(A->col_idx, (size_t)A->nnz * 4);
    args.values = gkc_ref_mem(A->values, (size_t)A->nnz * 4);
  }
  args.x = gkc_ref_mem(x, (size_t)A->cols * 4);
  if (beta != 0) args.y = gkc_ref_mem(yin, (size_t)A->rows * 4);
  args.alpha = alpha, args.beta = beta;
  gkc_out out = gkc_out_mem(y, (size_t)A->rows * 4);
  if (gkc_spmv_ref(c, &args, &out, NULL)) TEST_FAIL("spmv %dx%d: %s", A->rows, A->cols, gkc_errmsg(c));
  for (int32_t r = 0; r < A->rows; r++) {
    double acc = 0, mag = 0;
    for (int32_t j = A->row_ptr[r]; j < A->row_ptr[r + 1]; j++) {
      double t = (double)A->values[j] * x[A->col_idx[j]];
      acc += t, mag += fabs(t);
    }
    double want = alpha * acc + beta * yin[r];
    if (!(fabs(y[r] - want) <= 1e-5 * (fabs(alpha) * mag + fabs(beta * yin[r])) + 1e-30))
      TEST_FAIL("spmv row %d of %dx%d: %.9g, want %.9g", r, A->rows, A->cols, (double)y[r], want);
  }
  checks++;
  free(x), free(yin), free(y);
}

static void random_csr(int32_t rows, int32_t cols, int64_t nnz, gkc_csr *A) {
  int32_t *rp = calloc((size_t)rows + 1, 4), *ci = malloc((size_t)nnz * 4 + 4);
  ASSERT(rp && ci);
  for (int64_t j = 0; j < nnz; j++) rp[test_rand_u64(&rng) % (uint64_t)rows + 1]++;
  for (int32_t r = 0; r < rows; r++) rp[r + 1] += rp[r];
  for (int64_t j = 0; j < nnz; j++) ci[j] = (int32_t)(test_rand_u64(&rng) % (uint64_t)cols);
  *A = (gkc_csr){rows, cols, nnz, rp, ci, rand_vec((size_t)nnz)};
}

/* The figure `key` of the lane named `name` in status's JSON, or -1. */
static long lane_field(const char *json, const char *name, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"name\": \"%s\"", name);
  const char *p = strstr(json, pat);
  if (!p) return -1;
  const char *end = strchr(p, '}');
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *q = strstr(p, pat);
  if (!q || (end && q > end)) return -1;
  return strtol(q + strlen(pat), NULL, 10);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return strdup("");
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strdup(buf);
}

enum { LANES, OFF, FALLBACK };

static int run(int mode, const gkc_csr *big, const mtx_csr *west) {
  static const char *const names[] = {"lanes", "off", "fallback"};
  /* The lanes of one GPU, however many are visible: with two, the big
   * requests below would split over both and log other shapes. */
  const char *args_lanes[] = {"--backend", "cuda", "--devices", "0", "--streams", "3",
                              "--log-level", "debug", NULL};
  const char *args_off[] = {"--backend", "cuda", "--devices", "0", "--streams", "3",
                            "--latency-sms", "0", "--log-level", "debug", NULL};
  const char *args_fb[] = {"--backend", "cuda", "--devices", "0", "--streams", "3",
                           "--slice-us", "1", "--log-level", "debug", NULL};
  const char *const env_fb[] = {"GKCD_CUDA_LANES=streams", NULL};
  const char *const *args = mode == LANES ? args_lanes : mode == OFF ? args_off : args_fb;
  fixture f;
  int st = fixture_try_start(&f, args, mode == FALLBACK ? env_fb : NULL);
  if (st != -1) {
    fixture_stop(&f, SIGTERM);
    return -1;
  }
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, f.sock), 0);
  /* small: the latency lane (predicted well under --latency-us) */
  sgemm_case(c, 129, 131, 67, 0, 0, 1.0f, 0.0f);
  sgemm_case(c, 33, 17, 65, 1, 1, -1.5f, 0.5f);
  reduce_case(c, 1000);
  gkc_csr W = {west->rows, west->cols, west->nnz, west->row_ptr, west->col_idx, west->values};
  uint32_t mw;
  ASSERT_EQ(gkc_csr_upload(c, &W, 0, &mw, NULL), 0);
  for (int i = 0; i < 20; i++) spmv_case(c, &W, mw, 1.0f, 0.0f);
  spmv_case(c, &W, mw, -0.5f, 2.0f);
  /* large: the bulk lane; sliced on the fallback */
  for (int t = 0; t < 4; t++)
    sgemm_case(c, 520, 777, 1003, t & 1, t >> 1, t == 1 ? -1.5f : 1.0f, t == 2 ? 0.5f : 0.0f);
  sgemm_case(c, 301, 2049, 513, 0, 1, 1.0f, 0.0f);
  reduce_case(c, (1u << 22) + 3);
  spmv_case(c, big, 0, 1.0f, 0.0f);
  spmv_case(c, big, 0, 0.75f, -1.0f);
  uint32_t mb;
  ASSERT_EQ(gkc_csr_upload(c, big, 0, &mb, NULL), 0);
  spmv_case(c, big, mb, 1.0f, 0.0f);

  char *json;
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  printf("%s: status: %s\n", names[mode], json);
  char *log = read_file(f.log);
  if (mode == OFF) {
    ASSERT_EQ(lane_field(json, "latency", "streams"), -1);
    ASSERT_EQ(lane_field(json, "bulk", "streams"), 3);
    ASSERT_EQ(lane_field(json, "bulk", "sms"), 0);
  } else {
    ASSERT_EQ(lane_field(json, "bulk", "streams"), 3);
    ASSERT_EQ(lane_field(json, "latency", "streams"), 2);
    ASSERT_EQ(lane_field(json, "latency", "workers"), 2);
    ASSERT(lane_field(json, "latency", "served") >= 20);
    ASSERT(lane_field(json, "bulk", "served") >= 5);
    int green = strstr(log, "lanes: green contexts") != NULL;
    if (mode == FALLBACK) {
      ASSERT(!green);
      ASSERT_CONTAINS(log, "GKCD_CUDA_LANES=streams");
    }
    if (green) {
      long lat = lane_field(json, "latency", "sms"), bulk = lane_field(json, "bulk", "sms");
      printf("lanes: green contexts, latency %ld SMs, bulk %ld\n", lat, bulk);
      ASSERT(lat >= 8 && bulk >= 8);
    } else {
      printf("%s: no green contexts: %s\n", names[mode],
             strstr(log, "no green contexts") ? strstr(log, "no green contexts") : "(no reason logged)");
      ASSERT_EQ(lane_field(json, "latency", "sms"), 0);
      ASSERT_CONTAINS(log, "no green contexts (");
    }
  }
  if (mode == FALLBACK) {
    /* the sliced path is what ran the big requests checked above */
    ASSERT_CONTAINS(log, "sgemm 520x777x1003: ");
    ASSERT_CONTAINS(log, "sgemm 301x2049x513: ");
    ASSERT_CONTAINS(log, "slices (cublas)"); /* the transposed A */
    ASSERT_CONTAINS(log, "spmv 200003x200003 (2000000 nonzeros): ");
  } else if (mode == OFF || strstr(log, "lanes: green contexts")) {
    /* one lane, or lanes on their own SMs: nothing to slice for */
    if (strstr(log, " slices (")) TEST_FAIL("%s: bulk kernels were sliced", names[mode]);
  }
  free(log);
  free(json);
  gkc_close(c);
  st = fixture_stop(&f, SIGTERM);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  checks++;
  return 0;
}

int main(void) {
  rng = test_seed();
  const char *data = getenv("GKC_TEST_DATA");
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/west0067.mtx", data ? data : "tests/data");
  mtx_csr west;
  if (mtx_read_csr(path, &west, err, sizeof err)) TEST_FAIL("%s", err);
  gkc_csr big;
  random_csr(200003, 200003, 2000000, &big);
  if (run(LANES, &big, &west) != 0) TEST_SKIP("gkcd --backend cuda did not start (no usable GPU here)");
  ASSERT_EQ(run(OFF, &big, &west), 0);
  ASSERT_EQ(run(FALLBACK, &big, &west), 0);
  mtx_free(&west);
  free((void *)big.row_ptr), free((void *)big.col_idx), free((void *)big.values);
  printf("e2e_lanes: %d checks passed\n", checks);
  return 0;
}
