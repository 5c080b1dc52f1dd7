/* gkc_json.c: msgpack object to JSON text, for status replies and tools.
 *
 * msgpack-c prints its own notation, not JSON, hence this.  Strings are
 * escaped per RFC 8259; bins (never in status) become {"bin_bytes": N};
 * non-finite floats become null, as JSON has no NaN.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_internal.h"

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 256;
    while (ncap < b->len + n + 1) ncap *= 2;
    char *np = realloc(b->p, ncap);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = ncap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void putf(sbuf *b, const char *fmt, double v) {
  char tmp[64];
  int n = snprintf(tmp, sizeof tmp, fmt, v);
  put(b, tmp, (size_t)n);
}

static void put_str(sbuf *b, const char *s, size_t n) {
  put(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[8];
    if (ch == '"' || ch == '\\') {
      esc[0] = '\\', esc[1] = (char)ch;
      put(b, esc, 2);
    } else if (ch < 0x20) {
      int k = snprintf(esc, sizeof esc, "\\u%04x", ch);
      put(b, esc, (size_t)k);
    } else {
      put(b, (const char *)&s[i], 1);
    }
  }
  put(b, "\"", 1);
}

static void emit(sbuf *b, const msgpack_object *o) {
  char tmp[32];
  switch (o->type) {
    case MSGPACK_OBJECT_NIL: put(b, "null", 4); break;
    case MSGPACK_OBJECT_BOOLEAN: o->via.boolean ? put(b, "true", 4) : put(b, "false", 5); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
      put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)o->via.u64));
      break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
      put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)o->via.i64));
      break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
      if (isfinite(o->via.f64))
        putf(b, "%.17g", o->via.f64);
      else
        put(b, "null", 4);
      break;
    case MSGPACK_OBJECT_STR: put_str(b, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: putf(b, "{\"bin_bytes\": %.0f}", (double)o->via.bin.size); break;
    case MSGPACK_OBJECT_ARRAY:
      put(b, "[", 1);
      for (uint32_t i = 0; i < o->via.array.size; i++) {
        if (i) put(b, ", ", 2);
        emit(b, &o->via.array.ptr[i]);
      }
      put(b, "]", 1);
      break;
    case MSGPACK_OBJECT_MAP:
      put(b, "{", 1);
      for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (i) put(b, ", ", 2);
        if (kv->key.type == MSGPACK_OBJECT_STR) {
          emit(b, &kv->key);
        } else { /* JSON keys are strings */
          sbuf kb = {0};
          emit(&kb, &kv->key);
          put_str(b, kb.p ? kb.p : "", kb.len);
          free(kb.p);
        }
        put(b, ": ", 2);
        emit(b, &kv->val);
      }
      put(b, "}", 1);
      break;
    default: put(b, "null", 4);
  }
}

char *gkc__json(const msgpack_object *o) {
  sbuf b = {0};
  emit(&b, o);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
