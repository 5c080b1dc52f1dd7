/* test_gpu_part: the kernels of a partitioned matrix's primitives on the
 * GPU (cuda/gkcu_part.h) against float64 references (tests/lib/part_ref.h), on
 * fresh random inputs: spmv with and without p . A p (row lengths that
 * pick every lanes-per-row width, a halo past the block's own columns),
 * cg_update (cg and pcg, a = 0 with p and q NULL), dot; each sum the same
 * bits when run again, on the whole GPU and on 8 of its SMs (another grid);
 * n = 0, and the arguments refused.
 *
 * Tolerances: y[i], p . A p, r . r, r . z and dot within (m + 8) u S of the
 * compensated sum (m terms, S the sum of their magnitudes: the recursive-
 * summation bound for any order, part_ref.h); x += a p and r -= a q within
 * 4 u (|a p| + |x|); z = dinv .* r exactly (one product of the r written).
 * GKC_GPU_TEST_SHORT=1 (for compute-sanitizer) keeps to the small sizes.
 * A failure prints the seed; GKC_TEST_SEED replays it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gkc_errors.h"
#include "gkcu_part.h"
#include "gpu_test.h"
#include "part_ref.h"
#include "test.h"

static gkcu_ctx *ctx;
static uint64_t g_seed, g_rng;
static int g_done, checks;

static void report_seed(void) {
  if (!g_done) fprintf(stderr, "seed %" PRIu64 " (replay: GKC_TEST_SEED=%" PRIu64 ")\n", g_seed, g_seed);
}

static void *dev_copy(const void *h, size_t bytes) {
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, bytes ? bytes : 8));
  if (bytes) CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

static void to_host(void *h, const void *d, size_t bytes) {
  if (bytes) CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static void ok(int rc, const char *what) {
  if (rc) TEST_FAIL("%s: %d %s", what, rc, gkcu_ctx_errmsg(ctx));
}

static void check_spmv(int32_t rows, int32_t halo, int maxrow) {
  ref_csr m = ref_random_csr(&g_rng, rows, rows + halo, maxrow);
  int32_t cols = rows + halo;
  double *x = ref_rand_vec(&g_rng, cols, -1, 1), *y = malloc(8 * (size_t)rows + 8),
         *y2 = malloc(8 * (size_t)rows + 8);
  ref_sum *want = malloc(sizeof *want * ((size_t)rows + 1));
  ASSERT(y && y2 && want);
  ref_spmv(&m, x, want);
  int32_t *drp = dev_copy(m.rp, 4 * ((size_t)rows + 1)), *dci = dev_copy(m.ci, 4 * (size_t)m.nnz);
  float *dv = dev_copy(m.v, 4 * (size_t)m.nnz);
  double *dx = dev_copy(x, 8 * (size_t)cols), *dy = NULL;
  CUDA_OK(cudaMalloc((void **)&dy, 8 * (size_t)rows + 8));
  CUDA_OK(cudaMemset(dy, 0xff, 8 * (size_t)rows + 8)); /* NaN */
  double xy = NAN, xy2 = NAN;
  ok(gkcu_part_spmv(ctx, rows, m.nnz, drp, dci, dv, dx, dy, &xy), "spmv with the dot");
  to_host(y, dy, 8 * (size_t)rows);
  for (int32_t i = 0; i < rows; i++)
    if (!ref_close(y[i], want[i]))
      TEST_FAIL("spmv rows %d maxrow %d: y[%d] = %.17g, want %.17g", rows, maxrow, i, y[i], want[i].sum);
  ref_sum d = ref_dot(x, y, rows);
  if (!ref_close(xy, d)) TEST_FAIL("spmv rows %d maxrow %d: p . A p = %.17g, want %.17g", rows, maxrow, xy, d.sum);
  /* again: the same bits; and without the dot, the same y */
  ok(gkcu_part_spmv(ctx, rows, m.nnz, drp, dci, dv, dx, dy, &xy2), "spmv with the dot, again");
  if (memcmp(&xy, &xy2, 8)) TEST_FAIL("spmv rows %d: p . A p %.17g, then %.17g", rows, xy, xy2);
  CUDA_OK(cudaMemset(dy, 0xff, 8 * (size_t)rows + 8));
  ok(gkcu_part_spmv(ctx, rows, m.nnz, drp, dci, dv, dx, dy, NULL), "spmv");
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  to_host(y2, dy, 8 * (size_t)rows);
  if (rows && memcmp(y, y2, 8 * (size_t)rows)) TEST_FAIL("spmv rows %d: y differs without the dot", rows);
  checks += 3;
  cudaFree(drp), cudaFree(dci), cudaFree(dv), cudaFree(dx), cudaFree(dy);
  ref_csr_free(&m);
  free(x), free(y), free(y2), free(want);
}

static void check_update(int64_t n, int jacobi, double a) {
  size_t b = 8 * (size_t)n;
  double *p = ref_rand_vec(&g_rng, n, -1, 1), *q = ref_rand_vec(&g_rng, n, -1, 1),
         *x0 = ref_rand_vec(&g_rng, n, -1, 1), *r0 = ref_rand_vec(&g_rng, n, -1, 1),
         *dinv = ref_rand_vec(&g_rng, n, 0.1, 2), *x = malloc(b + 8), *r = malloc(b + 8),
         *z = malloc(b + 8), *x2 = malloc(b + 8), *r2 = malloc(b + 8);
  ASSERT(x && r && z && x2 && r2);
  double *dp = dev_copy(p, b), *dq = dev_copy(q, b), *dx = dev_copy(x0, b), *dr = dev_copy(r0, b),
         *dd = dev_copy(dinv, b), *dz = NULL;
  CUDA_OK(cudaMalloc((void **)&dz, b + 8));
  CUDA_OK(cudaMemset(dz, 0xff, b + 8));
  double out[2] = {NAN, NAN}, again[2] = {NAN, NAN};
  ok(gkcu_part_cg_update(ctx, a, a != 0 ? dp : NULL, a != 0 ? dq : NULL, dx, dr, jacobi ? dd : NULL,
                         jacobi ? dz : NULL, n, out),
     "cg_update");
  to_host(x, dx, b), to_host(r, dr, b), to_host(z, dz, b);
  ref_check_cg_update(n, a, jacobi, p, q, x0, r0, dinv, x, r, z, out);
  /* the same inputs again: the same bits */
  if (n) {
    CUDA_OK(cudaMemcpy(dx, x0, b, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dr, r0, b, cudaMemcpyHostToDevice));
  }
  ok(gkcu_part_cg_update(ctx, a, dp, dq, dx, dr, jacobi ? dd : NULL, dz, n, again), "cg_update again");
  to_host(x2, dx, b), to_host(r2, dr, b);
  if (memcmp(out, again, sizeof out) || (n && (memcmp(x, x2, b) || memcmp(r, r2, b))))
    TEST_FAIL("cg_update n %" PRId64 ": not the same bits twice (%.17g %.17g, then %.17g %.17g)", n, out[0],
              out[1], again[0], again[1]);
  /* and dot, which the solve keeps for b . b and the residual */
  const ref_sum rz = ref_dot(r, z, n);
  double d1 = NAN, d2 = NAN;
  ok(gkcu_part_dot(ctx, dr, dz, jacobi ? n : 0, &d1), "dot");
  ok(gkcu_part_dot(ctx, dr, dz, jacobi ? n : 0, &d2), "dot again");
  if (!ref_close(d1, jacobi ? rz : (ref_sum){0, 0, 0}) || memcmp(&d1, &d2, 8))
    TEST_FAIL("dot n %" PRId64 ": %.17g then %.17g, want %.17g", n, d1, d2, jacobi ? rz.sum : 0.0);
  checks += 4;
  cudaFree(dp), cudaFree(dq), cudaFree(dx), cudaFree(dr), cudaFree(dd), cudaFree(dz);
  free(p), free(q), free(x0), free(r0), free(dinv), free(x), free(r), free(z), free(x2), free(r2);
}

static void check_refusals(void) {
  double out[2], d;
  ASSERT_EQ(gkcu_part_cg_update(ctx, 1, NULL, NULL, NULL, NULL, NULL, NULL, -1, out), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_part_cg_update(ctx, 1, &d, &d, &d, &d, NULL, NULL, 1, NULL), GKC_EINVALID_ARGUMENT);
  /* a != 0 needs p, q and x; dinv needs z */
  ASSERT_EQ(gkcu_part_cg_update(ctx, 1, NULL, &d, &d, &d, NULL, NULL, 1, out), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_part_cg_update(ctx, 0, NULL, NULL, &d, &d, &d, NULL, 1, out), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkcu_ctx_errmsg(ctx), "invalid argument");
  ASSERT_EQ(gkcu_part_spmv(ctx, -1, 0, NULL, NULL, NULL, NULL, NULL, &d), GKC_EINVALID_ARGUMENT);
  /* nothing to do: sums are 0 */
  out[0] = out[1] = NAN;
  d = NAN;
  ASSERT_EQ(gkcu_part_cg_update(ctx, 1, NULL, NULL, NULL, NULL, NULL, NULL, 0, out), 0);
  ASSERT(out[0] == 0 && out[1] == 0);
  ASSERT_EQ(gkcu_part_spmv(ctx, 0, 0, NULL, NULL, NULL, NULL, NULL, &d), 0);
  ASSERT(d == 0);
  checks++;
}

static void run_all(int shortrun) {
  const int32_t rows[] = {1, 7, 1000, 100003, (1 << 20) + 5};
  const int widths[] = {1, 3, 12, 27, 80}; /* lanes per row 1, 2, 8, 16, 32 */
  int nrows = shortrun ? 3 : 5;
  for (int i = 0; i < nrows; i++) {
    for (int w = 0; w < 5; w++)
      if (rows[i] < 200000 || widths[w] <= 27) check_spmv(rows[i], rows[i] / 4 + 1, widths[w]);
    for (int jacobi = 0; jacobi <= 1; jacobi++) {
      check_update(rows[i], jacobi, ref_rand(&g_rng, -3, 3));
      check_update(rows[i], jacobi, 0);
    }
  }
  if (shortrun) {
    check_spmv(70001, 7000, 27);
    check_update(70001, 1, 0.5);
  }
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) TEST_SKIP("no CUDA device");
  g_rng = g_seed = ref_seed();
  atexit(report_seed);
  const char *sh = getenv("GKC_GPU_TEST_SHORT");
  int shortrun = sh && *sh && strcmp(sh, "0") != 0;
  cudaStream_t st;
  CUDA_OK(cudaStreamCreate(&st));
  ok(gkcu_ctx_create(&ctx, st), "gkcu_ctx_create");
  check_refusals();
  run_all(shortrun);
  /* 8 SMs: other grids, other block partials, the same bounds */
  ok(gkcu_ctx_set_sms(ctx, 8), "gkcu_ctx_set_sms");
  run_all(1);
  gkcu_ctx_destroy(ctx);
  CUDA_OK(cudaStreamDestroy(st));
  g_done = 1;
  printf("test_gpu_part: %d checks passed (seed %" PRIu64 "%s)\n", checks, g_seed, shortrun ? ", short" : "");
  return 0;
}
