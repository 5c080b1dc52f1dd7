/* conn.c: one client connection: bytes in, frames out, replies back.
 *
 * Input accumulates in one growing buffer.  After every read the buffer is
 * scanned for complete frames (proto_frame_scan), each of which is handed to
 * rpc.c as its own allocation, so the buffer can keep receiving while jobs
 * still use earlier requests.  The buffer grows only with bytes actually
 * received, never with what a frame claims it will send.
 *
 * Replies produced during one loop iteration are collected and written with
 * a single sendmsg (conn_flush_all runs from a uv_check), so a pipelining
 * client costs one write per batch rather than one per reply.
 *
 * Back-pressure: reading stops while the connection has max-conn-requests
 * jobs in flight or more than max-conn-reply-bytes of replies its peer has
 * not read, and resumes when that falls; a client that never reads its
 * replies thus stops being read from, instead of making gkcd buffer without
 * bound.
 *
 * The socket is read with recvmsg under a uv_poll_t rather than as a libuv
 * stream, because clients may attach file descriptors (shared-memory
 * regions) to their bytes, which libuv's pipes would not hand over; they
 * queue up in c->fds for shm_register.  Writes go out with sendmsg from the
 * same poll handle.
 *
 * Lifetime: refs counts the open handle, each job in flight and the dirty
 * list's hold; the memory goes when the last of them is done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

#define READ_CHUNK (64 * 1024)
/* Frames at least this big take over the whole buffer instead of being copied. */
#define STEAL_MIN (1024 * 1024)
/* An idle buffer bigger than this is given back to the allocator. */
#define KEEP_MAX (1024 * 1024)

static void on_closed(uv_handle_t *h) {
  gkcd_conn *c = h->data;
  gkcd_server *srv = c->srv;
  close(c->fd);
  for (int i = 0; i < c->nfds; i++) close(c->fds[i]);
  c->nfds = 0;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  srv->nconns--;
  log_debug("connection %llu closed", (unsigned long long)c->id);
  res_drop_owner(srv, c);
  conn_unref(c);
  server_maybe_finish(srv);
}

void conn_unref(gkcd_conn *c) {
  if (--c->refs > 0) return;
  for (size_t i = 0; i < c->npend; i++) free(c->pend[i].base);
  free(c->pend);
  free(c->buf);
  free(c);
}

void conn_close(gkcd_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  c->reading = 0;
  uv_close((uv_handle_t *)&c->poll, on_closed);
}

int conn_take_fd(gkcd_conn *c) {
  if (c->nfds == 0) return -1;
  int fd = c->fds[0];
  memmove(c->fds, c->fds + 1, (size_t)--c->nfds * sizeof c->fds[0]);
  return fd;
}

/* Closes c if it has nothing left to do: after framing errors, and while
 * the daemon drains for shutdown. */
static void close_if_done(gkcd_conn *c) {
  if (c->closing || c->npend > 0) return;
  if (c->close_when_flushed || ((c->srv->draining || c->peer_closed) && c->jobs == 0))
    conn_close(c);
}

static void on_poll(uv_poll_t *h, int status, int events);

/* Tells the poll handle what we wait for now. */
static void watch(gkcd_conn *c) {
  if (c->closing) return;
  int want = (c->reading ? UV_READABLE : 0) | (c->npend ? UV_WRITABLE : 0);
  if (want == c->events) return;
  int rc = want ? uv_poll_start(&c->poll, want, on_poll) : uv_poll_stop(&c->poll);
  if (rc) {
    log_warn("connection %llu: poll: %s", (unsigned long long)c->id, uv_strerror(rc));
    conn_close(c);
    return;
  }
  c->events = want;
}

/* Writes as much of the pending replies as the socket takes now. */
static void write_pending(gkcd_conn *c) {
  while (c->npend > 0 && !c->closing) {
    struct iovec iov[64];
    size_t n = c->npend < 64 ? c->npend : 64;
    for (size_t i = 0; i < n; i++) {
      iov[i].iov_base = c->pend[i].base;
      iov[i].iov_len = c->pend[i].len;
    }
    iov[0].iov_base = (char *)iov[0].iov_base + c->pend_off;
    iov[0].iov_len -= c->pend_off;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      log_debug("connection %llu: write: %s", (unsigned long long)c->id, strerror(errno));
      conn_close(c);
      return;
    }
    c->queued_bytes -= (size_t)w;
    c->last_active_ms = uv_now(c->srv->loop);
    size_t done = 0, left = (size_t)w + c->pend_off;
    while (done < c->npend && left >= c->pend[done].len) {
      left -= c->pend[done].len;
      free(c->pend[done].base);
      done++;
    }
    memmove(c->pend, c->pend + done, (c->npend - done) * sizeof *c->pend);
    c->npend -= done;
    c->pend_off = left;
  }
  watch(c);
  if (!c->closing) {
    conn_update_reading(c);
    close_if_done(c);
  }
}

void conn_flush_all(gkcd_server *srv) {
  gkcd_conn *list = srv->dirty;
  srv->dirty = NULL;
  while (list) {
    gkcd_conn *c = list, *next = c->next_dirty;
    c->next_dirty = NULL;
    c->dirty = 0;
    if (!c->closing) write_pending(c);
    conn_unref(c); /* the dirty list's reference */
    list = next;
  }
}

static int pend(gkcd_conn *c, void *p, size_t len) {
  if (c->npend == c->pend_cap) {
    size_t ncap = c->pend_cap ? c->pend_cap * 2 : 8;
    uv_buf_t *np = realloc(c->pend, ncap * sizeof *np);
    if (!np) return -1;
    c->pend = np;
    c->pend_cap = ncap;
  }
  c->pend[c->npend++] = uv_buf_init(p, (unsigned)len);
  c->queued_bytes += len;
  return 0;
}

void conn_send(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len) {
  if (c->closing) goto drop;
  if (pend(c, head, head_len) != 0) goto oom;
  head = NULL;
  if (body_len && pend(c, body, body_len) != 0) goto oom;
  body = NULL;
  if (!c->dirty) { /* written once per loop iteration, by conn_flush_all */
    c->dirty = 1;
    c->refs++;
    c->next_dirty = c->srv->dirty;
    c->srv->dirty = c;
  }
  conn_update_reading(c);
  goto drop; /* frees whatever was not queued: nothing, normally */
oom:
  log_err("connection %llu: out of memory queueing a reply", (unsigned long long)c->id);
  conn_close(c);
drop:
  free(head);
  free(body);
}

/* Room for at least one more chunk in the input buffer; -1 when out of memory. */
static int reserve(gkcd_conn *c) {
  if (c->cap - c->len >= READ_CHUNK) return 0;
  /* Doubling keeps the cost of growth linear; capacity stays within twice
   * what the peer has really sent, plus one chunk. */
  size_t ncap = c->cap ? c->cap * 2 : READ_CHUNK;
  if (ncap < c->len + READ_CHUNK) ncap = c->len + READ_CHUNK;
  unsigned char *nb = realloc(c->buf, ncap);
  if (!nb) return -1;
  c->buf = nb;
  c->cap = ncap;
  return 0;
}

/* Keeps the descriptors a message carried; the surplus is closed. */
static void take_rights(gkcd_conn *c, struct msghdr *mh) {
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    int *fds = (int *)CMSG_DATA(cm);
    for (int i = 0; i < n; i++) {
      if (c->nfds < CONN_MAX_FDS) {
        c->fds[c->nfds++] = fds[i];
      } else {
        log_warn("connection %llu: more than %d descriptors waiting; closing the extra one",
                 (unsigned long long)c->id, CONN_MAX_FDS);
        close(fds[i]);
      }
    }
  }
  if (mh->msg_flags & MSG_CTRUNC)
    log_warn("connection %llu: descriptors were dropped (too many in one message)",
             (unsigned long long)c->id);
}

/* Reads what the socket holds; 0, or -1 when the connection was closed. */
static int read_some(gkcd_conn *c) {
  for (int rounds = 0; rounds < 16 && c->reading; rounds++) {
    if (reserve(c) != 0) {
      log_err("connection %llu: out of memory for input, closing", (unsigned long long)c->id);
      conn_close(c);
      return -1;
    }
    struct iovec iov = {c->buf + c->len, c->cap - c->len};
    union {
      char buf[CMSG_SPACE(sizeof(int) * CONN_MAX_FDS)];
      struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      log_debug("connection %llu: read: %s", (unsigned long long)c->id, strerror(errno));
      conn_close(c);
      return -1;
    }
    if (mh.msg_controllen > 0) take_rights(c, &mh);
    if (n == 0) {
      /* The peer will send no more, but may still read: answer what it
       * sent (buffered frames, jobs in flight), then close. */
      log_debug("connection %llu: peer finished sending", (unsigned long long)c->id);
      c->peer_closed = 1;
      c->reading = 0;
      return 0;
    }
    c->len += (size_t)n;
    c->last_active_ms = uv_now(c->srv->loop);
    if ((size_t)n < iov.iov_len) return 0; /* drained */
  }
  return 0;
}

static int may_take_frames(const gkcd_conn *c) {
  return !c->closing && !c->close_when_flushed && c->jobs < c->srv->cfg.max_conn_requests &&
         c->queued_bytes <= c->srv->cfg.max_conn_reply_bytes;
}

/* Hands complete frames in the buffer to rpc.c while the limits allow. */
static void parse_frames(gkcd_conn *c) {
  gkcd_server *srv = c->srv;
  size_t pos = 0;
  if (c->parsing) return;
  c->parsing = 1;
  while (pos < c->len && may_take_frames(c)) {
    if (c->need > c->len) break;
    proto_frame_info info;
    ssize_t r = proto_frame_scan(c->buf + pos, c->len - pos, &srv->limits, &info);
    if (r == PROTO_PARTIAL) {
      /* info.need is relative to pos, and pos is about to move to 0. */
      c->need = info.need > c->len - pos ? info.need : 0;
      break;
    }
    c->need = 0;
    if (r < 0) {
      /* The frame's end is unknown, so nothing after it can be trusted:
       * answer, then close once the answer is out. */
      c->close_when_flushed = 1;
      rpc_reject_frame(c, (int)r, &info);
      pos = c->len;
      break;
    }
    void *frame;
    if (pos == 0 && (size_t)r == c->len && (size_t)r >= STEAL_MIN) {
      frame = c->buf; /* the frame is the whole buffer: take it as it is */
      c->buf = NULL;
      c->cap = c->len = 0;
    } else if (!(frame = malloc((size_t)r))) {
      log_err("connection %llu: out of memory for a %zd-byte frame", (unsigned long long)c->id, r);
      c->parsing = 0;
      conn_close(c);
      return;
    } else {
      memcpy(frame, c->buf + pos, (size_t)r);
    }
    pos += (size_t)r;
    rpc_handle_frame(c, frame, (size_t)r);
    if (!c->buf) break;
  }
  c->parsing = 0;
  if (!c->buf) return;
  if (pos > 0) {
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
  }
  if (c->len == 0 && c->cap > KEEP_MAX) {
    free(c->buf);
    c->buf = NULL;
    c->cap = 0;
  }
}

void conn_update_reading(gkcd_conn *c) {
  if (c->closing || c->parsing) return; /* parse_frames' caller decides afterwards */
  int want = may_take_frames(c);
  if (want && !c->reading && c->len > 0) {
    /* Frames that arrived before we paused are served first. */
    parse_frames(c);
    if (c->closing) return;
    want = may_take_frames(c);
  }
  c->reading = want && !c->peer_closed;
  watch(c);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  gkcd_conn *c = h->data;
  if (status < 0) {
    log_debug("connection %llu: poll: %s", (unsigned long long)c->id, uv_strerror(status));
    conn_close(c);
    return;
  }
  if ((events & UV_WRITABLE) && c->npend) write_pending(c);
  if (c->closing || !(events & UV_READABLE) || !c->reading) return;
  if (read_some(c) != 0) return;
  if (c->peer_closed) watch(c);
  parse_frames(c);
  if (!c->closing) {
    conn_update_reading(c);
    close_if_done(c);
  }
}

/* Root, gkcd's own user, an allowed user, or a member of an allowed group
 * (the socket's group when none is configured). */
static int peer_allowed(gkcd_server *srv, int fd, struct ucred *cr) {
  socklen_t len = sizeof *cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) != 0) return 0;
  if (cr->uid == 0 || cr->uid == getuid()) return 1;
  const gkcd_config *cfg = &srv->cfg;
  for (int i = 0; i < cfg->n_allow_uids; i++)
    if (cfg->allow_uids[i] == cr->uid) return 1;
  const gid_t *gids = cfg->n_allow_gids ? cfg->allow_gids : &srv->socket_gid;
  int ngids = cfg->n_allow_gids ? cfg->n_allow_gids : 1;
  gid_t groups[256];
  socklen_t glen = sizeof groups;
  int ngroups = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0
                    ? (int)(glen / sizeof(gid_t)) : 0;
  for (int i = 0; i < ngids; i++) {
    if (gids[i] == cr->gid) return 1;
    for (int j = 0; j < ngroups; j++)
      if (gids[i] == groups[j]) return 1;
  }
  return 0;
}

void conn_accept(gkcd_server *srv, int fd) {
  struct ucred cr = {0, (uid_t)-1, (gid_t)-1};
  if (!peer_allowed(srv, fd, &cr)) {
    srv->refused++;
    log_warn("refused connection from pid %d uid %d gid %d: not an allowed user or group"
             " (allow-users, allow-groups)", (int)cr.pid, (int)cr.uid, (int)cr.gid);
    close(fd);
    return;
  }
  if (srv->nconns >= srv->cfg.max_connections) {
    srv->refused++;
    log_warn("refused connection from pid %d uid %d: %llu connections open (max-connections)",
             (int)cr.pid, (int)cr.uid, (unsigned long long)srv->nconns);
    close(fd);
    return;
  }
  gkcd_conn *c = calloc(1, sizeof *c);
  int rc = c ? uv_poll_init(srv->loop, &c->poll, fd) : UV_ENOMEM;
  if (rc) {
    log_err("accepting a connection: %s", uv_strerror(rc));
    free(c);
    close(fd);
    return;
  }
  c->poll.data = c;
  c->fd = fd;
  c->srv = srv;
  c->refs = 1;
  c->pid = (int)cr.pid;
  c->uid = (int)cr.uid;
  c->id = ++srv->next_conn_id;
  c->last_active_ms = uv_now(srv->loop);
  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;
  log_debug("connection %llu opened by pid %d uid %d", (unsigned long long)c->id, c->pid, c->uid);
  conn_update_reading(c);
}

void conn_sweep_idle(gkcd_server *srv) {
  if (srv->cfg.idle_timeout_s <= 0) return;
  uint64_t now = uv_now(srv->loop), limit = (uint64_t)(srv->cfg.idle_timeout_s * 1000);
  for (gkcd_conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing || c->jobs || c->npend) continue;
    if (now - c->last_active_ms >= limit) {
      log_info("connection %llu (pid %d): idle for %.0f s, closing", (unsigned long long)c->id,
               c->pid, srv->cfg.idle_timeout_s);
      conn_close(c);
    }
  }
}
