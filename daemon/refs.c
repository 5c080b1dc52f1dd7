/* refs.c: see refs.h. */
#include "refs.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "proto_rpc.h"

static int bad(refs_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(refs_ctx *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->a->msg, r->a->msglen, fmt, ap);
  va_end(ap);
  return GKC_EINVALID_ARGUMENT;
}

static const char *dtype_name(int dtype) { return dtype == DT_I32 ? "i32" : "f32"; }
const char *refs_type_name(int dtype) { return dtype == DT_I32 ? "int32" : "float32"; }

/* Keeps obj alive for as long as the job. */
static int hold(refs_ctx *r, gkcd_res *obj) {
  gkcd_job *job = r->job;
  for (int i = 0; i < job->nres; i++)
    if (job->res[i] == obj) return 0;
  if (job->nres == JOB_MAX_RES) return bad(r, "too many resident objects in one request");
  res_ref(obj);
  job->res[job->nres++] = obj;
  return 0;
}

/* An unsigned integer field of a reference map. */
static int field(refs_ctx *r, const msgpack_object *m, const char *key, const char *arg,
                 int required, uint64_t *v) {
  const msgpack_object *o = proto_map_get(m, key);
  if (!o) return required ? bad(r, "argument '%s': the reference lacks '%s'", arg, key) : 1;
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return bad(r, "argument '%s': '%s' must be a non-negative integer", arg, key);
  *v = o->via.u64;
  return 0;
}

/* "12 float32 (48 bytes)", or "13 bytes" when not a whole number of elements. */
static const char *count(char *buf, size_t len, uint64_t bytes, int dtype) {
  if (bytes % 4)
    snprintf(buf, len, "%" PRIu64 " bytes", bytes);
  else
    snprintf(buf, len, "%" PRIu64 " %s (%" PRIu64 " bytes)", bytes / 4, refs_type_name(dtype), bytes);
  return buf;
}

/* Every length error names the argument, what it holds and what the other
 * arguments require of it. */
static int check_len(refs_ctx *r, const char *key, uint64_t have, uint64_t want, int allow_empty,
                     int dtype, const char *what) {
  char h[64], w[64];
  if (want == REFS_ANY_LEN) {
    if (have % 4)
      return bad(r, "argument '%s' holds %" PRIu64 " bytes, not a whole number of %s (4 bytes"
                 " each)", key, have, refs_type_name(dtype));
    if (have == 0 && !allow_empty)
      return bad(r, "argument '%s' holds 0 bytes, expected at least 1 %s (%s)", key,
                 refs_type_name(dtype), what);
    return 0;
  }
  if (have != want)
    return bad(r, "argument '%s' holds %s, expected %s: %s", key, count(h, sizeof h, have, dtype),
               count(w, sizeof w, want, dtype), what);
  return 0;
}

int refs_check_len(refs_ctx *r, const char *key, uint64_t have, uint64_t want, int dtype,
                   const char *what) {
  return check_len(r, key, have, want, 0, dtype, what);
}

int refs_object(refs_ctx *r, const char *key, int kind, gkcd_res **out) {
  int64_t id;
  int rc = args_int(r->a, key, 1, 1, UINT32_MAX, &id);
  if (rc) return rc;
  gkcd_res *obj = res_find(r->res, r->asker, (uint32_t)id);
  if (!obj || (kind && obj->kind != kind))
    return bad(r, "argument '%s': no %s %" PRId64 " on this connection (released, never made,"
               " or another connection's)", key,
               kind == RES_REGION ? "region" : kind == RES_MATRIX ? "matrix" : "handle", id);
  *out = obj;
  return hold(r, obj);
}

int refs_array(refs_ctx *r, const char *key, int required, uint64_t want_bytes, int allow_empty,
               int dtype, const char *what, gkcd_span *out) {
  memset(out, 0, sizeof *out);
  const msgpack_object *o = proto_map_get(r->a->params, key);
  if (!o) return required ? bad(r, "missing argument '%s'", key) : 0;
  if (o->type == MSGPACK_OBJECT_BIN) {
    int rc = check_len(r, key, o->via.bin.size, want_bytes, allow_empty, dtype, what);
    if (rc) return rc;
    *out = (gkcd_span){o->via.bin.ptr, o->via.bin.size, SPAN_HOST, 0, 0};
    return 0;
  }
  if (o->type != MSGPACK_OBJECT_MAP)
    return bad(r, "argument '%s' must be a bin or a reference map ({\"region\", \"offset\","
               " \"bytes\"} or {\"handle\"})", key);
  uint64_t id = 0, off = 0, bytes = 0; /* set by field() whenever it returns 0 */
  if (proto_map_get(o, "handle")) {
    if (o->via.map.size != 1) return bad(r, "argument '%s': a handle reference has only 'handle'", key);
    int rc = field(r, o, "handle", key, 1, &id);
    if (rc) return rc;
    gkcd_res *obj = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
    if (!obj || obj->kind != RES_ARRAY)
      return bad(r, "argument '%s': no handle %" PRIu64 " on this connection", key, id);
    if (obj->dtype != dtype)
      return bad(r, "argument '%s': handle %" PRIu64 " holds %s, expected %s", key, id,
                 dtype_name(obj->dtype), dtype_name(dtype));
    if ((rc = check_len(r, key, obj->bytes, want_bytes, allow_empty, dtype, what)) || (rc = hold(r, obj)))
      return rc;
    *out = (gkcd_span){obj->ptr, obj->bytes, SPAN_RES, 0, 0};
    return 0;
  }
  int rc;
  if ((rc = field(r, o, "region", key, 1, &id)) || (rc = field(r, o, "offset", key, 1, &off)) ||
      (rc = field(r, o, "bytes", key, 1, &bytes)))
    return rc;
  if (o->via.map.size != 3)
    return bad(r, "argument '%s': a region reference has exactly 'region', 'offset', 'bytes'", key);
  gkcd_res *reg = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
  if (!reg || reg->kind != RES_REGION)
    return bad(r, "argument '%s': no region %" PRIu64 " on this connection", key, id);
  if (off % 4) return bad(r, "argument '%s': offset %" PRIu64 " is not a multiple of 4", key, off);
  if (off > reg->bytes || bytes > reg->bytes - off)
    return bad(r, "argument '%s': bytes [%" PRIu64 ", %" PRIu64 ") lie outside region %" PRIu64
               " of %zu bytes", key, off, off + bytes, id, reg->bytes);
  if ((rc = check_len(r, key, bytes, want_bytes, allow_empty, dtype, what)) || (rc = hold(r, reg)))
    return rc;
  *out = (gkcd_span){(const char *)reg->ptr + off, bytes, SPAN_HOST, res_region_pinned(reg), 1};
  return 0;
}

int refs_out(refs_ctx *r, const char *name, size_t out_bytes) {
  gkcd_job *job = r->job;
  job->out_kind = OUT_BIN;
  const msgpack_object *o = proto_map_get(r->a->params, "out");
  if (!o) return 0;
  if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != 1 ||
      o->via.map.ptr[0].key.type != MSGPACK_OBJECT_STR ||
      o->via.map.ptr[0].key.via.str.size != strlen(name) ||
      memcmp(o->via.map.ptr[0].key.via.str.ptr, name, strlen(name)) != 0)
    return bad(r, "argument 'out' must be a map with the single key '%s'", name);
  const msgpack_object *t = &o->via.map.ptr[0].val;
  if (t->type == MSGPACK_OBJECT_STR && t->via.str.size == 6 && !memcmp(t->via.str.ptr, "handle", 6)) {
    job->out_kind = OUT_RES_NEW;
    return 0;
  }
  if (t->type != MSGPACK_OBJECT_MAP)
    return bad(r, "argument 'out': '%s' must be \"handle\", {\"handle\": h} or {\"region\": r,"
               " \"offset\": o}", name);
  uint64_t id = 0, off = 0;
  int rc;
  if (proto_map_get(t, "handle")) {
    if (t->via.map.size != 1) return bad(r, "argument 'out': a handle target has only 'handle'");
    if ((rc = field(r, t, "handle", "out", 1, &id))) return rc;
    gkcd_res *obj = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
    if (!obj || obj->kind != RES_ARRAY)
      return bad(r, "argument 'out': no handle %" PRIu64 " on this connection", id);
    if (obj->rep_mask)
      return bad(r, "argument 'out': handle %" PRIu64 " is replicated on every device, and so"
                 " read-only: write to an array of its own", id);
    if (obj->dtype != DT_F32 || obj->bytes != out_bytes)
      return bad(r, "argument 'out': handle %" PRIu64 " holds %zu bytes of %s, expected %zu"
                 " bytes of f32 (the result)", id, obj->bytes, dtype_name(obj->dtype), out_bytes);
    for (int i = 0; i < job->nres; i++)
      if (job->res[i] == obj && !(job->method == PROTO_M_AXPBY && job->in.vec.y.ptr == obj->ptr) &&
          !(job->method == PROTO_M_SOLVE && job->in.solve.x0.ptr == obj->ptr))
        return bad(r, "argument 'out': handle %" PRIu64 " is also an input (only axpby's y and"
                   " solve's x0 may be updated in place)", id);
    if ((rc = hold(r, obj))) return rc;
    job->out_kind = OUT_RES;
    job->out_ptr = obj->ptr;
    job->out_res = obj;
    return 0;
  }
  if ((rc = field(r, t, "region", "out", 1, &id)) || (rc = field(r, t, "offset", "out", 1, &off)))
    return rc;
  if (t->via.map.size != 2)
    return bad(r, "argument 'out': a region target has exactly 'region' and 'offset'");
  gkcd_res *reg = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
  if (!reg || reg->kind != RES_REGION)
    return bad(r, "argument 'out': no region %" PRIu64 " on this connection", id);
  if (off % 4) return bad(r, "argument 'out': offset %" PRIu64 " is not a multiple of 4", off);
  if (off > reg->bytes || out_bytes > reg->bytes - off)
    return bad(r, "argument 'out': the %zu-byte result at offset %" PRIu64 " does not fit region %"
               PRIu64 " of %zu bytes", out_bytes, off, id, reg->bytes);
  if ((rc = hold(r, reg))) return rc;
  job->out_kind = OUT_HOST;
  job->out_ptr = (char *)reg->ptr + off;
  job->out_offset = off;
  job->out_res = reg;
  return 0;
}
