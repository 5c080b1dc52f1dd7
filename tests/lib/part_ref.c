/* part_ref.c: see part_ref.h. */
#include "part_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

uint64_t ref_rand_u64(uint64_t *rng) {
  uint64_t z = (*rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double ref_rand(uint64_t *rng, double lo, double hi) {
  return lo + (hi - lo) * (double)(ref_rand_u64(rng) >> 11) * 0x1p-53;
}

double *ref_rand_vec(uint64_t *rng, int64_t n, double lo, double hi) {
  double *v = xmalloc(8 * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = ref_rand(rng, lo, hi);
  return v;
}

/* Neumaier's compensated sum, term by term. */
static void add(ref_sum *s, double *c, double t) {
  double u = s->sum + t;
  *c += fabs(s->sum) >= fabs(t) ? (s->sum - u) + t : (t - u) + s->sum;
  s->sum = u;
  s->mag += fabs(t);
  s->terms++;
}

int ref_close(double got, ref_sum want) {
  double tol = (double)(want.terms + 8) * 0x1p-53 * want.mag;
  return fabs(got - want.sum) <= tol;
}

ref_csr ref_random_csr(uint64_t *rng, int32_t rows, int32_t cols, int maxrow) {
  ref_csr m = {rows, cols, 0, NULL, NULL, NULL};
  m.rp = xmalloc(4 * ((size_t)rows + 1));
  m.ci = xmalloc(4 * (size_t)rows * (size_t)maxrow + 4);
  m.v = xmalloc(4 * (size_t)rows * (size_t)maxrow + 4);
  m.rp[0] = 0;
  for (int32_t i = 0; i < rows; i++) {
    int len = (int)(ref_rand_u64(rng) % (uint64_t)(maxrow + 1));
    if (len > cols) len = cols;
    /* distinct columns: consecutive from a random start, wrapped */
    int32_t c0 = (int32_t)(ref_rand_u64(rng) % (uint64_t)cols);
    for (int t = 0; t < len; t++) {
      m.ci[m.nnz] = (c0 + t) % cols;
      m.v[m.nnz++] = (float)ref_rand(rng, -1, 1);
    }
    m.rp[i + 1] = (int32_t)m.nnz;
  }
  return m;
}

void ref_csr_free(ref_csr *m) {
  free(m->rp), free(m->ci), free(m->v);
  m->rp = m->ci = NULL, m->v = NULL;
}

void ref_spmv(const ref_csr *m, const double *x, ref_sum *y) {
  for (int32_t i = 0; i < m->rows; i++) {
    ref_sum s = {0, 0, 0};
    double c = 0;
    for (int32_t t = m->rp[i]; t < m->rp[i + 1]; t++) add(&s, &c, (double)m->v[t] * x[m->ci[t]]);
    s.sum += c;
    y[i] = s;
  }
}

ref_sum ref_dot(const double *x, const double *y, int64_t n) {
  ref_sum s = {0, 0, 0};
  double c = 0;
  for (int64_t i = 0; i < n; i++) add(&s, &c, x[i] * y[i]);
  s.sum += c;
  return s;
}

int ref_axpy_close(double got, double a, double t, double s) {
  double want = a * t + s, tol = 4 * 0x1p-53 * (fabs(a * t) + fabs(s)) + 1e-300;
  return fabs(got - want) <= tol;
}

void ref_check_cg_update(int64_t n, double a, int jacobi, const double *p, const double *q, const double *x0,
                         const double *r0, const double *dinv, const double *x, const double *r, const double *z,
                         const double out[2]) {
  for (int64_t i = 0; i < n; i++) {
    if (a == 0) {
      if (memcmp(&x[i], &x0[i], 8) || memcmp(&r[i], &r0[i], 8))
        TEST_FAIL("cg_update a = 0, n %" PRId64 ": x or r changed at %" PRId64, n, i);
    } else if (!ref_axpy_close(x[i], a, p[i], x0[i]) || !ref_axpy_close(r[i], -a, q[i], r0[i])) {
      TEST_FAIL("cg_update n %" PRId64 " a %g: x[%" PRId64 "] = %.17g (from %.17g), r = %.17g (from %.17g)",
                n, a, i, x[i], x0[i], r[i], r0[i]);
    }
    if (jacobi && memcmp(&(double){dinv[i] * r[i]}, &z[i], 8))
      TEST_FAIL("cg_update n %" PRId64 ": z[%" PRId64 "] = %.17g, want %.17g", n, i, z[i], dinv[i] * r[i]);
  }
  ref_sum rr = ref_dot(r, r, n), rz = ref_dot(r, z, n);
  if (!ref_close(out[0], rr)) TEST_FAIL("cg_update n %" PRId64 ": r . r = %.17g, want %.17g", n, out[0], rr.sum);
  if (jacobi && !ref_close(out[1], rz))
    TEST_FAIL("cg_update n %" PRId64 ": r . z = %.17g, want %.17g", n, out[1], rz.sum);
  if (!jacobi && out[1] != 0) TEST_FAIL("cg_update n %" PRId64 ": r . z = %g without dinv", n, out[1]);
}

uint64_t ref_seed(void) {
  uint64_t seed = 0;
  const char *env = getenv("GKC_TEST_SEED");
  if (env && *env) return strtoull(env, NULL, 10);
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(&seed, sizeof seed, 1, f) != 1) seed = (uint64_t)time(NULL) ^ (uint64_t)clock();
  if (f) fclose(f);
  return seed;
}
