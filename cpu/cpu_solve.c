/* cpu_solve.c: CG, Jacobi-preconditioned CG and BiCGSTAB in double on the
 * CPU (see cpu_solve.h).  Written from the textbook recurrences (Saad,
 * "Iterative Methods for Sparse Linear Systems", algorithms 6.18, 9.1 and
 * 7.7); every vector update that is followed by a norm computes it in the
 * same pass. */
#include "cpu_solve.h"

#include "cpu_amg.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Below this many rows one thread does it all: a parallel region costs a
 * few microseconds, more than a short vector pass. */
enum { PAR_MIN = 16384 };

typedef struct {
  int32_t n;
  const int32_t *rp, *ci;
  const float *v;   /* float32 values, or NULL */
  const double *vd; /* float64 values, or NULL */
  int nth;
  int f32; /* precision fp32: every stored vector element rounded to float32 */
} mat;

/* A's entry j, exact in double either way. */
static inline double val(const mat *A, int32_t j) { return A->vd ? A->vd[j] : (double)A->v[j]; }

/* A vector element as stored. */
static inline double st(const mat *A, double v) { return A->f32 ? (double)(float)v : v; }

static int threads(const mat *A) {
  if (A->n < PAR_MIN) return 1;
  return A->nth > 0 ? A->nth : omp_get_max_threads();
}

/* y = A x; a loop per value type, so that neither pays a branch per entry */
static void spmv(const mat *A, const double *x, double *y) {
  if (A->vd) {
#pragma omp parallel for num_threads(threads(A)) schedule(static)
    for (int32_t i = 0; i < A->n; i++) {
      double s = 0;
      for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) s += A->vd[j] * x[A->ci[j]];
      y[i] = st(A, s);
    }
    return;
  }
#pragma omp parallel for num_threads(threads(A)) schedule(static)
  for (int32_t i = 0; i < A->n; i++) {
    double s = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++) s += (double)A->v[j] * x[A->ci[j]];
    y[i] = st(A, s);
  }
}

static double dot(const mat *A, const double *x, const double *y) {
  double s = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : s) schedule(static)
  for (int32_t i = 0; i < A->n; i++) s += x[i] * y[i];
  return s;
}

/* x += a p; r -= a q; returns r.r */
static double update_xr(const mat *A, double a, const double *p, const double *q, double *x,
                        double *r) {
  double s = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : s) schedule(static)
  for (int32_t i = 0; i < A->n; i++) {
    x[i] = st(A, x[i] + a * p[i]);
    r[i] = st(A, r[i] - a * q[i]);
    s += r[i] * r[i];
  }
  return s;
}

/* y = x + b y */
static void xpby(const mat *A, const double *x, double b, double *y) {
#pragma omp parallel for num_threads(threads(A)) schedule(static)
  for (int32_t i = 0; i < A->n; i++) y[i] = st(A, x[i] + b * y[i]);
}

/* z = dinv .* r; returns r.z */
static double jacobi(const mat *A, const double *dinv, const double *r, double *z) {
  double s = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : s) schedule(static)
  for (int32_t i = 0; i < A->n; i++) {
    z[i] = st(A, dinv[i] * r[i]);
    s += r[i] * z[i];
  }
  return s;
}

/* The preconditioner: Jacobi's inverse diagonal, an AMG hierarchy, or
 * neither (M = I). */
typedef struct {
  const double *dinv;
  cpu_amg *amg;
} prec;

/* z = M^-1 r (stored), returns r.z; M = I: z is not written, r.r returned. */
static double precondition(const mat *A, const prec *M, const double *r, double *z) {
  if (M->dinv) return jacobi(A, M->dinv, r, z);
  if (!M->amg) return dot(A, r, r);
  cpu_amg_apply(M->amg, r, z);
  double s = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : s) schedule(static)
  for (int32_t i = 0; i < A->n; i++) {
    z[i] = st(A, z[i]);
    s += r[i] * z[i];
  }
  return s;
}

/* The inverse diagonal (repeated entries add up); the first row whose
 * diagonal is zero or not finite, or -1. */
static int32_t inv_diag(const mat *A, double *dinv) {
  for (int32_t i = 0; i < A->n; i++) {
    double d = 0;
    for (int32_t j = A->rp[i]; j < A->rp[i + 1]; j++)
      if (A->ci[j] == i) d += val(A, j);
    if (d == 0 || !isfinite(d)) return i;
    dinv[i] = st(A, 1.0 / d);
  }
  return -1;
}

typedef struct {
  const mat *A;
  const cpu_solve_opts *o;
  double bn, tol;
  int64_t it;
} run;

/* Records iteration it's residual norm; the reason to stop, or -1. */
static int record(run *s, double rn) {
  s->it++;
  if (s->o->history) s->o->history[s->it - 1] = rn / s->bn;
  if (!isfinite(rn)) return CPU_SOLVE_NON_FINITE;
  if (rn <= s->tol) return CPU_SOLVE_CONVERGED;
  return -1;
}

static int poll(run *s) {
  return s->it > 0 && s->o->poll ? s->o->poll(s->o->poll_arg) : 0;
}

/* CG, preconditioned unless M is empty.  r holds b - A x0 on entry. */
static int cg(run *s, const prec *M, double *x, double *r, double *p, double *q, double *z) {
  const mat *A = s->A;
  int pre = M->dinv || M->amg;
  double rz = precondition(A, M, r, z);
  memcpy(p, pre ? z : r, (size_t)A->n * sizeof *p);
  while (s->it < s->o->max_iter) {
    int why = poll(s);
    if (why) return why;
    spmv(A, p, q);
    double pq = dot(A, p, q);
    if (!isfinite(pq)) return CPU_SOLVE_NON_FINITE;
    if (pq <= 0) return CPU_SOLVE_BREAKDOWN;
    double alpha = rz / pq;
    double rr = update_xr(A, alpha, p, q, x, r);
    if ((why = record(s, sqrt(rr))) >= 0) return why;
    double rz_new = pre ? precondition(A, M, r, z) : rr;
    if (!isfinite(rz_new)) return CPU_SOLVE_NON_FINITE;
    if (rz_new <= 0) return CPU_SOLVE_BREAKDOWN;
    xpby(A, pre ? z : r, rz_new / rz, p);
    rz = rz_new;
  }
  return CPU_SOLVE_MAX_ITER;
}

/* BiCGSTAB, right preconditioned by M unless it is empty (phat = M^-1 p and
 * shat = M^-1 s stand for p and s where they multiply A or update x).  r
 * holds b - A x0 on entry; w is scratch for 5 vectors, 7 with M. */
static int bicgstab(run *s, const prec *M, double *x, double *r, double *w) {
  const mat *A = s->A;
  size_t n = (size_t)A->n;
  double *rhat = w, *p = w + n, *v = w + 2 * n, *sv = w + 3 * n, *t = w + 4 * n;
  int pre = M->dinv || M->amg;
  double *ph = pre ? w + 5 * n : p, *sh = pre ? w + 6 * n : sv;
  memcpy(rhat, r, n * sizeof *r);
  double rhat_n = sqrt(dot(A, rhat, rhat)), rho_prev = 1, alpha = 1, omega = 1;
  int first = 1; /* p = r: on the first iteration of this call (a restart too) */
  /* rho or rhat.v this small against the vectors' norms is no direction. */
  const double tiny = 1e-30;
  while (s->it < s->o->max_iter) {
    int why = poll(s);
    if (why) return why;
    double rho = dot(A, rhat, r);
    if (!isfinite(rho)) return CPU_SOLVE_NON_FINITE;
    if (fabs(rho) <= tiny * rhat_n * sqrt(dot(A, r, r))) return CPU_SOLVE_BREAKDOWN;
    if (first) {
      memcpy(p, r, n * sizeof *p);
      first = 0;
    } else {
      double beta = rho / rho_prev * (alpha / omega);
#pragma omp parallel for num_threads(threads(A)) schedule(static)
      for (int32_t i = 0; i < A->n; i++) p[i] = st(A, r[i] + beta * (p[i] - omega * v[i]));
    }
    if (pre) precondition(A, M, p, ph);
    spmv(A, ph, v);
    double rv = dot(A, rhat, v);
    if (!isfinite(rv)) return CPU_SOLVE_NON_FINITE;
    if (fabs(rv) <= tiny * rhat_n * sqrt(dot(A, v, v))) return CPU_SOLVE_BREAKDOWN;
    alpha = rho / rv;
    double ss = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : ss) schedule(static)
    for (int32_t i = 0; i < A->n; i++) {
      sv[i] = st(A, r[i] - alpha * v[i]);
      ss += sv[i] * sv[i];
    }
    if (sqrt(ss) <= s->tol) { /* converged half way: x += alpha p */
#pragma omp parallel for num_threads(threads(A)) schedule(static)
      for (int32_t i = 0; i < A->n; i++) x[i] = st(A, x[i] + alpha * ph[i]);
      memcpy(r, sv, n * sizeof *r);
      return record(s, sqrt(ss));
    }
    if (pre) precondition(A, M, sv, sh);
    spmv(A, sh, t);
    double tt = dot(A, t, t), ts = dot(A, t, sv);
    if (!isfinite(tt) || !isfinite(ts)) return CPU_SOLVE_NON_FINITE;
    if (tt == 0) return CPU_SOLVE_BREAKDOWN;
    omega = ts / tt;
    double rr = 0;
#pragma omp parallel for num_threads(threads(A)) reduction(+ : rr) schedule(static)
    for (int32_t i = 0; i < A->n; i++) {
      x[i] = st(A, x[i] + (alpha * ph[i] + omega * sh[i]));
      r[i] = st(A, sv[i] - omega * t[i]);
      rr += r[i] * r[i];
    }
    if ((why = record(s, sqrt(rr))) >= 0) return why;
    if (omega == 0) return CPU_SOLVE_BREAKDOWN;
    rho_prev = rho;
  }
  return CPU_SOLVE_MAX_ITER;
}

/* r = b - A x in double (then stored), and ||r||. */
static double residual(const mat *A, const double *b, const double *x, double *r) {
  mat A64 = *A;
  A64.f32 = 0;
  spmv(&A64, x, r);
  for (int32_t i = 0; i < A->n; i++) r[i] = st(A, b[i] - r[i]);
  return sqrt(dot(A, r, r));
}

static double now_us(void) {
  return omp_get_wtime() * 1e6;
}

/* The AMG hierarchy for A in M->amg, timed and described in res. */
static int amg_build(const mat *A, const cpu_solve_opts *o, prec *M, cpu_solve_result *res) {
  cpu_amg_opts ao = CPU_AMG_OPTS_INIT;
  ao.nthreads = o->nthreads;
  ao.max_bytes = o->amg_max_bytes;
  double t0 = now_us();
  int rc = cpu_amg_setup(A->n, A->rp, A->ci, A->vd ? (const void *)A->vd : (const void *)A->v,
                         A->vd != NULL, &ao, &M->amg, &res->bad_row);
  res->amg_setup_us = now_us() - t0;
  switch (rc) {
    case 0: break;
    case CPU_AMG_EEMPTY_ROW: return CPU_SOLVE_EEMPTY_ROW;
    case CPU_AMG_EZERO_DIAG: return CPU_SOLVE_EZERO_DIAG;
    case CPU_AMG_ETOO_LARGE: return CPU_SOLVE_EAMG_TOO_LARGE;
    default: return CPU_SOLVE_EAMG_NOMEM;
  }
  res->levels = cpu_amg_levels(M->amg);
  res->amg_bytes = cpu_amg_bytes(M->amg);
  return 0;
}

int cpu_solve(int32_t n, const int32_t *row_ptr, const int32_t *col_idx, const void *values,
              const void *b, const void *x0, void *xout, const cpu_solve_opts *o,
              cpu_solve_result *res) {
  mat A = {n, row_ptr, col_idx, o->values_f64 ? NULL : values, o->values_f64 ? values : NULL,
           o->nthreads, o->fp32};
  int method = o->method == CPU_PCG ? CPU_CG : o->method;
  int pc = o->method == CPU_PCG ? CPU_PRECOND_JACOBI : o->precond;
  /* b, x, r, then CG's p, q (z with M, dinv with Jacobi) or BiCGSTAB's 5
   * (phat and shat with M, dinv with Jacobi) */
  size_t nv = 3 + (method == CPU_BICGSTAB ? 5 : 2) +
              (pc != CPU_PRECOND_NONE ? (method == CPU_BICGSTAB ? 2 : 1) : 0) +
              (pc == CPU_PRECOND_JACOBI);
  memset(res, 0, sizeof *res);
  res->bad_row = -1;
  double *w = malloc(nv * (size_t)n * sizeof *w);
  if (!w) return CPU_SOLVE_ENOMEM;
  double *bd = w, *x = w + n, *r = w + 2 * (size_t)n, *rest = w + 3 * (size_t)n;
  prec M = {0};
  if (pc == CPU_PRECOND_JACOBI) {
    double *dinv = w + (nv - 1) * (size_t)n;
    if ((res->bad_row = inv_diag(&A, dinv)) >= 0) {
      free(w);
      return CPU_SOLVE_EZERO_DIAG;
    }
    M.dinv = dinv;
  } else if (pc == CPU_PRECOND_AMG && o->amg) { /* built before for this A */
    M.amg = o->amg;
    res->levels = cpu_amg_levels(M.amg);
    res->amg_bytes = cpu_amg_bytes(M.amg);
  } else if (pc == CPU_PRECOND_AMG) {
    int rc = amg_build(&A, o, &M, res);
    if (rc) {
      free(w);
      return rc;
    }
  }
  const float *bf = b, *x0f = x0;
  const double *bdd = b, *x0d = x0;
  for (int32_t i = 0; i < n; i++) {
    bd[i] = o->vec_f64 ? bdd[i] : bf[i];
    x[i] = !x0 ? 0.0 : o->vec_f64 ? x0d[i] : x0f[i];
  }
  run s = {&A, o, sqrt(dot(&A, bd, bd)), 0, 0};
  s.tol = fmax(o->rtol * s.bn, o->atol);
  /* A float64 x is returned as iterated, so it is held to the tolerance
   * itself: when the recurrence's residual says converged but b - A x does
   * not, the iteration starts again from the true residual (a restart;
   * each costs a product with A) until it does, or max_iter.  A float32 x
   * is rounded after the solve, which no iteration can make up for. */
  int exact = o->vec_f64 && !o->fp32;
  int why;
  if (!isfinite(s.bn)) {
    why = CPU_SOLVE_NON_FINITE;
  } else if (s.bn == 0) { /* x = 0 solves it exactly */
    memset(x, 0, (size_t)n * sizeof *x);
    why = CPU_SOLVE_CONVERGED;
  } else {
    for (;;) {
      double rn = residual(&A, bd, x, r);
      if (!isfinite(rn)) why = CPU_SOLVE_NON_FINITE;
      else if (rn <= s.tol) why = CPU_SOLVE_CONVERGED; /* by b - A x itself */
      else if (s.it >= o->max_iter) why = CPU_SOLVE_MAX_ITER;
      else if (method == CPU_BICGSTAB) why = bicgstab(&s, &M, x, r, rest);
      else why = cg(&s, &M, x, r, rest, rest + n, rest + 2 * (size_t)n);
      /* The solvers stop on their recurrence's residual: check it once more. */
      if (rn <= s.tol || why != CPU_SOLVE_CONVERGED || !exact) break;
    }
  }
  /* The residual of the x returned (a float32 x rounded first), in double. */
  if (!o->vec_f64)
    for (int32_t i = 0; i < n; i++) x[i] = (double)(float)x[i];
  A.f32 = 0;
  spmv(&A, x, r);
  for (int32_t i = 0; i < n; i++) r[i] = bd[i] - r[i];
  res->residual = s.bn == 0 ? 0 : sqrt(dot(&A, r, r)) / s.bn;
  if (o->vec_f64) memcpy(xout, x, (size_t)n * sizeof *x);
  else
    for (int32_t i = 0; i < n; i++) ((float *)xout)[i] = (float)x[i];
  res->iterations = s.it;
  res->reason = why;
  if (M.amg && M.amg != o->amg) { /* built here: the caller's to keep, or gone */
    if (o->amg_keep) res->amg_built = M.amg;
    else cpu_amg_free(M.amg);
  }
  free(w);
  return 0;
}
