/* e2e_f64_lib.c: libgkc's float64 calls against a real gkcd (issue 27):
 * upload/download byte-exact, dot, nrm2, axpby (double scalars), spmv on a
 * float64 matrix (by value and resident), solve of the 2-D Laplacian and of
 * a random SPD matrix to rtol 1e-10 whose x this test checks by its true
 * residual in float64, float64 through the transparent shared memory (big
 * arrays) as well as inline, and the refusals: float64 to sgemm and reduce,
 * mixed dtypes, each naming the argument and both dtypes.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "gkc.h"
#include "gkc_async.h"
#include "test.h"

static uint64_t rng;

static double *rand_vec(size_t n) {
  double *x = malloc(n * sizeof *x);
  ASSERT(x);
  /* Two float32 draws make a value no float32 holds. */
  for (size_t i = 0; i < n; i++) x[i] = test_rand_f32(&rng) + test_rand_f32(&rng) * 1e-9;
  return x;
}

typedef struct {
  int32_t n;
  int32_t *rp, *ci;
  double *v;
  int64_t nnz;
} csr64;

static gkc_csr_f64 as_gkc(const csr64 *m) {
  gkc_csr_f64 g = {m->n, m->n, m->nnz, m->rp, m->ci, m->v};
  return g;
}

static void csr_free(csr64 *m) { free(m->rp), free(m->ci), free(m->v); }

/* y = A x in double */
static void ref_spmv(const csr64 *A, const double *x, double *y) {
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) s += A->v[j] * x[A->ci[j]];
    y[i] = s;
  }
}

static double true_residual(const csr64 *A, const double *b, const double *x) {
  double *ax = malloc((size_t)A->n * sizeof *ax), rr = 0, bb = 0;
  ASSERT(ax);
  ref_spmv(A, x, ax);
  for (int32_t i = 0; i < A->n; i++) rr += (b[i] - ax[i]) * (b[i] - ax[i]), bb += b[i] * b[i];
  free(ax);
  return sqrt(rr / bb);
}

/* The 5-point Laplacian on a k x k grid. */
static csr64 laplacian(int32_t k) {
  int32_t n = k * k;
  csr64 m = {n, malloc(((size_t)n + 1) * 4), malloc((size_t)n * 5 * 4), malloc((size_t)n * 5 * 8), 0};
  ASSERT(m.rp && m.ci && m.v);
  m.rp[0] = 0;
  for (int32_t i = 0; i < k; i++)
    for (int32_t j = 0; j < k; j++) {
      int32_t r = i * k + j;
      if (i > 0) m.ci[m.nnz] = r - k, m.v[m.nnz++] = -1;
      if (j > 0) m.ci[m.nnz] = r - 1, m.v[m.nnz++] = -1;
      m.ci[m.nnz] = r, m.v[m.nnz++] = 4;
      if (j < k - 1) m.ci[m.nnz] = r + 1, m.v[m.nnz++] = -1;
      if (i < k - 1) m.ci[m.nnz] = r + k, m.v[m.nnz++] = -1;
      m.rp[r + 1] = (int32_t)m.nnz;
    }
  return m;
}

/* Random SPD: B^T B + n I for a random sparse-ish B, as a dense n x n
 * turned into CSR (double values that are not float32 numbers). */
static csr64 random_spd(int32_t n) {
  double *b = calloc((size_t)n * n, sizeof *b), *d = calloc((size_t)n * n, sizeof *d);
  ASSERT(b && d);
  for (int32_t i = 0; i < n; i++)
    for (int t = 0; t < 4; t++) b[(size_t)i * n + test_rand_u64(&rng) % (uint64_t)n] = test_rand_f32(&rng) * 1.1;
  for (int32_t i = 0; i < n; i++)
    for (int32_t j = 0; j < n; j++) {
      double s = i == j ? 0.01 : 0;
      for (int32_t k = 0; k < n; k++) s += b[(size_t)k * n + i] * b[(size_t)k * n + j];
      d[(size_t)i * n + j] = s;
    }
  csr64 m = {n, malloc(((size_t)n + 1) * 4), NULL, NULL, 0};
  int64_t nnz = 0;
  for (size_t i = 0; i < (size_t)n * n; i++) nnz += d[i] != 0;
  m.ci = malloc((size_t)nnz * 4 + 4), m.v = malloc((size_t)nnz * 8 + 8);
  ASSERT(m.rp && m.ci && m.v);
  m.rp[0] = 0;
  for (int32_t i = 0; i < n; i++) {
    for (int32_t j = 0; j < n; j++)
      if (d[(size_t)i * n + j] != 0) m.ci[m.nnz] = j, m.v[m.nnz++] = d[(size_t)i * n + j];
    m.rp[i + 1] = (int32_t)m.nnz;
  }
  free(b), free(d);
  return m;
}

static void test_vectors(gkc_conn *c, size_t n) {
  double *x = rand_vec(n), *y = rand_vec(n), *z = malloc(n * 8), *back = malloc(n * 8);
  ASSERT(z && back);
  double dot, nrm, ref = 0, mag = 0, sq = 0;
  for (size_t i = 0; i < n; i++) ref += x[i] * y[i], mag += fabs(x[i] * y[i]), sq += x[i] * x[i];
  ASSERT_EQ(gkc_dot(c, gkc_ref_f64(x, n), gkc_ref_f64(y, n), &dot, NULL), 0);
  ASSERT(fabs(dot - ref) <= (double)(n + 2) * 0x1p-53 * mag);
  ASSERT_EQ(gkc_nrm2(c, gkc_ref_f64(x, n), &nrm, NULL), 0);
  ASSERT(fabs(nrm - sqrt(sq)) <= 1e-13 * sqrt(sq));
  /* axpby with scalars no float holds */
  gkc_out o = gkc_out_mem(z, n * 8);
  ASSERT_EQ(gkc_axpby_f64(c, 0.1, gkc_ref_mem(x, n * 8), -1.0 / 3.0, gkc_ref_mem(y, n * 8), &o, NULL), 0);
  for (size_t i = 0; i < n; i++)
    ASSERT(fabs(z[i] - (0.1 * x[i] - y[i] / 3.0)) <= 4e-16 * (fabs(x[i]) + fabs(y[i])));
  /* upload and download: the same bytes */
  uint32_t h;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(x, n * 8), GKC_F64, 0, &h), 0);
  ASSERT_EQ(gkc_download(c, h, back, n * 8), 0);
  ASSERT(memcmp(back, x, n * 8) == 0);
  /* a float64 handle needs no mark; dot on it and an inline array */
  ASSERT_EQ(gkc_dot(c, gkc_ref_handle(h, 0), gkc_ref_f64(y, n), &dot, NULL), 0);
  ASSERT(fabs(dot - ref) <= (double)(n + 2) * 0x1p-53 * mag);
  ASSERT_EQ(gkc_release(c, h), 0);
  free(x), free(y), free(z), free(back);
}

static void test_spmv(gkc_conn *c) {
  csr64 A = random_spd(120);
  double *x = rand_vec(120), *y = malloc(120 * 8), *ref = malloc(120 * 8);
  ASSERT(y && ref);
  ref_spmv(&A, x, ref);
  uint32_t m;
  gkc_csr_f64 g = as_gkc(&A);
  ASSERT_EQ(gkc_csr_upload_f64(c, &g, 0, &m, NULL), 0);
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.use_matrix = 1, s.matrix = m, s.x = gkc_ref_mem(x, 120 * 8);
  gkc_out o = gkc_out_mem(y, 120 * 8);
  ASSERT_EQ(gkc_spmv_f64(c, &s, 0.5, 0.0, &o, NULL), 0);
  for (int i = 0; i < 120; i++) ASSERT(fabs(y[i] - 0.5 * ref[i]) <= 1e-13 * (1 + fabs(ref[i])));
  /* by value: float64 values too */
  gkc_spmv_args v = GKC_SPMV_ARGS_INIT;
  v.rows = v.cols = 120;
  v.row_ptr = gkc_ref_mem(A.rp, 121 * 4), v.col_idx = gkc_ref_mem(A.ci, (size_t)A.nnz * 4);
  v.values = gkc_ref_mem(A.v, (size_t)A.nnz * 8), v.x = gkc_ref_mem(x, 120 * 8);
  o = gkc_out_mem(y, 120 * 8);
  ASSERT_EQ(gkc_spmv_f64(c, &v, 1.0, 0.0, &o, NULL), 0);
  for (int i = 0; i < 120; i++) ASSERT(fabs(y[i] - ref[i]) <= 1e-13 * (1 + fabs(ref[i])));
  ASSERT_EQ(gkc_release_matrix(c, m), 0);
  csr_free(&A);
  free(x), free(y), free(ref);
}

static void solve_to(gkc_conn *c, const csr64 *A, gkc_solve_method method, const char *what) {
  size_t n = (size_t)A->n;
  double *b = rand_vec(n), *x = malloc(n * 8);
  ASSERT(x);
  uint32_t m;
  gkc_csr_f64 g = as_gkc(A);
  ASSERT_EQ(gkc_csr_upload_f64(c, &g, 0, &m, NULL), 0);
  gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
  s.matrix = m, s.b = gkc_ref_f64(b, n), s.method = method, s.rtol = 1e-10;
  gkc_out o = gkc_out_mem(x, n * 8);
  gkc_solve_result r;
  ASSERT_EQ(gkc_solve(c, &s, &o, &r, NULL), 0);
  double here = true_residual(A, b, x);
  fprintf(stderr, "e2e_f64_lib: %s %s: %lld iterations, residual %.3g (here %.3g)\n", what,
          gkc_solve_method_name(method), (long long)r.iterations, r.residual, here);
  ASSERT(r.converged);
  ASSERT(here <= 1e-10);
  ASSERT(fabs(r.residual - here) <= 1e-6 * here);
  ASSERT_EQ(gkc_release_matrix(c, m), 0);
  free(b), free(x);
}

static void test_refusals(gkc_conn *c) {
  double d[4] = {1, 2, 3, 4}, v;
  float f[4] = {1, 2, 3, 4};
  /* float64 to sgemm: refused before sending, naming the argument */
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = s.n = 1, s.k = 4, s.a = gkc_ref_f64(d, 4), s.b = gkc_ref_mem(f, 16);
  float out1;
  gkc_out o = gkc_out_mem(&out1, 4);
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &o, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "a: marked float64");
  ASSERT_CONTAINS(gkc_errmsg(c), "sgemm takes float32");
  /* a float64 handle: gkcd names it and both dtypes */
  uint32_t h64, h32;
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(d, 32), GKC_F64, 0, &h64), 0);
  ASSERT_EQ(gkc_upload(c, gkc_ref_mem(f, 16), GKC_F32, 0, &h32), 0);
  s.a = gkc_ref_handle(h64, 0);
  ASSERT_EQ(gkc_sgemm_ref(c, &s, &o, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "argument 'a'");
  ASSERT_CONTAINS(gkc_errmsg(c), "float64 (f64), but sgemm takes float32 (f32) only");
  ASSERT_EQ(gkc_reduce_ref(c, gkc_ref_handle(h64, 0), GKC_SUM, &v, NULL, NULL, NULL),
            GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "reduce takes float32 (f32) only");
  ASSERT_EQ(gkc_dot(c, gkc_ref_handle(h64, 0), gkc_ref_handle(h32, 0), &v, NULL), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "argument 'y'");
  ASSERT_CONTAINS(gkc_errmsg(c), "float32 (f32)");
  ASSERT_CONTAINS(gkc_errmsg(c), "float64 (f64)");
  ASSERT_EQ(gkc_upload(c, gkc_ref_f64(d, 4), GKC_F32, 0, &h32), GKC_EINVALID_ARGUMENT);
  ASSERT_CONTAINS(gkc_errmsg(c), "data: marked float64");
  ASSERT_EQ(gkc_release(c, h64), 0);
  /* float32 unchanged: the same call on float32 arrays */
  ASSERT_EQ(gkc_dot(c, gkc_ref_mem(f, 16), gkc_ref_mem(f, 16), &v, NULL), 0);
  ASSERT_EQ(v, 30.0);
}

typedef struct {
  int done, status;
  double value;
} cb_state;

static void on_value(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  cb_state *st = ud;
  st->done = 1, st->status = res->status, st->value = res->value;
}

/* The async context takes the same marked references. */
static void test_async(const fixture *f) {
  gkc_async *ac;
  if (gkc_async_connect(&ac, f->sock)) TEST_FAIL("async connect: %s", gkc_async_errmsg(ac));
  double x[3] = {0.1, 0.2, 0.3};
  gkc_dot_args a = {gkc_ref_f64(x, 3), gkc_ref_f64(x, 3)};
  cb_state st = {0};
  ASSERT_EQ(gkc_async_dot(ac, &a, on_value, &st), 0);
  while (!st.done) ASSERT(gkc_async_poll(ac, 10000) >= 0);
  ASSERT_EQ(st.status, 0);
  ASSERT(fabs(st.value - (0.1 * 0.1 + 0.2 * 0.2 + 0.3 * 0.3)) <= 1e-16);
  gkc_async_close(ac);
}

int main(void) {
  rng = test_seed();
  fixture f;
  fixture_start(&f, NULL, NULL);
  gkc_conn *c;
  if (gkc_connect(&c, f.sock)) TEST_FAIL("connect: %s", gkc_errmsg(c));
  test_vectors(c, 1000);       /* inline */
  test_vectors(c, 300000);     /* 2.4 MB arrays: through the arena */
  gkc_shm_info si;
  if (gkc_shm_state(c, &si)) ASSERT(si.staged > 0); /* float64 needs no hook there */
  gkc_set_shm(c, GKC_SHM_OFF, 0);
  test_vectors(c, 300000);     /* the same inline */
  gkc_set_shm(c, 0, 0);
  test_spmv(c);
  csr64 L = laplacian(64);
  solve_to(c, &L, GKC_SOLVE_CG, "laplacian 64x64");
  solve_to(c, &L, GKC_SOLVE_PCG, "laplacian 64x64");
  solve_to(c, &L, GKC_SOLVE_BICGSTAB, "laplacian 64x64");
  csr_free(&L);
  csr64 S = random_spd(200);
  solve_to(c, &S, GKC_SOLVE_CG, "random SPD 200");
  solve_to(c, &S, GKC_SOLVE_PCG, "random SPD 200");
  csr_free(&S);
  test_refusals(c);
  gkc_close(c);
  test_async(&f);
  int st = fixture_stop(&f, SIGTERM);
  if (st != 0) TEST_FAIL("gkcd exited with status %d", st);
  fprintf(stderr, "e2e_f64_lib: all passed\n");
  return 0;
}
