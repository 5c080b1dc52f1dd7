/* cpu_amg.c: smoothed-aggregation AMG (see cpu_amg.h for the algorithm).
 *
 * The smoother: Chebyshev of degree 2 in D^-1 A on [1.1 rho / 5, 1.1 rho]
 * by default, or l1-Jacobi, x += D_l1^-1 (b - A x) with D_l1 =
 * diag(sum_j |a_ij|) (no eigenvalue estimate, but on a Laplacian only
 * Jacobi damped by 1/2).  Measured on this 2-core VM (gcc -O2, 2 threads,
 * best of 6), CG to rtol 1e-8 from a random b, setup apart:
 *
 *   2-D 5-point 512^2:  l1-Jacobi 17 iterations 142 ms; Chebyshev(2) 8, 107 ms
 *   3-D 7-point 64^3:   l1-Jacobi 16 iterations 180 ms; Chebyshev(2) 9, 170 ms
 *
 * Chebyshev costs one more product with A per smoothing step (about 1.6x
 * the time per iteration), which its halved iteration count more than
 * pays back: fewer iterations * cost on both, and fewer global dot
 * products (the synchronisations that grow with threads).  So Chebyshev
 * is the default.  The V-cycle's two-grid error factor on the 2-D
 * Laplacian: 0.17 with Chebyshev, 0.60 with l1-Jacobi.
 */
#include "cpu_amg.h"
#include "cpu_amg_sparse.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* A coarsest level above this many rows (coarsening that stalled) is not
 * factored (a dense matrix of 32 MB); it gets smoothing steps instead. */
enum { DENSE_MAX = 2000 };
/* Chebyshev smooths D^-1 A's spectrum on [1.1 rho / CHEB_RATIO, 1.1 rho].
 * The two-grid factor of the 2-D Laplacian 64^2 (exact coarse solve,
 * degree 2), measured: ratio 30 (Ifpack2's default) 0.59, 10 0.27, 5 0.17,
 * 3 0.22 (hypre's 0.3 fraction): a narrow interval damps the high
 * frequencies the coarse grid cannot see much harder. */
#ifndef CHEB_RATIO
#define CHEB_RATIO 5
#endif
/* Power iterations for rho(D^-1 A). */
enum { POWER_ITERS = CPU_AMG_POWER_ITERS };
/* Sums in setup are taken over this many fixed slices of the rows, in
 * parallel, then added in slice order: the same bits whatever the number
 * of threads (an OpenMP reduction adds its threads' parts in whatever
 * order they finish), so the hierarchy is the same on every machine. */
enum { SLICES = 64 };

struct cpu_amg {
  int nlev;
  level lev[CPU_AMG_MAX_LEVELS];
  double *lu;    /* the coarsest matrix's LU factors (nc x nc), or NULL */
  int32_t *piv;  /* their row exchanges */
  int32_t nc;
  int smoother, cheb_degree;
  int borrowed; /* level 0's: 1 rp and ci are the caller's, 2 its values too */
  double ms[CPU_AMG_T_STEPS]; /* cpu_amg_step_ms */
  amg_mem mem; /* what its arrays take, and the threads (cpu_amg_sparse.h) */
};

_Static_assert((int)AMG_ENOMEM == (int)CPU_AMG_ENOMEM && (int)AMG_ETOO_LARGE == (int)CPU_AMG_ETOO_LARGE,
               "cpu_amg_sparse.h's failures are cpu_amg.h's");

/* Level 0's values (and columns, unless borrowed) still to be copied from
 * the caller's arrays into A: diagonals() does it row by row in the pass
 * that reads them anyway (a separate copy pass was 10-39 ms of a 4M-row
 * setup on the H200 host, the diagonals 7-34 more). */
typedef struct {
  const void *values;
  int f64;
  const int32_t *ci; /* NULL: A's columns are the caller's own */
} fill0;

/* The level's diagonal inverses; the first row whose diagonal is zero or
 * not finite, or -1.  Below the finest level (strict 0) such a row, which
 * only an indefinite matrix gives (p^T A p = 0), is left out of smoothing
 * instead: the Krylov method then meets the indefiniteness and says so. */
static int32_t diagonals(const cpu_amg *h, level *L, int strict, const fill0 *f) {
  const csr *A = &L->A;
  int32_t first = INT32_MAX;
#pragma omp parallel for num_threads(amg_threads(&h->mem, A->n)) schedule(static) reduction(min : first)
  for (int32_t i = 0; i < A->n; i++) {
    double d = 0, l1 = 0;
    if (f) /* level 0's copy in the same pass (see fill0) */
      for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) {
        double v = f->f64 ? ((const double *)f->values)[t] : (double)((const float *)f->values)[t];
        A->v[t] = v;
        if (f->ci) A->ci[t] = f->ci[t];
      }
    for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) {
      if (A->ci[t] == i) d += A->v[t];
      l1 += fabs(A->v[t]);
    }
    int bad = d == 0 || !isfinite(d) || !isfinite(l1);
    if (bad && strict && i < first) first = i;
    L->dinv[i] = bad ? 0 : 1.0 / d;
    L->dl1inv[i] = bad ? 0 : 1.0 / l1;
  }
  return first == INT32_MAX ? -1 : first;
}

/* rho(D^-1 A), as the norm ratio ||B x|| / ||x|| of power iterations on
 * B = S A S, S = |D|^-1/2 (similar to D^-1 A when D > 0, and symmetric
 * when A is, so the ratio rises towards rho from below).  It iterates on
 * u = S x, A's input: y = A u, ||B x||^2 = sum |dinv| y^2, and the next
 * u = |dinv| y / ||B x|| (x of norm 1).  q and r are scratch. */
static double spectral_radius(const cpu_amg *h, const level *L) {
  const csr *A = &L->A;
  const int32_t n = A->n;
  const int nth = amg_threads(&h->mem, n);
  const double *dinv = L->dinv;
  double *u = L->r, *y = L->q, ratio = 0, part[SLICES];
  /* a fixed pseudo-random start: the same hierarchy every time */
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int c = 0; c < SLICES; c++) {
    double s = 0;
    for (int32_t i = (int32_t)((int64_t)n * c / SLICES); i < (int32_t)((int64_t)n * (c + 1) / SLICES); i++) {
      /* values in [0.5, 1.5) with mixed signs: a one-signed start is
       * nearly orthogonal to an M-matrix's oscillating top eigenvector
       * (1138_bus: 1.961 after 15 steps against rho 1.99987; mixed 1.967;
       * the 2-D Laplacian's 1.86 against 1.90).  gkcu_amg.cu starts the same. */
      uint32_t hsh = (uint32_t)i * 2654435761u;
      double x = ((double)(hsh >> 8) / 16777216.0 + 0.5) * (hsh & 0x80 ? -1.0 : 1.0);
      u[i] = x * sqrt(fabs(dinv[i]));
      s += x * x;
    }
    part[c] = s;
  }
  double xx = 0;
  for (int c = 0; c < SLICES; c++) xx += part[c];
  for (int it = 0; it < POWER_ITERS; it++) {
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int c = 0; c < SLICES; c++) {
      double s = 0;
      for (int32_t i = (int32_t)((int64_t)n * c / SLICES); i < (int32_t)((int64_t)n * (c + 1) / SLICES); i++) {
        double yi = 0;
        for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) yi += A->v[j] * u[A->ci[j]];
        y[i] = yi;
        s += fabs(dinv[i]) * yi * yi;
      }
      part[c] = s;
    }
    double yy = 0;
    for (int c = 0; c < SLICES; c++) yy += part[c];
    if (xx == 0 || yy == 0 || !isfinite(yy)) break;
    ratio = sqrt(yy / xx);
    double sc = 1 / sqrt(yy);
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) u[i] = fabs(dinv[i]) * y[i] * sc;
    xx = 1;
  }
  return ratio;
}

/* Greedy aggregation (cpu_amg.h, step 2): agg[i] for every row, *na the
 * number of aggregates; 0, or CPU_AMG_ENOMEM.
 *
 * Which entries are strong is decided first, for every entry at once on
 * the OpenMP threads (a byte each): the test (a multiply and a division
 * per entry) was most of the greedy passes' time, and those passes must
 * stay sequential, because each decision depends on the ones before it
 * in row order.  The same decisions as testing inside the passes: the
 * same aggregates. */
static int aggregate(cpu_amg *h, const csr *A, const double *dinv, double theta, int32_t *agg,
                     int32_t *na_out) {
  const int32_t n = A->n;
  const int32_t *restrict rp = A->rp, *restrict ci = A->ci;
  const double *restrict av = A->v;
  const size_t nnz = (size_t)rp[n];
  uint8_t *strong = amg_alloc(&h->mem, nnz, 1);
  if (!strong) return CPU_AMG_ENOMEM;
  const double t2 = theta * theta;
#pragma omp parallel for num_threads(amg_threads(&h->mem, n)) schedule(static)
  for (int32_t i = 0; i < n; i++)
    for (int32_t t = rp[i]; t < rp[i + 1]; t++) {
      int32_t j = ci[t];
      strong[t] = j != i && av[t] * av[t] >= t2 / fabs(dinv[i] * dinv[j]);
    }
  int32_t na = 0;
  for (int32_t i = 0; i < n; i++) agg[i] = -1;
  for (int32_t i = 0; i < n; i++) { /* pass 1: roots with every strong neighbour free */
    if (agg[i] >= 0) continue;
    int free_all = 1;
    for (int32_t t = rp[i]; t < rp[i + 1] && free_all; t++)
      if (strong[t] && agg[ci[t]] >= 0) free_all = 0;
    if (!free_all) continue;
    agg[i] = na;
    for (int32_t t = rp[i]; t < rp[i + 1]; t++)
      if (strong[t]) agg[ci[t]] = na;
    na++;
  }
  int32_t pass1 = na;
  /* pass 2: join the aggregate of the strongest pass-1 neighbour, ties to
   * the lowest column: not the first one in the row, which would make the
   * result hang on the order of the row's entries (a 3-D Laplacian with
   * its diagonal first, then x, y, z neighbours, joined x ones first and
   * took 19 iterations of PCG instead of 9 in sorted order). */
  for (int32_t i = 0; i < n; i++) {
    if (agg[i] >= 0) continue;
    int32_t best = -1, bj = 0;
    double bs = 0;
    for (int32_t t = rp[i]; t < rp[i + 1]; t++) {
      int32_t j = ci[t];
      if (!strong[t] || agg[j] < 0 || agg[j] >= pass1) continue;
      double sj = fabs(av[t]) * sqrt(fabs(dinv[j]));
      if (best < 0 || sj > bs || (sj == bs && j < bj)) best = agg[j], bj = j, bs = sj;
    }
    agg[i] = best;
  }
  for (int32_t i = 0; i < n; i++) { /* pass 3: what is left, with its free neighbours */
    if (agg[i] >= 0) continue;
    agg[i] = na;
    for (int32_t t = rp[i]; t < rp[i + 1]; t++)
      if (strong[t] && agg[ci[t]] < 0) agg[ci[t]] = na;
    na++;
  }
  h->mem.bytes -= nnz;
  free(strong);
  *na_out = na;
  return 0;
}

/* The coarsest matrix as dense LU factors with partial pivoting. */
static int factor(cpu_amg *h, const csr *A) {
  int32_t n = A->n;
  h->nc = n;
  h->lu = amg_alloc(&h->mem, (size_t)n * (size_t)n, sizeof *h->lu);
  h->piv = amg_alloc(&h->mem, (size_t)n, sizeof *h->piv);
  if (!h->lu || !h->piv) return CPU_AMG_ENOMEM;
  double *a = h->lu;
  memset(a, 0, (size_t)n * (size_t)n * sizeof *a);
  for (int32_t i = 0; i < n; i++)
    for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) a[(size_t)i * n + A->ci[t]] += A->v[t];
  for (int32_t k = 0; k < n; k++) {
    int32_t p = k;
    for (int32_t i = k + 1; i < n; i++)
      if (fabs(a[(size_t)i * n + k]) > fabs(a[(size_t)p * n + k])) p = i;
    h->piv[k] = p;
    if (p != k)
      for (int32_t j = 0; j < n; j++) {
        double t = a[(size_t)k * n + j];
        a[(size_t)k * n + j] = a[(size_t)p * n + j];
        a[(size_t)p * n + j] = t;
      }
    double d = a[(size_t)k * n + k];
    if (d == 0) continue; /* singular: that component is left at 0 by solve */
    for (int32_t i = k + 1; i < n; i++) {
      double l = a[(size_t)i * n + k] /= d;
      if (l != 0)
        for (int32_t j = k + 1; j < n; j++) a[(size_t)i * n + j] -= l * a[(size_t)k * n + j];
    }
  }
  return 0;
}

static void lu_solve(const cpu_amg *h, const double *b, double *x) {
  int32_t n = h->nc;
  const double *a = h->lu;
  memcpy(x, b, (size_t)n * sizeof *x);
  /* factor() exchanged whole rows, its multipliers with them (LAPACK's
   * getrf), so L is in the final row order: every exchange goes first,
   * then L y = P b.  (Interleaving them, as LINPACK's gesl does for
   * factors that exchange only the trailing columns, solved some other
   * system whenever a pivot moved: the cycle stopped being symmetric and
   * CG stalled on 1138_bus, whose coarse levels pivot.) */
  for (int32_t k = 0; k < n; k++) {
    int32_t p = h->piv[k];
    if (p != k) {
      double t = x[k];
      x[k] = x[p];
      x[p] = t;
    }
  }
  for (int32_t k = 0; k < n; k++)
    for (int32_t i = k + 1; i < n; i++) x[i] -= a[(size_t)i * n + k] * x[k];
  for (int32_t k = n - 1; k >= 0; k--) {
    double s = x[k];
    for (int32_t j = k + 1; j < n; j++) s -= a[(size_t)k * n + j] * x[j];
    x[k] = a[(size_t)k * n + k] != 0 ? s / a[(size_t)k * n + k] : 0;
  }
}

/* One smoothing step on x (zero: x starts at 0, and is only written). */
static void smooth(const cpu_amg *h, level *L, const double *b, double *x, int zero) {
  const csr *A = &L->A;
  int32_t n = A->n;
  int nth = amg_threads(&h->mem, n);
  /* Chebyshev needs rho; a level whose estimate came out 0 (no finite
   * spectrum to find) is smoothed by l1-Jacobi instead. */
  if (h->smoother == CPU_AMG_SMOOTHER_L1_JACOBI || !(L->rho > 0)) {
    if (zero) {
#pragma omp parallel for num_threads(nth) schedule(static)
      for (int32_t i = 0; i < n; i++) x[i] = L->dl1inv[i] * b[i];
      return;
    }
    amg_spmv(&h->mem, A, x, L->q, 0);
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) x[i] += L->dl1inv[i] * (b[i] - L->q[i]);
    return;
  }
  /* Chebyshev (Saad, "Iterative Methods", algorithm 12.1) for D^-1 A on
   * [lo, up]: up a little above the estimate of rho, which power
   * iterations approach from below. */
  double up = 1.1 * L->rho, lo = up / CHEB_RATIO;
  double theta = (up + lo) / 2, delta = (up - lo) / 2, sigma = theta / delta, rk = 1 / sigma;
  double *r = L->r, *d = L->d, *q = L->q;
  if (zero) {
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) {
      r[i] = L->dinv[i] * b[i];
      x[i] = 0;
    }
  } else {
    amg_spmv(&h->mem, A, x, q, 0);
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) r[i] = L->dinv[i] * (b[i] - q[i]);
  }
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int32_t i = 0; i < n; i++) d[i] = r[i] / theta;
  for (int k = 1;; k++) {
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) x[i] += d[i];
    if (k >= h->cheb_degree) break;
    amg_spmv(&h->mem, A, d, q, 0);
    double rn = 1 / (2 * sigma - rk), c1 = rn * rk, c2 = 2 * rn / delta;
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int32_t i = 0; i < n; i++) {
      r[i] -= L->dinv[i] * q[i];
      d[i] = c1 * d[i] + c2 * r[i];
    }
    rk = rn;
  }
}

static void vcycle(cpu_amg *h, int l, const double *b, double *x) {
  level *L = &h->lev[l];
  int32_t n = L->A.n;
  if (l == h->nlev - 1) {
    if (h->lu) {
      lu_solve(h, b, x);
    } else { /* coarsening stalled above DENSE_MAX: smoothing only */
      smooth(h, L, b, x, 1);
      for (int k = 0; k < 3; k++) smooth(h, L, b, x, 0);
    }
    return;
  }
  level *C = &h->lev[l + 1];
  smooth(h, L, b, x, 1);
  amg_spmv(&h->mem, &L->A, x, L->r, 0);
#pragma omp parallel for num_threads(amg_threads(&h->mem, n)) schedule(static)
  for (int32_t i = 0; i < n; i++) L->r[i] = b[i] - L->r[i];
  amg_spmv(&h->mem, &L->R, L->r, C->b, 0);
  vcycle(h, l + 1, C->b, C->x);
  amg_spmv(&h->mem, &L->P, C->x, x, 1);
  smooth(h, L, b, x, 0);
}

void cpu_amg_apply(cpu_amg *h, const double *r, double *z) { vcycle(h, 0, r, z); }

/* Level l's diagonals, spectral radius and scratch vectors (and b, x below
 * the finest); *bad the row a diagonal failed on. */
static int level_prepare(cpu_amg *h, int l, const fill0 *f, int32_t *bad) {
  level *L = &h->lev[l];
  size_t n = (size_t)L->A.n;
  int nvec = l > 0 ? 7 : 5;
  double *w = amg_alloc(&h->mem, n ? n * (size_t)nvec : 1, sizeof *w);
  if (!w) return CPU_AMG_ENOMEM;
  L->dinv = w, L->dl1inv = w + n, L->r = w + 2 * n, L->d = w + 3 * n, L->q = w + 4 * n;
  if (l > 0) L->b = w + 5 * n, L->x = w + 6 * n;
  if ((*bad = diagonals(h, L, l == 0, f)) >= 0) return CPU_AMG_EZERO_DIAG;
  return 0;
}

/* Level 0: room for A in double, or the caller's arrays where
 * h->borrowed says so, checking every row for an entry; *f says what
 * level_prepare's diagonals() still copies in (f->values NULL: nothing). */
static int finest(cpu_amg *h, int32_t n, const int32_t *rp, const int32_t *ci, const void *values,
                  int f64, fill0 *f, int32_t *bad) {
  for (int32_t i = 0; i < n; i++)
    if (rp[i + 1] == rp[i]) {
      *bad = i;
      return CPU_AMG_EEMPTY_ROW;
    }
  csr *A = &h->lev[0].A;
  A->n = A->m = n;
  *f = (fill0){values, f64, NULL};
  if (h->borrowed) {
    /* (cast: level 0 is only ever read) */
    A->rp = (int32_t *)rp, A->ci = (int32_t *)ci;
    if (h->borrowed == 2) {
      A->v = (double *)values;
      f->values = NULL;
      return 0;
    }
    if (!(A->v = amg_alloc(&h->mem, (size_t)rp[n], sizeof *A->v))) return CPU_AMG_ENOMEM;
    return 0;
  }
  if (amg_csr_alloc(&h->mem, A, n, n, rp[n])) return CPU_AMG_ENOMEM;
  memcpy(A->rp, rp, ((size_t)n + 1) * sizeof *rp);
  f->ci = ci;
  return 0;
}

int cpu_amg_setup(int32_t n, const int32_t *row_ptr, const int32_t *col_idx, const void *values,
                  int values_f64, const cpu_amg_opts *o, cpu_amg **out, int32_t *bad_row) {
  *out = NULL;
  *bad_row = -1;
  cpu_amg *h = calloc(1, sizeof *h);
  if (!h) return CPU_AMG_ENOMEM;
  h->smoother = o->smoother;
  h->cheb_degree = o->cheb_degree > 0 ? o->cheb_degree : 2;
  h->mem.nth = o->nthreads;
  h->mem.max_bytes = o->max_bytes;
  h->borrowed = o->borrow ? (values_f64 ? 2 : 1) : 0;
  h->mem.bytes = sizeof *h;
  double theta = o->theta > 0 ? o->theta : 0.08;
  int maxlev = o->max_levels > 0 && o->max_levels < CPU_AMG_MAX_LEVELS ? o->max_levels
                                                                     : CPU_AMG_MAX_LEVELS;
  int32_t coarse = o->coarse_size > 0 ? o->coarse_size : 500;
  /* STEP(k, call): call, its time added to h->ms[k] */
#define STEP(k, call) (t0 = omp_get_wtime(), r_ = (call), h->ms[k] += (omp_get_wtime() - t0) * 1e3, r_)
  double t0;
  int r_;
  fill0 f0;
  int rc = STEP(CPU_AMG_T_FINEST, finest(h, n, row_ptr, col_idx, values, values_f64, &f0, bad_row));
  h->nlev = 1;
  int32_t *agg = NULL;
  if (rc) goto fail;
  for (int l = 0;; l++) {
    level *L = &h->lev[l];
    if ((rc = STEP(CPU_AMG_T_DIAG,
                   level_prepare(h, l, l == 0 && f0.values ? &f0 : NULL, bad_row))))
      goto fail;
    if (L->A.n <= coarse || l + 1 >= maxlev) break;
    agg = amg_alloc(&h->mem, (size_t)L->A.n, sizeof *agg);
    if (!agg) {
      rc = CPU_AMG_ENOMEM;
      goto fail;
    }
    int32_t na = 0;
    if ((rc = STEP(CPU_AMG_T_AGGREGATE, aggregate(h, &L->A, L->dinv, theta, agg, &na)))) goto fail;
    theta /= 2; /* see cpu_amg.h, step 1 */
    /* Less than a tenth fewer rows: more levels would cost without helping. */
    if (na == 0 || na > L->A.n - L->A.n / 10) {
      h->mem.bytes -= (size_t)L->A.n * sizeof *agg;
      free(agg);
      agg = NULL;
      break;
    }
    t0 = omp_get_wtime();
    L->rho = l == 0 && o->rho0 > 0 ? o->rho0 : spectral_radius(h, L);
    h->ms[CPU_AMG_T_RHO] += (omp_get_wtime() - t0) * 1e3;
    csr AP = {0};
    if ((rc = STEP(CPU_AMG_T_PROLONG, amg_prolongator(&h->mem, L, agg, na, &L->P))) ||
        (rc = STEP(CPU_AMG_T_TRANSPOSE, amg_transpose(&h->mem, &L->P, &L->R))) ||
        (rc = STEP(CPU_AMG_T_AP, amg_spgemm(&h->mem, &L->A, &L->P, &AP))) ||
        (rc = STEP(CPU_AMG_T_RAP, amg_spgemm(&h->mem, &L->R, &AP, &h->lev[l + 1].A)))) {
      amg_csr_free(&AP);
      goto fail;
    }
    h->mem.bytes -= ((size_t)AP.n + 1) * sizeof *AP.rp + (size_t)AP.rp[AP.n] * (sizeof *AP.ci + sizeof *AP.v);
    amg_csr_free(&AP);
    h->mem.bytes -= (size_t)L->A.n * sizeof *agg;
    free(agg);
    agg = NULL;
    h->nlev = l + 2;
  }
  level *C = &h->lev[h->nlev - 1];
  if (C->A.n <= DENSE_MAX && (rc = STEP(CPU_AMG_T_FACTOR, factor(h, &C->A)))) goto fail;
  t0 = omp_get_wtime();
  if (!h->lu) C->rho = spectral_radius(h, C); /* its Chebyshev smoothing needs it */
  h->ms[CPU_AMG_T_RHO] += (omp_get_wtime() - t0) * 1e3;
#undef STEP
  *out = h;
  return 0;
fail:
  free(agg);
  cpu_amg_free(h);
  return rc;
}

int cpu_amg_levels(const cpu_amg *h) { return h->nlev; }

void cpu_amg_level(const cpu_amg *h, int l, cpu_amg_level_info *out) {
  const level *L = &h->lev[l];
  memset(out, 0, sizeof *out);
  out->rows = L->A.n;
  out->nnz = L->A.rp ? L->A.rp[L->A.n] : 0;
  if (l < h->nlev - 1) {
    out->p_rows = L->P.n, out->p_cols = L->P.m;
    out->p_nnz = L->P.rp[L->P.n];
  }
  out->rho = L->rho;
}

int cpu_amg_matrix(const cpu_amg *h, int l, int which, cpu_amg_csr *out) {
  memset(out, 0, sizeof *out);
  if (l < 0 || l >= h->nlev || which < CPU_AMG_A || which > CPU_AMG_R) return -1;
  if (which != CPU_AMG_A && l == h->nlev - 1) return -1;
  const level *L = &h->lev[l];
  const csr *m = which == CPU_AMG_A ? &L->A : which == CPU_AMG_P ? &L->P : &L->R;
  out->rows = m->n, out->cols = m->m;
  out->nnz = m->rp[m->n];
  out->row_ptr = m->rp, out->col_idx = m->ci, out->values = m->v;
  return 0;
}

const double *cpu_amg_dinv(const cpu_amg *h, int l) {
  return l >= 0 && l < h->nlev ? h->lev[l].dinv : NULL;
}

const double *cpu_amg_dl1inv(const cpu_amg *h, int l) {
  return l >= 0 && l < h->nlev ? h->lev[l].dl1inv : NULL;
}

void cpu_amg_cycle(const cpu_amg *h, cpu_amg_cycle_info *out) {
  out->smoother = h->smoother;
  out->cheb_degree = h->cheb_degree;
  out->cheb_ratio = CHEB_RATIO;
}

int32_t cpu_amg_coarse_rows(const cpu_amg *h) { return h->lu ? h->nc : 0; }

/* LAPACK's, from OpenBLAS (which gkc_cpu links for sgemm). */
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work,
                    const int *lwork, int *info);

/* inv = A^-1 of the coarsest level by LAPACK (blocked, OpenBLAS's
 * threads): the row-major A read as column-major is A^T, and inv(A^T)
 * column-major is inv(A) row-major.  0, or -1 when A is singular or
 * memory is short (the caller then goes column by column through h->lu). */
static int lapack_inverse(const cpu_amg *h, double *inv) {
  const csr *A = &h->lev[h->nlev - 1].A;
  int n = (int)h->nc, info = 0, lwork = -1;
  double wq = 0;
  memset(inv, 0, (size_t)n * (size_t)n * sizeof *inv);
  for (int32_t i = 0; i < n; i++)
    for (int32_t t = A->rp[i]; t < A->rp[i + 1]; t++) inv[(size_t)i * n + A->ci[t]] += A->v[t];
  int *ipiv = malloc((size_t)n * sizeof *ipiv);
  if (!ipiv) return -1;
  dgetrf_(&n, &n, inv, &n, ipiv, &info);
  if (info == 0) dgetri_(&n, inv, &n, ipiv, &wq, &lwork, &info); /* the work size */
  double *work = NULL;
  if (info == 0) {
    lwork = wq >= n ? (int)wq : n;
    work = malloc((size_t)lwork * sizeof *work);
    if (work) dgetri_(&n, inv, &n, ipiv, work, &lwork, &info);
  }
  int ok = info == 0 && work;
  free(work);
  free(ipiv);
  for (size_t k = 0; ok && k < (size_t)n * (size_t)n; k++) ok = isfinite(inv[k]);
  return ok ? 0 : -1;
}

/* The coarsest inverse for the GPU's cycle (a dense product there).  By
 * LAPACK: ~1 ms for 500 rows, where the lu_solve of each column below took
 * 8-16 ms on 16 threads (H200 host; a small matrix's whole setup is a few
 * ms more).  A singular coarse matrix (an indefinite A) goes through h->lu,
 * whose solve leaves the zero pivots' components at 0, as the CPU cycle
 * does. */
void cpu_amg_coarse_inverse(const cpu_amg *h, double *inv) {
  if (lapack_inverse(h, inv) == 0) return;
  int32_t n = h->nc;
  int nth = h->mem.nth > 0 ? h->mem.nth : omp_get_max_threads();
  /* column j = lu_solve(e_j), written transposed into the row-major inverse */
#pragma omp parallel num_threads(n >= 64 ? nth : 1)
  {
    double *e = malloc((size_t)n * 2 * sizeof *e);
#pragma omp for schedule(dynamic, 8)
    for (int32_t j = 0; j < n; j++) {
      if (!e) {
        for (int32_t i = 0; i < n; i++) inv[(size_t)i * n + j] = NAN; /* seen as non_finite */
        continue;
      }
      memset(e, 0, (size_t)n * sizeof *e);
      e[j] = 1;
      lu_solve(h, e, e + n);
      for (int32_t i = 0; i < n; i++) inv[(size_t)i * n + j] = e[n + i];
    }
    free(e);
  }
}

double cpu_amg_step_ms(const cpu_amg *h, cpu_amg_step step) {
  return step >= 0 && step < CPU_AMG_T_STEPS ? h->ms[step] : 0;
}

size_t cpu_amg_bytes(const cpu_amg *h) { return h->mem.bytes; }

void cpu_amg_free(cpu_amg *h) {
  if (!h) return;
  if (h->borrowed) { /* not ours to free */
    h->lev[0].A.rp = h->lev[0].A.ci = NULL;
    if (h->borrowed == 2) h->lev[0].A.v = NULL;
  }
  for (int l = 0; l < CPU_AMG_MAX_LEVELS; l++) {
    level *L = &h->lev[l];
    amg_csr_free(&L->A), amg_csr_free(&L->P), amg_csr_free(&L->R);
    free(L->dinv); /* the level's vectors are one allocation */
  }
  free(h->lu);
  free(h->piv);
  free(h);
}
