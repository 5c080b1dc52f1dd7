/* part_solve.c: cg and pcg on a partitioned matrix (part.h).
 *
 * The same recurrences, stopping rules and residual as cpu_solve (see
 * cpu/cpu_solve.h), in float64, with each vector cut by the matrix's row
 * blocks: device j keeps x, r, q, b (and z for pcg) for its rows, and p
 * for its rows followed by its halo.  Every A p first exchanges p's halo
 * (part_halo_pack where p is written, part_halo_pull before the spmv);
 * every dot is the sum of the devices' partial dots in device order, taken
 * here, on the coordinating thread.  So the iterates differ from the
 * single-device solve only by the order of the dots' additions.  Each step
 * runs on every device at once (fan.h): the primitives are synchronous, and
 * one device after another would leave the others idle.  Each step is also
 * a round trip to every device, which on a GPU costs about as much as a
 * small kernel, so an iteration takes as few as the recurrences allow:
 * the dots ride on the spmv and on the update of x and r (gkcd_part_ops).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "devices.h"
#include "fan.h"
#include "gkc_errors.h"
#include "part.h"

enum { V_X, V_R, V_Q, V_B, V_Z, V_P, V_BUF }; /* P is rows + nhalo, BUF nsend */

typedef struct {
  gkcd_job *job;
  const gkcd_part *p;
  int k;
  double *v[7][GKCD_MAX_DEVICES];
  gkcd_backend *be[GKCD_MAX_DEVICES];
  int64_t it;
  double bn, tol;
  fan fan;
  /* The step the fan runs: its operands, and what each device said. */
  int op, ia, ib, dot, jacobi, pack;
  double a, b;
  double partial[2][GKCD_MAX_DEVICES];
  part_halo_moved moved[GKCD_MAX_DEVICES];
  int rc[GKCD_MAX_DEVICES], blame[GKCD_MAX_DEVICES];
  const char *what[GKCD_MAX_DEVICES]; /* NULL: the op's name */
  double *stage; /* rows float64: the host side of move_vec, one buffer for the solve (a
                    fresh one per copy cost its page faults every time: ~10 ms at 4M rows) */
  char msg[GKCD_MAX_DEVICES][200];
} ps;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int64_t rows_of(const ps *s, int j) { return s->p->plan.b[j].rows; }

enum { OP_DOT, OP_AXPBY, OP_UPDATE, OP_SPMV };
static const char *const op_names[] = {"dot", "axpby", "cg update", "spmv"};

/* Device j's part of the step s->op (fan_fn). */
static void step_one(void *arg, int j) {
  ps *s = arg;
  gkcd_backend *be = s->be[j];
  const gkcd_part_ops *o = be->part;
  int64_t n = rows_of(s, j);
  char *msg = s->msg[j];
  msg[0] = 0;
  s->blame[j] = j;
  s->what[j] = NULL;
  switch (s->op) {
    case OP_DOT:
      s->partial[0][j] = 0;
      s->rc[j] = o->dot(be, s->v[s->ia][j], s->v[s->ib][j], n, &s->partial[0][j], msg, sizeof s->msg[j]);
      break;
    case OP_AXPBY:
      s->rc[j] = o->axpby(be, s->a, s->v[s->ia][j], s->b, s->v[s->ib][j], n, msg, sizeof s->msg[j]);
      if (s->pack && !s->rc[j]) {
        s->what[j] = "packing the halo";
        s->rc[j] = part_halo_pack(s->p, j, s->v[V_P], s->v[V_BUF], msg, sizeof s->msg[j]);
      }
      break;
    case OP_UPDATE: {
      double out[2] = {0, 0};
      s->rc[j] = o->cg_update(be, s->a, s->v[V_P][j], s->v[V_Q][j], s->v[V_X][j], s->v[V_R][j],
                              s->jacobi ? part_dinv(s->p, j) : NULL, s->v[V_Z][j], n, out, msg,
                              sizeof s->msg[j]);
      s->partial[0][j] = out[0], s->partial[1][j] = out[1];
      break;
    }
    default:
      s->partial[0][j] = 0;
      s->what[j] = "exchanging the halo";
      if ((s->rc[j] = part_halo_pull(s->p, j, s->v[V_P], s->v[V_BUF], &s->moved[j], &s->blame[j], msg,
                                     sizeof s->msg[j])))
        break;
      s->what[j] = NULL;
      s->rc[j] = o->spmv(be, (int32_t)n, s->p->plan.b[j].nnz, part_row_ptr(s->p, j), part_col_idx(s->p, j),
                         part_values(s->p, j), s->v[V_P][j], s->v[V_Q][j],
                         s->dot ? &s->partial[0][j] : NULL, msg, sizeof s->msg[j]);
  }
}

/* Runs step op on every device at once; 0, or the job's error (the first
 * device, in order, that failed). */
static int step(ps *s, int op) {
  s->op = op;
  fan_run(&s->fan, step_one, s);
  for (int j = 0; j < s->k; j++)
    if (s->rc[j])
      return part_failed(s->job, s->p->dev[s->blame[j]], s->rc[j], s->what[j] ? s->what[j] : op_names[op],
                         s->msg[j]);
  return 0;
}

/* The sum over devices of partial[w], in device order. */
static double total(const ps *s, int w) {
  double sum = 0;
  for (int j = 0; j < s->k; j++) sum += s->partial[w][j];
  return sum;
}

/* sum over devices of a . b, in device order; 0 or the job's error. */
static int pdot(ps *s, int a, int b, double *out) {
  *out = 0;
  s->ia = a, s->ib = b;
  if (step(s, OP_DOT)) return s->job->err;
  *out = total(s, 0);
  return 0;
}

/* y = a x + b y on every device. */
static int paxpby(ps *s, double a, int x, double b, int y) {
  s->a = a, s->b = b, s->ia = x, s->ib = y, s->pack = 0;
  return step(s, OP_AXPBY) ? s->job->err : 0;
}

/* p = a x + b p, then p's send entries packed for the next spmv's halo
 * (part_halo_pack), in the same step. */
static int pnext(ps *s, double a, int x, double b) {
  s->a = a, s->b = b, s->ia = x, s->ib = V_P, s->pack = 1;
  return step(s, OP_AXPBY) ? s->job->err : 0;
}

/* x += a p, r -= a q (a = 0: neither), then *rr = r . r and, with jacobi,
 * z = dinv .* r and *rz = r . z: one step (gkcd_part_ops.cg_update). */
static int pupdate(ps *s, double a, int jacobi, double *rr, double *rz) {
  s->a = a, s->jacobi = jacobi;
  if (step(s, OP_UPDATE)) return s->job->err;
  *rr = total(s, 0);
  if (rz) *rz = jacobi ? total(s, 1) : *rr;
  return 0;
}

/* q = A p, and (pq not NULL) *pq = p . q, in one step that first pulls
 * p's halo from the buffers pnext packed (part_halo_pull). */
static int pspmv(ps *s, double *pq) {
  s->dot = pq != NULL;
  memset(s->moved, 0, sizeof s->moved);
  int rc = step(s, OP_SPMV);
  /* What the halo cost, as the copies took it: side by side, so the
   * slowest device's time. */
  double us = 0;
  for (int j = 0; j < s->k; j++) {
    s->job->peer_bytes += s->moved[j].bytes;
    s->job->peer_direct |= s->moved[j].direct;
    us = fmax(us, s->moved[j].us);
  }
  s->job->peer_us += us;
  if (rc) return s->job->err;
  if (pq) *pq = total(s, 0);
  return 0;
}

/* Cancelled, past the deadline, or one of the devices lost. */
static int poll(ps *s) {
  gkcd_job *job = s->job;
  for (int j = 0; j < s->k; j++)
    if (atomic_load(&s->be[j]->lost)) return -1;
  return s->it == 0 ? 0 : job_poll(job);
}

static int record(ps *s, double rn) {
  s->it++;
  if (s->job->history) s->job->history[s->it - 1] = rn / s->bn;
  if (!isfinite(rn)) return SOLVE_R_NON_FINITE;
  if (rn <= s->tol) return SOLVE_R_CONVERGED;
  return -1;
}

/* The reason it stopped (SOLVE_R_*), or -2 when the job failed.  One
 * iteration is three steps, the halo exchange riding on two of them: q =
 * A p with p . q (after pulling p's halo); the update of x and r with r . r
 * (and z, r . z); p = r + beta p (or z), packing p's send entries. */
static int cg(ps *s, int jacobi) {
  double rz = 0, rr = 0;
  int why;
  if (pupdate(s, 0, jacobi, &rr, &rz)) return -2;
  if (pnext(s, 1, jacobi ? V_Z : V_R, 0)) return -2;
  while (s->it < s->job->in.solve.max_iter) {
    if ((why = poll(s)) < 0) {
      for (int j = 0; j < s->k; j++)
        if (atomic_load(&s->be[j]->lost)) part_failed(s->job, s->p->dev[j], GKC_EDEVICE_LOST, "", "");
      return -2;
    }
    if (why) return why;
    double pq = 0, rz_new = 0;
    if (pspmv(s, &pq)) return -2;
    if (!isfinite(pq)) return SOLVE_R_NON_FINITE;
    if (pq <= 0) return SOLVE_R_BREAKDOWN;
    double alpha = rz / pq;
    if (pupdate(s, alpha, jacobi, &rr, &rz_new)) return -2;
    if ((why = record(s, sqrt(rr))) >= 0) return why;
    if (!isfinite(rz_new)) return SOLVE_R_NON_FINITE;
    if (rz_new <= 0) return SOLVE_R_BREAKDOWN;
    if (pnext(s, 1, jacobi ? V_Z : V_R, rz_new / rz)) return -2;
    rz = rz_new;
  }
  return SOLVE_R_MAX_ITER;
}

/* r = b - A x (x copied into p first, for its halo). */
static int residual(ps *s, double *rn) {
  double rr;
  if (pnext(s, 1, V_X, 0) || pspmv(s, NULL) || paxpby(s, 1, V_B, 0, V_R) ||
      paxpby(s, -1, V_Q, 1, V_R) || pdot(s, V_R, V_R, &rr))
    return -1;
  *rn = sqrt(rr);
  return 0;
}

/* Host float32 (n = rows) to or from vector w on every device, through the
 * float64 staging buffer; host NULL (to_dev): zeros. */
static int move_vec(ps *s, int w, float *host, int to_dev) {
  int32_t n = s->p->plan.rows;
  double *d = s->stage;
  if (to_dev)
    for (int32_t i = 0; i < n; i++) d[i] = host ? host[i] : 0.0;
  for (int j = 0; j < s->k; j++) {
    const part_block *b = &s->p->plan.b[j];
    char msg[200] = "";
    int rc = to_dev ? s->be[j]->part->to_dev(s->be[j], s->v[w][j], d + b->row0, 8 * (size_t)b->rows,
                                             msg, sizeof msg)
                    : s->be[j]->part->to_host(s->be[j], d + b->row0, s->v[w][j],
                                              8 * (size_t)b->rows, msg, sizeof msg);
    if (rc) return part_failed(s->job, s->p->dev[j], rc, "copying a vector", msg);
  }
  if (!to_dev)
    for (int32_t i = 0; i < n; i++) host[i] = (float)d[i];
  return 0;
}

void part_solve(gkcd_job *job) {
  __typeof__(job->in.solve) *in = &job->in.solve;
  ps s = {.job = job, .p = job->part, .k = job->part->plan.k};
  int fan_on = 0;
  void *mem[GKCD_MAX_DEVICES] = {0};
  size_t cap[GKCD_MAX_DEVICES] = {0};
  int32_t n = in->n;
  float *hb = malloc(4 * (size_t)n + 4), *hx = malloc(4 * (size_t)n + 4);
  s.stage = malloc(8 * (size_t)n + 8);
  if (!hb || !hx || !s.stage) goto oom;
  if (in->method == SOLVE_PCG && s.p->bad_diag >= 0) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "argument 'method': pcg divides by the diagonal, and"
             " row %" PRId32 " of the matrix has a zero (or non-finite) diagonal entry",
             s.p->bad_diag);
    goto out;
  }
  if (in->history && !(job->history = job->priv[1] = malloc((size_t)in->max_iter * sizeof(double)))) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %" PRId64 " residuals for the history",
             in->max_iter);
    goto out;
  }
  if (part_read_span(job, &in->b, hb) || (in->x0.ptr && part_read_span(job, &in->x0, hx))) goto out;
  for (int j = 0; j < s.k; j++) {
    const part_block *b = &s.p->plan.b[j];
    s.be[j] = devices_backend(s.p->dev[j]);
    size_t r = (size_t)b->rows, bytes = 8 * (5 * r + r + (size_t)b->nhalo + (size_t)b->nsend);
    char msg[200] = "";
    int rc = s.be[j]->res_alloc(s.be[j], bytes, &mem[j], &cap[j], msg, sizeof msg);
    if (rc) {
      mem[j] = NULL;
      part_failed(job, s.p->dev[j], rc, "allocating the solver's vectors", msg);
      goto out;
    }
    double *m = mem[j];
    for (int w = V_X; w <= V_Z; w++) s.v[w][j] = m + (size_t)w * r;
    s.v[V_P][j] = m + 5 * r;
    s.v[V_BUF][j] = m + 6 * r + (size_t)b->nhalo;
  }
  fan_start(&s.fan, s.k);
  fan_on = 1;
  double t0 = now_us();
  if (move_vec(&s, V_B, hb, 1) || move_vec(&s, V_X, in->x0.ptr ? hx : NULL, 1) ||
      pdot(&s, V_B, V_B, &s.bn))
    goto out;
  s.bn = sqrt(s.bn);
  s.tol = fmax(in->rtol * s.bn, in->atol);
  int why;
  double rn;
  if (!isfinite(s.bn)) {
    why = SOLVE_R_NON_FINITE;
  } else if (s.bn == 0) { /* x = 0 solves it exactly */
    if (paxpby(&s, 0, V_B, 0, V_X)) goto out;
    why = SOLVE_R_CONVERGED;
  } else {
    if (residual(&s, &rn)) goto out;
    if (!isfinite(rn)) why = SOLVE_R_NON_FINITE;
    else if (rn <= s.tol) why = SOLVE_R_CONVERGED;
    else if ((why = cg(&s, in->method == SOLVE_PCG)) == -2) goto out;
  }
  /* The residual of the x returned: x rounded to float32, in float64. */
  if (move_vec(&s, V_X, hx, 0) || move_vec(&s, V_X, hx, 1) || residual(&s, &rn)) goto out;
  job->kernel_us = now_us() - t0;
  if (why == SOLVE_R_CANCELLED) {
    job_fail(job, GKC_ECANCELLED, "cancelled after %" PRId64 " iterations", s.it);
    goto out;
  }
  job->iterations = s.it;
  job->reason = why;
  job->value = s.bn == 0 ? 0 : rn / s.bn;
  if (part_write_out(job, hx, s.p->dev[0]) == 0) job->algo_name = "partitioned";
  goto out;
oom:
  job_fail(job, GKC_EOUT_OF_MEMORY, "out of memory for a partitioned solve");
out:
  if (fan_on) fan_stop(&s.fan);
  for (int j = 0; j < s.k; j++)
    if (mem[j]) s.be[j]->res_free(s.be[j], mem[j], cap[j]);
  free(hb), free(hx), free(s.stage);
}
