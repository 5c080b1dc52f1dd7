/* gkc_internal.h: what the library's files share; not installed.
 *
 * One core carries every request, blocking or async (gkc_wire.c): a request
 * (gkc__req) is checked and described by its method's prep function, packed
 * into the connection's output queue under a fresh msgid, kept in a table
 * of pending requests until the reply with that msgid arrives, then read by
 * its method's take function into a gkc_result and handed to its done hook.
 * The blocking calls of gkc.h wait for that on a blocking socket
 * (gkc__run); a gkc_async context drives the same core from an event loop.
 *
 * Between the prep and the submit, big arrays given in this process's
 * memory may be moved into the connection's shared-memory arena
 * (gkc_shm.c): the request then carries region references instead, holds
 * its slices while in flight, and gives them back through its end hook.
 *
 * After gkcd went away, a call connects again (gkc_reconnect.c); the
 * objects the connection made are remembered there with the connection
 * and instance that made them, and naming one that did not survive is
 * refused while the request is packed (gkc__pack_id).
 *
 * A blocking connection moves its frames through a shared-memory ring
 * (gkc_ring.c, gkc_ring_io.c) once gkcd has taken one: the core then writes
 * into the ring's sq and reads from its cq where it would send and recv.
 *
 * Implemented in: gkc_client.c, gkc_json.c, gkc_objects.c, gkc_reconnect.c, gkc_region.c, gkc_resident.c, gkc_ring.c, gkc_ring_io.c, gkc_wire.c
 */
#ifndef GKC_INTERNAL_H
#define GKC_INTERNAL_H

#include <msgpack.h>

#include "gkc.h"
#include "gkc_async.h"
#include "proto_ring.h"

typedef struct gkc__req gkc__req;
typedef struct gkc__shm gkc__shm; /* a connection's arena (gkc_shm.c) */

/* Packs the params map of a request (exactly one map). */
typedef void (*gkc__pack_fn)(msgpack_packer *pk, const gkc__req *r);
/* Reads a successful result into res (and r->out); 0 or an error set with gkc__fail. */
typedef int (*gkc__take_fn)(gkc_conn *c, const msgpack_object *result, gkc__req *r,
                            gkc_result *res);
/* The request is over: res->status says how; runs exactly once. */
typedef void (*gkc__done_fn)(gkc_conn *c, gkc__req *r, gkc_result *res);
/* Gives back what the request held while in flight (arena slices): runs
 * once, just before done, or when gkc__submit refuses the request.  It may
 * rewrite c->errmsg when status is an error. */
typedef void (*gkc__end_fn)(gkc_conn *c, gkc__req *r, int status);

/* The most arrays of one request that can go through the arena: spmv's
 * five inputs and its result. */
#define GKC__MAX_SLICES 6
/* How an array result goes through the arena (gkc__req.out_staged). */
enum {
  GKC__OUT_DIRECT = 0, /* not at all: as the caller's gkc_out says */
  GKC__OUT_EXACT,      /* into a slice of exactly the result's size */
  GKC__OUT_TAIL        /* result size unknown here: a slice that ends where its
                        * region ends, so that gkcd refuses a bigger result
                        * instead of writing past the slice */
};

/* In gkc_shm_register_args.pinned, set by the arena only: its region may
 * be registered again on a later connection (kept with the process,
 * gkc_shm_keep.c), so gkcd may keep its mapping (PROTOCOL.md "reuse"). */
#define GKC__REG_REUSE 0x10000

struct gkc__req {
  gkc__req *next;     /* in the pending table's chain, or a list being failed */
  uint32_t msgid;
  const char *method; /* a string literal */
  int fd;             /* sent with the request as SCM_RIGHTS, or -1 */
  gkc__pack_fn pack;
  gkc__take_fn take;
  gkc__done_fn done;
  gkc_out *out;       /* the caller's, for methods with an array result */
  const char *limit_name; /* gkc_status_limit: the entry of "limits" wanted */
  /* The dtype of its float arrays (gkc__ref_dtypes): GKC_F64 sends
   * "dtype": "f64" (and alpha64, beta64 as the scalars, where it has them);
   * GKC_F32 sends nothing, as before float64. */
  int dtype;
  double alpha64, beta64;
  /* upload, csr_upload: `device` (pinned) or `replicate` (gkc_*_placed). */
  int pinned, device, replicate;
  uint64_t partition; /* csr_upload: `devices` (gkc_csr_upload_partitioned), 0: none */
  union {             /* a copy of the caller's arguments, read by pack */
    gkc_sgemm_args sgemm;
    gkc_spmv_args spmv;
    gkc_reduce_args reduce;
    gkc_dot_args dot;
    gkc_nrm2_args nrm2;
    gkc_axpby_args axpby;
    gkc_shm_register_args shm_register;
    gkc_shm_release_args shm_release;
    gkc_upload_args upload;
    gkc_download_args download;
    gkc_csr_upload_args csr_upload;
    gkc_release_args release;
    gkc_solve_args solve;
    gkc_batch_regions_args batch; /* gkc_batch's too, with regions NULL */
  } a;
  uint64_t bytes;     /* the request's size, counted against the in-flight bound */
  uint64_t t0_ns;     /* when it was queued */
  gkc_result *res;    /* blocking: the caller's result; async: NULL (one on the stack) */
  int finished;       /* blocking: set by done */
  gkc_async_cb cb;    /* async */
  void *userdata;
  gkc_region *region; /* gkc_async_region_create: the region being registered */
  gkc_ref csr[3];     /* csr_upload: row_ptr, col_idx and values as packed */
  /* The arena (gkc_shm.c): slices held while in flight, and, when the array
   * result goes through one, the target packed instead of *out. */
  int nslices;
  struct {
    int slot;
    uint64_t off, len;
  } slices[GKC__MAX_SLICES];
  int out_staged;     /* GKC__OUT_* */
  gkc_out wire_out;   /* out_staged: the region target packed */
  const char *out_key; /* out_staged: the result's key ("c", "y", ...), for messages */
  gkc__end_fn end;    /* NULL when nothing is held */
  int internal;       /* the library's own request (the arena's): no caller waits */
  /* The key of its array result ("c", "y", "data") when take reads it with
   * gkc__take_out: a big one sent inline may then be received straight
   * into out->data (gkc_wire.c), its bin left empty in the reply, and
   * delivered says how many bytes went there. */
  const char *direct_key;
  size_t delivered;
  /* Async, lost in flight (gkc_reconnect.c): resent once it has been sent
   * again on a new connection (never a second time); lost_status, when
   * it could not be, with lost_msg (malloc'd, NULL when out of memory)
   * saying why, until it is ended. */
  int resent;
  int lost_status;
  char *lost_msg;
  unsigned epoch; /* async: the connection it was sent on (gkc_conn.epoch then) */
};

/* The result target a request's pack function packs. */
static inline const gkc_out *gkc__wire_out(const gkc__req *r) {
  return r->out_staged ? &r->wire_out : r->out;
}

/* One output segment: bytes in the connection's buffer, or caller memory. */
typedef struct {
  const unsigned char *ref; /* NULL: obuf[off .. off + len) */
  size_t off, len;
  int fd; /* to pass with this segment's first byte, or -1 */
} gkc__seg;

struct gkc_conn {
  int fd;
  int nonblock; /* an async context's: never wait */
  uint32_t next_msgid;
  int tf32; /* gkc_set_precision */
  int pinned, pin_device; /* gkc_set_device (pinned 0: gkcd places) */
  char errmsg[512];
  /* Why the connection is gone (kept for later calls), once fd is -1. */
  char dead_msg[512];
  int cancelling; /* closing on the owner's request: fail with GKC_ECANCELLED */
  int write_cut;  /* gkcd closed while we were sending: read what it said */
  /* output queue */
  unsigned char *obuf;
  size_t olen, ocap;
  gkc__seg *segs;
  size_t seg_head, nseg, segcap;
  int pack_oom; /* the packer could not grow the queue */
  /* received bytes not yet dispatched: ibuf[ipos .. ilen) */
  unsigned char *ibuf;
  size_t ipos, ilen, icap;
  /* A big array result being received straight into the caller's memory
   * (gkc__req.direct_key): where the next bytes go, and how many are left;
   * direct_left 0: none. */
  unsigned char *direct_dst;
  size_t direct_left;
  /* pending requests by msgid: chained buckets, a power of two of them */
  gkc__req **tab;
  size_t tabsize, npending;
  uint64_t pending_bytes;
  /* Called just before the core closes fd (async: to stop watching it). */
  void (*before_close)(gkc_conn *c);
  /* The arena for transparent shared memory (gkc_shm.c; NULL when it could
   * not be allocated), and its own requests now pending (counted in
   * npending, but not against the caller's bounds nor in what
   * gkc_async_pending reports). */
  gkc__shm *shm;
  size_t internal_pending;
  /* Reconnecting (gkc_reconnect.c).  Hooks, not calls, so that the core
   * stays below the files that use it: replay says whether a request
   * that failed in flight may be sent again (the connection then is back),
   * on_reconnect lets the arena drop its regions (gkcd freed them). */
  char socket_path[108];   /* as first connected: where to connect again */
  int rc_tries, rc_backoff_ms, rc_flags; /* gkc_set_reconnect */
  unsigned epoch;          /* connections made after the first */
  uint64_t instance, shared_instance; /* as gkcd last said; 0: unknown */
  struct gkc__objs *objs;  /* the objects this connection made; NULL: none yet */
  int staging;             /* inside the arena's staging: never reconnect there */
  int pack_stale;          /* set while packing: the request names a stale object */
  char stale_msg[400];
  int (*replay)(gkc_conn *c, gkc__req *r, int status);
  void (*on_reconnect)(gkc_conn *c);
  /* Async contexts: a request that failed is offered to hold before its
   * callback runs.  1: lost in flight and kept to be sent again, on the
   * held list (msgid order, chained by next, counted in nheld and in what
   * gkc_async_pending reports); 0: it ends now, and when it was lost in
   * flight c->errmsg then says that it was not sent again. */
  int (*hold)(gkc_conn *c, gkc__req *r, int status);
  gkc__req *held;
  size_t nheld;
  /* The shared-memory ring (gkc_ring.c): NULL while the socket carries
   * the frames.  ring_mode: GKC__RING_* (whether to try one).  ring_start,
   * a hook so that the core stays below gkc_ring.c, sets one up at a
   * blocking call on an idle connection. */
  proto_ring *ring;
  size_t ring_bytes;   /* its mapping's length */
  int ring_mode;
  int ring_asked;      /* gkc_set_ring(c, 1): tried even with the arena off */
  int ring_spin_us;    /* the longest a wait polls before it sleeps */
  uint64_t ring_wait_avg_ns; /* recent waits for a reply (gkc_ring_io.c) */
  int (*ring_start)(gkc_conn *c);
};

enum {
  GKC__RING_TRY = 0, /* at the next blocking call on an idle connection */
  GKC__RING_OFF,     /* GKC_NO_RING, gkc_set_ring(c, 0), or gkcd refused one */
  GKC__RING_BUSY     /* being set up */
};

/* --- the core (gkc_wire.c) ------------------------------------------------------- */

/* A zeroed connection with fd -1. */
void gkc__conn_init(gkc_conn *c);
/* Connects c->fd to the socket (NULL: the default path); 0 or an error. */
int gkc__conn_connect(gkc_conn *c, const char *socket_path);
/* Closes fd and fails every pending request with GKC_ECANCELLED; the
 * buffers stay until gkc__conn_destroy (a read may be under way). */
void gkc__cancel(gkc_conn *c);
/* Cancels what is pending, closes fd and frees the buffers; c itself stays. */
void gkc__conn_destroy(gkc_conn *c);
/* A request ready for its prep function (fd -1, everything else zero). */
void gkc__req_init(gkc__req *r);
/* Gives r a msgid, packs it into the output queue and makes it pending.
 * On failure nothing was queued and r is not pending; the error is set.
 * max_requests/max_bytes: the in-flight bound (0: none). */
int gkc__submit(gkc_conn *c, gkc__req *r, size_t max_requests, uint64_t max_bytes);
/* Writes queued output; returns 0 once the queue is empty or the socket
 * would block, or an error after breaking the connection. */
int gkc__flush(gkc_conn *c);
int gkc__want_write(const gkc_conn *c);
/* Reads what is there (async) or waits for bytes (blocking), then completes
 * every pending request whose reply is whole.  0, or an error after the
 * connection broke (every pending request failed with it). */
int gkc__read(gkc_conn *c);
/* Closes fd and fails every pending request with err and msg (made the
 * connection's lasting message); returns err. */
int gkc__break(gkc_conn *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Runs one request on a blocking connection to its end; returns res->status. */
int gkc__run(gkc_conn *c, gkc__req *r, gkc_result *res);
/* A gkc_result with nothing in it yet (NAN timings). */
void gkc__result_init(gkc_result *res);
uint64_t gkc__now_ns(void);

/* --- the ring's bytes (gkc_ring_io.c) -------------------------------------------- */

/* Writes as much of iov[0..n) into the sq as it has room for; a blocking
 * connection waits (polling, then asleep on the socket) for room.  Like
 * sendmsg: the bytes taken, or -1 with errno (EAGAIN: full and nonblock;
 * EPIPE: gkcd is gone; EPROTO: gkcd broke the ring's bounds). */
ssize_t gkc__ring_send(gkc_conn *c, const struct iovec *iov, size_t n);
/* Sends a descriptor on the socket (one doorbell byte carrying it) ahead of
 * the request that takes it, counted in the ring.  0, or -1 with errno. */
int gkc__ring_pass_fd(gkc_conn *c, int fd);
/* Reads up to len bytes of the cq into dst; a blocking connection waits
 * for some.  Like recv: the bytes, 0 once gkcd is gone and the cq empty,
 * or -1 with errno (EAGAIN, EPROTO). */
ssize_t gkc__ring_recv(gkc_conn *c, void *dst, size_t len);
/* Unmaps the ring (the connection closed); the next connection may take a
 * new one. */
void gkc__ring_end(gkc_conn *c);

/* --- setting a ring up (gkc_ring.c) ---------------------------------------------- */

/* The policy from the environment ($GKC_NO_RING, $GKC_RING_SPIN_US) and
 * the hook. */
void gkc__ring_init(gkc_conn *c);

/* --- reconnecting and the objects made (gkc_reconnect.c) ------------------------- */

enum { GKC__OBJ_ARRAY = 1, GKC__OBJ_MATRIX = 2, GKC__OBJ_REGION = 3 };
/* The policy from the environment ($GKC_RECONNECT) and the hooks. */
void gkc__reconnect_init(gkc_conn *c);
/* At the start of every blocking call, before its prep: when gkcd closed
 * the connection while it was idle, connects again.  0, or the error of the
 * last attempt (the call fails with it). */
int gkc__live(gkc_conn *c);
/* Connects again when the connection is gone (not closed by its owner) and
 * the policy allows; 0 when the connection is up (or was never to be
 * revived: the call then fails as it always did).  The held requests are
 * sent again first, in their order; those that cannot be (a stale object,
 * or no connection) stay held, marked lost, for gkc__resend to end. */
int gkc__revive(gkc_conn *c);
/* An async context's policy for requests lost in flight (after
 * gkc__reconnect_init): with GKC_RECONNECT_IDEMPOTENT, an idempotent one
 * is held to be sent again, once; every other one is ended saying that it
 * was not sent again. */
void gkc__reconnect_async(gkc_conn *c);
/* After a library frame of an async context that may have broken the
 * connection: connects again when requests are held (which sends them
 * again), then ends, each with its own error, the held ones that could not
 * be sent again.  0, or the error of connecting again. */
int gkc__resend(gkc_conn *c);
/* A reply made an object (reply: its result map, for the instances). */
void gkc__obj_made(gkc_conn *c, int kind, uint32_t id, int shared, const msgpack_object *reply);
/* A release succeeded. */
void gkc__obj_gone(gkc_conn *c, uint32_t id);
/* ping and status results: the instances they name. */
void gkc__note_instance(gkc_conn *c, const msgpack_object *reply);
/* Packs an object id into a request; pk is the one gkc__submit packs with
 * (its data is the connection).  Naming a stale object sets pack_stale:
 * the request is then refused before anything is sent. */
void gkc__pack_id(msgpack_packer *pk, uint32_t id);
/* Frees the table of objects (gkc_close). */
void gkc__objs_free(gkc_conn *c);

/* Records a message for gkc_errmsg and returns err. */
int gkc__fail(gkc_conn *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Nonzero when sgemm should ask for precision "tf32". */
int gkc__tf32(const gkc_conn *c);
/* The device gkc_set_device named, or -1. */
int gkc__device(const gkc_conn *c);
/* Renders a msgpack object as JSON into a malloc'd string (NULL when out of memory). */
char *gkc__json(const msgpack_object *o);

/* --- the methods: one prep per row of GKC_ASYNC_METHOD_MAP --------------------------
 * Each checks the arguments (errors through gkc__fail on c) and fills r. */
#define GKC__PREP_NONE(name) int gkc__prep_##name(gkc_conn *c, gkc__req *r);
#define GKC__PREP_ARGS(name, type) int gkc__prep_##name(gkc_conn *c, gkc__req *r, const type *a);
#define GKC__PREP_OUT(name, type) \
  int gkc__prep_##name(gkc_conn *c, gkc__req *r, const type *a, gkc_out *out);
GKC_ASYNC_METHOD_MAP(GKC__PREP_NONE, GKC__PREP_ARGS, GKC__PREP_OUT)
#undef GKC__PREP_NONE
#undef GKC__PREP_ARGS
#undef GKC__PREP_OUT

/* Regions (gkc_region.c): the local half of gkc_region_create, and its undoing. */
int gkc__region_alloc(gkc_conn *c, size_t bytes, gkc_region **out);
/* gkc_shm_register, with shm_register's "pinned" (gkc_shm_register_args). */
int gkc__shm_register(gkc_conn *c, int fd, size_t bytes, int pinned, uint32_t *region);
int gkc__region_fd(const gkc_region *r);
void gkc__region_set_id(gkc_region *r, uint32_t id);
void gkc__region_free(gkc_region *r);

/* A prepared request run on a blocking connection (rc: the prep's status);
 * info (may be NULL) gets its timings (gkc_resident.c). */
int gkc__run_info(gkc_conn *c, gkc__req *r, int rc, gkc_result *res, gkc_info *info);
/* A blocking call from its prep: declares r, res and rc (the prep's status). */
#define GKC__BLOCKING(prep_call) \
  gkc__req r;                    \
  gkc_result res;                \
  gkc__req_init(&r);             \
  gkc__result_init(&res);        \
  int rc = gkc__live(c);         \
  if (rc == 0) rc = prep_call;
/* The optional `device` (sgemm, reduce: gkc_set_device; upload, csr_upload:
 * gkc_*_placed) and `replicate` arguments: how many keys, and packing them. */
static inline int gkc__where_keys(int pinned, int replicate) { return (pinned != 0) + (replicate != 0); }
void gkc__pack_where(msgpack_packer *pk, int pinned, int device, int replicate);

/* Array references and result targets (gkc_resident.c), for the method files. */
/* What the library must refuse: a form it cannot encode (optional: NONE is fine). */
int gkc__check_ref(gkc_conn *c, const gkc_ref *r, const char *name, int optional);
/* The dtype of a request's float arrays, from the marks of its n refs
 * (gkc_ref_as; NULL entries skipped), which it takes off them so that the
 * arena and the packer see plain kinds: r->dtype = GKC_F64 when any is
 * marked so (f32_only: refused, naming it), else GKC_F32.  A mark other
 * than a float one is refused.  0 or an error (gkc__fail). */
int gkc__ref_dtypes(gkc_conn *c, gkc__req *r, gkc_ref *const *refs, const char *const *names, int n,
                    int f32_only);
/* Packs "dtype": "f64" when r's float arrays are float64; the key count it adds. */
int gkc__dtype_keys(const gkc__req *r);
void gkc__pack_dtype(msgpack_packer *pk, const gkc__req *r);
int gkc__check_out(gkc_conn *c, const gkc_out *o);
/* Packs key and its array in the protocol's form; nothing for GKC_REF_NONE. */
void gkc__pack_ref(msgpack_packer *pk, const char *key, const gkc_ref *r);
/* 1 when o adds an "out" key to the params map, else 0; gkc__pack_out packs it. */
int gkc__out_keys(const gkc_out *o);
void gkc__pack_out(msgpack_packer *pk, const char *key, const gkc_out *o);
/* Reads the array result `key` into req->out, as it asked for it (or from
 * the arena slice it went through). */
int gkc__take_out(gkc_conn *c, const msgpack_object *r, const char *key, gkc__req *req);

#endif
