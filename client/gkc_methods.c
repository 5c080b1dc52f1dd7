/* gkc_methods.c: ping and status, and the calls on plain arrays
 * (gkc_sgemm, gkc_reduce, gkc_spmv, which pass their arrays as GKC_REF_MEM
 * to the calls on references in gkc_resident.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_internal.h"
#include "gkc_reply.h"
#include "proto_rpc.h"

static void no_params(msgpack_packer *pk, const gkc__req *r) {
  (void)r;
  msgpack_pack_map(pk, 0);
}

/* --- ping / status ------------------------------------------------------- */

static int take_ping(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req;
  if (r->type != MSGPACK_OBJECT_MAP) return gkc__fail(c, GKC_EPROTOCOL, "ping result is not a map");
  gkc__note_instance(c, r);
  gkc_ping_info *p = &res->ping;
  gkc__get_str(r, "version", p->version, sizeof p->version);
  gkc__get_str(r, "backend", p->backend, sizeof p->backend);
  p->protocol = (int)gkc__get_num(r, "protocol", 0);
  return 0;
}

int gkc__prep_ping(gkc_conn *c, gkc__req *r) {
  (void)c;
  r->method = "ping";
  r->pack = no_params;
  r->take = take_ping;
  return 0;
}

int gkc_ping(gkc_conn *c, gkc_ping_info *out) {
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  gkc__prep_ping(c, &r);
  int rc = gkc__run(c, &r, &res);
  if (rc == 0 && out) *out = res.ping;
  return rc;
}

/* Fills res->status_info (when the caller gave one) and res->status_json. */
static int take_status(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req;
  if (r->type != MSGPACK_OBJECT_MAP)
    return gkc__fail(c, GKC_EPROTOCOL, "status result is not a map");
  gkc__note_instance(c, r);
  char *json = gkc__json(r);
  if (!json) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  res->status_json = json;
  gkc_status_info *s = (gkc_status_info *)res->status_info;
  if (!s) return 0;
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
      gkc__get_str(e, "kind", s->devices[s->n_devices].kind, sizeof s->devices[0].kind);
      s->devices[s->n_devices].memory_used = (uint64_t)gkc__get_num(e, "memory_used", 0);
      s->devices[s->n_devices].queued = (uint64_t)gkc__get_num(e, "queued", 0);
      s->devices[s->n_devices].running = (uint64_t)gkc__get_num(e, "running", 0);
      s->devices[s->n_devices].served = (uint64_t)gkc__get_num(e, "served", 0);
      const msgpack_object *lost = proto_map_get(e, "lost");
      s->devices[s->n_devices].lost = lost && lost->type == MSGPACK_OBJECT_BOOLEAN && lost->via.boolean;
      gkc__get_str(e, "lost_reason", s->devices[s->n_devices].lost_reason,
                   sizeof s->devices[0].lost_reason);
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

int gkc__prep_status(gkc_conn *c, gkc__req *r) {
  (void)c;
  r->method = "status";
  r->pack = no_params;
  r->take = take_status;
  return 0;
}

/* Both blocking status calls; *json (when not NULL) takes the JSON. */
static int status_call(gkc_conn *c, gkc_status_info *out, char **json) {
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  res.status_info = out;
  gkc__prep_status(c, &r);
  int rc = gkc__run(c, &r, &res);
  if (json && rc == 0)
    *json = (char *)res.status_json;
  else
    free((char *)res.status_json);
  return rc;
}

int gkc_status(gkc_conn *c, gkc_status_info *out) { return status_call(c, out, NULL); }

int gkc_status_json(gkc_conn *c, char **json) {
  *json = NULL;
  return status_call(c, NULL, json);
}

/* gkc_metrics: the result is one str, copied into res->status_json. */
static int take_metrics(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  (void)req;
  if (r->type != MSGPACK_OBJECT_STR) return gkc__fail(c, GKC_EPROTOCOL, "metrics result is not a str");
  char *text = malloc((size_t)r->via.str.size + 1);
  if (!text) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  memcpy(text, r->via.str.ptr, r->via.str.size);
  text[r->via.str.size] = 0;
  res->status_json = text;
  return 0;
}

int gkc_metrics(gkc_conn *c, char **text) {
  gkc__req r;
  gkc_result res;
  *text = NULL;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  r.method = "metrics";
  r.pack = no_params;
  r.take = take_metrics;
  int rc = gkc__run(c, &r, &res);
  if (rc == 0)
    *text = (char *)res.status_json;
  else
    free((char *)res.status_json);
  return rc;
}

/* gkc_status_limit: one entry of status's "limits" map, into res->value. */
static int take_limit(gkc_conn *c, const msgpack_object *r, gkc__req *req, gkc_result *res) {
  const char *name = req->limit_name;
  const msgpack_object *m = r->type == MSGPACK_OBJECT_MAP ? proto_map_get(r, "limits") : NULL;
  const msgpack_object *v = m && m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, name) : NULL;
  if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return gkc__fail(c, GKC_EPROTOCOL, "gkcd's status reports no limit '%s'", name);
  res->value = (double)v->via.u64;
  return 0;
}

int gkc_status_limit(gkc_conn *c, const char *name, uint64_t *value) {
  gkc__req r;
  gkc_result res;
  int live = gkc__live(c); /* gkcd went away while idle: connect again first */
  if (live) return live;
  gkc__req_init(&r);
  gkc__result_init(&res);
  gkc__prep_status(c, &r);
  r.take = take_limit;
  r.limit_name = name;
  int rc = gkc__run(c, &r, &res);
  if (rc == 0) *value = (uint64_t)res.value;
  return rc;
}

/* --- the calls on plain arrays ---------------------------------------------- */

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
  size_t mk = (size_t)m * (size_t)k * 4, kn = (size_t)k * (size_t)n * 4;
  size_t mn = (size_t)m * (size_t)n * 4;
  gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
  s.m = m, s.n = n, s.k = k, s.alpha = alpha, s.beta = beta;
  s.trans_a = trans_a, s.trans_b = trans_b, s.algo = algo;
  s.a = gkc_ref_mem(a, mk);
  s.b = gkc_ref_mem(b, kn);
  if (beta != 0.0f) s.c = gkc_ref_mem(cmat, mn);
  gkc_out out = gkc_out_mem(cmat, mn);
  return gkc_sgemm_ref(c, &s, &out, info);
}

int gkc_reduce(gkc_conn *c, const float *x, size_t n, gkc_reduce_op op, double *value,
               const char *algo, gkc_info *info) {
  if (n < 1 || n > ((size_t)1 << 32) / 4)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "n must be in [1, 2^30]");
  if (!x || !value) return gkc__fail(c, GKC_EINVALID_ARGUMENT, "x and value must not be NULL");
  return gkc_reduce_ref(c, gkc_ref_mem(x, n * 4), op, value, NULL, algo, info);
}

int gkc_spmv(gkc_conn *c, const gkc_csr *A, float alpha, const float *x, float beta, float *y,
             const char *algo, gkc_info *info) {
  if (!A || !x || !y || !A->row_ptr || (A->nnz > 0 && (!A->col_idx || !A->values)))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "A, its arrays, x and y must not be NULL");
  if (A->rows < 1 || A->cols < 1 || A->nnz < 0 || A->nnz > INT32_MAX)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "need rows, cols >= 1 and 0 <= nnz <= INT32_MAX");
  size_t nnz = (size_t)A->nnz;
  gkc_spmv_args s = GKC_SPMV_ARGS_INIT;
  s.rows = A->rows, s.cols = A->cols, s.alpha = alpha, s.beta = beta, s.algo = algo;
  s.row_ptr = gkc_ref_mem(A->row_ptr, ((size_t)A->rows + 1) * 4);
  s.col_idx = gkc_ref_mem(A->col_idx, nnz * 4);
  s.values = gkc_ref_mem(A->values, nnz * 4);
  s.x = gkc_ref_mem(x, (size_t)A->cols * 4);
  if (beta != 0.0f) s.y = gkc_ref_mem(y, (size_t)A->rows * 4);
  gkc_out out = gkc_out_mem(y, (size_t)A->rows * 4);
  return gkc_spmv_ref(c, &s, &out, info);
}
