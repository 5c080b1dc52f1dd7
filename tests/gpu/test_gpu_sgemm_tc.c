/* test_gpu_sgemm_tc: tf32x3 (float32-accurate sgemm on the tensor cores),
 * every configuration unsplit and with K split in a cluster and through
 * scratch, through the public algo
 * and auto, against a float64 CPU reference on fresh random inputs: odd,
 * prime, tiny and aligned shapes, all four transposes, several alpha and
 * beta, beta = 0 with C poisoned with NaN, operands shifted off 16-byte
 * alignment.  Every element is checked, both scaled by the sum of |terms|
 * of its dot product and normwise, at float32 tolerances (plain TF32 is
 * ~100x over the normwise bound, so this cannot pass on a TF32 kernel).
 *
 * Then accuracy against cuBLAS FP32 on the same inputs (uniform, positive,
 * large cancellation): tf32x3's worst scaled error must stay within 4x of
 * cuBLAS FP32's, and cuBLAS TF32's must be far above both (the check can
 * tell the two apart).  Keeps going after a failure (the cases:
 * sgemm_driver.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_sgemm.h"
#include "gkcu_sgemm_tc.h"
#include "gkcu_sgemm_wg.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "sgemm_driver.h"
#include "test.h"

/* Variants: v < 2 the public algos (tf32x3, auto); then (cfg, splits)
 * for each configuration: unsplit, 3 slices (a cluster), 2 slices forced
 * through scratch, 32 asked (slices of 32 k: past 8 of them, the scratch
 * path with a second kernel). */
enum { NSPLIT = 4, NVARIANTS = 2 + GKCU_TC_CFGS * NSPLIT };
static const int split_list[NSPLIT] = {1, 3, -2, 32};

static void variant_name(int v, char *buf, size_t len) {
  if (v == 0) snprintf(buf, len, "tf32x3");
  else if (v == 1) snprintf(buf, len, "auto");
  else snprintf(buf, len, "tf32x3/%s/k%d", gkcu_tc_cfg_name((v - 2) / NSPLIT), split_list[(v - 2) % NSPLIT]);
}

static int run(gkcu_ctx *ctx, int v, int m, int n, int k, float alpha, const float *a, int ta, const float *b,
               int tb, float beta, float *c) {
  if (v < 2) return gkcu_sgemm(ctx, v == 0 ? GKCU_SGEMM_TF32X3 : GKCU_SGEMM_AUTO, m, n, k, alpha, a, ta, b, tb, beta, c);
  return gkcu_lab_sgemm_tf32x3(ctx, (v - 2) / NSPLIT, split_list[(v - 2) % NSPLIT], m, n, k, alpha, a, ta, b, tb,
                               beta, c);
}

/* float32-level bounds: elementwise as the FP32 algos in test_gpu_sgemm,
 * normwise 5e-6 (plain TF32 is ~3e-4 here) */
static void tolerances(int v, int k, double *elem, double *frob) {
  *elem = 1e-5 * (1.0 + sqrt((double)k));
  *frob = 5e-6;
}

/* The accuracy comparison's runs: cuBLAS FP32, cuBLAS TF32, tf32x3. */
static const int accuracy_algos[] = {GKCU_SGEMM_CUBLAS, GKCU_SGEMM_CUBLAS_TF32, GKCU_SGEMM_TF32X3};

static int accuracy_run(gkcu_ctx *ctx, int i, int m, int n, int k, float alpha, const float *a, int ta,
                        const float *b, int tb, float beta, float *c) {
  return gkcu_sgemm(ctx, accuracy_algos[i], m, n, k, alpha, a, ta, b, tb, beta, c);
}

/* tf32x3 beside cuBLAS FP32 and TF32 on the same inputs. */
static void accuracy_case(sgemm_test *t, const char *what, int m, int n, int k) {
  gpu_sgemm_err e[3];
  sgemm_test_accuracy(t, what, m, n, k, 3, accuracy_run, e);
  t->runs++;
  printf("accuracy %-12s %dx%dx%d max scaled / frob: cublas %.3g / %.3g, cublas_tf32 %.3g / %.3g, tf32x3 %.3g / %.3g\n",
         what, m, n, k, e[0].worst, e[0].frob, e[1].worst, e[1].frob, e[2].worst, e[2].frob);
  if (!(e[2].worst <= 4.0 * e[0].worst + 1e-12) || !(e[1].worst > 10.0 * e[2].worst)) {
    t->failures++;
    printf("FAIL accuracy %s: tf32x3 %.3g vs cuBLAS FP32 %.3g (bound 4x) and TF32 %.3g (must be > 10x tf32x3)\n",
           what, e[2].worst, e[0].worst, e[1].worst);
  }
}

static void argument_checks(gkcu_ctx *ctx) {
  float *d;
  CUDA_OK(cudaMalloc((void **)&d, 64));
  ASSERT_EQ(gkcu_sgemm_algo_parse("tf32x3"), GKCU_SGEMM_TF32X3);
  ASSERT(!strcmp(gkcu_sgemm_algo_name(GKCU_SGEMM_TF32X3), "tf32x3"));
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_TF32X3, 0, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_sgemm(ctx, GKCU_SGEMM_TF32X3, 1, 1, 1, 1.0f, NULL, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_sgemm_tf32x3(ctx, GKCU_TC_CFGS, 1, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_sgemm_tf32x3(ctx, 0, 65, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_sgemm_tf32x3(ctx, 0, -65, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_sgemm_tf32x3(ctx, 0, -1, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_lab_sgemm_tf32x3(NULL, 0, 1, 1, 1, 1, 1.0f, d, 0, d, 0, 0.0f, d), GKC_EINVALID_ARGUMENT);
  ASSERT(gkcu_tc_cfg_name(GKCU_TC_CFGS) == NULL && gkcu_tc_cfg_name(0) != NULL);
  /* auto never runs plain TF32 */
  static const int shapes[][3] = {{256, 256, 256}, {4096, 4096, 4096}, {64, 8192, 64}, {8192, 64, 8192}, {127, 257, 511}};
  for (int i = 0; i < 5; i++) {
    int p = gkcu_sgemm_pick(ctx, shapes[i][0], shapes[i][1], shapes[i][2]);
    ASSERT(p == GKCU_SGEMM_CUBLAS || p == GKCU_SGEMM_TF32X3);
  }
  /* the measured rule (gkcu_sgemm_pick): tf32x3 where it was faster */
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 4096, 4096, 4096), GKCU_SGEMM_TF32X3);
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 256, 256, 256), GKCU_SGEMM_TF32X3);
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 8192, 64, 8192), GKCU_SGEMM_TF32X3);
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 512, 512, 512), GKCU_SGEMM_TF32X3);
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 64, 8192, 64), GKCU_SGEMM_TF32X3);
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 127, 257, 511), GKCU_SGEMM_TF32X3);
  /* where wgmma runs (cc 9.0), its tf32x3 also takes the large unaligned shape */
  ASSERT_EQ(gkcu_sgemm_pick(ctx, 4095, 4097, 4099),
            gkcu_wg_supported(ctx) ? GKCU_SGEMM_TF32X3 : GKCU_SGEMM_CUBLAS);
  /* the choice table never gives a skinny shape tiles more than twice as
   * wide as it is (8192x64x8192 on 128x128 tiles ran at 0.66x cuBLAS) */
  static const int skinny[][3] = {{8192, 64, 8192}, {64, 8192, 64}, {8192, 64, 1024}, {64, 8192, 8192},
                                  {4096, 32, 4096}, {32, 4096, 4096}, {100000, 64, 64}};
  for (int i = 0; i < 7; i++) {
    int cfg = -1, sp = 0, bm = 0, bn = 0;
    gkcu_tc_choice(132, skinny[i][0], skinny[i][1], skinny[i][2], &cfg, &sp);
    ASSERT(cfg >= 0 && cfg < GKCU_TC_CFGS && sp >= 1 && sp <= 64);
    ASSERT_EQ(sscanf(gkcu_tc_cfg_name(cfg), "%dx%d", &bm, &bn), 2);
    if (skinny[i][0] <= 64) ASSERT(bm <= 64);
    if (skinny[i][1] <= 64) ASSERT(bn <= 64);
  }
  cudaFree(d);
}

int main(void) {
  gpu_require_device();
  sgemm_test t = {.name = "test_gpu_sgemm_tc", .rng = {gpu_seed("test_gpu_sgemm_tc")}, .nvariants = NVARIANTS,
                  .variant_name = variant_name, .run = run, .tolerances = tolerances, .name_width = 34};
  int rc = gkcu_ctx_create(&t.ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(t.ctx);

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  if (!short_run) {
    /* the kernels round to TF32 with integer instructions: the same as
     * cvt.rna.tf32.f32 on every finite float (2^32 patterns, on the GPU) */
    unsigned long long bad = 0;
    uint32_t example = 0;
    rc = gkcu_lab_tf32_round_check(t.ctx, &bad, &example);
    if (rc != 0) TEST_FAIL("gkcu_lab_tf32_round_check: rc %d (%s)", rc, gkcu_ctx_errmsg(t.ctx));
    t.runs++;
    if (bad != 0) {
      t.failures++;
      printf("FAIL tf32 rounding: %llu finite patterns differ from cvt.rna.tf32.f32, e.g. 0x%08x\n", bad, example);
    }
  }
  static const int sizes[][3] = {{1, 1, 1},     {2, 3, 1},      {13, 17, 19},   {31, 33, 35},    {127, 129, 131},
                                 {64, 64, 64},  {128, 128, 32}, {257, 255, 67}, {97, 389, 211},  {300, 5, 1000},
                                 {5, 300, 997}, {129, 64, 512}, {200, 136, 256}, {256, 264, 96}, {127, 257, 511},
                                 {64, 1031, 64},  {61, 700, 67},  {509, 131, 260},
                                 /* more tiles than a persistent grid has blocks (tiles 64x16: 396, 257) */
                                 {130, 2100, 37}, {64, 4100, 64}};
  sgemm_test_shapes(&t, sizes, short_run ? 7 : (int)(sizeof sizes / sizeof sizes[0]));
  if (!short_run) {
    /* beta = 0 (C NaN) with every transpose, aligned and not */
    sgemm_test_beta0(&t, (const int[3]){133, 71, 259}, (const int[3]){132, 72, 260});
    accuracy_case(&t, "uniform", 192, 160, 2048);
    accuracy_case(&t, "positive", 192, 160, 2048);
    accuracy_case(&t, "cancellation", 192, 160, 2048);
  }
  gkcu_ctx_destroy(t.ctx);
  return sgemm_test_end(&t);
}
