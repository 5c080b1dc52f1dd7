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
 *
 * gkc_async.h is the same library without blocking: many requests in
 * flight on one connection, callbacks run from the caller's event loop.
 *
 * When gkcd closes a connection on its own it first sends a notification
 * [2, "error", [{"code", "message"}]] (too_many_connections when it has no
 * slot for a new connection, timeout when one made no progress): the call
 * waiting for a reply then fails with that code (GKC_ETOO_MANY_CONNECTIONS,
 * GKC_ETIMEOUT) and gkc_errmsg holds the daemon's message.  Notifications
 * the library does not know are skipped.
 *
 * Implemented in: gkc_client.c, gkc_methods.c, gkc_objects.c, gkc_reconnect.c, gkc_region.c, gkc_resident.c, gkc_ring.c, gkc_shm.c
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

/* --- reconnecting (PROTOCOL.md, "Instances and restarts") ------------------
 *
 * A call that finds gkcd gone (it closed the connection while the
 * connection was idle: a restart, an idle timeout) connects again before
 * it runs: up to `tries` attempts, waiting backoff_ms, then twice that, ...
 * (at most 5 s) between them.  So a stateless call is not disturbed by a
 * restart, and is sent at most once.  A request that was in flight when
 * gkcd went away is never sent again: its call fails with GKC_EIO ("...
 * was in flight ... not sent again"), unless flags has
 * GKC_RECONNECT_IDEMPOTENT and the call is one that gives the same result
 * when run twice (ping, status, metrics, reduce, dot, nrm2, download, and
 * sgemm, spmv, axpby, solve returning their result as bytes), sent inline
 * without a descriptor: then it is sent once more on the new connection.
 *
 * Objects live on a connection (regions, private arrays and matrices) or
 * on a gkcd instance (shared ones).  After a reconnect, naming one that
 * did not survive fails with GKC_ESTALE_HANDLE before anything is sent,
 * naming the object and both instances: it never reaches an object that
 * now has its number.  Shared objects that gkcd restored from systemd's fd
 * store keep working (same ids, same instance).
 *
 * Default: 6 tries from 100 ms (about 6 s in all), or $GKC_RECONNECT:
 * "off" (or "0"), "TRIES", "TRIES,BACKOFF_MS" or "TRIES,BACKOFF_MS,idempotent".
 * tries 0 turns reconnecting off: a dead connection then fails every call,
 * as before.  Returns 0, or GKC_EINVALID_ARGUMENT for negative values. */
#define GKC_RECONNECT_IDEMPOTENT 1
GKC_API int gkc_set_reconnect(gkc_conn *c, int tries, int backoff_ms, int flags);
/* How many times c has connected again since gkc_connect. */
GKC_API unsigned gkc_reconnects(const gkc_conn *c);
/* --- the shared-memory ring (PROTOCOL.md, "Rings") ---------------------------
 *
 * A blocking connection moves its requests and replies through a ring in
 * shared memory once gkcd takes one (set up at the connection's first
 * call, and again after a reconnect): same frames, same checks, without a
 * socket round trip per call; the socket still carries descriptors and
 * tells each side the other went away.  On by default while the
 * connection's arena is on (gkc_shm_state): without it every array goes in
 * the frames, and big frames are faster on the socket, where gkcd's reader
 * threads take them (GKC_NO_SHM=1 thus keeps the socket too).
 * GKC_NO_RING=1 in the environment, or gkc_set_ring(c, 0) before the first
 * call, keeps the socket; gkc_set_ring(c, 1) asks for the ring even with
 * the arena off.  A gkcd without rings, or one that refuses, leaves the
 * connection on the socket silently.  GKC_RING_SPIN_US (default 200 on a host of 8 or more CPUs, else 50) is how
 * long a call polls the ring for its reply before it sleeps.  Async
 * contexts take a ring at connect, under the same switches
 * (gkc_async_connect, gkc_async_ring_active). */
/* 0; GKC_EINVALID_ARGUMENT turning it off once the ring is in use. */
GKC_API int gkc_set_ring(gkc_conn *c, int on);
/* 1 when c's frames go through a ring now. */
GKC_API int gkc_ring_active(const gkc_conn *c);
/* The gkcd instance c last heard of (16 hex digits, "" when it has not
 * asked yet or gkcd is older), and the instance whose shared objects that
 * gkcd holds; either pointer may be NULL.  Buffers of at least 17 bytes. */
GKC_API void gkc_instance(const gkc_conn *c, char *instance, char *shared_instance);

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
  double queue_us;  /* part of server_us: waiting for memory budget and a worker */
  double worker_us; /* part of server_us: the worker's own time (copies, kernel, sync) */
  double h2d_us, d2h_us; /* copies to and from the GPU; NAN on the CPU backend and where nothing was copied */
  /* Several devices (PROTOCOL.md, "Devices"): the device that ran it, or -1
   * when it was split across several (ndevices of them, else 0). */
  int device, ndevices;
  /* Resident operands moved from other devices before it ran: bytes and
   * time; 0 and NAN when nothing moved. */
  double peer_bytes, peer_us;
} gkc_info;

/* --- methods -------------------------------------------------------------- */

typedef struct {
  char version[32]; /* gkcd version */
  int protocol;     /* protocol revision, GKC_PROTOCOL */
  char backend[16]; /* "cpu" or "cuda" */
} gkc_ping_info;

GKC_API int gkc_ping(gkc_conn *c, gkc_ping_info *out);

#define GKC_MAX_DEVICES 16
#define GKC_MAX_METHODS 32 /* room for the methods to come: the struct is ABI */

typedef struct {
  char backend[16];
  double uptime_s;
  uint64_t in_flight;   /* requests accepted and not yet answered */
  uint64_t connections; /* open client connections */
  int n_devices;
  struct {
    char name[128];
    uint64_t memory_total, memory_free; /* bytes */
    char kind[8];         /* "cpu" or "cuda" */
    uint64_t memory_used; /* bytes */
    uint64_t queued, running, served; /* jobs handed to it, at work, finished */
    int lost;             /* it failed and serves no more */
    char lost_reason[128];
  } devices[GKC_MAX_DEVICES];
  int n_methods;
  struct {
    char name[16];
    uint64_t requests, errors;
  } methods[GKC_MAX_METHODS];
} gkc_status_info;

GKC_API int gkc_status(gkc_conn *c, gkc_status_info *out);

/* One entry of the status reply's "limits" map, e.g. "max_request_bytes" or
 * "memory_budget" (PROTOCOL.md lists them), so that a client can size its
 * requests before it builds them.  GKC_EPROTOCOL when gkcd reports no such
 * limit (an older gkcd). */
GKC_API int gkc_status_limit(gkc_conn *c, const char *name, uint64_t *value);

/* The raw status map rendered as JSON, with every field the daemon sent.
 * *json is malloc'd; free() it. */
GKC_API int gkc_status_json(gkc_conn *c, char **json);

/* gkcd's counters in the Prometheus text exposition format (version 0.0.4),
 * the same text gkcd --metrics-listen serves at GET /metrics.  *text is
 * malloc'd and NUL-terminated; free() it.  GKC_EUNKNOWN_METHOD from a gkcd
 * older than the metrics method. */
GKC_API int gkc_metrics(gkc_conn *c, char **text);

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

#define GKC_DEVICE_AUTO (-1)

/* When gkcd serves several devices (PROTOCOL.md, "Devices"): sgemm, reduce
 * and nrm2 on this connection run on `device`, never split across several;
 * GKC_DEVICE_AUTO (the default) lets gkcd place them.  Only a negative
 * value other than GKC_DEVICE_AUTO is refused here; gkcd answers a device
 * it lacks with GKC_EINVALID_ARGUMENT, a lost one with GKC_EDEVICE_LOST. */
GKC_API int gkc_set_device(gkc_conn *c, int device);

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

/* --- Regions and resident data -------------------------------------------- */

/* Arrays need not travel inside every request (proto/PROTOCOL.md, "Data
 * that stays").  Two ways to keep them out of the socket:
 *
 *  - a shared-memory region: pages this process and gkcd both map.  The
 *    caller fills them, then names (region, offset, bytes) in a call; gkcd
 *    reads (and writes results) straight from and into them.  On the CUDA
 *    backend they are registered with the driver, so GPU copies run at
 *    pinned-memory speed.  The caller must not change bytes a request
 *    reads, nor read bytes it writes, until its call returns (the calls are
 *    blocking, so: while it runs).
 *  - a resident array ("handle") or matrix: data uploaded once that stays
 *    in gkcd's backend memory (GPU memory on CUDA) until released.
 *
 * Regions, handles and matrices belong to the connection that made them
 * and are freed when it closes; a handle or matrix made with shared != 0
 * can be used and released from any permitted connection instead, until
 * one releases it.  Handles and matrices share one id space.
 *
 *   gkc_region *r;
 *   gkc_region_create(c, 3 * n * n * 4, &r);           // A, B and C
 *   float *f = gkc_region_floats(r);                   // fill A and B ...
 *   gkc_sgemm_args s = GKC_SGEMM_ARGS_INIT;
 *   s.m = s.n = s.k = n;
 *   s.a = gkc_ref_region(r, 0, n * n * 4);
 *   s.b = gkc_ref_region(r, n * n * 4, n * n * 4);
 *   gkc_out out = gkc_out_region(r, 2 * n * n * 4);    // C lands in f[2*n*n..]
 *   gkc_sgemm_ref(c, &s, &out, NULL);
 *   gkc_region_release(c, r);
 */

/* --- shared-memory regions --- */

typedef struct gkc_region gkc_region;

/* Creates a region of bytes bytes (1 to gkcd's --max-request-bytes): a
 * sealed memfd (memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING), sized, with
 * F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), mapped read-write here and registered with
 * gkcd by shm_register, the descriptor passed with the request.  Its bytes
 * start zeroed.  *out is NULL on failure. */
GKC_API int gkc_region_create(gkc_conn *c, size_t bytes, gkc_region **out);
/* The region's mapping, its size, and gkcd's id for it. */
GKC_API void *gkc_region_data(const gkc_region *r);
GKC_API float *gkc_region_floats(const gkc_region *r); /* the same, as floats */
GKC_API size_t gkc_region_bytes(const gkc_region *r);
GKC_API uint32_t gkc_region_id(const gkc_region *r);
/* Releases the region on gkcd (shm_release on c), then unmaps and closes
 * it here.  The local side is always freed, also when the release fails or
 * c is NULL (e.g. after the connection was closed, which released it on
 * gkcd already); the return value is shm_release's.  r may be NULL. */
GKC_API int gkc_region_release(gkc_conn *c, gkc_region *r);

/* The protocol's low-level form, which gkc_region_create uses: registers the
 * caller's descriptor fd (passed as SCM_RIGHTS; -1 sends none) as a region
 * of bytes bytes, and sets *region to its id.  The caller keeps fd and its
 * mapping.  gkcd accepts only a regular file sealed against shrinking and
 * growing whose size is bytes. */
GKC_API int gkc_shm_register(gkc_conn *c, int fd, size_t bytes, uint32_t *region);
/* Releases region id on gkcd (only; nothing local). */
GKC_API int gkc_shm_release(gkc_conn *c, uint32_t region);

/* --- transparent shared memory: big arrays by value, without the socket --- */

/* Calls that take arrays as plain pointers (gkc_sgemm, gkc_reduce,
 * gkc_spmv, gkc_csr_upload, gkc_download, and GKC_REF_MEM references and
 * GKC_OUT_MEM targets in any call, blocking or async) need no regions of
 * the caller's: each connection keeps an arena of its own, sealed memfd
 * regions registered with gkcd, and an array of at least `threshold` bytes
 * travels through it.  The library copies an input into a slice of the
 * arena and sends {"region", "offset", "bytes"} instead of the bytes; an
 * array result of at least `threshold` bytes is asked for with "out" at a
 * slice and copied to the caller's memory when the reply arrives.  The
 * calls, their results and their errors stay what they were; only the
 * copies through the socket go (on the CUDA backend the regions are also
 * pinned, so GPU copies run from them at pinned-memory speed).
 *
 *  - The arena grows on demand, a region at a time (a power of two of at
 *    least 4 MiB that holds what the call needs; at most 8 regions), up to
 *    max_bytes in all, no region over gkcd's --max-request-bytes (read
 *    once from its status).  Regions are reused call after call; idle
 *    ones are swapped for a bigger one when a call needs more.  Their
 *    pages, once touched, stay in memory until then: up to max_bytes per
 *    connection (on the CUDA backend gkcd pins them all).
 *  - A region's first call allocates the pages it takes in bulk, on the
 *    copy threads (MADV_POPULATE_WRITE; a write to each page on a kernel
 *    before 5.14), before gkcd maps them: a fresh 4 KiB page costs several
 *    times its copy, and one fault at a time inside the copy up to 1.7x more
 *    again (bench/RESULTS.md, "first call").  Only the bytes used.
 *  - gkc_close (and a region swapped out) hands the regions nothing can
 *    still write to over to the process, not the kernel: the next
 *    connection whose arena grows takes the smallest that fits, pages
 *    and all, and its first call pays what a repeated one does (gkcd
 *    frees its side when the connection closes; the new connection
 *    registers it again).  Up to GKC_SHM_KEEP bytes, the oldest freed
 *    first; a region some cancelled or timed-out request may still be
 *    written into is freed instead, and a forked child frees, never
 *    takes, its parent's.
 *  - A slice belongs to its request until the reply (async: many requests
 *    in flight share the arena, first fit).  When there is no room, or the
 *    arena is still being set up or grown, the call sends its arrays inline
 *    as before instead of waiting (an async context's first big call
 *    always does: it starts the set-up); so does a call whose arrays
 *    together exceed what one region may hold, which gkcd then judges
 *    against --max-request-bytes as it always did.
 *  - A result whose size the library cannot tell from the arguments
 *    (gkc_download; spmv on a resident matrix without y; axpby or solve on
 *    handles) takes a slice at the end of a region, so that a result larger
 *    than the caller's memory is refused by gkcd, never written past it.
 *  - Where descriptors cannot be passed (gkcd refuses shm_register, e.g.
 *    because the connection already holds 64 regions, or a proxy between
 *    here and gkcd drops SCM_RIGHTS; memfd_create or mmap fails here) the
 *    connection turns it off and says why in gkc_shm_state; every array
 *    then goes inline, until gkc_set_shm turns it on again.  Running out of
 *    memory for one region only sends that call inline.  No failure of the
 *    arena fails the caller's call.
 *
 * Environment, read by gkc_connect and gkc_async_connect (the names and
 * meanings the Python package reads too):
 *   GKC_NO_SHM=1              off (any value but "" and "0")
 *   GKC_SHM_THRESHOLD=SIZE    the threshold (bytes, or with a K, M or G suffix)
 *   GKC_SHM_MAX_BYTES=SIZE    the arena's bound
 *   GKC_COPY_THREADS=N        threads that copy an array of 16 MiB or more into
 *                             (and a result out of) the arena, in pieces at
 *                             once (default: up to 16, the CPUs there are; read
 *                             at each copy)
 *   GKC_SHM_KEEP=SIZE         the most bytes of closed connections' regions
 *                             the process keeps for its next connections
 *                             (default GKC_SHM_DEFAULT_MAX; 0: none; a value
 *                             that is not a size keeps none)
 *   GKC_SHM_TRACE=1           one line on stderr per growth of the arena and
 *                             per call that met fresh pages: where a first
 *                             call's time goes
 * A GKC_SHM_THRESHOLD or GKC_SHM_MAX_BYTES that is not a size turns the
 * arena off, with the reason in gkc_shm_state (the connection itself
 * succeeds).
 *
 * The default threshold was measured on a 2-core CPU machine through the
 * CPU backend (bench/bench_shm.c; bench/RESULTS.md): from 128 KiB up the
 * arena was at least 1.1x as fast as the socket for reduce, axpby and
 * download (5-7x at 64 MiB); below, within a few percent either way. */
#define GKC_SHM_DEFAULT_THRESHOLD ((size_t)128 << 10)
#define GKC_SHM_DEFAULT_MAX ((size_t)1 << 30)
/* gkc_set_shm's threshold that turns the arena off. */
#define GKC_SHM_OFF SIZE_MAX

/* Sets the threshold (0: $GKC_SHM_THRESHOLD, else GKC_SHM_DEFAULT_THRESHOLD;
 * GKC_SHM_OFF: off) and the arena's bound (0: $GKC_SHM_MAX_BYTES, else
 * GKC_SHM_DEFAULT_MAX) for later calls on c.  Any threshold but GKC_SHM_OFF
 * turns it on, whatever GKC_NO_SHM says (the program's choice wins, as the
 * Python package's keywords do), and clears an earlier failure (say, after
 * releasing regions of one's own).
 * Idle regions of the arena are released (shm_release) when it is turned
 * off or its bound falls under what it holds; regions that requests in
 * flight use then stay until the arena next grows, or gkc_close.  Returns 0, or
 * GKC_EOUT_OF_MEMORY when c could not make its arena at connect (it then
 * sends everything inline). */
GKC_API int gkc_set_shm(gkc_conn *c, size_t threshold, size_t max_bytes);

/* Makes the arena hold a free span of at least bytes now, so that the first
 * call of that size pays nothing to set it up: a region is made if none has
 * room, its pages are faulted in (by GKC_COPY_THREADS threads at once), and
 * it is registered with gkcd, which pins it on the CUDA backend in the
 * background.  Worth it where the first call's time matters: fresh pages
 * cost the kernel ~0.2-0.7 ms per MiB to hand out (bench/RESULTS.md, "first
 * call"), paid once per region.  0 when there is room (already, or now);
 * GKC_EINVALID_ARGUMENT when the arena is off or bytes is more than one
 * region may hold (the smaller of max_bytes and gkcd's
 * --max-request-bytes); GKC_EOUT_OF_MEMORY when the bound leaves no room
 * (regions in use stay); what shm_register answered otherwise.  On an async
 * connection it only starts: the region is there once its registration's
 * reply has been read. */
GKC_API int gkc_shm_reserve(gkc_conn *c, size_t bytes);

typedef struct {
  int on;                /* arrays of threshold bytes or more go through the arena */
  size_t threshold, max_bytes;
  size_t arena_bytes;    /* the bytes of the regions registered with gkcd now */
  int regions;           /* how many regions that is */
  uint64_t staged;       /* arrays and results that went through the arena */
  uint64_t fallbacks;    /* calls with arrays at or over the threshold that went
                          * inline for want of room (arena full, being set up or
                          * grown, or too small for the call) */
  char why[256];         /* off: why ("GKC_NO_SHM is set", "turned off by
                          * gkc_set_shm", "gkcd refused shm_register: ..."); else "" */
} gkc_shm_info;

/* 1 when the transparent path is on, 0 when off; info (may be NULL) gets
 * the details.  c may be NULL (0). */
GKC_API int gkc_shm_state(const gkc_conn *c, gkc_shm_info *info);

/* --- array references: where a call's input array is --- */

/* An array's element type (PROTOCOL.md, "Element types"), numbered as the
 * protocol's table is.  Float arrays are float32 unless said otherwise:
 * float64 ones are taken by upload/download, csr upload (gkc_csr_f64),
 * spmv, dot, axpby, nrm2 and solve (and batch's dot, axpby and spmv steps,
 * on float64 handles), on either of gkcd's backends, except solve on a
 * float64 matrix, which the CUDA backend refuses for now (its solve takes
 * float64 vectors with a float32 matrix); sgemm and reduce always refuse
 * them (GKC_EINVALID_ARGUMENT naming the argument). */
typedef enum { GKC_F32 = 0, GKC_I32 = 1, GKC_F64 = 2 } gkc_dtype;

typedef enum {
  GKC_REF_NONE = 0, /* no array (an optional input left out) */
  GKC_REF_MEM,      /* bytes at data, in this process: sent inside the request,
                     * or through the connection's arena (transparent shared
                     * memory, above) */
  GKC_REF_REGION,   /* bytes at offset of region id `region` */
  GKC_REF_HANDLE    /* resident array `handle` */
} gkc_ref_kind;

typedef struct {
  int kind;         /* gkc_ref_kind */
  const void *data; /* GKC_REF_MEM */
  uint32_t region;  /* GKC_REF_REGION: the region's id */
  uint64_t offset;  /* GKC_REF_REGION: byte offset, a multiple of 4 */
  uint32_t handle;  /* GKC_REF_HANDLE */
  size_t bytes;     /* MEM, REGION: the array's bytes, exactly what the argument
                     * needs.  HANDLE: not sent (gkcd knows); 0 or the size
                     * the caller expects, for its own bookkeeping. */
} gkc_ref;

GKC_API gkc_ref gkc_ref_mem(const void *data, size_t bytes);
GKC_API gkc_ref gkc_ref_region(const gkc_region *r, uint64_t offset, size_t bytes);
GKC_API gkc_ref gkc_ref_handle(uint32_t handle, size_t bytes);

/* A reference's dtype rides in bits 8..15 of its kind (0: float32, as
 * every reference made before float64 existed), so that gkc_ref and the
 * argument structs holding it keep their layout.  gkc_ref_as marks r as
 * holding dtype; a call given any float64 reference sends its float arrays
 * as float64 ("dtype": "f64"), and its array result comes back float64:
 *
 *   double x[n], y[n], v;
 *   gkc_dot(c, gkc_ref_f64(x, n), gkc_ref_f64(y, n), &v, NULL);
 *   gkc_out o = gkc_out_mem(z, n * 8);                 // z: double[n]
 *   gkc_axpby_f64(c, 0.1, gkc_ref_f64(x, n), 1.0, gkc_ref_f64(y, n), &o, NULL);
 *
 * A float64 handle needs no mark (gkcd knows its dtype); marking it is
 * harmless.  Mixed dtypes in one call are refused by gkcd, naming both. */
#define GKC_REF_KIND(kind) ((kind) & 0xff)
#define GKC_REF_DTYPE(kind) (((kind) >> 8) & 0xff)
GKC_API gkc_ref gkc_ref_as(gkc_ref r, gkc_dtype dtype);
/* gkc_ref_as(gkc_ref_mem(data, n * 8), GKC_F64): n doubles in this process. */
GKC_API gkc_ref gkc_ref_f64(const double *data, size_t n);

/* --- output targets: where a call's array result goes --- */

typedef enum {
  GKC_OUT_MEM = 0,    /* returned inside the reply (or written into the arena),
                       * copied to data */
  GKC_OUT_REGION,     /* written by gkcd into region `region` at offset */
  GKC_OUT_NEW_HANDLE, /* kept on gkcd as a new resident array */
  GKC_OUT_HANDLE      /* overwrites resident array `handle` (same dtype and length) */
} gkc_out_kind;

typedef struct {
  int kind;        /* gkc_out_kind */
  void *data;      /* GKC_OUT_MEM: where the result is copied */
  uint32_t region; /* GKC_OUT_REGION: the region's id */
  uint64_t offset; /* GKC_OUT_REGION: byte offset, a multiple of 4 */
  uint32_t handle; /* GKC_OUT_HANDLE: the handle to overwrite; set by the call
                    * for GKC_OUT_NEW_HANDLE and GKC_OUT_HANDLE */
  size_t bytes;    /* GKC_OUT_MEM: in: the size of data, which the result must
                    * match exactly.  Every kind: out: the result's bytes. */
} gkc_out;

GKC_API gkc_out gkc_out_mem(void *data, size_t bytes);
GKC_API gkc_out gkc_out_region(const gkc_region *r, uint64_t offset);
GKC_API gkc_out gkc_out_new_handle(void);
GKC_API gkc_out gkc_out_handle(uint32_t handle);

/* --- compute calls on references --- */

/* gkc_sgemm with references.  c is sent when its kind is not
 * GKC_REF_NONE; gkcd requires it when beta != 0.  The result goes to *out
 * (not NULL).  precision: NULL for the connection's (gkc_set_precision). */
typedef struct {
  int32_t m, n, k;
  float alpha, beta;
  gkc_ref a, b, c;
  int trans_a, trans_b;
  const char *algo;      /* NULL: "auto" */
  const char *precision; /* NULL, "fp32" or "tf32" */
} gkc_sgemm_args;
#define GKC_SGEMM_ARGS_INIT {0, 0, 0, 1.0f, 0.0f, {0}, {0}, {0}, 0, 0, NULL, NULL}

GKC_API int gkc_sgemm_ref(gkc_conn *c, const gkc_sgemm_args *args, gkc_out *out, gkc_info *info);

/* gkc_reduce of x (n float32 in any form); *n_out (may be NULL) gets n. */
GKC_API int gkc_reduce_ref(gkc_conn *c, gkc_ref x, gkc_reduce_op op, double *value,
                           int64_t *n_out, const char *algo, gkc_info *info);

/* y' = alpha * A * x + beta * y, A either a resident matrix (use_matrix:
 * from gkc_csr_upload) or a CSR given by references.  y is sent when its
 * kind is not GKC_REF_NONE; gkcd requires it when beta != 0.  The result
 * goes to *out (not NULL); it may not be the same handle as x or y. */
typedef struct {
  int use_matrix;   /* nonzero: A is resident matrix `matrix` */
  uint32_t matrix;
  int32_t rows, cols; /* !use_matrix: A's shape and arrays */
  gkc_ref row_ptr, col_idx, values;
  gkc_ref x, y;
  float alpha, beta;
  const char *algo; /* NULL: "auto" */
} gkc_spmv_args;
#define GKC_SPMV_ARGS_INIT {0, 0, 0, 0, {0}, {0}, {0}, {0}, {0}, 1.0f, 0.0f, NULL}

GKC_API int gkc_spmv_ref(gkc_conn *c, const gkc_spmv_args *args, gkc_out *out, gkc_info *info);

/* *value = sum of x[i] * y[i], x and y float32 arrays of equal length. */
GKC_API int gkc_dot(gkc_conn *c, gkc_ref x, gkc_ref y, double *value, gkc_info *info);

/* *value = ||x||_2 = sqrt(sum of x[i]^2), x a float32 array (n >= 1), the
 * squares summed in double.  Runs on gkc_set_device's device when one is set. */
GKC_API int gkc_nrm2(gkc_conn *c, gkc_ref x, double *value, gkc_info *info);

/* y' = alpha * x + beta * y into *out (not NULL).  out may be the same
 * resident array as y: an in-place update, gkc_out_handle(y.handle). */
GKC_API int gkc_axpby(gkc_conn *c, float alpha, gkc_ref x, float beta, gkc_ref y, gkc_out *out,
                      gkc_info *info);

/* --- float64 calls whose scalars or matrix are float64 too ---
 * (gkc_dot, gkc_nrm2, gkc_solve and gkc_upload/gkc_download take float64
 * through gkc_ref_as / GKC_F64 alone.) */

/* gkc_axpby on float64 x, y and result, alpha and beta kept in double.  x
 * and y are float64 whatever their mark (memory, region or handle). */
GKC_API int gkc_axpby_f64(gkc_conn *c, double alpha, gkc_ref x, double beta, gkc_ref y,
                          gkc_out *out, gkc_info *info);
/* gkc_spmv_ref with float64 x, y and result, alpha and beta in double
 * (args->alpha, args->beta are not read).  A resident matrix keeps its own
 * values' dtype (float32 or float64); a CSR given by references has
 * float64 values too. */
GKC_API int gkc_spmv_f64(gkc_conn *c, const gkc_spmv_args *args, double alpha, double beta,
                         gkc_out *out, gkc_info *info);

/* A CSR matrix with float64 values. */
typedef struct {
  int32_t rows, cols;
  int64_t nnz;
  const int32_t *row_ptr; /* rows + 1 entries */
  const int32_t *col_idx; /* nnz entries in [0, cols) */
  const double *values;   /* nnz entries */
} gkc_csr_f64;

/* gkc_csr_upload of a float64 matrix: kept resident with float64 values
 * (spmv and solve on it compute in float64, with float32 or float64
 * vectors). */
GKC_API int gkc_csr_upload_f64(gkc_conn *c, const gkc_csr_f64 *A, int shared, uint32_t *matrix,
                               char algo[32]);

/* --- resident arrays and matrices --- */

/* Copies data (in any form, even another handle) into a new resident array
 * of dtype (GKC_F32, GKC_F64 or GKC_I32; data's bytes a whole number of its
 * elements); *handle gets its id.  gkc_download gives the bytes back as
 * they were. */
GKC_API int gkc_upload(gkc_conn *c, gkc_ref data, gkc_dtype dtype, int shared, uint32_t *handle);
/* Where a new resident object lives when gkcd serves several devices: on
 * `device` (GKC_DEVICE_AUTO: where gkcd places it, beside the connection's
 * other objects: PROTOCOL.md, "Co-location"), or,
 * with replicate, a read-only copy on every device (it can then never be
 * an `out`).  shared as for gkc_upload. */
typedef struct {
  int device;
  int replicate;
  int shared;
} gkc_placement;
/* gkc_upload with a placement; *device (may be NULL) gets the device it
 * went to (for a replicate: the one holding its home copy). */
GKC_API int gkc_upload_placed(gkc_conn *c, gkc_ref data, gkc_dtype dtype, const gkc_placement *where,
                              uint32_t *handle, int *device);
/* gkc_csr_upload with a placement, likewise. */
GKC_API int gkc_csr_upload_placed(gkc_conn *c, const gkc_csr *A, const gkc_placement *where,
                                  uint32_t *matrix, int *device);
/* gkc_csr_upload partitioned by rows over the devices of mask devices (bit
 * d: device d; GKC_DEVICES_ALL: every device that serves), balanced by
 * nonzeros: spmv and solve (cg, pcg) on it run on all of them, each device
 * computing its rows (PROTOCOL.md, "Partitioned matrices").  shared as for
 * gkc_csr_upload. */
#define GKC_DEVICES_ALL (~(uint64_t)0)
GKC_API int gkc_csr_upload_partitioned(gkc_conn *c, const gkc_csr *A, uint64_t devices, int shared,
                                       uint32_t *matrix);
/* Copies resident array handle, which must hold exactly bytes bytes, to dst. */
GKC_API int gkc_download(gkc_conn *c, uint32_t handle, void *dst, size_t bytes);
/* The same into region r at offset; *bytes (may be NULL) gets the size. */
GKC_API int gkc_download_region(gkc_conn *c, uint32_t handle, const gkc_region *r,
                                uint64_t offset, size_t *bytes);
/* Validates A once and keeps it resident; *matrix gets its id, algo (32
 * bytes, may be NULL) the spmv algo "auto" will use for it. */
GKC_API int gkc_csr_upload(gkc_conn *c, const gkc_csr *A, int shared, uint32_t *matrix,
                           char algo[32]);
/* Frees a resident array or matrix.  gkcd's release names the kind
 * ("handle" or "matrix"), so an id that is no array is tried again as a
 * matrix; gkc_release_matrix asks for a matrix at once. */
GKC_API int gkc_release(gkc_conn *c, uint32_t id);
GKC_API int gkc_release_matrix(gkc_conn *c, uint32_t matrix);

/* --- solving: a whole Krylov solve, or a batch of steps, in one request --- */

/* In gkc_solve.h, included below: gkc_solve, gkc_batch, gkc_batch_regions
 * and their arguments and results. */

#ifdef __cplusplus
}
#endif

#include "gkc_solve.h"

#endif /* GKC_H */
