/* args.c: see args.h. */
#include "args.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "proto_rpc.h"

static int fail(args_ctx *a, const char *fmt, const char *key, const char *extra) {
  snprintf(a->msg, a->msglen, fmt, key, extra);
  return GKC_EINVALID_ARGUMENT;
}

static const char *type_name(const msgpack_object *o) {
  switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a string";
    case MSGPACK_OBJECT_BIN: return "a bin";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    default: return "an ext";
  }
}

int args_known(args_ctx *a, const char *const *allowed) {
  const msgpack_object_map *m = &a->params->via.map;
  for (uint32_t i = 0; i < m->size; i++) {
    const msgpack_object *k = &m->ptr[i].key;
    if (k->type != MSGPACK_OBJECT_STR) {
      snprintf(a->msg, a->msglen, "argument names must be strings, got %s", type_name(k));
      return GKC_EINVALID_ARGUMENT;
    }
    int ok = 0;
    for (const char *const *p = allowed; *p && !ok; p++)
      ok = strlen(*p) == k->via.str.size && memcmp(*p, k->via.str.ptr, k->via.str.size) == 0;
    if (!ok) {
      char name[72];
      snprintf(a->msg, a->msglen, "unknown argument '%s'",
               proto_echo(name, sizeof name, k->via.str.ptr, k->via.str.size, 64));
      return GKC_EINVALID_ARGUMENT;
    }
    /* A repeated key would make the meaning depend on which copy we read. */
    for (uint32_t j = 0; j < i; j++) {
      const msgpack_object *kj = &m->ptr[j].key;
      if (kj->via.str.size == k->via.str.size &&
          memcmp(kj->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0) {
        char name[72];
        snprintf(a->msg, a->msglen, "argument '%s' given twice",
                 proto_echo(name, sizeof name, k->via.str.ptr, k->via.str.size, 64));
        return GKC_EINVALID_ARGUMENT;
      }
    }
  }
  return 0;
}

static const msgpack_object *get(args_ctx *a, const char *key, int required, int *rc) {
  const msgpack_object *o = proto_map_get(a->params, key);
  *rc = 0;
  if (!o && required) *rc = fail(a, "missing argument '%s'%s", key, "");
  return o;
}

int args_present(args_ctx *a, const char *key) { return proto_map_get(a->params, key) != NULL; }

int args_int(args_ctx *a, const char *key, int required, int64_t lo, int64_t hi, int64_t *out) {
  int rc;
  const msgpack_object *o = get(a, key, required, &rc);
  if (!o) return rc;
  int64_t v;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > (uint64_t)INT64_MAX) goto range;
    v = (int64_t)o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    v = o->via.i64;
  } else {
    return fail(a, "argument '%s' must be an integer, got %s", key, type_name(o));
  }
  if (v < lo || v > hi) goto range;
  *out = v;
  return 0;
range:
  snprintf(a->msg, a->msglen, "argument '%s' must be in [%" PRId64 ", %" PRId64 "]", key, lo, hi);
  return GKC_EINVALID_ARGUMENT;
}

int args_number(const msgpack_object *o, double *out) {
  switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return 0;
    default: return -1;
  }
}


int args_double(args_ctx *a, const char *key, int required, double *out) {
  int rc;
  const msgpack_object *o = get(a, key, required, &rc);
  if (!o) return rc;
  double v;
  if (args_number(o, &v) != 0)
    return fail(a, "argument '%s' must be a number, got %s", key, type_name(o));
  if (!isfinite(v)) return fail(a, "argument '%s' must be a finite number%s", key, "");
  *out = v;
  return 0;
}

int args_float(args_ctx *a, const char *key, int required, float *out) {
  double v = 0;
  int present = args_present(a, key);
  int rc = args_double(a, key, required, &v);
  if (rc || !present) return rc;
  if (fabs(v) > 3.4028234663852886e38)
    return fail(a, "argument '%s' must be a finite float32 value%s", key, "");
  *out = (float)v;
  return 0;
}

int args_bool(args_ctx *a, const char *key, int required, int *out) {
  int rc;
  const msgpack_object *o = get(a, key, required, &rc);
  if (!o) return rc;
  if (o->type != MSGPACK_OBJECT_BOOLEAN)
    return fail(a, "argument '%s' must be a boolean, got %s", key, type_name(o));
  *out = o->via.boolean;
  return 0;
}

int args_str(args_ctx *a, const char *key, int required, const char **out, size_t *len) {
  int rc;
  const msgpack_object *o = get(a, key, required, &rc);
  if (!o) return rc;
  if (o->type != MSGPACK_OBJECT_STR)
    return fail(a, "argument '%s' must be a string, got %s", key, type_name(o));
  *out = o->via.str.ptr;
  *len = o->via.str.size;
  return 0;
}

