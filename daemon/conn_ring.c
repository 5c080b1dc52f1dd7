/* conn_ring.c: a connection's shared-memory ring (proto_ring.h); see
 * conn.h.  The rest of the transport is conn.c.
 *
 * A ring replaces the socket's bytes, not the path: ring_read copies the
 * sq's bytes into the input buffer (bounded by the ring, which refuses an
 * index past its size, and by the buffer's room), conn.c's parse_frames
 * cuts them as it cuts the socket's, and conn_write_pending puts the
 * pending replies into the cq as far as it has room (ring_writev).  The
 * socket is then watched only for doorbells, descriptors and its end
 * (sock_drain); the loop asks for doorbells through the ring's flags
 * (conn_rings_poll, each iteration) instead of watching the rings.
 *
 * This file is built on conn.c (the functions conn.h lists as conn.c's for
 * it); conn.c calls back into it only through the ring's ops
 * (conn_ring_ops), set by conn_ring_start, so that the two do not reach
 * each other by name (tests/unit/check_layers.py).
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "conn.h"

#include "log.h"

/* The client broke its ring's bounds: only its connection pays. */
static void ring_corrupt(gkcd_conn *c, const char *what) {
  log_warn("connection %llu: closing: %s in its shared-memory ring is out of bounds",
           (unsigned long long)c->id, what);
  c->set->ring_corrupt++;
  conn_close(c);
}

/* A ring's socket carries doorbells (any bytes, dropped), descriptors and
 * its end. */
static void sock_drain(gkcd_conn *c) {
  for (int rounds = 0; rounds < 16; rounds++) {
    unsigned char bells[256];
    ssize_t n = conn_recv(c, bells, sizeof bells);
    if (n < 0) return; /* nothing more now, or c was closed */
    if (n == 0) { /* the client is gone: what it queued is answered into the void, then close */
      c->peer_closed = 1;
      c->reading = 0;
      conn_watch(c);
      return;
    }
    if ((size_t)n < sizeof bells) return;
  }
}

/* Reads what the submission ring holds, as read_some (conn.c) reads the
 * socket; 0, or -1 when the connection was closed. */
static int ring_read(gkcd_conn *c) {
  for (int rounds = 0; rounds < 16 && c->reading; rounds++) {
    ssize_t a = proto_ring_avail(c->ring);
    if (a < 0) {
      ring_corrupt(c, "the submission ring's tail");
      return -1;
    }
    if (a == 0) return 0;
    /* Descriptors sent before the frame that takes them are read first. */
    uint32_t fds = proto_ring_fd_msgs(c->ring);
    if (fds != c->fd_msgs_seen) {
      c->fd_msgs_seen = fds;
      sock_drain(c);
      if (c->closing) return -1;
    }
    int r = conn_make_room(c);
    if (r) return r < 0 ? -1 : 0;
    ssize_t n = proto_ring_read(c->ring, c->buf + c->len, c->cap - c->len);
    if (n < 0) {
      ring_corrupt(c, "the submission ring's tail");
      return -1;
    }
    c->last_active_ms = uv_now(c->set->loop);
    if (c->len == 0) c->req_start_ms = c->last_active_ms;
    c->len += (size_t)n;
  }
  return 0;
}

/* The ring may have frames or room: as on_poll after a read. */
static void ring_service(gkcd_conn *c) {
  if (c->npend && !c->sock_pend) conn_write_pending(c);
  if (c->closing) return;
  if (c->reading && ring_read(c) != 0) return;
  conn_after_input(c);
}

/* --- conn.c's way in (conn_ring_ops) ------------------------------------- */

/* c's socket was polled (on_poll, after the replies it took). */
static void ring_poll(gkcd_conn *c, int events) {
  if (!c->closing && (events & UV_READABLE)) sock_drain(c);
  if (!c->closing) ring_service(c);
}

static ssize_t ring_writev(gkcd_conn *c, const struct iovec *iov, size_t n) {
  ssize_t w = proto_ring_writev(c->ring, iov, n);
  if (w < 0) ring_corrupt(c, "the completion ring's head");
  return w;
}

static void ring_unmap(gkcd_conn *c) {
  munmap(c->ring->base, c->ring_map_bytes);
  free(c->ring);
  c->ring = NULL;
  c->set->nrings--;
}

static const conn_ring_ops ring_ops = {ring_poll, ring_writev, ring_unmap};

/* --- the owner's calls --------------------------------------------------- */

int conn_ring_start(gkcd_conn *c, proto_ring *ring, size_t map_bytes, size_t then) {
  if (c->ring) return -1;
  c->set->ring_ops = &ring_ops;
  c->ring = ring;
  c->ring_map_bytes = map_bytes;
  c->sock_pend = c->npend + then;
  ring->sock = c->sock_pend ? -1 : c->fd;
  c->fd_msgs_seen = 0;
  c->set->nrings++;
  conn_watch(c);
  return 0;
}

int conn_rings_poll(gkcd_conns *set, int polling) {
  int busy = 0;
  set->rings_polled = polling;
  if (!set->nrings) return 0;
  for (gkcd_conn *c = set->head, *next; c; c = next) {
    next = c->next;
    if (!c->ring || c->closing) continue;
    int data = c->reading && !c->peer_closed, room = c->npend && !c->sock_pend && !c->wbusy;
    int ready;
    if (polling) {
      (void)proto_ring_want(c->ring, 0);
      ready = (data && proto_ring_avail(c->ring) != 0) || (room && proto_ring_room(c->ring) != 0);
    } else {
      ready = proto_ring_want(c->ring, (data ? PROTO_RING_WANT_DATA : 0) |
                                           (room ? PROTO_RING_WANT_ROOM : 0)) != 0;
    }
    if (!ready) continue;
    c->refs++; /* serving it may close it */
    ring_service(c);
    conn_unref(c);
    busy = 1;
  }
  return busy;
}
