/* dcg.c: distributed CG and PCG-Jacobi, every vector resident on the ranks' gkcd.
 *
 * Each rank holds its rows of b, x, r, p, z = M^-1 r (z is r without a
 * preconditioner) and two product vectors as resident arrays; only
 * scalars and the halo leave gkcd, and x at the end.  What one iteration
 * costs is set by what a request can carry: `batch` chains vector steps
 * on resident arrays (their step sizes from the batch's own dots), and
 * its spmv steps may read x from and write into the shared-memory region
 * the halo goes through (gkc_batch_regions), so the halo rides in the
 * batches: the download ([G; offd^T] x: the rows the neighbours need, and
 * offd^T x, with which the ghost part of the dot that follows the product
 * is summed here from the ghosts as they arrive, without a request for
 * it) is the batch's last step, and the ghost columns (A_ghost g, g read
 * from the region where the exchange left it) the next batch's first.
 *
 * Classical CG, per iteration (a rank with a halo; "L" the product's own
 * columns, into a vector of its own when ghosts are to be added):
 *   1. batch { p = z + beta p;  L = A_own p;  p.L;
 *              halo down of p into the region }                      request
 *   2. MPI exchange; p.q = p.L + g.(offd^T p) here; Allreduce(p.q)
 *   3. batch { q = A_ghost g + L;  x += a p;  r -= a q;  z = M^-1 r;
 *              r.z;  r.r }                                           request
 *   4. Allreduce(r.z, r.r)
 * 2 requests, 2 Allreduce: beta needs the global r.z before p can move,
 * and a needs the global p.q before x and r can.  Without a halo (one
 * rank) there is no down or ghost step, and with nothing to reduce the
 * whole iteration chains: up to GKCM_CG_MAX_CHAIN iterations in one batch,
 * a = r.z / p.q and beta = r.z' / r.z read by gkcd from the batch's dots.
 * The chain is cut short as the tolerance nears (from the rate of the last
 * chain), so the count is that of one iteration at a time.
 *
 * Chronopoulos-Gear (GKCM_CG_SINGLE): with w = A z and s = A p kept by
 * recurrence, both dots of an iteration come after the product:
 *   1. batch { w = A_ghost g + L  (the last product's ghosts);
 *              p = z + beta p;  s = w + beta s;  x += a p;  r -= a s;
 *              z = M^-1 r;  L = A_own z;  r.z;  L.z;  r.r;
 *              halo down of z into the region }                      request
 *   2. MPI exchange; w.z = L.z + g.(offd^T z) here; Allreduce(r.z, w.z, r.r)
 * beta = r.z' / r.z, a = r.z' / (w.z' - beta r.z' / a): 1 request and one
 * Allreduce.  The first batch (at the start, after a restart) has no
 * ghost step and no updates: r changed outside the recurrence.
 *
 * When gkcd takes no region (the halo then goes inline) the halo is two
 * plain requests of its own around the batches as before: dmat_halo_down
 * after the product's batch, and dmat_halo_up (the ghost columns into L's
 * sum) while the Allreduce travels: 4 requests per classical iteration, 3
 * per Chronopoulos-Gear one.
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

/* The resident vectors.  Q: q = A p (classical) or s = A p (single);
 * W: w = A z (single); L: the own-column product while ghosts travel. */
enum { V_B, V_X, V_R, V_P, V_Z, V_Q, V_W, V_L, NV };

typedef struct {
  gkcm_matrix *A;
  gkcm_ctx *ctx;
  size_t nb;      /* bytes of one local vector */
  uint32_t v[NV]; /* v[V_Z] = v[V_R] without a preconditioner */
  int have[NV];
  uint32_t dinv;
  int have_dinv;
  int jacobi, ghosts; /* ghosts: this rank has ghost columns to add */
  int fused;          /* the halo rides in the batches (dmat_fused) */
  gkcm_clock clk;
} dcg;

/* --- local steps: each records a failure and is skipped after one ------------------ */

static void vec_new(dcg *s, gkc_ref from, int slot, const char *what) {
  if (s->ctx->err) return;
  int rc = gkc_upload(s->ctx->conn, from, GKC_F32, 0, &s->v[slot]);
  if (rc) ctx_fail_gkc(s->ctx, rc, what);
  else s->have[slot] = 1;
}

/* One batch request, its steps' region operands g (NULL: none);
 * br->value[] of dot steps (0 after a failure, which is recorded: the next
 * sync reports it). */
static void batch(dcg *s, const gkc_step *st, const gkc_step_region *g, int n,
                  gkc_batch_result *br, const char *what) {
  memset(br->value, 0, sizeof br->value);
  if (s->ctx->err) return;
  double t = ctx_now();
  gkc_info info;
  int rc = gkc_batch_regions(s->ctx->conn, st, g, n, br, &info);
  if (rc) {
    ctx_fail_gkc(s->ctx, rc, what);
    memset(br->value, 0, sizeof br->value);
  }
  clock_request(&s->clk, t, rc ? NULL : &info);
}

static int allreduce(dcg *s, double *vals, int n) {
  double t = ctx_now();
  int rc = ctx_sync(s->ctx, vals, n);
  s->clk.comm_s += ctx_now() - t;
  s->clk.allreduces++;
  return rc;
}

static gkc_scalar num(double v) { return gkc_scalar_num((float)v); }

/* Steps that append to st[*n]: z = M^-1 r (Jacobi only). */
static void step_precond(const dcg *s, gkc_step *st, int *n) {
  if (s->jacobi)
    st[(*n)++] = gkc_step_spmv(s->dinv, num(1), s->v[V_R], num(0), 0, s->v[V_Z]);
}

/* The own-column product of x into `into` (L when ghosts follow), then
 * the dot of x with it; returns the dot's step index. */
static int step_local_product(const dcg *s, gkc_step *st, int *n, uint32_t x, uint32_t into) {
  uint32_t out = s->ghosts ? s->v[V_L] : into;
  st[(*n)++] = gkc_step_spmv(s->A->diag, num(1), x, num(0), 0, out);
  st[*n] = gkc_step_dot(x, out);
  return (*n)++;
}

/* The rest of a distributed product whose own-column part (and its dot
 * with x, *dot) a batch just made: the halo of x down (unless the batch
 * carried it: fused), exchanged, the ghost part of the dot added here;
 * vals (with *dot among them) summed over the ranks while gkcd adds the
 * ghost columns into `into` (fused: the next batch's first step does,
 * from the ghosts left in the region). */
static int finish_product(dcg *s, uint32_t x, uint32_t into, double *vals, int nvals,
                          double *dot) {
  int rc;
  if (s->ctx->size > 1) {
    if (!s->fused) dmat_halo_down(s->A, x, &s->clk);
    dmat_halo_exchange(s->A, &s->clk);
    /* fused: the ghosts are in the region for the step that adds them
     * (counted here: the last product's may never be added, when the
     * iteration stops, and gkcd then reads nothing) */
    if (s->fused && s->ghosts) s->clk.up_bytes += (int64_t)s->A->plan.nghost * 4;
    double t = ctx_now();
    if (!s->ctx->err) *dot += dmat_ghost_dot(s->A);
    s->clk.host_s += ctx_now() - t;
  }
  ctx_isync is;
  double t = ctx_now();
  ctx_sync_start(s->ctx, vals, nvals, &is);
  s->clk.comm_s += ctx_now() - t;
  if (s->ghosts && !s->fused) dmat_halo_up(s->A, 1.0f, 1.0f, s->v[V_L], into, &s->clk);
  t = ctx_now();
  rc = ctx_sync_finish(s->ctx, vals, &is);
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
    else s->have_dinv = 1;
  }
done:
  free(rp), free(ci), free(v);
}

/* b, x = 0, r = b, and zeroed p, z, Q, W, L; then ||b||^2 summed. */
static int setup(dcg *s, const float *b, double *bb) {
  float *zeros = calloc(s->nb / 4 + 1, sizeof *zeros);
  if (!zeros) ctx_fail(s->ctx, GKC_EOUT_OF_MEMORY, "out of memory");
  static const char *const what[NV] = {"upload (b)", "upload (x)", "upload (r)", "upload (p)",
                                       "upload (z)", "upload (q)", "upload (w)",
                                       "upload (own-column product)"};
  vec_new(s, gkc_ref_mem(b, s->nb), V_B, what[V_B]);
  vec_new(s, gkc_ref_handle(s->v[V_B], s->nb), V_R, what[V_R]); /* r = b: x0 = 0 */
  for (int k = V_X; k < NV; k++) {
    if (k == V_R || (k == V_Z && !s->jacobi) || (k == V_L && !s->ghosts)) continue;
    vec_new(s, gkc_ref_mem(zeros, s->nb), k, what[k]);
  }
  if (!s->jacobi) s->v[V_Z] = s->v[V_R];
  if (s->jacobi) upload_dinv(s);
  free(zeros);
  gkc_step st[1] = {gkc_step_dot(s->v[V_B], s->v[V_B])};
  gkc_batch_result br;
  batch(s, st, NULL, 1, &br, "batch (b.b)");
  double v[1] = {br.value[0]};
  int rc = allreduce(s, v, 1);
  *bb = v[0];
  return rc;
}

/* --- the iteration's pieces --------------------------------------------------------- */

/* After r changed outside the recurrence (the start, a restart): z = M^-1 r,
 * and r.z, r.r summed into *rz, *rr. */
static int restart_classical(dcg *s, double *rz, double *rr) {
  gkc_step st[3];
  int n = 0;
  step_precond(s, st, &n);
  st[n++] = gkc_step_dot(s->v[V_R], s->v[V_Z]);
  if (s->jacobi) st[n++] = gkc_step_dot(s->v[V_R], s->v[V_R]); /* else r.z is r.r */
  gkc_batch_result br;
  batch(s, st, NULL, n, &br, "batch (r.z, r.r)");
  double v[2] = {br.value[n - 1 - s->jacobi], br.value[n - 1]};
  int rc = allreduce(s, v, 2);
  *rz = v[0], *rr = v[1];
  return rc;
}

/* Classical steps 1-4: p = z + beta p, q = A p (fused: but for the ghost
 * columns, which classical_update adds); returns p.q summed. */
static int classical_product(dcg *s, double beta, double *pq) {
  gkc_step st[5];
  gkc_step_region g[5] = {0};
  int n = 0;
  st[n++] = gkc_step_axpby(num(1), s->v[V_Z], num(beta), s->v[V_P], s->v[V_P]);
  int d = step_local_product(s, st, &n, s->v[V_P], s->v[V_Q]);
  if (s->fused) n += dmat_step_down(s->A, s->v[V_P], &st[n], &g[n], &s->clk);
  gkc_batch_result br;
  batch(s, st, s->fused ? g : NULL, n, &br, s->fused ? "batch (p update, own-column spmv, p.Ap,"
                                                      " halo down)"
                                                    : "batch (p update, own-column spmv, p.Ap)");
  double v[1] = {br.value[d]};
  int rc = finish_product(s, s->v[V_P], s->v[V_Q], v, 1, &v[0]);
  *pq = v[0];
  return rc;
}

/* Classical steps 5-6: (fused: q = A_ghost g + L first,) x += a p,
 * r -= a q, z = M^-1 r; r.z and r.r summed. */
static int classical_update(dcg *s, double a, double *rz, double *rr) {
  gkc_step st[7];
  gkc_step_region g[7] = {0};
  int n = 0;
  if (s->fused) n += dmat_step_up(s->A, s->v[V_L], s->v[V_Q], &st[n], &g[n]);
  st[n++] = gkc_step_axpby(num(a), s->v[V_P], num(1), s->v[V_X], s->v[V_X]);
  st[n++] = gkc_step_axpby(num(-a), s->v[V_Q], num(1), s->v[V_R], s->v[V_R]);
  step_precond(s, st, &n);
  st[n++] = gkc_step_dot(s->v[V_R], s->v[V_Z]);
  if (s->jacobi) st[n++] = gkc_step_dot(s->v[V_R], s->v[V_R]); /* else r.z is r.r */
  gkc_batch_result br;
  batch(s, st, s->fused ? g : NULL, n, &br, "batch (x and r updates, r.z, r.r)");
  double v[2] = {br.value[n - 1 - s->jacobi], br.value[n - 1]};
  int rc = allreduce(s, v, 2);
  *rz = v[0], *rr = v[1];
  return rc;
}

/* Classical on a rank alone (no halo, nothing to reduce): k iterations per
 * batch.  st[0] = r.z of the r the chain starts from, so that every step
 * size is read by gkcd from the batch's own dots; the first p update takes
 * beta as a number.  Fills pq[j], rr[j] of each iteration and *rz_prev
 * (r.z before the last iteration's update); returns the chain's last r.z. */
static double classical_chain(dcg *s, int k, double beta0, double *pq, double *rr,
                              double *rz_prev) {
  uint32_t x = s->v[V_X], r = s->v[V_R], p = s->v[V_P], z = s->v[V_Z], q = s->v[V_Q];
  gkc_step st[GKC_BATCH_MAX_STEPS];
  int n = 0, rz_at = 0, prev_at = 0, pq_at[GKCM_CG_MAX_CHAIN], rr_at[GKCM_CG_MAX_CHAIN];
  st[n++] = gkc_step_dot(r, z);
  for (int j = 0; j < k; j++) {
    gkc_scalar beta = j == 0 ? num(beta0) : gkc_scalar_ref(rz_at, prev_at, 1);
    st[n++] = gkc_step_axpby(num(1), z, beta, p, p);
    st[n++] = gkc_step_spmv(s->A->diag, num(1), p, num(0), 0, q);
    pq_at[j] = n;
    st[n++] = gkc_step_dot(p, q);
    st[n++] = gkc_step_axpby(gkc_scalar_ref(rz_at, pq_at[j], 1), p, num(1), x, x);
    st[n++] = gkc_step_axpby(gkc_scalar_ref(rz_at, pq_at[j], -1), q, num(1), r, r);
    step_precond(s, st, &n);
    prev_at = rz_at, rz_at = n;
    st[n++] = gkc_step_dot(r, z);
    rr_at[j] = rz_at;
    if (s->jacobi) rr_at[j] = n, st[n++] = gkc_step_dot(r, r);
  }
  gkc_batch_result br;
  batch(s, st, NULL, n, &br, "batch (chained CG iterations)");
  for (int j = 0; j < k; j++) pq[j] = br.value[pq_at[j]], rr[j] = br.value[rr_at[j]];
  *rz_prev = br.value[prev_at];
  return br.value[rz_at];
}

/* Chronopoulos-Gear steps 1-4.  first: r changed outside the recurrence,
 * so no updates run (p and s restart from z and w with beta = 0 next).
 * vals = {r.z, w.z, r.r} summed. */
static int single_step(dcg *s, int first, double a, double beta, double vals[3]) {
  gkc_step st[12];
  gkc_step_region g[12] = {0};
  int n = 0;
  uint32_t x = s->v[V_X], r = s->v[V_R], p = s->v[V_P], z = s->v[V_Z], sv = s->v[V_Q],
           w = s->v[V_W];
  if (!first) {
    /* fused: w = A_ghost g + L, the last product's ghosts (exchanged since
     * the last batch) completing it before s reads it */
    if (s->fused) n += dmat_step_up(s->A, s->v[V_L], w, &st[n], &g[n]);
    st[n++] = gkc_step_axpby(num(1), z, num(beta), p, p);
    st[n++] = gkc_step_axpby(num(1), w, num(beta), sv, sv);
    st[n++] = gkc_step_axpby(num(a), p, num(1), x, x);
    st[n++] = gkc_step_axpby(num(-a), sv, num(1), r, r);
  }
  step_precond(s, st, &n);
  int d = step_local_product(s, st, &n, z, w);
  int rz_at = n;
  st[n++] = gkc_step_dot(r, z);
  int rr_at = rz_at;
  if (s->jacobi) rr_at = n, st[n++] = gkc_step_dot(r, r);
  if (s->fused) n += dmat_step_down(s->A, z, &st[n], &g[n], &s->clk);
  gkc_batch_result br;
  batch(s, st, s->fused ? g : NULL, n, &br,
        first ? "batch (z, own-column spmv, dots)"
              : "batch (p, s, x, r updates, own-column spmv, dots)");
  vals[0] = br.value[rz_at], vals[1] = br.value[d], vals[2] = br.value[rr_at];
  return finish_product(s, z, w, vals, 3, &vals[1]);
}

/* r = b - A x on gkcd and ||r||^2 summed: the true residual. */
static int true_residual(dcg *s, double *rr) {
  dmat_spmv(s->A, -1.0f, s->v[V_X], 1.0f, 1, s->v[V_B], s->v[V_R], &s->clk);
  gkc_step st[1] = {gkc_step_dot(s->v[V_R], s->v[V_R])};
  gkc_batch_result br;
  batch(s, st, NULL, 1, &br, "batch (r.r)");
  double v[1] = {br.value[0]};
  int rc = allreduce(s, v, 1);
  *rr = v[0];
  return rc;
}

/* How many chained iterations may run before the stop test is read:
 * half of what the last chain's rate says is left, so that the chain that
 * crosses tol is (nearly always) one iteration long. */
static int chain_len(int kmax, double rr_then, double rr_now, int k_then, double target) {
  if (k_then < 1 || !(rr_then > 0) || !(rr_now > 0) || !(rr_now < rr_then)) return 1;
  double rate = log(rr_then / rr_now) / k_then; /* per iteration, of ||r||^2 */
  double left = log(rr_now / target) / rate;
  int k = (int)floor(left / 2);
  return k < 1 ? 1 : k > kmax ? kmax : k;
}

static int breakdown(gkcm_ctx *ctx, const char *what, double v, int it) {
  snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s = %g at iteration %d: A is not symmetric "
           "positive definite (or the iteration broke down)", what, v, it);
  return GKCM_EBREAKDOWN;
}

int gkcm_cg(gkcm_matrix *A, const float *b, float *x, const gkcm_cg_params *prm,
            gkcm_cg_stats *st) {
  memset(st, 0, sizeof *st);
  dcg s = {0};
  s.A = A, s.ctx = A->ctx, s.nb = (size_t)A->plan.rows * 4;
  s.jacobi = prm->precond == GKCM_PRECOND_JACOBI;
  s.ghosts = A->plan.nghost > 0;
  s.fused = dmat_fused(A);
  gkcm_ctx *ctx = s.ctx;
  int rc, single = prm->variant == GKCM_CG_SINGLE;
  double t0 = ctx_now(), bb = 0;
  if (!(prm->tol > 0) || prm->max_iter < 0)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "tol must be positive and max_iter not negative");
  else if (prm->precond != GKCM_PRECOND_NONE && prm->precond != GKCM_PRECOND_JACOBI)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "unknown preconditioner %d", prm->precond);
  else if (prm->variant != GKCM_CG_CLASSICAL && prm->variant != GKCM_CG_SINGLE)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "unknown CG variant %d", prm->variant);
  else if (prm->chain < 0 || prm->chain > GKCM_CG_MAX_CHAIN)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "chain %d is outside [0, %d]", prm->chain,
             GKCM_CG_MAX_CHAIN);
  if ((rc = setup(&s, b, &bb))) goto done;
  double bnorm = bb > 0 ? sqrt(bb) : 1, target = prm->tol * prm->tol * bnorm * bnorm;
  /* Chains need one rank (no reduction between iterations) and room in a
   * batch: 1 + k (6, or 8 with Jacobi) steps. */
  int kmax = prm->chain ? prm->chain : GKCM_CG_MAX_CHAIN;
  int per = s.jacobi ? 8 : 6;
  if (kmax > (GKC_BATCH_MAX_STEPS - 1) / per) kmax = (GKC_BATCH_MAX_STEPS - 1) / per;
  int chained = !single && ctx->size == 1 && kmax > 1;
  st->setup_s = ctx_now() - t0;
  s.clk = (gkcm_clock){0};

  t0 = ctx_now();
  double rz = 0, rr = 0, a_old = 1, rz_old = 1, wz = 0, vals[3];
  double rr_then = 0;
  int fresh = 1, k_then = 0; /* fresh: r changed outside the recurrence */
  for (;;) {
    if (fresh) { /* the start, or after a restart */
      if (single) {
        rc = single_step(&s, 1, 0, 0, vals);
        st->spmvs++;
        rz = vals[0], wz = vals[1], rr = vals[2];
      } else {
        rc = restart_classical(&s, &rz, &rr);
      }
      if (rc) goto done;
      if (!s.jacobi) rr = rz;
      rr_then = 0, k_then = 0;
    }
    if (rr < target || st->iterations >= prm->max_iter) {
      st->rec_residual = sqrt(rr) / bnorm;
      if ((rc = true_residual(&s, &rr))) goto done;
      st->spmvs++;
      st->residual = sqrt(rr) / bnorm;
      if (st->residual < prm->tol) {
        st->converged = 1;
        break;
      }
      if (st->iterations >= prm->max_iter || st->restarts == DCG_MAX_RESTARTS) break;
      st->restarts++;
      fresh = 1;
      continue;
    }
    int it = st->iterations + 1;
    if (single) {
      /* a = r.z / (w.z - beta r.z / a_old), the Chronopoulos-Gear step. */
      double beta = fresh ? 0 : rz / rz_old;
      double den = fresh ? wz : wz - beta * rz / a_old;
      if (!(den > 0) || !isfinite(den)) { rc = breakdown(ctx, "p.Ap", den, it); goto done; }
      double a = rz / den;
      rz_old = rz, a_old = a;
      rc = single_step(&s, 0, a, beta, vals);
      st->spmvs++;
      rz = vals[0], wz = vals[1], rr = s.jacobi ? vals[2] : vals[0];
      st->iterations++;
      fresh = 0;
      if (rc) goto done;
      continue;
    }
    double beta = fresh ? 0 : rz / rz_old;
    if (chained) {
      int k = chain_len(kmax, rr_then, rr, k_then, target);
      if (k > prm->max_iter - st->iterations) k = prm->max_iter - st->iterations;
      double pq[GKCM_CG_MAX_CHAIN], rrs[GKCM_CG_MAX_CHAIN];
      double rz_prev = 0;
      double rz_new = classical_chain(&s, k, beta, pq, rrs, &rz_prev);
      st->spmvs += k;
      if ((rc = allreduce(&s, NULL, 0))) goto done; /* agrees on failures only */
      for (int j = 0; j < k; j++)
        if (!(pq[j] > 0) || !isfinite(pq[j])) { rc = breakdown(ctx, "p.Ap", pq[j], it + j); goto done; }
      rr_then = rr, k_then = k;
      st->iterations += k;
      rz_old = rz_prev, rz = rz_new, rr = s.jacobi ? rrs[k - 1] : rz_new;
      fresh = 0;
      continue;
    }
    double pq;
    if ((rc = classical_product(&s, beta, &pq))) goto done;
    st->spmvs++;
    if (!(pq > 0) || !isfinite(pq)) { rc = breakdown(ctx, "p.Ap", pq, it); goto done; }
    rz_old = rz;
    if ((rc = classical_update(&s, rz / pq, &rz, &rr))) goto done;
    if (!s.jacobi) rr = rz;
    st->iterations++;
    fresh = 0;
  }
  st->solve_s = ctx_now() - t0;
  if (!ctx->err) {
    rc = gkc_download(ctx->conn, s.v[V_X], x, s.nb);
    if (rc) ctx_fail_gkc(ctx, rc, "download (x)");
  }
  rc = ctx_sync(ctx, NULL, 0);
done:
  st->comm_s = s.clk.comm_s, st->local_s = s.clk.local_s, st->requests = s.clk.requests;
  st->server_s = s.clk.server_s, st->kernel_s = s.clk.kernel_s, st->host_s = s.clk.host_s;
  st->allreduces = s.clk.allreduces, st->halo_bytes = s.clk.halo_bytes;
  st->down_bytes = s.clk.down_bytes, st->up_bytes = s.clk.up_bytes;
  if (!st->solve_s) st->solve_s = ctx_now() - t0;
  /* Closing the connection would free them too. */
  if (ctx->conn) {
    for (int i = 0; i < NV; i++)
      if (s.have[i]) gkc_release(ctx->conn, s.v[i]);
    if (s.have_dinv) gkc_release_matrix(ctx->conn, s.dinv);
  }
  return rc;
}
