/* gkc_async.c: the async context (see gkc_async.h).
 *
 * A context is the core of gkc_wire.c on a non-blocking socket, plus what
 * an event loop needs: the bounds on what is in flight, the hooks that tell
 * a loop which events to watch, and the rule that a context closed from
 * one of its own callbacks is freed only when the library returns to the
 * loop (depth counts the library's frames on the stack), as hiredis does.
 *
 * The shared-memory ring (gkc_ring.c; PROTOCOL.md, "Rings"): set up at
 * connect, one blocking round trip like the connect itself, when gkcd
 * offers one and GKC_NO_RING does not say no.  The loop then still
 * watches the socket, where gkcd's doorbells arrive: at the end of every
 * library frame the context raises its flags in the ring (WANT_DATA while
 * replies are due, WANT_ROOM while its bytes wait for room in the sq) and
 * looks once more, so that gkcd rings the doorbell for what comes later.
 * What is there already makes the context ask for writability, which the
 * socket always has: the loop calls handle_write at once, and over the
 * ring both handlers write what they can and read what came.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc_internal.h"
#include "gkc_shm.h"

#define DEFAULT_MAX_REQUESTS 4096
#define DEFAULT_MAX_BYTES ((uint64_t)256 << 20)

struct gkc_async {
  gkc_conn c; /* first: the core's callbacks get &ac->c */
  size_t max_requests;
  uint64_t max_bytes;
  gkc_async_hooks hooks;
  void *hooks_data;
  int want_read, want_write; /* as last told to the hooks */
  int ring_now;              /* over the ring: something to do without waiting for a doorbell */
  int depth;                 /* library frames under way that may run callbacks */
  int closing;               /* gkc_async_close was called; free at depth 0 */
};

static gkc_async *of(gkc_conn *c) { return (gkc_async *)c; }

/* Over the ring: raises the flags for what the context waits for (gkcd
 * then rings the doorbell when it comes) and looks once more; ring_now
 * says whether something is there already (or the ring is broken: the
 * next read says so). */
static void ring_arm(gkc_async *ac) {
  gkc_conn *c = &ac->c;
  int queued = gkc__want_write(c);
  uint32_t flags = (c->npending ? PROTO_RING_WANT_DATA : 0) |
                   (queued && proto_ring_room(c->ring) == 0 ? PROTO_RING_WANT_ROOM : 0);
  int r = proto_ring_want(c->ring, flags);
  ac->ring_now = r != 0 || (queued && proto_ring_room(c->ring) != 0);
}

/* Whether the loop should call handle_write: bytes to send, or over the
 * ring, something to do now (see ring_arm). */
static int want_write(const gkc_async *ac) {
  if (ac->c.fd < 0) return 0;
  return ac->c.ring ? ac->ring_now : gkc__want_write(&ac->c);
}

/* Tells the hooks when the wanted events change. */
static void update(gkc_async *ac) {
  if (ac->c.ring && ac->c.fd >= 0) ring_arm(ac);
  int rd = ac->c.fd >= 0, wr = want_write(ac);
  if (!ac->hooks.update || (rd == ac->want_read && wr == ac->want_write)) return;
  ac->want_read = rd, ac->want_write = wr;
  ac->hooks.update(ac->hooks_data, rd, wr);
}

static void before_close(gkc_conn *c) {
  gkc_async *ac = of(c);
  if (ac->hooks.update && (ac->want_read || ac->want_write)) {
    ac->want_read = ac->want_write = 0;
    ac->hooks.update(ac->hooks_data, 0, 0);
  }
}

/* The ring, asked for once at connect (ring_start's blocking round trip
 * on a connection with nothing else in flight); anything that goes wrong
 * leaves the context on the socket, as for a blocking connection. */
static void ring_try(gkc_async *ac) {
  gkc_conn *c = &ac->c;
  gkc__ring_init(c);
  if (c->ring_mode != GKC__RING_TRY || c->fd < 0) return;
  c->nonblock = 0;
  (void)c->ring_start(c);
  c->nonblock = 1;
}

int gkc_async_connect(gkc_async **out, const char *socket_path) {
  gkc_async *ac = calloc(1, sizeof *ac);
  *out = ac;
  if (!ac) return GKC_EOUT_OF_MEMORY;
  gkc__conn_init(&ac->c);
  gkc__shm_init(&ac->c);
  ac->c.nonblock = 1;
  ac->c.before_close = before_close;
  gkc__reconnect_init(&ac->c);
  gkc__reconnect_async(&ac->c); /* requests lost in flight: held to send again, or ended */
  ac->max_requests = DEFAULT_MAX_REQUESTS;
  ac->max_bytes = DEFAULT_MAX_BYTES;
  /* Connecting a Unix socket does not wait for the server's accept (the
   * backlog takes it), so it is done blocking; the rest never blocks. */
  int rc = gkc__conn_connect(&ac->c, socket_path);
  if (rc == 0) ring_try(ac);
  return rc;
}

static void destroy(gkc_async *ac) {
  gkc__conn_destroy(&ac->c);
  gkc__shm_destroy(&ac->c); /* after every request, and so every slice, has ended */
  gkc__objs_free(&ac->c);
  if (ac->hooks.cleanup) ac->hooks.cleanup(ac->hooks_data);
  free(ac);
}

void gkc_async_close(gkc_async *ac) {
  if (!ac || ac->closing) return;
  ac->closing = 1;
  ac->depth++; /* the cancellation callbacks below may call close again */
  gkc__cancel(&ac->c);
  gkc__resend(&ac->c); /* requests held to be sent again: cancelled too */
  ac->depth--;
  if (ac->depth == 0) destroy(ac);
}

/* Leaves a library frame; 1 when the context was freed on the way out. */
static int leave(gkc_async *ac) {
  if (--ac->depth > 0 || !ac->closing) return 0;
  destroy(ac);
  return 1;
}

const char *gkc_async_errmsg(const gkc_async *ac) { return ac ? ac->c.errmsg : "out of memory"; }
/* The arena's own requests have no callback to wait for; those held to be
 * sent again on a new connection do. */
static size_t pending(const gkc_async *ac) {
  return ac->c.npending - ac->c.internal_pending + ac->c.nheld;
}
size_t gkc_async_pending(const gkc_async *ac) { return pending(ac); }
int gkc_async_fd(const gkc_async *ac) { return ac->c.fd; }
int gkc_async_want_write(const gkc_async *ac) { return want_write(ac); }
int gkc_async_ring_active(const gkc_async *ac) { return ac && ac->c.ring != NULL; }

int gkc_async_set_precision(gkc_async *ac, const char *precision) {
  return gkc_set_precision(&ac->c, precision);
}

int gkc_async_set_device(gkc_async *ac, int device) { return gkc_set_device(&ac->c, device); }

int gkc_async_set_shm(gkc_async *ac, size_t threshold, size_t max_bytes) {
  int rc = gkc_set_shm(&ac->c, threshold, max_bytes);
  update(ac); /* releasing idle regions may have queued requests */
  return rc;
}

int gkc_async_shm_reserve(gkc_async *ac, size_t bytes) {
  if (!ac) return GKC_EINVALID_ARGUMENT;
  int rc = gkc_shm_reserve(&ac->c, bytes);
  update(ac); /* the status or shm_register it queued */
  return rc;
}

int gkc_async_shm_state(const gkc_async *ac, gkc_shm_info *info) {
  return gkc_shm_state(ac ? &ac->c : NULL, info);
}

int gkc_async_set_reconnect(gkc_async *ac, int tries, int backoff_ms, int flags) {
  return gkc_set_reconnect(&ac->c, tries, backoff_ms, flags);
}

unsigned gkc_async_reconnects(const gkc_async *ac) { return ac ? ac->c.epoch : 0; }

void gkc_async_set_limits(gkc_async *ac, size_t max_requests, uint64_t max_bytes) {
  if (max_requests) ac->max_requests = max_requests;
  if (max_bytes) ac->max_bytes = max_bytes;
}

void gkc_async_set_hooks(gkc_async *ac, const gkc_async_hooks *hooks, void *data) {
  memset(&ac->hooks, 0, sizeof ac->hooks);
  if (hooks) ac->hooks = *hooks;
  ac->hooks_data = data;
  ac->want_read = ac->want_write = -1; /* unknown: tell at once */
  update(ac);
}

/* The end of a library frame that may have broken the connection: the
 * requests held to be sent again go out on a new one (gkc__resend), before
 * the loop runs again.  rc is the frame's result; when the connection is
 * back, the loop goes on as if nothing broke (each lost request's
 * callback has said what became of it). */
static int resend(gkc_async *ac, int rc) {
  if (!ac->c.held) return rc;
  int r2 = gkc__resend(&ac->c);
  if (r2) return r2;
  return ac->c.fd >= 0 ? 0 : rc;
}

/* Over the ring, both handlers write what they can and read what came. */
static int ring_io(gkc_async *ac) {
  int rc = gkc__flush(&ac->c);
  if (rc == 0 && ac->c.fd >= 0) rc = gkc__read(&ac->c);
  if (rc == 0 && ac->c.fd >= 0) rc = gkc__flush(&ac->c); /* room the reads made */
  return rc;
}

int gkc_async_handle_write(gkc_async *ac) {
  if (ac->c.ring) return gkc_async_handle_read(ac);
  ac->depth++;
  int rc = resend(ac, gkc__flush(&ac->c));
  if (leave(ac)) return GKC_ECANCELLED;
  update(ac);
  return rc;
}

int gkc_async_handle_read(gkc_async *ac) {
  ac->depth++;
  int rc = resend(ac, ac->c.ring ? ring_io(ac) : gkc__read(&ac->c));
  if (leave(ac)) return GKC_ECANCELLED;
  update(ac);
  return rc;
}

int gkc_async_poll(gkc_async *ac, int timeout_ms) {
  if (ac->c.fd < 0) return pending(ac) ? GKC_EIO : 0;
  if (ac->c.ring) ring_arm(ac);
  struct pollfd p = {.fd = ac->c.fd, .events = POLLIN | (want_write(ac) ? POLLOUT : 0)};
  int n = poll(&p, 1, timeout_ms);
  if (n < 0 && errno != EINTR) {
    ac->depth++; /* breaking runs callbacks */
    int rc = resend(ac, gkc__break(&ac->c, GKC_EIO, "poll: %s", strerror(errno)));
    if (leave(ac)) return GKC_ECANCELLED;
    update(ac);
    return rc < 0 ? rc : (int)pending(ac);
  }
  if (n <= 0) return (int)pending(ac);
  int rc = 0;
  if (p.revents & POLLOUT) rc = gkc_async_handle_write(ac);
  if (rc == GKC_ECANCELLED) return rc;
  /* POLLHUP and POLLERR are read too: reading says what happened. */
  if (ac->c.fd >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
    rc = gkc_async_handle_read(ac);
  if (rc < 0) return rc;
  return (int)pending(ac);
}

/* --- requests ---------------------------------------------------------------------- */

/* A request's end: the caller's callback, then the request's memory. */
static void async_done(gkc_conn *c, gkc__req *r, gkc_result *res) {
  gkc_async *ac = of(c);
  /* Lost in flight: the reconnect policy may keep it to send again (its
   * callback then runs later, still once), or says so in the message. */
  if (res->status && c->hold && c->hold(c, r, res->status)) return;
  char msg[sizeof c->errmsg];
  snprintf(msg, sizeof msg, "%s", res->errmsg);
  res->errmsg = msg; /* the callback's own requests may rewrite c->errmsg */
  if (r->region) {   /* gkc_async_region_create */
    if (res->status == 0) {
      gkc__region_set_id(r->region, res->id);
      res->region = r->region;
    } else {
      gkc__region_free(r->region);
    }
  }
  ac->depth++;
  r->cb(ac, res, r->userdata);
  ac->depth--; /* the frame that called us frees a closed context */
  free((char *)res->status_json);
  free(r->lost_msg);
  free(r);
}

/* A request for cb, or an error (and its message) when none can be made. */
static int new_req(gkc_async *ac, gkc_async_cb cb, void *userdata, gkc__req **out) {
  *out = NULL;
  if (!cb) return gkc__fail(&ac->c, GKC_EINVALID_ARGUMENT, "the callback must not be NULL");
  if (ac->closing) return gkc__fail(&ac->c, GKC_ECANCELLED, "the context is being closed");
  /* gkcd closed the connection (every request pending then has had its
   * callback): connect again before this one is prepared. */
  int rc = gkc__revive(&ac->c);
  if (rc) return rc;
  gkc__req *r = malloc(sizeof *r);
  if (!r) return gkc__fail(&ac->c, GKC_EOUT_OF_MEMORY, "out of memory");
  gkc__req_init(r);
  r->done = async_done;
  r->cb = cb;
  r->userdata = userdata;
  *out = r;
  return 0;
}

/* Queues a prepared request (rc: its prep's result); frees it on failure. */
static int submit(gkc_async *ac, gkc__req *r, int rc) {
  if (rc == 0) rc = gkc__submit(&ac->c, r, ac->max_requests, ac->max_bytes);
  if (rc) {
    if (r->region) gkc__region_free(r->region);
    free(r);
    return rc;
  }
  r->epoch = ac->c.epoch; /* how its loss is told from an answer (gkc_reconnect.c) */
  update(ac);
  return 0;
}

#define GKC__ASYNC_DEF_NONE(name)                                                      \
  int gkc_async_##name(gkc_async *ac, gkc_async_cb cb, void *userdata) {               \
    gkc__req *r;                                                                       \
    int rc = new_req(ac, cb, userdata, &r);                                            \
    if (rc) return rc;                                                                 \
    return submit(ac, r, gkc__prep_##name(&ac->c, r));                                 \
  }
#define GKC__ASYNC_DEF_ARGS(name, type)                                                 \
  int gkc_async_##name(gkc_async *ac, const type *args, gkc_async_cb cb, void *userdata) { \
    gkc__req *r;                                                                       \
    int rc = new_req(ac, cb, userdata, &r);                                            \
    if (rc) return rc;                                                                 \
    return submit(ac, r, gkc__prep_##name(&ac->c, r, args));                           \
  }
#define GKC__ASYNC_DEF_OUT(name, type)                                                  \
  int gkc_async_##name(gkc_async *ac, const type *args, gkc_out *out, gkc_async_cb cb,  \
                       void *userdata) {                                                \
    gkc__req *r;                                                                       \
    int rc = new_req(ac, cb, userdata, &r);                                            \
    if (rc) return rc;                                                                 \
    return submit(ac, r, gkc__prep_##name(&ac->c, r, args, out));                      \
  }
GKC_ASYNC_METHOD_MAP(GKC__ASYNC_DEF_NONE, GKC__ASYNC_DEF_ARGS, GKC__ASYNC_DEF_OUT)

int gkc_async_region_create(gkc_async *ac, size_t bytes, gkc_async_cb cb, void *userdata) {
  gkc__req *r;
  int rc = new_req(ac, cb, userdata, &r);
  if (rc) return rc;
  rc = gkc__region_alloc(&ac->c, bytes, &r->region);
  if (rc == 0) {
    gkc_shm_register_args a = {gkc__region_fd(r->region), bytes, 0};
    rc = gkc__prep_shm_register(&ac->c, r, &a);
  }
  return submit(ac, r, rc);
}
