/* refs.c: see refs.h. */
#include "refs.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "proto_dtypes.h"
#include "proto_methods.h"
#include "proto_rpc.h"

static int bad(refs_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(refs_ctx *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->a->msg, r->a->msglen, fmt, ap);
  va_end(ap);
  return GKC_EINVALID_ARGUMENT;
}

/* "float32 (f32)": the NumPy name and the wire name, so that either
 * reader recognises it. */
const char *refs_type_name(int dtype) {
  switch (dtype) {
#define XX(name, wire, numpy, size) \
  case PROTO_DT_##name:             \
    return numpy " (" wire ")";
    PROTO_DTYPE_MAP(XX)
#undef XX
  }
  return "?";
}

static size_t esize(int dtype) { return proto_dtype_size(dtype); }

/* Region id of the asking connection, into *reg, with off a multiple of
 * dtype's size; else the error naming key. */
static int region_at(refs_ctx *r, const char *key, uint64_t id, uint64_t off, int dtype,
                     gkcd_res **reg) {
  *reg = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
  if (!*reg || (*reg)->kind != RES_REGION)
    return bad(r, "argument '%s': no region %" PRIu64 " on this connection", key, id);
  if (off % esize(dtype))
    return bad(r, "argument '%s': offset %" PRIu64 " is not a multiple of %zu (the size of a"
               " %s)", key, off, esize(dtype), proto_dtype_name(dtype));
  return 0;
}

uint64_t refs_bytes(uint64_t x, uint64_t y, int dtype) {
  uint64_t n;
  if (__builtin_mul_overflow(x, y, &n) || __builtin_mul_overflow(n, (uint64_t)esize(dtype), &n) ||
      n > SIZE_MAX)
    return UINT64_MAX;
  return n;
}

void refs_note_f64(refs_ctx *r, const char *key) {
  gkcd_job *job = r->job;
  if (!job->f64_arg[0])
    snprintf(job->f64_arg, sizeof job->f64_arg, "%s%s", r->where ? r->where : "", key);
}

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
  if (bytes % esize(dtype))
    snprintf(buf, len, "%" PRIu64 " bytes", bytes);
  else
    snprintf(buf, len, "%" PRIu64 " %s (%" PRIu64 " bytes)", bytes / esize(dtype),
             proto_dtype_name(dtype), bytes);
  return buf;
}

/* Every length error names the argument, what it holds and what the other
 * arguments require of it. */
static int check_len(refs_ctx *r, const char *key, uint64_t have, uint64_t want, int allow_empty,
                     int dtype, const char *what) {
  char h[64], w[64];
  if (want == REFS_ANY_LEN) {
    if (have % esize(dtype))
      return bad(r, "argument '%s' holds %" PRIu64 " bytes, not a whole number of %s (%zu bytes"
                 " each)", key, have, refs_type_name(dtype), esize(dtype));
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
  if (obj->kind != RES_REGION && obj->dtype == DT_F64) refs_note_f64(r, key);
  *out = obj;
  return hold(r, obj);
}

/* A float dtype named by a string object: DT_F32 or DT_F64, or -1. */
static int float_dtype(const msgpack_object *o) {
  if (!o || o->type != MSGPACK_OBJECT_STR) return -1;
  int d = proto_dtype_lookup(o->via.str.ptr, o->via.str.size);
  return d == DT_F32 || d == DT_F64 ? d : -1;
}

/* The dtype an argument carries itself, or -1: a live float array's
 * handle, or a region reference's "dtype". */
static int carried(refs_ctx *r, const msgpack_object *o) {
  if (!o || o->type != MSGPACK_OBJECT_MAP) return -1;
  const msgpack_object *h = proto_map_get(o, "handle");
  if (h) {
    if (h->type != MSGPACK_OBJECT_POSITIVE_INTEGER || h->via.u64 > UINT32_MAX) return -1;
    gkcd_res *obj = res_find(r->res, r->asker, (uint32_t)h->via.u64);
    return obj && obj->kind == RES_ARRAY && (obj->dtype == DT_F32 || obj->dtype == DT_F64)
               ? obj->dtype : -1;
  }
  return float_dtype(proto_map_get(o, "dtype"));
}

/* "the 'dtype' argument", "argument 'x'": what settled the float dtype. */
static const char *settler(const refs_ctx *r, char *buf, size_t len) {
  if (!r->fdt_from) snprintf(buf, len, "the default");
  else if (!strcmp(r->fdt_from, "dtype")) snprintf(buf, len, "argument 'dtype'");
  else snprintf(buf, len, "argument '%s'", r->fdt_from);
  return buf;
}

static const char *op_name(const refs_ctx *r) {
  return r->op ? r->op : proto_method_name(r->job->method);
}

int refs_floats(refs_ctx *r, const char *const *keys, int f32_only) {
  const char *method = op_name(r);
  r->fdt = DT_F32, r->fdt_from = NULL, r->f32_only = f32_only;
  const msgpack_object *o = proto_map_get(r->a->params, "dtype");
  if (o) {
    char echo[40];
    if (o->type != MSGPACK_OBJECT_STR)
      return bad(r, "argument 'dtype' must be a string (\"f32\" or \"f64\")");
    int d = float_dtype(o);
    if (d < 0)
      return bad(r, "argument 'dtype': '%s' is not a float dtype of %s (\"f32\" or \"f64\")",
                 proto_echo(echo, sizeof echo, o->via.str.ptr, o->via.str.size, 32), method);
    r->fdt = d, r->fdt_from = "dtype";
  } else if (!f32_only) { /* f32_only: refs_array names an f64 array with its holder */
    for (const char *const *k = keys; *k; k++) {
      int d = carried(r, proto_map_get(r->a->params, *k));
      if (d >= 0) {
        r->fdt = d, r->fdt_from = *k;
        break;
      }
    }
  }
  if (f32_only && r->fdt != DT_F32) {
    char by[48];
    return bad(r, "%s is %s, but %s takes %s only (send float32, or convert)",
               settler(r, by, sizeof by), refs_type_name(r->fdt), method,
               refs_type_name(DT_F32));
  }
  return 0;
}

/* An argument of dtype have where the request wants want: the message
 * names the argument, both dtypes and what wants the other one. */
static int mismatch(refs_ctx *r, const char *key, const char *holder, int have, int want,
                    int floats) {
  char by[48];
  if (floats && r->f32_only)
    return bad(r, "argument '%s': %s holds %s, but %s takes %s only", key, holder,
               refs_type_name(have), op_name(r), refs_type_name(want));
  if (floats)
    return bad(r, "argument '%s': %s holds %s, but %s makes this request's float arrays %s",
               key, holder, refs_type_name(have), settler(r, by, sizeof by),
               refs_type_name(want));
  return bad(r, "argument '%s': %s holds %s, but it takes %s", key, holder, refs_type_name(have),
             refs_type_name(want));
}

int refs_array(refs_ctx *r, const char *key, int required, uint64_t want_bytes, int allow_empty,
               int dtype, const char *what, gkcd_span *out) {
  memset(out, 0, sizeof *out);
  int floats = dtype == REFS_FLOAT;
  if (floats) dtype = r->fdt;
  out->dtype = dtype;
  const msgpack_object *o = proto_map_get(r->a->params, key);
  if (!o) return required ? bad(r, "missing argument '%s'", key) : 0;
  if (dtype == DT_F64) refs_note_f64(r, key);
  if (o->type == MSGPACK_OBJECT_BIN) {
    int rc = check_len(r, key, o->via.bin.size, want_bytes, allow_empty, dtype, what);
    if (rc) return rc;
    *out = (gkcd_span){o->via.bin.ptr, o->via.bin.size, SPAN_HOST, 0, 0, dtype};
    return 0;
  }
  if (o->type != MSGPACK_OBJECT_MAP)
    return bad(r, "argument '%s' must be a bin or a reference map ({\"region\", \"offset\","
               " \"bytes\"} or {\"handle\"})", key);
  uint64_t id = 0, off = 0, bytes = 0; /* set by field() whenever it returns 0 */
  char holder[40];
  if (proto_map_get(o, "handle")) {
    if (o->via.map.size != 1) return bad(r, "argument '%s': a handle reference has only 'handle'", key);
    int rc = field(r, o, "handle", key, 1, &id);
    if (rc) return rc;
    gkcd_res *obj = id <= UINT32_MAX ? res_find(r->res, r->asker, (uint32_t)id) : NULL;
    if (!obj || obj->kind != RES_ARRAY)
      return bad(r, "argument '%s': no handle %" PRIu64 " on this connection", key, id);
    if (obj->dtype != dtype) {
      snprintf(holder, sizeof holder, "handle %" PRIu64, id);
      return mismatch(r, key, holder, obj->dtype, dtype, floats);
    }
    if ((rc = check_len(r, key, obj->bytes, want_bytes, allow_empty, dtype, what)) || (rc = hold(r, obj)))
      return rc;
    *out = (gkcd_span){obj->ptr, obj->bytes, SPAN_RES, 0, 0, dtype};
    return 0;
  }
  int rc;
  if ((rc = field(r, o, "region", key, 1, &id)) || (rc = field(r, o, "offset", key, 1, &off)) ||
      (rc = field(r, o, "bytes", key, 1, &bytes)))
    return rc;
  const msgpack_object *dt = proto_map_get(o, "dtype");
  if (o->via.map.size != 3u + (dt != NULL))
    return bad(r, "argument '%s': a region reference has exactly 'region', 'offset', 'bytes'"
               " and an optional 'dtype'", key);
  if (dt) {
    int d = dt->type == MSGPACK_OBJECT_STR ? proto_dtype_lookup(dt->via.str.ptr, dt->via.str.size) : -1;
    if (d < 0) {
      char echo[40] = "?";
      if (dt->type == MSGPACK_OBJECT_STR) proto_echo(echo, sizeof echo, dt->via.str.ptr, dt->via.str.size, 32);
      return bad(r, "argument '%s': the reference's 'dtype' '%s' is not f32, i32 or f64", key, echo);
    }
    if (d != dtype) {
      snprintf(holder, sizeof holder, "region %" PRIu64, id);
      return mismatch(r, key, holder, d, dtype, floats);
    }
  }
  gkcd_res *reg;
  if ((rc = region_at(r, key, id, off, dtype, &reg))) return rc;
  if (off > reg->bytes || bytes > reg->bytes - off)
    return bad(r, "argument '%s': bytes [%" PRIu64 ", %" PRIu64 ") lie outside region %" PRIu64
               " of %zu bytes", key, off, off + bytes, id, reg->bytes);
  if ((rc = check_len(r, key, bytes, want_bytes, allow_empty, dtype, what)) || (rc = hold(r, reg)))
    return rc;
  *out = (gkcd_span){(const char *)reg->ptr + off, bytes, SPAN_HOST, res_region_pinned(reg), 1, dtype};
  return 0;
}

int refs_region_target(refs_ctx *r, const char *arg, const msgpack_object *t, size_t out_bytes,
                       int dtype, int allow_bytes, gkcd_res **out, uint64_t *offset) {
  uint64_t id = 0, off = 0, bytes = 0;
  int rc;
  if ((rc = field(r, t, "region", arg, 1, &id)) || (rc = field(r, t, "offset", arg, 1, &off)))
    return rc;
  int has_bytes = allow_bytes && proto_map_get(t, "bytes") != NULL;
  if (has_bytes && (rc = field(r, t, "bytes", arg, 1, &bytes))) return rc;
  if (t->via.map.size != 2u + has_bytes)
    return bad(r, allow_bytes ? "argument '%s': a region target has exactly 'region' and 'offset',"
                                " and an optional 'bytes'"
                              : "argument '%s': a region target has exactly 'region' and 'offset'",
               arg);
  gkcd_res *reg;
  if ((rc = region_at(r, arg, id, off, dtype, &reg))) return rc;
  if (has_bytes && bytes != out_bytes)
    return bad(r, "argument '%s': 'bytes' is %" PRIu64 ", but the result is %zu bytes", arg, bytes,
               out_bytes);
  /* off > size first: off + out_bytes never wraps past the test */
  if (off > reg->bytes || out_bytes > reg->bytes - off)
    return bad(r, "argument '%s': the %zu-byte result at offset %" PRIu64 " does not fit region %"
               PRIu64 " of %zu bytes", arg, out_bytes, off, id, reg->bytes);
  if ((rc = hold(r, reg))) return rc;
  *out = reg;
  *offset = off;
  return 0;
}

int refs_out(refs_ctx *r, const char *name, size_t out_bytes, int dtype) {
  gkcd_job *job = r->job;
  job->out_kind = OUT_BIN;
  job->out_dtype = dtype;
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
    if (obj->dtype != dtype || obj->bytes != out_bytes)
      return bad(r, "argument 'out': handle %" PRIu64 " holds %zu bytes of %s, expected %zu"
                 " bytes of %s (the result)", id, obj->bytes, refs_type_name(obj->dtype),
                 out_bytes, refs_type_name(dtype));
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
  gkcd_res *reg;
  if ((rc = refs_region_target(r, "out", t, out_bytes, dtype, 0, &reg, &off))) return rc;
  job->out_kind = OUT_HOST;
  job->out_ptr = (char *)reg->ptr + off;
  job->out_offset = off;
  job->out_res = reg;
  return 0;
}
