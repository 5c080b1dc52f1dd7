/* dcg.c: distributed CG and PCG-Jacobi, every vector resident on the ranks' gkcd.
 *
 * Each rank holds its rows of b, x, r, p, q (and z = M^-1 r with the Jacobi
 * preconditioner) as resident arrays; only scalars, the halo and, at the
 * end, x leave gkcd.  Per iteration, in order, with the requests each
 * phase sends today:
 *
 *   A. q = A p             dmat_spmv: gather, own-column spmv, ghost spmv (3)
 *   B. p.q                 1 dot                      -> Allreduce of 1 value
 *   C. x += a p, r -= a q, z = M^-1 r, r.z, r.r
 *                          2 axpby, 1 spmv (Jacobi), 1 or 2 dots -> Allreduce
 *   D. p = z + b p         1 axpby
 *
 * Where a batch method on gkcd (several vector ops, one request) slots in:
 * C is one batch; D and step 1 of the next A (the halo gather reads the new
 * p) are one batch; A's ghost spmv (step 5) and B are one batch.  Only A's
 * own-column spmv must stay a request of its own, so that it runs while
 * the halo messages travel.  That takes CG from 8 requests per iteration
 * (PCG: 10) to 4.  Each phase below is a function, so a batch replaces one
 * function body.
 *
 * The stopping test and the true-residual restarts follow examples/cg.c:
 * when ||r|| / ||b|| says converged, r = b - A x is computed on gkcd (one
 * more distributed spmv) and, if that is not below tol, replaces r (at most
 * 8 times).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DCG_MAX_RESTARTS 8

typedef struct {
  gkcm_matrix *A;
  gkcm_ctx *ctx;
  size_t nb;                        /* bytes of one local vector */
  uint32_t b, x, r, p, q, z, dinv;  /* z = r and no dinv without a preconditioner */
  int have[7];
  int jacobi;
  gkcm_clock clk;
} dcg;

enum { H_B, H_X, H_R, H_P, H_Q, H_Z, H_DINV };

/* --- local steps: each records a failure and is skipped after one ------------------ */

static void vec_new(dcg *s, gkc_ref from, uint32_t *h, int slot, const char *what) {
  if (s->ctx->err) return;
  int rc = gkc_upload(s->ctx->conn, from, GKC_F32, 0, h);
  if (rc) ctx_fail_gkc(s->ctx, rc, what);
  else s->have[slot] = 1;
}

static double dot(dcg *s, uint32_t a, uint32_t b) {
  double v = 0;
  if (s->ctx->err) return 0;
  double t = ctx_now();
  int rc = gkc_dot(s->ctx->conn, gkc_ref_handle(a, s->nb), gkc_ref_handle(b, s->nb), &v, NULL);
  if (rc) ctx_fail_gkc(s->ctx, rc, "dot");
  s->clk.local_s += ctx_now() - t;
  s->clk.requests++;
  return v;
}

static void axpby(dcg *s, float alpha, uint32_t x, float beta, uint32_t y) { /* y = a x + b y */
  if (s->ctx->err) return;
  double t = ctx_now();
  gkc_out o = gkc_out_handle(y);
  int rc = gkc_axpby(s->ctx->conn, alpha, gkc_ref_handle(x, s->nb), beta,
                     gkc_ref_handle(y, s->nb), &o, NULL);
  if (rc) ctx_fail_gkc(s->ctx, rc, "axpby");
  s->clk.local_s += ctx_now() - t;
  s->clk.requests++;
}

static void precond(dcg *s) { /* z = D^-1 r: an spmv with the diagonal matrix */
  if (!s->jacobi || s->ctx->err) return;
  double t = ctx_now();
  gkc_spmv_args a = GKC_SPMV_ARGS_INIT;
  a.use_matrix = 1, a.matrix = s->dinv, a.x = gkc_ref_handle(s->r, s->nb);
  gkc_out o = gkc_out_handle(s->z);
  int rc = gkc_spmv_ref(s->ctx->conn, &a, &o, NULL);
  if (rc) ctx_fail_gkc(s->ctx, rc, "spmv (Jacobi preconditioner)");
  s->clk.local_s += ctx_now() - t;
  s->clk.requests++;
}

static int allreduce(dcg *s, double *vals, int n) {
  double t = ctx_now();
  int rc = ctx_sync(s->ctx, vals, n);
  s->clk.comm_s += ctx_now() - t;
  s->clk.allreduces++;
  return rc;
}

/* --- setup ------------------------------------------------------------------------- */

/* D^-1 of this rank's rows as a diagonal CSR on gkcd. */
static void upload_dinv(dcg *s) {
  halo_plan *p = &s->A->plan;
  int32_t n = p->rows;
  int32_t *rp = malloc(((size_t)n + 1) * sizeof *rp), *ci = malloc((size_t)n * sizeof *ci);
  float *v = malloc((size_t)n * sizeof *v);
  if (!rp || !ci || !v) {
    ctx_fail(s->ctx, GKC_EOUT_OF_MEMORY, "out of memory for the preconditioner");
    goto done;
  }
  for (int32_t i = 0; i < n; i++) {
    double d = 0;
    for (int32_t k = p->d_row_ptr[i]; k < p->d_row_ptr[i + 1]; k++)
      if (p->d_col[k] == i) d += p->d_val[k];
    if (!(d > 0)) {
      ctx_fail(s->ctx, GKC_EINVALID_ARGUMENT, "row %lld has diagonal %g: the Jacobi "
               "preconditioner needs a positive diagonal (A is not SPD)",
               (long long)(p->row0 + i + 1), d);
      goto done;
    }
    rp[i] = i, ci[i] = i, v[i] = (float)(1.0 / d);
  }
  rp[n] = n;
  if (!s->ctx->err) {
    gkc_csr m = {n, n, n, rp, ci, v};
    int rc = gkc_csr_upload(s->ctx->conn, &m, 0, &s->dinv, NULL);
    if (rc) ctx_fail_gkc(s->ctx, rc, "csr_upload (Jacobi preconditioner)");
    else s->have[H_DINV] = 1;
  }
done:
  free(rp), free(ci), free(v);
}

static int setup(dcg *s, const float *b, double *rz, double *rr, double *bb) {
  float *zeros = calloc(s->nb / 4 + 1, sizeof *zeros);
  if (!zeros) ctx_fail(s->ctx, GKC_EOUT_OF_MEMORY, "out of memory");
  vec_new(s, gkc_ref_mem(b, s->nb), &s->b, H_B, "upload (b)");
  vec_new(s, gkc_ref_mem(zeros, s->nb), &s->x, H_X, "upload (x)");          /* x0 = 0 */
  vec_new(s, gkc_ref_handle(s->b, s->nb), &s->r, H_R, "upload (r)");        /* r = b */
  vec_new(s, gkc_ref_mem(zeros, s->nb), &s->q, H_Q, "upload (q)");
  if (s->jacobi) {
    upload_dinv(s);
    vec_new(s, gkc_ref_mem(zeros, s->nb), &s->z, H_Z, "upload (z)");
    precond(s);
  } else {
    s->z = s->r;
  }
  vec_new(s, gkc_ref_handle(s->z, s->nb), &s->p, H_P, "upload (p)");        /* p = z */
  free(zeros);
  double v[3] = {s->jacobi ? dot(s, s->r, s->z) : 0, dot(s, s->r, s->r), dot(s, s->b, s->b)};
  int rc = ctx_sync(s->ctx, v, 3);
  *rz = s->jacobi ? v[0] : v[1], *rr = v[1], *bb = v[2];
  return rc;
}

/* --- the phases of an iteration ------------------------------------------------------ */

/* C: x += a p, r -= a q, z = M^-1 r; local r.z and r.r into v. */
static void phase_update(dcg *s, float a, double v[2]) {
  axpby(s, a, s->p, 1.0f, s->x);
  axpby(s, -a, s->q, 1.0f, s->r);
  precond(s);
  v[1] = dot(s, s->r, s->r);
  v[0] = s->jacobi ? dot(s, s->r, s->z) : v[1];
}

int gkcm_cg(gkcm_matrix *A, const float *b, float *x, const gkcm_cg_params *prm,
            gkcm_cg_stats *st) {
  memset(st, 0, sizeof *st);
  dcg s = {0};
  s.A = A, s.ctx = A->ctx, s.nb = (size_t)A->plan.rows * 4;
  s.jacobi = prm->precond == GKCM_PRECOND_JACOBI;
  gkcm_ctx *ctx = s.ctx;
  int rc;
  double t0 = ctx_now(), rz, rr, bb;
  if (!(prm->tol > 0) || prm->max_iter < 0)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "tol must be positive and max_iter not negative");
  else if (prm->precond != GKCM_PRECOND_NONE && prm->precond != GKCM_PRECOND_JACOBI)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "unknown preconditioner %d", prm->precond);
  if ((rc = setup(&s, b, &rz, &rr, &bb))) goto done;
  double bnorm = bb > 0 ? sqrt(bb) : 1;
  st->setup_s = ctx_now() - t0;
  s.clk = (gkcm_clock){0};

  t0 = ctx_now();
  for (;;) {
    if (sqrt(rr) / bnorm < prm->tol || st->iterations >= prm->max_iter) {
      st->rec_residual = sqrt(rr) / bnorm;
      dmat_spmv(A, -1.0f, s.x, 1.0f, 1, s.b, s.r, &s.clk); /* r = b - A x */
      double v[1] = {dot(&s, s.r, s.r)};
      if ((rc = allreduce(&s, v, 1))) goto done;
      rr = v[0];
      st->residual = sqrt(rr) / bnorm;
      if (st->residual < prm->tol) {
        st->converged = 1;
        break;
      }
      if (st->iterations >= prm->max_iter || st->restarts == DCG_MAX_RESTARTS) break;
      st->restarts++;
      precond(&s);
      axpby(&s, 1.0f, s.z, 0.0f, s.p); /* p = z */
      v[0] = s.jacobi ? dot(&s, s.r, s.z) : rr;
      if ((rc = allreduce(&s, v, 1))) goto done;
      rz = s.jacobi ? v[0] : rr;
    }
    dmat_spmv(A, 1.0f, s.p, 0.0f, 0, 0, s.q, &s.clk); /* A */
    double pq[1] = {dot(&s, s.p, s.q)};                /* B */
    if ((rc = allreduce(&s, pq, 1))) goto done;
    if (!(pq[0] > 0) || !isfinite(pq[0])) {
      snprintf(ctx->errmsg, sizeof ctx->errmsg, "p.Ap = %g at iteration %d: A is not symmetric "
               "positive definite (or the iteration broke down)", pq[0], st->iterations + 1);
      rc = GKCM_EBREAKDOWN;
      goto done;
    }
    float a = (float)(rz / pq[0]);
    double v[2];
    phase_update(&s, a, v); /* C */
    if ((rc = allreduce(&s, v, 2))) goto done;
    float beta = (float)(v[0] / rz);
    axpby(&s, 1.0f, s.z, beta, s.p); /* D */
    rz = v[0], rr = v[1];
    st->iterations++;
  }
  st->solve_s = ctx_now() - t0;
  if (!ctx->err) {
    rc = gkc_download(ctx->conn, s.x, x, s.nb);
    if (rc) ctx_fail_gkc(ctx, rc, "download (x)");
  }
  rc = ctx_sync(ctx, NULL, 0);
done:
  st->comm_s = s.clk.comm_s, st->local_s = s.clk.local_s, st->requests = s.clk.requests;
  st->allreduces = s.clk.allreduces, st->halo_bytes = s.clk.halo_bytes;
  if (!st->solve_s) st->solve_s = ctx_now() - t0;
  /* Closing the connection would free them too. */
  uint32_t ids[7] = {s.b, s.x, s.r, s.p, s.q, s.z, s.dinv};
  if (ctx->conn)
    for (int i = 0; i < 7; i++)
      if (s.have[i]) (i == H_DINV ? gkc_release_matrix : gkc_release)(ctx->conn, ids[i]);
  return rc;
}
