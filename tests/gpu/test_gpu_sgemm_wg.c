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
 * the public tf32x3 must still run (the mma.sync kernels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_sgemm.h"
#include "gkcu_sgemm_wg.h"
#include "gpu_test.h"
#include "gpu_util.h"
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

  /* v = 0: the public tf32x3; then each configuration */
  for (int v = 0; v <= GKCU_WG_CFGS; v++) {
    char name[64];
    if (v == 0) snprintf(name, sizeof name, "tf32x3");
    else snprintf(name, sizeof name, "wg/%s", gkcu_wg_cfg_name(v - 1));
    if (beta != 0.0f) CUDA_OK(cudaMemcpy(dc, c0, nc * sizeof(float), cudaMemcpyHostToDevice));
    else CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float))); /* NaN: must not leak */
    int rc = v == 0 ? gkcu_sgemm(ctx, GKCU_SGEMM_TF32X3, m, n, k, alpha, da, ta, db, tb, beta, dc)
                    : gkcu_wg_sgemm(ctx, v - 1, m, n, k, alpha, da, ta, db, tb, beta, dc);
    runs++;
    if (rc != 0) {
      printf("FAIL %s m=%d n=%d k=%d: rc %d (%s)\n", name, m, n, k, rc, gkcu_ctx_errmsg(ctx));
      failures++;
      continue;
    }
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    gpu_sgemm_err e = gpu_sgemm_errors(out, ref, mag, nc, beta, c0);
    double tol_elem = 1e-5 * (1.0 + sqrt((double)k)), tol_frob = 5e-6;
    if (!(e.worst <= tol_elem) || !(e.frob <= tol_frob)) {
      failures++;
      printf("FAIL %-24s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g mis=%d: max scaled err %.3g at (%zu,%zu) "
             "got %.9g want %.9g; frob %.3g\n",
             name, m, n, k, ta, tb, alpha, beta, misalign, e.worst, e.worst_at / n, e.worst_at % n,
             out[e.worst_at], ref[e.worst_at], e.frob);
      if (failures <= 12) gpu_sgemm_show_bad(out, ref, mag, m, n, tol_elem);
    }
  }
  cudaFree(da0), cudaFree(db0), cudaFree(dc0);
  free(a), free(b), free(c0), free(out), free(ref), free(mag);
}

/* Each configuration beside cuBLAS FP32 and TF32 on the same inputs. */
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
  gpu_sgemm_err e[2 + GKCU_WG_CFGS];
  for (int i = 0; i < 2 + GKCU_WG_CFGS; i++) {
    CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float)));
    int rc = i < 2 ? gkcu_sgemm(ctx, i == 0 ? GKCU_SGEMM_CUBLAS : GKCU_SGEMM_CUBLAS_TF32, m, n, k, 1.0f, da, 0, db,
                                0, 0.0f, dc)
                   : gkcu_wg_sgemm(ctx, i - 2, m, n, k, 1.0f, da, 0, db, 0, 0.0f, dc);
    if (rc != 0) TEST_FAIL("accuracy run %d: rc %d (%s)", i, rc, gkcu_ctx_errmsg(ctx));
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    e[i] = gpu_sgemm_errors(out, ref, mag, nc, 0.0f, NULL);
  }
  printf("accuracy %-12s %dx%dx%d max scaled: cublas %.3g, cublas_tf32 %.3g, wg", what, m, n, k, e[0].worst,
         e[1].worst);
  for (int i = 2; i < 2 + GKCU_WG_CFGS; i++) printf(" %.3g", e[i].worst);
  printf("\n");
  for (int i = 2; i < 2 + GKCU_WG_CFGS; i++) {
    runs++;
    if (!(e[i].worst <= 2.0 * e[0].worst + 1e-12) || !(e[1].worst > 10.0 * e[i].worst)) {
      failures++;
      printf("FAIL accuracy %s wg/%s: %.3g vs cuBLAS FP32 %.3g (bound 2x) and TF32 %.3g (must be > 10x)\n", what,
             gkcu_wg_cfg_name(i - 2), e[i].worst, e[0].worst, e[1].worst);
    }
  }
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(out), free(ref), free(mag);
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
  gpu_rng g = {gpu_seed("test_gpu_sgemm_wg")};
  gkcu_ctx *ctx;
  int rc = gkcu_ctx_create(&ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks(ctx);
  if (!gkcu_wg_supported(ctx)) {
    /* the public tf32x3 must not depend on it */
    one_case(ctx, &g, 37, 41, 43, 0, 0, 1.0f, 0.0f, 0);
    printf("test_gpu_sgemm_wg: the device is not compute capability 9.0: skipped\n");
    gkcu_ctx_destroy(ctx);
    return 77;
  }

  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  static const int sizes[][3] = {{128, 128, 32},  {1, 1, 1},       {13, 17, 19},   {64, 64, 64},   {127, 129, 131},
                                 {257, 255, 67},  {97, 389, 211},  {300, 5, 1000}, {5, 300, 997},  {129, 64, 512},
                                 {200, 136, 256}, {256, 264, 96},  {127, 257, 511}, {521, 1031, 263}, {64, 520, 2053},
                                 /* the public tf32x3's own choices: 128x128 tiles, A split in registers */
                                 {1537, 1531, 515}, {4300, 40, 2052}};
  static const float ab[][2] = {{1.0f, 0.0f}, {-1.5f, 0.0f}, {0.75f, -1.25f}, {1.0f, 1.0f}};
  int nsizes = short_run ? 6 : (int)(sizeof sizes / sizeof sizes[0]);
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
    /* long k: many group sums in a row */
    accuracy_case(ctx, &g, "uniform", 256, 256, 8192);
    accuracy_case(ctx, &g, "positive", 256, 256, 8192);
  }
  gkcu_ctx_destroy(ctx);
  printf("test_gpu_sgemm_wg: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
