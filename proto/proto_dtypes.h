/* proto_dtypes.h: the table of array element types (PROTOCOL.md, "Data
 * encoding").
 *
 * One row per dtype: its wire name (upload's and csr_upload's `dtype`, a
 * region reference's `dtype`, the method-level `dtype`), the name messages
 * and NumPy use, and its size.  The daemon's resident objects, libgkc and
 * the CLI all derive from it, so a dtype is spelled exactly once.  The
 * order is ABI: gkc.h's gkc_dtype and the daemon's DT_* count alike.
 *
 * Implemented in: proto_tables.c
 */
#ifndef PROTO_DTYPES_H
#define PROTO_DTYPES_H

#include <stddef.h>

#define PROTO_DTYPE_MAP(XX)      \
  XX(F32, "f32", "float32", 4)   \
  XX(I32, "i32", "int32", 4)     \
  XX(F64, "f64", "float64", 8)

typedef enum {
#define PROTO__DT_ENUM(name, wire, numpy, size) PROTO_DT_##name,
  PROTO_DTYPE_MAP(PROTO__DT_ENUM)
#undef PROTO__DT_ENUM
  PROTO_DT_COUNT
} proto_dtype;

/* The dtype whose wire name is s[0..len), or -1. */
int proto_dtype_lookup(const char *s, size_t len);
/* "f32", "i32", "f64"; "?" out of range. */
const char *proto_dtype_wire(int dt);
/* "float32", "int32", "float64"; "?" out of range. */
const char *proto_dtype_name(int dt);
/* Bytes per element; 0 out of range. */
size_t proto_dtype_size(int dt);

#endif
