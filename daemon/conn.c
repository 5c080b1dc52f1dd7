/* conn.c: one client connection: bytes in, frames out, replies back.
 *
 * Input accumulates in one growing buffer.  After every read the buffer is
 * scanned for complete frames (proto_frame_scan), each of which is handed to
 * rpc.c as its own allocation, so the buffer can keep receiving while jobs
 * still use earlier requests.  The buffer grows only with bytes actually
 * received, never with what a frame claims it will send.
 *
 * Replies produced during one loop iteration are collected and written with
 * a single uv_write (conn_flush_all runs from a uv_check), so a pipelining
 * client costs one write per batch rather than one per reply.
 *
 * Back-pressure: reading stops while the connection has max-conn-requests
 * jobs in flight or more than max-conn-reply-bytes of replies its peer has
 * not read, and resumes when that falls; a client that never reads its
 * replies thus stops being read from, instead of making gkcd buffer without
 * bound.
 *
 * Lifetime: refs counts the open handle, each job in flight and each write
 * in flight; the memory goes when the last of them is done.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

#define READ_CHUNK (64 * 1024)
/* Frames at least this big take over the whole buffer instead of being copied. */
#define STEAL_MIN (1024 * 1024)
/* An idle buffer bigger than this is given back to the allocator. */
#define KEEP_MAX (1024 * 1024)

typedef struct {
  uv_write_t req;
  gkcd_conn *conn;
  size_t n, bytes;
  uv_buf_t bufs[]; /* each base malloc'd, freed when written */
} write_req;

static void on_closed(uv_handle_t *h) {
  gkcd_conn *c = h->data;
  gkcd_server *srv = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  srv->nconns--;
  log_debug("connection %llu closed", (unsigned long long)c->id);
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
  uv_close((uv_handle_t *)&c->pipe, on_closed);
}

/* Closes c if it has nothing left to do: after framing errors, and while
 * the daemon drains for shutdown. */
static void close_if_done(gkcd_conn *c) {
  if (c->closing || c->writes > 0 || c->npend > 0) return;
  if (c->close_when_flushed || (c->srv->draining && c->jobs == 0)) conn_close(c);
}

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  gkcd_conn *c = w->conn;
  for (size_t i = 0; i < w->n; i++) free(w->bufs[i].base);
  c->writes--;
  c->queued_bytes -= w->bytes;
  c->last_active_ms = uv_now(c->srv->loop);
  free(w);
  if (status < 0 && status != UV_ECANCELED) {
    log_debug("connection %llu: write failed: %s", (unsigned long long)c->id,
              uv_strerror(status));
    conn_close(c);
  }
  if (!c->closing) {
    conn_update_reading(c);
    close_if_done(c);
  }
  conn_unref(c);
}

static void flush(gkcd_conn *c) {
  c->dirty = 0;
  if (c->closing || c->npend == 0) return;
  write_req *w = malloc(sizeof *w + c->npend * sizeof(uv_buf_t));
  if (!w) {
    log_err("connection %llu: out of memory writing replies", (unsigned long long)c->id);
    conn_close(c);
    return;
  }
  w->conn = c;
  w->n = c->npend;
  w->bytes = 0;
  for (size_t i = 0; i < c->npend; i++) {
    w->bufs[i] = c->pend[i];
    w->bytes += c->pend[i].len;
  }
  c->npend = 0;
  int rc = uv_write(&w->req, (uv_stream_t *)&c->pipe, w->bufs, (unsigned)w->n, on_written);
  if (rc) {
    log_warn("connection %llu: uv_write: %s", (unsigned long long)c->id, uv_strerror(rc));
    for (size_t i = 0; i < w->n; i++) free(w->bufs[i].base);
    c->queued_bytes -= w->bytes;
    free(w);
    conn_close(c);
    return;
  }
  c->writes++;
  c->refs++;
}

void conn_flush_all(gkcd_server *srv) {
  gkcd_conn *list = srv->dirty;
  srv->dirty = NULL;
  while (list) {
    gkcd_conn *c = list, *next = c->next_dirty;
    c->next_dirty = NULL;
    flush(c);
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
  if (!c->dirty) {
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

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  gkcd_conn *c = h->data;
  (void)suggested;
  if (c->cap - c->len < READ_CHUNK) {
    /* Doubling keeps the cost of growth linear; capacity stays within twice
     * what the peer has really sent, plus one chunk. */
    size_t ncap = c->cap ? c->cap * 2 : READ_CHUNK;
    if (ncap < c->len + READ_CHUNK) ncap = c->len + READ_CHUNK;
    unsigned char *nb = realloc(c->buf, ncap);
    if (!nb) {
      *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
      return;
    }
    c->buf = nb;
    c->cap = ncap;
  }
  *buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
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

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

void conn_update_reading(gkcd_conn *c) {
  if (c->closing || c->parsing) return; /* parse_frames' caller decides afterwards */
  int want = may_take_frames(c);
  if (want && !c->reading) {
    /* Frames that arrived before we paused are served first. */
    parse_frames(c);
    if (c->closing || !may_take_frames(c)) return;
    int rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    if (rc) {
      log_warn("connection %llu: uv_read_start: %s", (unsigned long long)c->id, uv_strerror(rc));
      conn_close(c);
      return;
    }
    c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->pipe);
    c->reading = 0;
  }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  gkcd_conn *c = s->data;
  (void)buf;
  if (nread == 0) return;
  if (nread == UV_EOF) {
    log_debug("connection %llu: peer closed", (unsigned long long)c->id);
    conn_close(c);
    return;
  }
  if (nread == UV_ENOBUFS) {
    log_err("connection %llu: out of memory for input, closing", (unsigned long long)c->id);
    conn_close(c);
    return;
  }
  if (nread < 0) {
    log_debug("connection %llu: read: %s", (unsigned long long)c->id, uv_strerror((int)nread));
    conn_close(c);
    return;
  }
  c->len += (size_t)nread;
  c->last_active_ms = uv_now(c->srv->loop);
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

void conn_accept(gkcd_server *srv) {
  gkcd_conn *c = calloc(1, sizeof *c);
  if (!c) {
    log_err("out of memory accepting a connection");
    return;
  }
  int rc = uv_pipe_init(srv->loop, &c->pipe, 0);
  if (rc) {
    log_err("uv_pipe_init: %s", uv_strerror(rc));
    free(c);
    return;
  }
  c->pipe.data = c;
  c->srv = srv;
  c->refs = 1;
  c->id = ++srv->next_conn_id;
  c->last_active_ms = uv_now(srv->loop);
  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;
  if ((rc = uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->pipe))) {
    log_warn("accept: %s", uv_strerror(rc));
    conn_close(c);
    return;
  }
  uv_os_fd_t fd;
  struct ucred cr = {0, (uid_t)-1, (gid_t)-1};
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 || !peer_allowed(srv, fd, &cr)) {
    srv->refused++;
    log_warn("refused connection from pid %d uid %d gid %d: not an allowed user or group"
             " (allow-users, allow-groups)", (int)cr.pid, (int)cr.uid, (int)cr.gid);
    conn_close(c);
    return;
  }
  c->pid = (int)cr.pid;
  c->uid = (int)cr.uid;
  if (srv->nconns > srv->cfg.max_connections) {
    srv->refused++;
    log_warn("refused connection from pid %d uid %d: %llu connections open (max-connections)",
             c->pid, c->uid, (unsigned long long)srv->nconns - 1);
    conn_close(c);
    return;
  }
  log_debug("connection %llu opened by pid %d uid %d", (unsigned long long)c->id, c->pid, c->uid);
  conn_update_reading(c);
}

void conn_sweep_idle(gkcd_server *srv) {
  if (srv->cfg.idle_timeout_s <= 0) return;
  uint64_t now = uv_now(srv->loop), limit = (uint64_t)(srv->cfg.idle_timeout_s * 1000);
  for (gkcd_conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing || c->jobs || c->writes || c->npend) continue;
    if (now - c->last_active_ms >= limit) {
      log_info("connection %llu (pid %d): idle for %.0f s, closing", (unsigned long long)c->id,
               c->pid, srv->cfg.idle_timeout_s);
      conn_close(c);
    }
  }
}
