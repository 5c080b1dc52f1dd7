/* gkc_solve.c: solve and batch, the calls that run many operations in one
 * request (see gkc.h, "solving"; PROTOCOL.md, "solve" and "batch").
 *
 * Like every method file, each call is a prep (check and copy the
 * arguments), a pack (the params map) and a take (the result); the blocking
 * call and the async row of GKC_ASYNC_METHOD_MAP share all three.  The
 * library checks what it must to encode the request (known method and op
 * values, the step count, non-zero handles where one is required); gkcd
 * checks the rest and names the argument.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_internal.h"
#include "gkc_reply.h"
#include "gkc_shm.h"
#include "proto_rpc.h"

/* --- solve --------------------------------------------------------------------------------- */

static const char *const method_names[] = {"cg", "pcg", "bicgstab"};
#define NMETHODS (int)(sizeof method_names / sizeof method_names[0])

const char *gkc_solve_method_name(gkc_solve_method m) {
  return (int)m >= 0 && (int)m < NMETHODS ? method_names[m] : NULL;
}

int gkc_solve_method_parse(const char *s) {
  for (int i = 0; s && i < NMETHODS; i++)
    if (strcmp(s, method_names[i]) == 0) return i;
  return -1;
}

static const char *const precond_names[] = {"none", "jacobi", "amg", "auto"};
#define NPRECONDS (int)(sizeof precond_names / sizeof precond_names[0])

const char *gkc_solve_precond_name(gkc_solve_precond p) {
  return (int)p >= 0 && (int)p < NPRECONDS ? precond_names[p] : NULL;
}

int gkc_solve_precond_parse(const char *s) {
  for (int i = 0; s && i < NPRECONDS; i++)
    if (strcmp(s, precond_names[i]) == 0) return i;
  return -1;
}

/* precond goes on the wire unless it is the method's own default (pcg's
 * jacobi is its alias; GKC_PRECOND_NONE with pcg means "its default"), so
 * that a request without one reads as it did before precond existed. */
static int sends_precond(const gkc_solve_args *a) {
  return a->precond != GKC_PRECOND_NONE && !(a->method == GKC_SOLVE_PCG &&
                                             a->precond == GKC_PRECOND_JACOBI);
}

static void pack_solve(msgpack_packer *pk, const gkc__req *r) {
  const gkc_solve_args *a = &r->a.solve;
  int x0 = GKC_REF_KIND(a->x0.kind) != GKC_REF_NONE;
  msgpack_pack_map(pk, 6 + x0 + (a->max_iter > 0) + (a->deadline_ms > 0) + (a->fp32 != 0) +
                          sends_precond(a) + gkc__out_keys(gkc__wire_out(r)) + gkc__dtype_keys(r));
  if (sends_precond(a)) proto_pack_cstr(pk, "precond"), proto_pack_cstr(pk, precond_names[a->precond]);
  gkc__pack_dtype(pk, r); /* b's, x0's and x's */
  proto_pack_cstr(pk, "matrix"), gkc__pack_id(pk, a->matrix);
  proto_pack_cstr(pk, "method"), proto_pack_cstr(pk, method_names[a->method]);
  proto_pack_cstr(pk, "rtol"), msgpack_pack_double(pk, a->rtol);
  proto_pack_cstr(pk, "atol"), msgpack_pack_double(pk, a->atol);
  proto_pack_cstr(pk, "history"), a->history ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  if (a->max_iter > 0) proto_pack_cstr(pk, "max_iter"), msgpack_pack_int64(pk, a->max_iter);
  if (a->fp32) proto_pack_cstr(pk, "precision"), proto_pack_cstr(pk, "fp32");
  if (a->deadline_ms > 0)
    proto_pack_cstr(pk, "deadline_ms"), msgpack_pack_uint32(pk, a->deadline_ms);
  gkc__pack_ref(pk, "b", &a->b);
  gkc__pack_ref(pk, "x0", &a->x0);
  gkc__pack_out(pk, "x", gkc__wire_out(r));
}

/* A little-endian float64 (the protocol's byte order, whatever ours is). */
static double le_f64(const unsigned char *p) {
  uint64_t u = 0;
  for (int i = 7; i >= 0; i--) u = u << 8 | p[i];
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static int take_solve(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  const gkc_solve_args *a = &req->a.solve;
  gkc_solve_result *s = &res->solve;
  uint64_t v;
  int rc;
  gkc__take_info(r, &res->info);
  if ((rc = gkc__get_uint(c, r, "iterations", INT64_MAX, &v))) return rc;
  s->iterations = (int64_t)v;
  const msgpack_object *o = proto_map_get(r, "residual");
  if (!o || (o->type != MSGPACK_OBJECT_FLOAT64 && o->type != MSGPACK_OBJECT_FLOAT32))
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a float 'residual'");
  s->residual = o->via.f64;
  o = proto_map_get(r, "converged");
  if (!o || o->type != MSGPACK_OBJECT_BOOLEAN)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a boolean 'converged'");
  s->converged = o->via.boolean;
  gkc__get_str(r, "reason", s->reason, sizeof s->reason);
  gkc__get_str(r, "method", s->method, sizeof s->method);
  gkc__get_str(r, "precond", s->precond, sizeof s->precond);
  if ((o = proto_map_get(r, "levels")) && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    s->levels = (int)o->via.u64;
  if ((o = proto_map_get(r, "amg_setup_us")) &&
      (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32))
    s->amg_setup_us = o->via.f64;
  if ((o = proto_map_get(r, "amg_reused")) && o->type == MSGPACK_OBJECT_BOOLEAN)
    s->amg_reused = o->via.boolean;
  s->history_len = 0;
  o = proto_map_get(r, "history");
  if (a->history) {
    if (!o || o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % 8 != 0 ||
        o->via.bin.size / 8 != v)
      return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a 'history' bin of %llu float64",
                       (unsigned long long)v);
    s->history_len = o->via.bin.size / 8;
    size_t n = s->history_len < a->history_cap ? s->history_len : a->history_cap;
    const unsigned char *p = (const unsigned char *)o->via.bin.ptr;
    for (size_t i = 0; i < n; i++) a->history[i] = le_f64(p + 8 * i);
  }
  return gkc__take_out(c, r, "x", req);
}

int gkc__prep_solve(gkc_conn *c, gkc__req *r, const gkc_solve_args *a, gkc_out *out) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->b, "b", 0)) || (rc = gkc__check_ref(c, &a->x0, "x0", 1)) ||
      (rc = gkc__check_out(c, out)))
    return rc;
  if (!gkc_solve_method_name(a->method))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "method %d is not GKC_SOLVE_CG, GKC_SOLVE_PCG or "
                     "GKC_SOLVE_BICGSTAB", (int)a->method);
  if (!gkc_solve_precond_name(a->precond))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "precond %d is not GKC_PRECOND_NONE, "
                     "GKC_PRECOND_JACOBI or GKC_PRECOND_AMG", (int)a->precond);
  if (a->max_iter < 0)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "max_iter must be >= 1 (0: gkcd's default), got "
                     "%lld", (long long)a->max_iter);
  if (a->history && a->history_cap == 0)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "history: history_cap must be at least 1");
  r->a.solve = *a;
  r->method = "solve", r->pack = pack_solve, r->take = take_solve, r->out = out;
  gkc_ref *const refs[] = {&r->a.solve.b, &r->a.solve.x0};
  static const char *const names[] = {"b", "x0"};
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 2, 0))) return rc;
  /* x has b's length (and x0's), when the request states one. */
  const gkc_ref *b = &r->a.solve.b, *x0 = &r->a.solve.x0;
  uint64_t n = b->kind == GKC_REF_MEM || b->kind == GKC_REF_REGION ? b->bytes
               : x0->kind == GKC_REF_MEM || x0->kind == GKC_REF_REGION ? x0->bytes : 0;
  gkc__shm_stage(c, r, refs, 2, out, n, "x");
  return 0;
}

int gkc_solve(gkc_conn *c, const gkc_solve_args *args, gkc_out *out, gkc_solve_result *result,
              gkc_info *info) {
  if (!result) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "result must not be NULL");
  memset(result, 0, sizeof *result);
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  int rc = gkc__prep_solve(c, &r, args, out);
  if (rc == 0) rc = gkc__run(c, &r, &res);
  if (rc == 0) {
    *result = res.solve;
    if (info) *info = res.info;
  }
  return rc;
}

/* --- batch steps ------------------------------------------------------------------------- */

static const char *const op_names[] = {"dot", "reduce", "axpby", "spmv", "sgemm"};
#define NOPS (int)(sizeof op_names / sizeof op_names[0])

gkc_scalar gkc_scalar_num(float v) {
  gkc_scalar s = {0, v, -1, -1, 1.0f};
  return s;
}

gkc_scalar gkc_scalar_ref(int step, int over, float scale) {
  gkc_scalar s = {1, 0.0f, step, over, scale};
  return s;
}

gkc_step gkc_step_dot(uint32_t x, uint32_t y) {
  gkc_step s = {.op = GKC_STEP_DOT, .x = x, .y = y};
  return s;
}

gkc_step gkc_step_reduce(uint32_t x, gkc_reduce_op fn) {
  gkc_step s = {.op = GKC_STEP_REDUCE, .x = x, .fn = fn};
  return s;
}

gkc_step gkc_step_axpby(gkc_scalar alpha, uint32_t x, gkc_scalar beta, uint32_t y, uint32_t out) {
  gkc_step s = {.op = GKC_STEP_AXPBY, .x = x, .y = y, .out = out, .alpha = alpha, .beta = beta};
  return s;
}

gkc_step gkc_step_spmv(uint32_t matrix, gkc_scalar alpha, uint32_t x, gkc_scalar beta, uint32_t y,
                       uint32_t out) {
  gkc_step s = {.op = GKC_STEP_SPMV, .matrix = matrix, .x = x, .y = y, .out = out,
                .alpha = alpha, .beta = beta};
  return s;
}

gkc_step gkc_step_sgemm(int32_t m, int32_t n, int32_t k, gkc_scalar alpha, uint32_t a,
                        int trans_a, uint32_t b, int trans_b, gkc_scalar beta, uint32_t c,
                        uint32_t out) {
  gkc_step s = {.op = GKC_STEP_SGEMM, .m = m, .n = n, .k = k, .alpha = alpha, .a = a,
                .trans_a = trans_a, .b = b, .trans_b = trans_b, .beta = beta, .c = c,
                .out = out};
  return s;
}

/* --- batch -------------------------------------------------------------------------------- */

static void pack_handle(msgpack_packer *pk, const char *key, uint32_t h) {
  proto_pack_cstr(pk, key);
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, "handle"), gkc__pack_id(pk, h);
}

static void pack_scalar(msgpack_packer *pk, const char *key, const gkc_scalar *s) {
  proto_pack_cstr(pk, key);
  if (!s->is_ref) {
    msgpack_pack_float(pk, s->value);
    return;
  }
  msgpack_pack_map(pk, 1 + (s->step >= 0) + (s->over >= 0));
  if (s->step >= 0) proto_pack_cstr(pk, "step"), msgpack_pack_int32(pk, s->step);
  if (s->over >= 0) proto_pack_cstr(pk, "over"), msgpack_pack_int32(pk, s->over);
  proto_pack_cstr(pk, "scale"), msgpack_pack_float(pk, s->scale);
}

/* A region operand given (gkc_step_region): x a slice, out a target. */
static int region_x(const gkc_step_region *g) { return g && GKC_REF_KIND(g->x.kind) == GKC_REF_REGION; }
static int region_out(const gkc_step_region *g) { return g && g->out.kind == GKC_OUT_REGION; }

/* x: a slice of a region (with its dtype, which settles the step's), else
 * the step's handle. */
static void pack_x(msgpack_packer *pk, const gkc_step *s, const gkc_step_region *g) {
  if (!region_x(g)) {
    pack_handle(pk, "x", s->x);
    return;
  }
  int f64 = GKC_REF_DTYPE(g->x.kind) == GKC_F64;
  proto_pack_cstr(pk, "x");
  msgpack_pack_map(pk, 3 + f64);
  proto_pack_cstr(pk, "region"), gkc__pack_id(pk, g->x.region);
  proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, g->x.offset);
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, g->x.bytes);
  if (f64) proto_pack_cstr(pk, "dtype"), proto_pack_cstr(pk, "f64");
}

static void pack_step(msgpack_packer *pk, const gkc_step *s, const gkc_step_region *g) {
  static const char *const fns[] = {"sum", "min", "max"};
  switch (s->op) {
    case GKC_STEP_DOT:
    case GKC_STEP_REDUCE:
      msgpack_pack_map(pk, 3);
      proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, op_names[s->op]);
      pack_handle(pk, "x", s->x);
      if (s->op == GKC_STEP_DOT)
        pack_handle(pk, "y", s->y);
      else
        proto_pack_cstr(pk, "fn"), proto_pack_cstr(pk, fns[s->fn]);
      break;
    case GKC_STEP_AXPBY:
      msgpack_pack_map(pk, 5 + (s->out != 0));
      proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, "axpby");
      pack_handle(pk, "x", s->x);
      pack_handle(pk, "y", s->y);
      pack_scalar(pk, "alpha", &s->alpha);
      pack_scalar(pk, "beta", &s->beta);
      if (s->out) proto_pack_cstr(pk, "out"), gkc__pack_id(pk, s->out);
      break;
    case GKC_STEP_SPMV:
      msgpack_pack_map(pk, 6 + (s->y != 0));
      proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, "spmv");
      proto_pack_cstr(pk, "matrix"), gkc__pack_id(pk, s->matrix);
      pack_x(pk, s, g);
      if (s->y) pack_handle(pk, "y", s->y);
      pack_scalar(pk, "alpha", &s->alpha);
      pack_scalar(pk, "beta", &s->beta);
      proto_pack_cstr(pk, "out");
      if (region_out(g)) {
        msgpack_pack_map(pk, 2);
        proto_pack_cstr(pk, "region"), gkc__pack_id(pk, g->out.region);
        proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, g->out.offset);
      } else {
        gkc__pack_id(pk, s->out);
      }
      break;
    case GKC_STEP_SGEMM:
      msgpack_pack_map(pk, 11 + (s->c != 0));
      proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, "sgemm");
      proto_pack_cstr(pk, "m"), msgpack_pack_int32(pk, s->m);
      proto_pack_cstr(pk, "n"), msgpack_pack_int32(pk, s->n);
      proto_pack_cstr(pk, "k"), msgpack_pack_int32(pk, s->k);
      pack_handle(pk, "a", s->a);
      pack_handle(pk, "b", s->b);
      if (s->c) pack_handle(pk, "c", s->c);
      pack_scalar(pk, "alpha", &s->alpha);
      pack_scalar(pk, "beta", &s->beta);
      proto_pack_cstr(pk, "trans_a"), s->trans_a ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
      proto_pack_cstr(pk, "trans_b"), s->trans_b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
      proto_pack_cstr(pk, "out"), gkc__pack_id(pk, s->out);
      break;
  }
}

static void pack_batch(msgpack_packer *pk, const gkc__req *r) {
  const gkc_batch_regions_args *a = &r->a.batch;
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, "steps");
  msgpack_pack_array(pk, (size_t)a->nsteps);
  for (int i = 0; i < a->nsteps; i++)
    pack_step(pk, &a->steps[i], a->regions ? &a->regions[i] : NULL);
}

static int take_batch(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc_batch_result *b = &res->batch;
  gkc__take_info(r, &res->info);
  const msgpack_object *o = proto_map_get(r, "results");
  int n = req->a.batch.nsteps;
  if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != (uint32_t)n)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks 'results', one map per step (%d)", n);
  b->nsteps = n;
  for (int i = 0; i < n; i++) {
    const msgpack_object *e = &o->via.array.ptr[i];
    if (e->type != MSGPACK_OBJECT_MAP)
      return gkc__fail(c, GKC_EPROTOCOL, "reply's results[%d] is not a map", i);
    b->value[i] = gkc__get_num(e, "value", NAN);
    b->handle[i] = (uint32_t)gkc__get_num(e, "handle", 0);
  }
  return 0;
}

/* A step's region operands: spmv only, of the kinds gkc.h names. */
static int check_regions(gkc_conn *c, int i, const char *op, const gkc_step *s,
                         const gkc_step_region *g) {
  int xk = GKC_REF_KIND(g->x.kind), ok_out = g->out.kind == GKC_OUT_REGION ||
                                             (g->out.kind == GKC_OUT_MEM && !g->out.data);
  if ((xk != GKC_REF_NONE && xk != GKC_REF_REGION) || !ok_out)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "regions[%d] (%s): x must be GKC_REF_REGION or "
                     "GKC_REF_NONE and out GKC_OUT_REGION or zeroed (kinds %d and %d)", i, op,
                     xk, g->out.kind);
  if (s->op != GKC_STEP_SPMV && (xk != GKC_REF_NONE || g->out.kind != GKC_OUT_MEM))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "regions[%d] (%s): only spmv steps take region "
                     "operands", i, op);
  return 0;
}

/* The handles a step must name (0 is never a handle: a forgotten field),
 * unless its region operand g (may be NULL) stands in. */
static int check_step(gkc_conn *c, int i, const gkc_step *s, const gkc_step_region *g) {
  const char *op = (int)s->op >= 0 && (int)s->op < NOPS ? op_names[s->op] : NULL;
  if (!op) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "steps[%d]: op %d is not a gkc_step_op", i,
                            (int)s->op);
  int rc = g ? check_regions(c, i, op, s, g) : 0;
  if (rc) return rc;
  struct { const char *name; uint32_t h; } need[4] = {{"x", s->x}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
  switch (s->op) {
    case GKC_STEP_DOT:
    case GKC_STEP_AXPBY: need[1].name = "y", need[1].h = s->y; break;
    case GKC_STEP_REDUCE:
      if (s->fn != GKC_SUM && s->fn != GKC_MIN && s->fn != GKC_MAX)
        return gkc__fail(c, GKC_EINVALID_ARGUMENT, "steps[%d] (reduce): fn must be GKC_SUM, "
                         "GKC_MIN or GKC_MAX", i);
      break;
    case GKC_STEP_SPMV:
      if (region_x(g)) need[0].name = NULL;
      need[1].name = "matrix", need[1].h = s->matrix;
      if (!region_out(g)) need[2].name = "out", need[2].h = s->out;
      break;
    case GKC_STEP_SGEMM:
      need[0].name = "a", need[0].h = s->a;
      need[1].name = "b", need[1].h = s->b;
      need[2].name = "out", need[2].h = s->out;
      break;
  }
  for (int j = 0; j < 4; j++)
    if (need[j].name && need[j].h == 0)
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "steps[%d] (%s): argument '%s' is 0, not a "
                       "handle", i, op, need[j].name);
  return 0;
}

int gkc__prep_batch_regions(gkc_conn *c, gkc__req *r, const gkc_batch_regions_args *a) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if (a->nsteps < 1 || a->nsteps > GKC_BATCH_MAX_STEPS || !a->steps)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "steps: 1 to %d steps are needed, got %d%s",
                     GKC_BATCH_MAX_STEPS, a->nsteps, a->steps ? "" : " (steps is NULL)");
  for (int i = 0; i < a->nsteps; i++)
    if ((rc = check_step(c, i, &a->steps[i], a->regions ? &a->regions[i] : NULL))) return rc;
  r->a.batch = *a;
  r->method = "batch", r->pack = pack_batch, r->take = take_batch;
  return 0;
}

int gkc__prep_batch(gkc_conn *c, gkc__req *r, const gkc_batch_args *a) {
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  gkc_batch_regions_args ra = {a->steps, NULL, a->nsteps};
  return gkc__prep_batch_regions(c, r, &ra);
}

int gkc_batch_regions(gkc_conn *c, const gkc_step *steps, const gkc_step_region *regions,
                      int nsteps, gkc_batch_result *result, gkc_info *info) {
  gkc_batch_regions_args a = {steps, regions, nsteps};
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  int rc = gkc__prep_batch_regions(c, &r, &a);
  if (rc == 0) rc = gkc__run(c, &r, &res);
  if (rc == 0) {
    if (result) *result = res.batch;
    if (info) *info = res.info;
  }
  return rc;
}

int gkc_batch(gkc_conn *c, const gkc_step *steps, int nsteps, gkc_batch_result *result,
              gkc_info *info) {
  return gkc_batch_regions(c, steps, NULL, nsteps, result, info);
}
