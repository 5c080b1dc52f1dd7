/* cg.c: conjugate gradients through gkcd, with the matrix and vectors resident.
 *
 * Three ways to run the same solve, to compare what a round trip costs:
 *   (default)  one request per vector operation, below;
 *   --batch    one gkc_batch request per iteration (the same six operations,
 *              the scalars resolved on gkcd from the iteration's own dots);
 *   --solve    one gkc_solve request for the whole solve (gkcd's own CG,
 *              which iterates in float64).
 * Each prints iterations/s.
 *
 * Solves A x = b for a symmetric positive definite A.  Every vector
 * operation runs on gkcd: A is uploaded once (csr_upload), b, x, r, p and q
 * live there as resident arrays, and each iteration is one spmv (q = A p,
 * written into the existing q), two dots (p.q and r.r) and three in-place
 * axpby (x += alpha p, r -= alpha q, p = r + beta p).  Only scalars cross
 * the socket until x is downloaded at the end.
 *
 * Arithmetic is float32 on gkcd (the dots return float64).  With x held in
 * float32, ||b - A x|| cannot drop below about eps32 * ||A|| ||x|| (eps32 =
 * 6e-8), relative to ||b||; the right-hand side is b = A x* with x* uniform
 * in [-1, 1], which puts that floor near 1e-7.  When the recurrence says
 * the residual is below --tol, the true residual b - A x is computed on gkcd
 * (one more spmv) and, if it is not below --tol, replaces r and restarts the
 * search direction (at most 8 times).  At the end the residual is computed
 * once more here, in double, from the downloaded x.
 *
 *   cg [--grid N | --matrix A.mtx] [--batch | --solve] [--tol T] [--max-iter N] [--socket PATH] [--json]
 *
 * --matrix: a symmetric positive definite Matrix Market file.  CG's
 * iteration count grows with A's condition number, which for matrices like
 * bcsstk13 the scale of the rows and columns inflates; so the solver works
 * on the Jacobi-scaled system D^-1/2 A D^-1/2 y = D^-1/2 b (D = diag(A)),
 * scaled here in double, and x = D^-1/2 y.  --tol applies to the scaled
 * system; the original system's residual is printed too.
 *
 * Built with GKC_CG_NO_MAIN, this file gives the solver to the resident
 * test and benchmark (which #include it).
 */
#include <errno.h>
#include <getopt.h>
#include <gkc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mtx.h"

/* --- the solver ------------------------------------------------------------------------ */

enum { CG_REQUESTS = 0, CG_BATCH = 1, CG_SOLVE = 2 };

typedef struct {
  double tol;   /* stop when ||b - A x|| / ||b|| < tol */
  int max_iter; /* CG iterations at most */
  int mode;     /* CG_REQUESTS, CG_BATCH or CG_SOLVE */
} cg_params;

#define CG_MAX_REPLACEMENTS 8

typedef struct {
  int iterations;       /* CG iterations run: 1 spmv, 2 dot, 3 axpby each */
  int replacements;     /* true-residual checks that restarted the recurrence */
  int checks;           /* true residuals computed on gkcd */
  int converged;        /* the last check on gkcd was below tol */
  double rec_residual;  /* ||r|| / ||b|| of the recurrence when CG last stopped */
  double gkcd_residual; /* ||b - A x|| / ||b|| computed on gkcd (float32) at the end */
  double true_residual; /* ||b - A x|| / ||b|| in double here, from the downloaded x */
  double setup_s;       /* csr_upload and vector uploads */
  double solve_s;       /* the iterations, checks and the download of x (solve: b and x by value) */
  double iters_per_s;   /* iterations / solve_s */
  double loop_s;        /* in the iterations' own requests only (batch and requests modes) */
  int64_t requests;     /* requests to gkcd during the solve (batches, solves) */
  char spmv_algo[32];
  char msg[256];        /* why it failed */
} cg_stats;

/* Returns 0, a gkc_error (message in st->msg), or CG_EBREAKDOWN when p.Ap
 * is not positive (A is not SPD). */
#define CG_EBREAKDOWN 1
int cg_solve(gkc_conn *c, const gkc_csr *A, const float *b, float *x, const cg_params *p,
             cg_stats *st);
/* ||b - A x|| / ||b|| in double. */
double cg_residual(const gkc_csr *A, const float *b, const float *x);
/* The 5-point Laplacian of an n x n grid (Dirichlet boundary): SPD, n^2 rows. */
int cg_laplacian(int32_t n, mtx_csr *out);
/* b = A xs (in double, rounded), xs uniform in [-1, 1] from seed. */
int cg_rhs(const gkc_csr *A, uint64_t seed, float *xs, float *b);
/* The first row with an entry whose mirror differs (relatively, by more
 * than 1e-6) or is missing, or -1 when A is symmetric.  Needs sorted
 * column indices within rows, as mtx_read_csr gives. */
int64_t cg_asymmetric(const gkc_csr *A);
/* Jacobi scaling in place: A <- D^-1/2 A D^-1/2 (in double, rounded), and
 * dinv_sqrt[i] = 1/sqrt(A_ii) for scaling b and x.  -1 with a message in
 * msg when a diagonal entry is missing or not positive (then not SPD). */
int cg_jacobi_scale(mtx_csr *A, double *dinv_sqrt, char *msg, size_t msglen);

static double cg_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double cg_residual(const gkc_csr *A, const float *b, const float *x) {
  double rr = 0, bb = 0;
  for (int32_t i = 0; i < A->rows; i++) {
    double ax = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++)
      ax += (double)A->values[j] * x[A->col_idx[j]];
    double ri = (double)b[i] - ax;
    rr += ri * ri;
    bb += (double)b[i] * b[i];
  }
  return bb > 0 ? sqrt(rr / bb) : sqrt(rr);
}

static int cg_requests(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                       const cg_params *prm, cg_stats *st);
static int cg_batch(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                    const cg_params *prm, cg_stats *st);
static int cg_by_solve(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                       const cg_params *prm, cg_stats *st);

int cg_solve(gkc_conn *c, const gkc_csr *A, const float *b, float *x, const cg_params *prm,
             cg_stats *st) {
  memset(st, 0, sizeof *st);
  switch (prm->mode) {
    case CG_BATCH: return cg_batch(c, A, b, x, prm, st);
    case CG_SOLVE: return cg_by_solve(c, A, b, x, prm, st);
    default: return cg_requests(c, A, b, x, prm, st);
  }
}

/* One gkc_solve: gkcd runs its own CG (in float64) to ||r|| <= tol ||b||. */
static int cg_by_solve(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                       const cg_params *prm, cg_stats *st) {
  uint32_t mat = 0;
  size_t nb = (size_t)A->rows * 4;
  double t0 = cg_now_s();
  int rc = gkc_csr_upload(c, A, 0, &mat, st->spmv_algo);
  if (rc) {
    snprintf(st->msg, sizeof st->msg, "csr_upload: %s: %s", gkc_errname(rc), gkc_errmsg(c));
    return rc;
  }
  st->setup_s = cg_now_s() - t0;
  gkc_solve_args a = GKC_SOLVE_ARGS_INIT;
  a.matrix = mat, a.b = gkc_ref_mem(b, nb), a.rtol = prm->tol, a.max_iter = prm->max_iter;
  gkc_out out = gkc_out_mem(x, nb);
  gkc_solve_result res;
  t0 = cg_now_s();
  rc = gkc_solve(c, &a, &out, &res, NULL);
  st->solve_s = cg_now_s() - t0;
  if (rc) {
    snprintf(st->msg, sizeof st->msg, "solve: %s: %s", gkc_errname(rc), gkc_errmsg(c));
  } else if (strcmp(res.reason, "breakdown") == 0) {
    snprintf(st->msg, sizeof st->msg, "gkcd's CG broke down after %lld iterations: A is not "
             "symmetric positive definite", (long long)res.iterations);
    rc = CG_EBREAKDOWN;
  } else {
    st->requests = 1;
    st->iterations = (int)res.iterations;
    st->checks = 1;
    st->converged = res.converged && res.residual < prm->tol;
    st->rec_residual = st->gkcd_residual = res.residual;
    st->iters_per_s = st->solve_s > 0 ? st->iterations / st->solve_s : 0;
    st->true_residual = cg_residual(A, b, x);
  }
  gkc_release_matrix(c, mat);
  return rc;
}

/* One gkc_batch per iteration: q = A p, p.q, x += (rho / p.q) p, r -= (rho /
 * p.q) q, r.r, p = r + (r.r / rho) p, with rho = r.r from the previous
 * batch's reply.  Then the true residual as cg_requests checks it. */
static int cg_batch(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                    const cg_params *prm, cg_stats *st) {
  int32_t n = A->rows;
  size_t nb = (size_t)n * 4;
  uint32_t mat = 0, h[5] = {0}; /* b, x, r, p, q */
  int rc = 0, nh = 0;
  const char *step = "csr_upload";
  float *zeros = calloc((size_t)n, sizeof *zeros);
  if (!zeros) {
    snprintf(st->msg, sizeof st->msg, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  double rho = 0;
  for (int32_t i = 0; i < n; i++) rho += (double)b[i] * b[i];
  double bnorm = sqrt(rho) > 0 ? sqrt(rho) : 1;
  double t0 = cg_now_s();
  if ((rc = gkc_csr_upload(c, A, 0, &mat, st->spmv_algo))) goto fail;
  step = "upload";
  const float *init[5] = {b, zeros, b, b, zeros};
  for (; nh < 5; nh++)
    if ((rc = gkc_upload(c, gkc_ref_mem(init[nh], nb), GKC_F32, 0, &h[nh]))) goto fail;
  uint32_t hb = h[0], hx = h[1], hr = h[2], hp = h[3], hq = h[4];
  st->setup_s = cg_now_s() - t0;
  t0 = cg_now_s();
  gkc_scalar one = gkc_scalar_num(1), zero = gkc_scalar_num(0);
  gkc_batch_result br;
  for (;;) {
    if (sqrt(rho) / bnorm < prm->tol || st->iterations >= prm->max_iter) {
      st->rec_residual = sqrt(rho) / bnorm;
      /* r = b - A x, then r.r: the truth, as the recurrence drifts in float32. */
      gkc_step chk[] = {gkc_step_spmv(mat, gkc_scalar_num(-1), hx, one, hb, hr),
                        gkc_step_dot(hr, hr)};
      step = "batch (true residual)";
      if ((rc = gkc_batch(c, chk, 2, &br, NULL))) goto fail;
      st->requests++;
      st->checks++;
      rho = br.value[1];
      st->gkcd_residual = sqrt(rho) / bnorm;
      if (st->gkcd_residual < prm->tol) {
        st->converged = 1;
        break;
      }
      if (st->iterations >= prm->max_iter || st->replacements == CG_MAX_REPLACEMENTS) break;
      st->replacements++;
      gkc_step restart = gkc_step_axpby(one, hr, zero, hp, hp); /* p = r */
      step = "batch (restart)";
      if ((rc = gkc_batch(c, &restart, 1, &br, NULL))) goto fail;
      st->requests++;
    }
    gkc_step it[] = {
        gkc_step_spmv(mat, one, hp, zero, 0, hq),
        gkc_step_dot(hp, hq),
        gkc_step_axpby(gkc_scalar_ref(-1, 1, (float)rho), hp, one, hx, hx),
        gkc_step_axpby(gkc_scalar_ref(-1, 1, (float)-rho), hq, one, hr, hr),
        gkc_step_dot(hr, hr),
        gkc_step_axpby(one, hr, gkc_scalar_ref(4, -1, (float)(1 / rho)), hp, hp)};
    step = "batch";
    double tb = cg_now_s();
    rc = gkc_batch(c, it, 6, &br, NULL);
    st->loop_s += cg_now_s() - tb;
    /* A p.q of 0 makes the scalars of step 2 infinite: gkcd stops there. */
    if (rc == GKC_EINVALID_ARGUMENT && strstr(gkc_errmsg(c), "step 2 ")) {
      snprintf(st->msg, sizeof st->msg, "p.Ap = 0 at iteration %d: A is not symmetric positive "
               "definite (or the iteration broke down)", st->iterations + 1);
      rc = CG_EBREAKDOWN;
      goto done;
    }
    if (rc) goto fail;
    if (!(br.value[1] > 0)) {
      snprintf(st->msg, sizeof st->msg, "p.Ap = %g at iteration %d: A is not symmetric positive "
               "definite (or the iteration broke down)", br.value[1], st->iterations + 1);
      rc = CG_EBREAKDOWN;
      goto done;
    }
    st->requests++;
    st->iterations++;
    rho = br.value[4];
  }
  step = "download";
  if ((rc = gkc_download(c, hx, x, nb))) goto fail;
  st->solve_s = cg_now_s() - t0;
  st->iters_per_s = st->solve_s > 0 ? st->iterations / st->solve_s : 0;
  st->true_residual = cg_residual(A, b, x);
  goto done;
fail:
  snprintf(st->msg, sizeof st->msg, "%s: %s: %s", step, gkc_errname(rc), gkc_errmsg(c));
done:
  while (nh > 0) gkc_release(c, h[--nh]);
  if (mat) gkc_release_matrix(c, mat);
  free(zeros);
  return rc;
}

/* One request per vector operation. */
static int cg_requests(gkc_conn *c, const gkc_csr *A, const float *b, float *x,
                       const cg_params *prm, cg_stats *st) {
  int32_t n = A->rows;
  size_t nb = (size_t)n * 4;
  uint32_t mat = 0, hb = 0, hx = 0, hr = 0, hp = 0, hq = 0;
  int have_mat = 0, have_b = 0, have_x = 0, have_r = 0, have_p = 0, have_q = 0;
  int rc = 0;
  const char *step = "csr_upload";
  float *zeros = calloc((size_t)n, sizeof *zeros);
  if (!zeros) {
    snprintf(st->msg, sizeof st->msg, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  double bnorm = 0;
  for (int32_t i = 0; i < n; i++) bnorm += (double)b[i] * b[i];
  bnorm = sqrt(bnorm);
  if (bnorm == 0) bnorm = 1;

  double t0 = cg_now_s();
  if ((rc = gkc_csr_upload(c, A, 0, &mat, NULL))) goto fail;
  have_mat = 1;
  step = "upload";
  if ((rc = gkc_upload(c, gkc_ref_mem(b, nb), GKC_F32, 0, &hb))) goto fail;
  have_b = 1;
  if ((rc = gkc_upload(c, gkc_ref_mem(zeros, nb), GKC_F32, 0, &hx))) goto fail; /* x0 = 0 */
  have_x = 1;
  if ((rc = gkc_upload(c, gkc_ref_handle(hb, nb), GKC_F32, 0, &hr))) goto fail; /* r = b */
  have_r = 1;
  if ((rc = gkc_upload(c, gkc_ref_handle(hb, nb), GKC_F32, 0, &hp))) goto fail; /* p = r */
  have_p = 1;
  st->setup_s = cg_now_s() - t0;

  t0 = cg_now_s();
  gkc_info info;
  double rr;
  step = "dot";
  if ((rc = gkc_dot(c, gkc_ref_handle(hr, nb), gkc_ref_handle(hr, nb), &rr, NULL))) goto fail;
  st->requests++;
  gkc_spmv_args q = GKC_SPMV_ARGS_INIT; /* q = A p */
  q.use_matrix = 1;
  q.matrix = mat;
  q.x = gkc_ref_handle(hp, nb);
  for (;;) {
    if (sqrt(rr) / bnorm < prm->tol || st->iterations >= prm->max_iter) {
      st->rec_residual = sqrt(rr) / bnorm;
      /* The recurrence's r drifts from b - A x in float32: check the truth. */
      gkc_spmv_args t = GKC_SPMV_ARGS_INIT; /* r = b - A x */
      t.use_matrix = 1;
      t.matrix = mat;
      t.x = gkc_ref_handle(hx, nb);
      t.y = gkc_ref_handle(hb, nb);
      t.alpha = -1.0f, t.beta = 1.0f;
      gkc_out o = gkc_out_handle(hr);
      step = "spmv (true residual)";
      if ((rc = gkc_spmv_ref(c, &t, &o, NULL))) goto fail;
      step = "dot";
      if ((rc = gkc_dot(c, gkc_ref_handle(hr, nb), gkc_ref_handle(hr, nb), &rr, NULL))) goto fail;
      st->requests += 2;
      st->checks++;
      st->gkcd_residual = sqrt(rr) / bnorm;
      if (st->gkcd_residual < prm->tol) {
        st->converged = 1;
        break;
      }
      if (st->iterations >= prm->max_iter || st->replacements == CG_MAX_REPLACEMENTS) break;
      st->replacements++;
      gkc_out po = gkc_out_handle(hp); /* restart: p = r */
      step = "axpby";
      if ((rc = gkc_axpby(c, 1.0f, gkc_ref_handle(hr, nb), 0.0f, gkc_ref_handle(hp, nb), &po,
                          NULL)))
        goto fail;
      st->requests++;
    }
    /* q = A p: into a new handle the first time, then into that one. */
    double tb = cg_now_s();
    gkc_out qo = have_q ? gkc_out_handle(hq) : gkc_out_new_handle();
    step = "spmv";
    if ((rc = gkc_spmv_ref(c, &q, &qo, &info))) goto fail;
    if (!have_q) {
      hq = qo.handle, have_q = 1;
      snprintf(st->spmv_algo, sizeof st->spmv_algo, "%s", info.algo);
    }
    double pq;
    step = "dot";
    if ((rc = gkc_dot(c, gkc_ref_handle(hp, nb), gkc_ref_handle(hq, nb), &pq, NULL))) goto fail;
    if (!(pq > 0) || !isfinite(pq)) {
      snprintf(st->msg, sizeof st->msg, "p.Ap = %g at iteration %d: A is not symmetric positive "
               "definite (or the iteration broke down)", pq, st->iterations + 1);
      rc = CG_EBREAKDOWN;
      goto done;
    }
    float alpha = (float)(rr / pq);
    gkc_out xo = gkc_out_handle(hx), ro = gkc_out_handle(hr), po = gkc_out_handle(hp);
    step = "axpby";
    if ((rc = gkc_axpby(c, alpha, gkc_ref_handle(hp, nb), 1.0f, gkc_ref_handle(hx, nb), &xo,
                        NULL)) ||
        (rc = gkc_axpby(c, -alpha, gkc_ref_handle(hq, nb), 1.0f, gkc_ref_handle(hr, nb), &ro,
                        NULL)))
      goto fail;
    double rr_new;
    step = "dot";
    if ((rc = gkc_dot(c, gkc_ref_handle(hr, nb), gkc_ref_handle(hr, nb), &rr_new, NULL)))
      goto fail;
    float beta = (float)(rr_new / rr);
    step = "axpby";
    if ((rc = gkc_axpby(c, 1.0f, gkc_ref_handle(hr, nb), beta, gkc_ref_handle(hp, nb), &po,
                        NULL)))
      goto fail;
    st->loop_s += cg_now_s() - tb;
    st->requests += 6;
    st->iterations++;
    rr = rr_new;
  }
  step = "download";
  if ((rc = gkc_download(c, hx, x, nb))) goto fail;
  st->solve_s = cg_now_s() - t0;
  st->iters_per_s = st->solve_s > 0 ? st->iterations / st->solve_s : 0;
  st->true_residual = cg_residual(A, b, x);
  goto done;
fail:
  snprintf(st->msg, sizeof st->msg, "%s: %s: %s", step, gkc_errname(rc), gkc_errmsg(c));
done:
  /* Closing the connection would free them too. */
  if (have_q) gkc_release(c, hq);
  if (have_p) gkc_release(c, hp);
  if (have_r) gkc_release(c, hr);
  if (have_x) gkc_release(c, hx);
  if (have_b) gkc_release(c, hb);
  if (have_mat) gkc_release_matrix(c, mat);
  free(zeros);
  return rc;
}

int cg_laplacian(int32_t n, mtx_csr *m) {
  memset(m, 0, sizeof *m);
  int64_t rows = (int64_t)n * n, cap = 5 * rows;
  if (n < 1 || cap > INT32_MAX) return -1;
  m->rows = m->cols = (int32_t)rows;
  m->row_ptr = malloc(((size_t)rows + 1) * sizeof *m->row_ptr);
  m->col_idx = malloc((size_t)cap * sizeof *m->col_idx);
  m->values = malloc((size_t)cap * sizeof *m->values);
  if (!m->row_ptr || !m->col_idx || !m->values) {
    mtx_free(m);
    return -1;
  }
  int32_t k = 0;
  m->row_ptr[0] = 0;
  for (int32_t i = 0; i < n; i++)
    for (int32_t j = 0; j < n; j++) {
      int32_t r = i * n + j;
#define CG_PUT(col, v) (m->col_idx[k] = (col), m->values[k++] = (v))
      if (i > 0) CG_PUT(r - n, -1.0f);
      if (j > 0) CG_PUT(r - 1, -1.0f);
      CG_PUT(r, 4.0f);
      if (j < n - 1) CG_PUT(r + 1, -1.0f);
      if (i < n - 1) CG_PUT(r + n, -1.0f);
#undef CG_PUT
      m->row_ptr[r + 1] = k;
    }
  m->nnz = k;
  return 0;
}

int cg_rhs(const gkc_csr *A, uint64_t seed, float *xs, float *b) {
  uint64_t s = seed;
  for (int32_t i = 0; i < A->cols; i++) { /* splitmix64 */
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    xs[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  for (int32_t i = 0; i < A->rows; i++) {
    double acc = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++)
      acc += (double)A->values[j] * xs[A->col_idx[j]];
    b[i] = (float)acc;
  }
  return 0;
}

int64_t cg_asymmetric(const gkc_csr *A) {
  if (A->rows != A->cols) return 0;
  for (int32_t i = 0; i < A->rows; i++)
    for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
      int32_t j = A->col_idx[k], lo = A->row_ptr[j], hi = A->row_ptr[j + 1];
      while (lo < hi) { /* A[j][i] by binary search in row j */
        int32_t mid = lo + (hi - lo) / 2;
        if (A->col_idx[mid] < i) lo = mid + 1;
        else hi = mid;
      }
      if (lo == A->row_ptr[j + 1] || A->col_idx[lo] != i ||
          fabs((double)A->values[lo] - A->values[k]) > 1e-6 * fabs((double)A->values[k]))
        return i;
    }
  return -1;
}

int cg_jacobi_scale(mtx_csr *A, double *dinv_sqrt, char *msg, size_t msglen) {
  if (A->rows != A->cols) {
    snprintf(msg, msglen, "the matrix is %d x %d, not square", A->rows, A->cols);
    return -1;
  }
  for (int32_t i = 0; i < A->rows; i++) {
    double d = 0;
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++)
      if (A->col_idx[j] == i) d += A->values[j];
    if (!(d > 0)) {
      snprintf(msg, msglen, "row %d has diagonal %g: not positive definite", i + 1, d);
      return -1;
    }
    dinv_sqrt[i] = 1.0 / sqrt(d);
  }
  for (int32_t i = 0; i < A->rows; i++)
    for (int32_t j = A->row_ptr[i]; j < A->row_ptr[i + 1]; j++)
      A->values[j] = (float)(A->values[j] * dinv_sqrt[i] * dinv_sqrt[A->col_idx[j]]);
  return 0;
}

#ifndef GKC_CG_NO_MAIN

/* --- the program ----------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "Usage: cg [--grid N | --matrix A.mtx] [OPTIONS]\n"
          "Solves A x = b by conjugate gradients on gkcd, A and the vectors resident\n"
          "there: per iteration one spmv, two dots and three in-place axpby.\n"
          "b = A x* with x* uniform in [-1, 1] (seed 1), so x* is the solution.\n\n"
          "Options:\n"
          "  --grid N        A = the 5-point Laplacian of an N x N grid (default 64)\n"
          "  --matrix F      A from a symmetric positive definite Matrix Market file,\n"
          "                  solved after Jacobi scaling: D^-1/2 A D^-1/2 y = D^-1/2 b,\n"
          "                  x = D^-1/2 y (D = diag(A)); --tol applies to that system\n"
          "  --tol T         stop when ||b - A x|| / ||b|| < T (default 1e-5; float32\n"
          "                  reaches about 1e-6, see the source)\n"
          "  --max-iter N    at most N iterations (default 20000)\n"
          "  --batch         one gkc_batch request per iteration (the same six\n"
          "                  operations, scalars resolved on gkcd)\n"
          "  --solve         one gkc_solve request for the whole solve (gkcd's CG, in\n"
          "                  float64; --tol is its rtol)\n"
          "  --socket PATH   gkcd's socket (default: $GKC_SOCKET, else\n"
          "                  $XDG_RUNTIME_DIR/gkcd.sock, else /run/gkcd/gkcd.sock)\n"
          "  --json          print one JSON object\n"
          "  -h, --help      show this help\n"
          "Exit status: 0 converged, 1 not converged or an error, 2 a usage error.\n");
}

static int bad(const char *fmt, const char *arg) {
  fprintf(stderr, "cg: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry 'cg --help'.\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *matrix = NULL, *sock = NULL;
  long grid = 64;
  cg_params prm = {1e-5, 20000, CG_REQUESTS};
  static const char *const mode_names[] = {"requests", "batch", "solve"};
  int json = 0;
  static const struct option opts[] = {
      {"grid", required_argument, 0, 'g'},     {"matrix", required_argument, 0, 'm'},
      {"tol", required_argument, 0, 't'},      {"max-iter", required_argument, 0, 'i'},
      {"socket", required_argument, 0, 's'},   {"json", no_argument, 0, 'j'},
      {"batch", no_argument, 0, 'B'},          {"solve", no_argument, 0, 'S'},
      {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
  int o;
  char *end;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (o) {
      case 'g':
        errno = 0;
        grid = strtol(optarg, &end, 10);
        if (errno || *end || grid < 1 || grid > 20000) return bad("invalid --grid '%s': expected 1 to 20000", optarg);
        break;
      case 'm': matrix = optarg; break;
      case 't':
        prm.tol = strtod(optarg, &end);
        if (*end || !(prm.tol > 0) || prm.tol >= 1) return bad("invalid --tol '%s': expected a number in (0, 1)", optarg);
        break;
      case 'i':
        errno = 0;
        prm.max_iter = (int)strtol(optarg, &end, 10);
        if (errno || *end || prm.max_iter < 1) return bad("invalid --max-iter '%s': expected a positive integer", optarg);
        break;
      case 's': sock = optarg; break;
      case 'B':
      case 'S':
        if (prm.mode != CG_REQUESTS && prm.mode != (o == 'B' ? CG_BATCH : CG_SOLVE))
          return bad("%s", "--batch and --solve cannot be combined: give one of them");
        prm.mode = o == 'B' ? CG_BATCH : CG_SOLVE;
        break;
      case 'j': json = 1; break;
      case 'h': usage(stdout); return 0;
      default: fprintf(stderr, "Try 'cg --help'.\n"); return 2;
    }
  }
  if (optind < argc) return bad("unexpected argument '%s'", argv[optind]);

  mtx_csr M = {0};
  char msg[512];
  int ret = 1;
  gkc_conn *c = NULL;
  double *dis = NULL;        /* D^-1/2 when scaled */
  float *orig_values = NULL; /* the unscaled A's values, for its residual */
  float *xs = NULL, *b = NULL, *x = NULL, *xo = NULL, *bo = NULL;
  if (matrix) {
    if (mtx_read_csr(matrix, &M, msg, sizeof msg) != 0) {
      fprintf(stderr, "cg: %s\n", msg);
      return 2;
    }
    if (M.rows != M.cols) {
      fprintf(stderr, "cg: %s is %d x %d, not square\n", matrix, M.rows, M.cols);
      ret = 2;
      goto out;
    }
  } else if (cg_laplacian((int32_t)grid, &M) != 0) {
    fprintf(stderr, "cg: cannot build a %ld x %ld grid's Laplacian (too big?)\n", grid, grid);
    return 1;
  }
  size_t nb = (size_t)M.rows * 4;
  if (!(xs = malloc(nb)) || !(b = malloc(nb)) || !(x = malloc(nb)) || !(xo = malloc(nb)) ||
      (matrix && (!(orig_values = malloc((size_t)M.nnz * 4 + 1)) || !(bo = malloc(nb)) ||
                  !(dis = malloc((size_t)M.rows * sizeof *dis))))) {
    fprintf(stderr, "cg: out of memory\n");
    goto out;
  }
  gkc_csr A = {M.rows, M.cols, M.nnz, M.row_ptr, M.col_idx, M.values};
  cg_rhs(&A, 1, xs, b); /* b = A x* with the original A */
  if (matrix) {
    int64_t asym = cg_asymmetric(&A);
    if (asym >= 0)
      fprintf(stderr, "cg: warning: %s is not symmetric (row %lld, for one): CG may not "
              "converge\n", matrix, (long long)asym + 1);
    memcpy(orig_values, M.values, (size_t)M.nnz * 4);
    memcpy(bo, b, nb);
    if (cg_jacobi_scale(&M, dis, msg, sizeof msg) != 0) {
      fprintf(stderr, "cg: %s: %s\n", matrix, msg);
      ret = 2;
      goto out;
    }
    for (int32_t i = 0; i < M.rows; i++) b[i] = (float)(b[i] * dis[i]);
  }

  if (gkc_connect(&c, sock) != 0) {
    fprintf(stderr, "cg: %s\n", gkc_errmsg(c));
    goto out;
  }
  cg_stats st;
  if (cg_solve(c, &A, b, x, &prm, &st) != 0) {
    fprintf(stderr, "cg: %s\n", st.msg);
    goto out;
  }
  /* Back to the original unknowns, and the error against x*. */
  double orig_res = NAN, ee = 0, xx = 0;
  for (int32_t i = 0; i < M.rows; i++) xo[i] = matrix ? (float)(x[i] * dis[i]) : x[i];
  if (matrix) {
    gkc_csr O = {M.rows, M.cols, M.nnz, M.row_ptr, M.col_idx, orig_values};
    orig_res = cg_residual(&O, bo, xo);
  }
  for (int32_t i = 0; i < M.rows; i++) {
    double d = (double)xo[i] - xs[i];
    ee += d * d, xx += (double)xs[i] * xs[i];
  }
  double rel_err = xx > 0 ? sqrt(ee / xx) : sqrt(ee);

  char what[600];
  if (matrix)
    snprintf(what, sizeof what, "%s", matrix);
  else
    snprintf(what, sizeof what, "2-D Laplacian, %ld x %ld grid (5-point)", grid, grid);
  if (json) {
    printf("{\"matrix\": \"");
    for (const char *p = what; *p; p++) {
      if (*p == '"' || *p == '\\') putchar('\\');
      putchar(*p);
    }
    printf("\", \"rows\": %d, \"nnz\": %lld, \"scaling\": \"%s\", \"tol\": %g, "
           "\"iterations\": %d, \"converged\": %s, \"rel_residual\": %.6g, "
           "\"rec_residual\": %.6g, \"gkcd_residual\": %.6g, ",
           M.rows, (long long)M.nnz, matrix ? "jacobi" : "none", prm.tol, st.iterations,
           st.converged ? "true" : "false", st.true_residual, st.rec_residual,
           st.gkcd_residual);
    if (matrix) printf("\"orig_rel_residual\": %.6g, ", orig_res);
    printf("\"rel_error\": %.6g, \"replacements\": %d, \"setup_s\": %.6f, \"solve_s\": %.6f, "
           "\"iterations_per_s\": %.3f, ",
           rel_err, st.replacements, st.setup_s, st.solve_s, st.iters_per_s);
    if (prm.mode != CG_SOLVE)
      printf("\"loop_s\": %.6f, \"loop_iterations_per_s\": %.3f, ", st.loop_s,
             st.loop_s > 0 ? st.iterations / st.loop_s : 0.0);
    printf("\"requests\": %lld, \"spmv_algo\": \"%s\", \"mode\": \"%s\"}\n", (long long)st.requests,
           st.spmv_algo, mode_names[prm.mode]);
  } else {
    printf("matrix:         %s: %d rows, %lld nonzeros\n", what, M.rows, (long long)M.nnz);
    printf("mode:           %s\n", prm.mode == CG_SOLVE ? "solve (one gkc_solve request)"
                                    : prm.mode == CG_BATCH ? "batch (one gkc_batch per iteration)"
                                                           : "requests (one per vector operation)");
    printf("scaling:        %s\n", matrix ? "Jacobi: solved D^-1/2 A D^-1/2 y = D^-1/2 b, "
                                            "x = D^-1/2 y" : "none");
    printf("right side:     b = A x*, x* uniform in [-1, 1]\n");
    printf("iterations:     %d (%s, tol %g)\n", st.iterations,
           st.converged ? "converged" : "NOT converged", prm.tol);
    printf("rel residual:   %.3g  (||b - A x|| / ||b||, in double here from the downloaded x%s)\n",
           st.true_residual, matrix ? "; of the scaled system" : "");
    printf("recurrence:     %.3g  (CG's ||r|| / ||b|| when it stopped; on gkcd, b - A x gave "
           "%.3g%s)\n", st.rec_residual, st.gkcd_residual,
           st.replacements ? ", after restarts from it" : "");
    if (st.replacements) printf("restarts:       %d (r replaced by b - A x)\n", st.replacements);
    if (matrix) printf("orig residual:  %.3g  (of the unscaled A x = b)\n", orig_res);
    printf("rel error:      %.3g  (||x - x*|| / ||x*||)\n", rel_err);
    printf("setup:          %.3f s (csr_upload and vector uploads)\n", st.setup_s);
    printf("time:           %.3f s for %lld requests\n", st.solve_s, (long long)st.requests);
    if (prm.mode != CG_SOLVE && st.loop_s > 0)
      printf("iterations/s:   %.1f (%.1f counting only the iterations' own requests, not the\n"
             "                checks and the download of x)\n", st.iters_per_s, st.iterations / st.loop_s);
    else
      printf("iterations/s:   %.1f\n", st.iters_per_s);
    printf("spmv algo:      %s\n", st.spmv_algo);
  }
  ret = st.converged ? 0 : 1;
out:
  gkc_close(c);
  free(xs), free(b), free(x), free(xo), free(bo), free(dis), free(orig_values);
  mtx_free(&M);
  return ret;
}

#endif /* GKC_CG_NO_MAIN */
