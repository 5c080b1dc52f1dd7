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
 * tell the two apart).  Keeps going after a failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_sgemm.h"
#include "gkcu_sgemm_tc.h"
#include "gkcu_sgemm_wg.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

static int failures, runs;

static void one_case(gkcu_ctx *ctx, gpu_rng *g, int m, int n, int k, int ta, int tb, float alpha, float beta,
                     int misalign) {
  size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  float *a = gpu_test_random(g, na, -1.0f, 1.0f), *b = gpu_test_random(g, nb, -1.0f, 1.0f);
  float *c0 = gpu_test_random(g, nc, -1.0f, 1.0f), *out = malloc(nc * sizeof *out);
  double *ref = malloc(nc * sizeof *ref), *mag = malloc(nc * sizeof *mag);
  if (!out || !ref || !mag) TEST_FAIL("out of memory");
  gpu_sgemm_reference(m, n, k, ta, tb, alpha, beta, a, b, c0, ref, mag);

  float *da0, *db0, *dc0;
  CUDA_OK(cudaMalloc((void **)&da0, (na + 4) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&db0, (nb + 4) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dc0, (nc + 4) * sizeof(float)));
  float *da = da0 + misalign, *db = db0 + misalign, *dc = dc0 + misalign;
  CUDA_OK(cudaMemcpy(da, a, na * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b, nb * sizeof(float), cudaMemcpyHostToDevice));

  /* v < 2: the public algos (tf32x3, auto); then (cfg, splits) for each
   * configuration: unsplit, 3 slices (a cluster), 2 slices forced through
   * scratch, 32 asked (slices of 32 k: past 8 of them, the scratch path
   * with a second kernel) */
  enum { NSPLIT = 4 };
  static const int split_list[NSPLIT] = {1, 3, -2, 32};
  int nv = 2 + GKCU_TC_CFGS * NSPLIT;
  for (int v = 0; v < nv; v++) {
    int cfg = (v - 2) / NSPLIT, splits = split_list[(v - 2) % NSPLIT];
    char name[64];
    if (v == 0) snprintf(name, sizeof name, "tf32x3");
    else if (v == 1) snprintf(name, sizeof name, "auto");
    else snprintf(name, sizeof name, "tf32x3/%s/k%d", gkcu_tc_cfg_name(cfg), splits);
    if (beta != 0.0f) CUDA_OK(cudaMemcpy(dc, c0, nc * sizeof(float), cudaMemcpyHostToDevice));
    else CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float))); /* NaN: must not leak */
    int rc = v == 0   ? gkcu_sgemm(ctx, GKCU_SGEMM_TF32X3, m, n, k, alpha, da, ta, db, tb, beta, dc)
             : v == 1 ? gkcu_sgemm(ctx, GKCU_SGEMM_AUTO, m, n, k, alpha, da, ta, db, tb, beta, dc)
                      : gkcu_lab_sgemm_tf32x3(ctx, cfg, splits, m, n, k, alpha, da, ta, db, tb, beta, dc);
    runs++;
    if (rc != 0) {
      printf("FAIL %s m=%d n=%d k=%d: rc %d (%s)\n", name, m, n, k, rc, gkcu_ctx_errmsg(ctx));
      failures++;
      continue;
    }
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    gpu_sgemm_err e = gpu_sgemm_errors(out, ref, mag, nc, beta, c0);
    /* float32-level bounds: elementwise as the FP32 algos in test_gpu_sgemm,
     * normwise 5e-6 (plain TF32 is ~3e-4 here) */
    double tol_elem = 1e-5 * (1.0 + sqrt((double)k)), tol_frob = 5e-6;
    if (!(e.worst <= tol_elem) || !(e.frob <= tol_frob)) {
      failures++;
      printf("FAIL %-34s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g mis=%d: max scaled err %.3g at (%zu,%zu) "
             "got %.9g want %.9g; frob %.3g\n",
             name, m, n, k, ta, tb, alpha, beta, misalign, e.worst, e.worst_at / n, e.worst_at % n,
             out[e.worst_at], ref[e.worst_at], e.frob);
    }
  }
  cudaFree(da0), cudaFree(db0), cudaFree(dc0);
  free(a), free(b), free(c0), free(out), free(ref), free(mag);
}

/* tf32x3 beside cuBLAS FP32 and TF32 on the same inputs. */
static void accuracy_case(gkcu_ctx *ctx, gpu_rng *g, const char *what, int m, int n, int k) {
  size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  float *a, *b;
  if (gpu_sgemm_accuracy_inputs(g, what, m, n, k, &a, &b)) TEST_FAIL("out of memory");
  float *out = malloc(nc * sizeof *out);
  double *ref = malloc(nc * sizeof *ref), *mag = malloc(nc * sizeof *mag);
  if (!out || !ref || !mag) TEST_FAIL("out of memory");
  gpu_sgemm_reference(m, n, k, 0, 0, 1.0f, 0.0f, a, b, NULL, ref, mag);
  float *da, *db, *dc;
  CUDA_OK(cudaMalloc((void **)&da, na * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&db, nb * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dc, nc * sizeof(float)));
  CUDA_OK(cudaMemcpy(da, a, na * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b, nb * sizeof(float), cudaMemcpyHostToDevice));
  static const int algos[] = {GKCU_SGEMM_CUBLAS, GKCU_SGEMM_CUBLAS_TF32, GKCU_SGEMM_TF32X3};
  gpu_sgemm_err e[3];
  for (int i = 0; i < 3; i++) {
    CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float)));
    int rc = gkcu_sgemm(ctx, algos[i], m, n, k, 1.0f, da, 0, db, 0, 0.0f, dc);
    if (rc != 0) TEST_FAIL("%s: rc %d (%s)", gkcu_sgemm_algo_name(algos[i]), rc, gkcu_ctx_errmsg(ctx));
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    e[i] = gpu_sgemm_errors(out, ref, mag, nc, 0.0f, NULL);
  }
  runs++;
  printf("accuracy %-12s %dx%dx%d max scaled / frob: cublas %.3g / %.3g, cublas_tf32 %.3g / %.3g, tf32x3 %.3g / %.3g\n",
         what, m, n, k, e[0].worst, e[0].frob, e[1].worst, e[1].frob, e[2].worst, e[2].frob);
  if (!(e[2].worst <= 4.0 * e[0].worst + 1e-12) || !(e[1].worst > 10.0 * e[2].worst)) {
    failures++;
    printf("FAIL accuracy %s: tf32x3 %.3g vs cuBLAS FP32 %.3g (bound 4x) and TF32 %.3g (must be > 10x tf32x3)\n",
           what, e[2].worst, e[0].worst, e[1].worst);
  }
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(out), free(ref), free(mag);
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
  gpu_rng g = {gpu_seed("test_gpu_sgemm_tc")};
  gkcu_ctx *ctx;
  int rc = gkcu_ctx_create(&ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(ctx);

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  if (!short_run) {
    /* the kernels round to TF32 with integer instructions: the same as
     * cvt.rna.tf32.f32 on every finite float (2^32 patterns, on the GPU) */
    unsigned long long bad = 0;
    uint32_t example = 0;
    rc = gkcu_lab_tf32_round_check(ctx, &bad, &example);
    if (rc != 0) TEST_FAIL("gkcu_lab_tf32_round_check: rc %d (%s)", rc, gkcu_ctx_errmsg(ctx));
    runs++;
    if (bad != 0) {
      failures++;
      printf("FAIL tf32 rounding: %llu finite patterns differ from cvt.rna.tf32.f32, e.g. 0x%08x\n", bad, example);
    }
  }
  static const int sizes[][3] = {{1, 1, 1},     {2, 3, 1},      {13, 17, 19},   {31, 33, 35},    {127, 129, 131},
                                 {64, 64, 64},  {128, 128, 32}, {257, 255, 67}, {97, 389, 211},  {300, 5, 1000},
                                 {5, 300, 997}, {129, 64, 512}, {200, 136, 256}, {256, 264, 96}, {127, 257, 511},
                                 {64, 1031, 64},  {61, 700, 67},  {509, 131, 260},
                                 /* more tiles than a persistent grid has blocks (tiles 64x16: 396, 257) */
                                 {130, 2100, 37}, {64, 4100, 64}};
  static const float ab[][2] = {{1.0f, 0.0f}, {-1.5f, 0.0f}, {0.75f, -1.25f}, {1.0f, 1.0f}};
  int nsizes = short_run ? 7 : (int)(sizeof sizes / sizeof sizes[0]);
  int ci = 0;
  for (int s = 0; s < nsizes; s++)
    for (int t = 0; t < 4; t++) {
      const float *p = ab[ci % 4];
      one_case(ctx, &g, sizes[s][0], sizes[s][1], sizes[s][2], t & 1, t >> 1, p[0], p[1], ci % 3 == 2);
      ci++;
    }
  if (!short_run) {
    /* beta = 0 (C NaN) with every transpose, aligned and not */
    for (int t = 0; t < 4; t++) {
      one_case(ctx, &g, 133, 71, 259, t & 1, t >> 1, 2.0f, 0.0f, 0);
      one_case(ctx, &g, 132, 72, 260, t & 1, t >> 1, 2.0f, 0.0f, 1);
    }
    accuracy_case(ctx, &g, "uniform", 192, 160, 2048);
    accuracy_case(ctx, &g, "positive", 192, 160, 2048);
    accuracy_case(ctx, &g, "cancellation", 192, 160, 2048);
  }
  gkcu_ctx_destroy(ctx);
  printf("test_gpu_sgemm_tc: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
