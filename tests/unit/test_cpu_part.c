/* test_cpu_part.c: the CPU backend's partitioned-matrix primitives
 * (cpu/cpu_part.c, gkcd_part_ops) against float64 references (part_ref.h)
 * on fresh random inputs: the fused steps a partitioned CG iteration is
 * made of (spmv with p . A p, cg_update with and without the Jacobi
 * preconditioner, a = 0) and the plain ones beside them (dot, axpby,
 * gather), one thread and several (sizes on both sides of cpu_part.c's
 * PAR_MIN), n = 0, the same bits twice, and a lost device refusing.
 * cpu_part.c is compiled in; the backend's two functions it calls are
 * stubbed here.  A failure prints the seed; GKC_TEST_SEED replays it. */
#include <inttypes.h>
#include <time.h>

#include "backend.h"
#include "gkc_errors.h"
#include "cpu_impl.h"
#include "part_ref.h"
#include "test.h"

extern const gkcd_part_ops cpu_part_ops;

/* What cpu_part.c reads of a CPU device (its kernel threads) and asks of
 * the daemon. */
static cpu_impl g_impl;
const char *backend_lost_reason(const gkcd_backend *be) {
  (void)be;
  return "lost in test_cpu_part";
}

static uint64_t g_seed, g_rng;
static int g_done;

static void report_seed(void) {
  if (!g_done) fprintf(stderr, "seed %" PRIu64 " (replay: GKC_TEST_SEED=%" PRIu64 ")\n", g_seed, g_seed);
}

static const gkcd_part_ops *ops = &cpu_part_ops;
static gkcd_backend be_ = {.impl = &g_impl}; /* device 0, not lost */
static char msg[200];

static double *copy_of(const double *v, int64_t n) {
  double *c = malloc(8 * (size_t)n + 8);
  ASSERT(c != NULL);
  if (n) memcpy(c, v, 8 * (size_t)n);
  return c;
}

/* spmv with and without the dot, on a block of rows rows and a halo. */
static void check_spmv(int32_t rows, int32_t halo, int maxrow) {
  ref_csr m = ref_random_csr(&g_rng, rows, rows + halo, maxrow);
  double *x = ref_rand_vec(&g_rng, rows + halo, -1, 1), *y = malloc(8 * (size_t)rows + 8),
         *y2 = malloc(8 * (size_t)rows + 8);
  ref_sum *want = malloc(sizeof *want * ((size_t)rows + 1));
  ASSERT(y && y2 && want);
  ref_spmv(&m, x, want);
  for (int32_t i = 0; i < rows; i++) y[i] = NAN;
  double xy = NAN;
  ASSERT_EQ(ops->spmv(&be_, rows, m.nnz, m.rp, m.ci, m.v, x, y, &xy, msg, sizeof msg), 0);
  for (int32_t i = 0; i < rows; i++)
    if (!ref_close(y[i], want[i]))
      TEST_FAIL("spmv rows %d: y[%d] = %.17g, want %.17g", rows, i, y[i], want[i].sum);
  ref_sum d = ref_dot(x, y, rows);
  if (!ref_close(xy, d)) TEST_FAIL("spmv rows %d: x . y = %.17g, want %.17g", rows, xy, d.sum);
  /* without the dot: the same y, and nothing else written */
  ASSERT_EQ(ops->spmv(&be_, rows, m.nnz, m.rp, m.ci, m.v, x, y2, NULL, msg, sizeof msg), 0);
  ASSERT(rows == 0 || memcmp(y, y2, 8 * (size_t)rows) == 0);
  /* the same bits again */
  double xy2 = NAN;
  ASSERT_EQ(ops->spmv(&be_, rows, m.nnz, m.rp, m.ci, m.v, x, y2, &xy2, msg, sizeof msg), 0);
  ASSERT(memcmp(&xy, &xy2, sizeof xy) == 0);
  ref_csr_free(&m);
  free(x), free(y), free(y2), free(want);
}

static void check_update(int64_t n, int jacobi, double a) {
  double *p = ref_rand_vec(&g_rng, n, -1, 1), *q = ref_rand_vec(&g_rng, n, -1, 1),
         *x0 = ref_rand_vec(&g_rng, n, -1, 1), *r0 = ref_rand_vec(&g_rng, n, -1, 1),
         *dinv = ref_rand_vec(&g_rng, n, 0.1, 2), *z = malloc(8 * (size_t)n + 8);
  double *x = copy_of(x0, n), *r = copy_of(r0, n);
  ASSERT(z != NULL);
  for (int64_t i = 0; i < n; i++) z[i] = NAN;
  double out[2] = {NAN, NAN};
  /* a = 0: p and q are not read (NULL proves it) */
  ASSERT_EQ(ops->cg_update(&be_, a, a != 0 ? p : NULL, a != 0 ? q : NULL, x, r, jacobi ? dinv : NULL,
                           jacobi ? z : NULL, n, out, msg, sizeof msg),
            0);
  ref_check_cg_update(n, a, jacobi, p, q, x0, r0, dinv, x, r, z, out);
  /* the same inputs again: the same bits */
  double *x2 = copy_of(x0, n), *r2 = copy_of(r0, n), again[2];
  ASSERT_EQ(ops->cg_update(&be_, a, p, q, x2, r2, jacobi ? dinv : NULL, z, n, again, msg, sizeof msg), 0);
  ASSERT(memcmp(out, again, sizeof out) == 0);
  ASSERT(n == 0 || (memcmp(x, x2, 8 * (size_t)n) == 0 && memcmp(r, r2, 8 * (size_t)n) == 0));
  free(p), free(q), free(x0), free(r0), free(dinv), free(z), free(x), free(r), free(x2), free(r2);
}

/* dot, axpby and gather, which the solve still uses beside the fused steps. */
static void check_plain(int64_t n) {
  double *x = ref_rand_vec(&g_rng, n, -1, 1), *y = ref_rand_vec(&g_rng, n, -1, 1), *y0 = copy_of(y, n);
  double d = NAN;
  ASSERT_EQ(ops->dot(&be_, x, y, n, &d, msg, sizeof msg), 0);
  ref_sum want = ref_dot(x, y, n);
  if (!ref_close(d, want)) TEST_FAIL("dot n %" PRId64 ": %.17g, want %.17g", n, d, want.sum);
  double a = ref_rand(&g_rng, -2, 2), b = ref_rand(&g_rng, -2, 2);
  ASSERT_EQ(ops->axpby(&be_, a, x, b, y, n, msg, sizeof msg), 0);
  for (int64_t i = 0; i < n; i++)
    if (!ref_axpy_close(y[i], a, x[i], b * y0[i]) && !ref_axpy_close(y[i], b, y0[i], a * x[i]))
      TEST_FAIL("axpby n %" PRId64 ": y[%" PRId64 "] = %.17g", n, i, y[i]);
  ASSERT_EQ(ops->axpby(&be_, a, x, 0, y, n, msg, sizeof msg), 0);
  for (int64_t i = 0; i < n; i++) ASSERT(y[i] == a * x[i]);
  int32_t *idx = malloc(4 * (size_t)n + 4);
  double *g = malloc(8 * (size_t)n + 8);
  ASSERT(idx && g);
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(ref_rand_u64(&g_rng) % (uint64_t)n);
  ASSERT_EQ(ops->gather(&be_, g, x, idx, n, msg, sizeof msg), 0);
  for (int64_t i = 0; i < n; i++) ASSERT(g[i] == x[idx[i]]);
  free(x), free(y), free(y0), free(idx), free(g);
}

static void check_lost(void) {
  gkcd_backend lost = {.device = 3};
  atomic_store(&lost.lost, 1);
  double out[2], r = 1;
  msg[0] = 0;
  ASSERT_EQ(ops->cg_update(&lost, 1, &r, &r, &r, &r, NULL, NULL, 1, out, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT_CONTAINS(msg, "device 3 was lost: lost in test_cpu_part");
  int32_t rp[2] = {0, 0};
  msg[0] = 0;
  ASSERT_EQ(ops->spmv(&lost, 1, 0, rp, NULL, NULL, &r, &r, out, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT_CONTAINS(msg, "device 3 was lost");
}

int main(void) {
  g_rng = g_seed = ref_seed();
  atexit(report_seed);
  const int threads[] = {1, 4};
  for (int t = 0; t < 2; t++) {
    g_impl.nthreads = threads[t];
    const int32_t rows[] = {0, 1, 7, 1000, 40000};
    for (int i = 0; i < 5; i++) {
      check_spmv(rows[i], rows[i] / 3 + 1, 27);
      check_spmv(rows[i], 0, 5);
      for (int jacobi = 0; jacobi <= 1; jacobi++) {
        check_update(rows[i], jacobi, ref_rand(&g_rng, -3, 3));
        check_update(rows[i], jacobi, 0);
      }
      check_plain(rows[i]);
    }
  }
  check_lost();
  g_done = 1;
  printf("test_cpu_part: ok (seed %" PRIu64 ")\n", g_seed);
  return 0;
}
