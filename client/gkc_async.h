/* gkc_async.h: the asynchronous side of libgkc (part of libgkc; see gkc.h).
 *
 * A gkc_async context is one connection to gkcd on which any number of
 * requests may be in flight.  Each call returns at once; its callback runs
 * later, from the caller's event loop, when the reply arrives (gkcd answers
 * pipelined requests in any order; replies are matched by msgid).  The
 * context never blocks and owns no thread: the loop watches its descriptor
 * and calls in when it is ready.
 *
 *   gkc_async *ac;
 *   if (gkc_async_connect(&ac, NULL) != 0) { ...gkc_async_errmsg(ac)...; gkc_async_close(ac); }
 *   gkc_reduce_args r = GKC_REDUCE_ARGS_INIT;
 *   r.x = gkc_ref_mem(x, n * 4);                    // x stays valid until the callback
 *   gkc_async_reduce(ac, &r, on_sum, my_data);      // 0, or an error and no callback
 *   while (gkc_async_pending(ac) > 0)               // or any event loop: see below
 *     gkc_async_poll(ac, -1);
 *
 *   static void on_sum(gkc_async *ac, const gkc_result *res, void *my_data) {
 *     if (res->status == 0) use(res->value); else fprintf(stderr, "%s\n", res->errmsg);
 *   }
 *
 * Contract of every request call (gkc_async_ping ... gkc_async_batch):
 * it returns 0 and its callback will run exactly once, or it returns a
 * negative gkc_error, gkc_async_errmsg says why, and the callback never
 * runs.  GKC_EBUSY means the context's bounds (gkc_async_set_limits) are
 * reached: retry from a later callback.  The callback runs from
 * gkc_async_handle_read / handle_write / poll / close, never from inside the
 * request call itself.
 *
 * Memory: arrays a request reads in this process (GKC_REF_MEM, the CSR
 * arrays) are sent straight from the caller's memory, not copied, and so
 * must stay valid and unchanged until the callback; so must the gkc_out and
 * the memory it names.  (Arrays that go through the context's arena, see
 * gkc_async_set_shm, are copied by the call; which ones do is the arena's
 * choice, so the rule stands.)  Strings (algo, precision) and the args struct
 * itself are consumed by the call.  The rule for regions is gkc.h's: bytes
 * a request reads or writes stay untouched until its callback.
 *
 * Lifetimes: gkc_async_close fails every pending request with
 * GKC_ECANCELLED (each callback once), then frees the context.  A callback
 * may issue new requests, and may close its own context; the context is
 * then freed when the library returns to the loop's call (handle_read etc.
 * return GKC_ECANCELLED to say so, after which the context must not be
 * used).  When gkcd goes away or the connection breaks, the descriptor is
 * closed and every pending request fails once (GKC_EIO, or the code gkcd
 * gave), unless it is sent again (gkc_async_set_reconnect); the next
 * request call connects again.
 *
 * gkcd's notifications: before it closes a connection on its own, gkcd may
 * send one msgpack-rpc notification [2, "error", [{"code", "message"}]]
 * (proto/PROTOCOL.md): "too_many_connections" when it refuses a connection
 * for lack of slots, "timeout" before closing one that made no progress in
 * time.  The library, blocking and async alike, fails the calls waiting for
 * replies with that code (GKC_ETOO_MANY_CONNECTIONS, GKC_ETIMEOUT) and the
 * daemon's message (gkc_errmsg, or the callback's errmsg).  Notifications
 * it does not know are skipped.
 *
 * Threads: a context belongs to one thread, the one running its loop.
 * Every call on it and every callback happens there; different contexts may
 * live in different threads.
 */
#ifndef GKC_ASYNC_H
#define GKC_ASYNC_H

#include "gkc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gkc_async gkc_async;

/* --- what a callback receives -------------------------------------------- */

typedef struct {
  int status;            /* 0, or a negative gkc_error */
  const char *errmsg;    /* "" on success; else gkcd's message (it names the
                          * argument) or the library's.  Valid during the callback. */
  const char *method;    /* "sgemm", ... */
  uint32_t msgid;
  double latency_us;     /* from the request call to the reply's arrival */
  gkc_info info;         /* compute calls: algo and gkcd's timings (NAN where absent) */
  double value;          /* reduce, dot, nrm2 */
  int64_t n;             /* reduce, nrm2: the input's length */
  uint32_t id;           /* upload: the handle; csr_upload: the matrix (its spmv
                          * algo in info.algo); shm_register: the region id */
  gkc_region *region;    /* gkc_async_region_create: the new region, now the
                          * caller's (gkc_region_release(NULL, r) frees it here) */
  gkc_out *out;          /* sgemm, spmv, axpby, download: the caller's out, with
                          * handle and bytes set as gkc.h says */
  gkc_ping_info ping;    /* ping */
  gkc_solve_result solve; /* solve (x went to out, the history to args->history) */
  gkc_batch_result batch; /* batch: each step's value */
  const gkc_status_info *status_info; /* status: valid during the callback */
  const char *status_json;       /* status: the whole map as JSON, valid during the callback */
} gkc_result;

typedef void (*gkc_async_cb)(gkc_async *ac, const gkc_result *res, void *userdata);

/* --- arguments of the calls that gkc.h passes one by one ----------------- */

typedef struct {
  gkc_ref x;
  gkc_reduce_op op;
  const char *algo; /* NULL: "auto" */
} gkc_reduce_args;
#define GKC_REDUCE_ARGS_INIT {{0}, GKC_SUM, NULL}

typedef struct {
  gkc_ref x, y;
} gkc_dot_args;

typedef struct {
  gkc_ref x;
  const char *algo; /* NULL: "auto" */
} gkc_nrm2_args;

typedef struct {
  float alpha, beta;
  gkc_ref x, y;
} gkc_axpby_args;

typedef struct {
  int fd;       /* passed with the request; the caller keeps it open until the callback */
  size_t bytes;
  int pinned;   /* 1: gkcd answers once it has registered the region for DMA (CUDA
                 * backend), so the first request copies from it directly; 0: it does
                 * that in the background (PROTOCOL.md, shm_register) */
} gkc_shm_register_args;

typedef struct {
  uint32_t region;
} gkc_shm_release_args;

typedef struct {
  gkc_ref data;
  gkc_dtype dtype;
  int shared;
} gkc_upload_args;

typedef struct {
  uint32_t handle;
} gkc_download_args;

typedef struct {
  gkc_csr A; /* its arrays stay valid until the callback */
  int shared;
} gkc_csr_upload_args;

typedef struct {
  uint32_t id;
  int matrix; /* nonzero: id is a matrix, else a resident array */
} gkc_release_args;

typedef struct {
  const gkc_step *steps; /* consumed by the call (packed at once) */
  int nsteps;            /* 1 to GKC_BATCH_MAX_STEPS */
} gkc_batch_args;

typedef struct {
  const gkc_step *steps;          /* consumed by the call (packed at once) */
  const gkc_step_region *regions; /* nsteps entries, or NULL (gkc.h gkc_batch_regions) */
  int nsteps;
} gkc_batch_regions_args;

/* --- the request calls ---------------------------------------------------- */

/* One row per method; both the declarations below and the library's
 * definitions are generated from it, and each row's checking, packing and
 * reading is the code the blocking call of gkc.h runs.
 *   GKC_ASYNC_NONE(name)          int gkc_async_name(ac, cb, userdata)
 *   GKC_ASYNC_ARGS(name, type)    int gkc_async_name(ac, const type *args, cb, userdata)
 *   GKC_ASYNC_OUT(name, type)     int gkc_async_name(ac, const type *args, gkc_out *out, cb, userdata)
 * sgemm, spmv and solve take gkc.h's gkc_sgemm_args, gkc_spmv_args and
 * gkc_solve_args (solve's history buffer, like out, stays valid until the
 * callback). */
#define GKC_ASYNC_METHOD_MAP(NONE, ARGS, OUT)    \
  NONE(ping)                                     \
  NONE(status)                                   \
  OUT(sgemm, gkc_sgemm_args)                     \
  ARGS(reduce, gkc_reduce_args)                  \
  OUT(spmv, gkc_spmv_args)                       \
  ARGS(dot, gkc_dot_args)                        \
  ARGS(nrm2, gkc_nrm2_args)                      \
  OUT(axpby, gkc_axpby_args)                     \
  ARGS(shm_register, gkc_shm_register_args)      \
  ARGS(shm_release, gkc_shm_release_args)        \
  ARGS(upload, gkc_upload_args)                  \
  OUT(download, gkc_download_args)               \
  ARGS(csr_upload, gkc_csr_upload_args)          \
  ARGS(release, gkc_release_args)                \
  OUT(solve, gkc_solve_args)                     \
  ARGS(batch, gkc_batch_args)                    \
  ARGS(batch_regions, gkc_batch_regions_args)

#define GKC__ASYNC_DECL_NONE(name) \
  GKC_API int gkc_async_##name(gkc_async *ac, gkc_async_cb cb, void *userdata);
#define GKC__ASYNC_DECL_ARGS(name, type) \
  GKC_API int gkc_async_##name(gkc_async *ac, const type *args, gkc_async_cb cb, void *userdata);
#define GKC__ASYNC_DECL_OUT(name, type)                                                    \
  GKC_API int gkc_async_##name(gkc_async *ac, const type *args, gkc_out *out, gkc_async_cb cb, \
                               void *userdata);
GKC_ASYNC_METHOD_MAP(GKC__ASYNC_DECL_NONE, GKC__ASYNC_DECL_ARGS, GKC__ASYNC_DECL_OUT)
#undef GKC__ASYNC_DECL_NONE
#undef GKC__ASYNC_DECL_ARGS
#undef GKC__ASYNC_DECL_OUT

/* Creates a sealed memfd region of bytes bytes here (as gkc_region_create)
 * and registers it with shm_register; the callback's res->region is the
 * region, the caller's from then on (NULL on failure, when it is freed). */
GKC_API int gkc_async_region_create(gkc_async *ac, size_t bytes, gkc_async_cb cb, void *userdata);

/* --- the context ----------------------------------------------------------- */

/* Connects to gkcd at socket_path (NULL: as gkc_socket_path resolves it);
 * the descriptor is non-blocking.  On failure *out is a context too, unless
 * allocation failed, so gkc_async_errmsg can say why: gkc_async_close it.
 * When gkcd offers shared-memory rings (gkc.h, gkc_set_ring; PROTOCOL.md,
 * "Rings"), the context takes one here, in one more blocking round trip,
 * unless GKC_NO_RING=1 is in the environment; its frames then skip the
 * socket, which still carries gkcd's doorbells (watch it as always).  A
 * context that connects again (gkc_async_set_reconnect) stays on the
 * socket. */
GKC_API int gkc_async_connect(gkc_async **out, const char *socket_path);
/* Whether the context's frames go through a ring (1) or the socket (0). */
GKC_API int gkc_async_ring_active(const gkc_async *ac);
/* Cancels every pending request (GKC_ECANCELLED, each callback once), closes
 * the connection and frees the context; at once, or, when called from one
 * of its own callbacks, as the library returns to the loop.  NULL is fine. */
GKC_API void gkc_async_close(gkc_async *ac);
/* The message of the last request call that failed (not of callbacks). */
GKC_API const char *gkc_async_errmsg(const gkc_async *ac);
/* Requests whose callbacks have not run yet. */
GKC_API size_t gkc_async_pending(const gkc_async *ac);
/* As gkc_set_precision, for later sgemm calls on ac. */
GKC_API int gkc_async_set_precision(gkc_async *ac, const char *precision);
/* As gkc_set_device, for later sgemm, reduce and nrm2 calls on ac. */
GKC_API int gkc_async_set_device(gkc_async *ac, int device);
/* As gkc_set_shm and gkc_shm_state (gkc.h, "transparent shared memory"):
 * the context's arena, which its requests in flight share.  The context
 * never waits for it: while the arena is set up (gkcd's limits, then its
 * first region's shm_register: the replies to two requests of the
 * library's own, which gkc_async_pending does not count) or grown, or when
 * it is full, arrays go inline. */
GKC_API int gkc_async_set_shm(gkc_async *ac, size_t threshold, size_t max_bytes);
GKC_API int gkc_async_shm_state(const gkc_async *ac, gkc_shm_info *info);
/* As gkc_shm_reserve, but it only starts: the region serves once the
 * replies to the library's own requests (status, shm_register) have been
 * read.  Its pages are faulted in on this thread before it is registered. */
GKC_API int gkc_async_shm_reserve(gkc_async *ac, size_t bytes);

/* Back-pressure: a request call returns GKC_EBUSY instead of queueing when
 * max_requests requests are pending, or when its bytes would take the bytes
 * of pending requests (sent or not yet sent) over max_bytes; a single
 * request larger than max_bytes is let through when nothing is pending.
 * 0 leaves a bound as it is.  Defaults: 4096 requests, 256 MiB. */
GKC_API void gkc_async_set_limits(gkc_async *ac, size_t max_requests, uint64_t max_bytes);

/* As gkc_set_reconnect (gkc.h, "reconnecting"): a call on a context whose
 * connection gkcd closed connects again first.  A request pending when the
 * connection broke is never sent again silently: its callback runs once
 * with GKC_EIO, the message saying that this method was in flight and was
 * not sent again.  With GKC_RECONNECT_IDEMPOTENT, a request that gives the
 * same result run twice (gkc.h's list: ping, status, metrics, reduce, dot,
 * nrm2, download, and sgemm, spmv, axpby, solve returning their result
 * into memory; sent inline, not through the arena, without a descriptor)
 * is instead sent once more on a new connection, made before the library
 * returns to the loop (or by a request call from a callback, whichever is
 * first): the held requests go first, in the order they were first sent,
 * each at most once, and each callback still runs exactly once, with the
 * new gkcd's answer.  One naming an object that did not survive ends with
 * GKC_ESTALE_HANDLE, as a new call would; when no connection can be made,
 * each ends with GKC_EIO saying it could not be sent again.  Until their
 * callbacks, held requests count in gkc_async_pending.  Reconnecting waits
 * for the connect and for one ping of the new gkcd (at most 5 s), inside
 * the call.  The descriptor changes: gkc_async_fd says the new one, the
 * hooks' update says what to watch, and gkc_async_reconnects counts the
 * changes (the libuv adapter follows them by itself). */
GKC_API int gkc_async_set_reconnect(gkc_async *ac, int tries, int backoff_ms, int flags);
GKC_API unsigned gkc_async_reconnects(const gkc_async *ac);

/* --- driving it from an event loop ------------------------------------------ */

/* The connection's descriptor (-1 once it is closed): watch it for reading
 * always, and for writing while gkc_async_want_write is nonzero. */
GKC_API int gkc_async_fd(const gkc_async *ac);
GKC_API int gkc_async_want_write(const gkc_async *ac);
/* Call when the descriptor is readable (resp. writable).  They run the
 * callbacks of replies that arrived.  Return 0 (also when the connection
 * broke and was made again at once to send requests again: see
 * gkc_async_set_reconnect); a negative gkc_error when the connection broke
 * (its pending requests have failed, the descriptor is closed); or
 * GKC_ECANCELLED when a callback closed the context, which is then freed. */
GKC_API int gkc_async_handle_read(gkc_async *ac);
GKC_API int gkc_async_handle_write(gkc_async *ac);

/* For loops that register interest once and change it on demand: update
 * is called whenever the events the context wants change (want_read and
 * want_write both 0 just before its descriptor is closed: stop watching
 * it), cleanup once as the context is freed.  set_hooks calls update at
 * once with the current wants.  gkc_uv.h is such an adapter, for libuv. */
typedef struct {
  void (*update)(void *data, int want_read, int want_write);
  void (*cleanup)(void *data);
} gkc_async_hooks;
GKC_API void gkc_async_set_hooks(gkc_async *ac, const gkc_async_hooks *hooks, void *data);

/* A plain poll(2) loop, one step: waits up to timeout_ms (-1: no limit) for
 * the descriptor, then handles what it is ready for.  Returns the number of
 * requests still pending, or what handle_read/handle_write returned when
 * negative (GKC_ECANCELLED: the context is gone). */
GKC_API int gkc_async_poll(gkc_async *ac, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* GKC_ASYNC_H */
