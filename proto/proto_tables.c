/* proto_tables.c: lookups generated from the method, dtype and error tables. */
#include <string.h>

#include "proto_dtypes.h"
#include "proto_errors.h"
#include "proto_methods.h"

static const char *const method_names[] = {
#define XX(name, str) str,
    PROTO_METHOD_MAP(XX)
#undef XX
};

int proto_method_lookup(const char *s, size_t len) {
  for (int m = 0; m < PROTO_M_COUNT; m++)
    if (strlen(method_names[m]) == len && memcmp(method_names[m], s, len) == 0)
      return m;
  return -1;
}

const char *proto_method_name(int m) {
  return (m >= 0 && m < PROTO_M_COUNT) ? method_names[m] : "?";
}

const char *proto_err_wire(int code) {
  switch (code) {
#define XX(name, val, wire, text) \
  case val:                       \
    return wire;
    GKC_ERROR_MAP(XX)
#undef XX
  }
  return "unknown";
}

const char *proto_err_text(int code) {
  if (code == 0)
    return "success";
  switch (code) {
#define XX(name, val, wire, text) \
  case val:                       \
    return text;
    GKC_ERROR_MAP(XX)
#undef XX
  }
  return "unknown error";
}

int proto_err_from_wire(const char *s, size_t len) {
#define XX(name, val, wire, text) \
  if (sizeof(wire) - 1 == len && memcmp(wire, s, len) == 0) return val;
  GKC_ERROR_MAP(XX)
#undef XX
  return GKC_EUNKNOWN_CODE;
}

static const struct {
  const char *wire, *name;
  size_t size;
} dtypes[] = {
#define XX(name, wire, numpy, size) {wire, numpy, size},
    PROTO_DTYPE_MAP(XX)
#undef XX
};

int proto_dtype_lookup(const char *s, size_t len) {
  for (int d = 0; d < PROTO_DT_COUNT; d++)
    if (strlen(dtypes[d].wire) == len && memcmp(dtypes[d].wire, s, len) == 0) return d;
  return -1;
}

const char *proto_dtype_wire(int dt) { return dt >= 0 && dt < PROTO_DT_COUNT ? dtypes[dt].wire : "?"; }
const char *proto_dtype_name(int dt) { return dt >= 0 && dt < PROTO_DT_COUNT ? dtypes[dt].name : "?"; }
size_t proto_dtype_size(int dt) { return dt >= 0 && dt < PROTO_DT_COUNT ? dtypes[dt].size : 0; }
