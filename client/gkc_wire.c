/* gkc_wire.c: the one core under the blocking and the async client
 * (see gkc_internal.h): the output queue, reading and framing replies,
 * matching them to pending requests by msgid, and gkcd's notifications.
 *
 * The output queue is a list of segments: small pieces are packed into one
 * buffer per connection, arrays of REF_MIN bytes or more are referenced in
 * the caller's memory (as msgpack's vrefbuffer would, but shared by every
 * queued request, so that 10,000 queued requests cost their bytes, not a
 * chunk each).  A write gathers as many segments as sendmsg takes.
 *
 * Received bytes are framed with proto_frame_scan before msgpack_unpack
 * sees them (never trust a declared length), one frame at a time.  A big
 * array result (DIRECT_MIN bytes or more) that a pending request takes into
 * the caller's memory is received there directly once its bin header is
 * in: the bin is left empty in the buffered reply and the request marked
 * delivered, which saves copying it through the receive buffer.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gkc_internal.h"
#include "proto_errors.h"
#include "proto_rpc.h"
#include "proto_socket.h"

/* Arrays at least this big are sent from the caller's memory, not copied. */
#define REF_MIN 4096
#define READ_CHUNK (256 * 1024)
/* An async read stops after this much, to let the loop serve others. */
#define READ_BUDGET (4u << 20)
#define TAB_MIN 64
#define DIRECT_MIN ((size_t)1 << 20)

uint64_t gkc__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int gkc__fail(gkc_conn *c, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  return err;
}

void gkc__conn_init(gkc_conn *c) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  c->next_msgid = 1;
}

int gkc__conn_connect(gkc_conn *c, const char *socket_path) {
  char path[108];
  if (proto_socket_path(path, sizeof path, socket_path) != 0)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "socket path is too long for a Unix socket");
  if (c->socket_path != path) snprintf(c->socket_path, sizeof c->socket_path, "%s", path);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return gkc__fail(c, GKC_ECONNECT, "socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, path, strlen(path) + 1);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    snprintf(c->dead_msg, sizeof c->dead_msg, "not connected");
    return gkc__fail(c, GKC_ECONNECT, "cannot connect to gkcd at %s: %s", path, strerror(e));
  }
  return 0;
}

void gkc__req_init(gkc__req *r) {
  memset(r, 0, sizeof *r);
  r->fd = -1;
}

void gkc__result_init(gkc_result *res) {
  memset(res, 0, sizeof *res);
  res->errmsg = "";
  res->info.kernel_us = res->info.server_us = res->info.queue_us = NAN;
  res->info.worker_us = res->info.h2d_us = res->info.d2h_us = NAN;
  res->value = NAN;
  res->n = -1;
}

/* --- the pending table ---------------------------------------------------------- */

static size_t slot(const gkc_conn *c, uint32_t msgid) {
  return (size_t)(msgid * 2654435761u) & (c->tabsize - 1);
}

static int tab_grow(gkc_conn *c) {
  size_t n = c->tabsize ? c->tabsize * 2 : TAB_MIN;
  gkc__req **t = calloc(n, sizeof *t);
  if (!t) return -1;
  size_t old = c->tabsize;
  gkc__req **ot = c->tab;
  c->tab = t;
  c->tabsize = n;
  for (size_t i = 0; i < old; i++)
    for (gkc__req *r = ot[i], *next; r; r = next) {
      next = r->next;
      size_t s = slot(c, r->msgid);
      r->next = t[s];
      t[s] = r;
    }
  free(ot);
  return 0;
}

static gkc__req *tab_find(const gkc_conn *c, uint32_t msgid) {
  if (!c->tabsize) return NULL;
  for (gkc__req *r = c->tab[slot(c, msgid)]; r; r = r->next)
    if (r->msgid == msgid) return r;
  return NULL;
}

static gkc__req *tab_take(gkc_conn *c, uint32_t msgid) {
  if (!c->tabsize) return NULL;
  for (gkc__req **p = &c->tab[slot(c, msgid)]; *p; p = &(*p)->next)
    if ((*p)->msgid == msgid) {
      gkc__req *r = *p;
      *p = r->next;
      c->npending--;
      if (r->internal) c->internal_pending--;
      c->pending_bytes -= r->bytes;
      return r;
    }
  return NULL;
}

/* Ends r with status rc; its message is c->errmsg (a copy is handed on). */
static void finish(gkc_conn *c, gkc__req *r, gkc_result *res, int rc) {
  if (r->end) r->end(c, r, rc);
  r->end = NULL;
  res->status = rc;
  res->errmsg = rc ? c->errmsg : "";
  res->method = r->method;
  res->msgid = r->msgid;
  res->latency_us = (double)(gkc__now_ns() - r->t0_ns) / 1e3;
  r->next = NULL;
  r->done(c, r, res);
}

/* Fails every pending request with err and the message in c->errmsg.
 * Callbacks may submit (to a broken connection: refused) or cancel. */
static void fail_all(gkc_conn *c, int err) {
  gkc__req *list = NULL;
  for (size_t i = 0; i < c->tabsize; i++) {
    while (c->tab[i]) {
      gkc__req *r = c->tab[i];
      c->tab[i] = r->next;
      r->next = list;
      list = r;
    }
  }
  c->npending = 0;
  c->internal_pending = 0;
  c->pending_bytes = 0;
  /* Oldest first: the list is built backwards per bucket, so sort by msgid. */
  char msg[sizeof c->errmsg];
  snprintf(msg, sizeof msg, "%s", c->errmsg);
  while (list) {
    gkc__req **pmin = &list;
    for (gkc__req **p = &list; *p; p = &(*p)->next)
      if ((int32_t)((*p)->msgid - (*pmin)->msgid) < 0) pmin = p;
    gkc__req *r = *pmin;
    *pmin = r->next;
    gkc_result local, *res = r->res; /* blocking: the caller's */
    if (!res) gkc__result_init(res = &local);
    if (c->cancelling) {
      err = GKC_ECANCELLED;
      snprintf(msg, sizeof msg, "cancelled: the connection was closed before the reply arrived");
    }
    snprintf(c->errmsg, sizeof c->errmsg, "%s", msg);
    finish(c, r, res, err);
  }
}

static void close_fd(gkc_conn *c) {
  if (c->fd < 0) return;
  if (c->before_close) c->before_close(c);
  close(c->fd);
  c->fd = -1;
  gkc__ring_end(c);
  c->seg_head = c->nseg = 0;
  c->olen = 0;
  c->direct_left = 0;
}

int gkc__break(gkc_conn *c, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  snprintf(c->dead_msg, sizeof c->dead_msg, "%s", c->errmsg);
  close_fd(c);
  fail_all(c, err);
  /* The failed requests' callbacks may have written errmsg; say it again. */
  snprintf(c->errmsg, sizeof c->errmsg, "%s", c->dead_msg);
  return err;
}

void gkc__cancel(gkc_conn *c) {
  c->cancelling = 1;
  snprintf(c->dead_msg, sizeof c->dead_msg, "the connection was closed");
  close_fd(c);
  fail_all(c, GKC_ECANCELLED);
}

void gkc__conn_destroy(gkc_conn *c) {
  if (c->fd >= 0 || c->npending) gkc__cancel(c);
  free(c->obuf);
  free(c->segs);
  free(c->ibuf);
  free(c->tab);
  c->obuf = c->ibuf = NULL;
  c->segs = NULL;
  c->tab = NULL;
  c->tabsize = 0;
}

/* --- the output queue ------------------------------------------------------------ */

static gkc__seg *seg_push(gkc_conn *c) {
  if (c->nseg == c->segcap) {
    if (c->seg_head > 0) { /* reuse the consumed front */
      memmove(c->segs, c->segs + c->seg_head, (c->nseg - c->seg_head) * sizeof *c->segs);
      c->nseg -= c->seg_head;
      c->seg_head = 0;
    }
    if (c->nseg == c->segcap) {
      size_t n = c->segcap ? c->segcap * 2 : 64;
      gkc__seg *s = realloc(c->segs, n * sizeof *s);
      if (!s) return NULL;
      c->segs = s;
      c->segcap = n;
    }
  }
  gkc__seg *s = &c->segs[c->nseg++];
  memset(s, 0, sizeof *s);
  s->fd = -1;
  return s;
}

/* The packer's writer.  Small pieces extend the last segment when it is
 * this request's own buffer segment; arrays are referenced. */
static int queue_write(void *data, const char *buf, size_t len) {
  gkc_conn *c = data;
  if (c->pack_oom) return -1;
  if (len >= REF_MIN) {
    gkc__seg *s = seg_push(c);
    if (!s) goto oom;
    s->ref = (const unsigned char *)buf;
    s->len = len;
    return 0;
  }
  if (c->ocap - c->olen < len) {
    size_t n = c->ocap ? c->ocap * 2 : 16384;
    while (n - c->olen < len) n *= 2;
    unsigned char *b = realloc(c->obuf, n);
    if (!b) goto oom;
    c->obuf = b;
    c->ocap = n;
  }
  gkc__seg *last = c->nseg > c->seg_head ? &c->segs[c->nseg - 1] : NULL;
  if (!last || last->ref || last->off + last->len != c->olen || last->fd >= 0) {
    if (!(last = seg_push(c))) goto oom;
    last->off = c->olen;
  }
  memcpy(c->obuf + c->olen, buf, len);
  c->olen += len;
  last->len += len;
  return 0;
oom:
  c->pack_oom = 1;
  return -1;
}

static int submit(gkc_conn *c, gkc__req *r, size_t max_requests, uint64_t max_bytes);

int gkc__submit(gkc_conn *c, gkc__req *r, size_t max_requests, uint64_t max_bytes) {
  int rc = submit(c, r, max_requests, max_bytes);
  if (rc && r->end) { /* never sent: what it holds goes back now */
    r->end(c, r, rc);
    r->end = NULL;
  }
  return rc;
}

static int submit(gkc_conn *c, gkc__req *r, size_t max_requests, uint64_t max_bytes) {
  if (c->fd < 0)
    return gkc__fail(c, GKC_EIO, "connection is closed after an earlier error (%.400s)", c->dead_msg);
  if (c->write_cut)
    return gkc__fail(c, GKC_EIO, "gkcd is closing the connection: it stopped reading");
  /* The library's own requests (the arena's) are not the caller's to bound. */
  size_t callers = c->npending - c->internal_pending;
  if (max_requests && callers >= max_requests)
    return gkc__fail(c, GKC_EBUSY, "%zu requests are pending, the context's bound: retry after "
                     "a reply", callers);
  if (c->npending + 1 > c->tabsize && tab_grow(c) != 0)
    return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  if (c->nseg == c->seg_head) { /* empty: start over at the buffer's front */
    c->olen = 0;
    c->nseg = c->seg_head = 0;
  }
  /* Where the queue stood, to take this request back out of it.  obuf
   * offsets never move, but segment indices do: seg_push compacts (shifts
   * everything down by seg_head) whenever it reaches segcap, here or while
   * packing below.  A segment's distance from seg_head survives that, so
   * the request's first segment is found from it afterwards. */
  size_t olen0 = c->olen;
  /* A fresh segment for this request: it carries the descriptor, if any,
   * and rolling back never has to shorten an older one. */
  gkc__seg *first = seg_push(c);
  if (!first) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  size_t dist0 = c->nseg - 1 - c->seg_head;
  first->off = c->olen;
  first->fd = r->fd;
  r->msgid = c->next_msgid++;
  c->pack_oom = 0;
  c->pack_stale = 0; /* gkc__pack_id sets it (gkc_reconnect.c) */
  msgpack_packer pk;
  msgpack_packer_init(&pk, c, queue_write);
  proto_pack_request_head(&pk, r->msgid, r->method);
  r->pack(&pk, r);
  size_t nseg0 = c->seg_head + dist0; /* this request's first segment, now */
  uint64_t bytes = 0;
  for (size_t i = nseg0; i < c->nseg; i++) bytes += c->segs[i].len;
  int rc = 0;
  if (c->pack_oom)
    rc = gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory queueing a %s request", r->method);
  else if (c->pack_stale)
    rc = gkc__fail(c, GKC_ESTALE_HANDLE, "%s: %s", r->method, c->stale_msg);
  else if (max_bytes && callers > 0 && c->pending_bytes + bytes > max_bytes)
    rc = gkc__fail(c, GKC_EBUSY, "%llu bytes are pending and this %s request has %llu, over "
                   "the context's bound of %llu: retry after a reply",
                   (unsigned long long)c->pending_bytes, r->method, (unsigned long long)bytes,
                   (unsigned long long)max_bytes);
  if (rc) {
    c->nseg = nseg0;
    c->olen = olen0;
    return rc;
  }
  r->bytes = bytes;
  r->t0_ns = gkc__now_ns();
  size_t s = slot(c, r->msgid);
  r->next = c->tab[s];
  c->tab[s] = r;
  c->npending++;
  if (r->internal) c->internal_pending++;
  c->pending_bytes += bytes;
  return 0;
}

int gkc__want_write(const gkc_conn *c) { return c->fd >= 0 && c->nseg > c->seg_head; }

int gkc__flush(gkc_conn *c) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } cm;
  struct iovec iov[64];
  while (c->fd >= 0 && c->nseg > c->seg_head) {
    /* Gather segments; one carrying a descriptor starts its own sendmsg,
     * so the descriptor travels with that request's first byte. */
    size_t n = 0;
    for (size_t i = c->seg_head; i < c->nseg && n < 64; i++) {
      gkc__seg *s = &c->segs[i];
      if (n > 0 && s->fd >= 0) break;
      iov[n].iov_base = (void *)(s->ref ? s->ref : c->obuf + s->off);
      iov[n].iov_len = s->len;
      n++;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    int pass = c->segs[c->seg_head].fd;
    ssize_t w;
    if (c->ring) { /* the descriptor on the socket, the bytes into the sq */
      w = pass >= 0 ? gkc__ring_pass_fd(c, pass) : 0;
      if (w == 0) {
        c->segs[c->seg_head].fd = -1;
        w = gkc__ring_send(c, iov, n);
      }
    } else {
      if (pass >= 0) {
        memset(&cm, 0, sizeof cm);
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof cm.buf;
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &pass, sizeof(int));
      }
      w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | (c->nonblock ? MSG_DONTWAIT : 0));
    }
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      /* gkcd closes a connection after refusing a request it cannot skip
       * (too large), often while we are still sending, or after its
       * notification: what it said is waiting to be read, and says more
       * than EPIPE.  Stop sending; reading will end the requests. */
      if (errno == EPIPE || errno == ECONNRESET) {
        c->write_cut = 1;
        c->seg_head = c->nseg = 0;
        c->olen = 0;
        shutdown(c->fd, SHUT_WR);
        return 0;
      }
      return gkc__break(c, GKC_EIO, "sending to gkcd: %s", strerror(errno));
    }
    if (w > 0) c->segs[c->seg_head].fd = -1; /* attached to the bytes just sent */
    size_t left = (size_t)w;
    while (left > 0 && c->seg_head < c->nseg) {
      gkc__seg *s = &c->segs[c->seg_head];
      size_t k = left < s->len ? left : s->len;
      if (s->ref) s->ref += k;
      else s->off += k;
      s->len -= k;
      left -= k;
      if (s->len == 0) c->seg_head++;
    }
    if (c->seg_head == c->nseg) c->seg_head = c->nseg = c->olen = 0;
  }
  return 0;
}

/* --- replies and notifications ----------------------------------------------------- */

/* [2, "error", [{"code": str, "message": str}]]: gkcd says why it is about
 * to close the connection.  Returns its code (negative) when root is such
 * a notification (and broke the connection), 0 for any other (skipped). */
static int notification(gkc_conn *c, const msgpack_object *root) {
  const msgpack_object *a = root->via.array.ptr;
  uint32_t n = root->via.array.size;
  if (n != 3 || a[1].type != MSGPACK_OBJECT_STR || a[1].via.str.size != 5 ||
      memcmp(a[1].via.str.ptr, "error", 5) != 0 || a[2].type != MSGPACK_OBJECT_ARRAY ||
      a[2].via.array.size < 1 || a[2].via.array.ptr[0].type != MSGPACK_OBJECT_MAP)
    return 0;
  const msgpack_object *m = &a[2].via.array.ptr[0];
  const msgpack_object *code = proto_map_get(m, "code"), *msg = proto_map_get(m, "message");
  int err = GKC_EIO;
  char name[64] = "";
  if (code && code->type == MSGPACK_OBJECT_STR) {
    err = proto_err_from_wire(code->via.str.ptr, code->via.str.size);
    proto_echo(name, sizeof name, code->via.str.ptr, code->via.str.size, 40);
  }
  char text[200] = "";
  if (msg && msg->type == MSGPACK_OBJECT_STR)
    proto_echo(text, sizeof text, msg->via.str.ptr, msg->via.str.size, 180);
  if (err == GKC_EUNKNOWN_CODE)
    return gkc__break(c, err, "gkcd closed the connection: %s (code \"%s\")", text, name);
  return gkc__break(c, err, "gkcd closed the connection: %s", text[0] ? text : proto_err_text(err));
}

/* Handles one whole frame; 0, or an error after breaking the connection. */
static int dispatch(gkc_conn *c, const unsigned char *frame, size_t len) {
  msgpack_zone zone;
  if (!msgpack_zone_init(&zone, 4096))
    return gkc__break(c, GKC_EOUT_OF_MEMORY, "out of memory reading a reply");
  msgpack_object root;
  size_t off = 0;
  proto_response resp;
  int rc = 0;
  if (msgpack_unpack((const char *)frame, len, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS) {
    rc = gkc__break(c, GKC_EPROTOCOL, "malformed reply from gkcd");
    goto out;
  }
  if (root.type == MSGPACK_OBJECT_ARRAY && root.via.array.size >= 1 &&
      root.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
      root.via.array.ptr[0].via.u64 == 2) {
    rc = notification(c, &root);
    goto out;
  }
  if (proto_response_parse(&root, &resp) != 0) {
    rc = gkc__break(c, GKC_EPROTOCOL, "malformed reply from gkcd");
    goto out;
  }
  gkc__req *r;
  if (resp.error && resp.msgid == UINT32_MAX && c->npending == 1) {
    /* gkcd could not read the msgid; with one request pending, it is its. */
    r = NULL;
    for (size_t i = 0; i < c->tabsize && !r; i++)
      if (c->tab[i]) r = tab_take(c, c->tab[i]->msgid);
  } else {
    r = tab_take(c, resp.msgid);
  }
  if (!r) {
    if (resp.error)
      rc = gkc__break(c, resp.error, "%.*s", (int)resp.message_len,
                      resp.message ? resp.message : "");
    else
      rc = gkc__break(c, GKC_EPROTOCOL, "reply does not match a request (msgid %u)", resp.msgid);
    goto out;
  }
  /* Blocking: the caller's result, set up by it; async: one here, with
   * room for a status reply. */
  gkc_result local, *res = r->res;
  gkc_status_info st;
  if (!res) {
    res = &local;
    gkc__result_init(res);
    res->status_info = &st;
  }
  res->out = r->out;
  int st_rc;
  if (resp.error)
    st_rc = gkc__fail(c, resp.error, "%.*s", (int)resp.message_len,
                      resp.message ? resp.message : "");
  else
    st_rc = r->take(c, resp.result, r, res);
  finish(c, r, res, st_rc);
out:
  msgpack_zone_destroy(&zone);
  return rc;
}

/* The partial frame at ibuf[ipos..ilen) is inside a big bin (info): when it
 * is the array result "key" of a pending request whose caller's memory is
 * exactly its size, what has come of it moves there, the rest will be
 * received there (direct_dst), and the bin header in ibuf becomes that of
 * an empty bin.  The key is the fixstr right before the bin header: in a
 * reply, only a map key is followed by a bin. */
static void try_direct(gkc_conn *c, const proto_frame_info *info) {
  if (!info->msgid_known || info->bin_len < DIRECT_MIN) return;
  gkc__req *r = tab_find(c, info->msgid);
  if (!r || !r->direct_key || !r->out || r->out->kind != GKC_OUT_MEM || r->out_staged || r->delivered ||
      !r->out->data || r->out->bytes != info->bin_len)
    return;
  size_t klen = strlen(r->direct_key);
  size_t at = c->ipos + info->bin_at; /* the payload */
  if (info->bin_at < 5 + 1 + klen || c->ibuf[at - 5] != 0xc6) return; /* bin 32 */
  const unsigned char *k = c->ibuf + at - 5 - klen;
  if (k[-1] != (0xa0 | klen) || memcmp(k, r->direct_key, klen) != 0) return;
  size_t have = c->ilen - at;
  memcpy(r->out->data, c->ibuf + at, have);
  memset(c->ibuf + at - 4, 0, 4); /* bin 32 of length 0 */
  c->ilen = at;
  c->direct_dst = (unsigned char *)r->out->data + have;
  c->direct_left = info->bin_len - have;
  r->delivered = info->bin_len;
}

/* Reads until a frame is whole (blocking) or the socket is drained (async). */
int gkc__read(gkc_conn *c) {
  /* Depth 32: as deep as msgpack-c's unpacker goes. */
  static const proto_limits lim = {((size_t)1 << 40), 1u << 20, 32};
  size_t budget = READ_BUDGET;
  for (;;) {
    if (c->direct_left) {
      /* A big result, straight into the caller's memory: its reply may not
       * be dispatched before all of it is in. */
      if (c->nonblock && budget == 0) return 0;
      ssize_t n = c->ring ? gkc__ring_recv(c, c->direct_dst, c->direct_left)
                          : recv(c->fd, c->direct_dst, c->direct_left, c->nonblock ? MSG_DONTWAIT : 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
      if (n == 0 || (n < 0 && errno == ECONNRESET))
        return gkc__break(c, GKC_EIO, "gkcd closed the connection (%zu requests pending)", c->npending);
      if (n < 0) return gkc__break(c, GKC_EIO, "reading from gkcd: %s", strerror(errno));
      c->direct_dst += n;
      c->direct_left -= (size_t)n;
      budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
      continue; /* then the rest of the reply, as usual */
    }
    /* Dispatch every whole frame first: a callback may close the context,
     * and then nothing more may be read. */
    proto_frame_info info = {0};
    info.need = c->ilen - c->ipos + 1;
    int progress = 0;
    while (c->fd >= 0 && c->ilen > c->ipos) {
      ssize_t r = proto_frame_scan(c->ibuf + c->ipos, c->ilen - c->ipos, &lim, &info);
      if (r < 0) return gkc__break(c, GKC_EPROTOCOL, "gkcd sent bytes that are not msgpack");
      if (r == 0) break;
      size_t at = c->ipos;
      c->ipos += (size_t)r;
      int rc = dispatch(c, c->ibuf + at, (size_t)r);
      if (rc < 0) return rc;
      progress = 1;
    }
    if (c->fd < 0) return c->cancelling ? GKC_ECANCELLED : GKC_EIO;
    if (c->ilen > c->ipos && info.bin_len) try_direct(c, &info);
    if (c->ipos == c->ilen) c->ipos = c->ilen = 0;
    if (!c->nonblock && progress) return 0; /* blocking: the caller checks its request */
    if (c->direct_left) continue;
    if (c->nonblock && budget == 0) return 0;
    /* Room for at least READ_CHUNK more, or the whole announced frame. */
    size_t have = c->ilen - c->ipos;
    if (c->ipos > 0 && (c->icap - c->ilen < READ_CHUNK || info.need > c->icap - c->ipos)) {
      memmove(c->ibuf, c->ibuf + c->ipos, have);
      c->ipos = 0;
      c->ilen = have;
    }
    if (c->icap - c->ilen < READ_CHUNK || info.need > c->icap) {
      /* We trust our daemon's declared reply size enough to size the buffer
       * from it: one allocation instead of repeated doubling for big results. */
      size_t ncap = c->icap * 2 > c->ilen + READ_CHUNK ? c->icap * 2 : c->ilen + READ_CHUNK;
      if (info.need > ncap) ncap = info.need;
      unsigned char *nb = realloc(c->ibuf, ncap);
      if (!nb) return gkc__break(c, GKC_EOUT_OF_MEMORY, "out of memory reading the reply");
      c->ibuf = nb;
      c->icap = ncap;
    }
    ssize_t n = c->ring ? gkc__ring_recv(c, c->ibuf + c->ilen, c->icap - c->ilen)
                        : recv(c->fd, c->ibuf + c->ilen, c->icap - c->ilen, c->nonblock ? MSG_DONTWAIT : 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    /* ECONNRESET: gkcd closed with bytes of ours unread; what it sent
     * before has been read, so this is its hanging up. */
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      size_t k = c->npending;
      if (c->write_cut)
        return gkc__break(c, GKC_EIO, "gkcd closed the connection while we were sending");
      return gkc__break(c, GKC_EIO, "gkcd closed the connection (%zu request%s pending)", k,
                        k == 1 ? "" : "s");
    }
    if (n < 0) return gkc__break(c, GKC_EIO, "reading from gkcd: %s", strerror(errno));
    c->ilen += (size_t)n;
    budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
  }
}

/* --- the blocking call -------------------------------------------------------------- */

static void blocking_done(gkc_conn *c, gkc__req *r, gkc_result *res) {
  (void)c;
  (void)res;
  r->finished = 1;
}

static int run_once(gkc_conn *c, gkc__req *r, gkc_result *res);

int gkc__run(gkc_conn *c, gkc__req *r, gkc_result *res) {
  gkc_result fresh = *res; /* as the caller set it up, for a second sending */
  /* A ring, once per connection, before its first call (never fails it). */
  if (c->ring_start && c->ring_mode == GKC__RING_TRY && !c->ring && c->fd >= 0 && !c->npending) {
    int rc = c->ring_start(c);
    if (rc && c->fd < 0) { /* gkcd went away (or said why it closes) instead: the call's fate */
      res->status = rc;
      res->errmsg = c->errmsg;
      return rc;
    }
  }
  int rc = run_once(c, r, res);
  /* Failed in flight: the reconnect policy (a hook) may send it once more. */
  if (rc && c->replay && c->replay(c, r, rc)) {
    *res = fresh;
    r->finished = 0;
    rc = run_once(c, r, res);
  }
  return rc;
}

static int run_once(gkc_conn *c, gkc__req *r, gkc_result *res) {
  r->res = res;
  r->done = blocking_done;
  c->errmsg[0] = 0;
  int rc = gkc__submit(c, r, 0, 0);
  if (rc) {
    res->status = rc;
    res->errmsg = c->errmsg;
    return rc;
  }
  if (gkc__flush(c) == 0)
    while (!r->finished && gkc__read(c) == 0) {
    }
  /* Every path above ends r: by its reply, or by breaking the connection. */
  if (c->write_cut && c->fd >= 0) {
    /* gkcd stopped reading mid-request: whatever it said, the stream is over. */
    if (res->status == 0)
      res->status = gkc__fail(c, GKC_EIO, "gkcd closed the connection while we were sending");
    snprintf(c->dead_msg, sizeof c->dead_msg, "%s", c->errmsg);
    close_fd(c);
  }
  return res->status;
}
