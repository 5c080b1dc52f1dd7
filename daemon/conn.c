/* conn.c: one client connection: bytes in, frames out, replies back.
 *
 * Input accumulates in one growing buffer.  After every read the buffer is
 * scanned for complete frames (proto_frame_scan), each of which is handed to
 * rpc.c as its own allocation, so the buffer can keep receiving while jobs
 * still use earlier requests.  The buffer grows only with bytes actually
 * received, never with what a frame claims it will send.
 *
 * Lifetime: refs counts the open handle and each job in flight; the memory
 * goes when both the close callback has run and the last job has come back.
 */
#include <stdlib.h>
#include <string.h>

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
  void *head, *body;
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
  free(c->buf);
  free(c);
}

void conn_close(gkcd_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->pipe, on_closed);
}

/* Closes c if it has nothing left to do: used after framing errors and
 * while the daemon drains for shutdown. */
static void close_if_done(gkcd_conn *c) {
  if (c->closing || c->writes > 0) return;
  if (c->close_when_flushed || (c->srv->draining && c->jobs == 0)) conn_close(c);
}

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  gkcd_conn *c = w->conn;
  free(w->head);
  free(w->body);
  free(w);
  c->writes--;
  if (status < 0 && status != UV_ECANCELED) {
    log_debug("connection %llu: write failed: %s", (unsigned long long)c->id,
              uv_strerror(status));
    conn_close(c);
  }
  close_if_done(c);
  conn_unref(c);
}

void conn_send(gkcd_conn *c, void *head, size_t head_len, void *body, size_t body_len) {
  if (c->closing) goto drop;
  write_req *w = malloc(sizeof *w);
  if (!w) goto drop;
  w->conn = c;
  w->head = head;
  w->body = body;
  uv_buf_t bufs[2] = {uv_buf_init(head, (unsigned)head_len),
                      uv_buf_init(body, (unsigned)body_len)};
  int rc = uv_write(&w->req, (uv_stream_t *)&c->pipe, bufs, body_len ? 2 : 1, on_written);
  if (rc) {
    log_warn("connection %llu: uv_write: %s", (unsigned long long)c->id, uv_strerror(rc));
    free(w);
    conn_close(c);
    goto drop;
  }
  c->writes++;
  c->refs++; /* a write in flight keeps the memory its callback touches */
  return;
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

static void stop_reading(gkcd_conn *c) {
  if (c->reading) uv_read_stop((uv_stream_t *)&c->pipe);
  c->reading = 0;
}

/* Hands every complete frame in the buffer to rpc.c. */
static void parse_frames(gkcd_conn *c) {
  gkcd_server *srv = c->srv;
  size_t pos = 0;
  while (pos < c->len && !c->closing && !c->close_when_flushed) {
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
      stop_reading(c);
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
      conn_close(c);
      return;
    } else {
      memcpy(frame, c->buf + pos, (size_t)r);
    }
    pos += (size_t)r;
    rpc_handle_frame(c, frame, (size_t)r);
    if (!c->buf) break;
  }
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

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  gkcd_conn *c = s->data;
  (void)buf;
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
  parse_frames(c);
  if (!c->closing) close_if_done(c);
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
  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;
  if ((rc = uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->pipe)) ||
      (rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read))) {
    log_warn("accept: %s", uv_strerror(rc));
    conn_close(c);
    return;
  }
  c->reading = 1;
  log_debug("connection %llu opened", (unsigned long long)c->id);
}
