/* gkc_resident.c: compute calls on array references, resident arrays and
 * matrices, dot, nrm2 and axpby (see gkc.h, "Regions and resident data");
 * making, reading and releasing resident objects is gkc_objects.c.
 *
 * Each call packs its arguments as the protocol's forms: a bin for memory
 * in this process, {"region", "offset", "bytes"} for a region,
 * {"handle": h} for a resident array, and an optional "out" map naming where
 * the array result goes.  The library checks only what it must to build the
 * request (a reference's form, a bin's size limit); gkcd checks the rest and
 * names the offending argument.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_internal.h"
#include "gkc_reply.h"
#include "gkc_shm.h"
#include "proto_dtypes.h"
#include "proto_rpc.h"

/* A bin's length is a 32-bit field. */
#define BIN_MAX ((size_t)UINT32_MAX)

/* --- references and outputs ------------------------------------------------------------ */

gkc_ref gkc_ref_mem(const void *data, size_t bytes) {
  gkc_ref r = {.kind = GKC_REF_MEM, .data = data, .bytes = bytes};
  return r;
}

gkc_ref gkc_ref_region(const gkc_region *reg, uint64_t offset, size_t bytes) {
  gkc_ref r = {.kind = reg ? GKC_REF_REGION : -1, .offset = offset, .bytes = bytes};
  if (reg) r.region = gkc_region_id(reg);
  return r;
}

gkc_ref gkc_ref_handle(uint32_t handle, size_t bytes) {
  gkc_ref r = {.kind = GKC_REF_HANDLE, .handle = handle, .bytes = bytes};
  return r;
}

gkc_ref gkc_ref_as(gkc_ref r, gkc_dtype dtype) {
  r.kind = GKC_REF_KIND(r.kind) | ((int)dtype & 0xff) << 8;
  return r;
}

gkc_ref gkc_ref_f64(const double *data, size_t n) {
  return gkc_ref_as(gkc_ref_mem(data, n * sizeof *data), GKC_F64);
}

/* The wire names, from the protocol's table (gkc.h numbers gkc_dtype alike). */
_Static_assert((int)GKC_F32 == (int)PROTO_DT_F32 && (int)GKC_I32 == (int)PROTO_DT_I32 &&
                   (int)GKC_F64 == (int)PROTO_DT_F64,
               "gkc_dtype counts as proto_dtypes.h does");

int gkc__ref_dtypes(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, const char *const *names, int n,
                    int f32_only) {
  r->dtype = GKC_F32;
  for (int i = 0; i < n; i++) {
    if (!refs[i]) continue;
    int d = GKC_REF_DTYPE(refs[i]->kind);
    refs[i]->kind = GKC_REF_KIND(refs[i]->kind);
    if (d != GKC_F32 && d != GKC_F64)
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: marked %s, not a float dtype (GKC_F32 or"
                       " GKC_F64)", names[i], proto_dtype_name(d));
    if (d == GKC_F64 && f32_only)
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: marked float64 (GKC_F64), but %s takes"
                       " float32 (GKC_F32) only", names[i], r->method);
    if (d == GKC_F64) r->dtype = GKC_F64;
  }
  return 0;
}

int gkc__dtype_keys(const gkc__req *r) { return r->dtype != GKC_F32; }

void gkc__pack_dtype(msgpack_packer *pk, const gkc__req *r) {
  if (r->dtype != GKC_F32) proto_pack_cstr(pk, "dtype"), proto_pack_cstr(pk, proto_dtype_wire(r->dtype));
}

/* Bytes per element of the request's float arrays. */
static uint64_t esize(const gkc__req *r) { return proto_dtype_size(r->dtype); }

gkc_out gkc_out_mem(void *data, size_t bytes) {
  gkc_out o = {.kind = GKC_OUT_MEM, .data = data, .bytes = bytes};
  return o;
}

gkc_out gkc_out_region(const gkc_region *reg, uint64_t offset) {
  gkc_out o = {.kind = reg ? GKC_OUT_REGION : -1, .offset = offset};
  if (reg) o.region = gkc_region_id(reg);
  return o;
}

gkc_out gkc_out_new_handle(void) {
  gkc_out o = {.kind = GKC_OUT_NEW_HANDLE};
  return o;
}

gkc_out gkc_out_handle(uint32_t handle) {
  gkc_out o = {.kind = GKC_OUT_HANDLE, .handle = handle};
  return o;
}

/* What the library itself must refuse: a form it cannot encode. */
int gkc__check_ref(gkc_conn *c, const gkc_ref *r, const char *name, int optional) {
  switch (GKC_REF_KIND(r->kind)) {
    case GKC_REF_NONE:
      if (optional) return 0;
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: an array is required (kind GKC_REF_NONE)",
                       name);
    case GKC_REF_MEM:
      if (!r->data && r->bytes > 0)
        return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: data is NULL", name);
      if (r->bytes > BIN_MAX)
        return gkc__fail(c, GKC_EINVALID_ARGUMENT,
                         "%s: %zu bytes do not fit in one msgpack bin (at most 2^32 - 1): "
                         "use a region or a resident array", name, r->bytes);
      return 0;
    case GKC_REF_REGION:
    case GKC_REF_HANDLE: return 0;
    default:
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: not a valid reference (kind %d; a NULL "
                       "region?)", name, r->kind);
  }
}

int gkc__check_out(gkc_conn *c, const gkc_out *o) {
  if (!o) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "out must not be NULL");
  switch (o->kind) {
    case GKC_OUT_MEM:
      if (!o->data || o->bytes == 0)
        return gkc__fail(c, GKC_EINVALID_ARGUMENT,
                         "out: GKC_OUT_MEM needs data and its size in bytes");
      return 0;
    case GKC_OUT_REGION:
    case GKC_OUT_NEW_HANDLE:
    case GKC_OUT_HANDLE: return 0;
    default:
      return gkc__fail(c, GKC_EINVALID_ARGUMENT, "out: not a valid target (kind %d; a NULL "
                       "region?)", o->kind);
  }
}

/* Packs key and its array in the protocol's form; nothing for GKC_REF_NONE. */
void gkc__pack_ref(msgpack_packer *pk, const char *key, const gkc_ref *r) {
  switch (GKC_REF_KIND(r->kind)) {
    case GKC_REF_MEM:
      proto_pack_cstr(pk, key);
      msgpack_pack_bin(pk, r->bytes);
      if (r->bytes) msgpack_pack_bin_body(pk, r->data, r->bytes);
      break;
    case GKC_REF_REGION:
      proto_pack_cstr(pk, key);
      msgpack_pack_map(pk, 3);
      proto_pack_cstr(pk, "region"), gkc__pack_id(pk, r->region);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, r->offset);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, r->bytes);
      break;
    case GKC_REF_HANDLE:
      proto_pack_cstr(pk, key);
      msgpack_pack_map(pk, 1);
      proto_pack_cstr(pk, "handle"), gkc__pack_id(pk, r->handle);
      break;
    default: break;
  }
}

static int has(const gkc_ref *r) { return GKC_REF_KIND(r->kind) != GKC_REF_NONE; }

/* An array's size when the reference states it (memory and region spans;
 * a handle's bytes are the caller's guess), else 0. */
static uint64_t stated(const gkc_ref *r) {
  return r->kind == GKC_REF_MEM || r->kind == GKC_REF_REGION ? r->bytes : 0;
}

/* "out": {key: target}, unless the result comes back as a bin. */
int gkc__out_keys(const gkc_out *o) { return o->kind != GKC_OUT_MEM; }

void gkc__pack_out(msgpack_packer *pk, const char *key, const gkc_out *o) {
  if (o->kind == GKC_OUT_MEM) return;
  proto_pack_cstr(pk, "out");
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, key);
  switch (o->kind) {
    case GKC_OUT_REGION:
      msgpack_pack_map(pk, 2);
      proto_pack_cstr(pk, "region"), gkc__pack_id(pk, o->region);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, o->offset);
      break;
    case GKC_OUT_NEW_HANDLE: proto_pack_cstr(pk, "handle"); break;
    default: /* GKC_OUT_HANDLE */
      msgpack_pack_map(pk, 1);
      proto_pack_cstr(pk, "handle"), gkc__pack_id(pk, o->handle);
  }
}

/* --- reading results --------------------------------------------------------------------- */

/* Reads the array result `key` as out asked for it. */
int gkc__take_out(gkc_conn *c, const msgpack_object *r, const char *key, gkc__req *req) {
  gkc_out *out = req->out;
  const msgpack_object *o = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, key) : NULL;
  if (!o) return gkc__fail(c, GKC_EPROTOCOL, "reply lacks '%s'", key);
  if (req->out_staged) return gkc__shm_take_out(c, req, o);
  uint64_t v = 0;
  int rc;
  if (out->kind == GKC_OUT_MEM) {
    if (o->type != MSGPACK_OBJECT_BIN)
      return gkc__fail(c, GKC_EPROTOCOL, "reply's '%s' is not a bin", key);
    if (req->delivered) /* its bytes went straight to out->data; the bin was emptied */
      return o->via.bin.size == 0 ? 0 : gkc__fail(c, GKC_EPROTOCOL, "reply's '%s' was received twice", key);
    if (o->via.bin.size != out->bytes)
      return gkc__fail(c, GKC_EINVALID_ARGUMENT,
                       "the result '%s' has %u bytes, but out was given %zu", key,
                       o->via.bin.size, out->bytes);
    memcpy(out->data, o->via.bin.ptr, out->bytes);
    return 0;
  }
  if (o->type != MSGPACK_OBJECT_MAP)
    return gkc__fail(c, GKC_EPROTOCOL, "reply's '%s' is not a reference map", key);
  if (out->kind == GKC_OUT_REGION) {
    if ((rc = gkc__get_uint(c, o, "region", UINT32_MAX, &v))) return rc;
  } else {
    if ((rc = gkc__get_uint(c, o, "handle", UINT32_MAX, &v))) return rc;
    out->handle = (uint32_t)v;
    if (out->kind == GKC_OUT_NEW_HANDLE) gkc__obj_made(c, GKC__OBJ_ARRAY, out->handle, 0, NULL);
  }
  if ((rc = gkc__get_uint(c, o, "bytes", SIZE_MAX, &v))) return rc;
  out->bytes = (size_t)v;
  return 0;
}

/* A float64 "value" and an integer "n", as reduce and dot return them. */
static int take_value(gkc_conn *c, const msgpack_object *r, gkc_result *res) {
  const msgpack_object *v = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "value") : NULL;
  if (!v || (v->type != MSGPACK_OBJECT_FLOAT64 && v->type != MSGPACK_OBJECT_FLOAT32))
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a float 'value'");
  res->value = v->via.f64;
  res->n = (int64_t)gkc__get_num(r, "n", -1);
  return 0;
}

/* The compute calls: algo and timings, then the array result `key`. */
static int take_y(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc__take_info(r, &res->info);
  return gkc__take_out(c, r, "y", req);
}

static int take_c(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  gkc__take_info(r, &res->info);
  return gkc__take_out(c, r, "c", req);
}

static int take_scalar(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req;
  gkc__take_info(r, &res->info);
  return take_value(c, r, res);
}

int gkc__run_info(gkc_conn *c, gkc__req *r, int rc, gkc_result *res, gkc_info *info) {
  if (rc == 0) rc = gkc__run(c, r, res);
  if (rc == 0 && info) *info = res->info;
  return rc;
}

void gkc__pack_where(msgpack_packer *pk, int pinned, int device, int replicate) {
  if (pinned) proto_pack_cstr(pk, "device"), msgpack_pack_int(pk, device);
  if (replicate) proto_pack_cstr(pk, "replicate"), msgpack_pack_true(pk);
}

/* --- sgemm -------------------------------------------------------------------------------- */

static void pack_sgemm(msgpack_packer *pk, const gkc__req *r) {
  const gkc_sgemm_args *a = &r->a.sgemm;
  msgpack_pack_map(pk, 10 + has(&a->c) + (a->precision != NULL) + gkc__out_keys(gkc__wire_out(r)) +
                           gkc__where_keys(r->pinned, 0));
  gkc__pack_where(pk, r->pinned, r->device, 0);
  proto_pack_cstr(pk, "m"), msgpack_pack_int32(pk, a->m);
  proto_pack_cstr(pk, "n"), msgpack_pack_int32(pk, a->n);
  proto_pack_cstr(pk, "k"), msgpack_pack_int32(pk, a->k);
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, a->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, a->beta);
  proto_pack_cstr(pk, "trans_a"), a->trans_a ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  proto_pack_cstr(pk, "trans_b"), a->trans_b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  gkc__pack_algo(pk, a->algo);
  if (a->precision) proto_pack_cstr(pk, "precision"), proto_pack_cstr(pk, a->precision);
  gkc__pack_ref(pk, "a", &a->a);
  gkc__pack_ref(pk, "b", &a->b);
  gkc__pack_ref(pk, "c", &a->c);
  gkc__pack_out(pk, "c", gkc__wire_out(r));
}

int gkc__prep_sgemm(gkc_conn *c, gkc__req *r, const gkc_sgemm_args *args, gkc_out *out) {
  int rc;
  if (!args) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &args->a, "a", 0)) || (rc = gkc__check_ref(c, &args->b, "b", 0)) ||
      (rc = gkc__check_ref(c, &args->c, "c", 1)) || (rc = gkc__check_out(c, out)))
    return rc;
  r->a.sgemm = *args;
  if (!args->precision && gkc__tf32(c)) r->a.sgemm.precision = "tf32";
  if (gkc__device(c) >= 0) r->pinned = 1, r->device = gkc__device(c);
  r->method = "sgemm", r->pack = pack_sgemm, r->take = take_c, r->out = out, r->direct_key = "c";
  gkc_sgemm_args *s = &r->a.sgemm;
  gkc_ref *const refs[] = {&s->a, &s->b, &s->c};
  static const char *const names[] = {"a", "b", "c"};
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 3, 1))) return rc; /* float32 only */
  uint64_t mn = args->m > 0 && args->n > 0 ? (uint64_t)args->m * (uint64_t)args->n * 4 : 0;
  gkc__shm_stage(c, r, refs, 3, out, mn, "c");
  return 0;
}

int gkc_sgemm_ref(gkc_conn *c, const gkc_sgemm_args *args, gkc_out *out, gkc_info *info) {
  GKC__BLOCKING(gkc__prep_sgemm(c, &r, args, out));
  return gkc__run_info(c, &r, rc, &res, info);
}

/* --- reduce ------------------------------------------------------------------------------- */

static void pack_reduce(msgpack_packer *pk, const gkc__req *r) {
  static const char *const ops[] = {"sum", "min", "max"};
  const gkc_reduce_args *a = &r->a.reduce;
  msgpack_pack_map(pk, 3 + gkc__where_keys(r->pinned, 0));
  gkc__pack_where(pk, r->pinned, r->device, 0);
  proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, ops[a->op]);
  gkc__pack_algo(pk, a->algo);
  gkc__pack_ref(pk, "x", &a->x);
}

int gkc__prep_reduce(gkc_conn *c, gkc__req *r, const gkc_reduce_args *a) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->x, "x", 0))) return rc;
  if (a->op != GKC_SUM && a->op != GKC_MIN && a->op != GKC_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "op must be GKC_SUM, GKC_MIN or GKC_MAX");
  r->a.reduce = *a;
  if (gkc__device(c) >= 0) r->pinned = 1, r->device = gkc__device(c);
  r->method = "reduce", r->pack = pack_reduce, r->take = take_scalar;
  gkc_ref *const refs[] = {&r->a.reduce.x};
  static const char *const names[] = {"x"};
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 1, 1))) return rc; /* float32 only */
  gkc__shm_stage(c, r, refs, 1, NULL, 0, NULL);
  return 0;
}

int gkc_reduce_ref(gkc_conn *c, gkc_ref x, gkc_reduce_op op, double *value, int64_t *n_out,
                   const char *algo, gkc_info *info) {
  if (!value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "value must not be NULL");
  gkc_reduce_args a = {x, op, algo};
  GKC__BLOCKING(gkc__prep_reduce(c, &r, &a));
  rc = gkc__run_info(c, &r, rc, &res, info);
  if (rc == 0) {
    *value = res.value;
    if (n_out) *n_out = res.n;
  }
  return rc;
}

/* --- spmv --------------------------------------------------------------------------------- */

static void pack_spmv(msgpack_packer *pk, const gkc__req *r) {
  const gkc_spmv_args *a = &r->a.spmv;
  msgpack_pack_map(pk, (a->use_matrix ? 1 : 5) + 4 + has(&a->y) + gkc__out_keys(gkc__wire_out(r)) +
                          gkc__dtype_keys(r));
  gkc__pack_dtype(pk, r);
  if (a->use_matrix) {
    proto_pack_cstr(pk, "matrix"), gkc__pack_id(pk, a->matrix);
  } else {
    proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, a->rows);
    proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, a->cols);
    gkc__pack_ref(pk, "row_ptr", &a->row_ptr);
    gkc__pack_ref(pk, "col_idx", &a->col_idx);
    gkc__pack_ref(pk, "values", &a->values);
  }
  if (r->dtype == GKC_F64) { /* float64 vectors: the scalars as the caller gave them */
    proto_pack_cstr(pk, "alpha"), msgpack_pack_double(pk, r->alpha64);
    proto_pack_cstr(pk, "beta"), msgpack_pack_double(pk, r->beta64);
  } else {
    proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, a->alpha);
    proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, a->beta);
  }
  gkc__pack_algo(pk, a->algo);
  gkc__pack_ref(pk, "x", &a->x);
  gkc__pack_ref(pk, "y", &a->y);
  gkc__pack_out(pk, "y", gkc__wire_out(r));
}

int gkc__prep_spmv(gkc_conn *c, gkc__req *r, const gkc_spmv_args *args, gkc_out *out) {
  int rc;
  if (!args) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if (!args->use_matrix &&
      ((rc = gkc__check_ref(c, &args->row_ptr, "row_ptr", 0)) ||
       (rc = gkc__check_ref(c, &args->col_idx, "col_idx", 0)) ||
       (rc = gkc__check_ref(c, &args->values, "values", 0))))
    return rc;
  if ((rc = gkc__check_ref(c, &args->x, "x", 0)) || (rc = gkc__check_ref(c, &args->y, "y", 1)) ||
      (rc = gkc__check_out(c, out)))
    return rc;
  r->a.spmv = *args;
  r->method = "spmv", r->pack = pack_spmv, r->take = take_y, r->out = out, r->direct_key = "y";
  gkc_spmv_args *s = &r->a.spmv;
  int csr = !s->use_matrix;
  gkc_ref *const refs[] = {csr ? &s->row_ptr : NULL, csr ? &s->col_idx : NULL,
                           csr ? &s->values : NULL, &s->x, &s->y};
  static const char *const names[] = {"row_ptr", "col_idx", "values", "x", "y"};
  int f64 = r->dtype == GKC_F64; /* gkc_spmv_f64 set it */
  if ((rc = gkc__ref_dtypes(c, r, refs + 2, names + 2, 3, 0))) return rc;
  if (f64) r->dtype = GKC_F64;
  if (r->dtype != GKC_F64) r->alpha64 = s->alpha, r->beta64 = s->beta;
  if (csr) refs[0]->kind = GKC_REF_KIND(refs[0]->kind), refs[1]->kind = GKC_REF_KIND(refs[1]->kind);
  /* y has A's rows: known from the shape, or from a y that is sent. */
  uint64_t rows = csr && s->rows > 0 ? (uint64_t)s->rows * esize(r) : stated(&s->y);
  gkc__shm_stage(c, r, refs, 5, out, rows, "y");
  return 0;
}

int gkc_spmv_ref(gkc_conn *c, const gkc_spmv_args *args, gkc_out *out, gkc_info *info) {
  GKC__BLOCKING(gkc__prep_spmv(c, &r, args, out));
  return gkc__run_info(c, &r, rc, &res, info);
}

/* --- dot, nrm2 and axpby ------------------------------------------------------------------ */

static void pack_dot(msgpack_packer *pk, const gkc__req *r) {
  msgpack_pack_map(pk, 2 + gkc__dtype_keys(r));
  gkc__pack_dtype(pk, r);
  gkc__pack_ref(pk, "x", &r->a.dot.x);
  gkc__pack_ref(pk, "y", &r->a.dot.y);
}

int gkc__prep_dot(gkc_conn *c, gkc__req *r, const gkc_dot_args *a) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->x, "x", 0)) || (rc = gkc__check_ref(c, &a->y, "y", 0))) return rc;
  r->a.dot = *a;
  r->method = "dot", r->pack = pack_dot, r->take = take_scalar;
  gkc_ref *const refs[] = {&r->a.dot.x, &r->a.dot.y};
  static const char *const names[] = {"x", "y"};
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 2, 0))) return rc;
  gkc__shm_stage(c, r, refs, 2, NULL, 0, NULL);
  return 0;
}

int gkc_dot(gkc_conn *c, gkc_ref x, gkc_ref y, double *value, gkc_info *info) {
  if (!value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "value must not be NULL");
  gkc_dot_args a = {x, y};
  GKC__BLOCKING(gkc__prep_dot(c, &r, &a));
  rc = gkc__run_info(c, &r, rc, &res, info);
  if (rc == 0) *value = res.value;
  return rc;
}

static void pack_nrm2(msgpack_packer *pk, const gkc__req *r) {
  msgpack_pack_map(pk, 2 + gkc__where_keys(r->pinned, 0) + gkc__dtype_keys(r));
  gkc__pack_where(pk, r->pinned, r->device, 0);
  gkc__pack_dtype(pk, r);
  gkc__pack_algo(pk, r->a.nrm2.algo);
  gkc__pack_ref(pk, "x", &r->a.nrm2.x);
}

int gkc__prep_nrm2(gkc_conn *c, gkc__req *r, const gkc_nrm2_args *a) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->x, "x", 0))) return rc;
  r->a.nrm2 = *a;
  if (gkc__device(c) >= 0) r->pinned = 1, r->device = gkc__device(c);
  r->method = "nrm2", r->pack = pack_nrm2, r->take = take_scalar;
  gkc_ref *const refs[] = {&r->a.nrm2.x};
  static const char *const names[] = {"x"};
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 1, 0))) return rc;
  gkc__shm_stage(c, r, refs, 1, NULL, 0, NULL);
  return 0;
}

int gkc_nrm2(gkc_conn *c, gkc_ref x, double *value, gkc_info *info) {
  if (!value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "value must not be NULL");
  gkc_nrm2_args a = {x, NULL};
  GKC__BLOCKING(gkc__prep_nrm2(c, &r, &a));
  rc = gkc__run_info(c, &r, rc, &res, info);
  if (rc == 0) *value = res.value;
  return rc;
}

static void pack_axpby(msgpack_packer *pk, const gkc__req *r) {
  const gkc_axpby_args *a = &r->a.axpby;
  msgpack_pack_map(pk, 4 + gkc__out_keys(gkc__wire_out(r)) + gkc__dtype_keys(r));
  gkc__pack_dtype(pk, r);
  if (r->dtype == GKC_F64) { /* float64 arrays: the scalars in double */
    proto_pack_cstr(pk, "alpha"), msgpack_pack_double(pk, r->alpha64);
    proto_pack_cstr(pk, "beta"), msgpack_pack_double(pk, r->beta64);
  } else {
    proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, a->alpha);
    proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, a->beta);
  }
  gkc__pack_ref(pk, "x", &a->x);
  gkc__pack_ref(pk, "y", &a->y);
  gkc__pack_out(pk, "y", gkc__wire_out(r));
}

int gkc__prep_axpby(gkc_conn *c, gkc__req *r, const gkc_axpby_args *a, gkc_out *out) {
  int rc;
  if (!a) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = gkc__check_ref(c, &a->x, "x", 0)) || (rc = gkc__check_ref(c, &a->y, "y", 0)) ||
      (rc = gkc__check_out(c, out)))
    return rc;
  r->a.axpby = *a;
  r->method = "axpby", r->pack = pack_axpby, r->take = take_y, r->out = out, r->direct_key = "y";
  gkc_ref *const refs[] = {&r->a.axpby.x, &r->a.axpby.y};
  static const char *const names[] = {"x", "y"};
  int f64 = r->dtype == GKC_F64; /* gkc_axpby_f64 set it, with alpha64 and beta64 */
  if ((rc = gkc__ref_dtypes(c, r, refs, names, 2, 0))) return rc;
  if (f64) r->dtype = GKC_F64;
  else r->alpha64 = a->alpha, r->beta64 = a->beta;
  /* gkcd requires x and y of one length, the result's. */
  uint64_t n = stated(&a->x) ? stated(&a->x) : stated(&a->y);
  gkc__shm_stage(c, r, refs, 2, out, n, "y");
  return 0;
}

int gkc_axpby(gkc_conn *c, float alpha, gkc_ref x, float beta, gkc_ref y, gkc_out *out,
              gkc_info *info) {
  gkc_axpby_args a = {alpha, beta, x, y};
  GKC__BLOCKING(gkc__prep_axpby(c, &r, &a, out));
  return gkc__run_info(c, &r, rc, &res, info);
}

int gkc_axpby_f64(gkc_conn *c, double alpha, gkc_ref x, double beta, gkc_ref y, gkc_out *out,
                  gkc_info *info) {
  gkc_axpby_args a = {(float)0, (float)0, gkc_ref_as(x, GKC_F64), gkc_ref_as(y, GKC_F64)};
  gkc__req r;
  gkc_result res;
  gkc__req_init(&r);
  gkc__result_init(&res);
  r.dtype = GKC_F64, r.alpha64 = alpha, r.beta64 = beta; /* before the prep, which keeps them */
  int rc = gkc__live(c);
  if (rc == 0) rc = gkc__prep_axpby(c, &r, &a, out);
  return gkc__run_info(c, &r, rc, &res, info);
}

int gkc_spmv_f64(gkc_conn *c, const gkc_spmv_args *args, double alpha, double beta, gkc_out *out,
                 gkc_info *info) {
  gkc__req r;
  gkc_result res;
  gkc__req_init(&r);
  gkc__result_init(&res);
  r.dtype = GKC_F64, r.alpha64 = alpha, r.beta64 = beta;
  int rc = gkc__live(c);
  if (rc == 0) rc = gkc__prep_spmv(c, &r, args, out);
  return gkc__run_info(c, &r, rc, &res, info);
}
