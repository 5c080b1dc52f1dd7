/* sgemm_driver.c: see sgemm_driver.h. */
#include "sgemm_driver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "test.h"

void sgemm_test_case(sgemm_test *t, int m, int n, int k, int ta, int tb, float alpha, float beta,
                     int misalign) {
  gkcu_ctx *ctx = t->ctx;
  size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  float *a = gpu_test_random(&t->rng, na, -1.0f, 1.0f), *b = gpu_test_random(&t->rng, nb, -1.0f, 1.0f);
  float *c0 = gpu_test_random(&t->rng, nc, -1.0f, 1.0f), *out = malloc(nc * sizeof *out);
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

  for (int v = 0; v < t->nvariants; v++) {
    char name[64];
    t->variant_name(v, name, sizeof name);
    /* C holds the input when beta != 0; otherwise NaN, which must not leak. */
    if (beta != 0.0f) CUDA_OK(cudaMemcpy(dc, c0, nc * sizeof(float), cudaMemcpyHostToDevice));
    else CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float))); /* 0xffffffff is a NaN */
    int rc = t->run(ctx, v, m, n, k, alpha, da, ta, db, tb, beta, dc);
    t->runs++;
    if (rc != 0) {
      printf("FAIL %s m=%d n=%d k=%d: rc %d (%s)\n", name, m, n, k, rc, gkcu_ctx_errmsg(ctx));
      t->failures++;
      continue;
    }
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    gpu_sgemm_err e = gpu_sgemm_errors(out, ref, mag, nc, beta, c0);
    double frob = t->frob_vs_ref ? e.frob_ref : e.frob, tol_elem, tol_frob;
    t->tolerances(v, k, &tol_elem, &tol_frob);
    if (!(e.worst <= tol_elem) || !(frob <= tol_frob)) {
      t->failures++;
      printf("FAIL %-*s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g mis=%d: max scaled err %.3g at (%zu,%zu) "
             "got %.9g want %.9g; frob %.3g\n",
             t->name_width, name, m, n, k, ta, tb, alpha, beta, misalign, e.worst, e.worst_at / n,
             e.worst_at % n, out[e.worst_at], ref[e.worst_at], frob);
      if (t->show_bad && t->failures <= 12) gpu_sgemm_show_bad(out, ref, mag, m, n, tol_elem);
    }
  }
  cudaFree(da0), cudaFree(db0), cudaFree(dc0);
  free(a), free(b), free(c0), free(out), free(ref), free(mag);
}

void sgemm_test_shapes(sgemm_test *t, const int (*shapes)[3], int nshapes) {
  static const float ab[][2] = {{1.0f, 0.0f}, {-1.5f, 0.0f}, {0.75f, -1.25f}, {1.0f, 1.0f}};
  int ci = 0;
  for (int s = 0; s < nshapes; s++)
    for (int tr = 0; tr < 4; tr++) {
      const float *p = ab[ci % 4];
      sgemm_test_case(t, shapes[s][0], shapes[s][1], shapes[s][2], tr & 1, tr >> 1, p[0], p[1],
                      ci % 3 == 2);
      ci++;
    }
}

void sgemm_test_beta0(sgemm_test *t, const int aligned[3], const int misaligned[3]) {
  for (int tr = 0; tr < 4; tr++) {
    sgemm_test_case(t, aligned[0], aligned[1], aligned[2], tr & 1, tr >> 1, 2.0f, 0.0f, 0);
    sgemm_test_case(t, misaligned[0], misaligned[1], misaligned[2], tr & 1, tr >> 1, 2.0f, 0.0f, 1);
  }
}

void sgemm_test_accuracy(sgemm_test *t, const char *what, int m, int n, int k, int nruns,
                         sgemm_run_fn run, gpu_sgemm_err *e) {
  size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  float *a, *b;
  if (gpu_sgemm_accuracy_inputs(&t->rng, what, m, n, k, &a, &b)) TEST_FAIL("out of memory");
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
  for (int i = 0; i < nruns; i++) {
    CUDA_OK(cudaMemset(dc, 0xff, nc * sizeof(float)));
    int rc = run(t->ctx, i, m, n, k, 1.0f, da, 0, db, 0, 0.0f, dc);
    if (rc != 0) TEST_FAIL("accuracy %s run %d: rc %d (%s)", what, i, rc, gkcu_ctx_errmsg(t->ctx));
    CUDA_OK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    e[i] = gpu_sgemm_errors(out, ref, mag, nc, 0.0f, NULL);
  }
  cudaFree(da), cudaFree(db), cudaFree(dc);
  free(a), free(b), free(out), free(ref), free(mag);
}

int sgemm_test_end(sgemm_test *t) {
  printf("%s: %d runs, %d failures\n", t->name, t->runs, t->failures);
  return t->failures ? 1 : 0;
}
