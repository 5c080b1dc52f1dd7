/* test_gpu_sgemm: every sgemm algo (and every regblock tile shape, with and
 * without split-K) against a double-precision CPU reference, on fresh random
 * inputs: odd, prime and tiny sizes, all four transposes, several alpha and
 * beta, beta = 0 with C poisoned with NaN, and unaligned pointers.  Every
 * element is checked, scaled by the sum of |terms| of its dot product, and
 * the whole normwise against ||C||.  Keeps going after a failure so one run
 * reports them all (the cases: sgemm_driver.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_lab.h"
#include "gkcu_sgemm.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "sgemm_driver.h"
#include "test.h"

/* Variants: the public algos (auto first), then every regblock tile
 * shape of the lab, unsplit and with K split in 3. */
enum { NPUBLIC = GKCU_SGEMM_NALGO, NVARIANTS = NPUBLIC + GKCU_LAB_TILES * 2 };

static void variant_name(int v, char *buf, size_t len) {
  if (v < NPUBLIC) snprintf(buf, len, "%s", gkcu_sgemm_algo_name(v));
  else snprintf(buf, len, "regblock/%s/k%d", gkcu_lab_tile_name((v - NPUBLIC) / 2), (v - NPUBLIC) % 2 ? 3 : 1);
}

static int run(gkcu_ctx *ctx, int v, int m, int n, int k, float alpha, const float *a, int ta, const float *b,
               int tb, float beta, float *c) {
  if (v < NPUBLIC) return gkcu_sgemm(ctx, v, m, n, k, alpha, a, ta, b, tb, beta, c);
  return gkcu_lab_sgemm_regblock(ctx, (v - NPUBLIC) / 2, (v - NPUBLIC) % 2 ? 3 : 1, m, n, k, alpha, a, ta, b,
                                 tb, beta, c);
}

/* cublas_tf32 rounds its inputs to TF32: ~1e-3; the others are FP32. */
static void tolerances(int v, int k, double *elem, double *frob) {
  int tf32 = v == GKCU_SGEMM_CUBLAS_TF32;
  *elem = tf32 ? 4e-3 : 1e-5 * (1.0 + sqrt((double)k));
  *frob = tf32 ? 2e-3 : 2e-5;
}

static void argument_checks(gkcu_ctx *ctx) {
  float *d;
  CUDA_OK(cudaMalloc((void **)&d, 64));
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_REGBLOCK, 0, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_CUBLAS, 1, 1, -3, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_NAIVE, 1, 1, 1, 1.0f, NULL, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm(ctx, 99, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm(NULL, GKCU_SGEMM_SMEM, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT(strlen(gkcu_ctx_errmsg(ctx)) > 0);
  ASSERT_EQ(gkcu_sgemm_algo_parse("regblock"), GKCU_SGEMM_REGBLOCK);
  ASSERT_EQ(gkcu_sgemm_algo_parse(NULL), GKCU_SGEMM_AUTO);
  ASSERT_EQ(gkcu_sgemm_algo_parse("tf32"), -1);
  ASSERT(gkcu_sgemm_pick(ctx, 4096, 4096, 4096) != GKCU_SGEMM_CUBLAS_TF32);
  /* Split-K scratch far beyond the card: out of memory, reported, no launch;
   * the context keeps working afterwards.  (Not under compute-sanitizer,
   * which counts the refused cudaMalloc as an error.) */
  if (!getenv("GKC_GPU_TEST_SHORT")) ASSERT_EQ(gkcu_lab_sgemm_regblock(ctx, 3, 64, 46000, 46000, 4096, 1.0f, d, 0, d, 0, 0.0f, d),
            GKC_EOUT_OF_MEMORY);
  if (!getenv("GKC_GPU_TEST_SHORT")) printf("out-of-memory message: %s\n", gkcu_ctx_errmsg(ctx));
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_REGBLOCK, 2, 2, 2, 1.0f, d, 0, d, 0, 0.0f, d), 0);
  CUDA_OK(cudaDeviceSynchronize());
  cudaFree(d);
}

int main(void) {
  gpu_require_device();
  sgemm_test t = {.name = "test_gpu_sgemm", .rng = {gpu_seed("test_gpu_sgemm")}, .nvariants = NVARIANTS,
                  .variant_name = variant_name, .run = run, .tolerances = tolerances, .frob_vs_ref = 1,
                  .name_width = 22};
  int rc = gkcu_ctx_create(&t.ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);

  argument_checks(t.ctx);

  static const int sizes[][3] = {
      {1, 1, 1},     {1, 7, 3},      {7, 1, 5},     {2, 3, 1},      {13, 17, 19},   {31, 33, 35},
      {64, 64, 64},  {127, 129, 131}, {128, 128, 8}, {257, 255, 67}, {97, 389, 211}, {300, 5, 1000},
      {5, 300, 997}, {1000, 3, 1000}, {129, 64, 512}, {512, 512, 512}};
  int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
  /* GKC_GPU_TEST_SHORT: small shapes only (for compute-sanitizer) */
  if (getenv("GKC_GPU_TEST_SHORT")) nsizes = 9;
  sgemm_test_shapes(&t, sizes, nsizes);
  /* beta = 0 with every transpose at one awkward size, aligned and not */
  if (!getenv("GKC_GPU_TEST_SHORT")) sgemm_test_beta0(&t, (const int[3]){133, 71, 259}, (const int[3]){133, 72, 260});

  gkcu_ctx_destroy(t.ctx);
  return sgemm_test_end(&t);
}
