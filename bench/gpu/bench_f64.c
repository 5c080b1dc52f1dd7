/* bench_f64: the float64 kernels of issue #27 beside their float32 twins
 * and the vendor's float64 ones, in the same run: gkcu_dot_f64 /
 * gkcu_nrm2_f64 / gkcu_axpby_f64 against gkcu_dot / gkcu_nrm2 / gkcu_axpby
 * and cublasDdot / cublasDnrm2 / cublasDaxpy, and gkcu_spmv_typed (every
 * pair of value and vector dtypes) against the float32 ladder's auto pick
 * and cusparseSpMV in float64.
 *
 * Method (bench_gpu's): each call is validated once against a host
 * reference (relative 1e-10 for the float64 results, 1e-5 for float32),
 * then timed by bench_time_events (2 warm-ups, --reps timed calls between
 * CUDA events, twice the L2 written before each), median and minimum in
 * ms, and GB/s counting each input byte read once and each output byte
 * written once (spmv: values, col_idx, row_ptr, x and y once each, a lower
 * bound on its traffic, since x is gathered).  "vs" is the baseline's median over ours (> 1: ours faster); the
 * baseline is cuBLAS / cuSPARSE float64, and for the float32 twins the
 * float64 kernel (how much float64 costs).
 *
 *   bench_f64 [--reps N] [--sizes 1048576,16777216,...] [--stencil N] [--no-spmv]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "bench_util.h"
#include "gkcu.h"
#include "gkcu_blas1.h"
#include "gkcu_spmv.h"
#include "gpu_util.h"

static gkcu_ctx *ctx;
static cudaStream_t st;
static cublasHandle_t blas;
static cusparseHandle_t sparse;
static void *flush_buf;
static size_t flush_bytes;
static int reps = 30;
static int bad; /* validation failures */

static bench_timing time_it(int (*f)(void *), void *arg) {
  bench_timing t = bench_time_events(st, flush_buf, flush_bytes, reps, f, arg);
  if (t.failed) fprintf(stderr, "%s failed: %s\n", t.failed == 1 ? "warm-up" : "run", gkcu_ctx_errmsg(ctx));
  return t;
}

static void row(const char *op, const char *cas, const char *who, bench_timing t, double bytes,
                double base_ms) {
  if (!t.ok) {
    printf("%-6s %-28s %-22s failed\n", op, cas, who);
    return;
  }
  printf("%-6s %-28s %-22s %9.4f %9.4f %8.1f GB/s", op, cas, who, t.median_ms, t.min_ms,
         bytes / (t.median_ms * 1e-3) / 1e9);
  if (base_ms > 0) printf("  vs %.3f", base_ms / t.median_ms);
  printf("\n");
}

static void verdict(const char *what, double got, double want, double tol) {
  if (!(fabs(got - want) <= tol)) {
    bad++;
    printf("INVALID %s: got %.17g want %.17g (tol %.3g)\n", what, got, want, tol);
  }
}

/* Neumaier's compensated sum, one term at a time. */
typedef struct {
  double s, c, abs;
} csum;
static void cadd(csum *k, double p) {
  double t = k->s + p;
  k->c += fabs(k->s) >= fabs(p) ? (k->s - t) + p : (p - t) + k->s;
  k->s = t;
  k->abs += fabs(p);
}

/* --- blas1 --------------------------------------------------------------------- */

typedef struct {
  long long n;
  const void *x, *y;
  void *out; /* axpby's y */
  double *dres;
  float *fres;
  int which; /* what f runs: see run_blas1 */
} b1;

enum { DOT32, DOT64, DDOT, NRM32, NRM64, DNRM, AXPBY32, AXPBY64, DAXPY };

static int run_blas1(void *arg) {
  b1 *a = arg;
  switch (a->which) {
    case DOT32: return gkcu_dot_async(ctx, a->n, a->x, a->y, a->dres);
    case DOT64: return gkcu_dot_f64_async(ctx, a->n, a->x, a->y, a->dres);
    case DDOT: return cublasDdot_64(blas, a->n, a->x, 1, a->y, 1, a->dres) != CUBLAS_STATUS_SUCCESS;
    case NRM32: return gkcu_nrm2_async(ctx, a->n, a->x, a->dres);
    case NRM64: return gkcu_nrm2_f64_async(ctx, a->n, a->x, a->dres);
    case DNRM: return cublasDnrm2_64(blas, a->n, a->x, 1, a->dres) != CUBLAS_STATUS_SUCCESS;
    case AXPBY32: return gkcu_axpby(ctx, a->n, 0.5f, a->x, -0.25f, a->out);
    case AXPBY64: return gkcu_axpby_f64(ctx, a->n, 0.5, a->x, -0.25, a->out);
    case DAXPY: {
      double al = 0.5;
      return cublasDaxpy_64(blas, a->n, &al, a->x, 1, a->out, 1) != CUBLAS_STATUS_SUCCESS;
    }
  }
  return 1;
}

static double result(b1 *a) {
  double v = NAN;
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(&v, a->dres, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

static void bench_blas1(long long n, gpu_rng *g) {
  double *hx = malloc((size_t)n * 8), *hy = malloc((size_t)n * 8);
  float *fx = malloc((size_t)n * 4), *fy = malloc((size_t)n * 4);
  if (!hx || !hy || !fx || !fy) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  csum d64 = {0}, n64 = {0}, d32 = {0}, n32 = {0};
  for (long long i = 0; i < n; i++) {
    hx[i] = 2 * gpu_rng_unit(g) - 1, hy[i] = 2 * gpu_rng_unit(g) - 1;
    fx[i] = (float)hx[i], fy[i] = (float)hy[i];
    cadd(&d64, hx[i] * hy[i]), cadd(&n64, hx[i] * hx[i]);
    cadd(&d32, (double)fx[i] * fy[i]), cadd(&n32, (double)fx[i] * fx[i]);
  }
  double dot64 = d64.s + d64.c, dot32 = d32.s + d32.c;
  double nrm64 = sqrt(n64.s + n64.c), nrm32 = sqrt(n32.s + n32.c);
  /* within 1e-10 of sum |terms| (ours are within ~1e-12; cuBLAS's too) */
  const double tdot64 = 1e-10 * d64.abs, tdot32 = 1e-10 * d32.abs;
  const double tn64 = 1e-10 * nrm64, tn32 = 1e-10 * nrm32;
  void *dx, *dy, *dfx, *dfy;
  b1 a = {n, NULL, NULL, NULL, NULL, NULL, 0};
  CUDA_OK(cudaMalloc(&dx, (size_t)n * 8));
  CUDA_OK(cudaMalloc(&dy, (size_t)n * 8));
  CUDA_OK(cudaMalloc(&dfx, (size_t)n * 4));
  CUDA_OK(cudaMalloc(&dfy, (size_t)n * 4));
  CUDA_OK(cudaMalloc((void **)&a.dres, 8));
  CUDA_OK(cudaMemcpy(dx, hx, (size_t)n * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy, hy, (size_t)n * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dfx, fx, (size_t)n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dfy, fy, (size_t)n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  char cas[64];
  snprintf(cas, sizeof cas, "n=%lld", n);

  cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE);
  bench_timing t64, t32, tv;
  double b64 = 16.0 * n, b32 = 8.0 * n;
  /* dot */
  a.x = dx, a.y = dy, a.which = DOT64;
  if (run_blas1(&a) == 0) verdict("gkcu_dot_f64", result(&a), dot64, tdot64);
  t64 = time_it(run_blas1, &a);
  a.which = DDOT;
  if (run_blas1(&a) == 0) verdict("cublasDdot", result(&a), dot64, tdot64);
  tv = time_it(run_blas1, &a);
  a.x = dfx, a.y = dfy, a.which = DOT32;
  if (run_blas1(&a) == 0) verdict("gkcu_dot", result(&a), dot32, tdot32);
  t32 = time_it(run_blas1, &a);
  row("dot", cas, "cublasDdot", tv, b64, 0);
  row("dot", cas, "gkcu_dot_f64", t64, b64, tv.median_ms);
  row("dot", cas, "gkcu_dot (f32)", t32, b32, t64.median_ms);
  /* nrm2 */
  a.x = dx, a.which = NRM64;
  if (run_blas1(&a) == 0) verdict("gkcu_nrm2_f64", result(&a), nrm64, tn64);
  t64 = time_it(run_blas1, &a);
  a.which = DNRM;
  if (run_blas1(&a) == 0) verdict("cublasDnrm2", result(&a), nrm64, tn64);
  tv = time_it(run_blas1, &a);
  a.x = dfx, a.which = NRM32;
  if (run_blas1(&a) == 0) verdict("gkcu_nrm2", result(&a), nrm32, tn32);
  t32 = time_it(run_blas1, &a);
  row("nrm2", cas, "cublasDnrm2", tv, b64 / 2, 0);
  row("nrm2", cas, "gkcu_nrm2_f64", t64, b64 / 2, tv.median_ms);
  row("nrm2", cas, "gkcu_nrm2 (f32)", t32, b32 / 2, t64.median_ms);
  cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST);
  /* axpby (y rewritten each call: its values drift, the traffic does not);
   * validated on one call from the original y */
  a.x = dx, a.out = dy, a.which = AXPBY64;
  if (run_blas1(&a) == 0) {
    double y0;
    CUDA_OK(cudaStreamSynchronize(st));
    CUDA_OK(cudaMemcpy(&y0, (double *)dy + n / 2, 8, cudaMemcpyDeviceToHost));
    double w = 0.5 * hx[n / 2] - 0.25 * hy[n / 2];
    verdict("gkcu_axpby_f64", y0, w, 1e-15 * (fabs(hx[n / 2]) + fabs(hy[n / 2])));
  }
  t64 = time_it(run_blas1, &a);
  a.which = DAXPY;
  tv = time_it(run_blas1, &a);
  a.x = dfx, a.out = dfy, a.which = AXPBY32;
  t32 = time_it(run_blas1, &a);
  row("axpby", cas, "cublasDaxpy (beta 1)", tv, 1.5 * b64, 0);
  row("axpby", cas, "gkcu_axpby_f64", t64, 1.5 * b64, tv.median_ms);
  row("axpby", cas, "gkcu_axpby (f32)", t32, 1.5 * b32, t64.median_ms);
  cudaFree(dx), cudaFree(dy), cudaFree(dfx), cudaFree(dfy), cudaFree(a.dres);
  free(hx), free(hy), free(fx), free(fy);
}

/* --- spmv ---------------------------------------------------------------------- */

typedef struct {
  const gpu_csr *m;
  const int32_t *rp, *ci;
  const void *v;
  int vf, xf, algo;
  int32_t max_row;
  const void *x;
  void *y;
  /* cuSPARSE */
  cusparseSpMatDescr_t A;
  cusparseDnVecDescr_t X, Y;
  void *buf;
} sp;

static int run_typed(void *arg) {
  sp *s = arg;
  return gkcu_spmv_typed(ctx, s->algo, s->m->rows, s->m->cols, s->m->nnz, s->rp, s->ci, s->v, s->vf, 1.0, s->x,
                         s->xf, 0.0, s->y, s->max_row);
}

static int run_f32(void *arg) {
  sp *s = arg;
  return gkcu_spmv(ctx, s->algo, s->m->rows, s->m->cols, s->m->nnz, s->rp, s->ci, s->v, 1.0f, s->x, 0.0f, s->y);
}

static int run_cusparse(void *arg) {
  sp *s = arg;
  double one = 1.0, zero = 0.0;
  return cusparseSpMV(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, s->A, s->X, &zero, s->Y, CUDA_R_64F,
                      CUSPARSE_SPMV_ALG_DEFAULT, s->buf) != CUSPARSE_STATUS_SUCCESS;
}

/* max over rows of |y - ref| / (sum |a x|), y of dtype xf */
static double spmv_err(const gpu_csr *m, const double *v64, int vf, const double *x64, const float *x32, int xf,
                       const void *dy) {
  size_t es = xf ? 8 : 4;
  void *h = malloc((size_t)m->rows * es);
  CUDA_OK(cudaStreamSynchronize(st));
  CUDA_OK(cudaMemcpy(h, dy, (size_t)m->rows * es, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int r = 0; r < m->rows; r++) {
    double s = 0, mag = 0;
    for (int j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
      double a = vf ? v64[j] : (double)m->values[j];
      double xv = xf ? x64[m->col_idx[j]] : (double)x32[m->col_idx[j]];
      s += a * xv, mag += fabs(a * xv);
    }
    double got = xf ? ((double *)h)[r] : (double)((float *)h)[r];
    if (mag > 0 && fabs(got - s) / mag > worst) worst = fabs(got - s) / mag;
    if (!(got == got)) worst = INFINITY;
  }
  free(h);
  return worst;
}

static void bench_spmv(const gpu_csr *m, const char *name, gpu_rng *g) {
  double *v64 = malloc(((size_t)m->nnz + 1) * 8), *x64 = malloc((size_t)m->cols * 8);
  float *x32 = malloc((size_t)m->cols * 4);
  for (long long j = 0; j < m->nnz; j++) v64[j] = 2 * gpu_rng_unit(g) - 1;
  for (int i = 0; i < m->cols; i++) x64[i] = 2 * gpu_rng_unit(g) - 1, x32[i] = (float)x64[i];
  void *rp, *ci, *dv64, *dv32, *dx64, *dx32, *dy;
  CUDA_OK(cudaMalloc(&rp, ((size_t)m->rows + 1) * 4));
  CUDA_OK(cudaMalloc(&ci, ((size_t)m->nnz + 1) * 4));
  CUDA_OK(cudaMalloc(&dv64, ((size_t)m->nnz + 1) * 8));
  CUDA_OK(cudaMalloc(&dv32, ((size_t)m->nnz + 1) * 4));
  CUDA_OK(cudaMalloc(&dx64, (size_t)m->cols * 8));
  CUDA_OK(cudaMalloc(&dx32, (size_t)m->cols * 4));
  CUDA_OK(cudaMalloc(&dy, (size_t)m->rows * 8));
  CUDA_OK(cudaMemcpy(rp, m->row_ptr, ((size_t)m->rows + 1) * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ci, m->col_idx, (size_t)m->nnz * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv64, v64, (size_t)m->nnz * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv32, m->values, (size_t)m->nnz * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dx64, x64, (size_t)m->cols * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dx32, x32, (size_t)m->cols * 4, cudaMemcpyHostToDevice));
  char cas[80];
  snprintf(cas, sizeof cas, "%s (%lld nnz)", name, (long long)m->nnz);
  int32_t mr = 0;
  for (int r = 0; r < m->rows; r++)
    if (m->row_ptr[r + 1] - m->row_ptr[r] > mr) mr = m->row_ptr[r + 1] - m->row_ptr[r];
  int hint = gkcu_spmv_pick_hint(ctx, m->rows, m->cols, m->nnz, mr);
  sp s = {m, rp, ci, NULL, 0, 0, hint, mr, NULL, dy, NULL, NULL, NULL, NULL};

  /* cuSPARSE float64 */
  size_t bytes = 0;
  double one = 1.0, zero = 0.0;
  int cus = cusparseCreateCsr(&s.A, m->rows, m->cols, m->nnz, rp, ci, dv64, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F) == CUSPARSE_STATUS_SUCCESS &&
            cusparseCreateDnVec(&s.X, m->cols, dx64, CUDA_R_64F) == CUSPARSE_STATUS_SUCCESS &&
            cusparseCreateDnVec(&s.Y, m->rows, dy, CUDA_R_64F) == CUSPARSE_STATUS_SUCCESS &&
            cusparseSpMV_bufferSize(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, s.A, s.X, &zero, s.Y,
                                    CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes) == CUSPARSE_STATUS_SUCCESS;
  if (cus && bytes) CUDA_OK(cudaMalloc(&s.buf, bytes));
  bench_timing tv = {0, 0, 0, 0};
  double base = 12.0 * m->nnz + 4.0 * m->rows;
  if (cus) {
    if (run_cusparse(&s) == 0) {
      double e = spmv_err(m, v64, 1, x64, x32, 1, dy);
      if (!(e <= 1e-12)) bad++, printf("INVALID cusparse f64 %s: %.3g\n", cas, e);
    }
    tv = time_it(run_cusparse, &s);
    row("spmv", cas, "cusparse f64/f64", tv, base + 16.0 * m->rows, 0);
  }
  for (int pair = 3; pair >= 0; pair--) {
    s.vf = pair & 1, s.xf = pair >> 1;
    s.v = s.vf ? dv64 : dv32, s.x = s.xf ? dx64 : dx32;
    s.algo = gkcu_spmv_typed_algo(hint);
    char who[48];
    snprintf(who, sizeof who, "typed v%s/x%s %s", s.vf ? "64" : "32", s.xf ? "64" : "32",
             gkcu_spmv_algo_name(s.algo));
    if (run_typed(&s) == 0) {
      double e = spmv_err(m, v64, s.vf, x64, x32, s.xf, dy);
      if (!(e <= (s.xf ? 1e-12 : 1e-6))) bad++, printf("INVALID %s %s: %.3g\n", who, cas, e);
    }
    bench_timing t = time_it(run_typed, &s);
    double bytes_moved = (4.0 + (s.vf ? 8 : 4)) * m->nnz + 4.0 * m->rows + (s.xf ? 8.0 : 4.0) * (m->rows + m->cols);
    row("spmv", cas, who, t, bytes_moved, tv.median_ms);
  }
  s.v = dv32, s.x = dx32, s.vf = s.xf = 0, s.algo = hint;
  char who[48];
  snprintf(who, sizeof who, "f32 ladder %s", gkcu_spmv_algo_name(hint));
  bench_timing t = time_it(run_f32, &s);
  row("spmv", cas, who, t, 8.0 * m->nnz + 4.0 * m->rows + 4.0 * (m->rows + m->cols), tv.median_ms);
  if (s.A) cusparseDestroySpMat(s.A);
  if (s.X) cusparseDestroyDnVec(s.X);
  if (s.Y) cusparseDestroyDnVec(s.Y);
  cudaFree(s.buf);
  cudaFree(rp), cudaFree(ci), cudaFree(dv64), cudaFree(dv32), cudaFree(dx64), cudaFree(dx32), cudaFree(dy);
  free(v64), free(x64), free(x32);
}

int main(int argc, char **argv) {
  long long sizes[8] = {1LL << 20, 1LL << 24, 1LL << 26};
  int nsizes = 3, stencil = 1000, spmv = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--stencil") && i + 1 < argc) stencil = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-spmv")) spmv = 0;
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      nsizes = 0;
      for (char *p = strtok(argv[++i], ","); p && nsizes < 8; p = strtok(NULL, ",")) sizes[nsizes++] = atoll(p);
    } else {
      fprintf(stderr, "usage: %s [--reps N] [--sizes n1,n2,...] [--stencil N] [--no-spmv]\n", argv[0]);
      return 2;
    }
  }
  gpu_require_device();
  gpu_rng g = {gpu_seed("bench_f64")};
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (gkcu_ctx_create(&ctx, st) != 0) {
    fprintf(stderr, "gkcu_ctx_create failed\n");
    return 2;
  }
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, st) != CUBLAS_STATUS_SUCCESS ||
      cusparseCreate(&sparse) != CUSPARSE_STATUS_SUCCESS || cusparseSetStream(sparse, st) != CUSPARSE_STATUS_SUCCESS) {
    fprintf(stderr, "cuBLAS / cuSPARSE handles failed\n");
    return 2;
  }
  flush_bytes = 2 * gkcu_ctx_l2_bytes(ctx);
  if (flush_bytes < ((size_t)64 << 20)) flush_bytes = (size_t)64 << 20;
  CUDA_OK(cudaMalloc(&flush_buf, flush_bytes));
  printf("%-6s %-28s %-22s %9s %9s %13s\n", "op", "case", "kernel", "median_ms", "min_ms", "rate");
  for (int i = 0; i < nsizes; i++) bench_blas1(sizes[i], &g);
  if (spmv) {
    gpu_csr m;
    if (gpu_csr_stencil2d(&m, stencil) == 0) bench_spmv(&m, "stencil2d", &g), gpu_csr_free(&m);
    if (gpu_csr_stencil3d(&m, stencil / 10 > 8 ? stencil / 10 : 8, gpu_rng_next(&g)) == 0)
      bench_spmv(&m, "stencil3d", &g), gpu_csr_free(&m);
    if (gpu_csr_powerlaw(&m, 8000000, 200000, gpu_rng_next(&g)) == 0)
      bench_spmv(&m, "power-law", &g), gpu_csr_free(&m);
  }
  cudaFree(flush_buf);
  cusparseDestroy(sparse);
  cublasDestroy(blas);
  gkcu_ctx_destroy(ctx);
  cudaStreamDestroy(st);
  if (bad) printf("%d validation failures\n", bad);
  return bad ? 1 : 0;
}
