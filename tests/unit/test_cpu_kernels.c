/* test_cpu_kernels.c: the CPU backend's kernels against plain double
 * loops, on fresh random inputs each run.  A failure prints the seed;
 * GKC_TEST_SEED=<seed> replays it. */
#include "cpu_kernels.h"
#include "test.h"

#include <stdint.h>
#include <time.h>

/* ---- random numbers (splitmix64: small, good enough, replayable) ---- */

static uint64_t g_seed, g_rng;
static int g_passed;

static uint64_t next_u64(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float rand_float(float lo, float hi) {
  return lo + (hi - lo) * (float)((next_u64() >> 40) * 0x1p-24);
}

/* uniform in [lo, hi] */
static int64_t rand_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}

static void report_seed(void) {
  if (!g_passed)
    fprintf(stderr, "seed %" PRIu64 " (replay: GKC_TEST_SEED=%" PRIu64 ")\n",
            g_seed, g_seed);
}

static void seed_rng(void) {
  const char *env = getenv("GKC_TEST_SEED");
  if (env && *env) {
    g_seed = strtoull(env, NULL, 10);
  } else {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&g_seed, sizeof g_seed, 1, f) != 1)
      g_seed = (uint64_t)time(NULL) ^ (uint64_t)clock();
    if (f) fclose(f);
  }
  g_rng = g_seed;
  atexit(report_seed); /* TEST_FAIL exits through it */
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  ASSERT(p != NULL);
  return p;
}

static float *rand_floats(int64_t n, float lo, float hi) {
  float *v = xmalloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = rand_float(lo, hi);
  return v;
}

static void fill(float *v, int64_t n, float value) {
  for (int64_t i = 0; i < n; i++) v[i] = value;
}

typedef struct { float alpha, beta; } scale_t;

/* beta == 0 runs get a NaN-filled output: NaN must not leak through, and
 * an element the kernel forgot to write stays NaN and fails the check. */
static const scale_t k_scales[] = {
  {1.0f, 0.0f}, {-0.5f, 0.0f}, {0.0f, 0.0f}, {1.25f, 1.0f}, {0.5f, -2.0f}, {0.0f, 0.75f},
};
enum { N_SCALES = sizeof k_scales / sizeof k_scales[0] };

/* ---- sgemm ---- */

/* max |c - ref| <= tol * (sum_p |alpha a b| + |beta c0|) per element:
 * OpenBLAS accumulates in float, errors grow with the terms' magnitude. */
#define SGEMM_TOL 1e-5

static float at(const float *m, int rows, int cols, int r, int c, int trans) {
  return trans ? m[(int64_t)c * rows + r] : m[(int64_t)r * cols + c];
}

static void check_sgemm(int m, int n, int k, int ta, int tb, scale_t s) {
  float *a = rand_floats((int64_t)m * k, -1, 1);
  float *b = rand_floats((int64_t)k * n, -1, 1);
  float *c0 = rand_floats((int64_t)m * n, -1, 1);
  float *c = xmalloc((size_t)m * n * sizeof *c);
  if (s.beta == 0) fill(c0, (int64_t)m * n, NAN);
  memcpy(c, c0, (size_t)m * n * sizeof *c);
  cpu_sgemm(m, n, k, s.alpha, a, ta, b, tb, s.beta, c);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double dot = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double ab = (double)at(a, m, k, i, p, ta) * at(b, k, n, p, j, tb);
        dot += ab;
        mag += fabs(ab);
      }
      double ref = s.alpha * dot, bound = fabs(s.alpha) * mag;
      if (s.beta != 0) {
        ref += s.beta * (double)c0[i * n + j];
        bound += fabs(s.beta * (double)c0[i * n + j]);
      }
      double got = c[i * n + j];
      if (!(fabs(got - ref) <= SGEMM_TOL * bound))
        TEST_FAIL("sgemm m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g: c[%d,%d] = "
                  "%.9g, want %.9g (tol %.3g)", m, n, k, ta, tb, s.alpha, s.beta,
                  i, j, got, ref, SGEMM_TOL * bound);
    }
  free(a), free(b), free(c0), free(c);
}

static void test_sgemm(void) {
  static const int shapes[][3] = {
    {1, 1, 1}, {17, 31, 13}, {127, 1, 61}, {1, 127, 61}, {61, 127, 1},
    {2, 3, 5}, {64, 64, 64}, {100, 3, 250}, {3, 100, 250}, {33, 65, 129},
  };
  int count = (int)(sizeof shapes / sizeof shapes[0]);
  for (int r = 0; r < count + 6; r++) {
    int m, n, k;
    if (r < count) m = shapes[r][0], n = shapes[r][1], k = shapes[r][2];
    else m = (int)rand_int(1, 150), n = (int)rand_int(1, 150), k = (int)rand_int(1, 150);
    for (int t = 0; t < 4; t++)
      for (int s = 0; s < N_SCALES; s++) check_sgemm(m, n, k, t & 1, t >> 1, k_scales[s]);
  }
}

/* ---- reduce ---- */

static const int k_reduce_threads[] = {1, 2, 3, 0, 7};
enum { N_REDUCE_THREADS = sizeof k_reduce_threads / sizeof k_reduce_threads[0] };

static const char *op_name(int op) {
  return op == CPU_SUM ? "sum" : op == CPU_MIN ? "min" : "max";
}

static void reduce_ref(const float *x, int64_t n, double *sum, double *abs_sum,
                       double *mn, double *mx) {
  *sum = *abs_sum = 0;
  *mn = *mx = NAN;
  for (int64_t i = 0; i < n; i++) {
    *sum += x[i];
    *abs_sum += fabs(x[i]);
    *mn = fmin(*mn, x[i]);
    *mx = fmax(*mx, x[i]);
  }
}

static void expect_reduce(const float *x, int64_t n, const char *what) {
  double sum, abs_sum, mn, mx;
  reduce_ref(x, n, &sum, &abs_sum, &mn, &mx);
  for (int t = 0; t < N_REDUCE_THREADS; t++) {
    int nt = k_reduce_threads[t];
    for (int op = CPU_SUM; op <= CPU_MAX; op++) {
      double want = op == CPU_SUM ? sum : op == CPU_MIN ? mn : mx;
      double got = cpu_reduce(x, n, op, nt);
      int ok;
      if (isnan(want)) ok = isnan(got);
      else if (op == CPU_SUM && !isinf(want)) ok = fabs(got - want) <= 1e-6 * abs_sum;
      else ok = got == want; /* min/max pick an element: exact */
      if (!ok)
        TEST_FAIL("reduce %s n=%" PRId64 " nthreads=%d (%s): got %.17g, want %.17g",
                  op_name(op), n, nt, what, got, want);
    }
  }
}

static void test_reduce_size(int64_t n) {
  /* Shifted off zero so the sum is not a near-cancellation. */
  float *x = rand_floats(n, -1, 2);
  expect_reduce(x, n, "random");
  /* Large magnitudes: min/max must survive more than [-1, 2). */
  for (int64_t i = 0; i < n; i++) x[i] = rand_float(-1, 1) * 1e30f;
  expect_reduce(x, n, "wide");

  x[rand_int(0, n - 1)] = NAN;
  expect_reduce(x, n, "one NaN");
  x[0] = NAN, x[n - 1] = NAN;
  expect_reduce(x, n, "NaN at both ends");
  /* A whole leading half of NaN: a thread whose chunk is all NaN must not
   * decide the answer. */
  fill(x, n / 2 + 1, NAN);
  expect_reduce(x, n, "leading half NaN");
  x[n - 1] = -INFINITY;
  expect_reduce(x, n, "NaN and -inf");

  fill(x, n, NAN);
  expect_reduce(x, n, "all NaN");
  x[n - 1] = INFINITY;
  expect_reduce(x, n, "NaN and one +inf");
  fill(x, n, -INFINITY);
  expect_reduce(x, n, "all -inf");
  free(x);
}

static void test_reduce(void) {
  static const int64_t sizes[] = {1, 2, 3, 1000, 65537, (1 << 20) + 7};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) test_reduce_size(sizes[i]);
}

/* ---- spmv ---- */

static const int k_spmv_threads[] = {1, 2, 3, 7, 16, 0};
enum { N_SPMV_THREADS = sizeof k_spmv_threads / sizeof k_spmv_threads[0] };

typedef struct {
  int32_t rows, cols;
  int32_t *row_ptr, *col_idx;
  float *values;
} csr_t;

typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  int64_t heavy_row;  /* -1: none; else it holds heavy_share of the nonzeros */
  double heavy_share;
  double empty_share; /* rows (outside the heavy one) left empty */
} csr_shape;

/* Nonzeros land on random non-empty rows; one block of rows is also left
 * empty so that runs of empty rows cross thread boundaries. */
static csr_t make_csr(csr_shape s) {
  csr_t a = {s.rows, s.cols, xmalloc(((size_t)s.rows + 1) * sizeof(int32_t)),
             xmalloc((size_t)s.nnz * sizeof(int32_t)), rand_floats(s.nnz, -1, 1)};
  int64_t *len = xmalloc((size_t)s.rows * sizeof *len);
  int32_t *open = xmalloc((size_t)s.rows * sizeof *open);
  int32_t n_open = 0, block = (int32_t)rand_int(0, s.rows / 4);
  int32_t block_at = (int32_t)rand_int(0, s.rows - block);
  for (int32_t r = 0; r < s.rows; r++) {
    len[r] = 0;
    int empty = (r >= block_at && r < block_at + block) ||
                rand_float(0, 1) < (float)s.empty_share;
    if (!empty && r != s.heavy_row) open[n_open++] = r;
  }
  int64_t heavy = s.heavy_row >= 0 ? (int64_t)(s.heavy_share * (double)s.nnz) : 0;
  if (n_open == 0) { /* every row came out empty: the nonzeros need one */
    if (s.heavy_row >= 0) heavy = s.nnz;
    else open[n_open++] = 0;
  }
  if (heavy) len[s.heavy_row] = heavy;
  for (int64_t i = heavy; i < s.nnz; i++) len[open[rand_int(0, n_open - 1)]]++;
  a.row_ptr[0] = 0;
  for (int32_t r = 0; r < s.rows; r++) a.row_ptr[r + 1] = (int32_t)(a.row_ptr[r] + len[r]);
  for (int64_t i = 0; i < s.nnz; i++) a.col_idx[i] = (int32_t)rand_int(0, s.cols - 1);
  free(len), free(open);
  return a;
}

static void free_csr(csr_t *a) { free(a->row_ptr), free(a->col_idx), free(a->values); }

static void check_spmv(const csr_t *a, const float *x, const double *dot,
                       const double *mag, scale_t s, int nthreads, const char *what) {
  float *y0 = rand_floats(a->rows, -1, 1);
  float *y = xmalloc((size_t)a->rows * sizeof *y);
  if (s.beta == 0) fill(y0, a->rows, NAN);
  memcpy(y, y0, (size_t)a->rows * sizeof *y);
  cpu_spmv(a->rows, a->cols, a->row_ptr, a->col_idx, a->values, x, s.alpha, s.beta,
           y, nthreads);
  for (int32_t r = 0; r < a->rows; r++) {
    double ref = s.alpha * dot[r], bound = fabs(s.alpha) * mag[r];
    if (s.beta != 0) {
      ref += s.beta * (double)y0[r];
      bound += fabs(s.beta * (double)y0[r]);
    }
    /* The kernel sums in double; 1e-6 leaves room for the float rounding
     * of the result and of a carried partial row. */
    if (!(fabs(y[r] - ref) <= 1e-6 * bound))
      TEST_FAIL("spmv %s (%dx%d, nnz %d) nthreads=%d alpha=%g beta=%g: y[%d] "
                "(%d nonzeros) = %.9g, want %.9g (tol %.3g)", what, a->rows, a->cols,
                a->row_ptr[a->rows], nthreads, s.alpha, s.beta, r,
                a->row_ptr[r + 1] - a->row_ptr[r], y[r], ref, 1e-6 * bound);
  }
  free(y0), free(y);
}

static void test_spmv_case(csr_shape shape, const char *what) {
  csr_t a = make_csr(shape);
  float *x = rand_floats(a.cols, -1, 1);
  double *dot = xmalloc((size_t)a.rows * sizeof *dot);
  double *mag = xmalloc((size_t)a.rows * sizeof *mag);
  for (int32_t r = 0; r < a.rows; r++) {
    dot[r] = mag[r] = 0;
    for (int32_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; j++) {
      double ax = (double)a.values[j] * x[a.col_idx[j]];
      dot[r] += ax;
      mag[r] += fabs(ax);
    }
  }
  for (int t = 0; t < N_SPMV_THREADS; t++)
    for (int s = 0; s < N_SCALES; s++)
      check_spmv(&a, x, dot, mag, k_scales[s], k_spmv_threads[t], what);
  free_csr(&a), free(x), free(dot), free(mag);
}

static void test_spmv(void) {
  /* rows + nnz of the larger cases is >= 16 x 16K so that 16 threads are
   * really used (cpu_spmv gives each thread at least 16K items). */
  test_spmv_case((csr_shape){1, 1, 1, -1, 0, 0}, "1x1");
  test_spmv_case((csr_shape){1, 1, 0, -1, 0, 0}, "1x1 empty");
  test_spmv_case((csr_shape){50, 40, 300, -1, 0, 0.2}, "small");
  test_spmv_case((csr_shape){300000, 10, 0, -1, 0, 0}, "all empty");
  test_spmv_case((csr_shape){30000, 20000, 300000, -1, 0, 0.25}, "random");
  test_spmv_case((csr_shape){5000, 4000, 400000, 0, 0.9, 0.1}, "heavy first row");
  test_spmv_case((csr_shape){5000, 4000, 400000, 2500, 0.9, 0.1}, "heavy middle row");
  test_spmv_case((csr_shape){5000, 4000, 400000, 4999, 0.9, 0.1}, "heavy last row");
  test_spmv_case((csr_shape){3, 1000, 300000, 1, 0.9, 0}, "3 rows, one heavy");
  test_spmv_case((csr_shape){60000, 37, 250000, -1, 0, 0.3}, "tall");
  test_spmv_case((csr_shape){37, 60000, 300000, -1, 0, 0.3}, "wide");
}

/* ---- float64 (issue 27): cpu_spmv_typed's four pairs of value and
 * vector types against the same double loop, dot and nrm2 of doubles ---- */

static void test_spmv_typed_case(csr_shape shape, const char *what) {
  csr_t a = make_csr(shape);
  int64_t nnz = a.row_ptr[a.rows];
  double *vd = xmalloc((size_t)nnz * sizeof *vd), *xd = xmalloc((size_t)a.cols * sizeof *xd);
  float *xf = xmalloc((size_t)a.cols * sizeof *xf);
  /* float64 values and x no float32 holds */
  for (int64_t j = 0; j < nnz; j++) vd[j] = a.values[j] + rand_float(-1, 1) * 1e-10;
  for (int32_t i = 0; i < a.cols; i++) xd[i] = rand_float(-1, 1) + rand_float(-1, 1) * 1e-10, xf[i] = (float)xd[i];
  void *y = xmalloc((size_t)a.rows * 8);
  for (int vt = 0; vt < 2; vt++)
    for (int xt = 0; xt < 2; xt++)
      for (int t = 0; t < N_SPMV_THREADS; t++) {
        const void *vals = vt ? (const void *)vd : (const void *)a.values;
        const void *x = xt ? (const void *)xd : (const void *)xf;
        double alpha = 0.1; /* not a float32 number */
        cpu_spmv_typed(a.rows, a.cols, a.row_ptr, a.col_idx, vals, vt, x, xt, alpha, 0.0, y,
                       k_spmv_threads[t]);
        for (int32_t r = 0; r < a.rows; r++) {
          double ref = 0, mag = 0;
          for (int32_t j = a.row_ptr[r]; j < a.row_ptr[r + 1]; j++) {
            double v = vt ? vd[j] : a.values[j], xv = xt ? xd[a.col_idx[j]] : xf[a.col_idx[j]];
            ref += v * xv, mag += fabs(v * xv);
          }
          ref *= alpha, mag *= alpha;
          double got = xt ? ((double *)y)[r] : ((float *)y)[r];
          /* float64 y: summation order only; float32 y: its rounding too */
          double tol = xt ? 1e-13 * mag + 1e-300 : 1e-6 * mag;
          if (!(fabs(got - ref) <= tol))
            TEST_FAIL("spmv_typed %s values %s x %s nthreads=%d: y[%d] = %.17g, want %.17g", what,
                      vt ? "f64" : "f32", xt ? "f64" : "f32", k_spmv_threads[t], r, got, ref);
        }
      }
  free_csr(&a), free(vd), free(xd), free(xf), free(y);
}

static void test_f64(void) {
  test_spmv_typed_case((csr_shape){50, 40, 300, -1, 0, 0.2}, "small");
  test_spmv_typed_case((csr_shape){30000, 20000, 300000, -1, 0, 0.25}, "random");
  test_spmv_typed_case((csr_shape){5000, 4000, 400000, 2500, 0.9, 0.1}, "heavy middle row");
  int64_t n = 200003;
  double *x = xmalloc((size_t)n * sizeof *x), *y = xmalloc((size_t)n * sizeof *y);
  double ref = 0, mag = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = rand_float(-1, 1) + rand_float(-1, 1) * 1e-9, y[i] = rand_float(-1, 1);
    ref += x[i] * y[i], mag += fabs(x[i] * y[i]), sq += x[i] * x[i];
  }
  ASSERT(fabs(cpu_dot_f64(x, y, n) - ref) <= (double)n * 0x1p-53 * mag);
  /* Both sums of squares (ours, threaded; the reference, in order) are
   * recursive: each within n u of the exact sum, so each root within n u / 2.
   * 1e-14 relative was tried and failed in CI: random rounding alone is
   * ~sqrt(n) u = 5e-14 at this n. */
  ASSERT(fabs(cpu_nrm2_f64(x, n) - sqrt(sq)) <= (double)n * 0x1p-53 * sqrt(sq));
  /* squares past double's range either way: rescaled, still accurate */
  double big[2] = {3e200, 4e200}, tiny[2] = {3e-200, 4e-200}, zero[3] = {0, 0, 0};
  ASSERT(fabs(cpu_nrm2_f64(big, 2) - 5e200) <= 1e-15 * 5e200);
  ASSERT(fabs(cpu_nrm2_f64(tiny, 2) - 5e-200) <= 1e-15 * 5e-200);
  ASSERT_EQ(cpu_nrm2_f64(zero, 3), 0.0);
  /* axpby: y not read when beta is 0 (NaN there must not leak) */
  double *o = xmalloc((size_t)n * sizeof *o);
  for (int64_t i = 0; i < n; i++) o[i] = NAN;
  cpu_axpby_f64(n, 0.1, x, 0.0, o, o);
  for (int64_t i = 0; i < n; i++) ASSERT(o[i] == 0.1 * x[i]);
  cpu_axpby_f64(n, 0.1, x, -1.0 / 3, y, o);
  for (int64_t i = 0; i < n; i++) ASSERT(fabs(o[i] - (0.1 * x[i] - y[i] / 3)) <= 4e-16 * (fabs(x[i]) + fabs(y[i])));
  free(x), free(y), free(o);
}

int main(void) {
  seed_rng();
  test_sgemm();
  test_reduce();
  test_spmv();
  test_f64();
  g_passed = 1;
  printf("test_cpu_kernels: ok (seed %" PRIu64 ")\n", g_seed);
  return 0;
}
