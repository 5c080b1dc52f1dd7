/* gkc.h: client library for gkcd, the GPU compute daemon.
 *
 * Connect once, then call methods; each call sends one msgpack-rpc request
 * over the daemon's Unix socket and blocks until its reply arrives.  A
 * connection is not thread-safe: use one per thread (they are cheap).
 *
 *   gkc_conn *c;
 *   if (gkc_connect(&c, NULL) != 0) { ... }       // NULL: default socket
 *   float a[2*3], b[3*4], out[2*4];                // row-major
 *   int rc = gkc_sgemm(c, 2, 4, 3, 1.0f, a, 0, b, 0, 0.0f, out, NULL, NULL);
 *   if (rc != 0) fprintf(stderr, "%s\n", gkc_errmsg(c));
 *   gkc_close(c);
 *
 * Every function returns 0 on success or a negative gkc_error (the table in
 * gkc_errors.h).  After a failure, gkc_errmsg() holds the daemon's message
 * (which names the offending argument) or a client-side description.
 * Link with `pkg-config --libs gkc` or CMake's find_package(gkc).
 */
#ifndef GKC_H
#define GKC_H

#include <stddef.h>
#include <stdint.h>

#include "gkc_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's exported functions. */
#if defined(GKC_BUILDING_SHARED)
#define GKC_API __attribute__((visibility("default")))
#else
#define GKC_API
#endif

#define GKC_VERSION "0.1.0"
#define GKC_PROTOCOL 1

typedef struct gkc_conn gkc_conn;

/* --- connection ---------------------------------------------------------- */

/* Writes the socket path gkcd and its clients agree on into buf:
 * override if not NULL, else $GKC_SOCKET, else $XDG_RUNTIME_DIR/gkcd.sock,
 * else /run/gkcd/gkcd.sock.  Returns 0, or GKC_EINVALID_ARGUMENT when the
 * path does not fit (a Unix socket path holds at most 107 bytes). */
GKC_API int gkc_socket_path(char *buf, size_t buflen, const char *override);

/* Connects to gkcd at socket_path (NULL: resolved as above).  On success
 * *out is a new connection; on failure *out is a connection object too,
 * unless allocation failed, so gkc_errmsg(*out) can say why: gkc_close it. */
GKC_API int gkc_connect(gkc_conn **out, const char *socket_path);
GKC_API void gkc_close(gkc_conn *c); /* NULL is fine */

/* The message of the last failed call on c ("" after a success). */
GKC_API const char *gkc_errmsg(const gkc_conn *c);
/* "invalid_argument" etc. for a gkc_error value. */
GKC_API const char *gkc_errname(int err);
/* Default English text for a gkc_error value. */
GKC_API const char *gkc_strerror(int err);

/* --- results shared by the compute calls --------------------------------- */

/* What the daemon reports about a compute call; pass NULL if not needed. */
typedef struct {
  char algo[32];    /* the implementation that ran, e.g. "openblas" */
  double kernel_us; /* time spent in the kernel, microseconds */
  double server_us; /* from the request decoded to the reply ready, in gkcd */
  double h2d_us, d2h_us; /* copies to and from the GPU; NAN on the CPU backend */
} gkc_info;

/* --- methods -------------------------------------------------------------- */

typedef struct {
  char version[32]; /* gkcd version */
  int protocol;     /* protocol revision, GKC_PROTOCOL */
  char backend[16]; /* "cpu" or "cuda" */
} gkc_ping_info;

GKC_API int gkc_ping(gkc_conn *c, gkc_ping_info *out);

#define GKC_MAX_DEVICES 16
#define GKC_MAX_METHODS 16

typedef struct {
  char backend[16];
  double uptime_s;
  uint64_t in_flight;   /* requests accepted and not yet answered */
  uint64_t connections; /* open client connections */
  int n_devices;
  struct {
    char name[128];
    uint64_t memory_total, memory_free; /* bytes */
  } devices[GKC_MAX_DEVICES];
  int n_methods;
  struct {
    char name[16];
    uint64_t requests, errors;
  } methods[GKC_MAX_METHODS];
} gkc_status_info;

GKC_API int gkc_status(gkc_conn *c, gkc_status_info *out);

/* The raw status map rendered as JSON, with every field the daemon sent.
 * *json is malloc'd; free() it. */
GKC_API int gkc_status_json(gkc_conn *c, char **json);

/* C = alpha * op(A) * op(B) + beta * C, all row-major float32.
 * op(A) is m x k: A is stored m x k, or k x m when trans_a is nonzero (and
 * op(A) = A^T); likewise op(B) is k x n.  c holds m*n floats; it is read only
 * when beta != 0 and always overwritten with the result.  algo: NULL or
 * "auto" lets the daemon choose. */
GKC_API int gkc_sgemm(gkc_conn *c, int32_t m, int32_t n, int32_t k, float alpha,
              const float *a, int trans_a, const float *b, int trans_b,
              float beta, float *cmat, const char *algo, gkc_info *info);

/* The precision later gkc_sgemm calls on c ask for: "fp32" (the default,
 * exact float32) or "tf32" (the caller accepts inputs rounded to TF32, ~1e-3
 * relative error, for tensor-core speed on the GPU).  GKC_EINVALID_ARGUMENT
 * for anything else. */
GKC_API int gkc_set_precision(gkc_conn *c, const char *precision);

typedef enum { GKC_SUM = 0, GKC_MIN = 1, GKC_MAX = 2 } gkc_reduce_op;

/* *value = sum, min or max of x[0..n); n >= 1. */
GKC_API int gkc_reduce(gkc_conn *c, const float *x, size_t n, gkc_reduce_op op,
               double *value, const char *algo, gkc_info *info);

/* A matrix in compressed sparse row form (0-based, int32 indices). */
typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  const int32_t *row_ptr; /* rows + 1 entries, row_ptr[0] = 0, row_ptr[rows] = nnz */
  const int32_t *col_idx; /* nnz entries in [0, cols) */
  const float *values;    /* nnz entries */
} gkc_csr;

/* y = alpha * A * x + beta * y.  x holds A->cols floats, y A->rows floats;
 * y is read only when beta != 0. */
GKC_API int gkc_spmv(gkc_conn *c, const gkc_csr *A, float alpha, const float *x,
             float beta, float *y, const char *algo, gkc_info *info);

#ifdef __cplusplus
}
#endif

#endif /* GKC_H */
