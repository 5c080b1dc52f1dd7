/* method_batch.c: the `batch` request (see PROTOCOL.md, "batch"): a list of
 * vector operations on resident arrays run in order as one job.
 *
 * Every step is checked here, on the loop, before any runs: its op, its
 * arguments (the same names and rules as the method of that name), that its
 * arrays are resident handles of the right lengths (or, for an spmv's x and
 * out, slices of the connection's regions, bounds checked), and that a scalar taken
 * from an earlier step names an earlier dot or reduce.  The backend then
 * only resolves those scalars as the steps run (batch_scalar).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_errors.h"
#include "batch_step.h"
#include "methods.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"
#include "res_object.h"


typedef struct {
  refs_ctx r;  /* over the step's map */
  args_ctx a;
  gkcd_step *steps;
  int i;       /* this step's index */
} step_ctx;

static int bad(step_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(step_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->a.msg, c->a.msglen, fmt, ap);
  va_end(ap);
  return GKC_EINVALID_ARGUMENT;
}

/* An array argument: a resident array of the step's float dtype
 * (refs_floats), of want bytes (REFS_ANY_LEN: any). */
static int res_array(step_ctx *c, const char *key, int required, uint64_t want, const char *what,
                     const void **ptr, size_t *bytes) {
  gkcd_span s;
  int rc = refs_array(&c->r, key, required, want, 0, REFS_FLOAT, what, &s);
  if (rc) return rc;
  if (s.ptr && s.where != SPAN_RES)
    return bad(c, "argument '%s' must be a resident array ({\"handle\": h}) in a batch", key);
  *ptr = s.ptr;
  if (bytes) *bytes = s.bytes;
  return 0;
}

/* spmv's x: a resident array, or a slice of one of the connection's
 * regions ({"region", "offset", "bytes"[, "dtype"]}: refs_array checks the
 * region's owner, the alignment, the bounds without overflow and the
 * length); never a bin. */
static int res_or_region(step_ctx *c, const char *key, uint64_t want, const char *what,
                         gkcd_step *st) {
  gkcd_span s;
  int rc = refs_array(&c->r, key, 1, want, 0, REFS_FLOAT, what, &s);
  if (rc) return rc;
  if (s.where != SPAN_RES && !s.shared)
    return bad(c, "argument '%s' must be a resident array ({\"handle\": h}) or a region slice"
               " ({\"region\": r, \"offset\": o, \"bytes\": n}) in a batch", key);
  st->x = s.ptr;
  st->x_host = s.where != SPAN_RES;
  st->x_bytes = s.bytes;
  return 0;
}

/* spmv's out as a region target {"region": r, "offset": o[, "bytes": n]}:
 * the result written into the slice.  It may not overlap x's slice, which
 * the step reads while it writes (two slices of one region overlap exactly
 * when their addresses do; different regions are different mappings). */
static int region_out(step_ctx *c, const msgpack_object *o, size_t bytes, gkcd_step *st) {
  gkcd_res *reg;
  uint64_t off;
  int rc = refs_region_target(&c->r, "out", o, bytes, st->dtype, 1, &reg, &off);
  if (rc) return rc;
  const char *lo = (const char *)reg->ptr + off;
  if (st->x_host && bytes && lo < (const char *)st->x + st->x_bytes &&
      (const char *)st->x < lo + bytes)
    return bad(c, "argument 'out': bytes [%" PRIu64 ", %" PRIu64 ") of region %" PRIu32
               " overlap x's slice, which this op reads while it writes", off, off + bytes,
               reg->id);
  st->out = (void *)lo;
  st->out_host = 1;
  st->out_bytes = bytes;
  st->out_region = reg->id;
  st->out_offset = off;
  return 0;
}

/* The step's output: "out": h, an existing resident array of the step's
 * dtype and of bytes bytes; it may be one of the inputs in may_alias
 * (NULL-terminated) only. */
static int res_out(step_ctx *c, int required, size_t bytes, const void *const *may_alias,
                   const void *const *no_alias, gkcd_step *st) {
  if (!args_present(&c->a, "out")) {
    if (required) return bad(c, "missing argument 'out' (the handle of a resident array to write)");
    return 0;
  }
  gkcd_res *o;
  int rc = refs_object(&c->r, "out", RES_ARRAY, &o);
  if (rc) return rc;
  if (o->dtype != st->dtype || o->bytes != bytes)
    return bad(c, "argument 'out': handle %" PRIu32 " holds %zu bytes of %s; the result is %zu"
               " bytes of %s", o->id, o->bytes, refs_type_name(o->dtype), bytes,
               refs_type_name(st->dtype));
  for (const void *const *p = no_alias; *p; p++)
    if (*p == o->ptr) {
      int ok = 0;
      for (const void *const *q = may_alias; *q && !ok; q++) ok = *q == o->ptr;
      if (!ok) return bad(c, "argument 'out': handle %" PRIu32 " is also an input this op reads"
                          " while it writes", o->id);
    }
  st->out = o->ptr;
  st->out_id = o->id;
  st->out_bytes = bytes;
  return 0;
}

/* alpha, beta: a number, or {"step": i, "over": j, "scale": s} (each
 * optional) meaning s * v[i] / v[j], v the values of earlier dot or reduce
 * steps. */
static int scalar(step_ctx *c, const char *key, double dflt, int dtype, gkcd_scalar *out) {
  *out = (gkcd_scalar){dflt, -1, -1};
  const msgpack_object *o = proto_map_get(c->a.params, key);
  if (!o) return 0;
  if (o->type != MSGPACK_OBJECT_MAP) {
    float f;
    double d;
    int rc = methods_scalar(&c->a, key, dtype, &f, &d);
    if (rc) return rc;
    out->scale = d; /* float32 steps: the float32 value */
    return 0;
  }
  args_ctx sa = {o, c->a.msg, c->a.msglen};
  static const char *const keys[] = {"step", "over", "scale", NULL};
  int rc = args_known(&sa, keys);
  if (rc) return bad(c, "argument '%s': a scalar reference has only 'step', 'over' and 'scale'", key);
  out->scale = 1.0;
  int64_t idx[2] = {-1, -1};
  const char *names[2] = {"step", "over"};
  for (int t = 0; t < 2; t++) {
    if (!args_present(&sa, names[t])) continue;
    if (args_int(&sa, names[t], 1, 0, c->i - 1, &idx[t]))
      return bad(c, "argument '%s': '%s' must name an earlier step, in [0, %d]", key, names[t],
                 c->i - 1);
    int op = c->steps[idx[t]].op;
    if (op != BATCH_DOT && op != BATCH_REDUCE)
      return bad(c, "argument '%s': '%s' names step %" PRId64 ", a %s, which has no scalar value",
                 key, names[t], idx[t], batch_op_name(op));
  }
  float f = 1.0f;
  double d = 1.0;
  if (methods_scalar(&sa, "scale", dtype, &f, &d))
    return bad(c, "argument '%s': 'scale' must be a finite %s number", key,
               dtype == DT_F64 ? "float64" : "float32");
  out->scale = d;
  out->num = (int)idx[0], out->den = (int)idx[1];
  return 0;
}

static int parse_dot_axpby_reduce(step_ctx *c, gkcd_step *st) {
  static const char *const dot_keys[] = {"op", "x", "y", NULL};
  static const char *const axpby_keys[] = {"op", "x", "y", "alpha", "beta", "out", NULL};
  static const char *const reduce_keys[] = {"op", "x", "fn", NULL};
  static const char *const fns[] = {"sum", "min", "max"}; /* CPU_SUM/MIN/MAX */
  int rc;
  size_t xb = 0;
  static const char *const xy[] = {"x", "y", NULL};
  const char *const *keys = st->op == BATCH_DOT ? dot_keys : st->op == BATCH_AXPBY ? axpby_keys
                                                                                   : reduce_keys;
  /* x and y of one dtype, float32 or float64; reduce takes float32 only */
  if ((rc = args_known(&c->a, keys)) || (rc = refs_floats(&c->r, xy, st->op == BATCH_REDUCE)) ||
      (rc = res_array(c, "x", 1, REFS_ANY_LEN, "values", &st->x, &xb)))
    return rc;
  st->dtype = c->r.fdt;
  size_t es = proto_dtype_size(st->dtype);
  st->n = (int64_t)(xb / es);
  if (st->op == BATCH_REDUCE) {
    const char *fn = "sum";
    size_t len = 3;
    if ((rc = args_str(&c->a, "fn", 0, &fn, &len))) return rc;
    st->sub = -1;
    for (int i = 0; i < 3; i++)
      if (len == 3 && !memcmp(fn, fns[i], 3)) st->sub = i;
    if (st->sub < 0) return bad(c, "argument 'fn' must be one of sum, min, max");
    return 0;
  }
  char what[64];
  snprintf(what, sizeof what, "as many %s as x (%" PRId64 ")", proto_dtype_name(st->dtype), st->n);
  if ((rc = res_array(c, "y", 1, xb, what, &st->y, NULL))) return rc;
  if (st->op == BATCH_DOT) return 0;
  if ((rc = scalar(c, "alpha", 1.0, st->dtype, &st->alpha)) ||
      (rc = scalar(c, "beta", 1.0, st->dtype, &st->beta)))
    return rc;
  /* Without out, y is updated in place.  out may be x or y (elementwise). */
  const void *may[] = {st->x, st->y, NULL}, *none[] = {NULL};
  if ((rc = res_out(c, 0, xb, may, none, st))) return rc;
  if (!st->out) {
    st->out = (void *)st->y;
    st->out_id = 0; /* filled below from the handle of y */
  }
  return 0;
}

static int parse_spmv_step(step_ctx *c, gkcd_step *st) {
  static const char *const keys[] = {"op", "matrix", "x", "y", "alpha", "beta", "out", NULL};
  int rc;
  gkcd_res *m;
  if ((rc = args_known(&c->a, keys)) || (rc = refs_object(&c->r, "matrix", RES_MATRIX, &m)))
    return rc;
  if (m->part) {
    snprintf(c->a.msg, c->a.msglen, "argument 'matrix': matrix %" PRIu32 " is partitioned over"
             " several devices, which batch does not support: use spmv or solve on it", m->id);
    return GKC_EINVALID_ARGUMENT;
  }
  static const char *const xy[] = {"x", "y", NULL};
  if ((rc = refs_floats(&c->r, xy, 0))) return rc;
  st->dtype = c->r.fdt; /* x's, y's and out's; the matrix's values keep their own */
  st->values_dtype = m->dtype;
  size_t es = proto_dtype_size(st->dtype);
  const char *en = proto_dtype_name(st->dtype);
  st->m = m->rows, st->k = m->cols, st->nnz = m->nnz, st->max_row = m->max_row;
  size_t rp = ((size_t)m->rows + 1) * 4;
  st->row_ptr = m->ptr;
  st->col_idx = (const char *)m->ptr + rp;
  st->values = (const char *)m->ptr + res_values_offset(m->rows, m->nnz, m->dtype);
  st->plan = m->plan_off ? (const char *)m->ptr + m->plan_off : NULL;
  char what[64];
  snprintf(what, sizeof what, "cols = %" PRId32 " %s", m->cols, en);
  if ((rc = res_or_region(c, "x", (uint64_t)m->cols * es, what, st))) return rc;
  snprintf(what, sizeof what, "rows = %" PRId32 " %s", m->rows, en);
  if ((rc = res_array(c, "y", 0, (uint64_t)m->rows * es, what, &st->y, NULL)) ||
      (rc = scalar(c, "alpha", 1.0, st->dtype, &st->alpha)) ||
      (rc = scalar(c, "beta", 0.0, st->dtype, &st->beta)))
    return rc;
  if (!st->y && (st->beta.scale != 0 || st->beta.num >= 0))
    return bad(c, "missing argument 'y' (required when beta is not 0)");
  const msgpack_object *o = proto_map_get(c->a.params, "out");
  if (o && o->type == MSGPACK_OBJECT_MAP) return region_out(c, o, (size_t)m->rows * es, st);
  const void *may[] = {st->y, NULL}, *none[] = {st->x, st->y, NULL};
  return res_out(c, 1, (size_t)m->rows * es, may, none, st);
}

static int parse_sgemm_step(step_ctx *c, gkcd_step *st) {
  static const char *const keys[] = {"op", "m", "n", "k", "a", "b", "c", "alpha", "beta",
                                     "trans_a", "trans_b", "out", NULL};
  int64_t m, n, k;
  int rc;
  if ((rc = args_known(&c->a, keys)) || (rc = args_int(&c->a, "m", 1, 1, INT32_MAX, &m)) ||
      (rc = args_int(&c->a, "n", 1, 1, INT32_MAX, &n)) ||
      (rc = args_int(&c->a, "k", 1, 1, INT32_MAX, &k)) ||
      (rc = args_bool(&c->a, "trans_a", 0, &st->trans_a)) ||
      (rc = args_bool(&c->a, "trans_b", 0, &st->trans_b)))
    return rc;
  st->m = (int32_t)m, st->n = n, st->k = (int32_t)k;
  static const char *const abc[] = {"a", "b", "c", NULL}; /* float32 only */
  if ((rc = refs_floats(&c->r, abc, 1))) return rc;
  /* Each product must be a plausible resident array: at most SIZE_MAX / 4
   * elements (the handle's length check then settles it). */
  uint64_t ab, bb, cb;
  if (__builtin_mul_overflow((uint64_t)m, (uint64_t)k * 4, &ab) ||
      __builtin_mul_overflow((uint64_t)k, (uint64_t)n * 4, &bb) ||
      __builtin_mul_overflow((uint64_t)m, (uint64_t)n * 4, &cb))
    return bad(c, "arguments 'm', 'n', 'k': m*k, k*n or m*n float32 overflows 64 bits");
  if ((rc = res_array(c, "a", 1, ab, "m*k float32", &st->a, NULL)) ||
      (rc = res_array(c, "b", 1, bb, "k*n float32", &st->b, NULL)) ||
      (rc = res_array(c, "c", 0, cb, "m*n float32", &st->c, NULL)) ||
      (rc = scalar(c, "alpha", 1.0, DT_F32, &st->alpha)) ||
      (rc = scalar(c, "beta", 0.0, DT_F32, &st->beta)))
    return rc;
  if (!st->c && (st->beta.scale != 0 || st->beta.num >= 0))
    return bad(c, "missing argument 'c' (required when beta is not 0)");
  const void *may[] = {st->c, NULL}, *none[] = {st->a, st->b, st->c, NULL};
  return res_out(c, 1, cb, may, none, st);
}

static int parse_step(step_ctx *c, gkcd_step *st) {
  const char *op;
  size_t len;
  int rc = args_str(&c->a, "op", 1, &op, &len);
  if (rc) return rc;
  st->op = -1;
  for (int i = 0; i < BATCH_NOPS; i++)
    if (strlen(batch_op_name(i)) == len && !memcmp(batch_op_name(i), op, len)) st->op = i;
  if (st->op >= 0) c->r.op = batch_op_name(st->op);
  switch (st->op) {
    case BATCH_DOT:
    case BATCH_AXPBY:
    case BATCH_REDUCE: return parse_dot_axpby_reduce(c, st);
    case BATCH_SPMV: return parse_spmv_step(c, st);
    case BATCH_SGEMM: return parse_sgemm_step(c, st);
  }
  char echo[40];
  return bad(c, "argument 'op': '%s' is not one of dot, axpby, spmv, reduce, sgemm",
             proto_echo(echo, sizeof echo, op, len, 32));
}

static int parse(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"steps", "deadline_ms", NULL};
  args_ctx *a = r->a;
  gkcd_job *job = r->job;
  int rc;
  (void)max;
  if ((rc = args_known(a, keys))) return rc;
  const msgpack_object *o = proto_map_get(a->params, "steps");
  if (!o) {
    snprintf(a->msg, a->msglen, "missing argument 'steps'");
    return GKC_EINVALID_ARGUMENT;
  }
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 ||
      o->via.array.size > BATCH_MAX_STEPS) {
    snprintf(a->msg, a->msglen, "argument 'steps' must be an array of 1 to %d step maps",
             BATCH_MAX_STEPS);
    return GKC_EINVALID_ARGUMENT;
  }
  int n = (int)o->via.array.size;
  gkcd_step *steps = calloc((size_t)n, sizeof *steps);
  if (!steps) {
    snprintf(a->msg, a->msglen, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  job->priv[0] = steps; /* freed with the job */
  job->in.batch.steps = steps;
  job->in.batch.nsteps = n;
  for (int i = 0; i < n; i++) {
    const msgpack_object *m = &o->via.array.ptr[i];
    step_ctx c = {.a = {m, a->msg, a->msglen}, .steps = steps, .i = i};
    char where[24];
    snprintf(where, sizeof where, "steps[%d].", i);
    c.r = (refs_ctx){.a = &c.a, .res = r->res, .asker = r->asker, .devs = r->devs, .fd = -1,
                     .job = job, .where = where};
    steps[i].op = -1;
    rc = m->type == MSGPACK_OBJECT_MAP ? parse_step(&c, &steps[i])
                                       : bad(&c, "a step must be a map with 'op'");
    if (rc) {
      char tail[320];
      snprintf(tail, sizeof tail, "%s", a->msg);
      snprintf(a->msg, a->msglen, "steps[%d] (%s): %s", i, batch_op_name(steps[i].op), tail);
      return rc;
    }
    if (steps[i].op == BATCH_AXPBY && steps[i].out_id == 0) { /* in place on y: its handle */
      for (int j = 0; j < job->nres; j++)
        if (job->res[j]->ptr == steps[i].y) steps[i].out_id = job->res[j]->id;
      steps[i].out_bytes = (size_t)steps[i].n * proto_dtype_size(steps[i].dtype);
    }
    /* A step writing a replicated array would change one copy only. */
    const char *o = steps[i].out;
    for (int j = 0; o && j < job->nres; j++) {
      const gkcd_res *res = job->res[j];
      const char *p = res->ptr;
      if (res->rep_mask && (res->kind == RES_ARRAY || res->kind == RES_MATRIX) && o >= p &&
          o < p + res->bytes) {
        snprintf(a->msg, a->msglen, "step %d writes handle %u, which is replicated on every"
                 " device and so read-only: write to an array of its own", i, res->id);
        return GKC_EINVALID_ARGUMENT;
      }
    }
  }
  return 0;
}

static void pack(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id) {
  (void)new_id;
  msgpack_pack_map(pk, METHODS_TIMING_KEYS + 1 + methods_timing_extra(job));
  methods_pack_timing(pk, job, server_us);
  proto_pack_cstr(pk, "results");
  msgpack_pack_array(pk, (size_t)job->in.batch.nsteps);
  for (int i = 0; i < job->in.batch.nsteps; i++) {
    const gkcd_step *st = &job->in.batch.steps[i];
    int scalar_op = st->op == BATCH_DOT || st->op == BATCH_REDUCE;
    msgpack_pack_map(pk, scalar_op ? 2 : st->out_host ? 4 : 3);
    proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, batch_op_name(st->op));
    if (scalar_op) {
      proto_pack_cstr(pk, "value"), msgpack_pack_double(pk, st->value);
    } else if (st->out_host) { /* as a method's out into a region */
      proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, st->out_region);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, st->out_offset);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, st->out_bytes);
    } else {
      proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, st->out_id);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, st->out_bytes);
    }
  }
}

static void work(const gkcd_job *job, method_work *w) {
  for (int i = 0; i < job->in.batch.nsteps; i++) {
    const gkcd_step *st = &job->in.batch.steps[i];
    double n = (double)st->n;
    switch (st->op) { /* the step's op, not the method: a batch's own table */
      case BATCH_SGEMM:
        w->flops += 2.0 * st->m * n * st->k;
        w->bytes += 4.0 * ((double)st->m * st->k + st->k * n + 2.0 * st->m * n);
        break;
      case BATCH_SPMV:
        w->flops += 2.0 * (double)st->nnz;
        w->bytes += 8.0 * (double)st->nnz + 12.0 * st->m;
        break;
      default:
        w->flops += 2.0 * n;
        w->bytes += 3.0 * (double)proto_dtype_size(st->dtype) * n;
    }
  }
}

/* Every step's pointers into resident memory. */
static int operands(gkcd_job *job, const void **out[], int max) {
  int n = 0;
  for (int i = 0; i < job->in.batch.nsteps && n + 9 <= max; i++) {
    gkcd_step *st = &job->in.batch.steps[i];
    out[n++] = &st->x, out[n++] = &st->y, out[n++] = &st->a, out[n++] = &st->b;
    out[n++] = &st->c, out[n++] = &st->row_ptr, out[n++] = &st->col_idx;
    out[n++] = &st->values, out[n++] = &st->plan;
  }
  return n;
}

const gkcd_method method_row_BATCH = {
    .id = PROTO_M_BATCH, .where = METHOD_BACKEND, .makes = -1, .parse = parse, .work = work,
    .operands = operands, .pack = pack, .bulk_only = 1, .in_place = 1,
};
