/* proto_methods.h: the table of protocol methods.
 *
 * One row per method; the daemon's dispatch table and the client both derive
 * from it, so a method name is spelled exactly once.
 *
 * Implemented in: proto_tables.c
 */
#ifndef PROTO_METHODS_H
#define PROTO_METHODS_H

#include <stddef.h>

#define PROTO_METHOD_MAP(XX)     \
  XX(PING, "ping")               \
  XX(STATUS, "status")           \
  XX(SGEMM, "sgemm")             \
  XX(REDUCE, "reduce")           \
  XX(SPMV, "spmv")               \
  XX(DOT, "dot")                 \
  XX(AXPBY, "axpby")             \
  XX(NRM2, "nrm2")               \
  XX(SHM_REGISTER, "shm_register") \
  XX(SHM_RELEASE, "shm_release") \
  XX(UPLOAD, "upload")           \
  XX(DOWNLOAD, "download")       \
  XX(CSR_UPLOAD, "csr_upload")   \
  XX(RELEASE, "release")         \
  XX(SOLVE, "solve")             \
  XX(BATCH, "batch")             \
  XX(METRICS, "metrics")         \
  XX(RING_REGISTER, "ring_register")

typedef enum {
#define PROTO__M_ENUM(name, str) PROTO_M_##name,
  PROTO_METHOD_MAP(PROTO__M_ENUM)
#undef PROTO__M_ENUM
  PROTO_M_COUNT
} proto_method;

/* The method whose wire name is s[0..len), or -1. */
int proto_method_lookup(const char *s, size_t len);
/* The wire name of m; "?" when m is out of range. */
const char *proto_method_name(int m);

#endif
