/* bench_direct: in-process baselines for the daemon's figures.  Everything
 * here is what a program linked straight against the CUDA libraries gets,
 * with no daemon, socket or serialization in the way:
 *
 *   h2d     host-to-device copy bandwidth, pinned (cudaMallocHost) and
 *           pageable (malloc, pages touched first) sources, 256 MiB and
 *           1 GiB, plus pinned device-to-host 1 GiB; median of --h2d-reps
 *           (>= 10) copies, each bracketed by CUDA events.  GB = 1e9 bytes.
 *   spmv    cusparseSpMV (CSR, CUSPARSE_SPMV_ALG_DEFAULT, y = A x), the
 *           matrix already on the device, descriptors and the external
 *           buffer made once: median per-call time over --reps (100) calls,
 *           each between two events, (a) after a write of 2x the L2 size
 *           (cold L2), (b) back to back (warm); and the mean of --reps calls
 *           enqueued back to back between one pair of events.  Matrices:
 *           the 2-D 5-point Laplacian on an N x N grid (--n, default 2048:
 *           4.2M rows, 21M nonzeros) and --matrix FILE (Matrix Market,
 *           read with gkcio's mtx_read_csr).
 *   blas1   gkcu_dot_async / gkcu_axpby against their cuBLAS twins
 *           (cublasSdot, cublasSscal+cublasSaxpy) at the CG vector length,
 *           cold L2, median of --reps; and dot with the scalar brought back
 *           to the host (wall clock), which is what each CG iteration pays
 *           twice.
 *   cg      unpreconditioned conjugate gradient on the Laplacian (SPD),
 *           b = ones, x0 = 0, the textbook iteration: one spmv, two dots,
 *           three axpy-type updates (x += a p, r -= a q, p = r + b p), the
 *           two scalars (p.q and r.r) copied to the host every iteration.
 *             "vendor": cusparseSpMV + cublasSdot (host pointer mode:
 *               each returns the float to the host) + cublasSaxpy/Sscal;
 *             "gkcu": the same cusparseSpMV, gkcu_dot (double, through the
 *               context's pinned slot) and gkcu_axpby (p update in one call).
 *           Run for --iters iterations (200), then to ||r_k||/||b|| <= --tol
 *           (1e-5; at most --max-iters, 20000, or 20 s).  Wall time of the
 *           whole solve (init + iterations + final sync) gives iterations/s;
 *           the relative residual ||b - A x|| / ||b|| is computed afresh at
 *           the end with one more SpMV (b - A x in float by cuSPARSE, then a
 *           double-precision norm on the host), beside the recurrence's
 *           ||r_k|| / ||b||, and once more entirely in double on the host
 *           from the float x (rel_res_f64).  Expect the true residual to
 *           stall far above --tol: with unit grid spacing and b = ones the
 *           solution peaks near 0.074 N^2 (3.1e5 at N = 2048), where a
 *           float's spacing is 1/32, and x is updated once per iteration
 *           for thousands of iterations; most likely the rounding of those
 *           updates, multiplied by A, is O(1) against b = 1.  The f32 and f64
 *           residuals agree (H200: 0.785 and 0.785 after 4084 iterations),
 *           so it is the float iterate, not the float SpMV, that limits it.
 *
 *   bench_direct [--n N] [--iters K] [--tol T] [--max-iters M] [--matrix FILE]
 *                [--reps R] [--h2d-reps R] [--skip-h2d] [--json FILE] [--csv FILE]
 *
 * Sections that would start after 50 s are skipped (the whole run stays
 * under a minute on an H100/H200 with the defaults). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "bench_csv.h"
#include "bench_util.h"
#include "gkcu.h"
#include "gkcu_blas1.h"
#include "gpu_util.h"
#include "mtx.h"

/* --- plumbing -------------------------------------------------------------------- */

#define CUBLAS_OK(call)                                                                            \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(s_));    \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)
#define CUSPARSE_OK(call)                                                                          \
  do {                                                                                             \
    cusparseStatus_t s_ = (call);                                                                  \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorString(s_));   \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)
#define GKCU_OK(call)                                                                              \
  do {                                                                                             \
    int r_ = (call);                                                                               \
    if (r_ != 0) {                                                                                 \
      fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, r_, gkcu_ctx_errmsg(ctx));  \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

static cudaStream_t st;
static gkcu_ctx *ctx;
static cublasHandle_t blas;
static cusparseHandle_t sparse;
static cudaEvent_t ev0, ev1;
static void *flush_buf;
static size_t flush_bytes;
static double t_start;
static int reps = 100, h2d_reps = 10;
static FILE *json;
static int json_first = 1;
/* --csv: the JSON records as rows; each section fills its own columns of
 * CSV_COLS and leaves the others empty. */
static bench_csv csv;
static const char *const CSV_COLS[] = {
    "section", "source", "direction", "bytes", "matrix", "algo", "op", "impl", "rows", "cols", "nnz",
    "n", "grid", "unknowns", "stop", "tol", "converged", "reps", "median_gbps", "min_gbps", "max_gbps",
    "median_ms_cold_l2", "min_ms_cold_l2", "median_ms_warm", "mean_ms_back_to_back", "gbps_cold",
    "median_ms", "min_ms", "gbps", "iters", "seconds", "iters_per_s", "ms_per_iter",
    "rel_residual_recursive", "rel_residual_true", "rel_residual_true_f64", "max_abs_x"};
enum { CSV_NCOLS = sizeof CSV_COLS / sizeof CSV_COLS[0] };
static const double kDeadline = 50.0;

static int past_deadline(const char *what) {
  if (bench_now_s() - t_start < kDeadline) return 0;
  printf("skipped %s: past %.0f s\n", what, kDeadline);
  return 1;
}

static void flush_l2(void) { CUDA_OK(cudaMemsetAsync(flush_buf, 0x5a, flush_bytes, st)); }

static float event_ms(void) {
  float ms;
  CUDA_OK(cudaEventSynchronize(ev1));
  CUDA_OK(cudaEventElapsedTime(&ms, ev0, ev1));
  return ms;
}

/* A record of json_rec as a CSV row: rec is `"key": value` pairs joined by
 * ", ", strings without quotes or commas inside (names of ours).  A key
 * outside CSV_COLS is this program's mistake: it says so and exits. */
static void csv_rec(char *rec) {
  const char *val[CSV_NCOLS] = {0};
  char *p = rec;
  while (*p) {
    char *key = p + 1, *end = strchr(key, '"'); /* p at the key's opening quote */
    if (*p != '"' || !end || strncmp(end, "\": ", 3) != 0) goto bad;
    *end = '\0';
    char *v = end + 3, *next;
    if (*v == '"') {
      v++;
      char *q = strchr(v, '"');
      if (!q) goto bad;
      *q = '\0';
      next = q + 1;
    } else {
      next = v + strcspn(v, ",");
    }
    if (*next == ',') *next++ = '\0';
    while (*next == ' ') next++;
    int col = -1;
    for (int i = 0; i < CSV_NCOLS; i++)
      if (!strcmp(CSV_COLS[i], key)) col = i;
    if (col < 0) {
      fprintf(stderr, "bench_direct: record key '%s' has no CSV column\n", key);
      exit(2);
    }
    val[col] = v;
    p = next;
  }
  for (int i = 0; i < CSV_NCOLS; i++) bench_csv_str(&csv, val[i]);
  bench_csv_end(&csv);
  return;
bad:
  fprintf(stderr, "bench_direct: cannot read record back for the CSV: %s\n", p);
  exit(2);
}

/* One JSON record: a flat object of already-formatted "key": value pairs;
 * also a CSV row with --csv. */
static void json_rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_rec(const char *fmt, ...) {
  if (!json && !csv.f) return;
  char rec[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rec, sizeof rec, fmt, ap);
  va_end(ap);
  if (json) {
    fprintf(json, "%s\n  {%s}", json_first ? "" : ",", rec);
    json_first = 0;
  }
  if (csv.f) csv_rec(rec);
}

/* --- h2d -------------------------------------------------------------------------- */

/* Median GB/s of reps copies of bytes (dir: cudaMemcpyHostToDevice or
 * DeviceToHost), min and max in *lo, *hi. */
static double copy_gbps(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind dir, int n, double *lo,
                        double *hi) {
  double *v = malloc((size_t)n * sizeof *v);
  CUDA_OK(cudaMemcpyAsync(dst, src, bytes, dir, st)); /* warm-up */
  CUDA_OK(cudaStreamSynchronize(st));
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaEventRecord(ev0, st));
    CUDA_OK(cudaMemcpyAsync(dst, src, bytes, dir, st));
    CUDA_OK(cudaEventRecord(ev1, st));
    v[r] = bytes / (event_ms() * 1e-3) / 1e9;
  }
  double m = bench_median(v, n);
  *lo = v[0];
  *hi = v[n - 1];
  free(v);
  return m;
}

static void bench_h2d(void) {
  printf("\n== h2d: copy bandwidth, median of %d (GB/s = 1e9 B/s) ==\n", h2d_reps);
  printf("%-10s %-10s %-8s %10s %10s %10s\n", "source", "direction", "size", "median", "min", "max");
  const size_t big = (size_t)1 << 30, sizes[2] = {(size_t)256 << 20, big};
  void *dev = NULL, *pinned = NULL, *pageable = NULL;
  CUDA_OK(cudaMalloc(&dev, big));
  CUDA_OK(cudaMallocHost(&pinned, big));
  pageable = malloc(big);
  if (!pageable) {
    fprintf(stderr, "malloc 1 GiB failed\n");
    exit(2);
  }
  memset(pinned, 1, big);
  memset(pageable, 1, big); /* pages exist before the first copy */
  for (int kind = 0; kind < 2; kind++) {
    for (int s = 0; s < 2; s++) {
      double lo, hi;
      const char *src = kind ? "pageable" : "pinned";
      double gbps = copy_gbps(dev, kind ? pageable : pinned, sizes[s], cudaMemcpyHostToDevice, h2d_reps, &lo, &hi);
      printf("%-10s %-10s %5zu MiB %10.2f %10.2f %10.2f\n", src, "H2D", sizes[s] >> 20, gbps, lo, hi);
      json_rec("\"section\": \"h2d\", \"source\": \"%s\", \"direction\": \"H2D\", \"bytes\": %zu, "
               "\"median_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f, \"reps\": %d",
               src, sizes[s], gbps, lo, hi, h2d_reps);
    }
  }
  {
    double lo, hi;
    double gbps = copy_gbps(pinned, dev, big, cudaMemcpyDeviceToHost, h2d_reps, &lo, &hi);
    printf("%-10s %-10s %5zu MiB %10.2f %10.2f %10.2f\n", "pinned", "D2H", big >> 20, gbps, lo, hi);
    json_rec("\"section\": \"h2d\", \"source\": \"pinned\", \"direction\": \"D2H\", \"bytes\": %zu, "
             "\"median_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f, \"reps\": %d",
             big, gbps, lo, hi, h2d_reps);
  }
  free(pageable);
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(dev));
}

/* --- a CSR matrix on the device, with its cuSPARSE descriptors -------------------- */

typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  int32_t *rp, *ci;
  float *v;
  cusparseSpMatDescr_t A;
} dcsr;

static void dcsr_upload(dcsr *d, int32_t rows, int32_t cols, int64_t nnz, const int32_t *rp, const int32_t *ci,
                        const float *v) {
  d->rows = rows;
  d->cols = cols;
  d->nnz = nnz;
  CUDA_OK(cudaMalloc((void **)&d->rp, ((size_t)rows + 1) * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void **)&d->ci, (size_t)(nnz ? nnz : 1) * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void **)&d->v, (size_t)(nnz ? nnz : 1) * sizeof(float)));
  CUDA_OK(cudaMemcpy(d->rp, rp, ((size_t)rows + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
  if (nnz) {
    CUDA_OK(cudaMemcpy(d->ci, ci, (size_t)nnz * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->v, v, (size_t)nnz * sizeof(float), cudaMemcpyHostToDevice));
  }
  CUSPARSE_OK(cusparseCreateCsr(&d->A, rows, cols, nnz, d->rp, d->ci, d->v, CUSPARSE_INDEX_32I,
                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
}

static void dcsr_free(dcsr *d) {
  cusparseDestroySpMat(d->A);
  cudaFree(d->rp);
  cudaFree(d->ci);
  cudaFree(d->v);
  memset(d, 0, sizeof *d);
}

/* y = alpha A x + beta y with a buffer sized for it (grown as needed). */
typedef struct {
  cusparseDnVecDescr_t x, y;
  void *buf;
  size_t cap;
} spmv_plan;

static void plan_make(spmv_plan *p, const dcsr *a, float *x, float *y, float alpha, float beta) {
  CUSPARSE_OK(cusparseCreateDnVec(&p->x, a->cols, x, CUDA_R_32F));
  CUSPARSE_OK(cusparseCreateDnVec(&p->y, a->rows, y, CUDA_R_32F));
  size_t need = 0;
  CUSPARSE_OK(cusparseSpMV_bufferSize(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a->A, p->x, &beta, p->y,
                                      CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &need));
  p->buf = NULL;
  p->cap = need;
  if (need) CUDA_OK(cudaMalloc(&p->buf, need));
}

static void plan_run(spmv_plan *p, const dcsr *a, float alpha, float beta) {
  CUSPARSE_OK(cusparseSpMV(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a->A, p->x, &beta, p->y, CUDA_R_32F,
                           CUSPARSE_SPMV_ALG_DEFAULT, p->buf));
}

static void plan_free(spmv_plan *p) {
  cusparseDestroyDnVec(p->x);
  cusparseDestroyDnVec(p->y);
  cudaFree(p->buf);
}

/* --- spmv ------------------------------------------------------------------------- */

static void bench_spmv_matrix(const char *name, const dcsr *a) {
  float *x, *y;
  CUDA_OK(cudaMalloc((void **)&x, (size_t)a->cols * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&y, (size_t)a->rows * sizeof(float)));
  GKCU_OK(gkcu_fill_uniform(ctx, x, (size_t)a->cols, 0x5eed, -1.0f, 1.0f));
  spmv_plan p;
  plan_make(&p, a, x, y, 1.0f, 0.0f);
  for (int w = 0; w < 3; w++) plan_run(&p, a, 1.0f, 0.0f);
  CUDA_OK(cudaStreamSynchronize(st));

  double *cold = malloc((size_t)reps * sizeof *cold), *warm = malloc((size_t)reps * sizeof *warm);
  for (int r = 0; r < reps; r++) {
    flush_l2();
    CUDA_OK(cudaEventRecord(ev0, st));
    plan_run(&p, a, 1.0f, 0.0f);
    CUDA_OK(cudaEventRecord(ev1, st));
    cold[r] = event_ms();
  }
  for (int r = 0; r < reps; r++) {
    CUDA_OK(cudaEventRecord(ev0, st));
    plan_run(&p, a, 1.0f, 0.0f);
    CUDA_OK(cudaEventRecord(ev1, st));
    warm[r] = event_ms();
  }
  CUDA_OK(cudaEventRecord(ev0, st));
  for (int r = 0; r < reps; r++) plan_run(&p, a, 1.0f, 0.0f);
  CUDA_OK(cudaEventRecord(ev1, st));
  double b2b = event_ms() / reps;
  double mc = bench_median(cold, reps), mw = bench_median(warm, reps);
  /* napkin bytes: values + columns + row pointers + x once + y written */
  double bytes = (double)a->nnz * 8.0 + ((double)a->rows + 1) * 4.0 + (double)a->cols * 4.0 + (double)a->rows * 4.0;
  printf("%-26s %9d %10lld %10.4f %10.4f %10.4f %8.0f\n", name, a->rows, (long long)a->nnz, mc, mw, b2b,
         bytes / (mc * 1e-3) / 1e9);
  json_rec("\"section\": \"spmv\", \"matrix\": \"%s\", \"algo\": \"cusparse\", \"rows\": %d, \"cols\": %d, "
           "\"nnz\": %lld, \"median_ms_cold_l2\": %.6f, \"min_ms_cold_l2\": %.6f, \"median_ms_warm\": %.6f, "
           "\"mean_ms_back_to_back\": %.6f, \"gbps_cold\": %.2f, \"reps\": %d",
           name, a->rows, a->cols, (long long)a->nnz, mc, cold[0], mw, b2b, bytes / (mc * 1e-3) / 1e9, reps);
  free(cold);
  free(warm);
  plan_free(&p);
  cudaFree(x);
  cudaFree(y);
}

/* --- blas1 -------------------------------------------------------------------------- */

typedef struct {
  int which; /* 0 gkcu_dot_async, 1 cublasSdot (device result), 2 gkcu_axpby, 3 cuBLAS scal+axpy,
                4 gkcu_axpby beta=1, 5 cublasSaxpy */
  int64_t n;
  float *x, *y;
  double *dres;
  float *fres;
} b1_arg;

static void b1_run(const b1_arg *a) {
  switch (a->which) {
    case 0: GKCU_OK(gkcu_dot_async(ctx, a->n, a->x, a->y, a->dres)); break;
    case 1: GKCU_OK(gkcu_dot_cublas_async(ctx, a->n, a->x, a->y, a->fres)); break;
    case 2: GKCU_OK(gkcu_axpby(ctx, a->n, 0.5f, a->x, 0.75f, a->y)); break;
    case 3: GKCU_OK(gkcu_axpby_cublas(ctx, a->n, 0.5f, a->x, 0.75f, a->y)); break;
    case 4: GKCU_OK(gkcu_axpby(ctx, a->n, 1e-3f, a->x, 1.0f, a->y)); break;
    default: GKCU_OK(gkcu_axpby_cublas(ctx, a->n, 1e-3f, a->x, 1.0f, a->y)); break;
  }
}

static void bench_blas1(int64_t n) {
  printf("\n== blas1: n = %lld floats, median of %d, cold L2 (%.0f MB written before each) ==\n", (long long)n,
         reps, flush_bytes / 1e6);
  printf("%-34s %10s %10s %8s\n", "op", "median_ms", "min_ms", "GB/s");
  b1_arg a = {0, n, NULL, NULL, NULL, NULL};
  CUDA_OK(cudaMalloc((void **)&a.x, (size_t)n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&a.y, (size_t)n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&a.dres, sizeof(double)));
  CUDA_OK(cudaMalloc((void **)&a.fres, sizeof(float)));
  GKCU_OK(gkcu_fill_uniform(ctx, a.x, (size_t)n, 1, -1.0f, 1.0f));
  GKCU_OK(gkcu_fill_uniform(ctx, a.y, (size_t)n, 2, -1.0f, 1.0f));
  static const char *names[6] = {"dot gkcu (double acc)",      "dot cublasSdot (float acc)",
                                 "axpby gkcu (a=.5, b=.75)",   "axpby cuBLAS scal+axpy",
                                 "axpby gkcu (b=1: x += a p)", "axpby cuBLAS axpy (b=1)"};
  static const double bytes_per[6] = {8, 8, 12, 20, 12, 12};
  double *ms = malloc((size_t)reps * sizeof *ms);
  for (int w = 0; w < 6; w++) {
    a.which = w;
    b1_run(&a);
    b1_run(&a);
    for (int r = 0; r < reps; r++) {
      flush_l2();
      CUDA_OK(cudaEventRecord(ev0, st));
      b1_run(&a);
      CUDA_OK(cudaEventRecord(ev1, st));
      ms[r] = event_ms();
    }
    double m = bench_median(ms, reps);
    printf("%-34s %10.4f %10.4f %8.0f\n", names[w], m, ms[0], bytes_per[w] * n / (m * 1e-3) / 1e9);
    json_rec("\"section\": \"blas1\", \"op\": \"%s\", \"n\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, "
             "\"gbps\": %.2f",
             names[w], (long long)n, m, ms[0], bytes_per[w] * n / (m * 1e-3) / 1e9);
  }
  /* the round trip a CG iteration pays per dot: enqueue, compute, copy back, wait */
  for (int w = 0; w < 2; w++) {
    double v = 0.0;
    float f = 0.0f;
    for (int r = 0; r < reps; r++) {
      double t0 = bench_now_s();
      if (w == 0) GKCU_OK(gkcu_dot(ctx, n, a.x, a.y, &v));
      else CUBLAS_OK(cublasSdot(blas, (int)n, a.x, 1, a.y, 1, &f));
      ms[r] = (bench_now_s() - t0) * 1e3;
    }
    double m = bench_median(ms, reps);
    const char *nm = w ? "dot cublasSdot -> host (wall)" : "dot gkcu_dot -> host (wall)";
    printf("%-34s %10.4f %10.4f %8s\n", nm, m, ms[0], "-");
    json_rec("\"section\": \"blas1\", \"op\": \"%s\", \"n\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f", nm,
             (long long)n, m, ms[0]);
    (void)v;
    (void)f;
  }
  free(ms);
  cudaFree(a.x);
  cudaFree(a.y);
  cudaFree(a.dres);
  cudaFree(a.fres);
}

/* --- cg ------------------------------------------------------------------------------- */

typedef struct {
  int iters;
  double seconds, rel_recursive, rel_true, rel_f64, xmax;
  int converged;
} cg_result;

/* ||b - A x|| / ||b|| entirely in double on the host, A on the host (hA),
 * x copied back; b = ones.  *xmax = max |x|. */
static double residual_f64(const gpu_csr *hA, const float *x_dev, float *h, double *xmax) {
  size_t n = (size_t)hA->rows;
  CUDA_OK(cudaMemcpy(h, x_dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  double rr = 0.0, mx = 0.0;
  for (int32_t r = 0; r < hA->rows; r++) {
    double ax = 0.0;
    for (int32_t j = hA->row_ptr[r]; j < hA->row_ptr[r + 1]; j++) ax += (double)hA->values[j] * h[hA->col_idx[j]];
    double d = 1.0 - ax;
    rr += d * d;
    if (fabs((double)h[r]) > mx) mx = fabs((double)h[r]);
  }
  *xmax = mx;
  return sqrt(rr) / sqrt((double)n);
}

/* ||b - A x|| / ||b||, with one SpMV (t = b; t = -A x + t), the norms in double on the host. */
static double true_residual(const dcsr *a, float *x, const float *b, float *t, float *h) {
  size_t n = (size_t)a->rows;
  CUDA_OK(cudaMemcpyAsync(t, b, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
  spmv_plan p;
  plan_make(&p, a, x, t, -1.0f, 1.0f);
  plan_run(&p, a, -1.0f, 1.0f);
  CUDA_OK(cudaMemcpyAsync(h, t, n * sizeof(float), cudaMemcpyDeviceToHost, st));
  CUDA_OK(cudaStreamSynchronize(st));
  double rr = 0.0;
  for (size_t i = 0; i < n; i++) rr += (double)h[i] * h[i];
  CUDA_OK(cudaMemcpy(h, b, n * sizeof(float), cudaMemcpyDeviceToHost));
  double bb = 0.0;
  for (size_t i = 0; i < n; i++) bb += (double)h[i] * h[i];
  plan_free(&p);
  return sqrt(rr) / sqrt(bb);
}

typedef struct {
  const dcsr *a;
  const gpu_csr *hA; /* the same matrix on the host */
  float *b, *x, *r, *p, *q, *t;
  float *h; /* host, rows floats */
  spmv_plan pq; /* q = A p */
} cg_state;

/* vendor: 0 = cuSPARSE + cuBLAS, 1 = cuSPARSE + gkcu_dot/gkcu_axpby.
 * Stops after max_iters, when ||r|| / ||b|| <= tol (tol > 0), or after
 * max_s seconds. */
static cg_result cg_solve(cg_state *s, int use_gkcu, int max_iters, double tol, double max_s) {
  const int n = s->a->rows;
  const double bnorm = sqrt((double)n); /* b = ones */
  cg_result res = {0, 0, 0, 0, 0, 0, 0};
  CUDA_OK(cudaStreamSynchronize(st));
  double t0 = bench_now_s();
  /* x = 0, r = b, p = r, rr = r.r */
  CUDA_OK(cudaMemsetAsync(s->x, 0, (size_t)n * sizeof(float), st));
  CUDA_OK(cudaMemcpyAsync(s->r, s->b, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, st));
  CUDA_OK(cudaMemcpyAsync(s->p, s->b, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, st));
  double rr;
  if (use_gkcu) {
    GKCU_OK(gkcu_dot(ctx, n, s->r, s->r, &rr));
  } else {
    float f;
    CUBLAS_OK(cublasSdot(blas, n, s->r, 1, s->r, 1, &f));
    rr = f;
  }
  int k = 0;
  while (k < max_iters) {
    plan_run(&s->pq, s->a, 1.0f, 0.0f); /* q = A p */
    double pq;
    if (use_gkcu) {
      GKCU_OK(gkcu_dot(ctx, n, s->p, s->q, &pq));
    } else {
      float f;
      CUBLAS_OK(cublasSdot(blas, n, s->p, 1, s->q, 1, &f));
      pq = f;
    }
    float alpha = (float)(rr / pq);
    float malpha = -alpha;
    double rr_new;
    if (use_gkcu) {
      GKCU_OK(gkcu_axpby(ctx, n, alpha, s->p, 1.0f, s->x));   /* x += alpha p */
      GKCU_OK(gkcu_axpby(ctx, n, malpha, s->q, 1.0f, s->r));  /* r -= alpha q */
      GKCU_OK(gkcu_dot(ctx, n, s->r, s->r, &rr_new));
    } else {
      CUBLAS_OK(cublasSaxpy(blas, n, &alpha, s->p, 1, s->x, 1));
      CUBLAS_OK(cublasSaxpy(blas, n, &malpha, s->q, 1, s->r, 1));
      float f;
      CUBLAS_OK(cublasSdot(blas, n, s->r, 1, s->r, 1, &f));
      rr_new = f;
    }
    k++;
    res.rel_recursive = sqrt(rr_new) / bnorm;
    if (tol > 0 && res.rel_recursive <= tol) {
      res.converged = 1;
      break;
    }
    float beta = (float)(rr_new / rr);
    const float one = 1.0f;
    if (use_gkcu) {
      GKCU_OK(gkcu_axpby(ctx, n, 1.0f, s->r, beta, s->p));    /* p = r + beta p */
    } else {
      CUBLAS_OK(cublasSscal(blas, n, &beta, s->p, 1));
      CUBLAS_OK(cublasSaxpy(blas, n, &one, s->r, 1, s->p, 1));
    }
    rr = rr_new;
    if ((k & 63) == 0 && bench_now_s() - t0 > max_s) break;
  }
  CUDA_OK(cudaStreamSynchronize(st));
  res.seconds = bench_now_s() - t0;
  res.iters = k;
  res.rel_true = true_residual(s->a, s->x, s->b, s->t, s->h);
  res.rel_f64 = residual_f64(s->hA, s->x, s->h, &res.xmax);
  return res;
}

static void bench_cg(const dcsr *a, const gpu_csr *hA, int N, int iters, double tol, int max_iters) {
  printf("\n== cg: 2-D 5-point Laplacian %d x %d (%d unknowns), b = ones, x0 = 0 ==\n", N, N, a->rows);
  printf("%-8s %-16s %6s %8s %9s %8s %11s %11s %11s %9s\n", "impl", "stop", "iters", "time_s", "iters/s",
         "ms/iter", "rel_res_rec", "rel_res_f32", "rel_res_f64", "max|x|");
  cg_state s;
  memset(&s, 0, sizeof s);
  s.a = a;
  s.hA = hA;
  size_t bytes = (size_t)a->rows * sizeof(float);
  float **vecs[6] = {&s.b, &s.x, &s.r, &s.p, &s.q, &s.t};
  for (int i = 0; i < 6; i++) CUDA_OK(cudaMalloc((void **)vecs[i], bytes));
  s.h = malloc(bytes);
  if (!s.h) exit(2);
  for (int i = 0; i < a->rows; i++) s.h[i] = 1.0f;
  CUDA_OK(cudaMemcpy(s.b, s.h, bytes, cudaMemcpyHostToDevice));
  plan_make(&s.pq, a, s.p, s.q, 1.0f, 0.0f);

  /* warm-up: a few iterations of each, so that library setup is not timed */
  cg_solve(&s, 0, 5, 0.0, 10.0);
  cg_solve(&s, 1, 5, 0.0, 10.0);
  for (int stop = 0; stop < 2; stop++) {
    for (int impl = 0; impl < 2; impl++) {
      if (past_deadline("cg")) break;
      cg_result r = stop == 0 ? cg_solve(&s, impl, iters, 0.0, 20.0) : cg_solve(&s, impl, max_iters, tol, 20.0);
      char how[64];
      if (stop == 0) snprintf(how, sizeof how, "fixed %d", iters);
      else snprintf(how, sizeof how, "tol %.0e%s", tol, r.converged ? "" : " (no)");
      const char *nm = impl ? "gkcu" : "vendor";
      printf("%-8s %-16s %6d %8.3f %9.1f %8.4f %11.3e %11.3e %11.3e %9.4g\n", nm, how, r.iters, r.seconds,
             r.iters / r.seconds, 1e3 * r.seconds / r.iters, r.rel_recursive, r.rel_true, r.rel_f64, r.xmax);
      json_rec("\"section\": \"cg\", \"impl\": \"%s\", \"grid\": %d, \"unknowns\": %d, \"stop\": \"%s\", "
               "\"tol\": %g, \"converged\": %s, \"iters\": %d, \"seconds\": %.6f, \"iters_per_s\": %.3f, "
               "\"ms_per_iter\": %.6f, \"rel_residual_recursive\": %.6e, \"rel_residual_true\": %.6e, "
               "\"rel_residual_true_f64\": %.6e, \"max_abs_x\": %.6g",
               nm, N, a->rows, stop ? "tol" : "fixed", stop ? tol : 0.0, r.converged ? "true" : "false", r.iters,
               r.seconds, r.iters / r.seconds, 1e3 * r.seconds / r.iters, r.rel_recursive, r.rel_true, r.rel_f64,
               r.xmax);
    }
  }
  plan_free(&s.pq);
  for (int i = 0; i < 6; i++) cudaFree(*vecs[i]);
  free(s.h);
}

/* --- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  int N = 2048, iters = 200, max_iters = 20000, skip_h2d = 0;
  double tol = 1e-5;
  const char *matrix = NULL, *json_path = NULL, *csv_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) N = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tol") && i + 1 < argc) tol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--max-iters") && i + 1 < argc) max_iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--matrix") && i + 1 < argc) matrix = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--h2d-reps") && i + 1 < argc) h2d_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--skip-h2d")) skip_h2d = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--n N] [--iters K] [--tol T] [--max-iters M] [--matrix FILE.mtx] [--reps R] "
              "[--h2d-reps R] [--skip-h2d] [--json FILE] [--csv FILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (N < 2 || (long long)N * N > 0x7fffffffLL / 5 || iters < 1 || max_iters < 1) {
    fprintf(stderr, "bad --n, --iters or --max-iters\n");
    return 2;
  }
  if (reps < 10) reps = 10;
  if (h2d_reps < 10) h2d_reps = 10;
  gpu_require_device();
  t_start = bench_now_s();

  struct cudaDeviceProp prop;
  int dev = 0, rt = 0, drv = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  printf("device: %s, %d SMs, %.0f MB L2, %.1f GiB, cc %d.%d; runtime %d, driver %d\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize / 1e6, prop.totalGlobalMem / 1073741824.0, prop.major,
         prop.minor, rt, drv);

  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreate(&ev0));
  CUDA_OK(cudaEventCreate(&ev1));
  if (gkcu_ctx_create(&ctx, st) != 0) {
    fprintf(stderr, "gkcu_ctx_create failed\n");
    return 2;
  }
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasSetStream(blas, st));
  CUBLAS_OK(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST));
  CUSPARSE_OK(cusparseCreate(&sparse));
  CUSPARSE_OK(cusparseSetStream(sparse, st));
  flush_bytes = 2 * gkcu_ctx_l2_bytes(ctx);
  if (flush_bytes < ((size_t)64 << 20)) flush_bytes = (size_t)64 << 20;
  CUDA_OK(cudaMalloc(&flush_buf, flush_bytes));

  if (json_path) {
    json = fopen(json_path, "w");
    if (!json) {
      perror(json_path);
      return 2;
    }
    fprintf(json, "{\"device\": \"%s\", \"sms\": %d, \"runtime\": %d, \"driver\": %d, \"results\": [", prop.name,
            prop.multiProcessorCount, rt, drv);
  }

  if (csv_path) {
    char header[1024] = "";
    for (int i = 0; i < CSV_NCOLS; i++)
      snprintf(header + strlen(header), sizeof header - strlen(header), "%s%s", i ? "," : "", CSV_COLS[i]);
    if (bench_csv_open(&csv, csv_path, header) != 0) return 2;
  }

  if (!skip_h2d) bench_h2d();

  /* the Laplacian, on the device for spmv and cg */
  gpu_csr lap;
  if (gpu_csr_stencil2d(&lap, N) != 0) {
    fprintf(stderr, "out of memory building the %d x %d Laplacian\n", N, N);
    return 2;
  }
  dcsr dlap;
  dcsr_upload(&dlap, lap.rows, lap.cols, lap.nnz, lap.row_ptr, lap.col_idx, lap.values);

  if (!past_deadline("spmv")) {
    printf("\n== spmv: cusparseSpMV CSR, y = A x, %d calls: median (cold L2 / warm), mean back to back ==\n", reps);
    printf("%-26s %9s %10s %10s %10s %10s %8s\n", "matrix", "rows", "nnz", "cold_ms", "warm_ms", "b2b_ms",
           "GB/s");
    char name[64];
    snprintf(name, sizeof name, "laplace2d_%d", N);
    bench_spmv_matrix(name, &dlap);
    if (matrix) {
      mtx_csr m;
      char err[256];
      if (mtx_read_csr(matrix, &m, err, sizeof err) != 0) {
        printf("--matrix: %s\n", err);
      } else {
        dcsr dm;
        dcsr_upload(&dm, m.rows, m.cols, m.nnz, m.row_ptr, m.col_idx, m.values);
        const char *base = strrchr(matrix, '/');
        bench_spmv_matrix(base ? base + 1 : matrix, &dm);
        dcsr_free(&dm);
        mtx_free(&m);
      }
    }
  }
  if (!past_deadline("blas1")) bench_blas1(dlap.rows);
  if (!past_deadline("cg")) bench_cg(&dlap, &lap, N, iters, tol, max_iters);
  gpu_csr_free(&lap);

  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  if (bench_csv_close(&csv) != 0) return 2;
  printf("\nbench_direct: %.1f s\n", bench_now_s() - t_start);
  dcsr_free(&dlap);
  cudaFree(flush_buf);
  cusparseDestroy(sparse);
  cublasDestroy(blas);
  gkcu_ctx_destroy(ctx);
  cudaEventDestroy(ev0);
  cudaEventDestroy(ev1);
  cudaStreamDestroy(st);
  return 0;
}
