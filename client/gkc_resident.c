/* gkc_resident.c: compute calls on array references, resident arrays and
 * matrices, dot and axpby (see gkc.h, "Regions and resident data").
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
static int check_ref(gkc_conn *c, const gkc_ref *r, const char *name, int optional) {
  switch (r->kind) {
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

static int check_out(gkc_conn *c, const gkc_out *o) {
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
static void pack_ref(msgpack_packer *pk, const char *key, const gkc_ref *r) {
  switch (r->kind) {
    case GKC_REF_MEM:
      proto_pack_cstr(pk, key);
      msgpack_pack_bin(pk, r->bytes);
      if (r->bytes) msgpack_pack_bin_body(pk, r->data, r->bytes);
      break;
    case GKC_REF_REGION:
      proto_pack_cstr(pk, key);
      msgpack_pack_map(pk, 3);
      proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, r->region);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, r->offset);
      proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, r->bytes);
      break;
    case GKC_REF_HANDLE:
      proto_pack_cstr(pk, key);
      msgpack_pack_map(pk, 1);
      proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, r->handle);
      break;
    default: break;
  }
}

static int has(const gkc_ref *r) { return r->kind != GKC_REF_NONE; }

/* "out": {key: target}, unless the result comes back as a bin. */
static int out_keys(const gkc_out *o) { return o->kind != GKC_OUT_MEM; }

static void pack_out(msgpack_packer *pk, const char *key, const gkc_out *o) {
  if (o->kind == GKC_OUT_MEM) return;
  proto_pack_cstr(pk, "out");
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, key);
  switch (o->kind) {
    case GKC_OUT_REGION:
      msgpack_pack_map(pk, 2);
      proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, o->region);
      proto_pack_cstr(pk, "offset"), msgpack_pack_uint64(pk, o->offset);
      break;
    case GKC_OUT_NEW_HANDLE: proto_pack_cstr(pk, "handle"); break;
    default: /* GKC_OUT_HANDLE */
      msgpack_pack_map(pk, 1);
      proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, o->handle);
  }
}

/* --- reading results --------------------------------------------------------------------- */

/* A non-negative integer under key of map m, in [0, max]; 0 or GKC_EPROTOCOL. */
static int get_uint(gkc_conn *c, const msgpack_object *m, const char *key, uint64_t max,
                    uint64_t *v) {
  const msgpack_object *o = m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, key) : NULL;
  if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks an integer '%s'", key);
  *v = o->via.u64;
  return 0;
}

/* Reads the array result `key` as out asked for it. */
static int take_out(gkc_conn *c, const msgpack_object *r, const char *key, gkc_out *out) {
  const msgpack_object *o = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, key) : NULL;
  if (!o) return gkc__fail(c, GKC_EPROTOCOL, "reply lacks '%s'", key);
  uint64_t v = 0;
  int rc;
  if (out->kind == GKC_OUT_MEM) {
    if (o->type != MSGPACK_OBJECT_BIN)
      return gkc__fail(c, GKC_EPROTOCOL, "reply's '%s' is not a bin", key);
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
    if ((rc = get_uint(c, o, "region", UINT32_MAX, &v))) return rc;
  } else {
    if ((rc = get_uint(c, o, "handle", UINT32_MAX, &v))) return rc;
    out->handle = (uint32_t)v;
  }
  if ((rc = get_uint(c, o, "bytes", SIZE_MAX, &v))) return rc;
  out->bytes = (size_t)v;
  return 0;
}

/* --- sgemm -------------------------------------------------------------------------------- */

typedef struct {
  const gkc_sgemm_args *a;
  const char *precision;
  gkc_out *out;
  gkc_info *info;
} sgemm_call;

static int pack_sgemm(msgpack_packer *pk, const void *arg) {
  const sgemm_call *s = arg;
  const gkc_sgemm_args *a = s->a;
  msgpack_pack_map(pk, 10 + has(&a->c) + (s->precision != NULL) + out_keys(s->out));
  proto_pack_cstr(pk, "m"), msgpack_pack_int32(pk, a->m);
  proto_pack_cstr(pk, "n"), msgpack_pack_int32(pk, a->n);
  proto_pack_cstr(pk, "k"), msgpack_pack_int32(pk, a->k);
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, a->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, a->beta);
  proto_pack_cstr(pk, "trans_a"), a->trans_a ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  proto_pack_cstr(pk, "trans_b"), a->trans_b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  gkc__pack_algo(pk, a->algo);
  if (s->precision) proto_pack_cstr(pk, "precision"), proto_pack_cstr(pk, s->precision);
  pack_ref(pk, "a", &a->a);
  pack_ref(pk, "b", &a->b);
  pack_ref(pk, "c", &a->c);
  pack_out(pk, "c", s->out);
  return 0;
}

static int take_sgemm(gkc_conn *c, const msgpack_object *r, void *arg) {
  sgemm_call *s = arg;
  gkc__take_info(r, s->info);
  return take_out(c, r, "c", s->out);
}

int gkc_sgemm_ref(gkc_conn *c, const gkc_sgemm_args *args, gkc_out *out, gkc_info *info) {
  int rc;
  if (!args) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if ((rc = check_ref(c, &args->a, "a", 0)) || (rc = check_ref(c, &args->b, "b", 0)) ||
      (rc = check_ref(c, &args->c, "c", 1)) || (rc = check_out(c, out)))
    return rc;
  sgemm_call s = {args, args->precision, out, info};
  if (!s.precision && gkc__tf32(c)) s.precision = "tf32";
  return gkc__call(c, "sgemm", pack_sgemm, &s, take_sgemm, &s);
}

/* --- reduce ------------------------------------------------------------------------------- */

typedef struct {
  const gkc_ref *x;
  gkc_reduce_op op;
  const char *algo;
  double *value;
  int64_t *n;
  gkc_info *info;
} reduce_call;

static int pack_reduce(msgpack_packer *pk, const void *arg) {
  const reduce_call *r = arg;
  gkc__pack_reduce_head(pk, r->op, r->algo);
  pack_ref(pk, "x", r->x);
  return 0;
}

/* A float64 "value" and an integer "n", as reduce and dot return them. */
static int take_value(gkc_conn *c, const msgpack_object *r, double *value, int64_t *n) {
  const msgpack_object *v = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "value") : NULL;
  if (!v || (v->type != MSGPACK_OBJECT_FLOAT64 && v->type != MSGPACK_OBJECT_FLOAT32))
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a float 'value'");
  *value = v->via.f64;
  if (n) *n = (int64_t)gkc__get_num(r, "n", -1);
  return 0;
}

static int take_reduce(gkc_conn *c, const msgpack_object *r, void *arg) {
  reduce_call *rc = arg;
  gkc__take_info(r, rc->info);
  return take_value(c, r, rc->value, rc->n);
}

int gkc_reduce_ref(gkc_conn *c, gkc_ref x, gkc_reduce_op op, double *value, int64_t *n_out,
                   const char *algo, gkc_info *info) {
  int rc;
  if ((rc = check_ref(c, &x, "x", 0))) return rc;
  if (!value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "value must not be NULL");
  if (op != GKC_SUM && op != GKC_MIN && op != GKC_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "op must be GKC_SUM, GKC_MIN or GKC_MAX");
  reduce_call r = {&x, op, algo, value, n_out, info};
  return gkc__call(c, "reduce", pack_reduce, &r, take_reduce, &r);
}

/* --- spmv --------------------------------------------------------------------------------- */

typedef struct {
  const gkc_spmv_args *a;
  gkc_out *out;
  gkc_info *info;
} spmv_call;

static int pack_spmv(msgpack_packer *pk, const void *arg) {
  const spmv_call *s = arg;
  const gkc_spmv_args *a = s->a;
  msgpack_pack_map(pk, (a->use_matrix ? 1 : 5) + 4 + has(&a->y) + out_keys(s->out));
  if (a->use_matrix) {
    proto_pack_cstr(pk, "matrix"), msgpack_pack_uint32(pk, a->matrix);
  } else {
    proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, a->rows);
    proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, a->cols);
    pack_ref(pk, "row_ptr", &a->row_ptr);
    pack_ref(pk, "col_idx", &a->col_idx);
    pack_ref(pk, "values", &a->values);
  }
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, a->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, a->beta);
  gkc__pack_algo(pk, a->algo);
  pack_ref(pk, "x", &a->x);
  pack_ref(pk, "y", &a->y);
  pack_out(pk, "y", s->out);
  return 0;
}

static int take_spmv(gkc_conn *c, const msgpack_object *r, void *arg) {
  spmv_call *s = arg;
  gkc__take_info(r, s->info);
  return take_out(c, r, "y", s->out);
}

int gkc_spmv_ref(gkc_conn *c, const gkc_spmv_args *args, gkc_out *out, gkc_info *info) {
  int rc;
  if (!args) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "args must not be NULL");
  if (!args->use_matrix &&
      ((rc = check_ref(c, &args->row_ptr, "row_ptr", 0)) ||
       (rc = check_ref(c, &args->col_idx, "col_idx", 0)) ||
       (rc = check_ref(c, &args->values, "values", 0))))
    return rc;
  if ((rc = check_ref(c, &args->x, "x", 0)) || (rc = check_ref(c, &args->y, "y", 1)) ||
      (rc = check_out(c, out)))
    return rc;
  spmv_call s = {args, out, info};
  return gkc__call(c, "spmv", pack_spmv, &s, take_spmv, &s);
}

/* --- dot and axpby ---------------------------------------------------------------------- */

typedef struct {
  const gkc_ref *x, *y;
  float alpha, beta;
  gkc_out *out; /* axpby */
  double *value; /* dot */
  gkc_info *info;
} vec_call;

static int pack_dot(msgpack_packer *pk, const void *arg) {
  const vec_call *v = arg;
  msgpack_pack_map(pk, 2);
  pack_ref(pk, "x", v->x);
  pack_ref(pk, "y", v->y);
  return 0;
}

static int take_dot(gkc_conn *c, const msgpack_object *r, void *arg) {
  vec_call *v = arg;
  gkc__take_info(r, v->info);
  return take_value(c, r, v->value, NULL);
}

int gkc_dot(gkc_conn *c, gkc_ref x, gkc_ref y, double *value, gkc_info *info) {
  int rc;
  if ((rc = check_ref(c, &x, "x", 0)) || (rc = check_ref(c, &y, "y", 0))) return rc;
  if (!value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "value must not be NULL");
  vec_call v = {&x, &y, 0, 0, NULL, value, info};
  return gkc__call(c, "dot", pack_dot, &v, take_dot, &v);
}

static int pack_axpby(msgpack_packer *pk, const void *arg) {
  const vec_call *v = arg;
  msgpack_pack_map(pk, 4 + out_keys(v->out));
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, v->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, v->beta);
  pack_ref(pk, "x", v->x);
  pack_ref(pk, "y", v->y);
  pack_out(pk, "y", v->out);
  return 0;
}

static int take_axpby(gkc_conn *c, const msgpack_object *r, void *arg) {
  vec_call *v = arg;
  gkc__take_info(r, v->info);
  return take_out(c, r, "y", v->out);
}

int gkc_axpby(gkc_conn *c, float alpha, gkc_ref x, float beta, gkc_ref y, gkc_out *out,
              gkc_info *info) {
  int rc;
  if ((rc = check_ref(c, &x, "x", 0)) || (rc = check_ref(c, &y, "y", 0)) ||
      (rc = check_out(c, out)))
    return rc;
  vec_call v = {&x, &y, alpha, beta, out, NULL, info};
  return gkc__call(c, "axpby", pack_axpby, &v, take_axpby, &v);
}

/* --- resident arrays and matrices ------------------------------------------------------- */

typedef struct {
  const gkc_ref *data;
  gkc_dtype dtype;
  int shared;
  uint32_t *id;
} upload_call;

static int pack_upload(msgpack_packer *pk, const void *arg) {
  const upload_call *u = arg;
  msgpack_pack_map(pk, 3);
  proto_pack_cstr(pk, "dtype"), proto_pack_cstr(pk, u->dtype == GKC_I32 ? "i32" : "f32");
  proto_pack_cstr(pk, "shared"), u->shared ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  pack_ref(pk, "data", u->data);
  return 0;
}

static int take_id(gkc_conn *c, const msgpack_object *r, const char *key, uint32_t *id) {
  uint64_t v = 0;
  int rc = get_uint(c, r, key, UINT32_MAX, &v);
  if (rc == 0 && id) *id = (uint32_t)v;
  return rc;
}

static int take_upload(gkc_conn *c, const msgpack_object *r, void *arg) {
  upload_call *u = arg;
  return take_id(c, r, "handle", u->id);
}

int gkc_upload(gkc_conn *c, gkc_ref data, gkc_dtype dtype, int shared, uint32_t *handle) {
  int rc;
  if ((rc = check_ref(c, &data, "data", 0))) return rc;
  if (dtype != GKC_F32 && dtype != GKC_I32)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "dtype must be GKC_F32 or GKC_I32");
  upload_call u = {&data, dtype, shared, handle};
  return gkc__call(c, "upload", pack_upload, &u, take_upload, &u);
}

typedef struct {
  uint32_t handle;
  gkc_out out;
} download_call;

static int pack_download(msgpack_packer *pk, const void *arg) {
  const download_call *d = arg;
  msgpack_pack_map(pk, 1 + out_keys(&d->out));
  proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, d->handle);
  pack_out(pk, "data", &d->out);
  return 0;
}

static int take_download(gkc_conn *c, const msgpack_object *r, void *arg) {
  download_call *d = arg;
  const msgpack_object *o = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "data") : NULL;
  if (d->out.kind == GKC_OUT_MEM && o && o->type == MSGPACK_OBJECT_BIN &&
      o->via.bin.size != d->out.bytes)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "handle %u holds %u bytes, not the %zu asked for",
                     d->handle, o->via.bin.size, d->out.bytes);
  return take_out(c, r, "data", &d->out);
}

int gkc_download(gkc_conn *c, uint32_t handle, void *dst, size_t bytes) {
  download_call d = {handle, gkc_out_mem(dst, bytes)};
  int rc = check_out(c, &d.out);
  if (rc) return rc;
  return gkc__call(c, "download", pack_download, &d, take_download, &d);
}

int gkc_download_region(gkc_conn *c, uint32_t handle, const gkc_region *r, uint64_t offset,
                        size_t *bytes) {
  download_call d = {handle, gkc_out_region(r, offset)};
  int rc = check_out(c, &d.out);
  if (rc) return rc;
  rc = gkc__call(c, "download", pack_download, &d, take_download, &d);
  if (rc == 0 && bytes) *bytes = d.out.bytes;
  return rc;
}

typedef struct {
  const gkc_csr *A;
  int shared;
  uint32_t *matrix;
  char *algo;
} csr_call;

static int pack_csr(msgpack_packer *pk, const void *arg) {
  const csr_call *u = arg;
  const gkc_csr *A = u->A;
  size_t nnz = (size_t)A->nnz;
  gkc_ref rp = gkc_ref_mem(A->row_ptr, ((size_t)A->rows + 1) * 4);
  gkc_ref ci = gkc_ref_mem(A->col_idx, nnz * 4), va = gkc_ref_mem(A->values, nnz * 4);
  msgpack_pack_map(pk, 6);
  proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, A->rows);
  proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, A->cols);
  proto_pack_cstr(pk, "shared"), u->shared ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  pack_ref(pk, "row_ptr", &rp);
  pack_ref(pk, "col_idx", &ci);
  pack_ref(pk, "values", &va);
  return 0;
}

static int take_csr(gkc_conn *c, const msgpack_object *r, void *arg) {
  csr_call *u = arg;
  if (u->algo) gkc__get_str(r, "algo", u->algo, 32);
  return take_id(c, r, "matrix", u->matrix);
}

int gkc_csr_upload(gkc_conn *c, const gkc_csr *A, int shared, uint32_t *matrix, char algo[32]) {
  if (algo) algo[0] = 0;
  if (!A || !A->row_ptr || (A->nnz > 0 && (!A->col_idx || !A->values)))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A and its arrays must not be NULL");
  if (A->rows < 1 || A->cols < 1 || A->nnz < 0 || A->nnz > INT32_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "need rows, cols >= 1 and 0 <= nnz <= INT32_MAX");
  csr_call u = {A, shared, matrix, algo};
  return gkc__call(c, "csr_upload", pack_csr, &u, take_csr, &u);
}

typedef struct {
  const char *key; /* "handle" or "matrix" */
  uint32_t id;
} release_call;

static int pack_release(msgpack_packer *pk, const void *arg) {
  const release_call *r = arg;
  msgpack_pack_map(pk, 1);
  proto_pack_cstr(pk, r->key), msgpack_pack_uint32(pk, r->id);
  return 0;
}

static int take_nothing(gkc_conn *c, const msgpack_object *r, void *arg) {
  (void)arg;
  if (r->type != MSGPACK_OBJECT_MAP) return gkc__fail(c, GKC_EPROTOCOL, "result is not a map");
  return 0;
}

/* gkcd wants the key that names the object's kind; the id alone does not
 * say which, so an id that is no array is tried as a matrix. */
int gkc_release(gkc_conn *c, uint32_t id) {
  release_call r = {"handle", id};
  int rc = gkc__call(c, "release", pack_release, &r, take_nothing, NULL);
  if (rc != GKC_EINVALID_ARGUMENT) return rc;
  char first[256];
  snprintf(first, sizeof first, "%s", gkc_errmsg(c));
  r.key = "matrix";
  rc = gkc__call(c, "release", pack_release, &r, take_nothing, NULL);
  if (rc == GKC_EINVALID_ARGUMENT) {
    char second[256];
    snprintf(second, sizeof second, "%s", gkc_errmsg(c));
    return gkc__fail(c, rc, "release %u: neither a resident array nor a matrix this connection "
                     "may release (%s; %s)", id, first, second);
  }
  return rc;
}

int gkc_release_matrix(gkc_conn *c, uint32_t matrix) {
  release_call r = {"matrix", matrix};
  return gkc__call(c, "release", pack_release, &r, take_nothing, NULL);
}
