/* test_gpu_sgemm_wg: tf32x3 on wgmma (cuda/gkcu_sgemm_wg.h), every
 * configuration and the public tf32x3 algo, against a float64 CPU
 * reference on fresh random inputs: tiny, odd, prime and aligned shapes
 * (edges of every tile), all four transposes, several alpha and beta,
 * beta = 0 with C poisoned with NaN, operands shifted off 16-byte
 * alignment.  Every element is checked, scaled by the sum of |terms| of
 * its dot product and normwise, at float32 tolerances (plain TF32 is ~100x
 * over the normwise bound).  A failure prints the first wrong elements, so
 * that a layout error shows its pattern.
 *
 * Then accuracy against cuBLAS FP32 and TF32 on the same inputs (uniform,
 * positive, cancellation): each configuration's worst scaled error must
 * stay within 2x of cuBLAS FP32's, and cuBLAS TF32's must be far above it.
 * Skipped (77) where the device cannot run the kernels (not cc 9.0); then
 * the public tf32x3 must still run right (the mma.sync kernels), or the
 * test fails.  The cases: sgemm_driver.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_sgemm.h"
#include "gkcu_sgemm_wg.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "sgemm_driver.h"
#include "test.h"

/* Variants: v = 0 the public tf32x3; then each configuration. */
enum { NVARIANTS = 1 + GKCU_WG_CFGS };

static void variant_name(int v, char *buf, size_t len) {
  if (v == 0) snprintf(buf, len, "tf32x3");
  else snprintf(buf, len, "wg/%s", gkcu_wg_cfg_name(v - 1));
}

static int run(gkcu_ctx *ctx, int v, int m, int n, int k, float alpha, const float *a, int ta, const float *b,
               int tb, float beta, float *c) {
  if (v == 0) return gkcu_sgemm(ctx, GKCU_SGEMM_TF32X3, m, n, k, alpha, a, ta, b, tb, beta, c);
  return gkcu_wg_sgemm(ctx, v - 1, m, n, k, alpha, a, ta, b, tb, beta, c);
}

static void tolerances(int v, int k, double *elem, double *frob) {
  *elem = 1e-5 * (1.0 + sqrt((double)k));
  *frob = 5e-6;
}

/* The accuracy comparison's runs: cuBLAS FP32, cuBLAS TF32, then each
 * configuration. */
static int accuracy_run(gkcu_ctx *ctx, int i, int m, int n, int k, float alpha, const float *a, int ta,
                        const float *b, int tb, float beta, float *c) {
  if (i < 2)
    return gkcu_sgemm(ctx, i == 0 ? GKCU_SGEMM_CUBLAS : GKCU_SGEMM_CUBLAS_TF32, m, n, k, alpha, a, ta, b, tb, beta,
                      c);
  return gkcu_wg_sgemm(ctx, i - 2, m, n, k, alpha, a, ta, b, tb, beta, c);
}

/* Each configuration beside cuBLAS FP32 and TF32 on the same inputs. */
static void accuracy_case(sgemm_test *t, const char *what, int m, int n, int k) {
  gpu_sgemm_err e[2 + GKCU_WG_CFGS];
  sgemm_test_accuracy(t, what, m, n, k, 2 + GKCU_WG_CFGS, accuracy_run, e);
  printf("accuracy %-12s %dx%dx%d max scaled: cublas %.3g, cublas_tf32 %.3g, wg", what, m, n, k, e[0].worst,
         e[1].worst);
  for (int i = 2; i < 2 + GKCU_WG_CFGS; i++) printf(" %.3g", e[i].worst);
  printf("\n");
  for (int i = 2; i < 2 + GKCU_WG_CFGS; i++) {
    t->runs++;
    if (!(e[i].worst <= 2.0 * e[0].worst + 1e-12) || !(e[1].worst > 10.0 * e[i].worst)) {
      t->failures++;
      printf("FAIL accuracy %s wg/%s: %.3g vs cuBLAS FP32 %.3g (bound 2x) and TF32 %.3g (must be > 10x)\n", what,
             gkcu_wg_cfg_name(i - 2), e[i].worst, e[0].worst, e[1].worst);
    }
  }
}

static void argument_checks(gkcu_ctx *ctx) {
  float *d;
  CUDA_OK(cudaMalloc((void **)&d, 64));
  ASSERT_EQ(gkcu_wg_sgemm(ctx, GKCU_WG_CFGS, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_wg_sgemm(ctx, 0, 0, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_wg_sgemm(ctx, 0, 1, 1, 1, 1.0f, NULL, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_wg_sgemm(NULL, 0, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT(gkcu_wg_cfg_name(GKCU_WG_CFGS) == NULL && gkcu_wg_cfg_name(0) != NULL);
  cudaFree(d);
}

int main(void) {
  gpu_require_device();
  sgemm_test t = {.name = "test_gpu_sgemm_wg", .rng = {gpu_seed("test_gpu_sgemm_wg")}, .nvariants = NVARIANTS,
                  .variant_name = variant_name, .run = run, .tolerances = tolerances, .name_width = 24,
                  .show_bad = 1};
  int rc = gkcu_ctx_create(&t.ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(t.ctx);
  if (!gkcu_wg_supported(t.ctx)) {
    /* the public tf32x3 must not depend on it */
    t.nvariants = 1;
    sgemm_test_case(&t, 37, 41, 43, 0, 0, 1.0f, 0.0f, 0);
    gkcu_ctx_destroy(t.ctx);
    if (t.failures) return sgemm_test_end(&t);
    printf("test_gpu_sgemm_wg: the device is not compute capability 9.0: skipped\n");
    return 77;
  }

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  static const int sizes[][3] = {{128, 128, 32},  {1, 1, 1},       {13, 17, 19},   {64, 64, 64},   {127, 129, 131},
                                 {257, 255, 67},  {97, 389, 211},  {300, 5, 1000}, {5, 300, 997},  {129, 64, 512},
                                 {200, 136, 256}, {256, 264, 96},  {127, 257, 511}, {521, 1031, 263}, {64, 520, 2053},
                                 /* the public tf32x3's own choices: 128x128 tiles, A split in registers */
                                 {1537, 1531, 515}, {4300, 40, 2052}};
  sgemm_test_shapes(&t, sizes, short_run ? 6 : (int)(sizeof sizes / sizeof sizes[0]));
  if (!short_run) {
    /* beta = 0 (C NaN) with every transpose, aligned and not */
    sgemm_test_beta0(&t, (const int[3]){133, 71, 259}, (const int[3]){132, 72, 260});
    accuracy_case(&t, "uniform", 192, 160, 2048);
    accuracy_case(&t, "positive", 192, 160, 2048);
    accuracy_case(&t, "cancellation", 192, 160, 2048);
    /* long k: many group sums in a row */
    accuracy_case(&t, "uniform", 256, 256, 8192);
    accuracy_case(&t, "positive", 256, 256, 8192);
  }
  gkcu_ctx_destroy(t.ctx);
  return sgemm_test_end(&t);
}
