/* gkc_methods.c: one function per protocol method (see gkc.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_internal.h"
#include "proto_rpc.h"

static int no_params(msgpack_packer *pk, const void *arg) {
  (void)arg;
  msgpack_pack_map(pk, 0);
  return 0;
}

static void pack_bin(msgpack_packer *pk, const char *key, const void *p, size_t bytes) {
  proto_pack_cstr(pk, key);
  msgpack_pack_bin(pk, bytes);
  msgpack_pack_bin_body(pk, p, bytes);
}

void gkc__pack_algo(msgpack_packer *pk, const char *algo) {
  proto_pack_cstr(pk, "algo");
  proto_pack_cstr(pk, algo && *algo ? algo : "auto");
}

void gkc__pack_reduce_head(msgpack_packer *pk, gkc_reduce_op op, const char *algo) {
  static const char *const ops[] = {"sum", "min", "max"};
  msgpack_pack_map(pk, 3);
  proto_pack_cstr(pk, "op"), proto_pack_cstr(pk, ops[op]);
  gkc__pack_algo(pk, algo);
}

void gkc__get_str(const msgpack_object *m, const char *key, char *dst, size_t n) {
  const msgpack_object *o = proto_map_get(m, key);
  dst[0] = 0;
  if (o && o->type == MSGPACK_OBJECT_STR)
    snprintf(dst, n, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

double gkc__get_num(const msgpack_object *m, const char *key, double dflt) {
  const msgpack_object *o = proto_map_get(m, key);
  if (!o) return dflt;
  switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    default: return dflt;
  }
}

void gkc__take_info(const msgpack_object *r, gkc_info *info) {
  if (!info) return;
  gkc__get_str(r, "algo", info->algo, sizeof info->algo);
  info->kernel_us = gkc__get_num(r, "kernel_us", NAN);
  info->server_us = gkc__get_num(r, "server_us", NAN);
  info->queue_us = gkc__get_num(r, "queue_us", NAN);
  info->worker_us = gkc__get_num(r, "worker_us", NAN);
  info->h2d_us = gkc__get_num(r, "h2d_us", NAN);
  info->d2h_us = gkc__get_num(r, "d2h_us", NAN);
}

/* Copies the bin result `key`, which must hold exactly bytes bytes, to dst. */
static int take_array(gkc_conn *c, const msgpack_object *r, const char *key, void *dst,
                      size_t bytes) {
  const msgpack_object *o = proto_map_get(r, key);
  if (!o || o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != bytes)
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a %zu-byte '%s'", bytes, key);
  memcpy(dst, o->via.bin.ptr, bytes);
  return 0;
}

/* --- ping / status ------------------------------------------------------- */

static int take_ping(gkc_conn *c, const msgpack_object *r, void *arg) {
  gkc_ping_info *p = arg;
  if (r->type != MSGPACK_OBJECT_MAP) return gkc__fail(c, GKC_EPROTOCOL, "ping result is not a map");
  if (!p) return 0;
  gkc__get_str(r, "version", p->version, sizeof p->version);
  gkc__get_str(r, "backend", p->backend, sizeof p->backend);
  p->protocol = (int)gkc__get_num(r, "protocol", 0);
  return 0;
}

int gkc_ping(gkc_conn *c, gkc_ping_info *out) {
  return gkc__call(c, "ping", no_params, NULL, take_ping, out);
}

static int take_status(gkc_conn *c, const msgpack_object *r, void *arg) {
  gkc_status_info *s = arg;
  if (r->type != MSGPACK_OBJECT_MAP)
    return gkc__fail(c, GKC_EPROTOCOL, "status result is not a map");
  memset(s, 0, sizeof *s);
  gkc__get_str(r, "backend", s->backend, sizeof s->backend);
  s->uptime_s = gkc__get_num(r, "uptime_s", 0);
  s->in_flight = (uint64_t)gkc__get_num(r, "in_flight", 0);
  s->connections = (uint64_t)gkc__get_num(r, "connections", 0);
  const msgpack_object *d = proto_map_get(r, "devices");
  if (d && d->type == MSGPACK_OBJECT_ARRAY) {
    for (uint32_t i = 0; i < d->via.array.size && s->n_devices < GKC_MAX_DEVICES; i++) {
      const msgpack_object *e = &d->via.array.ptr[i];
      gkc__get_str(e, "name", s->devices[s->n_devices].name, sizeof s->devices[0].name);
      s->devices[s->n_devices].memory_total = (uint64_t)gkc__get_num(e, "memory_total", 0);
      s->devices[s->n_devices].memory_free = (uint64_t)gkc__get_num(e, "memory_free", 0);
      s->n_devices++;
    }
  }
  const msgpack_object *m = proto_map_get(r, "methods");
  if (m && m->type == MSGPACK_OBJECT_MAP) {
    for (uint32_t i = 0; i < m->via.map.size && s->n_methods < GKC_MAX_METHODS; i++) {
      const msgpack_object_kv *kv = &m->via.map.ptr[i];
      if (kv->key.type != MSGPACK_OBJECT_STR) continue;
      snprintf(s->methods[s->n_methods].name, sizeof s->methods[0].name, "%.*s",
               (int)kv->key.via.str.size, kv->key.via.str.ptr);
      s->methods[s->n_methods].requests = (uint64_t)gkc__get_num(&kv->val, "requests", 0);
      s->methods[s->n_methods].errors = (uint64_t)gkc__get_num(&kv->val, "errors", 0);
      s->n_methods++;
    }
  }
  return 0;
}

int gkc_status(gkc_conn *c, gkc_status_info *out) {
  return gkc__call(c, "status", no_params, NULL, take_status, out);
}

typedef struct {
  const char *name;
  uint64_t *value;
} limit_arg;

static int take_limit(gkc_conn *c, const msgpack_object *r, void *arg) {
  const limit_arg *l = arg;
  const msgpack_object *m = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "limits") : NULL;
  const msgpack_object *v = m && m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, l->name) : NULL;
  if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return gkc__fail(c, GKC_EPROTOCOL, "gkcd's status reports no limit '%s'", l->name);
  *l->value = v->via.u64;
  return 0;
}

int gkc_status_limit(gkc_conn *c, const char *name, uint64_t *value) {
  limit_arg l = {name, value};
  return gkc__call(c, "status", no_params, NULL, take_limit, &l);
}

static int take_json(gkc_conn *c, const msgpack_object *r, void *arg) {
  char **json = arg;
  *json = gkc__json(r);
  return *json ? 0 : gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
}

int gkc_status_json(gkc_conn *c, char **json) {
  *json = NULL;
  return gkc__call(c, "status", no_params, NULL, take_json, json);
}

/* --- sgemm --------------------------------------------------------------- */

typedef struct {
  int32_t m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int ta, tb;
  const char *algo;
  gkc_info *info;
  int tf32;
} sgemm_call;

static int pack_sgemm(msgpack_packer *pk, const void *arg) {
  const sgemm_call *s = arg;
  size_t m = (size_t)s->m, n = (size_t)s->n, k = (size_t)s->k;
  msgpack_pack_map(pk, (s->beta != 0.0f ? 11 : 10) + (s->tf32 ? 1 : 0));
  if (s->tf32) proto_pack_cstr(pk, "precision"), proto_pack_cstr(pk, "tf32");
  proto_pack_cstr(pk, "m"), msgpack_pack_int32(pk, s->m);
  proto_pack_cstr(pk, "n"), msgpack_pack_int32(pk, s->n);
  proto_pack_cstr(pk, "k"), msgpack_pack_int32(pk, s->k);
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, s->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, s->beta);
  proto_pack_cstr(pk, "trans_a"), s->ta ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  proto_pack_cstr(pk, "trans_b"), s->tb ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  gkc__pack_algo(pk, s->algo);
  pack_bin(pk, "a", s->a, m * k * 4);
  pack_bin(pk, "b", s->b, k * n * 4);
  if (s->beta != 0.0f) pack_bin(pk, "c", s->c, m * n * 4);
  return 0;
}

static int take_sgemm(gkc_conn *c, const msgpack_object *r, void *arg) {
  sgemm_call *s = arg;
  gkc__take_info(r, s->info);
  return take_array(c, r, "c", s->c, (size_t)s->m * (size_t)s->n * 4);
}

/* Dimensions whose products overflow size_t cannot be sent; the daemon
 * checks again, but the client must not compute garbage lengths first. */
static int dims_ok(gkc_conn *c, int64_t a, int64_t b, const char *what) {
  if (a < 1 || b < 1) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s must be >= 1", what);
  size_t bytes;
  if (__builtin_mul_overflow((size_t)a, (size_t)b, &bytes) ||
      __builtin_mul_overflow(bytes, (size_t)4, &bytes))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "%s: size overflows", what);
  return 0;
}

int gkc_sgemm(gkc_conn *c, int32_t m, int32_t n, int32_t k, float alpha, const float *a,
              int trans_a, const float *b, int trans_b, float beta, float *cmat,
              const char *algo, gkc_info *info) {
  int rc;
  if ((rc = dims_ok(c, m, k, "m*k")) || (rc = dims_ok(c, k, n, "k*n")) ||
      (rc = dims_ok(c, m, n, "m*n")))
    return rc;
  if (!a || !b || !cmat) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "a, b and c must not be NULL");
  sgemm_call s = {m, n, k, alpha, beta, a, b, cmat, trans_a, trans_b, algo, info, gkc__tf32(c)};
  return gkc__call(c, "sgemm", pack_sgemm, &s, take_sgemm, &s);
}

/* --- reduce -------------------------------------------------------------- */

typedef struct {
  const float *x;
  size_t n;
  gkc_reduce_op op;
  const char *algo;
  double *value;
  gkc_info *info;
} reduce_call;

static int pack_reduce(msgpack_packer *pk, const void *arg) {
  const reduce_call *r = arg;
  gkc__pack_reduce_head(pk, r->op, r->algo);
  pack_bin(pk, "x", r->x, r->n * 4);
  return 0;
}

static int take_reduce(gkc_conn *c, const msgpack_object *r, void *arg) {
  reduce_call *rc = arg;
  const msgpack_object *v = proto_map_get(r, "value");
  if (!v || (v->type != MSGPACK_OBJECT_FLOAT64 && v->type != MSGPACK_OBJECT_FLOAT32))
    return gkc__fail(c, GKC_EPROTOCOL, "reply lacks a float 'value'");
  *rc->value = v->via.f64;
  gkc__take_info(r, rc->info);
  return 0;
}

int gkc_reduce(gkc_conn *c, const float *x, size_t n, gkc_reduce_op op, double *value,
               const char *algo, gkc_info *info) {
  if (n < 1 || n > ((size_t)1 << 32) / 4)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "n must be in [1, 2^30]");
  if (!x || !value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "x and value must not be NULL");
  if (op != GKC_SUM && op != GKC_MIN && op != GKC_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "op must be GKC_SUM, GKC_MIN or GKC_MAX");
  reduce_call r = {x, n, op, algo, value, info};
  return gkc__call(c, "reduce", pack_reduce, &r, take_reduce, &r);
}

/* --- spmv ---------------------------------------------------------------- */

typedef struct {
  const gkc_csr *A;
  float alpha, beta;
  const float *x;
  float *y;
  const char *algo;
  gkc_info *info;
} spmv_call;

static int pack_spmv(msgpack_packer *pk, const void *arg) {
  const spmv_call *s = arg;
  const gkc_csr *A = s->A;
  size_t nnz = (size_t)A->nnz;
  msgpack_pack_map(pk, s->beta != 0.0f ? 10 : 9);
  proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, A->rows);
  proto_pack_cstr(pk, "cols"), msgpack_pack_int32(pk, A->cols);
  proto_pack_cstr(pk, "alpha"), msgpack_pack_float(pk, s->alpha);
  proto_pack_cstr(pk, "beta"), msgpack_pack_float(pk, s->beta);
  gkc__pack_algo(pk, s->algo);
  pack_bin(pk, "row_ptr", A->row_ptr, ((size_t)A->rows + 1) * 4);
  pack_bin(pk, "col_idx", A->col_idx, nnz * 4);
  pack_bin(pk, "values", A->values, nnz * 4);
  pack_bin(pk, "x", s->x, (size_t)A->cols * 4);
  if (s->beta != 0.0f) pack_bin(pk, "y", s->y, (size_t)A->rows * 4);
  return 0;
}

static int take_spmv(gkc_conn *c, const msgpack_object *r, void *arg) {
  spmv_call *s = arg;
  gkc__take_info(r, s->info);
  return take_array(c, r, "y", s->y, (size_t)s->A->rows * 4);
}

int gkc_spmv(gkc_conn *c, const gkc_csr *A, float alpha, const float *x, float beta, float *y,
             const char *algo, gkc_info *info) {
  if (!A || !x || !y || !A->row_ptr || (A->nnz > 0 && (!A->col_idx || !A->values)))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A, its arrays, x and y must not be NULL");
  if (A->rows < 1 || A->cols < 1 || A->nnz < 0 || A->nnz > INT32_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "need rows, cols >= 1 and 0 <= nnz <= INT32_MAX");
  spmv_call s = {A, alpha, beta, x, y, algo, info};
  return gkc__call(c, "spmv", pack_spmv, &s, take_spmv, &s);
}
