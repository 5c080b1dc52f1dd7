/* test_gpu_sgemm: every sgemm algo (and every regblock tile shape, with and
 * without split-K) against a double-precision CPU reference, on fresh random
 * inputs: odd, prime and tiny sizes, all four transposes, several alpha and
 * beta, beta = 0 with C poisoned with NaN, and unaligned pointers.  Every
 * element is checked, scaled by the sum of |terms| of its dot product.
 * Keeps going after a failure so one run reports them all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gkcu_lab.h"
#include "gkcu_sgemm.h"
#include "gpu_util.h"
#include "gpu_test.h"
#include "test.h"

static int failures, runs;

typedef struct {
  const char *name;
  int algo; /* public algo, or -1 for a lab regblock run */
  int tile, splits;
  int tf32;
} variant;

static void one_case(gkcu_ctx *ctx, gpu_rng *g, int m, int n, int k, int ta, int tb, float alpha, float beta,
                     int misalign) {
  size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  float *a = gpu_test_random(g, na, -1.0f, 1.0f), *b = gpu_test_random(g, nb, -1.0f, 1.0f);
  float *c0 = gpu_test_random(g, nc, -1.0f, 1.0f);
  float *out = malloc(nc * sizeof *out);
  double *ref = malloc(nc * sizeof *ref), *mag = malloc(nc * sizeof *mag);
  if (!out || !ref || !mag) TEST_FAIL("out of memory");

  gpu_sgemm_reference(m, n, k, ta, tb, alpha, beta, a, b, c0, ref, mag);

  /* misalign shifts every operand by one float: rows are no longer 16-byte
   * aligned, so the scalar load paths run. */
  float *da0, *db0, *dc0;
  CUDA_OK(cudaMalloc((void **)&da0, (na + 4) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&db0, (nb + 4) * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dc0, (nc + 4) * sizeof(float)));
  float *da = da0 + misalign, *db = db0 + misalign, *dc = dc0 + misalign;
  CUDA_OK(cudaMemcpy(da, a, na * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b, nb * sizeof(float), cudaMemcpyHostToDevice));

  variant vs[48];
  int nv = 0;
  for (int al = GKCU_SGEMM_AUTO; al < GKCU_SGEMM_NALGO; al++)
    vs[nv++] = (variant){gkcu_sgemm_algo_name(al), al, 0, 0, al == GKCU_SGEMM_CUBLAS_TF32};
  static char names[GKCU_LAB_TILES * 2][32];
  for (int t = 0; t < GKCU_LAB_TILES; t++)
    for (int s = 0; s < 2; s++) {
      int splits = s ? 3 : 1;
      snprintf(names[t * 2 + s], sizeof names[0], "regblock/%s/k%d", gkcu_lab_tile_name(t), splits);
      vs[nv++] = (variant){names[t * 2 + s], -1, t, splits, 0};
    }

  for (int v = 0; v < nv; v++) {
    /* C holds the input when beta != 0; otherwise NaN, which must not leak. */
    if (beta != 0.0f) {
      CUDA_OK(cudaMemcpy(dc, c0, nc * sizeof(float), cudaMemcpyHostToDevice));
    } else {
      CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float))); /* 0xffffffff is a NaN */
    }
    int rc = vs[v].algo >= 0
                 ? gkcu_sgemm(ctx, vs[v].algo, m, n, k, alpha, da, ta, db, tb, beta, dc)
                 : gkcu_lab_sgemm_regblock(ctx, vs[v].tile, vs[v].splits, m, n, k, alpha, da, ta, db, tb,
                                           beta, dc);
    runs++;
    if (rc != 0) {
      printf("FAIL %s m=%d n=%d k=%d: rc %d (%s)\n", vs[v].name, m, n, k, rc, gkcu_ctx_errmsg(ctx));
      failures++;
      continue;
    }
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0, num = 0.0, den = 0.0;
    size_t worst_at = 0, bad = 0;
    for (size_t i = 0; i < nc; i++) {
      double d = fabs((double)out[i] - ref[i]);
      double e = d / (mag[i] + 1e-30);
      if (!(e <= 1e300)) e = INFINITY; /* NaN */
      if (e > worst) { worst = e; worst_at = i; }
      num += d * d;
      den += ref[i] * ref[i];
    }
    double frob = sqrt(num / (den + 1e-300));
    if (!(frob <= 1e300)) frob = INFINITY;
    double tol_elem = vs[v].tf32 ? 4e-3 : 1e-5 * (1.0 + sqrt((double)k));
    double tol_frob = vs[v].tf32 ? 2e-3 : 2e-5;
    if (!(worst <= tol_elem) || !(frob <= tol_frob)) bad = 1;
    if (bad) {
      failures++;
      printf("FAIL %-22s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g mis=%d: max scaled err %.3g at (%zu,%zu) "
             "got %.9g want %.9g; frob %.3g\n",
             vs[v].name, m, n, k, ta, tb, alpha, beta, misalign, worst, worst_at / n, worst_at % n,
             out[worst_at], ref[worst_at], frob);
    }
  }
  cudaFree(da0);
  cudaFree(db0);
  cudaFree(dc0);
  free(a);
  free(b);
  free(c0);
  free(out);
  free(ref);
  free(mag);
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
  gpu_rng g = {gpu_seed("test_gpu_sgemm")};
  gkcu_ctx *ctx;
  int rc = gkcu_ctx_create(&ctx, 0);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);

  argument_checks(ctx);

  static const int sizes[][3] = {
      {1, 1, 1},     {1, 7, 3},      {7, 1, 5},     {2, 3, 1},      {13, 17, 19},   {31, 33, 35},
      {64, 64, 64},  {127, 129, 131}, {128, 128, 8}, {257, 255, 67}, {97, 389, 211}, {300, 5, 1000},
      {5, 300, 997}, {1000, 3, 1000}, {129, 64, 512}, {512, 512, 512}};
  static const float ab[][2] = {{1.0f, 0.0f}, {-1.5f, 0.0f}, {0.75f, -1.25f}, {1.0f, 1.0f}};
  int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
  /* GKC_GPU_TEST_SHORT: small shapes only (for compute-sanitizer) */
  if (getenv("GKC_GPU_TEST_SHORT")) nsizes = 9;
  int ci = 0;
  for (int s = 0; s < nsizes; s++)
    for (int t = 0; t < 4; t++) {
      int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
      int ta = t & 1, tb = t >> 1;
      const float *p = ab[ci % 4];
      int misalign = (ci % 3 == 2);
      one_case(ctx, &g, m, n, k, ta, tb, p[0], p[1], misalign);
      ci++;
    }
  /* beta = 0 with every transpose at one awkward size, aligned and not */
  for (int t = 0; t < 4 && !getenv("GKC_GPU_TEST_SHORT"); t++) {
    one_case(ctx, &g, 133, 71, 259, t & 1, t >> 1, 2.0f, 0.0f, 0);
    one_case(ctx, &g, 133, 72, 260, t & 1, t >> 1, 2.0f, 0.0f, 1);
  }

  gkcu_ctx_destroy(ctx);
  printf("test_gpu_sgemm: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
