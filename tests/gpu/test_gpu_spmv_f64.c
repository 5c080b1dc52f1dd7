#define _POSIX_C_SOURCE 200809L
/* test_gpu_spmv_f64: gkcu_spmv_typed (float64 operands: the matrix's values
 * float32 or float64, x and y float32 or float64, all four pairs) and the
 * bulk lane's row slices of it (slice_spmv_typed), against a long-double
 * host reference, on fresh random inputs: float64 values and vectors carry
 * 53 random bits each.
 *
 * Matrices: random rows with empty ones (sizes whose vector width comes
 * out 32, 16, 8, 4 or 2 on a large GPU, and tiny ones), all-empty, one row
 * holding most of the nonzeros (the long-row width, 32), a single huge row,
 * 95% empty rows, rectangular shapes, 2-D and 3-D stencils, a power-law
 * matrix, and every *.mtx in the shared matrix folder when it exists
 * ($GKC_GPU_MATRICES, else $GKC_SHARED_MATRICES).  Each runs as scalar,
 * vector, balanced and auto (the last two run vector, with the long-row
 * rule), with beta 0 (y poisoned with NaN: it must not be read) and beta
 * random, alpha random; float64 arrays also one element (8 bytes) off
 * 16-byte alignment.
 *
 * Bound, row r of length L (u = 2^-53, m_r = |alpha| sum |a x| + |beta y|):
 * every product is fused into a lane's running sum (one rounding each,
 * at most L per lane), at most 5 shuffle adds combine the lanes, then
 * alpha*s and fma(beta, y, .) round once each: |y_r - ref_r| <= (L + 8) u m_r
 * in double; float32 y adds its one rounding, 2^-24 (|ref_r| + that).  The
 * reference sums in long double (64-bit or more mantissa): its own error,
 * L 2^-64 m_r, is below a hundredth of the bound.  Rows with nothing to sum
 * must come out exactly 0 (beta 0) or beta*y.  Keeps going after a
 * failure; exit 1 if any. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_slice.h"
#include "gkcu_spmv.h"
#include "gpu_test.h"
#include "gpu_util.h"
#include "test.h"

static const double U = 0x1p-53;
static int failures, runs;
static double worst; /* |err| / bound, over every row checked */
static gkcu_ctx *ctx;
static gpu_rng g;

static double rnd(void) { return 2.0 * gpu_rng_unit(&g) - 1.0; }

/* The longest row. */
static int32_t max_row_of(const gpu_csr *m) {
  int32_t mr = 0;
  for (int32_t r = 0; r < m->rows; r++)
    if (m->row_ptr[r + 1] - m->row_ptr[r] > mr) mr = m->row_ptr[r + 1] - m->row_ptr[r];
  return mr;
}

/* A device copy of n elements of size es, off elements past a 256-byte
 * boundary; *base is what to free. */
static void *to_dev(const void *h, size_t n, size_t es, int off, void **base) {
  CUDA_OK(cudaMalloc(base, (n + (size_t)off + 1) * es));
  char *d = (char *)*base + (size_t)off * es;
  if (n) CUDA_OK(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
  return d;
}

/* One run: values float64 when vf (v64, else m->values), vectors float64
 * when xf; algo as gkcu_spmv_typed takes it; sliced: through
 * slice_spmv_typed with a budget of about 10 slices. */
static void check_one(const gpu_csr *m, const double *v64, int vf, int xf, int algo, int beta_on, int off,
                      int sliced, const char *what) {
  const int rows = m->rows, cols = m->cols;
  const long long nnz = m->nnz;
  const size_t es = xf ? 8 : 4;
  const int voff = vf ? off : 0, xoff = xf ? off : 0;
  double *x64 = malloc((size_t)cols * 8), *y64 = malloc((size_t)rows * 8);
  float *x32 = malloc((size_t)cols * 4), *y32 = malloc((size_t)rows * 4);
  void *out = malloc((size_t)rows * es);
  if (!x64 || !y64 || !x32 || !y32 || !out) TEST_FAIL("out of memory");
  for (int i = 0; i < cols; i++) x64[i] = rnd(), x32[i] = gpu_rng_float(&g, -1.0f, 1.0f);
  for (int i = 0; i < rows; i++) {
    if (beta_on) y64[i] = rnd(), y32[i] = gpu_rng_float(&g, -1.0f, 1.0f);
    else y64[i] = NAN, y32[i] = NAN; /* must not be read */
  }
  const double alpha = xf ? 3.0 * rnd() : (double)gpu_rng_float(&g, -3.0f, 3.0f);
  const double beta = !beta_on ? 0.0 : xf ? 2.0 * rnd() : (double)gpu_rng_float(&g, -2.0f, 2.0f);

  void *brp, *bci, *bv, *bx, *by;
  const int32_t *drp = to_dev(m->row_ptr, (size_t)rows + 1, 4, 0, &brp);
  const int32_t *dci = to_dev(m->col_idx, (size_t)nnz, 4, 0, &bci);
  const void *dv = to_dev(vf ? (const void *)v64 : (const void *)m->values, (size_t)nnz, vf ? 8 : 4, voff, &bv);
  const void *dx = to_dev(xf ? (const void *)x64 : (const void *)x32, (size_t)cols, es, xoff, &bx);
  void *dy = to_dev(xf ? (const void *)y64 : (const void *)y32, (size_t)rows, es, xoff, &by);
  const int32_t mr = max_row_of(m);

  int rc, nslices = 1;
  if (sliced) {
    slice_budget sb = {0.0, (12.0 * (double)nnz + 12.0 * rows) / 10.0};
    rc = slice_spmv_typed(ctx, &sb, algo, rows, cols, nnz, drp, dci, dv, vf, alpha, dx, xf, beta, dy, mr,
                          &nslices);
  } else {
    rc = gkcu_spmv_typed(ctx, algo, rows, cols, nnz, drp, dci, dv, vf, alpha, dx, xf, beta, dy, mr);
  }
  char desc[200];
  snprintf(desc, sizeof desc, "%s: values %s, x/y %s, algo %s%s, beta %s, off %d", what, vf ? "f64" : "f32",
           xf ? "f64" : "f32", gkcu_spmv_algo_name(algo), sliced ? " sliced" : "", beta_on ? "on" : "0",
           off);
  runs++;
  if (rc != 0) {
    failures++;
    printf("FAIL %s: rc %d %s\n", desc, rc, gkcu_ctx_errmsg(ctx));
    goto out;
  }
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  CUDA_OK(cudaMemcpy(out, dy, (size_t)rows * es, cudaMemcpyDeviceToHost));
  long long bad = 0, first = -1;
  double first_got = 0, first_want = 0, first_tol = 0;
  for (int r = 0; r < rows; r++) {
    long double s = 0, mag = 0;
    for (int32_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
      long double a = vf ? (long double)v64[j] : (long double)m->values[j];
      long double xv = xf ? (long double)x64[m->col_idx[j]] : (long double)x32[m->col_idx[j]];
      s += a * xv;
      mag += fabsl(a * xv);
    }
    long double yin = !beta_on ? 0 : xf ? (long double)y64[r] : (long double)y32[r];
    long double want = (long double)alpha * s + (beta_on ? (long double)beta * yin : 0);
    double m_r = (double)(fabsl((long double)alpha) * mag + fabsl((long double)beta * yin));
    double len = (double)(m->row_ptr[r + 1] - m->row_ptr[r]);
    /* float32 y: its rounding of the double result, 2^-24 (|ref| + the
     * double's error) */
    double tol = xf ? (len + 8.0) * U * m_r
                    : (len + 8.0) * U * m_r * (1 + 0x1p-23) + 0x1p-24 * fabs((double)want);
    double got = xf ? ((double *)out)[r] : (double)((float *)out)[r];
    double err = fabs((double)((long double)got - want));
    if (tol > 0 && err / tol > worst) worst = err / tol;
    if (!(err <= tol)) { /* NaN fails too */
      if (first < 0) first = r, first_got = got, first_want = (double)want, first_tol = tol;
      bad++;
    }
  }
  if (bad) {
    failures++;
    printf("FAIL %s: %lld bad rows, first %lld: got %.17g want %.17g tol %.3g\n", desc, bad, first, first_got,
           first_want, first_tol);
  }
  if (sliced && nslices < 2 && rows >= 2560 && !(mr > 1024 && mr > 32.0 * nnz / rows)) {
    failures++;
    printf("FAIL %s: %d slice(s), expected several\n", desc, nslices);
  }
out:
  cudaFree(brp), cudaFree(bci), cudaFree(bv), cudaFree(bx), cudaFree(by);
  free(x64), free(y64), free(x32), free(y32), free(out);
}

/* Every dtype pair, algo and beta on m; alignment offsets and slices on a
 * few of the runs. */
static void check_matrix(const gpu_csr *m, const char *what) {
  double *v64 = malloc(((size_t)m->nnz + 1) * 8);
  if (!v64) TEST_FAIL("out of memory");
  for (long long j = 0; j < m->nnz; j++) v64[j] = rnd();
  static const int algos[] = {GKCU_SPMV_SCALAR, GKCU_SPMV_VECTOR, GKCU_SPMV_BALANCED, GKCU_SPMV_AUTO};
  for (int pair = 0; pair < 4; pair++) {
    int vf = pair & 1, xf = pair >> 1;
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
      for (int beta_on = 0; beta_on < 2; beta_on++) check_one(m, v64, vf, xf, algos[a], beta_on, 0, 0, what);
    check_one(m, v64, vf, xf, GKCU_SPMV_VECTOR, 1, 1, 0, what);
    check_one(m, v64, vf, xf, GKCU_SPMV_AUTO, 1, 1, 1, what);
    check_one(m, v64, vf, xf, GKCU_SPMV_SCALAR, 0, 0, 1, what);
  }
  free(v64);
}

/* Rows with lengths from len(r), random columns (sorted, duplicates kept). */
static void build(gpu_csr *m, int rows, int cols, int (*len)(int, int), int arg) {
  int *l = malloc((size_t)rows * sizeof *l);
  if (!l) TEST_FAIL("out of memory");
  long long nnz = 0;
  for (int r = 0; r < rows; r++) nnz += (l[r] = len(r, arg));
  if (gpu_csr_alloc(m, rows, cols, nnz) != 0) TEST_FAIL("out of memory");
  long long k = 0;
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < l[r]; j++) {
      m->col_idx[k] = (int)gpu_rng_below(&g, (uint32_t)cols);
      m->values[k++] = gpu_rng_float(&g, -1.0f, 1.0f);
    }
    m->row_ptr[r + 1] = (int)k;
  }
  free(l);
  gpu_csr_sort(m);
}

static int len_random(int r, int maxlen) { return gpu_rng_below(&g, 4) == 0 ? 0 : (int)gpu_rng_below(&g, (uint32_t)maxlen + 1); }
static int len_zero(int r, int arg) { return 0; }
static int len_one_huge(int r, int huge_row) { return r == huge_row ? 200000 : (int)gpu_rng_below(&g, 4); }
static int len_const(int r, int n) { return n; }
static int len_sparse_long(int r, int arg) { return gpu_rng_below(&g, 20) ? 0 : 1 + (int)gpu_rng_below(&g, 5000); }

static void shared_matrices(void) {
  const char *dir = getenv("GKC_GPU_MATRICES");
  if (!dir || !*dir) dir = getenv("GKC_SHARED_MATRICES");
  DIR *d = dir && *dir ? opendir(dir) : NULL;
  if (!d) {
    printf("no shared matrix folder: shared matrices skipped\n");
    return;
  }
  struct dirent *e;
  int count = 0;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 4, ".mtx") != 0) continue;
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    gpu_csr m;
    if (gpu_mtx_read(path, &m, err, sizeof err) != 0) {
      failures++;
      printf("FAIL reading %s: %s\n", path, err);
      continue;
    }
    printf("%s: %d x %d, %lld nonzeros\n", e->d_name, m.rows, m.cols, (long long)m.nnz);
    check_matrix(&m, e->d_name);
    gpu_csr_free(&m);
    count++;
  }
  closedir(d);
  printf("%d shared matrices checked\n", count);
}

static void argument_checks(void) {
  int *ip;
  double *dp;
  CUDA_OK(cudaMalloc((void **)&ip, 64));
  CUDA_OK(cudaMalloc((void **)&dp, 64));
  ASSERT_EQ(gkcu_spmv_typed(NULL, GKCU_SPMV_VECTOR, 1, 1, 0, ip, ip, dp, 1, 1.0, dp, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 0, 1, 0, ip, ip, dp, 1, 1.0, dp, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 1, 1, -1, ip, ip, dp, 1, 1.0, dp, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 1, 1, 1, ip, NULL, dp, 1, 1.0, dp, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, 17, 1, 1, 1, ip, ip, dp, 1, 1.0, dp, 1, 0.0, dp, 0), GKC_EINVALID_ARGUMENT);
  /* float64 arrays must be 8-byte aligned; float32 ones 4 */
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 1, 1, 1, ip, ip, (char *)dp + 4, 1, 1.0, dp, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 1, 1, 1, ip, ip, dp, 1, 1.0, (char *)dp + 4, 1, 0.0, dp, 0),
            GKC_EINVALID_ARGUMENT);
  ASSERT_EQ(gkcu_spmv_typed(ctx, GKCU_SPMV_VECTOR, 1, 1, 1, ip, ip, (char *)dp + 4, 0, 1.0, (char *)dp + 4, 0,
                            0.0, (char *)dp + 4, 0),
            0);
  ASSERT(strlen(gkcu_ctx_errmsg(ctx)) == 0);
  CUDA_OK(cudaStreamSynchronize(gkcu_ctx_stream(ctx)));
  ASSERT_EQ(gkcu_spmv_typed_algo(GKCU_SPMV_SCALAR), GKCU_SPMV_SCALAR);
  ASSERT_EQ(gkcu_spmv_typed_algo(GKCU_SPMV_VECTOR), GKCU_SPMV_VECTOR);
  ASSERT_EQ(gkcu_spmv_typed_algo(GKCU_SPMV_BALANCED), GKCU_SPMV_VECTOR);
  ASSERT_EQ(gkcu_spmv_typed_algo(GKCU_SPMV_CUSPARSE), GKCU_SPMV_VECTOR);
  ASSERT_EQ(gkcu_spmv_typed_algo(GKCU_SPMV_AUTO), GKCU_SPMV_VECTOR);
  cudaFree(ip);
  cudaFree(dp);
}

int main(void) {
  gpu_require_device();
  g.s = gpu_seed("test_gpu_spmv_f64");
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int rc = gkcu_ctx_create(&ctx, stream);
  if (rc != 0) TEST_FAIL("gkcu_ctx_create: %d", rc);
  argument_checks();

  gpu_csr m;
  /* On 132 SMs the width rule gives 32 up to ~8k rows of this mean, then
   * 16, 8 (~35k rows), and the stencils 4 (27-point) and 2 (5-point). */
  static const int sizes[][3] = {{1, 1, 1}, {1, 9, 5}, {7, 3, 4}, {13, 17, 9}, {997, 1009, 40},
                                 {4099, 257, 12}, {15013, 15013, 30}, {30011, 30011, 70}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char what[64];
    build(&m, sizes[i][0], sizes[i][1], len_random, sizes[i][2]);
    snprintf(what, sizeof what, "random %dx%d", sizes[i][0], sizes[i][1]);
    check_matrix(&m, what);
    gpu_csr_free(&m);
  }
  build(&m, 1000, 50, len_zero, 0);
  check_matrix(&m, "all-empty 1000x50");
  gpu_csr_free(&m);
  build(&m, 5000, 70000, len_one_huge, 1234);
  check_matrix(&m, "one row with most nonzeros");
  gpu_csr_free(&m);
  build(&m, 1, 250000, len_const, 250000);
  check_matrix(&m, "single row of 250000");
  gpu_csr_free(&m);
  build(&m, 60000, 60000, len_sparse_long, 0);
  check_matrix(&m, "95% empty rows, long others");
  gpu_csr_free(&m);
  build(&m, 20000, 3, len_const, 3);
  check_matrix(&m, "20000x3 dense rows");
  gpu_csr_free(&m);
  int short_run = getenv("GKC_GPU_TEST_SHORT") != NULL;
  if (gpu_csr_stencil2d(&m, short_run ? 300 : 1000) != 0) TEST_FAIL("out of memory");
  check_matrix(&m, "stencil2d");
  gpu_csr_free(&m);
  if (gpu_csr_stencil3d(&m, short_run ? 24 : 64, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
  check_matrix(&m, "stencil3d");
  gpu_csr_free(&m);
  if (!short_run) {
    if (gpu_csr_powerlaw(&m, 2000000, 100000, gpu_rng_next(&g)) != 0) TEST_FAIL("out of memory");
    check_matrix(&m, "power-law 2M nnz");
    gpu_csr_free(&m);
    shared_matrices();
  }
  printf("worst |err| / bound: %.3g\n", worst);
  gkcu_ctx_destroy(ctx);
  cudaStreamDestroy(stream);
  printf("test_gpu_spmv_f64: %d runs, %d failures\n", runs, failures);
  return failures ? 1 : 0;
}
