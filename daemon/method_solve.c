/* method_solve.c: the `solve` request, from its arguments to a job and from
 * the finished job to its result (see PROTOCOL.md, "solve").
 *
 * Everything a solve can be refused for is found here, on the loop, before
 * anything runs: the matrix must be resident and square, b and x0 as long
 * as it, the tolerances finite and non-negative, max_iter within range, the
 * method and precond known.  (The zero-diagonal and empty-row checks of
 * jacobi and amg read the matrix, so the backend makes them, still before
 * the first iteration.)
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "part.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"
#include "res_object.h"

static const char *const method_names[] = {
#define SOLVE__NAME(name, str) str,
    SOLVE_METHOD_MAP(SOLVE__NAME)
#undef SOLVE__NAME
};
static const char *const precond_names[] = {
#define SOLVE__NAME(name, str) str,
    SOLVE_PRECOND_MAP(SOLVE__NAME)
#undef SOLVE__NAME
};
static const char *const reason_names[] = {
#define SOLVE__NAME(name, str) str,
    SOLVE_REASON_MAP(SOLVE__NAME)
#undef SOLVE__NAME
};

static const char *solve_method_name(int m) {
  return m >= 0 && m < SOLVE_NMETHODS ? method_names[m] : "?";
}
static const char *solve_reason_name(int r) {
  return r >= 0 && r < SOLVE_NREASONS ? reason_names[r] : "?";
}

/* A tolerance: a finite number >= 0 (float64 precision kept). */
static int parse_tol(args_ctx *a, const char *key, double *out) {
  const msgpack_object *o = proto_map_get(a->params, key);
  if (!o) return 0;
  double v;
  if (args_number(o, &v) != 0) {
    snprintf(a->msg, a->msglen, "argument '%s' must be a number", key);
    return GKC_EINVALID_ARGUMENT;
  }
  if (!isfinite(v) || v < 0) {
    snprintf(a->msg, a->msglen, "argument '%s' must be a finite number >= 0, got %g", key, v);
    return GKC_EINVALID_ARGUMENT;
  }
  *out = v;
  return 0;
}

/* precond auto: amg where smoothed aggregation fits the matrix, jacobi
 * elsewhere.  Its near-null space is the constant vector, which suits
 * matrices near an M-matrix (off-diagonals nonpositive: Laplacians,
 * networks); where much of the off-diagonal weight is positive
 * (elasticity), the aggregates' constant vectors are far from the slow
 * modes and the cycle helps too little to pay for itself.  Measured on the
 * CPU backend (rtol 1e-8, b = ones, hierarchy kept): 1138_bus, positive
 * share 0.00, amg 16 iterations in 10 ms against jacobi's 1,043 in 47 ms;
 * bcsstk13, share 0.40, amg 440 iterations in 770 ms against jacobi's
 * 1,507 in 477 ms.  The cut, 0.1, lies between.  A matrix whose share is not known (one
 * restored after a restart) gets jacobi, as does a partitioned one. */
#define SOLVE_AUTO_AMG_MAX_POS 0.1f

static int auto_precond(const gkcd_res *m, int part) {
  return !part && m->pos_offdiag >= 0 && m->pos_offdiag <= SOLVE_AUTO_AMG_MAX_POS
             ? SOLVE_PRECOND_AMG
             : SOLVE_PRECOND_JACOBI;
}

/* precond: none (cg, bicgstab) or jacobi (pcg) by default.  pcg is cg
 * with jacobi, so cg with jacobi runs as pcg (both backends know it) and
 * pcg with anything else names both arguments. */
static int parse_precond(args_ctx *a, __typeof__(((gkcd_job *)0)->in.solve) *s, int part,
                         const gkcd_res *m) {
  uint32_t matrix = m->id;
  int pcg = s->method == SOLVE_PCG;
  const char *name = pcg ? "jacobi" : "none";
  size_t len = strlen(name);
  int rc;
  if ((rc = args_str(a, "precond", 0, &name, &len))) return rc;
  s->precond = -1;
  for (int i = 0; i < SOLVE_NPRECONDS; i++)
    if (strlen(precond_names[i]) == len && !memcmp(precond_names[i], name, len)) s->precond = i;
  char echo[40];
  if (s->precond < 0) {
    snprintf(a->msg, a->msglen, "argument 'precond': '%s' is not one of none, jacobi, amg, auto",
             proto_echo(echo, sizeof echo, name, len, 32));
    return GKC_EINVALID_ARGUMENT;
  }
  if (pcg && s->precond != SOLVE_PRECOND_JACOBI) {
    snprintf(a->msg, a->msglen, "argument 'precond': '%s' conflicts with argument 'method': pcg"
             " is cg with precond jacobi; use method cg with precond %s",
             precond_names[s->precond], precond_names[s->precond]);
    return GKC_EINVALID_ARGUMENT;
  }
  if (s->precond == SOLVE_PRECOND_AUTO) s->precond = auto_precond(m, part);
  if (part && s->precond == SOLVE_PRECOND_AMG) {
    snprintf(a->msg, a->msglen, "argument 'precond': amg does not run on a partitioned matrix"
             " (matrix %" PRIu32 ") for now; use jacobi, or upload it to one device", matrix);
    return GKC_EINVALID_ARGUMENT;
  }
  s->method_asked = s->method;
  if (s->method == SOLVE_CG && s->precond == SOLVE_PRECOND_JACOBI) s->method = SOLVE_PCG;
  return 0;
}

static int parse(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"matrix", "b",  "x0",      "method",      "rtol", "atol",
                                     "max_iter", "history", "precision", "deadline_ms", "out",
                                     "dtype", "precond", NULL};
  static const char *const arrays[] = {"b", "x0", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  __typeof__(job->in.solve) *s = &job->in.solve;
  int rc;
  if ((rc = args_known(a, keys))) return rc;
  gkcd_res *m;
  if ((rc = refs_object(r, "matrix", RES_MATRIX, &m))) return rc;
  if (m->rows != m->cols) {
    snprintf(a->msg, a->msglen, "argument 'matrix': matrix %" PRIu32 " is %" PRId32 " x %" PRId32
             ": solve needs a square matrix", m->id, m->rows, m->cols);
    return GKC_EINVALID_ARGUMENT;
  }
  s->n = m->rows, s->nnz = m->nnz, s->max_row = m->max_row;
  s->values_dtype = m->dtype;
  /* b's dtype, and so x0's and x's; A's values keep their own. */
  if ((rc = refs_floats(r, arrays, 0))) return rc;
  int dt = r->fdt;
  if (m->part && dt != DT_F32) {
    snprintf(a->msg, a->msglen, "argument '%s' is %s, but solve on a partitioned matrix (matrix %"
             PRIu32 ") runs on float32 vectors only for now", r->fdt_from ? r->fdt_from : "b",
             refs_type_name(dt), m->id);
    return GKC_EINVALID_ARGUMENT;
  }
  if (m->part) { /* partitioned (part.h): a gang job on all its devices */
    job->part = m->part;
    job->gang_mask = m->part->mask;
  } else {
    size_t rp = ((size_t)m->rows + 1) * 4;
    s->row_ptr = m->ptr;
    s->col_idx = (const char *)m->ptr + rp;
    s->values = (const char *)m->ptr + res_values_offset(m->rows, m->nnz, m->dtype);
    s->plan = m->plan_off ? (const char *)m->ptr + m->plan_off : NULL;
  }

  const char *name = "cg";
  size_t len = 2;
  if ((rc = args_str(a, "method", 0, &name, &len))) return rc;
  s->method = -1;
  for (int i = 0; i < SOLVE_NMETHODS; i++)
    if (strlen(method_names[i]) == len && !memcmp(method_names[i], name, len)) s->method = i;
  if (s->method < 0) {
    char echo[40];
    snprintf(a->msg, a->msglen, "argument 'method': '%s' is not one of cg, pcg, bicgstab",
             proto_echo(echo, sizeof echo, name, len, 32));
    return GKC_EINVALID_ARGUMENT;
  }
  if ((rc = parse_precond(a, s, job->part != NULL, m))) return rc;
  const char *prec = "fp64";
  size_t plen = 4;
  if ((rc = args_str(a, "precision", 0, &prec, &plen))) return rc;
  if (plen == 4 && !memcmp(prec, "fp32", 4)) {
    s->fp32 = 1;
  } else if (!(plen == 4 && !memcmp(prec, "fp64", 4))) {
    char echo[40];
    snprintf(a->msg, a->msglen, "argument 'precision': '%s' is not fp64 or fp32",
             proto_echo(echo, sizeof echo, prec, plen, 32));
    return GKC_EINVALID_ARGUMENT;
  }
  if (job->part && s->fp32) {
    snprintf(a->msg, a->msglen, "argument 'precision': fp32 does not run on a partitioned"
             " matrix (matrix %" PRIu32 ", carried in float64 on every device); leave it out",
             m->id);
    return GKC_EINVALID_ARGUMENT;
  }
  if (job->part && s->method == SOLVE_BICGSTAB) {
    snprintf(a->msg, a->msglen, "argument 'method': bicgstab does not run on a partitioned"
             " matrix (matrix %" PRIu32 "); use cg or pcg, or upload it to one device", m->id);
    return GKC_EINVALID_ARGUMENT;
  }
  s->rtol = 1e-6, s->atol = 0;
  int64_t max_iter = (int64_t)m->rows * 10 < SOLVE_MAX_ITER ? (int64_t)m->rows * 10 : SOLVE_MAX_ITER;
  if ((rc = parse_tol(a, "rtol", &s->rtol)) || (rc = parse_tol(a, "atol", &s->atol)) ||
      (rc = args_int(a, "max_iter", 0, 1, SOLVE_MAX_ITER, &max_iter)) ||
      (rc = args_bool(a, "history", 0, &s->history)))
    return rc;
  s->max_iter = max_iter;
  uint64_t xb = refs_bytes((uint64_t)m->rows, 1, dt);
  if (xb > max) {
    snprintf(a->msg, a->msglen, "the result x would take %" PRIu64 " bytes, over the limit of %zu"
             " (--max-request-bytes)", xb, max);
    return GKC_ETOO_LARGE;
  }
  if (s->history && (uint64_t)max_iter * 8 > max) {
    snprintf(a->msg, a->msglen, "argument 'history': max_iter = %" PRId64 " residuals of 8 bytes"
             " could exceed the reply limit of %zu bytes (--max-request-bytes): lower max_iter",
             max_iter, max);
    return GKC_ETOO_LARGE;
  }
  char what[64];
  snprintf(what, sizeof what, "rows = %" PRId32 " %s", m->rows, proto_dtype_name(dt));
  if ((rc = refs_array(r, "b", 1, xb, 0, REFS_FLOAT, what, &s->b)) ||
      (rc = refs_array(r, "x0", 0, xb, 0, REFS_FLOAT, what, &s->x0)))
    return rc;
  job->out_bytes = xb;
  if ((rc = refs_out(r, "x", xb, dt))) return rc;
  /* amg: the matrix's hierarchy when it has one no other solve holds
   * (its scratch vectors are its own), else this solve builds one for the
   * matrix to keep.  Lent last, once the request is valid; rpc.c's
   * job_free gives it back, whatever became of the job. */
  if (s->precond == SOLVE_PRECOND_AMG) {
    job->amg_matrix = m;
    if (m->precond && !m->precond_busy) s->amg = m->precond, m->precond_busy = 1;
  }
  return 0;
}

static void pack(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  int copies = methods_timing_extra(job);
  int hist = job->in.solve.history, amg = job->in.solve.precond == SOLVE_PRECOND_AMG;
  msgpack_pack_map(pk, METHODS_TIMING_KEYS + 7 + 3 * amg + copies + hist);
  methods_pack_timing(pk, job, server_us);
  proto_pack_cstr(pk, "method"), proto_pack_cstr(pk, solve_method_name(job->in.solve.method_asked));
  proto_pack_cstr(pk, "precond"), proto_pack_cstr(pk, precond_names[job->in.solve.precond]);
  if (amg) {
    proto_pack_cstr(pk, "levels"), msgpack_pack_int(pk, job->amg_levels);
    proto_pack_cstr(pk, "amg_setup_us"), msgpack_pack_double(pk, job->amg_setup_us);
    /* the matrix's hierarchy, built by an earlier solve: no setup this time */
    proto_pack_cstr(pk, "amg_reused");
    job->in.solve.amg ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  }
  proto_pack_cstr(pk, "iterations"), msgpack_pack_int64(pk, job->iterations);
  proto_pack_cstr(pk, "residual"), msgpack_pack_double(pk, job->value);
  proto_pack_cstr(pk, "converged");
  job->reason == SOLVE_R_CONVERGED ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  proto_pack_cstr(pk, "reason"), proto_pack_cstr(pk, solve_reason_name(job->reason));
  if (hist) {
    /* float64 little-endian, like every array on the wire */
    size_t n = job->history ? (size_t)job->iterations : 0;
    proto_pack_cstr(pk, "history");
    msgpack_pack_bin(pk, n * 8);
    for (size_t i = 0; i < n; i++) {
      uint64_t u;
      memcpy(&u, &job->history[i], 8);
      unsigned char le[8];
      for (int j = 0; j < 8; j++) le[j] = (unsigned char)(u >> (8 * j));
      msgpack_pack_bin_body(pk, le, 8);
    }
  }
  methods_pack_out(pk, job, "x", new_id); /* last: a bin body may follow */
}

/* Per iteration: an spmv and a handful of vector passes; the count is
 * unknown until it converges, so assume the bound, capped: a solve is
 * long work however quickly it may turn out to converge. */
static void work(const gkcd_job *job, method_work *w) {
  const __typeof__(job->in.solve) *s = &job->in.solve;
  double it = (double)(s->max_iter < 10000 ? s->max_iter : 10000);
  /* AMG: far fewer iterations (tens), each a V-cycle of about six
   * products with A's size (smoothing, residual, transfers, coarse levels) */
  double per = s->precond == SOLVE_PRECOND_AMG ? 7.0 : 1.0;
  if (s->precond == SOLVE_PRECOND_AMG && it > 100) it = 100;
  w->flops = it * per * (2.0 * (double)s->nnz + 12.0 * s->n);
  w->bytes = it * per * (8.0 * (double)s->nnz + 40.0 * s->n);
  w->xfer = methods_host_bytes(&s->b) + methods_host_bytes(&s->x0) +
            (double)proto_dtype_size(s->b.dtype) * s->n;
}

static int inputs(gkcd_job *job, gkcd_span *out[], int max) {
  (void)max;
  out[0] = &job->in.solve.b, out[1] = &job->in.solve.x0;
  return 2;
}

/* The resident matrix (its arrays and plan) and b, x0. */
static int operands(gkcd_job *job, const void **out[], int max) {
  (void)max;
  __typeof__(job->in.solve) *s = &job->in.solve;
  int n = 0;
  out[n++] = &s->row_ptr, out[n++] = &s->col_idx, out[n++] = &s->values, out[n++] = &s->plan;
  out[n++] = &s->b.ptr, out[n++] = &s->x0.ptr;
  return n;
}

const gkcd_method method_row_SOLVE = {
    .id = PROTO_M_SOLVE, .where = METHOD_BACKEND, .makes = -1, .parse = parse, .work = work,
    .inputs = inputs, .operands = operands, .part_run = part_solve, .pack = pack, .bulk_only = 1,
};
