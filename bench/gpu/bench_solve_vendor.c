/* bench_solve_vendor: the vendor baseline for `solve`: conjugate gradients
 * written the way the CUDA samples write it, in this process, on
 * cusparseSpMV (CSR, default algorithm, descriptors and buffer made once)
 * and cuBLAS (dot in host pointer mode, so each of the two dots per
 * iteration brings its scalar back to the host; axpy and scal for the
 * updates).  --prec f32: A, vectors and dots in float32 (what cuSPARSE and
 * cuBLAS offer for a float32 matrix); f64: A converted to double, vectors
 * and dots in float64 (the precision gkcd's solve iterates in).
 *
 *   bench_solve_vendor [--grid N | --matrix A.mtx] [--prec f32|f64]
 *                      [--iters K] [--rtol T] [--max-iter M] [--jacobi] [--json | --csv]
 *
 * b = ones, x0 = 0.  First K iterations (200) with no stopping test, timed
 * (wall clock from the first spmv to the final sync): iterations/s and
 * ms/iteration; then, when --rtol > 0, a solve from scratch until
 * ||r|| <= rtol ||b|| (the recurrence, scipy's rule) or --max-iter, whose
 * iteration count is printed.  --jacobi: the system is scaled to
 * D^-1/2 A D^-1/2 first (PCG with Jacobi takes the iterations CG takes on
 * it).  One JSON object on stdout (--json, the default), or with --csv a
 * header row and one row of the same fields.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "bench_csv.h"
#include "gpu_util.h"

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)
#define CKB(call)                                                                  \
  do {                                                                             \
    cublasStatus_t s_ = (call);                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
      fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)s_);      \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)
#define CKS(call)                                                                  \
  do {                                                                             \
    cusparseStatus_t s_ = (call);                                                  \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorString(s_)); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct {
  int f64, n;
  size_t es; /* element size */
  cublasHandle_t cb;
  cusparseHandle_t cs;
  cusparseSpMatDescr_t A;
  cusparseDnVecDescr_t vp, vq;
  void *buf;
  void *x, *r, *p, *q, *b;
} cg;

static double dot(cg *s, const void *u, const void *v) {
  if (s->f64) {
    double d;
    CKB(cublasDdot(s->cb, s->n, u, 1, v, 1, &d));
    return d;
  }
  float f;
  CKB(cublasSdot(s->cb, s->n, u, 1, v, 1, &f));
  return f;
}

static void axpy(cg *s, double a, const void *u, void *v) {
  float af = (float)a;
  if (s->f64) CKB(cublasDaxpy(s->cb, s->n, &a, u, 1, v, 1));
  else CKB(cublasSaxpy(s->cb, s->n, &af, u, 1, v, 1));
}

static void scal(cg *s, double a, void *v) {
  float af = (float)a;
  if (s->f64) CKB(cublasDscal(s->cb, s->n, &a, v, 1));
  else CKB(cublasSscal(s->cb, s->n, &af, v, 1));
}

static void spmv(cg *s) {
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  CKS(cusparseSpMV(s->cs, CUSPARSE_OPERATION_NON_TRANSPOSE, s->f64 ? (void *)&one : (void *)&onef,
                   s->A, s->vp, s->f64 ? (void *)&zero : (void *)&zerof, s->vq,
                   s->f64 ? CUDA_R_64F : CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, s->buf));
}

/* K iterations from x = 0 (stop: ||r|| <= tol, or never when tol < 0). */
static long solve(cg *s, long max_iter, double tol, double *rel) {
  size_t vb = (size_t)s->n * s->es;
  CK(cudaMemset(s->x, 0, vb));
  CK(cudaMemcpy(s->r, s->b, vb, cudaMemcpyDeviceToDevice));
  CK(cudaMemcpy(s->p, s->b, vb, cudaMemcpyDeviceToDevice));
  double bn = sqrt(dot(s, s->b, s->b)), rz = bn * bn;
  long it = 0;
  while (it < max_iter) {
    spmv(s);
    double pq = dot(s, s->p, s->q), a = rz / pq;
    axpy(s, a, s->p, s->x);
    axpy(s, -a, s->q, s->r);
    double rr = dot(s, s->r, s->r);
    it++;
    if (tol >= 0 && sqrt(rr) <= tol * bn) {
      rz = rr;
      break;
    }
    scal(s, rr / rz, s->p);
    axpy(s, 1.0, s->r, s->p);
    rz = rr;
  }
  CK(cudaDeviceSynchronize());
  *rel = sqrt(rz) / bn;
  return it;
}

int main(int argc, char **argv) {
  int grid = 2048, f64 = 0, jacobi = 0, csv_out = 0;
  long iters = 200, max_iter = 100000;
  double rtol = 0;
  const char *matrix = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: bench_solve_vendor [--grid N | --matrix A.mtx] [--prec f32|f64] [--iters K]\n"
             "                          [--rtol T] [--max-iter M] [--jacobi] [--json | --csv]\n"
             "CG on cuSPARSE + cuBLAS (the vendor baseline); one JSON object on stdout\n"
             "(--json, the default), or with --csv a header row and one row.\n");
      return 0;
    } else if (!strcmp(a, "--jacobi")) {
      jacobi = 1;
      continue;
    } else if (!strcmp(a, "--json") || !strcmp(a, "--csv")) {
      csv_out = !strcmp(a, "--csv");
      continue;
    }
    if (!v) {
      fprintf(stderr, "bench_solve_vendor: %s needs a value (see --help)\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--grid")) grid = atoi(v);
    else if (!strcmp(a, "--matrix")) matrix = v;
    else if (!strcmp(a, "--prec")) f64 = !strcmp(v, "f64");
    else if (!strcmp(a, "--iters")) iters = atol(v);
    else if (!strcmp(a, "--rtol")) rtol = atof(v);
    else if (!strcmp(a, "--max-iter")) max_iter = atol(v);
    else {
      fprintf(stderr, "bench_solve_vendor: unknown option %s (see --help)\n", a);
      return 2;
    }
  }
  if (grid < 2 || iters < 1 || max_iter < 1) {
    fprintf(stderr, "bench_solve_vendor: --grid >= 2, --iters >= 1, --max-iter >= 1\n");
    return 2;
  }
  gpu_require_device();
  gpu_csr M = {0};
  char err[256];
  if (matrix ? gpu_mtx_read(matrix, &M, err, sizeof err) : gpu_csr_stencil2d(&M, grid)) {
    fprintf(stderr, "bench_solve_vendor: %s\n", matrix ? err : "cannot build the Laplacian");
    return 1;
  }
  if (M.rows != M.cols) {
    fprintf(stderr, "bench_solve_vendor: the matrix is not square\n");
    return 1;
  }
  int n = M.rows;
  if (jacobi) { /* D^-1/2 A D^-1/2 */
    double *d = calloc((size_t)n, sizeof *d);
    for (int i = 0; i < n; i++)
      for (int j = M.row_ptr[i]; j < M.row_ptr[i + 1]; j++)
        if (M.col_idx[j] == i) d[i] += M.values[j];
    for (int i = 0; i < n; i++) d[i] = d[i] > 0 ? 1 / sqrt(d[i]) : 1;
    for (int i = 0; i < n; i++)
      for (int j = M.row_ptr[i]; j < M.row_ptr[i + 1]; j++)
        M.values[j] = (float)(M.values[j] * d[i] * d[M.col_idx[j]]);
    free(d);
  }
  cg s = {.f64 = f64, .n = n, .es = f64 ? 8 : 4};
  size_t vb = (size_t)n * s.es;
  int32_t *drp, *dci;
  void *dva;
  CK(cudaMalloc((void **)&drp, ((size_t)n + 1) * 4));
  CK(cudaMalloc((void **)&dci, (size_t)M.nnz * 4));
  CK(cudaMalloc(&dva, (size_t)M.nnz * s.es));
  CK(cudaMemcpy(drp, M.row_ptr, ((size_t)n + 1) * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dci, M.col_idx, (size_t)M.nnz * 4, cudaMemcpyHostToDevice));
  void *hv = malloc((size_t)(M.nnz > n ? M.nnz : n) * s.es);
  for (int64_t j = 0; j < M.nnz; j++)
    f64 ? (((double *)hv)[j] = M.values[j]) : (((float *)hv)[j] = M.values[j]);
  CK(cudaMemcpy(dva, hv, (size_t)M.nnz * s.es, cudaMemcpyHostToDevice));
  for (int i = 0; i < n; i++) f64 ? (((double *)hv)[i] = 1) : (((float *)hv)[i] = 1);
  void **vecs[5] = {&s.x, &s.r, &s.p, &s.q, &s.b};
  for (int i = 0; i < 5; i++) CK(cudaMalloc(vecs[i], vb));
  CK(cudaMemcpy(s.b, hv, vb, cudaMemcpyHostToDevice));
  free(hv);
  CKB(cublasCreate(&s.cb));
  CKS(cusparseCreate(&s.cs));
  cudaDataType t = f64 ? CUDA_R_64F : CUDA_R_32F;
  CKS(cusparseCreateCsr(&s.A, n, n, M.nnz, drp, dci, dva, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                        CUSPARSE_INDEX_BASE_ZERO, t));
  CKS(cusparseCreateDnVec(&s.vp, n, s.p, t));
  CKS(cusparseCreateDnVec(&s.vq, n, s.q, t));
  size_t bufb = 0;
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  CKS(cusparseSpMV_bufferSize(s.cs, CUSPARSE_OPERATION_NON_TRANSPOSE,
                              f64 ? (void *)&one : (void *)&onef, s.A, s.vp,
                              f64 ? (void *)&zero : (void *)&zerof, s.vq, t,
                              CUSPARSE_SPMV_ALG_DEFAULT, &bufb));
  CK(cudaMalloc(&s.buf, bufb ? bufb : 1));

  double rel;
  solve(&s, 5, -1, &rel); /* warm-up */
  double t0 = now_s();
  long k = solve(&s, iters, -1, &rel);
  double dt = now_s() - t0;
  long conv = -1;
  double conv_rel = NAN, conv_s = NAN;
  if (rtol > 0) {
    t0 = now_s();
    conv = solve(&s, max_iter, rtol, &conv_rel);
    conv_s = now_s() - t0;
  }
  if (csv_out) {
    bench_csv c;
    if (bench_csv_open(&c, "-", "impl,rows,nnz,iters,seconds,iterations_per_s,ms_per_iteration,rtol,"
                                "iterations_to_rtol,rec_residual,seconds_to_rtol") != 0)
      return 1;
    bench_csv_str(&c, f64 ? "vendor_f64" : "vendor_f32");
    bench_csv_num(&c, "%d", n);
    bench_csv_num(&c, "%lld", (long long)M.nnz);
    bench_csv_num(&c, "%ld", k);
    bench_csv_num(&c, "%.6f", dt);
    bench_csv_num(&c, "%.3f", k / dt);
    bench_csv_num(&c, "%.6f", dt * 1e3 / k);
    bench_csv_num(&c, "%g", rtol);
    bench_csv_num(&c, "%ld", conv);
    if (isfinite(conv_rel)) bench_csv_num(&c, "%.6g", conv_rel);
    else bench_csv_str(&c, "");
    if (isfinite(conv_s)) bench_csv_num(&c, "%.6f", conv_s);
    else bench_csv_str(&c, "");
    bench_csv_end(&c);
    if (bench_csv_close(&c) != 0) return 1;
  } else {
    printf("{\"impl\": \"vendor_%s\", \"rows\": %d, \"nnz\": %lld, \"iters\": %ld, \"seconds\": %.6f, "
           "\"iterations_per_s\": %.3f, \"ms_per_iteration\": %.6f, \"rtol\": %g, "
           "\"iterations_to_rtol\": %ld, \"rec_residual\": %.6g, \"seconds_to_rtol\": %.6f}\n",
           f64 ? "f64" : "f32", n, (long long)M.nnz, k, dt, k / dt, dt * 1e3 / k, rtol, conv,
           conv_rel, conv_s);
  }
  cusparseDestroySpMat(s.A), cusparseDestroyDnVec(s.vp), cusparseDestroyDnVec(s.vq);
  cusparseDestroy(s.cs), cublasDestroy(s.cb);
  for (int i = 0; i < 5; i++) cudaFree(*vecs[i]);
  cudaFree(s.buf), cudaFree(drp), cudaFree(dci), cudaFree(dva);
  gpu_csr_free(&M);
  return 0;
}
