/* test_gpu_lanes: the CUDA backend's lanes (cuda/lanes.c) and bulk slices
 * (cuda/cuda_slice.c, cuda/gkcu_rows.cu), below the daemon.
 *
 *  - lanes: with --latency-sms 8 the device splits into two green contexts
 *    (where the driver can: else the reason is printed and the split checks
 *    are skipped, never passed) of disjoint SM counts, the latency one at
 *    least 8; a kernel on each lane's stream, made the way the backend makes
 *    them, writes the right values; GKCD_CUDA_LANES=streams and lanes off
 *    give no green contexts and say why.
 *  - slices: sgemm cut into row blocks of C (every algo, all four
 *    transposes, odd sizes, alpha and beta, C poisoned with NaN when beta is
 *    0) and spmv cut into row ranges (scalar, vector) equal a float64
 *    reference on fresh random inputs, with the number of slices the budget
 *    implies; gkcu_sgemm_rows leaves the rows outside its range untouched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_slice.h"
#include "gkcu_rows.h"
#include "gkcu_sgemm.h"
#include "gkcu_spmv.h"
#include "gpu_util.h"
#include "lanes.h"
#include "gpu_test.h"
#include "test.h"

static gpu_rng rng;
static int checks;

static float *host_random(size_t n) {
  float *p = malloc(n * sizeof *p + 4);
  ASSERT(p);
  for (size_t i = 0; i < n; i++) p[i] = gpu_rng_float(&rng, -1.0f, 1.0f);
  return p;
}

static void *dev_copy(const void *h, size_t bytes) {
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, bytes ? bytes : 4));
  if (bytes) CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

/* --- lanes --------------------------------------------------------------------- */

/* A kernel on a stream of lane, made as the backend makes its slots. */
static void run_on_lane(cuda_lanes *L, int lane) {
  char msg[256] = "";
  cudaStream_t s;
  gkcu_ctx *ctx;
  if (lanes_enter(L, lane, msg, sizeof msg)) TEST_FAIL("%s", msg);
  if (lanes_stream_create(L, lane, &s, msg, sizeof msg) != cudaSuccess) TEST_FAIL("%s", msg);
  ASSERT_EQ(gkcu_ctx_create(&ctx, s), 0);
  if (lanes_green(L)) ASSERT_EQ(gkcu_ctx_set_sms(ctx, lanes_sms(L, lane)), 0);
  if (lanes_leave(L, msg, sizeof msg)) TEST_FAIL("%s", msg);
  if (lanes_green(L)) ASSERT_EQ(gkcu_ctx_sm_count(ctx), lanes_sms(L, lane));
  size_t n = 1000003;
  float *d, *h = malloc(n * sizeof *h);
  ASSERT(h);
  CUDA_OK(cudaMalloc((void **)&d, n * sizeof *d)); /* on the primary context, as devcache does */
  uint64_t seed = gpu_rng_next(&rng);
  ASSERT_EQ(gkcu_fill_uniform(ctx, d, n, seed, -2.0f, 3.0f), 0);
  CUDA_OK(cudaMemcpyAsync(h, d, n * sizeof *d, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < n; i++)
    if (h[i] != gkcu_uniform_at(seed, i, -2.0f, 3.0f))
      TEST_FAIL("lane %d: element %zu is %g, want %g", lane, i, h[i],
                gkcu_uniform_at(seed, i, -2.0f, 3.0f));
  CUDA_OK(cudaFree(d));
  gkcu_ctx_destroy(ctx);
  CUDA_OK(cudaStreamDestroy(s));
  free(h);
  checks++;
}

static void test_lanes(void) {
  int total = 0;
  CUDA_OK(cudaDeviceGetAttribute(&total, cudaDevAttrMultiProcessorCount, 0));
  cuda_lanes *L;
  ASSERT_EQ(lanes_open(&L, 0, 8, 0), 0);
  ASSERT_EQ(lanes_count(L), 2);
  if (lanes_green(L)) {
    int lat = lanes_sms(L, LANES_LATENCY), bulk = lanes_sms(L, LANES_BULK);
    printf("lanes: green contexts: latency %d SMs, bulk %d SMs of %d\n", lat, bulk, total);
    ASSERT(lat >= 8 && bulk >= 1 && lat + bulk <= total);
    ASSERT_STR_EQ(lanes_why(L), "");
    checks++;
  } else {
    printf("lanes: NO green contexts on this machine (%s): split checks not run\n", lanes_why(L));
    ASSERT(lanes_why(L)[0]);
  }
  run_on_lane(L, LANES_BULK);
  run_on_lane(L, LANES_LATENCY);
  lanes_close(L);

  ASSERT_EQ(lanes_open(&L, 0, 8, 1), 0); /* GKCD_CUDA_LANES=streams */
  ASSERT_EQ(lanes_count(L), 2);
  ASSERT_EQ(lanes_green(L), 0);
  ASSERT_CONTAINS(lanes_why(L), "GKCD_CUDA_LANES");
  ASSERT_EQ(lanes_sms(L, LANES_LATENCY), total);
  run_on_lane(L, LANES_LATENCY);
  run_on_lane(L, LANES_BULK);
  lanes_close(L);

  ASSERT_EQ(lanes_open(&L, 0, 0, 0), 0); /* --latency-sms 0 */
  ASSERT_EQ(lanes_count(L), 1);
  ASSERT_EQ(lanes_green(L), 0);
  run_on_lane(L, LANES_BULK);
  lanes_close(L);

  ASSERT_EQ(lanes_open(&L, 0, total, 0), 0); /* nothing left for bulk: the fallback */
  ASSERT_EQ(lanes_count(L), 2);
  ASSERT_EQ(lanes_green(L), 0);
  printf("lanes: --latency-sms %d: %s\n", total, lanes_why(L));
  lanes_close(L);
  checks++;
}

/* --- sgemm slices ------------------------------------------------------------------ */

static void sgemm_ref_check(const char *what, int m, int n, int k, int ta, int tb, float alpha,
                            const float *a, const float *b, float beta, const float *cin,
                            const float *got) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = (double)(ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p]) *
                   (tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j]);
        acc += t, mag += fabs(t);
      }
      double ci = beta != 0 ? cin[(size_t)i * n + j] : 0;
      double want = alpha * acc + beta * ci, g = got[(size_t)i * n + j];
      double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta * ci)) + 1e-30;
      if (!(fabs(g - want) <= tol))
        TEST_FAIL("%s %dx%dx%d ta=%d tb=%d: C[%d,%d] = %.9g, want %.9g", what, m, n, k, ta, tb, i,
                  j, g, want);
    }
}

static void slice_case(gkcu_ctx *ctx, int algo, int auto_picked, int m, int n, int k, int ta,
                       int tb, float alpha, float beta, int rows_per) {
  float *a = host_random((size_t)m * k), *b = host_random((size_t)k * n);
  float *cin = host_random((size_t)m * n), *got = malloc((size_t)m * n * 4);
  ASSERT(got);
  float *da = dev_copy(a, (size_t)m * k * 4), *db = dev_copy(b, (size_t)k * n * 4);
  float *dc = dev_copy(cin, (size_t)m * n * 4);
  if (beta == 0) CUDA_OK(cudaMemset(dc, 0xff, (size_t)m * n * 4)); /* NaN: never read */
  slice_budget sb = {2.0 * n * k * rows_per + 1, 0};
  int ran = algo, nslices = 0;
  int rc = slice_sgemm(ctx, &sb, &ran, auto_picked, m, n, k, alpha, da, ta, db, tb, beta, dc,
                       &nslices);
  if (rc) TEST_FAIL("slice_sgemm %s: %s", gkcu_sgemm_algo_name(algo), gkcu_ctx_errmsg(ctx));
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(got, dc, (size_t)m * n * 4, cudaMemcpyDeviceToHost));
  int per = slice_sgemm_rows(&sb, m, n, k);
  int cublas = algo == GKCU_SGEMM_CUBLAS;
  int whole = ta && !cublas && !auto_picked;
  int want = whole || per >= m ? 1 : (m + per - 1) / per;
  if (nslices != want)
    TEST_FAIL("%dx%dx%d ta=%d %s: %d slices, want %d (%d rows each)", m, n, k, ta,
              gkcu_sgemm_algo_name(algo), nslices, want, per);
  if (ta && auto_picked && per < m && !cublas) ASSERT_EQ(ran, GKCU_SGEMM_CUBLAS);
  if (!ta) ASSERT_EQ(ran, algo);
  char what[64];
  snprintf(what, sizeof what, "slices of %s", gkcu_sgemm_algo_name(ran));
  sgemm_ref_check(what, m, n, k, ta, tb, alpha, a, b, beta, cin, got);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(cin), free(got);
  checks++;
}

static void test_sgemm_slices(gkcu_ctx *ctx) {
  static const int algos[] = {GKCU_SGEMM_NAIVE, GKCU_SGEMM_SMEM, GKCU_SGEMM_REGBLOCK,
                              GKCU_SGEMM_CUBLAS};
  static const int shapes[][4] = {/* m, n, k, rows per slice (rounded to SLICE_MIN_ROWS) */
                                  {333, 97, 511, 32}, {1001, 131, 67, 64}, {65, 1, 3, 32},
                                  {37, 257, 1003, 32}, {32, 7, 5, 32}, {97, 33, 129, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (size_t al = 0; al < sizeof algos / sizeof *algos; al++)
      for (int t = 0; t < 4; t++)
        slice_case(ctx, algos[al], 0, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                   t == 1 ? -1.5f : 1.0f, t == 2 ? 0.5f : 0.0f, shapes[s][3]);
  /* auto picked regblock with a transposed A: the slices run cuBLAS */
  slice_case(ctx, GKCU_SGEMM_REGBLOCK, 1, 301, 77, 257, 1, 0, 1.0f, 0.0f, 32);
  slice_case(ctx, GKCU_SGEMM_REGBLOCK, 1, 301, 77, 257, 1, 1, 2.0f, -1.0f, 32);

  /* rows [5, 38) only: every other row keeps its sentinel */
  int m = 100, n = 50, k = 70;
  float *a = host_random((size_t)m * k), *b = host_random((size_t)k * n);
  float *c = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
  ASSERT(c && got);
  for (size_t i = 0; i < (size_t)m * n; i++) c[i] = 12345.0f;
  float *da = dev_copy(a, (size_t)m * k * 4), *db = dev_copy(b, (size_t)k * n * 4);
  float *dc = dev_copy(c, (size_t)m * n * 4);
  for (int ta = 0; ta < 2; ta++) {
    ASSERT_EQ(gkcu_sgemm_rows(ctx, GKCU_SGEMM_CUBLAS, m, n, k, 5, 38, 1.0f, da, ta, db, 0, 0.0f, dc),
              0);
    CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(got, dc, (size_t)m * n * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < m; i++)
      if (i < 5 || i >= 38)
        for (int j = 0; j < n; j++)
          if (got[(size_t)i * n + j] != 12345.0f) TEST_FAIL("row %d outside [5, 38) was written", i);
    /* the range itself: compare rows 5..37 as a 33-row product */
    float *asub = malloc((size_t)33 * k * 4);
    ASSERT(asub);
    for (int i = 0; i < 33; i++)
      for (int p = 0; p < k; p++)
        asub[(size_t)i * k + p] = ta ? a[(size_t)p * m + 5 + i] : a[(size_t)(5 + i) * k + p];
    sgemm_ref_check("gkcu_sgemm_rows", 33, n, k, 0, 0, 1.0f, asub, b, 0.0f, NULL,
                    got + (size_t)5 * n);
    free(asub);
    CUDA_OK(cudaMemcpy(dc, c, (size_t)m * n * 4, cudaMemcpyHostToDevice));
  }
  /* a strided A needs cuBLAS */
  ASSERT_EQ(gkcu_sgemm_rows(ctx, GKCU_SGEMM_REGBLOCK, m, n, k, 0, 10, 1.0f, da, 1, db, 0, 0.0f, dc),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm_rows(ctx, GKCU_SGEMM_CUBLAS, m, n, k, 10, 10, 1.0f, da, 0, db, 0, 0.0f, dc),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm_rows(ctx, GKCU_SGEMM_CUBLAS, m, n, k, 0, m + 1, 1.0f, da, 0, db, 0, 0.0f, dc),
            GKC_EINVALID_ARGUMENT);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(c), free(got);
  checks++;
}

/* --- spmv slices --------------------------------------------------------------------- */

/* Random CSR: row lengths 0..2*mean (some empty), sorted-free columns. */
static void random_csr(gpu_csr *m, int32_t rows, int32_t cols, int mean) {
  int32_t *len = malloc((size_t)rows * sizeof *len);
  ASSERT(len);
  int64_t nnz = 0;
  for (int32_t r = 0; r < rows; r++) nnz += len[r] = (int32_t)gpu_rng_below(&rng, 2 * mean + 1);
  ASSERT_EQ(gpu_csr_alloc(m, rows, cols, nnz), 0);
  m->row_ptr[0] = 0;
  for (int32_t r = 0; r < rows; r++) m->row_ptr[r + 1] = m->row_ptr[r] + len[r];
  for (int64_t j = 0; j < nnz; j++) {
    m->col_idx[j] = (int32_t)gpu_rng_below(&rng, (uint32_t)cols);
    m->values[j] = gpu_rng_float(&rng, -1.0f, 1.0f);
  }
  free(len);
}

static void spmv_slice_case(gkcu_ctx *ctx, const gpu_csr *A, int algo, float alpha, float beta,
                            double bytes) {
  float *x = host_random((size_t)A->cols), *y = host_random((size_t)A->rows);
  float *got = malloc((size_t)A->rows * 4);
  double *want = malloc((size_t)A->rows * 8), *mag = malloc((size_t)A->rows * 8);
  ASSERT(got && want && mag);
  int32_t *drp = dev_copy(A->row_ptr, ((size_t)A->rows + 1) * 4);
  int32_t *dci = dev_copy(A->col_idx, (size_t)A->nnz * 4);
  float *dv = dev_copy(A->values, (size_t)A->nnz * 4), *dx = dev_copy(x, (size_t)A->cols * 4);
  float *dy = dev_copy(y, (size_t)A->rows * 4);
  if (beta == 0) CUDA_OK(cudaMemset(dy, 0xff, (size_t)A->rows * 4));
  slice_budget sb = {1e12, bytes};
  int nslices = 0;
  if (slice_spmv(ctx, &sb, algo, A->rows, A->cols, A->nnz, drp, dci, dv, alpha, dx, beta, dy, NULL,
                 &nslices))
    TEST_FAIL("slice_spmv %s: %s", gkcu_spmv_algo_name(algo), gkcu_ctx_errmsg(ctx));
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(got, dy, (size_t)A->rows * 4, cudaMemcpyDeviceToHost));
  int per = slice_spmv_rows(&sb, A->rows, A->cols, A->nnz);
  int expect = (algo == GKCU_SPMV_SCALAR || algo == GKCU_SPMV_VECTOR) ? (A->rows + per - 1) / per : 1;
  if (nslices != expect)
    TEST_FAIL("spmv %s %d rows: %d slices, want %d", gkcu_spmv_algo_name(algo), A->rows, nslices,
              expect);
  gpu_spmv_ref(A, alpha, x, beta, beta != 0 ? y : NULL, want, mag);
  for (int32_t r = 0; r < A->rows; r++)
    if (!(fabs(got[r] - want[r]) <= 1e-5 * mag[r] + 1e-30))
      TEST_FAIL("spmv slices of %s (%d): y[%d] = %.9g, want %.9g", gkcu_spmv_algo_name(algo),
                nslices, r, got[r], want[r]);
  cudaFree(drp), cudaFree(dci), cudaFree(dv), cudaFree(dx), cudaFree(dy);
  free(x), free(y), free(got), free(want), free(mag);
  checks++;
}

static void test_spmv_slices(gkcu_ctx *ctx) {
  gpu_csr A;
  random_csr(&A, 50021, 3001, 12);
  /* ~ 7 MB of traffic: 1 MB slices make several, 1 byte makes 256-row ones */
  for (int algo = GKCU_SPMV_SCALAR; algo <= GKCU_SPMV_CUSPARSE; algo++) {
    spmv_slice_case(ctx, &A, algo, 1.0f, 0.0f, 1e6);
    spmv_slice_case(ctx, &A, algo, -0.5f, 2.0f, 1.0);
  }
  gpu_csr_free(&A);
  random_csr(&A, 777, 1001, 3);
  spmv_slice_case(ctx, &A, GKCU_SPMV_VECTOR, 1.5f, 0.0f, 1.0);
  spmv_slice_case(ctx, &A, GKCU_SPMV_SCALAR, 1.5f, -1.0f, 1.0);
  gpu_csr_free(&A);
}

int main(void) {
  gpu_require_device();
  rng.s = gpu_seed("test_gpu_lanes");
  test_lanes();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  gkcu_ctx *ctx;
  ASSERT_EQ(gkcu_ctx_create(&ctx, s), 0);
  test_sgemm_slices(ctx);
  test_spmv_slices(ctx);
  gkcu_ctx_destroy(ctx);
  CUDA_OK(cudaStreamDestroy(s));
  printf("test_gpu_lanes: %d checks passed\n", checks);
  return 0;
}
